//! The atomic trigger: an append through the runtime is *one*
//! `append_batch` holding the data records, an APPEND event per record and
//! one TRIGGER per handler subscribed to its log at that moment. The seqs
//! the events name are predicted under the writer lock and checked against
//! what the batch returns (`SeqMismatch` if another writer got in).

use std::collections::HashMap;

use varve_log::{LogError, Seq};

use crate::error::{Result, RuntimeError};
use crate::event::{Event, EventKind};
use crate::inner::{Cause, Inner};
use crate::pending::PendingTrigger;
use crate::system_logs::EVENTS_LOG;

impl Inner {
    /// The atomic trigger: data records, their APPEND events and one TRIGGER
    /// per handler subscribed now, in one `append_batch`.
    pub(crate) fn append_traced(&self, batch: &[(&str, &[u8])], cause: Option<&Cause>) -> Result<Vec<Seq>> {
        self.append_traced_after(batch, cause, &[])
    }

    /// [`Inner::append_traced`], with `reads` (a handler's READ/LATEST events
    /// not yet written, see `HandlerContext`) written first in the same batch.
    pub(crate) fn append_traced_after(
        &self,
        batch: &[(&str, &[u8])],
        cause: Option<&Cause>,
        reads: &[Event],
    ) -> Result<Vec<Seq>> {
        if batch.is_empty() {
            return Err(RuntimeError::InvalidArgument { reason: "an append batch needs at least one record".into() });
        }
        let trace = cause.map_or_else(rand::random::<u128>, |c| c.trace);
        let parent = cause.map(|c| c.parent.clone());
        let writer = self.lock_writer();
        self.check_running()?;
        for (log, _) in batch {
            if log.starts_with('_') {
                return Err(RuntimeError::InvalidArgument {
                    reason: format!("log {log:?} is a system log; handlers and clients append to their own logs"),
                });
            }
        }
        let mut next_seq: HashMap<&str, Seq> = HashMap::new();
        let mut predicted = Vec::with_capacity(batch.len());
        for (log, _) in batch {
            let next = match next_seq.get(log) {
                Some(&n) => n,
                None => {
                    self.ns.latest(log).map_err(|e| match e {
                        LogError::LogNotFound { .. } => {
                            RuntimeError::UnknownLog { namespace: self.namespace.clone(), log: (*log).to_owned() }
                        }
                        other => RuntimeError::Log(other),
                    })? + 1
                }
            };
            predicted.push(next);
            next_seq.insert(log, next + 1);
        }
        let first_event = self.ns.latest(EVENTS_LOG)? + 1;
        let mut events: Vec<Vec<u8>> = Vec::with_capacity(reads.len() + batch.len() * 2);
        events.extend(reads.iter().map(Event::encode));
        let mut jobs = Vec::new();
        for ((log, _), &seq) in batch.iter().zip(&predicted) {
            let append_seq = first_event + events.len() as u64;
            events.push(Event::new(EventKind::Append, trace, parent.clone()).at(log, seq).encode());
            if let Some(handlers) = writer.subscriptions.handlers_of(log) {
                for handler in handlers {
                    let trigger_seq = first_event + events.len() as u64;
                    let event = Event::new(EventKind::Trigger, trace, Some(self.event_id(append_seq)))
                        .at(log, seq)
                        .for_handler(handler);
                    events.push(event.encode());
                    jobs.push(PendingTrigger::new(trigger_seq, log, seq, handler, trace));
                }
            }
        }
        let mut full: Vec<(&str, &[u8])> = Vec::with_capacity(batch.len() + events.len());
        full.extend_from_slice(batch);
        full.extend(events.iter().map(|e| (EVENTS_LOG, e.as_slice())));
        let seqs = self.ns.append_batch(&full)?;
        for (i, &expected) in predicted.iter().enumerate() {
            if seqs[i] != expected {
                return Err(self.mismatch(batch[i].0, expected, seqs[i]));
            }
        }
        if seqs[batch.len()] != first_event {
            return Err(self.mismatch(EVENTS_LOG, first_event, seqs[batch.len()]));
        }
        if !jobs.is_empty() {
            // Still under the writer lock: the progress mark never passes a
            // trigger that is on disk but not yet outstanding.
            self.enqueue(jobs);
        }
        drop(writer);
        Ok(predicted)
    }

    fn mismatch(&self, log: &str, expected: Seq, actual: Seq) -> RuntimeError {
        RuntimeError::SeqMismatch { namespace: self.namespace.clone(), log: log.to_owned(), expected, actual }
    }
}
