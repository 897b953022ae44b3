//! `varve serve` as a user runs it: the curl examples of docs/http.md, the
//! CLI on `--store varve://…` from several processes, clear errors for an
//! unreachable server, and a graceful stop that releases the namespace.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{Env, WAIT};
use serde_json::Value;

/// The `sh` block of docs/http.md's Examples: (command, expected output).
fn doc_examples() -> Vec<(String, String)> {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/http.md")).expect("docs/http.md");
    let section = doc.split("## Examples").nth(1).expect("an Examples section");
    let block = section.split("```sh\n").nth(1).and_then(|b| b.split("```").next()).expect("a sh block");
    let mut examples: Vec<(String, String)> = Vec::new();
    for line in block.lines() {
        if let Some(expected) = line.strip_prefix('#') {
            let (_, output) = examples.last_mut().expect("a command before its output");
            output.push_str(expected.strip_prefix(' ').unwrap_or(expected));
            output.push('\n');
        } else if !line.trim().is_empty() {
            examples.push((line.to_owned(), String::new()));
        }
    }
    examples
}

#[test]
fn the_curl_examples_of_the_http_guide_answer_as_written() {
    let env = Env::new();
    let served = env.serve(&[]);
    let examples = doc_examples();
    assert!(examples.len() >= 10, "{examples:?}");
    for (command, expected) in examples {
        let output = Command::new("bash").arg("-c").arg(&command).env("VARVE", served.http()).output().expect("bash");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(
            stdout.trim_end(),
            expected.trim_end(),
            "{command}\nstderr: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

fn json(output: &std::process::Output) -> Value {
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stdout)))
}

#[test]
fn the_log_commands_work_on_a_served_store_from_several_processes() {
    let env = Env::new();
    let served = env.serve(&[]);
    let store = ["--store", served.uri.as_str(), "--ns", "app", "--json"];
    let varve = |args: &[&str]| {
        let mut all: Vec<&str> = store.to_vec();
        all.extend_from_slice(args);
        env.run(&all)
    };
    assert_eq!(json(&varve(&["log", "create", "t"]))["created"], true);
    // Two writers at once, each 20 appends, through the one server.
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let mut all: Vec<String> = store.iter().map(|s| (*s).to_owned()).collect();
            all.extend(["log".into(), "append".into(), "t".into()]);
            (0..20)
                .map(|i| {
                    let mut args = all.clone();
                    args.push(format!("w{w}-{i}"));
                    env.command(&args.iter().map(String::as_str).collect::<Vec<_>>())
                        .stdout(std::process::Stdio::null())
                        .spawn()
                        .expect("spawn")
                })
                .collect::<Vec<_>>()
        })
        .collect();
    for mut child in writers.into_iter().flatten() {
        assert!(child.wait().expect("wait").success());
    }
    assert_eq!(json(&varve(&["log", "latest", "t"]))["latest"], 40);
    let scanned = varve(&["log", "scan", "t"]);
    assert!(scanned.status.success());
    let seqs: Vec<u64> = String::from_utf8_lossy(&scanned.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("json line")["seq"].as_u64().expect("seq"))
        .collect();
    assert_eq!(seqs, (1..=40).collect::<Vec<_>>(), "dense, ordered, complete");
    // A request id lands once.
    let first = json(&varve(&["log", "append", "t", "once", "--request-id", "job-7"]));
    let again = json(&varve(&["log", "append", "t", "once", "--request-id", "job-7"]));
    assert_eq!(
        (first["seq"].clone(), again["seq"].clone(), again["repeated"].clone()),
        (41.into(), 41.into(), true.into())
    );
    assert_eq!(
        json(&varve(&["log", "batch", "t=a", "t=b"]))["appended"],
        serde_json::json!([{"log": "t", "seq": 42}, {"log": "t", "seq": 43}])
    );
    assert_eq!(json(&varve(&["log", "get", "t", "42"]))["value"], "a");
    let listed = json(&varve(&["log", "ls"]));
    assert!(listed["logs"].as_array().expect("logs").iter().any(|l| l["log"] == "t"), "{listed}");
    assert_eq!(json(&varve(&["log", "rm", "t"]))["deleted"], true);
    let gone = varve(&["log", "get", "t", "1"]);
    assert!(!gone.status.success());
    assert!(String::from_utf8_lossy(&gone.stderr).contains("not found"), "{}", String::from_utf8_lossy(&gone.stderr));
    // Commands that need the journal itself say so.
    let fsck = varve(&["fsck"]);
    assert!(!fsck.status.success());
    assert!(
        String::from_utf8_lossy(&fsck.stderr).contains("embedded store"),
        "{}",
        String::from_utf8_lossy(&fsck.stderr)
    );
}

#[test]
fn an_unreachable_server_is_a_clear_error_not_a_hang() {
    let env = Env::new();
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let uri = format!("varve://127.0.0.1:{port}");
    let started = std::time::Instant::now();
    let output = env.run(&["--store", &uri, "log", "ls"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&uri) && stderr.contains("unavailable"), "{stderr}");
    assert!(started.elapsed() < WAIT, "answered, not hung");
    let bad = env.run(&["--store", "varve://nowhere", "log", "ls"]);
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("varve://HOST:PORT"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    // Nothing listens on the discard port: a NATS store there is unavailable at once.
    let nats = env.run(&["--store", "nats://127.0.0.1:9", "log", "ls"]);
    let stderr = String::from_utf8_lossy(&nats.stderr);
    assert!(!nats.status.success() && stderr.contains("unavailable") && stderr.contains("nats-server"), "{stderr}");
}

#[test]
fn sigterm_stops_the_server_gracefully_and_releases_the_namespace() {
    let env = Env::new();
    let mut served = env.serve(&[]);
    let store = ["--store", served.uri.as_str(), "--ns", "app"];
    let mut args = store.to_vec();
    args.extend(["log", "create", "t"]);
    assert!(env.run(&args).status.success());
    let mut args = store.to_vec();
    args.extend(["log", "append", "t", "before-stop"]);
    assert!(env.run(&args).status.success());
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(i32::try_from(served.child.id()).expect("pid")).expect("pid"),
        rustix::process::Signal::TERM,
    )
    .expect("SIGTERM");
    let deadline = std::time::Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = served.child.try_wait().expect("wait") {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "varve serve did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "a graceful stop exits 0: {status:?}");
    // The lock is released: the embedded CLI writes the namespace directly.
    let direct = env.run(&["--ns", "app", "--json", "log", "append", "t", "after-stop"]);
    assert_eq!(json(&direct)["seq"], 2);
    // A new server on the same data serves what the first one acknowledged.
    let again = env.serve(&[]);
    let got = env.run(&["--store", again.uri.as_str(), "--ns", "app", "log", "get", "t", "1"]);
    assert_eq!(String::from_utf8_lossy(&got.stdout).trim(), "before-stop");
}
