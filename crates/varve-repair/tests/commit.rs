//! The commit of a repair through the repair journal (`_repairs`), and
//! `resume` after it was cut short — in a repair spanning two namespaces,
//! where each namespace's swap is atomic but the two are not together.
//!
//! The cuts are made by a wrapper around real (memory) namespaces: a
//! `rename_logs` or the batch of the REPAIR event that fails (an error), or
//! panics (the process's state at a crash: nothing after it runs, no
//! clean-up). After each, `resume` must leave the store complete: the logs
//! of a run from scratch with the correction, each REPAIR event written
//! once — or, where finishing would lose records appended since, the old
//! history, said so.

use std::collections::{HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use varve_log::{LogConfig, LogError, LogInfo, MemoryStore, Namespace, Scan, Seq, SeqRange, Store, Watch};
use varve_repair::{execute, resume, Correction, Inputs, NotReplayable, RepairError, RepairPlan, REPAIRS_LOG};
use varve_runtime::trace::{merge, RecordRef};
use varve_runtime::{
    namespace_events, EventKind, HandlerContext, HandlerFn, HandlerKind, HandlerSpec, RetryPolicy, Runtime,
    RuntimeBuilder,
};

const IDLE: Duration = Duration::from_secs(30);
const INPUTS: [u64; 5] = [10, 20, 30, 40, 50];
/// The input corrected (seq in `edge/in`), and its right value.
const CORRECTED: Seq = 2;
const RIGHT: u64 = 25;

/// What a [`Cut`] namespace does to an operation.
const PASS: u8 = 0;
const FAIL: u8 = 1;
const PANIC: u8 = 2;

/// The writes of the namespaces of one "process", numbered in order; from
/// write `stop_at` on every write fails, as if the process had died there.
struct Clock {
    writes: AtomicU64,
    stop_at: AtomicU64,
}

impl Clock {
    fn new() -> Arc<Clock> {
        Arc::new(Clock { writes: AtomicU64::new(0), stop_at: AtomicU64::new(u64::MAX) })
    }

    fn tick(&self, what: &str) -> Result<(), LogError> {
        let index = self.writes.fetch_add(1, Ordering::SeqCst);
        if index >= self.stop_at.load(Ordering::SeqCst) {
            return Err(LogError::Io { context: what.to_owned(), source: std::io::Error::other("the process died") });
        }
        Ok(())
    }

    /// From write `index` on (counted from now), the process is dead.
    fn stop_after(&self, index: u64) {
        self.stop_at.store(self.writes.load(Ordering::SeqCst) + index, Ordering::SeqCst);
    }

    fn revive(&self) {
        self.stop_at.store(u64::MAX, Ordering::SeqCst);
    }
}

/// A namespace whose `rename_logs`, and whose batches writing `_repairs`,
/// pass, fail or panic as set, and whose writes stop with its clock's.
struct Cut {
    inner: Arc<dyn Namespace>,
    rename: AtomicU8,
    finish: AtomicU8,
    clock: Arc<Clock>,
}

impl Cut {
    fn new(inner: Arc<dyn Namespace>, clock: &Arc<Clock>) -> Arc<Cut> {
        Arc::new(Cut { inner, rename: AtomicU8::new(PASS), finish: AtomicU8::new(PASS), clock: Arc::clone(clock) })
    }

    fn apply(mode: &AtomicU8, what: &str) -> Result<(), LogError> {
        match mode.load(Ordering::SeqCst) {
            FAIL => Err(LogError::Io { context: what.to_owned(), source: std::io::Error::other("cut by the test") }),
            PANIC => panic!("{what}: the process dies here (test)"),
            _ => Ok(()),
        }
    }

    fn heal(&self) {
        self.rename.store(PASS, Ordering::SeqCst);
        self.finish.store(PASS, Ordering::SeqCst);
    }
}

impl Namespace for Cut {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn create_log(&self, log: &str, config: LogConfig) -> Result<(), LogError> {
        self.clock.tick("create_log")?;
        self.inner.create_log(log, config)
    }
    fn delete_log(&self, log: &str) -> Result<(), LogError> {
        self.clock.tick("delete_log")?;
        self.inner.delete_log(log)
    }
    fn rename_logs(&self, renames: &[(&str, &str)]) -> Result<(), LogError> {
        self.clock.tick("rename_logs")?;
        Self::apply(&self.rename, "rename_logs")?;
        self.inner.rename_logs(renames)
    }
    fn trim(&self, log: &str, before: Seq) -> Result<Seq, LogError> {
        self.clock.tick("trim")?;
        self.inner.trim(log, before)
    }
    fn list_logs(&self) -> Result<Vec<LogInfo>, LogError> {
        self.inner.list_logs()
    }
    fn log_info(&self, log: &str) -> Result<LogInfo, LogError> {
        self.inner.log_info(log)
    }
    fn append(&self, log: &str, value: &[u8]) -> Result<Seq, LogError> {
        self.clock.tick("append")?;
        self.inner.append(log, value)
    }
    fn append_batch(&self, batch: &[(&str, &[u8])]) -> Result<Vec<Seq>, LogError> {
        self.clock.tick("append_batch")?;
        if batch.iter().any(|(log, _)| *log == REPAIRS_LOG) {
            Self::apply(&self.finish, "the REPAIR event's batch")?;
        }
        self.inner.append_batch(batch)
    }
    fn append_if(&self, log: &str, expected_latest: Seq, value: &[u8]) -> Result<Seq, LogError> {
        self.clock.tick("append_if")?;
        self.inner.append_if(log, expected_latest, value)
    }
    fn append_batch_if(&self, batch: &[(&str, &[u8])], expected: &[(&str, Seq)]) -> Result<Vec<Seq>, LogError> {
        self.clock.tick("append_batch_if")?;
        self.inner.append_batch_if(batch, expected)
    }
    fn get(&self, log: &str, seq: Seq) -> Result<Bytes, LogError> {
        self.inner.get(log, seq)
    }
    fn latest(&self, log: &str) -> Result<Seq, LogError> {
        self.inner.latest(log)
    }
    fn earliest(&self, log: &str) -> Result<Seq, LogError> {
        self.inner.earliest(log)
    }
    fn scan(&self, log: &str, range: SeqRange) -> Result<Scan<'_>, LogError> {
        self.inner.scan(log, range)
    }
    fn watch(&self, log: &str, from: Seq) -> Result<Watch, LogError> {
        self.inner.watch(log, from)
    }
    fn sync(&self) -> Result<(), LogError> {
        self.inner.sync()
    }
}

fn value(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes.try_into().expect("8-byte records"))
}

/// `double` (edge): each input doubled into `edge/twice` and sent to
/// `cloud/out`; `total` (cloud): the running sum of `out` into `cloud/sum`
/// (by LATEST and a get of the previous sum).
fn double(cloud: Option<&varve_runtime::RuntimeHandle>) -> HandlerFn {
    let cloud = cloud.cloned();
    Arc::new(move |ctx: &mut HandlerContext<'_>| {
        let twice = (value(ctx.record()) * 2).to_le_bytes();
        ctx.append("twice", &twice)?;
        let cloud = cloud.as_ref().expect("the cloud runtime's handle");
        ctx.append_via(cloud, &[("out", &twice)])?;
        if !ctx.is_replay() {
            assert!(cloud.wait_idle(IDLE), "cloud idle");
        }
        Ok(())
    })
}

fn total() -> HandlerFn {
    Arc::new(|ctx: &mut HandlerContext<'_>| {
        let latest = ctx.latest("sum")?;
        let before = if latest == 0 { 0 } else { value(&ctx.get("sum", latest)?) };
        ctx.append("sum", &(before + value(ctx.record())).to_le_bytes())?;
        Ok(())
    })
}

fn spec(name: &str, f: HandlerFn) -> HandlerSpec {
    HandlerSpec { name: name.to_owned(), kind: HandlerKind::Rust(f), retry: RetryPolicy::default() }
}

struct App {
    clock: Arc<Clock>,
    edge: Arc<Cut>,
    cloud: Arc<Cut>,
    events: Vec<varve_runtime::StoredEvent>,
    handlers: HashMap<String, HandlerFn>,
}

/// Run the app over fresh namespaces, one input at a time; `right`: with the
/// corrected input from the start.
fn run_app(right: bool) -> App {
    let clock = Clock::new();
    let edge = Cut::new(MemoryStore::new().namespace("edge").expect("edge"), &clock);
    let cloud = Cut::new(MemoryStore::new().namespace("cloud").expect("cloud"), &clock);
    let edge_ns: Arc<dyn Namespace> = edge.clone();
    let cloud_ns: Arc<dyn Namespace> = cloud.clone();
    let cloud_rt: Runtime = RuntimeBuilder::new(cloud_ns)
        .host(2)
        .concurrency(1)
        .log("out", LogConfig::unbounded())
        .log("sum", LogConfig::unbounded())
        .register(spec("total", total()))
        .subscribe("out", "total")
        .start()
        .expect("cloud runtime");
    let handle = cloud_rt.handle();
    let edge_rt: Runtime = RuntimeBuilder::new(edge_ns)
        .host(1)
        .concurrency(1)
        .log("in", LogConfig::unbounded())
        .log("twice", LogConfig::unbounded())
        .register(spec("double", double(Some(&handle))))
        .subscribe("in", "double")
        .start()
        .expect("edge runtime");
    for (i, input) in INPUTS.iter().enumerate() {
        let v = if right && i as Seq + 1 == CORRECTED { RIGHT } else { *input };
        edge_rt.append("in", &v.to_le_bytes()).expect("append");
        for _ in 0..2 {
            assert!(edge_rt.wait_idle(IDLE) && cloud_rt.wait_idle(IDLE), "idle");
        }
    }
    let events = merge(&[edge_rt.events().expect("events"), cloud_rt.events().expect("events")]);
    edge_rt.stop(Duration::from_secs(5));
    cloud_rt.stop(Duration::from_secs(5));
    let handlers = HashMap::from([("double".to_owned(), double(Some(&handle))), ("total".to_owned(), total())]);
    App { clock, edge, cloud, events, handlers }
}

fn logs(app: &App) -> Vec<Vec<u64>> {
    [(&app.edge, "in"), (&app.edge, "twice"), (&app.cloud, "out"), (&app.cloud, "sum")]
        .iter()
        .map(|(ns, log)| ns.scan(log, SeqRange::ALL).expect("scan").map(|r| value(&r.expect("record").value)).collect())
        .collect()
}

fn namespaces(app: &App) -> HashMap<String, Arc<dyn Namespace>> {
    let edge: Arc<dyn Namespace> = app.edge.clone();
    let cloud: Arc<dyn Namespace> = app.cloud.clone();
    HashMap::from([("edge".to_owned(), edge), ("cloud".to_owned(), cloud)])
}

fn correction() -> (Vec<Correction>, HashMap<RecordRef, Vec<u8>>) {
    let record = RecordRef { namespace: "edge".into(), log: "in".into(), seq: CORRECTED };
    (vec![Correction::Record(record.clone())], HashMap::from([(record, RIGHT.to_le_bytes().to_vec())]))
}

fn repair(app: &App) -> Result<varve_repair::RepairOutcome, RepairError> {
    let (corrections, values) = correction();
    let plan = RepairPlan::build(&app.events, &corrections, &HashSet::new());
    let namespaces = namespaces(app);
    let inputs = Inputs {
        events: &app.events,
        namespaces: &namespaces,
        handlers: &app.handlers,
        values: &values,
        not_replayable: NotReplayable::Refuse,
    };
    execute(&plan, &inputs)
}

/// REPAIR events in a namespace's `_events`.
fn repair_events(ns: &dyn Namespace) -> usize {
    namespace_events(ns, SeqRange::ALL).expect("events").iter().filter(|e| e.event.kind == EventKind::Repair).count()
}

fn log_names(ns: &dyn Namespace) -> Vec<String> {
    ns.list_logs().expect("logs").into_iter().map(|l| l.name).collect()
}

/// The store is the repaired one, committed once in each namespace, with
/// the old histories kept and no shadow or interrupted repair left.
fn assert_repaired(app: &App, truth: &[Vec<u64>], original: &[Vec<u64>]) {
    assert_eq!(logs(app), truth, "every log as a run from scratch with the correction");
    for ns in [&app.edge, &app.cloud] {
        assert_eq!(repair_events(ns.as_ref()), 1, "{}: one REPAIR event", ns.name());
        let names = log_names(ns.as_ref());
        assert!(!names.iter().any(|n| n.starts_with("_shadow.")), "{}: shadows left: {names:?}", ns.name());
        assert!(!names.iter().any(|n| n.ends_with(".2")), "{}: repaired twice: {names:?}", ns.name());
    }
    assert_eq!(value(&app.edge.get("_gen.in.1", CORRECTED).expect("old in")), original[0][1], "old history kept");
    assert!(resume(&namespaces(app)).expect("resume").is_empty(), "nothing left to resume");
}

#[test]
fn a_repair_cut_between_the_swaps_of_two_namespaces_is_finished_by_resume() {
    let truth = logs(&run_app(true));
    let app = run_app(false);
    let original = logs(&app);
    assert_ne!(original, truth);
    // "cloud" is swapped first (namespaces in name order); edge's swap fails.
    app.edge.rename.store(FAIL, Ordering::SeqCst);
    let error = repair(&app).expect_err("edge's swap fails");
    assert!(error.to_string().contains("cut by the test"), "{error}");
    let half = logs(&app);
    assert_eq!(half[2..], truth[2..], "cloud was swapped");
    assert_eq!(half[..2], original[..2], "edge was not");
    // A new repair is refused until the interrupted one is finished.
    app.edge.heal();
    let refused = repair(&app).expect_err("interrupted");
    assert!(matches!(refused, RepairError::Interrupted { .. }), "{refused}");
    assert!(refused.to_string().contains("varve repair resume"), "{refused}");
    // resume needs every namespace of the interrupted repair.
    let cloud_only: HashMap<String, Arc<dyn Namespace>> = HashMap::from([("cloud".to_owned(), {
        let cloud: Arc<dyn Namespace> = app.cloud.clone();
        cloud
    })]);
    let missing = resume(&cloud_only).expect_err("edge not given");
    assert!(matches!(missing, RepairError::MissingNamespace { ref namespace } if namespace == "edge"), "{missing}");
    assert_eq!(logs(&app), half, "a refused resume changes nothing");

    let resumed = resume(&namespaces(&app)).expect("resume");
    assert_eq!(resumed.len(), 1, "{resumed:?}");
    let (corrections, values) = correction();
    assert!(resumed[0].is_request(&corrections, &values), "the same request");
    assert_eq!(resumed[0].swapped_now, ["edge"], "{resumed:?}");
    assert_eq!(resumed[0].finished.keys().collect::<Vec<_>>(), ["cloud", "edge"], "{resumed:?}");
    assert!(resumed[0].called_off.is_empty(), "{resumed:?}");
    assert_repaired(&app, &truth, &original);
}

#[test]
fn a_repair_that_dies_at_a_swap_is_rolled_forward_by_resume() {
    let truth = logs(&run_app(true));
    for cut in ["cloud", "edge"] {
        let app = run_app(false);
        let original = logs(&app);
        let ns = if cut == "cloud" { &app.cloud } else { &app.edge };
        ns.rename.store(PANIC, Ordering::SeqCst);
        let died = std::panic::catch_unwind(AssertUnwindSafe(|| repair(&app)));
        assert!(died.is_err(), "{cut}: the repair died at the swap");
        ns.heal();
        let resumed = resume(&namespaces(&app)).expect("resume");
        assert_eq!(resumed.len(), 1, "{cut}: {resumed:?}");
        let now_swapped = if cut == "cloud" { vec!["cloud", "edge"] } else { vec!["edge"] };
        assert_eq!(resumed[0].swapped_now, now_swapped, "{cut}: {resumed:?}");
        assert_repaired(&app, &truth, &original);
    }
}

#[test]
fn a_repair_whose_repair_event_was_not_written_is_completed_by_resume_not_repeated() {
    let truth = logs(&run_app(true));
    let app = run_app(false);
    let original = logs(&app);
    app.cloud.finish.store(FAIL, Ordering::SeqCst);
    let outcome = repair(&app).expect("the repair itself is done");
    let error = outcome.event_error.as_deref().expect("the REPAIR event of cloud is missing");
    assert!(error.contains("varve repair resume"), "{error}");
    assert_eq!(logs(&app), truth, "both namespaces swapped");
    assert_eq!(repair_events(app.cloud.as_ref()), 0);
    app.cloud.heal();
    let resumed = resume(&namespaces(&app)).expect("resume");
    assert_eq!(resumed.len(), 1, "{resumed:?}");
    assert!(resumed[0].swapped_now.is_empty(), "nothing left to swap: {resumed:?}");
    assert_eq!(resumed[0].repair_events.keys().collect::<Vec<_>>(), ["cloud"], "{resumed:?}");
    assert_repaired(&app, &truth, &original);
}

#[test]
fn a_cut_repair_whose_originals_grew_since_is_called_off_where_it_was_not_swapped() {
    // Died before any swap; then the application appended to edge/in: the
    // shadows lack that record, so the repair is called off in both
    // namespaces and the store keeps its old history, plus the new record.
    let app = run_app(false);
    let original = logs(&app);
    app.cloud.rename.store(PANIC, Ordering::SeqCst);
    assert!(std::panic::catch_unwind(AssertUnwindSafe(|| repair(&app))).is_err());
    app.cloud.heal();
    let grown = app.edge.append("in", &99u64.to_le_bytes()).expect("append");
    let resumed = resume(&namespaces(&app)).expect("resume");
    assert_eq!(resumed.len(), 1, "{resumed:?}");
    assert!(resumed[0].finished.is_empty(), "{resumed:?}");
    assert!(resumed[0].called_off["edge"].contains("was appended to"), "{resumed:?}");
    assert!(resumed[0].called_off.contains_key("cloud"), "{resumed:?}");
    let mut expected = original.clone();
    expected[0].push(99);
    assert_eq!(logs(&app), expected, "the old history, and the record appended at {grown}");
    for ns in [&app.edge, &app.cloud] {
        let names = log_names(ns.as_ref());
        assert!(!names.iter().any(|n| n.starts_with("_shadow.") || n.starts_with("_gen.")), "{names:?}");
    }
    assert!(resume(&namespaces(&app)).expect("resume").is_empty(), "called off is closed");
    // A new repair now runs (on events that do not cover the new record:
    // it is copied as a record appended without events).
    assert!(repair(&app).is_ok());
}

#[test]
fn a_repair_whose_first_swap_fails_changes_nothing_and_leaves_nothing_to_resume() {
    let app = run_app(false);
    let original = logs(&app);
    app.cloud.rename.store(FAIL, Ordering::SeqCst);
    repair(&app).expect_err("the first swap fails");
    assert_eq!(logs(&app), original);
    for ns in [&app.edge, &app.cloud] {
        let names = log_names(ns.as_ref());
        assert!(!names.iter().any(|n| n.starts_with("_shadow.") || n.starts_with("_gen.")), "{names:?}");
    }
    assert!(resume(&namespaces(&app)).expect("resume").is_empty());
    app.cloud.heal();
    let truth = logs(&run_app(true));
    repair(&app).expect("repair");
    assert_eq!(logs(&app), truth);
}

#[test]
fn a_repair_that_dies_before_any_of_its_writes_leaves_the_old_or_the_repaired_history_after_resume() {
    // The process dies before write k of the repair, for every k: then
    // resume, and a repair asked again. After the resume the store is the
    // old history or the repaired one, never a mix of the two namespaces;
    // after the repair asked again it is the repaired one, committed once.
    let truth = logs(&run_app(true));
    let writes = {
        let app = run_app(false);
        let before = app.clock.writes.load(Ordering::SeqCst);
        repair(&app).expect("repair");
        app.clock.writes.load(Ordering::SeqCst) - before
    };
    assert!(writes > 10, "a repair of two namespaces writes more than {writes} times");
    let (mut old, mut new) = (0, 0);
    for k in 0..writes {
        let app = run_app(false);
        let original = logs(&app);
        app.clock.stop_after(k);
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| repair(&app)));
        app.clock.revive();
        assert!(!matches!(result, Ok(Ok(ref o)) if o.event_error.is_none()), "died before write {k}, yet done");
        resume(&namespaces(&app)).unwrap_or_else(|e| panic!("died before write {k}: resume: {e}"));
        let now = logs(&app);
        if now == original {
            old += 1;
            for ns in [&app.edge, &app.cloud] {
                assert_eq!(repair_events(ns.as_ref()), 0, "died before write {k}: not repaired, no REPAIR event");
            }
            repair(&app).unwrap_or_else(|e| panic!("died before write {k}: the repair asked again: {e}"));
        } else {
            new += 1;
            assert_eq!(now, truth, "died before write {k}: neither the old history nor the repaired one");
        }
        assert_repaired(&app, &truth, &original);
    }
    println!("{writes} crash points: {old} left the old history, {new} the repaired one");
    assert!(old > 0 && new > 0, "both outcomes reached: {old} old, {new} new");
}
