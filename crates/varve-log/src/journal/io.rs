//! The journal's writes to the file system, behind one small trait, so that
//! tests can make any of them fail at an exact call — a failed write or
//! fsync, a short write, a full disk — and check what the journal does next
//! (see `fault_tests.rs`). Reads need no such seam: a read that fails is
//! reported and changes nothing.
//!
//! Copies into the active segment's memory map are not calls here: they
//! cannot fail once the segment's blocks are reserved ([`SegmentIo::reserve`]).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Every write the journal makes to segment files and their directory.
pub(crate) trait SegmentIo: Send + Sync {
    /// Create a new segment file (never an existing one), open for reading and writing.
    fn create_new(&self, path: &Path) -> io::Result<File>;
    /// Make `file` at least `len` bytes long with real blocks behind them, so
    /// that a later copy into a memory map of it cannot hit a full disk.
    fn reserve(&self, file: &File, len: u64) -> io::Result<()>;
    /// Write all of `bytes` at `offset`.
    fn write_at(&self, file: &File, bytes: &[u8], offset: u64) -> io::Result<()>;
    /// fsync the file's data.
    fn sync_data(&self, file: &File) -> io::Result<()>;
    /// Cut (or extend with zeros) the file to `len` bytes.
    fn set_len(&self, file: &File, len: u64) -> io::Result<()>;
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// fsync a directory, so that files created or removed in it stay so.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
}

/// The real file system.
pub(crate) struct FileSystem;

impl SegmentIo for FileSystem {
    fn create_new(&self, path: &Path) -> io::Result<File> {
        OpenOptions::new().read(true).write(true).create_new(true).open(path)
    }

    fn reserve(&self, file: &File, len: u64) -> io::Result<()> {
        match rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), 0, len) {
            Ok(()) => Ok(()),
            // Filesystems without `fallocate`: a sparse extension is the best we can do.
            Err(rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::NOSYS) => file.set_len(len),
            Err(e) => Err(e.into()),
        }
    }

    fn write_at(&self, file: &File, bytes: &[u8], offset: u64) -> io::Result<()> {
        file.write_all_at(bytes, offset)
    }

    fn sync_data(&self, file: &File) -> io::Result<()> {
        file.sync_data()
    }

    fn set_len(&self, file: &File, len: u64) -> io::Result<()> {
        file.set_len(len)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
}

/// Is this error a full disk (or an exhausted quota)?
pub(crate) fn is_no_space(error: &io::Error) -> bool {
    matches!(error.kind(), io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded)
}

#[cfg(test)]
pub(crate) mod faults {
    //! A [`SegmentIo`] that injects faults into the real file system at chosen calls.

    use std::collections::{HashMap, HashSet};
    use std::sync::{Condvar, Mutex};

    use super::{FileSystem, SegmentIo};
    use std::fs::File;
    use std::io;
    use std::path::Path;

    /// The operations a fault can target.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub(crate) enum Op {
        CreateNew,
        Reserve,
        WriteAt,
        SyncData,
        SetLen,
        RemoveFile,
        SyncDir,
    }

    /// What the targeted call does instead of succeeding.
    #[derive(Clone, Copy, Debug)]
    pub(crate) enum Fault {
        /// Fail with this OS error, writing nothing.
        Error(i32),
        /// Write only this many bytes (a `write_at` only), then fail with EIO.
        ShortWrite(usize),
    }

    #[derive(Default)]
    struct Plan {
        /// Faults by operation: fail the call whose 1-based count is the key.
        faults: HashMap<(Op, u64), Fault>,
        /// Fail every call of an operation from this count on.
        from: HashMap<Op, (u64, Fault)>,
        counts: HashMap<Op, u64>,
        /// Operations whose calls wait until [`FaultyIo::release`].
        held: HashSet<Op>,
        /// Calls waiting now, by operation.
        waiting: HashMap<Op, u64>,
    }

    /// The real file system, except at the calls a test chose.
    #[derive(Default)]
    pub(crate) struct FaultyIo {
        plan: Mutex<Plan>,
        released: Condvar,
    }

    impl FaultyIo {
        /// Fail the `nth` call (1-based, counted from now) of `op`.
        pub(crate) fn fail_nth(&self, op: Op, nth: u64, fault: Fault) {
            let mut plan = self.plan.lock().expect("plan");
            let done = plan.counts.get(&op).copied().unwrap_or(0);
            plan.faults.insert((op, done + nth), fault);
        }

        /// Fail every call of `op` from the next one on, until [`FaultyIo::heal`].
        pub(crate) fn fail_from_now(&self, op: Op, fault: Fault) {
            let mut plan = self.plan.lock().expect("plan");
            let done = plan.counts.get(&op).copied().unwrap_or(0);
            plan.from.insert(op, (done + 1, fault));
        }

        /// Forget every planned fault.
        pub(crate) fn heal(&self) {
            let mut plan = self.plan.lock().expect("plan");
            plan.faults.clear();
            plan.from.clear();
        }

        /// Make every call of `op` from now on wait (on whatever thread
        /// makes it) until [`FaultyIo::release`].
        pub(crate) fn hold(&self, op: Op) {
            self.plan.lock().expect("plan").held.insert(op);
        }

        pub(crate) fn release(&self, op: Op) {
            self.plan.lock().expect("plan").held.remove(&op);
            self.released.notify_all();
        }

        /// How many calls of `op` wait now (see [`FaultyIo::hold`]).
        pub(crate) fn waiting(&self, op: Op) -> u64 {
            self.plan.lock().expect("plan").waiting.get(&op).copied().unwrap_or(0)
        }

        /// How many calls of `op` were made.
        pub(crate) fn calls(&self, op: Op) -> u64 {
            self.plan.lock().expect("plan").counts.get(&op).copied().unwrap_or(0)
        }

        fn fault(&self, op: Op) -> Option<Fault> {
            let mut plan = self.plan.lock().expect("plan");
            if plan.held.contains(&op) {
                *plan.waiting.entry(op).or_insert(0) += 1;
                while plan.held.contains(&op) {
                    plan = self.released.wait(plan).expect("plan");
                }
                *plan.waiting.entry(op).or_insert(1) -= 1;
            }
            let count = plan.counts.entry(op).or_insert(0);
            *count += 1;
            let count = *count;
            if let Some(fault) = plan.faults.remove(&(op, count)) {
                return Some(fault);
            }
            plan.from.get(&op).filter(|(from, _)| count >= *from).map(|(_, fault)| *fault)
        }
    }

    fn error(fault: Fault) -> io::Error {
        match fault {
            Fault::Error(errno) => io::Error::from_raw_os_error(errno),
            Fault::ShortWrite(_) => io::Error::from_raw_os_error(rustix::io::Errno::IO.raw_os_error()),
        }
    }

    impl SegmentIo for FaultyIo {
        fn create_new(&self, path: &Path) -> io::Result<File> {
            match self.fault(Op::CreateNew) {
                Some(fault) => Err(error(fault)),
                None => FileSystem.create_new(path),
            }
        }

        fn reserve(&self, file: &File, len: u64) -> io::Result<()> {
            match self.fault(Op::Reserve) {
                Some(fault) => Err(error(fault)),
                None => FileSystem.reserve(file, len),
            }
        }

        fn write_at(&self, file: &File, bytes: &[u8], offset: u64) -> io::Result<()> {
            match self.fault(Op::WriteAt) {
                Some(Fault::ShortWrite(n)) => {
                    FileSystem.write_at(file, &bytes[..n.min(bytes.len())], offset)?;
                    Err(error(Fault::ShortWrite(n)))
                }
                Some(fault) => Err(error(fault)),
                None => FileSystem.write_at(file, bytes, offset),
            }
        }

        fn sync_data(&self, file: &File) -> io::Result<()> {
            match self.fault(Op::SyncData) {
                Some(fault) => Err(error(fault)),
                None => FileSystem.sync_data(file),
            }
        }

        fn set_len(&self, file: &File, len: u64) -> io::Result<()> {
            match self.fault(Op::SetLen) {
                Some(fault) => Err(error(fault)),
                None => FileSystem.set_len(file, len),
            }
        }

        fn remove_file(&self, path: &Path) -> io::Result<()> {
            match self.fault(Op::RemoveFile) {
                Some(fault) => Err(error(fault)),
                None => FileSystem.remove_file(path),
            }
        }

        fn sync_dir(&self, dir: &Path) -> io::Result<()> {
            match self.fault(Op::SyncDir) {
                Some(fault) => Err(error(fault)),
                None => FileSystem.sync_dir(dir),
            }
        }
    }
}
