//! The writer lock: one process writes a namespace, holding an exclusive OS
//! lock on `LOCK`, which the kernel releases when the process dies (so it is
//! never stale).

use std::fs::{File, OpenOptions};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::{IoContext, LogError, Result};

pub(crate) fn acquire_lock(dir: &Path) -> Result<File> {
    let path = dir.join("LOCK");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .context(|| format!("opening {}", path.display()))?;
    // A lock that is released is not always free at once: a child that a
    // multi-threaded process forked holds a copy of the locked descriptor
    // until it calls exec, and a writer process that just exited may still be
    // tearing down. So a busy lock is retried for a moment before the second
    // writer is told; a live writer holds it far longer than this.
    let deadline = Instant::now() + LOCK_WAIT_MAX;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(LOCK_RETRY_INTERVAL);
            }
            Err(std::fs::TryLockError::WouldBlock) => return Err(LogError::Locked { path: dir.to_owned() }),
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(LogError::io(format!("locking {}", path.display()), e));
            }
        }
    }
}

/// How long opening a writer waits for a busy lock before `Locked`.
const LOCK_WAIT_MAX: Duration = Duration::from_millis(200);
const LOCK_RETRY_INTERVAL: Duration = Duration::from_millis(5);
