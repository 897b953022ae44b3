//! How the CLI writes a namespace — `log append|batch|create|rm` — whether
//! or not a runtime serves it.
//!
//! A runtime (`varve run`) is the only writer of its namespace, so a write
//! goes through its socket (`DIR/<namespace>/runtime.sock`) when it answers,
//! and opens the journal directly otherwise. In between the two the
//! namespace is locked: by a runtime that does not listen yet (it is
//! starting) or any longer (it is stopping) — `varve run` names itself in
//! [`RUNTIME_PID_FILE`] before it takes the lock, and the write waits for it
//! up to [`LOCKED_WAIT_MAX`] — or by another writer, which is waited for
//! [`WRITER_WAIT_MAX`] (a CLI write holds the lock for a moment) and then
//! reported.
//!
//! An append carries a request id (random, or `--request-id`), the same on
//! every attempt. When the connection breaks before the answer, the append
//! may or may not have landed; it is sent again under the same id, so the
//! runtime (or the direct path, which honours the ids the same way) answers
//! a repeat with the first append's seqs instead of appending twice. After
//! [`ATTEMPTS_MAX`] broken attempts the error says the outcome is unknown
//! and how to settle it.
//!
//! Inside an external handler (`VARVE_EVENT_ID` and `VARVE_TRACE_ID` set),
//! appends carry the handler's FIRING as their cause, in its own namespace
//! or any other: through that namespace's socket, or its direct path with
//! a writer-only runtime, which records the cause in its `_events`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use varve_log::{LogConfig, LogError, Namespace, OnFull, Retention, Seq};
use varve_remote::RemoteNamespace;
use varve_runtime::command::{ENV_EVENT_ID, ENV_NAMESPACE, ENV_RUNTIME_SOCKET, ENV_TRACE_ID};
use varve_runtime::event::{parse_trace, TraceId};
use varve_runtime::socket::{self, CallError, Entry, Request, Response};
use varve_runtime::{Appended, EventId, NamespaceWriter, RequestId};

use super::{namespace_dir, Context};

pub use varve_runtime::socket::SOCKET_FILE;
/// How long a write waits while the namespace is locked and no runtime
/// answers on its socket: a runtime starting (it opens the journal and
/// recovers its triggers before it listens) or stopping, or another
/// short-lived writer. A writer that holds the lock longer is reported.
pub const LOCKED_WAIT_MAX: Duration = Duration::from_secs(30);
/// How long a write waits while the namespace is locked by a writer that is
/// not a runtime (no live [`RUNTIME_PID_FILE`]): another CLI write holds the
/// lock for milliseconds; a program that keeps it is reported.
pub const WRITER_WAIT_MAX: Duration = Duration::from_secs(2);
/// The file in a namespace's directory naming the process id of the `varve
/// run` that serves it or is starting to: written before it takes the lock,
/// removed when it exits (left behind by a kill, then its process is gone).
pub const RUNTIME_PID_FILE: &str = "runtime.pid";
/// Pause between two looks at a locked namespace.
const LOCKED_POLL: Duration = Duration::from_millis(20);
/// Most attempts of one write whose connection broke before the answer (or
/// that a stopping runtime turned away).
pub const ATTEMPTS_MAX: u32 = 8;
/// The pause after the first broken attempt; it doubles per attempt …
const RETRY_PAUSE_FIRST: Duration = Duration::from_millis(50);
/// … up to this.
const RETRY_PAUSE_MAX: Duration = Duration::from_secs(2);

/// The cause an append carries: the FIRING of the external handler this
/// process runs in (`VARVE_EVENT_ID`, `VARVE_TRACE_ID`), in any namespace.
#[derive(Clone, Debug)]
pub struct Cause {
    pub event: String,
    pub trace: String,
}

impl Cause {
    /// The cause from the environment, if this process runs as a handler.
    pub fn from_env() -> Option<Cause> {
        let event = std::env::var(ENV_EVENT_ID).ok()?;
        let trace = std::env::var(ENV_TRACE_ID).ok()?;
        Some(Cause { event, trace })
    }

    fn parsed(&self) -> anyhow::Result<(EventId, TraceId)> {
        Ok((EventId::parse(&self.event)?, parse_trace(&self.trace)?))
    }
}

/// The socket of the runtime that serves `ctx`'s namespace (if any does):
/// the handler's own `VARVE_RUNTIME_SOCKET` in its own namespace, else the
/// namespace's socket file.
pub fn socket_path(ctx: &Context<'_>) -> PathBuf {
    if let Some(path) = std::env::var_os(ENV_RUNTIME_SOCKET) {
        if std::env::var(ENV_NAMESPACE).is_ok_and(|ns| ns == ctx.namespace) {
            return PathBuf::from(path);
        }
    }
    namespace_dir(&ctx.data, &ctx.namespace).join(SOCKET_FILE)
}

/// What one attempt of a write came to, short of success.
#[derive(Debug)]
enum Failure {
    /// The namespace is locked and no runtime answered its socket;
    /// `runtime` if a live `varve run` names itself the namespace's runtime.
    Locked { error: LogError, runtime: bool },
    /// The connection broke before the answer: the write may have happened.
    Broken(String),
    /// A stopping runtime turned it away, writing nothing.
    Stopping(String),
    /// A definite error: nothing to retry.
    Final(anyhow::Error),
}

/// What to do after a failed attempt: a pure function of the failure, the
/// broken attempts so far and how long the namespace has been locked.
#[derive(Debug, PartialEq, Eq)]
enum Next {
    /// Try again after this pause.
    Retry(Duration),
    /// Give up: the lock was held too long.
    GiveUpLocked,
    /// Give up after [`ATTEMPTS_MAX`] broken or turned-away attempts.
    GiveUpAttempts,
    /// Give up: the error is final.
    GiveUpFinal,
}

fn next_step(failure: &Failure, attempts: u32, locked_for: Duration) -> Next {
    match failure {
        Failure::Final(_) => Next::GiveUpFinal,
        Failure::Locked { runtime: true, .. } if locked_for >= LOCKED_WAIT_MAX => Next::GiveUpLocked,
        Failure::Locked { runtime: false, .. } if locked_for >= WRITER_WAIT_MAX => Next::GiveUpLocked,
        Failure::Locked { .. } => Next::Retry(LOCKED_POLL),
        Failure::Broken(_) | Failure::Stopping(_) if attempts >= ATTEMPTS_MAX => Next::GiveUpAttempts,
        Failure::Broken(_) | Failure::Stopping(_) => Next::Retry(retry_pause(attempts)),
    }
}

/// The pause after `attempts` broken attempts: doubling, capped.
fn retry_pause(attempts: u32) -> Duration {
    let factor = 1u32.checked_shl(attempts.saturating_sub(1)).unwrap_or(u32::MAX);
    RETRY_PAUSE_FIRST.saturating_mul(factor).min(RETRY_PAUSE_MAX)
}

/// One write, tried through the socket, then directly.
trait WriteOp {
    fn request(&self) -> Request;
    type Answer;
    fn answer(&self, response: Response) -> anyhow::Result<Self::Answer>;
    fn direct(&self, ctx: &Context<'_>, ns: varve_log::JournalNamespace) -> anyhow::Result<Self::Answer>;
    /// Through a `varve serve` (`--store varve://…`), which retries what is safe to.
    fn remote(&self, ns: &RemoteNamespace) -> anyhow::Result<Self::Answer>;
    /// Straight to a shared store (`--store nats://…`), whose backend
    /// retries what is safe to.
    fn shared(&self, ns: &Arc<dyn varve_log::Namespace>) -> anyhow::Result<Self::Answer>;
    /// The message when the outcome is unknown after [`ATTEMPTS_MAX`] attempts.
    fn unknown(&self, ctx: &Context<'_>, last: &str) -> String;
}

/// Run `write` until it succeeds or a [`next_step`] gives up.
fn run<W: WriteOp>(ctx: &Context<'_>, write: &W) -> anyhow::Result<W::Answer> {
    if let Some(remote) = &ctx.remote {
        return write.remote(&remote.remote_namespace(&ctx.namespace)?);
    }
    let socket = socket_path(ctx);
    let mut attempts = 0;
    let mut unknown = false;
    let mut locked_since: Option<Instant> = None;
    loop {
        let failure = match attempt(ctx, write, &socket) {
            Ok(answer) => return Ok(answer),
            Err(failure) => failure,
        };
        if matches!(failure, Failure::Broken(_) | Failure::Stopping(_)) {
            attempts += 1;
            unknown |= matches!(failure, Failure::Broken(_));
        }
        let locked_for = if let Failure::Locked { .. } = &failure {
            locked_since.get_or_insert_with(Instant::now).elapsed()
        } else {
            locked_since = None;
            Duration::ZERO
        };
        match (next_step(&failure, attempts, locked_for), failure) {
            (Next::Retry(pause), _) => std::thread::sleep(pause),
            (Next::GiveUpLocked, Failure::Locked { error, runtime: true }) => bail!(
                "{error}; its runtime did not answer on {} within {} s",
                socket.display(),
                LOCKED_WAIT_MAX.as_secs()
            ),
            (Next::GiveUpLocked, Failure::Locked { error, runtime: false }) => {
                bail!("{error}; waited {} s for it to be released", WRITER_WAIT_MAX.as_secs())
            }
            (Next::GiveUpAttempts, Failure::Broken(last) | Failure::Stopping(last)) if unknown => {
                bail!("{}", write.unknown(ctx, &last))
            }
            (Next::GiveUpAttempts, Failure::Broken(last) | Failure::Stopping(last)) => {
                bail!(
                    "the runtime of namespace {} is stopping and wrote nothing ({ATTEMPTS_MAX} attempts): {last}",
                    ctx.namespace
                )
            }
            (_, Failure::Final(error)) => return Err(error),
            (next, failure) => unreachable!("next_step gave {next:?} for {failure:?}"),
        }
    }
}

fn attempt<W: WriteOp>(ctx: &Context<'_>, write: &W, socket: &std::path::Path) -> Result<W::Answer, Failure> {
    match socket::call_checked(socket, &write.request()) {
        Ok(response) => return write.answer(response).map_err(Failure::Final),
        Err(CallError::NotServing(_)) => {}
        Err(CallError::Broken(reason)) => return Err(Failure::Broken(reason)),
        Err(CallError::Refused { error, retry: true }) => return Err(Failure::Stopping(error)),
        Err(CallError::Refused { error, retry: false }) => {
            return Err(Failure::Final(anyhow!("{error} (namespace {}, through its runtime)", ctx.namespace)))
        }
    }
    // On NATS, with no runtime of this namespace here: straight to the cluster.
    if let Some(nats) = &ctx.nats {
        let ns = varve_log::Store::namespace(nats, &ctx.namespace).map_err(|e| Failure::Final(e.into()))?;
        return write.shared(&ns).map_err(Failure::Final);
    }
    match ctx.open_write() {
        Ok(ns) => write.direct(ctx, ns).map_err(Failure::Final),
        Err(error @ LogError::Locked { .. }) => Err(Failure::Locked { error, runtime: runtime_pid(ctx).is_some() }),
        Err(error) => Err(Failure::Final(error.into())),
    }
}

/// An append of one or more records (`log append`, `log batch`).
pub struct Append<'a> {
    pub batch: &'a [(&'a str, &'a [u8])],
    pub request: RequestId,
    /// The user gave the id (`--request-id`): honour it even in a namespace
    /// no runtime has served.
    pub request_given: bool,
    pub cause: Option<Cause>,
}

impl WriteOp for Append<'_> {
    type Answer = Appended;

    fn request(&self) -> Request {
        Request::AppendBatch {
            entries: self
                .batch
                .iter()
                .map(|(log, data)| Entry { log: (*log).to_owned(), data: socket::encode_bytes(data) })
                .collect(),
            cause: self.cause.as_ref().map(|c| c.event.clone()),
            trace: self.cause.as_ref().map(|c| c.trace.clone()),
            request_id: Some(self.request.to_string()),
        }
    }

    fn answer(&self, response: Response) -> anyhow::Result<Appended> {
        let seqs = response.seqs.ok_or_else(|| anyhow!("the runtime answered without seqs"))?;
        Ok(Appended { seqs, repeated: response.repeated == Some(true) })
    }

    /// With the journal opened here (no runtime runs), through the
    /// namespace's writer ([`NamespaceWriter`]): a writer-only runtime in a
    /// namespace a runtime has served, or for an append with a cause, so the
    /// append gets its APPEND and TRIGGER events (and its cause) and the next
    /// `varve run` fires its handlers; straight to the journal otherwise.
    fn direct(&self, ctx: &Context<'_>, ns: varve_log::JournalNamespace) -> anyhow::Result<Appended> {
        let writer = NamespaceWriter::open(Arc::new(ns), &ctx.data)?;
        let cause = self.cause.as_ref().map(Cause::parsed).transpose()?;
        // A random id matters only where an earlier attempt may have landed:
        // through a runtime (this append may follow one that broke on its socket).
        let request = (self.request_given || cause.is_some() || writer.through_runtime()).then_some(&self.request);
        let answer = writer.append(self.batch, request, cause);
        writer.stop(Duration::ZERO);
        let answer = answer?;
        writer.namespace().sync()?;
        Ok(answer)
    }

    /// Sent under the request id, so the remote backend may resend it after a
    /// lost answer and it lands once.
    fn remote(&self, ns: &RemoteNamespace) -> anyhow::Result<Appended> {
        let cause = self.cause.as_ref().map(|c| (c.event.as_str(), c.trace.as_str()));
        let (seqs, repeated) = ns.append_batch_caused(self.batch, self.request.as_str(), cause)?;
        Ok(Appended { seqs, repeated })
    }

    /// A namespace with subscriptions (or an append with a cause) gets its
    /// APPEND and TRIGGER events from a writer-only runtime sharing the
    /// namespace, so the runtimes serving it (on any host) fire the handlers.
    fn shared(&self, ns: &Arc<dyn varve_log::Namespace>) -> anyhow::Result<Appended> {
        let cause = self.cause.as_ref().map(Cause::parsed).transpose()?;
        if cause.is_none() && ns.log_info(varve_runtime::SUBSCRIPTIONS_LOG).is_err() {
            return Ok(Appended { seqs: ns.append_batch(self.batch)?, repeated: false });
        }
        let runtime = varve_runtime::RuntimeBuilder::new(Arc::clone(ns))
            .host(rand::random::<u64>().max(1))
            .concurrency(0)
            .shared(varve_runtime::SHARED_LEASE_DEFAULT)
            .start()?;
        let writer = NamespaceWriter::with_runtime(runtime);
        let request = self.request_given.then_some(&self.request);
        let answer = writer.append(self.batch, request, cause);
        writer.stop(Duration::ZERO);
        Ok(answer?)
    }

    fn unknown(&self, ctx: &Context<'_>, last: &str) -> String {
        let logs: Vec<&str> = self.batch.iter().map(|(log, _)| *log).collect();
        let id = &self.request;
        format!(
            "the append to {} in namespace {} may or may not have landed: the connection to its runtime broke before the answer, {ATTEMPTS_MAX} times (last: {last}); it carried request id {id}: re-running it with `--request-id {id}` is safe (a repeat appends nothing and prints the seqs of the first), or check with `varve --ns {} log latest {}`",
            logs.join(", "),
            ctx.namespace,
            ctx.namespace,
            logs[0],
        )
    }
}

/// Append `batch` (see [`Append`]).
pub fn append(ctx: &Context<'_>, batch: &[(&str, &[u8])], request: Option<&str>) -> anyhow::Result<Appended> {
    let (request, request_given) = match request {
        Some(text) => (RequestId::parse(text)?, true),
        None => (RequestId::random(), false),
    };
    run(ctx, &Append { batch, request, request_given, cause: Cause::from_env() })
}

/// `log create`.
struct CreateLog<'a> {
    name: &'a str,
    config: LogConfig,
}

impl WriteOp for CreateLog<'_> {
    type Answer = bool;

    fn request(&self) -> Request {
        let (keep, on_full) = match self.config.retention {
            Retention::Unbounded => (None, None),
            Retention::Keep { k, on_full } => (
                Some(k),
                Some(match on_full {
                    OnFull::Refuse => "refuse".to_owned(),
                    OnFull::Overwrite => "overwrite".to_owned(),
                }),
            ),
        };
        Request::CreateLog { log: self.name.to_owned(), keep, on_full }
    }

    fn answer(&self, response: Response) -> anyhow::Result<bool> {
        response.created.ok_or_else(|| anyhow!("the runtime answered without saying whether the log is new"))
    }

    fn direct(&self, _ctx: &Context<'_>, ns: varve_log::JournalNamespace) -> anyhow::Result<bool> {
        let existed = ns.log_info(self.name).is_ok();
        ns.create_log(self.name, self.config)?;
        ns.close()?;
        Ok(!existed)
    }

    fn remote(&self, ns: &RemoteNamespace) -> anyhow::Result<bool> {
        self.on(ns)
    }

    fn shared(&self, ns: &Arc<dyn varve_log::Namespace>) -> anyhow::Result<bool> {
        self.on(ns.as_ref())
    }

    fn unknown(&self, ctx: &Context<'_>, last: &str) -> String {
        format!(
            "creating log {} in namespace {} may or may not have happened: the connection to its runtime broke before the answer (last: {last}); creating it again is safe",
            self.name, ctx.namespace
        )
    }
}

impl CreateLog<'_> {
    fn on(&self, ns: &dyn varve_log::Namespace) -> anyhow::Result<bool> {
        let existed = ns.log_info(self.name).is_ok();
        ns.create_log(self.name, self.config)?;
        Ok(!existed)
    }
}

/// Create a log; `true` if it is new.
pub fn create_log(ctx: &Context<'_>, name: &str, config: LogConfig) -> anyhow::Result<bool> {
    run(ctx, &CreateLog { name, config })
}

/// `log rm`.
struct DeleteLog<'a> {
    name: &'a str,
}

impl WriteOp for DeleteLog<'_> {
    type Answer = ();

    fn request(&self) -> Request {
        Request::DeleteLog { log: self.name.to_owned() }
    }

    fn answer(&self, _response: Response) -> anyhow::Result<()> {
        Ok(())
    }

    fn direct(&self, _ctx: &Context<'_>, ns: varve_log::JournalNamespace) -> anyhow::Result<()> {
        // The index first: a crash between leaves a log without an index
        // (found by scan), never an index describing a log that is gone.
        varve_runtime::append_index::delete_index(&ns, self.name)?;
        ns.delete_log(self.name)?;
        ns.close()?;
        Ok(())
    }

    fn remote(&self, ns: &RemoteNamespace) -> anyhow::Result<()> {
        Ok(ns.delete_log(self.name)?)
    }

    fn shared(&self, ns: &Arc<dyn varve_log::Namespace>) -> anyhow::Result<()> {
        varve_runtime::append_index::delete_index(ns.as_ref(), self.name)?;
        Ok(ns.delete_log(self.name)?)
    }

    fn unknown(&self, ctx: &Context<'_>, last: &str) -> String {
        format!(
            "deleting log {} in namespace {} may or may not have happened: the connection to its runtime broke before the answer (last: {last}); check with `varve --ns {} log ls`",
            self.name, ctx.namespace, ctx.namespace
        )
    }
}

/// Delete a log.
pub fn delete_log(ctx: &Context<'_>, name: &str) -> anyhow::Result<()> {
    run(ctx, &DeleteLog { name })
}

/// `log trim`.
struct TrimLog<'a> {
    name: &'a str,
    before: Seq,
}

impl WriteOp for TrimLog<'_> {
    /// The log's new earliest seq.
    type Answer = Seq;

    fn request(&self) -> Request {
        Request::Trim { log: self.name.to_owned(), before: self.before }
    }

    fn answer(&self, response: Response) -> anyhow::Result<Seq> {
        response.seq.context("the runtime answered the trim without the new earliest seq")
    }

    fn direct(&self, _ctx: &Context<'_>, ns: varve_log::JournalNamespace) -> anyhow::Result<Seq> {
        let earliest = ns.trim(self.name, self.before)?;
        ns.close()?;
        Ok(earliest)
    }

    fn remote(&self, ns: &RemoteNamespace) -> anyhow::Result<Seq> {
        Ok(ns.trim(self.name, self.before)?)
    }

    fn shared(&self, ns: &Arc<dyn varve_log::Namespace>) -> anyhow::Result<Seq> {
        Ok(ns.trim(self.name, self.before)?)
    }

    fn unknown(&self, ctx: &Context<'_>, last: &str) -> String {
        format!(
            "trimming log {} in namespace {} may or may not have happened: the connection to its runtime broke before the answer (last: {last}); check its earliest seq with `varve --ns {} log info {}` (a trim repeated is harmless)",
            self.name, ctx.namespace, ctx.namespace, self.name
        )
    }
}

/// Trim a log's records below `before`; the log's new earliest seq.
pub fn trim_log(ctx: &Context<'_>, name: &str, before: Seq) -> anyhow::Result<Seq> {
    run(ctx, &TrimLog { name, before })
}

/// The process id in the namespace's [`RUNTIME_PID_FILE`], if that process lives.
pub fn runtime_pid(ctx: &Context<'_>) -> Option<u32> {
    let path = namespace_dir(&ctx.data, &ctx.namespace).join(RUNTIME_PID_FILE);
    let pid: i32 = std::fs::read_to_string(path).ok()?.trim().parse().ok()?;
    let live = match rustix::process::Pid::from_raw(pid) {
        // EPERM: it exists, owned by someone else.
        Some(pid) => matches!(rustix::process::test_kill_process(pid), Ok(()) | Err(rustix::io::Errno::PERM)),
        None => false,
    };
    live.then(|| u32::try_from(pid).ok()).flatten()
}

/// Names this process the runtime of a namespace ([`RUNTIME_PID_FILE`])
/// until dropped.
pub struct RuntimePidFile(PathBuf);

impl RuntimePidFile {
    /// Write the file (creating the namespace's directory if needed).
    pub fn write(ctx: &Context<'_>) -> anyhow::Result<RuntimePidFile> {
        let dir = namespace_dir(&ctx.data, &ctx.namespace);
        std::fs::create_dir_all(&dir).map_err(|e| anyhow!("creating {}: {e}", dir.display()))?;
        let path = dir.join(RUNTIME_PID_FILE);
        let tmp = dir.join(format!("{RUNTIME_PID_FILE}.{}", std::process::id()));
        std::fs::write(&tmp, format!("{}\n", std::process::id()))
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| anyhow!("writing {}: {e}", path.display()))?;
        Ok(RuntimePidFile(path))
    }
}

impl Drop for RuntimePidFile {
    fn drop(&mut self) {
        // Only our own: a runtime started after us may have replaced it.
        let ours = std::fs::read_to_string(&self.0).is_ok_and(|t| t.trim() == std::process::id().to_string());
        if ours {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

/// Whether a runtime answers on the namespace's socket now.
pub fn runtime_serves(ctx: &Context<'_>) -> bool {
    std::os::unix::net::UnixStream::connect(socket_path(ctx)).is_ok()
}

/// Explain a `Locked` error of a command that cannot go through a runtime.
pub fn explain_locked(ctx: &Context<'_>, error: LogError, what: &str) -> anyhow::Error {
    if matches!(error, LogError::Locked { .. }) && runtime_serves(ctx) {
        anyhow!(
            "namespace {} is served by a runtime (`varve run`, socket {}), its only writer, and {what}: stop the runtime first (SIGTERM or Ctrl-C), or use another namespace (--ns)",
            ctx.namespace,
            socket_path(ctx).display()
        )
    } else {
        error.into()
    }
}

/// How long `varve run` waits for the lock of a namespace no runtime serves
/// (a CLI write in progress holds it briefly).
pub fn open_for_runtime<T>(ctx: &Context<'_>, mut open: impl FnMut() -> varve_log::Result<T>) -> anyhow::Result<T> {
    let started = Instant::now();
    loop {
        match open() {
            Err(error @ LogError::Locked { .. }) => {
                if runtime_serves(ctx) {
                    bail!(
                        "a runtime already serves namespace {} (socket {}): one runtime per namespace",
                        ctx.namespace,
                        socket_path(ctx).display()
                    );
                }
                if started.elapsed() >= LOCKED_WAIT_MAX {
                    bail!("{error}; waited {} s for it to be released", LOCKED_WAIT_MAX.as_secs());
                }
                std::thread::sleep(LOCKED_POLL);
            }
            other => return Ok(other?),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn locked(runtime: bool) -> Failure {
        Failure::Locked { error: LogError::Locked { path: PathBuf::from("/x") }, runtime }
    }

    #[test]
    fn a_starting_runtime_is_waited_for_longer_than_another_writer() {
        let almost = |limit: Duration| limit.saturating_sub(Duration::from_millis(1));
        assert_eq!(next_step(&locked(true), 0, Duration::ZERO), Next::Retry(LOCKED_POLL));
        assert_eq!(next_step(&locked(true), 3, almost(LOCKED_WAIT_MAX)), Next::Retry(LOCKED_POLL));
        assert_eq!(next_step(&locked(true), 0, LOCKED_WAIT_MAX), Next::GiveUpLocked);
        assert_eq!(next_step(&locked(false), 0, almost(WRITER_WAIT_MAX)), Next::Retry(LOCKED_POLL));
        assert_eq!(next_step(&locked(false), 0, WRITER_WAIT_MAX), Next::GiveUpLocked);
    }

    #[test]
    fn broken_attempts_back_off_then_give_up() {
        let broken = Failure::Broken("eof".into());
        let pauses: Vec<Next> = (1..ATTEMPTS_MAX).map(|n| next_step(&broken, n, Duration::ZERO)).collect();
        assert_eq!(pauses[0], Next::Retry(Duration::from_millis(50)));
        assert_eq!(pauses[1], Next::Retry(Duration::from_millis(100)));
        assert_eq!(pauses[6], Next::Retry(RETRY_PAUSE_MAX), "capped");
        assert_eq!(next_step(&broken, ATTEMPTS_MAX, Duration::ZERO), Next::GiveUpAttempts);
        let stopping = Failure::Stopping("stopped".into());
        assert_eq!(next_step(&stopping, ATTEMPTS_MAX, Duration::ZERO), Next::GiveUpAttempts);
        assert_eq!(retry_pause(u32::MAX), RETRY_PAUSE_MAX, "no overflow");
    }

    #[test]
    fn a_final_error_is_not_retried() {
        assert_eq!(next_step(&Failure::Final(anyhow!("no such log")), 0, Duration::ZERO), Next::GiveUpFinal);
    }

    #[test]
    fn the_worst_case_wait_is_bounded() {
        let total: Duration = (1..ATTEMPTS_MAX).map(retry_pause).sum();
        assert!(total < Duration::from_secs(10), "{total:?}");
    }
}
