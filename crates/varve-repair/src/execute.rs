//! Executing a plan (Sans-Souci §7.2.2, §7.3): shadow logs, the replay of
//! each run with its reads pinned to what it originally saw, the copy of
//! the records that do not depend on the repair (the walk, `walk.rs`), and
//! the atomic swap.
//!
//! **The swap** is one `rename_logs` per namespace: `LOG` becomes
//! `_gen.LOG.N` (the old history, still readable) and `_shadow.LOG` becomes
//! `LOG`, for every log of that namespace at once. Before it, the original
//! logs are untouched (a crash leaves stale shadows, which the next repair
//! deletes and rebuilds; an error deletes them at once); after it, the
//! repaired logs are in place. Then a REPAIR event in each namespace's
//! `_events` names the records whose values changed and what was
//! corrected (the causal graph makes it a parent of each of them). The
//! swaps and the REPAIR events are committed through the repair journal
//! `_repairs` (`commit.rs`): a crash after the intent is finished by
//! [`crate::resume`], in every namespace of the repair.
//!
//! **Limits.** [`execute`] is offline: no runtime may serve the namespaces
//! (another process's is kept out by the store's writer lock; one in this
//! process is the caller's to stop — the Python binding checks).
//! [`crate::repair_online`] repairs one namespace while its runtime runs.
//! Typed errors: a replayed run must write as many records to each log as
//! it did (a repair that changes how many records a handler writes moves
//! seqs, which this executor refuses rather than renumber); logs with
//! trimmed records cannot be shadowed seq for seq; a read of a repaired
//! record not yet written (runs interleaved by concurrent workers). Only
//! the last attempt of a retried run is replayed; what earlier attempts
//! appended is kept as it was. A swap spans one namespace at a time (each
//! atomic; a crash between two of them is finished by [`crate::resume`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use varve_log::{LogError, Namespace, Seq};
use varve_runtime::trace::RecordRef;
use varve_runtime::{EventKind, HandlerFn, RuntimeError, StoredEvent};

use crate::commit::{check_none_interrupted, Commit};
use crate::plan::{ChangedLog, Correction, RepairPlan, Rerun};
use crate::walk::Walk;

/// Why a repair could not be carried out. Nothing is swapped after any of
/// these — except in a repair spanning several namespaces, where a failed
/// swap of a later namespace leaves the earlier ones swapped (each swap is
/// atomic on its own) until [`crate::resume`] swaps the rest.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RepairError {
    /// A store operation failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// Reading events failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The plan needs a namespace that was not given.
    #[error(
        "the repair changes namespace {namespace:?}, which was not given: open it and pass it too (online: pass its \
         runtime too, to varve_repair::repair_online_across)"
    )]
    MissingNamespace {
        /// The namespace.
        namespace: String,
    },
    /// A run to replay has no code.
    #[error("the repair replays handler {handler:?}, which was not given: register its (new) code")]
    MissingHandler {
        /// The handler.
        handler: String,
    },
    /// A corrected record has no new value.
    #[error("no corrected value was given for {record}")]
    MissingValue {
        /// The record, `namespace/log:seq`.
        record: String,
    },
    /// A run to replay is marked not replayable.
    #[error(
        "handler {handler:?} is marked replayable = false (it acts on the world); the repair replays {runs} of its \
         runs: allow it explicitly if running it again is safe"
    )]
    NotReplayable {
        /// The handler.
        handler: String,
        /// How many of its runs the plan replays.
        runs: usize,
    },
    /// A replayed run wrote a different number of records to a log.
    #[error(
        "the replay of {handler:?} on {trigger} wrote {now} record(s) to {log:?} where the original run wrote \
         {before}: repairs that change how many records a handler writes are not supported yet (they move seqs)"
    )]
    CountChanged {
        /// The handler.
        handler: String,
        /// Its triggering record.
        trigger: String,
        /// The log.
        log: String,
        /// Records the original run wrote there.
        before: usize,
        /// Records the replay wrote there.
        now: usize,
    },
    /// A replayed handler failed.
    #[error("the replay of {handler:?} on {trigger} failed: {reason}")]
    HandlerFailed {
        /// The handler.
        handler: String,
        /// Its triggering record.
        trigger: String,
        /// What it returned or panicked with.
        reason: String,
    },
    /// An earlier repair of the namespace was interrupted (a crash or an
    /// error after its intent was written) and is not finished.
    #[error(
        "an earlier repair ({id}) of namespace {namespace:?} was interrupted and is not finished: run `varve repair \
         resume` first (or restart `varve run`, which finishes it as it starts; Rust: varve_repair::resume; an \
         offline repair from the CLI or Python finishes it on its own)"
    )]
    Interrupted {
        /// The namespace.
        namespace: String,
        /// The repair's id in its `_repairs`.
        id: String,
    },
    /// The namespace's repair journal (`_repairs`) could not be read.
    #[error("the repair journal {namespace}/_repairs cannot be read: {reason}")]
    BadJournal {
        /// The namespace.
        namespace: String,
        /// What was wrong.
        reason: String,
    },
    /// The correction starts before the events the runtime's event
    /// retention kept (`events_keep`, `events_keep_for`): what depended on it is not known.
    #[error(
        "{what} is older than the events kept in namespace {namespace:?} (event retention trimmed its _events \
         before seq {earliest}): what depended on it is no longer recorded, so it cannot be repaired; repair from \
         a later point, or keep more events (events_keep, events_keep_for)"
    )]
    BeyondRetention {
        /// The namespace whose events were trimmed.
        namespace: String,
        /// Its earliest event kept.
        earliest: Seq,
        /// The correction, in words.
        what: String,
    },
    /// Something this executor does not do yet, named.
    #[error("{0}")]
    Unsupported(String),
}

/// What a repair did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RepairOutcome {
    /// Per namespace, `(log, generation holding its old history)`, swapped atomically.
    pub swapped: BTreeMap<String, Vec<(String, String)>>,
    /// Runs replayed.
    pub replayed: usize,
    /// Records written to shadows (copied, corrected or replayed).
    pub written: u64,
    /// Records whose value the repair changed.
    pub changed: u64,
    /// Per namespace, those records as `(log, first seq, last seq)` ranges.
    pub changed_records: BTreeMap<String, Vec<(String, Seq, Seq)>>,
    /// Per namespace, the seq in its `_events` of the REPAIR event written after the swap.
    pub repair_events: BTreeMap<String, Seq>,
    /// Why the REPAIR event(s) could not all be written, if so. The repair
    /// itself is done (swapped); only its record in `_events` is missing.
    pub event_error: Option<String>,
}

impl RepairOutcome {
    /// Count a record whose value changed (records of a log come in seq order).
    pub(crate) fn note_changed(&mut self, namespace: &str, log: &str, seq: Seq) {
        self.changed += 1;
        let ranges = self.changed_records.entry(namespace.to_owned()).or_default();
        match ranges.iter_mut().rev().find(|(l, _, _)| l == log) {
            Some((_, _, last)) if *last + 1 == seq => *last = seq,
            _ => ranges.push((log.to_owned(), seq, seq)),
        }
    }
}

/// The prefix of shadow logs.
pub const SHADOW_PREFIX: &str = "_shadow.";
/// The prefix of the generations that keep replaced histories: `_gen.LOG.N`.
pub const GENERATION_PREFIX: &str = "_gen.";

/// What [`execute`] needs besides the plan.
pub struct Inputs<'a> {
    /// The events the plan was built from, in causal order.
    pub events: &'a [StoredEvent],
    /// Every namespace the plan changes, writable (no runtime serving them).
    pub namespaces: &'a HashMap<String, Arc<dyn Namespace>>,
    /// The code of every handler the plan replays (new code for a replaced one).
    pub handlers: &'a HashMap<String, HandlerFn>,
    /// The corrected value of each corrected record.
    pub values: &'a HashMap<RecordRef, Vec<u8>>,
    /// What to do with runs of handlers marked `replayable = false`.
    pub not_replayable: NotReplayable,
}

/// What a repair does with the runs of handlers marked `replayable = false`
/// (they act on the world: a mail sent, a valve moved).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NotReplayable {
    /// Refuse the repair ([`RepairError::NotReplayable`]), changing nothing. The default.
    #[default]
    Refuse,
    /// Run them again, as any other handler.
    Run,
    /// Leave them out: their original outputs are kept as they were.
    Skip,
}

/// A log: (namespace, name).
pub(crate) type LogKey = (String, String);

/// A lock of the replay's state. `Mutex`, not `RefCell`: a replaying
/// `HandlerContext` must be `Send` like a live one (the Python binding lends
/// it to whichever Python thread the handler hands it to), so the
/// [`Replay`] behind it is `Sync`. Never contended: one run replays at a time.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Carry out `plan`: shadows, replay, swap. See the module docs.
/// Refused ([`RepairError::Interrupted`]) while an earlier repair of a
/// namespace given is interrupted: [`crate::resume`] it first.
pub fn execute(plan: &RepairPlan, inputs: &Inputs<'_>) -> Result<RepairOutcome, RepairError> {
    check(plan, inputs)?;
    check_none_interrupted(inputs.namespaces)?;
    let mut walk = Walk::new(inputs);
    let result = walk_and_commit(&mut walk, plan, inputs);
    let outcome = std::mem::take(&mut walk.outcome);
    if result.is_err() && outcome.swapped.is_empty() {
        delete_shadows(&walk);
    }
    result?;
    Ok(outcome)
}

fn walk_and_commit<'a>(walk: &mut Walk<'a>, plan: &RepairPlan, inputs: &'a Inputs<'a>) -> Result<(), RepairError> {
    walk.extend(&plan.reruns, &plan.changed, std::borrow::Cow::Borrowed(inputs.events), true)?;
    walk.finish()?;
    let cause = repair_cause(plan, walk.events());
    let commit = Commit::prepare(&plan.corrections, inputs.values, &walk.shadows, &walk.outcome, cause)?;
    commit.run(inputs.namespaces, &mut walk.outcome)
}

/// Refused before any swap: leave the namespaces as they were. (If this
/// fails too, or the process dies, the next repair deletes them.)
pub(crate) fn delete_shadows(walk: &Walk<'_>) {
    for shadow in walk.shadows.values() {
        let _ = shadow.ns.delete_log(&shadow.name);
    }
}

pub(crate) fn namespace(inputs: &Inputs<'_>, name: &str) -> Result<Arc<dyn Namespace>, RepairError> {
    namespace_in(inputs.namespaces, name).cloned()
}

/// Namespace `name` of `namespaces`, or [`RepairError::MissingNamespace`].
pub(crate) fn namespace_in<'n>(
    namespaces: &'n HashMap<String, Arc<dyn Namespace>>,
    name: &str,
) -> Result<&'n Arc<dyn Namespace>, RepairError> {
    namespaces.get(name).ok_or_else(|| RepairError::MissingNamespace { namespace: name.to_owned() })
}

fn check(plan: &RepairPlan, inputs: &Inputs<'_>) -> Result<(), RepairError> {
    crate::reach::check_reach(&plan.corrections, inputs.events)?;
    check_part(&plan.corrections, &plan.reruns, &plan.changed, inputs)
}

/// [`check`] of part of a plan (an online repair checks each round's new runs).
pub(crate) fn check_part(
    corrections: &[Correction],
    reruns: &[Rerun],
    changed: &[ChangedLog],
    inputs: &Inputs<'_>,
) -> Result<(), RepairError> {
    for changed in changed {
        namespace(inputs, &changed.namespace)?;
    }
    for rerun in reruns {
        if !inputs.handlers.contains_key(&rerun.handler) {
            return Err(RepairError::MissingHandler { handler: rerun.handler.clone() });
        }
        if !rerun.replayable && inputs.not_replayable == NotReplayable::Refuse {
            let runs = reruns.iter().filter(|r| r.handler == rerun.handler).count();
            return Err(RepairError::NotReplayable { handler: rerun.handler.clone(), runs });
        }
    }
    for correction in corrections {
        if let Correction::Record(r) = correction {
            if !inputs.values.contains_key(r) {
                return Err(RepairError::MissingValue { record: format!("{}/{}:{}", r.namespace, r.log, r.seq) });
            }
        }
    }
    Ok(())
}

/// The REPAIR event's parent (which lends it its trace): the APPEND of the
/// first corrected record, if among `events`.
pub(crate) fn repair_cause<'e>(plan: &RepairPlan, events: &'e [StoredEvent]) -> Option<&'e StoredEvent> {
    let record = plan.corrected_records().next()?;
    events.iter().find(|e| {
        e.event.kind == EventKind::Append
            && e.id.namespace == record.namespace
            && e.event.log == record.log
            && e.event.seq == record.seq
    })
}
