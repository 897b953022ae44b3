//! Pausing a running runtime, for work that must see the namespace at
//! rest while the application stays up — the swap of an online repair
//! (`varve-repair`).
//!
//! [`Runtime::pause_runs`] stops claiming runs (queued triggers stay
//! queued) and waits for the runs already claimed to finish (their
//! DONE/FAILED on disk); appends go on. [`Paused::hold_appends`] then
//! takes the writer lock: every append made through the runtime —
//! [`Runtime::append`], a [`crate::RuntimeHandle`], the socket — waits
//! until the [`Paused`] guard drops. Nothing is refused and nothing is
//! lost: a waiting append lands when the pause ends. [`Runtime::pause`]
//! does both at once. Two steps let a caller do the slow part of its work
//! (an online repair replays the runs that finished last) with only the
//! runs stopped, and hold appends for the short rest.
//!
//! **Invariant:** while a [`Paused`] exists no handler runs; once it holds
//! appends the runtime writes nothing — `_events` and every data log end
//! where they ended, except for what the holder writes (it is then the
//! namespace's only writer, [`Paused::namespace`]).

use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

use varve_log::Namespace;

use crate::error::{Result, RuntimeError};
use crate::inner::{Inner, WriterState};
use crate::runtime::{Runtime, RuntimeHandle};

/// A paused runtime (see the module docs); dropping it resumes.
pub struct Paused<'a> {
    inner: &'a Inner,
    /// Once appends are held: appends through the runtime wait on it.
    writer: Option<MutexGuard<'a, WriterState>>,
    since: Instant,
}

impl Runtime {
    /// Pause: no new runs, runs in flight finished, appends held until the
    /// guard drops. Waits at most `timeout` for the runs in flight, then
    /// resumes and returns [`RuntimeError::PauseTimedOut`]. Refused on a
    /// shared runtime (others write the namespace; pausing this one would
    /// not bring it to rest).
    pub fn pause(&self, timeout: Duration) -> Result<Paused<'_>> {
        let mut paused = pause_runs(&self.inner, timeout)?;
        paused.hold_appends();
        Ok(paused)
    }

    /// The first step of [`Runtime::pause`]: no new runs, runs in flight
    /// finished; appends go on until [`Paused::hold_appends`].
    pub fn pause_runs(&self, timeout: Duration) -> Result<Paused<'_>> {
        pause_runs(&self.inner, timeout)
    }
}

impl RuntimeHandle {
    /// See [`Runtime::pause`].
    pub fn pause(&self, timeout: Duration) -> Result<Paused<'_>> {
        let mut paused = pause_runs(self.inner(), timeout)?;
        paused.hold_appends();
        Ok(paused)
    }

    /// See [`Runtime::pause_runs`].
    pub fn pause_runs(&self, timeout: Duration) -> Result<Paused<'_>> {
        pause_runs(self.inner(), timeout)
    }
}

fn pause_runs(inner: &Inner, timeout: Duration) -> Result<Paused<'_>> {
    if inner.is_shared() {
        return Err(RuntimeError::InvalidArgument {
            reason: "a shared runtime cannot be paused: other runtimes write the namespace too".to_owned(),
        });
    }
    inner.check_running()?;
    let since = Instant::now();
    if inner.paused.swap(true, Ordering::SeqCst) {
        return Err(RuntimeError::InvalidArgument { reason: "the runtime is already paused".to_owned() });
    }
    if !inner.wait_running(since + timeout, false) {
        resume(inner);
        return Err(RuntimeError::PauseTimedOut {
            namespace: inner.namespace.clone(),
            reason: format!(
                "handlers were still running {:.1} s after the pause began, so it was called off (the runtime runs \
                 on); try again, or allow longer",
                timeout.as_secs_f64()
            ),
        });
    }
    Ok(Paused { inner, writer: None, since })
}

impl Paused<'_> {
    /// Hold every append made through the runtime until the guard drops
    /// (a no-op if held already). Waits for an append being written.
    pub fn hold_appends(&mut self) {
        if self.writer.is_none() {
            self.writer = Some(self.inner.lock_writer());
        }
    }

    /// The namespace, to be written by the guard's holder alone once it
    /// holds appends (the runtime predicts seqs from what it finds there
    /// when it resumes).
    #[must_use]
    pub fn namespace(&self) -> &Arc<dyn Namespace> {
        &self.inner.ns
    }

    /// How long since [`Runtime::pause`] was called (it stopped claiming runs then).
    #[must_use]
    pub fn elapsed(&self) -> Duration {
        self.since.elapsed()
    }
}

impl Drop for Paused<'_> {
    fn drop(&mut self) {
        resume(self.inner);
    }
}

fn resume(inner: &Inner) {
    // Under the work lock, so a worker between its check and its wait cannot miss the wake-up.
    let work = inner.lock_work();
    inner.paused.store(false, Ordering::SeqCst);
    drop(work);
    inner.work_cv.notify_all();
}
