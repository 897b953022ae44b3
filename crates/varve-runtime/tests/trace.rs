//! Causal merge (property: respects every edge, identical for shuffled
//! input), and the shapes of the DOT and OpenTelemetry exports.

mod common;

use std::collections::HashMap;

use common::{events, memory_ns, unbounded, IDLE};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use varve_runtime::trace::{merge, to_dot, to_otel_json, trace_events, CausalGraph};
use varve_runtime::{Event, EventId, EventKind, RetryPolicy, RuntimeBuilder, StoredEvent};

/// Random events over three namespaces: each namespace's seqs dense, each
/// parent an earlier event (any namespace), timestamps skewed so that a
/// child can carry an earlier timestamp than its parent.
fn random_events(rng: &mut StdRng, n: usize) -> Vec<StoredEvent> {
    let namespaces = ["a", "b", "c"];
    let mut next = [1u64; 3];
    let mut out: Vec<StoredEvent> = Vec::new();
    for _ in 0..n {
        let k = rng.gen_range(0..3);
        let id = EventId { host: k as u64 + 1, namespace: namespaces[k].into(), seq: next[k] };
        next[k] += 1;
        let parent =
            if out.is_empty() || rng.gen_bool(0.2) { None } else { Some(out[rng.gen_range(0..out.len())].id.clone()) };
        let mut event = Event::new(EventKind::Append, rng.gen(), parent).at("x", id.seq);
        event.timestamp_ns = rng.gen_range(0..1000);
        out.push(StoredEvent { id, event });
    }
    out
}

fn check_order(merged: &[StoredEvent], input: &[StoredEvent]) {
    assert_eq!(merged.len(), input.len());
    let position: HashMap<&EventId, usize> = merged.iter().enumerate().map(|(i, e)| (&e.id, i)).collect();
    for e in input {
        if let Some(parent) = &e.event.parent {
            assert!(position[parent] < position[&e.id], "{parent} must come before {}", e.id);
        }
        if e.id.seq > 1 {
            let prev = EventId { seq: e.id.seq - 1, ..e.id.clone() };
            assert!(position[&prev] < position[&e.id], "namespace order broken at {}", e.id);
        }
    }
}

#[test]
fn merge_respects_causality_and_ignores_input_order() {
    for seed in 0..50u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let n = rng.gen_range(1..300);
        let events = random_events(&mut rng, n);
        let merged = merge(std::slice::from_ref(&events));
        check_order(&merged, &events);
        // Shuffle and regroup arbitrarily: the same total order.
        let mut shuffled = events.clone();
        shuffled.shuffle(&mut rng);
        let cut = rng.gen_range(0..=shuffled.len());
        let (left, right) = shuffled.split_at(cut);
        let again = merge(&[right.to_vec(), left.to_vec(), left[..left.len() / 2].to_vec()]);
        assert_eq!(again, merged, "seed {seed}: the merge must not depend on input order or duplicates");
    }
}

#[test]
fn merge_of_two_runtimes_keeps_a_cross_namespace_cause_before_its_effect() {
    let downstream = RuntimeBuilder::new(memory_ns("down")).host(2).log("y", unbounded()).start().unwrap();
    let handle = downstream.handle();
    let upstream = RuntimeBuilder::new(memory_ns("up"))
        .host(1)
        .log("x", unbounded())
        .handler("forward", RetryPolicy::default(), move |ctx| {
            handle.append_caused(&[("y", ctx.record())], ctx.event_id().clone(), ctx.trace_id())?;
            Ok(())
        })
        .subscribe("x", "forward")
        .start()
        .unwrap();
    for i in 0..5u8 {
        upstream.append("x", &[i]).unwrap();
    }
    assert!(upstream.wait_idle(IDLE));
    let (up, down) = (events(&upstream), events(&downstream));
    let merged = merge(&[down.clone(), up.clone()]);
    let all: Vec<StoredEvent> = up.iter().chain(&down).cloned().collect();
    check_order(&merged, &all);
    let y = down.iter().find(|e| e.event.kind == EventKind::Append).unwrap();
    assert_eq!(y.event.parent.as_ref().unwrap().namespace, "up");
    // The trace crosses namespaces: ancestors of down/y:1 reach up/x.
    let graph = CausalGraph::new(&all);
    let causes = CausalGraph::records(&graph.ancestors("down", "y", y.event.seq));
    assert!(causes.iter().any(|r| r.namespace == "up" && r.log == "x"), "{causes:?}");
    let trace = trace_events(&all, y.event.trace);
    assert!(trace.iter().any(|e| e.id.namespace == "up") && trace.iter().any(|e| e.id.namespace == "down"));
}

#[test]
fn dot_and_otel_exports_have_the_expected_shape() {
    let rt = RuntimeBuilder::new(memory_ns("shape"))
        .host(0xab)
        .log("in", unbounded())
        .log("out", unbounded())
        .handler("copy", RetryPolicy::default(), |ctx| {
            ctx.latest("in")?;
            ctx.append("out", ctx.record())?;
            Ok(())
        })
        .subscribe("in", "copy")
        .start()
        .unwrap();
    rt.append("in", b"v").unwrap();
    assert!(rt.wait_idle(IDLE));
    let all = events(&rt);
    let trace = all.iter().find(|e| e.event.kind == EventKind::Append).unwrap().event.trace;
    let traced = trace_events(&all, trace);
    assert_eq!(traced.len(), 5, "APPEND, TRIGGER, FIRING, APPEND (the LATEST folded in), DONE");

    let dot = to_dot(&traced);
    assert!(dot.starts_with("digraph varve {"));
    assert!(dot.trim_end().ends_with('}'));
    assert_eq!(dot.matches("[label=").count(), 5);
    assert_eq!(dot.matches(" -> ").count(), 4 + 1, "four parent edges and one dashed read edge");
    assert!(dot.contains("style=dashed"));

    let otel = to_otel_json(&traced);
    let resource = &otel["resourceSpans"][0];
    assert_eq!(resource["resource"]["attributes"][0]["value"]["stringValue"], "varve/shape");
    let spans = resource["scopeSpans"][0]["spans"].as_array().unwrap();
    assert_eq!(spans.len(), 5);
    let with_reads: Vec<&serde_json::Value> = spans
        .iter()
        .filter_map(|s| s["attributes"].as_array().unwrap().iter().find(|a| a["key"] == "varve.reads"))
        .collect();
    assert_eq!(with_reads.len(), 1, "the folded LATEST is an attribute of the output's APPEND span");
    assert_eq!(with_reads[0]["value"]["arrayValue"]["values"][0]["stringValue"], "LATEST in=1");
    let ids: Vec<&str> = spans.iter().map(|s| s["spanId"].as_str().unwrap()).collect();
    for span in spans {
        assert_eq!(span["traceId"].as_str().unwrap().len(), 32);
        assert_eq!(span["spanId"].as_str().unwrap().len(), 16);
        if let Some(parent) = span.get("parentSpanId") {
            assert!(ids.contains(&parent.as_str().unwrap()), "parents are spans of the trace");
        }
        let start: u64 = span["startTimeUnixNano"].as_str().unwrap().parse().unwrap();
        let end: u64 = span["endTimeUnixNano"].as_str().unwrap().parse().unwrap();
        assert!(end >= start);
    }
    assert_eq!(spans.iter().filter(|s| s.get("parentSpanId").is_none()).count(), 1, "one root span");
}

#[test]
fn events_round_trip_and_bad_bytes_are_errors() {
    let mut event =
        Event::new(EventKind::Failed, u128::MAX - 7, Some(EventId { host: 9, namespace: "other-ns".into(), seq: 77 }))
            .at("log.x", 5)
            .for_handler("h");
    event.attempt = 3;
    event.trigger = 4;
    event.reason = "exit 1 — ünïcode".into();
    let bytes = event.encode();
    assert_eq!(Event::decode(&bytes, 1).unwrap(), event);
    for cut in 0..bytes.len() {
        assert!(Event::decode(&bytes[..cut], 1).is_err(), "a cut at {cut} must not decode");
    }
    let mut wrong = bytes.clone();
    wrong[0] = 9;
    let error = Event::decode(&wrong, 12).unwrap_err().to_string();
    assert!(error.contains("event 12") && error.contains("version 9"), "{error}");
    let id = EventId { host: 0xabc, namespace: "n.s".into(), seq: 42 };
    assert_eq!(EventId::parse(&id.to_string()).unwrap(), id);
    assert!(EventId::parse("zz:ns:1").is_err());
}
