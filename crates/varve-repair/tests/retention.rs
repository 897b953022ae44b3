//! Repairs after the runtime's event retention (`events_keep`) trimmed
//! `_events`: a correction inside the events kept is repaired as before —
//! offline and online — and equals a run from scratch; one older than the
//! events kept is refused (`BeyondRetention`), nothing changed.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

mod common;

use common::{hash, value};
use varve_log::{MemoryStore, Namespace, SeqRange, Store};
use varve_repair::{execute, repair_online, Correction, Inputs, NotReplayable, Online, RepairError, RepairPlan};
use varve_runtime::trace::RecordRef;
use varve_runtime::{namespace_events, HandlerContext, HandlerFn, HandlerKind, HandlerSpec, RetryPolicy};
use varve_runtime::{Runtime, RuntimeBuilder, EVENTS_LOG};

const IDLE: Duration = Duration::from_secs(60);
const KEEP: u64 = 400;
const INPUTS: u64 = 1_000;

/// `fold`: each input folded into its own last output (every later run
/// depends on an earlier input).
fn fold() -> HandlerFn {
    Arc::new(|ctx: &mut HandlerContext<'_>| {
        let previous = match ctx.latest("out")? {
            0 => 0,
            seq => value(&ctx.get("out", seq)?),
        };
        ctx.append("out", &hash(&[previous, value(ctx.record())]).to_le_bytes())?;
        Ok(())
    })
}

fn start(ns: Arc<dyn Namespace>, keep: Option<u64>) -> Runtime {
    let mut builder = RuntimeBuilder::new(ns)
        .concurrency(1)
        .log("in", varve_log::LogConfig::unbounded())
        .log("out", varve_log::LogConfig::unbounded())
        .register(HandlerSpec { name: "fold".into(), kind: HandlerKind::Rust(fold()), retry: RetryPolicy::default() })
        .subscribe("in", "fold");
    if let Some(keep) = keep {
        builder = builder.events_keep(keep);
    }
    builder.start().expect("runtime")
}

/// Run the app on `inputs`, each handled before the next: so an input's
/// APPEND and its run are neighbours in `_events` (an appender far ahead of
/// its handlers would leave the APPENDs of the last inputs long before
/// their runs, and retention would trim them first).
fn run(ns: &Arc<dyn Namespace>, inputs: &[u64], keep: Option<u64>) -> Runtime {
    let runtime = start(Arc::clone(ns), keep);
    for v in inputs {
        runtime.append("in", &v.to_le_bytes()).expect("append");
        assert!(runtime.wait_idle(IDLE), "idle");
    }
    runtime
}

fn contents(ns: &dyn Namespace, log: &str) -> Vec<u64> {
    ns.scan(log, SeqRange::ALL).expect("scan").map(|r| value(&r.expect("record").value)).collect()
}

fn inputs() -> Vec<u64> {
    (0..INPUTS).map(|i| hash(&[i])).collect()
}

fn correction(seq: u64, v: u64) -> (Vec<Correction>, HashMap<RecordRef, Vec<u8>>) {
    let record = RecordRef { namespace: "app".into(), log: "in".into(), seq };
    (vec![Correction::Record(record.clone())], HashMap::from([(record, v.to_le_bytes().to_vec())]))
}

fn offline(ns: &Arc<dyn Namespace>, seq: u64, v: u64) -> Result<varve_repair::RepairOutcome, RepairError> {
    let events = namespace_events(ns.as_ref(), SeqRange::ALL).expect("events kept");
    let (corrections, values) = correction(seq, v);
    let plan = RepairPlan::build(&events, &corrections, &HashSet::new());
    let namespaces = HashMap::from([("app".to_owned(), Arc::clone(ns))]);
    let handlers = HashMap::from([("fold".to_owned(), fold())]);
    let inputs = Inputs {
        events: &events,
        namespaces: &namespaces,
        handlers: &handlers,
        values: &values,
        not_replayable: NotReplayable::Refuse,
    };
    execute(&plan, &inputs)
}

/// The logs of a run from scratch, with input `seq` corrected.
fn truth(seq: u64, v: u64) -> (Vec<u64>, Vec<u64>) {
    let mut corrected = inputs();
    corrected[usize::try_from(seq - 1).expect("small")] = v;
    let ns = MemoryStore::new().namespace("app").expect("namespace");
    run(&ns, &corrected, None).stop(Duration::from_secs(5));
    (contents(&*ns, "in"), contents(&*ns, "out"))
}

#[test]
fn an_offline_repair_inside_the_events_kept_equals_a_run_from_scratch_and_an_older_one_is_refused() {
    let ns = MemoryStore::new().namespace("app").expect("namespace");
    run(&ns, &inputs(), Some(KEEP)).stop(Duration::from_secs(5));
    // Five events per input: 5,000 written, the last 400 to 450 kept.
    let earliest = ns.earliest(EVENTS_LOG).expect("earliest");
    assert!(earliest > 4_400, "trimmed: {earliest}");

    let before = (contents(&*ns, "in"), contents(&*ns, "out"));
    let refused = offline(&ns, 10, 42).expect_err("in:10's events were trimmed");
    assert!(matches!(refused, RepairError::BeyondRetention { .. }), "{refused}");
    assert!(refused.to_string().contains("app/in:10") && refused.to_string().contains("events_keep"), "{refused}");
    assert_eq!((contents(&*ns, "in"), contents(&*ns, "out")), before, "nothing changed");

    let target = INPUTS - 20;
    let done = offline(&ns, target, 42).expect("in the events kept");
    assert_eq!(done.replayed, 21, "the run on the corrected input and the 20 after it");
    assert_eq!((contents(&*ns, "in"), contents(&*ns, "out")), truth(target, 42));
}

#[test]
fn an_online_repair_reads_from_the_earliest_event_kept() {
    let ns = MemoryStore::new().namespace("app").expect("namespace");
    let runtime = run(&ns, &inputs(), Some(KEEP));
    let handlers = HashMap::from([("fold".to_owned(), fold())]);
    let none = HashSet::new();

    let (corrections, values) = correction(10, 42);
    let online = Online::new(&corrections, &values, &handlers, &none);
    let refused = repair_online(&runtime.handle(), &online).expect_err("trimmed");
    assert!(matches!(refused, RepairError::BeyondRetention { .. }), "{refused}");

    let target = INPUTS - 20;
    let (corrections, values) = correction(target, 42);
    let online = Online::new(&corrections, &values, &handlers, &none);
    let done = repair_online(&runtime.handle(), &online).expect("in the events kept");
    assert_eq!(done.outcome.replayed, 21);
    assert!(runtime.wait_idle(IDLE), "idle");
    assert_eq!((contents(&*ns, "in"), contents(&*ns, "out")), truth(target, 42));
    runtime.stop(Duration::from_secs(5));
}
