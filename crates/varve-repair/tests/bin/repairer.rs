//! Crash-test child (`tests/repair_crash.rs`): in the journal namespace
//! `DIR/app`, which holds the original run of [`build`]'s application,
//! prints `ready` and `repairing`, finishes a repair that an earlier kill
//! interrupted after its intent (`resumed: …`), then repairs
//! `in:CORRECTED` (unless a generation shows a repair already swapped),
//! with every replayed run slowed so that kills land inside the repair, and
//! prints `done`; then waits to be killed.
//! Usage: `repairer DIR`.

#![allow(dead_code, reason = "shared with the test, which uses other parts than the child")]

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use varve_log::{JournalOptions, JournalStore, LogConfig, Namespace, SeqRange, SyncPolicy};
use varve_repair::{execute, resume, Correction, Inputs, NotReplayable, RepairPlan};
use varve_runtime::trace::RecordRef;
use varve_runtime::{
    namespace_events, HandlerContext, HandlerFn, HandlerKind, HandlerSpec, RetryPolicy, RuntimeBuilder,
};

/// The application's logs, in causal order.
pub(crate) const LOGS: [&str; 3] = ["in", "avg", "alert"];
/// Inputs appended by the original run.
pub(crate) const INPUTS: u64 = 300;
/// The input the repair corrects (the original run got a faulty reading there).
pub(crate) const CORRECTED: u64 = 1;
/// The faulty reading the original run got at `CORRECTED`.
pub(crate) const FAULTY_VALUE: u64 = 7_777;

/// `smooth`: on each input, the running mean of the last 4 (by LATEST and
/// gets of `in`) to `avg`; `flag`: on each mean, an alert level to `alert`
/// (reads the first mean, so every alert depends on `avg:1`, and correcting input 1 replays all of them).
pub(crate) fn handlers(slow: Duration) -> HashMap<String, HandlerFn> {
    let smooth: HandlerFn = Arc::new(move |ctx: &mut HandlerContext<'_>| {
        std::thread::sleep(slow);
        let latest = ctx.seq();
        let first = latest.saturating_sub(3).max(1);
        let mut sum = 0;
        for record in ctx.scan("in", first..=latest)? {
            sum += value(&record.value);
        }
        ctx.append("avg", &(sum / (latest - first + 1)).to_le_bytes())?;
        Ok(())
    });
    let flag: HandlerFn = Arc::new(move |ctx: &mut HandlerContext<'_>| {
        std::thread::sleep(slow);
        let base = value(&ctx.get("avg", 1)?);
        let level = value(ctx.record()).abs_diff(base) / 10;
        ctx.append("alert", &level.to_le_bytes())?;
        Ok(())
    });
    HashMap::from([("smooth".to_owned(), smooth), ("flag".to_owned(), flag)])
}

pub(crate) fn value(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes.try_into().expect("8-byte records"))
}

/// The right reading `i`.
pub(crate) fn input(i: u64) -> u64 {
    100 + (i * 37) % 50
}

/// Run the application on `ns`: INPUTS inputs, each handled in full before
/// the next; `faulty`: input `CORRECTED` is `FAULTY_VALUE` (the original run).
pub(crate) fn build(ns: &Arc<dyn Namespace>, faulty: bool) {
    let mut builder = RuntimeBuilder::new(Arc::clone(ns)).host(1).concurrency(1);
    for log in LOGS {
        builder = builder.log(log, LogConfig::unbounded());
    }
    for (name, f) in handlers(Duration::ZERO) {
        let source = if name == "smooth" { "in" } else { "avg" };
        builder = builder
            .register(HandlerSpec { name: name.clone(), kind: HandlerKind::Rust(f), retry: RetryPolicy::default() })
            .subscribe(source, &name);
    }
    let runtime = builder.start().expect("runtime");
    for i in 1..=INPUTS {
        let v = if i == CORRECTED && faulty { FAULTY_VALUE } else { input(i) };
        runtime.append("in", &v.to_le_bytes()).expect("append");
        assert!(runtime.wait_idle(Duration::from_secs(60)), "idle");
    }
    runtime.stop(Duration::from_secs(5));
}

pub(crate) fn contents(ns: &dyn Namespace, log: &str) -> Vec<Vec<u8>> {
    ns.scan(log, SeqRange::ALL).expect("scan").map(|r| r.expect("record").value.to_vec()).collect()
}

pub(crate) fn open(dir: &Path) -> Arc<dyn Namespace> {
    let options = JournalOptions { sync: SyncPolicy::Group(Duration::from_millis(2)), ..JournalOptions::default() };
    let store = JournalStore::open(dir, options).expect("open store");
    Arc::new(store.journal_namespace("app").expect("namespace"))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir] = args.as_slice() else {
        eprintln!("usage: repairer DIR");
        std::process::exit(2);
    };
    let ns = open(Path::new(dir));
    let say = |line: &str| {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}").expect("stdout");
        out.flush().expect("stdout");
    };
    say("ready");
    say("repairing");
    let record = RecordRef { namespace: "app".into(), log: "in".into(), seq: CORRECTED };
    let corrections = [Correction::Record(record.clone())];
    let values = HashMap::from([(record, input(CORRECTED).to_le_bytes().to_vec())]);
    let namespaces = HashMap::from([("app".to_owned(), Arc::clone(&ns))]);
    // A repair killed after its intent is finished (or called off) first.
    let resumed = resume(&namespaces).expect("resume");
    for r in &resumed {
        say(if r.finished.is_empty() { "resumed: called off" } else { "resumed: finished" });
    }
    let swapped = ns.list_logs().expect("logs").iter().any(|l| l.name.starts_with("_gen."));
    if !swapped {
        let events = namespace_events(&*ns, SeqRange::ALL).expect("events");
        let plan = RepairPlan::build(&events, &corrections, &HashSet::new());
        let handlers = handlers(Duration::from_micros(150));
        let inputs = Inputs {
            events: &events,
            namespaces: &namespaces,
            handlers: &handlers,
            values: &values,
            not_replayable: NotReplayable::Refuse,
        };
        execute(&plan, &inputs).expect("repair");
    }
    say("done");
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}
