//! Executing a plan (Sans-Souci §7.2.2, §7.3): shadow logs, the replay of
//! each run with its reads pinned to what it originally saw, the copy of
//! the records that do not depend on the repair, and the atomic swap.
//!
//! **The walk.** Events are taken in causal order. For every log that
//! changes, a shadow (`_shadow.LOG`) gets the records before the first
//! change, copied; then, at each APPEND of that log: a corrected record's
//! new value; a replayed run's output with the same ordinal (the run is
//! replayed at its first write, or at its outcome if it wrote nothing, and
//! its appends are held until their places come); any other record copied
//! as it is (records appended without events too, at their seqs). So every record keeps its seq, and a run
//! replayed later that reads a repaired record reads the shadow.
//!
//! **Pinned reads.** A replayed run's `latest(log)` returns what it returned
//! originally (the LATEST reads recorded for that run, in order); its
//! `get`/`scan` read the shadow where the log has one and the seq is past
//! the first change, the original otherwise. Its appends go to the
//! shadows, nowhere else; nothing is triggered (the plan already has the
//! runs downstream, at their places).
//!
//! A run's appends to another namespace (`HandlerContext::append_via`)
//! are held and placed the same way, in that namespace's shadows.
//!
//! **The swap** is one `rename_logs` per namespace: `LOG` becomes
//! `_gen.LOG.N` (the old history, still readable) and `_shadow.LOG` becomes
//! `LOG`, for every log of that namespace at once. Before it, the original
//! logs are untouched (a crash leaves stale shadows, which the next repair
//! deletes and rebuilds; an error deletes them at once); after it, the
//! repaired logs are in place. Then a REPAIR event in each namespace's
//! `_events` names the records whose values changed and what was
//! corrected (the causal graph makes it a parent of each of them).
//!
//! **Limits.** The repair is offline: no runtime may serve the namespaces
//! (another process's is kept out by the store's writer lock; one in this
//! process is the caller's to stop — the Python binding checks). Typed
//! errors: a replayed run must write as many records to each log as it did
//! (a repair that changes how many records a handler writes moves seqs,
//! which this executor refuses rather than renumber); logs with trimmed
//! records cannot be shadowed seq for seq; a read of a repaired record not
//! yet written (runs interleaved by concurrent workers). Only the last
//! attempt of a retried run is replayed; what earlier attempts appended is
//! kept as it was. A swap spans one namespace at a time (each atomic, not
//! all of them together).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use varve_log::{LogError, Namespace, Record, Seq, SeqRange};
use varve_runtime::trace::RecordRef;
use varve_runtime::{
    Event, EventId, EventKind, HandlerContext, HandlerFn, ReadDep, Replay, RuntimeError, StoredEvent, EVENTS_LOG,
};

use crate::plan::{Correction, RepairPlan};

/// Why a repair could not be carried out. Nothing is swapped after any of
/// these — except in a repair spanning several namespaces, where a failed
/// swap of a later namespace leaves the earlier ones swapped (each swap is
/// atomic on its own).
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
    #[error("the repair changes namespace {namespace:?}, which was not given: open it and pass it too")]
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
    fn note_changed(&mut self, namespace: &str, log: &str, seq: Seq) {
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

/// Records copied per `append_batch`.
const COPY_BATCH: usize = 1_000;

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

type LogKey = (String, String);

/// A lock of the replay's state. `Mutex`, not `RefCell`: a replaying
/// `HandlerContext` must be `Send` like a live one (the Python binding lends
/// it to whichever Python thread the handler hands it to), so the
/// [`Replay`] behind it is `Sync`. Never contended: one run replays at a time.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The state of one shadow.
struct Shadow {
    ns: Arc<dyn Namespace>,
    name: String,
    /// First seq that changes; records before it were copied.
    first: Seq,
}

/// What a replayed run wrote, per log, in order.
type Written = HashMap<LogKey, Vec<Vec<u8>>>;

/// Carry out `plan`: shadows, replay, swap. See the module docs.
pub fn execute(plan: &RepairPlan, inputs: &Inputs<'_>) -> Result<RepairOutcome, RepairError> {
    check(plan, inputs)?;
    let mut outcome = RepairOutcome::default();
    let mut shadows: HashMap<LogKey, Shadow> = HashMap::new();
    let result = shadow_replay_swap(plan, inputs, &mut shadows, &mut outcome);
    if result.is_err() && outcome.swapped.is_empty() {
        // Refused before any swap: leave the namespaces as they were. (If
        // this fails too, or the process dies, the next repair deletes them.)
        for shadow in shadows.values() {
            let _ = shadow.ns.delete_log(&shadow.name);
        }
    }
    result?;
    // After the swap an error must not read as "nothing was repaired".
    if let Err(e) = record_repair(plan, inputs, &mut outcome) {
        outcome.event_error = Some(e.to_string());
    }
    Ok(outcome)
}

/// The shadows, the walk and the swap; `shadows` holds every shadow made, even on an error.
fn shadow_replay_swap(
    plan: &RepairPlan,
    inputs: &Inputs<'_>,
    shadows: &mut HashMap<LogKey, Shadow>,
    outcome: &mut RepairOutcome,
) -> Result<(), RepairError> {
    for changed in &plan.changed {
        let ns = namespace(inputs, &changed.namespace)?;
        let shadow = make_shadow(&ns, &changed.log, changed.first, outcome)?;
        shadows.insert((changed.namespace.clone(), changed.log.clone()), shadow);
    }
    let shadows = &*shadows;
    // Records appended without events before a log's first recorded one
    // (before the runtime served the namespace) are placed now: a replayed
    // run may read them.
    let mut first_recorded: HashMap<LogKey, Seq> = HashMap::new();
    for e in inputs.events {
        if e.event.kind == EventKind::Append {
            let key = (e.id.namespace.clone(), e.event.log.clone());
            if shadows.get(&key).is_some_and(|shadow| e.event.seq >= shadow.first) {
                first_recorded.entry(key).or_insert(e.event.seq);
            }
        }
    }
    for ((namespace, log), shadow) in shadows {
        let up_to = match first_recorded.get(&(namespace.clone(), log.clone())) {
            Some(&seq) => seq - 1,
            None => shadow.ns.latest(log)?,
        };
        fill(shadow, namespace, log, up_to, inputs.values, outcome)?;
    }
    let changing: HashSet<(&str, &str, Seq)> = plan
        .changed
        .iter()
        .flat_map(|c| c.seqs.iter().chain(&c.may_change).map(move |&seq| (c.namespace.as_str(), c.log.as_str(), seq)))
        .collect();
    let mut walk = Walk::new(plan, inputs, shadows, &changing, std::mem::take(outcome))?;
    *lock(&walk.seen) = history_before_events(inputs)?;
    for e in inputs.events {
        walk.event(e)?;
    }
    for run in 0..plan.reruns.len() {
        // Runs whose outcome is not on record (cut short) are replayed last.
        walk.replay_now(run)?;
    }
    *outcome = walk.outcome;
    // Records after the last event (appended without events) are copied,
    // corrected where a correction names one of them.
    for ((namespace, log), shadow) in shadows {
        let original = shadow.ns.latest(log)?;
        fill(shadow, namespace, log, original, inputs.values, outcome)?;
    }
    swap(shadows, outcome)
}

/// After the swap, a REPAIR event in each namespace's `_events` (where it
/// has one): the records it replaced, what was corrected, where the old
/// histories are. A crash between the swap and this append leaves the
/// repair done without its event; the `_gen.*` logs still show it.
fn record_repair(plan: &RepairPlan, inputs: &Inputs<'_>, outcome: &mut RepairOutcome) -> Result<(), RepairError> {
    let records: Vec<&RecordRef> = plan.corrected_records().collect();
    let handler = plan.corrections.iter().find_map(|c| match c {
        Correction::Handler { handler, .. } => Some(handler.as_str()),
        Correction::Record(_) => None,
    });
    let mut what = Vec::new();
    if let Some(first) = records.first() {
        let more = match records.len() {
            1 => String::new(),
            n => format!(" and {} more record(s)", n - 1),
        };
        what.push(format!("corrected {}/{}:{}{more}", first.namespace, first.log, first.seq));
    }
    if let Some(handler) = handler {
        what.push(format!("replaced handler {handler:?}"));
    }
    // The first correction's APPEND is the REPAIR's parent (and lends it its trace).
    let cause = records.first().and_then(|r| {
        inputs.events.iter().find(|e| {
            e.event.kind == EventKind::Append
                && e.id.namespace == r.namespace
                && e.event.log == r.log
                && e.event.seq == r.seq
        })
    });
    for (namespace, swapped) in &outcome.swapped {
        let ns = self::namespace(inputs, namespace)?;
        match ns.latest(EVENTS_LOG) {
            Err(LogError::LogNotFound { .. }) => continue, // no runtime ever served it: no event log
            Err(e) => return Err(e.into()),
            Ok(_) => {}
        }
        let generations: Vec<&str> = swapped.iter().map(|(_, generation)| generation.as_str()).collect();
        let trace = cause.map_or_else(rand::random::<u128>, |c| c.event.trace);
        let mut event = Event::new(EventKind::Repair, trace, cause.map(|c| c.id.clone()));
        handler.unwrap_or_default().clone_into(&mut event.handler);
        event.reason = format!("{}; old histories kept as {}", what.join(", "), generations.join(", "));
        event.reads = outcome
            .changed_records
            .get(namespace)
            .into_iter()
            .flatten()
            .map(|(log, first, last)| ReadDep::read(log, *first, *last))
            .collect();
        let seq = ns.append(EVENTS_LOG, &event.encode())?;
        outcome.repair_events.insert(namespace.clone(), seq);
    }
    Ok(())
}

/// The walk over the events in causal order (see the module docs).
struct Walk<'a> {
    plan: &'a RepairPlan,
    inputs: &'a Inputs<'a>,
    shadows: &'a HashMap<LogKey, Shadow>,
    changing: &'a HashSet<(&'a str, &'a str, Seq)>,
    /// A rerun's FIRING id → its index.
    firing_of: HashMap<EventId, usize>,
    /// Each rerun's FIRING event.
    firings: HashMap<usize, &'a StoredEvent>,
    /// (namespace, log, seq) of an original output → (run, ordinal among its appends to that log).
    slots: HashMap<(String, String, Seq), (usize, usize)>,
    /// Per run, how many records it originally wrote to each log.
    counts: Vec<HashMap<LogKey, usize>>,
    /// Per run, the LATEST values it got, per log, in call order.
    pinned: Vec<HashMap<String, Vec<Seq>>>,
    /// Per run, what its replay wrote (once replayed).
    outputs: Vec<Option<Written>>,
    /// Runs left out ([`NotReplayable::Skip`]): their original outputs are copied.
    skipped: Vec<bool>,
    /// Per log, the last seq whose APPEND the walk has passed: the history a
    /// run replayed at this point saw (later records did not exist for it).
    seen: Mutex<HashMap<LogKey, Seq>>,
    outcome: RepairOutcome,
}

impl<'a> Walk<'a> {
    fn new(
        plan: &'a RepairPlan,
        inputs: &'a Inputs<'a>,
        shadows: &'a HashMap<LogKey, Shadow>,
        changing: &'a HashSet<(&'a str, &'a str, Seq)>,
        outcome: RepairOutcome,
    ) -> Result<Walk<'a>, RepairError> {
        let runs = plan.reruns.len();
        // The plan names FIRINGs in text form (it is serialized).
        let mut firing_of: HashMap<EventId, usize> = HashMap::with_capacity(runs);
        for (i, r) in plan.reruns.iter().enumerate() {
            let id = EventId::parse(&r.firing).map_err(|e| {
                RepairError::Unsupported(format!(
                    "the plan's run {i} names FIRING {:?}, not an event id ({e})",
                    r.firing
                ))
            })?;
            firing_of.insert(id, i);
        }
        let mut walk = Walk {
            plan,
            inputs,
            shadows,
            changing,
            firings: HashMap::new(),
            slots: HashMap::new(),
            counts: vec![HashMap::new(); runs],
            pinned: vec![HashMap::new(); runs],
            outputs: vec![None; runs],
            skipped: plan
                .reruns
                .iter()
                .map(|r| !r.replayable && inputs.not_replayable == NotReplayable::Skip)
                .collect(),
            seen: Mutex::new(HashMap::new()),
            outcome,
            firing_of,
        };
        for e in inputs.events {
            if e.event.kind == EventKind::Firing {
                if let Some(&run) = walk.firing_of.get(&e.id) {
                    walk.firings.insert(run, e);
                }
            }
            let Some(run) = walk.run_of(e) else { continue };
            for read in e.event.read_views() {
                if read.kind == EventKind::Latest {
                    walk.pinned[run].entry(read.log.to_owned()).or_default().push(read.seq);
                }
            }
            if e.event.kind == EventKind::Append {
                let key = (e.id.namespace.clone(), e.event.log.clone());
                let ordinal = walk.counts[run].entry(key).or_default();
                walk.slots.insert((e.id.namespace.clone(), e.event.log.clone(), e.event.seq), (run, *ordinal));
                *ordinal += 1;
            }
        }
        Ok(walk)
    }

    /// The rerun whose FIRING caused `e`.
    fn run_of(&self, e: &StoredEvent) -> Option<usize> {
        e.event.parent.as_ref().and_then(|p| self.firing_of.get(p)).copied()
    }

    fn event(&mut self, e: &StoredEvent) -> Result<(), RepairError> {
        match e.event.kind {
            // A run is replayed where its first write was (its reads before
            // it are satisfied there: they were recorded with that write),
            // or at its outcome if it wrote nothing. Not at its FIRING: a
            // worker claims several triggers at once and runs them in turn.
            EventKind::Done | EventKind::Failed => {
                if let Some(run) = self.run_of(e) {
                    self.replay_now(run)?;
                }
                Ok(())
            }
            EventKind::Append => self.append(e),
            _ => Ok(()),
        }
    }

    fn replay_now(&mut self, run: usize) -> Result<(), RepairError> {
        if self.outputs[run].is_some() || self.skipped[run] {
            return Ok(());
        }
        let firing = self.firings.get(&run).copied().ok_or_else(|| {
            RepairError::Unsupported(format!(
                "the FIRING of the run of {:?} to replay is not among the events",
                self.plan.reruns[run].handler
            ))
        })?;
        let view = View::new(self.inputs, self.shadows, self.changing, &self.seen, firing, &self.pinned[run]);
        let written = replay(self.plan, self.inputs, &view, run, firing)?;
        check_counts(self.plan, run, &self.counts[run], &written)?;
        self.outcome.replayed += 1;
        self.outputs[run] = Some(written);
        Ok(())
    }

    fn append(&mut self, e: &StoredEvent) -> Result<(), RepairError> {
        let namespace = e.id.namespace.as_str();
        let (log, seq) = (e.event.log.as_str(), e.event.seq);
        let key = (namespace.to_owned(), log.to_owned());
        let slot = self
            .slots
            .get(&(namespace.to_owned(), log.to_owned(), seq))
            .copied()
            .filter(|(run, _)| !self.skipped[*run]);
        if let Some((run, _)) = slot {
            self.replay_now(run)?;
        }
        let Some(shadow) = self.shadows.get(&key).filter(|shadow| seq >= shadow.first) else {
            lock(&self.seen).insert(key, seq);
            return Ok(());
        };
        // Records appended without events since the last recorded one.
        fill(shadow, namespace, log, seq - 1, self.inputs.values, &mut self.outcome)?;
        let record = RecordRef { namespace: namespace.to_owned(), log: log.to_owned(), seq };
        let value: Vec<u8> = if let Some(value) = self.inputs.values.get(&record) {
            self.outcome.note_changed(namespace, log, seq);
            value.clone()
        } else if let Some((run, ordinal)) = slot {
            let value = self.outputs[run].as_ref().and_then(|o| o.get(&key)).and_then(|v| v.get(ordinal)).cloned();
            let value = value.ok_or_else(|| {
                // `check_counts` made the replay write as many records here as
                // the run did, so this is a broken invariant, not a user's error.
                RepairError::Unsupported(format!(
                    "the replay has no output for {namespace}/{log}:{seq} though it wrote as many records as the \
                     original run: a bug in the repair, please report it"
                ))
            })?;
            if value.as_slice() != shadow.ns.get(log, seq)?.as_ref() {
                self.outcome.note_changed(namespace, log, seq);
            }
            value
        } else {
            shadow.ns.get(log, seq)?.to_vec()
        };
        let at = shadow.ns.append(&shadow.name, &value)?;
        lock(&self.seen).insert(key, seq);
        self.outcome.written += 1;
        if at != seq {
            return Err(RepairError::Unsupported(format!(
                "{namespace}/{} would hold {namespace}/{log}:{seq} at seq {at}: records appended outside the runtime \
                 (without events) cannot be placed",
                shadow.name
            )));
        }
        Ok(())
    }
}

fn namespace(inputs: &Inputs<'_>, name: &str) -> Result<Arc<dyn Namespace>, RepairError> {
    inputs.namespaces.get(name).cloned().ok_or_else(|| RepairError::MissingNamespace { namespace: name.to_owned() })
}

fn check(plan: &RepairPlan, inputs: &Inputs<'_>) -> Result<(), RepairError> {
    for changed in &plan.changed {
        namespace(inputs, &changed.namespace)?;
    }
    for rerun in &plan.reruns {
        if !inputs.handlers.contains_key(&rerun.handler) {
            return Err(RepairError::MissingHandler { handler: rerun.handler.clone() });
        }
        if !rerun.replayable && inputs.not_replayable == NotReplayable::Refuse {
            let runs = plan.reruns.iter().filter(|r| r.handler == rerun.handler).count();
            return Err(RepairError::NotReplayable { handler: rerun.handler.clone(), runs });
        }
    }
    for correction in &plan.corrections {
        if let crate::Correction::Record(r) = correction {
            if !inputs.values.contains_key(r) {
                return Err(RepairError::MissingValue { record: format!("{}/{}:{}", r.namespace, r.log, r.seq) });
            }
        }
    }
    Ok(())
}

fn make_shadow(
    ns: &Arc<dyn Namespace>,
    log: &str,
    first: Seq,
    outcome: &mut RepairOutcome,
) -> Result<Shadow, RepairError> {
    let info = ns.log_info(log)?;
    if info.earliest > 1 {
        return Err(RepairError::Unsupported(format!(
            "{}/{log} has trimmed records (earliest seq {}): a shadow cannot hold the same seqs; logs with \
             overwrite retention are not repaired yet",
            ns.name(),
            info.earliest
        )));
    }
    let name = format!("{SHADOW_PREFIX}{log}");
    match ns.delete_log(&name) {
        Ok(()) | Err(LogError::LogNotFound { .. }) => {} // a stale shadow of an interrupted repair
        Err(e) => return Err(e.into()),
    }
    ns.create_log(&name, info.config.system())?;
    if first > 1 {
        outcome.written += copy(ns, log, &name, 1, first - 1)?;
    }
    Ok(Shadow { ns: Arc::clone(ns), name, first })
}

/// Per log of every namespace given, the records that existed before the
/// walk's first event: those before the log's first APPEND event (appended
/// while no runtime served the namespace), or all of them if it has none.
fn history_before_events(inputs: &Inputs<'_>) -> Result<HashMap<LogKey, Seq>, RepairError> {
    let mut first_append: HashMap<LogKey, Seq> = HashMap::new();
    for e in inputs.events {
        if e.event.kind == EventKind::Append {
            first_append.entry((e.id.namespace.clone(), e.event.log.clone())).or_insert(e.event.seq);
        }
    }
    let mut seen = HashMap::new();
    for (namespace, ns) in inputs.namespaces {
        for info in ns.list_logs()? {
            let key = (namespace.clone(), info.name);
            let before = first_append.get(&key).map_or(info.latest, |&first| first - 1);
            seen.insert(key, before);
        }
    }
    Ok(seen)
}

/// Bring `shadow` up to `up_to` with the original's records (appended
/// without events), corrected where a correction names one.
fn fill(
    shadow: &Shadow,
    namespace: &str,
    log: &str,
    up_to: Seq,
    values: &HashMap<RecordRef, Vec<u8>>,
    outcome: &mut RepairOutcome,
) -> Result<(), RepairError> {
    for seq in shadow.ns.latest(&shadow.name)? + 1..=up_to {
        let record = RecordRef { namespace: namespace.to_owned(), log: log.to_owned(), seq };
        let value = match values.get(&record) {
            Some(value) => {
                outcome.note_changed(namespace, log, seq);
                Bytes::copy_from_slice(value)
            }
            None => shadow.ns.get(log, seq)?,
        };
        shadow.ns.append(&shadow.name, &value)?;
        outcome.written += 1;
    }
    Ok(())
}

fn copy(ns: &Arc<dyn Namespace>, from: &str, to: &str, first: Seq, last: Seq) -> Result<u64, RepairError> {
    let mut buffer: Vec<Record> = Vec::with_capacity(COPY_BATCH);
    let mut copied = 0;
    let flush = |buffer: &mut Vec<Record>| -> Result<u64, RepairError> {
        let batch: Vec<(&str, &[u8])> = buffer.iter().map(|r| (to, r.value.as_ref())).collect();
        if !batch.is_empty() {
            ns.append_batch(&batch)?;
        }
        let n = buffer.len() as u64;
        buffer.clear();
        Ok(n)
    };
    for record in ns.scan(from, SeqRange { first, last })? {
        buffer.push(record?);
        if buffer.len() == COPY_BATCH {
            copied += flush(&mut buffer)?;
        }
    }
    copied += flush(&mut buffer)?;
    Ok(copied)
}

/// What a replayed run sees and where its appends go.
struct View<'a> {
    firing_namespace: &'a str,
    inputs: &'a Inputs<'a>,
    shadows: &'a HashMap<LogKey, Shadow>,
    /// Every record the repair changes: one not yet in its shadow cannot be read from the original.
    changing: &'a HashSet<(&'a str, &'a str, Seq)>,
    /// Per log, the last seq that existed when the run ran.
    seen: &'a Mutex<HashMap<LogKey, Seq>>,
    /// LATEST values the original run got, per log, in call order.
    pinned: Mutex<HashMap<String, std::collections::VecDeque<Seq>>>,
    written: Mutex<HashMap<LogKey, Vec<Vec<u8>>>>,
}

impl<'a> View<'a> {
    fn new(
        inputs: &'a Inputs<'a>,
        shadows: &'a HashMap<LogKey, Shadow>,
        changing: &'a HashSet<(&'a str, &'a str, Seq)>,
        seen: &'a Mutex<HashMap<LogKey, Seq>>,
        firing: &'a StoredEvent,
        pinned: &HashMap<String, Vec<Seq>>,
    ) -> View<'a> {
        View {
            firing_namespace: firing.id.namespace.as_str(),
            inputs,
            shadows,
            changing,
            seen,
            pinned: Mutex::new(
                pinned.iter().map(|(log, seqs)| (log.clone(), seqs.iter().copied().collect())).collect(),
            ),
            written: Mutex::new(HashMap::new()),
        }
    }

    /// The last seq of `log` that existed when the run ran.
    fn seen(&self, log: &str) -> Seq {
        lock(self.seen).get(&(self.firing_namespace.to_owned(), log.to_owned())).copied().unwrap_or(0)
    }

    /// Where the run reads `log` at `seq`: the shadow if it holds it, the
    /// original if the repair leaves that record as it is.
    fn source(&self, log: &str, seq: Seq) -> Result<(Arc<dyn Namespace>, String), RuntimeError> {
        let ns = namespace(self.inputs, self.firing_namespace)
            .map_err(|e| RuntimeError::InvalidArgument { reason: e.to_string() })?;
        if let Some(shadow) = self.shadows.get(&(self.firing_namespace.to_owned(), log.to_owned())) {
            if seq >= shadow.first {
                if seq <= shadow.ns.latest(&shadow.name)? {
                    return Ok((Arc::clone(&shadow.ns), shadow.name.clone()));
                }
                if self.changing.contains(&(self.firing_namespace, log, seq)) {
                    return Err(RuntimeError::InvalidArgument {
                        reason: format!(
                            "the replay reads {}/{log}:{seq}, which the repair changes but has not written yet: the \
                             original run read it between two of its own writes while other runs wrote; such \
                             interleavings are not replayed yet",
                            self.firing_namespace
                        ),
                    });
                }
            }
        }
        Ok((ns, log.to_owned()))
    }
}

impl Replay for View<'_> {
    fn get(&self, log: &str, seq: Seq) -> varve_runtime::Result<Bytes> {
        let (ns, name) = self.source(log, seq)?;
        Ok(ns.get(&name, seq)?)
    }

    fn latest(&self, log: &str) -> varve_runtime::Result<Seq> {
        if let Some(seq) = lock(&self.pinned).get_mut(log).and_then(std::collections::VecDeque::pop_front) {
            return Ok(seq);
        }
        // A call the original run did not make (its control flow changed):
        // the tail of the history it ran in.
        Ok(self.seen(log))
    }

    fn scan(&self, log: &str, range: SeqRange) -> varve_runtime::Result<Vec<Record>> {
        let mut out = Vec::new();
        for seq in range.first..=range.last.min(self.seen(log)) {
            let (ns, name) = self.source(log, seq)?;
            match ns.get(&name, seq) {
                Ok(value) => out.push(Record { seq, value }),
                Err(LogError::SeqNotFound { .. }) => break,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(out)
    }

    fn append_batch(&self, batch: &[(&str, &[u8])]) -> varve_runtime::Result<Vec<Seq>> {
        self.append_batch_in(self.firing_namespace, batch)
    }

    fn append_batch_in(&self, namespace: &str, batch: &[(&str, &[u8])]) -> varve_runtime::Result<Vec<Seq>> {
        let mut written = lock(&self.written);
        let mut seqs = Vec::with_capacity(batch.len());
        for (log, value) in batch {
            let list = written.entry((namespace.to_owned(), (*log).to_owned())).or_default();
            list.push(value.to_vec());
            seqs.push(list.len() as Seq);
        }
        Ok(seqs)
    }
}

fn replay(
    plan: &RepairPlan,
    inputs: &Inputs<'_>,
    view: &View<'_>,
    run: usize,
    firing: &StoredEvent,
) -> Result<HashMap<LogKey, Vec<Vec<u8>>>, RepairError> {
    let rerun = &plan.reruns[run];
    let namespace = firing.id.namespace.as_str();
    let trigger = format!("{}/{}:{}", rerun.trigger.namespace, rerun.trigger.log, rerun.trigger.seq);
    let value = view.get(&rerun.trigger.log, rerun.trigger.seq).map_err(|e| RepairError::HandlerFailed {
        handler: rerun.handler.clone(),
        trigger: trigger.clone(),
        reason: format!("reading its triggering record: {e}"),
    })?;
    let handler = &inputs.handlers[&rerun.handler];
    let mut ctx = HandlerContext::replaying(
        view,
        EventId { host: firing.id.host, namespace: namespace.to_owned(), seq: firing.id.seq },
        firing.event.trace,
        &rerun.handler,
        &rerun.trigger.log,
        rerun.trigger.seq,
        value,
    );
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(&mut ctx)));
    let reason = match outcome {
        Ok(Ok(())) => None,
        Ok(Err(error)) => Some(error.to_string()),
        Err(panic) => Some(format!(
            "panicked: {}",
            panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-string payload".to_owned())
        )),
    };
    if let Some(reason) = reason {
        return Err(RepairError::HandlerFailed { handler: rerun.handler.clone(), trigger, reason });
    }
    drop(ctx);
    Ok(std::mem::take(&mut *lock(&view.written)))
}

fn check_counts(
    plan: &RepairPlan,
    run: usize,
    before: &HashMap<LogKey, usize>,
    now: &HashMap<LogKey, Vec<Vec<u8>>>,
) -> Result<(), RepairError> {
    let rerun = &plan.reruns[run];
    let logs: HashSet<&LogKey> = before.keys().chain(now.keys()).collect();
    for key in logs {
        let (b, n) = (before.get(key).copied().unwrap_or(0), now.get(key).map_or(0, Vec::len));
        if b != n {
            return Err(RepairError::CountChanged {
                handler: rerun.handler.clone(),
                trigger: format!("{}/{}:{}", rerun.trigger.namespace, rerun.trigger.log, rerun.trigger.seq),
                log: format!("{}/{}", key.0, key.1),
                before: b,
                now: n,
            });
        }
    }
    Ok(())
}

/// One `rename_logs` per namespace: every changed log there to its next
/// generation, its shadow to its name.
fn swap(shadows: &HashMap<LogKey, Shadow>, outcome: &mut RepairOutcome) -> Result<(), RepairError> {
    let mut by_namespace: BTreeMap<&str, Vec<(&str, &Shadow)>> = BTreeMap::new();
    for ((namespace, log), shadow) in shadows {
        by_namespace.entry(namespace).or_default().push((log, shadow));
    }
    for (namespace, logs) in by_namespace {
        let ns = &logs[0].1.ns;
        let existing: HashSet<String> = ns.list_logs()?.into_iter().map(|l| l.name).collect();
        let mut renames: Vec<(String, String)> = Vec::new();
        let mut swapped = Vec::new();
        for (log, shadow) in &logs {
            // The first free generation number; at most one per log exists per earlier repair.
            let generation = (1..=existing.len() + 1)
                .map(|n| format!("{GENERATION_PREFIX}{log}.{n}"))
                .find(|name| !existing.contains(name))
                .unwrap_or_default();
            renames.push(((*log).to_owned(), generation.clone()));
            renames.push((shadow.name.clone(), (*log).to_owned()));
            swapped.push(((*log).to_owned(), generation));
        }
        let pairs: Vec<(&str, &str)> = renames.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        ns.rename_logs(&pairs)?;
        swapped.sort();
        outcome.swapped.insert(namespace.to_owned(), swapped);
    }
    Ok(())
}
