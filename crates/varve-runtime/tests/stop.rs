//! `stop(grace)` returns as soon as running handlers have returned, even
//! when triggers are still queued behind them (they are left for the next
//! start, not waited for); handlers that finish within the grace still
//! write; external commands still running after it are killed and reported.

use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use varve_log::{LogConfig, MemoryStore, Store};
use varve_runtime::{RetryPolicy, RuntimeBuilder};

#[test]
fn stop_does_not_wait_out_the_grace_for_queued_triggers() {
    let store = MemoryStore::new();
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let started_tx = Mutex::new(started_tx);
    let runtime = RuntimeBuilder::new(store.namespace("app").expect("namespace"))
        .concurrency(1)
        .log("in", LogConfig::unbounded())
        .handler("slow", RetryPolicy::default(), move |_| {
            let _ = started_tx.lock().map(|tx| tx.send(()));
            std::thread::sleep(Duration::from_millis(300));
            Ok(())
        })
        .subscribe("in", "slow")
        .start()
        .expect("start");
    runtime.append("in", b"first").expect("append");
    started_rx.recv_timeout(Duration::from_secs(10)).expect("the first handler starts");
    runtime.append("in", b"second").expect("append"); // queued behind the running one
    let before = Instant::now();
    runtime.stop(Duration::from_secs(5));
    let took = before.elapsed();
    // The running handler needs < 300 ms more; a stop that waited for the
    // queue to drain (it never does once stopped) would take the whole 5 s.
    assert!(took < Duration::from_secs(3), "stop took {took:?}");
}

#[test]
fn a_stop_lets_handlers_finish_in_the_grace_then_kills_commands_and_reports_them() {
    use varve_runtime::{HandlerKind, HandlerSpec, Interruption};
    let dir = tempfile::tempdir().expect("temp dir");
    let pid_file = dir.path().join("pid");
    let store = MemoryStore::new();
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let started_tx = Mutex::new(started_tx);
    let runtime = RuntimeBuilder::new(store.namespace("app").expect("namespace"))
        .concurrency(2)
        .log("in", LogConfig::unbounded())
        .log("cmd", LogConfig::unbounded())
        .log("out", LogConfig::unbounded())
        .handler("quick", RetryPolicy::default(), move |ctx| {
            let _ = started_tx.lock().map(|tx| tx.send(()));
            std::thread::sleep(Duration::from_millis(200));
            ctx.append("out", b"written in the grace")?;
            Ok(())
        })
        .register(HandlerSpec {
            name: "hang".into(),
            kind: HandlerKind::Command(vec![
                "sh".into(),
                "-c".into(),
                format!("echo $$ > {0}.tmp && mv {0}.tmp {0}; exec sleep 300", pid_file.display()),
            ]),
            retry: RetryPolicy { timeout: None, ..RetryPolicy::default() },
        })
        .subscribe("in", "quick")
        .subscribe("cmd", "hang")
        .start()
        .expect("start");
    runtime.append("cmd", b"x").expect("append");
    runtime.append("in", b"x").expect("append");
    started_rx.recv_timeout(Duration::from_secs(30)).expect("the Rust handler starts");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&pid_file).map_or(true, |t| t.trim().is_empty()) {
        assert!(Instant::now() < deadline, "the command did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    let pid: i32 = std::fs::read_to_string(&pid_file).expect("pid").trim().parse().expect("a pid");
    let ns = runtime.namespace().clone();
    let report = runtime.stop_report(Duration::from_secs(2));
    // The Rust handler finished within the grace: its append and DONE landed.
    assert_eq!(ns.latest("out").expect("out"), 1);
    assert_eq!(report.interrupted.len(), 1, "{report:?}");
    let cut = &report.interrupted[0];
    assert_eq!((cut.handler.as_str(), cut.log.as_str(), cut.seq, cut.attempt), ("hang", "cmd", 1, 1));
    assert_eq!(cut.how, Interruption::Killed);
    assert_eq!(report.pending, 1);
    // Killed with its group (the command exec'd `sleep`, same pid). The
    // runtime reaped it, so it is gone, not a zombie.
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "the command still runs");
}
