//! Two runtimes on two connections ("hosts") to a 3-node cluster, sharing one
//! namespace: both append at once, both run handlers, and every append fires
//! its handler exactly once, wherever it was made and wherever it ran.

#![expect(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use varve_log::{LogConfig, Namespace, SeqRange};
use varve_nats::NatsStore;
use varve_runtime::{namespace_events, EventKind, RetryPolicy, Runtime, RuntimeBuilder};

const EACH: usize = 60;

fn host(ns: Arc<dyn Namespace>, runs: &Arc<AtomicUsize>) -> Runtime {
    let runs = Arc::clone(runs);
    RuntimeBuilder::new(ns)
        .shared(Duration::from_secs(60))
        .host(rand::random::<u64>().max(1))
        .concurrency(2)
        .topic("in")
        .log("out", LogConfig::unbounded())
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

#[test]
fn two_hosts_share_a_namespace_and_run_each_trigger_once() {
    let servers = support::cluster3();
    let name = support::fresh_name("shared");
    let connect = || -> Arc<dyn Namespace> {
        let store = NatsStore::open(&support::uri(servers, "replicas=3")).unwrap();
        Arc::new(store.nats_namespace(&name).unwrap())
    };
    let (ns_a, ns_b) = (connect(), connect());
    let (runs_a, runs_b) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let a = host(Arc::clone(&ns_a), &runs_a);
    let b = host(Arc::clone(&ns_b), &runs_b);
    std::thread::scope(|scope| {
        for (rt, tag) in [(&a, "a"), (&b, "b")] {
            scope.spawn(move || {
                for i in 0..EACH {
                    rt.append("in", format!("{tag}{i}").as_bytes()).unwrap();
                }
            });
        }
    });
    // Every trigger done, as either host sees it.
    let deadline = Instant::now() + Duration::from_secs(120);
    let events = loop {
        let events = namespace_events(ns_a.as_ref(), SeqRange::ALL).unwrap();
        let count = |kind| events.iter().filter(|e| e.event.kind == kind).count();
        if count(EventKind::Trigger) == 2 * EACH && count(EventKind::Done) >= 2 * EACH {
            break events;
        }
        assert!(Instant::now() < deadline, "not all done in 120 s: {} DONE", count(EventKind::Done));
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut per_trigger: BTreeMap<u64, (Vec<u32>, usize)> = BTreeMap::new();
    for e in &events {
        match e.event.kind {
            EventKind::Trigger => per_trigger.entry(e.id.seq).or_default().1 += 0,
            EventKind::Firing => per_trigger.entry(e.event.trigger).or_default().0.push(e.event.attempt),
            EventKind::Done => per_trigger.entry(e.event.trigger).or_default().1 += 1,
            _ => {}
        }
    }
    assert_eq!(per_trigger.len(), 2 * EACH);
    for (trigger, claims) in &per_trigger {
        assert_eq!(claims, &(vec![1], 1), "trigger {trigger}: one claim, one outcome");
    }
    let (ran_a, ran_b) = (runs_a.load(Ordering::SeqCst), runs_b.load(Ordering::SeqCst));
    eprintln!("handler runs: host a {ran_a}, host b {ran_b}");
    assert_eq!(ran_a + ran_b, 2 * EACH);
    let read = |log| -> Vec<Vec<u8>> {
        let mut values: Vec<Vec<u8>> =
            ns_b.scan(log, SeqRange::ALL).unwrap().map(|r| r.unwrap().value.to_vec()).collect();
        values.sort();
        values
    };
    assert_eq!(ns_b.latest("in").unwrap(), (2 * EACH) as u64, "dense seqs from both hosts");
    assert_eq!(read("in"), read("out"), "every record copied exactly once");
    a.stop(Duration::from_secs(10));
    b.stop(Duration::from_secs(10));
}
