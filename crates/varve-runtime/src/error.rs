//! The runtime's error type. Operating errors are values with messages that
//! say what was wrong and what to do; bugs panic.

use std::path::PathBuf;

use varve_log::{LogError, Seq};

/// Everything a runtime operation can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// The Log underneath failed.
    #[error(transparent)]
    Log(#[from] LogError),

    /// A sorted map's structure (`PEDaLS`) failed (`sorted_map.rs`).
    #[error(transparent)]
    Structure(#[from] varve_pds::PdsError),

    /// An event in `_events` does not decode.
    #[error("event {seq} in _events does not decode: {reason} (was it written by a newer Varve?)")]
    BadEvent {
        /// The event's seq in `_events`.
        seq: Seq,
        /// What the decoder found wrong (unknown kind, truncated field, …).
        reason: String,
    },

    /// An event id in text form is malformed.
    #[error("{text:?} is not an event id: expected HOST:NAMESPACE:SEQ with HOST as 16 hex digits")]
    BadEventId {
        /// The text as given.
        text: String,
    },

    /// A trace id in text form is malformed.
    #[error("{text:?} is not a trace id: expected up to 32 hex digits")]
    BadTraceId {
        /// The text as given.
        text: String,
    },

    /// The manifest is malformed or refers to something that does not exist.
    #[error("{}: {message}", location(path.as_ref(), *line))]
    Manifest {
        /// The manifest file; `None` when it was parsed from text without a path.
        path: Option<PathBuf>,
        /// The 1-based line of the mistake; `None` when it has no single place.
        line: Option<usize>,
        /// What is wrong and, where it helps, what to write instead.
        message: String,
    },

    /// A handler name is used but was never registered with the runtime.
    #[error("handler {name:?} is not registered with this runtime: register it (RuntimeBuilder::handler / builtin) or declare it in the manifest")]
    UnknownHandler {
        /// The handler name that was looked up.
        name: String,
    },

    /// A handler name was registered twice.
    #[error("handler {name:?} is registered twice: handler names are unique per runtime")]
    DuplicateHandler {
        /// The name registered twice.
        name: String,
    },

    /// A log or topic that must exist does not.
    #[error("log or topic {log:?} does not exist in namespace {namespace:?}: create it first (create_topic, create_log, or a [[log]]/[[topic]] entry in the manifest)")]
    UnknownLog {
        /// The namespace that was searched.
        namespace: String,
        /// The log or topic name that is missing.
        log: String,
    },

    /// Another writer appended to the namespace behind the runtime's back, so
    /// the seqs it predicted for an atomic trigger batch were wrong.
    #[error("log {log:?} got seq {actual} where the runtime expected {expected}: something else appends to namespace {namespace:?}; only the runtime may write a namespace it serves (use its socket or its API)")]
    SeqMismatch {
        /// The namespace the runtime serves.
        namespace: String,
        /// The log whose seq did not match.
        log: String,
        /// The seq the runtime predicted for its record.
        expected: Seq,
        /// The seq the Log assigned.
        actual: Seq,
    },

    /// A runtime sharing its namespace planned a write again and again, and
    /// other writers got in first every time.
    #[error(
        "namespace {namespace:?} is too contended: {reason}; retry later, or spread the writes over more namespaces"
    )]
    Contended {
        /// The namespace the runtime serves.
        namespace: String,
        /// What could not be written.
        reason: String,
    },

    /// The namespace's events are labelled with another host id.
    #[error("namespace {namespace:?} was served with host id {stored:016x}, not {requested:016x}: event ids name their host, so a namespace keeps one (set host_id = \"{stored:016x}\" in the manifest, or use the data directory's host_id)")]
    HostChanged {
        /// The namespace being served.
        namespace: String,
        /// The host id in the namespace's `_runtime.host`, which its events carry.
        stored: u64,
        /// The host id this runtime was given (manifest `host_id`, data directory, or builder).
        requested: u64,
    },

    /// The runtime was stopped.
    #[error("the runtime is stopped")]
    Stopped,

    /// An append from outside the handlers waited for the handlers to catch
    /// up (backpressure, [`crate::Backlog`]) and no room came in time.
    /// Nothing was appended: append again later.
    #[error(
        "the handlers are {backlog} triggers behind (the limit is {max}); this append waited {waited:.1?} for room and \
         was not made: append again later or more slowly, give the runtime more workers (concurrency), or raise the \
         limit (backlog_max)"
    )]
    Backlogged {
        /// Triggers queued or running when the wait ended.
        backlog: usize,
        /// The limit ([`crate::Backlog::max`]).
        max: usize,
        /// How long the append waited.
        waited: std::time::Duration,
    },

    /// The runtime could not be paused: handlers were still running when the time was up.
    #[error("namespace {namespace:?}: {reason}")]
    PauseTimedOut {
        /// The namespace the runtime serves.
        namespace: String,
        /// How long it waited and for what.
        reason: String,
    },

    /// Talking to a runtime over its Unix socket failed.
    #[error("runtime socket {}: {reason}", path.display())]
    Socket {
        /// The socket file (`<data>/<namespace>/runtime.sock` for the CLI).
        path: PathBuf,
        /// What failed: connecting, the exchange, or the runtime's error answer.
        reason: String,
    },

    /// An operating-system I/O error, with what the runtime was doing.
    #[error("I/O error while {context}: {source}")]
    Io {
        /// What the runtime was doing, e.g. `reading manifest app.toml`.
        context: String,
        /// The operating-system error.
        #[source]
        source: std::io::Error,
    },

    /// A bad argument (empty batch, a reserved name, …).
    #[error("invalid argument: {reason}")]
    InvalidArgument {
        /// What was wrong with the argument.
        reason: String,
    },
}

fn location(path: Option<&PathBuf>, line: Option<usize>) -> String {
    let file = path.map_or_else(|| "manifest".to_owned(), |p| p.display().to_string());
    match line {
        Some(line) => format!("{file}:{line}"),
        None => file,
    }
}

impl RuntimeError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        RuntimeError::Io { context: context.into(), source }
    }
}

/// Shorthand for runtime results.
pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;
