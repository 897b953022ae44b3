//! The repair half end to end (Sans-Souci §7.4.1), through the binary on a
//! journal: a run with a device reporting °F for a day and a reference-sensor
//! outage, then `temperature repair`. The oracle: the repaired directory
//! holds, log for log and byte for byte, what a run from scratch on the true
//! data holds; the old predictions stay readable, unchanged, in
//! `_gen.prediction.1`; the check passes; the error improves; a second repair
//! finds nothing to do.

mod common;

use common::temperature;
use std::path::Path;
use std::process::Command;

use varve_example_temperature::app::PREDICTION;
use varve_example_temperature::{check, repair};
use varve_log::{JournalOptions, JournalStore, Namespace, SeqRange};

fn records(dir: &Path, log: &str) -> Vec<bytes::Bytes> {
    let store = JournalStore::open(dir, JournalOptions { read_only: true, ..JournalOptions::default() }).expect("open");
    let ns = store.journal_namespace("temperature").expect("namespace");
    ns.scan(log, SeqRange::ALL).expect("scan").map(|r| r.expect("record").value).collect()
}

#[test]
fn a_repaired_run_equals_a_run_from_scratch_on_the_true_data() {
    let dir = tempfile::tempdir().expect("temp dir");
    let faulty = dir.path().join("faulty");
    let scratch = dir.path().join("scratch");
    let (faulty_s, scratch_s) = (faulty.to_str().expect("utf-8"), scratch.to_str().expect("utf-8"));
    let common = ["--days", "2", "--devices", "3", "--seed", "7"];

    let out =
        temperature(&[&["run", "--data", faulty_s, "--fahrenheit", "2:1", "--outage", "20:5"][..], &common].concat());
    assert!(out.contains("device 2 reported °F during day 1"), "{out}");
    let before = records(&faulty, PREDICTION);
    let error_before = check::Outputs::read(&faulty).expect("read").prediction_error().expect("predictions");
    assert!(check::check(&faulty).expect("check").is_consistent(), "a faulty run is consistent with what it published");
    temperature(&[&["run", "--data", scratch_s][..], &common].concat());
    let differing = repair::differing_logs(&faulty, &scratch).expect("compare");
    for log in ["cpu_raw.2", "env_raw", "cpu_smooth.2", "env_smooth", "model", "prediction"] {
        assert!(differing.contains(&log.to_owned()), "the faults change {log}: {differing:?}");
    }
    assert!(!differing.contains(&"cpu_raw.0".to_owned()), "{differing:?}");

    let out = temperature(&["repair", "--data", faulty_s]);
    println!("{out}");
    assert!(out.contains("corrected"), "{out}");
    assert_eq!(repair::differing_logs(&faulty, &scratch).expect("compare"), Vec::<String>::new(), "{out}");

    // The old history is kept, unchanged, as a generation.
    assert_eq!(repair::generations_of(&faulty, PREDICTION).expect("list"), ["_gen.prediction.1"]);
    assert_eq!(records(&faulty, "_gen.prediction.1"), before);
    let outputs = check::Outputs::read(&faulty).expect("read");
    let error_after = outputs.prediction_error().expect("predictions");
    println!("error before {error_before:?}, after {error_after:?}");
    assert!(error_after.mean_abs < error_before.mean_abs, "before {error_before:?}, after {error_after:?}");
    let report = check::check_outputs(&outputs);
    assert!(report.is_consistent(), "{report}");

    // Why is a repaired prediction what it is? Its causes include the REPAIR, caused by a corrected reading.
    let changed = (1..=before.len()).find(|&i| records(&faulty, PREDICTION)[i - 1] != before[i - 1]).expect("a change");
    let graph = varve_runtime::trace::CausalGraph::new(&outputs.events);
    let causes = graph.ancestors("temperature", PREDICTION, changed as u64);
    let repair = causes.iter().find(|e| e.event.kind == varve_runtime::EventKind::Repair).expect("a REPAIR cause");
    assert!(repair.event.reason.contains("corrected temperature/cpu_raw.2:"), "{}", repair.event.reason);
    assert!(repair.event.reason.contains("_gen.prediction.1"), "{}", repair.event.reason);
    let replaced: u64 = repair.event.replaced().map(|(_, a, b)| b - a + 1).sum();
    let report: repair::RepairReport =
        serde_json::from_slice(&std::fs::read(faulty.join(repair::REPAIR_FILE)).expect("repair.json")).expect("json");
    assert_eq!(replaced, report.changed, "the REPAIR names every record it changed");

    let again = temperature(&["repair", "--data", faulty_s]);
    assert!(again.contains("nothing to repair"), "{again}");
    assert_eq!(repair::generations_of(&faulty, PREDICTION).expect("list"), ["_gen.prediction.1"]);
}

#[test]
fn a_repair_is_refused_while_the_directory_is_in_use_or_not_there() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("missing");
    let output = Command::new(env!("CARGO_BIN_EXE_temperature"))
        .args(["repair", "--data", missing.to_str().expect("utf-8")])
        .output()
        .expect("run");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("temperature run"), "{stderr}");

    // A writer holds the namespace (as a running `temperature run` would): the repair is refused, nothing changes.
    let data = dir.path().join("data");
    temperature(&[
        "run",
        "--data",
        data.to_str().expect("utf-8"),
        "--days",
        "1",
        "--devices",
        "1",
        "--fahrenheit",
        "0:0",
    ]);
    let before = records(&data, PREDICTION);
    let store = JournalStore::open(&data, JournalOptions::default()).expect("open");
    let writer = store.journal_namespace("temperature").expect("namespace");
    let output = Command::new(env!("CARGO_BIN_EXE_temperature"))
        .args(["repair", "--data", data.to_str().expect("utf-8")])
        .output()
        .expect("run");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("still running"), "{stderr}");
    drop(writer);
    drop(store);
    assert_eq!(records(&data, PREDICTION), before);
    assert!(repair::generations_of(&data, PREDICTION).expect("list").is_empty());
}

#[test]
fn bench_repair_checks_the_repair_against_a_run_from_scratch() {
    let dir = tempfile::tempdir().expect("temp dir");
    let work = dir.path().join("work");
    let out = temperature(&[
        "bench-repair",
        "--days",
        "2",
        "--devices",
        "2",
        "--fahrenheit",
        "0:1",
        "--outage",
        "40:3",
        "--runs",
        "1",
        "--work",
        work.to_str().expect("utf-8"),
    ]);
    assert!(out.contains("logs identical"), "{out}");
    assert!(out.contains("median of 1: repair"), "{out}");
    assert!(!work.exists(), "the bench removes its directories");
}
