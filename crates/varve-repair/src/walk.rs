//! The walk over the events in causal order that carries a plan out.
//!
//! For every log that changes, a shadow (`_shadow.LOG`) gets the records
//! before the first change, copied; then, at each APPEND of that log: a
//! corrected record's new value; a replayed run's output with the same
//! ordinal (the run is replayed at its first write the repair changes — its
//! writes before that, made before it read anything that changes, are left
//! as they were — or at its outcome if none changes, and its appends are
//! held until their places come); any
//! other record copied as it is (records appended without events too, at
//! their seqs). So every record keeps its seq, and a run replayed later that
//! reads a repaired record reads the shadow.
//!
//! **Pinned reads.** A replayed run's `latest(log)` returns what it returned
//! originally (the LATEST reads recorded for that run, in order); its
//! `get`/`scan` read the shadow where the log has one and the seq is past
//! the first change, the original otherwise. Its appends go to the
//! shadows, nowhere else; nothing is triggered (the plan already has the
//! runs downstream, at their places). A run's appends to another namespace
//! (`HandlerContext::append_via`) are held and placed the same way, in
//! that namespace's shadows.
//!
//! **In rounds.** The walk can be fed events in pieces, each with the plan
//! of everything fed so far ([`Walk::extend`]): an online repair walks
//! while the application appends, then pauses it for the last piece. A
//! round walks only up to the FIRING of the first run that has no outcome
//! yet: before it, every run's events are all there and its place in the
//! plan is final (the plan is one forward pass; `Planner`). Runs are kept
//! by their TRIGGER event, so their indices hold as the plan grows.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use varve_log::{LogError, Namespace, Record, Seq, SeqRange};
use varve_runtime::trace::RecordRef;
use varve_runtime::{EventId, EventKind, HandlerContext, Replay, RuntimeError, StoredEvent};

use crate::execute::{lock, namespace, Inputs, LogKey, NotReplayable, RepairError, RepairOutcome, SHADOW_PREFIX};
use crate::plan::{ChangedLog, Rerun};

/// Records copied per `append_batch`.
const COPY_BATCH: usize = 1_000;

/// An event id without its namespace's name: (host, namespace index, seq).
type Key = (u64, u32, Seq);

/// The state of one shadow.
pub(crate) struct Shadow {
    pub(crate) ns: Arc<dyn Namespace>,
    pub(crate) name: String,
    /// First seq that changes; records before it were copied.
    pub(crate) first: Seq,
}

/// What a replayed run wrote, per log, in order.
type Written = HashMap<LogKey, Vec<Vec<u8>>>;

/// The walk (see the module docs).
pub(crate) struct Walk<'a> {
    inputs: &'a Inputs<'a>,
    /// Every event fed, in causal order (borrowed when fed once, offline).
    events: Cow<'a, [StoredEvent]>,
    /// Events before this position have been walked.
    walked: usize,
    /// Namespace names → the index events' [`Key`]s use.
    namespace_index: HashMap<String, u32>,
    /// Per run, the position of its FIRING.
    firing_at: Vec<Option<usize>>,
    /// Per run, the positions of the events its FIRING caused (its appends, reads, outcome).
    caused: Vec<Vec<usize>>,
    /// Runs without an outcome among the events fed, while rounds go on:
    /// (host, namespace, trigger) → position of its last FIRING.
    open: HashMap<Key, usize>,
    /// The positions in `open`, ordered: a round may not walk past the first.
    open_positions: BTreeSet<usize>,
    /// The plan's runs to replay, by the walk's index (stable as the plan grows).
    reruns: Vec<Rerun>,
    /// Per run, the records it replaces or may replace (its appends that
    /// are not among them are left as they were).
    changes: Vec<HashSet<RecordRef>>,
    /// Runs the walk passed appends of before replaying them (appends the
    /// repair leaves as they were): per log that grew since, the last seq
    /// that existed at the run's first append — the history it saw there,
    /// where it was replayed before (scans and calls the original run did
    /// not make read no further).
    held: HashMap<usize, HashMap<LogKey, Seq>>,
    /// A rerun's TRIGGER event (text) → its index.
    index_of: HashMap<String, usize>,
    /// A rerun's FIRING (its last attempt) → its index.
    firing_of: HashMap<EventId, usize>,
    /// Per run, how many of its original appends to each log the walk has passed.
    ordinals: Vec<HashMap<LogKey, usize>>,
    /// Per run, what its replay wrote (once replayed).
    outputs: Vec<Option<Written>>,
    /// Runs left out ([`NotReplayable::Skip`]): their original outputs are copied.
    skipped: Vec<bool>,
    /// Every log that changes → its shadow.
    pub(crate) shadows: HashMap<LogKey, Shadow>,
    /// Every record the repair changes or may change.
    changing: HashMap<LogKey, BTreeSet<Seq>>,
    /// Per log, the last seq that existed at the walk's position: the
    /// history a run replayed here saw (later records did not exist for it).
    seen: Mutex<HashMap<LogKey, Seq>>,
    /// `seen` holds the history before the first event.
    seen_ready: bool,
    /// Per log, the seq of the last APPEND walked (while rounds go on).
    passed: HashMap<LogKey, Seq>,
    /// More rounds may come: keep `open` and `passed`.
    rounds_go_on: bool,
    pub(crate) outcome: RepairOutcome,
}

impl<'a> Walk<'a> {
    pub(crate) fn new(inputs: &'a Inputs<'a>) -> Walk<'a> {
        Walk {
            inputs,
            events: Cow::Owned(Vec::new()),
            walked: 0,
            namespace_index: HashMap::new(),
            firing_at: Vec::new(),
            caused: Vec::new(),
            open: HashMap::new(),
            open_positions: BTreeSet::new(),
            reruns: Vec::new(),
            changes: Vec::new(),
            held: HashMap::new(),
            index_of: HashMap::new(),
            firing_of: HashMap::new(),
            ordinals: Vec::new(),
            outputs: Vec::new(),
            skipped: Vec::new(),
            shadows: HashMap::new(),
            changing: HashMap::new(),
            seen: Mutex::new(HashMap::new()),
            seen_ready: false,
            passed: HashMap::new(),
            rounds_go_on: true,
            outcome: RepairOutcome::default(),
        }
    }

    /// Every event fed so far, in causal order.
    pub(crate) fn events(&self) -> &[StoredEvent] {
        &self.events
    }

    fn key(&mut self, host: u64, namespace: &str, seq: Seq) -> Key {
        let next = u32::try_from(self.namespace_index.len()).unwrap_or(u32::MAX);
        let index = match self.namespace_index.get(namespace) {
            Some(&index) => index,
            None => *self.namespace_index.entry(namespace.to_owned()).or_insert(next),
        };
        (host, index, seq)
    }

    fn key_of(&self, id: &EventId) -> Option<Key> {
        self.namespace_index.get(id.namespace.as_str()).map(|&index| (id.host, index, id.seq))
    }

    /// Take the next `events` (in causal order after those fed before) and
    /// what the plan of every event fed so far adds to the plan the walk has
    /// (`reruns` new or changed, records newly `changed`; or the whole plan);
    /// walk as far as the plan is final — to the end if `last` (no run is
    /// still running).
    pub(crate) fn extend(
        &mut self,
        reruns: &[Rerun],
        changed: &[ChangedLog],
        events: Cow<'a, [StoredEvent]>,
        last: bool,
    ) -> Result<(), RepairError> {
        let start = self.events.len();
        if self.events.is_empty() {
            self.events = events;
        } else {
            self.events.to_mut().extend(events.into_owned());
        }
        self.rounds_go_on = !last;
        self.adopt(reruns, changed, start)?;
        self.index(start);
        if !self.seen_ready {
            *lock(&self.seen) = history_before_events(&self.events, self.inputs)?;
            self.seen_ready = true;
        }
        let limit = match (last, self.open_positions.first()) {
            (false, Some(&first_open)) => first_open,
            _ => self.events.len(),
        };
        let events = std::mem::take(&mut self.events);
        let result = (self.walked..limit).try_for_each(|position| self.event(&events, position));
        self.events = events;
        self.walked = limit;
        result
    }

    /// After the last [`Walk::extend`]: replay the runs whose outcome is not
    /// on record (cut short), then copy the records after the last event.
    pub(crate) fn finish(&mut self) -> Result<(), RepairError> {
        let events = std::mem::take(&mut self.events);
        let result = (0..self.reruns.len()).try_for_each(|run| self.replay_now(&events, run));
        self.events = events;
        result?;
        // Records after the last event (appended without events) are copied,
        // corrected where a correction names one of them.
        for ((namespace, log), shadow) in &self.shadows {
            let original = shadow.ns.latest(log)?;
            fill(shadow, namespace, log, original, self.inputs.values, &mut self.outcome)?;
        }
        Ok(())
    }

    /// Index the events from `start` on: the FIRINGs of runs to replay and
    /// what each caused; while rounds go on, which runs are open.
    fn index(&mut self, start: usize) {
        let events = std::mem::take(&mut self.events);
        for (position, e) in events.iter().enumerate().skip(start) {
            let ev = &e.event;
            if let Some(&run) = ev.parent.as_ref().and_then(|p| self.firing_of.get(p)) {
                self.caused[run].push(position);
            }
            match ev.kind {
                EventKind::Firing => {
                    if let Some(&run) = self.firing_of.get(&e.id) {
                        self.firing_at[run] = Some(position);
                    }
                    if self.rounds_go_on {
                        let run = self.key(e.id.host, &e.id.namespace, ev.trigger);
                        if let Some(earlier) = self.open.insert(run, position) {
                            // An earlier attempt cut short (a crash): this one stands for it.
                            self.open_positions.remove(&earlier);
                        }
                        self.open_positions.insert(position);
                    }
                }
                EventKind::Done | EventKind::Failed if self.rounds_go_on => {
                    let run = self.key(e.id.host, &e.id.namespace, ev.trigger);
                    if let Some(firing) = self.open.remove(&run) {
                        self.open_positions.remove(&firing);
                    }
                }
                _ => {}
            }
        }
        self.events = events;
    }

    /// A run that joins the plan after its FIRING was indexed (it was open
    /// at the end of the last round): find its FIRING and what it caused so far.
    fn backfill(&mut self, run: usize, firing: &EventId, start: usize) {
        let trigger = EventId::parse(&self.reruns[run].trigger_event).ok();
        let Some(key) = trigger.and_then(|trigger| self.key_of(&trigger)) else { return };
        let Some(&position) = self.open.get(&key) else { return };
        if position >= start || self.events[position].id != *firing {
            return;
        }
        self.firing_at[run] = Some(position);
        let caused: Vec<usize> =
            (position + 1..start).filter(|&p| self.events[p].event.parent.as_ref() == Some(firing)).collect();
        self.caused[run] = caused;
    }

    /// Take the plan's runs (new ones get the next indices), records and
    /// logs; shadows for logs that change for the first time.
    fn adopt(&mut self, reruns: &[Rerun], changed: &[ChangedLog], start: usize) -> Result<(), RepairError> {
        for rerun in reruns {
            let firing = EventId::parse(&rerun.firing).map_err(|e| {
                RepairError::Unsupported(format!("the plan names FIRING {:?}, not an event id ({e})", rerun.firing))
            })?;
            if let Some(&run) = self.index_of.get(&rerun.trigger_event) {
                if self.reruns[run].firing != rerun.firing {
                    if self.outputs[run].is_some() {
                        return Err(RepairError::Unsupported(format!(
                            "handler {:?} ran again on {}/{}:{} (a retry) after the repair had replayed it: run the \
                             repair again",
                            rerun.handler, rerun.trigger.namespace, rerun.trigger.log, rerun.trigger.seq
                        )));
                    }
                    if let Ok(earlier) = EventId::parse(&self.reruns[run].firing) {
                        self.firing_of.remove(&earlier);
                    }
                    self.firing_of.insert(firing.clone(), run);
                    self.reruns[run] = rerun.clone();
                    self.changes[run] = changes_of(rerun);
                    self.firing_at[run] = None;
                    self.caused[run].clear();
                    self.backfill(run, &firing, start);
                } else if self.reruns[run] != *rerun {
                    self.reruns[run] = rerun.clone();
                    self.changes[run] = changes_of(rerun);
                }
            } else {
                let run = self.reruns.len();
                self.index_of.insert(rerun.trigger_event.clone(), run);
                self.firing_of.insert(firing.clone(), run);
                self.reruns.push(rerun.clone());
                self.changes.push(changes_of(rerun));
                self.firing_at.push(None);
                self.caused.push(Vec::new());
                self.backfill(run, &firing, start);
                self.ordinals.push(HashMap::new());
                self.outputs.push(None);
                self.skipped.push(!rerun.replayable && self.inputs.not_replayable == NotReplayable::Skip);
            }
        }
        for changed in changed {
            let key = (changed.namespace.clone(), changed.log.clone());
            self.changing.entry(key.clone()).or_default().extend(changed.seqs.iter().chain(&changed.may_change));
            let behind = match self.shadows.get(&key) {
                Some(shadow) => changed.first < shadow.first,
                None => self.passed.get(&key).is_some_and(|&passed| passed >= changed.first),
            };
            if behind {
                return Err(RepairError::Unsupported(format!(
                    "{}/{}:{} changes, but the repair had already copied that part of the log as events arrived: \
                     repair it with the application stopped",
                    changed.namespace, changed.log, changed.first
                )));
            }
            if self.shadows.contains_key(&key) {
                continue;
            }
            let ns = namespace(self.inputs, &changed.namespace)?;
            let shadow = make_shadow(&ns, &changed.log, changed.first, &mut self.outcome)?;
            // Records appended without events before the log's next recorded
            // one (before the runtime served the namespace) are placed now:
            // a replayed run may read them.
            let next_recorded = self.events[self.walked..].iter().find(|e| {
                e.event.kind == EventKind::Append
                    && e.id.namespace == changed.namespace
                    && e.event.log == changed.log
                    && e.event.seq >= changed.first
            });
            let up_to = match next_recorded {
                Some(e) => e.event.seq - 1,
                None => ns.latest(&changed.log)?,
            };
            self.shadows.insert(key, shadow);
            let shadow = &self.shadows[&(changed.namespace.clone(), changed.log.clone())];
            fill(shadow, &changed.namespace, &changed.log, up_to, self.inputs.values, &mut self.outcome)?;
        }
        Ok(())
    }

    /// The walk passed record `seq` of `key`: it exists for runs replayed
    /// from here on, not for those held at an earlier append.
    fn saw(&mut self, key: LogKey, seq: Seq) {
        let mut seen = lock(&self.seen);
        for history in self.held.values_mut() {
            history.entry(key.clone()).or_insert_with(|| seen.get(&key).copied().unwrap_or(0));
        }
        seen.insert(key, seq);
    }

    /// The rerun whose FIRING caused `e`.
    fn run_of(&self, e: &StoredEvent) -> Option<usize> {
        e.event.parent.as_ref().and_then(|p| self.firing_of.get(p)).copied()
    }

    fn event(&mut self, events: &[StoredEvent], position: usize) -> Result<(), RepairError> {
        let e = &events[position];
        match e.event.kind {
            // A run is replayed where its first write that changes was (its
            // reads before it are satisfied there: they were recorded with
            // that write or earlier ones), or at its outcome if none changes.
            // Not at its FIRING: a worker claims several triggers at once and
            // runs them in turn.
            EventKind::Done | EventKind::Failed => {
                if let Some(run) = self.run_of(e) {
                    self.replay_now(events, run)?;
                }
                Ok(())
            }
            EventKind::Append => self.append(events, e),
            _ => Ok(()),
        }
    }

    fn replay_now(&mut self, events: &[StoredEvent], run: usize) -> Result<(), RepairError> {
        if self.outputs[run].is_some() || self.skipped[run] {
            return Ok(());
        }
        let rerun = &self.reruns[run];
        let Some(position) = self.firing_at[run] else {
            return Err(RepairError::Unsupported(format!(
                "the FIRING of the run of {:?} to replay is not among the events",
                rerun.handler
            )));
        };
        // What the original run did: the LATEST values it got, per log in
        // call order, and how many records it wrote to each log.
        let mut pinned: HashMap<String, Vec<Seq>> = HashMap::new();
        let mut appended: HashMap<LogKey, Vec<Seq>> = HashMap::new();
        for &caused in &self.caused[run] {
            let e = &events[caused];
            for read in e.event.read_views() {
                if read.kind == EventKind::Latest {
                    pinned.entry(read.log.to_owned()).or_default().push(read.seq);
                }
            }
            if e.event.kind == EventKind::Append {
                appended.entry((e.id.namespace.clone(), e.event.log.clone())).or_default().push(e.event.seq);
            }
        }
        let counts: HashMap<LogKey, usize> = appended.iter().map(|(key, seqs)| (key.clone(), seqs.len())).collect();
        let firing = &events[position];
        let held = self.held.remove(&run).unwrap_or_default();
        let view = View {
            held,
            ..View::new(self.inputs, &self.shadows, &self.changing, &self.seen, firing, &pinned, appended)
        };
        let written = replay(rerun, self.inputs, &view, firing)?;
        check_counts(rerun, &counts, &written)?;
        self.outcome.replayed += 1;
        self.outputs[run] = Some(written);
        Ok(())
    }

    fn append(&mut self, events: &[StoredEvent], e: &StoredEvent) -> Result<(), RepairError> {
        let namespace = e.id.namespace.as_str();
        let (log, seq) = (e.event.log.as_str(), e.event.seq);
        let key = (namespace.to_owned(), log.to_owned());
        if self.rounds_go_on {
            self.passed.insert(key.clone(), seq);
        }
        let record = RecordRef { namespace: namespace.to_owned(), log: log.to_owned(), seq };
        let slot = match self.run_of(e) {
            Some(run) if !self.skipped[run] => {
                let ordinal = self.ordinals[run].entry(key.clone()).or_default();
                *ordinal += 1;
                // The run's appends before it first depended on the repair
                // are left as they are (copied below). It is replayed at its
                // first append that changes: by then what it read after the
                // appends left — another run's records, written meanwhile —
                // is in the shadows too.
                let ordinal = *ordinal - 1;
                if self.changes[run].contains(&record) {
                    Some((run, ordinal))
                } else {
                    if self.outputs[run].is_none() {
                        self.held.entry(run).or_default();
                    }
                    None
                }
            }
            _ => None,
        };
        if let Some((run, _)) = slot {
            self.replay_now(events, run)?;
        }
        let Some(shadow) = self.shadows.get(&key).filter(|shadow| seq >= shadow.first) else {
            self.saw(key, seq);
            return Ok(());
        };
        // Records appended without events since the last recorded one.
        fill(shadow, namespace, log, seq - 1, self.inputs.values, &mut self.outcome)?;
        if shadow.ns.latest(&shadow.name)? >= seq {
            // Copied already with the records appended without events (a
            // log's latest was read while the application appended to it).
            if self.inputs.values.contains_key(&record) || slot.is_some() {
                return Err(RepairError::Unsupported(format!(
                    "{namespace}/{log}:{seq} was copied before its APPEND event was read, and the repair changes \
                     it: repair it with the application stopped"
                )));
            }
            self.saw(key, seq);
            return Ok(());
        }
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
        if at != seq {
            return Err(RepairError::Unsupported(format!(
                "{namespace}/{} would hold {namespace}/{log}:{seq} at seq {at}: records appended outside the runtime \
                 (without events) cannot be placed",
                shadow.name
            )));
        }
        self.saw(key, seq);
        self.outcome.written += 1;
        Ok(())
    }
}

/// The records `rerun` replaces or may replace.
fn changes_of(rerun: &Rerun) -> HashSet<RecordRef> {
    rerun.replaces.iter().chain(&rerun.may_replace).cloned().collect()
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
fn history_before_events(events: &[StoredEvent], inputs: &Inputs<'_>) -> Result<HashMap<LogKey, Seq>, RepairError> {
    let mut first_append: HashMap<LogKey, Seq> = HashMap::new();
    for e in events {
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
    changing: &'a HashMap<LogKey, BTreeSet<Seq>>,
    /// Per log, the last seq that existed when the run ran (where `held`
    /// does not say otherwise).
    seen: &'a Mutex<HashMap<LogKey, Seq>>,
    /// For a run replayed after the walk passed some of its appends, the
    /// history at its first append of the logs that grew since (`Walk::held`).
    held: HashMap<LogKey, Seq>,
    /// LATEST values the original run got, per log, in call order.
    pinned: Mutex<HashMap<String, std::collections::VecDeque<Seq>>>,
    written: Mutex<HashMap<LogKey, Vec<Vec<u8>>>>,
    /// The seqs of the original run's appends, per log in order: the n-th
    /// replayed append there is answered with the n-th (its record takes
    /// that place in the shadow).
    appended: HashMap<LogKey, Vec<Seq>>,
    /// A namespace the run appended to that the repair was not given.
    missing: Mutex<Option<String>>,
}

impl<'a> View<'a> {
    fn new(
        inputs: &'a Inputs<'a>,
        shadows: &'a HashMap<LogKey, Shadow>,
        changing: &'a HashMap<LogKey, BTreeSet<Seq>>,
        seen: &'a Mutex<HashMap<LogKey, Seq>>,
        firing: &'a StoredEvent,
        pinned: &HashMap<String, Vec<Seq>>,
        appended: HashMap<LogKey, Vec<Seq>>,
    ) -> View<'a> {
        View {
            firing_namespace: firing.id.namespace.as_str(),
            inputs,
            shadows,
            changing,
            seen,
            held: HashMap::new(),
            pinned: Mutex::new(
                pinned.iter().map(|(log, seqs)| (log.clone(), seqs.iter().copied().collect())).collect(),
            ),
            written: Mutex::new(HashMap::new()),
            appended,
            missing: Mutex::new(None),
        }
    }

    /// The last seq of `log` that existed when the run ran.
    fn seen(&self, log: &str) -> Seq {
        let key = (self.firing_namespace.to_owned(), log.to_owned());
        self.held.get(&key).copied().or_else(|| lock(self.seen).get(&key).copied()).unwrap_or(0)
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
                let key = (self.firing_namespace.to_owned(), log.to_owned());
                if self.changing.get(&key).is_some_and(|seqs| seqs.contains(&seq)) {
                    return Err(RuntimeError::InvalidArgument {
                        reason: format!(
                            "the replay reads {}/{log}:{seq}, which the repair changes but has not written yet: the \
                             original run read it after its first write that the repair changes, while other runs \
                             wrote; such interleavings are not replayed yet",
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
        if !self.inputs.namespaces.contains_key(namespace) {
            // Reported as `MissingNamespace` once the handler returns.
            *lock(&self.missing) = Some(namespace.to_owned());
            return Err(RuntimeError::InvalidArgument {
                reason: format!("the replay appends to namespace {namespace:?}, which the repair was not given"),
            });
        }
        let mut written = lock(&self.written);
        let mut seqs = Vec::with_capacity(batch.len());
        for (log, value) in batch {
            let key = (namespace.to_owned(), (*log).to_owned());
            let original = self.appended.get(&key);
            let list = written.entry(key).or_default();
            list.push(value.to_vec());
            // An append beyond the original's count has no place (the repair
            // then refuses, `CountChanged`): its ordinal stands in.
            let seq = original.and_then(|seqs| seqs.get(list.len() - 1)).copied().unwrap_or(list.len() as Seq);
            seqs.push(seq);
        }
        Ok(seqs)
    }
}

fn replay(rerun: &Rerun, inputs: &Inputs<'_>, view: &View<'_>, firing: &StoredEvent) -> Result<Written, RepairError> {
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
    if let Some(namespace) = lock(&view.missing).take() {
        return Err(RepairError::MissingNamespace { namespace });
    }
    if let Some(reason) = reason {
        return Err(RepairError::HandlerFailed { handler: rerun.handler.clone(), trigger, reason });
    }
    drop(ctx);
    Ok(std::mem::take(&mut *lock(&view.written)))
}

fn check_counts(rerun: &Rerun, before: &HashMap<LogKey, usize>, now: &Written) -> Result<(), RepairError> {
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
