//! Event retention: the runtime trims its own `_events` so that a
//! long-running application's event log does not grow for ever.
//!
//! **The rules.** Two, each optional: `events_keep = K` keeps at least the
//! last K events; `events_keep_for = D` keeps at least the events of the
//! last D (by their timestamps). An event is trimmed only when every rule
//! set lets it go, and never while the runtime's recovery still needs it:
//! the trim point is the lowest of `latest + 1 - K`, the first event newer
//! than `now - D`, and the progress mark on disk (the lowest trigger not
//! yet finished — recovery folds `_events` from there after a crash). So
//! an unfinished trigger's events stay, however long a handler runs.
//!
//! **Finding `now - D`.** Binary search on the events' timestamps between
//! the earliest and the latest event: O(log n) reads. Timestamps are taken
//! when an event is built, just before its batch is appended, so they
//! follow append order only to within that gap; the search looks for
//! `now - D -` [`AGE_MARGIN`], which covers it.
//!
//! **When.** After an outside append and after runs finish, once every
//! rule set is an eighth past its bound (`K + K/8` events held; the
//! earliest event older than `D + D/8`): the runtime writes the progress
//! mark if it moved, then trims (`Namespace::trim`, one frame on the
//! journal, which reclaims the segments of the trimmed events). The age of
//! the earliest event is looked at most every [`AGE_CHECK_EVERY`]. A trim
//! that fails does not fail the append that led to it (that append is
//! written); the error is kept for [`crate::Runtime::event_retention`] and
//! the next check tries again. An idle runtime trims nothing until its next
//! append.
//!
//! **What it costs repairs and traces.** They see the events kept: a
//! record whose APPEND event was trimmed has no recorded cause any more,
//! and a repair refuses to correct it (`varve_repair` says so, naming the
//! earliest event kept) — docs/runtime.md, "Event retention".

use std::sync::atomic::Ordering;
use std::sync::{MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use varve_log::{LogError, Namespace, Seq};

use crate::builder::RuntimeOptions;
use crate::error::{Result, RuntimeError};
use crate::event::{now_ns, Event};
use crate::inner::Inner;
use crate::system_logs::EVENTS_LOG;

/// How much older than `events_keep_for` an event must be before the age
/// rule lets it go: covers events appended in another order than their
/// timestamps were taken (see the module docs).
pub const AGE_MARGIN: Duration = Duration::from_secs(1);

/// Most often the age rule reads the earliest event's timestamp (a read and
/// a decode: not on every append).
pub const AGE_CHECK_EVERY: Duration = Duration::from_millis(50);

/// What the runtime's event retention has done (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EventRetention {
    /// `events_keep`: the events kept at least; `None`: no count rule.
    pub keep: Option<u64>,
    /// `events_keep_for`: the age of the events kept at least; `None`: no age rule.
    pub keep_for: Option<Duration>,
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
    /// When the age rule may next read the earliest event's timestamp.
    next_age_check: Option<Instant>,
}

/// Events past `keep` before a trim: an eighth of it, at least one.
fn slack(keep: u64) -> u64 {
    (keep / 8).max(1)
}

/// Check the retention options at start: each rule is positive, the
/// runtime is not shared, and the namespace's backend trims (a trim to seq
/// 0 changes nothing anywhere, and is refused with `Unsupported` where
/// trims are not built: NATS).
pub(crate) fn check_options(ns: &dyn Namespace, options: &RuntimeOptions) -> Result<()> {
    if options.events_keep.is_none() && options.events_keep_for.is_none() {
        return Ok(());
    }
    let invalid = |reason: &str| Err(RuntimeError::InvalidArgument { reason: reason.to_owned() });
    if options.events_keep == Some(0) {
        return invalid("events_keep must be at least 1 (leave it unset to keep every event)");
    }
    if options.events_keep_for == Some(Duration::ZERO) {
        return invalid("events_keep_for must be longer than 0 (leave it unset to keep events of any age)");
    }
    if options.shared.is_some() {
        return invalid(
            "event retention (events_keep, events_keep_for) is not for shared runtimes (several runtimes fold one \
             event log; none may trim it alone): leave it unset",
        );
    }
    match ns.trim(EVENTS_LOG, 0) {
        Ok(_) => Ok(()),
        Err(e @ LogError::Unsupported { .. }) => Err(RuntimeError::InvalidArgument {
            reason: format!("event retention (events_keep, events_keep_for) needs a store that trims logs: {e}"),
        }),
        Err(e) => Err(e.into()),
    }
}

/// The timestamp of event `seq`.
fn timestamp_of(ns: &dyn Namespace, seq: Seq) -> Result<u64> {
    Ok(Event::decode(&ns.get(EVENTS_LOG, seq)?, seq)?.timestamp_ns)
}

/// The first event in `earliest..=latest` whose timestamp is at or after
/// `cutoff_ns` (`latest + 1` if none is), by binary search: O(log n) reads.
fn first_at_or_after(ns: &dyn Namespace, earliest: Seq, latest: Seq, cutoff_ns: u64) -> Result<Seq> {
    let (mut low, mut high) = (earliest, latest + 1);
    while low < high {
        let mid = low + (high - low) / 2;
        if timestamp_of(ns, mid)? < cutoff_ns {
            low = mid + 1;
        } else {
            high = mid;
        }
    }
    Ok(low)
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Inner {
    fn lock_retention(&self) -> MutexGuard<'_, RetentionState> {
        self.retention.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Trim `_events` if it holds more than its retention allows (see the
    /// module docs). Cheap when there is nothing to do: two reads of the
    /// event log's bounds (and, at most every [`AGE_CHECK_EVERY`], one
    /// event's timestamp). Errors are kept, not returned.
    pub(crate) fn retain_events(&self) {
        let (keep, keep_for) = (self.options.events_keep, self.options.events_keep_for);
        if keep.is_none() && keep_for.is_none() || self.stopped.load(Ordering::SeqCst) {
            return;
        }
        let bounds = self.ns.earliest(EVENTS_LOG).and_then(|e| Ok((e, self.ns.latest(EVENTS_LOG)?)));
        let Ok((earliest, latest)) = bounds else { return };
        if keep.is_some_and(|k| latest.saturating_sub(earliest) < k + slack(k)) {
            return;
        }
        if keep_for.is_some_and(|age| !self.age_rule_due(age, earliest)) {
            return;
        }
        // One trim at a time; a thread that finds one under way leaves it.
        let Ok(_trimming) = self.trimming.try_lock() else { return };
        let result = self.trim_events(earliest, latest);
        let mut state = self.lock_retention();
        match result {
            Ok(trimmed) => {
                state.trims += u64::from(trimmed);
                state.last_error = None;
            }
            Err(e) => state.last_error = Some(e.to_string()),
        }
    }

    /// Whether the earliest event is older than `age + age/8` (looked at
    /// most every [`AGE_CHECK_EVERY`]; `false` in between).
    fn age_rule_due(&self, age: Duration, earliest: Seq) -> bool {
        let now = Instant::now();
        {
            let mut state = self.lock_retention();
            if state.next_age_check.is_some_and(|next| now < next) {
                return false;
            }
            state.next_age_check = Some(now + AGE_CHECK_EVERY);
        }
        let Ok(oldest) = timestamp_of(self.ns.as_ref(), earliest) else { return false };
        now_ns().saturating_sub(oldest) > duration_ns(age.saturating_add(age / 8).saturating_add(AGE_MARGIN))
    }

    /// Write the progress mark if it moved, then trim `_events` below the
    /// lowest of the points the rules and the mark allow. `true` if it trimmed.
    fn trim_events(&self, earliest: Seq, latest: Seq) -> Result<bool> {
        self.write_progress(false)?;
        let mut before = self.lock_work().last_progress;
        if let Some(keep) = self.options.events_keep {
            before = before.min((latest + 1).saturating_sub(keep));
        }
        if let Some(age) = self.options.events_keep_for {
            let cutoff = now_ns().saturating_sub(duration_ns(age.saturating_add(AGE_MARGIN)));
            let young = first_at_or_after(self.ns.as_ref(), earliest, latest.min(before), cutoff)?;
            before = before.min(young);
        }
        // The newest event always stays (the Log's trim keeps it anyway).
        before = before.min(latest);
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
            keep_for: self.options.events_keep_for,
            earliest: self.ns.earliest(EVENTS_LOG)?,
            latest: self.ns.latest(EVENTS_LOG)?,
            trims: state.trims,
            last_error: state.last_error.clone(),
        })
    }
}
