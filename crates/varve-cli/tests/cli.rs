//! Process-level tests of the `varve` binary: each runs the real executable
//! in a fresh temporary data directory and checks its stdout, stderr and
//! exit code — the interface scripts depend on.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};
use varve_log::{JournalOptions, JournalStore, Namespace};

/// How long a test waits for a line from a follower before failing.
const LINE_TIMEOUT: Duration = Duration::from_secs(20);

/// A temporary data directory and a way to run `varve` on it.
struct Env {
    temp: tempfile::TempDir,
    data: PathBuf,
}

impl Env {
    fn new() -> Env {
        let temp = tempfile::tempdir().expect("temp dir");
        let data = temp.path().join("data");
        Env { temp, data }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_varve"));
        command.arg("--data").arg(&self.data).args(args).current_dir(self.temp.path());
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run varve")
    }

    /// Run, expect success, return stdout.
    fn ok(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(output.status.success(), "varve {args:?} failed: {}", describe(&output));
        assert_no_panic(&output);
        String::from_utf8(output.stdout).expect("utf-8 stdout")
    }

    /// Run with `--json`, expect success, parse the one JSON object printed.
    fn json(&self, args: &[&str]) -> Value {
        let mut with_json = args.to_vec();
        with_json.push("--json");
        let stdout = self.ok(&with_json);
        assert_eq!(stdout.lines().count(), 1, "one JSON object expected, got {stdout:?}");
        serde_json::from_str(&stdout).expect("valid JSON")
    }

    /// Run, expect exit code 1 with one `error:` line on stderr; return that line.
    fn error(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert_eq!(output.status.code(), Some(1), "varve {args:?}: {}", describe(&output));
        assert_no_panic(&output);
        let stderr = String::from_utf8(output.stderr).expect("utf-8 stderr");
        assert_eq!(stderr.lines().count(), 1, "one line on stderr expected, got {stderr:?}");
        assert!(stderr.starts_with("error: "), "{stderr:?}");
        assert!(output.stdout.is_empty(), "nothing on stdout expected on error");
        stderr
    }

    fn segment(&self, id: u32) -> PathBuf {
        self.data.join("default").join(format!("{id:010}.seg"))
    }
}

fn describe(output: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn assert_no_panic(output: &Output) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"), "{stderr}");
}

/// Kills a child process when dropped, so a failing test leaves none behind.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Lines of a child's stdout, read on a thread so the test can time out.
fn lines_of(child: &mut Child) -> mpsc::Receiver<String> {
    let stdout = child.stdout.take().expect("piped stdout");
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if send.send(line).is_err() {
                return;
            }
        }
    });
    receive
}

fn truncate_by(path: &Path, bytes: u64) {
    let file = std::fs::OpenOptions::new().write(true).open(path).expect("open segment");
    let len = file.metadata().expect("metadata").len();
    file.set_len(len - bytes).expect("truncate");
}

// ------------------------------------------------------------------ tests

#[test]
fn round_trip_create_append_get_scan_latest_ls_rm() {
    let env = Env::new();
    assert_eq!(env.ok(&["log", "create", "events"]), "created log events (unbounded retention)\n");
    assert_eq!(env.ok(&["log", "create", "events"]), "log events already exists (unbounded retention)\n");
    assert_eq!(env.ok(&["log", "append", "events", "first"]), "appended events seq 1\n");
    assert_eq!(env.ok(&["log", "append", "events", "second"]), "appended events seq 2\n");
    assert_eq!(env.ok(&["log", "append", "events", "--", "-3"]), "appended events seq 3\n");

    assert_eq!(env.ok(&["log", "get", "events", "2"]), "second\n");
    assert_eq!(env.ok(&["log", "scan", "events"]), "1\tfirst\n2\tsecond\n3\t-3\n");
    assert_eq!(env.ok(&["log", "scan", "events", "--from", "2", "--to", "2"]), "2\tsecond\n");
    assert_eq!(env.ok(&["log", "latest", "events"]), "latest: 3\nearliest: 1\n");
    let info = env.ok(&["log", "info", "events"]);
    assert!(info.contains("unbounded retention") && info.contains("records:    3"), "{info}");

    env.ok(&["log", "create", "other", "--keep", "5"]);
    let ls = env.ok(&["log", "ls"]);
    let rows: Vec<&str> = ls.lines().collect();
    assert_eq!(rows.len(), 3, "{ls}");
    assert!(rows[1].starts_with("events") && rows[2].starts_with("other"), "{ls}");
    assert!(rows[2].ends_with("keep 5, refuse when full"), "{ls}");

    assert_eq!(env.ok(&["log", "rm", "events"]), "deleted log events\n");
    let ls = env.ok(&["log", "ls"]);
    assert!(!ls.contains("events"), "{ls}");
    assert!(env.error(&["log", "get", "events", "1"]).contains("not found"));
}

#[test]
fn json_shapes() {
    let env = Env::new();
    assert_eq!(
        env.json(&["log", "create", "a", "--keep", "10", "--on-full", "overwrite"]),
        json!({"log": "a", "created": true, "retention": "keep", "keep": 10, "on_full": "overwrite"})
    );
    env.ok(&["log", "create", "b"]);
    assert_eq!(env.json(&["log", "append", "a", "héllo"]), json!({"log": "a", "seq": 1}));

    let binary = [0xff_u8, 0x00, 0xfe, 0x10];
    let file = env.temp.path().join("binary.bin");
    std::fs::write(&file, binary).expect("write file");
    let file = file.to_str().expect("utf-8 path");
    assert_eq!(env.json(&["log", "append", "a", "--file", file]), json!({"log": "a", "seq": 2}));

    assert_eq!(env.json(&["log", "get", "a", "1"]), json!({"seq": 1, "value": "héllo"}));
    assert_eq!(env.json(&["log", "get", "a", "2"]), json!({"seq": 2, "value_base64": "/wD+EA=="}));
    let human = env.ok(&["log", "get", "a", "2"]);
    assert!(human.starts_with("<binary value, 4 bytes: ff 00 fe 10"), "{human}");

    // A record stream: one object per line.
    let scan = env.ok(&["log", "scan", "a", "--json"]);
    let lines: Vec<Value> = scan.lines().map(|l| serde_json::from_str(l).expect("JSON line")).collect();
    assert_eq!(lines, vec![json!({"seq": 1, "value": "héllo"}), json!({"seq": 2, "value_base64": "/wD+EA=="})]);

    assert_eq!(
        env.json(&["log", "batch", "a=x", "b=y", "a=z"]),
        json!({"appended": [{"log": "a", "seq": 3}, {"log": "b", "seq": 1}, {"log": "a", "seq": 4}]})
    );
    assert_eq!(env.json(&["log", "latest", "a"]), json!({"log": "a", "latest": 4, "earliest": 1}));
    assert_eq!(
        env.json(&["log", "info", "b"]),
        json!({"namespace": "default", "log": "b", "retention": "unbounded", "earliest": 1, "latest": 1, "len": 1})
    );
    let ls = env.json(&["log", "ls"]);
    assert_eq!(ls["namespace"], "default");
    let names: Vec<&str> =
        ls["logs"].as_array().expect("logs").iter().map(|l| l["log"].as_str().expect("name")).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(ls["logs"][0]["len"], 4);
    assert_eq!(env.json(&["log", "rm", "b"]), json!({"log": "b", "deleted": true}));
}

#[test]
fn append_reads_stdin() {
    let env = Env::new();
    env.ok(&["log", "create", "in"]);
    let mut child = env
        .command(&["log", "append", "in", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(b"line one\nline two\n").expect("write stdin");
    drop(stdin);
    let output = child.wait_with_output().expect("wait");
    assert!(output.status.success(), "{}", describe(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "appended in seq 1\n");
    assert_eq!(env.json(&["log", "get", "in", "1"]), json!({"seq": 1, "value": "line one\nline two\n"}));
}

#[test]
fn batch_is_all_or_nothing() {
    let env = Env::new();
    env.ok(&["log", "create", "a"]);
    env.ok(&["log", "create", "b"]);
    assert_eq!(env.ok(&["log", "batch", "a=1", "b=k=v"]), "appended a seq 1\nappended b seq 1\n");
    assert_eq!(env.json(&["log", "get", "b", "1"]), json!({"seq": 1, "value": "k=v"}), "split at the first `=`");

    let message = env.error(&["log", "batch", "a=2", "b=2", "missing=2"]);
    assert!(message.contains("\"missing\" not found"), "{message}");
    assert_eq!(env.json(&["log", "latest", "a"])["latest"], 1, "nothing of the failed batch landed");
    assert_eq!(env.json(&["log", "latest", "b"])["latest"], 1);

    let message = env.error(&["log", "batch", "a=3", "no-equals-sign"]);
    assert!(message.contains("not LOG=VALUE"), "{message}");
    assert_eq!(env.json(&["log", "latest", "a"])["latest"], 1);
}

#[test]
fn global_options_work_after_the_subcommand() {
    let env = Env::new();
    let data = env.data.to_str().expect("utf-8 path");
    // No --data before the subcommand: run from elsewhere and pass it last.
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_varve")).args(args).current_dir(env.temp.path()).output().expect("run")
    };
    let created = run(&["log", "create", "x", "--ns", "other", "--data", data]);
    assert!(created.status.success(), "{}", describe(&created));
    let appended = run(&["log", "append", "x", "v", "--json", "--ns", "other", "--data", data]);
    assert!(appended.status.success(), "{}", describe(&appended));
    assert_eq!(String::from_utf8_lossy(&appended.stdout), "{\"log\":\"x\",\"seq\":1}\n");
    assert!(env.data.join("other").is_dir(), "namespace `other` written under --data");
    assert!(!env.temp.path().join("varve-data").exists(), "the default --data was not used");
    // Before the subcommand works as well.
    assert_eq!(
        env.ok(&["--ns", "other", "--json", "log", "latest", "x"]),
        "{\"log\":\"x\",\"latest\":1,\"earliest\":1}\n"
    );
    // The default namespace does not exist yet.
    assert!(env.error(&["log", "ls"]).contains("namespace \"default\" not found"));
}

#[test]
fn retention_refuse_fails_when_full() {
    let env = Env::new();
    env.ok(&["log", "create", "small", "--keep", "2"]);
    env.ok(&["log", "append", "small", "1"]);
    env.ok(&["log", "append", "small", "2"]);
    let message = env.error(&["log", "append", "small", "3"]);
    assert!(message.contains("full"), "{message}");
    assert_eq!(env.ok(&["log", "scan", "small"]), "1\t1\n2\t2\n", "reads go on");
}

#[test]
fn retention_overwrite_trims_the_oldest() {
    let env = Env::new();
    env.ok(&["log", "create", "ring", "--keep", "3", "--on-full", "overwrite"]);
    for i in 1..=5 {
        env.ok(&["log", "append", "ring", &format!("v{i}")]);
    }
    assert_eq!(env.json(&["log", "latest", "ring"]), json!({"log": "ring", "latest": 5, "earliest": 3}));
    assert_eq!(env.ok(&["log", "latest", "ring"]), "latest: 5\nearliest: 3\n");
    assert_eq!(env.ok(&["log", "scan", "ring"]), "3\tv3\n4\tv4\n5\tv5\n", "scan starts at the earliest kept");
    assert!(env.error(&["log", "get", "ring", "1"]).contains("trimmed"));
}

#[test]
fn trim_removes_the_records_below_a_seq() {
    let env = Env::new();
    env.ok(&["log", "create", "t"]);
    for i in 1..=6 {
        env.ok(&["log", "append", "t", &format!("v{i}")]);
    }
    assert_eq!(env.ok(&["log", "trim", "t", "--before", "4"]), "log t: earliest seq now 4\n");
    assert_eq!(env.json(&["log", "trim", "t", "--before", "2"]), json!({"log": "t", "earliest": 4}), "a no-op");
    assert_eq!(env.ok(&["log", "scan", "t"]), "4\tv4\n5\tv5\n6\tv6\n");
    assert_eq!(env.json(&["log", "latest", "t"]), json!({"log": "t", "latest": 6, "earliest": 4}));
    assert!(env.error(&["log", "get", "t", "3"]).contains("trimmed"));
    assert_eq!(env.ok(&["log", "append", "t", "v7"]), "appended t seq 7\n", "seqs go on");
    let past = env.error(&["log", "trim", "t", "--before", "9"]);
    assert!(past.contains("newest record always stays"), "{past}");
    let own = env.error(&["log", "trim", "_events", "--before", "2"]);
    assert!(own.contains("runtime's own log") && own.contains("events_keep"), "{own}");
    let system = env.error(&["log", "trim", "_repairs", "--before", "2"]);
    assert!(system.contains("system log") && system.contains("not trimmed by hand"), "{system}");
    assert!(env.error(&["log", "trim", "missing", "--before", "2"]).contains("not found"));
}

#[test]
fn bad_input_is_one_error_line_and_exit_1() {
    let env = Env::new();
    env.ok(&["log", "create", "a"]);
    env.ok(&["log", "append", "a", "x"]);

    assert!(env.error(&["log", "create", "bad name"]).contains("invalid name"));
    assert!(env.error(&["log", "create", "_system"]).contains("reserved"));
    assert!(env.error(&["log", "append", "no/slash", "x"]).contains("invalid name"));
    assert!(env.error(&["--ns", "../escape", "log", "ls"]).contains("invalid name"));
    assert!(env.error(&["log", "get", "unknown", "1"]).contains("not found"));
    assert!(env.error(&["log", "append", "unknown", "x"]).contains("not found"));
    assert!(env.error(&["log", "get", "a", "0"]).contains("seq 0"));
    assert!(env.error(&["log", "get", "a", "2"]).contains("latest is 1"));
    assert!(env.error(&["log", "create", "a", "--keep", "3"]).contains("already exists"));
    assert!(env.error(&["log", "create", "z", "--keep", "0"]).contains("at least 1"));
    assert!(env.error(&["log", "scan", "a", "--from", "3", "--to", "2"]).contains("invalid argument"));
    assert!(env.error(&["log", "append", "a", "--file", "/nonexistent/file"]).contains("/nonexistent/file"));
    assert!(env.error(&["log", "rm", "unknown"]).contains("not found"));
    // A --data that is a file, not a directory, says so (not "namespace not found").
    let file = env.temp.path().join("a-file");
    std::fs::write(&file, b"not a store").expect("write");
    for args in [&["log", "ls"][..], &["log", "append", "a", "x"], &["fsck"]] {
        let output =
            Command::new(env!("CARGO_BIN_EXE_varve")).arg("--data").arg(&file).args(args).output().expect("run");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains("is a file, not a directory"), "{args:?}: {stderr}");
    }
    // Sizes with units, and bad ones.
    assert!(env
        .error(&["--segment-bytes-max", "1KiB", "log", "ls"])
        .contains("segment_bytes_max must be between 4096"));
    let output = env.run(&["--segment-bytes-max", "4 parsecs", "log", "ls"]);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(String::from_utf8_lossy(&output.stderr).contains("unknown size unit"));

    // Usage errors are clap's, with its exit code 2.
    for args in [
        &["log", "get", "a", "minus-one"][..],
        &["log", "create", "a", "--on-full", "overwrite"],
        &["log", "append", "a"],
        &["log", "batch"],
        &["no-such-command"],
    ] {
        let output = env.run(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", describe(&output));
        assert_no_panic(&output);
    }
}

#[test]
fn tail_follows_appends_from_another_process() {
    let env = Env::new();
    env.ok(&["log", "create", "t"]);
    for i in 1..=12 {
        env.ok(&["log", "append", "t", &format!("v{i}")]);
    }
    let mut tail = KillOnDrop(
        env.command(&["log", "tail", "t"]).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("spawn tail"),
    );
    let lines = lines_of(&mut tail.0);
    // Like `tail -f`: the last 10 records first.
    for i in 3..=12 {
        assert_eq!(lines.recv_timeout(LINE_TIMEOUT).expect("an existing record"), format!("{i}\tv{i}"));
    }
    env.ok(&["log", "append", "t", "new"]);
    assert_eq!(lines.recv_timeout(LINE_TIMEOUT).expect("the new record"), "13\tnew");
    env.ok(&["log", "batch", "t=b1", "t=b2"]);
    assert_eq!(lines.recv_timeout(LINE_TIMEOUT).expect("batch record"), "14\tb1");
    assert_eq!(lines.recv_timeout(LINE_TIMEOUT).expect("batch record"), "15\tb2");
    assert!(tail.0.try_wait().expect("try_wait").is_none(), "tail keeps following");

    // --from and --json.
    let mut from = KillOnDrop(
        env.command(&["log", "tail", "t", "--from", "14", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn tail"),
    );
    let json_lines = lines_of(&mut from.0);
    let first: Value = serde_json::from_str(&json_lines.recv_timeout(LINE_TIMEOUT).expect("line")).expect("JSON");
    assert_eq!(first, json!({"seq": 14, "value": "b1"}));
}

#[test]
fn second_writer_gets_locked_error_and_readers_need_no_lock() {
    let env = Env::new();
    env.ok(&["log", "create", "x"]);
    env.ok(&["log", "append", "x", "from-cli"]);

    let writer = JournalStore::open(&env.data, JournalOptions::default())
        .expect("open store")
        .journal_namespace("default")
        .expect("writer lock");
    let message = env.error(&["log", "append", "x", "blocked"]);
    assert!(message.contains("locked"), "{message}");
    assert!(env.error(&["log", "create", "y"]).contains("locked"));
    // A repair needs the lock only when there is something to repair.
    assert_eq!(env.ok(&["fsck", "--repair"]).lines().last(), Some("clean: nothing to repair"));

    // Reads open read-only: they work beside the writer and see its appends.
    writer.append("x", b"from-test").expect("append in process");
    assert_eq!(env.ok(&["log", "scan", "x"]), "1\tfrom-cli\n2\tfrom-test\n");
    assert_eq!(env.ok(&["log", "latest", "x"]), "latest: 2\nearliest: 1\n");
    assert_eq!(env.ok(&["fsck"]).lines().last(), Some("clean: every frame checks out"));

    drop(writer);
    assert_eq!(env.ok(&["log", "append", "x", "after"]), "appended x seq 3\n");
}

#[test]
fn fsck_reports_a_torn_tail_and_repairs_it() {
    let env = Env::new();
    env.ok(&["log", "create", "f"]);
    for i in 1..=5 {
        env.ok(&["log", "append", "f", &format!("record {i}")]);
    }
    let clean = env.run(&["fsck"]);
    assert_eq!(clean.status.code(), Some(0), "{}", describe(&clean));
    let report = env.json(&["fsck"]);
    assert_eq!(report["clean"], true);
    assert_eq!(report["records"], 5);
    assert_eq!(report["logs"], 1);

    let segment = env.segment(1);
    truncate_by(&segment, 3);

    let damaged = env.run(&["fsck"]);
    assert_eq!(damaged.status.code(), Some(2), "{}", describe(&damaged));
    let text = String::from_utf8_lossy(&damaged.stdout);
    let damage_line = text.lines().find(|l| l.starts_with("unfinished write at the end: ")).expect("a damage line");
    assert!(damage_line.contains(&segment.display().to_string()), "{damage_line}");
    assert!(damage_line.contains("cut short") && damage_line.contains("the next writer"), "{damage_line}");

    let json_run = env.run(&["fsck", "--json"]);
    assert_eq!(json_run.status.code(), Some(2));
    let report: Value = serde_json::from_slice(&json_run.stdout).expect("JSON");
    assert_eq!(report["clean"], false);
    assert_eq!(report["repaired"], false);
    let damage = &report["damage"][0];
    assert_eq!(damage["segment"], segment.to_str().expect("utf-8 path"));
    assert_eq!(damage["at_tail"], true);
    assert!(damage["offset"].as_u64().expect("offset") > 0);
    assert!(damage["reason"].as_str().expect("reason").contains("cut short"));

    let repaired = env.run(&["fsck", "--repair"]);
    assert_eq!(repaired.status.code(), Some(0), "{}", describe(&repaired));
    let text = String::from_utf8_lossy(&repaired.stdout);
    assert!(text.contains("repaired") && text.contains("quarantine") && text.contains("unfinished write"), "{text}");

    let after = env.run(&["fsck"]);
    assert_eq!(after.status.code(), Some(0), "{}", describe(&after));
    assert_eq!(env.json(&["fsck"])["clean"], true);
    // The torn record (the last append) is gone; the rest remain.
    assert_eq!(env.json(&["log", "latest", "f"])["latest"], 4);
}

#[test]
fn a_writer_warns_once_when_it_cuts_a_torn_tail() {
    let env = Env::new();
    env.ok(&["log", "create", "w"]);
    env.ok(&["log", "append", "w", "kept"]);
    env.ok(&["log", "append", "w", "torn"]);
    truncate_by(&env.segment(1), 2);

    // A reader leaves the tail alone and sees what is whole.
    assert_eq!(env.ok(&["log", "scan", "w"]), "1\tkept\n");

    let output = env.run(&["log", "append", "w", "next", "--json"]);
    assert!(output.status.success(), "{}", describe(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "{\"log\":\"w\",\"seq\":2}\n", "stdout stays JSON");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("warning: ") && stderr.contains("torn tail"), "{stderr}");
    assert!(stderr.contains("0000000001.seg") && stderr.contains("quarantine"), "{stderr}");

    // Only once: the tail is gone now.
    let output = env.run(&["log", "append", "w", "again"]);
    assert!(output.status.success() && output.stderr.is_empty(), "{}", describe(&output));
}

/// `varve log scan … | head -1`: when the reader goes away, stop quietly.
#[test]
fn scan_into_a_closed_pipe_exits_quietly() {
    let env = Env::new();
    env.ok(&["log", "create", "big"]);
    // More than a pipe buffer holds, so the scan is still writing when we hang up.
    let entries: Vec<String> = (1..=20_000).map(|i| format!("big=value number {i}")).collect();
    let mut args = vec!["log", "batch"];
    args.extend(entries.iter().map(String::as_str));
    env.ok(&args);
    for json in [false, true] {
        let mut args = vec!["log", "scan", "big"];
        if json {
            args.push("--json");
        }
        let mut child = env.command(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
        let mut first = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut first).expect("first line");
        assert!(first.contains("value number 1"), "{first}");
        // The reader is dropped here: the pipe closes.
        let output = child.wait_with_output().expect("wait");
        assert_eq!(output.status.code(), Some(0), "json {json}: {}", describe(&output));
        assert!(output.stderr.is_empty(), "json {json}: {}", describe(&output));
    }
}

/// Reads run beside writer processes that come and go. (Each writer grows
/// the active segment on open and shrinks it on close; see
/// `commands::read_retrying` for the race this once lost.)
#[test]
fn reads_never_fail_beside_short_lived_writers() {
    let env = Env::new();
    env.ok(&["log", "create", "r"]);
    env.ok(&["log", "append", "r", "v0"]);
    let appends = 60;
    std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            for i in 1..=appends {
                env.ok(&["log", "append", "r", &format!("v{i}")]);
            }
        });
        let mut reads = 0;
        while !writer.is_finished() {
            let latest = env.json(&["log", "latest", "r"])["latest"].as_u64().expect("latest");
            assert!((1..=appends + 1).contains(&latest));
            reads += 1;
        }
        assert!(reads > 0);
    });
    assert_eq!(env.json(&["log", "latest", "r"])["latest"], appends + 1);
}

#[test]
fn fsck_all_checks_every_namespace() {
    let env = Env::new();
    env.ok(&["--ns", "one", "log", "create", "a"]);
    env.ok(&["--ns", "two", "log", "create", "b"]);
    let output = env.ok(&["fsck", "--all", "--json"]);
    let namespaces: Vec<String> = output
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("JSON line")["namespace"].as_str().expect("name").to_owned())
        .collect();
    assert_eq!(namespaces, ["one", "two"]);
    assert!(env.error(&["--ns", "three", "fsck"]).contains("not found"));
}

/// A deleted segment and a flipped byte lose only their records: every
/// command still works on the rest, scans warn and go on, and `fsck
/// --repair` salvages, says which seqs are lost, and exits 0.
#[test]
fn damage_is_local_through_the_cli() {
    let env = Env::new();
    // Write through the library (thousands of CLI processes would be slow),
    // in 64 KiB segments so that several exist.
    {
        let options = JournalOptions {
            segment_bytes_max: 64 << 10,
            sync: varve_log::SyncPolicy::Never,
            ..JournalOptions::default()
        };
        let ns = JournalStore::open(&env.data, options).expect("store").journal_namespace("default").expect("ns");
        ns.create_log("t", varve_log::LogConfig::unbounded()).expect("create");
        for seq in 1..=1500u64 {
            ns.append("t", format!("t record {seq:05} ").repeat(6).as_bytes()).expect("append");
        }
    }
    assert!(env.segment(3).exists());
    std::fs::remove_file(env.segment(2)).expect("delete segment 2");
    let mut first = std::fs::read(env.segment(1)).expect("read");
    let at = first.windows(15).position(|w| w == b"t record 00040 ").expect("seq 40 in segment 1");
    first[at + 3] ^= 0x10;
    std::fs::write(env.segment(1), &first).expect("write");

    let ls = env.run(&["log", "ls"]);
    assert!(ls.status.success(), "{}", describe(&ls));
    assert!(String::from_utf8_lossy(&ls.stderr).contains("has damage"), "a warning line: {}", describe(&ls));
    assert_eq!(env.json(&["log", "latest", "t"])["latest"], 1500);
    assert_eq!(env.ok(&["log", "get", "t", "39"]), format!("{}\n", "t record 00039 ".repeat(6)));
    // The damage warning, then the one error line.
    let last_error = |args: &[&str]| {
        let output = env.run(args);
        assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
        assert_no_panic(&output);
        String::from_utf8_lossy(&output.stderr).lines().last().expect("an error line").to_owned()
    };
    let lost = last_error(&["log", "get", "t", "40"]);
    assert!(lost.contains("seq 40 is lost") && lost.contains("0000000001.seg at byte offset"), "{lost}");
    assert!(last_error(&["log", "get", "t", "1000"]).contains("0000000002.seg"), "names the missing segment");
    let scan = env.run(&["log", "scan", "t"]);
    assert_eq!(scan.status.code(), Some(1), "{}", describe(&scan));
    let printed = String::from_utf8_lossy(&scan.stdout).lines().count();
    let stderr = String::from_utf8_lossy(&scan.stderr);
    assert_eq!(stderr.lines().filter(|l| l.starts_with("warning: log \"t\" seq")).count(), 2, "{stderr}");
    assert!(stderr.lines().last().is_some_and(|l| l.starts_with("error: ") && l.contains("lost")), "{stderr}");
    assert!(printed > 500 && printed < 1500, "the intact records were printed ({printed})");
    assert_eq!(env.ok(&["log", "append", "t", "after"]), "appended t seq 1501\n");

    let check = env.run(&["fsck", "--json"]);
    assert_eq!(check.status.code(), Some(2), "{}", describe(&check));
    let repair = env.run(&["fsck", "--repair", "--json"]);
    assert_eq!(repair.status.code(), Some(0), "{}", describe(&repair));
    let report: Value = serde_json::from_slice(&repair.stdout).expect("JSON");
    assert_eq!(report["repaired"], true);
    let losses = report["losses"].as_array().expect("losses");
    assert_eq!(losses.len(), 2, "{report}");
    assert_eq!((&losses[0]["log"], &losses[0]["first"], &losses[0]["last"]), (&json!("t"), &json!(40), &json!(40)));
    assert!(losses.iter().all(|l| l["recorded"] == true));
    assert!(report["salvaged_records"].as_u64().expect("salvaged") > 0);
    let after = env.run(&["fsck"]);
    assert_eq!(after.status.code(), Some(0), "{}", describe(&after));
    assert!(String::from_utf8_lossy(&after.stdout).contains("recorded in _losses"));
    let ls = env.run(&["log", "ls"]);
    assert!(!String::from_utf8_lossy(&ls.stderr).contains("damage"), "no warning once recorded: {}", describe(&ls));
    assert_eq!(env.ok(&["log", "append", "t", "more"]), "appended t seq 1502\n");
}
