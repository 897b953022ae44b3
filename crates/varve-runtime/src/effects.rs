//! "What depends on this record?" answered by a forward walk over the
//! events from the record's APPEND on (found by the index beside
//! `_events`, `append_index.rs`) — the same answer as
//! [`crate::trace::CausalGraph::descendants`] over every event, without
//! loading every event or building the graph: events are read in order and
//! only the answer is kept (plus which runs the answer has reached).
//!
//! Why a walk and not a lookup (as [`crate::causes`] is): a record's effects
//! come from reads of it, and a read of `(log, seq)` may be recorded any
//! time after the record was appended — a fixed-seq read years later. No
//! index over reads is kept (an entry per read would put a write per read
//! back on the hot path the event format was changed to relieve: the
//! runtime issue's ≤ 5 % recording overhead). So effects cost O(events kept
//! after the record), not O(answer); with event retention that is bounded.
//!
//! **The walk.** An event is an effect if its parent is one, if it reads a
//! record whose APPEND is one, or if it is an APPEND of a run whose reads
//! reached an effect (a run's reads count as inputs of *every* APPEND it
//! made, earlier ones included) — the edges of the full graph. A run
//! reached that way, or a REPAIR that replaced records before it, makes
//! earlier events effects: the walk goes back to the run's FIRING (or the
//! replaced record's APPEND) and walks on from there. Several namespaces:
//! the record's own is walked from its APPEND, the others from their
//! earliest event kept (a cause in one namespace may have effects in
//! another only through a parent link, which names no position there);
//! each namespace is walked again while another one's walk found more.
//!
//! **Differences from the full graph**: an APPEND in the record's
//! namespace written *before* the record by a run of another namespace
//! (`append_via`) that later read an effect is not found (the walk of the
//! record's namespace does not go back past the record for a run of
//! another namespace). Logs deleted and created again under the same name
//! are told apart by position here, by name in the full graph.

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
    /// Per namespace walked: (host, earliest kept, latest) — which parents are events the graph has.
    kept: HashMap<String, (u64, Seq, Seq)>,
}

/// What one pass over a namespace found.
#[derive(Default)]
struct Pass {
    /// New effects were found.
    grew: bool,
    /// Go back to this position of the namespace walked (an earlier event became an effect).
    again_from: Option<Seq>,
    /// Runs of other namespaces reached (a read recorded here with a FIRING
    /// there as its cause): walk their namespace from their FIRING.
    runs_elsewhere: Vec<EventId>,
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
    let mut walk = Walk { found: HashMap::new(), records: HashMap::new(), runs: HashSet::new(), kept };
    walk.add(start.clone());
    // Where each namespace's walk starts; `pending` holds those to walk (again) from where.
    let mut window: Vec<Seq> = indexes.iter().map(EventIndex::earliest).collect();
    window[0] = start.id.seq;
    let mut pending: Vec<Option<Seq>> = window.iter().copied().map(Some).collect();
    while let Some(i) = pending.iter().position(Option::is_some) {
        let from = pending[i].take().unwrap_or(window[i]);
        let pass = walk.pass(&indexes[i], from)?;
        if let Some(back) = pass.again_from {
            window[i] = window[i].min(back);
            pending[i] = Some(pending[i].map_or(back, |p| p.min(back)));
        }
        for run in &pass.runs_elsewhere {
            if let Some(j) = indexes.iter().position(|index| index.namespace() == run.namespace) {
                window[j] = window[j].min(run.seq);
            }
        }
        if pass.grew {
            for (j, slot) in pending.iter_mut().enumerate().filter(|&(j, _)| j != i) {
                *slot = Some(slot.map_or(window[j], |p| p.min(window[j])));
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

    /// Walk `index`'s namespace from `from` to its end.
    fn pass(&mut self, index: &EventIndex, from: Seq) -> Result<Pass> {
        let mut pass = Pass::default();
        let mut repaired: Vec<(String, Seq, Seq)> = Vec::new();
        // Per run still open in this pass, the first APPEND it made that was
        // not an effect when walked: where to walk again from if the run's
        // reads reach an effect later. Dropped at the run's outcome.
        let mut not_yet: HashMap<EventId, Seq> = HashMap::new();
        index.for_each_from(from, |e| {
            let position = e.id.seq;
            let namespace = e.id.namespace.as_str();
            let kind = e.event.kind;
            let parent = e.event.parent.as_ref().filter(|p| self.kept(p)).cloned();
            let own_read = matches!(kind, EventKind::Read | EventKind::Latest);
            let mut effect = parent.as_ref().is_some_and(|p| self.found.contains_key(p));
            if kind == EventKind::Append && parent.as_ref().is_some_and(|p| self.runs.contains(p)) {
                effect = true;
            }
            let reads_effect = e.event.read_views().any(|read| {
                self.records
                    .get(&(namespace.to_owned(), read.log.to_owned()))
                    .is_some_and(|seqs| seqs.range(read.seq..=read.seq_last).next().is_some())
            });
            // A run's reads are inputs of all its APPENDs (for a READ/LATEST
            // event of its own: when that event is an effect at all). Its
            // APPENDs walked already are found by walking again from the
            // first (from its FIRING if that is before this pass); those in
            // other namespaces when they are walked (again: this event is an
            // effect, so the pass grew).
            if let Some(run) = parent.as_ref().filter(|_| reads_effect || (own_read && effect)) {
                if self.runs.insert(run.clone()) {
                    if run.namespace != namespace {
                        pass.runs_elsewhere.push(run.clone());
                    } else if let Some(back) = if run.seq < from { Some(run.seq) } else { not_yet.get(run).copied() } {
                        pass.again_from = Some(pass.again_from.map_or(back, |a| a.min(back)));
                    }
                }
            }
            effect |= reads_effect;
            if let Some(run) = &parent {
                match kind {
                    EventKind::Append if !effect => {
                        not_yet.entry(run.clone()).or_insert(position);
                    }
                    EventKind::Done | EventKind::Failed => {
                        not_yet.remove(run);
                    }
                    _ => {}
                }
            }
            if effect {
                repaired.extend(e.event.replaced().map(|(log, first, last)| (log.to_owned(), first, last)));
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
