//! Topics (Canal's API) and external-command handlers.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{events, fast_retry, memory_ns, of_kind, unbounded, IDLE};
use varve_runtime::{EventKind, HandlerKind, HandlerSpec, RetryPolicy, RuntimeBuilder, RuntimeError};

type Got = Arc<Mutex<Vec<(u64, Vec<u8>)>>>;

#[test]
fn topics_publish_get_latest_and_subscriptions_survive_a_restart() {
    let ns = memory_ns("canal");
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = Arc::clone(&got);
    let build = |ns, got: Got| {
        RuntimeBuilder::new(ns)
            .handler("sub", RetryPolicy::default(), move |ctx| {
                got.lock().unwrap().push((ctx.seq(), ctx.record().to_vec()));
                Ok(())
            })
            .start()
            .unwrap()
    };
    let rt = build(Arc::clone(&ns), g);
    rt.create_topic("temps").unwrap();
    rt.create_topic("temps").unwrap(); // idempotent
    assert!(matches!(rt.subscribe("nope", "sub"), Err(RuntimeError::UnknownLog { .. })));
    assert!(matches!(rt.subscribe("temps", "nobody"), Err(RuntimeError::UnknownHandler { .. })));
    assert_eq!(rt.publish("temps", b"before").unwrap(), 1);
    rt.subscribe("temps", "sub").unwrap();
    assert_eq!(rt.publish("temps", b"21.5").unwrap(), 2);
    assert_eq!(rt.latest_index("temps").unwrap(), 2);
    assert_eq!(&rt.get("temps", 2).unwrap()[..], b"21.5");
    assert!(rt.wait_idle(IDLE));
    assert_eq!(*got.lock().unwrap(), vec![(2, b"21.5".to_vec())], "only appends after the subscribe fire");
    rt.stop(IDLE);

    let got2 = Arc::new(Mutex::new(Vec::new()));
    let rt = build(ns, Arc::clone(&got2));
    assert!(rt.topics().contains("temps"));
    assert_eq!(rt.publish("temps", b"22").unwrap(), 3);
    assert!(rt.wait_idle(IDLE));
    assert_eq!(*got2.lock().unwrap(), vec![(3, b"22".to_vec())], "the subscription was kept in the store");
    rt.unsubscribe("temps", "sub").unwrap();
    rt.publish("temps", b"23").unwrap();
    assert!(rt.wait_idle(IDLE));
    assert_eq!(got2.lock().unwrap().len(), 1);
}

fn command(name: &str, script: &str, retry: RetryPolicy) -> HandlerSpec {
    HandlerSpec {
        name: name.to_owned(),
        kind: HandlerKind::Command(vec!["sh".into(), "-c".into(), script.into()]),
        retry,
    }
}

#[test]
fn external_commands_get_the_record_and_context_and_failures_are_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.txt");
    let ok_script = format!(
        "{{ cat; echo; echo \"$VARVE_NAMESPACE $VARVE_LOG $VARVE_SEQ $VARVE_EVENT_ID $VARVE_TRACE_ID\"; }} > {}",
        out.display()
    );
    let rt = RuntimeBuilder::new(memory_ns("ext"))
        .log("ok", unbounded())
        .log("fail", unbounded())
        .log("hang", unbounded())
        .register(command("ok", &ok_script, fast_retry(1)))
        .register(command("fail", "echo first line >&2; echo 'it broke' >&2; exit 3", fast_retry(2)))
        .register(command(
            "hang",
            "sleep 30",
            RetryPolicy { timeout: Some(Duration::from_millis(200)), ..fast_retry(1) },
        ))
        .subscribe("ok", "ok")
        .subscribe("fail", "fail")
        .subscribe("hang", "hang")
        .start()
        .unwrap();
    rt.append("ok", b"hello").unwrap();
    rt.append("fail", b"x").unwrap();
    let started = Instant::now();
    rt.append("hang", b"x").unwrap();
    assert!(rt.wait_idle(IDLE));
    assert!(started.elapsed() < Duration::from_secs(10), "the hung command was killed");
    let all = events(&rt);
    let text = std::fs::read_to_string(&out).unwrap();
    let firing = of_kind(&all, EventKind::Firing).into_iter().find(|e| e.event.handler == "ok").unwrap();
    let expected = format!("hello\next ok 1 {} {}\n", firing.id, varve_runtime::event::trace_hex(firing.event.trace));
    assert_eq!(text, expected);
    let failed = of_kind(&all, EventKind::Failed);
    let fail: Vec<_> = failed.iter().filter(|e| e.event.handler == "fail").collect();
    assert_eq!(fail.len(), 2);
    assert_eq!(fail[0].event.reason, "exited with status 3; stderr: first line | it broke");
    let hang: Vec<_> = failed.iter().filter(|e| e.event.handler == "hang").collect();
    assert_eq!(hang.len(), 1);
    assert!(hang[0].event.reason.starts_with("timed out after 200 ms"), "{}", hang[0].event.reason);
    assert_eq!(of_kind(&all, EventKind::DeadLetter).len(), 2);
    assert_eq!(of_kind(&all, EventKind::Done).len(), 1);
}

#[test]
fn a_command_killed_by_a_signal_says_so() {
    let rt = RuntimeBuilder::new(memory_ns("sig"))
        .log("x", unbounded())
        .register(command("selfkill", "kill -9 $$", fast_retry(1)))
        .subscribe("x", "selfkill")
        .start()
        .unwrap();
    rt.append("x", b"").unwrap();
    assert!(rt.wait_idle(IDLE));
    let all = events(&rt);
    let failed = of_kind(&all, EventKind::Failed);
    assert_eq!(failed[0].event.reason, "killed by signal 9");
}

#[test]
fn a_handler_scan_of_an_empty_log_or_past_its_end_is_empty() {
    let ns = memory_ns("scan");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&seen);
    let rt = RuntimeBuilder::new(ns)
        .log("input", varve_log::LogConfig::unbounded())
        .log("empty", varve_log::LogConfig::unbounded())
        .handler("scanner", RetryPolicy::default(), move |ctx| {
            let empty = ctx.scan("empty", 1..=10)?.len();
            let past = ctx.scan("input", 5..=9)?.len();
            s.lock().unwrap().push((empty, past));
            Ok(())
        })
        .subscribe("input", "scanner")
        .start()
        .unwrap();
    rt.append("input", b"x").unwrap();
    assert!(rt.wait_idle(IDLE));
    assert_eq!(*seen.lock().unwrap(), vec![(0, 0)]);
    assert!(rt.events().unwrap().iter().all(|e| e.event.kind != varve_runtime::EventKind::Failed));
}
