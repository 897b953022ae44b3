//! The events a repair needs (`events_needed`): from the corrected record's
//! APPEND on — and from the FIRING of a run that was going when the record
//! landed and read it afterwards — not every event kept. The plan of those
//! events must equal the plan of every event, and the repair carried out
//! from them must give what the handlers compute from the corrected value.
//! (`tests/plan.rs` compares the two plans on random applications of two
//! namespaces, whose runs never overlap an input's APPEND;
//! `tests/needed_corners.rs` repairs corner cases both ways.)

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

mod common;
mod overlap;

use common::{hash, value};
use overlap::{by_name, every_event, rec, records, repair, same_plan, start, Gate, Subscribed, WAIT};
use varve_log::{LogConfig, MemoryStore, Store};
use varve_repair::{events_needed, Correction, Inputs, NotReplayable, RepairPlan, Since};
use varve_runtime::{EventKind, HandlerContext, HandlerFn, RuntimeHandle};

/// `slow` on `start` (appends `out`, is held while `in:2` lands, reads
/// `in:2`, appends `out` again) and `copy` on `in` (appends a hash of the
/// record to `copies`).
fn slow_and_copy(gate: &Gate) -> [Subscribed; 2] {
    let gate = gate.clone();
    let slow: HandlerFn = Arc::new(move |ctx: &mut HandlerContext<'_>| {
        ctx.append("out", &hash(&[1, value(ctx.record())]).to_le_bytes())?;
        gate.hold(ctx)?;
        let read = ctx.get("in", 2)?;
        ctx.append("out", &hash(&[2, value(ctx.record()), value(&read)]).to_le_bytes())?;
        Ok(())
    });
    let copy: HandlerFn = Arc::new(|ctx: &mut HandlerContext<'_>| {
        ctx.append("copies", &hash(&[value(ctx.record())]).to_le_bytes())?;
        Ok(())
    });
    [("slow", "start", slow), ("copy", "in", copy)]
}

const LOGS: [&str; 4] = ["start", "in", "out", "copies"];

#[test]
fn a_run_going_when_the_record_landed_is_planned_and_replayed_from_its_firing() {
    let ns = MemoryStore::new().namespace("app").expect("ns");
    let gate = Gate::default();
    let handlers = slow_and_copy(&gate);
    let runtime = start(&ns, 1, &LOGS, &handlers);
    runtime.append("in", &10u64.to_le_bytes()).expect("in:1");
    assert!(runtime.wait_idle(WAIT), "idle after in:1");
    runtime.append("start", &7u64.to_le_bytes()).expect("start:1");
    gate.until_held();
    // Lands while `slow` runs (after its first append); `slow` reads it afterwards.
    runtime.append("in", &20u64.to_le_bytes()).expect("in:2");
    gate.release();
    assert!(runtime.wait_idle(WAIT), "idle after in:2");
    runtime.stop(Duration::from_secs(5));

    let record = rec("app", "in", 2);
    let correct = [Correction::Record(record.clone())];
    let all = every_event(&[&ns]);
    let needed = events_needed(&correct, &[Arc::clone(&ns)]).expect("events needed");
    let firing = all.iter().find(|e| e.event.kind == EventKind::Firing && e.event.handler == "slow").expect("FIRING");
    let append = all
        .iter()
        .find(|e| e.event.kind == EventKind::Append && e.event.log == "in" && e.event.seq == 2)
        .expect("in:2's APPEND");
    assert!(firing.id.seq < append.id.seq, "slow began before in:2 landed");
    assert_eq!(needed.first().map(|e| &e.id), Some(&firing.id), "the events needed start at slow's FIRING");
    assert!(needed.len() < all.len(), "in:1 and its copy are not needed: {} of {} events", needed.len(), all.len());

    let plan = RepairPlan::build(&needed, &correct, &HashSet::new());
    same_plan(&plan, &RepairPlan::build(&all, &correct, &HashSet::new()));
    let slow_run = plan.reruns.iter().find(|r| r.handler == "slow").expect("slow is replayed");
    assert_eq!(slow_run.keeps, 1, "its append before the read is left as it is\n{}", plan.to_text());

    repair(&needed, &[(record, 21)], &[&ns], &by_name(&handlers)).expect("repair");
    assert_eq!(records(&ns, "in"), [10, 21]);
    assert_eq!(
        records(&ns, "out"),
        [hash(&[1, 7]), hash(&[2, 7, 21])],
        "slow's first output stays, its second follows the correction"
    );
    assert_eq!(records(&ns, "copies"), [hash(&[10]), hash(&[21])]);
}

#[test]
fn a_record_appended_without_the_runtime_or_a_handler_from_the_start_needs_every_event() {
    let ns = MemoryStore::new().namespace("app").expect("ns");
    ns.create_log("in", LogConfig::unbounded()).expect("in");
    ns.append("in", &5u64.to_le_bytes()).expect("in:1, no runtime");
    let runtime = start(&ns, 1, &LOGS, &slow_and_copy(&Gate::default()));
    for v in [6u64, 7] {
        runtime.append("in", &v.to_le_bytes()).expect("in");
        assert!(runtime.wait_idle(WAIT), "idle");
    }
    runtime.stop(Duration::from_secs(5));
    let all = every_event(&[&ns]);
    let needed = |correction: Correction| events_needed(&[correction], &[Arc::clone(&ns)]).expect("events").len();
    assert_eq!(needed(Correction::Record(rec("app", "in", 1))), all.len(), "in:1 has no APPEND event");
    assert!(needed(Correction::Record(rec("app", "in", 3))) < all.len(), "in:3 has one");
    assert_eq!(needed(Correction::Handler { handler: "copy".into(), since: Since::Start }), all.len());
    assert!(needed(Correction::Handler { handler: "copy".into(), since: Since::Seq(3) }) < all.len());
    assert_eq!(needed(Correction::Handler { handler: "nobody".into(), since: Since::Seq(3) }), all.len());
}

/// A run of another namespace appended here before the record landed, and
/// read afterwards what a run triggered by the record wrote there: the plan
/// counts that earlier append as "may change", so the record's namespace
/// must be read whole — the namespaces exchanged something after the record.
#[test]
fn a_run_of_another_namespace_that_appended_here_before_the_record_is_seen() {
    let edge_ns = MemoryStore::new().namespace("edge").expect("edge");
    let cloud_ns = MemoryStore::new().namespace("cloud").expect("cloud");
    let gate = Gate::default();
    let edge_handle: Arc<OnceLock<RuntimeHandle>> = Arc::new(OnceLock::new());
    // `far`, on cloud `go`: appends to the edge, is held, reads cloud `c:1`, appends cloud `y`.
    let far: HandlerFn = {
        let (gate, edge_handle) = (gate.clone(), Arc::clone(&edge_handle));
        Arc::new(move |ctx: &mut HandlerContext<'_>| {
            let edge = edge_handle.get().ok_or("the edge runtime is not up")?;
            ctx.append_via(edge, &[("x_out", &1u64.to_le_bytes())])?;
            gate.hold(ctx)?;
            let read = ctx.get("c", 1)?;
            ctx.append("y", &hash(&[value(&read)]).to_le_bytes())?;
            Ok(())
        })
    };
    let cloud = start(&cloud_ns, 2, &["go", "c", "y"], &[("far", "go", far)]);
    // `fwd`, on edge `in`: appends a hash of the record to cloud `c`.
    let fwd: HandlerFn = {
        let cloud_handle = cloud.handle();
        Arc::new(move |ctx: &mut HandlerContext<'_>| {
            ctx.append_via(&cloud_handle, &[("c", &hash(&[value(ctx.record())]).to_le_bytes())])?;
            Ok(())
        })
    };
    let edge = start(&edge_ns, 1, &["in", "x_out"], &[("fwd", "in", fwd)]);
    edge_handle.set(edge.handle()).map_err(|_| ()).expect("set once");

    cloud.append("go", &1u64.to_le_bytes()).expect("go:1");
    gate.until_held();
    assert_eq!(edge_ns.latest("x_out").expect("x_out"), 1, "far appended to the edge before in:1");
    edge.append("in", &20u64.to_le_bytes()).expect("in:1");
    assert!(edge.wait_idle(WAIT), "fwd ran");
    gate.release();
    assert!(cloud.wait_idle(WAIT) && edge.wait_idle(WAIT), "idle");
    edge.stop(Duration::from_secs(5));
    cloud.stop(Duration::from_secs(5));

    let correct = [Correction::Record(rec("edge", "in", 1))];
    let all = every_event(&[&edge_ns, &cloud_ns]);
    let plan_of_all = RepairPlan::build(&all, &correct, &HashSet::new());
    assert!(
        plan_of_all.may_change_records().contains(&rec("edge", "x_out", 1)),
        "far's earlier append may change\n{}",
        plan_of_all.to_text()
    );
    let needed = events_needed(&correct, &[Arc::clone(&edge_ns), Arc::clone(&cloud_ns)]).expect("events needed");
    same_plan(&RepairPlan::build(&needed, &correct, &HashSet::new()), &plan_of_all);
}

/// A handler replaced from a seq on: its namespace is read from that seq's
/// APPEND in the log it is subscribed to (its runs there come after), and
/// the repair with the new code from those events rewrites its outputs
/// from that seq on.
#[test]
fn a_handler_replaced_from_a_seq_reads_from_that_records_append() {
    let ns = MemoryStore::new().namespace("app").expect("ns");
    let runtime = start(&ns, 1, &LOGS, &slow_and_copy(&Gate::default()));
    for v in 1..=6u64 {
        runtime.append("in", &v.to_le_bytes()).expect("in");
        assert!(runtime.wait_idle(WAIT), "idle");
    }
    runtime.stop(Duration::from_secs(5));

    let replaced = [Correction::Handler { handler: "copy".into(), since: Since::Seq(4) }];
    let all = every_event(&[&ns]);
    let needed = events_needed(&replaced, &[Arc::clone(&ns)]).expect("events needed");
    let append = all
        .iter()
        .find(|e| e.event.kind == EventKind::Append && e.event.log == "in" && e.event.seq == 4)
        .expect("in:4's APPEND");
    assert_eq!(needed.first().map(|e| &e.id), Some(&append.id), "the events needed start at in:4's APPEND");
    let plan = RepairPlan::build(&needed, &replaced, &HashSet::new());
    same_plan(&plan, &RepairPlan::build(&all, &replaced, &HashSet::new()));
    assert_eq!(plan.reruns.len(), 3, "copy on in:4..6\n{}", plan.to_text());

    let new_copy: HandlerFn = Arc::new(|ctx: &mut HandlerContext<'_>| {
        ctx.append("copies", &hash(&[99, value(ctx.record())]).to_le_bytes())?;
        Ok(())
    });
    let inputs = Inputs {
        events: &needed,
        namespaces: &HashMap::from([("app".to_owned(), Arc::clone(&ns))]),
        handlers: &HashMap::from([("copy".to_owned(), new_copy)]),
        values: &HashMap::new(),
        not_replayable: NotReplayable::Refuse,
    };
    varve_repair::execute(&plan, &inputs).expect("repair");
    let copies: Vec<u64> = (1..=6).map(|v| if v < 4 { hash(&[v]) } else { hash(&[99, v]) }).collect();
    assert_eq!(records(&ns, "copies"), copies);
}
