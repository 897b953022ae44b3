//! Process-level tests of `varve run`, `handler ls`, `trace …` and `events
//! tail`: a real runtime process, external handlers that call the `varve`
//! binary, and appends routed through the runtime's socket.

mod common;

use serde_json::Value;

use common::{wait_until, Env, Running};

fn events(env: &Env) -> Vec<Value> {
    common::events_of(env, "app")
}

#[test]
fn an_external_handler_appends_through_the_cli_with_its_cause() {
    let env = Env::new();
    let varve = env!("CARGO_BIN_EXE_varve");
    let manifest = env.manifest(&format!(
        r#"
[runtime]
namespace = "app"
sync = "never"

[[log]]
name = "in"

[[log]]
name = "out"

[[handler]]
name = "upper"
log = "in"
command = ["sh", "-c", "cd /; {varve} log latest in >/dev/null && {varve} log get in $VARVE_SEQ >/dev/null && tr a-z A-Z | {varve} log append out -"]
"#
    ));
    let _runtime = env.start(&manifest);
    // From outside, while the runtime holds the lock: routed through its socket.
    assert_eq!(env.ok(&["--ns", "app", "log", "append", "in", "hello"]).trim(), "appended in seq 1");
    wait_until("out:1 is there", || env.run(&["--ns", "app", "log", "get", "out", "1"]).status.success());
    assert_eq!(env.ok(&["--ns", "app", "log", "get", "out", "1"]).trim(), "HELLO");
    wait_until("a DONE", || events(&env).iter().any(|e| e["kind"] == "DONE"));

    let all = events(&env);
    let firing = all.iter().find(|e| e["kind"] == "FIRING").expect("a FIRING");
    let out_append = all.iter().find(|e| e["kind"] == "APPEND" && e["log"] == "out").expect("APPEND out");
    assert_eq!(out_append["parent"], firing["id"], "the CLI append inside the handler carries the FIRING as cause");
    assert_eq!(out_append["trace"], firing["trace"]);
    let latest = all.iter().find(|e| e["kind"] == "LATEST").expect("LATEST through the socket");
    assert_eq!(
        (&latest["parent"], &latest["log"], latest["seq"].as_u64()),
        (&firing["id"], &Value::from("in"), Some(1))
    );
    let read = all.iter().find(|e| e["kind"] == "READ").expect("READ through the socket");
    assert_eq!((&read["parent"], &read["log"], read["seq"].as_u64()), (&firing["id"], &Value::from("in"), Some(1)));
    let in_append = all.iter().find(|e| e["kind"] == "APPEND" && e["log"] == "in").expect("APPEND in");
    assert!(in_append["parent"].is_null(), "an outside append starts a trace");

    let causes = env.json(&["--ns", "app", "trace", "causes", "out", "1"]);
    let records: Vec<(String, u64)> = causes["records"]
        .as_array()
        .expect("records")
        .iter()
        .map(|r| (r["log"].as_str().expect("log").to_owned(), r["seq"].as_u64().expect("seq")))
        .collect();
    assert_eq!(records, vec![("out".to_owned(), 1), ("in".to_owned(), 1)]);
    let effects = env.json(&["--ns", "app", "trace", "effects", "in", "1"]);
    assert_eq!(effects["records"].as_array().expect("records").len(), 2);

    let trace = firing["trace"].as_str().expect("trace");
    let dot = env.temp.path().join("t.dot");
    let otel = env.temp.path().join("t.json");
    let shown = env.json(&[
        "trace",
        "show",
        trace,
        "--dot",
        dot.to_str().expect("path"),
        "--otel",
        otel.to_str().expect("path"),
    ]);
    // APPEND in, TRIGGER, FIRING, LATEST, READ, APPEND out, DONE.
    assert_eq!(shown["events"].as_array().expect("events").len(), 7);
    assert!(std::fs::read_to_string(&dot).expect("dot").starts_with("digraph varve {"));
    let otel: Value = serde_json::from_str(&std::fs::read_to_string(&otel).expect("otel")).expect("otel JSON");
    assert_eq!(otel["resourceSpans"][0]["scopeSpans"][0]["spans"].as_array().expect("spans").len(), 7);
    // The 12 digits the text output shows are enough.
    let by_prefix = env.json(&["trace", "show", &trace[..12]]);
    assert_eq!(by_prefix["events"], shown["events"]);

    let handlers = env.json(&["--ns", "app", "handler", "ls"]);
    let upper = &handlers["handlers"][0];
    assert_eq!(upper["handler"], "upper");
    assert_eq!(upper["logs"][0], "in");
    assert_eq!(
        (upper["triggers"].as_u64(), upper["done"].as_u64(), upper["pending"].as_u64()),
        (Some(1), Some(1), Some(0))
    );
}

#[test]
fn failing_handlers_retry_then_dead_letter_and_the_runtime_keeps_serving() {
    let env = Env::new();
    let manifest = env.manifest(
        r#"
[runtime]
namespace = "app"
sync = "never"

[[log]]
name = "in"

[[handler]]
name = "broken"
log = "in"
command = ["sh", "-c", "echo 'no luck' >&2; exit 7"]
attempts = 2
backoff_ms = 1

[[handler]]
name = "fine"
log = "in"
builtin = "noop"
"#,
    );
    let _runtime = env.start(&manifest);
    for i in 0..3 {
        env.ok(&["--ns", "app", "log", "append", "in", &i.to_string()]);
    }
    wait_until("3 dead letters", || events(&env).iter().filter(|e| e["kind"] == "DEAD_LETTER").count() == 3);
    wait_until("3 DONE", || events(&env).iter().filter(|e| e["kind"] == "DONE").count() == 3);
    let all = events(&env);
    let failed: Vec<&Value> = all.iter().filter(|e| e["kind"] == "FAILED").collect();
    assert_eq!(failed.len(), 6);
    assert_eq!(failed[0]["reason"], "exited with status 7; stderr: no luck");
    let handlers = env.json(&["--ns", "app", "handler", "ls"]);
    let broken = &handlers["handlers"][0];
    assert_eq!((broken["failed"].as_u64(), broken["dead_letters"].as_u64()), (Some(6), Some(3)));
    assert_eq!(env.ok(&["--ns", "app", "log", "latest", "_dead_letters"]).lines().next(), Some("latest: 3"));
}

#[test]
fn bad_manifests_fail_before_anything_starts() {
    let env = Env::new();
    let cases = [
        ("[runtime]\nnamespace = \"app\"\nconcurency = 3\n", "app.toml:3: unknown field `concurency`"),
        (
            "[[log]]\nname = \"in\"\n[[handler]]\nname = \"h\"\nlog = \"missing\"\nbuiltin = \"noop\"\n",
            "app.toml:5: handler \"h\" subscribes to \"missing\", which is not declared",
        ),
        (
            "[[log]]\nname = \"in\"\n[[handler]]\nname = \"h\"\nlog = \"in\"\ncommand = [\"/no/such/handler\"]\n",
            "app.toml:6: handler \"h\": command \"/no/such/handler\" is not an executable file",
        ),
        (
            "[[log]]\nname = \"in\"\n[[handler]]\nname = \"h\"\nlog = \"in\"\nbuiltin = \"nope\"\n",
            "app.toml:4: handler \"h\": builtin \"nope\" is not offered by this program (offered: echo, fail, noop)",
        ),
    ];
    for (text, expected) in cases {
        let manifest = env.manifest(text);
        let out = env.run(&["run", manifest.to_str().expect("path"), "--until-idle"]);
        assert_eq!(out.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(stderr.contains(expected), "expected {expected:?} in {stderr:?}");
        assert!(!env.data.exists(), "nothing was created");
    }
}

#[test]
fn trace_commands_explain_untraced_records() {
    let env = Env::new();
    env.ok(&["log", "create", "x"]);
    env.ok(&["log", "append", "x", "v"]);
    let out = env.run(&["trace", "causes", "x", "1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("only records appended after a runtime"));
    let out = env.run(&["events", "tail", "--no-follow"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no runtime has served it yet"));
    let out = env.run(&["trace", "show", "not-hex"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a trace id"));
}

#[test]
fn a_runtime_killed_mid_handler_reruns_the_trigger_on_restart() {
    let env = Env::new();
    let marker = env.temp.path().join("started");
    let slow = env.manifest(&format!(
        r#"
[runtime]
namespace = "app"

[[log]]
name = "in"

[[handler]]
name = "work"
log = "in"
command = ["sh", "-c", "touch {}; sleep 2"]
"#,
        marker.display()
    ));
    let mut runtime = env.start(&slow);
    env.ok(&["--ns", "app", "log", "append", "in", "job"]);
    wait_until("the handler started", || marker.exists());
    // SIGKILL: no cleanup at all, the handler is mid-run.
    runtime.0.kill().expect("kill the runtime");
    runtime.0.wait().expect("reap the runtime");
    drop(runtime);

    let fast = env.manifest("[runtime]\nnamespace = \"app\"\n\n[[log]]\nname = \"in\"\n\n[[handler]]\nname = \"work\"\nlog = \"in\"\ncommand = [\"true\"]\n");
    let out = env.run(&["run", fast.to_str().expect("path"), "--until-idle"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let all = events(&env);
    let firings: Vec<u64> =
        all.iter().filter(|e| e["kind"] == "FIRING").map(|e| e["attempt"].as_u64().expect("attempt")).collect();
    assert_eq!(firings, vec![1, 2], "the re-run after the kill is a second FIRING");
    let done: Vec<&Value> = all.iter().filter(|e| e["kind"] == "DONE").collect();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0]["attempt"], 2);
    assert!(all.iter().all(|e| e["kind"] != "FAILED"), "a crash is not a handler failure");
}

#[test]
fn appends_while_no_runtime_runs_fire_on_the_next_start() {
    let env = Env::new();
    let manifest = env.manifest(
        "[runtime]\nnamespace = \"app\"\n\n[[log]]\nname = \"in\"\n\n[[handler]]\nname = \"h\"\nlog = \"in\"\nbuiltin = \"noop\"\n",
    );
    let manifest = manifest.to_str().expect("path");
    env.ok(&["run", manifest, "--until-idle"]);
    env.ok(&["--ns", "app", "log", "append", "in", "offline"]);
    env.ok(&["--ns", "app", "log", "batch", "in=a", "in=b"]);
    let handlers = env.json(&["--ns", "app", "handler", "ls"]);
    assert_eq!(handlers["handlers"][0]["pending"], 3, "recorded while no runtime runs");
    env.ok(&["run", manifest, "--until-idle"]);
    let handlers = env.json(&["--ns", "app", "handler", "ls"]);
    assert_eq!(
        (handlers["handlers"][0]["done"].as_u64(), handlers["handlers"][0]["pending"].as_u64()),
        (Some(3), Some(0))
    );
}

#[test]
fn events_tail_follows_new_events() {
    use std::io::{BufRead, BufReader};
    let env = Env::new();
    let manifest = env.manifest("[runtime]\nnamespace = \"app\"\n\n[[log]]\nname = \"in\"\n");
    let _runtime = env.start(&manifest);
    let mut tail = Running(
        env.command(&["--ns", "app", "--json", "events", "tail"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("spawn tail"),
    );
    let stdout = tail.0.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.expect("line")).is_err() {
                return;
            }
        }
    });
    env.ok(&["--ns", "app", "log", "append", "in", "x"]);
    let line = rx.recv_timeout(common::WAIT).expect("an event line");
    let event: Value = serde_json::from_str(&line).expect("JSON");
    assert_eq!(
        (event["kind"].as_str(), event["log"].as_str(), event["seq"].as_u64()),
        (Some("APPEND"), Some("in"), Some(1))
    );
}

/// The manifest's `events_keep`: `varve run` trims `_events` as the app
/// runs; a trace of a record whose events went says why; a repair of it is
/// refused; and `_events` is not trimmed by hand.
#[test]
fn events_keep_bounds_the_event_log_and_says_what_was_trimmed() {
    let env = Env::new();
    let manifest = env.manifest(
        r#"
[runtime]
namespace = "app"
sync = "never"
events_keep = 40

[[log]]
name = "in"

[[handler]]
name = "fine"
log = "in"
builtin = "noop"
"#,
    );
    let runtime = env.start(&manifest);
    for i in 0..60 {
        env.ok(&["--ns", "app", "log", "append", "in", &i.to_string()]);
    }
    wait_until("every run DONE", || {
        let info = env.json(&["--ns", "app", "log", "info", "_events"]);
        let (earliest, latest) = (info["earliest"].as_u64().unwrap_or(0), info["latest"].as_u64().unwrap_or(0));
        // 60 inputs × (APPEND, TRIGGER, FIRING, DONE); kept: 40 and up to 5 more.
        latest >= 240 && latest - earliest < 46
    });
    let old = env.run(&["--ns", "app", "trace", "causes", "in", "1"]);
    assert_eq!(old.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&old.stderr);
    assert!(stderr.contains("event retention (`events_keep`, `events_keep_for`) trimmed _events"), "{stderr}");
    let recent = env.json(&["--ns", "app", "trace", "causes", "in", "60"]);
    assert!(recent["events"].as_array().is_some_and(|e| !e.is_empty()), "{recent}");
    let own = env.run(&["--ns", "app", "log", "trim", "_events", "--before", "5"]);
    assert_eq!(own.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&own.stderr).contains("runtime's own log"));
    drop(runtime);
    let manifest_arg = manifest.to_str().expect("path");
    let refused =
        env.run(&["--ns", "app", "repair", "run", "--record", "in:1", "--value", "9", "--manifest", manifest_arg]);
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("older than the events kept"), "{stderr}");
    assert_eq!(env.ok(&["--ns", "app", "log", "get", "in", "1"]), "0\n", "nothing changed");
}
