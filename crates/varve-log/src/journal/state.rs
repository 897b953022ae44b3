//! What the journal knows in memory: the catalog (logs by id and name), each
//! log's index seq → position, per-segment live-data accounting, and the
//! records known to be lost.
//!
//! The writer, recovery and read-only refresh all change it only through the
//! `apply_*` methods, so the three agree by construction. Recovery and
//! refresh apply frames found on disk leniently: a frame that disagrees with
//! what came before (which only damage can cause) is refused with a reason
//! and skipped by the caller, and records that should exist but are in no
//! intact frame are marked *lost* rather than making the namespace unreadable.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

use crate::contract::{LogInfo, Seq};
pub(crate) use crate::error::LossCause;
use crate::journal::catalog::Catalog;
use crate::journal::format::{LogDescriptor, SegmentHeader, ENTRY_HEADER_BYTES};
use crate::journal::mapped::ReadMap;
use crate::rules;

/// Where a record lives: the entry header's byte offset in a segment.
///
/// 12 bytes per record: segments are at most 4 GiB (see
/// `SEGMENT_BYTES_LIMIT`), so `u32` offsets suffice. A lost record has
/// `segment == LOST_SEGMENT` and the index of its [`LossCause`] as `offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Position {
    pub(crate) segment: u32,
    pub(crate) offset: u32,
    pub(crate) len: u32,
}

/// No segment has this id (ids are at most `u32::MAX - 1`, see `roll`).
const LOST_SEGMENT: u32 = u32::MAX;

impl Position {
    /// A record that should exist but is in no intact frame (yet: during
    /// recovery a later `Relocate` frame may still supply it).
    pub(crate) fn lost(cause: usize) -> Position {
        Position { segment: LOST_SEGMENT, offset: u32::try_from(cause).expect("causes are bounded by frames"), len: 0 }
    }

    /// The index of the [`LossCause`] of a lost record.
    pub(crate) fn lost_cause(self) -> Option<usize> {
        (self.segment == LOST_SEGMENT).then_some(self.offset as usize)
    }

    pub(crate) fn entry_bytes(self) -> u64 {
        ENTRY_HEADER_BYTES as u64 + u64::from(self.len)
    }
}

/// A run of consecutive lost seqs of one log, all for one cause.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LostRun {
    pub(crate) log_id: u32,
    pub(crate) first: Seq,
    pub(crate) last: Seq,
    pub(crate) cause: usize,
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
        rules::earliest_after_trims(self.descriptor.config.retention, self.latest(), self.descriptor.trimmed_before)
    }

    pub(crate) fn position(&self, seq: Seq) -> Option<Position> {
        let index = usize::try_from(seq.checked_sub(self.base)?).ok()?;
        self.positions.get(index).copied()
    }

    /// The run of lost seqs around `seq` (which is lost), clipped to what
    /// retention keeps.
    pub(crate) fn lost_run_around(&self, seq: Seq) -> Option<LostRun> {
        let cause = self.position(seq)?.lost_cause()?;
        let same = |s: Seq| self.position(s).and_then(Position::lost_cause) == Some(cause);
        let mut first = seq;
        while first > self.base && same(first - 1) {
            first -= 1;
        }
        let mut last = seq;
        while last < self.latest() && same(last + 1) {
            last += 1;
        }
        Some(LostRun { log_id: self.descriptor.id, first, last, cause })
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
    /// Damage was found in it. A damaged segment is never deleted or
    /// compacted by the writer: it stays, as the evidence, until
    /// `fsck --repair` salvages its intact records and quarantines it.
    pub(crate) damaged: bool,
    /// The file mapped for reading, in the process that holds the writer
    /// lock (see `mapped::ReadMap`); `None` in read-only processes, which
    /// use `pread` (their writer may cut the active segment at any time).
    pub(crate) read_map: Option<Arc<ReadMap>>,
}

impl SegmentState {
    pub(crate) fn new(path: PathBuf, file: Arc<File>) -> SegmentState {
        SegmentState { path, file, bytes: 0, live_records: 0, live_bytes: 0, damaged: false, read_map: None }
    }
}

/// Why a frame found on disk could not be applied; the caller reports it
/// as damage at the frame's segment and offset and skips the frame.
pub(crate) type Inconsistency = String;

#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) logs: Catalog,
    pub(crate) next_log_id: u32,
    pub(crate) segments: BTreeMap<u32, SegmentState>,
    /// Sum of `live_bytes` over `segments`.
    pub(crate) live_bytes_total: u64,
    /// Most records one gap in recovery may skip (segments deleted by the
    /// compactor): bounded by the bytes on disk so a damaged header cannot
    /// make us allocate without limit.
    pub(crate) gap_records_max: u64,
    /// Indexed by lost positions. Grows only when damage is found.
    pub(crate) loss_causes: Vec<LossCause>,
}

impl State {
    pub(crate) fn log_by_name(&self, name: &str) -> Option<&LogState> {
        self.logs.by_name(name)
    }

    pub(crate) fn catalog(&self, segment_id: u32) -> SegmentHeader {
        let mut logs: Vec<LogDescriptor> = self.logs.values().map(|log| log.descriptor.clone()).collect();
        logs.sort_by_key(|d| d.id);
        SegmentHeader { format_version: super::format::FORMAT_VERSION, segment_id, next_log_id: self.next_log_id, logs }
    }

    /// Record why records are lost; returns the index lost positions carry.
    pub(crate) fn add_loss_cause(&mut self, cause: LossCause) -> usize {
        add_loss_cause(&mut self.loss_causes, cause)
    }

    fn forget(&mut self, position: Position) {
        forget(&mut self.segments, &mut self.live_bytes_total, position);
    }

    fn remember(&mut self, position: Position) {
        remember(&mut self.segments, &mut self.live_bytes_total, position);
    }

    /// A new log. On disk, a name already taken by an older log id means the
    /// older log's deletion was in bytes since lost: the newer id wins.
    pub(crate) fn apply_create(&mut self, descriptor: LogDescriptor) -> Result<(), Inconsistency> {
        if self.logs.contains(descriptor.id) {
            return Err(format!("log {:?} (id {}) created twice", descriptor.name, descriptor.id));
        }
        if let Some(older) = self.logs.by_name(&descriptor.name).map(|log| log.descriptor.id) {
            if older > descriptor.id {
                return Err(format!(
                    "log {:?} created as id {}, but a newer log of that name (id {older}) exists",
                    descriptor.name, descriptor.id
                ));
            }
            self.apply_delete(older)?;
        }
        self.next_log_id = self.next_log_id.max(descriptor.id + 1);
        let state = LogState { base: descriptor.latest + 1, positions: VecDeque::new(), descriptor };
        self.logs.insert(state);
        Ok(())
    }

    pub(crate) fn apply_delete(&mut self, log_id: u32) -> Result<(), Inconsistency> {
        let log = self.logs.remove(log_id).ok_or_else(|| format!("delete of unknown log id {log_id}"))?;
        for position in log.positions {
            self.forget(position);
        }
        Ok(())
    }

    /// Logs take new names, all at once (a `RenameLogs` frame, or a segment
    /// header that states names a reclaimed segment's renames gave). Each
    /// `system` flag follows its new name (`rules::config_renamed`).
    /// Refused whole, changing nothing, unless every id exists and is listed
    /// once, and every new name is listed once and is free or held by a log
    /// the same call renames.
    pub(crate) fn apply_rename(&mut self, renames: &[(u32, String)]) -> Result<(), Inconsistency> {
        let mut ids = std::collections::HashSet::new();
        let mut names = std::collections::HashSet::new();
        for (id, name) in renames {
            if !self.logs.contains(*id) {
                return Err(format!("rename of unknown log id {id}"));
            }
            if !ids.insert(*id) || !names.insert(name.as_str()) {
                return Err(format!("rename names log id {id} or name {name:?} twice"));
            }
        }
        for (id, name) in renames {
            if let Some(holder) = self.logs.by_name(name) {
                if !ids.contains(&holder.descriptor.id) {
                    return Err(format!(
                        "rename of log id {id} to {name:?}, which log id {} holds and keeps",
                        holder.descriptor.id
                    ));
                }
            }
        }
        self.logs.rename(renames);
        for (id, name) in renames {
            let log = self.logs.get_mut(*id).expect("checked above");
            log.descriptor.config = rules::config_renamed(log.descriptor.config, name);
        }
        Ok(())
    }

    /// A log's records below `before` are gone (a `TrimLog` frame, or a
    /// segment header that states a floor a reclaimed segment's trim set).
    /// A floor at or below the one known changes nothing.
    pub(crate) fn apply_trim(&mut self, log_id: u32, before: Seq) -> Result<(), Inconsistency> {
        let State { logs, segments, live_bytes_total, .. } = self;
        let log = logs.get_mut(log_id).ok_or_else(|| format!("trim of unknown log id {log_id}"))?;
        if before > log.latest() {
            return Err(format!(
                "trim of log {:?} before seq {before}, past its latest seq {}",
                log.descriptor.name,
                log.latest()
            ));
        }
        if before > log.descriptor.trimmed_before {
            log.descriptor.trimmed_before = before;
            let keep_from = log.earliest();
            trim(log, segments, live_bytes_total, keep_from);
        }
        Ok(())
    }

    /// A segment header restates the whole catalog: logs it lacks were deleted
    /// in segments since reclaimed; logs it names otherwise than we know were
    /// renamed there; logs it has may be ahead of what we have
    /// seen, when the records between were in reclaimed segments (a later
    /// `Relocate` frame supplies those still live) or in lost ones (`gap_cause`).
    ///
    /// Applies every descriptor that agrees with what came before and
    /// returns the reasons for those that do not (skipped).
    pub(crate) fn apply_segment_header(&mut self, header: &SegmentHeader, gap_cause: &LossCause) -> Vec<Inconsistency> {
        let mut problems = Vec::new();
        self.next_log_id = self.next_log_id.max(header.next_log_id);
        let listed: HashMap<u32, &LogDescriptor> = header.logs.iter().map(|d| (d.id, d)).collect();
        let gone: Vec<u32> = self.logs.ids().filter(|id| !listed.contains_key(id)).collect();
        for id in gone {
            problems.extend(self.apply_delete(id).err());
        }
        // Renames before creates: a log created since may have taken a name
        // a renamed log gave up.
        let renamed: Vec<(u32, String)> = header
            .logs
            .iter()
            .filter(|d| self.logs.get(d.id).is_some_and(|log| log.descriptor.name != d.name))
            .map(|d| (d.id, d.name.clone()))
            .collect();
        if !renamed.is_empty() {
            problems.extend(self.apply_rename(&renamed).err());
        }
        for descriptor in &header.logs {
            if !self.logs.contains(descriptor.id) {
                if let Err(problem) = self.apply_create(LogDescriptor { latest: 0, ..descriptor.clone() }) {
                    problems.push(problem);
                    continue;
                }
            }
            let log = &self.logs[descriptor.id];
            if log.descriptor.name != descriptor.name || log.descriptor.config != descriptor.config {
                problems.push(format!("segment header disagrees about log id {}", descriptor.id));
                continue;
            }
            if descriptor.latest < log.latest() {
                problems.push(format!(
                    "segment header says log {:?} ends at seq {}, but seq {} was already seen",
                    descriptor.name,
                    descriptor.latest,
                    log.latest()
                ));
                continue;
            }
            // A floor a reclaimed segment's trim set: first, so that the
            // records below it are trimmed, not counted lost, by the skip.
            let log = self.logs.get_mut(descriptor.id).expect("checked above");
            log.descriptor.trimmed_before = log.descriptor.trimmed_before.max(descriptor.trimmed_before);
            problems.extend(self.skip_to(descriptor.id, descriptor.latest, gap_cause).err());
            let State { logs, segments, live_bytes_total, .. } = self;
            let log = logs.get_mut(descriptor.id).expect("checked above");
            let keep_from = log.earliest();
            trim(log, segments, live_bytes_total, keep_from);
        }
        problems
    }

    /// Advance a log's latest to `latest` over records we have not seen;
    /// they are lost unless trimmed, or supplied later by a `Relocate` frame.
    fn skip_to(&mut self, log_id: u32, latest: Seq, gap_cause: &LossCause) -> Result<(), Inconsistency> {
        let log = &self.logs[log_id];
        let old_latest = log.latest();
        if latest == old_latest {
            return Ok(());
        }
        let keep_from =
            rules::earliest_after_trims(log.descriptor.config.retention, latest, log.descriptor.trimmed_before);
        let missing_from = (old_latest + 1).max(keep_from);
        if latest + 1 - missing_from > self.gap_records_max {
            return Err(format!(
                "log {:?} skips to seq {latest}, more records than the journal could hold",
                log.descriptor.name
            ));
        }
        let cause = if missing_from <= latest { Some(self.add_loss_cause(gap_cause.clone())) } else { None };
        let State { logs, segments, live_bytes_total, .. } = self;
        let log = logs.get_mut(log_id).expect("checked above");
        log.descriptor.latest = latest;
        // Drop what retention no longer keeps, then pad up to `latest`.
        trim(log, segments, live_bytes_total, keep_from.min(old_latest + 1));
        if log.positions.is_empty() {
            log.base = missing_from;
        }
        if let Some(cause) = cause {
            for _ in missing_from..=latest {
                log.positions.push_back(Position::lost(cause));
            }
        }
        trim(log, segments, live_bytes_total, keep_from);
        debug_assert_eq!(log.base + log.positions.len() as u64, latest + 1);
        Ok(())
    }

    /// A new record, at the next seq of its log (the writer's own appends).
    /// Trims per retention.
    pub(crate) fn apply_append(&mut self, log_id: u32, seq: Seq, position: Position) -> Result<(), Inconsistency> {
        let State { logs, segments, live_bytes_total, .. } = self;
        let log = logs.get_mut(log_id).ok_or_else(|| format!("record for unknown log id {log_id}"))?;
        if seq != log.latest() + 1 {
            return Err(format!(
                "log {:?} jumps from seq {} to {seq}: seqs must be dense",
                log.descriptor.name,
                log.latest()
            ));
        }
        push(log, segments, live_bytes_total, position);
        Ok(())
    }

    /// A record found on disk at `seq` of its log — `position` may be
    /// [`Position::lost`] for a record whose bytes are damaged. Seqs skipped
    /// before it are lost for `gap_cause` (only damage makes a gap).
    pub(crate) fn salvage_append(
        &mut self,
        log_id: u32,
        seq: Seq,
        position: Position,
        gap_cause: impl FnOnce() -> LossCause,
    ) -> Result<(), Inconsistency> {
        let State { logs, segments, live_bytes_total, loss_causes, gap_records_max, .. } = self;
        let log = logs.get_mut(log_id).ok_or_else(|| format!("record for unknown log id {log_id}"))?;
        let latest = log.latest();
        if seq <= latest {
            return Err(format!("log {:?} seq {seq} again, after seq {latest}", log.descriptor.name));
        }
        if seq - latest - 1 > *gap_records_max {
            return Err(format!(
                "log {:?} jumps from seq {latest} to {seq}, past what the journal could hold",
                log.descriptor.name
            ));
        }
        if seq > latest + 1 {
            let cause = add_loss_cause(loss_causes, gap_cause());
            for _ in latest + 1..seq {
                push(log, segments, live_bytes_total, Position::lost(cause));
            }
        }
        push(log, segments, live_bytes_total, position);
        Ok(())
    }

    /// A copy of an existing record moved by the compactor; replaces the old
    /// position if the record is still live (or lost so far), else is ignored.
    pub(crate) fn apply_relocate(&mut self, log_id: u32, seq: Seq, position: Position) -> Result<(), Inconsistency> {
        let Some(log) = self.logs.get_mut(log_id) else { return Ok(()) };
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

    /// Every run of lost records, by log name then seq.
    pub(crate) fn lost_runs(&self) -> Vec<LostRun> {
        let mut runs = Vec::new();
        for log in self.logs.values() {
            for (seq, position) in (log.base..).zip(&log.positions) {
                if let Some(cause) = position.lost_cause() {
                    match runs.last_mut() {
                        Some(LostRun { log_id, last, cause: c, .. })
                            if *log_id == log.descriptor.id && *last + 1 == seq && *c == cause =>
                        {
                            *last = seq;
                        }
                        _ => runs.push(LostRun { log_id: log.descriptor.id, first: seq, last: seq, cause }),
                    }
                }
            }
            debug_assert!(log.latest() == 0 || log.base == log.earliest());
        }
        runs.sort_by(|a, b| {
            (&self.logs[a.log_id].descriptor.name, a.first).cmp(&(&self.logs[b.log_id].descriptor.name, b.first))
        });
        runs
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
    if let Some(segment) = segments.get_mut(&position.segment) {
        segment.live_records -= 1;
        segment.live_bytes -= position.entry_bytes();
        *live_bytes_total -= position.entry_bytes();
    }
}

/// Record why records are lost (once per distinct cause); returns its index.
fn add_loss_cause(causes: &mut Vec<LossCause>, cause: LossCause) -> usize {
    if let Some(existing) = causes.iter().rposition(|c| *c == cause) {
        return existing;
    }
    causes.push(cause);
    causes.len() - 1
}

/// Append `position` as `log`'s next seq, then trim per retention.
fn push(
    log: &mut LogState,
    segments: &mut BTreeMap<u32, SegmentState>,
    live_bytes_total: &mut u64,
    position: Position,
) {
    log.descriptor.latest += 1;
    log.positions.push_back(position);
    remember(segments, live_bytes_total, position);
    let keep_from = log.earliest();
    trim(log, segments, live_bytes_total, keep_from);
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
