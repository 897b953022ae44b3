//! Reclaiming disk: sealed segments with no live record are deleted, and the
//! compactor copies the live records out of mostly-dead segments (`Relocate`
//! frames) whenever disk use exceeds twice the live data plus one segment.
//!
//! A segment with damage is never deleted or compacted here: it stays, as
//! the evidence, until `fsck --repair` salvages it (`salvage_segment`).

use std::fs;
use std::ops::Range;

use crate::codec::ByteWriter;
use crate::contract::Seq;
use crate::error::{IoContext, Result};
use crate::journal::checkpoint;
use crate::journal::format::{self, FrameEncoder, FrameError, FrameKind, ENTRY_HEADER_BYTES};
use crate::journal::scan::segment_path;
use crate::journal::state::State;
use crate::journal::writer::{position, Writer};
use crate::journal::{Shared, COMPACTION_SEGMENTS_PER_CALL_MAX, RELOCATE_FRAME_BYTES};

/// A live record found in a segment: its log, seq and payload's byte range.
type LiveEntry = (u32, Seq, Range<usize>);

impl Shared {
    /// Delete a sealed segment that holds no live record.
    ///
    /// The frames that made its records dead (newer appends that trimmed
    /// them, a `DeleteLog`, `Relocate` copies) are made durable first, under
    /// every sync policy: if the deletion reached the disk and they did not,
    /// a power cut would leave a journal whose live records are gone.
    pub(super) fn delete_segment(&self, writer: &mut Writer, id: u32) -> Result<()> {
        debug_assert_ne!(id, writer.active_id);
        let Some(path) = self.read_state().segments.get(&id).map(|s| s.path.clone()) else { return Ok(()) };
        self.sync_active(writer)?;
        self.io.remove_file(&path).context(|| format!("deleting {}", path.display()))?;
        if let Some(segment) = self.write_state().segments.remove(&id) {
            debug_assert_eq!(segment.live_records, 0);
            writer.disk_bytes -= segment.bytes;
        }
        Ok(())
    }

    /// Delete sealed, undamaged segments that no longer hold a live record.
    ///
    /// A segment becomes dead only when its last live record goes (counted
    /// in `Liveness::segments_emptied`) or, already empty, when the writer
    /// rolls past it; so the segments are looked through only after one of
    /// those, and until every dead one found was deleted.
    pub(super) fn delete_dead_segments(&self, writer: &mut Writer) -> Result<()> {
        let (dead, emptied) = {
            let state = self.read_state();
            let emptied = state.live.segments_emptied;
            if writer.dead_segments_deleted_at == Some((emptied, writer.active_id)) {
                return Ok(());
            }
            let dead: Vec<u32> = state
                .segments
                .iter()
                .filter(|(&id, s)| id != writer.active_id && s.live_records == 0 && !s.damaged)
                .map(|(&id, _)| id)
                .collect();
            (dead, emptied)
        };
        dead.into_iter().try_for_each(|id| self.delete_segment(writer, id))?;
        writer.dead_segments_deleted_at = Some((emptied, writer.active_id));
        Ok(())
    }

    /// Is disk use above twice the live data plus the active segment (as
    /// large as it may grow)?
    ///
    /// Invariant this keeps: if every sealed segment is at least half live,
    /// sealed bytes are at most twice live bytes, so over budget implies a
    /// victim exists for `compact` (barring one oversized frame, or damaged
    /// segments, which are kept).
    pub(super) fn over_disk_budget(&self, writer: &Writer) -> bool {
        writer.disk_bytes > 2 * self.read_state().live.bytes + self.segment_bytes_target(writer)
    }

    /// Reclaim mostly-dead segments while disk use is over budget.
    pub(super) fn compact(&self, writer: &mut Writer) -> Result<()> {
        debug_assert_eq!(writer.disk_bytes, self.read_state().segments.values().map(|s| s.bytes).sum::<u64>());
        debug_assert_eq!(
            self.read_state().live.bytes,
            self.read_state().segments.values().map(|s| s.live_bytes).sum::<u64>()
        );
        for _ in 0..COMPACTION_SEGMENTS_PER_CALL_MAX {
            if !self.over_disk_budget(writer) {
                return Ok(());
            }
            let victim = {
                let state = self.read_state();
                state
                    .segments
                    .iter()
                    .filter(|(&id, s)| id != writer.active_id && !s.damaged && s.live_bytes * 2 < s.bytes)
                    .min_by(|(_, a), (_, b)| {
                        (u128::from(a.live_bytes) * u128::from(b.bytes))
                            .cmp(&(u128::from(b.live_bytes) * u128::from(a.bytes)))
                    })
                    .map(|(&id, _)| id)
            };
            let Some(victim) = victim else { return Ok(()) };
            if self.relocate_live_records(writer, victim)? {
                self.delete_segment(writer, victim)?;
            }
        }
        Ok(())
    }

    /// Copy the intact live records of segment `id` to the head. Returns
    /// whether the segment checked whole; if not, it is marked damaged and
    /// its damaged records stay where they are.
    pub(super) fn relocate_live_records(&self, writer: &mut Writer, id: u32) -> Result<bool> {
        let path = segment_path(&self.dir, id);
        let bytes = fs::read(&path).context(|| format!("reading {} for compaction", path.display()))?;
        let (live, intact) = live_entries(&self.read_state(), id, &bytes);
        if !intact {
            if let Some(segment) = self.write_state().segments.get_mut(&id) {
                segment.damaged = true;
            }
            // A checkpoint saved before knows nothing of this damage, and
            // no new one is saved while the namespace holds it: remove the
            // old one, so that every later open replays, finds and reports
            // it. (Failing that, the next open that trusts it misses it.)
            writer.finish_checkpoint_write();
            let _ = checkpoint::discard(&self.dir, &*self.io);
        }
        let mut pending = live.as_slice();
        while !pending.is_empty() {
            writer.frame.clear();
            let mut frame = FrameEncoder::begin(&mut writer.frame, FrameKind::Relocate);
            let count = pending
                .iter()
                .scan(0usize, |size, (_, _, range)| {
                    *size += ENTRY_HEADER_BYTES + range.len();
                    Some(*size)
                })
                .take_while(|&size| size <= RELOCATE_FRAME_BYTES)
                .count()
                .max(1);
            let (chunk, rest) = pending.split_at(count);
            frame.put_u32(u32::try_from(chunk.len()).expect("bounded by RELOCATE_FRAME_BYTES"));
            let offsets: Vec<usize> =
                chunk.iter().map(|(log_id, seq, range)| frame.entry(*log_id, *seq, &bytes[range.clone()])).collect();
            frame.finish();
            let (segment, at) = self.write_frame(writer)?;
            let mut state = self.write_state();
            for ((log_id, seq, range), offset) in chunk.iter().zip(offsets) {
                let position = position(segment, at, offset, range.len());
                state.apply_relocate(*log_id, *seq, position).map_err(|reason| self.poison_inconsistent(&reason))?;
            }
            if let Some(s) = state.segments.get_mut(&segment) {
                s.bytes = writer.active_len;
            }
            pending = rest;
        }
        Ok(intact)
    }
}

/// The records of segment `id` (its `bytes`) that are live — the state's
/// position for their seq points here — and whose checksums hold. Damaged
/// frames are skipped; the flag says whether there were any.
fn live_entries(state: &State, id: u32, bytes: &[u8]) -> (Vec<LiveEntry>, bool) {
    let mut live = Vec::new();
    let mut intact = true;
    let mut at = 0;
    while at < bytes.len() {
        let (frame, bad) = match format::check_frame(&bytes[at..], true) {
            Ok(frame) => (frame, Vec::new()),
            Err(FrameError::BadRecords { len, bad }) => (format::frame_with_bad_records(&bytes[at..], len), bad),
            Err(_) if bytes[at..].iter().all(|&b| b == 0) => break,
            Err(FrameError::BadBody { len, .. }) => {
                intact = false;
                at += len;
                continue;
            }
            Err(_) => {
                intact = false;
                match format::next_frame_after(bytes, at) {
                    Some(next) => {
                        at = next;
                        continue;
                    }
                    None => break,
                }
            }
        };
        intact &= bad.is_empty();
        if let Ok(format::FrameBody::Append(entries) | format::FrameBody::Relocate(entries)) = format::parse_body(frame)
        {
            for (index, entry) in entries.iter().enumerate() {
                let offset = at + entry.offset_in_frame;
                let here = state.logs.get(entry.log_id).and_then(|log| log.position(entry.seq));
                if !bad.contains(&index) && here.is_some_and(|p| p.segment == id && p.offset as usize == offset) {
                    let start = offset + ENTRY_HEADER_BYTES;
                    live.push((entry.log_id, entry.seq, start..start + entry.payload.len()));
                }
            }
        }
        at += frame.len;
    }
    (live, intact)
}
