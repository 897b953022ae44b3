//! The active segment as a memory map: an append is a copy into the map, so
//! it costs no system call and is in the page cache — safe from a process
//! crash — the moment the copy ends. (`CSPOT` keeps `WooF`s in memory-mapped
//! files for the same reason.) Reads go through `pread` on the same file,
//! which sees the same page cache.
//!
//! The file is made `capacity` bytes long with its blocks reserved
//! (`fallocate`) before it is mapped, so a full disk is an error when a
//! segment starts or grows, never a `SIGBUS` on a later copy into the map.
//! Bytes past the last frame stay zero; recovery reads an all-zero remainder
//! as the end.
//!
//! The reserve grows with the data: a new segment reserves
//! [`RESERVE_BYTES_MIN`], and the writer doubles it as frames fill it, up to
//! the segment's size limit ([`reserve_for`]). So a namespace with little
//! data takes little disk — a store fits a few MiB on an edge device — and a
//! busy one remaps its active segment about ten times per segment.

use std::fs::File;
use std::path::Path;

use memmap2::{MmapMut, MmapOptions};

use crate::error::{IoContext, LogError, Result};
use crate::journal::io::{is_no_space, SegmentIo};

/// The first reserve of a new segment (and the least a segment grows by).
pub(crate) const RESERVE_BYTES_MIN: u64 = 64 << 10;

/// The reserve to hold `needed` bytes: the current one doubled (at least
/// [`RESERVE_BYTES_MIN`]) until it fits, but no more than `segment_bytes_max`
/// unless one frame alone needs more.
pub(crate) fn reserve_for(current: u64, needed: u64, segment_bytes_max: u64) -> u64 {
    let mut reserve = current.max(RESERVE_BYTES_MIN);
    while reserve < needed {
        reserve = reserve.saturating_mul(2);
    }
    reserve.min(segment_bytes_max).max(needed)
}

pub(crate) struct SegmentMap {
    map: MmapMut,
}

impl SegmentMap {
    /// Map `file`, first growing it to at least `capacity` bytes with blocks
    /// reserved. A full disk is [`LogError::NoSpace`], and the file is left
    /// as long as it was.
    pub(crate) fn new(file: &File, path: &Path, capacity: u64, io: &dyn SegmentIo) -> Result<SegmentMap> {
        let len = file.metadata().context(|| format!("reading {}", path.display()))?.len();
        if len < capacity {
            if let Err(e) = io.reserve(file, capacity) {
                // `fallocate` may have grown the file before failing.
                let _ = io.set_len(file, len);
                return Err(if is_no_space(&e) {
                    LogError::NoSpace { path: path.to_owned(), bytes: capacity - len }
                } else {
                    LogError::io(format!("reserving {capacity} bytes for {}", path.display()), e)
                });
            }
        }
        let map_len = usize::try_from(len.max(capacity)).expect("segments fit the address space");
        #[expect(unsafe_code, reason = "memory-mapping a file is unsafe by nature; invariant below")]
        // SAFETY: the map is undefined behaviour only if another party
        // truncates or rewrites the file while it is mapped. Only the holder
        // of the namespace's writer lock (this process) ever writes or
        // truncates segment files; readers use `pread` and never write.
        let map = unsafe { MmapOptions::new().len(map_len).map_mut(file) }
            .context(|| format!("mapping {}", path.display()))?;
        Ok(SegmentMap { map })
    }

    pub(crate) fn capacity(&self) -> u64 {
        self.map.len() as u64
    }

    /// Copy `bytes` in at `at`. The caller has checked the capacity.
    pub(crate) fn write(&mut self, at: u64, bytes: &[u8]) {
        let at = usize::try_from(at).expect("offsets within the map fit usize");
        self.map[at..at + bytes.len()].copy_from_slice(bytes);
    }
}

/// A whole segment's bytes for recovery: mapped when only this process can
/// change the file (the writer, holding the lock), read into memory
/// otherwise (a read-only process, whose writer may cut the file at any time).
/// Mapping spares a copy of every byte: opening a 1 GiB journal reads 1 GiB.
pub(crate) enum SegmentBytes {
    Mapped(memmap2::Mmap),
    Read(Vec<u8>),
}

impl SegmentBytes {
    pub(crate) fn load(file: &File, path: &Path, writer_holds_lock: bool) -> Result<SegmentBytes> {
        let len = file.metadata().context(|| format!("reading {}", path.display()))?.len();
        if writer_holds_lock && len > 0 {
            #[expect(unsafe_code, reason = "memory-mapping a file is unsafe by nature; invariant below")]
            // SAFETY: the caller holds the namespace's writer lock, so no other
            // process writes or truncates this file while it is mapped, and
            // this process truncates it only after the last read of the map.
            let map = unsafe { MmapOptions::new().map(file) }.context(|| format!("mapping {}", path.display()))?;
            return Ok(SegmentBytes::Mapped(map));
        }
        let bytes = super::read::read_up_to(file, 0, len).context(|| format!("reading {}", path.display()))?;
        Ok(SegmentBytes::Read(bytes))
    }
}

impl std::ops::Deref for SegmentBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            SegmentBytes::Mapped(map) => map,
            SegmentBytes::Read(bytes) => bytes,
        }
    }
}

/// A segment file mapped for reading in the writer's process: a record read
/// from it is a copy out of the page cache, with no system call. (A `pread`
/// per record was the largest cost of scans and of `PEDaLS` node reads; see
/// docs/benchmarks.md.) Sealed segments are mapped whole; the active one up
/// to its reserve, and mapped again each time the reserve grows.
pub(crate) struct ReadMap {
    map: memmap2::Mmap,
}

impl ReadMap {
    /// Map `file` as long as it is now. Call only in the process that holds
    /// the namespace's writer lock. `None` for an empty file, or when
    /// mapping fails: reads then use `pread`, so a failed map costs speed only.
    pub(crate) fn new(file: &File) -> Option<ReadMap> {
        let len = file.metadata().ok()?.len();
        if len == 0 {
            return None;
        }
        #[expect(unsafe_code, reason = "memory-mapping a file is unsafe by nature; invariant below")]
        // SAFETY: reading the map is undefined behaviour only where the file
        // is cut or rewritten while mapped. The caller holds the writer lock,
        // so only this process writes the file, and it never rewrites or cuts
        // the bytes of a published record: `bytes` is only asked for those
        // (the positions in the state). Cutting the zero reserve past the
        // last frame, and deleting the whole file, leave them mapped. (A
        // process that ignores the lock and cuts a segment could make a read
        // fault, where `pread` would report lost records.)
        let map = unsafe { MmapOptions::new().map(file) }.ok()?;
        Some(ReadMap { map })
    }

    /// The bytes at `offset..offset + len`, which must be a published
    /// record's; `None` past the mapped end (the reader then uses `pread`).
    pub(crate) fn bytes(&self, offset: u64, len: u64) -> Option<&[u8]> {
        let start = usize::try_from(offset).ok()?;
        let len = usize::try_from(len).ok()?;
        if start.checked_add(len)? > self.map.len() {
            return None;
        }
        #[expect(unsafe_code, reason = "a slice of the published range only; invariant below")]
        // SAFETY: in bounds (checked above). The writer may be writing other
        // parts of the file through its own map, so no slice of the whole map
        // is ever made: only of one published record, whose bytes nothing
        // writes again (see `new`).
        Some(unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(start), len) })
    }
}

impl std::fmt::Debug for ReadMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadMap").field("len", &self.map.len()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserve_doubles_up_to_the_segment_limit() {
        let max = 64 << 20;
        assert_eq!(reserve_for(0, 100, max), RESERVE_BYTES_MIN);
        assert_eq!(reserve_for(RESERVE_BYTES_MIN, RESERVE_BYTES_MIN + 1, max), 2 * RESERVE_BYTES_MIN);
        assert_eq!(reserve_for(RESERVE_BYTES_MIN, 5 * RESERVE_BYTES_MIN, max), 8 * RESERVE_BYTES_MIN);
        assert_eq!(reserve_for(48 << 20, (48 << 20) + 1, max), max);
        // A frame larger than a segment gets exactly what it needs.
        assert_eq!(reserve_for(max, max + 10, max), max + 10);
        // A tiny segment limit caps the first reserve too.
        assert_eq!(reserve_for(0, 100, 8192), 8192);
    }
}
