//! Several runtimes sharing one namespace (`RuntimeBuilder::shared`): each
//! append fires its handlers once, whichever runtime made it and whichever
//! runs them; subscriptions made by one fire for appends by another; a claim
//! left by a stopped runtime is taken over after its lease.

#![expect(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use common::{memory_ns, unbounded};
use varve_log::{Namespace, SeqRange};
use varve_runtime::{namespace_events, EventKind, RetryPolicy, Runtime, RuntimeBuilder, StoredEvent};

const LEASE: Duration = Duration::from_secs(30);
/// Appends each runtime makes in the concurrent test.
const EACH: usize = 300;

/// A runtime over `ns` sharing it, whose handler `copy` appends each record
/// of `in` to `out` and counts its runs in `runs`.
fn copier(ns: &Arc<dyn Namespace>, runs: &Arc<AtomicUsize>, lease: Duration) -> Runtime {
    let runs = Arc::clone(runs);
    RuntimeBuilder::new(Arc::clone(ns))
        .shared(lease)
        .host(rand_host())
        .log("in", unbounded())
        .log("out", unbounded())
        .handler("copy", RetryPolicy::default(), move |ctx| {
            let value = ctx.record().to_vec();
            ctx.append("out", &value)?;
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .subscribe("in", "copy")
        .start()
        .unwrap()
}

fn rand_host() -> u64 {
    rand::random::<u64>().max(1)
}

/// Events of `ns` once every trigger in it has a DONE (or a timeout fails the test).
fn settled(ns: &dyn Namespace, triggers: usize) -> Vec<StoredEvent> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let events = namespace_events(ns, SeqRange::ALL).unwrap();
        let count = |kind| events.iter().filter(|e| e.event.kind == kind).count();
        if count(EventKind::Trigger) >= triggers && count(EventKind::Done) >= count(EventKind::Trigger) {
            return events;
        }
        assert!(
            Instant::now() < deadline,
            "triggers not all done within 60 s: {} of {triggers}",
            count(EventKind::Done)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Per TRIGGER seq: its FIRINGs' attempts and its DONE count.
fn per_trigger(events: &[StoredEvent]) -> BTreeMap<u64, (Vec<u32>, usize)> {
    let mut out: BTreeMap<u64, (Vec<u32>, usize)> = BTreeMap::new();
    for e in events {
        match e.event.kind {
            EventKind::Trigger => {
                out.entry(e.id.seq).or_default();
            }
            EventKind::Firing => out.entry(e.event.trigger).or_default().0.push(e.event.attempt),
            EventKind::Done => out.entry(e.event.trigger).or_default().1 += 1,
            _ => {}
        }
    }
    out
}

#[test]
fn two_runtimes_appending_together_run_each_trigger_once() {
    let ns = memory_ns("shared");
    let (runs_a, runs_b) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let a = copier(&ns, &runs_a, LEASE);
    let b = copier(&ns, &runs_b, LEASE);
    assert_eq!(a.host(), b.host(), "the second runtime takes the namespace's host id");
    std::thread::scope(|scope| {
        for (rt, tag) in [(&a, "a"), (&b, "b")] {
            scope.spawn(move || {
                for i in 0..EACH {
                    rt.append("in", format!("{tag}{i}").as_bytes()).unwrap();
                }
            });
        }
    });
    let events = settled(ns.as_ref(), 2 * EACH);
    for (trigger, (firings, done)) in per_trigger(&events) {
        assert_eq!((firings, done), (vec![1], 1), "trigger {trigger}: one claim, one run, one outcome");
    }
    assert_eq!(runs_a.load(Ordering::SeqCst) + runs_b.load(Ordering::SeqCst), 2 * EACH);
    let mut ins: Vec<_> = ns.scan("in", SeqRange::ALL).unwrap().map(|r| r.unwrap().value).collect();
    let mut outs: Vec<_> = ns.scan("out", SeqRange::ALL).unwrap().map(|r| r.unwrap().value).collect();
    assert_eq!(ns.latest("in").unwrap(), (2 * EACH) as u64, "dense seqs from both writers");
    ins.sort();
    outs.sort();
    assert_eq!(ins, outs, "every record copied once");
    a.stop(Duration::from_secs(5));
    b.stop(Duration::from_secs(5));
}

#[test]
fn a_subscription_made_by_one_runtime_fires_for_appends_by_the_other() {
    let ns = memory_ns("shared");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let start = |name: &'static str| {
        let seen = Arc::clone(&seen);
        RuntimeBuilder::new(Arc::clone(&ns))
            .shared(LEASE)
            .log("x", unbounded())
            .handler("h", RetryPolicy::default(), move |ctx| {
                seen.lock().unwrap().push((name, ctx.seq()));
                Ok(())
            })
            .start()
            .unwrap()
    };
    let a = start("a");
    let b = start("b");
    b.append("x", b"before").unwrap();
    a.subscribe("x", "h").unwrap();
    // b has not heard of the subscription unless it folds `_events` first: its append must.
    b.append("x", b"after").unwrap();
    let events = settled(ns.as_ref(), 1);
    let triggers: Vec<u64> =
        events.iter().filter(|e| e.event.kind == EventKind::Trigger).map(|e| e.event.seq).collect();
    assert_eq!(triggers, vec![2], "only the append after the subscription fires h");
    assert_eq!(seen.lock().unwrap().iter().map(|(_, seq)| *seq).collect::<Vec<_>>(), vec![2]);
    a.stop(Duration::from_secs(5));
    b.stop(Duration::from_secs(5));
}

#[test]
fn a_claim_left_by_a_stopped_runtime_is_taken_over_after_its_lease() {
    let ns = memory_ns("shared");
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release_rx = Mutex::new(release_rx);
    let a = RuntimeBuilder::new(Arc::clone(&ns))
        .shared(LEASE)
        .log("in", unbounded())
        .handler("slow", RetryPolicy::default(), move |_ctx| {
            started_tx.send(()).unwrap();
            let _ = release_rx.lock().unwrap().recv();
            Ok(())
        })
        .subscribe("in", "slow")
        .start()
        .unwrap();
    a.append("in", b"job").unwrap();
    started_rx.recv_timeout(Duration::from_secs(20)).unwrap();
    // a stops while its handler runs: its FIRING stays without an outcome.
    let report = a.stop_report(Duration::ZERO);
    assert_eq!(report.interrupted.len(), 1);
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&runs);
    let lease = Duration::from_millis(800);
    let started = Instant::now();
    let b = RuntimeBuilder::new(Arc::clone(&ns))
        .shared(lease)
        .log("in", unbounded())
        .handler("slow", RetryPolicy::default(), move |_ctx| {
            counted.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .start()
        .unwrap();
    let events = settled(ns.as_ref(), 1);
    assert!(started.elapsed() >= lease, "not taken before the lease ran out");
    let (firings, done) = per_trigger(&events).into_values().next().unwrap();
    assert_eq!((firings, done), (vec![1, 2], 1), "attempt 2 by the second runtime, one outcome");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    release_tx.send(()).unwrap();
    b.stop(Duration::from_secs(5));
}
