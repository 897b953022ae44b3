//! Which triggers are pending: a pure fold over `_events`.
//!
//! A TRIGGER is pending until a DONE or `DEAD_LETTER` names it. Its FIRINGs
//! say which attempt comes next, its FAILEDs how much of the retry budget is
//! spent. Start-up recovery (`recovery.rs`) folds the events from the
//! progress mark on and re-queues what is pending; `varve handler ls` folds
//! all of them and shows the per-handler counts. Both use [`TriggerFold`],
//! so the two answers cannot drift apart.

use std::collections::BTreeMap;

use serde::Serialize;
use varve_log::Seq;

use crate::event::{Event, EventKind, TraceId};

/// A trigger without DONE or `DEAD_LETTER` (also what a worker runs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingTrigger {
    /// The TRIGGER's seq in `_events`.
    pub trigger: Seq,
    /// The log of the record that fired the trigger.
    pub log: String,
    /// The seq of that record in `log`.
    pub seq: Seq,
    /// The handler that must run.
    pub handler: String,
    /// The TRIGGER's trace id, which the FIRING and everything after it carry.
    pub trace: TraceId,
    /// The attempt number the next FIRING gets.
    pub attempt: u32,
    /// FAILED events so far (what the retry budget counts; a run cut short
    /// by a stop or crash is re-run but not counted).
    pub failures: u32,
    /// The reason of the last FAILED ("" if none).
    pub last_reason: String,
    /// The seq of the last FIRING (0 if none).
    pub last_firing: Seq,
}

impl PendingTrigger {
    /// A trigger just written, not yet claimed.
    #[must_use]
    pub fn new(trigger: Seq, log: &str, seq: Seq, handler: &str, trace: TraceId) -> PendingTrigger {
        PendingTrigger {
            trigger,
            log: log.to_owned(),
            seq,
            handler: handler.to_owned(),
            trace,
            attempt: 1,
            failures: 0,
            last_reason: String::new(),
            last_firing: 0,
        }
    }
}

/// Delivery counts of one handler, over the events folded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HandlerCounts {
    /// TRIGGER events naming the handler.
    pub triggers: u64,
    /// DONE events: runs that finished.
    pub done: u64,
    /// FAILED events: failed runs, each attempt counted (a trigger retried twice counts 2).
    pub failed: u64,
    /// `DEAD_LETTER` events: triggers given up after their last attempt.
    pub dead_letters: u64,
    /// Triggers folded that have neither DONE nor `DEAD_LETTER` yet.
    pub pending: u64,
}

/// The fold. Feed events in `_events` order with [`TriggerFold::apply`].
///
/// Events about triggers before the first one folded (a fold started at the
/// progress mark) are ignored: the mark is never past an unfinished trigger.
/// O(log n) per event; memory is O(pending triggers + handlers).
#[derive(Clone, Debug, Default)]
pub struct TriggerFold {
    pending: BTreeMap<Seq, PendingTrigger>,
    counts: BTreeMap<String, HandlerCounts>,
}

impl TriggerFold {
    /// An empty fold: no pending triggers, no counts.
    #[must_use]
    pub fn new() -> TriggerFold {
        TriggerFold::default()
    }

    /// Fold the event at `seq` of `_events`.
    pub fn apply(&mut self, seq: Seq, event: &Event) {
        if event.handler.is_empty()
            || matches!(event.kind, EventKind::Subscribe | EventKind::Unsubscribe | EventKind::Repair)
        {
            return;
        }
        let counts = self.counts.entry(event.handler.clone()).or_default();
        match event.kind {
            EventKind::Trigger => {
                counts.triggers += 1;
                counts.pending += 1;
                self.pending.insert(seq, PendingTrigger::new(seq, &event.log, event.seq, &event.handler, event.trace));
            }
            EventKind::Firing => {
                if let Some(p) = self.pending.get_mut(&event.trigger) {
                    p.attempt = event.attempt + 1;
                    p.last_firing = seq;
                }
            }
            EventKind::Failed => {
                counts.failed += 1;
                if let Some(p) = self.pending.get_mut(&event.trigger) {
                    p.failures += 1;
                    p.last_reason.clone_from(&event.reason);
                }
            }
            EventKind::Done | EventKind::DeadLetter => {
                if event.kind == EventKind::Done {
                    counts.done += 1;
                } else {
                    counts.dead_letters += 1;
                }
                if let Some(p) = self.pending.remove(&event.trigger) {
                    if let Some(c) = self.counts.get_mut(&p.handler) {
                        c.pending -= 1;
                    }
                }
            }
            _ => {}
        }
    }

    /// The pending triggers, in trigger order.
    pub fn pending(&self) -> impl Iterator<Item = &PendingTrigger> {
        self.pending.values()
    }

    /// The pending triggers, in trigger order.
    #[must_use]
    pub fn into_pending(self) -> Vec<PendingTrigger> {
        self.pending.into_values().collect()
    }

    /// Per-handler counts of every handler named by a folded event.
    #[must_use]
    pub fn counts(&self) -> &BTreeMap<String, HandlerCounts> {
        &self.counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: EventKind, handler: &str, trigger: Seq) -> Event {
        let mut e = Event::new(kind, 7, None).at("in", 1).for_handler(handler);
        e.trigger = trigger;
        e
    }

    fn firing(handler: &str, trigger: Seq, attempt: u32) -> Event {
        let mut e = ev(EventKind::Firing, handler, trigger);
        e.attempt = attempt;
        e
    }

    fn failed(handler: &str, trigger: Seq, reason: &str) -> Event {
        let mut e = ev(EventKind::Failed, handler, trigger);
        e.reason = reason.to_owned();
        e
    }

    fn fold(events: &[(Seq, Event)]) -> TriggerFold {
        let mut f = TriggerFold::new();
        for (seq, e) in events {
            f.apply(*seq, e);
        }
        f
    }

    #[test]
    fn a_trigger_is_pending_until_done_or_dead_lettered() {
        let f = fold(&[
            (1, Event::new(EventKind::Append, 7, None).at("in", 1)),
            (2, ev(EventKind::Trigger, "a", 0)),
            (3, ev(EventKind::Trigger, "b", 0)),
            (4, ev(EventKind::Trigger, "c", 0)),
            (5, firing("a", 2, 1)),
            (6, ev(EventKind::Done, "a", 2)),
            (7, firing("b", 3, 1)),
            (8, failed("b", 3, "boom")),
            (9, ev(EventKind::DeadLetter, "b", 3)),
        ]);
        let pending: Vec<Seq> = f.pending().map(|p| p.trigger).collect();
        assert_eq!(pending, vec![4]);
        let c = f.counts();
        assert_eq!(c["a"], HandlerCounts { triggers: 1, done: 1, ..HandlerCounts::default() });
        assert_eq!(c["b"], HandlerCounts { triggers: 1, failed: 1, dead_letters: 1, ..HandlerCounts::default() });
        assert_eq!(c["c"], HandlerCounts { triggers: 1, pending: 1, ..HandlerCounts::default() });
    }

    #[test]
    fn firings_set_the_next_attempt_and_failures_count_the_budget() {
        let f = fold(&[
            (10, ev(EventKind::Trigger, "h", 0)),
            (11, firing("h", 10, 1)),
            (12, failed("h", 10, "first")),
            (13, firing("h", 10, 2)),
            // A crash here: FIRING 2 has no outcome. It is re-run, not counted.
        ]);
        let p = f.into_pending();
        assert_eq!(p.len(), 1);
        assert_eq!((p[0].attempt, p[0].failures, p[0].last_firing), (3, 1, 13));
        assert_eq!(p[0].last_reason, "first");
        assert_eq!((p[0].log.as_str(), p[0].seq, p[0].handler.as_str(), p[0].trace), ("in", 1, "h", 7));
    }

    #[test]
    fn events_about_triggers_before_the_fold_started_are_ignored() {
        // Started at a progress mark after trigger 3: its DONE only counts.
        let f = fold(&[(20, ev(EventKind::Done, "h", 3)), (21, ev(EventKind::Trigger, "h", 0))]);
        assert_eq!(f.pending().count(), 1);
        assert_eq!(f.counts()["h"], HandlerCounts { triggers: 1, done: 1, pending: 1, ..HandlerCounts::default() });
    }

    #[test]
    fn subscriptions_and_events_without_a_handler_are_not_counted() {
        let f = fold(&[
            (1, ev(EventKind::Subscribe, "h", 0)),
            (2, Event::new(EventKind::Read, 1, None).at("in", 1)),
            (3, ev(EventKind::Unsubscribe, "h", 0)),
        ]);
        assert!(f.counts().is_empty());
        assert_eq!(f.pending().count(), 0);
    }
}
