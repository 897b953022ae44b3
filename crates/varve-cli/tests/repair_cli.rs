//! `varve repair plan` on a real application: a runtime process with
//! external handlers, then the plan of a corrected model record and of a
//! replaced handler, as text, JSON and DOT, and its errors.

mod common;

use serde_json::Value;

use common::{wait_until, Env};

/// `(handler, trigger log, trigger seq)` of each rerun of a `--json` plan.
fn reruns_of(plan: &Value) -> Vec<(String, String, u64)> {
    plan["reruns"]
        .as_array()
        .expect("reruns")
        .iter()
        .map(|r| {
            let trigger = &r["trigger"];
            (
                r["handler"].as_str().expect("handler").to_owned(),
                trigger["log"].as_str().expect("log").to_owned(),
                trigger["seq"].as_u64().expect("seq"),
            )
        })
        .collect()
}

/// `(log, seqs that change)` of a `--json` plan.
fn changed_of(plan: &Value) -> Vec<(String, Vec<u64>)> {
    plan["changed"]
        .as_array()
        .expect("changed")
        .iter()
        .map(|c| {
            (
                c["log"].as_str().expect("log").to_owned(),
                c["seqs"].as_array().expect("seqs").iter().map(|s| s.as_u64().expect("seq")).collect(),
            )
        })
        .collect()
}

#[test]
fn repair_plan_names_the_runs_to_replay_and_the_records_that_change() {
    let env = Env::new();
    let varve = env!("CARGO_BIN_EXE_varve");
    let manifest = env.manifest(&format!(
        r#"
[runtime]
namespace = "app"
sync = "never"
# One worker: predictions land in input order (pred:3 is the third reading's).
concurrency = 1

[[log]]
name = "sens"

[[log]]
name = "model"

[[log]]
name = "pred"

[[handler]]
name = "predict"
log = "sens"
command = ["sh", "-c", "cd /; m=$({varve} log get model 1) && read s; {varve} log append pred \"$s*$m\""]

[[handler]]
name = "alert"
log = "pred"
command = ["sh", "-c", "cat >/dev/null"]
replayable = false
"#
    ));
    let runtime = env.start(&manifest);
    env.ok(&["--ns", "app", "log", "append", "model", "2"]);
    for reading in ["20", "21", "22"] {
        env.ok(&["--ns", "app", "log", "append", "sens", reading]);
    }
    let done = || common::events_of(&env, "app").iter().filter(|e| e["kind"] == "DONE").count();
    wait_until("six DONE", || done() == 6);
    drop(runtime);
    assert_eq!(env.ok(&["--ns", "app", "log", "get", "pred", "3"]).trim(), "22*2");

    let manifest_arg = manifest.to_str().expect("path");
    let dot = env.temp.path().join("plan.dot");
    let plan = env.json(&[
        "--ns",
        "app",
        "repair",
        "plan",
        "--record",
        "model:1",
        "--manifest",
        manifest_arg,
        "--dot",
        dot.to_str().expect("path"),
    ]);
    let reruns = reruns_of(&plan);
    // Each prediction read model:1; each alert's input is a prediction.
    let mut expected = Vec::new();
    for seq in 1..=3 {
        expected.push(("predict".to_owned(), "sens".to_owned(), seq));
    }
    for seq in 1..=3 {
        expected.push(("alert".to_owned(), "pred".to_owned(), seq));
    }
    let mut sorted = reruns.clone();
    sorted.sort();
    let mut want = expected.clone();
    want.sort();
    assert_eq!(sorted, want, "{plan:#}");
    let first_alert = reruns.iter().position(|r| r.0 == "alert").expect("an alert");
    let prediction = reruns.iter().position(|r| r.0 == "predict" && r.2 == 1).expect("predict on sens:1");
    assert!(prediction < first_alert, "causal order: a prediction is replayed before the alert on it");
    let changed = changed_of(&plan);
    assert_eq!(changed, vec![("model".to_owned(), vec![1]), ("pred".to_owned(), vec![1, 2, 3])]);
    assert_eq!(plan["not_replayable"], Value::from(vec!["alert"]));
    assert!(std::fs::read_to_string(&dot).expect("dot").starts_with("digraph repair {"));

    let text = env.ok(&["--ns", "app", "repair", "plan", "--record", "model:1", "--manifest", manifest_arg]);
    assert!(text.contains("6 handler runs to replay"), "{text}");
    assert!(text.contains("[NOT REPLAYABLE]") && text.contains("app/pred: seqs 1..=3 change"), "{text}");

    // A replaced handler: its runs from input seq 2 on, and what they feed.
    let plan = env.json(&["--ns", "app", "repair", "plan", "--handler", "predict", "--since-seq", "2"]);
    let runs: Vec<&str> =
        plan["reruns"].as_array().expect("reruns").iter().map(|r| r["handler"].as_str().expect("h")).collect();
    assert_eq!(runs.iter().filter(|h| **h == "predict").count(), 2, "{plan:#}");
    assert_eq!(runs.iter().filter(|h| **h == "alert").count(), 2, "{plan:#}");

    // Bad input: a clear one-line reason and a non-zero exit.
    let out = env.run(&["--ns", "app", "repair", "plan", "--record", "model"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("expected LOG:SEQ"), "{err}");
}

/// The app of `repair_run…`: `predict` multiplies each reading by model:1
/// (read through the runtime socket), `double` doubles each prediction,
/// `alert` acts on the world.
fn replay_app(env: &Env) -> std::path::PathBuf {
    let varve = env!("CARGO_BIN_EXE_varve");
    env.manifest(&format!(
        r#"
[runtime]
namespace = "app"
sync = "never"
concurrency = 1

[[log]]
name = "sens"

[[log]]
name = "model"

[[log]]
name = "pred"

[[log]]
name = "dbl"

[[handler]]
name = "predict"
log = "sens"
command = ["sh", "-c", "cd /; m=$({varve} log get model 1) && read s; {varve} log append pred \"$s*$m\""]

[[handler]]
name = "double"
log = "pred"
command = ["sh", "-c", "cd /; read p; {varve} log append dbl \"($p)*2\""]

[[handler]]
name = "alert"
log = "dbl"
command = ["sh", "-c", "cat >/dev/null"]
replayable = false
"#
    ))
}

/// Feed `replay_app` with model `model` and three readings; wait until every run is done.
fn feed(env: &Env, manifest: &std::path::Path, model: &str) {
    feed_readings(env, manifest, model, &["20", "21", "22"]);
}

/// Feed `replay_app` with model `model` and `readings`; wait until every run is done.
fn feed_readings(env: &Env, manifest: &std::path::Path, model: &str, readings: &[&str]) {
    let runtime = env.start(manifest);
    env.ok(&["--ns", "app", "log", "append", "model", model]);
    for reading in readings {
        env.ok(&["--ns", "app", "log", "append", "sens", reading]);
    }
    wait_until("every run DONE", || done(env) == 3 * readings.len());
    drop(runtime);
}

fn done(env: &Env) -> usize {
    common::events_of(env, "app").iter().filter(|e| e["kind"] == "DONE").count()
}

fn scan(env: &Env, log: &str) -> String {
    env.ok(&["--ns", "app", "log", "scan", log])
}

#[test]
fn repair_run_replays_command_handlers_and_equals_a_run_from_scratch() {
    let env = Env::new();
    let manifest = replay_app(&env);
    feed(&env, &manifest, "2");
    let (pred_before, dbl_before) = (scan(&env, "pred"), scan(&env, "dbl"));
    assert!(dbl_before.contains("(22*2)*2"), "{dbl_before}");
    let manifest_arg = manifest.to_str().expect("path");
    let repair = ["--ns", "app", "repair", "run", "--record", "model:1", "--value", "3", "--manifest", manifest_arg];

    // The default refuses: alert is not replayable. Nothing changes.
    let out = env.run(&repair);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("replayable = false"), "{err}");
    assert_eq!(scan(&env, "pred"), pred_before);

    let answer = env.json(&[&repair[..], &["--not-replayable", "skip"]].concat());
    assert_eq!(answer["replayed"], 6, "{answer:#}");
    assert_eq!(answer["changed"], 7, "model:1, three predictions, three doubles: {answer:#}");

    // The oracle: a run from scratch with the corrected model holds the same logs.
    let scratch = Env::new();
    let scratch_manifest = replay_app(&scratch);
    feed(&scratch, &scratch_manifest, "3");
    for log in ["model", "sens", "pred", "dbl"] {
        assert_eq!(scan(&env, log), scan(&scratch, log), "{log}");
    }
    assert!(scan(&env, "dbl").contains("(22*3)*2"));
    // The old histories stay readable.
    assert_eq!(scan(&env, "_gen.pred.1"), pred_before);
    assert_eq!(scan(&env, "_gen.dbl.1"), dbl_before);
    // Why is dbl:3 what it is? The trace names the repair and what it corrected.
    let causes = env.ok(&["--ns", "app", "trace", "causes", "dbl", "3"]);
    println!("{causes}");
    assert!(causes.contains("REPAIR") && causes.contains("corrected app/model:1"), "{causes}");
    assert!(causes.contains("old histories kept as _gen.dbl.1"), "{causes}");
    let effects = env.json(&["--ns", "app", "trace", "effects", "model", "1"]);
    let records = effects["records"].as_array().expect("records");
    for log in ["pred", "dbl"] {
        assert!(records.iter().any(|r| r["log"] == log), "{effects:#}");
    }

    // A replaced handler: edit the script, replay it from input seq 2 on.
    let edited = std::fs::read_to_string(&manifest).expect("manifest").replace("\\\"$s*$m\\\"", "\\\"$s*$m+1\\\"");
    assert_ne!(edited, std::fs::read_to_string(&manifest).expect("manifest"), "the edit applies");
    std::fs::write(&manifest, edited).expect("write manifest");
    env.ok(&[
        "--ns",
        "app",
        "repair",
        "run",
        "--handler",
        "predict",
        "--since-seq",
        "2",
        "--manifest",
        manifest_arg,
        "--not-replayable",
        "skip",
    ]);
    let pred = scan(&env, "pred");
    assert!(pred.contains("20*3\n") && pred.contains("21*3+1") && pred.contains("22*3+1"), "{pred}");
    assert!(scan(&env, "dbl").contains("(22*3+1)*2"));

    // A replayed command that fails: the repair is refused with its reason, nothing is swapped.
    let failing = std::fs::read_to_string(&manifest).expect("manifest").replace(
        "command = [\"sh\", \"-c\", \"cd /; read p;",
        "command = [\"sh\", \"-c\", \"echo broken script >&2; exit 3; read p;",
    );
    assert_ne!(failing, std::fs::read_to_string(&manifest).expect("manifest"), "the edit applies");
    let failing_manifest = env.manifest_named("failing.toml", &failing);
    let logs_before = env.ok(&["--ns", "app", "log", "ls"]);
    let out = env.run(&[
        "--ns",
        "app",
        "repair",
        "run",
        "--handler",
        "double",
        "--manifest",
        failing_manifest.to_str().expect("path"),
        "--not-replayable",
        "skip",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("\"double\"") && err.contains("broken script"), "{err}");
    assert_eq!(scan(&env, "pred"), pred);
    let logs_after = env.ok(&["--ns", "app", "log", "ls"]);
    assert_eq!(
        logs_after.lines().filter(|l| l.contains("_gen.")).count(),
        logs_before.lines().filter(|l| l.contains("_gen.")).count(),
        "no new generation: {logs_after}"
    );
    assert!(!logs_after.contains("_shadow."), "a refused repair removes its shadows: {logs_after}");

    // Bad input: a clear reason, nothing changed.
    let out = env.run(&["--ns", "app", "repair", "run", "--record", "model:1", "--manifest", manifest_arg]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--value"), "{}", String::from_utf8_lossy(&out.stderr));
    let out =
        env.run(&["--ns", "app", "repair", "run", "--record", "model:9", "--value", "1", "--manifest", manifest_arg]);
    assert!(!out.status.success());
    assert_eq!(scan(&env, "pred"), pred);
}

#[test]
fn repair_run_while_varve_run_serves_is_made_by_it_online_and_loses_no_append() {
    let env = Env::new();
    let manifest = replay_app(&env);
    feed(&env, &manifest, "2");
    let pred_before = scan(&env, "pred");
    let manifest_arg = manifest.to_str().expect("path");
    let runtime = env.start(&manifest);
    let later: Vec<String> = (23..=32).map(|n| n.to_string()).collect();
    // Readings keep arriving while `varve run` repairs.
    let answer = std::thread::scope(|scope| {
        let appender = scope.spawn(|| {
            for reading in &later {
                env.ok(&["--ns", "app", "log", "append", "sens", reading]);
            }
        });
        let answer = env.json(&[
            "--ns",
            "app",
            "repair",
            "run",
            "--record",
            "model:1",
            "--value",
            "3",
            "--manifest",
            manifest_arg,
            "--not-replayable",
            "skip",
        ]);
        appender.join().expect("appender");
        answer
    });
    println!("{answer:#}");
    assert!(answer["replayed"].as_u64().expect("replayed") >= 6, "{answer:#}");
    assert!(answer["paused_ms"].as_f64().expect("paused_ms") >= 0.0, "{answer:#}");
    assert!(answer["swapped"].as_str().expect("swapped").contains("app/pred (old: _gen.pred.1)"), "{answer:#}");
    // Every reading appended is handled, before or after the swap.
    wait_until("every run DONE", || done(&env) == 3 * (3 + later.len()));
    drop(runtime);

    // The oracle: a run from scratch with the corrected model and every reading.
    let scratch = Env::new();
    let scratch_manifest = replay_app(&scratch);
    let mut readings = vec!["20", "21", "22"];
    readings.extend(later.iter().map(String::as_str));
    feed_readings(&scratch, &scratch_manifest, "3", &readings);
    for log in ["model", "sens", "pred", "dbl"] {
        assert_eq!(scan(&env, log), scan(&scratch, log), "{log}");
    }
    // The predictions before the repair stay readable, as they were.
    assert!(scan(&env, "_gen.pred.1").starts_with(&pred_before), "{}", scan(&env, "_gen.pred.1"));
    let causes = env.ok(&["--ns", "app", "trace", "causes", "dbl", "3"]);
    assert!(causes.contains("REPAIR") && causes.contains("corrected app/model:1"), "{causes}");

    // A repair `varve run` refuses comes back with its reason; nothing changes.
    let runtime = env.start(&manifest);
    let pred = scan(&env, "pred");
    let out =
        env.run(&["--ns", "app", "repair", "run", "--record", "model:1", "--value", "4", "--manifest", manifest_arg]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("replayable = false") && err.contains("varve run"), "{err}");
    assert_eq!(scan(&env, "pred"), pred);
    drop(runtime);
}

/// The manifest of the app the interrupted-repair tests run: namespace
/// `default`, one log `notes`, no handler.
const NOTES_APP: &str = r#"
[runtime]
namespace = "default"

[[log]]
name = "notes"
"#;

/// An `Env` whose namespace `default` holds `notes` = a, b, c (appended
/// through `varve run`, so with their events) and a repair of `notes:2` to
/// `B` that died after its intent and before its swap (the state a crash
/// leaves: made by a repair whose writes stop from one point on, over the
/// real journal); and the app's manifest.
fn env_with_an_interrupted_repair() -> (Env, std::path::PathBuf) {
    use std::collections::{HashMap, HashSet};
    use std::sync::Arc;

    use varve_log::{JournalOptions, JournalStore, Namespace, SeqRange};
    use varve_pds::testing::FaultyNamespace;
    use varve_repair::{Correction, Inputs, NotReplayable, RepairPlan, REPAIRS_LOG};
    use varve_runtime::trace::RecordRef;

    // Stop before write k, k = 0, 1, …: the first k that leaves an intent without a swap.
    for k in 0..64 {
        let env = Env::new();
        let manifest = env.manifest(NOTES_APP);
        let running = env.start_in(&manifest, "default");
        for note in ["a", "b", "c"] {
            env.ok(&["log", "append", "notes", note]);
        }
        drop(running);
        let store = JournalStore::open(&env.data, JournalOptions::default()).expect("store");
        let journal: Arc<dyn Namespace> = Arc::new(store.journal_namespace("default").expect("ns"));
        let events = varve_runtime::namespace_events(journal.as_ref(), SeqRange::ALL).expect("events");
        assert!(!events.is_empty(), "the appends went through the runtime");
        let faulty = FaultyNamespace::new(Arc::clone(&journal));
        faulty.stop_at(faulty.writes() + k);
        let ns: Arc<dyn Namespace> = faulty.clone();
        let record = RecordRef { namespace: "default".into(), log: "notes".into(), seq: 2 };
        let plan = RepairPlan::build(&events, &[Correction::Record(record.clone())], &HashSet::new());
        let namespaces = HashMap::from([("default".to_owned(), ns)]);
        let values = HashMap::from([(record, b"B".to_vec())]);
        let handlers = HashMap::new();
        let inputs = Inputs {
            events: &events,
            namespaces: &namespaces,
            handlers: &handlers,
            values: &values,
            not_replayable: NotReplayable::Refuse,
        };
        let result = varve_repair::execute(&plan, &inputs);
        assert!(result.is_err() || !faulty.stopped(), "k {k}: stopped, yet the repair says done");
        let logs: Vec<String> = journal.list_logs().expect("logs").into_iter().map(|l| l.name).collect();
        let intent = logs.iter().any(|l| l == REPAIRS_LOG) && journal.latest(REPAIRS_LOG).expect("latest") >= 1;
        let swapped = logs.iter().any(|l| l == "_gen.notes.1");
        assert!(!faulty.stopped() || !swapped || intent, "k {k}: swapped without an intent");
        drop((namespaces, journal, faulty, store));
        if intent && !swapped {
            assert_eq!(env.ok(&["log", "scan", "notes"]).lines().count(), 3);
            assert_eq!(env.ok(&["log", "get", "notes", "2"]).trim(), "b", "not repaired yet");
            return (env, manifest);
        }
        assert!(result.is_err(), "k {k}: the repair finished before any stop left an intent without its swap");
    }
    panic!("no stop point between the intent and the swap");
}

/// `varve repair resume` finishes a repair that died before its swap: the
/// corrected record in place, the old history kept; a second resume finds
/// nothing.
#[test]
fn repair_resume_finishes_a_repair_that_died_before_its_swap() {
    let (env, _) = env_with_an_interrupted_repair();
    let out = env.ok(&["repair", "resume"]);
    assert!(out.contains("finished the interrupted repair") && out.contains("swapped now"), "{out}");
    assert!(out.contains("notes (old: _gen.notes.1)"), "{out}");
    assert_eq!(env.ok(&["log", "get", "notes", "2"]).trim(), "B");
    assert_eq!(env.ok(&["log", "get", "_gen.notes.1", "2"]).trim(), "b");
    assert_eq!(env.ok(&["repair", "resume"]).trim(), "no interrupted repair in default");
    let json = env.json(&["repair", "resume"]);
    assert_eq!(json["resumed"].as_array().map(Vec::len), Some(0), "{json}");
}

/// `varve run` finishes an interrupted repair as it starts, before the
/// application appends again.
#[test]
fn varve_run_finishes_an_interrupted_repair_as_it_starts() {
    let (env, manifest) = env_with_an_interrupted_repair();
    let running = env.start_in(&manifest, "default");
    assert_eq!(env.ok(&["log", "get", "notes", "2"]).trim(), "B");
    assert_eq!(env.ok(&["log", "get", "_gen.notes.1", "2"]).trim(), "b");
    drop(running);
    assert_eq!(env.ok(&["repair", "resume"]).trim(), "no interrupted repair in default");
}

/// The same `varve repair run` asked again after its crash finishes the
/// interrupted repair and stops there: no second generation.
#[test]
fn repair_run_asked_again_after_a_crash_finishes_it_instead_of_repeating_it() {
    let (env, manifest) = env_with_an_interrupted_repair();
    let manifest = manifest.to_str().expect("path");
    let out = env.ok(&["repair", "run", "--record", "notes:2", "--value", "B", "--manifest", manifest]);
    assert!(out.contains("finished the interrupted repair"), "{out}");
    assert!(out.contains("that was this repair, interrupted: nothing more to do"), "{out}");
    assert_eq!(env.ok(&["log", "get", "notes", "2"]).trim(), "B");
    let logs = env.ok(&["log", "ls"]);
    assert!(logs.contains("_gen.notes.1") && !logs.contains("_gen.notes.2"), "{logs}");
    // Another value is another repair: finished first, then made.
    let out = env.ok(&["repair", "run", "--record", "notes:2", "--value", "C", "--manifest", manifest]);
    assert!(out.contains("swapped atomically"), "{out}");
    assert_eq!(env.ok(&["log", "get", "notes", "2"]).trim(), "C");
    assert_eq!(env.ok(&["log", "get", "_gen.notes.2", "2"]).trim(), "B");
}

/// A script handler that scans a log (`varve log scan` inside the handler)
/// reads through the runtime: each scan is recorded as a ranged READ, and a
/// repair's replay of the script sees the history the original run saw —
/// so the repaired running totals equal a run from scratch.
#[test]
fn a_scanning_script_is_recorded_and_replayed_with_the_history_it_saw() {
    let varve = env!("CARGO_BIN_EXE_varve");
    let app = |env: &Env| {
        env.manifest(&format!(
            r#"
[runtime]
namespace = "app"
sync = "never"
concurrency = 1

[[log]]
name = "sens"

[[log]]
name = "total"

[[handler]]
name = "total"
log = "sens"
command = ["sh", "-c", "cd /; cat >/dev/null; s=0; for v in $({varve} log scan sens | cut -f2); do s=$((s+v)); done; {varve} log append total \"$s\""]
"#
        ))
    };
    let feed = |env: &Env, readings: &[&str]| {
        let manifest = app(env);
        let runtime = env.start(&manifest);
        for (i, reading) in readings.iter().enumerate() {
            env.ok(&["--ns", "app", "log", "append", "sens", reading]);
            // One reading at a time: each run scans exactly the readings before it.
            wait_until("the run is DONE", || done(env) == i + 1);
        }
        drop(runtime);
        manifest
    };
    let env = Env::new();
    let manifest = feed(&env, &["10", "20", "30", "40"]);
    assert_eq!(scan(&env, "total"), "1\t10\n2\t30\n3\t60\n4\t100\n");
    let reads: Vec<(u64, u64)> = common::events_of(&env, "app")
        .iter()
        .filter(|e| e["kind"] == "READ" && e["log"] == "sens")
        .map(|e| {
            let seq = e["seq"].as_u64().expect("seq");
            (seq, e["seq_last"].as_u64().unwrap_or(seq)) // seq_last only when it differs
        })
        .collect();
    assert_eq!(reads, [(1, 1), (1, 2), (1, 3), (1, 4)], "one ranged READ per scan");

    let manifest_arg = manifest.to_str().expect("path");
    env.ok(&["--ns", "app", "repair", "run", "--record", "sens:2", "--value", "25", "--manifest", manifest_arg]);
    let scratch = Env::new();
    feed(&scratch, &["10", "25", "30", "40"]);
    assert_eq!(scan(&env, "total"), scan(&scratch, "total"));
    assert_eq!(scan(&env, "total"), "1\t10\n2\t35\n3\t65\n4\t105\n");
    assert_eq!(scan(&env, "_gen.total.1"), "1\t10\n2\t30\n3\t60\n4\t100\n");
}

/// `varve log info` inside a script handler takes its latest seq from the
/// runtime (a recorded LATEST, answered in a replay as the original run
/// saw it), and `varve log tail` — which follows until interrupted — is
/// refused at once with what to use instead, rather than hanging the run.
#[test]
fn a_script_reading_log_info_is_recorded_and_one_calling_log_tail_is_refused() {
    let varve = env!("CARGO_BIN_EXE_varve");
    let app = |env: &Env| {
        env.manifest(&format!(
            r#"
[runtime]
namespace = "app"
sync = "never"
concurrency = 1

[[log]]
name = "sens"

[[log]]
name = "count"

[[log]]
name = "follow"

[[handler]]
name = "count"
log = "sens"
command = ["sh", "-c", "cd /; cat >/dev/null; n=$({varve} --json log info sens | sed 's/.*\"latest\":\\([0-9]*\\).*/\\1/'); {varve} log append count \"$n\""]

[[handler]]
name = "tail"
log = "follow"
command = ["sh", "-c", "cd /; cat >/dev/null; {varve} log tail sens"]
attempts = 1
"#
        ))
    };
    let env = Env::new();
    let manifest = app(&env);
    let runtime = env.start(&manifest);
    for (i, reading) in ["10", "20", "30"].iter().enumerate() {
        env.ok(&["--ns", "app", "log", "append", "sens", reading]);
        wait_until("the run is DONE", || done(&env) == i + 1);
    }
    assert_eq!(scan(&env, "count"), "1\t1\n2\t2\n3\t3\n");
    let latest_reads =
        common::events_of(&env, "app").iter().filter(|e| e["kind"] == "LATEST" && e["log"] == "sens").count();
    assert_eq!(latest_reads, 3, "each `log info` recorded as a LATEST of sens");

    env.ok(&["--ns", "app", "log", "append", "follow", "x"]);
    wait_until("the tail run FAILED", || {
        common::events_of(&env, "app").iter().any(|e| e["kind"] == "FAILED" && e["handler"] == "tail")
    });
    let events = common::events_of(&env, "app");
    let failed = events.iter().find(|e| e["kind"] == "FAILED" && e["handler"] == "tail").expect("FAILED");
    let reason = failed["reason"].as_str().expect("reason");
    assert!(reason.contains("`varve log tail` follows sens until interrupted"), "{reason}");
    drop(runtime);

    // A repair replays `count` with the LATEST it recorded: the counts stay.
    let manifest_arg = manifest.to_str().expect("path");
    env.ok(&["--ns", "app", "repair", "run", "--record", "sens:2", "--value", "25", "--manifest", manifest_arg]);
    assert_eq!(scan(&env, "count"), "1\t1\n2\t2\n3\t3\n");
    assert_eq!(scan(&env, "sens"), "1\t10\n2\t25\n3\t30\n");
}

/// An app whose command handler builds a sorted map (`varve sorted-map`
/// inside the handler): each input `KEY=VALUE` is put, then the whole map
/// is written to `totals` — a read of the map after its own put.
fn map_app(env: &Env) -> std::path::PathBuf {
    let varve = env!("CARGO_BIN_EXE_varve");
    env.manifest(&format!(
        r#"
[runtime]
namespace = "app"
sync = "never"
concurrency = 1

[[log]]
name = "in"

[[log]]
name = "prices"

[[log]]
name = "totals"

[[handler]]
name = "index"
log = "in"
command = ["sh", "-c", "cd /; read r; {varve} sorted-map put prices \"$r\" >/dev/null && m=$({varve} sorted-map ls prices | tr '\\t\\n' '=,') && {varve} log append totals \"$m\""]
"#
    ))
}

fn feed_map(env: &Env, manifest: &std::path::Path, inputs: &[&str]) {
    let runtime = env.start(manifest);
    for input in inputs {
        env.ok(&["--ns", "app", "log", "append", "in", input]);
    }
    wait_until("every run DONE", || done(env) == inputs.len());
    drop(runtime);
}

#[test]
fn repair_run_repairs_a_map_a_command_handler_built_and_keeps_the_old_one() {
    let env = Env::new();
    let manifest = map_app(&env);
    feed_map(&env, &manifest, &["a=1", "b=2", "a=3", "c=4"]);
    let totals_before = scan(&env, "totals");
    assert!(totals_before.contains("a=3,b=2,c=4,"), "{totals_before}");
    let old = env.ok(&["--ns", "app", "map", "ls", "map.prices.s1"]);

    let manifest_arg = manifest.to_str().expect("path");
    let answer =
        env.json(&["--ns", "app", "repair", "run", "--record", "in:2", "--value", "b=20", "--manifest", manifest_arg]);
    assert_eq!(answer["replayed"], 3, "in:2, in:3 and in:4 read the map after op 2: {answer:#}");

    // The oracle: a run from scratch with the corrected input.
    let scratch = Env::new();
    let scratch_manifest = map_app(&scratch);
    feed_map(&scratch, &scratch_manifest, &["a=1", "b=20", "a=3", "c=4"]);
    for log in ["in", "prices", "totals"] {
        assert_eq!(scan(&env, log), scan(&scratch, log), "{log}");
    }
    // Through a runtime, the map is the repaired one (generation 2, built
    // at this first access); the old history's map is still there.
    let runtime = env.start(&manifest);
    assert_eq!(env.ok(&["--ns", "app", "sorted-map", "ls", "prices"]), "a\t3\nb\t20\nc\t4\n");
    assert_eq!(env.ok(&["--ns", "app", "sorted-map", "get", "prices", "b"]).trim(), "20");
    // Outside a handler, through the running runtime: an rm is an op too.
    assert_eq!(env.ok(&["--ns", "app", "sorted-map", "rm", "prices", "c"]).trim(), "prices:5");
    let out = env.run(&["--ns", "app", "sorted-map", "get", "prices", "c"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("has no key \"c\""), "{out:?}");
    assert_eq!(env.ok(&["--ns", "app", "sorted-map", "ls", "prices", "--from", "b"]), "b\t20\n");
    drop(runtime);
    assert_eq!(env.ok(&["--ns", "app", "map", "ls", "map.prices.s1"]), old);
    assert!(old.contains("b\t2\n"), "{old}");
    assert!(env.ok(&["--ns", "app", "map", "ls", "map.prices.s2"]).ends_with("\na\t3\nb\t20\n"), "after the rm of c");
    // Without a runtime, a clear reason.
    let out = env.run(&["--ns", "app", "sorted-map", "ls", "prices"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("varve run") && stderr.contains("varve map ls map.LOG.sK"), "{stderr}");
}
