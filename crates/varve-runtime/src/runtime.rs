//! The runtime: atomic triggers, the worker pool, retries, dead letters,
//! subscriptions and topics. See the crate docs for the design.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use varve_log::{LogConfig, LogError, Namespace, OnFull, Record, Seq, SeqRange};

use crate::command;
use crate::error::{Result, RuntimeError};
use crate::event::{trace_hex, Event, EventId, EventKind, HostId, StoredEvent, TraceId};

/// The causal event log of a namespace (a system log).
pub const EVENTS_LOG: &str = "_events";
/// Subscribe/unsubscribe/topic records, replayed on start (JSON, one per record).
pub const SUBSCRIPTIONS_LOG: &str = "_runtime.subscriptions";
/// The low-water mark: the `_events` seq from which start-up looks for unfinished triggers (u64 LE).
pub const PROGRESS_LOG: &str = "_runtime.progress";
/// The host id that labels this namespace's events (u64 LE, written once).
/// Event ids are implicit, so readers take the host from here.
pub const HOST_LOG: &str = "_runtime.host";
/// Most records one [`HandlerContext::scan`] returns (it materialises them).
pub const SCAN_RECORDS_MAX: u64 = 100_000;
/// Records that kept failing: JSON `{handler, log, seq, trigger, attempts, reason, trace}`.
pub const DEAD_LETTERS_LOG: &str = "_dead_letters";

/// Most worker threads per namespace.
pub const CONCURRENCY_MAX: usize = 1024;
/// Most claims (FIRING events) one worker writes in one batch.
pub const CLAIM_BATCH_MAX: usize = 64;
/// The progress mark is rewritten after this many finished triggers (and on stop).
const PROGRESS_EVERY_FINISHED: u64 = 1024;
/// Most attempts a retry policy may ask for.
pub const ATTEMPTS_MAX: u32 = 1000;

/// What a handler function returns: `Err` is recorded as FAILED with its message.
pub type HandlerResult = std::result::Result<(), Box<dyn std::error::Error + Send + Sync>>;
/// A Rust handler.
pub type HandlerFn = Arc<dyn Fn(&mut HandlerContext<'_>) -> HandlerResult + Send + Sync>;

/// Retries and limits of one handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Failed runs before the record goes to the dead-letter log (≥ 1).
    pub attempts: u32,
    /// Pause before the second attempt; doubles each attempt after.
    pub backoff: Duration,
    /// Longest pause between attempts.
    pub backoff_max: Duration,
    /// External commands are killed after this long (`None`: never). Rust
    /// handlers cannot be interrupted safely; for them the timeout is not enforced.
    pub timeout: Option<Duration>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 3,
            backoff: Duration::from_millis(100),
            backoff_max: Duration::from_secs(10),
            timeout: Some(Duration::from_secs(30)),
        }
    }
}

impl RetryPolicy {
    /// The pause after `failures` failed attempts (exponential, capped).
    #[must_use]
    pub fn backoff_after(&self, failures: u32) -> Duration {
        let factor = 1u32.checked_shl(failures.saturating_sub(1)).unwrap_or(u32::MAX);
        self.backoff.saturating_mul(factor).min(self.backoff_max)
    }
}

/// How a handler runs.
#[derive(Clone)]
pub enum HandlerKind {
    /// A Rust function in this process.
    Rust(HandlerFn),
    /// An external command, spawned per trigger (argv; argv\[0\] resolved on `PATH`).
    Command(Vec<String>),
}

impl std::fmt::Debug for HandlerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HandlerKind::Rust(_) => f.write_str("Rust(fn)"),
            HandlerKind::Command(argv) => f.debug_tuple("Command").field(argv).finish(),
        }
    }
}

/// A registered handler.
#[derive(Clone, Debug)]
pub struct HandlerSpec {
    pub name: String,
    pub kind: HandlerKind,
    pub retry: RetryPolicy,
}

/// Options of a runtime.
#[derive(Clone, Debug)]
pub struct RuntimeOptions {
    /// Names the runtime instance in event ids (Lowgo's host).
    pub host: HostId,
    /// Worker threads (CSPOT's throttle): at most this many handlers run at
    /// once. 0 makes a **writer-only** runtime: appends get their APPEND and
    /// TRIGGER events (so nothing is lost while no runtime runs handlers —
    /// `varve log append` uses this), but no handler runs here; the triggers
    /// wait for the next runtime with workers.
    pub concurrency: usize,
    /// Record READ and LATEST events for handler reads. TRIGGER, FIRING,
    /// DONE, FAILED and APPEND are always recorded: delivery depends on them.
    pub record_reads: bool,
    /// Serve the Unix socket here (external handlers and `varve` CLI appends).
    pub socket: Option<PathBuf>,
    /// The store's data directory, passed to external commands as `VARVE_DATA`.
    pub data_dir: Option<PathBuf>,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions { host: 0, concurrency: 4, record_reads: true, socket: None, data_dir: None }
    }
}

/// Builds a [`Runtime`]: register handlers, logs, topics and subscriptions,
/// then [`start`](RuntimeBuilder::start).
pub struct RuntimeBuilder {
    ns: Arc<dyn Namespace>,
    options: RuntimeOptions,
    handlers: BTreeMap<String, HandlerSpec>,
    logs: Vec<(String, LogConfig)>,
    topics: Vec<String>,
    subscriptions: Vec<(String, String)>,
    error: Option<RuntimeError>,
}

impl RuntimeBuilder {
    /// A runtime over `ns`. The runtime must be the namespace's only writer.
    #[must_use]
    pub fn new(ns: Arc<dyn Namespace>) -> RuntimeBuilder {
        RuntimeBuilder {
            ns,
            options: RuntimeOptions::default(),
            handlers: BTreeMap::new(),
            logs: Vec::new(),
            topics: Vec::new(),
            subscriptions: Vec::new(),
            error: None,
        }
    }

    /// Replace all options.
    #[must_use]
    pub fn options(mut self, options: RuntimeOptions) -> Self {
        self.options = options;
        self
    }

    #[must_use]
    pub fn host(mut self, host: HostId) -> Self {
        self.options.host = host;
        self
    }

    #[must_use]
    pub fn concurrency(mut self, workers: usize) -> Self {
        self.options.concurrency = workers;
        self
    }

    #[must_use]
    pub fn record_reads(mut self, on: bool) -> Self {
        self.options.record_reads = on;
        self
    }

    #[must_use]
    pub fn socket(mut self, path: impl Into<PathBuf>) -> Self {
        self.options.socket = Some(path.into());
        self
    }

    /// Register a Rust handler by name (not yet subscribed to anything).
    #[must_use]
    pub fn handler<F>(self, name: &str, retry: RetryPolicy, f: F) -> Self
    where
        F: Fn(&mut HandlerContext<'_>) -> HandlerResult + Send + Sync + 'static,
    {
        self.register(HandlerSpec { name: name.to_owned(), kind: HandlerKind::Rust(Arc::new(f)), retry })
    }

    /// Register any handler.
    #[must_use]
    pub fn register(mut self, spec: HandlerSpec) -> Self {
        if self.handlers.contains_key(&spec.name) {
            self.error.get_or_insert(RuntimeError::DuplicateHandler { name: spec.name.clone() });
        }
        self.handlers.insert(spec.name.clone(), spec);
        self
    }

    /// Create this log on start (idempotent for the same config).
    #[must_use]
    pub fn log(mut self, name: &str, config: LogConfig) -> Self {
        self.logs.push((name.to_owned(), config));
        self
    }

    /// Create this topic on start.
    #[must_use]
    pub fn topic(mut self, name: &str) -> Self {
        self.topics.push(name.to_owned());
        self
    }

    /// Subscribe `handler` to `log` on start, unless it already is.
    #[must_use]
    pub fn subscribe(mut self, log: &str, handler: &str) -> Self {
        self.subscriptions.push((log.to_owned(), handler.to_owned()));
        self
    }

    /// Validate, recover unfinished triggers from `_events`, start the
    /// workers (and the socket, if asked) and return the running runtime.
    pub fn start(self) -> Result<Runtime> {
        if let Some(error) = self.error {
            return Err(error);
        }
        let options = self.options;
        if options.concurrency > CONCURRENCY_MAX {
            return Err(RuntimeError::InvalidArgument {
                reason: format!("concurrency must be at most {CONCURRENCY_MAX} (0: a writer-only runtime)"),
            });
        }
        for spec in self.handlers.values() {
            varve_log::validate_name(&spec.name, false)?;
            if spec.retry.attempts == 0 || spec.retry.attempts > ATTEMPTS_MAX {
                return Err(RuntimeError::InvalidArgument {
                    reason: format!("handler {:?}: attempts must be between 1 and {ATTEMPTS_MAX}", spec.name),
                });
            }
        }
        let ns = self.ns;
        ns.create_log(EVENTS_LOG, LogConfig::unbounded().system())?;
        ns.create_log(SUBSCRIPTIONS_LOG, LogConfig::unbounded().system())?;
        ns.create_log(PROGRESS_LOG, LogConfig::keep(16, OnFull::Overwrite).system())?;
        ns.create_log(DEAD_LETTERS_LOG, LogConfig::unbounded().system())?;
        ns.create_log(HOST_LOG, LogConfig::unbounded().system())?;
        match namespace_host(ns.as_ref())? {
            None => {
                ns.append(HOST_LOG, &options.host.to_le_bytes())?;
            }
            Some(stored) if stored != options.host => {
                return Err(RuntimeError::HostChanged {
                    namespace: ns.name().to_owned(),
                    stored,
                    requested: options.host,
                });
            }
            Some(_) => {}
        }
        for (name, config) in &self.logs {
            ns.create_log(name, *config)?;
        }
        let inner = Arc::new(Inner {
            namespace: ns.name().to_owned(),
            ns,
            options,
            handlers: self.handlers.into_iter().map(|(k, v)| (k, Arc::new(v))).collect(),
            writer: Mutex::new(WriterState::default()),
            work: Mutex::new(WorkState::default()),
            work_cv: Condvar::new(),
            idle_cv: Condvar::new(),
            stopped: AtomicBool::new(false),
            finished_total: AtomicU64::new(0),
        });
        inner.replay_subscriptions()?;
        for topic in &self.topics {
            inner.create_topic(topic)?;
        }
        for (log, handler) in &self.subscriptions {
            if !inner.lock_writer().is_subscribed(log, handler) {
                inner.subscribe(log, handler)?;
            }
        }
        inner.recover()?;
        let mut threads = Vec::new();
        for i in 0..inner.options.concurrency {
            let worker = Arc::clone(&inner);
            let thread = std::thread::Builder::new()
                .name(format!("varve-worker-{i}"))
                .spawn(move || worker.work_loop())
                .map_err(|e| RuntimeError::io("starting a worker thread", e))?;
            threads.push(thread);
        }
        let socket = match &inner.options.socket {
            Some(path) => Some(crate::socket::serve(Arc::clone(&inner), path)?),
            None => None,
        };
        Ok(Runtime { inner, threads, socket, stop_done: false })
    }
}

/// A running runtime over one namespace. Dropping it stops it (see [`Runtime::stop`]).
pub struct Runtime {
    inner: Arc<Inner>,
    threads: Vec<JoinHandle<()>>,
    socket: Option<crate::socket::SocketServer>,
    /// `stop` ran (so `Drop` does not wait a second time).
    stop_done: bool,
}

/// A cheap, cloneable handle for appending and publishing from other threads.
#[derive(Clone)]
pub struct RuntimeHandle {
    inner: Arc<Inner>,
}

impl Runtime {
    /// A handle usable from other threads while the runtime runs.
    #[must_use]
    pub fn handle(&self) -> RuntimeHandle {
        RuntimeHandle { inner: Arc::clone(&self.inner) }
    }

    /// The namespace underneath (for reads; do not append to it directly).
    #[must_use]
    pub fn namespace(&self) -> &Arc<dyn Namespace> {
        &self.inner.ns
    }

    /// The host id events carry.
    #[must_use]
    pub fn host(&self) -> HostId {
        self.inner.options.host
    }

    /// Append one record from outside any handler: a new trace; fires the
    /// handlers subscribed to `log` now.
    pub fn append(&self, log: &str, value: &[u8]) -> Result<Seq> {
        Ok(self.inner.append_traced(&[(log, value)], None)?[0])
    }

    /// Append records to several logs in one atomic batch, with their triggers.
    pub fn append_batch(&self, batch: &[(&str, &[u8])]) -> Result<Vec<Seq>> {
        self.inner.append_traced(batch, None)
    }

    /// Append with an explicit cause (an event of this or another namespace).
    pub fn append_caused(&self, batch: &[(&str, &[u8])], parent: EventId, trace: TraceId) -> Result<Vec<Seq>> {
        self.inner.append_traced(batch, Some(&Cause { parent, trace }))
    }

    /// Canal's `create_topic`: a log plus an entry in the subscription log.
    pub fn create_topic(&self, topic: &str) -> Result<()> {
        self.inner.create_topic(topic)
    }

    /// Subscribe a registered handler to a topic or log (from the next append on).
    pub fn subscribe(&self, topic: &str, handler: &str) -> Result<()> {
        self.inner.subscribe(topic, handler)
    }

    /// Stop firing `handler` for appends to `topic` (from the next append on).
    pub fn unsubscribe(&self, topic: &str, handler: &str) -> Result<()> {
        self.inner.unsubscribe(topic, handler)
    }

    /// Canal's `publish`: append `data` to the topic; returns its index (seq).
    pub fn publish(&self, topic: &str, data: &[u8]) -> Result<Seq> {
        self.append(topic, data)
    }

    /// Canal's `latest_index`.
    pub fn latest_index(&self, topic: &str) -> Result<Seq> {
        Ok(self.inner.ns.latest(topic)?)
    }

    /// Canal's `get`.
    pub fn get(&self, topic: &str, index: Seq) -> Result<Bytes> {
        Ok(self.inner.ns.get(topic, index)?)
    }

    /// Handlers subscribed to each log now.
    #[must_use]
    pub fn subscriptions(&self) -> BTreeMap<String, BTreeSet<String>> {
        self.inner.lock_writer().subscriptions.clone()
    }

    /// Topics created so far.
    #[must_use]
    pub fn topics(&self) -> BTreeSet<String> {
        self.inner.lock_writer().topics.clone()
    }

    /// Wait until nothing is ready, running or waiting for a retry (triggers
    /// for handlers this runtime does not have are not waited for). `false`
    /// on timeout.
    #[must_use]
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        self.inner.wait_idle(timeout)
    }

    /// Every event of `_events` so far.
    pub fn events(&self) -> Result<Vec<StoredEvent>> {
        read_events(self.inner.ns.as_ref(), self.inner.options.host, SeqRange::ALL)
    }

    /// Stop: no new claims; wait up to `grace` for running handlers; write
    /// the progress mark. Handlers still running after `grace` are abandoned:
    /// their threads end when the handler returns, and everything they try to
    /// write after the stop is refused ([`RuntimeError::Stopped`]), so their
    /// triggers stay unfinished and are re-run by the next start — like a crash.
    pub fn stop(mut self, grace: Duration) {
        self.stop_mut(grace);
    }

    fn stop_mut(&mut self, grace: Duration) {
        if self.stop_done {
            return;
        }
        self.stop_done = true;
        {
            let _work = self.inner.lock_work();
            self.inner.stopped.store(true, Ordering::SeqCst);
        }
        self.inner.work_cv.notify_all();
        let deadline = Instant::now() + grace;
        {
            let mut work = self.inner.lock_work();
            while work.running > 0 {
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                work = self.inner.idle_cv.wait_timeout(work, deadline - now).unwrap_or_else(PoisonError::into_inner).0;
            }
        }
        let all_returned = self.inner.lock_work().running == 0;
        for thread in self.threads.drain(..) {
            if all_returned || thread.is_finished() {
                let _ = thread.join();
            }
        }
        if let Some(socket) = self.socket.take() {
            socket.stop();
        }
        // The mark is written under the writer lock, which stopped appends also take.
        let _ = self.inner.write_progress(true);
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.stop_mut(Duration::from_secs(5));
    }
}

impl RuntimeHandle {
    /// See [`Runtime::append`].
    pub fn append(&self, log: &str, value: &[u8]) -> Result<Seq> {
        Ok(self.inner.append_traced(&[(log, value)], None)?[0])
    }

    /// See [`Runtime::append_batch`].
    pub fn append_batch(&self, batch: &[(&str, &[u8])]) -> Result<Vec<Seq>> {
        self.inner.append_traced(batch, None)
    }

    /// See [`Runtime::publish`].
    pub fn publish(&self, topic: &str, data: &[u8]) -> Result<Seq> {
        self.append(topic, data)
    }

    /// See [`Runtime::append_caused`]: how a handler in one namespace appends
    /// to another with its FIRING as the cause.
    pub fn append_caused(&self, batch: &[(&str, &[u8])], parent: EventId, trace: TraceId) -> Result<Vec<Seq>> {
        self.inner.append_traced(batch, Some(&Cause { parent, trace }))
    }

    /// See [`Runtime::wait_idle`].
    #[must_use]
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        self.inner.wait_idle(timeout)
    }
}

/// The cause of an append: the event it descends from, and its trace.
#[derive(Clone, Debug)]
pub(crate) struct Cause {
    pub parent: EventId,
    pub trace: TraceId,
}

#[derive(Default)]
pub(crate) struct WriterState {
    subscriptions: BTreeMap<String, BTreeSet<String>>,
    topics: BTreeSet<String>,
}

impl WriterState {
    fn is_subscribed(&self, log: &str, handler: &str) -> bool {
        self.subscriptions.get(log).is_some_and(|s| s.contains(handler))
    }
}

#[derive(Clone, Debug)]
struct Job {
    trigger: Seq,
    log: String,
    seq: Seq,
    handler: String,
    trace: TraceId,
    /// The attempt number the next FIRING gets.
    attempt: u32,
    /// FAILED events so far (what the retry budget counts; a run cut short
    /// by a stop or crash is re-run but not counted).
    failures: u32,
    last_reason: String,
    last_firing: Seq,
}

#[derive(Default)]
struct WorkState {
    ready: VecDeque<Job>,
    /// Retries waiting for their time: (due, trigger) → job.
    delayed: BTreeMap<(Instant, Seq), Job>,
    running: usize,
    /// Unfinished triggers (ready, delayed, running or without a handler here).
    outstanding: BTreeSet<Seq>,
    /// Triggers for handlers this runtime does not have: kept, not run.
    orphans: usize,
    last_progress: Seq,
}

impl WorkState {
    fn is_idle(&self) -> bool {
        self.ready.is_empty() && self.delayed.is_empty() && self.running == 0
    }
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum SubscriptionRecord {
    Topic { topic: String },
    Subscribe { log: String, handler: String },
    Unsubscribe { log: String, handler: String },
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
/// One record of `_dead_letters`.
pub struct DeadLetter {
    pub handler: String,
    pub log: String,
    pub seq: Seq,
    /// The TRIGGER's seq in `_events`.
    pub trigger: Seq,
    pub attempts: u32,
    pub reason: String,
    pub trace: String,
}

pub(crate) struct Inner {
    pub(crate) ns: Arc<dyn Namespace>,
    pub(crate) namespace: String,
    pub(crate) options: RuntimeOptions,
    handlers: HashMap<String, Arc<HandlerSpec>>,
    /// Serialises every write the runtime makes, so the seqs of a trigger
    /// batch can be predicted (lock order: `writer`, then `work`).
    writer: Mutex<WriterState>,
    work: Mutex<WorkState>,
    work_cv: Condvar,
    idle_cv: Condvar,
    pub(crate) stopped: AtomicBool,
    finished_total: AtomicU64,
}

impl Inner {
    pub(crate) fn lock_writer(&self) -> MutexGuard<'_, WriterState> {
        self.writer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_work(&self) -> MutexGuard<'_, WorkState> {
        self.work.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn event_id(&self, seq: Seq) -> EventId {
        EventId { host: self.options.host, namespace: self.namespace.clone(), seq }
    }

    fn check_running(&self) -> Result<()> {
        if self.stopped.load(Ordering::SeqCst) {
            return Err(RuntimeError::Stopped);
        }
        Ok(())
    }

    /// The atomic trigger: data records, their APPEND events and one TRIGGER
    /// per handler subscribed now, in one `append_batch`.
    pub(crate) fn append_traced(&self, batch: &[(&str, &[u8])], cause: Option<&Cause>) -> Result<Vec<Seq>> {
        self.append_traced_after(batch, cause, &[])
    }

    /// [`Inner::append_traced`], with `reads` (a handler's READ/LATEST events
    /// not yet written, see [`HandlerContext`]) written first in the same batch.
    fn append_traced_after(&self, batch: &[(&str, &[u8])], cause: Option<&Cause>, reads: &[Event]) -> Result<Vec<Seq>> {
        if batch.is_empty() {
            return Err(RuntimeError::InvalidArgument { reason: "an append batch needs at least one record".into() });
        }
        let trace = cause.map_or_else(rand::random::<u128>, |c| c.trace);
        let parent = cause.map(|c| c.parent.clone());
        let writer = self.lock_writer();
        self.check_running()?;
        for (log, _) in batch {
            if log.starts_with('_') {
                return Err(RuntimeError::InvalidArgument {
                    reason: format!("log {log:?} is a system log; handlers and clients append to their own logs"),
                });
            }
        }
        let mut next_seq: HashMap<&str, Seq> = HashMap::new();
        let mut predicted = Vec::with_capacity(batch.len());
        for (log, _) in batch {
            let next = match next_seq.get(log) {
                Some(&n) => n,
                None => {
                    self.ns.latest(log).map_err(|e| match e {
                        LogError::LogNotFound { .. } => {
                            RuntimeError::UnknownLog { namespace: self.namespace.clone(), log: (*log).to_owned() }
                        }
                        other => RuntimeError::Log(other),
                    })? + 1
                }
            };
            predicted.push(next);
            next_seq.insert(log, next + 1);
        }
        let first_event = self.ns.latest(EVENTS_LOG)? + 1;
        let mut events: Vec<Vec<u8>> = Vec::with_capacity(reads.len() + batch.len() * 2);
        events.extend(reads.iter().map(Event::encode));
        let mut jobs = Vec::new();
        for ((log, _), &seq) in batch.iter().zip(&predicted) {
            let append_seq = first_event + events.len() as u64;
            events.push(Event::new(EventKind::Append, trace, parent.clone()).at(log, seq).encode());
            if let Some(handlers) = writer.subscriptions.get(*log) {
                for handler in handlers {
                    let trigger_seq = first_event + events.len() as u64;
                    let event = Event::new(EventKind::Trigger, trace, Some(self.event_id(append_seq)))
                        .at(log, seq)
                        .for_handler(handler);
                    events.push(event.encode());
                    jobs.push(Job {
                        trigger: trigger_seq,
                        log: (*log).to_owned(),
                        seq,
                        handler: handler.clone(),
                        trace,
                        attempt: 1,
                        failures: 0,
                        last_reason: String::new(),
                        last_firing: 0,
                    });
                }
            }
        }
        let mut full: Vec<(&str, &[u8])> = Vec::with_capacity(batch.len() + events.len());
        full.extend_from_slice(batch);
        full.extend(events.iter().map(|e| (EVENTS_LOG, e.as_slice())));
        let seqs = self.ns.append_batch(&full)?;
        for (i, &expected) in predicted.iter().enumerate() {
            if seqs[i] != expected {
                return Err(self.mismatch(batch[i].0, expected, seqs[i]));
            }
        }
        if seqs[batch.len()] != first_event {
            return Err(self.mismatch(EVENTS_LOG, first_event, seqs[batch.len()]));
        }
        if !jobs.is_empty() {
            // Still under the writer lock: the progress mark never passes a
            // trigger that is on disk but not yet outstanding.
            self.enqueue(jobs);
        }
        drop(writer);
        Ok(predicted)
    }

    fn mismatch(&self, log: &str, expected: Seq, actual: Seq) -> RuntimeError {
        RuntimeError::SeqMismatch { namespace: self.namespace.clone(), log: log.to_owned(), expected, actual }
    }

    fn enqueue(&self, jobs: Vec<Job>) {
        let mut work = self.lock_work();
        for job in jobs {
            work.outstanding.insert(job.trigger);
            if self.handlers.contains_key(&job.handler) && self.options.concurrency > 0 {
                work.ready.push_back(job);
            } else {
                work.orphans += 1;
            }
        }
        drop(work);
        self.work_cv.notify_all();
    }

    /// Append events (not data) under the writer lock; returns their seqs.
    pub(crate) fn append_events(&self, events: &[Event]) -> Result<Vec<Seq>> {
        let encoded: Vec<Vec<u8>> = events.iter().map(Event::encode).collect();
        let batch: Vec<(&str, &[u8])> = encoded.iter().map(|e| (EVENTS_LOG, e.as_slice())).collect();
        let _writer = self.lock_writer();
        self.check_running()?;
        Ok(self.ns.append_batch(&batch)?)
    }

    fn replay_subscriptions(&self) -> Result<()> {
        let mut writer = self.lock_writer();
        for record in self.ns.scan(SUBSCRIPTIONS_LOG, SeqRange::ALL)? {
            let record = record?;
            let parsed: SubscriptionRecord =
                serde_json::from_slice(&record.value).map_err(|e| RuntimeError::InvalidArgument {
                    reason: format!("{SUBSCRIPTIONS_LOG} seq {} does not parse: {e}", record.seq),
                })?;
            match parsed {
                SubscriptionRecord::Topic { topic } => {
                    writer.topics.insert(topic);
                }
                SubscriptionRecord::Subscribe { log, handler } => {
                    writer.subscriptions.entry(log).or_default().insert(handler);
                }
                SubscriptionRecord::Unsubscribe { log, handler } => {
                    if let Some(set) = writer.subscriptions.get_mut(&log) {
                        set.remove(&handler);
                        if set.is_empty() {
                            writer.subscriptions.remove(&log);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    pub(crate) fn create_topic(&self, topic: &str) -> Result<()> {
        varve_log::validate_name(topic, false)?;
        let mut writer = self.lock_writer();
        self.check_running()?;
        self.ns.create_log(topic, LogConfig::unbounded())?;
        if writer.topics.contains(topic) {
            return Ok(());
        }
        let record = serde_json::to_vec(&SubscriptionRecord::Topic { topic: topic.to_owned() })
            .map_err(|e| RuntimeError::InvalidArgument { reason: e.to_string() })?;
        self.ns.append(SUBSCRIPTIONS_LOG, &record)?;
        writer.topics.insert(topic.to_owned());
        Ok(())
    }

    pub(crate) fn subscribe(&self, log: &str, handler: &str) -> Result<()> {
        self.change_subscription(log, handler, true)
    }

    pub(crate) fn unsubscribe(&self, log: &str, handler: &str) -> Result<()> {
        self.change_subscription(log, handler, false)
    }

    fn change_subscription(&self, log: &str, handler: &str, on: bool) -> Result<()> {
        if on && !self.handlers.contains_key(handler) {
            return Err(RuntimeError::UnknownHandler { name: handler.to_owned() });
        }
        let mut writer = self.lock_writer();
        self.check_running()?;
        if let Err(e) = self.ns.log_info(log) {
            return Err(match e {
                LogError::LogNotFound { .. } => {
                    RuntimeError::UnknownLog { namespace: self.namespace.clone(), log: log.to_owned() }
                }
                other => RuntimeError::Log(other),
            });
        }
        if writer.is_subscribed(log, handler) == on {
            return Ok(());
        }
        let (record, kind) = if on {
            (SubscriptionRecord::Subscribe { log: log.into(), handler: handler.into() }, EventKind::Subscribe)
        } else {
            (SubscriptionRecord::Unsubscribe { log: log.into(), handler: handler.into() }, EventKind::Unsubscribe)
        };
        let record =
            serde_json::to_vec(&record).map_err(|e| RuntimeError::InvalidArgument { reason: e.to_string() })?;
        let event = Event::new(kind, rand::random(), None).at(log, 0).for_handler(handler).encode();
        self.ns.append_batch(&[(SUBSCRIPTIONS_LOG, &record), (EVENTS_LOG, &event)])?;
        if on {
            writer.subscriptions.entry(log.to_owned()).or_default().insert(handler.to_owned());
        } else if let Some(set) = writer.subscriptions.get_mut(log) {
            set.remove(handler);
            if set.is_empty() {
                writer.subscriptions.remove(log);
            }
        }
        Ok(())
    }

    /// Find unfinished triggers from the progress mark on and queue them.
    fn recover(&self) -> Result<()> {
        let from = match self.ns.latest(PROGRESS_LOG)? {
            0 => 1,
            seq => {
                let bytes = self.ns.get(PROGRESS_LOG, seq)?;
                let array: [u8; 8] = bytes[..].try_into().map_err(|_| RuntimeError::InvalidArgument {
                    reason: format!("{PROGRESS_LOG} seq {seq} is not 8 bytes"),
                })?;
                u64::from_le_bytes(array).max(1)
            }
        };
        let mut open: BTreeMap<Seq, Job> = BTreeMap::new();
        for record in self.ns.scan(EVENTS_LOG, SeqRange { first: from, last: Seq::MAX })? {
            let record = record?;
            let event = Event::decode(&record.value, record.seq)?;
            match event.kind {
                EventKind::Trigger => {
                    open.insert(
                        record.seq,
                        Job {
                            trigger: record.seq,
                            log: event.log,
                            seq: event.seq,
                            handler: event.handler,
                            trace: event.trace,
                            attempt: 1,
                            failures: 0,
                            last_reason: String::new(),
                            last_firing: 0,
                        },
                    );
                }
                EventKind::Firing => {
                    if let Some(job) = open.get_mut(&event.trigger) {
                        job.attempt = event.attempt + 1;
                        job.last_firing = record.seq;
                    }
                }
                EventKind::Failed => {
                    if let Some(job) = open.get_mut(&event.trigger) {
                        job.failures += 1;
                        job.last_reason = event.reason;
                    }
                }
                EventKind::Done | EventKind::DeadLetter => {
                    open.remove(&event.trigger);
                }
                _ => {}
            }
        }
        let mut to_dead = Vec::new();
        let mut jobs = Vec::new();
        for job in open.into_values() {
            if self.options.concurrency == 0 {
                jobs.push(job); // kept outstanding (for the progress mark), never run here
                continue;
            }
            let exhausted = self.handlers.get(&job.handler).is_some_and(|h| job.failures >= h.retry.attempts);
            if exhausted {
                to_dead.push(job);
            } else {
                jobs.push(job);
            }
        }
        {
            let _writer = self.lock_writer();
            self.enqueue(jobs);
        }
        for job in to_dead {
            self.dead_letter(&job)?;
        }
        self.lock_work().last_progress = from;
        Ok(())
    }

    /// Write the low-water mark if it moved (or `force`).
    fn write_progress(&self, force: bool) -> Result<()> {
        let writer = self.lock_writer();
        let mut work = self.lock_work();
        let mark = match work.outstanding.first() {
            Some(&first) => first,
            None => self.ns.latest(EVENTS_LOG)? + 1,
        };
        if mark == work.last_progress && !force {
            return Ok(());
        }
        work.last_progress = mark;
        drop(work);
        self.ns.append(PROGRESS_LOG, &mark.to_le_bytes())?;
        drop(writer);
        Ok(())
    }

    fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut work = self.lock_work();
        while !work.is_idle() {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            work = self.idle_cv.wait_timeout(work, deadline - now).unwrap_or_else(PoisonError::into_inner).0;
        }
        true
    }

    fn work_loop(&self) {
        loop {
            let jobs = {
                let mut work = self.lock_work();
                loop {
                    if self.stopped.load(Ordering::SeqCst) {
                        return;
                    }
                    let now = Instant::now();
                    while let Some(entry) = work.delayed.first_entry() {
                        if entry.key().0 > now {
                            break;
                        }
                        let job = entry.remove();
                        work.ready.push_back(job);
                    }
                    if !work.ready.is_empty() {
                        break;
                    }
                    let wait = work.delayed.keys().next().map(|(due, _)| due.saturating_duration_since(now));
                    work = match wait {
                        Some(wait) => self.work_cv.wait_timeout(work, wait).unwrap_or_else(PoisonError::into_inner).0,
                        None => self.work_cv.wait(work).unwrap_or_else(PoisonError::into_inner),
                    };
                }
                // Share the queue among the workers; claim several at once when it is long.
                let share = (work.ready.len() / self.options.concurrency).clamp(1, CLAIM_BATCH_MAX);
                let jobs: Vec<Job> = work.ready.drain(..share).collect();
                work.running += jobs.len();
                jobs
            };
            let count = jobs.len();
            let finished = self.run_jobs(jobs);
            let mut work = self.lock_work();
            work.running -= count;
            for trigger in finished {
                work.outstanding.remove(&trigger);
            }
            // `wait_idle` waits for an empty queue and no running job; a
            // stopping runtime (`stop_mut`) only for no running job, with
            // triggers possibly still queued.
            if work.is_idle() || (work.running == 0 && self.stopped.load(Ordering::SeqCst)) {
                self.idle_cv.notify_all();
            }
            drop(work);
            let total = self.finished_total.fetch_add(count as u64, Ordering::Relaxed) + count as u64;
            if total % PROGRESS_EVERY_FINISHED < count as u64 {
                let _ = self.write_progress(false);
            }
        }
    }

    /// Claim and run jobs; returns the triggers that are finished (DONE or dead-lettered).
    fn run_jobs(&self, jobs: Vec<Job>) -> Vec<Seq> {
        let firings: Vec<Event> = jobs
            .iter()
            .map(|job| {
                let mut event = Event::new(EventKind::Firing, job.trace, Some(self.event_id(job.trigger)))
                    .at(&job.log, job.seq)
                    .for_handler(&job.handler);
                event.attempt = job.attempt;
                event.trigger = job.trigger;
                event
            })
            .collect();
        let Ok(seqs) = self.append_events(&firings) else {
            // Stopped (or the store failed): the triggers stay unfinished on
            // disk and the next start re-runs them.
            return Vec::new();
        };
        let mut finished = Vec::new();
        // DONE events of this batch, written together at the end (or before
        // a failure is recorded, so each trigger's events stay in order).
        let mut done_events: Vec<Event> = Vec::new();
        let mut done_triggers: Vec<Seq> = Vec::new();
        let flush = |events: &mut Vec<Event>, triggers: &mut Vec<Seq>, finished: &mut Vec<Seq>| {
            if !events.is_empty() && self.append_events(events).is_ok() {
                finished.append(triggers);
            }
            events.clear();
            triggers.clear();
        };
        for (mut job, firing) in jobs.into_iter().zip(seqs) {
            if self.stopped.load(Ordering::SeqCst) {
                // Claimed but not started: left unfinished, re-run by the next start.
                continue;
            }
            job.last_firing = firing;
            let (outcome, reads) = self.run_one(&job, firing);
            match outcome {
                Ok(()) => {
                    done_events.extend(reads);
                    let mut done = Event::new(EventKind::Done, job.trace, Some(self.event_id(firing)))
                        .at(&job.log, job.seq)
                        .for_handler(&job.handler);
                    done.attempt = job.attempt;
                    done.trigger = job.trigger;
                    done_events.push(done);
                    done_triggers.push(job.trigger);
                }
                Err(reason) => {
                    flush(&mut done_events, &mut done_triggers, &mut finished);
                    if self.stopped.load(Ordering::SeqCst) {
                        continue;
                    }
                    let mut failed = Event::new(EventKind::Failed, job.trace, Some(self.event_id(firing)))
                        .at(&job.log, job.seq)
                        .for_handler(&job.handler);
                    failed.attempt = job.attempt;
                    failed.trigger = job.trigger;
                    failed.reason.clone_from(&reason);
                    let mut events = reads;
                    events.push(failed);
                    if self.append_events(&events).is_err() {
                        continue;
                    }
                    job.failures += 1;
                    job.last_reason = reason;
                    let retry = self.handlers.get(&job.handler).map(|h| h.retry).unwrap_or_default();
                    if job.failures >= retry.attempts {
                        if self.dead_letter(&job).is_ok() {
                            finished.push(job.trigger);
                        }
                    } else {
                        let due = Instant::now() + retry.backoff_after(job.failures);
                        job.attempt += 1;
                        let mut work = self.lock_work();
                        work.delayed.insert((due, job.trigger), job);
                        drop(work);
                        self.work_cv.notify_one();
                    }
                }
            }
        }
        flush(&mut done_events, &mut done_triggers, &mut finished);
        finished
    }

    fn dead_letter(&self, job: &Job) -> Result<()> {
        let letter = DeadLetter {
            handler: job.handler.clone(),
            log: job.log.clone(),
            seq: job.seq,
            trigger: job.trigger,
            attempts: job.failures,
            reason: job.last_reason.clone(),
            trace: trace_hex(job.trace),
        };
        let record =
            serde_json::to_vec(&letter).map_err(|e| RuntimeError::InvalidArgument { reason: e.to_string() })?;
        let parent = if job.last_firing == 0 { job.trigger } else { job.last_firing };
        let mut event = Event::new(EventKind::DeadLetter, job.trace, Some(self.event_id(parent))).at(&job.log, job.seq);
        event.handler.clone_from(&job.handler);
        event.attempt = job.failures;
        event.trigger = job.trigger;
        event.reason.clone_from(&job.last_reason);
        let event = event.encode();
        let _writer = self.lock_writer();
        self.check_running()?;
        self.ns.append_batch(&[(DEAD_LETTERS_LOG, &record), (EVENTS_LOG, &event)])?;
        Ok(())
    }

    /// Run one job's handler. Also returns the READ/LATEST events of a Rust
    /// handler not yet written (its reads after its last write): the caller
    /// writes them in the batch of the DONE or FAILED event.
    fn run_one(&self, job: &Job, firing: Seq) -> (std::result::Result<(), String>, Vec<Event>) {
        let Some(spec) = self.handlers.get(&job.handler) else {
            return (Err(format!("handler {:?} is not registered", job.handler)), Vec::new());
        };
        let value = match self.ns.get(&job.log, job.seq) {
            Ok(value) => value,
            Err(e) => return (Err(format!("cannot read the triggering record: {e}")), Vec::new()),
        };
        match &spec.kind {
            HandlerKind::Rust(f) => {
                let mut ctx = HandlerContext {
                    inner: self,
                    firing: self.event_id(firing),
                    trace: job.trace,
                    handler: &job.handler,
                    log: &job.log,
                    seq: job.seq,
                    value,
                    attempt: job.attempt,
                    reads: RefCell::new(Vec::new()),
                };
                let outcome = match catch_unwind(AssertUnwindSafe(|| f(&mut ctx))) {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(error)) => Err(error.to_string()),
                    Err(panic) => {
                        let message = panic
                            .downcast_ref::<&str>()
                            .map(|s| (*s).to_owned())
                            .or_else(|| panic.downcast_ref::<String>().cloned())
                            .unwrap_or_else(|| "a non-string payload".to_owned());
                        Err(format!("panicked: {message}"))
                    }
                };
                (outcome, ctx.reads.into_inner())
            }
            HandlerKind::Command(argv) => {
                let mut env = vec![
                    (command::ENV_NAMESPACE, self.namespace.clone()),
                    (command::ENV_LOG, job.log.clone()),
                    (command::ENV_SEQ, job.seq.to_string()),
                    (command::ENV_EVENT_ID, self.event_id(firing).to_string()),
                    (command::ENV_TRACE_ID, trace_hex(job.trace)),
                ];
                if let Some(dir) = &self.options.data_dir {
                    env.push((command::ENV_DATA, dir.display().to_string()));
                }
                if let Some(socket) = &self.options.socket {
                    env.push((command::ENV_RUNTIME_SOCKET, socket.display().to_string()));
                }
                // Reads through the socket are recorded as they happen (socket.rs).
                (command::run(argv, &env, &value, spec.retry.timeout), Vec::new())
            }
        }
    }

    /// Record a READ or LATEST event unless reads are not recorded.
    pub(crate) fn record_read(&self, event: Event) -> Result<()> {
        if self.options.record_reads {
            self.append_events(&[event])?;
        }
        Ok(())
    }
}

/// What a Rust handler gets: the triggering record and the API whose every
/// call is recorded in `_events` with the FIRING as its cause.
pub struct HandlerContext<'a> {
    inner: &'a Inner,
    firing: EventId,
    trace: TraceId,
    handler: &'a str,
    log: &'a str,
    seq: Seq,
    value: Bytes,
    attempt: u32,
    /// READ/LATEST events not yet written (when `record_reads`). They go in
    /// the batch of the handler's next write — its next `append`, else its
    /// DONE or FAILED — not in one batch each: a read changes nothing until
    /// something written depends on it, and every such write carries the
    /// reads before it, in the order they happened, ahead of its own events.
    /// A run cut short before its next write loses them with the run, which
    /// is re-run (at least once) and records its reads again. One batch per
    /// read cost 2.5× the wall time of a latest + get + append handler
    /// (`varve bench runtime`, docs/benchmarks.md).
    reads: RefCell<Vec<Event>>,
}

impl HandlerContext<'_> {
    /// The triggering record's bytes.
    #[must_use]
    pub fn record(&self) -> &Bytes {
        &self.value
    }

    /// The log the triggering record is in.
    #[must_use]
    pub fn log(&self) -> &str {
        self.log
    }

    /// The triggering record's seq.
    #[must_use]
    pub fn seq(&self) -> Seq {
        self.seq
    }

    /// This handler's name.
    #[must_use]
    pub fn handler(&self) -> &str {
        self.handler
    }

    /// The FIRING event being handled: the cause of everything this handler does.
    #[must_use]
    pub fn event_id(&self) -> &EventId {
        &self.firing
    }

    #[must_use]
    pub fn trace_id(&self) -> TraceId {
        self.trace
    }

    /// 1 on the first run, 2 on the first re-run, …
    #[must_use]
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    fn cause(&self) -> Cause {
        Cause { parent: self.firing.clone(), trace: self.trace }
    }

    /// Append a record (fires its subscribers, same trace, parent = this FIRING).
    pub fn append(&self, log: &str, value: &[u8]) -> Result<Seq> {
        Ok(self.append_batch(&[(log, value)])?[0])
    }

    /// Append records to several logs atomically, with their triggers (and
    /// the READ/LATEST events of the reads made since the last write).
    pub fn append_batch(&self, batch: &[(&str, &[u8])]) -> Result<Vec<Seq>> {
        let mut reads = self.reads.borrow_mut();
        let seqs = self.inner.append_traced_after(batch, Some(&self.cause()), &reads)?;
        reads.clear();
        Ok(seqs)
    }

    /// Keep a READ/LATEST event for the next write (see [`HandlerContext`]'s `reads`).
    fn record_read(&self, event: Event) {
        if self.inner.options.record_reads {
            self.reads.borrow_mut().push(event);
        }
    }

    /// Publish to a topic (the same as `append`).
    pub fn publish(&self, topic: &str, data: &[u8]) -> Result<Seq> {
        self.append(topic, data)
    }

    /// Read a record; recorded as READ `log`/`seq`.
    pub fn get(&self, log: &str, seq: Seq) -> Result<Bytes> {
        let value = self.inner.ns.get(log, seq)?;
        self.record_read(Event::new(EventKind::Read, self.trace, Some(self.firing.clone())).at(log, seq));
        Ok(value)
    }

    /// The latest seq of a log; recorded as LATEST with the seq returned.
    pub fn latest(&self, log: &str) -> Result<Seq> {
        let seq = self.inner.ns.latest(log)?;
        self.record_read(Event::new(EventKind::Latest, self.trace, Some(self.firing.clone())).at(log, seq));
        Ok(seq)
    }

    /// Records in a range; recorded as one READ of `first..=last` actually returned.
    pub fn scan(&self, log: &str, range: impl Into<SeqRange>) -> Result<Vec<Record>> {
        let range = range.into();
        let latest = self.inner.ns.latest(log)?;
        let last = range.last.min(latest);
        if last >= range.first && last - range.first >= SCAN_RECORDS_MAX {
            return Err(RuntimeError::InvalidArgument {
                reason: format!(
                    "a handler scan returns at most {SCAN_RECORDS_MAX} records; {log}:{}..={last} is more: scan in parts",
                    range.first
                ),
            });
        }
        if last < range.first {
            // Nothing in range yet (an empty log, or a range past its end):
            // an empty answer, not the store's "range ends before it starts".
            return Ok(Vec::new());
        }
        let range = SeqRange { first: range.first, last };
        let records: Vec<Record> = self.inner.ns.scan(log, range)?.collect::<varve_log::Result<_>>()?;
        if let (Some(first), Some(last)) = (records.first(), records.last()) {
            let mut event = Event::new(EventKind::Read, self.trace, Some(self.firing.clone())).at(log, first.seq);
            event.seq_last = last.seq;
            self.record_read(event);
        }
        Ok(records)
    }
}

/// The host id a runtime labelled this namespace's events with (`None`
/// before a runtime first started on it).
pub fn namespace_host(ns: &dyn Namespace) -> Result<Option<HostId>> {
    let latest = match ns.latest(HOST_LOG) {
        Ok(latest) => latest,
        Err(LogError::LogNotFound { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    if latest == 0 {
        return Ok(None);
    }
    let bytes = ns.get(HOST_LOG, latest)?;
    let array: [u8; 8] = bytes[..]
        .try_into()
        .map_err(|_| RuntimeError::InvalidArgument { reason: format!("{HOST_LOG} seq {latest} is not 8 bytes") })?;
    Ok(Some(u64::from_le_bytes(array)))
}

/// Every event of a namespace's `_events` in `range`, labelled with the
/// namespace's host ([`namespace_host`]; 0 if none). Read-only handles work.
pub fn namespace_events(ns: &dyn Namespace, range: SeqRange) -> Result<Vec<StoredEvent>> {
    let host = namespace_host(ns)?.unwrap_or(0);
    read_events(ns, host, range)
}

/// Read and decode `_events` in `range` from any namespace handle (read-only is fine).
pub fn read_events(ns: &dyn Namespace, host: HostId, range: SeqRange) -> Result<Vec<StoredEvent>> {
    let mut out = Vec::new();
    for record in ns.scan(EVENTS_LOG, range)? {
        let record = record?;
        let event = Event::decode(&record.value, record.seq)?;
        out.push(StoredEvent { id: EventId { host, namespace: ns.name().to_owned(), seq: record.seq }, event });
    }
    Ok(out)
}
