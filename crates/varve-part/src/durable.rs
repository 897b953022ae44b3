//! [`DurableMap`]: an [`ArtMap`] made durable on Varve logs by a batch log
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
//! A checkpoint works on a [`Snapshot`]: [`DurableMap::begin_checkpoint`]
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
//! whose in-memory checkpoint reference ([`raw`]) is set by a checkpoint of
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

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use varve_log::{LogConfig, LogError, Namespace, OnFull, Seq, SeqRange};

use crate::map::{ArtMap, BatchOp, Snapshot};
use crate::raw::{self, ChildRef, NodeRef, OwnedChild};

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

/// Values stored in a [`DurableMap`]: a self-delimiting byte encoding.
pub trait Codec: Sized {
    /// Append the encoding of `self` to `out`.
    fn encode(&self, out: &mut Vec<u8>);
    /// Decode one value from the front of `input`, advancing it; `None` on
    /// bad or short bytes (never panic).
    fn decode(input: &mut &[u8]) -> Option<Self>;
}

impl Codec for u32 {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn decode(input: &mut &[u8]) -> Option<Self> {
        let (head, rest) = input.split_first_chunk::<4>()?;
        *input = rest;
        Some(u32::from_le_bytes(*head))
    }
}

impl Codec for u64 {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn decode(input: &mut &[u8]) -> Option<Self> {
        let (head, rest) = input.split_first_chunk::<8>()?;
        *input = rest;
        Some(u64::from_le_bytes(*head))
    }
}

/// Byte strings: a LEB128 length, then the bytes.
impl Codec for Vec<u8> {
    fn encode(&self, out: &mut Vec<u8>) {
        put_varint(out, self.len() as u64);
        out.extend_from_slice(self);
    }
    fn decode(input: &mut &[u8]) -> Option<Self> {
        let mut reader = Reader::new(input);
        let len = usize::try_from(reader.varint().ok()?).ok()?;
        let bytes = reader.take(len).ok()?.to_vec();
        *input = &input[reader.pos..];
        Some(bytes)
    }
}

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
        log: String,
        seq: Seq,
        offset: usize,
        reason: String,
    },
    /// A record of a format this build does not read.
    #[error(
        "log {log:?} seq {seq} has format version {found}; this build reads version {expected}"
    )]
    Version {
        log: String,
        seq: Seq,
        found: u8,
        expected: u8,
    },
    /// An earlier batch append failed, so the log may hold a batch the map
    /// does not: updates are refused until the map is reopened.
    #[error("map {name:?} refuses updates after a failed batch append ({cause}); reopen it to recover from the logs")]
    Poisoned { name: String, cause: String },
    /// Another checkpoint of this map is in flight (begun, not yet committed or dropped).
    #[error("a checkpoint of map {name:?} is already in flight")]
    CheckpointInFlight { name: String },
    /// The job was not begun on this map.
    #[error("checkpoint job of map {job:?} committed to map {name:?}")]
    ForeignJob { name: String, job: String },
    /// The tree is deeper than [`TREE_DEPTH_MAX`] inner nodes.
    #[error("tree deeper than {TREE_DEPTH_MAX} inner nodes: checkpoints refuse it")]
    TooDeep,
    /// A packed reference limit was reached (blob log seq over 2^32).
    #[error("blob log {log:?} reached seq {seq}, over the reference limit {BLOB_SEQ_MAX}; a full checkpoint starts a new log")]
    ReferenceLimit { log: String, seq: Seq },
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
        DurableOptions {
            depth_threshold: 1,
            full_every: 8,
        }
    }
}

/// What one committed checkpoint wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckpointStats {
    /// Whether it was a full checkpoint (a new generation).
    pub full: bool,
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

/// The committed checkpoint in force (decoded manifest header).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Committed {
    number: u64,
    generation: u64,
    batch_generation: u64,
    batch_seq: Seq,
    checkpoints_in_generation: u64,
    generation_full_bytes: u64,
    generation_bytes: u64,
}

/// A map durable on logs. Reads go to the in-memory [`ArtMap`] through
/// `Deref`; updates append one batch record, then apply in memory.
///
/// Complexity: updates as [`ArtMap::apply`] plus one append; an incremental
/// checkpoint writes the changed blobs only (O(changed subtrees + top));
/// `open` reads the latest checkpoint's blobs and replays later batches.
pub struct DurableMap<V> {
    ns: Arc<dyn Namespace>,
    name: String,
    options: DurableOptions,
    map: ArtMap<V>,
    committed: Option<Committed>,
    batch_generation: u64,
    generation_next: u64,
    poisoned: Option<String>,
    in_flight: Arc<AtomicBool>,
    /// The tree of the checkpoint in force (its blob roots carry their
    /// references): changed blob roots are written as deltas against it.
    /// Holding it makes the first update of each node after a checkpoint
    /// copy the node (path copying) instead of mutating it in place.
    base: Option<Snapshot<V>>,
}

impl<V> std::ops::Deref for DurableMap<V> {
    type Target = ArtMap<V>;
    fn deref(&self) -> &ArtMap<V> {
        &self.map
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

/// Generations of the `N.batches.<g>` and `N.blobs.<g>` logs that exist.
fn list_generations(ns: &dyn Namespace, name: &str) -> Result<(Vec<u64>, Vec<u64>)> {
    let (batches_prefix, blobs_prefix) = (format!("{name}.batches."), format!("{name}.blobs."));
    let (mut batches, mut blobs) = (Vec::new(), Vec::new());
    for info in ns.list_logs()? {
        if let Some(g) = info
            .name
            .strip_prefix(&batches_prefix)
            .and_then(|g| g.parse().ok())
        {
            batches.push(g);
        } else if let Some(g) = info
            .name
            .strip_prefix(&blobs_prefix)
            .and_then(|g| g.parse().ok())
        {
            blobs.push(g);
        }
    }
    batches.sort_unstable();
    blobs.sort_unstable();
    Ok((batches, blobs))
}

impl<V: Codec + Clone + Send + Sync + 'static> DurableMap<V> {
    /// Open (or create) map `name` in `ns`: load the checkpoint in force,
    /// replay every later batch, and delete logs of older generations that
    /// a crash left behind.
    ///
    /// Errors: [`DurableError::Log`], [`DurableError::Corrupt`] /
    /// [`DurableError::Version`] naming the record that does not decode.
    pub fn open(
        ns: Arc<dyn Namespace>,
        name: &str,
        mut options: DurableOptions,
    ) -> Result<DurableMap<V>> {
        // The root is never a blob root: it changes on every checkpoint.
        options.depth_threshold = options.depth_threshold.max(1);
        let manifest = manifest_log(name);
        ns.create_log(
            &manifest,
            LogConfig::keep(MANIFESTS_KEPT, OnFull::Overwrite),
        )?;
        let latest = ns.latest(&manifest)?;
        let (committed, map) = if latest == 0 {
            (None, ArtMap::new())
        } else {
            let bytes = ns.get(&manifest, latest)?;
            let ns_ref = ns.as_ref();
            let (committed, map) =
                with_deep_stack(|| load_checkpoint::<V>(ns_ref, name, &bytes, latest))?;
            (Some(committed), map)
        };
        let (mut batch_gens, blob_gens) = list_generations(ns.as_ref(), name)?;
        // Only the manifest's blob log is live: older ones are left by a
        // crash between a full checkpoint's manifest and its cleanup, newer
        // ones by full checkpoints that never committed. (Their generation
        // numbers are not reused: `generation_next` counts them below.)
        let committed_generation = committed.map(|c| c.generation);
        for &g in blob_gens
            .iter()
            .filter(|&&g| Some(g) != committed_generation)
        {
            ns.delete_log(&blobs_log(name, g))?;
        }
        if let Some(c) = committed {
            // Batches before the checkpoint's batch log are all in it.
            for &g in batch_gens.iter().filter(|&&g| g < c.batch_generation) {
                ns.delete_log(&batches_log(name, g))?;
            }
            batch_gens.retain(|&g| g >= c.batch_generation);
        }
        let generation_next = batch_gens
            .iter()
            .chain(&blob_gens)
            .copied()
            .chain(committed.map(|c| c.generation))
            .max()
            .unwrap_or(0)
            + 1;
        let mut map_state = DurableMap {
            ns,
            name: name.to_owned(),
            options,
            map,
            committed,
            batch_generation: 0,
            generation_next,
            poisoned: None,
            in_flight: Arc::new(AtomicBool::new(false)),
            base: None,
        };
        if committed.is_some() {
            map_state.base = Some(map_state.map.snapshot());
        }
        if batch_gens.is_empty() {
            let g = committed.map_or(1, |c| c.batch_generation);
            map_state
                .ns
                .create_log(&batches_log(name, g), LogConfig::unbounded())?;
            batch_gens.push(g);
            map_state.generation_next = map_state.generation_next.max(g + 1);
        }
        for &g in &batch_gens {
            let from = match committed {
                Some(c) if c.batch_generation == g => c.batch_seq + 1,
                _ => 1,
            };
            map_state.replay(&batches_log(name, g), from)?;
        }
        map_state.batch_generation = batch_gens.last().copied().unwrap_or(1); // never empty here
        Ok(map_state)
    }

    fn replay(&mut self, log: &str, from: Seq) -> Result<()> {
        if from > self.ns.latest(log)? {
            return Ok(());
        }
        for record in self.ns.scan(log, SeqRange::from_bounds(from..))? {
            let record = record?;
            let ops = decode_batch::<V>(&record.value).map_err(|e| e.at(log, record.seq))?;
            self.map.apply(ops);
        }
        Ok(())
    }

    /// The map's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// An O(1) read-only version of the current contents.
    #[must_use]
    pub fn snapshot(&self) -> Snapshot<V> {
        self.map.snapshot()
    }

    /// Apply a batch: append it as one record (returns once durable per the
    /// namespace's sync policy), then apply it in memory. Returns the
    /// batch's seq in its log. All or nothing, also across a crash.
    ///
    /// Errors: the append's [`DurableError::Log`]; after it, the map is
    /// [`DurableError::Poisoned`] for updates (the record may have landed).
    pub fn apply(&mut self, ops: Vec<BatchOp<V>>) -> Result<Seq> {
        if let Some(cause) = &self.poisoned {
            return Err(DurableError::Poisoned {
                name: self.name.clone(),
                cause: cause.clone(),
            });
        }
        let record = encode_batch(&ops);
        let seq = match self
            .ns
            .append(&batches_log(&self.name, self.batch_generation), &record)
        {
            Ok(seq) => seq,
            Err(e) => {
                self.poisoned = Some(e.to_string());
                return Err(e.into());
            }
        };
        self.map.apply(ops);
        Ok(seq)
    }

    /// Insert one entry (a batch of one).
    pub fn insert(&mut self, key: &[u8], value: V) -> Result<Seq> {
        self.apply(vec![BatchOp::Put(key.to_vec(), value)])
    }

    /// Remove one key (a batch of one).
    pub fn remove(&mut self, key: &[u8]) -> Result<Seq> {
        self.apply(vec![BatchOp::Delete(key.to_vec())])
    }

    /// Whether the next checkpoint will be full (start a new generation).
    #[must_use]
    pub fn next_checkpoint_is_full(&self) -> bool {
        match self.committed {
            None => true,
            Some(c) => {
                c.checkpoints_in_generation >= self.options.full_every
                    || c.generation_bytes > 2 * c.generation_full_bytes
            }
        }
    }

    /// Take a snapshot to checkpoint and the batch position it covers. A
    /// full checkpoint (see [`DurableMap::next_checkpoint_is_full`]) first
    /// creates the new generation's logs and moves batch appends there.
    ///
    /// Errors: [`DurableError::CheckpointInFlight`], or creating logs failed.
    pub fn begin_checkpoint(&mut self) -> Result<CheckpointJob<V>> {
        let full = self.next_checkpoint_is_full();
        self.begin(full)
    }

    /// As [`DurableMap::begin_checkpoint`], always full.
    pub fn begin_full_checkpoint(&mut self) -> Result<CheckpointJob<V>> {
        self.begin(true)
    }

    fn begin(&mut self, full: bool) -> Result<CheckpointJob<V>> {
        if self.in_flight.swap(true, Ordering::AcqRel) {
            return Err(DurableError::CheckpointInFlight {
                name: self.name.clone(),
            });
        }
        let guard = InFlight(self.in_flight.clone());
        let committed = self.committed.unwrap_or_default();
        let (generation, batch_generation, batch_seq) = if full {
            let g = self.generation_next;
            self.generation_next += 1;
            let batches = batches_log(&self.name, g);
            self.ns.create_log(&batches, LogConfig::unbounded())?;
            // `generation_next` is above every log that exists, so the log is
            // new; replay would apply its batches twice otherwise.
            if self.ns.latest(&batches)? != 0 {
                return Err(DurableError::Corrupt {
                    log: batches,
                    seq: 1,
                    offset: 0,
                    reason: "a new generation's batch log already holds batches".into(),
                });
            }
            self.ns
                .create_log(&blobs_log(&self.name, g), LogConfig::unbounded())?;
            // From here on batches go to generation g; the snapshot below
            // holds every batch applied before.
            self.batch_generation = g;
            (g, g, 0)
        } else {
            let latest = self
                .ns
                .latest(&batches_log(&self.name, self.batch_generation))?;
            (committed.generation, self.batch_generation, latest)
        };
        let header = Committed {
            number: committed.number + 1,
            generation,
            batch_generation,
            batch_seq,
            checkpoints_in_generation: if full {
                1
            } else {
                committed.checkpoints_in_generation + 1
            },
            // A new generation counts its own bytes (set at commit).
            generation_full_bytes: if full {
                0
            } else {
                committed.generation_full_bytes
            },
            generation_bytes: if full { 0 } else { committed.generation_bytes },
        };
        Ok(CheckpointJob {
            ns: self.ns.clone(),
            name: self.name.clone(),
            snapshot: self.map.snapshot(),
            base: if full { None } else { self.base.clone() },
            header,
            full,
            depth_threshold: self.options.depth_threshold,
            in_flight: guard,
        })
    }

    /// Commit a written checkpoint: append its manifest (the commit point)
    /// and sync, mark its subtrees clean, and after a full checkpoint
    /// delete every log of older generations.
    ///
    /// Errors: the manifest append or sync failed (the checkpoint may or may
    /// not be in force; either is consistent, and the map goes on), or the
    /// cleanup failed (retried by the next full checkpoint or `open`).
    pub fn commit_checkpoint(&mut self, written: WrittenCheckpoint<V>) -> Result<CheckpointStats> {
        if written.job.name != self.name || !Arc::ptr_eq(&written.job.in_flight.0, &self.in_flight)
        {
            return Err(DurableError::ForeignJob {
                name: self.name.clone(),
                job: written.job.name.clone(),
            });
        }
        let WrittenCheckpoint {
            job,
            top,
            mut stats,
            written: written_ids,
        } = written;
        let mut header = job.header;
        header.generation_bytes += stats.blob_bytes;
        if job.full {
            header.generation_full_bytes = stats.blob_bytes;
        }
        let record = encode_manifest(&header, &top);
        stats.manifest_bytes = record.len() as u64;
        self.ns.append(&manifest_log(&self.name), &record)?;
        self.ns.sync()?;
        self.committed = Some(header);
        if let Some(ChildRef::Node(node)) = raw::root(&job.snapshot) {
            let tag = job.clean_tag();
            with_deep_stack(|| mark_written(node, &written_ids, tag));
        }
        self.base = Some(job.snapshot.clone());
        drop(job);
        if stats.full {
            let (batch_gens, blob_gens) = list_generations(self.ns.as_ref(), &self.name)?;
            for g in blob_gens.into_iter().filter(|&g| g < header.generation) {
                self.ns.delete_log(&blobs_log(&self.name, g))?;
            }
            for g in batch_gens
                .into_iter()
                .filter(|&g| g < header.batch_generation)
            {
                self.ns.delete_log(&batches_log(&self.name, g))?;
            }
        }
        Ok(stats)
    }

    /// Begin, write and commit a checkpoint on this thread.
    pub fn checkpoint(&mut self) -> Result<CheckpointStats> {
        let job = self.begin_checkpoint()?;
        let written = job.write()?;
        self.commit_checkpoint(written)
    }

    /// A full checkpoint on this thread (starts a new generation).
    pub fn checkpoint_full(&mut self) -> Result<CheckpointStats> {
        let job = self.begin_full_checkpoint()?;
        let written = job.write()?;
        self.commit_checkpoint(written)
    }
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
        let f = slot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
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

/// Clears the map's in-flight flag when the job (or its written form) drops.
struct InFlight(Arc<AtomicBool>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// A checkpoint in progress: a snapshot and the batch position it covers.
/// `Send`: [`CheckpointJob::write`] may run on any thread while the map
/// goes on applying batches.
pub struct CheckpointJob<V> {
    ns: Arc<dyn Namespace>,
    name: String,
    snapshot: Snapshot<V>,
    base: Option<Snapshot<V>>,
    header: Committed,
    full: bool,
    depth_threshold: usize,
    in_flight: InFlight,
}

/// A checkpoint whose blobs are durable, ready for
/// [`DurableMap::commit_checkpoint`].
pub struct WrittenCheckpoint<V> {
    job: CheckpointJob<V>,
    top: Vec<u8>,
    stats: CheckpointStats,
    /// Blob roots written: node id → packed reference.
    written: HashMap<usize, u64>,
}

impl<V> WrittenCheckpoint<V> {
    /// What the blobs cost (the manifest is counted at commit).
    #[must_use]
    pub fn stats(&self) -> CheckpointStats {
        self.stats
    }
}

/// The 16 low bits of a generation, stored in packed references.
///
/// Why 16 bits are enough: a reference is only trusted when its tag equals
/// the current generation's, and every committed full checkpoint rewrites
/// every node and re-tags it, so any node of the live map carries a tag of
/// the generation of the last committed full checkpoint or later — never
/// one 2^16 generations old.
fn generation_tag(generation: u64) -> u64 {
    generation & 0xFFFF
}

fn pack_ref(generation: u64, seq: Seq, index: u64) -> u64 {
    debug_assert!((1..=BLOB_SEQ_MAX).contains(&seq) && index <= BLOBS_PER_RECORD_MAX as u64);
    (generation_tag(generation) << 48) | (seq << 16) | index
}

fn unpack_ref(reference: u64) -> (u64, Seq, u64) {
    (
        reference >> 48,
        (reference >> 16) & BLOB_SEQ_MAX,
        reference & 0xFFFF,
    )
}

impl<V: Codec + Clone + Send + Sync> CheckpointJob<V> {
    /// Tag a reference must carry to be reused; `None` for full checkpoints.
    fn clean_tag(&self) -> u64 {
        generation_tag(self.header.generation)
    }

    /// Write the blobs of every subtree changed since the previous
    /// checkpoint of this generation (all of them for a full one) and make
    /// them durable (`sync`). Nothing is in force until
    /// [`DurableMap::commit_checkpoint`].
    pub fn write(self) -> Result<WrittenCheckpoint<V>> {
        let log = blobs_log(&self.name, self.header.generation);
        let next_seq = self.ns.latest(&log)? + 1;
        let mut writer = Writer {
            ns: self.ns.as_ref(),
            log,
            generation: self.header.generation,
            reuse_tag: if self.full {
                None
            } else {
                Some(self.clean_tag())
            },
            depth_threshold: self.depth_threshold,
            next_seq,
            record: Vec::new(),
            blobs_in_record: 0,
            stats: CheckpointStats {
                full: self.full,
                generation: self.header.generation,
                ..CheckpointStats::default()
            },
            written: HashMap::new(),
        };
        let mut top = Vec::new();
        with_deep_stack(|| self.encode_top(&mut writer, &mut top))?;
        writer.flush()?;
        self.ns.sync()?;
        let (stats, written) = (writer.stats, writer.written);
        Ok(WrittenCheckpoint {
            job: self,
            top,
            stats,
            written,
        })
    }

    /// Encode the top into `top`, writing blobs through `writer`.
    fn encode_top(&self, writer: &mut Writer<'_>, top: &mut Vec<u8>) -> Result<()> {
        match raw::root(&self.snapshot) {
            None => top.push(TOP_EMPTY),
            Some(ChildRef::Leaf { suffix, value }) => {
                top.push(TOP_LEAF);
                put_varint(top, suffix.len() as u64);
                top.extend_from_slice(suffix);
                value.encode(top);
            }
            Some(ChildRef::Node(node)) => {
                top.push(TOP_NODE);
                let mut refs = RefState::default();
                let base = match self.base.as_ref().and_then(|b| raw::root(b)) {
                    Some(ChildRef::Node(base)) => Some(base),
                    _ => None,
                };
                writer.encode_node(node, base, 0, 0, top, &mut refs)?;
            }
        }
        Ok(())
    }
}

/// After commit: set the reference of every blob root the job wrote. Only
/// descends into subtrees that were not reused (those hold no written node).
fn mark_written<V>(node: NodeRef<'_, V>, written: &HashMap<usize, u64>, tag: u64) {
    if let Some(&reference) = written.get(&node.id()) {
        node.set_checkpoint_ref(reference);
    }
    for (_, child) in node.children() {
        if let ChildRef::Node(child) = child {
            let r = child.checkpoint_ref();
            if r != 0 && r >> 48 == tag && !written.contains_key(&child.id()) {
                continue; // reused subtree
            }
            mark_written(child, written, tag);
        }
    }
}

// ---------------------------------------------------------------------------
// Encoding. See docs/design.md "PART checkpoints" for the normative layout.

const TOP_EMPTY: u8 = 0;
const TOP_LEAF: u8 = 1;
const TOP_NODE: u8 = 2;
const CHILD_LEAF: u64 = 0;
const CHILD_NODE: u64 = 1;
const CHILD_REF: u64 = 2;
const NODE_HAS_VALUE: u8 = 1;
const NODE_FULL_256: u8 = 2;
const NODE_DELTA: u8 = 4;
const CHILD_REMOVED: u64 = 3;
/// A blob holds at most this many levels of inline nodes below its root;
/// deeper nodes are blobs of their own (bounds decoder recursion per blob).
const INLINE_DEPTH_MAX: usize = 32;
const OP_PUT: u8 = 0;
const OP_DELETE: u8 = 1;

#[expect(clippy::cast_possible_truncation, reason = "the low 7 bits, by design")]
fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)).cast_unsigned()
}

fn unzigzag(v: u64) -> i64 {
    (v >> 1).cast_signed() ^ -(v & 1).cast_signed()
}

fn seal(mut record: Vec<u8>) -> Vec<u8> {
    let crc = crc32c::crc32c(&record);
    record.extend_from_slice(&crc.to_le_bytes());
    record
}

/// The previous reference written in the current blob (deltas are taken
/// from it): the encoder and decoder visit children in the same order.
#[derive(Default)]
struct RefState {
    seq: Seq,
    index: u64,
}

/// The prefix, flags (`extra` added) and value of `node`.
fn encode_header<V: Codec>(node: NodeRef<'_, V>, extra: u8, out: &mut Vec<u8>) {
    let prefix = node.prefix();
    put_varint(out, prefix.len() as u64);
    out.extend_from_slice(prefix);
    let has_value = if node.value().is_some() {
        NODE_HAS_VALUE
    } else {
        0
    };
    out.push(has_value | extra);
    if let Some(value) = node.value() {
        value.encode(out);
    }
}

/// A reference, as a delta from the previous one in the blob: head varint
/// `zigzag(seq delta) << 2 | tag`, then the index (a zigzag delta when the
/// seq is the same, else absolute).
fn put_ref(out: &mut Vec<u8>, refs: &mut RefState, seq: Seq, index: u64, tag: u64) {
    let delta = zigzag(seq.wrapping_sub(refs.seq).cast_signed());
    put_varint(out, delta << 2 | tag);
    if seq == refs.seq {
        put_varint(out, zigzag(index.wrapping_sub(refs.index).cast_signed()));
    } else {
        put_varint(out, index);
    }
    refs.seq = seq;
    refs.index = index;
}

/// The inner node at `byte` among `children` (sorted), if there is one.
fn base_node_at<'a, V>(children: &[(u8, ChildRef<'a, V>)], byte: u8) -> Option<NodeRef<'a, V>> {
    match children.binary_search_by_key(&byte, |(b, _)| *b) {
        Ok(at) => match &children[at].1 {
            ChildRef::Node(node) => Some(*node),
            ChildRef::Leaf { .. } => None,
        },
        Err(_) => None,
    }
}

fn clone_child<'a, V>(child: &ChildRef<'a, V>) -> ChildRef<'a, V> {
    match child {
        ChildRef::Leaf { suffix, value } => ChildRef::Leaf { suffix, value },
        ChildRef::Node(node) => ChildRef::Node(*node),
    }
}

struct Writer<'a> {
    ns: &'a dyn Namespace,
    log: String,
    generation: u64,
    reuse_tag: Option<u64>,
    depth_threshold: usize,
    next_seq: Seq,
    record: Vec<u8>,
    blobs_in_record: usize,
    stats: CheckpointStats,
    written: HashMap<usize, u64>,
}

impl Writer<'_> {
    /// Encode `node` (at inner-node `depth`, `inline_depth` levels below
    /// its blob's root) into `out`. `base` is the node at the same path in
    /// the previous checkpoint's tree, if any: blob roots below are written
    /// as deltas against it where that is smaller.
    fn encode_node<V: Codec>(
        &mut self,
        node: NodeRef<'_, V>,
        base: Option<NodeRef<'_, V>>,
        depth: usize,
        inline_depth: usize,
        out: &mut Vec<u8>,
        refs: &mut RefState,
    ) -> Result<()> {
        if depth >= TREE_DEPTH_MAX {
            return Err(DurableError::TooDeep);
        }
        let children: Vec<(u8, ChildRef<'_, V>)> = node.children().collect();
        let full = children.len() == 256;
        encode_header(node, if full { NODE_FULL_256 } else { 0 }, out);
        if !full {
            put_varint(out, children.len() as u64);
        }
        let base_children: Vec<(u8, ChildRef<'_, V>)> =
            base.map(|b| b.children().collect()).unwrap_or_default();
        for (byte, child) in children {
            if !full {
                out.push(byte);
            }
            let base_child = base_node_at(&base_children, byte);
            self.encode_child(node, &child, base_child, depth, inline_depth, out, refs)?;
        }
        Ok(())
    }

    /// One child slot's encoding (after its branch byte).
    #[expect(clippy::too_many_arguments, reason = "the walk's state, passed down")]
    fn encode_child<V: Codec>(
        &mut self,
        parent: NodeRef<'_, V>,
        child: &ChildRef<'_, V>,
        base_child: Option<NodeRef<'_, V>>,
        depth: usize,
        inline_depth: usize,
        out: &mut Vec<u8>,
        refs: &mut RefState,
    ) -> Result<()> {
        match child {
            ChildRef::Leaf { suffix, value } => {
                put_varint(out, (suffix.len() as u64) << 2 | CHILD_LEAF);
                out.extend_from_slice(suffix);
                value.encode(out);
            }
            &ChildRef::Node(child) => {
                let child_depth = depth + 1;
                let own_blob = child_depth == self.depth_threshold
                    || (child_depth > self.depth_threshold
                        && (parent.len() > BLOB_ENTRIES_MAX || inline_depth >= INLINE_DEPTH_MAX));
                if own_blob {
                    let (seq, index) = self.blob_for(child, base_child, child_depth)?;
                    put_ref(out, refs, seq, index, CHILD_REF);
                } else {
                    put_varint(out, CHILD_NODE);
                    let inline = if child_depth < self.depth_threshold {
                        0
                    } else {
                        inline_depth + 1
                    };
                    self.encode_node(child, base_child, child_depth, inline, out, refs)?;
                }
            }
        }
        Ok(())
    }

    /// The reference of the blob rooted at `node`: its checkpoint reference
    /// if unchanged in this generation, else a newly written blob — a delta
    /// against `base`'s blob when few children changed, else whole.
    fn blob_for<V: Codec>(
        &mut self,
        node: NodeRef<'_, V>,
        base: Option<NodeRef<'_, V>>,
        depth: usize,
    ) -> Result<(Seq, u64)> {
        if let Some((seq, index)) = self.reusable(node) {
            self.stats.reused += 1;
            return Ok((seq, index));
        }
        let mut blob = Vec::new();
        let mut refs = RefState::default();
        let base = base.and_then(|b| self.reusable(b).map(|r| (b, r)));
        let delta = match base {
            Some((b, r)) => self.encode_delta(node, b, r, depth, &mut blob, &mut refs)?,
            None => false,
        };
        if delta {
            self.stats.deltas += 1;
        } else {
            blob.clear();
            refs = RefState::default();
            self.encode_node(node, base.map(|(b, _)| b), depth, 0, &mut blob, &mut refs)?;
        }
        let (seq, index) = self.push(&blob)?;
        let index = index as u64; // under BLOBS_PER_RECORD_MAX
        self.written
            .insert(node.id(), pack_ref(self.generation, seq, index));
        Ok((seq, index))
    }

    /// `node`'s blob reference if a checkpoint of this generation set it
    /// (so its subtree is what that blob holds).
    fn reusable<V>(&self, node: NodeRef<'_, V>) -> Option<(Seq, u64)> {
        let reference = node.checkpoint_ref();
        if reference != 0 && Some(reference >> 48) == self.reuse_tag {
            let (_, seq, index) = unpack_ref(reference);
            Some((seq, index))
        } else {
            None
        }
    }

    /// Encode `node` as its header, `base`'s blob reference and the child
    /// slots that differ from `base`'s. False (nothing useful in `out`)
    /// when more than a third of the slots changed: a whole blob is then
    /// about as small and needs no base to read.
    fn encode_delta<V: Codec>(
        &mut self,
        node: NodeRef<'_, V>,
        base: NodeRef<'_, V>,
        (base_seq, base_index): (Seq, u64),
        depth: usize,
        out: &mut Vec<u8>,
        refs: &mut RefState,
    ) -> Result<bool> {
        let children: Vec<(u8, ChildRef<'_, V>)> = node.children().collect();
        let base_children: Vec<(u8, ChildRef<'_, V>)> = base.children().collect();
        let mut changes: Vec<(u8, Option<ChildRef<'_, V>>)> = Vec::new();
        let (mut now_slots, mut then_slots) =
            (children.iter().peekable(), base_children.iter().peekable());
        let (mut value_now, mut value_then) = (Vec::new(), Vec::new());
        let mut inherited = 0;
        loop {
            match (now_slots.peek(), then_slots.peek()) {
                (None, None) => break,
                (Some(&&(byte, _)), Some(&&(gone, _))) if byte > gone => {
                    changes.push((gone, None));
                    then_slots.next();
                }
                (None, Some(&&(gone, _))) => {
                    changes.push((gone, None));
                    then_slots.next();
                }
                (Some(&&(byte, ref now)), then) => {
                    let then = then.filter(|slot| slot.0 == byte).map(|slot| &slot.1);
                    let same = match (now, then) {
                        (ChildRef::Node(node_now), Some(ChildRef::Node(node_then))) => {
                            node_now.id() == node_then.id()
                        }
                        (
                            ChildRef::Leaf { suffix, value },
                            Some(ChildRef::Leaf {
                                suffix: s2,
                                value: v2,
                            }),
                        ) => {
                            value_now.clear();
                            value_then.clear();
                            value.encode(&mut value_now);
                            v2.encode(&mut value_then);
                            suffix == s2 && value_now == value_then
                        }
                        _ => false,
                    };
                    if !same {
                        changes.push((byte, Some(clone_child(now))));
                    } else if matches!(now, ChildRef::Node(_)) {
                        inherited += 1;
                    }
                    now_slots.next();
                    if then.is_some() {
                        then_slots.next();
                    }
                }
            }
        }
        if changes.len() * 3 > children.len() {
            return Ok(false);
        }
        self.stats.reused += inherited;
        encode_header(node, NODE_DELTA, out);
        put_ref(out, refs, base_seq, base_index, 0);
        put_varint(out, changes.len() as u64);
        for (byte, change) in changes {
            out.push(byte);
            match change {
                None => put_varint(out, CHILD_REMOVED),
                Some(child) => {
                    let base_child = base_node_at(&base_children, byte);
                    self.encode_child(node, &child, base_child, depth, 0, out, refs)?;
                }
            }
        }
        Ok(true)
    }

    fn push(&mut self, blob: &[u8]) -> Result<(Seq, usize)> {
        if self.blobs_in_record > 0
            && (self.record.len() + blob.len() > RECORD_BYTES_TARGET
                || self.blobs_in_record == BLOBS_PER_RECORD_MAX)
        {
            self.flush()?;
        }
        if self.next_seq > BLOB_SEQ_MAX {
            return Err(DurableError::ReferenceLimit {
                log: self.log.clone(),
                seq: self.next_seq,
            });
        }
        put_varint(&mut self.record, blob.len() as u64);
        self.record.extend_from_slice(blob);
        self.blobs_in_record += 1;
        self.stats.blobs += 1;
        Ok((self.next_seq, self.blobs_in_record - 1))
    }

    fn flush(&mut self) -> Result<()> {
        if self.blobs_in_record == 0 {
            return Ok(());
        }
        let mut record = vec![FORMAT_VERSION];
        put_varint(&mut record, self.blobs_in_record as u64);
        record.append(&mut self.record);
        let record = seal(record);
        let seq = self.ns.append_if(&self.log, self.next_seq - 1, &record)?;
        debug_assert_eq!(seq, self.next_seq, "append_if lands at the expected seq");
        self.stats.records += 1;
        self.stats.blob_bytes += record.len() as u64;
        self.next_seq += 1;
        self.blobs_in_record = 0;
        Ok(())
    }
}

fn encode_batch<V: Codec>(ops: &[BatchOp<V>]) -> Vec<u8> {
    let mut out = vec![FORMAT_VERSION];
    put_varint(&mut out, ops.len() as u64);
    for op in ops {
        match op {
            BatchOp::Put(key, value) => {
                out.push(OP_PUT);
                put_varint(&mut out, key.len() as u64);
                out.extend_from_slice(key);
                value.encode(&mut out);
            }
            BatchOp::Delete(key) => {
                out.push(OP_DELETE);
                put_varint(&mut out, key.len() as u64);
                out.extend_from_slice(key);
            }
        }
    }
    seal(out)
}

fn encode_manifest(header: &Committed, top: &[u8]) -> Vec<u8> {
    let mut out = vec![FORMAT_VERSION];
    for v in [
        header.number,
        header.generation,
        header.batch_generation,
        header.batch_seq,
        header.checkpoints_in_generation,
        header.generation_full_bytes,
        header.generation_bytes,
    ] {
        put_varint(&mut out, v);
    }
    out.extend_from_slice(top);
    seal(out)
}

// ---------------------------------------------------------------------------
// Decoding: every read is bounds-checked; bad bytes are errors, not panics.

/// A decode failure before it is placed in a log.
#[derive(Debug)]
pub(crate) enum DecodeError {
    Corrupt { offset: usize, reason: String },
    Version { found: u8 },
}

impl DecodeError {
    fn at(self, log: &str, seq: Seq) -> DurableError {
        match self {
            DecodeError::Corrupt { offset, reason } => DurableError::Corrupt {
                log: log.to_owned(),
                seq,
                offset,
                reason,
            },
            DecodeError::Version { found } => DurableError::Version {
                log: log.to_owned(),
                seq,
                found,
                expected: FORMAT_VERSION,
            },
        }
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Offset of `bytes` in its record (a blob's start), for error reports.
    base: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Reader {
            bytes,
            pos: 0,
            base: 0,
        }
    }
    fn corrupt(&self, reason: impl Into<String>) -> DecodeError {
        DecodeError::Corrupt {
            offset: self.base + self.pos,
            reason: reason.into(),
        }
    }
    fn byte(&mut self) -> Result<u8, DecodeError> {
        let b = *self
            .bytes
            .get(self.pos)
            .ok_or_else(|| self.corrupt("unexpected end"))?;
        self.pos += 1;
        Ok(b)
    }
    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7F) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.corrupt("varint longer than 10 bytes"))
    }
    fn len(&mut self) -> Result<usize, DecodeError> {
        let v = self.varint()?;
        usize::try_from(v)
            .ok()
            .filter(|&n| n <= self.bytes.len() - self.pos)
            .ok_or_else(|| self.corrupt(format!("length {v} past the end")))
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| self.corrupt("unexpected end"))?;
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }
    fn value<V: Codec>(&mut self) -> Result<V, DecodeError> {
        let mut rest = &self.bytes[self.pos..];
        let before = rest.len();
        let v = V::decode(&mut rest).ok_or_else(|| self.corrupt("value does not decode"))?;
        self.pos += before - rest.len();
        Ok(v)
    }
    fn done(&self) -> bool {
        self.pos == self.bytes.len()
    }
}

/// Check version and CRC32C; the body (between version byte and CRC).
fn open_record(bytes: &[u8]) -> Result<&[u8], DecodeError> {
    if bytes.len() < 5 {
        return Err(DecodeError::Corrupt {
            offset: 0,
            reason: format!("record of {} bytes is too short", bytes.len()),
        });
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    if crc32c::crc32c(body) != stored {
        return Err(DecodeError::Corrupt {
            offset: body.len(),
            reason: "CRC32C mismatch".into(),
        });
    }
    if body[0] != FORMAT_VERSION {
        return Err(DecodeError::Version { found: body[0] });
    }
    Ok(body)
}

pub(crate) fn decode_batch<V: Codec>(bytes: &[u8]) -> Result<Vec<BatchOp<V>>, DecodeError> {
    let body = open_record(bytes)?;
    let mut r = Reader::new(body);
    r.pos = 1;
    let count = r.len()?;
    let mut ops = Vec::with_capacity(count);
    for _ in 0..count {
        let tag = r.byte()?;
        let key_len = r.len()?;
        let key = r.take(key_len)?.to_vec();
        ops.push(match tag {
            OP_PUT => BatchOp::Put(key, r.value()?),
            OP_DELETE => BatchOp::Delete(key),
            other => return Err(r.corrupt(format!("unknown batch op {other}"))),
        });
    }
    if !r.done() {
        return Err(r.corrupt("trailing bytes after the batch"));
    }
    Ok(ops)
}

/// Blob records read so far: seq → (record bytes, offset of each blob).
struct BlobCache<'a> {
    ns: &'a dyn Namespace,
    log: String,
    generation: u64,
    records: HashMap<Seq, (Bytes, Vec<(usize, usize)>)>,
}

impl BlobCache<'_> {
    fn blob(&mut self, seq: Seq, index: u64) -> Result<(Bytes, usize)> {
        if !self.records.contains_key(&seq) {
            let bytes = self.ns.get(&self.log, seq)?;
            let offsets = blob_offsets(&bytes).map_err(|e| e.at(&self.log, seq))?;
            self.records.insert(seq, (bytes, offsets));
        }
        let (bytes, offsets) = &self.records[&seq];
        let &(start, end) = usize::try_from(index)
            .ok()
            .and_then(|i| offsets.get(i))
            .ok_or_else(|| DurableError::Corrupt {
                log: self.log.clone(),
                seq,
                offset: 0,
                reason: format!(
                    "reference to blob {index} of a record holding {}",
                    offsets.len()
                ),
            })?;
        Ok((bytes.slice(start..end), start))
    }
}

impl BlobCache<'_> {
    /// Decode blob (`seq`, `index`), a node at `depth`, into its parts.
    fn blob_parts<V: Codec + Clone>(
        &mut self,
        seq: Seq,
        index: u64,
        depth: usize,
    ) -> Result<Parts<V>> {
        let (blob, offset) = self.blob(seq, index)?;
        let log = self.log.clone();
        let mut reader = Reader {
            bytes: &blob,
            pos: 0,
            base: offset,
        };
        let mut refs = RefState::default();
        let parts = decode_parts(&mut reader, &mut refs, self, depth, true, (&log, seq))?;
        if !reader.done() {
            return Err(reader
                .corrupt("trailing bytes after the blob's node")
                .at(&log, seq));
        }
        Ok(parts)
    }
}

/// The (start, end) byte range of each blob of a blob record.
pub(crate) fn blob_offsets(bytes: &[u8]) -> Result<Vec<(usize, usize)>, DecodeError> {
    let body = open_record(bytes)?;
    let mut r = Reader::new(body);
    r.pos = 1;
    let count = r.len()?;
    let mut offsets = Vec::with_capacity(count);
    for _ in 0..count {
        let len = r.len()?;
        offsets.push((r.pos, r.pos + len));
        r.pos += len;
    }
    if !r.done() {
        return Err(r.corrupt("trailing bytes after the last blob"));
    }
    Ok(offsets)
}

fn load_checkpoint<V: Codec + Clone>(
    ns: &dyn Namespace,
    name: &str,
    bytes: &[u8],
    seq: Seq,
) -> Result<(Committed, ArtMap<V>)> {
    let log = manifest_log(name);
    let body = open_record(bytes).map_err(|e| e.at(&log, seq))?;
    let mut r = Reader::new(body);
    r.pos = 1;
    let mut fields = [0u64; 7];
    for f in &mut fields {
        *f = r.varint().map_err(|e| e.at(&log, seq))?;
    }
    let [number, generation, batch_generation, batch_seq, checkpoints_in_generation, generation_full_bytes, generation_bytes] =
        fields;
    let committed = Committed {
        number,
        generation,
        batch_generation,
        batch_seq,
        checkpoints_in_generation,
        generation_full_bytes,
        generation_bytes,
    };
    let mut cache = BlobCache {
        ns,
        log: blobs_log(name, generation),
        generation,
        records: HashMap::new(),
    };
    let tag = r.byte().map_err(|e| e.at(&log, seq))?;
    let root = match tag {
        TOP_EMPTY => None,
        TOP_LEAF => {
            let decode = |r: &mut Reader<'_>| -> Result<OwnedChild<V>, DecodeError> {
                let n = r.len()?;
                let suffix = r.take(n)?;
                Ok(raw::leaf(suffix, r.value()?))
            };
            Some(decode(&mut r).map_err(|e| e.at(&log, seq))?)
        }
        TOP_NODE => {
            let mut refs = RefState::default();
            Some(decode_node(
                &mut r,
                &mut refs,
                &mut cache,
                0,
                0,
                (&log, seq),
            )?)
        }
        other => return Err(r.corrupt(format!("unknown top tag {other}")).at(&log, seq)),
    };
    if !r.done() {
        return Err(r.corrupt("trailing bytes after the top").at(&log, seq));
    }
    Ok((committed, raw::into_map(root)))
}

/// A decoded node before it is built: prefix, value and child slots.
struct Parts<V> {
    prefix: Vec<u8>,
    value: Option<V>,
    children: Vec<(u8, OwnedChild<V>)>,
}

fn decode_node<V: Codec + Clone>(
    r: &mut Reader<'_>,
    refs: &mut RefState,
    cache: &mut BlobCache<'_>,
    depth: usize,
    reference: u64,
    at: (&str, Seq),
) -> Result<OwnedChild<V>> {
    let parts = decode_parts(r, refs, cache, depth, false, at)?;
    raw::node(&parts.prefix, parts.value, parts.children, reference).map_err(|e| {
        r.corrupt(format!("node does not build: {e}"))
            .at(at.0, at.1)
    })
}

/// Decode one node's parts; `blob_root` allows a delta node (whose base
/// blob is decoded and patched).
fn decode_parts<V: Codec + Clone>(
    r: &mut Reader<'_>,
    refs: &mut RefState,
    cache: &mut BlobCache<'_>,
    depth: usize,
    blob_root: bool,
    at: (&str, Seq),
) -> Result<Parts<V>> {
    let fail = |e: DecodeError| e.at(at.0, at.1);
    if depth >= TREE_DEPTH_MAX {
        return Err(r
            .corrupt("tree deeper than TREE_DEPTH_MAX (a reference cycle?)")
            .at(at.0, at.1));
    }
    let prefix_len = r.len().map_err(fail)?;
    let prefix = r.take(prefix_len).map_err(fail)?.to_vec();
    let flags = r.byte().map_err(fail)?;
    let known = NODE_HAS_VALUE | NODE_FULL_256 | if blob_root { NODE_DELTA } else { 0 };
    if flags & !known != 0 || flags & (NODE_FULL_256 | NODE_DELTA) == NODE_FULL_256 | NODE_DELTA {
        return Err(r
            .corrupt(format!("unknown node flags {flags:#x}"))
            .at(at.0, at.1));
    }
    let value = if flags & NODE_HAS_VALUE != 0 {
        Some(r.value().map_err(fail)?)
    } else {
        None
    };
    if flags & NODE_DELTA != 0 {
        let head = r.varint().map_err(fail)?;
        if head & 3 != 0 {
            return Err(r.corrupt("delta base is not a reference").at(at.0, at.1));
        }
        let (seq, index) = read_ref(r, refs, head).map_err(fail)?;
        let base: Parts<V> = cache.blob_parts(seq, index, depth + 1)?;
        let count = r.len().map_err(fail)?;
        let mut changes = Vec::with_capacity(count.min(256));
        for _ in 0..count {
            let byte = r.byte().map_err(fail)?;
            if changes.last().is_some_and(|&(last, _)| last >= byte) {
                return Err(r.corrupt("delta changes out of order").at(at.0, at.1));
            }
            let head = r.varint().map_err(fail)?;
            let child = if head & 3 == CHILD_REMOVED {
                None
            } else {
                Some(decode_child(r, refs, cache, depth, head, at)?)
            };
            changes.push((byte, child));
        }
        // Merge the changes (sorted by byte) into the base's slots.
        let mut children = Vec::with_capacity(base.children.len() + changes.len());
        let mut changes = changes.into_iter().peekable();
        for (byte, child) in base.children {
            while let Some((b, change)) = changes.next_if(|(b, _)| *b < byte) {
                if let Some(c) = change {
                    children.push((b, c));
                }
            }
            match changes.next_if(|(b, _)| *b == byte) {
                Some((_, Some(c))) => children.push((byte, c)),
                Some((_, None)) => {}
                None => children.push((byte, child)),
            }
        }
        children.extend(changes.filter_map(|(b, c)| c.map(|c| (b, c))));
        return Ok(Parts {
            prefix,
            value,
            children,
        });
    }
    let full = flags & NODE_FULL_256 != 0;
    let count = if full { 256 } else { r.len().map_err(fail)? };
    if count > 256 {
        return Err(r.corrupt(format!("{count} children")).at(at.0, at.1));
    }
    let mut children = Vec::with_capacity(count);
    for i in 0..count {
        let byte = if full {
            u8::try_from(i).map_err(|_| r.corrupt("child index over 255").at(at.0, at.1))?
        } else {
            r.byte().map_err(fail)?
        };
        let head = r.varint().map_err(fail)?;
        children.push((byte, decode_child(r, refs, cache, depth, head, at)?));
    }
    Ok(Parts {
        prefix,
        value,
        children,
    })
}

/// Read a reference whose head varint is `head` (see [`put_ref`]).
fn read_ref(r: &mut Reader<'_>, refs: &mut RefState, head: u64) -> Result<(Seq, u64), DecodeError> {
    let delta = unzigzag(head >> 2);
    let seq = refs
        .seq
        .checked_add_signed(delta)
        .filter(|&s| (1..=BLOB_SEQ_MAX).contains(&s))
        .ok_or_else(|| r.corrupt("reference seq out of range"))?;
    let index_field = r.varint()?;
    let index = if seq == refs.seq {
        refs.index.checked_add_signed(unzigzag(index_field))
    } else {
        Some(index_field)
    };
    let index = index
        .filter(|&i| i < BLOBS_PER_RECORD_MAX as u64)
        .ok_or_else(|| r.corrupt("reference index out of range"))?;
    refs.seq = seq;
    refs.index = index;
    Ok((seq, index))
}

/// One child slot whose head varint is `head`, of a node at `depth`.
fn decode_child<V: Codec + Clone>(
    r: &mut Reader<'_>,
    refs: &mut RefState,
    cache: &mut BlobCache<'_>,
    depth: usize,
    head: u64,
    at: (&str, Seq),
) -> Result<OwnedChild<V>> {
    let fail = |e: DecodeError| e.at(at.0, at.1);
    match head & 3 {
        CHILD_LEAF => {
            let n = usize::try_from(head >> 2)
                .ok()
                .filter(|&n| n <= r.bytes.len())
                .ok_or_else(|| r.corrupt("leaf suffix past the end").at(at.0, at.1))?;
            let suffix = r.take(n).map_err(fail)?;
            Ok(raw::leaf(suffix, r.value().map_err(fail)?))
        }
        CHILD_NODE => decode_node(r, refs, cache, depth + 1, 0, at),
        CHILD_REF => {
            let (seq, index) = read_ref(r, refs, head).map_err(fail)?;
            let parts = cache.blob_parts(seq, index, depth + 1)?;
            let packed = pack_ref(cache.generation, seq, index);
            raw::node(&parts.prefix, parts.value, parts.children, packed).map_err(|e| {
                DurableError::Corrupt {
                    log: cache.log.clone(),
                    seq,
                    offset: 0,
                    reason: format!("blob {index} does not build a node: {e}"),
                }
            })
        }
        _ => Err(r
            .corrupt(format!("child tag {} where a child is expected", head & 3))
            .at(at.0, at.1)),
    }
}

/// Decoder entry points for tests and fuzzing (not part of the API).
#[doc(hidden)]
pub mod testing {
    use super::{blob_offsets, decode_batch, load_checkpoint, DurableError, Seq};

    /// Append the CRC32C a record ends with (to fuzz past the checksum).
    #[must_use]
    pub fn seal(body: Vec<u8>) -> Vec<u8> {
        super::seal(body)
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
    pub fn load_manifest(
        ns: &dyn Namespace,
        name: &str,
        bytes: &[u8],
        seq: Seq,
    ) -> Result<usize, DurableError> {
        super::with_deep_stack(|| load_checkpoint::<Vec<u8>>(ns, name, bytes, seq))
            .map(|(_, map)| map.len())
    }
}
