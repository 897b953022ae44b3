//! [`DurableMap`]: the in-memory map and its logs — open (load the
//! checkpoint in force, replay later batches, delete what a crash left of
//! other generations), batches (the acknowledgement point), and the map's
//! side of a checkpoint: beginning it (a snapshot, a new generation for a
//! full one) and committing it (the manifest, then reclaiming generations).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use varve_log::{LogConfig, Namespace, OnFull, Seq, SeqRange};

use super::checkpoint::{mark_written, CheckpointJob, InFlight, WrittenCheckpoint};
use super::decode::{decode_batch, load_checkpoint, manifest_header};
use super::encode::{encode_batch, encode_manifest};
use super::format::Committed;
use super::{
    batches_log, blobs_log, manifest_log, with_deep_stack, CheckpointRecord, CheckpointStats, Codec, DurableError,
    DurableOptions, Result, MANIFESTS_KEPT,
};
use crate::map::{ArtMap, BatchOp, Snapshot};
use crate::raw::{self, ChildRef};

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

/// Generations of the `N.batches.<g>` and `N.blobs.<g>` logs that exist.
fn list_generations(ns: &dyn Namespace, name: &str) -> Result<(Vec<u64>, Vec<u64>)> {
    let (batches_prefix, blobs_prefix) = (format!("{name}.batches."), format!("{name}.blobs."));
    let (mut batches, mut blobs) = (Vec::new(), Vec::new());
    for info in ns.list_logs()? {
        if let Some(g) = info.name.strip_prefix(&batches_prefix).and_then(|g| g.parse().ok()) {
            batches.push(g);
        } else if let Some(g) = info.name.strip_prefix(&blobs_prefix).and_then(|g| g.parse().ok()) {
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
    pub fn open(ns: Arc<dyn Namespace>, name: &str, mut options: DurableOptions) -> Result<DurableMap<V>> {
        // The root is never a blob root: it changes on every checkpoint.
        options.depth_threshold = options.depth_threshold.max(1);
        let manifest = manifest_log(name);
        ns.create_log(&manifest, LogConfig::keep(MANIFESTS_KEPT, OnFull::Overwrite))?;
        let latest = ns.latest(&manifest)?;
        let (committed, map) = if latest == 0 {
            (None, ArtMap::new())
        } else {
            let bytes = ns.get(&manifest, latest)?;
            let ns_ref = ns.as_ref();
            let (committed, map) = with_deep_stack(|| load_checkpoint::<V>(ns_ref, name, &bytes, latest))?;
            (Some(committed), map)
        };
        let (mut batch_gens, blob_gens) = list_generations(ns.as_ref(), name)?;
        // Only the manifest's blob log is live: older ones are left by a
        // crash between a full checkpoint's manifest and its cleanup, newer
        // ones by full checkpoints that never committed. (Their generation
        // numbers are not reused: `generation_next` counts them below.)
        let committed_generation = committed.map(|c| c.generation);
        for &g in blob_gens.iter().filter(|&&g| Some(g) != committed_generation) {
            ns.delete_log(&blobs_log(name, g))?;
        }
        if let Some(c) = committed {
            // Batches before the checkpoint's batch log are all in it.
            for &g in batch_gens.iter().filter(|&&g| g < c.batch_generation) {
                ns.delete_log(&batches_log(name, g))?;
            }
            batch_gens.retain(|&g| g >= c.batch_generation);
        }
        let generation_next =
            batch_gens.iter().chain(&blob_gens).copied().chain(committed.map(|c| c.generation)).max().unwrap_or(0) + 1;
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
            map_state.ns.create_log(&batches_log(name, g), LogConfig::unbounded())?;
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

    /// The generation batches are appended to now: the `g` of `N.batches.<g>`.
    #[must_use]
    pub fn batch_generation(&self) -> u64 {
        self.batch_generation
    }

    /// The records the manifest log keeps (at most [`MANIFESTS_KEPT`]),
    /// oldest first; the last is the checkpoint in force. Reads each
    /// record's header only: O(kept records) reads.
    ///
    /// Errors: [`DurableError::Log`], or [`DurableError::Corrupt`] /
    /// [`DurableError::Version`] naming a record that does not decode.
    pub fn checkpoints(&self) -> Result<Vec<CheckpointRecord>> {
        let log = manifest_log(&self.name);
        let mut records = Vec::new();
        // From the earliest kept record: the log overwrites its oldest.
        let info = self.ns.log_info(&log)?;
        if info.is_empty() {
            return Ok(records);
        }
        for record in self.ns.scan(&log, SeqRange::from_bounds(info.earliest..))? {
            let record = record?;
            let header = manifest_header(&self.name, &record.value, record.seq)?;
            records.push(CheckpointRecord {
                manifest_seq: record.seq,
                number: header.number,
                full: header.checkpoints_in_generation == 1,
                generation: header.generation,
                batch_generation: header.batch_generation,
                batch_seq: header.batch_seq,
            });
        }
        Ok(records)
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
            return Err(DurableError::Poisoned { name: self.name.clone(), cause: cause.clone() });
        }
        let record = encode_batch(&ops);
        let seq = match self.ns.append(&batches_log(&self.name, self.batch_generation), &record) {
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
            return Err(DurableError::CheckpointInFlight { name: self.name.clone() });
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
            self.ns.create_log(&blobs_log(&self.name, g), LogConfig::unbounded())?;
            // From here on batches go to generation g; the snapshot below
            // holds every batch applied before.
            self.batch_generation = g;
            (g, g, 0)
        } else {
            let latest = self.ns.latest(&batches_log(&self.name, self.batch_generation))?;
            (committed.generation, self.batch_generation, latest)
        };
        let header = Committed {
            number: committed.number + 1,
            generation,
            batch_generation,
            batch_seq,
            checkpoints_in_generation: if full { 1 } else { committed.checkpoints_in_generation + 1 },
            // A new generation counts its own bytes (set at commit).
            generation_full_bytes: if full { 0 } else { committed.generation_full_bytes },
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
        if written.job.name != self.name || !Arc::ptr_eq(&written.job.in_flight.0, &self.in_flight) {
            return Err(DurableError::ForeignJob { name: self.name.clone(), job: written.job.name.clone() });
        }
        let WrittenCheckpoint { job, top, mut stats, written: written_ids } = written;
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
            for g in batch_gens.into_iter().filter(|&g| g < header.batch_generation) {
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
