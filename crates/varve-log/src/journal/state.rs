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

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

use crate::contract::{LogInfo, Seq, SEQ_MAX};
pub(crate) use crate::error::LossCause;
use crate::journal::catalog::{Catalog, LogView};
use crate::journal::footprint::JournalMemory;
use crate::journal::format::{encode_segment_header, LogDescriptor, SegmentHeader, ENTRY_HEADER_BYTES, FORMAT_VERSION};
pub(crate) use crate::journal::holes::Hole;
use crate::journal::holes::{Found, Holes};
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

/// The most records a log may index and still be packed.
pub(crate) const PACKED_POSITIONS_MAX: usize = 64;

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

/// A log's index. Invariant: seqs `base..=latest` are each either in
/// exactly one of `holes` or have a slot in `positions`, in seq order; so
/// `base + positions.len() + Σ hole lengths == latest + 1`, and
/// `base == latest + 1` when the log keeps nothing.
#[derive(Clone, Debug)]
pub(crate) struct LogState {
    pub(crate) descriptor: LogDescriptor,
    /// The first seq the index covers (of `positions[0]`, or of the first
    /// hole when that starts here).
    pub(crate) base: Seq,
    /// Positions of the seqs from `base` on that are in no hole.
    pub(crate) positions: VecDeque<Position>,
    /// `None` unless damage made one (boxed: every log pays the field's
    /// size, 8 bytes).
    holes: Option<Box<Holes>>,
}

impl LogState {
    pub(crate) fn new(descriptor: LogDescriptor, base: Seq, positions: VecDeque<Position>) -> LogState {
        LogState { descriptor, base, positions, holes: None }
    }

    pub(crate) fn latest(&self) -> Seq {
        self.descriptor.latest
    }

    /// Whether the catalog may pack it (`packed.rs`): a small index (so
    /// thawing it is cheap) with no seq lost (the packed layout, the index
    /// checkpoint's, has no holes and damage is rare).
    pub(crate) fn packable(&self) -> bool {
        self.holes.is_none()
            && self.positions.len() <= PACKED_POSITIONS_MAX
            && self.positions.iter().all(|position| position.lost_cause().is_none())
    }

    pub(crate) fn holes(&self) -> impl Iterator<Item = Hole> + '_ {
        self.holes.iter().flat_map(|holes| holes.iter())
    }

    /// Change the holes; none left are stored as `None`.
    fn edit_holes<T>(&mut self, edit: impl FnOnce(&mut Holes) -> T) -> T {
        let mut holes = self.holes.take().unwrap_or_default();
        let result = edit(&mut holes);
        self.holes = (!holes.is_empty()).then_some(holes);
        result
    }

    pub(crate) fn earliest(&self) -> Seq {
        rules::earliest_after_trims(self.descriptor.config.retention, self.latest(), self.descriptor.trimmed_before)
    }

    pub(crate) fn position(&self, seq: Seq) -> Option<Position> {
        match self.slot(seq)? {
            Slot::Index(index) => self.positions.get(index).copied(),
            Slot::Hole(hole) => Some(Position::lost(self.hole(hole).cause)),
        }
    }

    /// Where `seq` is in the index, if at or after `base` (its slot may be
    /// past the end of `positions` when `seq` is past `latest`).
    fn slot(&self, seq: Seq) -> Option<Slot> {
        let offset = seq.checked_sub(self.base)?;
        let lost_before = match self.holes.as_deref().map(|holes| holes.find(seq)) {
            None => 0,
            Some(Found::After(lost)) => lost,
            Some(Found::In(i)) => return Some(Slot::Hole(i)),
        };
        usize::try_from(offset - lost_before).ok().map(Slot::Index)
    }

    fn hole(&self, i: usize) -> Hole {
        self.holes.as_deref().expect("a slot in a hole").get(i)
    }

    /// The positions the index holds, with their seqs (holes skipped).
    pub(crate) fn entries(&self) -> impl Iterator<Item = (Seq, Position)> + '_ {
        let mut seq = self.base;
        let mut holes = self.holes().peekable();
        self.positions.iter().map(move |&position| {
            while let Some(hole) = holes.next_if(|hole| hole.first == seq) {
                seq = hole.last + 1;
            }
            seq += 1;
            (seq - 1, position)
        })
    }

    /// The run of lost seqs around `seq` (which is lost), clipped to what
    /// retention keeps.
    pub(crate) fn lost_run_around(&self, seq: Seq) -> Option<LostRun> {
        let (cause, mut first, mut last) = self.lost_at(seq)?;
        while first > self.base {
            match self.lost_at(first - 1) {
                Some((c, before, _)) if c == cause => first = before,
                _ => break,
            }
        }
        while last < self.latest() {
            match self.lost_at(last + 1) {
                Some((c, _, after)) if c == cause => last = after,
                _ => break,
            }
        }
        Some(LostRun { log_id: self.descriptor.id, first, last, cause })
    }

    /// The cause of a lost `seq` and the seqs its hole spans (`seq` alone
    /// when it has a lost position).
    fn lost_at(&self, seq: Seq) -> Option<(usize, Seq, Seq)> {
        match self.slot(seq)? {
            Slot::Hole(i) => {
                let hole = self.hole(i);
                Some((hole.cause, hole.first, hole.last))
            }
            Slot::Index(index) => Some((self.positions.get(index)?.lost_cause()?, seq, seq)),
        }
    }

    fn is_empty(&self) -> bool {
        self.positions.is_empty() && self.holes.is_none()
    }

    /// The invariant, for debug assertions: the index ends at `latest`.
    fn covers(&self, latest: Seq) -> bool {
        self.base + self.positions.len() as u64 + self.holes.as_deref().map_or(0, Holes::total) == latest + 1
    }

    /// Index seqs `first..=last`, which follow every seq indexed so far, as
    /// lost for `cause`: a lost position each when there are no more than
    /// `positions_max` (what the journal's bytes could hold, so a relocated
    /// copy may still fill them cheaply), else one hole.
    fn index_lost(&mut self, first: Seq, last: Seq, cause: usize, positions_max: u64) {
        let count = last - first + 1;
        if count <= positions_max {
            self.positions.extend((first..=last).map(|_| Position::lost(cause)));
        } else {
            self.edit_holes(|holes| holes.push(Hole { first, last, cause }));
        }
    }

    /// A relocated copy supplies `seq`, in hole `i`: split the hole around
    /// it (O(positions + holes), but only damage makes holes).
    fn fill_hole(&mut self, i: usize, seq: Seq, position: Position) {
        let base = self.base;
        let slots_before = self.edit_holes(|holes| {
            let slots_before = holes.get(i).first - base - holes.before(i);
            holes.split(i, seq);
            slots_before
        });
        let index = usize::try_from(slots_before).expect("slots are in memory");
        self.positions.insert(index, position);
    }

    /// Drop the first hole's seqs below `keep_from` (it starts at `base`).
    fn trim_first_hole(&mut self, keep_from: Seq) {
        self.base = self.edit_holes(|holes| holes.trim_front(keep_from));
    }

    /// Bytes of the index on the heap: its positions' room, and its holes.
    fn index_bytes(&self) -> u64 {
        let positions = self.positions.capacity() * std::mem::size_of::<Position>();
        let holes = self.holes.as_deref().map_or(0, Holes::heap_bytes);
        (positions + holes) as u64
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

/// Where a seq is in a [`LogState`]: a slot of `positions`, or a hole.
enum Slot {
    Index(usize),
    Hole(usize),
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

/// What the segments hold live, kept up as records come and go.
#[derive(Debug, Default)]
pub(crate) struct Liveness {
    /// Sum of `live_bytes` over the segments.
    pub(crate) bytes: u64,
    /// Times a segment's last live record went. The writer looks for dead
    /// segments to delete only when this or its active segment changed: a
    /// look at every write cost O(segments), 63 % of an append's time at
    /// 1,000 segments.
    pub(crate) segments_emptied: u64,
}

#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) logs: Catalog,
    pub(crate) next_log_id: u32,
    pub(crate) segments: BTreeMap<u32, SegmentState>,
    pub(crate) live: Liveness,
    /// Most records one gap in recovery may skip (segments deleted by the
    /// compactor): bounded by the bytes on disk so a damaged header cannot
    /// make us allocate without limit.
    pub(crate) gap_records_max: u64,
    /// Indexed by lost positions. Grows only when damage is found.
    pub(crate) loss_causes: Vec<LossCause>,
}

impl State {
    pub(crate) fn log_by_name(&self, name: &str) -> Option<LogView<'_>> {
        self.logs.by_name(name)
    }

    /// Encode the header of segment `segment_id`: the whole catalog, logs in
    /// id order; returns its length.
    pub(crate) fn encode_catalog(&self, buf: &mut Vec<u8>, segment_id: u32) -> usize {
        let mut hot: Vec<&LogDescriptor> = self.logs.hot().map(|log| &log.descriptor).collect();
        // Stable: linear on the id order in which logs are mostly created.
        hot.sort_by_key(|d| d.id);
        let mut hot = hot.into_iter().map(Cow::Borrowed).peekable();
        // Packed logs come in id order; decoded one at a time.
        let mut packed = self.logs.packed_descriptors().map(Cow::<LogDescriptor>::Owned).peekable();
        let merged = std::iter::from_fn(|| match (hot.peek(), packed.peek()) {
            (Some(h), Some(p)) if p.id < h.id => packed.next(),
            (Some(_), _) => hot.next(),
            (None, _) => packed.next(),
        });
        let count = self.logs.len();
        encode_segment_header(buf, FORMAT_VERSION, segment_id, self.next_log_id, merged.take(count), count)
    }

    /// Record why records are lost; returns the index lost positions carry.
    pub(crate) fn add_loss_cause(&mut self, cause: LossCause) -> usize {
        add_loss_cause(&mut self.loss_causes, cause)
    }

    fn forget(&mut self, position: Position) {
        forget(&mut self.segments, &mut self.live, position);
    }

    fn remember(&mut self, position: Position) {
        remember(&mut self.segments, &mut self.live, position);
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
        let base = descriptor.latest + 1;
        let state = LogState::new(descriptor, base, VecDeque::new());
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
        let State { logs, segments, live, .. } = self;
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
            trim(log, segments, live, keep_from);
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
            let log = self.logs.get(descriptor.id).expect("created above");
            if log.descriptor.name != descriptor.name || log.descriptor.config != descriptor.config {
                problems.push(format!("segment header disagrees about log id {}", descriptor.id));
                continue;
            }
            if descriptor.latest > SEQ_MAX {
                problems.push(format!(
                    "segment header says log {:?} ends at seq {}, past {SEQ_MAX}, the last a log can have",
                    descriptor.name, descriptor.latest
                ));
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
            // A log the header tells nothing new stays as it is (a packed
            // one is not thawed): its index already starts at its earliest.
            if descriptor.latest == log.latest() && descriptor.trimmed_before <= log.descriptor.trimmed_before {
                continue;
            }
            // A floor a reclaimed segment's trim set: first, so that the
            // records below it are trimmed, not counted lost, by the skip.
            let log = self.logs.get_mut(descriptor.id).expect("checked above");
            log.descriptor.trimmed_before = log.descriptor.trimmed_before.max(descriptor.trimmed_before);
            self.skip_to(descriptor.id, descriptor.latest, gap_cause);
            let State { logs, segments, live, .. } = self;
            let log = logs.get_mut(descriptor.id).expect("checked above");
            let keep_from = log.earliest();
            trim(log, segments, live, keep_from);
        }
        problems
    }

    /// Advance a log's latest to `latest` over records we have not seen;
    /// they are lost unless trimmed, or supplied later by a `Relocate` frame.
    /// The caller has checked that `latest` is at most [`SEQ_MAX`] and at
    /// least the log's latest.
    fn skip_to(&mut self, log_id: u32, latest: Seq, gap_cause: &LossCause) {
        let log = self.logs.get(log_id).expect("the caller checked that the log exists");
        let old_latest = log.latest();
        debug_assert!(old_latest <= latest && latest <= SEQ_MAX);
        if latest == old_latest {
            return;
        }
        let keep_from =
            rules::earliest_after_trims(log.descriptor.config.retention, latest, log.descriptor.trimmed_before);
        let missing_from = (old_latest + 1).max(keep_from);
        let cause = if missing_from <= latest { Some(self.add_loss_cause(gap_cause.clone())) } else { None };
        let State { logs, segments, live, gap_records_max, .. } = self;
        let log = logs.get_mut(log_id).expect("checked above");
        log.descriptor.latest = latest;
        // Drop what retention no longer keeps, then pad up to `latest`.
        trim(log, segments, live, keep_from.min(old_latest + 1));
        if log.is_empty() {
            log.base = missing_from;
        }
        if let Some(cause) = cause {
            log.index_lost(missing_from, latest, cause, *gap_records_max);
        }
        trim(log, segments, live, keep_from);
        debug_assert!(log.covers(latest));
    }

    /// A new record, at the next seq of its log (the writer's own appends).
    /// Trims per retention.
    pub(crate) fn apply_append(&mut self, log_id: u32, seq: Seq, position: Position) -> Result<(), Inconsistency> {
        let State { logs, segments, live, .. } = self;
        let log = logs.get_mut(log_id).ok_or_else(|| format!("record for unknown log id {log_id}"))?;
        if seq != log.latest() + 1 {
            return Err(format!(
                "log {:?} jumps from seq {} to {seq}: seqs must be dense",
                log.descriptor.name,
                log.latest()
            ));
        }
        push(log, segments, live, position);
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
        let State { logs, segments, live, loss_causes, gap_records_max, .. } = self;
        let log = logs.get_mut(log_id).ok_or_else(|| format!("record for unknown log id {log_id}"))?;
        let latest = log.latest();
        if seq <= latest {
            return Err(format!("log {:?} seq {seq} again, after seq {latest}", log.descriptor.name));
        }
        if seq > SEQ_MAX {
            return Err(format!("log {:?} seq {seq} is past {SEQ_MAX}, the last a log can have", log.descriptor.name));
        }
        if seq > latest + 1 {
            let cause = add_loss_cause(loss_causes, gap_cause());
            log.index_lost(latest + 1, seq - 1, cause, *gap_records_max);
            log.descriptor.latest = seq - 1;
            let keep_from = log.earliest();
            trim(log, segments, live, keep_from);
        }
        push(log, segments, live, position);
        Ok(())
    }

    /// A copy of an existing record moved by the compactor; replaces the old
    /// position if the record is still live (or lost so far), else is ignored.
    pub(crate) fn apply_relocate(&mut self, log_id: u32, seq: Seq, position: Position) -> Result<(), Inconsistency> {
        let Some(log) = self.logs.get_mut(log_id) else { return Ok(()) };
        if seq > log.latest() {
            return Err(format!("relocated seq {seq} of log {:?} was never appended", log.descriptor.name));
        }
        match log.slot(seq) {
            // Below `base`: trimmed.
            None => return Ok(()),
            Some(Slot::Index(index)) => {
                let Some(slot) = log.positions.get_mut(index) else { return Ok(()) };
                let old = std::mem::replace(slot, position);
                self.forget(old);
            }
            Some(Slot::Hole(hole)) => log.fill_hole(hole, seq, position),
        }
        self.remember(position);
        Ok(())
    }

    /// Every run of lost records, by log name then seq.
    pub(crate) fn lost_runs(&self) -> Vec<LostRun> {
        let mut runs: Vec<LostRun> = Vec::new();
        let mut add = |run: LostRun| match runs.last_mut() {
            Some(before)
                if before.log_id == run.log_id && before.last + 1 == run.first && before.cause == run.cause =>
            {
                before.last = run.last;
            }
            _ => runs.push(run),
        };
        // Packed logs lose nothing: only a log with no seq lost is packed,
        // and marking one lost thaws it first.
        for log in self.logs.hot() {
            let log_id = log.descriptor.id;
            let hole_run = |h: Hole| LostRun { log_id, first: h.first, last: h.last, cause: h.cause };
            // Holes and lost positions, merged in seq order.
            let mut holes = log.holes().peekable();
            for (seq, position) in log.entries() {
                let Some(cause) = position.lost_cause() else { continue };
                while let Some(hole) = holes.next_if(|h| h.first < seq) {
                    add(hole_run(hole));
                }
                add(LostRun { log_id, first: seq, last: seq, cause });
            }
            holes.for_each(|hole| add(hole_run(hole)));
            debug_assert!(log.latest() == 0 || log.base == log.earliest());
        }
        let names: HashMap<u32, String> = runs
            .iter()
            .filter_map(|run| Some((run.log_id, self.logs.get(run.log_id)?.descriptor.name.clone())))
            .collect();
        runs.sort_by(|a, b| (names.get(&a.log_id), a.first).cmp(&(names.get(&b.log_id), b.first)));
        runs
    }

    /// What the logs hold in memory (the writer's checkpoint buffer aside).
    pub(crate) fn memory(&self) -> JournalMemory {
        let (log_states, lookup_tables) = self.logs.heap_bytes();
        let (packed_logs, packed_mapped) = self.logs.packed_bytes();
        let mut memory = JournalMemory {
            log_states,
            lookup_tables,
            logs: self.logs.packed_len() as u64,
            packed: self.logs.packed_len() as u64,
            records: self.logs.packed_records(),
            packed_logs,
            packed_mapped,
            ..JournalMemory::default()
        };
        for log in self.logs.hot() {
            memory.logs += 1;
            memory.records += log.positions.len() as u64;
            memory.names += log.descriptor.name.capacity() as u64;
            memory.indexes += log.index_bytes();
        }
        memory
    }

    pub(crate) fn infos(&self) -> Vec<LogInfo> {
        let mut infos: Vec<LogInfo> = self.logs.values().map(|log| log.info()).collect();
        infos.sort_by(|a, b| a.name.cmp(&b.name));
        infos
    }
}

fn remember(segments: &mut BTreeMap<u32, SegmentState>, live: &mut Liveness, position: Position) {
    if let Some(segment) = segments.get_mut(&position.segment) {
        segment.live_records += 1;
        segment.live_bytes += position.entry_bytes();
        live.bytes += position.entry_bytes();
    }
}

fn forget(segments: &mut BTreeMap<u32, SegmentState>, live: &mut Liveness, position: Position) {
    if let Some(segment) = segments.get_mut(&position.segment) {
        segment.live_records -= 1;
        if segment.live_records == 0 {
            live.segments_emptied += 1;
        }
        segment.live_bytes -= position.entry_bytes();
        live.bytes -= position.entry_bytes();
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
fn push(log: &mut LogState, segments: &mut BTreeMap<u32, SegmentState>, live: &mut Liveness, position: Position) {
    log.descriptor.latest += 1;
    log.positions.push_back(position);
    remember(segments, live, position);
    let keep_from = log.earliest();
    trim(log, segments, live, keep_from);
}

/// Drop positions and holes below `keep_from` (retention), releasing their
/// segments.
fn trim(log: &mut LogState, segments: &mut BTreeMap<u32, SegmentState>, live: &mut Liveness, keep_from: Seq) {
    while log.base < keep_from {
        if log.holes.as_deref().and_then(Holes::first).is_some_and(|hole| hole.first == log.base) {
            log.trim_first_hole(keep_from);
            continue;
        }
        let Some(old) = log.positions.pop_front() else {
            log.base = keep_from;
            return;
        };
        forget(segments, live, old);
        log.base += 1;
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::contract::{LogConfig, OnFull};

    #[derive(Clone, Debug)]
    enum Op {
        /// A record found `gap` seqs past the latest, in `segment`.
        Salvage {
            gap: u64,
            segment: u32,
            cause: u8,
        },
        /// A segment header says the log is `gap` seqs further on.
        Skip {
            gap: u64,
            cause: u8,
        },
        /// A copy of the seq `back` seqs before the latest, moved to `segment`.
        Relocate {
            back: u64,
            segment: u32,
            lost: bool,
        },
        Trim {
            back: u64,
        },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u64..12, 0u32..4, 0u8..2).prop_map(|(gap, segment, cause)| Op::Salvage { gap, segment, cause }),
            1 => (0u64..12, 0u8..2).prop_map(|(gap, cause)| Op::Skip { gap, cause }),
            3 => (0u64..30, 0u32..4, any::<bool>()).prop_map(|(back, segment, lost)| Op::Relocate { back, segment, lost }),
            1 => (0u64..30).prop_map(|back| Op::Trim { back }),
        ]
    }

    fn cause(n: u8) -> LossCause {
        LossCause { segment: PathBuf::from(format!("{n}.seg")), offset: None, reason: format!("gap {n}") }
    }

    fn state(config: LogConfig, gap_records_max: u64) -> State {
        let mut state = State { gap_records_max, ..State::default() };
        let descriptor = LogDescriptor { id: 0, name: "t".into(), config, latest: 0, trimmed_before: 0 };
        state.apply_create(descriptor).expect("create");
        state
    }

    fn apply(state: &mut State, op: &Op, offset: &mut u32) {
        let latest = state.logs[0].latest();
        *offset += 1;
        let at = |segment| Position { segment, offset: *offset, len: 1 };
        match *op {
            Op::Salvage { gap, segment, cause: c } => {
                state.salvage_append(0, latest + 1 + gap, at(segment), || cause(c)).expect("salvage");
            }
            Op::Skip { gap, cause: c } => state.skip_to(0, latest + gap, &cause(c)),
            Op::Relocate { back, segment, lost } => {
                let position = if lost { Position::lost(state.add_loss_cause(cause(9))) } else { at(segment) };
                state.apply_relocate(0, latest.saturating_sub(back), position).expect("relocate");
            }
            Op::Trim { back } => state.apply_trim(0, latest.saturating_sub(back)).expect("trim"),
        }
    }

    proptest! {
        /// Holes are only a cheaper index of lost seqs: a state that makes
        /// every gap over 2 a hole answers exactly as one that indexes every
        /// lost seq, through gaps, relocations into them and trims.
        #[test]
        fn holes_answer_as_lost_positions_do(
            ops in proptest::collection::vec(op(), 1..60),
            keep in proptest::option::of(1u64..25),
        ) {
            let config = keep.map_or(LogConfig::unbounded(), |k| LogConfig::keep(k, OnFull::Overwrite));
            let (mut holes, mut positions) = (state(config, 2), state(config, u64::MAX));
            let (mut offset_h, mut offset_p) = (0, 0);
            for op in &ops {
                apply(&mut holes, op, &mut offset_h);
                apply(&mut positions, op, &mut offset_p);
                let (h, p) = (&holes.logs[0], &positions.logs[0]);
                prop_assert!(h.covers(h.latest()) && p.covers(p.latest()), "{op:?}");
                prop_assert_eq!((h.latest(), h.earliest(), h.base), (p.latest(), p.earliest(), p.base));
                for seq in 0..=p.latest() + 2 {
                    prop_assert_eq!(h.position(seq), p.position(seq), "seq {} after {:?}", seq, op);
                    prop_assert_eq!(h.lost_run_around(seq), p.lost_run_around(seq), "seq {}", seq);
                }
                prop_assert_eq!(h.entries().filter(|(_, p)| p.lost_cause().is_none()).collect::<Vec<_>>(),
                                p.entries().filter(|(_, p)| p.lost_cause().is_none()).collect::<Vec<_>>());
                prop_assert_eq!(holes.lost_runs(), positions.lost_runs());
            }
        }
    }

    fn header(latest: Seq, trimmed_before: Seq) -> SegmentHeader {
        let descriptor =
            LogDescriptor { id: 0, name: "t".into(), config: LogConfig::unbounded(), latest, trimmed_before };
        SegmentHeader { format_version: 0, segment_id: 2, next_log_id: 1, logs: vec![descriptor] }
    }

    /// A gap of any size costs one hole, and a claim past `SEQ_MAX` is
    /// refused whole (its trim floor too) rather than overflowing later.
    #[test]
    fn a_huge_gap_is_one_hole_and_a_claim_past_the_last_seq_is_refused() {
        let mut state = state(LogConfig::unbounded(), 1000);
        let at = Position { segment: 1, offset: 0, len: 1 };
        state.salvage_append(0, 1, at, || cause(0)).expect("seq 1");
        assert!(state.apply_segment_header(&header(5_000_000_000, 0), &cause(0)).is_empty());
        let log = &state.logs[0];
        assert_eq!((log.positions.len(), log.holes().count()), (1, 1));
        assert_eq!(state.lost_runs().len(), 1);
        let problems = state.apply_segment_header(&header(SEQ_MAX + 10, SEQ_MAX + 5), &cause(0));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!((state.logs[0].earliest(), state.logs[0].latest()), (1, 5_000_000_000));
        assert!(state.salvage_append(0, SEQ_MAX + 1, at, || cause(0)).is_err());
        state.salvage_append(0, 5_000_000_001, at, || cause(0)).expect("the next seq");
        assert_eq!(state.logs[0].position(5_000_000_001), Some(at));
        assert_eq!(state.logs[0].position(1), Some(at));
    }

    /// Many holes, as a crafted segment of one-record frames each just
    /// past the bound makes: every lookup and relocation lands where it
    /// should (`Holes::find` is a binary search, so this stays linear-log).
    #[test]
    fn many_holes_index_every_seq() {
        let mut state = state(LogConfig::unbounded(), 2);
        let at = |offset| Position { segment: 1, offset, len: 1 };
        for n in 1..=20_000u32 {
            state.salvage_append(0, u64::from(n) * 10, at(n), || cause(0)).expect("salvage");
        }
        for n in (1..=20_000u32).step_by(100) {
            state.apply_relocate(0, u64::from(n) * 10 - 5, at(n + 1_000_000)).expect("relocate");
        }
        let log = &state.logs[0];
        assert_eq!(log.holes().count(), 20_200);
        for n in 1..=20_000u32 {
            let seq = u64::from(n) * 10;
            assert_eq!(log.position(seq), Some(at(n)));
            let moved = (n - 1) % 100 == 0;
            assert_eq!(log.position(seq - 5), if moved { Some(at(n + 1_000_000)) } else { Some(Position::lost(0)) });
            assert_eq!(log.position(seq - 1), Some(Position::lost(0)));
        }
        assert!(log.covers(200_000));
    }
}
