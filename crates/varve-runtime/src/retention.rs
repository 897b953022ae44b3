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
//! **Finding `now - D`.** Binary search between the earliest and the
//! latest event: O(log n) probes. A probe at seq `i` takes the timestamp of
//! the first APPEND or TRIGGER event at or after `i`: those are built under
//! the writer lock in the batch that appends them, so their timestamps are
//! their append times, while a DONE or FAILED is built when its run ends
//! and may be appended much later (a worker writes a claim's outcomes
//! together). Event `i` was appended no later than that APPEND, so when the
//! APPEND is older than `now - D -` [`AGE_MARGIN`] (the margin covers the
//! time between building a batch and its append, an fsync included),
//! everything up to `i` is too, whatever order other timestamps are in.
//! The search only trims below a probe it found old that way.
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
use crate::event::{now_ns, Event, EventKind};
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
/// 0 changes nothing anywhere, and is refused with `Unsupported` by a
/// backend that does not trim).
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

/// Events a probe looks through for an APPEND or TRIGGER before it counts
/// as young (bounds a probe's reads where runs write no records).
const PROBE_EVENTS_MAX: u64 = 4096;

/// When the events up to `seq` were appended at the latest: the timestamp
/// of the first APPEND or TRIGGER event in `seq..=last` (see the module
/// docs), `None` if there is none within [`PROBE_EVENTS_MAX`] events.
fn appended_by(ns: &dyn Namespace, seq: Seq, last: Seq) -> Result<Option<u64>> {
    let last = last.min(seq.saturating_add(PROBE_EVENTS_MAX - 1));
    for s in seq..=last {
        let event = Event::decode(&ns.get(EVENTS_LOG, s)?, s)?;
        if matches!(event.kind, EventKind::Append | EventKind::Trigger) {
            return Ok(Some(event.timestamp_ns));
        }
    }
    Ok(None)
}

/// The seq below which every event in `earliest..=latest` was appended
/// before `cutoff_ns` (`earliest` when none is known to be): a binary
/// search that only moves past a probe [`appended_by`] found old.
fn appended_before(ns: &dyn Namespace, earliest: Seq, latest: Seq, cutoff_ns: u64) -> Result<Seq> {
    let (mut low, mut high) = (earliest, latest.saturating_add(1));
    while low < high {
        let mid = low + (high - low) / 2;
        if appended_by(ns, mid, latest)?.is_some_and(|t| t < cutoff_ns) {
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
    /// event log's bounds (and, at most every [`AGE_CHECK_EVERY`], the
    /// events from the earliest to the first APPEND or TRIGGER, usually one
    /// or a few, for its timestamp). A trim also trims the index entries of
    /// the events it trimmed (`append_index.rs`). Errors are kept, not returned.
    pub(crate) fn retain_events(&self) {
        let (keep, keep_for) = (self.options.events_keep, self.options.events_keep_for);
        if keep.is_none() && keep_for.is_none() || self.stopped.load(Ordering::SeqCst) {
            return;
        }
        let bounds = self.ns.earliest(EVENTS_LOG).and_then(|e| Ok((e, self.ns.latest(EVENTS_LOG)?)));
        let Ok((earliest, latest)) = bounds else { return };
        if keep.is_some_and(|k| latest.saturating_sub(earliest) < k.saturating_add(slack(k))) {
            return;
        }
        if keep_for.is_some_and(|age| !self.age_rule_due(age, earliest)) {
            return;
        }
        // One trim at a time; a thread that finds one under way leaves it.
        let Ok(_trimming) = self.trimming.try_lock() else { return };
        let result = self.trim_events(latest);
        let mut state = self.lock_retention();
        match result {
            Ok(trimmed) => {
                state.trims += u64::from(trimmed);
                state.last_error = None;
            }
            Err(e) => state.last_error = Some(e.to_string()),
        }
    }

    /// Whether the earliest event was appended more than `age + age/8`
    /// (and the margin) ago. Looked at most every [`AGE_CHECK_EVERY`]
    /// (`false` in between); a failed read is kept as the last error.
    fn age_rule_due(&self, age: Duration, earliest: Seq) -> bool {
        let now = Instant::now();
        {
            let mut state = self.lock_retention();
            if state.next_age_check.is_some_and(|next| now < next) {
                return false;
            }
            state.next_age_check = Some(now + AGE_CHECK_EVERY);
        }
        let latest = match self.ns.latest(EVENTS_LOG) {
            Ok(latest) => latest,
            Err(e) => return self.keep_error(&e.into()),
        };
        match appended_by(self.ns.as_ref(), earliest, latest) {
            Ok(Some(appended)) => {
                now_ns().saturating_sub(appended) > duration_ns(age.saturating_add(age / 8).saturating_add(AGE_MARGIN))
            }
            // No APPEND to judge by yet; or trimmed meanwhile by another
            // thread: the next check looks again.
            Ok(None) | Err(RuntimeError::Log(LogError::Trimmed { .. })) => false,
            Err(e) => self.keep_error(&e),
        }
    }

    /// Keep `e` as the retention's last error; `false` (no trim now).
    fn keep_error(&self, e: &RuntimeError) -> bool {
        self.lock_retention().last_error = Some(e.to_string());
        false
    }

    /// Write the progress mark if it moved, then trim `_events` below the
    /// lowest of the points the rules and the mark allow. `true` if it
    /// trimmed. Called under the `trimming` lock: nothing else trims
    /// meanwhile, so the earliest event read here stays readable.
    fn trim_events(&self, latest: Seq) -> Result<bool> {
        self.write_progress(false)?;
        let earliest = self.ns.earliest(EVENTS_LOG)?;
        let mut before = self.lock_work().last_progress;
        if let Some(keep) = self.options.events_keep {
            before = before.min((latest + 1).saturating_sub(keep));
        }
        if let Some(age) = self.options.events_keep_for {
            let cutoff = now_ns().saturating_sub(duration_ns(age.saturating_add(AGE_MARGIN)));
            // Only events below `before` can go: search no further.
            let last = latest.min(before.saturating_sub(1));
            before = before.min(appended_before(self.ns.as_ref(), earliest, last, cutoff)?);
        }
        // The newest event always stays (the Log's trim keeps it anyway).
        before = before.min(latest);
        if before <= earliest {
            return Ok(false);
        }
        self.ns.trim(EVENTS_LOG, before)?;
        crate::append_index::trim_indexes(self.ns.as_ref(), before)?;
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

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use varve_log::{LogConfig, MemoryStore, Store};

    use super::*;

    /// `_events` of a memory namespace holding events of these kinds and timestamps.
    fn events(kinds_and_times: &[(EventKind, u64)]) -> std::sync::Arc<dyn Namespace> {
        let ns = MemoryStore::new().namespace("t").expect("namespace");
        ns.create_log(EVENTS_LOG, LogConfig::unbounded().system()).expect("create");
        for &(kind, timestamp_ns) in kinds_and_times {
            let mut event = Event::new(kind, 1, None);
            event.timestamp_ns = timestamp_ns;
            ns.append(EVENTS_LOG, &event.encode()).expect("append");
        }
        ns
    }

    /// A DONE built long before it was appended (a worker writes a claim's
    /// outcomes together) does not make younger events look old: the search
    /// goes by the APPENDs and TRIGGERs after a probe. By the DONEs' own
    /// timestamps it would have trimmed below seq 8, taking the APPEND at 6.
    #[test]
    fn a_late_written_outcome_does_not_make_younger_events_look_old() {
        use EventKind::{Append, Done, Trigger};
        let ns = events(&[
            (Append, 100),
            (Trigger, 100),
            (Append, 200),
            (Trigger, 200),
            (Done, 50),
            (Append, 300),
            (Done, 60),
            (Append, 400),
        ]);
        assert_eq!(appended_before(ns.as_ref(), 1, 8, 250).expect("search"), 5);
        assert_eq!(appended_before(ns.as_ref(), 1, 8, 100).expect("search"), 1, "nothing appended before 100");
        assert_eq!(appended_before(ns.as_ref(), 1, 8, 1_000).expect("search"), 9, "all (the trim keeps the newest)");
        assert_eq!(appended_before(ns.as_ref(), 1, 7, 1_000).expect("search"), 7, "not the DONE after the last APPEND");
    }

    /// Random event logs: APPEND/TRIGGER timestamps rise with their seqs,
    /// other events carry any earlier timestamp. The search returns exactly
    /// the first seq not known to be appended before the cutoff, and no
    /// APPEND or TRIGGER at or after the cutoff lies below it.
    #[test]
    fn the_search_finds_exactly_what_is_known_old() {
        let seed: u64 = std::env::var("VARVE_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(20_261_126);
        println!("seed {seed} (VARVE_TEST_SEED)");
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        for _ in 0..50 {
            let n = rng.gen_range(1..120u64);
            let mut clock = 1_000u64;
            let mut log = Vec::new();
            for _ in 0..n {
                if rng.gen_bool(0.4) {
                    clock += rng.gen_range(0..20);
                    log.push((if rng.gen_bool(0.5) { EventKind::Append } else { EventKind::Trigger }, clock));
                } else {
                    log.push((EventKind::Done, rng.gen_range(0..=clock)));
                }
            }
            let ns = events(&log);
            let cutoff = rng.gen_range(900..clock + 20);
            let found = appended_before(ns.as_ref(), 1, n, cutoff).expect("search");
            let old = |i: usize| {
                log[i..]
                    .iter()
                    .find(|(k, _)| matches!(k, EventKind::Append | EventKind::Trigger))
                    .is_some_and(|e| e.1 < cutoff)
            };
            let expected = (0..log.len()).rev().find(|&i| old(i)).map_or(1, |i| i as u64 + 2);
            assert_eq!(found, expected, "cutoff {cutoff} in {log:?}");
            for (i, (kind, t)) in log.iter().enumerate().take(usize::try_from(found - 1).expect("small")) {
                assert!(
                    !matches!(kind, EventKind::Append | EventKind::Trigger) || *t < cutoff,
                    "seq {} trimmed",
                    i + 1
                );
            }
        }
    }
}
