//! Opening a namespace: rebuild the in-memory state from every segment.
//!
//! A writer (holding the lock, so nothing else writes) trusts every byte on
//! disk to be finished, except a torn write at the end of the newest
//! segment, which it copies to `quarantine/` and cuts off. A reader reads
//! only what the writer has published (see `published.rs`) and stops at
//! anything unfinished. Both salvage around damage (see `scan.rs`): the
//! namespace opens, and what is damaged or missing is reported.

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{IoContext, LogError, Result};
use crate::journal::format::ENTRY_HEADER_BYTES;
use crate::journal::io::SegmentIo;
use crate::journal::mapped::SegmentBytes;
use crate::journal::published::PublishedEnd;
use crate::journal::read::read_up_to;
use crate::journal::scan::{
    list_segments, list_segments_beside_writer, scan_segment, segment_path, ScanContext, ScanEnd, SegmentScan,
};
use crate::journal::state::{SegmentState, State};
use crate::journal::{RecoveryReport, TornTail};

/// Where reading resumes: the newest segment read, and the offset after
/// its last frame applied (a writer appends there; a reader follows from there).
pub(crate) type Tail = Option<(u32, u64)>;

/// Rebuild the state as the writer: every byte is finished but a torn tail
/// of the newest segment, which is cut off (copied to `quarantine/` first).
pub(crate) fn recover_as_writer(dir: &Path, io: &dyn SegmentIo) -> Result<(State, RecoveryReport, Tail)> {
    let ids = segments_for_writer(dir, io)?;
    replay_as_writer(dir, io, State::default(), &ids, None)
}

/// Go on as the writer from a checkpoint's `state`, which holds every frame
/// before `from` (a segment and an offset in it): replay the frames after
/// it, as [`recover_as_writer`] replays them all.
pub(crate) fn resume_as_writer(
    dir: &Path,
    io: &dyn SegmentIo,
    state: State,
    from: (u32, u64),
) -> Result<(State, RecoveryReport, Tail)> {
    let ids = segments_for_writer(dir, io)?;
    replay_as_writer(dir, io, state, &ids, Some(from))
}

/// The segment files, less an empty newest one: a crash between creating
/// a segment and writing its header left it, and the writer starts it anew.
fn segments_for_writer(dir: &Path, io: &dyn SegmentIo) -> Result<Vec<u32>> {
    let mut ids = list_segments(dir)?;
    while let Some(&id) = ids.last() {
        let path = segment_path(dir, id);
        if fs::metadata(&path).context(|| format!("reading {}", path.display()))?.len() > 0 || ids.len() == 1 {
            break;
        }
        io.remove_file(&path).context(|| format!("removing the empty segment {}", path.display()))?;
        ids.pop();
    }
    Ok(ids)
}

/// Replay the frames of segments `ids` onto `state`: all of them, or those
/// from `from` on (segments before it are in `state` already).
fn replay_as_writer(
    dir: &Path,
    io: &dyn SegmentIo,
    mut state: State,
    ids: &[u32],
    from: Option<(u32, u64)>,
) -> Result<(State, RecoveryReport, Tail)> {
    state.gap_records_max = gap_records_max(dir, ids)?;
    let mut report = RecoveryReport::default();
    let mut tail = None;
    let mut previous = None;
    for (i, &id) in ids.iter().enumerate() {
        let start = match from {
            Some((segment, _)) if id < segment => {
                previous = Some(id);
                continue;
            }
            Some((segment, offset)) if id == segment => offset,
            Some(_) | None => 0,
        };
        let newest = i + 1 == ids.len();
        let path = segment_path(dir, id);
        let file = OpenOptions::new()
            .read(true)
            .write(newest)
            .open(&path)
            .context(|| format!("opening {}", path.display()))?;
        let bytes = SegmentBytes::load(&file, &path, true)?;
        let file = Arc::new(file);
        match state.segments.get_mut(&id) {
            // The checkpoint's segment: keep what it counted, write through this file.
            Some(segment) => segment.file = file,
            None => {
                state.segments.insert(id, SegmentState::new(path.clone(), file));
            }
        }
        let context = ScanContext { dir, segment: id, previous, complete_below: u64::MAX, bytes_are_all: true, newest };
        let skipped = usize::try_from(start).expect("segment offsets fit usize").min(bytes.len());
        let scan = scan_segment(&mut state, &context, &bytes[skipped..], start);
        let mut resume = scan.valid_end;
        match &scan.end {
            ScanEnd::TornTail { offset, reason } => {
                debug_assert!(newest);
                report.torn_tail = Some(cut_tail(dir, &path, &bytes, *offset, reason, io)?);
                resume = *offset;
            }
            ScanEnd::Unsupported { offset, reason } => return Err(unsupported(&path, *offset, reason)),
            ScanEnd::Clean | ScanEnd::Unfinished { .. } => {}
        }
        if !newest && bytes.len() as u64 > scan.valid_end && scan.end == ScanEnd::Clean {
            // A roll that crashed before cutting the sealed segment's zero
            // reserve: finish the cut (the scan has just seen it is all zero).
            drop(bytes);
            let sealed =
                OpenOptions::new().write(true).open(&path).context(|| format!("opening {}", path.display()))?;
            io.set_len(&sealed, scan.valid_end).context(|| format!("sealing {}", path.display()))?;
        }
        add_to_report(&mut report, &scan, start);
        tail = Some((id, resume));
        previous = Some(id);
    }
    report.segments = state.segments.len() as u64;
    Ok((state, report, tail))
}

/// Rebuild the state as a reader: up to what the writer has published, or,
/// with nothing published, up to the first frame of the newest segment that
/// does not check (it may be unfinished). A segment the writer deletes
/// while this reads is skipped: the frames that moved its live records may
/// lie past the end read to, so the caller reads on (`Shared::refresh`, as
/// the open does) before it trusts what reads as lost.
///
/// `progress(done, total)` is told the bytes read as segments are read.
pub(crate) fn recover_as_reader(
    dir: &Path,
    published: Option<&PublishedEnd>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(State, RecoveryReport, Tail)> {
    read_segments(dir, published, progress)
}

fn read_segments(
    dir: &Path,
    end: Option<&PublishedEnd>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(State, RecoveryReport, Tail)> {
    // List before loading the end, as a refresh does (`Shared::refresh`).
    let settled = end.and_then(PublishedEnd::load).map_or(u32::MAX, |(segment, _)| segment);
    let mut ids = list_segments_beside_writer(dir, settled)?;
    let published = end.and_then(PublishedEnd::load);
    if let Some((segment, _)) = published {
        ids.retain(|&id| id <= segment);
    }
    let total = disk_bytes(dir, &ids)?;
    let mut done = 0;
    let mut state = State { gap_records_max: total / ENTRY_HEADER_BYTES as u64 + 1, ..State::default() };
    let mut report = RecoveryReport::default();
    let mut tail = None;
    let mut previous = None;
    for (i, &id) in ids.iter().enumerate() {
        let newest = i + 1 == ids.len();
        let path = segment_path(dir, id);
        let file = match File::open(&path) {
            Ok(file) => file,
            // The writer deleted it (it held no live record) since the listing.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(LogError::io(format!("opening {}", path.display()), e)),
        };
        let (limit, complete_below) = match published {
            Some((segment, offset)) if segment == id => (offset, u64::MAX),
            None if newest => (u64::MAX, 0),
            // Sealed: complete to its end.
            Some(_) | None => (u64::MAX, u64::MAX),
        };
        let len = file.metadata().context(|| format!("reading {}", path.display()))?.len();
        let bytes = read_up_to(&file, 0, len.min(limit)).context(|| format!("reading {}", path.display()))?;
        state.segments.insert(id, SegmentState::new(path.clone(), Arc::new(file)));
        let context = ScanContext { dir, segment: id, previous, complete_below, bytes_are_all: true, newest };
        let scan = scan_segment(&mut state, &context, &bytes, 0);
        let resume = match &scan.end {
            ScanEnd::Unsupported { offset, reason } => return Err(unsupported(&path, *offset, reason)),
            ScanEnd::TornTail { offset, reason } => {
                report.damage.push(crate::journal::Damage {
                    segment: path.clone(),
                    offset: *offset,
                    len: bytes.len() as u64 - offset,
                    reason: format!("{reason} (an unfinished write: the next writer to open the namespace cuts it)"),
                    at_tail: true,
                });
                *offset
            }
            ScanEnd::Unfinished { offset } => *offset,
            ScanEnd::Clean => scan.valid_end,
        };
        add_to_report(&mut report, &scan, 0);
        tail = Some((id, resume));
        previous = Some(id);
        done += bytes.len() as u64;
        progress(done, total.max(done));
    }
    Ok((state, report, tail))
}

/// Most records one gap may skip: bounded by the bytes on disk, so that a
/// damaged header cannot make recovery allocate without limit.
fn gap_records_max(dir: &Path, ids: &[u32]) -> Result<u64> {
    Ok(disk_bytes(dir, ids)? / ENTRY_HEADER_BYTES as u64 + 1)
}

/// Bytes in the segment files `ids` (those that still exist).
fn disk_bytes(dir: &Path, ids: &[u32]) -> Result<u64> {
    let mut disk_bytes = 0;
    for &id in ids {
        let path = segment_path(dir, id);
        match fs::metadata(&path) {
            Ok(metadata) => disk_bytes += metadata.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(LogError::io(format!("reading {}", path.display()), e)),
        }
    }
    Ok(disk_bytes)
}

/// Count a scan that began at byte `start` of its segment.
fn add_to_report(report: &mut RecoveryReport, scan: &SegmentScan, start: u64) {
    report.segments += 1;
    report.frames += scan.frames;
    report.records += scan.records;
    report.bytes += scan.valid_end - start;
    report.damage.extend(scan.damage.iter().cloned());
}

fn unsupported(path: &Path, offset: u64, reason: &str) -> LogError {
    LogError::UnsupportedFormat { segment: path.to_owned(), offset, reason: reason.to_owned() }
}

/// Copy a segment's bytes from `offset` on into `quarantine/`, then cut them off.
fn cut_tail(dir: &Path, path: &Path, bytes: &[u8], offset: u64, reason: &str, io: &dyn SegmentIo) -> Result<TornTail> {
    let quarantine = dir.join("quarantine");
    fs::create_dir_all(&quarantine).context(|| format!("creating {}", quarantine.display()))?;
    let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("segment");
    let saved_to = quarantine.join(format!("{file_name}.{offset}.tail"));
    let start = usize::try_from(offset).expect("segment offsets fit usize");
    // Past the last non-zero byte is only the active segment's zero reserve.
    let written_end = bytes.iter().rposition(|&b| b != 0).map_or(start, |last| (last + 1).max(start));
    let dropped = &bytes[start..written_end];
    fs::write(&saved_to, dropped).context(|| format!("saving the torn tail to {}", saved_to.display()))?;
    let file = OpenOptions::new().write(true).open(path).context(|| format!("opening {}", path.display()))?;
    io.set_len(&file, offset).context(|| format!("truncating {}", path.display()))?;
    io.sync_data(&file).context(|| format!("syncing {}", path.display()))?;
    Ok(TornTail {
        segment: path.to_owned(),
        offset,
        dropped_bytes: dropped.len() as u64,
        reason: reason.to_owned(),
        saved_to: PathBuf::from(&saved_to),
    })
}
