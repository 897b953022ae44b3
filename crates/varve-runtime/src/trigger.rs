//! The atomic trigger: an append through the runtime is *one*
//! `append_batch` holding the data records, an APPEND event per record and
//! one TRIGGER per handler subscribed to its log at that moment. The seqs
//! the events name are predicted under the writer lock and checked against
//! what the batch returns (`SeqMismatch` if another writer got in). An
//! append with a request id also writes its request record in the batch, and
//! a repeat of a remembered id appends nothing (`requests.rs`).

use std::collections::HashMap;

use varve_log::{LogError, Namespace, Seq};

use crate::append_index::prepare_index_logs;
use crate::error::{Result, RuntimeError};
use crate::event::{Event, EventId, EventKind, ReadDep, TraceId};
use crate::inner::{Cause, Inner, WriterState};
use crate::pending::PendingTrigger;
use crate::requests::{encode, repeat_answer, Appended, RequestId, RequestRecord, REQUESTS_LOG};
use crate::shared::{Extended, REPLANS_MAX};
use crate::system_logs::{is_client_writable, EVENTS_LOG};

/// What an append through the runtime carries besides its records.
#[derive(Clone, Copy, Default)]
pub(crate) struct AppendOptions<'a> {
    /// The event that caused it; `None`: a new trace.
    pub cause: Option<&'a Cause>,
    /// Append once per id: a repeat of a remembered id returns the first append's seqs.
    pub request: Option<&'a RequestId>,
    /// A handler's reads not yet written (see `HandlerContext`), folded into
    /// the batch's first APPEND event.
    pub reads: &'a [ReadDep],
    /// `append_if`, `append_batch_if`: each of these logs (all of them ones
    /// the batch writes) must end at its seq, else `Conflict` (checked after
    /// a repeat is answered: the first attempt moved them on).
    pub expected: &'a [(&'a str, Seq)],
}

/// Check a conditional batch's `expected` against where its logs end now,
/// in the order every backend checks (`varve_log::rules::assign_seqs`):
/// unknown logs of the batch (`LogNotFound`, in batch order), then each
/// expectation (`Conflict`). Nothing to read when nothing is expected.
pub(crate) fn check_expected(
    ns: &dyn Namespace,
    batch: &[(&str, &[u8])],
    expected: &[(&str, Seq)],
) -> std::result::Result<(), LogError> {
    if expected.is_empty() {
        return Ok(());
    }
    let mut ends: Vec<(&str, Seq)> = Vec::new();
    for (log, _) in batch {
        if !ends.iter().any(|(name, _)| name == log) {
            ends.push((log, ns.latest(log)?));
        }
    }
    for &(log, expected) in expected {
        let actual = ends.iter().find(|(name, _)| *name == log).map_or(0, |&(_, latest)| latest);
        if actual != expected {
            return Err(LogError::Conflict { log: log.to_owned(), expected, actual });
        }
    }
    Ok(())
}

/// One append, as planned again after each conflict.
#[derive(Clone, Copy)]
struct Plan<'a> {
    batch: &'a [(&'a str, &'a [u8])],
    logs: &'a [&'a str],
    request: Option<&'a RequestId>,
    reads: &'a [ReadDep],
    trace: TraceId,
    parent: Option<&'a EventId>,
    /// Where each of these logs must end (see [`AppendOptions::expected`]).
    expected: &'a [(&'a str, Seq)],
}

impl Inner {
    /// The atomic trigger: data records, their APPEND events and one TRIGGER
    /// per handler subscribed now, in one `append_batch`.
    pub(crate) fn append_traced(&self, batch: &[(&str, &[u8])], cause: Option<&Cause>) -> Result<Vec<Seq>> {
        Ok(self.append_request(batch, &AppendOptions { cause, ..AppendOptions::default() })?.seqs)
    }

    /// The public appends' common form: a cause as ids, a request id, where
    /// logs of the batch must end.
    pub(crate) fn append_once(
        &self,
        request: Option<&RequestId>,
        batch: &[(&str, &[u8])],
        cause: Option<(EventId, TraceId)>,
        expected: &[(&str, Seq)],
    ) -> Result<Appended> {
        let cause = cause.map(|(parent, trace)| Cause { parent, trace });
        self.append_request(
            batch,
            &AppendOptions { cause: cause.as_ref(), request, expected, ..AppendOptions::default() },
        )
    }

    /// [`Inner::append_traced`] with what [`AppendOptions`] adds.
    pub(crate) fn append_request(&self, batch: &[(&str, &[u8])], options: &AppendOptions<'_>) -> Result<Appended> {
        let AppendOptions { cause, request, reads, expected } = *options;
        if batch.is_empty() {
            return Err(RuntimeError::InvalidArgument { reason: "an append batch needs at least one record".into() });
        }
        varve_log::rules::check_expected_logs(batch, expected)?;
        if cause.is_none() {
            // From outside the handlers: wait while they are too far behind.
            self.wait_for_room()?;
        }
        let trace = cause.map_or_else(rand::random::<u128>, |c| c.trace);
        let parent = cause.map(|c| c.parent.clone());
        let mut writer = self.lock_writer();
        self.check_running()?;
        for (log, _) in batch {
            if !is_client_writable(log) {
                return Err(RuntimeError::InvalidArgument {
                    reason: format!(
                        "log {log:?} is a system log, written only by the part of Varve that keeps it; handlers and clients append to their own logs"
                    ),
                });
            }
        }
        let logs: Vec<&str> = batch.iter().map(|(log, _)| *log).collect();
        if let Some(id) = request {
            if let Some(first) = writer.requests.recall(id) {
                return repeat_answer(id, &logs, first);
            }
        }
        check_expected(self.ns.as_ref(), batch, expected).map_err(|e| match e {
            LogError::LogNotFound { log, .. } => RuntimeError::UnknownLog { namespace: self.namespace.clone(), log },
            other => other.into(),
        })?;
        let plan = Plan { batch, logs: &logs, request, reads, trace, parent: parent.as_ref(), expected };
        for _ in 0..REPLANS_MAX {
            if let Some(appended) = self.try_append(&mut writer, &plan)? {
                drop(writer);
                if cause.is_none() {
                    // Runs finishing check too (`worker.rs`); an application
                    // without handlers has only these appends.
                    self.retain_events();
                }
                return Ok(appended);
            }
            // Shared, and another writer got in first: the fold caught up; plan again.
        }
        Err(self.gave_up("append"))
    }

    /// A data log's `LogNotFound` as the runtime reports it.
    fn unknown_log(&self, error: LogError, log: &str) -> RuntimeError {
        match error {
            LogError::LogNotFound { .. } => {
                RuntimeError::UnknownLog { namespace: self.namespace.clone(), log: log.to_owned() }
            }
            other => RuntimeError::Log(other),
        }
    }

    /// Plan the batch on what is known now (predicted seqs, the handlers
    /// subscribed) and write it. `None`: a shared runtime's plan was stale.
    fn try_append(&self, writer: &mut WriterState, plan: &Plan<'_>) -> Result<Option<Appended>> {
        let Plan { batch, logs, request, reads, trace, parent, expected: wanted } = *plan;
        let mut next_seq: HashMap<&str, Seq> = HashMap::new();
        let mut predicted = Vec::with_capacity(batch.len());
        // Shared: each data log must still end where its seqs were predicted from.
        let mut expected: Vec<(&str, Seq)> = Vec::new();
        for (log, _) in batch {
            let next = if let Some(&n) = next_seq.get(log) {
                n
            } else {
                let latest = self.ns.latest(log).map_err(|e| self.unknown_log(e, log))?;
                expected.push((log, latest));
                latest + 1
            };
            predicted.push(next);
            next_seq.insert(log, next + 1);
        }
        for &(log, wanted) in wanted {
            let actual = expected.iter().find(|(name, _)| *name == log).map_or(0, |&(_, latest)| latest);
            if actual != wanted {
                return Err(LogError::Conflict { log: log.to_owned(), expected: wanted, actual }.into());
            }
        }
        let first_event = match &writer.fold {
            Some(fold) => fold.folded_to + 1,
            None => self.ns.latest(EVENTS_LOG)? + 1,
        };
        let mut events: Vec<Vec<u8>> = Vec::with_capacity(batch.len() * 2);
        let mut jobs = Vec::new();
        // The APPEND event of each record, for the index.
        let mut append_events = Vec::with_capacity(batch.len());
        for (i, ((log, _), &seq)) in batch.iter().zip(&predicted).enumerate() {
            let append_seq = first_event + events.len() as u64;
            append_events.push(append_seq);
            let mut append = Event::new(EventKind::Append, trace, parent.cloned()).at(log, seq);
            if i == 0 {
                reads.clone_into(&mut append.reads);
            }
            events.push(append.encode());
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
        let index = writer.index.entries(
            batch.iter().zip(&predicted).zip(&append_events).map(|(((log, _), &seq), &event)| (*log, seq, event)),
        );
        prepare_index_logs(self.ns.as_ref(), &index)?;
        let record = request.map(|id| RequestRecord {
            id: id.to_string(),
            logs: logs.iter().map(|l| (*l).to_owned()).collect(),
            seqs: predicted.clone(),
        });
        let record_bytes = record.as_ref().map(encode).transpose()?;
        let mut full: Vec<(&str, &[u8])> = Vec::with_capacity(batch.len() + events.len() + 1);
        full.extend_from_slice(batch);
        full.extend(events.iter().map(|e| (EVENTS_LOG, e.as_slice())));
        if let Some(bytes) = &record_bytes {
            // In the same batch as the data: on disk exactly when the data is.
            full.push((REQUESTS_LOG, bytes));
        }
        full.extend(index.iter().map(|(name, entry)| (name.as_str(), entry.as_slice())));
        if writer.fold.is_some() {
            // The fold enqueues the TRIGGERs as it takes in the batch's events.
            match self.append_extending(writer, &full, &expected)? {
                Extended::Landed(_) => {}
                Extended::Stale => return Ok(None),
            }
        } else {
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
        }
        if let Some(record) = record {
            writer.requests.remember(record);
        }
        writer.index.landed(&index);
        Ok(Some(Appended { seqs: predicted, repeated: false }))
    }

    fn mismatch(&self, log: &str, expected: Seq, actual: Seq) -> RuntimeError {
        RuntimeError::SeqMismatch { namespace: self.namespace.clone(), log: log.to_owned(), expected, actual }
    }
}
