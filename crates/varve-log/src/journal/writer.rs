//! The writing side of a namespace: the active segment, frames written at
//! the end of the journal, the reserve that grows with them, segment rolls,
//! and the operations that write (append, create, delete and rename logs).
//!
//! **Failures.** A write that fails before its frame is complete publishes
//! nothing and changes no state: the next frame goes to the same place, and
//! the namespace goes on (a full disk is [`LogError::NoSpace`]). Once a frame
//! is written the operation has happened, so the housekeeping after it
//! (deleting dead segments, compacting) never turns it into a failure: its
//! errors are left for the next write to retry. A failed fsync poisons the
//! namespace (see `durability.rs`).

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use crate::codec::ByteWriter;
use crate::contract::{LogConfig, Seq, SyncPolicy};
use crate::error::{IoContext, LogError, Result};
use crate::journal::checkpoint;
use crate::journal::format::FRAME_HEADER_BYTES;
use crate::journal::format::{self, FrameEncoder, FrameKind, LogDescriptor};
use crate::journal::io::SegmentIo;
use crate::journal::mapped::{reserve_for, ReadMap, SegmentMap};
use crate::journal::published::PublishedEnd;
use crate::journal::read::read_up_to;
use crate::journal::scan::segment_path;
use crate::journal::state::{Position, State};
use crate::journal::{
    JournalOptions, Shared, Tail, PWRITE_FRAME_BYTES_MIN, SEGMENT_BYTES_LIMIT, SEGMENT_BYTES_PER_HEADER_BYTE_MIN,
};
use crate::rules;

/// The unit a reserve is rounded to when only the bytes needed fit.
const PAGE_BYTES: u64 = 4096;

/// The last segment id a roll may create: `u32::MAX` marks lost records
/// (see `state.rs`).
const SEGMENT_ID_MAX: u32 = u32::MAX - 1;

pub(super) struct Writer {
    pub(super) active_id: u32,
    pub(super) active: Arc<File>,
    /// The active segment's map; frames are copied in here.
    pub(super) map: SegmentMap,
    /// Valid bytes in the active segment; the next frame goes here. The
    /// file and map are longer (the reserve), zero past this point.
    pub(super) active_len: u64,
    /// Bytes of the active segment's header frame (see [`Shared::segment_bytes_target`]).
    pub(super) header_len: u64,
    /// Frames after the header in the active segment (unknown, so 1, for a
    /// segment found non-empty on open).
    pub(super) frames_in_active: u64,
    /// Total bytes written since open, across segments (for durability waits).
    pub(super) written_total: u64,
    /// Bytes of frames in all segment files (what `compact` keeps within bounds).
    pub(super) disk_bytes: u64,
    /// Where readers in other processes learn how far frames are complete.
    pub(super) end: PublishedEnd,
    /// `written_total` at which the next write saves an index checkpoint.
    pub(super) checkpoint_due: u64,
    /// The thread writing the last checkpoint saved as the writer writes,
    /// until it is joined (see `checkpoint.rs`, "When one is saved").
    /// It hands back the index's buffer when it is done.
    pub(super) checkpoint_write: Option<std::thread::JoinHandle<Vec<u8>>>,
    /// The buffer of the last checkpoint saved, kept for the next (see
    /// `Index::encode_into`): memory the size of one index but its packed
    /// logs (which a save shares rather than copies), held.
    pub(super) checkpoint_buffer: Vec<u8>,
    /// The most bytes a save has written into that buffer: the part of it
    /// in memory (it grows by doubling, and pages never written take none),
    /// whether here or lent to the thread writing a checkpoint.
    pub(super) checkpoint_buffer_written: u64,
    /// `(segments_emptied, active_id)` when every dead segment was last
    /// deleted (see `Liveness::segments_emptied`); `None` before the first.
    pub(super) dead_segments_deleted_at: Option<(u64, u32)>,
    pub(super) frame: Vec<u8>,
}

/// Set up the writer on the newest segment, starting a segment if there is
/// none (or rewriting the header of one that lost it to a torn write; the
/// file is reused, so read-only followers keep reading the same file).
pub(crate) fn open_writer(
    dir: &Path,
    options: &JournalOptions,
    state: &State,
    tail: Tail,
    end: PublishedEnd,
    io: &dyn SegmentIo,
) -> Result<Writer> {
    let (active_id, active_len) = tail.unwrap_or((1, 0));
    let path = segment_path(dir, active_id);
    let active = match state.segments.get(&active_id) {
        Some(segment) => segment.file.clone(),
        None => Arc::new(io.create_new(&path).context(|| format!("creating {}", path.display()))?),
    };
    let capacity = reserve_for(0, active_len + 1, options.segment_bytes_max);
    let map = map_segment(&active, &path, capacity, active_len + 1, io)?;
    let frames_in_active = u64::from(active_len > 0);
    let header_len = if active_len == 0 { 0 } else { header_frame_len(&active, &path)? };
    let mut writer = Writer {
        active_id,
        active,
        map,
        active_len,
        header_len,
        frames_in_active,
        written_total: 0,
        disk_bytes: state.segments.values().map(|s| s.bytes).sum::<u64>()
            + if state.segments.contains_key(&active_id) { 0 } else { active_len },
        end,
        checkpoint_due: u64::MAX,
        checkpoint_write: None,
        checkpoint_buffer: Vec::new(),
        checkpoint_buffer_written: 0,
        dead_segments_deleted_at: None,
        frame: Vec::new(),
    };
    if active_len == 0 {
        let mut header = Vec::new();
        let len = state.encode_catalog(&mut header, active_id);
        writer.map.write(0, &header[..len]);
        io.sync_data(&writer.active).context(|| format!("syncing {}", path.display()))?;
        io.sync_dir(dir).context(|| format!("syncing directory {}", dir.display()))?;
        writer.active_len = len as u64;
        writer.header_len = len as u64;
        writer.disk_bytes += len as u64;
    }
    writer.end.publish(writer.active_id, writer.active_len);
    Ok(writer)
}

/// The size at which a segment headed by `header_len` bytes rolls:
/// `segment_bytes_max`, or [`SEGMENT_BYTES_PER_HEADER_BYTE_MIN`] times its
/// header if larger (at most [`SEGMENT_BYTES_LIMIT`]).
fn segment_bytes_target(header_len: u64, segment_bytes_max: u64) -> u64 {
    header_len.saturating_mul(SEGMENT_BYTES_PER_HEADER_BYTE_MIN).min(SEGMENT_BYTES_LIMIT).max(segment_bytes_max)
}

/// The length of the header frame at the start of a segment, from its
/// frame header (`body_len` at bytes 4..8: see `format.rs`).
fn header_frame_len(file: &File, path: &Path) -> Result<u64> {
    let head = read_up_to(file, 0, FRAME_HEADER_BYTES as u64).context(|| format!("reading {}", path.display()))?;
    let body_len = head.get(4..8).map_or(0, |b| u32::from_le_bytes(b.try_into().expect("4 bytes")));
    Ok(FRAME_HEADER_BYTES as u64 + u64::from(body_len))
}

/// Map every segment but the active one for reading (see `ReadMap`).
/// Called by the writer's open, after recovery has cut the sealed segments.
pub(crate) fn map_sealed_segments(state: &mut State, active_id: u32) {
    for (&id, segment) in &mut state.segments {
        if id != active_id {
            segment.read_map = ReadMap::new(&segment.file).map(Arc::new);
        }
    }
}

/// Map a segment with `capacity` bytes reserved; on a full disk, with just
/// the `needed` bytes (rounded up to a page), so that small writes —
/// deleting a log to free space, say — still fit when doubling does not.
fn map_segment(file: &File, path: &Path, capacity: u64, needed: u64, io: &dyn SegmentIo) -> Result<SegmentMap> {
    match SegmentMap::new(file, path, capacity, io) {
        Err(LogError::NoSpace { .. }) if capacity > needed.next_multiple_of(PAGE_BYTES) => {
            SegmentMap::new(file, path, needed.next_multiple_of(PAGE_BYTES), io)
        }
        other => other,
    }
}

impl Shared {
    /// Write the frame in `writer.frame` at the end of the journal, rolling
    /// to a new segment first if it would overflow this one, and publish it.
    /// Returns the segment and offset it was written at.
    pub(super) fn write_frame(&self, writer: &mut Writer) -> Result<(u32, u64)> {
        let len = writer.frame.len() as u64;
        // A frame larger than a whole segment goes alone into a fresh one.
        if writer.active_len + len > self.segment_bytes_target(writer) && writer.frames_in_active > 0 {
            self.roll(writer)?;
        }
        let at = writer.active_len;
        if at + len > writer.map.capacity() {
            let capacity = reserve_for(writer.map.capacity(), at + len, self.segment_bytes_target(writer));
            let path = segment_path(&self.dir, writer.active_id);
            writer.map = map_segment(&writer.active, &path, capacity, at + len, &*self.io)?;
            self.map_for_reading(writer.active_id, &writer.active);
        }
        if writer.frame.len() < PWRITE_FRAME_BYTES_MIN {
            writer.map.write(at, &writer.frame);
        } else if let Err(e) = self.io.write_at(&writer.active, &writer.frame, at) {
            // Nothing is published; a partial write leaves bytes past
            // `active_len` that the next frame overwrites, and that a crash
            // before then leaves as a torn tail.
            let path = segment_path(&self.dir, writer.active_id);
            return Err(LogError::io(format!("appending to {}", path.display()), e));
        }
        writer.active_len += len;
        writer.written_total += len;
        writer.disk_bytes += len;
        writer.frames_in_active += 1;
        writer.end.publish(writer.active_id, writer.active_len);
        self.durability.lock().written = writer.written_total;
        Ok((writer.active_id, at))
    }

    /// The size at which the active segment rolls (see [`segment_bytes_target`]).
    pub(super) fn segment_bytes_target(&self, writer: &Writer) -> u64 {
        segment_bytes_target(writer.header_len, self.options.segment_bytes_max)
    }

    /// Map segment `id` (its file as long as it is now) for reads; see `ReadMap`.
    pub(super) fn map_for_reading(&self, id: u32, file: &File) {
        let read_map = ReadMap::new(file).map(Arc::new);
        if let Some(segment) = self.write_state().segments.get_mut(&id) {
            segment.read_map = read_map;
        }
    }

    /// Seal the active segment and start the next, headed by the catalog.
    ///
    /// Rolls sync under every policy, `Never` included: a sealed segment is
    /// durable, and so is the new one's directory entry. That is what lets
    /// `delete_segment` make everything durable with one fsync of the active
    /// segment. (One or two fsyncs per segment of data cost nothing measurable.)
    /// A roll that fails before the new segment is in use removes its file.
    pub(super) fn roll(&self, writer: &mut Writer) -> Result<()> {
        self.sync_active(writer)?;
        if writer.active_id >= SEGMENT_ID_MAX {
            return Err(LogError::InvalidArgument {
                reason: "namespace has used every segment id; copy its logs to a new namespace".into(),
            });
        }
        let id = writer.active_id + 1;
        let path = segment_path(&self.dir, id);
        let file = self.io.create_new(&path).context(|| format!("creating {}", path.display()))?;
        let started = self.start_segment(id, &path, &file);
        let (map, len) = match started {
            Ok(started) => started,
            Err(e) => {
                // Best effort: a leftover empty segment is removed on the next open anyway.
                let _ = self.io.remove_file(&path);
                return Err(e);
            }
        };
        let sealed_file = std::mem::replace(&mut writer.active, Arc::new(file));
        drop(std::mem::replace(&mut writer.map, map));
        // Cut the sealed segment's zero reserve: sealed files end at their
        // last frame. Best effort: the next writer open finishes a cut that failed.
        let _ = self.io.set_len(&sealed_file, writer.active_len);
        self.map_for_reading(writer.active_id, &sealed_file);
        writer.active_id = id;
        writer.active_len = len as u64;
        writer.header_len = len as u64;
        writer.frames_in_active = 0;
        writer.written_total += len as u64;
        writer.disk_bytes += len as u64;
        self.install_active_segment(writer);
        writer.end.publish(writer.active_id, writer.active_len);
        self.durability.lock().written = writer.written_total;
        Ok(())
    }

    /// Reserve, head and make durable a new segment file; returns its map
    /// and the header's length.
    ///
    /// The header is encoded into a buffer of its own, freed once written.
    /// It restates every log (about 45 bytes each), and rolls come once per
    /// 16 headers' worth of frames or more (`segment_bytes_target`), so a
    /// buffer kept for the next roll held 45 MB at a million logs for the
    /// rare moment it is used; a fresh one costs the roll its page faults.
    fn start_segment(&self, id: u32, path: &Path, file: &File) -> Result<(SegmentMap, usize)> {
        let mut header = Vec::new();
        let len = self.read_state().encode_catalog(&mut header, id);
        let capacity = reserve_for(0, len as u64, segment_bytes_target(len as u64, self.options.segment_bytes_max));
        let mut map = map_segment(file, path, capacity, len as u64, &*self.io)?;
        debug_assert!(map.capacity() >= len as u64);
        map.write(0, &header[..len]);
        self.io.sync_data(file).context(|| format!("syncing {}", path.display()))?;
        self.io.sync_dir(&self.dir).context(|| format!("syncing directory {}", self.dir.display()))?;
        Ok((map, len))
    }

    /// fsync the active segment (everything before it is durable already:
    /// see `roll`). A failure poisons the namespace.
    pub(super) fn sync_active(&self, writer: &Writer) -> Result<()> {
        if let Err(e) = self.io.sync_data(&writer.active) {
            self.durability.poison(format!("fsync failed: {e}"));
            return self.durability.poisoned(&self.name);
        }
        let mut durability = self.durability.lock();
        durability.synced = durability.synced.max(writer.written_total);
        Ok(())
    }

    /// After a frame is written: delete dead segments and compact. A failure
    /// here never fails the operation that wrote the frame (it happened);
    /// the next write retries. A failed fsync has poisoned the namespace,
    /// which the operation's durability wait reports.
    pub(super) fn housekeep(&self, writer: &mut Writer) {
        // Checked under the read lock: most writes find nothing due.
        if self.read_state().logs.pack_due() {
            // Dropped after the lock is let go.
            let packed = self.write_state().logs.pack_if_due();
            drop(packed);
        }
        if self.delete_dead_segments(writer).is_ok() && self.over_disk_budget(writer) {
            let _ = self.compact(writer);
        }
        if writer.written_total >= writer.checkpoint_due {
            self.save_checkpoint(writer);
        }
    }

    /// Save an index checkpoint of every frame written so far, so that an
    /// open after a crash replays only the frames after it. Best effort,
    /// like the rest of housekeeping: a failed save leaves the previous
    /// checkpoint, which still describes a prefix of the journal, and is
    /// tried again later.
    ///
    /// Only the encoding holds the writer (at 20M records, 80 ms of what
    /// were 180 ms of held appends). A thread then makes the frames durable
    /// — a checkpoint that outlived a power cut must not describe bytes the
    /// segments lost — and compresses and writes the index. While it runs,
    /// a save that falls due waits for a later write.
    fn save_checkpoint(&self, writer: &mut Writer) {
        if writer.checkpoint_write.as_ref().is_some_and(|write| !write.is_finished()) {
            return;
        }
        writer.finish_checkpoint_write();
        // A panic may have left the state behind a frame on disk (written,
        // not yet applied): then only a replay knows the truth.
        let consistent = !self.state.is_poisoned() && !self.writer.as_ref().is_some_and(std::sync::Mutex::is_poisoned);
        let index = if consistent && self.durability.poisoned(&self.name).is_ok() {
            let buffer = std::mem::take(&mut writer.checkpoint_buffer);
            checkpoint::Index::encode_into(buffer, &self.read_state(), (writer.active_id, writer.active_len))
        } else {
            None
        };
        let index_bytes = index.as_ref().map_or(0, checkpoint::Index::len);
        writer.checkpoint_due = writer.written_total + checkpoint::save_interval(index_bytes, &self.options);
        let Some(index) = index else {
            // The buffer went with the encoding.
            writer.checkpoint_buffer_written = 0;
            return;
        };
        writer.checkpoint_buffer_written = writer.checkpoint_buffer_written.max(index.buffer_len());
        let (durability, name, dir, written) =
            (Arc::clone(&self.durability), self.name.clone(), self.dir.clone(), writer.written_total);
        let spawned = std::thread::Builder::new().name("varve-checkpoint".into()).spawn(move || {
            // A failed fsync poisons the namespace, which the next operation reports.
            if durability.wait_durable(&name, written).is_ok() {
                let _ = index.write(&dir);
            }
            index.into_buffer()
        });
        // No thread to be had (a process limit): no checkpoint this time.
        writer.checkpoint_write = spawned.ok();
        if writer.checkpoint_write.is_none() {
            writer.checkpoint_buffer_written = 0;
        }
    }
}

impl Writer {
    /// Bytes of the checkpoint buffer in memory, whether here or lent to
    /// the thread writing a checkpoint.
    pub(super) fn checkpoint_buffer_bytes(&self) -> u64 {
        let held = self.checkpoint_write.is_some() || self.checkpoint_buffer.capacity() > 0;
        if held {
            self.checkpoint_buffer_written
        } else {
            0
        }
    }

    /// Wait for the checkpoint being written on its thread, if one is:
    /// before anything removes the checkpoint (which that thread would
    /// bring back) or saves another.
    pub(super) fn finish_checkpoint_write(&mut self) {
        if let Some(write) = self.checkpoint_write.take() {
            // A panic on that thread left at most a temporary file, which the next open removes.
            match write.join() {
                Ok(buffer) => self.checkpoint_buffer = buffer,
                Err(_) => self.checkpoint_buffer_written = 0,
            }
        }
    }
}

impl Shared {
    /// A state update that validation should have made impossible failed:
    /// stop writing rather than let memory and disk disagree.
    pub(super) fn poison_inconsistent(&self, reason: &str) -> LogError {
        let cause = format!("internal inconsistency: {reason}");
        self.durability.poison(cause.clone());
        LogError::Poisoned { namespace: self.name.clone(), cause }
    }

    pub(super) fn append(&self, batch: &[(&str, &[u8])], expect: rules::Expect<'_>) -> Result<Vec<Seq>> {
        rules::check_batch(&self.options.limits, batch)?;
        let mut writer = self.writer("append")?;
        let ids_and_seqs = {
            let state = self.read_state();
            rules::assign_seqs(batch, expect, |name| {
                let log = state.log_by_name(name).ok_or_else(|| self.not_found(name))?;
                let bounds = rules::LogBounds { latest: log.latest(), retention: log.descriptor.config.retention };
                Ok((log.descriptor.id, bounds))
            })?
        };
        writer.frame.clear();
        let mut frame = if batch.len() == 1 {
            FrameEncoder::begin(&mut writer.frame, FrameKind::AppendOne)
        } else {
            let mut frame = FrameEncoder::begin(&mut writer.frame, FrameKind::Append);
            frame.put_u32(u32::try_from(batch.len()).expect("bounded by Limits"));
            frame
        };
        let offsets: Vec<usize> =
            batch.iter().zip(&ids_and_seqs).map(|((_, value), (id, seq))| frame.entry(*id, *seq, value)).collect();
        frame.finish();
        let (segment, at) = self.write_frame(&mut writer)?;
        {
            let mut state = self.write_state();
            for (((_, value), (id, seq)), offset) in batch.iter().zip(&ids_and_seqs).zip(offsets) {
                state
                    .apply_append(*id, *seq, position(segment, at, offset, value.len()))
                    .map_err(|reason| self.poison_inconsistent(&reason))?;
            }
            if let Some(s) = state.segments.get_mut(&segment) {
                s.bytes = writer.active_len;
            }
        }
        self.housekeep(&mut writer);
        let written = writer.written_total;
        drop(writer);
        self.notifier.notify();
        self.acknowledge(written)?;
        Ok(ids_and_seqs.into_iter().map(|(_, seq)| seq).collect())
    }

    /// Return once a change that ended at byte `written` is as durable as
    /// the sync policy promises. Catalog changes follow the policy too: a
    /// `CreateLog` frame precedes every append to its log in the same
    /// journal, so it can never be lost while a later append survives.
    pub(super) fn acknowledge(&self, written: u64) -> Result<()> {
        match self.options.sync {
            SyncPolicy::Always => self.durability.wait_durable(&self.name, written),
            SyncPolicy::Group(_) | SyncPolicy::Never => Ok(()),
        }
    }

    pub(super) fn write_catalog_frame(&self, writer: &mut Writer) -> Result<()> {
        self.write_frame(writer)?;
        let mut state = self.write_state();
        if let Some(s) = state.segments.get_mut(&writer.active_id) {
            s.bytes = writer.active_len;
        }
        Ok(())
    }

    pub(super) fn create_log(&self, log: &str, config: LogConfig) -> Result<()> {
        rules::check_create(log, &config)?;
        if self.writer.is_none() {
            self.refresh()?;
            return match self.read_state().log_by_name(log) {
                Some(existing) => rules::check_recreate(log, &existing.descriptor.config, &config),
                None => Err(LogError::ReadOnly { namespace: self.name.clone(), operation: "create a log" }),
            };
        }
        let mut writer = self.writer("create a log")?;
        let descriptor = {
            let state = self.read_state();
            if let Some(existing) = state.log_by_name(log) {
                return rules::check_recreate(log, &existing.descriptor.config, &config);
            }
            LogDescriptor { id: state.next_log_id, name: log.to_owned(), config, latest: 0, trimmed_before: 0 }
        };
        writer.frame.clear();
        format::encode_create(&mut writer.frame, &descriptor);
        self.write_catalog_frame(&mut writer)?;
        self.write_state().apply_create(descriptor).map_err(|reason| self.poison_inconsistent(&reason))?;
        // Every frame is followed by housekeeping: a namespace that only
        // creates logs packs and checkpoints them too.
        self.housekeep(&mut writer);
        let written = writer.written_total;
        drop(writer);
        self.acknowledge(written)
    }

    pub(super) fn delete_log(&self, log: &str) -> Result<()> {
        let mut writer = self.writer("delete a log")?;
        let id = self.read_state().log_by_name(log).ok_or_else(|| self.not_found(log))?.descriptor.id;
        writer.frame.clear();
        format::encode_delete(&mut writer.frame, id);
        self.write_catalog_frame(&mut writer)?;
        self.write_state().apply_delete(id).map_err(|reason| self.poison_inconsistent(&reason))?;
        self.housekeep(&mut writer);
        let written = writer.written_total;
        drop(writer);
        self.notifier.notify();
        self.acknowledge(written)
    }
}

impl Shared {
    /// All the renames of the call in one `RenameLogs` frame, so a crash
    /// leaves all of them or none; checked first against the state under
    /// the writer's lock, so nothing changes when one is refused.
    pub(super) fn rename_logs(&self, renames: &[(&str, &str)]) -> Result<()> {
        rules::check_rename_arguments(renames)?;
        if renames.is_empty() {
            return Ok(());
        }
        if self.writer.is_none() {
            self.refresh()?;
            let state = self.read_state();
            rules::check_renames(&self.name, renames, |name| state.log_by_name(name).is_some())?;
            return Err(LogError::ReadOnly { namespace: self.name.clone(), operation: "rename logs" });
        }
        let mut writer = self.writer("rename logs")?;
        let by_id: Vec<(u32, String)> = {
            let state = self.read_state();
            rules::check_renames(&self.name, renames, |name| state.log_by_name(name).is_some())?;
            renames
                .iter()
                .map(|(from, to)| (state.log_by_name(from).expect("checked above").descriptor.id, (*to).to_owned()))
                .collect()
        };
        writer.frame.clear();
        let pairs: Vec<(u32, &str)> = by_id.iter().map(|(id, name)| (*id, name.as_str())).collect();
        format::encode_rename(&mut writer.frame, &pairs);
        self.write_catalog_frame(&mut writer)?;
        self.write_state().apply_rename(&by_id).map_err(|reason| self.poison_inconsistent(&reason))?;
        self.housekeep(&mut writer);
        let written = writer.written_total;
        drop(writer);
        self.notifier.notify();
        self.acknowledge(written)
    }

    /// One `TrimLog` frame; checked first against the state under the
    /// writer's lock (`rules::check_trim`), so a refused trim writes nothing.
    /// The records trimmed are dead from then on: the compactor reclaims
    /// their segments as it does those of overwritten records.
    pub(super) fn trim(&self, log: &str, before: Seq) -> Result<Seq> {
        if self.writer.is_none() {
            self.refresh()?;
            let state = self.read_state();
            let existing = state.log_by_name(log).ok_or_else(|| self.not_found(log))?;
            let retention = existing.descriptor.config.retention;
            rules::check_trim(log, retention, before, existing.earliest(), existing.latest())?;
            return Err(LogError::ReadOnly { namespace: self.name.clone(), operation: "trim a log" });
        }
        let mut writer = self.writer("trim a log")?;
        let id = {
            let state = self.read_state();
            let existing = state.log_by_name(log).ok_or_else(|| self.not_found(log))?;
            let retention = existing.descriptor.config.retention;
            if rules::check_trim(log, retention, before, existing.earliest(), existing.latest())?.is_none() {
                return Ok(existing.earliest()); // at or below it: nothing to write
            }
            existing.descriptor.id
        };
        writer.frame.clear();
        format::encode_trim(&mut writer.frame, id, before);
        self.write_catalog_frame(&mut writer)?;
        let earliest = {
            let mut state = self.write_state();
            state.apply_trim(id, before).map_err(|reason| self.poison_inconsistent(&reason))?;
            state.logs.get(id).expect("trimmed above").earliest()
        };
        self.housekeep(&mut writer);
        let written = writer.written_total;
        drop(writer);
        self.notifier.notify();
        self.acknowledge(written)?;
        Ok(earliest)
    }
}

pub(crate) fn position(segment: u32, frame_at: u64, offset_in_frame: usize, len: usize) -> Position {
    Position {
        segment,
        offset: u32::try_from(frame_at + offset_in_frame as u64).expect("segments are under 4 GiB"),
        len: u32::try_from(len).expect("records are bounded by Limits"),
    }
}
