//! The Log contract: what every backend must guarantee.
//!
//! A [`Store`] holds **namespaces**; a [`Namespace`] holds named **logs**. A log
//! is a dense sequence of opaque byte records. These rules hold on every backend
//! and are checked by the conformance suite ([`crate::conformance`]):
//!
//! 1. **Dense seqs.** The first record of a log has seq 1; each append takes the
//!    next seq; seqs are never reused, even after records are trimmed. Seq 0
//!    means "no record" (`latest` and `earliest` of an empty log are 0).
//! 2. **Atomic batches.** `append_batch` over several logs of one namespace lands
//!    all of its records or none, also across a crash.
//! 3. **Retention.** `Keep { k, Refuse }` fails appends with `Full` once k records
//!    exist (reads go on); `Keep { k, Overwrite }` trims the oldest so that at
//!    most k remain. Reading a trimmed seq is `Trimmed { earliest }`.
//! 4. **Crash safety** (durable backends). With `SyncPolicy::Always`, every acknowledged
//!    append survives a crash; a batch is all or nothing; after recovery each log
//!    is a prefix, in order, of what was appended; damage is never skipped
//!    silently: a record whose bytes are damaged, or whose segment is gone,
//!    reads as [`LogError::Lost`] (its seq is not reused), and the log's
//!    other records stay readable.
//! 5. **Names.** `[A-Za-z0-9_.-]`, 1..=200 bytes, not `.` or `..`; names that
//!    begin with `_` are reserved for the system and only created through
//!    [`LogConfig::system`].
//! 6. **Readers never block the writer**; any number of threads may read.
//! 7. **Atomic renames.** [`Namespace::rename_logs`] renames several logs in
//!    one step, also across a crash: every rename of the call or none. A
//!    log keeps its records, seqs, retention and readers under its new
//!    name; its `system` flag follows the name (`true` exactly when the new
//!    name begins with `_`). Scans and watches follow the log they opened,
//!    not its name.
//! 8. **Trims.** [`Namespace::trim`] removes a log's records below a seq,
//!    durably, in one step: `earliest` moves up, the records below it read
//!    as `Trimmed`, their seqs are never reused, the newest record always
//!    stays. What a backend reclaims (disk, memory) is its own business.
//!
//! The traits are object safe and synchronous, so a layer above holds an
//! `Arc<dyn Namespace>` and works unchanged over memory, the embedded journal,
//! or a network client.

use std::fmt;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::error::{LogError, Result};

/// A record's position in its log. The first record is 1; 0 means "no record".
pub type Seq = u64;

/// One record read back from a log.
#[derive(Clone, PartialEq, Eq)]
pub struct Record {
    /// The record's seq in its log (at least 1).
    pub seq: Seq,
    /// The record's bytes, exactly as appended.
    pub value: Bytes,
}

impl fmt::Debug for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Record").field("seq", &self.seq).field("len", &self.value.len()).finish()
    }
}

/// What happens when a `Keep` log already holds `k` records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OnFull {
    /// Appends fail with [`LogError::Full`]; reads go on (the `PEDaLS` rule).
    Refuse,
    /// The oldest records are trimmed (CSPOT's circular history).
    Overwrite,
}

/// How many records a log keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Retention {
    /// Keep every record; appends never fail for lack of room.
    Unbounded,
    /// Keep at most `k` records, then act as `on_full` says.
    Keep {
        /// Most records kept; at least 1 (0 is refused with `InvalidArgument`).
        k: u64,
        /// What an append does when the log already holds `k` records.
        on_full: OnFull,
    },
}

impl fmt::Display for Retention {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Retention::Unbounded => write!(f, "unbounded retention"),
            Retention::Keep { k, on_full: OnFull::Refuse } => write!(f, "keep {k}, refuse when full"),
            Retention::Keep { k, on_full: OnFull::Overwrite } => write!(f, "keep {k}, overwrite when full"),
        }
    }
}

/// The configuration a log is created with. Immutable for the log's life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LogConfig {
    /// How many records the log keeps, and what a full log does. Default `Unbounded`.
    pub retention: Retention,
    /// Set only by system layers that own `_`-prefixed logs (`_events`, …).
    pub system: bool,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig { retention: Retention::Unbounded, system: false }
    }
}

impl LogConfig {
    /// A log that keeps every record.
    #[must_use]
    pub fn unbounded() -> Self {
        Self::default()
    }

    /// A log that keeps at most `k` records and then acts as `on_full` says.
    #[must_use]
    pub fn keep(k: u64, on_full: OnFull) -> Self {
        LogConfig { retention: Retention::Keep { k, on_full }, system: false }
    }

    /// The same configuration, marked as belonging to the system (allows `_` names).
    #[must_use]
    pub fn system(self) -> Self {
        LogConfig { system: true, ..self }
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if let Retention::Keep { k: 0, .. } = self.retention {
            return Err(LogError::InvalidArgument { reason: "retention keep must be at least 1 record".into() });
        }
        Ok(())
    }
}

/// What a namespace knows about one log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogInfo {
    /// The log's name.
    pub name: String,
    /// The configuration the log was created with.
    pub config: LogConfig,
    /// Oldest seq still readable; 0 when the log holds no record.
    pub earliest: Seq,
    /// Newest seq; 0 when nothing was ever appended.
    pub latest: Seq,
}

impl LogInfo {
    /// Records currently readable.
    #[must_use]
    pub fn len(&self) -> u64 {
        if self.latest == 0 || self.earliest == 0 {
            0
        } else {
            self.latest - self.earliest + 1
        }
    }

    /// Whether no record is readable (`len() == 0`).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A range of seqs, both ends inclusive; object-safe stand-in for `RangeBounds<Seq>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqRange {
    /// First seq of the range, inclusive; [`SeqRange::from_bounds`] makes it at least 1.
    pub first: Seq,
    /// Last seq of the range, inclusive; `Seq::MAX` for a range without end.
    /// Scans refuse `first > last` with `InvalidArgument`.
    pub last: Seq,
}

impl SeqRange {
    /// Every seq.
    pub const ALL: SeqRange = SeqRange { first: 1, last: Seq::MAX };

    /// Convert any Rust range (`1..10`, `5..`, `..=7`, `..`).
    pub fn from_bounds(range: impl RangeBounds<Seq>) -> SeqRange {
        let first = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.saturating_add(1),
            Bound::Unbounded => 1,
        };
        let last = match range.end_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.saturating_sub(1),
            Bound::Unbounded => Seq::MAX,
        };
        SeqRange { first: first.max(1), last }
    }
}

impl<R: RangeBounds<Seq>> From<R> for SeqRange {
    fn from(range: R) -> Self {
        SeqRange::from_bounds(range)
    }
}

/// How durable an acknowledged append is. Set per namespace when it is opened.
///
/// (Named `SyncPolicy`, not `Sync` as in the architecture page, so that it
/// never shadows the `std::marker::Sync` trait in user code.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncPolicy {
    /// fsync before every acknowledgement; concurrent appenders share one fsync
    /// (group commit). Survives power loss.
    Always,
    /// Acknowledge once the OS has the bytes; fsync at most `max_delay` later,
    /// one fsync for everything written in that window. A process crash loses
    /// nothing; a power loss loses at most `max_delay` of acknowledged appends.
    /// [`Namespace::sync`] waits for durability on demand.
    Group(Duration),
    /// Never fsync on the write path (only on `sync()` and close). A process
    /// crash loses nothing; a power loss may lose anything not yet synced.
    Never,
}

/// Size limits. Every limit is named and enforced with [`LogError::TooLarge`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest single record. Default 16 MiB.
    pub record_bytes_max: u64,
    /// Largest total of one batch (records plus 20 bytes each). Default 64 MiB.
    pub batch_bytes_max: u64,
    /// Most records in one batch. Default 65,536.
    pub batch_records_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { record_bytes_max: 16 << 20, batch_bytes_max: 64 << 20, batch_records_max: 65_536 }
    }
}

impl Limits {
    /// Refuse a batch these limits do not take, as every backend does before
    /// writing anything: `InvalidArgument` for an empty batch, `TooLarge`
    /// for too many records, a record or a batch over its size. A client of
    /// a remote store checks here, so it never sends what would be refused.
    pub fn check_batch(&self, batch: &[(&str, &[u8])]) -> crate::Result<()> {
        crate::rules::check_batch(self, batch)
    }
}

/// The last seq a log can have (2⁶²): far beyond any real log, and far
/// enough below `u64::MAX` that seq arithmetic never overflows, even on a
/// damaged journal's claims. An append past it is `InvalidArgument`.
pub const SEQ_MAX: Seq = 1 << 62;

/// Longest log or namespace name, in bytes.
pub const NAME_BYTES_MAX: usize = 200;

/// Most `(from, to)` pairs one [`Namespace::rename_logs`] call takes (more is
/// `InvalidArgument`). Bounds the journal's rename frame (about 200 bytes a
/// pair, so under 1 MiB, far below `FRAME_BODY_BYTES_MAX`) and the work done
/// under the writer's lock; a repair swaps a handful of logs at a time.
pub const RENAMES_PER_CALL_MAX: usize = 4096;

/// Check a log or namespace name against the naming rules.
///
/// `system` allows the `_` prefix that is reserved for Varve's own logs.
pub fn validate_name(name: &str, system: bool) -> Result<()> {
    let invalid = |reason| Err(LogError::InvalidName { name: name.to_owned(), reason });
    if name.is_empty() {
        return invalid("a name must not be empty");
    }
    if name.len() > NAME_BYTES_MAX {
        return invalid("a name is at most 200 bytes");
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')) {
        return invalid("a name may use only the characters A-Z a-z 0-9 _ . -");
    }
    if name == "." || name == ".." {
        return invalid("`.` and `..` are not names");
    }
    if name.starts_with('_') && !system {
        return invalid("names beginning with `_` are reserved for the system; choose another first character");
    }
    Ok(())
}

/// A namespace: the unit of locality, ordering and atomicity; holds named logs.
///
/// All methods take `&self`; implementations are internally synchronized so a
/// namespace can be shared across threads as `Arc<dyn Namespace>`.
pub trait Namespace: Send + Sync {
    /// The namespace's name.
    fn name(&self) -> &str;

    /// Create a log. Idempotent for an identical config; `AlreadyExists` for a
    /// different one.
    fn create_log(&self, log: &str, config: LogConfig) -> Result<()>;

    /// Delete a log and all its records. Its name may then be created again,
    /// as a new log whose seqs start at 1.
    fn delete_log(&self, log: &str) -> Result<()>;

    /// Rename logs, all at once or not at all. Each `(from, to)`: `from` must
    /// exist; `to` must not exist unless it is itself a `from` of the same call
    /// (so a swap `[(a, b), (b, a)]` or a shift `[(a, _gen.a.1), (_shadow.a, a)]`
    /// is one step). A log keeps its records, seqs, retention and config under
    /// its new name, except `config.system`, which follows the name: `true`
    /// exactly when the new name begins with `_` (targets may be system names,
    /// so that old generations can be kept under `_gen.…`; a log renamed to a
    /// plain name is then created again idempotently with a plain config).
    /// After the call the old names are free (`LogNotFound`, or a log renamed
    /// into them); a log created under a freed name is a new log from seq 1.
    ///
    /// Scans and watches opened before the call follow the log they opened,
    /// not its name: a watch on `a` goes on yielding the records of the log
    /// now named `b`, never those of a log renamed or created into `a`.
    ///
    /// Errors, checked in this order before anything changes (a failed
    /// rename changes nothing): more than [`RENAMES_PER_CALL_MAX`] pairs
    /// (`InvalidArgument`); a name that breaks the naming rules
    /// (`InvalidName`; `_` names are allowed on both sides); a name twice as
    /// `from` or twice as `to` (`InvalidArgument`); an unknown `from`
    /// (`LogNotFound`); a `to` that exists and is not renamed away by the same
    /// call (`RenameTargetExists`). A backend that cannot rename atomically
    /// refuses every call with `Unsupported` (the NATS backend: a log's name
    /// is its subject). An empty list is a no-op that succeeds, and so is
    /// `(a, a)`.
    fn rename_logs(&self, renames: &[(&str, &str)]) -> Result<()>;

    /// Remove the records of `log` below seq `before` (Kafka's
    /// `deleteRecords`, a NATS stream's purge up to a sequence): afterwards
    /// `earliest` is `before` (or higher, if retention had trimmed further),
    /// reading a seq below it is `Trimmed`, and scans start at it. Durable
    /// like an append, and final: the trimmed records never come back, also
    /// across a crash. Returns the new `earliest`.
    ///
    /// `before` at or below `earliest` changes nothing (a trim repeated is
    /// a no-op). Errors, before anything changes: an unknown log
    /// (`LogNotFound`); `before` above `latest` (`InvalidArgument`: the
    /// newest record always stays, so a log's `latest` stays readable and
    /// seqs go on from it); a log with `Keep { Refuse }` retention, whose
    /// first k records are kept by design (`InvalidArgument`). A backend that
    /// does not trim refuses with `Unsupported`.
    fn trim(&self, log: &str, before: Seq) -> Result<Seq>;

    /// Every log, in name order.
    fn list_logs(&self) -> Result<Vec<LogInfo>>;

    /// One log's configuration and bounds.
    fn log_info(&self, log: &str) -> Result<LogInfo>;

    /// Append one record; returns its seq.
    fn append(&self, log: &str, value: &[u8]) -> Result<Seq> {
        Ok(self.append_batch(&[(log, value)])?[0])
    }

    /// Append records to one or more logs, all or nothing. Returns the seq of
    /// each record in input order; records for one log get consecutive seqs.
    fn append_batch(&self, batch: &[(&str, &[u8])]) -> Result<Vec<Seq>>;

    /// Append only if the log's latest seq is still `expected_latest`;
    /// `Conflict { actual }` otherwise. Optimistic single-writer updates.
    fn append_if(&self, log: &str, expected_latest: Seq, value: &[u8]) -> Result<Seq>;

    /// Append `batch` (all or nothing) only if each `(log, latest)` of
    /// `expected` still holds; `Conflict` for the first that does not, and
    /// nothing appended. Every log named in `expected` must be one the batch
    /// appends to (`InvalidArgument` otherwise). What writers sharing a
    /// namespace use when records of a batch name each other's seqs (the
    /// runtime's triggers): the seqs they predicted are the seqs they get.
    fn append_batch_if(&self, batch: &[(&str, &[u8])], expected: &[(&str, Seq)]) -> Result<Vec<Seq>>;

    /// The record at `seq`.
    fn get(&self, log: &str, seq: Seq) -> Result<Bytes>;

    /// The newest seq, 0 when the log is empty.
    fn latest(&self, log: &str) -> Result<Seq> {
        Ok(self.log_info(log)?.latest)
    }

    /// The oldest readable seq, 0 when the log holds no record.
    fn earliest(&self, log: &str) -> Result<Seq> {
        Ok(self.log_info(log)?.earliest)
    }

    /// Records with seqs in `range`, in order. The range is clipped to what
    /// exists when the scan starts; a start below `earliest` is `Trimmed`.
    fn scan(&self, log: &str, range: SeqRange) -> Result<Scan<'_>>;

    /// Records from `from` on: first those that exist, then each new one as it
    /// lands. Blocks without spinning.
    fn watch(&self, log: &str, from: Seq) -> Result<Watch>;

    /// Make every acknowledged append durable now, whatever the sync policy.
    fn sync(&self) -> Result<()>;
}

/// An iterator over a range of records.
pub type Scan<'a> = Box<dyn Iterator<Item = Result<Record>> + Send + 'a>;

/// A store: a set of namespaces.
pub trait Store: Send + Sync {
    /// Open (creating if needed) a namespace.
    fn namespace(&self, name: &str) -> Result<Arc<dyn Namespace>>;

    /// Names of the namespaces that exist, sorted.
    fn list_namespaces(&self) -> Result<Vec<String>>;
}

/// Where a [`Watch`] gets records from. Backends implement this; users call
/// [`Watch`].
pub trait WatchSource: Send {
    /// Wait at most `timeout` (forever if `None`) for the record at `seq`.
    /// `Ok(None)` on timeout.
    fn wait_for(&mut self, seq: Seq, timeout: Option<Duration>) -> Result<Option<Record>>;
}

/// Records of one log from a starting seq on, existing ones first, then new
/// ones as they are appended. Also a blocking [`Iterator`].
pub struct Watch {
    source: Box<dyn WatchSource>,
    next_seq: Seq,
}

impl Watch {
    /// Build a watch over a source, starting at `from` (0 is read as 1).
    #[must_use]
    pub fn new(source: Box<dyn WatchSource>, from: Seq) -> Watch {
        Watch { source, next_seq: from.max(1) }
    }

    /// The seq the next record will have.
    #[must_use]
    pub fn next_seq(&self) -> Seq {
        self.next_seq
    }

    /// Go on from `seq`, the records before it having come another way (a
    /// reader shared by many watches); a watch never moves back.
    pub fn skip_to(&mut self, seq: Seq) {
        self.next_seq = self.next_seq.max(seq);
    }

    /// The next record, waiting at most `timeout`; `Ok(None)` on timeout.
    pub fn next_timeout(&mut self, timeout: Duration) -> Result<Option<Record>> {
        self.advance(Some(timeout))
    }

    fn advance(&mut self, timeout: Option<Duration>) -> Result<Option<Record>> {
        let record = match self.source.wait_for(self.next_seq, timeout) {
            Ok(record) => record,
            Err(error) => {
                // A run of lost records is reported once; the watch goes on after it.
                if let LogError::Lost { last, .. } = &error {
                    self.next_seq = self.next_seq.max(last + 1);
                }
                return Err(error);
            }
        };
        if let Some(record) = &record {
            debug_assert_eq!(record.seq, self.next_seq);
            self.next_seq = record.seq + 1;
        }
        Ok(record)
    }
}

impl Iterator for Watch {
    type Item = Result<Record>;

    /// Blocks until the next record lands; yields an error (and then goes on
    /// trying) if the log is deleted or the watcher falls behind retention,
    /// and one `Lost` error for a run of lost records, then the records after it.
    fn next(&mut self) -> Option<Self::Item> {
        self.advance(None).transpose()
    }
}
