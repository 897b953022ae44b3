//! A sorted map that handlers build (`HandlerContext::sorted_map`) is
//! repaired like any log: after a correction, every version of the map
//! from the corrected input on equals a run from scratch with the input
//! correct, the versions before it are unchanged, and the old history's
//! map stays readable as generation 1 — on a journal, across restarts.

use std::collections::HashSet;
use std::sync::Arc;

#[allow(dead_code, reason = "this test uses part of the shared helpers")]
mod common;
mod overlap;

use common::value;
use overlap::{by_name, every_event, rec, records, repair, start, Subscribed, WAIT};
use varve_log::{JournalOptions, JournalStore, MemoryStore, Namespace, Store, SyncPolicy};
use varve_repair::{repair_online, Correction, Online, RepairPlan};
use varve_runtime::{HandlerContext, HandlerFn, HandlerResult, Runtime};

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// `index` (on `in`): puts `k{v % 3}` → `10 v`, deletes `k1` on a multiple
/// of 5, then appends the sum of the map's values to `totals` — a read of
/// the whole map after its own write.
fn index(ctx: &mut HandlerContext<'_>) -> HandlerResult {
    let v = value(ctx.record());
    let map = ctx.sorted_map("prices");
    map.put(format!("k{}", v % 3).as_bytes(), &(10 * v).to_le_bytes())?;
    if v.is_multiple_of(5) {
        map.delete(b"k1")?;
    }
    let sum: u64 = map.range(None, None)?.iter().map(|(_, value_bytes)| value(value_bytes)).sum();
    ctx.append("totals", &sum.to_le_bytes())?;
    Ok(())
}

/// `watch` (on `prices`, the op log): appends what `k0` holds now (0 when
/// absent) — a map read triggered by the map's own change feed.
fn watch(ctx: &mut HandlerContext<'_>) -> HandlerResult {
    let k0 = ctx.sorted_map("prices").get(b"k0")?.map_or(0, |v| value(&v));
    ctx.append("seen", &k0.to_le_bytes())?;
    Ok(())
}

fn handlers() -> Vec<Subscribed> {
    let index: HandlerFn = Arc::new(index);
    let watch: HandlerFn = Arc::new(watch);
    vec![("index", "in", index), ("watch", "prices", watch)]
}

const LOGS: &[&str] = &["in", "prices", "totals", "seen"];

/// Run the app over `inputs`, one at a time (so both runs fire in the same order).
fn run(ns: &Arc<dyn Namespace>, inputs: &[u64]) {
    let runtime = start(ns, 1, LOGS, &handlers());
    for v in inputs {
        runtime.append("in", &v.to_le_bytes()).expect("append");
        assert!(runtime.wait_idle(WAIT), "the app did not settle within {WAIT:?}");
    }
    runtime.stop(WAIT);
}

/// The map at every version `0..=latest`.
fn every_version(read: &varve_runtime::MapReader) -> Vec<Entries> {
    let latest = read.latest().expect("latest");
    (0..=latest)
        .map(|at| {
            read.range(None, None, Some(at))
                .expect("range")
                .into_iter()
                .map(|(k, v)| (k.to_vec(), v.to_vec()))
                .collect()
        })
        .collect()
}

fn versions_of(runtime: &Runtime) -> Vec<Entries> {
    every_version(&runtime.sorted_map("prices").expect("map"))
}

fn raw(ns: &Arc<dyn Namespace>, log: &str) -> Vec<Vec<u8>> {
    ns.scan(log, varve_log::SeqRange::ALL).expect("scan").map(|r| r.expect("record").value.to_vec()).collect()
}

fn journal(dir: &std::path::Path) -> Arc<dyn Namespace> {
    let store = JournalStore::open(dir, JournalOptions { sync: SyncPolicy::Never, ..JournalOptions::default() })
        .expect("open store");
    Arc::new(store.journal_namespace("app").expect("namespace"))
}

#[test]
fn a_repaired_input_repairs_the_map_a_handler_built_and_keeps_the_old_one() {
    let inputs = [1, 2, 3, 4, 5, 6, 7, 9];
    let (corrected_seq, corrected_value) = (3, 31);
    let mut fixed = inputs;
    fixed[2] = corrected_value;

    // From scratch, with the input correct from the start.
    let scratch: Arc<dyn Namespace> = MemoryStore::new().namespace("app").expect("namespace");
    run(&scratch, &fixed);
    let runtime = start(&scratch, 1, LOGS, &handlers());
    let want = versions_of(&runtime);
    runtime.stop(WAIT);

    let dir = tempfile::tempdir().expect("tempdir");
    let before = {
        let ns = journal(dir.path());
        run(&ns, &inputs);
        let runtime = start(&ns, 1, LOGS, &handlers());
        let before = versions_of(&runtime);
        runtime.stop(WAIT);
        let events = every_event(&[&ns]);
        // A map read depends on every op before it (a ranged READ of the op
        // log), so each run that read the map after the corrected op is
        // replayed for certain, not only if the op log's tail moved.
        let plan = RepairPlan::build(&events, &[Correction::Record(rec("app", "in", corrected_seq))], &HashSet::new());
        // index on in:3..=8, watch on prices:3..=9 (input 5 also deletes).
        assert_eq!(plan.reruns.len(), 6 + 7, "{}", plan.to_text());
        assert!(plan.reruns.iter().all(|r| r.certain), "{}", plan.to_text());
        let outcome =
            repair(&events, &[(rec("app", "in", corrected_seq), corrected_value)], &[&ns], &by_name(&handlers()))
                .expect("repair");
        assert!(!outcome.swapped.is_empty(), "the repair swapped nothing");
        before
    };
    assert_ne!(before, want, "the correction must change the map for this test to say anything");
    // Ops 1..=2 came from inputs 1 and 2: the same in both histories.
    assert_eq!(before[..3], want[..3]);

    // Reopened from disk: the map is the repaired one, at every version.
    let ns = journal(dir.path());
    for log in ["totals", "seen"] {
        assert_eq!(records(&ns, log), records(&scratch, log), "log {log}");
    }
    assert_eq!(raw(&ns, "prices"), raw(&scratch, "prices"), "the op log");
    let runtime = start(&ns, 1, LOGS, &handlers());
    let map = runtime.sorted_map("prices").expect("map");
    // The map built before moved with the old op log; the repaired one is new.
    assert!(ns.latest("map._gen.prices.1.at").is_ok(), "the old map's index moved with _gen.prices.1");
    assert_eq!(every_version(&map), want, "the repaired map, version by version");
    // The old history's map, at every version, as it was.
    let old = runtime.sorted_map_generation("prices", 1).expect("generation 1");
    assert_eq!(every_version(&old), before, "the old map, version by version");
    // And the app goes on building the repaired map.
    runtime.append("in", &8u64.to_le_bytes()).expect("append");
    assert!(runtime.wait_idle(WAIT));
    let after = versions_of(&runtime);
    assert_eq!(after[..want.len()], want[..]);
    assert_eq!(runtime.sorted_map("prices").expect("map").get(b"k2", None).expect("get").map(|v| value(&v)), Some(80));
    runtime.stop(WAIT);
}

/// Online: the runtime keeps running (its map already built and cached) while
/// the repair swaps the op log; its next access builds generation 2.
#[test]
fn an_online_repair_switches_the_running_runtime_to_the_repaired_map() {
    let inputs = [2, 3, 5, 6, 10, 11];
    let (corrected_seq, corrected_value) = (2, 7);
    let mut fixed = inputs.to_vec();
    fixed[1] = corrected_value;
    fixed.push(12);

    let scratch: Arc<dyn Namespace> = MemoryStore::new().namespace("app").expect("namespace");
    run(&scratch, &fixed);
    let runtime = start(&scratch, 1, LOGS, &handlers());
    let want = versions_of(&runtime);
    runtime.stop(WAIT);

    let ns: Arc<dyn Namespace> = MemoryStore::new().namespace("app").expect("namespace");
    let runtime = start(&ns, 1, LOGS, &handlers());
    for v in inputs {
        runtime.append("in", &v.to_le_bytes()).expect("append");
        assert!(runtime.wait_idle(WAIT));
    }
    let before = versions_of(&runtime);
    let corrections = [Correction::Record(rec("app", "in", corrected_seq))];
    let values = [(rec("app", "in", corrected_seq), corrected_value.to_le_bytes().to_vec())].into_iter().collect();
    let code = by_name(&handlers());
    let none = HashSet::new();
    let online = Online::new(&corrections, &values, &code, &none);
    repair_online(&runtime.handle(), &online).expect("online repair");

    // The running runtime had the map built and cached: it now reads the
    // repaired one (the run from scratch's, but for input 12's one put).
    let map = runtime.sorted_map("prices").expect("map");
    assert_eq!(every_version(&map)[..], want[..want.len() - 1]);
    assert!(ns.latest("map._gen.prices.1.at").is_ok(), "the old map's index moved with _gen.prices.1");
    let old = runtime.sorted_map_generation("prices", 1).expect("generation 1");
    assert_eq!(every_version(&old), before);
    // The app goes on, on the repaired map: one more input, then every log
    // and every version as from scratch.
    runtime.append("in", &12u64.to_le_bytes()).expect("append");
    assert!(runtime.wait_idle(WAIT));
    assert_eq!(versions_of(&runtime), want);
    for log in ["totals", "seen"] {
        assert_eq!(records(&ns, log), records(&scratch, log), "log {log}");
    }
    runtime.stop(WAIT);
}

fn put_op(key: &[u8], v: u64) -> Vec<u8> {
    varve_runtime::MapOp::Put { key: key.to_vec(), value: v.to_le_bytes().to_vec() }.encode()
}

/// `w` (on `in`): puts `k` → its input, is held (live only), then appends
/// the sum of the map's values to `out`: a read after its own write, while
/// a client appends an op of its own to `m`.
fn put_hold_sum(gate: &overlap::Gate) -> Subscribed {
    let gate = gate.clone();
    let f: HandlerFn = Arc::new(move |ctx: &mut HandlerContext<'_>| {
        let map = ctx.sorted_map("m");
        map.put(b"k", &value(ctx.record()).to_le_bytes())?;
        gate.hold(ctx)?;
        let sum: u64 = map.range(None, None)?.iter().map(|(_, v)| value(v)).sum();
        ctx.append("out", &sum.to_le_bytes())?;
        Ok(())
    });
    ("w", "in", f)
}

/// Run the app (in:1 = 1; m:1 = w's put k=1; m:2 = a client's put j=5
/// while w is held; out:1 = 6), correct `record` to `bytes`: out before and after.
fn held_run_and_repair(record: varve_runtime::trace::RecordRef, bytes: Vec<u8>) -> (Vec<u64>, Vec<u64>) {
    let ns: Arc<dyn Namespace> = MemoryStore::new().namespace("app").expect("namespace");
    let gate = overlap::Gate::default();
    let handlers = [put_hold_sum(&gate)];
    let runtime = start(&ns, 1, &["in", "m", "out"], &handlers);
    runtime.append("in", &1u64.to_le_bytes()).expect("in:1");
    gate.until_held();
    runtime.append("m", &put_op(b"j", 5)).expect("m:2");
    gate.release();
    assert!(runtime.wait_idle(WAIT));
    runtime.stop(WAIT);
    let before = records(&ns, "out");
    let events = every_event(&[&ns]);
    let plan = RepairPlan::build(&events, &[Correction::Record(record.clone())], &HashSet::new());
    let namespaces = [("app".to_owned(), Arc::clone(&ns))].into_iter().collect();
    let values = [(record, bytes)].into_iter().collect();
    varve_repair::execute(
        &plan,
        &varve_repair::Inputs {
            events: &events,
            namespaces: &namespaces,
            handlers: &by_name(&handlers),
            values: &values,
            not_replayable: varve_repair::NotReplayable::Refuse,
        },
    )
    .expect("repair");
    (before, records(&ns, "out"))
}

/// From a review: w's input is corrected (1 → 2), so w is replayed at its
/// put, before the walk has placed the client's later op j=5. Its map read
/// (pinned to m:2) must still see j: the fold reads each op as the replay
/// reads records, not only what the walk has placed.
#[test]
fn a_replayed_map_read_sees_the_ops_another_writer_appended_during_the_run() {
    let (before, after) = held_run_and_repair(rec("app", "in", 1), 2u64.to_le_bytes().to_vec());
    assert_eq!(before, [1 + 5], "the original run read k=1 and j=5");
    assert_eq!(after, [2 + 5], "the replayed read sees k=2 and the client's j=5");
}

/// From a review: the client's op is corrected (j=5 → 6): w is replayed at
/// `out:1`, its own put kept; its read must see the corrected j.
#[test]
fn a_replayed_map_read_after_a_kept_put_sees_the_corrected_op() {
    let (before, after) = held_run_and_repair(rec("app", "m", 2), put_op(b"j", 6));
    assert_eq!(before, [1 + 5]);
    assert_eq!(after, [1 + 6], "the replayed read sees k=1 and the corrected j=6");
}
