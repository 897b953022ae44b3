//! Corner cases of `events_needed`, each repaired both ways — from every
//! event and from the events needed — with the same plan and the same
//! logs: corrections in two namespaces (read whole); one correction after
//! which a run of the other namespace, going when it landed and having
//! appended to the record's namespace before, depends on it (read whole:
//! the namespaces exchanged something); a scan replayed over a log that got
//! records without the runtime after the record (read whole: those records
//! did not exist when the run read); corrections naming logs that do not
//! exist.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

mod common;

use common::{hash, value};
use varve_log::{LogConfig, MemoryStore, Namespace, SeqRange, Store};
use varve_repair::{events_needed, Correction, Inputs, NotReplayable, RepairPlan};
use varve_runtime::trace::{merge_owned, RecordRef};
use varve_runtime::{
    namespace_events, HandlerContext, HandlerFn, RetryPolicy, RuntimeBuilder, RuntimeHandle, StoredEvent,
};

const WAIT: Duration = Duration::from_secs(30);

fn every_event(namespaces: &[&Arc<dyn Namespace>]) -> Vec<StoredEvent> {
    merge_owned(namespaces.iter().map(|ns| namespace_events(ns.as_ref(), SeqRange::ALL).expect("events")).collect())
}

fn records(ns: &Arc<dyn Namespace>, log: &str) -> Vec<u64> {
    ns.scan(log, SeqRange::ALL).expect("scan").map(|r| value(&r.expect("record").value)).collect()
}

fn rec(namespace: &str, log: &str, seq: u64) -> RecordRef {
    RecordRef { namespace: namespace.into(), log: log.into(), seq }
}

fn same_plan(a: &RepairPlan, b: &RepairPlan) {
    assert_eq!(
        RepairPlan { events_scanned: 0, ..a.clone() },
        RepairPlan { events_scanned: 0, ..b.clone() },
        "plan of the events needed:\n{}\nplan of every event:\n{}",
        a.to_text(),
        b.to_text()
    );
}

// ---------------------------------------------------------------------------
// 1. Two corrections in two namespaces: a run downstream of the edge
//    correction appended to cloud *before* the cloud correction's APPEND,
//    which a read of cloud from that APPEND on would miss.

fn fwd(remote: &RuntimeHandle) -> HandlerFn {
    let remote = remote.clone();
    Arc::new(move |ctx: &mut HandlerContext<'_>| {
        let out = hash(&[value(ctx.record())]).to_le_bytes();
        ctx.append_via(&remote, &[("mirror", &out)])?;
        Ok(())
    })
}

struct TwoNs {
    edge: Arc<dyn Namespace>,
    cloud: Arc<dyn Namespace>,
    cloud_handle: RuntimeHandle,
}

fn two_corrections_app() -> TwoNs {
    let edge_ns = MemoryStore::new().namespace("edge").expect("edge");
    let cloud_ns = MemoryStore::new().namespace("cloud").expect("cloud");
    let cloud = RuntimeBuilder::new(Arc::clone(&cloud_ns))
        .host(2)
        .concurrency(1)
        .log("in", LogConfig::unbounded())
        .log("mirror", LogConfig::unbounded())
        .start()
        .expect("cloud");
    let handle = cloud.handle();
    let f = fwd(&handle);
    let edge = RuntimeBuilder::new(Arc::clone(&edge_ns))
        .host(1)
        .concurrency(1)
        .log("w", LogConfig::unbounded())
        .handler("fwd", RetryPolicy::default(), move |ctx| f(ctx))
        .subscribe("w", "fwd")
        .start()
        .expect("edge");
    edge.append("w", &5u64.to_le_bytes()).expect("w:1");
    assert!(edge.wait_idle(WAIT) && cloud.wait_idle(WAIT));
    // The cloud record corrected too lands after fwd's mirror:1.
    cloud.append("in", &7u64.to_le_bytes()).expect("in:1");
    assert!(edge.wait_idle(WAIT) && cloud.wait_idle(WAIT));
    edge.stop(Duration::from_secs(5));
    cloud.stop(Duration::from_secs(5));
    TwoNs { edge: edge_ns, cloud: cloud_ns, cloud_handle: handle }
}

fn two_corrections() -> [Correction; 2] {
    [Correction::Record(rec("edge", "w", 1)), Correction::Record(rec("cloud", "in", 1))]
}

#[test]
fn corrections_in_two_namespaces_plan() {
    let app = two_corrections_app();
    let correct = two_corrections();
    let all = every_event(&[&app.edge, &app.cloud]);
    let needed = events_needed(&correct, &[Arc::clone(&app.edge), Arc::clone(&app.cloud)]).expect("needed");
    same_plan(
        &RepairPlan::build(&needed, &correct, &HashSet::new()),
        &RepairPlan::build(&all, &correct, &HashSet::new()),
    );
}

#[test]
fn corrections_in_two_namespaces_execute() {
    let app = two_corrections_app();
    let correct = two_corrections();
    let needed = events_needed(&correct, &[Arc::clone(&app.edge), Arc::clone(&app.cloud)]).expect("needed");
    let plan = RepairPlan::build(&needed, &correct, &HashSet::new());
    let namespaces =
        HashMap::from([("edge".to_owned(), Arc::clone(&app.edge)), ("cloud".to_owned(), Arc::clone(&app.cloud))]);
    let handlers = HashMap::from([("fwd".to_owned(), fwd(&app.cloud_handle))]);
    let values = HashMap::from([
        (rec("edge", "w", 1), 6u64.to_le_bytes().to_vec()),
        (rec("cloud", "in", 1), 8u64.to_le_bytes().to_vec()),
    ]);
    let inputs = Inputs {
        events: &needed,
        namespaces: &namespaces,
        handlers: &handlers,
        values: &values,
        not_replayable: NotReplayable::Refuse,
    };
    varve_repair::execute(&plan, &inputs).expect("repair from the events needed");
    assert_eq!(records(&app.cloud, "mirror"), [hash(&[6])], "fwd's output follows the corrected w:1");
}

// ---------------------------------------------------------------------------
// 2. One correction (what the CLI and Python pass): a run of the *other*
//    namespace, going when the record landed, appended to the record's
//    namespace before the record's APPEND and depends on the repair after.

type Gate = Arc<(Mutex<u8>, Condvar)>;

struct Going {
    edge: Arc<dyn Namespace>,
    cloud: Arc<dyn Namespace>,
    handlers: HashMap<String, HandlerFn>,
}

/// edge `slow` on `start`: appends to cloud `mirror`, waits, asks the latest
/// seq of edge `z`, appends `out`. cloud `put` on `in`: appends to edge `z`.
fn going_app() -> Going {
    let edge_ns = MemoryStore::new().namespace("edge").expect("edge");
    let cloud_ns = MemoryStore::new().namespace("cloud").expect("cloud");
    let edge_handle: Arc<OnceLock<RuntimeHandle>> = Arc::new(OnceLock::new());
    let gate: Gate = Arc::new((Mutex::new(0), Condvar::new()));
    let put: HandlerFn = {
        let edge_handle = Arc::clone(&edge_handle);
        Arc::new(move |ctx: &mut HandlerContext<'_>| {
            let out = hash(&[value(ctx.record())]).to_le_bytes();
            ctx.append_via(edge_handle.get().expect("edge handle"), &[("z", &out)])?;
            Ok(())
        })
    };
    let cloud = RuntimeBuilder::new(Arc::clone(&cloud_ns))
        .host(2)
        .concurrency(1)
        .log("in", LogConfig::unbounded())
        .log("mirror", LogConfig::unbounded())
        .handler("put", RetryPolicy::default(), {
            let put = Arc::clone(&put);
            move |ctx| put(ctx)
        })
        .subscribe("in", "put")
        .start()
        .expect("cloud");
    let cloud_handle = cloud.handle();
    let slow: HandlerFn = {
        let gate = Arc::clone(&gate);
        let cloud_handle = cloud_handle.clone();
        Arc::new(move |ctx: &mut HandlerContext<'_>| {
            let mine = value(ctx.record());
            ctx.append_via(&cloud_handle, &[("mirror", &hash(&[mine]).to_le_bytes())])?;
            if !ctx.is_replay() {
                let (state, changed) = &*gate;
                let mut guard = state.lock().expect("gate");
                *guard = (*guard).max(1);
                changed.notify_all();
                let (guard, _) = changed.wait_timeout_while(guard, WAIT, |s| *s < 2).expect("gate");
                assert_eq!(*guard, 2, "let go");
            }
            let n = ctx.latest("z")?;
            ctx.append("out", &hash(&[mine, n]).to_le_bytes())?;
            Ok(())
        })
    };
    let edge = RuntimeBuilder::new(Arc::clone(&edge_ns))
        .host(1)
        .concurrency(1)
        .log("start", LogConfig::unbounded())
        .log("z", LogConfig::unbounded())
        .log("out", LogConfig::unbounded())
        .handler("slow", RetryPolicy::default(), {
            let slow = Arc::clone(&slow);
            move |ctx| slow(ctx)
        })
        .subscribe("start", "slow")
        .start()
        .expect("edge");
    edge_handle.set(edge.handle()).ok().expect("set once");
    edge.append("start", &3u64.to_le_bytes()).expect("start:1");
    let (state, changed) = &*gate;
    let guard = changed.wait_timeout_while(state.lock().expect("gate"), WAIT, |s| *s < 1).expect("gate").0;
    assert_eq!(*guard, 1, "slow began (and appended mirror:1)");
    drop(guard);
    cloud.append("in", &7u64.to_le_bytes()).expect("in:1"); // put appends edge z:1
    assert!(cloud.wait_idle(WAIT), "put done");
    *state.lock().expect("gate") = 2;
    changed.notify_all();
    assert!(edge.wait_idle(WAIT) && cloud.wait_idle(WAIT));
    edge.stop(Duration::from_secs(5));
    cloud.stop(Duration::from_secs(5));
    let handlers = HashMap::from([("put".to_owned(), put), ("slow".to_owned(), slow)]);
    Going { edge: edge_ns, cloud: cloud_ns, handlers }
}

#[test]
fn one_correction_run_of_other_namespace_plan() {
    let app = going_app();
    let correct = [Correction::Record(rec("cloud", "in", 1))];
    let all = every_event(&[&app.edge, &app.cloud]);
    let needed = events_needed(&correct, &[Arc::clone(&app.edge), Arc::clone(&app.cloud)]).expect("needed");
    same_plan(
        &RepairPlan::build(&needed, &correct, &HashSet::new()),
        &RepairPlan::build(&all, &correct, &HashSet::new()),
    );
}

fn execute_going(from_needed: bool) {
    let app = going_app();
    let correct = [Correction::Record(rec("cloud", "in", 1))];
    let events = if from_needed {
        events_needed(&correct, &[Arc::clone(&app.edge), Arc::clone(&app.cloud)]).expect("needed")
    } else {
        every_event(&[&app.edge, &app.cloud])
    };
    let plan = RepairPlan::build(&events, &correct, &HashSet::new());
    let namespaces =
        HashMap::from([("edge".to_owned(), Arc::clone(&app.edge)), ("cloud".to_owned(), Arc::clone(&app.cloud))]);
    let values = HashMap::from([(rec("cloud", "in", 1), 8u64.to_le_bytes().to_vec())]);
    let inputs = Inputs {
        events: &events,
        namespaces: &namespaces,
        handlers: &app.handlers,
        values: &values,
        not_replayable: NotReplayable::Refuse,
    };
    varve_repair::execute(&plan, &inputs).unwrap_or_else(|e| panic!("from_needed={from_needed}: {e}"));
    assert_eq!(records(&app.edge, "z"), [hash(&[8])]);
    assert_eq!(records(&app.cloud, "mirror"), [hash(&[3])]);
    assert_eq!(records(&app.edge, "out"), [hash(&[3, 1])]);
}

#[test]
fn one_correction_run_of_other_namespace_execute_from_every_event() {
    execute_going(false);
}

#[test]
fn one_correction_run_of_other_namespace_execute_from_needed() {
    execute_going(true);
}

// ---------------------------------------------------------------------------
// 3. A replayed scan of a log whose last records were appended without the
//    runtime after the record: the walk takes the records of a log before
//    its first APPEND among the events as there from the start.

fn sum() -> HandlerFn {
    Arc::new(|ctx: &mut HandlerContext<'_>| {
        let mut parts = vec![value(ctx.record())];
        for r in ctx.scan("data", 1..)? {
            parts.push(value(&r.value));
        }
        ctx.append("out", &hash(&parts).to_le_bytes())?;
        Ok(())
    })
}

fn scan_app() -> Arc<dyn Namespace> {
    let ns = MemoryStore::new().namespace("app").expect("ns");
    let f = sum();
    let runtime = RuntimeBuilder::new(Arc::clone(&ns))
        .host(1)
        .concurrency(1)
        .log("in", LogConfig::unbounded())
        .log("data", LogConfig::unbounded())
        .log("out", LogConfig::unbounded())
        .handler("sum", RetryPolicy::default(), move |ctx| f(ctx))
        .subscribe("in", "sum")
        .start()
        .expect("runtime");
    for (log, v) in [("data", 1u64), ("data", 2), ("in", 10), ("in", 20)] {
        runtime.append(log, &v.to_le_bytes()).expect("append");
        assert!(runtime.wait_idle(WAIT));
    }
    runtime.stop(Duration::from_secs(5));
    // Later, without the runtime (documented as supported: placed at their seqs).
    ns.append("data", &4u64.to_le_bytes()).expect("data:3");
    ns
}

fn execute_scan(from_needed: bool) {
    let ns = scan_app();
    let correct = [Correction::Record(rec("app", "in", 2))];
    let events =
        if from_needed { events_needed(&correct, &[Arc::clone(&ns)]).expect("needed") } else { every_event(&[&ns]) };
    let plan = RepairPlan::build(&events, &correct, &HashSet::new());
    let namespaces = HashMap::from([("app".to_owned(), Arc::clone(&ns))]);
    let handlers = HashMap::from([("sum".to_owned(), sum())]);
    let values = HashMap::from([(rec("app", "in", 2), 21u64.to_le_bytes().to_vec())]);
    let inputs = Inputs {
        events: &events,
        namespaces: &namespaces,
        handlers: &handlers,
        values: &values,
        not_replayable: NotReplayable::Refuse,
    };
    varve_repair::execute(&plan, &inputs).expect("repair");
    // sum on in:2 saw data:1..=2 when it ran; data:3 came later.
    assert_eq!(records(&ns, "out"), [hash(&[10, 1, 2]), hash(&[21, 1, 2])], "from_needed={from_needed}");
}

#[test]
fn scan_replayed_from_every_event() {
    execute_scan(false);
}

#[test]
fn scan_replayed_from_needed() {
    execute_scan(true);
}

// ---------------------------------------------------------------------------
// 4. Error handling: a correction naming a log that does not exist.

#[test]
fn correction_of_a_missing_log_plans_as_before() {
    let ns = scan_app();
    for log in ["nosuch", "bad name/x", "a".repeat(300).as_str()] {
        let correct = [Correction::Record(rec("app", log, 1))];
        let needed = events_needed(&correct, &[Arc::clone(&ns)]);
        assert!(needed.is_ok(), "{log:?}: {:?}", needed.err());
    }
}
