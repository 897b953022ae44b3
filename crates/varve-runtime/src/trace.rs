//! Causal queries over events (Lowgo §6.2.1, Sans-Souci §7.3.2): ancestors
//! and descendants of a record, the events of one trace, the deterministic
//! causal merge of several namespaces' event logs, and exports as Graphviz
//! DOT and OpenTelemetry JSON spans.
//!
//! All of it is pure: functions take events and return answers, no I/O.
//!
//! Edges of the causal graph: `parent → child` from each event's parent,
//! plus a **data edge** from the APPEND of a record to every read of it (a
//! read dependency; Sans-Souci's "Get dependency") — a LATEST is linked to
//! the APPEND of the seq it returned (the "Sync dependency"). A read is a
//! READ/LATEST event (format version 1, socket reads) or folded into the
//! event of the handler's next write ([`crate::event::Event::reads`]).
//! A FIRING's reads count as inputs of every APPEND that FIRING made.
//! A REPAIR event is a parent of the APPEND of every record it replaced
//! (its cause being the corrected record's APPEND), so the causes of a
//! repaired record include the repair and what it corrected.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet, VecDeque};
use std::fmt::Write as _;

use serde_json::{json, Value};
use varve_log::Seq;

use crate::event::{trace_hex, EventId, EventKind, StoredEvent, TraceId};

/// A record: `(namespace, log, seq)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct RecordRef {
    /// The namespace holding `log`.
    pub namespace: String,
    /// The log holding the record.
    pub log: String,
    /// The record's seq in `log`.
    pub seq: Seq,
}

/// An index over a set of events for causal queries. Building it is O(n).
pub struct CausalGraph<'a> {
    events: &'a [StoredEvent],
    by_id: HashMap<&'a EventId, usize>,
    children: Vec<Vec<usize>>,
    parents: Vec<Vec<usize>>,
    /// (namespace, log, seq) → the APPEND event's index.
    appends: HashMap<(&'a str, &'a str, Seq), usize>,
}

impl<'a> CausalGraph<'a> {
    /// Index `events` (from one or several namespaces).
    #[must_use]
    pub fn new(events: &'a [StoredEvent]) -> CausalGraph<'a> {
        let mut by_id = HashMap::with_capacity(events.len());
        let mut appends = HashMap::new();
        for (i, e) in events.iter().enumerate() {
            by_id.insert(&e.id, i);
            if e.event.kind == EventKind::Append {
                appends.insert((e.id.namespace.as_str(), e.event.log.as_str(), e.event.seq), i);
            }
        }
        let mut children = vec![Vec::new(); events.len()];
        let mut parents = vec![Vec::new(); events.len()];
        for (i, e) in events.iter().enumerate() {
            if let Some(&p) = e.event.parent.as_ref().and_then(|p| by_id.get(p)) {
                children[p].push(i);
                parents[i].push(p);
            }
        }
        // Data edges. A read links the APPEND of each record it read (or, for
        // LATEST, of the seq returned) to the event recording the read: a
        // READ/LATEST event of its own, or the APPEND/DONE/FAILED it is folded
        // into. A FIRING's reads count as inputs of everything it appends:
        // for ancestors, the FIRING depends on what it read; for descendants,
        // what it read leads to the FIRING's APPENDs.
        // A run's outputs are the APPENDs naming its FIRING as parent — not
        // the events this loop links to it (a read's cause may be an APPEND,
        // whose data-edge children are no outputs of it).
        let outputs_of: Vec<Vec<usize>> = children
            .iter()
            .map(|c| c.iter().copied().filter(|&c| events[c].event.kind == EventKind::Append).collect())
            .collect();
        for (i, e) in events.iter().enumerate() {
            let own_event = matches!(e.event.kind, EventKind::Read | EventKind::Latest);
            let firing = e.event.parent.as_ref().and_then(|p| by_id.get(p)).copied();
            let outputs: Vec<usize> = firing.map(|f| outputs_of[f].clone()).unwrap_or_default();
            for read in e.event.read_views() {
                for seq in read.seq..=read.seq_last {
                    let Some(&a) = appends.get(&(e.id.namespace.as_str(), read.log, seq)) else { continue };
                    children[a].push(i);
                    parents[i].push(a);
                    if own_event {
                        continue;
                    }
                    if let Some(f) = firing {
                        parents[f].push(a);
                    }
                    children[a].extend(outputs.iter().copied().filter(|&o| o != i));
                }
            }
            if own_event {
                if let Some(f) = firing {
                    parents[f].push(i);
                    children[i].extend(outputs);
                }
            }
            // A REPAIR is a cause of every record whose value it replaced.
            for (log, first, last) in e.event.replaced() {
                for seq in first..=last {
                    if let Some(&a) = appends.get(&(e.id.namespace.as_str(), log, seq)) {
                        parents[a].push(i);
                        children[i].push(a);
                    }
                }
            }
        }
        CausalGraph { events, by_id, children, parents, appends }
    }

    /// The APPEND event of a record, if present.
    #[must_use]
    pub fn append_of(&self, namespace: &str, log: &str, seq: Seq) -> Option<&'a StoredEvent> {
        self.appends.get(&(namespace, log, seq)).map(|&i| &self.events[i])
    }

    /// The event with this id.
    #[must_use]
    pub fn get(&self, id: &EventId) -> Option<&'a StoredEvent> {
        self.by_id.get(id).map(|&i| &self.events[i])
    }

    /// Every event the record's APPEND transitively depends on (parents and
    /// read dependencies), the APPEND itself first, then in event order. Empty if the
    /// record has no APPEND event here. O(size of the answer).
    #[must_use]
    pub fn ancestors(&self, namespace: &str, log: &str, seq: Seq) -> Vec<&'a StoredEvent> {
        self.walk(namespace, log, seq, &self.parents)
    }

    /// Every event that transitively depends on the record (its triggers,
    /// their firings and appends, reads of it, and so on), the APPEND first.
    #[must_use]
    pub fn descendants(&self, namespace: &str, log: &str, seq: Seq) -> Vec<&'a StoredEvent> {
        self.walk(namespace, log, seq, &self.children)
    }

    fn walk(&self, namespace: &str, log: &str, seq: Seq, edges: &[Vec<usize>]) -> Vec<&'a StoredEvent> {
        let Some(&start) = self.appends.get(&(namespace, log, seq)) else { return Vec::new() };
        let mut seen = HashSet::from([start]);
        let mut queue = VecDeque::from([start]);
        let mut found = Vec::new();
        while let Some(i) = queue.pop_front() {
            if i != start {
                found.push(i);
            }
            for &next in &edges[i] {
                if seen.insert(next) {
                    queue.push_back(next);
                }
            }
        }
        found.sort_by(|&a, &b| order_key(&self.events[a]).cmp(&order_key(&self.events[b])));
        std::iter::once(start).chain(found).map(|i| &self.events[i]).collect()
    }

    /// The records (APPEND events) among `events`.
    #[must_use]
    pub fn records(events: &[&StoredEvent]) -> Vec<RecordRef> {
        events
            .iter()
            .filter(|e| e.event.kind == EventKind::Append)
            .map(|e| RecordRef { namespace: e.id.namespace.clone(), log: e.event.log.clone(), seq: e.event.seq })
            .collect()
    }
}

/// Every event of one trace, in the order given.
#[must_use]
pub fn trace_events(events: &[StoredEvent], trace: TraceId) -> Vec<&StoredEvent> {
    events.iter().filter(|e| e.event.trace == trace).collect()
}

/// The merge key: timestamp, then host, namespace, seq. Unique per event.
type OrderKey<'a> = (u64, u64, &'a str, Seq);

pub(crate) fn order_key(e: &StoredEvent) -> OrderKey<'_> {
    (e.event.timestamp_ns, e.id.host, e.id.namespace.as_str(), e.id.seq)
}

/// Merge the event logs of several namespaces (any order, any grouping) into
/// one total order that respects causality: every event comes after its
/// parent (when the parent is present) and after the event before it in its
/// own namespace's log. Among the events whose causes are all placed, the one
/// with the smallest (timestamp, host, namespace, seq) goes next, so the
/// result depends only on the set of events, never on the input order.
///
/// O(n log n): Kahn's topological sort with a binary heap. Duplicate events
/// (same id) are kept once. If the input has a cycle (only possible with
/// corrupted logs), the events on it are appended at the end in key order.
#[must_use]
pub fn merge(logs: &[Vec<StoredEvent>]) -> Vec<StoredEvent> {
    merge_owned(logs.to_vec())
}

/// [`merge`], taking the events instead of copying them. One namespace's
/// log is already in causal order (a parent is always an earlier event of
/// its own log or of another namespace), so events of a single
/// `(host, namespace)` are only sorted by seq and deduplicated — O(n log n)
/// without the topological sort, and O(n) when already in order.
#[must_use]
pub fn merge_owned(mut logs: Vec<Vec<StoredEvent>>) -> Vec<StoredEvent> {
    let mut all: Vec<StoredEvent> =
        if logs.len() == 1 { logs.pop().unwrap_or_default() } else { logs.into_iter().flatten().collect() };
    let single = all
        .first()
        .is_none_or(|first| all.iter().all(|e| e.id.host == first.id.host && e.id.namespace == first.id.namespace));
    if single {
        if !all.is_sorted_by_key(|e| e.id.seq) {
            all.sort_by_key(|e| e.id.seq);
        }
        all.dedup_by_key(|e| e.id.seq);
        return all;
    }
    let order = causal_order(&all);
    let mut slots: Vec<Option<StoredEvent>> = all.into_iter().map(Some).collect();
    order.into_iter().filter_map(|i| slots[i].take()).collect()
}

/// Indices of `events` in the merged order (duplicates left out): Kahn's
/// topological sort with a binary heap keyed as [`merge`] describes.
fn causal_order(all: &[StoredEvent]) -> Vec<usize> {
    let mut unique: BTreeMap<(u64, &str, Seq), usize> = BTreeMap::new();
    for (i, e) in all.iter().enumerate() {
        unique.entry((e.id.host, e.id.namespace.as_str(), e.id.seq)).or_insert(i);
    }
    let positions: Vec<usize> = unique.into_values().collect();
    let events: Vec<&StoredEvent> = positions.iter().map(|&i| &all[i]).collect();
    let index: HashMap<(u64, &str, Seq), usize> =
        events.iter().enumerate().map(|(i, e)| ((e.id.host, e.id.namespace.as_str(), e.id.seq), i)).collect();
    let mut waiting = vec![0usize; events.len()];
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); events.len()];
    for (i, e) in events.iter().enumerate() {
        // The previous event of the same namespace log (events are sorted by (host, ns, seq)).
        if i > 0 {
            let prev = events[i - 1];
            if prev.id.host == e.id.host && prev.id.namespace == e.id.namespace {
                children[i - 1].push(i);
                waiting[i] += 1;
            }
        }
        if let Some(parent) = &e.event.parent {
            if let Some(&p) = index.get(&(parent.host, parent.namespace.as_str(), parent.seq)) {
                if p != i {
                    children[p].push(i);
                    waiting[i] += 1;
                }
            }
        }
    }
    let mut heap: BinaryHeap<Reverse<(OrderKey<'_>, usize)>> = BinaryHeap::new();
    for (i, e) in events.iter().enumerate() {
        if waiting[i] == 0 {
            heap.push(Reverse((order_key(e), i)));
        }
    }
    let mut out = Vec::with_capacity(events.len());
    let mut placed = vec![false; events.len()];
    while let Some(Reverse((_, i))) = heap.pop() {
        placed[i] = true;
        out.push(positions[i]);
        for &c in &children[i] {
            waiting[c] -= 1;
            if waiting[c] == 0 {
                heap.push(Reverse((order_key(events[c]), c)));
            }
        }
    }
    if out.len() < events.len() {
        let mut rest: Vec<usize> = (0..events.len()).filter(|&i| !placed[i]).collect();
        rest.sort_by(|&a, &b| order_key(events[a]).cmp(&order_key(events[b])));
        out.extend(rest.into_iter().map(|i| positions[i]));
    }
    out
}

fn node_name(id: &EventId) -> String {
    format!("\"{:x}:{}:{}\"", id.host, id.namespace, id.seq)
}

fn label(e: &StoredEvent) -> String {
    let ev = &e.event;
    let mut text = format!("{} #{}", ev.kind.name(), e.id.seq);
    if !ev.log.is_empty() {
        if ev.seq_last > ev.seq {
            let _ = write!(text, "\\n{}:{}..{}", ev.log, ev.seq, ev.seq_last);
        } else {
            let _ = write!(text, "\\n{}:{}", ev.log, ev.seq);
        }
    }
    if !ev.handler.is_empty() {
        let _ = write!(text, "\\n{}", ev.handler);
    }
    if ev.attempt > 1 {
        let _ = write!(text, " (attempt {})", ev.attempt);
    }
    text.replace('"', "'")
}

/// Graphviz DOT of these events: one node per event (records' APPENDs as
/// boxes, FAILED red), parent edges solid, read dependencies dashed.
#[must_use]
pub fn to_dot(events: &[&StoredEvent]) -> String {
    let ids: HashSet<&EventId> = events.iter().map(|e| &e.id).collect();
    let mut appends: HashMap<(&str, &str, Seq), &EventId> = HashMap::new();
    for e in events {
        if e.event.kind == EventKind::Append {
            appends.insert((e.id.namespace.as_str(), e.event.log.as_str(), e.event.seq), &e.id);
        }
    }
    let mut out = String::from("digraph varve {\n  rankdir=LR;\n  node [fontname=\"Helvetica\", fontsize=10];\n");
    for e in events {
        let style = match e.event.kind {
            EventKind::Append => "shape=box, style=filled, fillcolor=\"#dbeafe\"",
            EventKind::Failed | EventKind::DeadLetter => "shape=ellipse, color=red",
            EventKind::Firing => "shape=ellipse, style=filled, fillcolor=\"#fef3c7\"",
            _ => "shape=ellipse",
        };
        let _ = writeln!(out, "  {} [label=\"{}\", {style}];", node_name(&e.id), label(e));
    }
    for e in events {
        if let Some(parent) = &e.event.parent {
            if ids.contains(parent) {
                let _ = writeln!(out, "  {} -> {};", node_name(parent), node_name(&e.id));
            }
        }
        for read in e.event.read_views() {
            for seq in read.seq..=read.seq_last {
                if let Some(append) = appends.get(&(e.id.namespace.as_str(), read.log, seq)) {
                    let _ = writeln!(out, "  {} -> {} [style=dashed];", node_name(append), node_name(&e.id));
                }
            }
        }
    }
    out.push_str("}\n");
    out
}

/// A span id for an event: 8 bytes (16 hex digits) from an FNV-1a hash of its id.
#[must_use]
pub fn span_id(id: &EventId) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in id.host.to_le_bytes().iter().chain(id.namespace.as_bytes()).chain(&id.seq.to_le_bytes()) {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{:016x}", hash.max(1))
}

/// OpenTelemetry-compatible JSON (OTLP/JSON `resourceSpans` → `scopeSpans` →
/// `spans`): one span per event; a FIRING's span lasts until its DONE or
/// FAILED; `parentSpanId` is the parent event's span.
#[must_use]
pub fn to_otel_json(events: &[&StoredEvent]) -> Value {
    let mut end_of: HashMap<&EventId, u64> = HashMap::new();
    for e in events {
        if matches!(e.event.kind, EventKind::Done | EventKind::Failed) {
            if let Some(parent) = &e.event.parent {
                end_of.insert(parent, e.event.timestamp_ns);
            }
        }
    }
    let mut by_resource: BTreeMap<(u64, &str), Vec<Value>> = BTreeMap::new();
    for e in events {
        let ev = &e.event;
        let end = end_of.get(&e.id).copied().unwrap_or(ev.timestamp_ns).max(ev.timestamp_ns);
        let mut attributes = vec![
            json!({"key": "varve.event.kind", "value": {"stringValue": ev.kind.name()}}),
            json!({"key": "varve.event.id", "value": {"stringValue": e.id.to_string()}}),
        ];
        if !ev.log.is_empty() {
            attributes.push(json!({"key": "varve.log", "value": {"stringValue": ev.log}}));
            attributes.push(json!({"key": "varve.seq", "value": {"intValue": ev.seq.to_string()}}));
            if ev.seq_last > ev.seq {
                // A scan's READ covers seq..=seq_last; without this the range is lost.
                attributes.push(json!({"key": "varve.seq_last", "value": {"intValue": ev.seq_last.to_string()}}));
            }
        }
        if !ev.handler.is_empty() {
            attributes.push(json!({"key": "varve.handler", "value": {"stringValue": ev.handler}}));
        }
        if !ev.reads.is_empty() {
            // Folded reads: "READ log:seq" / "READ log:first..=last" / "LATEST log=seq".
            let reads: Vec<Value> = ev
                .reads
                .iter()
                .map(|r| {
                    let text = match (r.kind, r.seq_last > r.seq) {
                        (EventKind::Latest, _) => format!("LATEST {}={}", r.log, r.seq),
                        (_, true) => format!("READ {}:{}..={}", r.log, r.seq, r.seq_last),
                        (_, false) => format!("READ {}:{}", r.log, r.seq),
                    };
                    json!({"stringValue": text})
                })
                .collect();
            // A REPAIR's entries are the records it replaced.
            let key = if ev.kind == EventKind::Repair { "varve.replaced" } else { "varve.reads" };
            attributes.push(json!({"key": key, "value": {"arrayValue": {"values": reads}}}));
        }
        if ev.attempt > 0 {
            attributes.push(json!({"key": "varve.attempt", "value": {"intValue": ev.attempt.to_string()}}));
        }
        let name = if ev.handler.is_empty() {
            format!("{} {}", ev.kind.name(), ev.log)
        } else {
            format!("{} {}", ev.kind.name(), ev.handler)
        };
        let mut span = json!({
            "traceId": trace_hex(ev.trace),
            "spanId": span_id(&e.id),
            "name": name.trim_end(),
            "kind": 1,
            "startTimeUnixNano": ev.timestamp_ns.to_string(),
            "endTimeUnixNano": end.to_string(),
            "attributes": attributes,
            "status": {"code": if ev.kind == EventKind::Failed || ev.kind == EventKind::DeadLetter { 2 } else { 0 }},
        });
        if let Some(parent) = &ev.parent {
            span["parentSpanId"] = Value::String(span_id(parent));
        }
        if !ev.reason.is_empty() {
            span["status"]["message"] = Value::String(ev.reason.clone());
        }
        by_resource.entry((e.id.host, e.id.namespace.as_str())).or_default().push(span);
    }
    let resource_spans: Vec<Value> = by_resource
        .into_iter()
        .map(|((host, namespace), spans)| {
            json!({
                "resource": {"attributes": [
                    {"key": "service.name", "value": {"stringValue": format!("varve/{namespace}")}},
                    {"key": "host.id", "value": {"stringValue": format!("{host:016x}")}},
                    {"key": "varve.namespace", "value": {"stringValue": namespace}},
                ]},
                "scopeSpans": [{"scope": {"name": "varve-runtime", "version": env!("CARGO_PKG_VERSION")}, "spans": spans}],
            })
        })
        .collect();
    json!({ "resourceSpans": resource_spans })
}
