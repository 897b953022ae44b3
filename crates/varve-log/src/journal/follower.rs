//! Read-only handles in other processes follow the writer: they pick up the
//! frames appended since their last look and forget deleted segments.

use std::fs::File;
use std::path::Path;
use std::sync::{Arc, PoisonError};

use crate::error::{IoContext, LogError, Result};
use crate::journal::format::ENTRY_HEADER_BYTES;
use crate::journal::recovery::segment_state;
use crate::journal::scan::{corrupt, list_segments, scan_segment, segment_path};
use crate::journal::{read_up_to, Shared};

pub(super) struct Follower {
    pub(crate) segment: u32,
    pub(crate) offset: u64,
}

/// How far a read-only handle got in one segment.
pub(super) struct Followed {
    pub(super) offset: u64,
    pub(super) complete: bool,
}

/// Read-only handles read segments in chunks of this size (larger if one
/// frame is larger), so following an active segment does not read its zero
/// reserve.
const FOLLOW_CHUNK_BYTES: u64 = 1 << 20;

impl Shared {
    /// Follow the writer (read-only handles): pick up frames appended since
    /// the last look, and forget segments the writer has deleted.
    pub(super) fn refresh(&self) -> Result<()> {
        let Some(follower) = &self.follower else { return Ok(()) };
        let mut follower = follower.lock().unwrap_or_else(PoisonError::into_inner);
        let on_disk = list_segments(&self.dir)?;
        let mut changed = false;
        let resume_segment = follower.segment;
        for id in on_disk.iter().copied().filter(|&id| id >= resume_segment) {
            let path = segment_path(&self.dir, id);
            let file = match File::open(&path) {
                Ok(file) => Arc::new(file),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue, // deleted since listing
                Err(e) => return Err(LogError::io(format!("opening {}", path.display()), e)),
            };
            let from = if id == follower.segment { follower.offset } else { 0 };
            let progress = self.follow_segment(id, &file, &path, from)?;
            changed |= progress.offset > from;
            follower.segment = id;
            follower.offset = progress.offset;
            if !progress.complete {
                break; // the writer is mid-frame here: look again later
            }
        }
        let mut state = self.write_state();
        state.segments.retain(|id, _| on_disk.binary_search(id).is_ok() || *id >= follower.segment);
        drop(state);
        if changed {
            self.notifier.notify();
        }
        Ok(())
    }

    /// Apply the frames of segment `id` from `from` on, reading in chunks and
    /// stopping at the zero reserve of an active segment. `complete` is false
    /// when a partial frame ends what is there.
    pub(super) fn follow_segment(&self, id: u32, file: &Arc<File>, path: &Path, mut from: u64) -> Result<Followed> {
        let len = file.metadata().context(|| format!("reading {}", path.display()))?.len();
        let mut chunk = FOLLOW_CHUNK_BYTES;
        while from < len {
            let wanted = chunk.min(len - from);
            let bytes = read_up_to(file, from, wanted).context(|| format!("reading {}", path.display()))?;
            // The writer cuts an active segment's zero reserve when it seals
            // it or closes: the file may have shrunk since `len` was read.
            let n = bytes.len() as u64;
            if n == 0 {
                break;
            }
            let mut state = self.write_state();
            state.gap_records_max += n / ENTRY_HEADER_BYTES as u64;
            state.segments.entry(id).or_insert_with(|| segment_state(path.to_owned(), file.clone()));
            let scan = scan_segment(&mut state, id, &bytes, from);
            drop(state);
            let chunk_start = from;
            from = scan.valid_end;
            match scan.stop {
                // Clean to the end of the chunk: read on.
                None if from == chunk_start + n => chunk = FOLLOW_CHUNK_BYTES,
                // Clean before it: the zero reserve, nothing more written yet.
                None => return Ok(Followed { offset: from, complete: true }),
                // A frame runs past the chunk (not past the file): read more.
                Some(stop) if stop.incomplete && chunk_start + n < len => {
                    chunk = if from > chunk_start { FOLLOW_CHUNK_BYTES } else { chunk * 2 };
                }
                Some(stop) if !stop.at_tail => return Err(corrupt(path, &stop)),
                Some(_) => return Ok(Followed { offset: from, complete: false }),
            }
        }
        Ok(Followed { offset: from, complete: true })
    }
}
