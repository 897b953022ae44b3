//! Executing a repair against the truth: for random applications (several
//! handlers on one namespace's logs, reads of the latest record and of
//! fixed seqs, fan-in and fan-out), repairing an input record gives logs
//! **identical** to a run from scratch with that record corrected from the
//! start, and the replaced histories stay readable as generations.
//!
//! `VARVE_SEED` replays one case; `VARVE_REPAIR_CASES` sets how many run.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

mod common;

use common::{hash, value};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use varve_log::{LogConfig, MemoryStore, Namespace, SeqRange, Store};
use varve_repair::{execute, Correction, Inputs, NotReplayable, Planner, RepairError, RepairPlan};
use varve_runtime::causes::Causes;
use varve_runtime::effects::Effects;
use varve_runtime::trace::{CausalGraph, RecordRef};
use varve_runtime::{EventKind, HandlerContext, HandlerFn, HandlerKind, HandlerSpec, RetryPolicy, RuntimeBuilder};

const IDLE: Duration = Duration::from_secs(30);
/// Logs in causal order: a handler reads any log and writes a later one.
const LOGS: [&str; 4] = ["in", "a1", "a2", "a3"];

#[derive(Clone, Copy, Debug)]
struct HandlerDef {
    source: usize,
    output: usize,
    latest_of: Option<usize>,
    first_of: Option<usize>,
    /// Writes only when its hash is even (changes how many records it writes).
    conditional: bool,
}

fn random_handlers(rng: &mut StdRng, conditional: bool) -> Vec<HandlerDef> {
    let mut handlers = Vec::new();
    for source in 0..LOGS.len() - 1 {
        for _ in 0..rng.gen_range(1..=2) {
            let output = rng.gen_range(source + 1..LOGS.len());
            let pick = |rng: &mut StdRng| rng.gen_bool(0.6).then(|| rng.gen_range(0..LOGS.len()));
            let (latest_of, first_of) = (pick(rng), pick(rng));
            handlers.push(HandlerDef { source, output, latest_of, first_of, conditional });
        }
    }
    handlers
}

fn handler_fn(index: usize, def: HandlerDef) -> HandlerFn {
    Arc::new(move |ctx: &mut HandlerContext<'_>| {
        let mut parts = vec![index as u64, value(ctx.record())];
        if let Some(log) = def.latest_of {
            let latest = ctx.latest(LOGS[log])?;
            parts.push(latest);
            if latest > 0 {
                parts.push(value(&ctx.get(LOGS[log], latest)?));
            }
        }
        if let Some(log) = def.first_of {
            for record in ctx.scan(LOGS[log], 1..=1)? {
                parts.push(value(&record.value));
            }
        }
        let out = hash(&parts);
        if !def.conditional || out.is_multiple_of(2) {
            ctx.append(LOGS[def.output], &out.to_le_bytes())?;
        }
        Ok(())
    })
}

fn handlers_of(defs: &[HandlerDef]) -> HashMap<String, HandlerFn> {
    defs.iter().enumerate().map(|(i, d)| (format!("h{i}"), handler_fn(i, *d))).collect()
}

/// Run the app on a fresh namespace, one input at a time, each handled in
/// full before the next (one worker: a deterministic schedule).
fn execute_app(defs: &[HandlerDef], inputs: &[u64]) -> (Arc<dyn Namespace>, Vec<varve_runtime::StoredEvent>) {
    let ns = MemoryStore::new().namespace("app").expect("namespace");
    let mut builder = RuntimeBuilder::new(Arc::clone(&ns)).host(1).concurrency(1);
    for log in LOGS {
        builder = builder.log(log, LogConfig::unbounded());
    }
    for (name, f) in handlers_of(defs) {
        let source = LOGS[defs[name[1..].parse::<usize>().expect("index")].source];
        builder = builder
            .register(HandlerSpec { name: name.clone(), kind: HandlerKind::Rust(f), retry: RetryPolicy::default() })
            .subscribe(source, &name);
    }
    let runtime = builder.start().expect("runtime");
    for input in inputs {
        runtime.append("in", &input.to_le_bytes()).expect("append");
        assert!(runtime.wait_idle(IDLE), "idle");
    }
    let events = runtime.events().expect("events");
    runtime.stop(Duration::from_secs(5));
    (ns, events)
}

fn contents(ns: &dyn Namespace, log: &str) -> Vec<Vec<u8>> {
    ns.scan(log, SeqRange::ALL).expect("scan").map(|r| r.expect("record").value.to_vec()).collect()
}

/// One case; returns how many runs the repair replayed.
fn check(seed: u64) -> usize {
    let mut rng = StdRng::seed_from_u64(seed);
    let defs = random_handlers(&mut rng, false);
    let inputs: Vec<u64> = (0..rng.gen_range(3..8)).map(|_| rng.gen()).collect();
    let target = rng.gen_range(0..inputs.len());
    let new_value: u64 = rng.gen();
    let mut corrected = inputs.clone();
    corrected[target] = new_value;

    let (ns, events) = execute_app(&defs, &inputs);
    let before: HashMap<&str, Vec<Vec<u8>>> = LOGS.iter().map(|l| (*l, contents(&*ns, l))).collect();
    let (truth, _) = execute_app(&defs, &corrected);

    let record = RecordRef { namespace: "app".into(), log: "in".into(), seq: target as u64 + 1 };
    let plan = RepairPlan::build(&events, &[Correction::Record(record.clone())], &HashSet::new());
    check_planner(seed, &mut rng, &events, &plan);
    let namespaces = HashMap::from([("app".to_owned(), Arc::clone(&ns))]);
    let handlers = handlers_of(&defs);
    let values = HashMap::from([(record, new_value.to_le_bytes().to_vec())]);
    let outcome = execute(
        &plan,
        &Inputs {
            events: &events,
            namespaces: &namespaces,
            handlers: &handlers,
            values: &values,
            not_replayable: NotReplayable::Refuse,
        },
    )
    .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{}", plan.to_text()));
    for log in LOGS {
        assert_eq!(
            contents(&*ns, log),
            contents(&*truth, log),
            "seed {seed}: {log} after the repair\n{}",
            plan.to_text()
        );
    }
    // The replaced histories stay readable, unchanged.
    for (log, generation) in &outcome.swapped["app"] {
        assert_eq!(contents(&*ns, generation), before[log.as_str()], "seed {seed}: {generation}");
    }
    assert_eq!(outcome.replayed, plan.reruns.len(), "seed {seed}");
    assert!(outcome.changed >= 1, "seed {seed}: at least the corrected record changes");
    check_repair_event(seed, &ns, &before, &outcome, target as u64 + 1);
    outcome.replayed
}

/// The plan fed in random pieces (as an online repair reads `_events` in
/// rounds) is the plan built at once, and the pieces' deltas add up to it.
fn check_planner(seed: u64, rng: &mut StdRng, events: &[varve_runtime::StoredEvent], plan: &RepairPlan) {
    let mut planner = Planner::new(&plan.corrections, &HashSet::new());
    let mut reruns: BTreeMap<String, varve_repair::Rerun> = BTreeMap::new();
    let mut changed: BTreeSet<(String, u64, bool)> = BTreeSet::new();
    let mut fed = 0;
    while fed < events.len() {
        let piece = rng.gen_range(1..=events.len() - fed);
        planner.feed(&events[fed..fed + piece]);
        fed += piece;
        let delta = planner.take_changes();
        for rerun in delta.reruns {
            reruns.insert(rerun.trigger_event.clone(), rerun);
        }
        for log in delta.changed {
            changed.extend(log.seqs.iter().map(|&seq| (log.log.clone(), seq, true)));
            changed.extend(log.may_change.iter().map(|&seq| (log.log.clone(), seq, false)));
        }
    }
    assert!(!planner.needs_second_pass(), "seed {seed}: one namespace needs one pass");
    assert_eq!(planner.plan(), *plan, "seed {seed}: the plan fed in pieces");
    let whole: BTreeMap<String, varve_repair::Rerun> =
        plan.reruns.iter().map(|r| (r.trigger_event.clone(), r.clone())).collect();
    assert_eq!(reruns, whole, "seed {seed}: the deltas' runs");
    let whole: BTreeSet<(String, u64, bool)> = plan
        .changed
        .iter()
        .flat_map(|c| {
            let certain = c.seqs.iter().map(move |&seq| (c.log.clone(), seq, true));
            certain.chain(c.may_change.iter().map(move |&seq| (c.log.clone(), seq, false)))
        })
        .collect();
    assert_eq!(changed, whole, "seed {seed}: the deltas' records");
}

/// The REPAIR event names exactly the records whose values differ from the
/// replaced history, and the causes of each of them include the repair and
/// the corrected record; the causes found by index are the full graph's,
/// for every record.
fn check_repair_event(
    seed: u64,
    ns: &Arc<dyn Namespace>,
    before: &HashMap<&str, Vec<Vec<u8>>>,
    outcome: &varve_repair::RepairOutcome,
    corrected_seq: u64,
) {
    let differing: BTreeSet<(String, u64)> = LOGS
        .iter()
        .flat_map(|log| {
            let now = contents(ns.as_ref(), log);
            (0..now.len()).filter(move |&i| now[i] != before[log][i]).map(move |i| ((*log).to_owned(), i as u64 + 1))
        })
        .collect();
    assert_eq!(outcome.event_error, None, "seed {seed}");
    let events = varve_runtime::namespace_events(ns.as_ref(), SeqRange::ALL).expect("events");
    let repair_seq = outcome.repair_events["app"];
    let repair = events.iter().find(|e| e.id.seq == repair_seq).expect("the REPAIR event");
    assert_eq!(repair.event.kind, EventKind::Repair, "seed {seed}");
    let replaced: BTreeSet<(String, u64)> =
        repair.event.replaced().flat_map(|(log, a, b)| (a..=b).map(move |seq| (log.to_owned(), seq))).collect();
    assert_eq!(replaced, differing, "seed {seed}: the REPAIR event's records");
    assert!(repair.event.reason.contains("corrected app/in:"), "seed {seed}: {}", repair.event.reason);
    let graph = CausalGraph::new(&events);
    for (log, seq) in &differing {
        let causes = graph.ancestors("app", log, *seq);
        assert!(causes.iter().any(|e| e.id == repair.id), "seed {seed}: {log}:{seq}'s causes lack the REPAIR");
        if log != "in" {
            assert!(
                causes
                    .iter()
                    .any(|e| e.event.kind == EventKind::Append && e.event.log == "in" && e.event.seq == corrected_seq),
                "seed {seed}: {log}:{seq}'s causes lack the corrected record"
            );
        }
    }
    let open = |name: &str| Ok((name == "app").then(|| Arc::clone(ns)));
    let mut by_index = Causes::new(&open);
    for log in LOGS {
        for seq in 1..=ns.latest(log).expect("latest") {
            let expected: Vec<_> = graph.ancestors("app", log, seq).iter().map(|e| e.id.clone()).collect();
            let found: Vec<_> =
                by_index.ancestors("app", log, seq).expect("causes").into_iter().map(|e| e.id).collect();
            assert_eq!(found, expected, "seed {seed}: causes by index of the repaired {log}:{seq}");
        }
    }
    // Effects walked forward equal the graph's too, for every record of the
    // repaired history. (From the corrected record they reach the REPAIR;
    // the records it replaced are reached through the runs that read the
    // correction as well, so this does not single out the REPAIR edges.)
    let namespaces = ["app".to_owned()];
    let mut walked = Effects::new(&open, &namespaces);
    for log in LOGS {
        for seq in 1..=ns.latest(log).expect("latest") {
            let expected: Vec<_> = graph.descendants("app", log, seq).iter().map(|e| e.id.clone()).collect();
            let found: Vec<_> =
                walked.descendants("app", log, seq).expect("effects").into_iter().map(|e| e.id).collect();
            assert_eq!(found, expected, "seed {seed}: effects walked of {log}:{seq} after the repair");
        }
    }
    let of_correction = graph.descendants("app", "in", corrected_seq);
    assert!(of_correction.iter().any(|e| e.id == repair.id), "seed {seed}: the correction's effects lack the REPAIR");
}

#[test]
fn a_repair_gives_the_logs_of_a_run_from_scratch_with_the_correction() {
    let cases: usize = std::env::var("VARVE_REPAIR_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(24);
    if let Some(seed) = std::env::var("VARVE_SEED").ok().and_then(|v| v.parse().ok()) {
        check(seed);
        return;
    }
    let first: u64 = rand::random::<u32>().into();
    let seeds = first..first + cases as u64;
    println!("seeds {seeds:?} (replay one with VARVE_SEED)");
    let replayed: usize = seeds.map(check).sum();
    println!("{replayed} runs replayed in {cases} repairs");
    assert!(replayed >= cases, "most repairs replay something: {replayed} runs in {cases} repairs");
}

/// A replay that writes more or fewer records than the original run is
/// refused with the handler, record and counts named, and nothing is swapped.
#[test]
fn a_replay_that_changes_how_many_records_it_writes_is_refused_and_changes_nothing() {
    let seed = 7;
    let mut rng = StdRng::seed_from_u64(seed);
    let defs = vec![HandlerDef { source: 0, output: 1, latest_of: None, first_of: None, conditional: true }];
    // Find inputs where correcting the first flips whether the handler writes.
    let (inputs, new_value) = loop {
        let inputs: Vec<u64> = (0..3).map(|_| rng.gen()).collect();
        let new_value: u64 = rng.gen();
        let writes = |v: u64| hash(&[0, v]).is_multiple_of(2);
        if writes(inputs[0]) != writes(new_value) {
            break (inputs, new_value);
        }
    };
    let (ns, events) = execute_app(&defs, &inputs);
    let before: Vec<Vec<Vec<u8>>> = LOGS.iter().map(|l| contents(&*ns, l)).collect();
    let record = RecordRef { namespace: "app".into(), log: "in".into(), seq: 1 };
    let plan = RepairPlan::build(&events, &[Correction::Record(record.clone())], &HashSet::new());
    let namespaces = HashMap::from([("app".to_owned(), Arc::clone(&ns))]);
    let values = HashMap::from([(record, new_value.to_le_bytes().to_vec())]);
    let error = execute(
        &plan,
        &Inputs {
            events: &events,
            namespaces: &namespaces,
            handlers: &handlers_of(&defs),
            values: &values,
            not_replayable: NotReplayable::Refuse,
        },
    )
    .expect_err("a count change is refused");
    assert!(matches!(error, RepairError::CountChanged { .. }), "{error}");
    assert!(error.to_string().contains("h0") && error.to_string().contains("app/in:1"), "{error}");
    let after: Vec<Vec<Vec<u8>>> = LOGS.iter().map(|l| contents(&*ns, l)).collect();
    assert_eq!(before, after, "the original logs are untouched");
    assert!(ns.list_logs().expect("logs").iter().all(|l| !l.name.starts_with("_gen.")), "nothing swapped");
    assert!(ns.list_logs().expect("logs").iter().all(|l| !l.name.starts_with("_shadow.")), "shadows removed");
}

/// A replaced handler: its past runs from an input seq on are replayed with
/// the new code, and everything downstream with them; the result equals a
/// run from scratch with the new code from that input on.
#[test]
fn a_replaced_handler_reruns_its_past_runs_and_everything_downstream() {
    // in → double → mid → label → out; `double` gets a bug fix.
    let make = |factor: u64, from: u64| -> HandlerFn {
        Arc::new(move |ctx: &mut HandlerContext<'_>| {
            let v = value(ctx.record());
            let f = if ctx.seq() >= from { factor } else { 2 };
            ctx.append("a1", &(v * f).to_le_bytes())?;
            Ok(())
        })
    };
    let label: HandlerFn = Arc::new(|ctx: &mut HandlerContext<'_>| {
        let first = ctx.get("a1", 1)?;
        ctx.append("a2", &(value(ctx.record()) + value(&first)).to_le_bytes())?;
        Ok(())
    });
    let run_with = |double: HandlerFn| -> (Arc<dyn Namespace>, Vec<varve_runtime::StoredEvent>) {
        let ns = MemoryStore::new().namespace("app").expect("namespace");
        let mut builder = RuntimeBuilder::new(Arc::clone(&ns)).host(1).concurrency(1);
        for log in LOGS {
            builder = builder.log(log, LogConfig::unbounded());
        }
        let runtime = builder
            .register(HandlerSpec {
                name: "double".into(),
                kind: HandlerKind::Rust(double),
                retry: RetryPolicy::default(),
            })
            .register(HandlerSpec {
                name: "label".into(),
                kind: HandlerKind::Rust(Arc::clone(&label)),
                retry: RetryPolicy::default(),
            })
            .subscribe("in", "double")
            .subscribe("a1", "label")
            .start()
            .expect("runtime");
        for i in 1..=6u64 {
            runtime.append("in", &(i * 10).to_le_bytes()).expect("append");
            assert!(runtime.wait_idle(IDLE));
        }
        let events = runtime.events().expect("events");
        runtime.stop(Duration::from_secs(5));
        (ns, events)
    };
    // The original code doubles; the fix triples, for inputs 4 on.
    let (ns, events) = run_with(make(2, u64::MAX));
    let (truth, _) = run_with(make(3, 4));
    let plan = RepairPlan::build(
        &events,
        &[Correction::Handler { handler: "double".into(), since: varve_repair::Since::Seq(4) }],
        &HashSet::new(),
    );
    let doubles = plan.reruns.iter().filter(|r| r.handler == "double").count();
    assert_eq!(doubles, 3, "inputs 4, 5, 6\n{}", plan.to_text());
    let handlers: HashMap<String, HandlerFn> =
        HashMap::from([("double".to_owned(), make(3, 4)), ("label".to_owned(), Arc::clone(&label))]);
    let namespaces = HashMap::from([("app".to_owned(), Arc::clone(&ns))]);
    execute(
        &plan,
        &Inputs {
            events: &events,
            namespaces: &namespaces,
            handlers: &handlers,
            values: &HashMap::new(),
            not_replayable: NotReplayable::Refuse,
        },
    )
    .expect("repair");
    for log in ["in", "a1", "a2"] {
        assert_eq!(contents(&*ns, log), contents(&*truth, log), "{log}");
    }
    assert_eq!(value(&ns.get("a1", 4).expect("a1:4")), 120, "input 40 tripled");
    assert_eq!(value(&ns.get("a1", 3).expect("a1:3")), 60, "input 30 still doubled");
}

/// A handler marked not replayable: the repair refuses by default, naming
/// it; told to skip it, the repair keeps its outputs as they were and
/// repairs the rest.
#[test]
fn runs_of_a_not_replayable_handler_are_refused_or_skipped_as_told() {
    let defs = vec![
        HandlerDef { source: 0, output: 1, latest_of: None, first_of: None, conditional: false },
        HandlerDef { source: 1, output: 2, latest_of: None, first_of: None, conditional: false },
    ];
    let inputs = [5_u64, 6, 7];
    let (ns, events) = execute_app(&defs, &inputs);
    let before_a2 = contents(&*ns, "a2");
    let record = RecordRef { namespace: "app".into(), log: "in".into(), seq: 2 };
    let not_replayable = HashSet::from(["h1".to_owned()]);
    let plan = RepairPlan::build(&events, &[Correction::Record(record.clone())], &not_replayable);
    assert_eq!(plan.not_replayable, vec!["h1".to_owned()]);
    let namespaces = HashMap::from([("app".to_owned(), Arc::clone(&ns))]);
    let values = HashMap::from([(record, 66_u64.to_le_bytes().to_vec())]);
    let handlers = handlers_of(&defs);
    let inputs_with = |choice| Inputs {
        events: &events,
        namespaces: &namespaces,
        handlers: &handlers,
        values: &values,
        not_replayable: choice,
    };
    let error = execute(&plan, &inputs_with(NotReplayable::Refuse)).expect_err("refused");
    assert!(matches!(&error, RepairError::NotReplayable { handler, runs: 1 } if handler == "h1"), "{error}");
    execute(&plan, &inputs_with(NotReplayable::Skip)).expect("skipping h1");
    let (truth, _) = execute_app(&defs, &[5, 66, 7]);
    assert_eq!(contents(&*ns, "a1"), contents(&*truth, "a1"), "h0's output is repaired");
    assert_eq!(contents(&*ns, "a2"), before_a2, "h1's outputs are kept as they were");
    assert_ne!(contents(&*truth, "a2"), before_a2, "(running h1 again would have changed them)");
}

/// A corrected record appended outside the runtime (so without an APPEND
/// event) is still corrected, and what read it is replayed.
#[test]
fn a_record_appended_outside_the_runtime_is_corrected_and_its_readers_replayed() {
    let ns = MemoryStore::new().namespace("app").expect("namespace");
    for log in LOGS {
        ns.create_log(log, LogConfig::unbounded()).expect("log");
    }
    ns.append("a3", &10_u64.to_le_bytes()).expect("a model, appended straight to the store");
    let uses_model: HandlerFn = Arc::new(|ctx: &mut HandlerContext<'_>| {
        // A scan, so the replay must see the record that existed before any event.
        let scanned = ctx.scan("a3", 1..=1)?;
        let model = value(&scanned.first().ok_or("no model")?.value);
        ctx.append("a1", &(value(ctx.record()) * model).to_le_bytes())?;
        Ok(())
    });
    let runtime = RuntimeBuilder::new(Arc::clone(&ns))
        .host(1)
        .concurrency(1)
        .register(HandlerSpec {
            name: "h".into(),
            kind: HandlerKind::Rust(Arc::clone(&uses_model)),
            retry: RetryPolicy::default(),
        })
        .subscribe("in", "h")
        .start()
        .expect("runtime");
    for i in 1..=3_u64 {
        runtime.append("in", &i.to_le_bytes()).expect("append");
        assert!(runtime.wait_idle(IDLE));
    }
    let events = runtime.events().expect("events");
    runtime.stop(Duration::from_secs(5));
    let record = RecordRef { namespace: "app".into(), log: "a3".into(), seq: 1 };
    let plan = RepairPlan::build(&events, &[Correction::Record(record.clone())], &HashSet::new());
    assert_eq!(plan.unrecorded, vec![record.clone()]);
    assert_eq!(plan.reruns.len(), 3, "every run read the model\n{}", plan.to_text());
    let namespaces = HashMap::from([("app".to_owned(), Arc::clone(&ns))]);
    let handlers = HashMap::from([("h".to_owned(), uses_model)]);
    let values = HashMap::from([(record, 100_u64.to_le_bytes().to_vec())]);
    execute(
        &plan,
        &Inputs {
            events: &events,
            namespaces: &namespaces,
            handlers: &handlers,
            values: &values,
            not_replayable: NotReplayable::Refuse,
        },
    )
    .expect("repair");
    assert_eq!(value(&ns.get("a3", 1).expect("model")), 100);
    let outputs: Vec<u64> = contents(&*ns, "a1").iter().map(|v| value(v)).collect();
    assert_eq!(outputs, vec![100, 200, 300]);
}

/// A replayed append answers with the seq the record gets, as the original
/// append did: a handler that writes that seq elsewhere replays to what a
/// run from scratch writes.
#[test]
fn a_replayed_append_returns_the_seq_its_record_gets() {
    let writes_its_seq: HandlerFn = Arc::new(|ctx: &mut HandlerContext<'_>| {
        let seq = ctx.append("a1", &(value(ctx.record()) * 2).to_le_bytes())?;
        ctx.append("a2", &seq.to_le_bytes())?;
        Ok(())
    });
    let run = |inputs: &[u64]| {
        let ns = MemoryStore::new().namespace("app").expect("namespace");
        let runtime = RuntimeBuilder::new(Arc::clone(&ns))
            .host(1)
            .concurrency(1)
            .log("in", LogConfig::unbounded())
            .log("a1", LogConfig::unbounded())
            .log("a2", LogConfig::unbounded())
            .register(HandlerSpec {
                name: "h".into(),
                kind: HandlerKind::Rust(Arc::clone(&writes_its_seq)),
                retry: RetryPolicy::default(),
            })
            .subscribe("in", "h")
            .start()
            .expect("runtime");
        for input in inputs {
            runtime.append("in", &input.to_le_bytes()).expect("append");
            assert!(runtime.wait_idle(IDLE));
        }
        let events = runtime.events().expect("events");
        runtime.stop(Duration::from_secs(5));
        (ns, events)
    };
    let (ns, events) = run(&[1, 2, 3]);
    let record = RecordRef { namespace: "app".into(), log: "in".into(), seq: 3 };
    let plan = RepairPlan::build(&events, &[Correction::Record(record.clone())], &HashSet::new());
    let namespaces = HashMap::from([("app".to_owned(), Arc::clone(&ns))]);
    let handlers = HashMap::from([("h".to_owned(), writes_its_seq.clone())]);
    let values = HashMap::from([(record, 30_u64.to_le_bytes().to_vec())]);
    let inputs = Inputs {
        events: &events,
        namespaces: &namespaces,
        handlers: &handlers,
        values: &values,
        not_replayable: NotReplayable::Refuse,
    };
    execute(&plan, &inputs).expect("repair");
    let (truth, _) = run(&[1, 2, 30]);
    for log in ["in", "a1", "a2"] {
        assert_eq!(contents(&*ns, log), contents(&*truth, log), "{log}");
    }
    assert_eq!(value(&contents(&*ns, "a2")[2]), 3, "the replay wrote the seq a1:3, not its ordinal");
}
