//! Reclaiming disk: sealed segments with no live record are deleted, and the
//! compactor copies the live records out of mostly-dead segments (`Relocate`
//! frames) whenever disk use exceeds twice the live data plus one segment.

use std::fs;

use crate::contract::Seq;
use crate::error::{IoContext, Result};
use crate::journal::format::{self, FrameEncoder, FrameKind, ENTRY_HEADER_BYTES};
use crate::journal::scan::{corrupt, segment_path, Stop};
use crate::journal::writer::{position, Writer};
use crate::journal::{Shared, COMPACTION_SEGMENTS_PER_CALL_MAX, RELOCATE_FRAME_BYTES};

impl Shared {
    /// Delete a sealed segment that holds no live record.
    ///
    /// The frames that made its records dead (newer appends that trimmed
    /// them, a `DeleteLog`, `Relocate` copies) are made durable first, under
    /// every sync policy: if the deletion reached the disk and they did not,
    /// a power cut would leave a journal whose live records are gone.
    pub(super) fn delete_segment(&self, writer: &mut Writer, id: u32) -> Result<()> {
        debug_assert_ne!(id, writer.active_id);
        if !self.read_state().segments.contains_key(&id) {
            return Ok(());
        }
        self.sync_active(writer)?;
        let removed = self.write_state().segments.remove(&id);
        if let Some(segment) = removed {
            debug_assert_eq!(segment.live_records, 0);
            writer.disk_bytes -= segment.bytes;
            fs::remove_file(&segment.path).context(|| format!("deleting {}", segment.path.display()))?;
        }
        Ok(())
    }

    /// Delete sealed segments that no longer hold a live record.
    pub(super) fn delete_dead_segments(&self, writer: &mut Writer) -> Result<()> {
        let dead: Vec<u32> = self
            .read_state()
            .segments
            .iter()
            .filter(|(&id, s)| id != writer.active_id && s.live_records == 0)
            .map(|(&id, _)| id)
            .collect();
        dead.into_iter().try_for_each(|id| self.delete_segment(writer, id))
    }

    /// Is disk use above twice the live data plus the active segment?
    ///
    /// Invariant this keeps: if every sealed segment is at least half live,
    /// sealed bytes are at most twice live bytes, so over budget implies a
    /// victim exists for `compact` (barring one oversized frame).
    pub(super) fn over_disk_budget(&self, writer: &Writer) -> bool {
        writer.disk_bytes > 2 * self.read_state().live_bytes_total + self.options.segment_bytes_max
    }

    /// Reclaim mostly-dead segments while disk use is over budget.
    pub(super) fn compact(&self, writer: &mut Writer) -> Result<()> {
        debug_assert_eq!(writer.disk_bytes, self.read_state().segments.values().map(|s| s.bytes).sum::<u64>());
        debug_assert_eq!(
            self.read_state().live_bytes_total,
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
                    .filter(|(&id, s)| id != writer.active_id && s.live_bytes * 2 < s.bytes)
                    .min_by(|(_, a), (_, b)| {
                        (u128::from(a.live_bytes) * u128::from(b.bytes))
                            .cmp(&(u128::from(b.live_bytes) * u128::from(a.bytes)))
                    })
                    .map(|(&id, _)| id)
            };
            let Some(victim) = victim else { return Ok(()) };
            self.relocate_segment(writer, victim)?;
        }
        Ok(())
    }

    /// Copy the live records of segment `id` to the head, then delete it.
    pub(super) fn relocate_segment(&self, writer: &mut Writer, id: u32) -> Result<()> {
        let path = segment_path(&self.dir, id);
        let bytes = fs::read(&path).context(|| format!("reading {} for compaction", path.display()))?;
        let mut live: Vec<(u32, Seq, std::ops::Range<usize>)> = Vec::new();
        {
            let state = self.read_state();
            let mut at = 0;
            while at < bytes.len() {
                let frame = format::check_frame(&bytes[at..], false)
                    .map_err(|e| corrupt(&path, &Stop { offset: at as u64, reason: format!("{e:?}"), at_tail: false, incomplete: false }))?;
                if let Ok(format::FrameBody::Append(entries) | format::FrameBody::Relocate(entries)) =
                    format::parse_body(frame)
                {
                    for entry in entries {
                        let offset = at + entry.offset_in_frame;
                        let here = state.logs.get(&entry.log_id).and_then(|log| log.position(entry.seq));
                        if here.is_some_and(|p| p.segment == id && p.offset as usize == offset) {
                            let start = offset + ENTRY_HEADER_BYTES;
                            live.push((entry.log_id, entry.seq, start..start + entry.payload.len()));
                        }
                    }
                }
                at += frame.len;
            }
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
            frame.u32(u32::try_from(chunk.len()).expect("bounded by RELOCATE_FRAME_BYTES"));
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
        self.delete_segment(writer, id)
    }
}
