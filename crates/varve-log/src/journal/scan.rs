//! Reading segments back: recovery on open, catch-up of read-only handles,
//! `fsck` and the compactor all walk frames through [`scan_segment`], which
//! applies them to a [`State`] and salvages around damage.
//!
//! **The rules.** Bytes a writer may still be writing are never damage: a
//! frame that does not check at or past [`ScanContext::complete_below`] is
//! *unfinished* and ends the scan, to be read again later. Below it, bytes are
//! complete, so a frame that does not check is damage, and damage stays
//! local: the damaged bytes are skipped (to the frame's end when its header
//! is intact, else to the next frame that checks), intact records of a frame
//! whose other records are damaged are kept, and the records that should be
//! there but are not become *lost*, with the segment and offset that held them.
//!
//! **Torn tail or damage?** The newest segment may end in a write that never
//! finished (a crash mid-frame). Its last frame is a torn write, cut off by
//! the writer on open, only when the write may indeed not have finished: its
//! header is damaged or cut short, or the frame is followed by nothing but
//! the zero reserve of a segment still open. A frame whose header checks and
//! that the file ends exactly after (a writer sealed or closed the segment
//! after it, which it does only once the frame is whole and fsynced), or
//! that is followed by further written bytes (a later write began, so this
//! one had ended), was written completely: a bad byte in it is damage, and
//! its records are reported lost rather than dropped with a warning.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{IoContext, Result};
use crate::journal::format::{
    check_frame, claimed_frame_len, entries_in_damaged_frame, frame_with_bad_records, next_frame_after, parse_body,
    FrameBody, FrameError, RawFrame, FRAME_HEADER_BYTES,
};
use crate::journal::state::{LossCause, Position, State};
use crate::journal::Damage;

pub(crate) const SEGMENT_SUFFIX: &str = ".seg";

pub(crate) fn segment_path(dir: &Path, id: u32) -> PathBuf {
    dir.join(format!("{id:010}{SEGMENT_SUFFIX}"))
}

/// Segment ids in `dir` while a writer may be creating them, ascending:
/// [`list_segments`], plus each id above `settled` that the listing skipped
/// but that exists. A directory listing need not return a file created while
/// it runs, yet may return a newer one (seen with 4 KiB segments rolling
/// during a refresh: the skipped segment read as missing, its records as
/// lost). Ids up to `settled` — the published segment, loaded before the
/// listing — existed when it began, so only a deletion hides them; the stat
/// is for the few above.
pub(crate) fn list_segments_beside_writer(dir: &Path, settled: u32) -> Result<Vec<u32>> {
    let mut ids = list_segments(dir)?;
    let skipped: Vec<u32> = ids
        .windows(2)
        .flat_map(|pair| (pair[0] + 1).max(settled.saturating_add(1))..pair[1])
        .filter(|&id| segment_path(dir, id).exists())
        .collect();
    if !skipped.is_empty() {
        ids.extend(skipped);
        ids.sort_unstable();
    }
    Ok(ids)
}

/// Segment ids in `dir`, ascending. Files that are not segments are ignored.
pub(crate) fn list_segments(dir: &Path) -> Result<Vec<u32>> {
    let mut ids = Vec::new();
    for entry in fs::read_dir(dir).context(|| format!("listing {}", dir.display()))? {
        let entry = entry.context(|| format!("listing {}", dir.display()))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(stem) = name.strip_suffix(SEGMENT_SUFFIX) {
            if stem.len() == 10 {
                if let Ok(id) = stem.parse::<u32>() {
                    ids.push(id);
                }
            }
        }
    }
    ids.sort_unstable();
    Ok(ids)
}

/// Where a scan's bytes come from, and how far they can be trusted.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScanContext<'a> {
    pub(crate) dir: &'a Path,
    pub(crate) segment: u32,
    /// The segment scanned before this one, to name a missing one in a loss.
    pub(crate) previous: Option<u32>,
    /// Bytes before this segment offset are completely written (the segment
    /// is sealed, or published up to here, or no writer runs): a frame there
    /// that does not check is damage. `u64::MAX` when all are.
    pub(crate) complete_below: u64,
    /// The bytes given end where this segment's readable bytes end (the end
    /// of the file, or of what is published); otherwise more can be read.
    pub(crate) bytes_are_all: bool,
    /// This is the newest segment, whose end may hold a torn write.
    pub(crate) newest: bool,
}

/// How a scan ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ScanEnd {
    /// Every byte given was applied or skipped as damage, or the rest is the
    /// zero reserve of an open segment.
    Clean,
    /// The frame at `offset` is not all in the bytes given, or is not
    /// finished yet: read on from there (with more bytes, or later).
    Unfinished { offset: u64 },
    /// The newest segment ends in a write that may never have finished
    /// (see the module docs): from `offset` on. Writers cut it; readers stop.
    TornTail { offset: u64, reason: String },
    /// A segment header of a newer format: this build must not read on.
    Unsupported { offset: u64, reason: String },
}

#[derive(Debug)]
pub(crate) struct SegmentScan {
    /// Where the next scan of this segment starts: just past the last frame
    /// applied or skipped as damage.
    pub(crate) valid_end: u64,
    pub(crate) frames: u64,
    pub(crate) records: u64,
    pub(crate) end: ScanEnd,
    /// Damaged byte ranges found and skipped, in order.
    pub(crate) damage: Vec<Damage>,
}

/// Apply the frames of a segment found in `bytes` (which start at segment
/// offset `base`) to `state`. A segment's first frame must be its header.
pub(crate) fn scan_segment(state: &mut State, context: &ScanContext<'_>, bytes: &[u8], base: u64) -> SegmentScan {
    let mut scanner = Scanner {
        state,
        context,
        bytes,
        base,
        scan: SegmentScan { valid_end: base, frames: 0, records: 0, end: ScanEnd::Clean, damage: Vec::new() },
        last_damage_cause: None,
    };
    scanner.run();
    if !scanner.scan.damage.is_empty() {
        if let Some(segment) = scanner.state.segments.get_mut(&context.segment) {
            segment.damaged = true;
        }
    }
    scanner.scan
}

struct Scanner<'s, 'c> {
    state: &'s mut State,
    context: &'c ScanContext<'c>,
    bytes: &'s [u8],
    base: u64,
    scan: SegmentScan,
    /// The cause of the damage found last in this segment: a gap in a log's
    /// seqs after it is blamed on it.
    last_damage_cause: Option<LossCause>,
}

impl Scanner<'_, '_> {
    fn run(&mut self) {
        let mut at = 0usize;
        while at < self.bytes.len() {
            let offset = self.base + at as u64;
            let rest = &self.bytes[at..];
            let error = match check_frame(rest, true) {
                Ok(frame) => {
                    self.apply_frame(offset, frame, &[]);
                    at += frame.len;
                    self.advance(at);
                    continue;
                }
                Err(error) => error,
            };
            // The preallocated, never-written rest of an open segment.
            if rest.iter().all(|&b| b == 0) {
                return;
            }
            if offset >= self.context.complete_below {
                self.scan.end = ScanEnd::Unfinished { offset };
                return;
            }
            let Some(skip_to) = self.on_bad_frame(at, offset, &error) else { return };
            at = skip_to;
            self.advance(at);
        }
    }

    fn advance(&mut self, at: usize) {
        self.scan.valid_end = self.base + at as u64;
        if let Some(segment) = self.state.segments.get_mut(&self.context.segment) {
            segment.bytes = segment.bytes.max(self.scan.valid_end);
        }
    }

    /// Handle a frame at `at` that does not check, in completely written
    /// bytes. Returns where to go on, or `None` after setting how the scan ends.
    fn on_bad_frame(&mut self, at: usize, offset: u64, error: &FrameError) -> Option<usize> {
        let reason = error.reason();
        let trusted_len = match error {
            FrameError::Unsupported(reason) => {
                self.scan.end = ScanEnd::Unsupported { offset, reason: reason.clone() };
                return None;
            }
            FrameError::Incomplete { len } => {
                if !self.context.bytes_are_all {
                    self.scan.end = ScanEnd::Unfinished { offset };
                    return None;
                }
                if self.context.newest {
                    self.scan.end = ScanEnd::TornTail { offset, reason };
                    return None;
                }
                let missing =
                    len.map_or(String::new(), |len| format!(", {} bytes short", len - (self.bytes.len() - at)));
                let reason = format!("the segment ends inside a frame{missing}: the file was cut short");
                self.damaged(offset, (self.bytes.len() - at) as u64, reason);
                return Some(self.bytes.len());
            }
            FrameError::BadHeader(_) => None,
            FrameError::BadBody { len, .. } | FrameError::BadRecords { len, .. } => Some(*len),
        };
        let trusted_len = trusted_len.or_else(|| self.confirmed_len(at));
        let Some(len) = trusted_len else {
            // The header is damaged: resume at the next frame that checks.
            if let Some(next) = next_frame_after(self.bytes, at) {
                self.damaged(offset, (next - at) as u64, reason);
                return Some(next);
            }
            if !self.context.bytes_are_all {
                self.scan.end = ScanEnd::Unfinished { offset };
            } else if self.context.newest {
                self.scan.end = ScanEnd::TornTail { offset, reason };
            } else {
                self.damaged(offset, (self.bytes.len() - at) as u64, reason);
                self.scan.valid_end = self.base + self.bytes.len() as u64;
            }
            return None;
        };
        // The header checks: the frame is `len` bytes, all present.
        let after = &self.bytes[at + len..];
        let write_completed = (self.context.bytes_are_all && after.is_empty()) || after.iter().any(|&b| b != 0);
        if self.context.newest && !write_completed {
            self.scan.end = if self.context.bytes_are_all {
                ScanEnd::TornTail { offset, reason }
            } else {
                ScanEnd::Unfinished { offset }
            };
            return None;
        }
        let cause = self.damaged(offset, len as u64, reason);
        if let FrameError::BadRecords { bad, .. } = error {
            // Header and body check: the intact records are kept, the others lost.
            let frame = frame_with_bad_records(&self.bytes[at..], len);
            self.apply_frame(offset, frame, &bad.iter().map(|&index| (index, cause)).collect::<Vec<_>>());
        } else {
            self.attribute_lost(&self.bytes[at..at + len], cause);
        }
        Some(at + len)
    }

    /// The length a damaged header claims, when the bytes confirm it: the
    /// frame would end exactly where a frame that checks begins, or exactly
    /// at the end of the segment's bytes.
    fn confirmed_len(&self, at: usize) -> Option<usize> {
        let len = claimed_frame_len(&self.bytes[at..])?;
        let end = at.checked_add(len)?;
        let confirmed = if end == self.bytes.len() {
            self.context.bytes_are_all
        } else {
            end < self.bytes.len()
                && matches!(check_frame(&self.bytes[end..], true), Ok(_) | Err(FrameError::BadRecords { .. }))
        };
        confirmed.then_some(len)
    }

    /// Mark lost the seqs a damaged append frame held, as far as they can
    /// be told. Seqs are dense, so a lost record of log L is L's next seq;
    /// the damage may be in the log id or in the seq itself, so an entry is
    /// blamed on its log when that log expects its seq, or when its log is
    /// known and no other log expects that seq (the seq was damaged), or,
    /// when its log id is unknown (damaged), on the one log that expects its
    /// seq. Otherwise it cannot be told, and nothing is blamed.
    fn attribute_lost(&mut self, frame: &[u8], cause: usize) {
        for (log_id, seq) in entries_in_damaged_frame(frame) {
            let expecting: Vec<u32> =
                self.state.logs.values().filter(|log| log.latest() + 1 == seq).map(|log| log.descriptor.id).collect();
            let blamed = match self.state.logs.get(log_id) {
                Some(log) if log.latest() + 1 == seq || expecting.is_empty() => Some(log_id),
                None if expecting.len() == 1 => Some(expecting[0]),
                Some(_) | None => None,
            };
            if let Some(log_id) = blamed {
                let next = self.state.logs.get(log_id).expect("blamed logs exist").latest() + 1;
                let applied = self.state.salvage_append(log_id, next, Position::lost(cause), || unreachable!("no gap"));
                debug_assert!(applied.is_ok());
            }
        }
    }

    /// Report damaged bytes; returns the loss cause their records carry.
    fn damaged(&mut self, offset: u64, len: u64, reason: String) -> usize {
        let segment = segment_path(self.context.dir, self.context.segment);
        self.scan.damage.push(Damage { segment: segment.clone(), offset, len, reason: reason.clone(), at_tail: false });
        let cause = LossCause { segment, offset: Some(offset), reason };
        self.last_damage_cause = Some(cause.clone());
        self.state.add_loss_cause(cause)
    }

    /// Apply a frame whose header and body check. `lost` lists the entries
    /// (by index) whose payloads are damaged, with their loss cause.
    fn apply_frame(&mut self, offset: u64, frame: RawFrame<'_>, lost: &[(usize, usize)]) {
        let body = match parse_body(frame) {
            Ok(body) => body,
            Err(e) => {
                self.damaged(offset, frame.len as u64, e.reason());
                return;
            }
        };
        let problems = self.apply(offset, body, lost);
        self.scan.frames += 1;
        if !problems.is_empty() {
            // The frame is intact but disagrees with what came before: only
            // damage elsewhere (a lost catalog change) explains that.
            self.damaged(offset, frame.len as u64, problems.join("; "));
        }
    }

    /// Apply one parsed frame; returns what could not be applied.
    fn apply(&mut self, frame_offset: u64, body: FrameBody<'_>, lost: &[(usize, usize)]) -> Vec<String> {
        let segment_id = self.context.segment;
        let first_frame = frame_offset == 0;
        if first_frame != matches!(body, FrameBody::SegmentHeader(_)) {
            return vec![if first_frame {
                "segment does not start with its header frame".into()
            } else {
                "segment header frame in the middle of a segment".into()
            }];
        }
        let position = |entry: &crate::journal::format::Entry<'_>| Position {
            segment: segment_id,
            offset: u32::try_from(frame_offset + entry.offset_in_frame as u64).expect("segments are under 4 GiB"),
            len: u32::try_from(entry.payload.len()).expect("records are under 4 GiB"),
        };
        match body {
            FrameBody::SegmentHeader(header) => {
                if header.segment_id != segment_id {
                    return vec![format!(
                        "segment header names segment {}, but the file is {segment_id}",
                        header.segment_id
                    )];
                }
                let gap_cause = self.header_gap_cause();
                self.state.apply_segment_header(&header, &gap_cause)
            }
            FrameBody::CreateLog(descriptor) => {
                if descriptor.latest != 0 {
                    return vec!["created log does not start empty".into()];
                }
                self.state.apply_create(descriptor).err().into_iter().collect()
            }
            FrameBody::DeleteLog(id) => self.state.apply_delete(id).err().into_iter().collect(),
            FrameBody::RenameLogs(renames) => self.state.apply_rename(&renames).err().into_iter().collect(),
            FrameBody::TrimLog(log_id, before) => self.state.apply_trim(log_id, before).err().into_iter().collect(),
            FrameBody::Append(entries) => {
                let mut problems = Vec::new();
                for (index, entry) in entries.iter().enumerate() {
                    let lost_cause = if lost.is_empty() { None } else { lost.iter().find(|(i, _)| *i == index) };
                    let position = match lost_cause {
                        Some(&(_, cause)) => Position::lost(cause),
                        None => position(entry),
                    };
                    let last_damage = self.last_damage_cause.as_ref();
                    let dir = self.context.dir;
                    let gap_cause = || gap_cause(last_damage, dir, segment_id, frame_offset);
                    match self.state.salvage_append(entry.log_id, entry.seq, position, gap_cause) {
                        Ok(()) => self.scan.records += 1,
                        Err(problem) => problems.push(problem),
                    }
                }
                problems
            }
            FrameBody::Relocate(entries) => {
                let mut problems = Vec::new();
                for (index, entry) in entries.iter().enumerate() {
                    if lost.iter().any(|(i, _)| *i == index) {
                        continue; // a damaged copy: the record stays where it was, or lost
                    }
                    match self.state.apply_relocate(entry.log_id, entry.seq, position(entry)) {
                        Ok(()) => self.scan.records += 1,
                        Err(problem) => problems.push(problem),
                    }
                }
                problems
            }
        }
    }

    /// Why records a segment header counts, but no earlier frame held, are lost.
    fn header_gap_cause(&self) -> LossCause {
        let id = self.context.segment;
        let dir = self.context.dir;
        match self.context.previous {
            Some(previous) if previous + 1 < id => LossCause {
                segment: segment_path(dir, previous + 1),
                offset: None,
                reason: format!(
                    "no intact frame holds them: they were in a segment between {} and {} that is missing",
                    file_name(&segment_path(dir, previous)),
                    file_name(&segment_path(dir, id)),
                ),
            },
            Some(previous) => LossCause {
                segment: segment_path(dir, previous),
                offset: None,
                reason: "no intact frame holds them: they were in damaged bytes of this segment".into(),
            },
            None if id > 1 => LossCause {
                segment: segment_path(dir, id - 1),
                offset: None,
                reason: format!(
                    "no intact frame holds them: they were in a segment before {}, which is missing",
                    file_name(&segment_path(dir, id))
                ),
            },
            None => LossCause {
                segment: segment_path(dir, id),
                offset: Some(0),
                reason: "no intact frame holds them".into(),
            },
        }
    }
}

/// Why seqs skipped inside a segment are lost: the damage found just before.
fn gap_cause(last_damage: Option<&LossCause>, dir: &Path, segment: u32, frame_offset: u64) -> LossCause {
    last_damage.cloned().unwrap_or_else(|| LossCause {
        segment: segment_path(dir, segment),
        offset: Some(frame_offset),
        reason: "seqs skipped with no damage found before them".into(),
    })
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |name| name.to_string_lossy().into_owned())
}

const _: () = assert!(FRAME_HEADER_BYTES == 16);

#[cfg(test)]
mod fuzz {
    //! The frame decoder against arbitrary and mutated bytes: it may refuse
    //! or salvage them, but never panics, never loops, never allocates
    //! without bound.

    use proptest::prelude::*;

    use super::*;
    use crate::codec::ByteWriter;
    use crate::contract::LogConfig;
    use crate::journal::format::{encode_create, FrameEncoder, FrameKind, LogDescriptor};

    fn valid_segment() -> Vec<u8> {
        let mut state = State::default();
        let mut buf = Vec::new();
        state.encode_catalog(&mut buf, 1);
        let descriptor =
            LogDescriptor { id: 0, name: "a".into(), config: LogConfig::default(), latest: 0, trimmed_before: 0 };
        encode_create(&mut buf, &descriptor);
        state.apply_create(descriptor).expect("create");
        for seq in 1..=3u64 {
            let mut frame = FrameEncoder::begin(&mut buf, FrameKind::Append);
            frame.put_u32(1);
            frame.entry(0, seq, &seq.to_le_bytes());
            frame.finish();
        }
        let mut frame = FrameEncoder::begin(&mut buf, FrameKind::AppendOne);
        frame.entry(0, 4, b"one");
        frame.finish();
        buf
    }

    fn scan_fresh(bytes: &[u8], newest: bool) -> SegmentScan {
        let mut state = State { gap_records_max: 1000, ..State::default() };
        let dir = Path::new("/nonexistent");
        let context =
            ScanContext { dir, segment: 1, previous: None, complete_below: u64::MAX, bytes_are_all: true, newest };
        scan_segment(&mut state, &context, bytes, 0)
    }

    #[test]
    fn the_valid_segment_scans_clean() {
        let scan = scan_fresh(&valid_segment(), true);
        assert_eq!((scan.frames, scan.records, scan.end, scan.damage.len()), (6, 4, ScanEnd::Clean, 0));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512), newest in any::<bool>()) {
            let scan = scan_fresh(&bytes, newest);
            prop_assert!(scan.valid_end <= bytes.len() as u64);
        }

        #[test]
        fn mutated_segments_never_panic(flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
                                        cut in any::<prop::sample::Index>(), newest in any::<bool>()) {
            let mut bytes = valid_segment();
            for (at, byte) in flips {
                let i = at.index(bytes.len());
                bytes[i] ^= byte | 1;
            }
            bytes.truncate(cut.index(bytes.len() + 1));
            let scan = scan_fresh(&bytes, newest);
            prop_assert!(scan.valid_end <= bytes.len() as u64);
            // A scan of complete bytes either reaches their end or stops at a torn tail.
            let reached_end = scan.valid_end == bytes.len() as u64 || bytes[usize::try_from(scan.valid_end).unwrap_or(0)..].iter().all(|&b| b == 0);
            prop_assert!(reached_end || matches!(scan.end, ScanEnd::TornTail { .. } | ScanEnd::Unsupported { .. }),
                "end {:?} at {} of {}", scan.end, scan.valid_end, bytes.len());
        }

        #[test]
        fn frames_with_any_length_field_are_bounded(len in any::<u32>(), kind in 0u8..8) {
            let mut header = vec![0x56, 0x56, kind, 0];
            header.put_u32(len);
            header.put_u32(0);
            let crc = crc32c::crc32c(&header);
            header.put_u32(crc);
            header.extend_from_slice(&[0; 64]);
            let _ = scan_fresh(&header, false);
        }
    }
}
