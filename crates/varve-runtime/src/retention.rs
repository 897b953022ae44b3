//! Event retention: the runtime trims its own `_events` so that a
//! long-running application's event log does not grow for ever.
//!
//! **The rule.** With `events_keep = K`, the runtime keeps at least the
//! last K events, and never trims an event its recovery still needs: the
//! trim point is the lower of `latest + 1 - K` and the progress mark on
//! disk (the lowest trigger not yet finished — recovery folds `_events`
//! from there after a crash). So an unfinished trigger's events stay, and
//! nothing a restart needs is lost, however long a handler runs.
//!
//! **When.** After an outside append and after runs finish, once
//! `_events` holds K + K/8 events (at least one more): the runtime writes
//! the progress mark if it moved, then trims (`Namespace::trim`, one frame
//! on the journal, which reclaims the segments of the trimmed events). A
//! trim that fails does not fail the append that led to it (that append is
//! written); the error is kept for [`crate::Runtime::event_retention`] and
//! the next check tries again.
//!
//! **What it costs repairs and traces.** They see the events kept: a
//! record whose APPEND event was trimmed has no recorded cause any more,
//! and a repair refuses to correct it (`varve_repair` says so, naming the
//! earliest event kept) — docs/runtime.md, "Event retention".

use std::sync::atomic::Ordering;
use std::sync::{MutexGuard, PoisonError};

use varve_log::{LogError, Seq};

use crate::error::{Result, RuntimeError};
use crate::inner::Inner;
use crate::system_logs::EVENTS_LOG;

/// What the runtime's event retention has done (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EventRetention {
    /// `events_keep`: the events kept at least; `None`: every event is kept.
    pub keep: Option<u64>,
    /// The earliest event kept.
    pub earliest: Seq,
    /// The latest event.
    pub latest: Seq,
    /// Trims made since the runtime started.
    pub trims: u64,
    /// The last trim's failure, if the last attempt failed.
    pub last_error: Option<String>,
}

/// The retention's state in the runtime.
#[derive(Debug, Default)]
pub(crate) struct RetentionState {
    pub(crate) trims: u64,
    pub(crate) last_error: Option<String>,
}

/// Events past `keep` before a trim: an eighth of it, at least one.
fn slack(keep: u64) -> u64 {
    (keep / 8).max(1)
}

/// Check at start that the namespace's backend trims (a trim to seq 0
/// changes nothing anywhere, and is refused with `Unsupported` where trims
/// are not built: NATS).
pub(crate) fn check_trims(inner_ns: &dyn varve_log::Namespace, keep: u64, shared: bool) -> Result<()> {
    if keep == 0 {
        return Err(RuntimeError::InvalidArgument {
            reason: "events_keep must be at least 1 (leave it unset to keep every event)".to_owned(),
        });
    }
    if shared {
        return Err(RuntimeError::InvalidArgument {
            reason: "events_keep is not for shared runtimes (several runtimes fold one event log; none may trim \
                     it alone): leave it unset"
                .to_owned(),
        });
    }
    match inner_ns.trim(EVENTS_LOG, 0) {
        Ok(_) => Ok(()),
        Err(e @ LogError::Unsupported { .. }) => {
            Err(RuntimeError::InvalidArgument { reason: format!("events_keep needs a store that trims logs: {e}") })
        }
        Err(e) => Err(e.into()),
    }
}

impl Inner {
    fn lock_retention(&self) -> MutexGuard<'_, RetentionState> {
        self.retention.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Trim `_events` if it holds more than its retention allows (see the
    /// module docs). Cheap when there is nothing to do: two reads of the
    /// event log's bounds. Errors are kept, not returned.
    pub(crate) fn retain_events(&self) {
        let Some(keep) = self.options.events_keep else { return };
        if self.stopped.load(Ordering::SeqCst) {
            return;
        }
        let bounds = self.ns.earliest(EVENTS_LOG).and_then(|e| Ok((e, self.ns.latest(EVENTS_LOG)?)));
        let Ok((earliest, latest)) = bounds else { return };
        if latest.saturating_sub(earliest) < keep + slack(keep) {
            return;
        }
        // One trim at a time; a thread that finds one under way leaves it.
        let Ok(_trimming) = self.trimming.try_lock() else { return };
        let result = self.trim_events(keep, earliest, latest);
        let mut state = self.lock_retention();
        match result {
            Ok(trimmed) => {
                state.trims += u64::from(trimmed);
                state.last_error = None;
            }
            Err(e) => state.last_error = Some(e.to_string()),
        }
    }

    /// Write the progress mark if it moved, then trim `_events` below the
    /// lower of it and `latest + 1 - keep`. `true` if it trimmed.
    fn trim_events(&self, keep: u64, earliest: Seq, latest: Seq) -> Result<bool> {
        self.write_progress(false)?;
        let mark = self.lock_work().last_progress;
        let before = (latest + 1 - keep).min(mark);
        if before <= earliest {
            return Ok(false);
        }
        self.ns.trim(EVENTS_LOG, before)?;
        Ok(true)
    }

    /// The retention's state now ([`crate::Runtime::event_retention`]).
    pub(crate) fn event_retention(&self) -> Result<EventRetention> {
        let state = self.lock_retention();
        Ok(EventRetention {
            keep: self.options.events_keep,
            earliest: self.ns.earliest(EVENTS_LOG)?,
            latest: self.ns.latest(EVENTS_LOG)?,
            trims: state.trims,
            last_error: state.last_error.clone(),
        })
    }
}
