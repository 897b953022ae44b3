//! "What depends on this record?" answered by a forward walk over the
//! events from the record's APPEND on (found by the index beside
//! `_events`, `append_index.rs`) — the same answer as
//! [`crate::trace::CausalGraph::descendants`] over every event, without
//! loading every event or building the graph: events are read in order and
//! only the answer is kept (plus which runs the answer has reached, and
//! where each run's APPENDs and each child of another namespace's event
//! were seen).
//!
//! Why a walk and not a lookup (as [`crate::causes`] is): a record's effects
//! come from reads of it, and a read of `(log, seq)` may be recorded any
//! time after the record was appended — a fixed-seq read years later. No
//! index over reads is kept (an entry per read would put a write per read
//! back on the hot path the event format was changed to relieve: the
//! runtime issue's ≤ 5 % recording overhead). So effects cost about
//! O(events kept after the record), not O(answer); with event retention
//! that is bounded.
//!
//! **The walk.** An event is an effect if its parent is one, if it reads a
//! record whose APPEND is one, or if it is an APPEND of a run whose reads
//! reached an effect (a run's reads count as inputs of *every* APPEND it
//! made, earlier ones included) — the edges of the full graph. A run
//! reached that way, or a REPAIR that replaced records before it, makes
//! earlier events effects: the walk goes back to the first of them (the
//! run's first APPEND seen, its FIRING if the run began before the walk
//! did, the replaced record's APPEND) and walks on from there.
//!
//! **Several namespaces.** A namespace is reached from another only through
//! a parent link (a run's append or socket read in another namespace),
//! which names no position there, so the others are walked from their
//! earliest event kept and the record's own from its APPEND. Each pass
//! notes the events whose parent is in another namespace; when a pass
//! elsewhere adds that parent to the answer (or reaches its run), the
//! namespace is walked again from that parent's first child, not from its
//! start. An edge back in time (above), or a run of another namespace
//! reached (it may have appended to the record's namespace before the
//! record), makes effects of events older than the record whose children
//! in the record's namespace may be older than the record too: the record's
//! namespace is then walked from its earliest event as well.
//!
//! **Differences from the full graph**: logs deleted and created again
//! under the same name are told apart by position here, by name in the
//! full graph.

use std::collections::{BTreeSet, HashMap, HashSet};

use varve_log::Seq;

use crate::append_index::EventIndex;
use crate::causes::OpenNamespace;
use crate::error::Result;
use crate::event::{EventId, EventKind, StoredEvent};
use crate::trace::order_key;

/// Finds effects across a set of namespaces (see the module docs).
pub struct Effects<'a> {
    open: &'a OpenNamespace<'a>,
    namespaces: Vec<String>,
    records_read: u64,
}

/// The state of one query.
struct Walk {
    /// The answer so far, by id.
    found: HashMap<EventId, StoredEvent>,
    /// Records whose APPEND is in the answer, per (namespace, log).
    records: HashMap<(String, String), BTreeSet<Seq>>,
    /// Runs (by FIRING, or whatever parent their events name) whose every
    /// APPEND is an effect.
    runs: HashSet<EventId>,
    /// REPAIR events whose replaced records were added already.
    repairs: HashSet<EventId>,
    /// Per namespace walked: (host, earliest kept, latest) — which parents are events the graph has.
    kept: HashMap<String, (u64, Seq, Seq)>,
    /// Per namespace (by index), the events walked whose parent is in another
    /// namespace: parent → their positions. The only way into a namespace
    /// from another, so a namespace walked already is walked again only from
    /// the first child of a parent that became an effect (or a run reached).
    foreign: Vec<HashMap<EventId, BTreeSet<Seq>>>,
    /// Per namespace, the parents in `foreign` whose children were walked
    /// again since the parent joined the answer (`true`) or its run was
    /// reached (`false`): each makes different children effects.
    foreign_done: Vec<HashSet<(EventId, bool)>>,
}

/// What one pass over a namespace found.
#[derive(Default)]
struct Pass {
    /// New effects (or runs reached) were found.
    grew: bool,
    /// Go back to this position of the namespace walked (an earlier event became an effect).
    again_from: Option<Seq>,
    /// Runs of other namespaces reached (a read recorded here with a FIRING
    /// there as its cause): walk their namespace from their FIRING.
    runs_elsewhere: Vec<EventId>,
    /// A run of a namespace other than the record's was reached: it may
    /// have appended to the record's namespace before the record.
    foreign_run: bool,
}

impl<'a> Effects<'a> {
    /// A walker over `namespaces` (the record's own need not be listed), opened by `open`.
    #[must_use]
    pub fn new(open: &'a OpenNamespace<'a>, namespaces: &[String]) -> Effects<'a> {
        Effects { open, namespaces: namespaces.to_vec(), records_read: 0 }
    }

    /// Records read from event logs and their indexes by the queries so far.
    #[must_use]
    pub fn records_read(&self) -> u64 {
        self.records_read
    }

    /// Every event that transitively depends on the record, its APPEND
    /// first, then in [`crate::trace::CausalGraph`]'s order; empty if the
    /// record has no APPEND event kept.
    pub fn descendants(&mut self, namespace: &str, log: &str, seq: Seq) -> Result<Vec<StoredEvent>> {
        let mut names: Vec<String> = vec![namespace.to_owned()];
        names.extend(self.namespaces.iter().filter(|n| n.as_str() != namespace).cloned());
        let mut indexes: Vec<EventIndex> = Vec::new();
        for name in &names {
            if let Some(index) = (self.open)(name)?.map(EventIndex::open).transpose()?.flatten() {
                indexes.push(index);
            } else if name == namespace {
                return Ok(Vec::new());
            }
        }
        let result = walk(&indexes, log, seq);
        self.records_read += indexes.iter().map(EventIndex::records_read).sum::<u64>();
        result
    }
}

fn walk(indexes: &[EventIndex], log: &str, seq: Seq) -> Result<Vec<StoredEvent>> {
    let own = &indexes[0];
    let Some(start) = own.append_of(log, seq)? else { return Ok(Vec::new()) };
    let kept = indexes
        .iter()
        .map(|index| (index.namespace().to_owned(), (index.host(), index.earliest(), index.latest())))
        .collect();
    let mut walk = Walk {
        found: HashMap::new(),
        records: HashMap::new(),
        runs: HashSet::new(),
        repairs: HashSet::new(),
        kept,
        foreign: vec![HashMap::new(); indexes.len()],
        foreign_done: vec![HashSet::new(); indexes.len()],
    };
    walk.add(start.clone());
    // Where each namespace's walk starts (the record's own: at the record);
    // `pending` holds the namespaces to walk (again) and from where.
    let mut window: Vec<Seq> = indexes.iter().map(EventIndex::earliest).collect();
    window[0] = start.id.seq;
    let mut pending: Vec<Option<Seq>> = window.iter().copied().map(Some).collect();
    let lower = |slot: &mut Option<Seq>, to: Seq| *slot = Some(slot.map_or(to, |p| p.min(to)));
    while let Some(i) = pending.iter().position(Option::is_some) {
        let from = pending[i].take().unwrap_or(window[i]);
        let pass = walk.pass(i, &indexes[i], from, indexes[0].namespace())?;
        if let Some(back) = pass.again_from {
            window[i] = window[i].min(back);
            lower(&mut pending[i], back);
        }
        for run in &pass.runs_elsewhere {
            if let Some(j) = indexes.iter().position(|index| index.namespace() == run.namespace) {
                window[j] = window[j].min(run.seq);
                lower(&mut pending[j], run.seq);
            }
        }
        // An edge back in time (a run's earlier APPENDs, records a REPAIR
        // replaced) makes effects of events that may be older than the
        // record, and their children in the record's namespace may be older
        // too; a run of another namespace may have appended to it before the
        // record: with several namespaces, walk it from its earliest event.
        let back_in_time = pass.again_from.is_some() || !pass.runs_elsewhere.is_empty() || pass.foreign_run;
        if indexes.len() > 1 && back_in_time && window[0] > indexes[0].earliest() {
            window[0] = indexes[0].earliest();
            lower(&mut pending[0], window[0]);
        }
        if pass.grew {
            for j in (0..indexes.len()).filter(|&j| j != i) {
                if let Some(first) = walk.foreign_to_walk(j) {
                    lower(&mut pending[j], first);
                }
            }
        }
    }
    let start_id = start.id.clone();
    let mut found: Vec<StoredEvent> = walk.found.into_values().filter(|e| e.id != start_id).collect();
    found.sort_by(|a, b| order_key(a).cmp(&order_key(b)));
    Ok(std::iter::once(start).chain(found).collect())
}

impl Walk {
    /// Add an effect; true if it is new.
    fn add(&mut self, event: StoredEvent) -> bool {
        if self.found.contains_key(&event.id) {
            return false;
        }
        if event.event.kind == EventKind::Append {
            let key = (event.id.namespace.clone(), event.event.log.clone());
            self.records.entry(key).or_default().insert(event.event.seq);
        }
        self.found.insert(event.id.clone(), event);
        true
    }

    /// Whether the graph has this event (its namespace is walked and keeps it).
    fn kept(&self, id: &EventId) -> bool {
        self.kept
            .get(&id.namespace)
            .is_some_and(|&(host, earliest, latest)| id.host == host && (earliest..=latest).contains(&id.seq))
    }

    /// The first event of namespace `j` (walked already) to walk again: the
    /// first child of each parent there that joined the answer (or whose run
    /// was reached) since its children were last walked.
    fn foreign_to_walk(&mut self, j: usize) -> Option<Seq> {
        let mut first: Option<Seq> = None;
        for (parent, positions) in &self.foreign[j] {
            for (live, as_effect) in [(self.found.contains_key(parent), true), (self.runs.contains(parent), false)] {
                if live && self.foreign_done[j].insert((parent.clone(), as_effect)) {
                    let at = positions.first().copied().unwrap_or(Seq::MAX);
                    first = Some(first.map_or(at, |f| f.min(at)));
                }
            }
        }
        first
    }

    /// Walk `index`'s namespace (the `i`-th) from `from` to its end.
    fn pass(&mut self, i: usize, index: &EventIndex, from: Seq, record_namespace: &str) -> Result<Pass> {
        let mut pass = Pass::default();
        let mut repaired: Vec<(String, Seq, Seq)> = Vec::new();
        // Per run, the first APPEND of it this pass saw that was not an
        // effect when walked: where to walk again from if the run's reads
        // reach an effect later (even after its outcome: a socket read may
        // land after a command's FAILED).
        let mut not_yet: HashMap<EventId, Seq> = HashMap::new();
        index.for_each_from(from, |e| {
            let position = e.id.seq;
            let namespace = e.id.namespace.as_str();
            let kind = e.event.kind;
            let parent = e.event.parent.as_ref().filter(|p| self.kept(p)).cloned();
            if let Some(parent) = parent.as_ref().filter(|p| p.namespace != namespace) {
                self.foreign[i].entry(parent.clone()).or_default().insert(position);
            }
            let mut effect = parent.as_ref().is_some_and(|p| self.found.contains_key(p));
            if kind == EventKind::Append && parent.as_ref().is_some_and(|p| self.runs.contains(p)) {
                effect = true;
            }
            let reads_effect = e.event.read_views().any(|read| {
                self.records
                    .get(&(namespace.to_owned(), read.log.to_owned()))
                    .is_some_and(|seqs| seqs.range(read.seq..=read.seq_last).next().is_some())
            });
            // A run's reads are inputs of all its APPENDs. (A READ/LATEST
            // event of its own that is an effect through its parent adds
            // nothing: the parent's APPENDs are effects through it too.) Its
            // APPENDs here walked already are found by walking again: from
            // the first this pass saw or, if it may have appended here
            // before the pass began, from its FIRING — for a run of another
            // namespace, from the first of its APPENDs here walked (`foreign`).
            // Its APPENDs in other namespaces are found when they are walked
            // (again: the pass grew).
            if let Some(run) = parent.as_ref().filter(|_| reads_effect) {
                if self.runs.insert(run.clone()) {
                    pass.grew = true;
                    pass.foreign_run |= run.namespace != record_namespace;
                    let back = if run.namespace == namespace {
                        if run.seq < from {
                            Some(run.seq)
                        } else {
                            not_yet.get(run).copied()
                        }
                    } else {
                        pass.runs_elsewhere.push(run.clone());
                        self.foreign[i].get(run).and_then(|positions| positions.first().copied())
                    };
                    if let Some(back) = back.filter(|&back| back < position) {
                        pass.again_from = Some(pass.again_from.map_or(back, |a| a.min(back)));
                    }
                }
            }
            effect |= reads_effect;
            if let Some(run) = parent.as_ref().filter(|_| kind == EventKind::Append && !effect) {
                if !not_yet.contains_key(run) {
                    not_yet.insert(run.clone(), position);
                }
            }
            if effect {
                if kind == EventKind::Repair && self.repairs.insert(e.id.clone()) {
                    repaired.extend(e.event.replaced().map(|(log, first, last)| (log.to_owned(), first, last)));
                }
                pass.grew |= self.add(e);
            }
            Ok(())
        })?;
        // A REPAIR is a cause of every record whose value it replaced.
        for (log, first, last) in repaired {
            for seq in first..=last.min(index.log_latest(&log)?) {
                if let Some(append) = index.append_of(&log, seq)? {
                    let position = append.id.seq;
                    if self.add(append) {
                        pass.grew = true;
                        pass.again_from = Some(pass.again_from.map_or(position, |a| a.min(position)));
                    }
                }
            }
        }
        Ok(pass)
    }
}
