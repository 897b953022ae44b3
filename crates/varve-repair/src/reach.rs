//! What a repair can still reach once the runtime's event retention
//! (`events_keep`) trimmed `_events`.
//!
//! A repair needs every event from the correction on: the APPEND of the
//! corrected record, and every run that read it or what followed. Retention
//! trims the oldest events, so what is kept is a suffix in time, and a
//! correction is reachable exactly when its start is inside that suffix:
//!
//! - **a corrected record** is reachable if its APPEND event is kept, or if
//!   an earlier record of its log has its APPEND kept (then it was appended
//!   after the horizon, without the runtime — an unrecorded record, repaired
//!   as before);
//! - **a replaced handler** is reachable from a time at or after the
//!   earliest event kept, or from a seq at or after the earliest trigger
//!   kept of that handler on each log it has kept triggers on; from the
//!   start only while nothing was trimmed.
//!
//! A namespace whose `_events` was never trimmed (its first event is seq 1)
//! reaches everything. Anything else is refused with
//! [`RepairError::BeyondRetention`] before anything is written.

use std::collections::HashMap;

use varve_log::Seq;
use varve_runtime::trace::RecordRef;
use varve_runtime::{EventKind, StoredEvent};

use crate::execute::RepairError;
use crate::plan::{Correction, Since};

/// Check that every correction is reachable with `events` — every event
/// kept, in causal order, as read from the earliest of each namespace's
/// `_events` (see the module docs).
pub fn check_reach(corrections: &[Correction], events: &[StoredEvent]) -> Result<(), RepairError> {
    // Per namespace: the first event kept, and its time.
    let mut first: HashMap<&str, (Seq, u64)> = HashMap::new();
    for e in events {
        let entry = first.entry(e.id.namespace.as_str()).or_insert((e.id.seq, e.event.timestamp_ns));
        if e.id.seq < entry.0 {
            *entry = (e.id.seq, e.event.timestamp_ns);
        }
    }
    let trimmed = |namespace: &str| first.get(namespace).copied().filter(|&(seq, _)| seq > 1);
    for correction in corrections {
        match correction {
            Correction::Record(record) => {
                let Some((earliest, _)) = trimmed(&record.namespace) else { continue };
                if !record_reachable(record, events) {
                    return Err(RepairError::BeyondRetention {
                        namespace: record.namespace.clone(),
                        earliest,
                        what: format!("record {}/{}:{}", record.namespace, record.log, record.seq),
                    });
                }
            }
            Correction::Handler { handler, since } => {
                let triggers: Vec<&StoredEvent> = events
                    .iter()
                    .filter(|e| e.event.kind == EventKind::Trigger && e.event.handler == *handler)
                    .collect();
                let mut namespaces: Vec<&str> = triggers.iter().map(|e| e.id.namespace.as_str()).collect();
                if namespaces.is_empty() {
                    namespaces = first.keys().copied().collect();
                }
                namespaces.sort_unstable();
                namespaces.dedup();
                for namespace in namespaces {
                    let Some((earliest, earliest_ns)) = trimmed(namespace) else { continue };
                    let reachable = match since {
                        Since::Start => false,
                        Since::TimeNs(t) => *t >= earliest_ns,
                        Since::Seq(s) => {
                            let mut first_kept: HashMap<&str, Seq> = HashMap::new();
                            for e in triggers.iter().filter(|e| e.id.namespace == namespace) {
                                let kept = first_kept.entry(e.event.log.as_str()).or_insert(e.event.seq);
                                *kept = (*kept).min(e.event.seq);
                            }
                            !first_kept.is_empty() && first_kept.values().all(|&kept| kept <= *s)
                        }
                    };
                    if !reachable {
                        return Err(RepairError::BeyondRetention {
                            namespace: namespace.to_owned(),
                            earliest,
                            what: format!("the runs of handler {handler:?} {}", since_text(*since)),
                        });
                    }
                }
            }
        }
    }
    Ok(())
}

/// Its APPEND is kept, or an earlier record of its log has its APPEND kept.
fn record_reachable(record: &RecordRef, events: &[StoredEvent]) -> bool {
    events.iter().any(|e| {
        e.event.kind == EventKind::Append
            && e.id.namespace == record.namespace
            && e.event.log == record.log
            && e.event.seq <= record.seq
    })
}

fn since_text(since: Since) -> String {
    match since {
        Since::Start => "from the start".to_owned(),
        Since::Seq(seq) => format!("on records from seq {seq}"),
        Since::TimeNs(ns) => format!("from time {ns} ns"),
    }
}

#[cfg(test)]
mod tests {
    use varve_runtime::{Event, EventId};

    use super::*;

    fn event(seq: Seq, kind: EventKind, log: &str, at: Seq, handler: &str) -> StoredEvent {
        let mut event = Event::new(kind, 1, None);
        event.timestamp_ns = 1_000 + seq;
        event.log = log.to_owned();
        event.seq = at;
        event.seq_last = at;
        event.handler = handler.to_owned();
        StoredEvent { id: EventId { host: 1, namespace: "app".to_owned(), seq }, event }
    }

    fn record(log: &str, seq: Seq) -> Correction {
        Correction::Record(RecordRef { namespace: "app".into(), log: log.into(), seq })
    }

    fn handler(since: Since) -> Correction {
        Correction::Handler { handler: "h".into(), since }
    }

    /// `_events` trimmed before seq 50: kept, the APPEND of `in:7` and its
    /// TRIGGER of `h`, then `in:8`.
    fn kept() -> Vec<StoredEvent> {
        vec![
            event(50, EventKind::Append, "in", 7, ""),
            event(51, EventKind::Trigger, "in", 7, "h"),
            event(52, EventKind::Append, "in", 8, ""),
            event(53, EventKind::Trigger, "in", 8, "h"),
        ]
    }

    #[test]
    fn records_whose_append_is_kept_or_came_later_are_reachable() {
        assert!(check_reach(&[record("in", 7)], &kept()).is_ok());
        assert!(check_reach(&[record("in", 9)], &kept()).is_ok(), "after the horizon, unrecorded");
        let error = check_reach(&[record("in", 6)], &kept()).expect_err("trimmed");
        assert!(matches!(error, RepairError::BeyondRetention { earliest: 50, .. }), "{error}");
        assert!(error.to_string().contains("app/in:6"), "{error}");
        assert!(check_reach(&[record("other", 1)], &kept()).is_err(), "no event of its log kept");
    }

    #[test]
    fn handlers_are_reachable_from_a_point_the_events_cover() {
        assert!(check_reach(&[handler(Since::Start)], &kept()).is_err(), "from the start: trimmed runs");
        assert!(check_reach(&[handler(Since::Seq(7))], &kept()).is_ok());
        assert!(check_reach(&[handler(Since::Seq(6))], &kept()).is_err());
        assert!(check_reach(&[handler(Since::TimeNs(1_050))], &kept()).is_ok());
        assert!(check_reach(&[handler(Since::TimeNs(1_049))], &kept()).is_err());
    }

    #[test]
    fn nothing_trimmed_reaches_everything() {
        let mut all = kept();
        all.insert(0, event(1, EventKind::Append, "in", 1, ""));
        assert!(check_reach(&[record("in", 3), handler(Since::Start)], &all).is_ok());
    }
}
