//! Reading segments back: recovery on open, catch-up of read-only handles,
//! and `fsck` all walk frames through [`scan_segment`], which applies them to a
//! [`State`] and stops at the first frame it cannot trust.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{IoContext, LogError, Result};
use crate::journal::format::{check_frame, parse_body, valid_frame_after, FrameBody, FrameError};
use crate::journal::state::{Position, State};

pub(crate) const SEGMENT_SUFFIX: &str = ".seg";

pub(crate) fn segment_path(dir: &Path, id: u32) -> PathBuf {
    dir.join(format!("{id:010}{SEGMENT_SUFFIX}"))
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

/// Why a scan stopped before the end of the bytes it was given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stop {
    /// Offset in the segment of the first frame not applied.
    pub(crate) offset: u64,
    pub(crate) reason: String,
    /// Nothing valid follows, so this is the end of what was written: a torn
    /// or unfinished write (or damage confined to the last frame).
    pub(crate) at_tail: bool,
    /// The bytes are merely short (the frame is not all there yet).
    pub(crate) incomplete: bool,
}

#[derive(Debug, Default)]
pub(crate) struct SegmentScan {
    /// Offset just past the last frame applied.
    pub(crate) valid_end: u64,
    pub(crate) frames: u64,
    pub(crate) records: u64,
    pub(crate) stop: Option<Stop>,
}

/// Apply the frames of segment `id` found in `bytes` (which start at segment
/// offset `base`) to `state`. A segment's first frame must be its header.
pub(crate) fn scan_segment(state: &mut State, id: u32, bytes: &[u8], base: u64) -> SegmentScan {
    let mut scan = SegmentScan { valid_end: base, ..SegmentScan::default() };
    let mut at = 0usize;
    while at < bytes.len() {
        let offset = base + at as u64;
        let stop = |reason: String, incomplete: bool| Stop {
            offset,
            at_tail: incomplete || valid_frame_after(bytes, at).is_none(),
            reason,
            incomplete,
        };
        let frame = match check_frame(&bytes[at..], true) {
            Ok(frame) => frame,
            // The preallocated, never-written rest of the active segment.
            Err(_) if bytes[at..].iter().all(|&b| b == 0) => return scan,
            Err(FrameError::Incomplete) => {
                scan.stop = Some(stop("frame cut short (torn or unfinished write)".into(), true));
                return scan;
            }
            Err(FrameError::Damaged(reason)) => {
                scan.stop = Some(stop(reason, false));
                return scan;
            }
        };
        let applied = parse_body(frame)
            .map_err(|e| match e {
                FrameError::Incomplete => "frame body ends early".to_owned(),
                FrameError::Damaged(reason) => reason,
            })
            .and_then(|body| apply(state, id, offset, body));
        match applied {
            Ok(records) => scan.records += records,
            Err(reason) => {
                // The frame is intact but disagrees with what came before:
                // never a torn write, so never at the tail.
                scan.stop = Some(Stop { offset, reason, at_tail: false, incomplete: false });
                return scan;
            }
        }
        at += frame.len;
        scan.frames += 1;
        scan.valid_end = base + at as u64;
        if let Some(segment) = state.segments.get_mut(&id) {
            segment.bytes = scan.valid_end;
        }
    }
    scan
}

/// Apply one frame; returns how many records it held.
fn apply(state: &mut State, segment_id: u32, frame_offset: u64, body: FrameBody<'_>) -> Result<u64, String> {
    let first_frame = frame_offset == 0;
    if first_frame != matches!(body, FrameBody::SegmentHeader(_)) {
        return Err(if first_frame {
            "segment does not start with its header frame".into()
        } else {
            "segment header frame in the middle of a segment".into()
        });
    }
    let position = |entry: &crate::journal::format::Entry<'_>| Position {
        segment: segment_id,
        offset: u32::try_from(frame_offset + entry.offset_in_frame as u64).expect("segments are under 4 GiB"),
        len: u32::try_from(entry.payload.len()).expect("records are under 4 GiB"),
    };
    match body {
        FrameBody::SegmentHeader(header) => {
            if header.segment_id != segment_id {
                return Err(format!("segment header names segment {}, but the file is {segment_id}", header.segment_id));
            }
            state.apply_segment_header(&header).map(|()| 0)
        }
        FrameBody::CreateLog(descriptor) => {
            if descriptor.latest != 0 {
                return Err("created log does not start empty".into());
            }
            state.apply_create(descriptor).map(|()| 0)
        }
        FrameBody::DeleteLog(id) => state.apply_delete(id).map(|()| 0),
        FrameBody::Append(entries) => {
            entries.iter().try_for_each(|entry| state.apply_append(entry.log_id, entry.seq, position(entry)))?;
            Ok(entries.len() as u64)
        }
        FrameBody::Relocate(entries) => {
            entries.iter().try_for_each(|entry| state.apply_relocate(entry.log_id, entry.seq, position(entry)))?;
            Ok(entries.len() as u64)
        }
    }
}

/// The `Corrupt` error for a stop that may not be cut silently.
pub(crate) fn corrupt(path: &Path, stop: &Stop) -> LogError {
    LogError::Corrupt { segment: path.to_owned(), offset: stop.offset, reason: stop.reason.clone() }
}

#[cfg(test)]
mod fuzz {
    //! The frame decoder against arbitrary and mutated bytes: it may refuse
    //! them, but never panics, never loops, never allocates without bound.

    use proptest::prelude::*;

    use super::*;
    use crate::contract::LogConfig;
    use crate::journal::format::{encode_create, encode_segment_header, FrameEncoder, FrameKind, LogDescriptor};

    fn valid_segment() -> Vec<u8> {
        let mut state = State::default();
        let mut buf = Vec::new();
        encode_segment_header(&mut buf, &state.catalog(1));
        let descriptor = LogDescriptor { id: 0, name: "a".into(), config: LogConfig::default(), latest: 0 };
        encode_create(&mut buf, &descriptor);
        state.apply_create(descriptor).expect("create");
        for seq in 1..=3u64 {
            let mut frame = FrameEncoder::begin(&mut buf, FrameKind::Append);
            frame.u32(1);
            frame.entry(0, seq, &seq.to_le_bytes());
            frame.finish();
        }
        let mut frame = FrameEncoder::begin(&mut buf, FrameKind::AppendOne);
        frame.entry(0, 4, b"one");
        frame.finish();
        buf
    }

    fn scan_fresh(bytes: &[u8]) -> SegmentScan {
        let mut state = State { gap_records_max: 1000, ..State::default() };
        scan_segment(&mut state, 1, bytes, 0)
    }

    #[test]
    fn the_valid_segment_scans_clean() {
        let scan = scan_fresh(&valid_segment());
        assert_eq!((scan.frames, scan.records, scan.stop), (6, 4, None));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
            let scan = scan_fresh(&bytes);
            prop_assert!(scan.valid_end <= bytes.len() as u64);
        }

        #[test]
        fn mutated_segments_never_panic(flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
                                        cut in any::<prop::sample::Index>()) {
            let mut bytes = valid_segment();
            for (at, byte) in flips {
                let i = at.index(bytes.len());
                bytes[i] ^= byte | 1;
            }
            bytes.truncate(cut.index(bytes.len() + 1));
            let scan = scan_fresh(&bytes);
            // Whatever was applied is a prefix of valid frames.
            prop_assert!(scan.valid_end <= bytes.len() as u64);
            prop_assert!(scan.stop.is_some() || scan.valid_end == bytes.len() as u64);
        }

        #[test]
        fn frames_with_any_length_field_are_bounded(len in any::<u32>(), kind in 0u8..8) {
            let mut header = vec![0x56, 0x56, kind, 0];
            header.extend_from_slice(&len.to_le_bytes());
            header.extend_from_slice(&0u32.to_le_bytes());
            let crc = crc32c::crc32c(&header);
            header.extend_from_slice(&crc.to_le_bytes());
            header.extend_from_slice(&[0; 64]);
            let _ = scan_fresh(&header);
        }
    }
}
