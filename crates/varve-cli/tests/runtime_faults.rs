//! `varve run` and the write commands under faults, with real processes and
//! real signals: a runtime killed (SIGKILL) in a loop while a client appends, writes
//! issued while a runtime starts and while it runs, a SIGTERM while an
//! external handler runs, and a handler appending to another namespace.

#![expect(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod common;

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;

use common::{events_of, process_is_gone, wait_until, Env, Running, WAIT};

const NOOP_APP: &str = "[runtime]\nnamespace = \"app\"\nsync = \"never\"\n\n[[log]]\nname = \"in\"\n\n[[handler]]\nname = \"h\"\nlog = \"in\"\nbuiltin = \"noop\"\n";

/// Wait until the runtime's socket answers; fail with its stderr if it exits first.
fn wait_serving(env: &Env, runtime: &mut Running, namespace: &str) {
    let socket = env.socket(namespace);
    wait_until("the runtime's socket answers", || {
        if let Some(status) = runtime.0.try_wait().unwrap() {
            let mut stderr = String::new();
            if let Some(pipe) = runtime.0.stderr.as_mut() {
                let _ = pipe.read_to_string(&mut stderr);
            }
            panic!("varve run exited with {status} before serving: {stderr}");
        }
        std::os::unix::net::UnixStream::connect(&socket).is_ok()
    });
}

/// Wait for a process to exit, at most [`WAIT`].
fn wait_exit(runtime: &mut Running) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = runtime.0.try_wait().unwrap() {
            return status;
        }
        assert!(start.elapsed() < WAIT, "varve run did not exit within {WAIT:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The request id a failed append names for a safe re-run (`--request-id ID`).
fn request_id_in(stderr: &str) -> Option<String> {
    let (_, rest) = stderr.split_once("--request-id ")?;
    let id: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || "._:-".contains(*c)).collect();
    (!id.is_empty()).then_some(id)
}

/// Each record of a log, by value, with how many times it is there.
fn values_of(env: &Env, namespace: &str, log: &str) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for line in env.ok(&["--ns", namespace, "--json", "log", "scan", log]).lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        *counts.entry(record["value"].as_str().unwrap().to_owned()).or_default() += 1;
    }
    counts
}

#[test]
fn retried_appends_land_exactly_once_while_the_runtime_is_killed_in_a_loop() {
    /// The client appends at least this many values …
    const VALUES_MIN: usize = 40;
    /// … and goes on until the runtime was killed this many times.
    const KILLS_MIN: usize = 12;
    /// A bound on the values, should the kills be slow to come.
    const VALUES_MAX: usize = 5_000;
    /// Re-runs of one append by the client (a user would give up earlier).
    const CLIENT_RUNS_MAX: usize = 20;
    let seed = common::seed_from_env();
    eprintln!("seed {seed} (replay with VARVE_SEED={seed})");
    let env = Env::new();
    let manifest = env.manifest(NOOP_APP);
    env.ok(&["run", manifest.to_str().unwrap(), "--until-idle"]);

    let stop = AtomicBool::new(false);
    let kills = AtomicUsize::new(0);
    let runtime_failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let mut client_failures: Vec<String> = Vec::new();
    let mut values = 0;
    let mut repeats = 0;
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut rng = StdRng::seed_from_u64(seed);
            while !stop.load(Ordering::SeqCst) {
                let mut runtime = env.spawn_run(&manifest, true);
                // Half the kills land at a random moment from the spawn (often
                // while it starts), half at a random moment while it serves.
                if rng.gen_bool(0.5) {
                    let socket = env.socket("app");
                    let start = Instant::now();
                    while runtime.0.try_wait().unwrap().is_none()
                        && std::os::unix::net::UnixStream::connect(&socket).is_err()
                        && start.elapsed() < WAIT
                    {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
                // The delay is the fault's timing, not a synchronisation.
                std::thread::sleep(Duration::from_millis(rng.gen_range(0..300)));
                if let Some(status) = runtime.0.try_wait().unwrap() {
                    let mut stderr = String::new();
                    let _ = runtime.0.stderr.as_mut().unwrap().read_to_string(&mut stderr);
                    runtime_failures.lock().unwrap().push(format!("{status}: {stderr}"));
                    continue;
                }
                runtime.0.kill().unwrap();
                runtime.0.wait().unwrap();
                kills.fetch_add(1, Ordering::SeqCst);
            }
        });
        while values < VALUES_MIN || kills.load(Ordering::SeqCst) < KILLS_MIN {
            assert!(values < VALUES_MAX, "{VALUES_MAX} values and only {} kills", kills.load(Ordering::SeqCst));
            let value = format!("v{values}");
            values += 1;
            let mut request_id: Option<String> = None;
            for run in 1.. {
                assert!(
                    run <= CLIENT_RUNS_MAX,
                    "append of {value} failed {CLIENT_RUNS_MAX} times: {client_failures:?}"
                );
                let mut args = vec!["--json", "--ns", "app", "log", "append", "in", &value];
                if let Some(id) = &request_id {
                    args.extend(["--request-id", id]);
                }
                let out = env.run(&args);
                if out.status.success() {
                    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
                    if answer["repeated"] == true {
                        repeats += 1; // a re-run found its first append
                    }
                    break;
                }
                let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
                // What the message tells a user to do: re-run with the id.
                if let Some(id) = request_id_in(&stderr) {
                    request_id = Some(id);
                }
                client_failures.push(stderr);
            }
        }
        stop.store(true, Ordering::SeqCst);
    });
    eprintln!(
        "{values} values, {} kills; {} client runs failed, {repeats} answered as repeats; {} runtime starts failed",
        kills.load(Ordering::SeqCst),
        client_failures.len(),
        runtime_failures.lock().unwrap().len()
    );
    assert!(kills.load(Ordering::SeqCst) >= KILLS_MIN, "only {} kills", kills.load(Ordering::SeqCst));
    let locked: Vec<&String> = client_failures.iter().filter(|e| e.contains("locked")).collect();
    assert!(locked.is_empty(), "an append saw the namespace locked: {locked:?}");
    let runtime_failures = runtime_failures.into_inner().unwrap();
    assert!(runtime_failures.is_empty(), "varve run failed to start: {runtime_failures:?}");

    let counts = values_of(&env, "app", "in");
    let expected: BTreeMap<String, usize> = (0..values).map(|i| (format!("v{i}"), 1)).collect();
    assert_eq!(counts, expected, "every value exactly once (seed {seed})");
    // And each fired its handler exactly once.
    env.ok(&["run", manifest.to_str().unwrap(), "--until-idle"]);
    let handlers = env.json(&["--ns", "app", "handler", "ls"]);
    let h = &handlers["handlers"][0];
    let n = values as u64;
    assert_eq!((h["triggers"].as_u64(), h["done"].as_u64(), h["pending"].as_u64()), (Some(n), Some(n), Some(0)));
}

#[test]
fn writes_while_a_runtime_starts_and_while_it_runs_never_see_locked() {
    const ROUNDS: usize = 4;
    let env = Env::new();
    let manifest = env.manifest(NOOP_APP);
    env.ok(&["run", manifest.to_str().unwrap(), "--until-idle"]);
    let mut expected: BTreeMap<String, usize> = BTreeMap::new();
    for round in 0..ROUNDS {
        let mut runtime = env.spawn_run(&manifest, true);
        // At once, while it starts (it takes the lock, then opens its socket).
        let new_log = format!("new{round}");
        let starting = format!("starting{round}");
        let batched = format!("in=batched{round}");
        let into_new = format!("{new_log}=x");
        env.ok(&["--ns", "app", "log", "append", "in", &starting]);
        env.ok(&["--ns", "app", "log", "create", &new_log]);
        env.ok(&["--ns", "app", "log", "batch", &batched, &into_new]);
        // And while it serves.
        wait_serving(&env, &mut runtime, "app");
        let serving = format!("serving{round}");
        let kept = format!("kept{round}");
        env.ok(&["--ns", "app", "log", "append", "in", &serving]);
        env.ok(&["--ns", "app", "log", "create", &kept, "--keep", "5"]);
        env.ok(&["--ns", "app", "log", "batch", &format!("in=b{round}"), &format!("{kept}=k")]);
        env.ok(&["--ns", "app", "log", "rm", &new_log]);
        for value in [starting, format!("batched{round}"), serving, format!("b{round}")] {
            expected.insert(value, 1);
        }
        runtime.0.kill().unwrap();
        runtime.0.wait().unwrap();
    }
    assert_eq!(values_of(&env, "app", "in"), expected);
    let logs = env.json(&["--ns", "app", "log", "ls"]);
    let names: Vec<&str> = logs["logs"].as_array().unwrap().iter().map(|l| l["log"].as_str().unwrap()).collect();
    for round in 0..ROUNDS {
        assert!(names.contains(&format!("kept{round}").as_str()), "{names:?}");
        assert!(!names.contains(&format!("new{round}").as_str()), "{names:?}");
    }
}

/// Kills what a test's handler left running, however the test ends.
struct KillOnDrop(Vec<std::path::PathBuf>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for file in &self.0 {
            if let Some(pid) = std::fs::read_to_string(file).ok().and_then(|t| t.trim().parse::<u32>().ok()) {
                let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).stderr(Stdio::null()).status();
            }
        }
    }
}

fn pid_in(file: &Path) -> Option<u32> {
    std::fs::read_to_string(file).ok()?.trim().parse().ok()
}

#[test]
fn sigterm_stops_handlers_removes_the_socket_says_so_and_the_next_start_reruns_the_firing() {
    let env = Env::new();
    let shell = env.temp.path().join("shell.pid");
    let child = env.temp.path().join("child.pid");
    let _cleanup = KillOnDrop(vec![shell.clone(), child.clone()]);
    // A handler that outlives any grace: a shell waiting for a child in its
    // process group.
    let slow = env.manifest(&format!(
        "[runtime]\nnamespace = \"app\"\n\n[[log]]\nname = \"in\"\n\n[[handler]]\nname = \"work\"\nlog = \"in\"\ncommand = [\"sh\", \"-c\", \"sleep 300 & echo $! > {child}.tmp && mv {child}.tmp {child}; echo $$ > {shell}.tmp && mv {shell}.tmp {shell}; wait\"]\n",
        child = child.display(),
        shell = shell.display(),
    ));
    let mut runtime = Running(
        env.command(&["run", slow.to_str().unwrap()])
            .env("VARVE_STOP_GRACE_MS", "300")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    wait_serving(&env, &mut runtime, "app");
    env.ok(&["--ns", "app", "log", "append", "in", "job"]);
    wait_until("the handler and its child started", || pid_in(&shell).is_some() && pid_in(&child).is_some());
    let (shell_pid, child_pid) = (pid_in(&shell).unwrap(), pid_in(&child).unwrap());

    let status = Command::new("kill").args(["-TERM", &runtime.0.id().to_string()]).status().unwrap();
    assert!(status.success());
    let exit = wait_exit(&mut runtime);
    let mut stderr = String::new();
    runtime.0.stderr.as_mut().unwrap().read_to_string(&mut stderr).unwrap();
    assert!(exit.success(), "a requested stop is a clean exit: {exit}; stderr: {stderr}");
    assert!(stderr.contains("stopped"), "it says what it did: {stderr:?}");
    assert!(stderr.contains("work in:1"), "it names the interrupted run: {stderr:?}");
    assert!(stderr.lines().count() <= 3, "a line or two: {stderr:?}");
    assert!(!env.socket("app").exists(), "the socket file is removed");
    wait_until("the handler's processes are gone", || process_is_gone(shell_pid) && process_is_gone(child_pid));

    let fast = env.manifest_named(
        "fast.toml",
        "[runtime]\nnamespace = \"app\"\n\n[[log]]\nname = \"in\"\n\n[[handler]]\nname = \"work\"\nlog = \"in\"\ncommand = [\"true\"]\n",
    );
    env.ok(&["run", fast.to_str().unwrap(), "--until-idle"]);
    let all = events_of(&env, "app");
    let firings: Vec<u64> =
        all.iter().filter(|e| e["kind"] == "FIRING").map(|e| e["attempt"].as_u64().unwrap()).collect();
    assert_eq!(firings, vec![1, 2], "the interrupted run is re-run as a second FIRING");
    let done: Vec<&Value> = all.iter().filter(|e| e["kind"] == "DONE").collect();
    assert_eq!((done.len(), done[0]["attempt"].as_u64()), (1, Some(2)));
    assert!(all.iter().all(|e| e["kind"] != "FAILED"), "a stop is not a handler failure");
}

/// The records `trace causes` names, as `namespace/log:seq`, in any order.
fn causes(env: &Env, namespace: &str, log: &str, seq: u64) -> Vec<String> {
    let answer = env.json(&["--ns", namespace, "trace", "causes", log, &seq.to_string()]);
    let mut records: Vec<String> = answer["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| format!("{}/{}:{}", r["namespace"].as_str().unwrap(), r["log"].as_str().unwrap(), r["seq"]))
        .collect();
    records.sort();
    records
}

#[test]
fn a_handler_appending_to_another_namespace_gives_one_causal_chain() {
    let env = Env::new();
    let varve = env!("CARGO_BIN_EXE_varve");
    let a = env.manifest_named(
        "a.toml",
        &format!(
            "[runtime]\nnamespace = \"a\"\n\n[[log]]\nname = \"x\"\n\n[[handler]]\nname = \"fwd\"\nlog = \"x\"\ncommand = [\"sh\", \"-c\", \"{varve} --ns b log append y -\"]\n"
        ),
    );
    let b = env.manifest_named("b.toml", "[runtime]\nnamespace = \"b\"\n\n[[log]]\nname = \"y\"\n");
    let a = a.to_str().unwrap();
    env.ok(&["--ns", "b", "log", "create", "y"]);
    env.ok(&["run", a, "--until-idle"]);

    // No runtime serves b: the handler's append takes b's direct writer path.
    env.ok(&["--ns", "a", "log", "append", "x", "one"]);
    env.ok(&["run", a, "--until-idle"]);
    assert_eq!(causes(&env, "b", "y", 1), vec!["a/x:1", "b/y:1"]);
    let firing = events_of(&env, "a").into_iter().find(|e| e["kind"] == "FIRING").unwrap();
    let append = events_of(&env, "b").into_iter().find(|e| e["kind"] == "APPEND").unwrap();
    assert_eq!(append["parent"], firing["id"], "b's APPEND names a's FIRING");
    assert_eq!(append["trace"], firing["trace"]);

    // A runtime serves b: through its socket.
    let _b = env.start_in(&b, "b");
    env.ok(&["--ns", "a", "log", "append", "x", "two"]);
    env.ok(&["run", a, "--until-idle"]);
    assert_eq!(causes(&env, "b", "y", 2), vec!["a/x:2", "b/y:2"]);
    let effects = env.json(&["--ns", "a", "trace", "effects", "x", "2"]);
    assert_eq!(effects["records"].as_array().unwrap().len(), 2, "and the other way: {effects}");
}

#[test]
fn an_append_whose_answer_never_comes_says_the_outcome_is_unknown_and_a_rerun_with_its_id_lands_once() {
    let env = Env::new();
    let manifest = env.manifest(NOOP_APP);
    env.ok(&["run", manifest.to_str().unwrap(), "--until-idle"]);
    // A socket that takes every request and closes without an answer: the
    // client cannot know whether the append landed.
    let socket = env.socket("app");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let mute = std::thread::spawn(move || {
        for stream in listener.incoming() {
            let mut stream = stream.unwrap();
            let mut line = String::new();
            let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(&mut stream), &mut line);
            if line.contains("\"stop\"") {
                return;
            }
        }
    });
    let out = env.run(&["--ns", "app", "log", "append", "in", "maybe"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("may or may not have landed"), "{stderr}");
    assert!(stderr.contains("varve --ns app log latest in"), "{stderr}");
    let id = request_id_in(&stderr).expect("the message names the request id");
    assert_eq!(id.len(), 32, "a random 128-bit id: {stderr}");
    // Stop the mute socket (a request naming "stop"), then serve for real.
    let _ = std::os::unix::net::UnixStream::connect(&socket)
        .and_then(|mut s| std::io::Write::write_all(&mut s, b"{\"op\":\"stop\"}\n"));
    mute.join().unwrap();
    let mut runtime = env.spawn_run(&manifest, true);
    wait_serving(&env, &mut runtime, "app");
    let first = env.ok(&["--ns", "app", "log", "append", "in", "maybe", "--request-id", &id]);
    assert_eq!(first.trim(), "appended in seq 1");
    let again = env.json(&["--ns", "app", "log", "append", "in", "maybe", "--request-id", &id]);
    assert_eq!((again["seq"].as_u64(), again["repeated"].as_bool()), (Some(1), Some(true)));
    assert_eq!(values_of(&env, "app", "in"), BTreeMap::from([("maybe".to_owned(), 1)]));
}
