//! The runtime's Unix socket: how processes other than the runtime (external
//! handlers, the `varve` CLI) append while the runtime holds the namespace's
//! writer lock.
//!
//! Protocol: one JSON request per line, one JSON response per line, any
//! number per connection. Bytes are base64 (standard alphabet, padded).
//!
//! ```text
//! {"op":"append","log":"L","data":"B64","cause":"HOST:NS:SEQ","trace":"HEX","request_id":"ID"} -> {"ok":true,"seqs":[N]}
//! {"op":"append_batch","entries":[{"log":"L","data":"B64"},…],"cause":…,"trace":…,"request_id":…} -> {"ok":true,"seqs":[…]}
//! {"op":"publish","topic":"T","data":"B64",…}                                   -> {"ok":true,"seqs":[N]}
//! {"op":"get","log":"L","seq":N,…}                                            -> {"ok":true,"data":"B64"}
//! {"op":"latest","log":"L",…}                                                 -> {"ok":true,"seq":N}
//! {"op":"scan","log":"L","first":A,"last":B,…}                                -> {"ok":true,"records":[{"seq":N,"data":"B64"},…]}
//! {"op":"map_put","log":"L","key":"B64","value":"B64",…}                      -> {"ok":true,"seqs":[N]}
//! {"op":"map_delete","log":"L","key":"B64",…}                                 -> {"ok":true,"seqs":[N]}
//! {"op":"map_get","log":"L","key":"B64",…}                                    -> {"ok":true,"found":B,"data":"B64"}
//! {"op":"map_range","log":"L","from":"B64","to":"B64",…}  (both optional)     -> {"ok":true,"entries":[{"key":"B64","data":"B64"},…]}
//! {"op":"create_log","log":"L","keep":K,"on_full":"refuse"|"overwrite"}       -> {"ok":true,"created":true|false}
//! {"op":"delete_log","log":"L"}                                               -> {"ok":true}
//! {"op":"call","name":"N","args":{…}}  (an operation the host added)          -> {"ok":true,"answer":…}
//! any failure                                  -> {"ok":false,"error":"…"} (+ "retry":true if nothing was written)
//! ```
//!
//! `cause` and `trace` are optional and go together: with them an append is
//! caused by that event (an external handler passes its `VARVE_EVENT_ID` and
//! `VARVE_TRACE_ID`, whatever namespace it appends to) and reads are recorded
//! as READ/LATEST events; without them an append starts a new trace.
//!
//! The `map_*` requests act on the sorted map whose op log is `L`
//! ([`crate::HandlerContext::sorted_map`], `sorted_map.rs`): a put or delete
//! appends an op (with `cause`, `trace`, `request_id` as `append`'s), a
//! get or range reads the map now (with `cause`, recorded as a LATEST of
//! `L` and a READ of every op before it).
//!
//! `request_id` (optional, see [`crate::requests`]) makes a retried append
//! safe: a repeat of an id the namespace remembers appends nothing and gets
//! the first append's seqs, with `"repeated":true`. A client that lost the
//! answer ([`CallError::Broken`]) sends the same request again.
//! `"retry":true` on a failure means the runtime wrote nothing because it is
//! stopping: the request may be sent again (to the next runtime).

use std::io::{BufRead, BufReader, Read as _, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use std::fmt;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use varve_log::{LogConfig, OnFull, Seq, SeqRange};

use crate::context::bounded_scan;
use crate::error::{Result, RuntimeError};
use crate::event::{parse_trace, Event, EventId, EventKind};
use crate::inner::{Cause, Inner};
use crate::requests::{Appended, RequestId};
use crate::sorted_map::MapOp;
use crate::trigger::AppendOptions;

/// The socket's file inside a namespace's directory (`DATA/NAMESPACE/runtime.sock`),
/// where every runtime hosted on a data directory listens.
pub const SOCKET_FILE: &str = "runtime.sock";
/// Most connections served at once; more are refused with an error line.
pub const CONNECTIONS_MAX: usize = 256;
/// Longest request line.
pub const REQUEST_BYTES_MAX: usize = 64 << 20;

/// One request: a JSON object on one line, its `op` the variant's name in
/// snake case (`append`, `append_batch`, …; see the module docs for each line).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Append one record; answered with `seqs` (one seq) and `repeated`.
    Append {
        /// The log to append to.
        log: String,
        /// The record, base64 ([`encode_bytes`]).
        data: String,
        /// The event that caused the append, as `HOST:NAMESPACE:SEQ` (an external handler's
        /// `VARVE_EVENT_ID`); given with `trace` or not at all. `None`: the append starts a new trace.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<String>,
        /// The trace id of `cause`, up to 32 hex digits (`VARVE_TRACE_ID`); given with `cause` or not at all.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trace: Option<String>,
        /// Append once per id (see [`crate::requests`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_id: Option<String>,
    },
    /// Append several records, to one or more logs, in one atomic batch;
    /// answered with `seqs` (one per entry, in order) and `repeated`.
    AppendBatch {
        /// The records, in append order.
        entries: Vec<Entry>,
        /// The causing event, as for [`Request::Append`]; applies to every entry.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<String>,
        /// The trace id of `cause`, as for [`Request::Append`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trace: Option<String>,
        /// Append once per id (see [`crate::requests`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_id: Option<String>,
    },
    /// Publish to a topic: the same as [`Request::Append`] to the topic's log.
    Publish {
        /// The topic (a log) to append to.
        topic: String,
        /// The record, base64 ([`encode_bytes`]).
        data: String,
        /// The causing event, as for [`Request::Append`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<String>,
        /// The trace id of `cause`, as for [`Request::Append`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trace: Option<String>,
        /// Append once per id (see [`crate::requests`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_id: Option<String>,
    },
    /// Read one record; answered with `data`.
    Get {
        /// The log to read.
        log: String,
        /// The record's seq in `log`.
        seq: Seq,
        /// The reading handler's FIRING, as for [`Request::Append`]; with it the read is recorded as a
        /// READ event. `None`: the read is not recorded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<String>,
        /// The trace id of `cause`, as for [`Request::Append`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trace: Option<String>,
    },
    /// The newest seq of a log; answered with `seq` (0 when the log is empty).
    Latest {
        /// The log to look at.
        log: String,
        /// The reading handler's FIRING, as for [`Request::Get`]; with it a LATEST event is recorded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<String>,
        /// The trace id of `cause`, as for [`Request::Append`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trace: Option<String>,
    },
    /// Read the records of `log` from `first` to `last` (the answer stops at
    /// its newest record; at most [`crate::SCAN_RECORDS_MAX`]); answered with
    /// `records`.
    Scan {
        /// The log to read.
        log: String,
        /// The first seq wanted.
        first: Seq,
        /// The last seq wanted.
        last: Seq,
        /// The reading handler's FIRING, as for [`Request::Get`]; with it the
        /// records returned are recorded as one (ranged) READ event.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<String>,
        /// The trace id of `cause`, as for [`Request::Append`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trace: Option<String>,
    },
    /// Set `key` of the sorted map whose op log is `log`; answered with `seqs` (the op's seq).
    MapPut {
        /// The map's op log.
        log: String,
        /// The key, base64.
        key: String,
        /// The value, base64.
        value: String,
        /// The causing event, as for [`Request::Append`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<String>,
        /// The trace id of `cause`, as for [`Request::Append`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trace: Option<String>,
        /// Append once per id (see [`crate::requests`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_id: Option<String>,
    },
    /// Remove `key` from the sorted map whose op log is `log`; answered with `seqs`.
    MapDelete {
        /// The map's op log.
        log: String,
        /// The key, base64.
        key: String,
        /// The causing event, as for [`Request::Append`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<String>,
        /// The trace id of `cause`, as for [`Request::Append`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trace: Option<String>,
        /// Append once per id (see [`crate::requests`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_id: Option<String>,
    },
    /// The value of `key` in the map now; answered with `found` and `data`.
    MapGet {
        /// The map's op log.
        log: String,
        /// The key, base64.
        key: String,
        /// The reading handler's FIRING, as for [`Request::Get`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<String>,
        /// The trace id of `cause`, as for [`Request::Append`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trace: Option<String>,
    },
    /// The entries of the map now with keys from `from` (inclusive) to `to`
    /// (exclusive), either end open when left out; answered with `entries`.
    MapRange {
        /// The map's op log.
        log: String,
        /// The first key, base64.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<String>,
        /// The key after the last, base64.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to: Option<String>,
        /// The reading handler's FIRING, as for [`Request::Get`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<String>,
        /// The trace id of `cause`, as for [`Request::Append`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trace: Option<String>,
    },
    /// Create a log: unbounded, or keeping `keep` records (`on_full`:
    /// `refuse`, the default, or `overwrite`).
    CreateLog {
        /// The log's name.
        log: String,
        /// How many records the log keeps; `None`: every record (unbounded).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        keep: Option<u64>,
        /// With `keep`: `"refuse"` (the default when `None`) or `"overwrite"` the oldest record.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        on_full: Option<String>,
    },
    /// Delete a log and its records; answered with `ok` only.
    DeleteLog {
        /// The log's name.
        log: String,
    },
    /// Trim a log's records below `before` (`Namespace::trim`); answered
    /// with the log's new earliest seq in `seq`.
    Trim {
        /// The log's name.
        log: String,
        /// The first seq kept.
        before: Seq,
    },
    /// An operation the program hosting the runtime added
    /// ([`crate::Runtime::add_socket_op`]), such as `varve run`'s `repair`;
    /// answered with `answer`.
    Call {
        /// The operation's name.
        name: String,
        /// Its arguments, as the operation defines them.
        #[serde(default)]
        args: serde_json::Value,
    },
}

/// An operation added to a runtime's socket ([`crate::Runtime::add_socket_op`]):
/// its arguments in, its answer or a message saying what went wrong out.
/// It runs on the connection's thread, and may take as long as it needs.
pub type SocketOp = Arc<dyn Fn(serde_json::Value) -> std::result::Result<serde_json::Value, String> + Send + Sync>;

/// One record of an `append_batch` request.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// The log to append to.
    pub log: String,
    /// The record, base64 ([`encode_bytes`]).
    pub data: String,
}

/// One record of a `scan` answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanRecord {
    /// Its seq.
    pub seq: Seq,
    /// The record, base64 ([`decode_bytes`]).
    pub data: String,
}

impl ScanRecord {
    /// The answer's form of `records`.
    #[must_use]
    pub fn all(records: &[varve_log::Record]) -> Vec<ScanRecord> {
        records.iter().map(|r| ScanRecord { seq: r.seq, data: encode_bytes(&r.value) }).collect()
    }
}

/// One response. Fields a request does not answer with are `None` (left out
/// of the JSON).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Response {
    /// Whether the request succeeded; when `false`, `error` says why.
    pub ok: bool,
    /// `append`, `append_batch`, `publish`: the seqs of the records, in request order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seqs: Option<Vec<Seq>>,
    /// `latest`: the newest seq of the log, 0 when it is empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<Seq>,
    /// `get`: the record, base64 ([`decode_bytes`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// `scan`: the records, in seq order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records: Option<Vec<ScanRecord>>,
    /// Any failed request: the error message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// An append whose request id had landed before: nothing was appended now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeated: Option<bool>,
    /// `create_log`: whether the log is new.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<bool>,
    /// A failure that wrote nothing (the runtime is stopping): send again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<bool>,
    /// `call`: the operation's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<serde_json::Value>,
    /// `map_get`: whether the key is in the map (then `data` is its value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found: Option<bool>,
    /// `map_range`: the entries, in key order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entries: Option<Vec<MapEntry>>,
}

/// One entry of a `map_range` answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapEntry {
    /// The key, base64 ([`decode_bytes`]).
    pub key: String,
    /// The value, base64.
    pub data: String,
}

impl MapEntry {
    /// The answer's form of `entries`.
    #[must_use]
    pub fn all(entries: &[(bytes::Bytes, bytes::Bytes)]) -> Vec<MapEntry> {
        entries.iter().map(|(k, v)| MapEntry { key: encode_bytes(k), data: encode_bytes(v) }).collect()
    }
}

/// A `map_get` answer.
pub(crate) fn map_found(value: Option<&[u8]>) -> Response {
    Response { ok: true, found: Some(value.is_some()), data: value.map(encode_bytes), ..Response::default() }
}

/// Why a call failed, as far as the client can tell whether it took effect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallError {
    /// Nothing was sent: no runtime accepts connections on the socket.
    NotServing(String),
    /// The request may have been received, but no complete answer came back
    /// (the runtime died or the connection broke): the outcome is unknown.
    Broken(String),
    /// The runtime answered with an error; `retry` if it wrote nothing
    /// because it is stopping.
    Refused {
        /// The runtime's error message.
        error: String,
        /// Whether the runtime wrote nothing because it is stopping, so the request may be sent again.
        retry: bool,
    },
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::NotServing(reason) | CallError::Broken(reason) => f.write_str(reason),
            CallError::Refused { error, .. } => f.write_str(error),
        }
    }
}

/// Encode bytes for a request.
#[must_use]
pub fn encode_bytes(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Decode bytes of a response.
pub fn decode_bytes(text: &str) -> Result<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| RuntimeError::InvalidArgument { reason: format!("data is not base64: {e}") })
}

/// Send one request and read its response (a new connection per call).
pub fn call(path: &Path, request: &Request) -> Result<Response> {
    call_checked(path, request).map_err(|e| RuntimeError::Socket { path: path.to_owned(), reason: e.to_string() })
}

/// [`call`], telling apart what did not reach the runtime, what may have,
/// and what it refused (see [`CallError`]).
pub fn call_checked(path: &Path, request: &Request) -> std::result::Result<Response, CallError> {
    let line = serde_json::to_vec(request).map_err(|e| CallError::Refused { error: e.to_string(), retry: false })?;
    let mut stream = UnixStream::connect(path)
        .map_err(|e| CallError::NotServing(format!("cannot connect: {e} (is `varve run` running?)")))?;
    let mut line = line;
    line.push(b'\n');
    stream.write_all(&line).map_err(|e| CallError::Broken(format!("sending: {e}")))?;
    let mut reader = BufReader::new(stream);
    let mut answer = String::new();
    reader.read_line(&mut answer).map_err(|e| CallError::Broken(format!("reading the answer: {e}")))?;
    if answer.is_empty() {
        return Err(CallError::Broken("the runtime closed the connection before answering".to_owned()));
    }
    let response: Response = serde_json::from_str(&answer)
        .map_err(|e| CallError::Broken(format!("the answer {answer:?} does not parse: {e}")))?;
    if response.ok {
        Ok(response)
    } else {
        Err(CallError::Refused {
            error: response.error.unwrap_or_else(|| "failed without a reason".to_owned()),
            retry: response.retry == Some(true),
        })
    }
}

/// The serving side; stopped by [`SocketServer::stop`] (or dropped with the runtime).
pub(crate) struct SocketServer {
    path: PathBuf,
    accept: Option<JoinHandle<()>>,
    inner: Arc<Inner>,
}

impl SocketServer {
    pub(crate) fn stop(mut self) {
        self.stop_mut();
    }

    fn stop_mut(&mut self) {
        if let Some(accept) = self.accept.take() {
            // `stopped` is set by the runtime first; a connection wakes `accept`.
            debug_assert!(self.inner.stopped.load(Ordering::SeqCst));
            let _ = UnixStream::connect(&self.path);
            let _ = accept.join();
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Drop for SocketServer {
    fn drop(&mut self) {
        self.stop_mut();
    }
}

/// Bind `path` (removing a stale socket file: the runtime holds the writer
/// lock, so no other runtime serves it) and serve on a thread.
pub(crate) fn serve(inner: Arc<Inner>, path: &Path) -> Result<SocketServer> {
    if path.exists() {
        std::fs::remove_file(path)
            .map_err(|e| RuntimeError::io(format!("removing stale socket {}", path.display()), e))?;
    }
    let listener =
        UnixListener::bind(path).map_err(|e| RuntimeError::io(format!("binding socket {}", path.display()), e))?;
    let server_inner = Arc::clone(&inner);
    let accept = std::thread::Builder::new()
        .name("varve-socket".into())
        .spawn(move || accept_loop(&server_inner, &listener))
        .map_err(|e| RuntimeError::io("starting the socket thread", e))?;
    Ok(SocketServer { path: path.to_owned(), accept: Some(accept), inner })
}

fn accept_loop(inner: &Arc<Inner>, listener: &UnixListener) {
    let live = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        if inner.stopped.load(Ordering::SeqCst) {
            return;
        }
        let Ok(mut stream) = stream else { continue };
        if live.load(Ordering::SeqCst) >= CONNECTIONS_MAX {
            let _ = writeln!(stream, r#"{{"ok":false,"error":"too many connections ({CONNECTIONS_MAX}); retry"}}"#);
            continue;
        }
        live.fetch_add(1, Ordering::SeqCst);
        let inner = Arc::clone(inner);
        let live = Arc::clone(&live);
        let spawned = std::thread::Builder::new().name("varve-socket-conn".into()).spawn(move || {
            serve_connection(&inner, stream);
            live.fetch_sub(1, Ordering::SeqCst);
        });
        // On a spawn failure the closure (and its stream) is dropped: the
        // client sees the connection close.
        drop(spawned);
    }
}

fn serve_connection(inner: &Inner, stream: UnixStream) {
    let Ok(write_half) = stream.try_clone() else { return };
    let mut writer = std::io::BufWriter::new(write_half);
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    loop {
        line.clear();
        // Read at most the limit (plus one byte, to tell "too long" apart).
        match (&mut reader).take(REQUEST_BYTES_MAX as u64 + 1).read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let response = if line.len() > REQUEST_BYTES_MAX {
            // The rest of the line is not read: answer and close.
            let error = format!("request over {REQUEST_BYTES_MAX} bytes; send large batches in parts");
            let _ = writeln!(writer, "{}", serde_json::json!({"ok": false, "error": error}));
            let _ = writer.flush();
            return;
        } else {
            match serde_json::from_str::<Request>(&line) {
                Ok(request) => handle(inner, request).unwrap_or_else(|e| Response {
                    retry: matches!(e, RuntimeError::Stopped).then_some(true),
                    error: Some(e.to_string()),
                    ..Response::default()
                }),
                Err(e) => Response { error: Some(format!("bad request: {e}")), ..Response::default() },
            }
        };
        let Ok(mut text) = serde_json::to_string(&response) else { return };
        text.push('\n');
        if writer.write_all(text.as_bytes()).and_then(|()| writer.flush()).is_err() {
            return;
        }
    }
}

fn cause_of(cause: Option<&String>, trace: Option<&String>) -> Result<Option<Cause>> {
    match (cause, trace) {
        (None, None) => Ok(None),
        (Some(cause), Some(trace)) => Ok(Some(Cause { parent: EventId::parse(cause)?, trace: parse_trace(trace)? })),
        _ => Err(RuntimeError::InvalidArgument { reason: "cause and trace go together: give both or neither".into() }),
    }
}

fn options<'a>(cause: Option<&'a Cause>, request: Option<&'a RequestId>) -> AppendOptions<'a> {
    AppendOptions { cause, request, ..AppendOptions::default() }
}

/// A `map_put` or `map_delete`: the op appended as `append` would, then
/// applied to the map's structure.
fn map_write(
    inner: &Inner,
    log: &str,
    op: &MapOp,
    cause: Option<&String>,
    trace: Option<&String>,
    request_id: Option<&str>,
) -> Result<Appended> {
    let cause = cause_of(cause, trace)?;
    let request = request_id.map(RequestId::parse).transpose()?;
    let answer = inner.append_request(&[(log, &op.encode())], &options(cause.as_ref(), request.as_ref()))?;
    if let Some(&seq) = answer.seqs.first() {
        inner.map_catch_up(log, seq)?;
    }
    Ok(answer)
}

fn handle(inner: &Inner, request: Request) -> Result<Response> {
    let ok = |seqs: Vec<Seq>| Response { ok: true, seqs: Some(seqs), ..Response::default() };
    let appended = |answer: Appended| Response { repeated: answer.repeated.then_some(true), ..ok(answer.seqs) };
    match request {
        Request::Append { log, data, cause, trace, request_id }
        | Request::Publish { topic: log, data, cause, trace, request_id } => {
            let cause = cause_of(cause.as_ref(), trace.as_ref())?;
            let request = request_id.as_deref().map(RequestId::parse).transpose()?;
            let bytes = decode_bytes(&data)?;
            Ok(appended(inner.append_request(&[(&log, &bytes)], &options(cause.as_ref(), request.as_ref()))?))
        }
        Request::AppendBatch { entries, cause, trace, request_id } => {
            let cause = cause_of(cause.as_ref(), trace.as_ref())?;
            let request = request_id.as_deref().map(RequestId::parse).transpose()?;
            let decoded: Vec<(String, Vec<u8>)> =
                entries.into_iter().map(|e| Ok((e.log, decode_bytes(&e.data)?))).collect::<Result<_>>()?;
            let batch: Vec<(&str, &[u8])> = decoded.iter().map(|(l, d)| (l.as_str(), d.as_slice())).collect();
            Ok(appended(inner.append_request(&batch, &options(cause.as_ref(), request.as_ref()))?))
        }
        Request::CreateLog { log, keep, on_full } => {
            let on_full = match on_full.as_deref() {
                None | Some("refuse") => OnFull::Refuse,
                Some("overwrite") => OnFull::Overwrite,
                Some(other) => {
                    return Err(RuntimeError::InvalidArgument {
                        reason: format!("on_full {other:?}: expected \"refuse\" or \"overwrite\""),
                    })
                }
            };
            let config = match keep {
                Some(k) => LogConfig::keep(k, on_full),
                None => LogConfig::unbounded(),
            };
            let created = inner.create_log(&log, config)?;
            Ok(Response { ok: true, created: Some(created), ..Response::default() })
        }
        Request::DeleteLog { log } => {
            inner.delete_log(&log)?;
            Ok(Response { ok: true, ..Response::default() })
        }
        Request::Trim { log, before } => {
            Ok(Response { ok: true, seq: Some(inner.trim(&log, before)?), ..Response::default() })
        }
        Request::Call { name, args } => {
            let op = inner.socket_ops.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&name).cloned();
            let Some(op) = op else {
                return Err(RuntimeError::InvalidArgument {
                    reason: format!("this runtime has no operation {name:?} on its socket"),
                });
            };
            let answer = op(args).map_err(|reason| RuntimeError::InvalidArgument { reason })?;
            Ok(Response { ok: true, answer: Some(answer), ..Response::default() })
        }
        Request::Get { log, seq, cause, trace } => {
            let cause = cause_of(cause.as_ref(), trace.as_ref())?;
            let value = inner.ns.get(&log, seq)?;
            if let Some(cause) = cause {
                inner.record_read(Event::new(EventKind::Read, cause.trace, Some(cause.parent)).at(&log, seq))?;
            }
            Ok(Response { ok: true, data: Some(encode_bytes(&value)), ..Response::default() })
        }
        Request::Scan { log, first, last, cause, trace } => {
            let cause = cause_of(cause.as_ref(), trace.as_ref())?;
            let records = bounded_scan(inner.ns.as_ref(), &log, SeqRange { first, last })?;
            if let (Some(cause), Some(a), Some(b)) = (cause, records.first(), records.last()) {
                let mut read = Event::new(EventKind::Read, cause.trace, Some(cause.parent)).at(&log, a.seq);
                read.seq_last = b.seq;
                inner.record_read(read)?;
            }
            Ok(Response { ok: true, records: Some(ScanRecord::all(&records)), ..Response::default() })
        }
        Request::MapPut { log, key, value, cause, trace, request_id } => {
            let op = MapOp::Put { key: decode_bytes(&key)?, value: decode_bytes(&value)? };
            map_write(inner, &log, &op, cause.as_ref(), trace.as_ref(), request_id.as_deref()).map(appended)
        }
        Request::MapDelete { log, key, cause, trace, request_id } => {
            let op = MapOp::Delete { key: decode_bytes(&key)? };
            map_write(inner, &log, &op, cause.as_ref(), trace.as_ref(), request_id.as_deref()).map(appended)
        }
        Request::MapGet { log, key, cause, trace } => {
            let cause = cause_of(cause.as_ref(), trace.as_ref())?;
            let key = decode_bytes(&key)?;
            let value = inner.map_read(&log, cause, |map, seq| map.get(&key, seq))?;
            Ok(map_found(value.as_deref()))
        }
        Request::MapRange { log, from, to, cause, trace } => {
            let cause = cause_of(cause.as_ref(), trace.as_ref())?;
            let from = from.as_deref().map(decode_bytes).transpose()?;
            let to = to.as_deref().map(decode_bytes).transpose()?;
            let entries = inner.map_read(&log, cause, |map, seq| map.range(from.as_deref(), to.as_deref(), seq))?;
            Ok(Response { ok: true, entries: Some(MapEntry::all(&entries)), ..Response::default() })
        }
        Request::Latest { log, cause, trace } => {
            let cause = cause_of(cause.as_ref(), trace.as_ref())?;
            let seq = inner.ns.latest(&log)?;
            if let Some(cause) = cause {
                inner.record_read(Event::new(EventKind::Latest, cause.trace, Some(cause.parent)).at(&log, seq))?;
            }
            Ok(Response { ok: true, seq: Some(seq), ..Response::default() })
        }
    }
}
