//! Backpressure (`Backlog`): appends from outside the handlers wait while
//! the handlers are too far behind, so the queue of triggers stays bounded;
//! one that finds no room in time is refused and writes nothing; appends
//! made by handlers never wait. Counted, not timed: the backlog observed
//! after every append.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use varve_log::{LogConfig, MemoryStore, Namespace, Store};
use varve_runtime::{Backlog, RetryPolicy, Runtime, RuntimeBuilder, RuntimeError};

const IDLE: Duration = Duration::from_secs(60);

fn namespace() -> Arc<dyn Namespace> {
    MemoryStore::new().namespace("app").expect("namespace")
}

#[test]
fn outside_appends_wait_while_the_handlers_are_behind_and_the_backlog_stays_bounded() {
    const MAX: usize = 8;
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&ran);
    let runtime: Runtime = RuntimeBuilder::new(namespace())
        .concurrency(2)
        .backlog(Backlog { max: MAX, wait: IDLE })
        .log("in", LogConfig::unbounded())
        .handler("slow", RetryPolicy::default(), move |_ctx| {
            std::thread::sleep(Duration::from_millis(2));
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .subscribe("in", "slow")
        .start()
        .expect("runtime");
    let mut highest = 0;
    for i in 0..300u64 {
        runtime.append("in", &i.to_le_bytes()).expect("append");
        highest = highest.max(runtime.backlog());
    }
    assert!(highest <= MAX, "the backlog reached {highest}, over its limit {MAX}");
    assert_eq!(highest, MAX, "the appender outran the handler, so it must have waited at the limit");
    assert!(runtime.wait_idle(IDLE));
    assert_eq!(ran.load(Ordering::SeqCst), 300, "every append was handled");
    runtime.stop(Duration::from_secs(5));
}

#[test]
fn an_append_that_finds_no_room_in_time_is_refused_and_writes_nothing() {
    // The handler waits at a gate the test opens.
    let gate = Arc::new((Mutex::new(false), Condvar::new()));
    let held = Arc::clone(&gate);
    let ns = namespace();
    let runtime: Runtime = RuntimeBuilder::new(Arc::clone(&ns))
        .concurrency(1)
        .backlog(Backlog { max: 2, wait: Duration::from_millis(50) })
        .log("in", LogConfig::unbounded())
        .handler("gated", RetryPolicy::default(), move |_ctx| {
            let (open, cv) = &*held;
            let mut open = open.lock().expect("gate");
            while !*open {
                open = cv.wait(open).expect("gate");
            }
            Ok(())
        })
        .subscribe("in", "gated")
        .start()
        .expect("runtime");
    runtime.append("in", b"1").expect("first");
    runtime.append("in", b"2").expect("second");
    let refused = runtime.append("in", b"3").expect_err("no room: one run held at the gate, one queued");
    match &refused {
        RuntimeError::Backlogged { backlog, max, waited } => {
            assert_eq!((*backlog, *max), (2, 2), "{refused}");
            assert!(*waited >= Duration::from_millis(50), "{refused}");
        }
        other => panic!("expected Backlogged, got {other}"),
    }
    assert!(refused.to_string().contains("was not made"), "{refused}");
    assert_eq!(ns.latest("in").expect("latest"), 2, "the refused append wrote nothing");
    {
        let (open, cv) = &*gate;
        *open.lock().expect("gate") = true;
        cv.notify_all();
    }
    assert!(runtime.wait_idle(IDLE));
    assert_eq!(runtime.append("in", b"3").expect("room again"), 3);
    assert!(runtime.wait_idle(IDLE));
    runtime.stop(Duration::from_secs(5));
}

#[test]
fn appends_made_by_handlers_never_wait() {
    // With a limit of 1 the running fan-out run is the whole backlog: had
    // its own appends waited for room, they could never have been made.
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&ran);
    let runtime: Runtime = RuntimeBuilder::new(namespace())
        .concurrency(1)
        .backlog(Backlog { max: 1, wait: Duration::from_millis(200) })
        .log("in", LogConfig::unbounded())
        .log("fanned", LogConfig::unbounded())
        .handler("fan_out", RetryPolicy { attempts: 1, ..RetryPolicy::default() }, |ctx| {
            for i in 0..5u64 {
                ctx.append("fanned", &i.to_le_bytes())?;
            }
            Ok(())
        })
        .handler("count", RetryPolicy::default(), move |_ctx| {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .subscribe("in", "fan_out")
        .subscribe("fanned", "count")
        .start()
        .expect("runtime");
    runtime.append("in", b"go").expect("append");
    assert!(runtime.wait_idle(IDLE));
    assert_eq!(ran.load(Ordering::SeqCst), 5, "the five records fan_out appended were all handled");
    runtime.stop(Duration::from_secs(5));
}
