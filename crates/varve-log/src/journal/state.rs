//! What the journal knows in memory: the catalog (logs by id and name), each
//! log's index seq → position, and per-segment live-data accounting.
//!
//! The writer, recovery and read-only refresh all change it only through the
//! `apply_*` methods, so the three agree by construction.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

use crate::contract::{LogInfo, Seq};
use crate::journal::format::{LogDescriptor, SegmentHeader, ENTRY_HEADER_BYTES};
use crate::rules;

/// Where a record lives: the entry header's byte offset in a segment.
///
/// 12 bytes per record: segments are at most 4 GiB (see
/// `SEGMENT_BYTES_LIMIT`), so `u32` offsets suffice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Position {
    pub(crate) segment: u32,
    pub(crate) offset: u32,
    pub(crate) len: u32,
}

impl Position {
    /// A seq whose record has not been seen (yet) during recovery.
    pub(crate) const MISSING: Position = Position { segment: u32::MAX, offset: 0, len: 0 };

    pub(crate) fn is_missing(self) -> bool {
        self.segment == u32::MAX
    }

    pub(crate) fn entry_bytes(self) -> u64 {
        ENTRY_HEADER_BYTES as u64 + u64::from(self.len)
    }
}

#[derive(Debug)]
pub(crate) struct LogState {
    pub(crate) descriptor: LogDescriptor,
    /// Seq of `positions[0]`.
    pub(crate) base: Seq,
    /// Positions of seqs `base..=latest`; `base == latest + 1` when empty.
    pub(crate) positions: VecDeque<Position>,
}

impl LogState {
    pub(crate) fn latest(&self) -> Seq {
        self.descriptor.latest
    }

    pub(crate) fn earliest(&self) -> Seq {
        rules::earliest_kept(self.descriptor.config.retention, self.latest())
    }

    pub(crate) fn position(&self, seq: Seq) -> Option<Position> {
        let index = usize::try_from(seq.checked_sub(self.base)?).ok()?;
        self.positions.get(index).copied()
    }

    pub(crate) fn info(&self) -> LogInfo {
        LogInfo {
            name: self.descriptor.name.clone(),
            config: self.descriptor.config,
            earliest: self.earliest(),
            latest: self.latest(),
        }
    }
}

#[derive(Debug)]
pub(crate) struct SegmentState {
    pub(crate) path: PathBuf,
    pub(crate) file: Arc<File>,
    /// Bytes of valid frames in the file.
    pub(crate) bytes: u64,
    pub(crate) live_records: u64,
    pub(crate) live_bytes: u64,
}

/// A problem found while applying frames; the caller turns it into `Corrupt`
/// with the segment and offset it was reading.
pub(crate) type Inconsistency = String;

#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) logs: HashMap<u32, LogState>,
    pub(crate) ids_by_name: HashMap<String, u32>,
    pub(crate) next_log_id: u32,
    pub(crate) segments: BTreeMap<u32, SegmentState>,
    /// Sum of `live_bytes` over `segments`.
    pub(crate) live_bytes_total: u64,
    /// Most records one gap in recovery may skip (segments deleted by the
    /// compactor): bounded by the bytes on disk so a damaged header cannot
    /// make us allocate without limit.
    pub(crate) gap_records_max: u64,
}

impl State {
    pub(crate) fn log_by_name(&self, name: &str) -> Option<&LogState> {
        self.logs.get(self.ids_by_name.get(name)?)
    }

    pub(crate) fn catalog(&self, segment_id: u32) -> SegmentHeader {
        let mut logs: Vec<LogDescriptor> = self.logs.values().map(|log| log.descriptor.clone()).collect();
        logs.sort_by_key(|d| d.id);
        SegmentHeader {
            format_version: super::format::FORMAT_VERSION,
            segment_id,
            next_log_id: self.next_log_id,
            logs,
        }
    }

    fn forget(&mut self, position: Position) {
        forget(&mut self.segments, &mut self.live_bytes_total, position);
    }

    fn remember(&mut self, position: Position) {
        remember(&mut self.segments, &mut self.live_bytes_total, position);
    }

    pub(crate) fn apply_create(&mut self, descriptor: LogDescriptor) -> Result<(), Inconsistency> {
        if self.logs.contains_key(&descriptor.id) || self.ids_by_name.contains_key(&descriptor.name) {
            return Err(format!("log {:?} (id {}) created twice", descriptor.name, descriptor.id));
        }
        self.next_log_id = self.next_log_id.max(descriptor.id + 1);
        let state = LogState { base: descriptor.latest + 1, positions: VecDeque::new(), descriptor };
        self.ids_by_name.insert(state.descriptor.name.clone(), state.descriptor.id);
        self.logs.insert(state.descriptor.id, state);
        Ok(())
    }

    pub(crate) fn apply_delete(&mut self, log_id: u32) -> Result<(), Inconsistency> {
        let log = self.logs.remove(&log_id).ok_or_else(|| format!("delete of unknown log id {log_id}"))?;
        self.ids_by_name.remove(&log.descriptor.name);
        for position in log.positions {
            self.forget(position);
        }
        Ok(())
    }

    /// A segment header restates the whole catalog: logs it lacks were deleted
    /// in segments since reclaimed; logs it has may be ahead of what we have
    /// seen, when the records between were in reclaimed segments.
    pub(crate) fn apply_segment_header(&mut self, header: &SegmentHeader) -> Result<(), Inconsistency> {
        self.next_log_id = self.next_log_id.max(header.next_log_id);
        let listed: HashMap<u32, &LogDescriptor> = header.logs.iter().map(|d| (d.id, d)).collect();
        let gone: Vec<u32> = self.logs.keys().filter(|id| !listed.contains_key(id)).copied().collect();
        for id in gone {
            self.apply_delete(id)?;
        }
        for descriptor in &header.logs {
            if !self.logs.contains_key(&descriptor.id) {
                let fresh = LogDescriptor { latest: 0, ..descriptor.clone() };
                self.apply_create(fresh)?;
            }
            let log = self.logs.get(&descriptor.id).expect("present");
            if log.descriptor.name != descriptor.name || log.descriptor.config != descriptor.config {
                return Err(format!("segment header disagrees about log id {}", descriptor.id));
            }
            if descriptor.latest < log.latest() {
                return Err(format!(
                    "segment header says log {:?} ends at seq {}, but seq {} was already seen",
                    descriptor.name,
                    descriptor.latest,
                    log.latest()
                ));
            }
            self.skip_to(descriptor.id, descriptor.latest)?;
        }
        Ok(())
    }

    /// Advance a log's latest to `latest` over records we have not seen;
    /// they must be trimmed or be relocated later, or recovery reports them.
    fn skip_to(&mut self, log_id: u32, latest: Seq) -> Result<(), Inconsistency> {
        let State { logs, segments, gap_records_max, live_bytes_total, .. } = self;
        let log = logs.get_mut(&log_id).expect("caller checked");
        let old_latest = log.latest();
        if latest == old_latest {
            return Ok(());
        }
        let keep_from = rules::earliest_kept(log.descriptor.config.retention, latest);
        let missing_from = (old_latest + 1).max(keep_from);
        if latest + 1 - missing_from > *gap_records_max {
            return Err(format!(
                "log {:?} skips to seq {latest}, more records than the journal could hold",
                log.descriptor.name
            ));
        }
        log.descriptor.latest = latest;
        // Drop what retention no longer keeps, then pad up to `latest`.
        trim(log, segments, live_bytes_total, keep_from.min(old_latest + 1));
        if log.positions.is_empty() {
            log.base = missing_from;
        }
        for _ in missing_from..=latest {
            log.positions.push_back(Position::MISSING);
        }
        trim(log, segments, live_bytes_total, keep_from);
        debug_assert_eq!(log.base + log.positions.len() as u64, latest + 1);
        Ok(())
    }

    /// A new record, at the next seq of its log. Trims per retention.
    pub(crate) fn apply_append(&mut self, log_id: u32, seq: Seq, position: Position) -> Result<(), Inconsistency> {
        let State { logs, segments, live_bytes_total, .. } = self;
        let log = logs.get_mut(&log_id).ok_or_else(|| format!("record for unknown log id {log_id}"))?;
        if seq != log.latest() + 1 {
            return Err(format!(
                "log {:?} jumps from seq {} to {seq}: seqs must be dense",
                log.descriptor.name,
                log.latest()
            ));
        }
        log.descriptor.latest = seq;
        log.positions.push_back(position);
        remember(segments, live_bytes_total, position);
        let keep_from = log.earliest();
        trim(log, segments, live_bytes_total, keep_from);
        Ok(())
    }

    /// A copy of an existing record moved by the compactor; replaces the old
    /// position if the record is still live, else is ignored.
    pub(crate) fn apply_relocate(&mut self, log_id: u32, seq: Seq, position: Position) -> Result<(), Inconsistency> {
        let Some(log) = self.logs.get_mut(&log_id) else { return Ok(()) };
        if seq > log.latest() {
            return Err(format!("relocated seq {seq} of log {:?} was never appended", log.descriptor.name));
        }
        let Some(index) = seq.checked_sub(log.base).and_then(|i| usize::try_from(i).ok()) else { return Ok(()) };
        let Some(slot) = log.positions.get_mut(index) else { return Ok(()) };
        let old = std::mem::replace(slot, position);
        self.forget(old);
        self.remember(position);
        Ok(())
    }

    /// After recovery: every seq that should be readable has a position.
    pub(crate) fn check_complete(&self) -> Result<(), Inconsistency> {
        for log in self.logs.values() {
            if let Some(offset) = log.positions.iter().position(|p| p.is_missing()) {
                let seq = log.base + offset as u64;
                return Err(format!(
                    "log {:?} seq {seq} is missing: the segment that held it is gone",
                    log.descriptor.name
                ));
            }
            debug_assert!(log.latest() == 0 || log.base == log.earliest());
        }
        Ok(())
    }

    pub(crate) fn infos(&self) -> Vec<LogInfo> {
        let mut infos: Vec<LogInfo> = self.logs.values().map(LogState::info).collect();
        infos.sort_by(|a, b| a.name.cmp(&b.name));
        infos
    }
}

fn remember(segments: &mut BTreeMap<u32, SegmentState>, live_bytes_total: &mut u64, position: Position) {
    if let Some(segment) = segments.get_mut(&position.segment) {
        segment.live_records += 1;
        segment.live_bytes += position.entry_bytes();
        *live_bytes_total += position.entry_bytes();
    }
}

fn forget(segments: &mut BTreeMap<u32, SegmentState>, live_bytes_total: &mut u64, position: Position) {
    if position.is_missing() {
        return;
    }
    if let Some(segment) = segments.get_mut(&position.segment) {
        segment.live_records -= 1;
        segment.live_bytes -= position.entry_bytes();
        *live_bytes_total -= position.entry_bytes();
    }
}

/// Drop positions below `keep_from` (retention), releasing their segments.
fn trim(log: &mut LogState, segments: &mut BTreeMap<u32, SegmentState>, live_bytes_total: &mut u64, keep_from: Seq) {
    while log.base < keep_from {
        let Some(old) = log.positions.pop_front() else {
            log.base = keep_from;
            return;
        };
        forget(segments, live_bytes_total, old);
        log.base += 1;
    }
}
