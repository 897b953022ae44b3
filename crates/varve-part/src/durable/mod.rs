//! [`DurableMap`]: an [`ArtMap`](crate::ArtMap) made durable on Varve logs by a batch log
//! and incremental checkpoints (`seeds/002_…` §4.1 "Incremental
//! Checkpointing", made general). The byte formats are specified in
//! `docs/design.md` ("PART checkpoints") and frozen by
//! `tests/durable_format.rs`.
//!
//! ```
//! use std::sync::Arc;
//! use varve_log::{MemoryStore, Namespace, Store};
//! use varve_part::durable::{DurableMap, DurableOptions};
//! use varve_part::BatchOp;
//!
//! let ns: Arc<dyn Namespace> = MemoryStore::new().namespace("demo").unwrap();
//! let mut map = DurableMap::<u32>::open(ns.clone(), "counts", DurableOptions::default()).unwrap();
//! map.apply(vec![BatchOp::Put(b"apple".to_vec(), 1), BatchOp::Put(b"pear".to_vec(), 2)]).unwrap();
//! map.checkpoint().unwrap();
//! map.insert(b"plum", 3).unwrap(); // after the checkpoint: replayed from the batch log
//! drop(map);
//! let map = DurableMap::<u32>::open(ns, "counts", DurableOptions::default()).unwrap();
//! assert_eq!(map.get(b"plum"), Some(&3));
//! assert_eq!(map.len(), 3);
//! ```
//!
//! ## Logs (map `N`)
//!
//! - `N.batches.<g>`: one record per applied batch (the acknowledgement
//!   point: [`DurableMap::apply`] returns once the append is acknowledged,
//!   durable per the namespace's sync policy). A new file `<g>` starts with
//!   every full checkpoint.
//! - `N.blobs.<g>`: checkpoint blobs of generation `g`, many per record.
//! - `N.manifest`: one record per committed checkpoint; the **latest record
//!   is the checkpoint in force**. It holds the top of the tree (the nodes
//!   above the depth threshold) and where replay starts. It is appended
//!   last, so a crash before it leaves the previous checkpoint in force.
//!
//! ## Checkpoints
//!
//! A checkpoint works on a [`Snapshot`](crate::Snapshot): [`DurableMap::begin_checkpoint`]
//! takes it (O(1)) with the batch position it covers;
//! [`CheckpointJob::write`] (any thread, while the map goes on applying
//! batches) writes the blobs and syncs; [`DurableMap::commit_checkpoint`]
//! appends the manifest and then marks the written subtrees clean.
//!
//! **Grouping** (Figure 11): nodes less than `depth_threshold` inner nodes
//! below the root change on nearly every checkpoint and are written inline
//! in the manifest; each node at the threshold is the root of a *blob*
//! holding its whole subtree inline (leaves inline in their node), except
//! that the children of a node of more than [`BLOB_ENTRIES_MAX`] entries are
//! blobs of their own (a bound on blob size). Blobs are packed into records
//! of about [`RECORD_BYTES_TARGET`] bytes.
//!
//! **References.** A blob is named by (record seq, index in record) and
//! encoded as a delta from the previous reference in the same blob, so a
//! run of references into one record costs two bytes each. A blob root
//! whose in-memory checkpoint reference ([`raw`](crate::raw)) is set by a checkpoint of
//! the current generation is unchanged since: it is written as its
//! reference, not rewritten. A changed blob root whose node in the
//! checkpoint in force (kept as a base snapshot) has a blob is written as a
//! **delta**: that blob's reference and the child slots that differ (when
//! at most a third changed). With uniform updates of 1% of the keys of a
//! 1M-key map, 14% of the bottom nodes change, by about one leaf each:
//! deltas make the incremental checkpoint 2.4% of a full one (16.8% with
//! whole blobs). The cost: while the base is held, the first update of a
//! node after a checkpoint copies it (path copying) rather than mutating
//! it in place.
//!
//! **Generations** reclaim space: every `full_every`-th checkpoint, or when
//! the current generation has written more than twice the bytes of its
//! full checkpoint (its live fraction is then under about half), a full
//! checkpoint starts generation `g+1` (new blob and batch logs); once its
//! manifest is committed and synced, every log of older generations is
//! deleted. The latest manifest only references its own generation's blob
//! log and batch logs of its generation or later, so nothing it needs is
//! ever deleted.
//!
//! Limits: one writer per map name; checkpoint and reopen recurse once per
//! tree level, bounded by [`TREE_DEPTH_MAX`] (a deeper tree's checkpoint is
//! [`DurableError::TooDeep`]), on a thread of their own with a 256 MiB
//! stack (reserved, touched only as deep as the tree).
//!
//! ## Files
//!
//! - `mod.rs` (this file): the limits, errors, options and statistics, and
//!   the names of a map's logs;
//! - `map.rs`: [`DurableMap`] — open and replay, batches, generations, and
//!   beginning and committing checkpoints;
//! - `checkpoint.rs`: [`CheckpointJob`] and [`WrittenCheckpoint`], the
//!   checkpoint written off the map's thread;
//! - `format.rs`: what the encoder and decoder share — record tags,
//!   zigzag, the CRC seal, packed references, the manifest header (integers
//!   and varints are read and written with [`varve_log::codec`]);
//! - `encode.rs` / `decode.rs`: the records written and read back;
//! - `codec.rs`: [`Codec`], how values are stored.

mod checkpoint;
mod codec;
mod decode;
mod encode;
mod format;
mod map;

use varve_log::{LogError, Seq};

pub use checkpoint::{CheckpointJob, WrittenCheckpoint};
pub use codec::Codec;
pub use map::DurableMap;

/// Format version of batch, blob and manifest records (the first byte of
/// each). Must agree with `docs/design.md` and the fixture test.
pub const FORMAT_VERSION: u8 = 1;
/// Blob records are sealed once they reach this many bytes.
pub const RECORD_BYTES_TARGET: usize = 64 << 10;
/// Most blobs in one record: the index is 16 bits of a packed reference.
pub const BLOBS_PER_RECORD_MAX: usize = u16::MAX as usize;
/// A node with more entries than this does not hold its child nodes inline
/// in its blob: each becomes a blob of its own. Bounds a blob's size to
/// about this many entries (plus 256 children of the node itself).
pub const BLOB_ENTRIES_MAX: usize = 256;
/// Deepest tree a checkpoint writes or a reopen reads, in inner nodes. Both
/// recurse once per level; real keys stay far below it (4-byte keys: 4).
pub const TREE_DEPTH_MAX: usize = 1024;
/// Most manifests kept (older ones are trimmed; only the latest is live).
pub const MANIFESTS_KEPT: u64 = 8;
/// Highest blob record seq a packed reference can hold (32 bits).
const BLOB_SEQ_MAX: u64 = u32::MAX as u64;

/// Errors of [`DurableMap`] operations.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DurableError {
    /// The log layer failed (I/O, a missing log, limits …).
    #[error(transparent)]
    Log(#[from] LogError),
    /// A stored record does not decode or fails its checksum.
    #[error("corrupt record in log {log:?} seq {seq} at byte offset {offset}: {reason}")]
    Corrupt {
        /// The log holding the record (a batch, blob or manifest log).
        log: String,
        /// The record's seq in `log`.
        seq: Seq,
        /// Byte offset in the record where decoding failed.
        offset: usize,
        /// What is wrong there.
        reason: String,
    },
    /// A record of a format this build does not read.
    #[error("log {log:?} seq {seq} has format version {found}; this build reads version {expected}")]
    Version {
        /// The log holding the record.
        log: String,
        /// The record's seq in `log`.
        seq: Seq,
        /// The format version byte the record starts with.
        found: u8,
        /// The version this build reads: [`FORMAT_VERSION`].
        expected: u8,
    },
    /// An earlier batch append failed, so the log may hold a batch the map
    /// does not: updates are refused until the map is reopened.
    #[error("map {name:?} refuses updates after a failed batch append ({cause}); reopen it to recover from the logs")]
    Poisoned {
        /// The map's name.
        name: String,
        /// The error of the failed append, as text.
        cause: String,
    },
    /// Another checkpoint of this map is in flight (begun, not yet committed or dropped).
    #[error("a checkpoint of map {name:?} is already in flight")]
    CheckpointInFlight {
        /// The map's name.
        name: String,
    },
    /// The job was not begun on this map.
    #[error("checkpoint job of map {job:?} committed to map {name:?}")]
    ForeignJob {
        /// The map the job was committed to.
        name: String,
        /// The map the job was begun on.
        job: String,
    },
    /// The tree is deeper than [`TREE_DEPTH_MAX`] inner nodes.
    #[error("tree deeper than {TREE_DEPTH_MAX} inner nodes: checkpoints refuse it")]
    TooDeep,
    /// A packed reference limit was reached (blob log seq over 2^32).
    #[error("blob log {log:?} reached seq {seq}, over the reference limit {BLOB_SEQ_MAX}; a full checkpoint starts a new log")]
    ReferenceLimit {
        /// The blob log, `N.blobs.<g>`.
        log: String,
        /// The seq the next blob record would have taken.
        seq: Seq,
    },
}

type Result<T, E = DurableError> = std::result::Result<T, E>;

/// Options of a [`DurableMap`].
#[derive(Clone, Copy, Debug)]
pub struct DurableOptions {
    /// Inner-node depth at which blobs start (Figure 11): nodes above it are
    /// written whole in every manifest. Default 1: only the root. (With
    /// delta blobs, the root's children are cheaper as blobs written as
    /// deltas than inline in the manifest: on 1M uniform keys, 1% updates
    /// write 2.4% of a full checkpoint at 1, 4.1% at 2.) At least 1.
    pub depth_threshold: usize,
    /// Every this many checkpoints, a full checkpoint starts a new
    /// generation. Default 8. (Also when a generation has written more than
    /// twice its full checkpoint's bytes.)
    pub full_every: u64,
}

impl Default for DurableOptions {
    fn default() -> Self {
        DurableOptions { depth_threshold: 1, full_every: 8 }
    }
}

/// One record of a map's manifest log: a committed checkpoint, as
/// [`DurableMap::checkpoints`] lists them. The log keeps the last
/// [`MANIFESTS_KEPT`]; the latest is the checkpoint in force, the others are
/// history (their blobs may be gone with older generations, so they cannot
/// be loaded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckpointRecord {
    /// The record's seq in `N.manifest`.
    pub manifest_seq: Seq,
    /// Its number among the map's committed checkpoints, from 1.
    pub number: u64,
    /// Whether it was a full checkpoint (the first of its generation).
    pub full: bool,
    /// Its generation: the `g` of `N.blobs.<g>`.
    pub generation: u64,
    /// Replay after loading it starts in `N.batches.<batch_generation>` …
    pub batch_generation: u64,
    /// … after this seq: the batches up to it are in the checkpoint.
    pub batch_seq: Seq,
}

/// What one committed checkpoint wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckpointStats {
    /// Whether it was a full checkpoint (a new generation).
    pub full: bool,
    /// The generation written to, from 1: the `g` of `N.blobs.<g>`.
    pub generation: u64,
    /// Blobs written (unchanged subtrees are referenced, not counted).
    pub blobs: u64,
    /// Blob records appended.
    pub records: u64,
    /// Bytes of blob records appended.
    pub blob_bytes: u64,
    /// Bytes of the manifest record.
    pub manifest_bytes: u64,
    /// Subtrees referenced from earlier checkpoints instead of written
    /// (as a reference, or inherited unchanged by a delta blob).
    pub reused: u64,
    /// Blobs written as deltas against the previous checkpoint's blob.
    pub deltas: u64,
}

impl CheckpointStats {
    /// Everything the checkpoint appended.
    #[must_use]
    pub fn total_bytes(&self) -> u64 {
        self.blob_bytes + self.manifest_bytes
    }
}

fn manifest_log(name: &str) -> String {
    format!("{name}.manifest")
}
fn batches_log(name: &str, generation: u64) -> String {
    format!("{name}.batches.{generation}")
}
fn blobs_log(name: &str, generation: u64) -> String {
    format!("{name}.blobs.{generation}")
}

/// Stack for the recursive encoder and decoder ([`with_deep_stack`]):
/// [`TREE_DEPTH_MAX`] levels of three frames each, with room for
/// unoptimized builds (2 MiB, a spawned thread's default, overflows there
/// before 1,024 levels). Only the pages touched are committed.
const DEEP_STACK_BYTES: usize = 256 << 20;

/// Run `f` (a walk recursing once per tree level) on a thread with
/// [`DEEP_STACK_BYTES`] of stack, whatever stack the caller has; on the
/// caller's thread if no thread can be spawned.
fn with_deep_stack<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    let slot = std::sync::Mutex::new(Some(f));
    let run = || {
        let f = slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        f.map(|f| f())
    };
    let result = std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .name("varve-part-walk".into())
            .stack_size(DEEP_STACK_BYTES)
            .spawn_scoped(scope, run);
        match spawned.map(std::thread::ScopedJoinHandle::join) {
            Ok(Ok(result)) => result,
            Ok(Err(panic)) => std::panic::resume_unwind(panic),
            Err(_) => None, // no thread: run below, on this one
        }
    });
    match result {
        Some(result) => result,
        None => run().expect("the walk runs exactly once"),
    }
}

/// Decoder entry points for tests and fuzzing (not part of the API).
#[doc(hidden)]
pub mod testing {
    use super::decode::{blob_offsets, decode_batch, load_checkpoint};
    use super::{DurableError, Seq};

    /// Append the CRC32C a record ends with (to fuzz past the checksum).
    #[must_use]
    pub fn seal(body: Vec<u8>) -> Vec<u8> {
        super::format::seal(body)
    }
    use crate::map::BatchOp;
    use varve_log::Namespace;

    /// Decode a batch record; `Err` with a reason on bad bytes.
    pub fn decode_batch_record(bytes: &[u8]) -> Result<Vec<BatchOp<Vec<u8>>>, String> {
        decode_batch(bytes).map_err(|e| format!("{e:?}"))
    }

    /// Split a blob record into its blobs' byte ranges.
    pub fn decode_blob_record(bytes: &[u8]) -> Result<Vec<(usize, usize)>, String> {
        blob_offsets(bytes).map_err(|e| format!("{e:?}"))
    }

    /// Load a map from manifest bytes (blob references resolved in `ns`).
    pub fn load_manifest(ns: &dyn Namespace, name: &str, bytes: &[u8], seq: Seq) -> Result<usize, DurableError> {
        super::with_deep_stack(|| load_checkpoint::<Vec<u8>>(ns, name, bytes, seq)).map(|(_, map)| map.len())
    }
}
