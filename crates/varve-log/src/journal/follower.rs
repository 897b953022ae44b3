//! Read-only handles in other processes follow the writer: they pick up the
//! frames appended since their last look, reading no further than the end
//! the writer has published (see `published.rs`), so a frame still being
//! written is never mistaken for damage.
//!
//! With nothing published (no writer has run this version here), the newest
//! segment is read up to its first frame that does not check, which is
//! treated as unfinished, never as damage.

use std::fs::File;
use std::path::Path;
use std::sync::{Arc, PoisonError};

use crate::error::{IoContext, LogError, Result};
use crate::journal::format::ENTRY_HEADER_BYTES;
use crate::journal::published::PublishedEnd;
use crate::journal::read::read_up_to;
use crate::journal::scan::{list_segments_beside_writer, scan_segment, segment_path, ScanContext, ScanEnd};
use crate::journal::state::SegmentState;
use crate::journal::{Damage, RecoveryReport, Shared};

/// Where a read-only handle's catch-up resumes.
pub(super) struct Follower {
    pub(super) segment: u32,
    pub(super) offset: u64,
    /// The writer's published end; `None` until a writer has published one.
    pub(super) end: Option<PublishedEnd>,
    /// While a read-only open catches up from an index checkpoint: what it
    /// reads, for the open's report (as a replay reports what it reads).
    pub(super) tally: Option<RecoveryReport>,
}

/// How far a read-only handle got in one segment.
struct Followed {
    offset: u64,
    /// The segment was read to its end: go on to the next.
    complete: bool,
}

/// Read-only handles read segments in chunks of this size (larger if one
/// frame is larger), so a far-behind reader does not hold a whole segment.
const FOLLOW_CHUNK_BYTES: u64 = 1 << 20;

/// How often one refresh reads on when the writer reclaimed a segment under
/// it (its live records moved past the end published when the refresh
/// began). Each round reads only what the writer published since the last,
/// so the bound is only against a writer that outruns the reader for ever.
const FOLLOW_ROUNDS_MAX: usize = 64;

/// What one pass of a refresh did.
struct Pass {
    /// Anything new was applied.
    changed: bool,
    /// A listed segment was gone when the pass came to open it.
    skipped_deleted: bool,
    /// It read to the end published when it began.
    reached_end: bool,
}

/// One segment's part of a refresh.
struct Target<'a> {
    id: u32,
    path: &'a Path,
    file: &'a Arc<File>,
    previous: Option<u32>,
    /// Read no further than this offset.
    limit: u64,
    /// Bytes before this offset are complete (see `ScanContext`).
    complete_below: u64,
    newest: bool,
}

impl Shared {
    /// Follow the writer (read-only handles): pick up frames appended since
    /// the last look, and forget segments the writer has deleted.
    pub(super) fn refresh(&self) -> Result<()> {
        let Some(follower) = &self.follower else { return Ok(()) };
        let mut follower = follower.lock().unwrap_or_else(PoisonError::into_inner);
        if follower.end.is_none() {
            follower.end = PublishedEnd::for_reader(&self.dir)?;
        }
        let mut changed = false;
        for _ in 0..FOLLOW_ROUNDS_MAX {
            // List the segments before loading the published end: the
            // writer publishes the frames that move a segment's records
            // (`Relocate`) before it deletes the segment, so a segment
            // missing from this listing has no record left that frames up
            // to that end still place there. (The other order could forget
            // a segment that positions still point into.)
            let settled = follower.end.as_ref().and_then(PublishedEnd::load).map_or(u32::MAX, |(segment, _)| segment);
            let on_disk = list_segments_beside_writer(&self.dir, settled)?;
            let published = follower.end.as_ref().and_then(PublishedEnd::load);
            let pass = self.follow(&mut follower, &on_disk, published)?;
            changed |= pass.changed;
            // A segment deleted after the listing had its records moved by
            // frames published before the deletion, so possibly after
            // `published`: their seqs read as lost until a round reads on
            // to an end loaded after it. And the listing may predate
            // segments the end names (the writer rolled between the two):
            // then list again and read on.
            let end_moved = follower.end.as_ref().and_then(PublishedEnd::load) != published;
            if pass.reached_end && !(pass.skipped_deleted && end_moved) {
                break;
            }
        }
        if changed {
            self.notifier.notify();
        }
        Ok(())
    }

    /// One pass over the segments from where the follower is.
    fn follow(&self, follower: &mut Follower, on_disk: &[u32], published: Option<(u32, u64)>) -> Result<Pass> {
        let newest_on_disk = on_disk.last().copied();
        let mut changed = false;
        let mut skipped_deleted = false;
        let mut previous = (follower.segment > 0).then_some(follower.segment);
        let start = follower.segment;
        for id in on_disk.iter().copied().filter(|&id| id >= start) {
            let (limit, complete_below, newest) = match published {
                Some((segment, _)) if id > segment => break, // not published yet
                Some((segment, offset)) if id == segment => (offset, u64::MAX, true),
                None if Some(id) == newest_on_disk => (u64::MAX, 0, true),
                // Sealed: complete to its end.
                Some(_) | None => (u64::MAX, u64::MAX, false),
            };
            let path = segment_path(&self.dir, id);
            let file = match File::open(&path) {
                Ok(file) => Arc::new(file),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    skipped_deleted = true; // since the listing
                    continue;
                }
                Err(e) => return Err(LogError::io(format!("opening {}", path.display()), e)),
            };
            let from = if id == follower.segment { follower.offset } else { 0 };
            let target = Target {
                id,
                path: &path,
                file: &file,
                previous: if id == follower.segment { None } else { previous },
                limit,
                complete_below,
                newest,
            };
            let progress = self.follow_segment(&target, from, follower.tally.as_mut())?;
            changed |= progress.offset > from;
            follower.segment = id;
            follower.offset = progress.offset;
            previous = Some(id);
            if !progress.complete {
                break; // unfinished here: look again later
            }
        }
        let mut state = self.write_state();
        let packed = state.logs.pack_if_due();
        let resume = follower.segment;
        state.segments.retain(|id, _| on_disk.binary_search(id).is_ok() || *id >= resume);
        // The packed logs' states are freed after the lock is let go.
        drop(state);
        drop(packed);
        let reached_end = published.is_none_or(|end| (follower.segment, follower.offset) >= end);
        Ok(Pass { changed, skipped_deleted, reached_end })
    }

    /// Apply the frames of one segment from `from` on, reading in chunks;
    /// count them, and the damage found, in `tally` if given.
    fn follow_segment(
        &self,
        target: &Target<'_>,
        mut from: u64,
        mut tally: Option<&mut RecoveryReport>,
    ) -> Result<Followed> {
        let path = target.path;
        let len = target.file.metadata().context(|| format!("reading {}", path.display()))?.len();
        let end = len.min(target.limit);
        let mut chunk = FOLLOW_CHUNK_BYTES;
        while from < end {
            let wanted = chunk.min(end - from);
            let bytes = read_up_to(target.file, from, wanted).context(|| format!("reading {}", path.display()))?;
            // The writer cuts an active segment's zero reserve when it seals
            // it or closes: the file may have shrunk since `len` was read.
            let n = bytes.len() as u64;
            if n == 0 {
                break;
            }
            let context = ScanContext {
                dir: &self.dir,
                segment: target.id,
                previous: target.previous,
                complete_below: target.complete_below,
                bytes_are_all: from + n >= end || n < wanted,
                newest: target.newest,
            };
            let mut state = self.write_state();
            state.gap_records_max += n / ENTRY_HEADER_BYTES as u64;
            state.segments.entry(target.id).or_insert_with(|| SegmentState::new(path.to_owned(), target.file.clone()));
            let scan = scan_segment(&mut state, &context, &bytes, from);
            drop(state);
            let chunk_start = from;
            if let Some(tally) = tally.as_deref_mut() {
                tally.frames += scan.frames;
                tally.records += scan.records;
                tally.bytes += scan.valid_end - chunk_start;
                tally.damage.extend(scan.damage.iter().cloned());
                if let ScanEnd::TornTail { offset, reason } = &scan.end {
                    tally.damage.push(Damage {
                        segment: path.to_owned(),
                        offset: *offset,
                        len: chunk_start + n - offset,
                        reason: format!(
                            "{reason} (an unfinished write: the next writer to open the namespace cuts it)"
                        ),
                        at_tail: true,
                    });
                }
            }
            match scan.end {
                ScanEnd::Clean if scan.valid_end == chunk_start + n => {
                    from = scan.valid_end;
                    chunk = FOLLOW_CHUNK_BYTES;
                }
                // The zero reserve of a segment still open: nothing more yet.
                ScanEnd::Clean => return Ok(Followed { offset: scan.valid_end, complete: !target.newest }),
                // A frame runs past the chunk (not past what may be read): read more.
                ScanEnd::Unfinished { offset } if !context.bytes_are_all => {
                    chunk = if offset > chunk_start { FOLLOW_CHUNK_BYTES } else { chunk * 2 };
                    from = offset;
                }
                ScanEnd::Unfinished { offset } | ScanEnd::TornTail { offset, .. } => {
                    return Ok(Followed { offset, complete: false });
                }
                ScanEnd::Unsupported { offset, reason } => {
                    return Err(LogError::UnsupportedFormat { segment: path.to_owned(), offset, reason });
                }
            }
        }
        Ok(Followed { offset: from, complete: !target.newest })
    }
}
