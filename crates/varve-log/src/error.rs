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
    NamespaceNotFound {
        /// The namespace's name.
        namespace: String,
    },

    /// The log does not exist in this namespace.
    #[error("log {log:?} not found in namespace {namespace:?}: create it first (`varve log create {log}`) or check the name")]
    LogNotFound {
        /// The namespace that was searched.
        namespace: String,
        /// The log's name.
        log: String,
    },

    /// The seq is beyond the latest record of the log (or is 0, which names no record).
    #[error("log {log:?} has no record at seq {seq} (latest is {latest}; seqs start at 1)")]
    SeqNotFound {
        /// The log read.
        log: String,
        /// The seq asked for.
        seq: Seq,
        /// The log's latest seq at the time; 0 when nothing was ever appended.
        latest: Seq,
    },

    /// The record existed but retention has trimmed it.
    #[error("log {log:?} seq {seq} was trimmed by retention; the earliest record still kept is seq {earliest}")]
    Trimmed {
        /// The log read.
        log: String,
        /// The seq asked for (below `earliest`).
        seq: Seq,
        /// The oldest seq the log still keeps.
        earliest: Seq,
    },

    /// A `Keep { on_full: Refuse }` log already holds `keep` records.
    #[error("log {log:?} is full: its retention keeps at most {keep} and refuses more appends (reads still work; create a larger or overwrite log to go on)")]
    Full {
        /// The log appended to.
        log: String,
        /// The log's retention `k`, in records.
        keep: u64,
    },

    /// `append_if` found a different latest seq than expected.
    #[error("log {log:?} changed under you: expected latest seq {expected}, found {actual}; re-read and retry")]
    Conflict {
        /// The log appended to.
        log: String,
        /// The latest seq the caller expected (`append_if`'s `expected_latest`).
        expected: Seq,
        /// The log's latest seq when the append was tried.
        actual: Seq,
    },

    /// A log or namespace name breaks the naming rules.
    #[error("invalid name {name:?}: {reason}")]
    InvalidName {
        /// The name as given.
        name: String,
        /// Which naming rule it breaks.
        reason: &'static str,
    },

    /// A record, batch or frame is larger than its configured limit.
    ///
    /// `what` is `"record"`, `"batch"` (bytes: records plus
    /// [`crate::RECORD_OVERHEAD_BYTES`] each) or `"batch (in records)"` (a count).
    #[error("{}", too_large_message(what, *size, *limit))]
    TooLarge {
        /// `"record"`, `"batch"` or `"batch (in records)"`, as above.
        what: &'static str,
        /// The size found: bytes, or records for `"batch (in records)"`.
        size: u64,
        /// The limit it exceeds, in the same unit: a field of [`crate::Limits`].
        limit: u64,
    },

    /// `create_log` for an existing name with a different configuration.
    #[error("log {log:?} already exists with {existing}, not {requested}: delete it first or use the existing configuration")]
    AlreadyExists {
        /// The log's name.
        log: String,
        /// The existing log's retention, as text.
        existing: String,
        /// The retention asked for, as text.
        requested: String,
    },

    /// `rename_logs` would rename a log onto a name another log holds, which
    /// the same call does not rename away.
    #[error("cannot rename log {from:?} to {to:?} in namespace {namespace:?}: a log named {to:?} exists and this call does not rename it away; delete it first, or rename it in the same call (a swap or a shift is one call)")]
    RenameTargetExists {
        /// The namespace.
        namespace: String,
        /// The log that was to be renamed.
        from: String,
        /// The name it was to take, which another log holds.
        to: String,
    },

    /// The backend cannot do this operation at all; retrying will not help.
    #[error("{target} cannot {operation}: {reason}")]
    Unsupported {
        /// The store, as its URI or backend name (`nats://127.0.0.1:4222`).
        target: String,
        /// What was asked, as a phrase (`"rename logs"`).
        operation: String,
        /// Why not, and what to do instead.
        reason: String,
    },

    /// The arguments make no sense (an empty batch, a bad range, keep = 0 …).
    #[error("invalid argument: {reason}")]
    InvalidArgument {
        /// What is wrong with them.
        reason: String,
    },

    /// Records `first..=last` of a log are in no intact frame: their bytes
    /// are damaged, or the segment that held them is missing. The log's other
    /// records stay readable, and these seqs are never reused. Scans and
    /// watches yield this once per run of lost records and go on after it.
    #[error("{}", lost_message(log, *first, *last, cause))]
    Lost {
        /// The log the records belong to.
        log: String,
        /// The first lost seq.
        first: Seq,
        /// The last lost seq, inclusive (`first` when one record is lost).
        last: Seq,
        /// Where the records were, and why they are lost.
        cause: Box<LossCause>,
    },

    /// The disk (or quota) is full. Nothing was written; the namespace goes on.
    #[error("no space left on the device for {bytes} more bytes of {}: free some space (delete logs, lower their retention, or open with a smaller segment size) and retry; nothing was written", path.display())]
    NoSpace {
        /// The file that could not grow.
        path: PathBuf,
        /// How many more bytes it needed.
        bytes: u64,
    },

    /// A segment written by a newer Varve, in a format this build does not read.
    #[error("{} at byte offset {offset} cannot be read by this build: {reason}", segment.display())]
    UnsupportedFormat {
        /// The segment file.
        segment: PathBuf,
        /// Byte offset in `segment` of the header this build does not read.
        offset: u64,
        /// What this build does not read (the format found).
        reason: String,
    },

    /// Another process (or handle) holds the namespace's writer lock.
    #[error("namespace directory {} is locked by another writer (only one process may write a namespace; readers need no lock — open it read-only, or stop the other writer)", path.display())]
    Locked {
        /// The namespace directory whose lock is held.
        path: PathBuf,
    },

    /// A write was attempted on a read-only handle.
    #[error("namespace {namespace:?} is open read-only: open it for writing to {operation}")]
    ReadOnly {
        /// The namespace's name.
        namespace: String,
        /// What was attempted, as a phrase (`"append"`, `"create a log"`).
        operation: &'static str,
    },

    /// An earlier write or fsync failed, so the journal's durable state is
    /// unknown; the handle refuses further writes until reopened.
    #[error("namespace {namespace:?} refuses writes after an earlier I/O failure ({cause}); reopen it to recover from what is on disk")]
    Poisoned {
        /// The namespace's name.
        namespace: String,
        /// The failure that poisoned the handle, as text.
        cause: String,
    },

    /// A remote store could not be reached (connection refused or reset
    /// before the request was sent, the server stopping, a namespace that
    /// another writer holds). Nothing was done; retrying later is safe.
    #[error("{target} is unavailable: {reason}; check that the server runs there and the address is right, then retry (nothing was done)")]
    Unavailable {
        /// The store or server, as its URI (`varve://127.0.0.1:7070`).
        target: String,
        /// What went wrong, as text.
        reason: String,
    },

    /// A write reached a remote store but its answer was lost (the
    /// connection broke, the server was killed): it may or may not have landed.
    #[error("the answer to {operation} at {target} was lost ({reason}): it may or may not have landed; read the log's latest records to find out (appends sent with a request id can simply be sent again)")]
    OutcomeUnknown {
        /// The store or server, as its URI.
        target: String,
        /// What was sent, as a phrase (`"append to log t"`).
        operation: String,
        /// How the answer was lost, as text.
        reason: String,
    },

    /// A remote store refused the request's credentials: no token, an
    /// unknown one, or one that does not allow this operation or namespace.
    #[error("{target} refused the request: {reason}")]
    Denied {
        /// The store or server, as its URI.
        target: String,
        /// Why, as the server said it.
        reason: String,
    },

    /// A remote store answered something this client does not understand
    /// (another program on that port, or an incompatible version).
    #[error("unexpected answer from {target}: {reason}; is it a `varve serve` of a compatible version?")]
    Protocol {
        /// The store or server, as its URI.
        target: String,
        /// What was unexpected, as text.
        reason: String,
    },

    /// An operating-system I/O error, with what Varve was doing.
    #[error("I/O error while {context}: {source}")]
    Io {
        /// What Varve was doing, as a phrase (`"reading <path>"`).
        context: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
}

fn too_large_message(what: &str, size: u64, limit: u64) -> String {
    let (subject, measure, limit_name) = match what {
        "batch (in records)" => {
            ("batch", format!("has {size} records, over the limit of {limit} records"), "batch_records_max")
        }
        "batch" => (
            "batch",
            format!(
                "is {size} bytes (its records plus {} bytes each), over the limit of {limit} bytes",
                crate::RECORD_OVERHEAD_BYTES
            ),
            "batch_bytes_max",
        ),
        _ => (what, format!("is {size} bytes, over the limit of {limit} bytes"), "record_bytes_max"),
    };
    format!(
        "{subject} {measure}: split it, or raise the limit when opening the store ({limit_name}: Rust `Limits`, Python `varve.open`, CLI `--{}`)",
        limit_name.replace('_', "-")
    )
}

/// Why records are lost: the damaged bytes, or the missing segment, that held them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LossCause {
    /// The segment file that held them (or would have: a missing one).
    pub segment: PathBuf,
    /// Where in it, when known.
    pub offset: Option<u64>,
    /// Why they are lost, as text.
    pub reason: String,
}

impl std::fmt::Display for LossCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.offset {
            Some(offset) => write!(f, "{}; {} at byte offset {offset}", self.reason, self.segment.display()),
            None => write!(f, "{}; {}", self.reason, self.segment.display()),
        }
    }
}

fn lost_message(log: &str, first: Seq, last: Seq, cause: &LossCause) -> String {
    let seqs = if first == last { format!("seq {first} is") } else { format!("seqs {first}..={last} are") };
    format!(
        "log {log:?} {seqs} lost ({cause}): the log's other records are readable; `varve fsck` lists every loss, and `varve fsck --repair` salvages what is intact and records the loss"
    )
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
