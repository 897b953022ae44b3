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
use std::sync::{Arc, OnceLock};
use std::time::Duration;

mod common;
mod overlap;

use common::{hash, value};
use overlap::{by_name, every_event, rec, records, repair, same_plan, start, Gate, WAIT};
use varve_log::{MemoryStore, Namespace, SeqRange, Store};
use varve_repair::{events_needed, Correction, RepairPlan};
use varve_runtime::trace::RecordRef;
use varve_runtime::{HandlerContext, HandlerFn, RuntimeHandle, StoredEvent};

/// A repair's events: the events needed, or every event.
fn events(from_needed: bool, values: &[(RecordRef, u64)], namespaces: &[&Arc<dyn Namespace>]) -> Vec<StoredEvent> {
    if !from_needed {
        return every_event(namespaces);
    }
    let correct: Vec<Correction> = values.iter().map(|(r, _)| Correction::Record(r.clone())).collect();
    let namespaces: Vec<Arc<dyn Namespace>> = namespaces.iter().map(|ns| Arc::clone(ns)).collect();
    events_needed(&correct, &namespaces).expect("events needed")
}

/// The plans of the events needed and of every event are the same.
fn plans_agree(values: &[(RecordRef, u64)], namespaces: &[&Arc<dyn Namespace>]) {
    let correct: Vec<Correction> = values.iter().map(|(r, _)| Correction::Record(r.clone())).collect();
    same_plan(
        &RepairPlan::build(&events(true, values, namespaces), &correct, &HashSet::new()),
        &RepairPlan::build(&events(false, values, namespaces), &correct, &HashSet::new()),
    );
}

/// Appends a hash of the record to `log` of `remote`'s namespace.
fn forward(remote: RuntimeHandle, log: &'static str) -> HandlerFn {
    Arc::new(move |ctx: &mut HandlerContext<'_>| {
        ctx.append_via(&remote, &[(log, &hash(&[value(ctx.record())]).to_le_bytes())])?;
        Ok(())
    })
}

// 1. Two corrections in two namespaces: a run downstream of the edge
//    correction appended to cloud *before* the cloud correction's APPEND,
//    which a read of cloud from that APPEND on would miss.

/// Edge `fwd` on `w` appends to cloud `mirror`; then cloud `in:1` lands.
fn two_corrections_app() -> (Arc<dyn Namespace>, Arc<dyn Namespace>, HashMap<String, HandlerFn>) {
    let edge_ns = MemoryStore::new().namespace("edge").expect("edge");
    let cloud_ns = MemoryStore::new().namespace("cloud").expect("cloud");
    let cloud = start(&cloud_ns, 2, &["in", "mirror"], &[]);
    let handlers = [("fwd", "w", forward(cloud.handle(), "mirror"))];
    let edge = start(&edge_ns, 1, &["w"], &handlers);
    edge.append("w", &5u64.to_le_bytes()).expect("w:1");
    assert!(edge.wait_idle(WAIT) && cloud.wait_idle(WAIT));
    cloud.append("in", &7u64.to_le_bytes()).expect("in:1");
    assert!(edge.wait_idle(WAIT) && cloud.wait_idle(WAIT));
    edge.stop(Duration::from_secs(5));
    cloud.stop(Duration::from_secs(5));
    (edge_ns, cloud_ns, by_name(&handlers))
}

#[test]
fn corrections_in_two_namespaces() {
    let values = [(rec("edge", "w", 1), 6), (rec("cloud", "in", 1), 8)];
    let (edge, cloud, _) = two_corrections_app();
    plans_agree(&values, &[&edge, &cloud]);
    for from_needed in [false, true] {
        let (edge, cloud, handlers) = two_corrections_app();
        let events = events(from_needed, &values, &[&edge, &cloud]);
        repair(&events, &values, &[&edge, &cloud], &handlers).unwrap_or_else(|e| panic!("{from_needed}: {e}"));
        assert_eq!(records(&cloud, "mirror"), [hash(&[6])], "fwd's output follows the corrected w:1");
        assert_eq!(records(&cloud, "in"), [8]);
    }
}

// 2. One correction (what the CLI and Python pass): a run of the *other*
//    namespace, going when the record landed, appended to the record's
//    namespace before the record's APPEND and depends on the repair after.

/// Edge `slow` on `start`: appends to cloud `mirror`, is held, asks the
/// latest seq of edge `z`, appends `out`. Cloud `put` on `in`: appends to
/// edge `z`. Cloud `in:1` lands while `slow` is held.
fn going_app() -> (Arc<dyn Namespace>, Arc<dyn Namespace>, HashMap<String, HandlerFn>) {
    let edge_ns = MemoryStore::new().namespace("edge").expect("edge");
    let cloud_ns = MemoryStore::new().namespace("cloud").expect("cloud");
    let edge_handle: Arc<OnceLock<RuntimeHandle>> = Arc::new(OnceLock::new());
    let gate = Gate::default();
    let put: HandlerFn = {
        let edge_handle = Arc::clone(&edge_handle);
        Arc::new(move |ctx: &mut HandlerContext<'_>| {
            let out = hash(&[value(ctx.record())]).to_le_bytes();
            ctx.append_via(edge_handle.get().ok_or("the edge runtime is not up")?, &[("z", &out)])?;
            Ok(())
        })
    };
    let cloud_handlers = [("put", "in", put)];
    let cloud = start(&cloud_ns, 2, &["in", "mirror"], &cloud_handlers);
    let slow: HandlerFn = {
        let (gate, cloud_handle) = (gate.clone(), cloud.handle());
        Arc::new(move |ctx: &mut HandlerContext<'_>| {
            let mine = value(ctx.record());
            ctx.append_via(&cloud_handle, &[("mirror", &hash(&[mine]).to_le_bytes())])?;
            gate.hold(ctx)?;
            let n = ctx.latest("z")?;
            ctx.append("out", &hash(&[mine, n]).to_le_bytes())?;
            Ok(())
        })
    };
    let edge_handlers = [("slow", "start", slow)];
    let edge = start(&edge_ns, 1, &["start", "z", "out"], &edge_handlers);
    edge_handle.set(edge.handle()).ok().expect("set once");
    edge.append("start", &3u64.to_le_bytes()).expect("start:1");
    gate.until_held();
    cloud.append("in", &7u64.to_le_bytes()).expect("in:1"); // put appends edge z:1
    assert!(cloud.wait_idle(WAIT), "put done");
    gate.release();
    assert!(edge.wait_idle(WAIT) && cloud.wait_idle(WAIT));
    edge.stop(Duration::from_secs(5));
    cloud.stop(Duration::from_secs(5));
    let mut handlers = by_name(&cloud_handlers);
    handlers.extend(by_name(&edge_handlers));
    (edge_ns, cloud_ns, handlers)
}

#[test]
fn a_run_of_the_other_namespace_going_when_the_record_landed() {
    let values = [(rec("cloud", "in", 1), 8)];
    let (edge, cloud, _) = going_app();
    plans_agree(&values, &[&edge, &cloud]);
    for from_needed in [false, true] {
        let (edge, cloud, handlers) = going_app();
        let events = events(from_needed, &values, &[&edge, &cloud]);
        repair(&events, &values, &[&edge, &cloud], &handlers).unwrap_or_else(|e| panic!("{from_needed}: {e}"));
        assert_eq!(records(&edge, "z"), [hash(&[8])]);
        assert_eq!(records(&cloud, "mirror"), [hash(&[3])]);
        assert_eq!(records(&edge, "out"), [hash(&[3, 1])]);
    }
}

// 3. A replayed scan of a log whose last records were appended without the
//    runtime after the record: the walk takes the records of a log before
//    its first APPEND among the events as there from the start.

/// `sum` on `in` scans `data` and appends a hash of the record and the
/// scan to `out`. `data:1..2`, `in:1`, `in:2` through the runtime; then,
/// with it stopped, `data:3` appended directly.
fn scan_app() -> (Arc<dyn Namespace>, HashMap<String, HandlerFn>) {
    let ns = MemoryStore::new().namespace("app").expect("ns");
    let sum: HandlerFn = Arc::new(|ctx: &mut HandlerContext<'_>| {
        let mut parts = vec![value(ctx.record())];
        parts.extend(ctx.scan("data", SeqRange::ALL)?.iter().map(|r| value(&r.value)));
        ctx.append("out", &hash(&parts).to_le_bytes())?;
        Ok(())
    });
    let handlers = [("sum", "in", sum)];
    let runtime = start(&ns, 1, &["in", "data", "out"], &handlers);
    for (log, v) in [("data", 1u64), ("data", 2), ("in", 10), ("in", 20)] {
        runtime.append(log, &v.to_le_bytes()).expect("append");
        assert!(runtime.wait_idle(WAIT));
    }
    runtime.stop(Duration::from_secs(5));
    // Later, without the runtime (supported: placed at their seqs).
    ns.append("data", &4u64.to_le_bytes()).expect("data:3");
    (ns, by_name(&handlers))
}

#[test]
fn a_scan_replayed_over_records_appended_later_without_the_runtime() {
    let values = [(rec("app", "in", 2), 21)];
    for from_needed in [false, true] {
        let (ns, handlers) = scan_app();
        let events = events(from_needed, &values, &[&ns]);
        repair(&events, &values, &[&ns], &handlers).unwrap_or_else(|e| panic!("{from_needed}: {e}"));
        // `sum` on in:2 saw data:1..=2 when it ran; data:3 came later.
        assert_eq!(records(&ns, "out"), [hash(&[10, 1, 2]), hash(&[21, 1, 2])], "from_needed={from_needed}");
    }
}

// 4. Corrections naming logs that do not exist read every event, as before.

#[test]
fn a_correction_of_a_missing_log_plans_as_before() {
    let (ns, _) = scan_app();
    for log in ["nosuch", "bad name/x", "a".repeat(300).as_str()] {
        let needed = events_needed(&[Correction::Record(rec("app", log, 1))], &[Arc::clone(&ns)]);
        assert!(needed.is_ok(), "{log:?}: {:?}", needed.err());
    }
}
