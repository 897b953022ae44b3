//! `Runtime::pause`: while paused no handler runs and nothing is written;
//! appends made meanwhile wait and land when the pause ends, and queued
//! triggers fire then. A pause that cannot find the runtime at rest is
//! called off with a typed error and the runtime runs on.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use varve_log::{LogConfig, MemoryStore, Store};
use varve_runtime::{RetryPolicy, RuntimeBuilder, RuntimeError, EVENTS_LOG};

const IDLE: Duration = Duration::from_secs(30);

#[test]
fn appends_during_a_pause_wait_and_land_after_it_and_no_handler_runs_meanwhile() {
    let ns = MemoryStore::new().namespace("app").expect("namespace");
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&ran);
    let runtime = RuntimeBuilder::new(Arc::clone(&ns))
        .concurrency(2)
        .log("in", LogConfig::unbounded())
        .log("out", LogConfig::unbounded())
        .handler("copy", RetryPolicy::default(), move |ctx| {
            counter.fetch_add(1, Ordering::SeqCst);
            let record = ctx.record().to_vec();
            ctx.append("out", &record)?;
            Ok(())
        })
        .subscribe("in", "copy")
        .start()
        .expect("runtime");
    for i in 0..100u32 {
        runtime.append("in", &i.to_le_bytes()).expect("append");
    }
    let paused = runtime.pause(IDLE).expect("pause");
    let (ran_at_pause, events_at_pause) = (ran.load(Ordering::SeqCst), ns.latest(EVENTS_LOG).expect("latest"));
    let (out_at_pause, in_at_pause) = (ns.latest("out").expect("latest"), ns.latest("in").expect("latest"));
    // An append from another thread waits for the pause to end.
    let handle = runtime.handle();
    let (sent, landed) = mpsc::channel();
    let appender = std::thread::spawn(move || {
        let seq = handle.append("in", &1000u32.to_le_bytes()).expect("append after the pause");
        sent.send(seq).expect("send");
    });
    assert!(landed.recv_timeout(Duration::from_millis(300)).is_err(), "an append landed while the runtime was paused");
    assert_eq!(ran.load(Ordering::SeqCst), ran_at_pause, "a handler ran while paused");
    assert_eq!(ns.latest(EVENTS_LOG).expect("latest"), events_at_pause, "the runtime wrote while paused");
    assert_eq!(ns.latest("out").expect("latest"), out_at_pause);
    assert!(paused.elapsed() >= Duration::from_millis(300));
    drop(paused);
    let seq = landed.recv_timeout(IDLE).expect("the held append lands once the pause ends");
    appender.join().expect("appender");
    assert_eq!(seq, in_at_pause + 1, "it lands right after what was there");
    assert!(runtime.wait_idle(IDLE), "idle");
    assert_eq!(ran.load(Ordering::SeqCst), 101, "every trigger fired, the queued ones after the pause");
    assert_eq!(ns.latest("out").expect("latest"), 101);
    runtime.stop(Duration::from_secs(5));
}

#[test]
fn a_pause_that_cannot_find_the_runtime_at_rest_is_called_off_and_it_runs_on() {
    let ns = MemoryStore::new().namespace("app").expect("namespace");
    let release = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicBool::new(false));
    let (release_in, started_in) = (Arc::clone(&release), Arc::clone(&started));
    let runtime = RuntimeBuilder::new(Arc::clone(&ns))
        .log("in", LogConfig::unbounded())
        .log("out", LogConfig::unbounded())
        .handler("slow", RetryPolicy::default(), move |ctx| {
            started_in.store(true, Ordering::SeqCst);
            while !release_in.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(2));
            }
            let record = ctx.record().to_vec();
            ctx.append("out", &record)?;
            Ok(())
        })
        .subscribe("in", "slow")
        .start()
        .expect("runtime");
    runtime.append("in", b"a").expect("append");
    while !started.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let error = runtime.pause(Duration::from_millis(100)).err().expect("a run is in flight");
    assert!(matches!(error, RuntimeError::PauseTimedOut { .. }), "{error}");
    assert!(error.to_string().contains("called off"), "{error}");
    release.store(true, Ordering::SeqCst);
    runtime.append("in", b"b").expect("append after the pause was called off");
    assert!(runtime.wait_idle(IDLE), "idle");
    assert_eq!(ns.latest("out").expect("latest"), 2, "both runs finished");
    // And a pause now succeeds at once.
    drop(runtime.pause(IDLE).expect("pause at rest"));
    runtime.stop(Duration::from_secs(5));
}

#[test]
fn pausing_runs_only_lets_appends_land_and_queues_their_triggers() {
    let ns = MemoryStore::new().namespace("app").expect("namespace");
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&ran);
    let runtime = RuntimeBuilder::new(Arc::clone(&ns))
        .log("in", LogConfig::unbounded())
        .handler("count", RetryPolicy::default(), move |_ctx| {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .subscribe("in", "count")
        .start()
        .expect("runtime");
    runtime.append("in", b"a").expect("append");
    assert!(runtime.wait_idle(IDLE), "idle");
    let mut paused = runtime.pause_runs(IDLE).expect("pause runs");
    // Appends land at once; their handlers wait.
    runtime.handle().append("in", b"b").expect("an append while runs are paused");
    assert_eq!(ns.latest("in").expect("latest"), 2);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(ran.load(Ordering::SeqCst), 1, "no handler runs while runs are paused");
    // Then appends are held too.
    paused.hold_appends();
    let handle = runtime.handle();
    let (sent, landed) = mpsc::channel();
    let appender = std::thread::spawn(move || sent.send(handle.append("in", b"c").expect("append")).expect("send"));
    assert!(landed.recv_timeout(Duration::from_millis(200)).is_err(), "an append landed while appends were held");
    drop(paused);
    assert_eq!(landed.recv_timeout(IDLE).expect("lands after the pause"), 3);
    appender.join().expect("appender");
    assert!(runtime.wait_idle(IDLE), "idle");
    assert_eq!(ran.load(Ordering::SeqCst), 3, "the queued triggers fired after the pause");
    runtime.stop(Duration::from_secs(5));
}
