//! The writer's published end: how far the journal is completely written,
//! shared with readers in other processes through the `END` file.
//!
//! A frame is written (copied into the memory map, or `pwrite`) before the
//! writer publishes the new end, so a reader that reads only up to the
//! published end never sees a frame half written. Without it a reader cannot
//! tell a frame still being written — a `pwrite` of a large frame lands page
//! by page, and a reader's `pread` may see a later frame whole while an
//! earlier one is still partly zero — from damage.
//!
//! `END` is eight bytes: one `u64` holding `segment << 32 | offset`, stored
//! with release ordering through a shared memory map and loaded with acquire
//! ordering, so a reader that sees an end also sees every byte before it.
//! It is a memory cell shared by processes of one machine, never a stored
//! format: nothing reads it after a power cut (the writer's recovery ignores
//! it and publishes anew), and it is in the byte order of the machine.
//! 0 means "nothing published": a writer stores it while it recovers, and
//! readers then trust no unfinished-looking bytes of the newest segment.
//!
//! Invariant: every segment below the published segment is sealed, and the
//! published segment holds complete frames up to the published offset.

use std::fs::OpenOptions;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::{Mmap, MmapMut, MmapOptions};

use crate::error::{IoContext, Result};

pub(crate) const END_FILE: &str = "END";
const END_BYTES: usize = 8;

enum Map {
    Writer(MmapMut),
    Reader(Mmap),
}

/// The `END` cell of one namespace.
pub(crate) struct PublishedEnd {
    map: Map,
}

impl PublishedEnd {
    /// The writer's side: create `END` if needed, map it, and publish nothing
    /// yet (recovery may cut what an earlier writer published).
    pub(crate) fn for_writer(dir: &Path) -> Result<PublishedEnd> {
        let path = dir.join(END_FILE);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .context(|| format!("opening {}", path.display()))?;
        if file.metadata().context(|| format!("reading {}", path.display()))?.len() < END_BYTES as u64 {
            file.set_len(END_BYTES as u64).context(|| format!("sizing {}", path.display()))?;
        }
        #[expect(unsafe_code, reason = "a shared memory map is unsafe by nature; invariant below")]
        // SAFETY: `END` is only ever written through `cell()` (an atomic) and
        // never truncated below 8 bytes, by the one writer process that holds
        // the namespace's lock.
        let map = unsafe { MmapOptions::new().len(END_BYTES).map_mut(&file) }
            .context(|| format!("mapping {}", path.display()))?;
        let end = PublishedEnd { map: Map::Writer(map) };
        end.cell().store(0, Ordering::Release);
        Ok(end)
    }

    /// A reader's side: `None` when no writer of this version has run here.
    pub(crate) fn for_reader(dir: &Path) -> Result<Option<PublishedEnd>> {
        let path = dir.join(END_FILE);
        let file = match OpenOptions::new().read(true).open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(crate::error::LogError::io(format!("opening {}", path.display()), e)),
        };
        if file.metadata().context(|| format!("reading {}", path.display()))?.len() < END_BYTES as u64 {
            return Ok(None);
        }
        #[expect(unsafe_code, reason = "a shared memory map is unsafe by nature; invariant below")]
        // SAFETY: the file is at least 8 bytes and is never truncated (see
        // `for_writer`); the writer changes it only by atomic stores.
        let map = unsafe { MmapOptions::new().len(END_BYTES).map(&file) }
            .context(|| format!("mapping {}", path.display()))?;
        Ok(Some(PublishedEnd { map: Map::Reader(map) }))
    }

    fn cell(&self) -> &AtomicU64 {
        let ptr = match &self.map {
            Map::Writer(map) => map.as_ptr(),
            Map::Reader(map) => map.as_ptr(),
        };
        debug_assert_eq!(ptr.align_offset(std::mem::align_of::<AtomicU64>()), 0);
        #[expect(unsafe_code, reason = "the atomic lives in shared memory")]
        #[expect(clippy::cast_ptr_alignment, reason = "a map is page aligned (checked above)")]
        // SAFETY: the map is 8 bytes long and page aligned (so aligned for
        // `AtomicU64`), lives as long as `self`, and is only accessed
        // atomically, by this and other processes.
        unsafe {
            &*ptr.cast::<AtomicU64>()
        }
    }

    /// Publish that `segment` holds complete frames up to `offset`.
    pub(crate) fn publish(&self, segment: u32, offset: u64) {
        debug_assert!(matches!(self.map, Map::Writer(_)));
        debug_assert!(u32::try_from(offset).is_ok());
        self.cell().store((u64::from(segment) << 32) | offset, Ordering::Release);
    }

    /// The published `(segment, offset)`, or `None` while nothing is published.
    pub(crate) fn load(&self) -> Option<(u32, u64)> {
        let value = self.cell().load(Ordering::Acquire);
        let segment = u32::try_from(value >> 32).expect("the high half of a u64");
        (segment != 0).then_some((segment, value & u64::from(u32::MAX)))
    }
}
