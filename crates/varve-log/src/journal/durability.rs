//! Durability of written bytes: which are fsynced, group commit among
//! concurrent appenders, the Group-commit flusher thread, and poisoning after
//! a failed fsync.

use std::fs::File;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::error::{LogError, Result};
use crate::journal::io::SegmentIo;

/// Tracks which written bytes are durable, and lets appenders share fsyncs.
///
/// Invariant: every byte written before `written` was counted is in `file`
/// or in an earlier segment that was fsynced when the writer rolled past it,
/// so one `sync_data` of the current `file` makes everything up to the
/// `written` read before it durable.
pub(super) struct Durability {
    io: Arc<dyn SegmentIo>,
    pub(super) state: Mutex<DurabilityState>,
    pub(super) synced_changed: Condvar,
    /// Wakes the Group-commit flusher early, to stop.
    pub(super) flusher_wake: Condvar,
}

pub(super) struct DurabilityState {
    pub(super) written: u64,
    pub(super) synced: u64,
    pub(super) syncing: bool,
    pub(super) file: Option<Arc<File>>,
    pub(super) failure: Option<String>,
    pub(super) stopping: bool,
}

impl Durability {
    pub(crate) fn new(file: Option<Arc<File>>, io: Arc<dyn SegmentIo>) -> Durability {
        let state = DurabilityState { written: 0, synced: 0, syncing: false, file, failure: None, stopping: false };
        Durability { io, state: Mutex::new(state), synced_changed: Condvar::new(), flusher_wake: Condvar::new() }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, DurabilityState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Block until bytes up to `target` are durable. The first waiter runs
    /// the fsync; those arriving meanwhile wait for the next one, which then
    /// covers all of them (group commit).
    pub(crate) fn wait_durable(&self, namespace: &str, target: u64) -> Result<()> {
        let mut state = self.lock();
        loop {
            if let Some(cause) = &state.failure {
                return Err(LogError::Poisoned { namespace: namespace.to_owned(), cause: cause.clone() });
            }
            if state.synced >= target {
                return Ok(());
            }
            if state.syncing {
                state = self.synced_changed.wait(state).unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            let Some(file) = state.file.clone() else { return Ok(()) };
            state.syncing = true;
            let upto = state.written;
            drop(state);
            let result = self.io.sync_data(&file);
            state = self.lock();
            state.syncing = false;
            match result {
                Ok(()) => state.synced = state.synced.max(upto),
                // Never retry a failed fsync: the kernel may have dropped the
                // dirty pages, so a later success would lie.
                Err(e) => state.failure = Some(format!("fsync failed: {e}")),
            }
            self.synced_changed.notify_all();
        }
    }

    pub(crate) fn poisoned(&self, namespace: &str) -> Result<()> {
        match &self.lock().failure {
            Some(cause) => Err(LogError::Poisoned { namespace: namespace.to_owned(), cause: cause.clone() }),
            None => Ok(()),
        }
    }

    pub(crate) fn poison(&self, cause: String) {
        self.lock().failure.get_or_insert(cause);
        self.synced_changed.notify_all();
    }
}

/// Sync every `delay` until the namespace is dropped. The thread holds only
/// the durability tracker, never the namespace, so dropping the namespace
/// (and releasing its lock) is never delayed by it.
pub(crate) fn start_flusher(
    durability: Arc<Durability>,
    namespace: String,
    delay: Duration,
) -> Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("varve-group-commit".into())
        .spawn(move || loop {
            let target = {
                let state = durability.lock();
                let (state, _) = durability
                    .flusher_wake
                    .wait_timeout_while(state, delay, |s| !s.stopping)
                    .unwrap_or_else(PoisonError::into_inner);
                if state.stopping {
                    return;
                }
                state.written
            };
            // A failure poisons the namespace; appenders and `sync` report it.
            let _ = durability.wait_durable(&namespace, target);
        })
        .map_err(|e| LogError::io("starting the group-commit thread", e))
}
