//! The repair graph as a plan: one forward pass over events in causal
//! order (the output of `varve_runtime::trace::merge`).
//!
//! **Dependencies** (§7.2.2, §7.3.3). A handler run (a FIRING) depends on
//! the repair when
//! - its triggering record changes (a *Put* dependency on its input),
//! - it read a record that changes (a *Get* dependency: a READ, or a ranged
//!   READ covering one),
//! - its handler is the one replaced — these runs are **certain**; or
//! - it asked for the latest seq of a log and got one at or past the first
//!   record of that log a replayed run wrote (a *Sync* dependency, §7.3.3):
//!   a replayed run may write more or fewer records, so the tail may have
//!   moved; whether it did is known only when the replay gets there (a
//!   corrected record is replaced one for one and moves nothing), or
//! - its input or a record it read *may* change (written by a conditional
//!   run) — these runs are **conditional**: the repair replays them only
//!   if what they saw did move or change.
//!
//! A LATEST alone is never certain: the seq it returned is the same after a
//! one-for-one replacement, and reading the record there is a READ of its own.
//!
//! A run that depends on the repair is replayed, and every record it
//! appended *after* the point where it first depended on the repair changes
//! (certainly or maybe, as the run) — appends before that point were made
//! with inputs the repair leaves alone, so a deterministic replay writes
//! them again unchanged. Records that change are inputs to later runs, and
//! so on, in one pass: in causal order every cause comes before its effects.
//! A conditional run that later reads a record that certainly changes
//! becomes certain from there on.
//!
//! Unlike Sans-Souci (§7.2.2), runs that wrote nothing are replayed too: a
//! handler that writes only when a condition holds (an alert above a
//! threshold) may write after the correction where it did not before.
//!
//! **Cost:** O(events + reads) time, memory O(runs replayed + records
//! changed + unfinished runs).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde::Serialize;
use varve_log::Seq;
use varve_runtime::trace::RecordRef;
use varve_runtime::{EventId, EventKind, StoredEvent};

/// What is being corrected.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Correction {
    /// A record gets a corrected value (§7.2.1's three use cases: a faulty
    /// reading, a replaced model, late data replacing an interpolation).
    Record(RecordRef),
    /// A handler gets new code: its runs `since` re-run, and everything downstream.
    Handler {
        /// The handler's name.
        handler: String,
        /// Which of its past runs.
        since: Since,
    },
}

/// Which past runs of a replaced handler re-run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "from", content = "value")]
pub enum Since {
    /// Every run on record.
    #[default]
    Start,
    /// Runs whose triggering record has this seq or a later one (in its log).
    Seq(Seq),
    /// Runs that started at or after this time (nanoseconds since the Unix epoch).
    TimeNs(u64),
}

/// Why a run is replayed: the first dependency found, in causal order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Why {
    /// Its triggering record changes.
    Trigger {
        /// That record.
        record: RecordRef,
    },
    /// It read a record that changes.
    Read {
        /// That record.
        record: RecordRef,
    },
    /// It asked for the latest seq of `log` and got `seq`: a record that
    /// changes, or one at or past the first record of `log` a replayed run wrote.
    Latest {
        /// The namespace of `log`.
        namespace: String,
        /// The log.
        log: String,
        /// The seq it got.
        seq: Seq,
    },
    /// Its handler is the one replaced.
    Replaced,
}

/// How the original run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Outcome {
    /// DONE.
    Done,
    /// FAILED (its last attempt on record).
    Failed,
    /// No outcome on record (still running, or cut short).
    Unfinished,
}

/// One handler run to replay.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Rerun {
    /// The handler.
    pub handler: String,
    /// The record that triggered it.
    pub trigger: RecordRef,
    /// The TRIGGER event: one rerun per trigger, whatever its attempts.
    pub trigger_event: String,
    /// The FIRING of the attempt on record that the replay stands for (the last one).
    pub firing: String,
    /// Attempts on record for this trigger.
    pub attempts: u32,
    /// How the last attempt ended.
    pub outcome: Outcome,
    /// Why it is replayed.
    pub why: Why,
    /// The records this run appended that its replay replaces, in order.
    pub replaces: Vec<RecordRef>,
    /// Records it appended before it first depended on the repair (kept).
    pub keeps: usize,
    /// `false` if its handler is marked not replayable (side effects in the world).
    pub replayable: bool,
    /// `true`: replayed whatever happens; `false`: replayed only if what it
    /// saw (a tail, or a record that may change) does change.
    pub certain: bool,
    /// The records this run appended that its replay may replace (it was
    /// conditional when it wrote them).
    pub may_replace: Vec<RecordRef>,
}

/// A log the repair changes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChangedLog {
    /// The namespace.
    pub namespace: String,
    /// The log.
    pub log: String,
    /// The first seq that changes: a shadow copies the records before it.
    pub first: Seq,
    /// Every seq that changes (a correction or a certain run's output), in order.
    pub seqs: Vec<Seq>,
    /// Every seq that may change (a conditional run's output), in order.
    pub may_change: Vec<Seq>,
}

/// The repair graph of some corrections: runs to replay and records that change.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RepairPlan {
    /// What was asked.
    pub corrections: Vec<Correction>,
    /// Corrected records that have no APPEND event in the events given (a
    /// record appended outside the runtime, or before its events were kept).
    pub unrecorded: Vec<RecordRef>,
    /// Runs to replay, in causal order of their FIRING.
    pub reruns: Vec<Rerun>,
    /// Logs that change, by namespace and name.
    pub changed: Vec<ChangedLog>,
    /// Handlers among the reruns marked not replayable (sorted).
    pub not_replayable: Vec<String>,
    /// Events read to build the plan.
    pub events_scanned: usize,
}

/// A run (FIRING) between its start and its outcome.
struct RunState {
    /// Where its FIRING is in the causal order (reruns are sorted by it).
    position: usize,
    /// Its FIRING (kept whole: a rerun found later by a read is built from it).
    firing: StoredEvent,
    /// Index of its trigger's rerun, once it depends on the repair.
    rerun: Option<usize>,
    /// Records it appended so far (counted for `keeps`).
    appended: usize,
    /// Records it appended in other namespaces since its last write in its
    /// own: reads recorded with its next own write may have come before them.
    foreign: Vec<RecordRef>,
}

/// Seqs by namespace, then log: nested so the hot lookups (every read of
/// every run) borrow their keys instead of allocating.
type Seqs = HashMap<String, HashMap<String, BTreeSet<Seq>>>;

fn add(seqs: &mut Seqs, namespace: &str, log: &str, seq: Seq) {
    seqs.entry(namespace.to_owned()).or_default().entry(log.to_owned()).or_default().insert(seq);
}

/// The first seq in `seq..=seq_last` of `log` in `seqs`.
fn first_in(seqs: &Seqs, namespace: &str, log: &str, seq: Seq, seq_last: Seq) -> Option<Seq> {
    seqs.get(namespace)?.get(log)?.range(seq..=seq_last).next().copied()
}

/// How a run depends on the repair.
struct Dependency {
    why: Why,
    certain: bool,
}

impl RepairPlan {
    /// Build the plan of `corrections` from `events` in causal order
    /// (`varve_runtime::trace::merge` of every namespace involved).
    /// `not_replayable`: handlers whose runs touch the world and must not
    /// simply be run again (the manifest's `replayable = false`).
    #[must_use]
    pub fn build(events: &[StoredEvent], corrections: &[Correction], not_replayable: &HashSet<String>) -> RepairPlan {
        // A run's reads are recorded with its next write in its own
        // namespace, so an append it made elsewhere before them is found to
        // depend on the repair late, after runs downstream of it were
        // passed. Such records seed the next pass, from the start, until a
        // pass finds none new (each pass adds at least one; most plans
        // take one pass, plans with such appends two).
        let mut seeds: Vec<RecordRef> = Vec::new();
        loop {
            let mut pass = Pass::new(corrections.to_vec(), not_replayable.clone());
            for r in &seeds {
                add(&mut pass.maybe, &r.namespace, &r.log, r.seq);
                let first = pass.shifting.entry(r.namespace.clone()).or_default().entry(r.log.clone()).or_insert(r.seq);
                *first = (*first).min(r.seq);
            }
            for (position, e) in events.iter().enumerate() {
                pass.event(position, e);
            }
            let known: HashSet<&RecordRef> = seeds.iter().collect();
            let new: Vec<RecordRef> = pass.late.iter().filter(|r| !known.contains(r)).cloned().collect();
            if new.is_empty() {
                return pass.plan(events.len());
            }
            seeds.extend(new);
        }
    }
}

/// What a plan gained since the last [`Planner::take_changes`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlanDelta {
    /// Runs to replay that are new or changed (whole), in causal order of their FIRING.
    pub reruns: Vec<Rerun>,
    /// Records newly found to change, per log (`first`: the least of them).
    pub changed: Vec<ChangedLog>,
}

/// A plan built as events arrive, for a repair that reads `_events` in
/// rounds while the application runs (`crate::online`). It is the first
/// pass of [`RepairPlan::build`] fed in pieces: the same plan for the same
/// events, as long as no second pass is needed
/// ([`Planner::needs_second_pass`]: runs that appended to another
/// namespace before reads that made them depend on the repair).
pub struct Planner {
    pass: Pass,
    fed: usize,
}

impl Planner {
    /// A planner of `corrections` (see [`RepairPlan::build`]).
    #[must_use]
    pub fn new(corrections: &[Correction], not_replayable: &HashSet<String>) -> Planner {
        Planner { pass: Pass::new(corrections.to_vec(), not_replayable.clone()), fed: 0 }
    }

    /// Pass the next events, in causal order after those fed before.
    pub fn feed(&mut self, events: &[StoredEvent]) {
        for e in events {
            self.pass.event(self.fed, e);
            self.fed += 1;
        }
    }

    /// The plan of every event fed so far.
    #[must_use]
    pub fn plan(&self) -> RepairPlan {
        self.pass.plan(self.fed)
    }

    /// What the plan gained since the last call (everything, the first
    /// time): the runs to replay that are new or changed, and the records
    /// newly found to change — so a caller that follows the plan round by
    /// round does work in proportion to what arrived, not to the plan.
    pub fn take_changes(&mut self) -> PlanDelta {
        let pass = &mut self.pass;
        let mut touched = std::mem::take(&mut pass.touched);
        for &index in &touched {
            pass.is_touched[index] = false;
        }
        touched.sort_by_key(|&index| pass.reruns[index].0);
        let reruns = touched.into_iter().map(|index| pass.reruns[index].1.clone()).collect();
        let mut by_log: BTreeMap<(String, String), ChangedLog> = BTreeMap::new();
        for (record, certain) in std::mem::take(&mut pass.fresh) {
            let changed = by_log.entry((record.namespace.clone(), record.log.clone())).or_insert_with(|| ChangedLog {
                namespace: record.namespace,
                log: record.log,
                first: record.seq,
                seqs: Vec::new(),
                may_change: Vec::new(),
            });
            changed.first = changed.first.min(record.seq);
            if certain {
                changed.seqs.push(record.seq);
            } else {
                changed.may_change.push(record.seq);
            }
        }
        PlanDelta { reruns, changed: by_log.into_values().collect() }
    }

    /// `true` if the events fed need the second pass that only
    /// [`RepairPlan::build`] makes: this plan may then miss runs.
    #[must_use]
    pub fn needs_second_pass(&self) -> bool {
        !self.pass.late.is_empty()
    }
}

struct Pass {
    corrections: Vec<Correction>,
    not_replayable: HashSet<String>,
    /// Corrected records not yet met.
    pending: Seqs,
    /// Records that certainly change.
    changes: Seqs,
    /// Records that may change (written by conditional runs).
    maybe: Seqs,
    /// Per log, the first seq a replayed run wrote: the tail may move from there.
    shifting: HashMap<String, HashMap<String, Seq>>,
    runs: HashMap<EventId, RunState>,
    /// Records found to depend on the repair after their APPEND was passed.
    late: Vec<RecordRef>,
    /// (host, namespace, trigger seq) → index in `reruns`.
    by_trigger: HashMap<(u64, String, Seq), usize>,
    reruns: Vec<(usize, Rerun)>,
    /// Reruns created or changed since [`Planner::take_changes`] (indices, each once).
    touched: Vec<usize>,
    /// Per rerun, whether it is in `touched`.
    is_touched: Vec<bool>,
    /// Records found to change (`true`) or maybe change since [`Planner::take_changes`].
    fresh: Vec<(RecordRef, bool)>,
}

impl Pass {
    fn new(corrections: Vec<Correction>, not_replayable: HashSet<String>) -> Pass {
        // A corrected record changes from the start: no read can come
        // before its APPEND, and one appended outside the runtime (no APPEND
        // event) may still have been read.
        let mut pending = Seqs::new();
        let mut changes = Seqs::new();
        let mut fresh = Vec::new();
        for c in &corrections {
            if let Correction::Record(r) = c {
                add(&mut pending, &r.namespace, &r.log, r.seq);
                add(&mut changes, &r.namespace, &r.log, r.seq);
                fresh.push((r.clone(), true));
            }
        }
        Pass {
            corrections,
            not_replayable,
            pending,
            changes,
            maybe: Seqs::new(),
            shifting: HashMap::new(),
            runs: HashMap::new(),
            late: Vec::new(),
            by_trigger: HashMap::new(),
            reruns: Vec::new(),
            touched: Vec::new(),
            is_touched: Vec::new(),
            fresh,
        }
    }

    fn touch(&mut self, index: usize) {
        if !self.is_touched[index] {
            self.is_touched[index] = true;
            self.touched.push(index);
        }
    }

    /// `record` changes (`certain`) or may change.
    fn mark(&mut self, record: RecordRef, certain: bool) {
        let seqs = if certain { &mut self.changes } else { &mut self.maybe };
        add(seqs, &record.namespace, &record.log, record.seq);
        self.fresh.push((record, certain));
    }

    /// The plan of the events passed so far (the pass can go on).
    fn plan(&self, events_scanned: usize) -> RepairPlan {
        let unrecorded: BTreeSet<RecordRef> = self
            .pending
            .iter()
            .flat_map(|(namespace, logs)| {
                logs.iter().flat_map(move |(log, seqs)| {
                    seqs.iter().map(move |&seq| RecordRef { namespace: namespace.clone(), log: log.clone(), seq })
                })
            })
            .collect();
        let mut reruns: Vec<&(usize, Rerun)> = self.reruns.iter().collect();
        reruns.sort_by_key(|(position, _)| *position);
        let reruns: Vec<Rerun> = reruns.into_iter().map(|(_, r)| r.clone()).collect();
        let not_replayable: BTreeSet<String> =
            reruns.iter().filter(|r| !r.replayable).map(|r| r.handler.clone()).collect();
        let mut logs: BTreeSet<(String, String)> = BTreeSet::new();
        for seqs in [&self.changes, &self.maybe] {
            for (namespace, by_log) in seqs {
                logs.extend(by_log.keys().map(|log| (namespace.clone(), log.clone())));
            }
        }
        let list = |seqs: &Seqs, namespace: &str, log: &str| -> Vec<Seq> {
            seqs.get(namespace).and_then(|l| l.get(log)).map(|s| s.iter().copied().collect()).unwrap_or_default()
        };
        let changed = logs
            .into_iter()
            .map(|(namespace, log)| {
                let seqs = list(&self.changes, &namespace, &log);
                let may_change = list(&self.maybe, &namespace, &log);
                let first = seqs.iter().chain(&may_change).copied().min().unwrap_or(0);
                ChangedLog { namespace, log, first, seqs, may_change }
            })
            .collect();
        RepairPlan {
            corrections: self.corrections.clone(),
            unrecorded: unrecorded.into_iter().collect(),
            reruns,
            changed,
            not_replayable: not_replayable.into_iter().collect(),
            events_scanned,
        }
    }

    /// How reading `log` at `seq..=seq_last` (or, for LATEST, getting `seq`) depends on the repair.
    fn read_dependency(
        &self,
        namespace: &str,
        kind: EventKind,
        log: &str,
        seq: Seq,
        seq_last: Seq,
    ) -> Option<Dependency> {
        if kind == EventKind::Latest {
            let first = *self.shifting.get(namespace)?.get(log)?;
            return (seq >= first).then(|| Dependency {
                why: Why::Latest { namespace: namespace.to_owned(), log: log.to_owned(), seq },
                certain: false,
            });
        }
        let record = |seq| RecordRef { namespace: namespace.to_owned(), log: log.to_owned(), seq };
        if let Some(seq) = first_in(&self.changes, namespace, log, seq, seq_last) {
            return Some(Dependency { why: Why::Read { record: record(seq) }, certain: true });
        }
        first_in(&self.maybe, namespace, log, seq, seq_last)
            .map(|seq| Dependency { why: Why::Read { record: record(seq) }, certain: false })
    }

    fn event(&mut self, position: usize, e: &StoredEvent) {
        let ev = &e.event;
        let namespace = e.id.namespace.as_str();
        if ev.kind == EventKind::Firing {
            self.firing(position, e);
        }
        // Reads (events of their own, or folded into this APPEND/DONE/FAILED)
        // come before the write they are folded into.
        if let Some(parent) = &ev.parent {
            let certain = self.runs.get(parent).map(|run| run.rerun.is_some_and(|i| self.reruns[i].1.certain));
            if certain == Some(false) {
                let mut found: Option<Dependency> = None;
                for read in ev.read_views() {
                    if let Some(dep) = self.read_dependency(namespace, read.kind, read.log, read.seq, read.seq_last) {
                        let better = dep.certain && !found.as_ref().is_some_and(|f| f.certain);
                        if found.is_none() || better {
                            found = Some(dep);
                        }
                        if found.as_ref().is_some_and(|f| f.certain) {
                            break;
                        }
                    }
                }
                if let Some(dep) = found {
                    self.depends(parent, dep);
                }
            }
        }
        match ev.kind {
            EventKind::Append => self.append(e),
            EventKind::Done | EventKind::Failed => {
                if let Some(index) = ev.parent.as_ref().and_then(|p| self.runs.remove(p)).and_then(|run| run.rerun) {
                    self.reruns[index].1.outcome =
                        if ev.kind == EventKind::Done { Outcome::Done } else { Outcome::Failed };
                    self.touch(index);
                }
            }
            _ => {}
        }
    }

    fn firing(&mut self, position: usize, e: &StoredEvent) {
        let ev = &e.event;
        let namespace = e.id.namespace.as_str();
        let key = (e.id.host, namespace.to_owned(), ev.trigger);
        if let Some(&index) = self.by_trigger.get(&key) {
            // A later attempt of a trigger already replayed: the replay stands for it.
            let rerun = &mut self.reruns[index].1;
            rerun.attempts = rerun.attempts.max(ev.attempt);
            rerun.firing = e.id.to_string();
            rerun.outcome = Outcome::Unfinished;
            self.touch(index);
            self.runs.insert(
                e.id.clone(),
                RunState { position, firing: e.clone(), rerun: Some(index), appended: 0, foreign: Vec::new() },
            );
            return;
        }
        let replaced = self.corrections.iter().any(|c| match c {
            Correction::Handler { handler, since } => {
                *handler == ev.handler
                    && match *since {
                        Since::Start => true,
                        Since::Seq(seq) => ev.seq >= seq,
                        Since::TimeNs(ns) => ev.timestamp_ns >= ns,
                    }
            }
            Correction::Record(_) => false,
        });
        let trigger = RecordRef { namespace: namespace.to_owned(), log: ev.log.clone(), seq: ev.seq };
        let dependency = if replaced {
            Some(Dependency { why: Why::Replaced, certain: true })
        } else if first_in(&self.changes, namespace, &ev.log, ev.seq, ev.seq).is_some() {
            Some(Dependency { why: Why::Trigger { record: trigger.clone() }, certain: true })
        } else if first_in(&self.maybe, namespace, &ev.log, ev.seq, ev.seq).is_some() {
            Some(Dependency { why: Why::Trigger { record: trigger.clone() }, certain: false })
        } else {
            None
        };
        let rerun = dependency.map(|dep| self.new_rerun(position, e, trigger, dep));
        self.runs
            .insert(e.id.clone(), RunState { position, firing: e.clone(), rerun, appended: 0, foreign: Vec::new() });
    }

    fn new_rerun(&mut self, position: usize, e: &StoredEvent, trigger: RecordRef, dep: Dependency) -> usize {
        let ev = &e.event;
        let index = self.reruns.len();
        self.by_trigger.insert((e.id.host, e.id.namespace.clone(), ev.trigger), index);
        self.reruns.push((
            position,
            Rerun {
                handler: ev.handler.clone(),
                trigger,
                trigger_event: EventId { host: e.id.host, namespace: e.id.namespace.clone(), seq: ev.trigger }
                    .to_string(),
                firing: e.id.to_string(),
                attempts: ev.attempt,
                outcome: Outcome::Unfinished,
                why: dep.why,
                replaces: Vec::new(),
                keeps: 0,
                replayable: !self.not_replayable.contains(&ev.handler),
                certain: dep.certain,
                may_replace: Vec::new(),
            },
        ));
        self.is_touched.push(false);
        self.touch(index);
        index
    }

    /// A running run turns out to depend on the repair (or, if conditional,
    /// now certainly), through reads recorded with one of its writes.
    fn depends(&mut self, firing: &EventId, dep: Dependency) {
        let Some(mut run) = self.runs.remove(firing) else { return };
        let index = if let Some(index) = run.rerun {
            // Conditional so far; a certain dependency makes the rest of it certain.
            self.reruns[index].1.certain |= dep.certain;
            self.touch(index);
            index
        } else {
            let e = &run.firing;
            let trigger = RecordRef { namespace: e.id.namespace.clone(), log: e.event.log.clone(), seq: e.event.seq };
            let index = self.new_rerun(run.position, e, trigger, dep);
            self.reruns[index].1.keeps = run.appended;
            run.rerun = Some(index);
            index
        };
        // Its appends elsewhere since its last own write may have followed
        // these reads: they may change (the order of the two is not on record).
        for record in run.foreign.drain(..) {
            self.mark(record.clone(), false);
            self.late.push(record.clone());
            let rerun = &mut self.reruns[index].1;
            if !rerun.replaces.contains(&record) && !rerun.may_replace.contains(&record) {
                rerun.may_replace.push(record);
            }
        }
        self.runs.insert(firing.clone(), run);
    }

    fn append(&mut self, e: &StoredEvent) {
        let ev = &e.event;
        let namespace = e.id.namespace.as_str();
        if let Some(seqs) = self.pending.get_mut(namespace).and_then(|logs| logs.get_mut(ev.log.as_str())) {
            seqs.remove(&ev.seq);
        }
        let Some(parent) = &ev.parent else { return };
        let Some(run) = self.runs.get_mut(parent) else { return };
        run.appended += 1;
        let record = RecordRef { namespace: namespace.to_owned(), log: ev.log.clone(), seq: ev.seq };
        if parent.namespace == namespace && parent.host == e.id.host {
            run.foreign.clear();
        } else if run.rerun.is_none_or(|i| !self.reruns[i].1.certain) {
            run.foreign.push(record.clone());
        }
        let Some(index) = run.rerun else { return };
        let rerun = &mut self.reruns[index].1;
        let certain = rerun.certain;
        if certain {
            rerun.replaces.push(record.clone());
        } else {
            rerun.may_replace.push(record.clone());
        }
        self.touch(index);
        self.mark(record, certain);
        self.shifting.entry(namespace.to_owned()).or_default().entry(ev.log.clone()).or_insert(ev.seq);
    }
}
