//! Wake-ups for watchers: a generation counter that appenders bump and
//! watchers wait on, and the generic [`WatchSource`] built on it.

use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::contract::{Record, Seq, WatchSource};
use crate::error::Result;

/// Counts changes to a namespace so that waiters sleep until one happens.
///
/// Invariant: `waiters` and `generation` change only under the mutex, so a
/// waiter that saw generation `g` and went to sleep is always woken by the
/// bump to `g + 1` (no lost wake-up), and appenders skip the wake-up syscall
/// when nobody waits.
#[derive(Debug, Default)]
pub(crate) struct Notifier {
    state: Mutex<NotifierState>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct NotifierState {
    generation: u64,
    waiters: usize,
}

impl Notifier {
    pub(crate) fn generation(&self) -> u64 {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).generation
    }

    /// Record a change and wake every waiter.
    pub(crate) fn notify(&self) {
        let waiters = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.generation += 1;
            state.waiters
        };
        if waiters > 0 {
            self.changed.notify_all();
        }
    }

    /// Sleep until the generation differs from `seen` or `timeout` passes.
    pub(crate) fn wait_changed(&self, seen: u64, timeout: Option<Duration>) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.generation != seen {
            return;
        }
        state.waiters += 1;
        let deadline = timeout.map(|t| Instant::now() + t);
        while state.generation == seen {
            match deadline {
                None => state = self.changed.wait(state).unwrap_or_else(PoisonError::into_inner),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        break;
                    }
                    state = self.changed.wait_timeout(state, deadline - now).unwrap_or_else(PoisonError::into_inner).0;
                }
            }
        }
        state.waiters -= 1;
    }
}

/// Looks up one record: `Ok(None)` when it has not been appended yet.
pub(crate) type Fetch = Box<dyn FnMut(Seq) -> Result<Option<Record>> + Send>;

/// A watch source for any backend that can fetch by seq and bump a [`Notifier`].
///
/// `poll` bounds each sleep, for sources whose appends come from another
/// process and so never bump this notifier (a read-only journal): the fetch
/// then refreshes from disk at that interval. In-process sources pass `None`
/// and sleep until woken.
pub(crate) struct NotifiedWatch {
    pub(crate) fetch: Fetch,
    pub(crate) notifier: std::sync::Arc<Notifier>,
    pub(crate) poll: Option<Duration>,
}

impl WatchSource for NotifiedWatch {
    fn wait_for(&mut self, seq: Seq, timeout: Option<Duration>) -> Result<Option<Record>> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            // Read the generation before fetching: an append that lands after
            // the fetch bumps it, so the wait below returns at once.
            let seen = self.notifier.generation();
            if let Some(record) = (self.fetch)(seq)? {
                return Ok(Some(record));
            }
            let remaining = match deadline {
                None => None,
                Some(deadline) => match deadline.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return Ok(None),
                },
            };
            let sleep = match (remaining, self.poll) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            self.notifier.wait_changed(seen, sleep);
        }
    }
}
