//! Opening a namespace: rebuild the in-memory state from every segment, and
//! (writers only) cut a torn tail off the newest segment, keeping a copy.

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{IoContext, LogError, Result};
use crate::journal::format::ENTRY_HEADER_BYTES;
use crate::journal::mapped::SegmentBytes;
use crate::journal::scan::{corrupt, list_segments, scan_segment, segment_path, Stop};
use crate::journal::state::{SegmentState, State};
use crate::journal::{RecoveryReport, TornTail};

/// The newest segment's id and the end of its valid frames.
pub(crate) type Tail = Option<(u32, u64)>;

/// Rebuild the state from every segment. A writer (`repair_tail`) cuts a
/// torn tail off the newest segment; a reader stops before it. Returns the
/// newest segment and the offset where its valid frames end.
pub(crate) fn recover(dir: &Path, repair_tail: bool) -> Result<(State, RecoveryReport, Tail)> {
    let ids = list_segments(dir)?;
    let mut state = State::default();
    let mut report = RecoveryReport::default();
    // A read-only open races the writer: a segment listed here may be
    // deleted (it held no live record) before we read it. Skip it.
    let gone = |e: &std::io::Error| !repair_tail && e.kind() == std::io::ErrorKind::NotFound;
    let mut disk_bytes = 0;
    for &id in &ids {
        let path = segment_path(dir, id);
        match fs::metadata(&path) {
            Ok(metadata) => disk_bytes += metadata.len(),
            Err(e) if gone(&e) => {}
            Err(e) => return Err(LogError::io(format!("reading {}", path.display()), e)),
        }
    }
    state.gap_records_max = disk_bytes / ENTRY_HEADER_BYTES as u64 + 1;
    let mut tail = None;
    for (i, &id) in ids.iter().enumerate() {
        let last = i + 1 == ids.len();
        let path = segment_path(dir, id);
        let opened = OpenOptions::new().read(true).write(repair_tail && last).open(&path);
        let file = match opened {
            Ok(file) => file,
            Err(e) if gone(&e) => continue,
            Err(e) => return Err(LogError::io(format!("opening {}", path.display()), e)),
        };
        // Read through the handle: it stays valid if the file is deleted now.
        let bytes = SegmentBytes::load(&file, &path, repair_tail)?;
        state.segments.insert(id, segment_state(path.clone(), Arc::new(file)));
        let scan = scan_segment(&mut state, id, &bytes, 0);
        report.segments += 1;
        report.frames += scan.frames;
        report.records += scan.records;
        report.bytes += scan.valid_end;
        if let Some(stop) = scan.stop {
            if !(last && stop.at_tail) {
                return Err(corrupt(&path, &stop));
            }
            if repair_tail {
                report.torn_tail = Some(cut_tail(dir, &path, &bytes, &stop)?);
            }
        } else if repair_tail && !last && (bytes.len() as u64) > scan.valid_end {
            // A roll that crashed before cutting the sealed segment's zero
            // reserve: finish the cut (the scan has just seen it is all zero).
            drop(bytes);
            let sealed = OpenOptions::new().write(true).open(&path).context(|| format!("opening {}", path.display()))?;
            sealed.set_len(scan.valid_end).context(|| format!("sealing {}", path.display()))?;
        }
        tail = Some((id, scan.valid_end));
    }
    state.check_complete().map_err(|reason| LogError::Corrupt { segment: dir.to_owned(), offset: 0, reason })?;
    Ok((state, report, tail))
}

pub(crate) fn segment_state(path: PathBuf, file: Arc<File>) -> SegmentState {
    SegmentState { path, file, bytes: 0, live_records: 0, live_bytes: 0 }
}

/// Copy a segment's bytes from `stop.offset` on into `quarantine/`, then cut them off.
fn cut_tail(dir: &Path, path: &Path, bytes: &[u8], stop: &Stop) -> Result<TornTail> {
    let quarantine = dir.join("quarantine");
    fs::create_dir_all(&quarantine).context(|| format!("creating {}", quarantine.display()))?;
    let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("segment");
    let saved_to = quarantine.join(format!("{file_name}.{}.tail", stop.offset));
    let offset = usize::try_from(stop.offset).expect("segment offsets fit usize");
    // Past the last non-zero byte is only the active segment's zero reserve.
    let written_end = bytes.iter().rposition(|&b| b != 0).map_or(offset, |last| (last + 1).max(offset));
    let dropped = &bytes[offset..written_end];
    fs::write(&saved_to, dropped).context(|| format!("saving the torn tail to {}", saved_to.display()))?;
    let file = OpenOptions::new().write(true).open(path).context(|| format!("opening {}", path.display()))?;
    file.set_len(stop.offset).context(|| format!("truncating {}", path.display()))?;
    file.sync_all().context(|| format!("syncing {}", path.display()))?;
    Ok(TornTail {
        segment: path.to_owned(),
        offset: stop.offset,
        dropped_bytes: dropped.len() as u64,
        reason: stop.reason.clone(),
        saved_to,
    })
}
