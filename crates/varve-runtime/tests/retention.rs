//! Event retention (`events_keep`, `events_keep_for`): the runtime trims
//! its own `_events` so the event log stays bounded however long the
//! application runs, and it never trims an event its recovery still needs —
//! an unfinished trigger survives any amount of later traffic and is run
//! after a restart. Counted, not timed: the event log's length after every
//! append; the age rule is checked against the events' own timestamps.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use varve_log::{JournalNamespace, JournalOptions, LogConfig, Namespace, Seq, SeqRange, SyncPolicy};
use varve_runtime::append_index::EventIndex;
use varve_runtime::{
    event::now_ns, Backlog, EventKind, RetryPolicy, Runtime, RuntimeBuilder, RuntimeError, StoredEvent, EVENTS_LOG,
};

const IDLE: Duration = Duration::from_secs(60);

fn journal(dir: &std::path::Path) -> Arc<dyn Namespace> {
    let options = JournalOptions { segment_bytes_max: 64 << 10, sync: SyncPolicy::Never, ..JournalOptions::default() };
    Arc::new(JournalNamespace::open(dir, "app", options).expect("namespace"))
}

fn events_held(ns: &dyn Namespace) -> u64 {
    let info = ns.log_info(EVENTS_LOG).expect("info");
    info.len()
}

#[test]
fn the_event_log_stays_bounded_and_no_run_is_lost() {
    const KEEP: u64 = 2_000;
    const INPUTS: u64 = 20_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let ns = journal(dir.path());
    let runtime: Runtime = RuntimeBuilder::new(Arc::clone(&ns))
        .concurrency(2)
        .events_keep(KEEP)
        // Handlers stay close behind, so the unfinished triggers that hold
        // the trim back are few.
        .backlog(Backlog { max: 50, wait: IDLE })
        .log("in", LogConfig::unbounded())
        .log("out", LogConfig::unbounded())
        .handler("copy", RetryPolicy::default(), |ctx| {
            let _ = ctx.latest("out")?; // a LATEST event too
            let record = ctx.record().to_vec();
            ctx.append("out", &record)?;
            Ok(())
        })
        .subscribe("in", "copy")
        .start()
        .expect("runtime");
    let mut most = 0;
    for i in 0..INPUTS {
        runtime.append("in", &i.to_le_bytes()).expect("append");
        most = most.max(events_held(&*ns));
    }
    assert!(runtime.wait_idle(IDLE), "idle");
    let retention = runtime.event_retention().expect("retention");
    println!("event retention: {retention:?}; at most {most} events held");
    // Five events per input (APPEND, TRIGGER, FIRING, APPEND with its read, DONE): 100,000 written.
    assert!(retention.latest > 4 * INPUTS, "{retention:?}");
    assert!(most < 3 * KEEP, "the event log grew to {most} events, keep {KEEP}");
    assert!(retention.trims > 10 && retention.last_error.is_none(), "{retention:?}");
    assert!(retention.earliest > retention.latest - 2 * KEEP, "{retention:?}");
    // Nothing lost: every input was handled once.
    let out: Vec<u64> = ns
        .scan("out", SeqRange::ALL)
        .expect("scan")
        .map(|r| u64::from_le_bytes(r.expect("record").value[..].try_into().expect("8 bytes")))
        .collect();
    let mut sorted = out.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..INPUTS).collect::<Vec<_>>(), "every input copied once");
    // Readers see what is kept, from the earliest on (a worker may trim
    // again after wait_idle returned, so at or past what was read).
    let events = runtime.events().expect("events");
    let first = events.first().map(|e| e.id.seq).expect("events kept");
    assert!(first >= retention.earliest, "events() from {first}, earliest read before it {}", retention.earliest);
    runtime.stop(Duration::from_secs(5));
}

#[test]
fn an_unfinished_trigger_is_never_trimmed_and_runs_after_a_restart() {
    const KEEP: u64 = 100;
    let dir = tempfile::tempdir().expect("tempdir");
    let ns = journal(dir.path());
    let open = Arc::new(AtomicBool::new(false));
    let start = |ns: Arc<dyn Namespace>, open: Arc<AtomicBool>| -> Runtime {
        RuntimeBuilder::new(ns)
            .concurrency(1)
            .events_keep(KEEP)
            .log("gate", LogConfig::unbounded())
            .log("noise", LogConfig::unbounded())
            .log("out", LogConfig::unbounded())
            .handler("gated", RetryPolicy::default(), move |ctx| {
                while !open.load(Ordering::SeqCst) && !ctx.is_replay() {
                    std::thread::sleep(Duration::from_millis(2));
                }
                ctx.append("out", b"through the gate")?;
                Ok(())
            })
            .subscribe("gate", "gated")
            .start()
            .expect("runtime")
    };
    let runtime = start(Arc::clone(&ns), Arc::clone(&open));
    runtime.append("gate", b"wait").expect("append");
    let trigger = loop {
        let events = runtime.events().expect("events");
        if let Some(firing) = events.iter().find(|e| e.event.kind == EventKind::Firing) {
            break firing.event.trigger;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    // Traffic without handlers: 3,000 APPEND events, thirty times the keep.
    for i in 0..3_000u32 {
        runtime.append("noise", &i.to_le_bytes()).expect("append");
    }
    let retention = runtime.event_retention().expect("retention");
    assert!(retention.earliest <= trigger, "the trigger of the run in flight was trimmed: {retention:?}");
    assert!(retention.trims == 0 || retention.earliest > 1, "{retention:?}");
    assert!(ns.get(EVENTS_LOG, trigger).is_ok(), "its TRIGGER is readable");
    // Stop while the run waits at the gate (cut short, left for the next
    // start), then start again: recovery finds the trigger and runs it.
    let report = runtime.stop_report(Duration::from_millis(50));
    assert_eq!(report.interrupted.len(), 1, "{report:?}");
    open.store(true, Ordering::SeqCst);
    let runtime = start(Arc::clone(&ns), Arc::clone(&open));
    assert!(runtime.wait_idle(IDLE), "idle after the restart");
    assert_eq!(ns.latest("out").expect("latest"), 1, "the cut-short run ran again after the restart");
    // Done now, so more traffic trims past it.
    for i in 0..1_000u32 {
        runtime.append("noise", &i.to_le_bytes()).expect("append");
    }
    let retention = runtime.event_retention().expect("retention");
    assert!(retention.earliest > trigger, "finished, its events may go: {retention:?}");
    assert!(events_held(&*ns) < 2 * KEEP + 50, "{retention:?}");
    runtime.stop(Duration::from_secs(5));
}

/// A runtime copying `in` to `out` (a LATEST, a get of nothing, an append per input).
fn copier(ns: &Arc<dyn Namespace>, builder: impl FnOnce(RuntimeBuilder) -> RuntimeBuilder) -> Runtime {
    builder(RuntimeBuilder::new(Arc::clone(ns)))
        .concurrency(1)
        .log("in", LogConfig::unbounded())
        .log("out", LogConfig::unbounded())
        .handler("copy", RetryPolicy::default(), |ctx| {
            let _ = ctx.latest("out")?;
            let record = ctx.record().to_vec();
            ctx.append("out", &record)?;
            Ok(())
        })
        .subscribe("in", "copy")
        .start()
        .expect("runtime")
}

/// `events_keep_for`: events older than the age go (once the earliest is
/// an eighth past it, plus the margin), younger ones stay — checked against
/// the timestamps of every event seen while they were kept.
#[test]
fn events_older_than_keep_for_are_trimmed_and_younger_ones_never() {
    const AGE: Duration = Duration::from_secs(2);
    let dir = tempfile::tempdir().expect("tempdir");
    let ns = journal(dir.path());
    let runtime = copier(&ns, |b| b.events_keep_for(AGE));
    let mut seen: BTreeMap<Seq, u64> = BTreeMap::new();
    let mut look = |runtime: &Runtime| {
        for e in runtime.events().expect("events") {
            seen.insert(e.id.seq, e.event.timestamp_ns);
        }
    };
    for i in 0..200u64 {
        runtime.append("in", &i.to_le_bytes()).expect("append");
    }
    assert!(runtime.wait_idle(IDLE), "idle");
    look(&runtime);
    let old_last = runtime.event_retention().expect("retention").latest;
    // Then an input every 50 ms until the old events are trimmed.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut i = 200u64;
    let retention = loop {
        runtime.append("in", &i.to_le_bytes()).expect("append");
        i += 1;
        assert!(runtime.wait_idle(IDLE), "idle");
        let retention = runtime.event_retention().expect("retention");
        if retention.earliest > old_last {
            break retention;
        }
        assert!(Instant::now() < deadline, "events older than {AGE:?} not trimmed in two minutes: {retention:?}");
        look(&runtime);
        std::thread::sleep(Duration::from_millis(50));
    };
    let now = now_ns();
    println!("event retention: {retention:?} after {i} inputs");
    assert!(retention.keep_for == Some(AGE) && retention.last_error.is_none(), "{retention:?}");
    let age_ns = u64::try_from(AGE.as_nanos()).expect("ns");
    let trimmed: Vec<(&Seq, &u64)> = seen.range(..retention.earliest).collect();
    assert!(trimmed.len() >= 1_000, "the 200 first inputs' events were trimmed: {}", trimmed.len());
    for (seq, ts) in trimmed {
        assert!(now - ts > age_ns, "event {seq} was trimmed {} ms after it was written", (now - ts) / 1_000_000);
    }
    // Nothing lost: every input was copied.
    assert_eq!(ns.latest("out").expect("latest"), i);
    runtime.stop(Duration::from_secs(5));
}

/// With both rules, the count rule alone would have trimmed (10 events
/// kept of 1,500); the age rule (an hour) keeps them all.
#[test]
fn with_both_rules_an_event_goes_only_when_both_let_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ns = journal(dir.path());
    let runtime = copier(&ns, |b| b.events_keep(10).events_keep_for(Duration::from_secs(3600)));
    for i in 0..300u64 {
        runtime.append("in", &i.to_le_bytes()).expect("append");
    }
    assert!(runtime.wait_idle(IDLE), "idle");
    let retention = runtime.event_retention().expect("retention");
    assert!(retention.latest >= 1_500 && retention.earliest == 1 && retention.trims == 0, "{retention:?}");
    runtime.stop(Duration::from_secs(5));
}

#[test]
fn retention_is_refused_where_it_cannot_hold_and_the_runtime_keeps_its_own_logs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ns = journal(dir.path());
    let zero = RuntimeBuilder::new(Arc::clone(&ns)).events_keep(0).start().map(drop).expect_err("keep 0");
    assert!(matches!(zero, RuntimeError::InvalidArgument { .. }) && zero.to_string().contains("at least 1"), "{zero}");
    let no_age =
        RuntimeBuilder::new(Arc::clone(&ns)).events_keep_for(Duration::ZERO).start().map(drop).expect_err("age 0");
    assert!(no_age.to_string().contains("events_keep_for must be longer than 0"), "{no_age}");
    let shared = RuntimeBuilder::new(Arc::clone(&ns))
        .events_keep(10)
        .shared(Duration::from_secs(5))
        .start()
        .map(drop)
        .expect_err("shared");
    assert!(shared.to_string().contains("not for shared runtimes"), "{shared}");
    let runtime = RuntimeBuilder::new(Arc::clone(&ns)).events_keep(10).start().expect("runtime");
    let own = runtime.trim(EVENTS_LOG, 2).expect_err("its own log");
    assert!(own.to_string().contains("events_keep"), "{own}");
    runtime.append("x", b"1").map(drop).expect_err("no such log");
    runtime.create_log("x", LogConfig::unbounded()).expect("create");
    for i in 0..5u8 {
        runtime.append("x", &[i]).expect("append");
    }
    assert_eq!(runtime.trim("x", 3).expect("an application log"), 3);
    runtime.stop(Duration::from_secs(5));
}

/// An index opened before a trim (its earliest is then stale) answers from
/// what is kept: lookups whose events were trimmed under it find nothing,
/// the others find what they found before — never a `Trimmed` error.
#[test]
fn an_event_index_opened_before_a_trim_answers_from_what_is_kept() {
    const KEEP: u64 = 1_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let ns = journal(dir.path());
    let runtime = copier(&ns, |builder| builder.events_keep(KEEP));
    for i in 0..300u64 {
        runtime.append("in", &i.to_le_bytes()).expect("append");
    }
    assert!(runtime.wait_idle(IDLE), "idle");
    let before = runtime.events().expect("events");
    let index = EventIndex::open(Arc::clone(&ns)).expect("open").expect("an index");
    // More traffic: retention trims into what the index saw.
    for i in 300..400u64 {
        runtime.append("in", &i.to_le_bytes()).expect("append");
    }
    assert!(runtime.wait_idle(IDLE), "idle");
    runtime.stop(Duration::from_secs(5));
    let earliest = ns.earliest(EVENTS_LOG).expect("earliest");
    println!("index saw {}..={}, kept now from {earliest}", index.earliest(), index.latest());
    assert!(index.earliest() < earliest && earliest <= index.latest(), "the trim falls inside what the index saw");

    let seen = |seq: Seq| seq >= earliest && seq <= index.latest();
    let (mut found, mut gone) = (0, 0);
    for event in before.iter().filter(|e| e.event.kind == EventKind::Append) {
        let (log, seq) = (&event.event.log, event.event.seq);
        let answer = index.append_of(log, seq).unwrap_or_else(|e| panic!("append_of({log}, {seq}): {e}"));
        let expected = seen(event.id.seq).then_some(event);
        assert_eq!(answer.as_ref(), expected, "the APPEND of {log} {seq}");
        if answer.is_some() {
            found += 1;
        } else {
            gone += 1;
        }
    }
    assert!(found > 0 && gone > 0, "{found} found, {gone} trimmed: both kinds were looked up");
    for firing in before.iter().filter(|e| e.event.kind == EventKind::Firing) {
        let run = index.run_of(firing.id.seq).unwrap_or_else(|e| panic!("run_of({}): {e}", firing.id.seq));
        let expected: Vec<&StoredEvent> = before
            .iter()
            .filter(|e| e.event.parent.as_ref().is_some_and(|p| p.seq == firing.id.seq) && seen(e.id.seq))
            .collect();
        assert_eq!(run.iter().collect::<Vec<_>>(), expected, "the run of the FIRING at {}", firing.id.seq);
    }
    let mut walked = Vec::new();
    index
        .for_each_from(1, |event| {
            walked.push(event.id.seq);
            Ok(())
        })
        .expect("walk");
    assert_eq!(walked, (earliest..=index.latest()).collect::<Vec<_>>(), "the walk passes over what was trimmed");
}
