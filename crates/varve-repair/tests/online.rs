//! Repair while the application runs: appends keep arriving — from a thread
//! appending without pause, and from the repair's own progress hook between
//! rounds — and none of them is lost; afterwards every log equals a run from
//! scratch on every record appended, the corrected one corrected.
//!
//! The application is deterministic whatever the timing (one worker, each
//! handler reading its own last output or records at fixed seqs), so the
//! run from scratch is the oracle. `VARVE_SEED` replays one seed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod common;

use common::{hash, value};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use varve_log::{JournalOptions, JournalStore, LogConfig, MemoryStore, Namespace, SeqRange, Store, SyncPolicy};
use varve_repair::{
    repair_online, repair_online_across, Correction, Online, RepairError, GENERATION_PREFIX, SHADOW_PREFIX,
};
use varve_runtime::trace::RecordRef;
use varve_runtime::{
    HandlerContext, HandlerFn, HandlerKind, HandlerSpec, RetryPolicy, Runtime, RuntimeBuilder, RuntimeError,
};

const IDLE: Duration = Duration::from_secs(60);
const LOGS: [&str; 4] = ["in", "smooth", "out", "count"];

/// `smooth` folds each input into its own last output; `pair` joins a
/// smoothed value with the input at the same seq; `count` folds `out`.
fn handlers() -> HashMap<String, HandlerFn> {
    let smooth: HandlerFn = Arc::new(|ctx: &mut HandlerContext<'_>| {
        let previous = match ctx.latest("smooth")? {
            0 => 0,
            seq => value(&ctx.get("smooth", seq)?),
        };
        let next = hash(&[value(ctx.record()), previous]);
        ctx.append("smooth", &next.to_le_bytes())?;
        Ok(())
    });
    let pair: HandlerFn = Arc::new(|ctx: &mut HandlerContext<'_>| {
        let input = value(&ctx.get("in", ctx.seq())?);
        ctx.append("out", &hash(&[value(ctx.record()), input]).to_le_bytes())?;
        Ok(())
    });
    let count: HandlerFn = Arc::new(|ctx: &mut HandlerContext<'_>| {
        let previous = match ctx.latest("count")? {
            0 => 0,
            seq => value(&ctx.get("count", seq)?),
        };
        ctx.append("count", &hash(&[previous, value(ctx.record())]).to_le_bytes())?;
        Ok(())
    });
    HashMap::from([("smooth".to_owned(), smooth), ("pair".to_owned(), pair), ("count".to_owned(), count)])
}

fn start(ns: Arc<dyn Namespace>, handlers: &HashMap<String, HandlerFn>) -> Runtime {
    let mut builder = RuntimeBuilder::new(ns).host(1).concurrency(1);
    for log in LOGS {
        builder = builder.log(log, LogConfig::unbounded());
    }
    for (name, source) in [("smooth", "in"), ("pair", "smooth"), ("count", "out")] {
        builder = builder.register(rust(name, &handlers[name])).subscribe(source, name);
    }
    builder.start().expect("runtime")
}

fn rust(name: &str, f: &HandlerFn) -> HandlerSpec {
    HandlerSpec { name: name.to_owned(), kind: HandlerKind::Rust(Arc::clone(f)), retry: RetryPolicy::default() }
}

fn open(dir: &Path) -> Arc<dyn Namespace> {
    let options = JournalOptions { sync: SyncPolicy::Never, ..JournalOptions::default() };
    let store = JournalStore::open(dir, options).expect("open store");
    Arc::new(store.journal_namespace("app").expect("namespace"))
}

fn contents(ns: &dyn Namespace, log: &str) -> Vec<Vec<u8>> {
    ns.scan(log, SeqRange::ALL).expect("scan").map(|r| r.expect("record").value.to_vec()).collect()
}

fn seed() -> u64 {
    let seed = std::env::var("VARVE_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or_else(rand::random);
    println!("VARVE_SEED={seed}");
    seed
}

#[test]
fn a_repair_while_appends_keep_arriving_loses_none_and_equals_a_run_from_scratch() {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let ns = open(dir.path());
    let code = handlers();
    let runtime = start(Arc::clone(&ns), &code);

    // Every append acknowledged, by seq: what `in` must hold at the end.
    let acked: Mutex<BTreeMap<u64, u64>> = Mutex::new(BTreeMap::new());
    let append = |handle: &varve_runtime::RuntimeHandle, v: u64| {
        let seq = handle.append("in", &v.to_le_bytes()).expect("an append while the repair runs");
        acked.lock().expect("lock").insert(seq, v);
    };
    let handle = runtime.handle();
    for _ in 0..1_500 {
        append(&handle, rng.gen());
    }
    assert!(runtime.wait_idle(IDLE), "idle before the repair");

    let target: usize = rng.gen_range(1..=100);
    let corrected: u64 = rng.gen();
    let record = RecordRef { namespace: "app".into(), log: "in".into(), seq: target as u64 };
    let corrections = [Correction::Record(record.clone())];
    let values = HashMap::from([(record, corrected.to_le_bytes().to_vec())]);
    let none = HashSet::new();
    let appender_seed: u64 = rng.gen();
    let hook_seed: u64 = rng.gen();
    let stop = AtomicBool::new(false);
    let hook_appends = Mutex::new(StdRng::seed_from_u64(hook_seed));
    let on_round = |round: usize, _events: usize| {
        // Appends between rounds: the next round, or the pause, must take them in.
        if round <= 2 {
            let mut rng = hook_appends.lock().expect("lock");
            for _ in 0..200 {
                append(&handle, rng.gen());
            }
        }
    };
    let outcome = std::thread::scope(|scope| {
        let appender = scope.spawn(|| {
            let mut rng = StdRng::seed_from_u64(appender_seed);
            let handle = runtime.handle();
            let mut n = 0u64;
            while !stop.load(Ordering::SeqCst) {
                // A sensor's pace (not a flood the one worker could never catch up with).
                append(&handle, rng.gen());
                n += 1;
                std::thread::sleep(Duration::from_micros(500));
            }
            println!("seed {seed}: {n} appends while the repair ran");
            // And some after the repair, on the repaired logs.
            for _ in 0..100 {
                append(&handle, rng.gen());
            }
        });
        let mut online = Online::new(&corrections, &values, &code, &none);
        // Never early: every round up to the last, so the hook's appends make rounds of their own.
        online.pause_under = Duration::ZERO;
        online.on_round = Some(&on_round);
        let outcome = repair_online(&runtime.handle(), &online);
        stop.store(true, Ordering::SeqCst);
        appender.join().expect("appender");
        outcome
    });
    let outcome = outcome.unwrap_or_else(|e| panic!("seed {seed}: the online repair failed: {e}"));
    assert!(runtime.wait_idle(IDLE), "idle after the repair");
    println!(
        "seed {seed}: rounds {} (events {:?}), replayed {}, changed {}, paused {:?}, appends held {:?}",
        outcome.rounds,
        outcome.events_per_round,
        outcome.outcome.replayed,
        outcome.outcome.changed,
        outcome.paused,
        outcome.appends_held
    );
    assert!(outcome.rounds >= 2, "seed {seed}: the hook's appends make a second round");
    assert!(outcome.appends_held <= outcome.paused, "seed {seed}");

    // None lost: `in` holds every acknowledged append, the correction applied.
    let acked = acked.into_inner().expect("lock");
    let mut expected: Vec<u64> = acked.values().copied().collect();
    assert_eq!(acked.keys().copied().collect::<Vec<_>>(), (1..=expected.len() as u64).collect::<Vec<_>>());
    expected[target - 1] = corrected;
    let held: Vec<u64> = contents(&*ns, "in").iter().map(|v| value(v)).collect();
    assert_eq!(held.len(), expected.len(), "seed {seed}: records of `in`");
    assert!(held == expected, "seed {seed}: `in` differs from the appends acknowledged");

    // The oracle: a run from scratch on the same inputs.
    let truth = MemoryStore::new().namespace("app").expect("namespace");
    let scratch = start(Arc::clone(&truth), &code);
    for v in &expected {
        scratch.append("in", &v.to_le_bytes()).expect("append");
    }
    assert!(scratch.wait_idle(IDLE), "idle");
    scratch.stop(Duration::from_secs(5));
    for log in LOGS {
        assert!(contents(&*ns, log) == contents(&*truth, log), "seed {seed}: {log} differs from a run from scratch");
    }
    // The old history is kept, and its prefix before the correction is the repaired log's.
    let generation = format!("{GENERATION_PREFIX}in.1");
    let old = contents(&*ns, &generation);
    assert_eq!(value(&old[target - 1]), acked[&(target as u64)], "seed {seed}: the old value is kept");
    assert_eq!(old[..target - 1], contents(&*ns, "in")[..target - 1]);
    runtime.stop(Duration::from_secs(5));
}

#[test]
fn an_online_repair_that_cannot_pause_changes_nothing_and_the_runtime_runs_on() {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let ns = open(dir.path());
    let code = handlers();
    // `slow` holds its run until released, so the pause cannot find the runtime at rest.
    let release = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicBool::new(false));
    let slow: HandlerFn = {
        let (release, started) = (Arc::clone(&release), Arc::clone(&started));
        Arc::new(move |_ctx: &mut HandlerContext<'_>| {
            started.store(true, Ordering::SeqCst);
            while !release.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(())
        })
    };
    let mut builder = RuntimeBuilder::new(Arc::clone(&ns)).host(1).concurrency(1).log("gate", LogConfig::unbounded());
    for log in LOGS {
        builder = builder.log(log, LogConfig::unbounded());
    }
    for (name, source) in [("smooth", "in"), ("pair", "smooth"), ("count", "out")] {
        builder = builder.register(rust(name, &code[name])).subscribe(source, name);
    }
    let runtime = builder.register(rust("slow", &slow)).subscribe("gate", "slow").start().expect("runtime");
    for _ in 0..200 {
        runtime.append("in", &rng.gen::<u64>().to_le_bytes()).expect("append");
    }
    assert!(runtime.wait_idle(IDLE), "idle");
    let before: Vec<Vec<Vec<u8>>> = LOGS.iter().map(|log| contents(&*ns, log)).collect();
    runtime.append("gate", b"hold").expect("append");
    while !started.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(1));
    }

    let record = RecordRef { namespace: "app".into(), log: "in".into(), seq: 7 };
    let corrections = [Correction::Record(record.clone())];
    let values = HashMap::from([(record, 42u64.to_le_bytes().to_vec())]);
    let none = HashSet::new();
    let mut online = Online::new(&corrections, &values, &code, &none);
    online.pause_timeout = Duration::from_millis(200);
    let error = repair_online(&runtime.handle(), &online).expect_err("the pause cannot finish while `slow` runs");
    assert!(
        matches!(error, RepairError::Runtime(RuntimeError::PauseTimedOut { .. })),
        "seed {seed}: a pause that timed out, not {error}"
    );
    assert!(error.to_string().contains("called off"), "{error}");
    // Nothing changed, no shadow left, and the runtime still takes appends and fires.
    for (log, before) in LOGS.iter().zip(&before) {
        assert!(contents(&*ns, log) == *before, "seed {seed}: {log} changed");
    }
    let names: Vec<String> = ns.list_logs().expect("list").into_iter().map(|l| l.name).collect();
    assert!(!names.iter().any(|n| n.starts_with(SHADOW_PREFIX) || n.starts_with(GENERATION_PREFIX)), "{names:?}");
    release.store(true, Ordering::SeqCst);
    runtime.append("in", &1u64.to_le_bytes()).expect("append after the failed repair");
    assert!(runtime.wait_idle(IDLE), "idle");
    assert_eq!(contents(&*ns, "smooth").len(), 201, "seed {seed}: the runtime fired after the failed repair");
    runtime.stop(Duration::from_secs(5));
}

// ---- An application across two namespaces (`append_via`) ----

const EDGE_LOGS: [&str; 2] = ["in", "twice"];
const CLOUD_LOGS: [&str; 2] = ["out", "sum"];

/// `double` (edge): each input folded into its own last output in
/// `edge/twice` (so every run after a corrected input is replayed) and sent
/// to `cloud/out` through the cloud's runtime.
fn double(cloud: &varve_runtime::RuntimeHandle) -> HandlerFn {
    let cloud = cloud.clone();
    Arc::new(move |ctx: &mut HandlerContext<'_>| {
        let previous = match ctx.latest("twice")? {
            0 => 0,
            seq => value(&ctx.get("twice", seq)?),
        };
        let out = hash(&[value(ctx.record()), previous]).to_le_bytes();
        ctx.append("twice", &out)?;
        ctx.append_via(&cloud, &[("out", &out)])?;
        Ok(())
    })
}

/// `total` (cloud): `out` folded into `cloud/sum` (LATEST, and a get of its
/// own last output).
fn total() -> HandlerFn {
    Arc::new(|ctx: &mut HandlerContext<'_>| {
        let previous = match ctx.latest("sum")? {
            0 => 0,
            seq => value(&ctx.get("sum", seq)?),
        };
        ctx.append("sum", &hash(&[previous, value(ctx.record())]).to_le_bytes())?;
        Ok(())
    })
}

/// The cloud runtime, then the edge runtime whose handler appends through
/// it; and the handlers by name, for a repair.
fn start_two(edge: Arc<dyn Namespace>, cloud: Arc<dyn Namespace>) -> (Runtime, Runtime, HashMap<String, HandlerFn>) {
    let code_total = total();
    let cloud_rt = RuntimeBuilder::new(cloud)
        .host(2)
        .concurrency(1)
        .log("out", LogConfig::unbounded())
        .log("sum", LogConfig::unbounded())
        .register(rust("total", &code_total))
        .subscribe("out", "total")
        .start()
        .expect("cloud runtime");
    let code_double = double(&cloud_rt.handle());
    let edge_rt = RuntimeBuilder::new(edge)
        .host(1)
        .concurrency(1)
        .log("in", LogConfig::unbounded())
        .log("twice", LogConfig::unbounded())
        .register(rust("double", &code_double))
        .subscribe("in", "double")
        .start()
        .expect("edge runtime");
    let code = HashMap::from([("double".to_owned(), code_double), ("total".to_owned(), code_total)]);
    (edge_rt, cloud_rt, code)
}

fn open_two(dir: &Path) -> (Arc<dyn Namespace>, Arc<dyn Namespace>) {
    let options = JournalOptions { sync: SyncPolicy::Never, ..JournalOptions::default() };
    let store = JournalStore::open(dir, options).expect("open store");
    let edge: Arc<dyn Namespace> = Arc::new(store.journal_namespace("edge").expect("edge"));
    let cloud: Arc<dyn Namespace> = Arc::new(store.journal_namespace("cloud").expect("cloud"));
    (edge, cloud)
}

fn idle_both(edge: &Runtime, cloud: &Runtime) {
    // Twice: the edge's last run may have queued a cloud run after the cloud looked idle.
    for _ in 0..2 {
        assert!(edge.wait_idle(IDLE) && cloud.wait_idle(IDLE), "idle");
    }
}

#[test]
fn a_repair_across_two_namespaces_while_appends_keep_arriving_equals_a_run_from_scratch() {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let (edge, cloud) = open_two(dir.path());
    let (edge_rt, cloud_rt, code) = start_two(Arc::clone(&edge), Arc::clone(&cloud));

    let acked: Mutex<BTreeMap<u64, u64>> = Mutex::new(BTreeMap::new());
    let append = |handle: &varve_runtime::RuntimeHandle, v: u64| {
        let seq = handle.append("in", &v.to_le_bytes()).expect("an append while the repair runs");
        acked.lock().expect("lock").insert(seq, v);
    };
    let edge_handle = edge_rt.handle();
    for _ in 0..800 {
        append(&edge_handle, rng.gen());
    }
    idle_both(&edge_rt, &cloud_rt);

    let target: usize = rng.gen_range(1..=100);
    let corrected: u64 = rng.gen();
    let record = RecordRef { namespace: "edge".into(), log: "in".into(), seq: target as u64 };
    let corrections = [Correction::Record(record.clone())];
    let values = HashMap::from([(record, corrected.to_le_bytes().to_vec())]);
    let none = HashSet::new();
    let (appender_seed, hook_seed): (u64, u64) = (rng.gen(), rng.gen());
    let stop = AtomicBool::new(false);
    let hook_appends = Mutex::new(StdRng::seed_from_u64(hook_seed));
    let on_round = |round: usize, _events: usize| {
        if round <= 2 {
            let mut rng = hook_appends.lock().expect("lock");
            for _ in 0..150 {
                append(&edge_handle, rng.gen());
            }
        }
    };
    let runtimes = [edge_rt.handle(), cloud_rt.handle()];
    let outcome = std::thread::scope(|scope| {
        let appender = scope.spawn(|| {
            let mut rng = StdRng::seed_from_u64(appender_seed);
            let mut n = 0u64;
            while !stop.load(Ordering::SeqCst) {
                append(&edge_handle, rng.gen());
                n += 1;
                std::thread::sleep(Duration::from_micros(500));
            }
            println!("seed {seed}: {n} appends while the repair ran");
            for _ in 0..50 {
                append(&edge_handle, rng.gen());
            }
        });
        let mut online = Online::new(&corrections, &values, &code, &none);
        online.pause_under = Duration::ZERO;
        online.on_round = Some(&on_round);
        let outcome = repair_online_across(&runtimes, &online);
        stop.store(true, Ordering::SeqCst);
        appender.join().expect("appender");
        outcome
    });
    let outcome = outcome.unwrap_or_else(|e| panic!("seed {seed}: the online repair failed: {e}"));
    idle_both(&edge_rt, &cloud_rt);
    println!(
        "seed {seed}: rounds {} (events {:?}), replayed {}, changed {}, paused {:?}, appends held {:?}",
        outcome.rounds,
        outcome.events_per_round,
        outcome.outcome.replayed,
        outcome.outcome.changed,
        outcome.paused,
        outcome.appends_held
    );
    assert!(outcome.rounds >= 2, "seed {seed}: the hook's appends make a second round");
    let swapped: Vec<&String> = outcome.outcome.swapped.keys().collect();
    assert_eq!(swapped.len(), 2, "seed {seed}: both namespaces swapped: {swapped:?}");

    // None lost, the correction applied.
    let acked = acked.into_inner().expect("lock");
    let mut expected: Vec<u64> = acked.values().copied().collect();
    assert_eq!(acked.keys().copied().collect::<Vec<_>>(), (1..=expected.len() as u64).collect::<Vec<_>>());
    expected[target - 1] = corrected;
    let held: Vec<u64> = contents(&*edge, "in").iter().map(|v| value(v)).collect();
    assert!(held == expected, "seed {seed}: edge/in differs from the appends acknowledged");

    assert_as_from_scratch(seed, &edge, &cloud, &expected);
    // Each namespace keeps its old history and has its REPAIR event.
    for (ns, log) in [(&edge, "in"), (&cloud, "out")] {
        let generation = format!("{GENERATION_PREFIX}{log}.1");
        assert!(!contents(&**ns, &generation).is_empty(), "seed {seed}: {}/{generation} kept", ns.name());
    }
    assert_eq!(outcome.outcome.repair_events.len(), 2, "seed {seed}: a REPAIR event per namespace");
    edge_rt.stop(Duration::from_secs(5));
    cloud_rt.stop(Duration::from_secs(5));
}

/// Both namespaces equal a run from scratch of the application on `inputs`.
fn assert_as_from_scratch(seed: u64, edge: &Arc<dyn Namespace>, cloud: &Arc<dyn Namespace>, inputs: &[u64]) {
    // The oracle: both namespaces run from scratch on the same inputs.
    let store = MemoryStore::new();
    let (scratch_edge, scratch_cloud) =
        (store.namespace("edge").expect("edge"), store.namespace("cloud").expect("cloud"));
    let (scratch_edge_rt, scratch_cloud_rt, _) = start_two(Arc::clone(&scratch_edge), Arc::clone(&scratch_cloud));
    for v in inputs {
        scratch_edge_rt.append("in", &v.to_le_bytes()).expect("append");
    }
    idle_both(&scratch_edge_rt, &scratch_cloud_rt);
    for (ns, truth, logs) in [(edge, &scratch_edge, EDGE_LOGS), (cloud, &scratch_cloud, CLOUD_LOGS)] {
        for log in logs {
            assert!(
                contents(&**ns, log) == contents(&**truth, log),
                "seed {seed}: {}/{log} differs from a run from scratch",
                ns.name()
            );
        }
    }
    scratch_edge_rt.stop(Duration::from_secs(5));
    scratch_cloud_rt.stop(Duration::from_secs(5));
}

#[test]
fn an_online_repair_reaching_a_namespace_whose_runtime_was_not_given_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (edge, cloud) = open_two(dir.path());
    let (edge_rt, cloud_rt, code) = start_two(Arc::clone(&edge), Arc::clone(&cloud));
    for v in 0..50u64 {
        edge_rt.append("in", &v.to_le_bytes()).expect("append");
    }
    idle_both(&edge_rt, &cloud_rt);
    let before: Vec<Vec<Vec<u8>>> = EDGE_LOGS
        .iter()
        .map(|log| contents(&*edge, log))
        .chain(CLOUD_LOGS.iter().map(|log| contents(&*cloud, log)))
        .collect();

    let record = RecordRef { namespace: "edge".into(), log: "in".into(), seq: 3 };
    let corrections = [Correction::Record(record.clone())];
    let values = HashMap::from([(record, 42u64.to_le_bytes().to_vec())]);
    let none = HashSet::new();
    let online = Online::new(&corrections, &values, &code, &none);
    let error = repair_online(&edge_rt.handle(), &online).expect_err("cloud's runtime was not given");
    assert!(matches!(error, RepairError::MissingNamespace { ref namespace } if namespace == "cloud"), "{error}");
    let message = error.to_string();
    assert!(message.contains("\"cloud\"") && message.contains("repair_online_across"), "{message}");

    let after: Vec<Vec<Vec<u8>>> = EDGE_LOGS
        .iter()
        .map(|log| contents(&*edge, log))
        .chain(CLOUD_LOGS.iter().map(|log| contents(&*cloud, log)))
        .collect();
    assert!(after == before, "the refused repair changed a log");
    for ns in [&edge, &cloud] {
        let names: Vec<String> = ns.list_logs().expect("list").into_iter().map(|l| l.name).collect();
        assert!(!names.iter().any(|n| n.starts_with(SHADOW_PREFIX) || n.starts_with(GENERATION_PREFIX)), "{names:?}");
    }
    // Both runtimes run on.
    edge_rt.append("in", &7u64.to_le_bytes()).expect("append after the refusal");
    idle_both(&edge_rt, &cloud_rt);
    assert_eq!(contents(&*cloud, "sum").len(), 51);
    edge_rt.stop(Duration::from_secs(5));
    cloud_rt.stop(Duration::from_secs(5));
}
