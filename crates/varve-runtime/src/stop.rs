//! Stopping a runtime. In order: no new claims; a grace period in which
//! running handlers may finish and still write (their appends, DONE or
//! FAILED); then every write is refused and external commands still running
//! are killed with their process groups; the socket is removed and the
//! progress mark written. What was cut short keeps its FIRING without an
//! outcome, so the next start runs it again as attempt + 1 (`recovery.rs`);
//! [`StopReport`] says what that is.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use varve_log::Seq;

use crate::runtime::Runtime;

/// After the grace, how long a stop waits for the workers of killed
/// commands to return (they see the kill within a few milliseconds; a Rust
/// handler that does not return is abandoned after this).
pub const KILLED_WAIT_MAX: Duration = Duration::from_secs(5);

/// How a run was cut short.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interruption {
    /// An external command still running after the grace: killed, with its process group.
    Killed,
    /// A Rust handler still running after the grace: it cannot be
    /// interrupted, so it is abandoned; whatever it writes is refused.
    Abandoned,
    /// Claimed (its FIRING written) in a batch with a run that was cut
    /// short, and not started.
    NotStarted,
}

/// One handler run a stop cut short. It runs again at the next start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterruptedRun {
    /// The handler that was running.
    pub handler: String,
    /// The log of the record that triggered the run.
    pub log: String,
    /// The seq of that record in `log`.
    pub seq: Seq,
    /// The TRIGGER's seq in `_events`.
    pub trigger: Seq,
    /// The attempt cut short; the next start's FIRING is attempt + 1.
    pub attempt: u32,
    /// How it was cut short: killed, abandoned, or claimed but not started.
    pub how: Interruption,
}

/// What a stop did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StopReport {
    /// The grace the running handlers were given.
    pub grace: Duration,
    /// Runs cut short, in trigger order.
    pub interrupted: Vec<InterruptedRun>,
    /// Unfinished triggers left for the next start (the interrupted ones included).
    pub pending: usize,
}

impl Runtime {
    /// Stop: no new claims; wait up to `grace` for running handlers, whose
    /// writes are still accepted meanwhile; then refuse every write, kill
    /// the external commands still running (process groups) and abandon
    /// Rust handlers still running; remove the socket; write the progress
    /// mark. Returns what was cut short: those triggers stay unfinished on
    /// disk and the next start re-runs them (attempt + 1), like after a crash.
    #[must_use = "the report says what was cut short; `stop` discards it"]
    pub fn stop_report(mut self, grace: Duration) -> StopReport {
        self.stop_mut(grace)
    }

    pub(crate) fn stop_mut(&mut self, grace: Duration) -> StopReport {
        if self.stop_done {
            return StopReport::default();
        }
        self.stop_done = true;
        let inner = &self.inner;
        {
            let _work = inner.lock_work();
            inner.stopping.store(true, Ordering::SeqCst);
        }
        inner.work_cv.notify_all();
        inner.room_cv.notify_all();
        inner.wait_running(Instant::now() + grace, false);
        {
            // Under the writer lock: a write that passed its check is whole.
            let _writer = inner.lock_writer();
            inner.stopped.store(true, Ordering::SeqCst);
        }
        inner.kill_commands.store(true, Ordering::SeqCst);
        inner.wait_running(Instant::now() + KILLED_WAIT_MAX, true);
        let all_returned = inner.lock_work().running == 0;
        // Claimed runs whose DONE or FAILED is not on disk: cut short.
        let interrupted: Vec<InterruptedRun> = inner
            .lock_work()
            .claimed
            .iter()
            .map(|(&trigger, run)| InterruptedRun {
                handler: run.handler.clone(),
                log: run.log.clone(),
                seq: run.seq,
                trigger,
                attempt: run.attempt,
                how: match (run.started, run.command) {
                    (false, _) => Interruption::NotStarted,
                    (true, true) => Interruption::Killed,
                    (true, false) => Interruption::Abandoned,
                },
            })
            .collect();
        for thread in self.threads.drain(..) {
            if all_returned || thread.is_finished() {
                let _ = thread.join();
            }
        }
        if let Some(socket) = self.socket.take() {
            socket.stop();
        }
        // The mark is written under the writer lock, which stopped appends also take.
        let _ = inner.write_progress(true);
        let pending = inner.lock_work().outstanding.len();
        StopReport { grace, interrupted, pending }
    }
}
