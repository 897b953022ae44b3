//! The active segment as a memory map: an append is a copy into the map, so
//! it costs no system call and is in the page cache — safe from a process
//! crash — the moment the copy ends. (`CSPOT` keeps `WooF`s in memory-mapped
//! files for the same reason.) Reads go through `pread` on the same file,
//! which sees the same page cache.
//!
//! The file is made `capacity` bytes long with its blocks reserved
//! (`fallocate`) before it is mapped, so a full disk is an error when a
//! segment starts, never a `SIGBUS` on a later copy into the map. Bytes past
//! the last frame stay zero; recovery reads an all-zero remainder as the end.

use std::fs::File;
use std::path::Path;

use memmap2::{MmapMut, MmapOptions};

use crate::error::{IoContext, Result};

pub(crate) struct SegmentMap {
    map: MmapMut,
}

impl SegmentMap {
    /// Map `file`, first growing it to at least `capacity` bytes.
    pub(crate) fn new(file: &File, path: &Path, capacity: u64) -> Result<SegmentMap> {
        let len = file.metadata().context(|| format!("reading {}", path.display()))?.len();
        if len < capacity {
            reserve(file, capacity).context(|| format!("reserving {capacity} bytes for {}", path.display()))?;
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

/// Make `file` `len` bytes long with real blocks behind them; on filesystems
/// without `fallocate`, fall back to a sparse extension.
fn reserve(file: &File, len: u64) -> std::io::Result<()> {
    match rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), 0, len) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::NOSYS) => file.set_len(len),
        Err(e) => Err(e.into()),
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
        let bytes = super::read_up_to(file, 0, len).context(|| format!("reading {}", path.display()))?;
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
