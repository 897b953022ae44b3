//! An external command run as a Rust handler: the command's socket requests
//! are served by the [`HandlerContext`] it is called with, not by a runtime.
//!
//! A repair replays external handlers this way (`varve repair run`): the
//! context is a replaying one, so the command's `varve log get`/`latest`
//! see what the original run saw and its `varve log append` lands in the
//! repair's shadows. The command is started exactly as the runtime starts
//! it (the record on stdin, the same environment variables) except that
//! `VARVE_RUNTIME_SOCKET` names a socket of its own, served here while the
//! command runs, and its stdout goes to this process's stderr.
//!
//! Served: `append`, `append_batch`, `publish`, `get`, `latest`, `scan` and
//! the `map_*` requests of a handler's sorted map (their
//! `cause`, `trace` and `request_id` are the run's own and are not needed:
//! the context knows its run). `create_log` and `delete_log` are refused:
//! a replay recomputes records, not the set of logs.

use std::io::{BufRead, BufReader, Read as _, Write};
use std::os::fd::AsFd as _;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::command::{self, ENV_DATA, ENV_EVENT_ID, ENV_LOG, ENV_NAMESPACE, ENV_RUNTIME_SOCKET, ENV_SEQ, ENV_TRACE_ID};
use crate::context::HandlerContext;
use crate::error::{Result, RuntimeError};
use crate::event::trace_hex;
use crate::handler::{HandlerFn, HandlerResult};
use crate::socket::{decode_bytes, encode_bytes, Request, Response, REQUEST_BYTES_MAX};

/// How often the serving loop looks whether the command has exited.
const POLL: Duration = Duration::from_millis(2);
/// Sockets made by this process, numbered so that runs never share one.
static SOCKETS: AtomicU64 = AtomicU64::new(0);

/// Where and how to run the command.
#[derive(Clone, Debug)]
pub struct CommandSetup {
    /// The command's argv.
    pub argv: Vec<String>,
    /// Kill it after this long; `None`: no limit.
    pub timeout: Option<Duration>,
    /// The namespace the handler runs in (`VARVE_NAMESPACE`).
    pub namespace: String,
    /// The data directory (`VARVE_DATA`), when there is one.
    pub data_dir: Option<PathBuf>,
    /// Where to make the socket (a directory this process may write; at most
    /// about 100 bytes long, the limit of a Unix socket's path).
    pub socket_dir: PathBuf,
}

/// A handler that runs `setup`'s command, serving its socket requests with
/// the context it is called with (see the module docs).
#[must_use]
pub fn command_via_context(setup: CommandSetup) -> HandlerFn {
    Arc::new(move |ctx: &mut HandlerContext<'_>| run(&setup, ctx))
}

fn run(setup: &CommandSetup, ctx: &HandlerContext<'_>) -> HandlerResult {
    let n = SOCKETS.fetch_add(1, Ordering::Relaxed);
    let path = setup.socket_dir.join(format!("replay-{}-{n}.sock", std::process::id()));
    let listener = bind(&path)?;
    let mut env = vec![
        (ENV_NAMESPACE, setup.namespace.clone()),
        (ENV_LOG, ctx.log().to_owned()),
        (ENV_SEQ, ctx.seq().to_string()),
        (ENV_EVENT_ID, ctx.event_id().to_string()),
        (ENV_TRACE_ID, trace_hex(ctx.trace_id())),
        (ENV_RUNTIME_SOCKET, path.display().to_string()),
    ];
    if let Some(dir) = &setup.data_dir {
        env.push((ENV_DATA, dir.display().to_string()));
    }
    let record = ctx.record().clone();
    let (done, kill) = (AtomicBool::new(false), AtomicBool::new(false));
    let outcome = std::thread::scope(|scope| {
        let child = scope.spawn(|| {
            // Its stdout goes to ours only as diagnostics: our stdout may be a `--json` answer.
            let stdout = std::io::stderr().as_fd().try_clone_to_owned().map_or_else(|_| Stdio::null(), Stdio::from);
            let outcome = command::run_until_to(&setup.argv, &env, &record, setup.timeout, &kill, stdout);
            done.store(true, Ordering::SeqCst);
            outcome
        });
        let served = serve(&listener, ctx, &done);
        if served.is_err() {
            kill.store(true, Ordering::SeqCst);
        }
        let outcome = child.join().unwrap_or_else(|_| Err("the thread running the command panicked".to_owned()));
        // The command's own failure says more than a broken connection it caused.
        outcome.map_err(Into::into).and(served.map_err(Into::into))
    });
    let _ = std::fs::remove_file(&path);
    outcome
}

fn bind(path: &Path) -> Result<UnixListener> {
    if path.exists() {
        std::fs::remove_file(path)
            .map_err(|e| RuntimeError::io(format!("removing stale socket {}", path.display()), e))?;
    }
    let listener =
        UnixListener::bind(path).map_err(|e| RuntimeError::io(format!("binding socket {}", path.display()), e))?;
    listener.set_nonblocking(true).map_err(|e| RuntimeError::io("making the socket non-blocking", e))?;
    Ok(listener)
}

/// Accept and serve connections, one at a time, until the command is done.
fn serve(listener: &UnixListener, ctx: &HandlerContext<'_>, done: &AtomicBool) -> Result<()> {
    while !done.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => serve_connection(stream, ctx, done)?,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(e) => return Err(RuntimeError::io("accepting a connection from the command", e)),
        }
    }
    Ok(())
}

fn serve_connection(stream: UnixStream, ctx: &HandlerContext<'_>, done: &AtomicBool) -> Result<()> {
    let io = |what: &'static str| move |e| RuntimeError::io(what, e);
    stream.set_nonblocking(false).map_err(io("setting up a connection"))?;
    // A timeout, so a connection held open by a process that outlives the command does not hold the replay.
    stream.set_read_timeout(Some(POLL * 10)).map_err(io("setting up a connection"))?;
    let mut writer = std::io::BufWriter::new(stream.try_clone().map_err(io("setting up a connection"))?);
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    loop {
        match (&mut reader).take(REQUEST_BYTES_MAX as u64 + 1 - line.len() as u64).read_until(b'\n', &mut line) {
            Ok(0) => return Ok(()),
            Ok(_) if line.last() != Some(&b'\n') && line.len() <= REQUEST_BYTES_MAX => continue,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                if done.load(Ordering::SeqCst) {
                    return Ok(());
                }
                continue;
            }
            Err(_) => return Ok(()),
        }
        let response = if line.len() > REQUEST_BYTES_MAX {
            Response { error: Some(format!("request over {REQUEST_BYTES_MAX} bytes")), ..Response::default() }
        } else {
            match serde_json::from_slice::<Request>(&line) {
                Ok(request) => handle(ctx, request)
                    .unwrap_or_else(|e| Response { error: Some(e.to_string()), ..Response::default() }),
                Err(e) => Response { error: Some(format!("bad request: {e}")), ..Response::default() },
            }
        };
        let too_long = line.len() > REQUEST_BYTES_MAX;
        line.clear();
        let mut text = serde_json::to_string(&response).unwrap_or_else(|_| r#"{"ok":false}"#.to_owned());
        text.push('\n');
        if writer.write_all(text.as_bytes()).and_then(|()| writer.flush()).is_err() || too_long {
            return Ok(());
        }
    }
}

fn handle(ctx: &HandlerContext<'_>, request: Request) -> Result<Response> {
    let ok = |seqs: Vec<u64>| Response { ok: true, seqs: Some(seqs), ..Response::default() };
    match request {
        Request::Append { log, data, .. } | Request::Publish { topic: log, data, .. } => {
            Ok(ok(vec![ctx.append(&log, &decode_bytes(&data)?)?]))
        }
        Request::AppendBatch { entries, .. } => {
            let decoded: Vec<(String, Vec<u8>)> =
                entries.into_iter().map(|e| Ok((e.log, decode_bytes(&e.data)?))).collect::<Result<_>>()?;
            let batch: Vec<(&str, &[u8])> = decoded.iter().map(|(l, d)| (l.as_str(), d.as_slice())).collect();
            Ok(ok(ctx.append_batch(&batch)?))
        }
        Request::Get { log, seq, .. } => {
            Ok(Response { ok: true, data: Some(encode_bytes(&ctx.get(&log, seq)?)), ..Response::default() })
        }
        Request::Latest { log, .. } => Ok(Response { ok: true, seq: Some(ctx.latest(&log)?), ..Response::default() }),
        Request::Scan { log, first, last, .. } => {
            let records = ctx.scan(&log, varve_log::SeqRange { first, last })?;
            Ok(Response { ok: true, records: Some(crate::socket::ScanRecord::all(&records)), ..Response::default() })
        }
        Request::MapPut { log, key, value, .. } => {
            Ok(ok(vec![ctx.sorted_map(&log).put(&decode_bytes(&key)?, &decode_bytes(&value)?)?]))
        }
        Request::MapDelete { log, key, .. } => Ok(ok(vec![ctx.sorted_map(&log).delete(&decode_bytes(&key)?)?])),
        Request::MapGet { log, key, .. } => {
            Ok(crate::socket::map_found(ctx.sorted_map(&log).get(&decode_bytes(&key)?)?.as_deref()))
        }
        Request::MapRange { log, from, to, .. } => {
            let from = from.as_deref().map(decode_bytes).transpose()?;
            let to = to.as_deref().map(decode_bytes).transpose()?;
            let entries = ctx.sorted_map(&log).range(from.as_deref(), to.as_deref())?;
            Ok(Response { ok: true, entries: Some(crate::socket::MapEntry::all(&entries)), ..Response::default() })
        }
        Request::CreateLog { log, .. } | Request::DeleteLog { log } | Request::Trim { log, .. } => {
            Err(RuntimeError::InvalidArgument {
                reason: format!(
                    "{log:?}: creating, deleting and trimming logs is not served to a command run through a handler \
                     context (a repair recomputes records, not the set of logs or what they keep)"
                ),
            })
        }
        Request::Call { name, .. } => Err(RuntimeError::InvalidArgument {
            reason: format!(
                "{name:?}: the operations `varve run` adds are not served to a command run through a handler context"
            ),
        }),
    }
}
