//! The causal graph of one prediction, cut to what a reader wants to see:
//! the chain that triggered it (raw reading → smooth → smoothed reading →
//! predict), the single records its `predict` read (the other devices'
//! smoothed readings and the model) each with its own chain back to a raw
//! reading, and the range scans that gathered those handlers' inputs (the
//! hour of raw readings, the training window), as leaves.
//!
//! The full ancestry ([`varve_runtime::trace::CausalGraph::ancestors`]) of a
//! prediction is every reading the model was trained on and everything
//! before them: thousands of events. Here read dependencies are followed
//! only out of the prediction's own `predict`; the reads of `smooth` and
//! `train` are shown but not expanded.

use std::collections::{BTreeSet, HashMap};

use serde_json::{json, Value};
use varve_log::Seq;
use varve_runtime::trace::span_id;
use varve_runtime::{EventKind, ReadView, StoredEvent};

use crate::app::PREDICTION;

/// The events of prediction `seq`'s graph, in event order; empty when the
/// prediction has no APPEND event.
#[must_use]
pub fn prediction_graph(events: &[StoredEvent], seq: Seq) -> Vec<&StoredEvent> {
    let by_seq: HashMap<Seq, &StoredEvent> = events.iter().map(|e| (e.id.seq, e)).collect();
    let mut appends: HashMap<(&str, Seq), Seq> = HashMap::new();
    // Per FIRING, its reads: the event that records each (a READ/LATEST of
    // its own, or the APPEND/DONE it is folded into) and the read.
    let mut reads_of: HashMap<Seq, Vec<(Seq, ReadView<'_>)>> = HashMap::new();
    for e in events {
        if e.event.kind == EventKind::Append {
            appends.insert((e.event.log.as_str(), e.event.seq), e.id.seq);
        }
        if let Some(parent) = &e.event.parent {
            for read in e.event.read_views() {
                reads_of.entry(parent.seq).or_default().push((e.id.seq, read));
            }
        }
    }
    let Some(&start) = appends.get(&(PREDICTION, seq)) else {
        return Vec::new();
    };
    let mut chosen = BTreeSet::new();
    // Up the parents from an event; returns the FIRINGs passed.
    let chain = |from: Seq, chosen: &mut BTreeSet<Seq>| -> Vec<Seq> {
        let mut firings = Vec::new();
        let mut current = Some(from);
        while let Some(seq) = current {
            let Some(e) = by_seq.get(&seq) else { break };
            if !chosen.insert(seq) {
                break;
            }
            if e.event.kind == EventKind::Firing {
                firings.push(seq);
            }
            current = e.event.parent.as_ref().map(|p| p.seq);
        }
        firings
    };
    let firings = chain(start, &mut chosen);
    let mut other_firings = firings.get(1..).map(<[Seq]>::to_vec).unwrap_or_default();
    // The prediction's own predict is the first FIRING above its APPEND.
    if let Some(&predict) = firings.first() {
        for &(recorded_in, read) in reads_of.get(&predict).map_or(&[][..], Vec::as_slice) {
            if read.log == PREDICTION {
                continue; // its "is it already done?" look: not an input
            }
            chosen.insert(recorded_in);
            // The inputs are the single records it read; its scans (ranges
            // searched by timestamp) and LATEST look-ups are shown, not followed.
            let single = read.kind == EventKind::Read && read.seq_last <= read.seq;
            if let (true, Some(&append)) = (single, appends.get(&(read.log, read.seq))) {
                other_firings.extend(chain(append, &mut chosen));
            }
        }
    }
    // Of the other handlers (smooth, train), the events recording the range
    // scans that gathered their inputs (the hour of raw readings, the
    // training window), as leaves.
    for firing in other_firings {
        for &(recorded_in, read) in reads_of.get(&firing).map_or(&[][..], Vec::as_slice) {
            if read.seq_last > read.seq {
                chosen.insert(recorded_in);
            }
        }
    }
    chosen.into_iter().map(|seq| by_seq[&seq]).collect()
}

/// Add OpenTelemetry span links from each span that records reads (a
/// READ/LATEST event, or an APPEND/DONE with reads folded in) to the APPEND
/// span of every record read (when that APPEND is in the export), so the
/// read dependencies the DOT export draws dashed survive in the JSON too
/// (`varve_runtime::trace::to_otel_json` carries only parent links).
pub fn add_read_links(otel: &mut Value, events: &[&StoredEvent]) {
    let mut appends: HashMap<(&str, Seq), &StoredEvent> = HashMap::new();
    for e in events {
        if e.event.kind == EventKind::Append {
            appends.insert((e.event.log.as_str(), e.event.seq), e);
        }
    }
    let mut links: HashMap<String, Vec<Value>> = HashMap::new();
    for e in events {
        let targets: Vec<Value> = e
            .event
            .read_views()
            .flat_map(|read| (read.seq..=read.seq_last).map(move |seq| (read.log, seq)))
            .filter_map(|key| appends.get(&key))
            .map(|a| {
                json!({
                    "traceId": varve_runtime::event::trace_hex(a.event.trace),
                    "spanId": span_id(&a.id),
                    "attributes": [{"key": "varve.link", "value": {"stringValue": "read"}}],
                })
            })
            .collect();
        if !targets.is_empty() {
            links.insert(span_id(&e.id), targets);
        }
    }
    let Some(resources) = otel["resourceSpans"].as_array_mut() else {
        return;
    };
    for resource in resources {
        let Some(scopes) = resource["scopeSpans"].as_array_mut() else {
            continue;
        };
        for scope in scopes {
            let Some(spans) = scope["spans"].as_array_mut() else {
                continue;
            };
            for span in spans {
                let id = span["spanId"].as_str().unwrap_or_default().to_owned();
                if let Some(targets) = links.remove(&id) {
                    span["links"] = Value::Array(targets);
                }
            }
        }
    }
}
