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

    /// An event in `_events` does not decode.
    #[error("event {seq} in _events does not decode: {reason} (was it written by a newer Varve?)")]
    BadEvent { seq: Seq, reason: String },

    /// An event id in text form is malformed.
    #[error("{text:?} is not an event id: expected HOST:NAMESPACE:SEQ with HOST as 16 hex digits")]
    BadEventId { text: String },

    /// A trace id in text form is malformed.
    #[error("{text:?} is not a trace id: expected up to 32 hex digits")]
    BadTraceId { text: String },

    /// The manifest is malformed or refers to something that does not exist.
    #[error("{}: {message}", location(path.as_ref(), *line))]
    Manifest { path: Option<PathBuf>, line: Option<usize>, message: String },

    /// A handler name is used but was never registered with the runtime.
    #[error("handler {name:?} is not registered with this runtime: register it (RuntimeBuilder::handler / builtin) or declare it in the manifest")]
    UnknownHandler { name: String },

    /// A handler name was registered twice.
    #[error("handler {name:?} is registered twice: handler names are unique per runtime")]
    DuplicateHandler { name: String },

    /// A log or topic that must exist does not.
    #[error("log or topic {log:?} does not exist in namespace {namespace:?}: create it first (create_topic, create_log, or a [[log]]/[[topic]] entry in the manifest)")]
    UnknownLog { namespace: String, log: String },

    /// Another writer appended to the namespace behind the runtime's back, so
    /// the seqs it predicted for an atomic trigger batch were wrong.
    #[error("log {log:?} got seq {actual} where the runtime expected {expected}: something else appends to namespace {namespace:?}; only the runtime may write a namespace it serves (use its socket or its API)")]
    SeqMismatch { namespace: String, log: String, expected: Seq, actual: Seq },

    /// The namespace's events are labelled with another host id.
    #[error("namespace {namespace:?} was served with host id {stored:016x}, not {requested:016x}: event ids name their host, so a namespace keeps one (set host_id = \"{stored:016x}\" in the manifest, or use the data directory's host_id)")]
    HostChanged { namespace: String, stored: u64, requested: u64 },

    /// The runtime was stopped.
    #[error("the runtime is stopped")]
    Stopped,

    /// Talking to a runtime over its Unix socket failed.
    #[error("runtime socket {}: {reason}", path.display())]
    Socket { path: PathBuf, reason: String },

    /// An operating-system I/O error, with what the runtime was doing.
    #[error("I/O error while {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },

    /// A bad argument (empty batch, a reserved name, …).
    #[error("invalid argument: {reason}")]
    InvalidArgument { reason: String },
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
