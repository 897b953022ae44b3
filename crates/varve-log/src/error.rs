//! The one error type of the Log contract.
//!
//! Operating errors are values: every variant carries the context a user needs
//! to act (which log, which seq, which segment and offset) and its message says
//! what was wrong and what to do. Bugs panic; nothing here is a bug.

use std::path::PathBuf;

use crate::contract::Seq;

/// Shorthand for results of Log operations.
pub type Result<T, E = LogError> = std::result::Result<T, E>;

/// Everything a Log operation can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// The namespace does not exist (read-only opens do not create it).
    #[error("namespace {namespace:?} not found: it is created by its first write (e.g. `varve log create`), or check --data/--ns")]
    NamespaceNotFound { namespace: String },

    /// The log does not exist in this namespace.
    #[error("log {log:?} not found in namespace {namespace:?}: create it first (`varve log create {log}`) or check the name")]
    LogNotFound { namespace: String, log: String },

    /// The seq is beyond the latest record of the log (or is 0, which names no record).
    #[error("log {log:?} has no record at seq {seq} (latest is {latest}; seqs start at 1)")]
    SeqNotFound { log: String, seq: Seq, latest: Seq },

    /// The record existed but retention has trimmed it.
    #[error("log {log:?} seq {seq} was trimmed by retention; the earliest record still kept is seq {earliest}")]
    Trimmed { log: String, seq: Seq, earliest: Seq },

    /// A `Keep { on_full: Refuse }` log already holds `keep` records.
    #[error("log {log:?} is full: its retention keeps at most {keep} and refuses more appends (reads still work; create a larger or overwrite log to go on)")]
    Full { log: String, keep: u64 },

    /// `append_if` found a different latest seq than expected.
    #[error("log {log:?} changed under you: expected latest seq {expected}, found {actual}; re-read and retry")]
    Conflict { log: String, expected: Seq, actual: Seq },

    /// A log or namespace name breaks the naming rules.
    #[error("invalid name {name:?}: {reason}")]
    InvalidName { name: String, reason: &'static str },

    /// A record, batch or frame is larger than its configured limit.
    #[error("{what} is {size} bytes, over the limit of {limit} bytes: split it, or raise the limit when opening the store")]
    TooLarge { what: &'static str, size: u64, limit: u64 },

    /// `create_log` for an existing name with a different configuration.
    #[error("log {log:?} already exists with {existing}, not {requested}: delete it first or use the existing configuration")]
    AlreadyExists { log: String, existing: String, requested: String },

    /// The arguments make no sense (an empty batch, a bad range, keep = 0 …).
    #[error("invalid argument: {reason}")]
    InvalidArgument { reason: String },

    /// Stored bytes fail their checksum or are inconsistent. Never skipped silently.
    #[error("journal damaged in {} at byte offset {offset}: {reason} (run `varve fsck` for a full report; `varve fsck --repair` cuts the journal at this point, keeping a copy of what it removes)", segment.display())]
    Corrupt { segment: PathBuf, offset: u64, reason: String },

    /// Another process (or handle) holds the namespace's writer lock.
    #[error("namespace directory {} is locked by another writer (only one process may write a namespace; readers need no lock — open it read-only, or stop the other writer)", path.display())]
    Locked { path: PathBuf },

    /// A write was attempted on a read-only handle.
    #[error("namespace {namespace:?} is open read-only: open it for writing to {operation}")]
    ReadOnly { namespace: String, operation: &'static str },

    /// An earlier write or fsync failed, so the journal's durable state is
    /// unknown; the handle refuses further writes until reopened.
    #[error("namespace {namespace:?} refuses writes after an earlier I/O failure ({cause}); reopen it to recover from what is on disk")]
    Poisoned { namespace: String, cause: String },

    /// An operating-system I/O error, with what Varve was doing.
    #[error("I/O error while {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl LogError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        LogError::Io { context: context.into(), source }
    }
}

/// Attach context to an `io::Result`.
pub(crate) trait IoContext<T> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| LogError::io(what(), source))
    }
}
