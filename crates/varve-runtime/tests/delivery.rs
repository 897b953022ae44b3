//! Atomic triggers, exactly the subscribed handlers, chains, context events,
//! restart re-runs, failures, retries and dead letters.

#![expect(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod common;

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{events, fast_retry, memory_ns, of_kind, unbounded, IDLE};
use varve_log::{JournalOptions, JournalStore, Store, SyncPolicy};
use varve_runtime::trace::CausalGraph;
use varve_runtime::{
    DeadLetter, EventKind, ReadDep, RetryPolicy, RuntimeBuilder, RuntimeError, DEAD_LETTERS_LOG, EVENTS_LOG,
};

type Seen = Arc<Mutex<Vec<(String, String, u64)>>>;

fn recorder(
    seen: &Seen,
    name: &'static str,
) -> impl Fn(&mut varve_runtime::HandlerContext<'_>) -> varve_runtime::HandlerResult {
    let seen = Arc::clone(seen);
    move |ctx| {
        seen.lock().unwrap().push((name.to_owned(), ctx.log().to_owned(), ctx.seq()));
        Ok(())
    }
}

#[test]
fn every_append_carries_exactly_the_triggers_of_the_handlers_subscribed_then() {
    let seen: Seen = Arc::default();
    let rt = RuntimeBuilder::new(memory_ns("a"))
        .log("x", unbounded())
        .log("y", unbounded())
        .handler("h1", RetryPolicy::default(), recorder(&seen, "h1"))
        .handler("h2", RetryPolicy::default(), recorder(&seen, "h2"))
        .subscribe("x", "h1")
        .start()
        .unwrap();
    assert_eq!(rt.append("x", b"1").unwrap(), 1);
    rt.subscribe("x", "h2").unwrap();
    assert_eq!(rt.append("x", b"2").unwrap(), 2);
    rt.unsubscribe("x", "h1").unwrap();
    assert_eq!(rt.append_batch(&[("x", b"3"), ("y", b"1"), ("x", b"4")]).unwrap(), vec![3, 1, 4]);
    assert!(rt.wait_idle(IDLE));

    let all = events(&rt);
    // Group the TRIGGERs by the record they are for, and check each one's parent is its APPEND.
    let mut triggers: BTreeMap<(String, u64), Vec<String>> = BTreeMap::new();
    for t in of_kind(&all, EventKind::Trigger) {
        let parent = t.event.parent.as_ref().unwrap();
        let append = &all[usize::try_from(parent.seq).unwrap() - 1];
        assert_eq!(append.event.kind, EventKind::Append);
        assert_eq!((&append.event.log, append.event.seq), (&t.event.log, t.event.seq));
        triggers.entry((t.event.log.clone(), t.event.seq)).or_default().push(t.event.handler.clone());
    }
    let expected: BTreeMap<(String, u64), Vec<String>> = [
        (("x".to_owned(), 1), vec!["h1".to_owned()]),
        (("x".to_owned(), 2), vec!["h1".to_owned(), "h2".to_owned()]),
        (("x".to_owned(), 3), vec!["h2".to_owned()]),
        (("x".to_owned(), 4), vec!["h2".to_owned()]),
    ]
    .into();
    assert_eq!(triggers, expected);
    assert_eq!(of_kind(&all, EventKind::Append).len(), 5, "one APPEND per record, y included");
    assert_eq!(of_kind(&all, EventKind::Subscribe).len(), 2);
    assert_eq!(of_kind(&all, EventKind::Unsubscribe).len(), 1);

    // Exactly the subscribed handlers ran, each once.
    let mut ran = seen.lock().unwrap().clone();
    ran.sort();
    let mut want: Vec<(String, String, u64)> =
        expected.iter().flat_map(|((log, seq), hs)| hs.iter().map(move |h| (h.clone(), log.clone(), *seq))).collect();
    want.sort();
    assert_eq!(ran, want);
    assert_eq!(of_kind(&all, EventKind::Done).len(), want.len());
}

#[test]
fn handler_chains_carry_the_trace_and_the_parent() {
    let rt = RuntimeBuilder::new(memory_ns("chain"))
        .log("a", unbounded())
        .log("b", unbounded())
        .log("c", unbounded())
        .handler("ab", RetryPolicy::default(), |ctx| {
            let value = ctx.record().clone();
            ctx.append("b", &value)?;
            Ok(())
        })
        .handler("bc", RetryPolicy::default(), |ctx| {
            let value = ctx.record().clone();
            ctx.append("c", &value)?;
            Ok(())
        })
        .subscribe("a", "ab")
        .subscribe("b", "bc")
        .start()
        .unwrap();
    rt.append("a", b"first").unwrap();
    rt.append("a", b"second").unwrap();
    assert!(rt.wait_idle(IDLE));
    let mut c: Vec<Vec<u8>> = (1..=2).map(|seq| rt.get("c", seq).unwrap().to_vec()).collect();
    c.sort();
    assert_eq!(c, vec![b"first".to_vec(), b"second".to_vec()]);
    let all = events(&rt);
    let graph = CausalGraph::new(&all);
    let root = graph.append_of("chain", "a", 1).unwrap();
    assert!(root.event.parent.is_none(), "an outside append has no parent");
    // The two chains ran concurrently: find which c and b records came from a:1.
    let from_root = |log: &str| {
        (1..=2).find(|&seq| graph.append_of("chain", log, seq).unwrap().event.trace == root.event.trace).unwrap()
    };
    let (b_seq, c_seq) = (from_root("b"), from_root("c"));
    let c1 = graph.append_of("chain", "c", c_seq).unwrap();
    let other = graph.append_of("chain", "c", 3 - c_seq).unwrap();
    assert_ne!(other.event.trace, root.event.trace, "another outside append is another trace");
    // c's parent is the FIRING of bc, whose parent is the TRIGGER, whose parent is the APPEND of b …
    let firing = graph.get(c1.event.parent.as_ref().unwrap()).unwrap();
    assert_eq!((firing.event.kind, firing.event.handler.as_str()), (EventKind::Firing, "bc"));
    let ancestors = CausalGraph::records(&graph.ancestors("chain", "c", c_seq));
    let names: Vec<(String, u64)> = ancestors.iter().map(|r| (r.log.clone(), r.seq)).collect();
    assert_eq!(names, vec![("c".into(), c_seq), ("a".into(), 1), ("b".into(), b_seq)]);
    let effects = CausalGraph::records(&graph.descendants("chain", "a", 1));
    let names: Vec<(String, u64)> = effects.iter().map(|r| (r.log.clone(), r.seq)).collect();
    assert_eq!(names, vec![("a".into(), 1), ("b".into(), b_seq), ("c".into(), c_seq)]);
}

#[test]
fn context_calls_record_their_events_unless_reads_are_off() {
    for record_reads in [true, false] {
        let rt = RuntimeBuilder::new(memory_ns("ctx"))
            .record_reads(record_reads)
            .log("in", unbounded())
            .log("model", unbounded())
            .log("out", unbounded())
            .handler("f", RetryPolicy::default(), |ctx| {
                let latest = ctx.latest("model")?;
                let model = ctx.get("model", latest)?;
                let all = ctx.scan("model", ..)?;
                assert_eq!(all.len(), 2);
                ctx.append_batch(&[("out", &model), ("out", ctx.record())])?;
                Ok(())
            })
            .subscribe("in", "f")
            .start()
            .unwrap();
        rt.append("model", b"m1").unwrap();
        rt.append("model", b"m2").unwrap();
        rt.append("in", b"x").unwrap();
        assert!(rt.wait_idle(IDLE));
        assert_eq!(&rt.get("out", 1).unwrap()[..], b"m2");
        let all = events(&rt);
        let firing = of_kind(&all, EventKind::Firing)[0];
        assert!(of_kind(&all, EventKind::Latest).is_empty() && of_kind(&all, EventKind::Read).is_empty());
        // The reads are folded into the first APPEND of the write that followed them.
        let first_out = all.iter().find(|e| e.event.kind == EventKind::Append && e.event.log == "out").unwrap();
        if record_reads {
            assert_eq!(
                first_out.event.reads,
                vec![ReadDep::latest("model", 2), ReadDep::read("model", 2, 2), ReadDep::read("model", 1, 2)],
                "LATEST, the get, then the scan as one READ of its range, in call order"
            );
            // The read dependency makes model:2 an ancestor of out:1 and out:2, and out:1 a descendant of model:1.
            let graph = CausalGraph::new(&all);
            for out in [1, 2] {
                let causes = CausalGraph::records(&graph.ancestors("ctx", "out", out));
                assert!(causes.iter().any(|r| r.log == "model" && r.seq == 2), "{causes:?}");
            }
            let effects = CausalGraph::records(&graph.descendants("ctx", "model", 1));
            assert!(effects.iter().any(|r| r.log == "out" && r.seq == 1), "{effects:?}");
        } else {
            assert!(all.iter().all(|e| e.event.reads.is_empty()));
        }
        let appends: Vec<_> = of_kind(&all, EventKind::Append).into_iter().filter(|e| e.event.log == "out").collect();
        assert_eq!(appends.len(), 2);
        for e in appends {
            assert_eq!(e.event.parent.as_ref(), Some(&firing.id));
        }
    }
}

/// Reads are folded into the event of the handler's next write, in the
/// order the calls happened: into the APPEND that follows them, and reads
/// after the last write into DONE (or FAILED).
#[test]
fn reads_are_folded_into_the_write_that_follows_them() {
    let rt = RuntimeBuilder::new(memory_ns("order"))
        .log("in", unbounded())
        .log("model", unbounded())
        .log("out", unbounded())
        .handler("f", RetryPolicy { attempts: 1, ..RetryPolicy::default() }, |ctx| {
            let latest = ctx.latest("model")?;
            ctx.append("out", &ctx.get("model", latest)?)?;
            ctx.get("model", 1)?;
            if ctx.record().as_ref() == b"fail" {
                return Err("asked to".into());
            }
            Ok(())
        })
        .subscribe("in", "f")
        .start()
        .unwrap();
    rt.append("model", b"m").unwrap();
    for record in [&b"ok"[..], b"fail"] {
        rt.append("in", record).unwrap();
        assert!(rt.wait_idle(IDLE));
    }
    let all = events(&rt);
    let of_trigger = |seq: u64| -> Vec<(EventKind, String, Vec<ReadDep>)> {
        let firing = all.iter().find(|e| e.event.kind == EventKind::Firing && e.event.seq == seq).unwrap();
        all.iter()
            .filter(|e| e.event.parent.as_ref() == Some(&firing.id))
            .map(|e| (e.event.kind, e.event.log.clone(), e.event.reads.clone()))
            .collect()
    };
    let expected = |last: EventKind| {
        vec![
            (EventKind::Append, "out".to_owned(), vec![ReadDep::latest("model", 1), ReadDep::read("model", 1, 1)]),
            (last, "in".to_owned(), vec![ReadDep::read("model", 1, 1)]),
        ]
    };
    assert_eq!(of_trigger(1), expected(EventKind::Done));
    let mut failed = expected(EventKind::Failed);
    failed.push((EventKind::DeadLetter, "in".to_owned(), Vec::new())); // one attempt only
    assert_eq!(of_trigger(2), failed);
}

#[test]
fn a_handler_cut_short_by_a_stop_is_rerun_with_the_next_attempt_on_restart() {
    let ns = memory_ns("restart");
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release_rx = Mutex::new(release_rx);
    let started_tx = Mutex::new(started_tx);
    let rt = RuntimeBuilder::new(Arc::clone(&ns))
        .concurrency(1)
        .log("x", unbounded())
        .log("out", unbounded())
        .handler("slow", RetryPolicy::default(), move |_ctx| {
            started_tx.lock().unwrap().send(()).unwrap();
            release_rx.lock().unwrap().recv().ok();
            Ok(())
        })
        .subscribe("x", "slow")
        .start()
        .unwrap();
    rt.append("x", b"1").unwrap();
    rt.append("x", b"2").unwrap();
    started_rx.recv_timeout(IDLE).unwrap();
    // Stop while the handler blocks: it is abandoned, like a crash.
    rt.stop(Duration::from_millis(50));
    release_tx.send(()).unwrap();

    let ran: Seen = Arc::default();
    let rt = RuntimeBuilder::new(Arc::clone(&ns))
        .log("x", unbounded())
        .log("out", unbounded())
        .handler("slow", RetryPolicy::default(), recorder(&ran, "slow"))
        .start()
        .unwrap();
    assert!(rt.wait_idle(IDLE));
    let mut ran: Vec<u64> = ran.lock().unwrap().iter().map(|r| r.2).collect();
    ran.sort_unstable();
    assert_eq!(ran, vec![1, 2], "both triggers run after the restart");
    let all = events(&rt);
    let firings: Vec<(u64, u32)> =
        of_kind(&all, EventKind::Firing).iter().map(|e| (e.event.seq, e.event.attempt)).collect();
    // (The one worker may have claimed both triggers in one batch before the stop.)
    assert!(firings.starts_with(&[(1, 1)]), "{firings:?}");
    assert!(firings.contains(&(1, 2)), "the cut-short run is visible as a second FIRING: {firings:?}");
    let done: Vec<(u64, u32)> = of_kind(&all, EventKind::Done).iter().map(|e| (e.event.seq, e.event.attempt)).collect();
    assert_eq!(done.len(), 2);
    assert!(done.contains(&(1, 2)));
    assert!(of_kind(&all, EventKind::Failed).is_empty(), "a cut-short run is not a failure");
    // The subscription survived the restart (it is in the store).
    assert!(rt.subscriptions()["x"].contains("slow"));
}

#[test]
fn a_journal_restart_after_a_clean_stop_reruns_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let options = JournalOptions { sync: SyncPolicy::Never, ..JournalOptions::default() };
    let count = Arc::new(Mutex::new(0));
    for round in 0..3 {
        let store = JournalStore::open(dir.path(), options).unwrap();
        let ns = store.namespace("j").unwrap();
        let c = Arc::clone(&count);
        let rt = RuntimeBuilder::new(ns)
            .log("x", unbounded())
            .handler("count", RetryPolicy::default(), move |_| {
                *c.lock().unwrap() += 1;
                Ok(())
            })
            .subscribe("x", "count")
            .start()
            .unwrap();
        for _ in 0..10 {
            rt.append("x", b"v").unwrap();
        }
        assert!(rt.wait_idle(IDLE));
        assert_eq!(*count.lock().unwrap(), 10 * (round + 1));
        rt.stop(IDLE);
    }
    let store = JournalStore::open(dir.path(), options).unwrap();
    let ns = store.namespace("j").unwrap();
    assert!(ns.latest(varve_runtime::PROGRESS_LOG).unwrap() >= 3);
    assert_eq!(ns.latest("x").unwrap(), 30);
    assert!(ns.latest(EVENTS_LOG).unwrap() > 30 * 4);
}

#[test]
fn a_panic_is_failed_and_a_poisoned_record_goes_to_dead_letters_while_others_flow() {
    let good = Arc::new(Mutex::new(0u32));
    let g = Arc::clone(&good);
    let rt = RuntimeBuilder::new(memory_ns("poison"))
        .concurrency(2)
        .log("x", unbounded())
        .log("y", unbounded())
        .handler("picky", fast_retry(3), |ctx| {
            assert!(&ctx.record()[..] != b"poison", "cannot digest {}", ctx.seq());
            if &ctx.record()[..] == b"bad" {
                return Err("bad record".into());
            }
            Ok(())
        })
        .handler("other", fast_retry(3), move |_| {
            *g.lock().unwrap() += 1;
            Ok(())
        })
        .subscribe("x", "picky")
        .subscribe("y", "other")
        .start()
        .unwrap();
    rt.append("x", b"poison").unwrap();
    rt.append("x", b"bad").unwrap();
    for _ in 0..20 {
        rt.append("x", b"fine").unwrap();
        rt.append("y", b"fine").unwrap();
    }
    assert!(rt.wait_idle(IDLE));
    assert_eq!(*good.lock().unwrap(), 20);
    let all = events(&rt);
    let failed = of_kind(&all, EventKind::Failed);
    assert_eq!(failed.len(), 6, "three attempts each for two records");
    assert!(failed.iter().filter(|e| e.event.seq == 1).all(|e| e.event.reason.contains("cannot digest 1")));
    assert!(failed.iter().filter(|e| e.event.seq == 2).all(|e| e.event.reason == "bad record"));
    let attempts: Vec<u32> = failed.iter().filter(|e| e.event.seq == 1).map(|e| e.event.attempt).collect();
    assert_eq!(attempts, vec![1, 2, 3]);
    let dead = of_kind(&all, EventKind::DeadLetter);
    assert_eq!(dead.len(), 2);
    let done = of_kind(&all, EventKind::Done);
    assert_eq!(done.len(), 40);
    let ns = rt.namespace();
    assert_eq!(ns.latest(DEAD_LETTERS_LOG).unwrap(), 2);
    let letter: DeadLetter = serde_json::from_slice(&ns.get(DEAD_LETTERS_LOG, 1).unwrap()).unwrap();
    assert_eq!((letter.handler.as_str(), letter.log.as_str(), letter.attempts), ("picky", "x", 3));
    // The poisoned records' retries did not hold the good records back: the
    // last good record finished before the last retry.
    let last_dead = dead.iter().map(|e| e.id.seq).max().unwrap();
    let first_done = done.iter().map(|e| e.id.seq).min().unwrap();
    assert!(first_done < last_dead);
}

#[test]
fn appends_to_unknown_or_system_logs_are_refused() {
    let rt = RuntimeBuilder::new(memory_ns("refuse")).start().unwrap();
    assert!(matches!(rt.append("nope", b"x"), Err(RuntimeError::UnknownLog { .. })));
    assert!(matches!(rt.append(EVENTS_LOG, b"x"), Err(RuntimeError::InvalidArgument { .. })));
    assert!(matches!(rt.append_batch(&[]), Err(RuntimeError::InvalidArgument { .. })));
    assert!(matches!(rt.subscribe("nope", "h"), Err(RuntimeError::UnknownHandler { .. })));
    assert!(RuntimeBuilder::new(memory_ns("many")).concurrency(varve_runtime::CONCURRENCY_MAX + 1).start().is_err());
    let dup = RuntimeBuilder::new(memory_ns("dup"))
        .handler("h", RetryPolicy::default(), |_| Ok(()))
        .handler("h", RetryPolicy::default(), |_| Ok(()))
        .start();
    assert!(matches!(dup, Err(RuntimeError::DuplicateHandler { .. })));
}

#[test]
fn trigger_latency_is_measurable() {
    let (tx, rx) = mpsc::channel::<Instant>();
    let tx = Mutex::new(tx);
    let rt = RuntimeBuilder::new(memory_ns("lat"))
        .log("x", unbounded())
        .handler("t", RetryPolicy::default(), move |_| {
            tx.lock().unwrap().send(Instant::now()).unwrap();
            Ok(())
        })
        .subscribe("x", "t")
        .start()
        .unwrap();
    let mut latencies = Vec::new();
    for _ in 0..200 {
        let before = Instant::now();
        rt.append("x", b"v").unwrap();
        let started = rx.recv_timeout(IDLE).unwrap();
        latencies.push(started - before);
        assert!(rt.wait_idle(IDLE));
    }
    latencies.sort();
    let p50 = latencies[latencies.len() / 2];
    eprintln!("in-process trigger latency p50 {p50:?} (memory store, unoptimised test build)");
    assert!(p50 < Duration::from_millis(50));
}

#[test]
fn a_namespace_keeps_its_host_id() {
    let ns = memory_ns("hosted");
    let rt = RuntimeBuilder::new(Arc::clone(&ns)).host(7).start().unwrap();
    rt.stop(IDLE);
    assert_eq!(varve_runtime::namespace_host(ns.as_ref()).unwrap(), Some(7));
    let Err(error) = RuntimeBuilder::new(Arc::clone(&ns)).host(8).start() else { panic!("must refuse") };
    assert!(matches!(error, RuntimeError::HostChanged { stored: 7, requested: 8, .. }), "{error}");
    RuntimeBuilder::new(ns).host(7).start().unwrap();
}

#[test]
fn a_handler_scan_is_bounded() {
    let rt = RuntimeBuilder::new(memory_ns("bounded"))
        .log("x", unbounded())
        .log("big", unbounded())
        .handler("scan-all", fast_retry(1), |ctx| {
            let error = ctx.scan("big", ..).unwrap_err();
            assert!(error.to_string().contains("scan in parts"), "{error}");
            assert_eq!(ctx.scan("big", 5..=7)?.len(), 3);
            Ok(())
        })
        .subscribe("x", "scan-all")
        .start()
        .unwrap();
    let values: Vec<Vec<u8>> = (0..=varve_runtime::SCAN_RECORDS_MAX).map(|i| i.to_le_bytes().to_vec()).collect();
    for chunk in values.chunks(10_000) {
        let batch: Vec<(&str, &[u8])> = chunk.iter().map(|v| ("big", v.as_slice())).collect();
        rt.append_batch(&batch).unwrap();
    }
    rt.append("x", b"go").unwrap();
    assert!(rt.wait_idle(IDLE));
    assert_eq!(of_kind(&events(&rt), EventKind::Done).len(), 1);
}

#[test]
fn a_writer_only_runtime_records_triggers_that_the_next_runtime_runs() {
    let ns = memory_ns("offline");
    let ran: Seen = Arc::default();
    let full = |ran: &Seen| {
        RuntimeBuilder::new(Arc::clone(&ns))
            .log("x", unbounded())
            .handler("h", RetryPolicy::default(), recorder(ran, "h"))
            .subscribe("x", "h")
            .start()
            .unwrap()
    };
    full(&ran).stop(IDLE);
    // No handler runs while only a writer-only runtime is up …
    let writer = RuntimeBuilder::new(Arc::clone(&ns)).concurrency(0).start().unwrap();
    assert_eq!(writer.append("x", b"while down").unwrap(), 1);
    assert!(writer.wait_idle(IDLE), "triggers for handlers not here do not count as work");
    writer.stop(IDLE);
    assert!(ran.lock().unwrap().is_empty());
    // … and the next runtime with workers runs the trigger it recorded.
    let rt = full(&ran);
    assert!(rt.wait_idle(IDLE));
    assert_eq!(*ran.lock().unwrap(), vec![("h".to_owned(), "x".to_owned(), 1)]);
    let all = events(&rt);
    assert_eq!(of_kind(&all, EventKind::Trigger).len(), 1);
    assert_eq!(of_kind(&all, EventKind::Done).len(), 1);
}

/// Appends race subscribe/unsubscribe calls from other threads; replaying
/// `_events` in order, each APPEND's TRIGGERs are exactly the handlers the
/// SUBSCRIBE/UNSUBSCRIBE events before it leave subscribed (a reference
/// model of the subscription state), and each ran exactly once.
#[test]
fn triggers_match_the_subscription_state_at_each_append_under_concurrency() {
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeSet;
    let seed: u64 = std::env::var("VARVE_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(7);
    eprintln!("seed {seed} (set VARVE_SEED to replay)");
    let handlers = ["h0", "h1", "h2", "h3"];
    let runs: Seen = Arc::default();
    let mut builder = RuntimeBuilder::new(memory_ns("race")).concurrency(3).log("x", unbounded());
    for h in handlers {
        builder = builder.handler(h, RetryPolicy::default(), recorder(&runs, h));
    }
    let rt = Arc::new(builder.start().unwrap());
    std::thread::scope(|scope| {
        for t in 0..2u64 {
            let rt = Arc::clone(&rt);
            scope.spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed + t);
                for _ in 0..200 {
                    let h = handlers[rng.gen_range(0..handlers.len())];
                    if rng.gen_bool(0.5) {
                        rt.subscribe("x", h).unwrap();
                    } else {
                        rt.unsubscribe("x", h).unwrap();
                    }
                }
            });
        }
        for _ in 0..2 {
            let rt = Arc::clone(&rt);
            scope.spawn(move || {
                for _ in 0..300 {
                    rt.append("x", b"v").unwrap();
                }
            });
        }
    });
    assert!(rt.wait_idle(IDLE));
    let all = events(&rt);
    let mut model: BTreeSet<String> = BTreeSet::new();
    let mut expected: Vec<(String, String, u64)> = Vec::new();
    let mut i = 0;
    while i < all.len() {
        let e = &all[i].event;
        match e.kind {
            EventKind::Subscribe => {
                model.insert(e.handler.clone());
            }
            EventKind::Unsubscribe => {
                model.remove(&e.handler);
            }
            EventKind::Append => {
                // The TRIGGERs are the events right after their APPEND, in the same batch.
                let mut triggered = BTreeSet::new();
                while i + 1 < all.len() && all[i + 1].event.kind == EventKind::Trigger && all[i + 1].event.seq == e.seq
                {
                    i += 1;
                    triggered.insert(all[i].event.handler.clone());
                }
                assert_eq!(triggered, model, "append x:{} (seed {seed})", e.seq);
                expected.extend(triggered.into_iter().map(|h| (h, "x".to_owned(), e.seq)));
            }
            _ => {}
        }
        i += 1;
    }
    let mut ran = runs.lock().unwrap().clone();
    ran.sort();
    expected.sort();
    assert_eq!(ran, expected, "each trigger ran exactly once (seed {seed})");
    assert_eq!(rt.namespace().latest("x").unwrap(), 600);
}
