//! The runtime behind `varve serve`: appends that arrive over the network
//! fire handlers exactly as local appends do, and a cause travels with an
//! append from one server's handler to another server.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use common::{wait_until, Env, Served};

/// A manifest for namespace `app`: logs `in` and `out`, and an external
/// handler that upper-cases each `in` record into `out` with the `varve`
/// CLI (`append` is the CLI arguments it appends with, before `out -`).
fn upper_manifest(env: &Env, append: &str) -> std::path::PathBuf {
    let varve = env!("CARGO_BIN_EXE_varve");
    env.manifest(&format!(
        r#"
[runtime]
namespace = "app"

[[log]]
name = "in"

[[log]]
name = "out"

[[handler]]
name = "upper"
log = "in"
command = ["sh", "-c", "cd /; tr a-z A-Z | {varve} {append} out -"]
"#
    ))
}

/// `varve --store URI ARGS…`, from another directory than the server's data.
fn remote(env: &Env, served: &Served, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_varve"))
        .arg("--store")
        .arg(&served.uri)
        .args(args)
        .current_dir(env.temp.path())
        .env_remove("VARVE_DATA")
        .env_remove("VARVE_EVENT_ID")
        .env_remove("VARVE_TRACE_ID")
        .env_remove("VARVE_NAMESPACE")
        .env_remove("VARVE_RUNTIME_SOCKET")
        .output()
        .expect("run varve --store")
}

fn remote_ok(env: &Env, served: &Served, args: &[&str]) -> String {
    let out = remote(env, served, args);
    assert!(out.status.success(), "varve --store {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8")
}

fn stop(mut served: Served) {
    let pid = rustix::process::Pid::from_child(&served.child);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
    let deadline = Instant::now() + common::WAIT;
    loop {
        if let Some(status) = served.child.try_wait().expect("wait") {
            assert!(status.success(), "varve serve exited with {status}");
            return;
        }
        assert!(Instant::now() < deadline, "varve serve did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn find<'a>(events: &'a [Value], kind: &str, log: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["kind"] == kind && (log.is_empty() || e["log"] == log))
        .unwrap_or_else(|| panic!("no {kind} {log} in {events:#?}"))
}

#[test]
fn network_appends_fire_the_handlers_the_server_hosts() {
    let env = Env::new();
    // Inside the handler the CLI reaches the hosted runtime through its socket.
    let manifest = upper_manifest(&env, "log append");
    let served = env.serve(&["--manifest", manifest.to_str().expect("utf-8")]);

    let refused = remote(&env, &served, &["run", manifest.to_str().expect("utf-8")]);
    assert!(!refused.status.success(), "varve run takes an embedded store");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("varve serve --manifest"), "{refused:?}");

    assert_eq!(remote_ok(&env, &served, &["--ns", "app", "log", "append", "in", "hello"]).trim(), "appended in seq 1");
    wait_until("the handler's out:1", || {
        remote(&env, &served, &["--ns", "app", "log", "get", "out", "1"]).status.success()
    });
    assert_eq!(remote_ok(&env, &served, &["--ns", "app", "log", "get", "out", "1"]).trim(), "HELLO");

    // A local CLI write while the server holds the namespace goes through the hosted runtime's socket.
    assert_eq!(env.ok(&["--ns", "app", "log", "append", "in", "local"]).trim(), "appended in seq 2");
    wait_until("out:2", || remote(&env, &served, &["--ns", "app", "log", "get", "out", "2"]).status.success());
    assert_eq!(remote_ok(&env, &served, &["--ns", "app", "log", "get", "out", "2"]).trim(), "LOCAL");

    wait_until("two DONEs", || common::events_of(&env, "app").iter().filter(|e| e["kind"] == "DONE").count() == 2);
    let events = common::events_of(&env, "app");
    let network_append = find(&events, "APPEND", "in");
    assert!(network_append["parent"].is_null(), "an append from outside starts a trace");
    let trigger = find(&events, "TRIGGER", "in");
    assert_eq!(trigger["parent"], network_append["id"], "the network append's TRIGGER is in its batch");
    let firing = find(&events, "FIRING", "in");
    let effect = find(&events, "APPEND", "out");
    assert_eq!(effect["parent"], firing["id"], "the handler's append carries its FIRING");
    assert_eq!(effect["trace"], network_append["trace"], "one trace from the network append to its effect");
    stop(served);
}

#[test]
fn a_namespace_with_subscriptions_keeps_its_triggers_while_its_runtime_is_not_hosted() {
    let env = Env::new();
    let manifest = upper_manifest(&env, "log append");
    // A runtime served the namespace once: it has subscriptions now.
    env.ok(&["run", manifest.to_str().expect("utf-8"), "--until-idle"]);

    let served = env.serve(&[]);
    remote_ok(&env, &served, &["--ns", "app", "log", "append", "in", "later"]);
    let events = common::events_of(&env, "app");
    let trigger = find(&events, "TRIGGER", "in");
    assert_eq!(trigger["handler"], "upper", "the server's writer recorded the trigger");
    assert!(
        remote(&env, &served, &["--ns", "app", "log", "get", "out", "1"]).status.code() != Some(0),
        "not fired yet"
    );
    stop(served);

    // The next runtime fires what the server recorded.
    env.ok(&["run", manifest.to_str().expect("utf-8"), "--until-idle"]);
    assert_eq!(env.ok(&["--ns", "app", "log", "get", "out", "1"]).trim(), "LATER");
}

#[test]
fn a_handler_appending_to_another_server_continues_its_trace_there() {
    let sink = Env::new();
    let sink_server = sink.serve(&[]);
    let env = Env::new();
    let manifest = upper_manifest(&env, &format!("--store {} --ns sink log append", sink_server.uri));
    let served = env.serve(&["--manifest", manifest.to_str().expect("utf-8")]);
    remote_ok(&env, &sink_server, &["--ns", "sink", "log", "create", "out"]);

    remote_ok(&env, &served, &["--ns", "app", "log", "append", "in", "across"]);
    wait_until("sink's out:1", || {
        remote(&env, &sink_server, &["--ns", "sink", "log", "get", "out", "1"]).status.success()
    });
    assert_eq!(remote_ok(&env, &sink_server, &["--ns", "sink", "log", "get", "out", "1"]).trim(), "ACROSS");

    let firing = find(&common::events_of(&env, "app"), "FIRING", "in").clone();
    let sink_events = common::events_of(&sink, "sink");
    let effect = find(&sink_events, "APPEND", "out");
    assert_eq!(effect["parent"], firing["id"], "the other server recorded the FIRING on this one as the cause");
    assert_eq!(effect["trace"], firing["trace"], "one trace across the two servers");
    stop(served);
    stop(sink_server);
}

/// The value of the sample named `series` (name and labels, as exposed) in
/// Prometheus text.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

/// `/metrics` reports each hosted runtime's backlog and event log: the
/// events held, the trims its event retention made, whether the last failed.
#[test]
fn metrics_report_the_hosted_runtime_and_its_event_retention() {
    let env = Env::new();
    let manifest = env.manifest(
        r#"
[runtime]
namespace = "app"
events_keep = 20

[[log]]
name = "in"

[[handler]]
name = "nothing"
log = "in"
builtin = "noop"
"#,
    );
    let served = env.serve(&["--manifest", manifest.to_str().expect("utf-8")]);
    // 15 inputs of 4 events each (APPEND, TRIGGER, FIRING, DONE): 60 events, keep 20.
    for i in 0..15 {
        remote_ok(&env, &served, &["--ns", "app", "log", "append", "in", &format!("r{i}")]);
    }
    let mut text = String::new();
    wait_until("an idle runtime whose retention trimmed", || {
        text = common::http_get(served.authority(), "/metrics").unwrap_or_default();
        sample(&text, "varve_runtime_backlog{namespace=\"app\"}") == Some(0.0)
            && sample(&text, "varve_runtime_event_trims_total{namespace=\"app\"}").is_some_and(|n| n >= 1.0)
    });
    let held = sample(&text, "varve_runtime_events{namespace=\"app\"}").expect("events held");
    assert!((20.0..=40.0).contains(&held), "keep 20, held {held}:\n{text}");
    assert_eq!(sample(&text, "varve_runtime_event_trim_failing{namespace=\"app\"}"), Some(0.0), "{text}");
    let info = remote_ok(&env, &served, &["--ns", "app", "--json", "log", "info", "_events"]);
    let info: Value = serde_json::from_str(&info).expect("json");
    assert_eq!(info["latest"], 61, "the handler's SUBSCRIBE and 60 more: {info}");
    stop(served);
}
