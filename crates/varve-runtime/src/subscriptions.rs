//! Subscriptions and topics (Canal): which handlers an append to each log
//! fires. The state is a pure fold of the records of `_runtime.subscriptions`
//! ([`SubscriptionState::apply`]), replayed on start and by `varve handler
//! ls`; changing it writes the record and a SUBSCRIBE/UNSUBSCRIBE event in
//! one batch, under the writer lock appends take, so "subscribed at the
//! moment of the append" is exact.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use varve_log::{LogConfig, LogError, Namespace, SeqRange};

use crate::error::{Result, RuntimeError};
use crate::event::{Event, EventKind};
use crate::inner::Inner;
use crate::shared::Extended;
use crate::system_logs::{EVENTS_LOG, SUBSCRIPTIONS_LOG};

/// One record of `_runtime.subscriptions` (JSON, tagged by `op`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum SubscriptionRecord {
    /// `topic` was created: a log listed as a topic.
    Topic {
        /// The topic's (log's) name.
        topic: String,
    },
    /// `handler` was subscribed to `log`: appends to `log` fire it from this record on.
    Subscribe {
        /// The log or topic subscribed to.
        log: String,
        /// The handler subscribed.
        handler: String,
    },
    /// `handler` was unsubscribed from `log`: appends to `log` no longer fire it.
    Unsubscribe {
        /// The log or topic unsubscribed from.
        log: String,
        /// The handler unsubscribed.
        handler: String,
    },
}

/// Who is subscribed to what, and which logs are topics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubscriptionState {
    /// Log → the handlers subscribed to it (name order: the order of their TRIGGERs).
    pub subscriptions: BTreeMap<String, BTreeSet<String>>,
    /// The logs created as topics.
    pub topics: BTreeSet<String>,
}

impl SubscriptionState {
    /// Fold one record.
    pub fn apply(&mut self, record: &SubscriptionRecord) {
        match record {
            SubscriptionRecord::Topic { topic } => {
                self.topics.insert(topic.clone());
            }
            SubscriptionRecord::Subscribe { log, handler } => {
                self.subscriptions.entry(log.clone()).or_default().insert(handler.clone());
            }
            SubscriptionRecord::Unsubscribe { log, handler } => {
                if let Some(set) = self.subscriptions.get_mut(log) {
                    set.remove(handler);
                    if set.is_empty() {
                        self.subscriptions.remove(log);
                    }
                }
            }
        }
    }

    /// Whether an append to `log` fires `handler` now.
    #[must_use]
    pub fn is_subscribed(&self, log: &str, handler: &str) -> bool {
        self.subscriptions.get(log).is_some_and(|s| s.contains(handler))
    }

    /// The handlers an append to `log` fires now.
    #[must_use]
    pub fn handlers_of(&self, log: &str) -> Option<&BTreeSet<String>> {
        self.subscriptions.get(log)
    }

    /// Handler → the logs it is subscribed to (in name order).
    #[must_use]
    pub fn logs_by_handler(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (log, handlers) in &self.subscriptions {
            for handler in handlers {
                out.entry(handler.clone()).or_default().push(log.clone());
            }
        }
        out
    }
}

/// Decode one record of `_runtime.subscriptions`.
pub fn decode_subscription(bytes: &[u8], seq: varve_log::Seq) -> Result<SubscriptionRecord> {
    serde_json::from_slice(bytes).map_err(|e| RuntimeError::InvalidArgument {
        reason: format!("{SUBSCRIPTIONS_LOG} seq {seq} does not parse: {e}"),
    })
}

/// Replay a namespace's `_runtime.subscriptions` (empty if it has none).
/// Read-only handles work.
pub fn read_subscriptions(ns: &dyn Namespace) -> Result<SubscriptionState> {
    let mut state = SubscriptionState::default();
    let records = match ns.scan(SUBSCRIPTIONS_LOG, SeqRange::ALL) {
        Ok(records) => records,
        Err(LogError::LogNotFound { .. }) => return Ok(state),
        Err(e) => return Err(e.into()),
    };
    for record in records {
        let record = record?;
        state.apply(&decode_subscription(&record.value, record.seq)?);
    }
    Ok(state)
}

fn encode(record: &SubscriptionRecord) -> Result<Vec<u8>> {
    serde_json::to_vec(record).map_err(|e| RuntimeError::InvalidArgument { reason: e.to_string() })
}

impl Inner {
    pub(crate) fn replay_subscriptions(&self) -> Result<()> {
        let state = read_subscriptions(self.ns.as_ref())?;
        self.lock_writer().subscriptions = state;
        Ok(())
    }

    pub(crate) fn create_topic(&self, topic: &str) -> Result<()> {
        varve_log::validate_name(topic, false)?;
        let mut writer = self.lock_writer();
        self.check_running()?;
        self.ns.create_log(topic, LogConfig::unbounded())?;
        if writer.subscriptions.topics.contains(topic) {
            return Ok(());
        }
        let record = SubscriptionRecord::Topic { topic: topic.to_owned() };
        self.ns.append(SUBSCRIPTIONS_LOG, &encode(&record)?)?;
        writer.subscriptions.apply(&record);
        Ok(())
    }

    pub(crate) fn subscribe(&self, log: &str, handler: &str) -> Result<()> {
        self.change_subscription(log, handler, true)
    }

    pub(crate) fn unsubscribe(&self, log: &str, handler: &str) -> Result<()> {
        self.change_subscription(log, handler, false)
    }

    fn change_subscription(&self, log: &str, handler: &str, on: bool) -> Result<()> {
        if on && !self.handlers.contains_key(handler) {
            return Err(RuntimeError::UnknownHandler { name: handler.to_owned() });
        }
        let mut writer = self.lock_writer();
        self.check_running()?;
        if let Err(e) = self.ns.log_info(log) {
            return Err(match e {
                LogError::LogNotFound { .. } => {
                    RuntimeError::UnknownLog { namespace: self.namespace.clone(), log: log.to_owned() }
                }
                other => RuntimeError::Log(other),
            });
        }
        let (record, kind) = if on {
            (SubscriptionRecord::Subscribe { log: log.into(), handler: handler.into() }, EventKind::Subscribe)
        } else {
            (SubscriptionRecord::Unsubscribe { log: log.into(), handler: handler.into() }, EventKind::Unsubscribe)
        };
        let event = Event::new(kind, rand::random(), None).at(log, 0).for_handler(handler).encode();
        let record_bytes = encode(&record)?;
        let batch: [(&str, &[u8]); 2] = [(SUBSCRIPTIONS_LOG, &record_bytes), (EVENTS_LOG, &event)];
        for _ in 0..crate::shared::REPLANS_MAX {
            if writer.subscriptions.is_subscribed(log, handler) == on {
                return Ok(());
            }
            if writer.fold.is_none() {
                self.ns.append_batch(&batch)?;
            } else if let Extended::Stale = self.append_extending(&mut writer, &batch, &[])? {
                // Shared: another runtime wrote first; the fold caught up (it may have made this change).
                continue;
            }
            writer.subscriptions.apply(&record);
            return Ok(());
        }
        Err(self.gave_up("change a subscription"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(log: &str, handler: &str) -> SubscriptionRecord {
        SubscriptionRecord::Subscribe { log: log.into(), handler: handler.into() }
    }

    fn unsub(log: &str, handler: &str) -> SubscriptionRecord {
        SubscriptionRecord::Unsubscribe { log: log.into(), handler: handler.into() }
    }

    #[test]
    fn the_fold_follows_subscribe_and_unsubscribe_in_order() {
        let mut s = SubscriptionState::default();
        for r in [
            sub("x", "b"),
            sub("x", "a"),
            sub("y", "a"),
            unsub("x", "b"),
            unsub("z", "a"),
            SubscriptionRecord::Topic { topic: "t".into() },
        ] {
            s.apply(&r);
        }
        assert!(s.is_subscribed("x", "a") && !s.is_subscribed("x", "b"));
        assert_eq!(s.handlers_of("x").map(|h| h.iter().cloned().collect::<Vec<_>>()), Some(vec!["a".to_owned()]));
        assert_eq!(s.logs_by_handler()["a"], vec!["x".to_owned(), "y".to_owned()]);
        assert!(!s.logs_by_handler().contains_key("b"));
        assert!(s.topics.contains("t"));
        // The last unsubscription removes the log's entry.
        s.apply(&unsub("y", "a"));
        assert!(s.handlers_of("y").is_none());
    }

    #[test]
    fn records_round_trip_through_their_json() {
        for r in [sub("x", "h"), unsub("x", "h"), SubscriptionRecord::Topic { topic: "t".into() }] {
            let bytes = encode(&r).expect("encode");
            assert_eq!(decode_subscription(&bytes, 1).expect("decode"), r);
        }
        assert_eq!(
            decode_subscription(br#"{"op":"subscribe","log":"in","handler":"h"}"#, 1).expect("decode"),
            sub("in", "h"),
            "the stored form is frozen"
        );
        assert!(decode_subscription(b"{", 9).is_err_and(|e| e.to_string().contains("seq 9")));
    }
}
