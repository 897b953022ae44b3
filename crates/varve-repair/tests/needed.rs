//! The events a repair needs (`events_needed`): from the corrected record's
//! APPEND on — and from the FIRING of a run that was going when the record
//! landed and read it afterwards — not every event kept. The plan of those
//! events must equal the plan of every event, and the repair carried out
//! from them must give what the handlers compute from the corrected value.
//! (`tests/plan.rs` compares the two plans on random applications of two
//! namespaces, whose runs never overlap an input's APPEND.)

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

mod common;

use common::{hash, value};
use varve_log::{LogConfig, MemoryStore, Namespace, SeqRange, Store};
use varve_repair::{events_needed, Correction, Inputs, NotReplayable, RepairPlan};
use varve_runtime::trace::{merge_owned, RecordRef};
use varve_runtime::{
    namespace_events, HandlerContext, HandlerFn, HandlerKind, HandlerSpec, RetryPolicy, Runtime, RuntimeBuilder,
    RuntimeHandle, StoredEvent,
};

const WAIT: Duration = Duration::from_secs(30);

/// Where `slow` is: 0 not begun, 1 running (it set it), 2 let go (the test set it).
type Gate = Arc<(Mutex<u8>, Condvar)>;

/// `slow`, on `start`: appends `out`, says it runs, waits until the test
/// lets it go (not in a replay: the repair places every record), reads
/// `in:2` — written by another meanwhile — and appends `out` again.
fn slow(ctx: &HandlerContext<'_>, gate: &Gate) -> varve_runtime::HandlerResult {
    ctx.append("out", &hash(&[1, value(ctx.record())]).to_le_bytes())?;
    if !ctx.is_replay() {
        let (state, changed) = &**gate;
        let mut guard = state.lock().expect("gate");
        *guard = (*guard).max(1);
        changed.notify_all();
        let (guard, _) = changed.wait_timeout_while(guard, WAIT, |state| *state < 2).expect("gate");
        if *guard < 2 {
            return Err("the test never let slow go".into());
        }
    }
    let read = ctx.get("in", 2)?;
    ctx.append("out", &hash(&[2, value(ctx.record()), value(&read)]).to_le_bytes())?;
    Ok(())
}

/// `copy`, on `in`: appends a hash of the record to `copies`.
fn copy(ctx: &HandlerContext<'_>) -> varve_runtime::HandlerResult {
    ctx.append("copies", &hash(&[value(ctx.record())]).to_le_bytes())?;
    Ok(())
}

fn handlers(gate: &Gate) -> HashMap<String, HandlerFn> {
    let gate = Arc::clone(gate);
    let slow: HandlerFn = Arc::new(move |ctx: &mut HandlerContext<'_>| slow(ctx, &gate));
    let copy: HandlerFn = Arc::new(|ctx: &mut HandlerContext<'_>| copy(ctx));
    HashMap::from([("slow".to_owned(), slow), ("copy".to_owned(), copy)])
}

fn start(ns: &Arc<dyn Namespace>, gate: &Gate) -> Runtime {
    let mut builder = RuntimeBuilder::new(Arc::clone(ns)).host(1).concurrency(1);
    for log in ["start", "in", "out", "copies"] {
        builder = builder.log(log, LogConfig::unbounded());
    }
    for (name, f) in handlers(gate) {
        builder = builder.register(HandlerSpec { name, kind: HandlerKind::Rust(f), retry: RetryPolicy::default() });
    }
    builder.subscribe("start", "slow").subscribe("in", "copy").start().expect("runtime")
}

fn every_event(ns: &Arc<dyn Namespace>) -> Vec<StoredEvent> {
    merge_owned(vec![namespace_events(ns.as_ref(), SeqRange::ALL).expect("events")])
}

fn records(ns: &Arc<dyn Namespace>, log: &str) -> Vec<u64> {
    ns.scan(log, SeqRange::ALL).expect("scan").map(|r| value(&r.expect("record").value)).collect()
}

#[test]
fn a_run_going_when_the_record_landed_is_planned_and_replayed_from_its_firing() {
    let ns = MemoryStore::new().namespace("app").expect("ns");
    let gate: Gate = Arc::new((Mutex::new(0), Condvar::new()));
    let runtime = start(&ns, &gate);
    runtime.append("in", &10u64.to_le_bytes()).expect("in:1");
    assert!(runtime.wait_idle(WAIT), "idle after in:1");
    runtime.append("start", &7u64.to_le_bytes()).expect("start:1");
    let (state, changed) = &*gate;
    let guard = changed.wait_timeout_while(state.lock().expect("gate"), WAIT, |s| *s < 1).expect("gate").0;
    assert_eq!(*guard, 1, "slow began");
    drop(guard);
    // Lands while `slow` runs; `slow` reads it afterwards.
    runtime.append("in", &20u64.to_le_bytes()).expect("in:2");
    *state.lock().expect("gate") = 2;
    changed.notify_all();
    assert!(runtime.wait_idle(WAIT), "idle after in:2");
    runtime.stop(Duration::from_secs(5));

    let record = RecordRef { namespace: "app".into(), log: "in".into(), seq: 2 };
    let correct = [Correction::Record(record.clone())];
    let all = every_event(&ns);
    let needed = events_needed(&correct, &[Arc::clone(&ns)]).expect("events needed");
    let firing = all
        .iter()
        .find(|e| e.event.kind == varve_runtime::EventKind::Firing && e.event.handler == "slow")
        .expect("slow's FIRING");
    let append = all
        .iter()
        .find(|e| e.event.kind == varve_runtime::EventKind::Append && e.event.log == "in" && e.event.seq == 2)
        .expect("in:2's APPEND");
    assert!(firing.id.seq < append.id.seq, "slow began before in:2 landed");
    assert_eq!(needed.first().map(|e| &e.id), Some(&firing.id), "the events needed start at slow's FIRING");
    assert!(needed.len() < all.len(), "in:1 and its copy are not needed: {} of {} events", needed.len(), all.len());

    let plan = RepairPlan::build(&needed, &correct, &HashSet::new());
    let plan_of_all = RepairPlan::build(&all, &correct, &HashSet::new());
    assert_eq!(
        RepairPlan { events_scanned: 0, ..plan.clone() },
        RepairPlan { events_scanned: 0, ..plan_of_all },
        "the plan of the events needed is the plan of every event"
    );
    let slow_run = plan.reruns.iter().find(|r| r.handler == "slow").expect("slow is replayed");
    assert_eq!(slow_run.keeps, 1, "its append before the read is left as it is\n{}", plan.to_text());

    let namespaces = HashMap::from([("app".to_owned(), Arc::clone(&ns))]);
    let values = HashMap::from([(record, 21u64.to_le_bytes().to_vec())]);
    let handlers = handlers(&gate);
    let inputs = Inputs {
        events: &needed,
        namespaces: &namespaces,
        handlers: &handlers,
        values: &values,
        not_replayable: NotReplayable::Refuse,
    };
    varve_repair::execute(&plan, &inputs).expect("repair");
    assert_eq!(records(&ns, "in"), [10, 21]);
    assert_eq!(
        records(&ns, "out"),
        [hash(&[1, 7]), hash(&[2, 7, 21])],
        "slow's first output stays, its second follows the correction"
    );
    assert_eq!(records(&ns, "copies"), [hash(&[10]), hash(&[21])]);
}

#[test]
fn a_record_appended_without_the_runtime_needs_every_event() {
    let ns = MemoryStore::new().namespace("app").expect("ns");
    ns.create_log("in", LogConfig::unbounded()).expect("in");
    ns.append("in", &5u64.to_le_bytes()).expect("in:1, no runtime");
    let gate: Gate = Arc::new((Mutex::new(2), Condvar::new()));
    let runtime = start(&ns, &gate);
    for v in [6u64, 7] {
        runtime.append("in", &v.to_le_bytes()).expect("in");
        assert!(runtime.wait_idle(WAIT), "idle");
    }
    runtime.stop(Duration::from_secs(5));
    let unrecorded = [Correction::Record(RecordRef { namespace: "app".into(), log: "in".into(), seq: 1 })];
    let recorded = [Correction::Record(RecordRef { namespace: "app".into(), log: "in".into(), seq: 3 })];
    let all = every_event(&ns);
    assert_eq!(events_needed(&unrecorded, &[Arc::clone(&ns)]).expect("events").len(), all.len());
    assert!(events_needed(&recorded, &[Arc::clone(&ns)]).expect("events").len() < all.len());
    let handler = [Correction::Handler { handler: "copy".into(), since: varve_repair::Since::Seq(3) }];
    assert_eq!(events_needed(&handler, &[Arc::clone(&ns)]).expect("events").len(), all.len());
}

/// A run of another namespace appended here before the record landed, and
/// read afterwards what a run triggered by the record wrote there: the plan
/// counts that earlier append as "may change", so the record's namespace
/// must be read whole — the namespaces exchanged something after the record.
#[test]
fn a_run_of_another_namespace_that_appended_here_before_the_record_is_seen() {
    let edge_ns = MemoryStore::new().namespace("edge").expect("edge");
    let cloud_ns = MemoryStore::new().namespace("cloud").expect("cloud");
    let gate: Gate = Arc::new((Mutex::new(0), Condvar::new()));
    let edge_handle: Arc<OnceLock<RuntimeHandle>> = Arc::new(OnceLock::new());
    // `far`, on cloud `go`: appends to the edge, waits, reads cloud `c:1`, appends cloud `y`.
    let far = {
        let (gate, edge_handle) = (Arc::clone(&gate), Arc::clone(&edge_handle));
        move |ctx: &mut HandlerContext<'_>| -> varve_runtime::HandlerResult {
            let edge = edge_handle.get().ok_or("the edge runtime is not up")?;
            ctx.append_via(edge, &[("x_out", &1u64.to_le_bytes())])?;
            if !ctx.is_replay() {
                let (state, changed) = &*gate;
                let mut guard = state.lock().expect("gate");
                *guard = (*guard).max(1);
                changed.notify_all();
                let (guard, _) = changed.wait_timeout_while(guard, WAIT, |state| *state < 2).expect("gate");
                if *guard < 2 {
                    return Err("the test never let far go".into());
                }
            }
            let read = ctx.get("c", 1)?;
            ctx.append("y", &hash(&[value(&read)]).to_le_bytes())?;
            Ok(())
        }
    };
    let cloud = RuntimeBuilder::new(Arc::clone(&cloud_ns))
        .host(2)
        .concurrency(1)
        .log("go", LogConfig::unbounded())
        .log("c", LogConfig::unbounded())
        .log("y", LogConfig::unbounded())
        .handler("far", RetryPolicy::default(), far)
        .subscribe("go", "far")
        .start()
        .expect("cloud");
    // `fwd`, on edge `in`: appends a hash of the record to cloud `c`.
    let cloud_handle = cloud.handle();
    let edge = RuntimeBuilder::new(Arc::clone(&edge_ns))
        .host(1)
        .concurrency(1)
        .log("in", LogConfig::unbounded())
        .log("x_out", LogConfig::unbounded())
        .handler("fwd", RetryPolicy::default(), move |ctx| {
            ctx.append_via(&cloud_handle, &[("c", &hash(&[value(ctx.record())]).to_le_bytes())])?;
            Ok(())
        })
        .subscribe("in", "fwd")
        .start()
        .expect("edge");
    edge_handle.set(edge.handle()).map_err(|_| ()).expect("set once");

    cloud.append("go", &1u64.to_le_bytes()).expect("go:1");
    let (state, changed) = &*gate;
    let guard = changed.wait_timeout_while(state.lock().expect("gate"), WAIT, |s| *s < 1).expect("gate").0;
    assert_eq!(*guard, 1, "far began");
    drop(guard);
    assert_eq!(edge_ns.latest("x_out").expect("x_out"), 1, "far appended to the edge before in:1");
    edge.append("in", &20u64.to_le_bytes()).expect("in:1");
    assert!(edge.wait_idle(WAIT), "fwd ran");
    *state.lock().expect("gate") = 2;
    changed.notify_all();
    assert!(cloud.wait_idle(WAIT) && edge.wait_idle(WAIT), "idle");
    edge.stop(Duration::from_secs(5));
    cloud.stop(Duration::from_secs(5));

    let correct = [Correction::Record(RecordRef { namespace: "edge".into(), log: "in".into(), seq: 1 })];
    let all = merge_owned(vec![
        namespace_events(edge_ns.as_ref(), SeqRange::ALL).expect("edge events"),
        namespace_events(cloud_ns.as_ref(), SeqRange::ALL).expect("cloud events"),
    ]);
    let needed = events_needed(&correct, &[Arc::clone(&edge_ns), Arc::clone(&cloud_ns)]).expect("events needed");
    let plan_of_all = RepairPlan::build(&all, &correct, &HashSet::new());
    let x_out = RecordRef { namespace: "edge".into(), log: "x_out".into(), seq: 1 };
    assert!(
        plan_of_all.may_change_records().contains(&x_out),
        "far's earlier append may change\n{}",
        plan_of_all.to_text()
    );
    let plan = RepairPlan::build(&needed, &correct, &HashSet::new());
    assert_eq!(
        RepairPlan { events_scanned: 0, ..plan },
        RepairPlan { events_scanned: 0, ..plan_of_all },
        "the plan of the events needed is the plan of every event"
    );
}
