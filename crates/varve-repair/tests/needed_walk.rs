//! A run is replayed at its first write the repair changes, after the walk
//! passed the writes it leaves as they were: the replay must still see the
//! history the run saw at its first write (a scan reads no further), not
//! the walk's later position. Each case is checked against what a run from
//! scratch with the correction computes.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

mod common;

use common::{hash, value};
use varve_log::{LogConfig, MemoryStore, Namespace, SeqRange, Store};
use varve_repair::{Correction, Inputs, NotReplayable, RepairPlan};
use varve_runtime::trace::{merge_owned, RecordRef};
use varve_runtime::{
    namespace_events, HandlerContext, HandlerFn, HandlerKind, HandlerSpec, RetryPolicy, RuntimeBuilder, StoredEvent,
};

const WAIT: Duration = Duration::from_secs(30);

type Gate = Arc<(Mutex<u8>, Condvar)>;

fn wait_gate(ctx: &HandlerContext<'_>, gate: &Gate) -> varve_runtime::HandlerResult {
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
    Ok(())
}

/// `slow`, on `start`: scans the whole of `in` (only in:1 exists then),
/// appends `out` (a write the repair keeps), waits while in:2 lands, reads
/// in:2 and appends `out` again from the scan's sum and in:2.
fn slow(ctx: &HandlerContext<'_>, gate: &Gate) -> varve_runtime::HandlerResult {
    let sum: u64 = ctx.scan("in", SeqRange::ALL)?.iter().map(|r| value(&r.value)).sum();
    ctx.append("out", &hash(&[1, value(ctx.record()), sum]).to_le_bytes())?;
    wait_gate(ctx, gate)?;
    let read = ctx.get("in", 2)?;
    ctx.append("out", &hash(&[2, value(ctx.record()), sum, value(&read)]).to_le_bytes())?;
    Ok(())
}

fn handlers(gate: &Gate) -> HashMap<String, HandlerFn> {
    let gate = Arc::clone(gate);
    let slow: HandlerFn = Arc::new(move |ctx: &mut HandlerContext<'_>| slow(ctx, &gate));
    HashMap::from([("slow".to_owned(), slow)])
}

fn every_event(ns: &Arc<dyn Namespace>) -> Vec<StoredEvent> {
    merge_owned(vec![namespace_events(ns.as_ref(), SeqRange::ALL).expect("events")])
}

fn records(ns: &Arc<dyn Namespace>, log: &str) -> Vec<u64> {
    ns.scan(log, SeqRange::ALL).expect("scan").map(|r| value(&r.expect("record").value)).collect()
}

/// The replay happens at out:2, where the walk has passed in:2 (the
/// corrected record, which `slow` reads by seq): its scan must still return
/// in:1 alone, as it did when `slow` first appended.
#[test]
fn a_scan_before_a_kept_append_sees_only_what_the_run_saw() {
    let ns = MemoryStore::new().namespace("app").expect("ns");
    let gate: Gate = Arc::new((Mutex::new(0), Condvar::new()));
    let mut builder = RuntimeBuilder::new(Arc::clone(&ns)).host(1).concurrency(1);
    for log in ["start", "in", "out"] {
        builder = builder.log(log, LogConfig::unbounded());
    }
    for (name, f) in handlers(&gate) {
        builder = builder.register(HandlerSpec { name, kind: HandlerKind::Rust(f), retry: RetryPolicy::default() });
    }
    let runtime = builder.subscribe("start", "slow").start().expect("runtime");
    runtime.append("in", &10u64.to_le_bytes()).expect("in:1");
    runtime.append("start", &7u64.to_le_bytes()).expect("start:1");
    let (state, changed) = &*gate;
    let guard = changed.wait_timeout_while(state.lock().expect("gate"), WAIT, |s| *s < 1).expect("gate").0;
    assert_eq!(*guard, 1, "slow began");
    drop(guard);
    runtime.append("in", &20u64.to_le_bytes()).expect("in:2");
    *state.lock().expect("gate") = 2;
    changed.notify_all();
    assert!(runtime.wait_idle(WAIT), "idle");
    runtime.stop(Duration::from_secs(5));
    assert_eq!(records(&ns, "out"), [hash(&[1, 7, 10]), hash(&[2, 7, 10, 20])], "the original run");

    let record = RecordRef { namespace: "app".into(), log: "in".into(), seq: 2 };
    let correct = [Correction::Record(record.clone())];
    let events = every_event(&ns);
    let plan = RepairPlan::build(&events, &correct, &HashSet::new());
    let namespaces = HashMap::from([("app".to_owned(), Arc::clone(&ns))]);
    let values = HashMap::from([(record, 21u64.to_le_bytes().to_vec())]);
    let handlers = handlers(&gate);
    let inputs = Inputs {
        events: &events,
        namespaces: &namespaces,
        handlers: &handlers,
        values: &values,
        not_replayable: NotReplayable::Refuse,
    };
    let outcome = varve_repair::execute(&plan, &inputs);
    assert!(outcome.is_ok(), "repair: {outcome:?}");
    // From scratch with in:2 = 21 and the same interleaving, the scan sees in:1 only.
    assert_eq!(
        records(&ns, "out"),
        [hash(&[1, 7, 10]), hash(&[2, 7, 10, 21])],
        "out:2 follows the correction, from the history slow saw (wrong: {:?})",
        hash(&[2, 7, 31, 21])
    );
}

/// `tally`, on `start`: scans the whole of `in`, appends `out` (kept: it
/// read nothing that changes), waits (in:2 lands meanwhile, nothing to do
/// with the repair), reads `cfg:1` (corrected; there from the start) and
/// appends `out` from the scan's sum and cfg:1.
fn tally(ctx: &HandlerContext<'_>, gate: &Gate) -> varve_runtime::HandlerResult {
    let sum: u64 = ctx.scan("in", SeqRange::ALL)?.iter().map(|r| value(&r.value)).sum();
    ctx.append("out", &hash(&[1, sum]).to_le_bytes())?;
    wait_gate(ctx, gate)?;
    let cfg = ctx.get("cfg", 1)?;
    ctx.append("out", &hash(&[2, sum, value(&cfg)]).to_le_bytes())?;
    Ok(())
}

/// Replayed at out:2, after in:2's APPEND: the replayed scan must return
/// in:1 alone, as it did when `tally` first appended.
#[test]
fn a_run_that_worked_before_reads_a_later_tail_in_its_replay() {
    let ns = MemoryStore::new().namespace("app").expect("ns");
    let gate: Gate = Arc::new((Mutex::new(0), Condvar::new()));
    let tally_fn: HandlerFn = {
        let gate = Arc::clone(&gate);
        Arc::new(move |ctx: &mut HandlerContext<'_>| tally(ctx, &gate))
    };
    let mut builder = RuntimeBuilder::new(Arc::clone(&ns)).host(1).concurrency(1);
    for log in ["start", "in", "cfg", "out"] {
        builder = builder.log(log, LogConfig::unbounded());
    }
    let runtime = builder
        .register(HandlerSpec {
            name: "tally".into(),
            kind: HandlerKind::Rust(Arc::clone(&tally_fn)),
            retry: RetryPolicy::default(),
        })
        .subscribe("start", "tally")
        .start()
        .expect("runtime");
    runtime.append("cfg", &5u64.to_le_bytes()).expect("cfg:1");
    runtime.append("in", &10u64.to_le_bytes()).expect("in:1");
    runtime.append("start", &7u64.to_le_bytes()).expect("start:1");
    let (state, changed) = &*gate;
    let guard = changed.wait_timeout_while(state.lock().expect("gate"), WAIT, |s| *s < 1).expect("gate").0;
    assert_eq!(*guard, 1, "tally began");
    drop(guard);
    runtime.append("in", &20u64.to_le_bytes()).expect("in:2");
    *state.lock().expect("gate") = 2;
    changed.notify_all();
    assert!(runtime.wait_idle(WAIT), "idle");
    runtime.stop(Duration::from_secs(5));
    assert_eq!(records(&ns, "out"), [hash(&[1, 10]), hash(&[2, 10, 5])], "the original run");

    let record = RecordRef { namespace: "app".into(), log: "cfg".into(), seq: 1 };
    let correct = [Correction::Record(record.clone())];
    let events = every_event(&ns);
    let plan = RepairPlan::build(&events, &correct, &HashSet::new());
    let namespaces = HashMap::from([("app".to_owned(), Arc::clone(&ns))]);
    let values = HashMap::from([(record, 6u64.to_le_bytes().to_vec())]);
    let handlers = HashMap::from([("tally".to_owned(), tally_fn)]);
    let inputs = Inputs {
        events: &events,
        namespaces: &namespaces,
        handlers: &handlers,
        values: &values,
        not_replayable: NotReplayable::Refuse,
    };
    let outcome = varve_repair::execute(&plan, &inputs);
    assert!(outcome.is_ok(), "repair: {outcome:?}");
    assert_eq!(
        records(&ns, "out"),
        [hash(&[1, 10]), hash(&[2, 10, 6])],
        "out:2 from the tail tally saw and the corrected cfg:1 (wrong: {:?})",
        hash(&[2, 30, 6])
    );
}
