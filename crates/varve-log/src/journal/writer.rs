//! The writing side of a namespace: the active segment, frames written at the
//! end of the journal, segment rolls, and the operations that write (append,
//! create and delete a log).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use crate::contract::{LogConfig, Seq, SyncPolicy};
use crate::error::{IoContext, LogError, Result};
use crate::journal::format::{self, FrameEncoder, FrameKind, LogDescriptor};
use crate::journal::mapped::SegmentMap;
use crate::journal::scan::segment_path;
use crate::journal::state::{Position, State};
use crate::journal::{JournalOptions, Shared, Tail, PWRITE_FRAME_BYTES_MIN};
use crate::rules;

pub(super) struct Writer {
    pub(super) active_id: u32,
    pub(super) active: Arc<File>,
    /// The active segment's map; frames are copied in here.
    pub(super) map: SegmentMap,
    /// Valid bytes in the active segment; the next frame goes here. The
    /// file and map are longer (preallocated), zero past this point.
    pub(super) active_len: u64,
    /// Frames after the header in the active segment (unknown, so 1, for a
    /// segment found non-empty on open).
    pub(super) frames_in_active: u64,
    /// Total bytes written since open, across segments (for durability waits).
    pub(super) written_total: u64,
    /// Bytes in all segment files (what `compact` keeps within bounds).
    pub(super) disk_bytes: u64,
    pub(super) frame: Vec<u8>,
    pub(super) scratch: Vec<u8>,
}

/// Set up the writer on the newest segment, starting a segment if there is
/// none (or rewriting the header of one that lost it to a torn write; the
/// file is reused, so read-only followers keep reading the same file).
pub(crate) fn open_writer(dir: &Path, options: &JournalOptions, state: &State, tail: Tail) -> Result<Writer> {
    let (active_id, active_len) = tail.unwrap_or((1, 0));
    let path = segment_path(dir, active_id);
    let active = match state.segments.get(&active_id) {
        Some(segment) => segment.file.clone(),
        None => Arc::new(
            OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
                .context(|| format!("creating {}", path.display()))?,
        ),
    };
    let map = SegmentMap::new(&active, &path, options.segment_bytes_max.max(active_len))?;
    let frames_in_active = u64::from(active_len > 0);
    let mut writer = Writer {
        active_id,
        active,
        map,
        active_len,
        frames_in_active,
        written_total: 0,
        disk_bytes: state.segments.values().map(|s| s.bytes).sum::<u64>()
            + if state.segments.contains_key(&active_id) { 0 } else { active_len },
        frame: Vec::new(),
        scratch: Vec::new(),
    };
    if active_len == 0 {
        let len = format::encode_segment_header(&mut writer.scratch, &state.catalog(active_id));
        writer.map.write(0, &writer.scratch[..len]);
        writer.active.sync_all().context(|| format!("syncing {}", path.display()))?;
        sync_dir(dir)?;
        writer.active_len = len as u64;
        writer.disk_bytes += len as u64;
        writer.scratch.clear();
    }
    Ok(writer)
}

pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .context(|| format!("syncing directory {}", dir.display()))
}

impl Shared {
    /// Write the frame in `writer.frame` at the end of the journal, rolling
    /// to a new segment first if it would overflow this one. Returns the
    /// segment and offset it was written at.
    pub(super) fn write_frame(&self, writer: &mut Writer) -> Result<(u32, u64)> {
        let len = writer.frame.len() as u64;
        // A frame larger than a whole segment goes alone into a fresh one.
        if writer.active_len + len > self.options.segment_bytes_max && writer.frames_in_active > 0 {
            self.roll(writer)?;
        }
        let at = writer.active_len;
        if at + len > writer.map.capacity() {
            // Only a frame larger than a segment gets here: grow the file.
            let path = segment_path(&self.dir, writer.active_id);
            writer.map = SegmentMap::new(&writer.active, &path, at + len)?;
        }
        if writer.frame.len() < PWRITE_FRAME_BYTES_MIN {
            writer.map.write(at, &writer.frame);
        } else if let Err(e) = writer.active.write_all_at(&writer.frame, at) {
            // Nothing is published yet; a partial write leaves bytes past
            // `active_len` that the next frame overwrites, and recovery never
            // trusts a frame whose checksums fail.
            let path = segment_path(&self.dir, writer.active_id);
            return Err(LogError::io(format!("appending to {}", path.display()), e));
        }
        writer.active_len += len;
        writer.written_total += len;
        writer.disk_bytes += len;
        writer.frames_in_active += 1;
        self.durability.lock().written = writer.written_total;
        Ok((writer.active_id, at))
    }

    /// Seal the active segment and start the next, headed by the catalog.
    ///
    /// Rolls sync under every policy, `Never` included: a sealed segment is
    /// durable, and so is the new one's directory entry. That is what lets
    /// `delete_segment` make everything durable with one fsync of the active
    /// segment. (One or two fsyncs per segment of data cost nothing measurable.)
    pub(super) fn roll(&self, writer: &mut Writer) -> Result<()> {
        self.sync_active(writer)?;
        let id = writer.active_id.checked_add(1).ok_or_else(|| LogError::InvalidArgument {
            reason: "namespace has used every segment id; copy its logs to a new namespace".into(),
        })?;
        let path = segment_path(&self.dir, id);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .context(|| format!("creating {}", path.display()))?;
        let mut map = SegmentMap::new(&file, &path, self.options.segment_bytes_max)?;
        writer.scratch.clear();
        let len = format::encode_segment_header(&mut writer.scratch, &self.read_state().catalog(id));
        map.write(0, &writer.scratch[..len]);
        file.sync_data().context(|| format!("syncing {}", path.display()))?;
        sync_dir(&self.dir)?;
        let sealed = writer.active_id;
        let sealed_file = std::mem::replace(&mut writer.active, Arc::new(file));
        // Cut the sealed segment's zero reserve: sealed files end at their last frame.
        drop(std::mem::replace(&mut writer.map, map));
        let sealed_path = segment_path(&self.dir, sealed);
        sealed_file.set_len(writer.active_len).context(|| format!("sealing {}", sealed_path.display()))?;
        writer.active_id = id;
        writer.active_len = len as u64;
        writer.frames_in_active = 0;
        writer.written_total += len as u64;
        writer.disk_bytes += len as u64;
        self.install_active_segment(writer);
        self.durability.lock().written = writer.written_total;
        let sealed_is_dead = self.read_state().segments.get(&sealed).is_some_and(|s| s.live_records == 0);
        if sealed_is_dead {
            self.delete_segment(writer, sealed)?;
        }
        Ok(())
    }

    /// fsync the active segment (everything before it is durable already:
    /// see `roll`). A failure poisons the namespace.
    pub(super) fn sync_active(&self, writer: &Writer) -> Result<()> {
        if let Err(e) = writer.active.sync_data() {
            self.durability.poison(format!("fsync failed: {e}"));
            return self.durability.poisoned(&self.name);
        }
        let mut durability = self.durability.lock();
        durability.synced = durability.synced.max(writer.written_total);
        Ok(())
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

    pub(super) fn append(&self, batch: &[(&str, &[u8])], expected_latest: Option<Seq>) -> Result<Vec<Seq>> {
        rules::check_batch(&self.options.limits, batch)?;
        let mut writer = self.writer("append")?;
        let mut ids_and_seqs: Vec<(u32, Seq)> = Vec::with_capacity(batch.len());
        {
            let state = self.read_state();
            let mut next: Vec<(u32, Seq)> = Vec::new();
            for (name, _) in batch {
                let log = state.log_by_name(name).ok_or_else(|| self.not_found(name))?;
                let id = log.descriptor.id;
                let seq = if let Some((_, seq)) = next.iter_mut().find(|(other, _)| *other == id) {
                    *seq += 1;
                    *seq
                } else {
                    if let Some(expected) = expected_latest {
                        if log.latest() != expected {
                            return Err(LogError::Conflict { log: (*name).to_owned(), expected, actual: log.latest() });
                        }
                    }
                    let seq = log.latest() + 1;
                    next.push((id, seq));
                    seq
                };
                ids_and_seqs.push((id, seq));
            }
            for (id, last_seq) in &next {
                let log = &state.logs[id];
                rules::check_room(&log.descriptor.name, log.descriptor.config.retention, log.latest(), last_seq - log.latest())?;
            }
        }
        writer.frame.clear();
        let mut frame = if batch.len() == 1 {
            FrameEncoder::begin(&mut writer.frame, FrameKind::AppendOne)
        } else {
            let mut frame = FrameEncoder::begin(&mut writer.frame, FrameKind::Append);
            frame.u32(u32::try_from(batch.len()).expect("bounded by Limits"));
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
        self.delete_dead_segments(&mut writer)?;
        if self.over_disk_budget(&writer) {
            self.compact(&mut writer)?;
        }
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
            LogDescriptor { id: state.next_log_id, name: log.to_owned(), config, latest: 0 }
        };
        writer.frame.clear();
        format::encode_create(&mut writer.frame, &descriptor);
        self.write_catalog_frame(&mut writer)?;
        self.write_state().apply_create(descriptor).map_err(|reason| self.poison_inconsistent(&reason))?;
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
        self.delete_dead_segments(&mut writer)?;
        let written = writer.written_total;
        drop(writer);
        self.notifier.notify();
        self.acknowledge(written)
    }
}

pub(crate) fn position(segment: u32, frame_at: u64, offset_in_frame: usize, len: usize) -> Position {
    Position {
        segment,
        offset: u32::try_from(frame_at + offset_in_frame as u64).expect("segments are under 4 GiB"),
        len: u32::try_from(len).expect("records are bounded by Limits"),
    }
}
