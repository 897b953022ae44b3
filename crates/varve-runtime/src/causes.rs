//! "What caused this record?" answered from the event logs by index
//! (`append_index.rs`), reading the events of the answer and little else —
//! the same answer as [`crate::trace::CausalGraph::ancestors`] over every
//! event, without reading every event.
//!
//! The walk follows, from the record's APPEND, the edges the causal graph
//! has into each event: its parent (by id: one read in the namespace named),
//! the APPEND of each record it read (by index), for a FIRING the reads
//! its run recorded (a scan from the FIRING to its DONE or FAILED: the
//! events written while it ran), and for an APPEND the REPAIR events that
//! replaced its record (a scan after it, only in a namespace a repair has
//! written to). Namespaces are opened as the walk reaches them.
//!
//! **Differences from the full graph**: a read recorded in *another*
//! namespace's `_events` with a FIRING here as its cause (an external
//! command reading another namespace through that namespace's runtime
//! socket) is not found from the FIRING, nor a read whose cause is not a
//! FIRING (a socket read given an APPEND as its cause by hand): finding
//! them would mean reading every event. Effects (`crate::effects`) and
//! repair plans read events in order and see them.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use varve_log::{Namespace, Seq};

use crate::append_index::EventIndex;
use crate::error::Result;
use crate::event::{EventId, EventKind, StoredEvent};
use crate::trace::order_key;

/// Opens a namespace by name for reading; `None` if there is no such namespace.
pub type OpenNamespace<'a> = dyn Fn(&str) -> Result<Option<Arc<dyn Namespace>>> + 'a;

/// Finds causes across the namespaces `open` reaches, each index opened once.
pub struct Causes<'a> {
    open: &'a OpenNamespace<'a>,
    indexes: HashMap<String, Option<EventIndex>>,
    /// APPENDs looked up already: many runs read the same records.
    appends: HashMap<(String, String, Seq), Option<StoredEvent>>,
    /// The reads each FIRING's run recorded, as parents of the FIRING, by (namespace, seq).
    runs: HashMap<(String, Seq), Vec<StoredEvent>>,
}

impl<'a> Causes<'a> {
    /// A walker over the namespaces `open` gives.
    #[must_use]
    pub fn new(open: &'a OpenNamespace<'a>) -> Causes<'a> {
        Causes { open, indexes: HashMap::new(), appends: HashMap::new(), runs: HashMap::new() }
    }

    /// The index of `namespace`, opened on first use (`None`: no such
    /// namespace, or no runtime served it).
    pub fn index(&mut self, namespace: &str) -> Result<Option<&EventIndex>> {
        if !self.indexes.contains_key(namespace) {
            let index = match (self.open)(namespace)? {
                Some(ns) => EventIndex::open(ns)?,
                None => None,
            };
            self.indexes.insert(namespace.to_owned(), index);
        }
        Ok(self.indexes[namespace].as_ref())
    }

    /// The APPEND event of a record, if one is kept.
    pub fn append_of(&mut self, namespace: &str, log: &str, seq: Seq) -> Result<Option<StoredEvent>> {
        let key = (namespace.to_owned(), log.to_owned(), seq);
        if let Some(found) = self.appends.get(&key) {
            return Ok(found.clone());
        }
        let found = match self.index(namespace)? {
            Some(index) => index.append_of(log, seq)?,
            None => None,
        };
        self.appends.insert(key, found.clone());
        Ok(found)
    }

    /// Every event the record's APPEND transitively depends on, the APPEND
    /// first, then in [`crate::trace::CausalGraph`]'s order; empty if the
    /// record has no APPEND event kept.
    pub fn ancestors(&mut self, namespace: &str, log: &str, seq: Seq) -> Result<Vec<StoredEvent>> {
        let Some(start) = self.append_of(namespace, log, seq)? else { return Ok(Vec::new()) };
        let mut seen = HashSet::from([start.id.clone()]);
        let mut queue = VecDeque::from([start.clone()]);
        let mut found = Vec::new();
        while let Some(event) = queue.pop_front() {
            for parent in self.parents(&event)? {
                if seen.insert(parent.id.clone()) {
                    queue.push_back(parent);
                }
            }
            if event.id != start.id {
                found.push(event);
            }
        }
        found.sort_by(|a, b| order_key(a).cmp(&order_key(b)));
        Ok(std::iter::once(start).chain(found).collect())
    }

    /// Records read from event logs and their indexes so far (what the
    /// answers cost: the trend test and the benchmark count it).
    #[must_use]
    pub fn records_read(&self) -> u64 {
        self.indexes.values().flatten().map(EventIndex::records_read).sum()
    }

    /// The events with an edge into `event` in the causal graph.
    fn parents(&mut self, event: &StoredEvent) -> Result<Vec<StoredEvent>> {
        let mut out = Vec::new();
        if let Some(parent) = &event.event.parent {
            if let Some(found) = self.by_id(parent)? {
                out.push(found);
            }
        }
        let namespace = event.id.namespace.clone();
        self.reads_of(event, &namespace, &mut out)?;
        match event.event.kind {
            EventKind::Firing => out.extend(self.run_reads(&namespace, event.id.seq)?),
            EventKind::Append => {
                if let Some(index) = self.index(&namespace)? {
                    out.extend(index.repairs_of(&event.event.log, event.event.seq, event.id.seq)?);
                }
            }
            _ => {}
        }
        Ok(out)
    }

    /// What the run of the FIRING at `firing` read, as parents of the
    /// FIRING: its READ/LATEST events and the APPENDs of the records its
    /// events' folded reads name. Kept for later walks.
    fn run_reads(&mut self, namespace: &str, firing: Seq) -> Result<Vec<StoredEvent>> {
        let key = (namespace.to_owned(), firing);
        if let Some(found) = self.runs.get(&key) {
            return Ok(found.clone());
        }
        let run = match self.index(namespace)? {
            Some(index) => index.run_of(firing)?,
            None => Vec::new(),
        };
        let mut out = Vec::new();
        for child in run {
            if matches!(child.event.kind, EventKind::Read | EventKind::Latest) {
                out.push(child);
            } else {
                self.reads_of(&child, namespace, &mut out)?;
            }
        }
        self.runs.insert(key, out.clone());
        Ok(out)
    }

    /// The APPENDs of the records `event` read (in its namespace).
    fn reads_of(&mut self, event: &StoredEvent, namespace: &str, out: &mut Vec<StoredEvent>) -> Result<()> {
        for read in event.event.read_views() {
            // A ranged read may name seqs past the log's end (a scan asks for a range).
            let last = match self.index(namespace)? {
                Some(index) => read.seq_last.min(index.log_latest(read.log)?),
                None => continue,
            };
            for seq in read.seq..=last {
                if let Some(append) = self.append_of(namespace, read.log, seq)? {
                    out.push(append);
                }
            }
        }
        Ok(())
    }

    fn by_id(&mut self, id: &EventId) -> Result<Option<StoredEvent>> {
        let Some(index) = self.index(&id.namespace)? else { return Ok(None) };
        Ok(index.event(id.seq)?.filter(|e| e.id == *id))
    }
}
