//! `varve pds …` through the real binary: workload generation, runs checked
//! against the model of all versions, dumps, the paper's example, bad input.

use std::path::Path;
use std::process::{Command, Output};

fn varve(data: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_varve")).arg("--data").arg(data).args(args).output().expect("run varve")
}

fn stdout(output: &Output) -> String {
    assert!(output.status.success(), "failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout.clone()).expect("utf-8")
}

#[test]
fn gen_is_deterministic_and_in_the_papers_format() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = stdout(&varve(dir.path(), &["pds", "gen", "--ops", "200", "--seed", "7"]));
    let again = stdout(&varve(dir.path(), &["pds", "gen", "--ops", "200", "--seed", "7"]));
    let other = stdout(&varve(dir.path(), &["pds", "gen", "--ops", "200", "--seed", "8"]));
    assert_eq!(first, again);
    assert_ne!(first, other);
    let mut lines = first.lines();
    assert_eq!(lines.next(), Some("200"));
    for line in lines {
        let (op, value) = line.split_once(' ').expect("op value");
        assert!(op == "0" || op == "1", "{line}");
        assert!((1..=100).contains(&value.parse::<u32>().expect("number")), "{line}");
    }
}

#[test]
fn runs_verify_every_version_for_each_structure() {
    let dir = tempfile::tempdir().expect("tempdir");
    let workload = dir.path().join("w.txt");
    std::fs::write(&workload, stdout(&varve(dir.path(), &["pds", "gen", "--ops", "300", "--seed", "1"])))
        .expect("write");
    for (structure, extra) in [("bst", "1"), ("list", "5"), ("balanced", "10")] {
        let data = dir.path().join(format!("data-{structure}"));
        let args = [
            "--json",
            "pds",
            "run",
            workload.to_str().expect("path"),
            "--structure",
            structure,
            "--extra",
            extra,
            "--verify",
        ];
        let summary: serde_json::Value = serde_json::from_str(&stdout(&varve(&data, &args))).expect("json");
        assert_eq!(summary["verified"], true, "{structure}");
        assert_eq!(summary["ops"], 300);
        let versions = summary["versions"].as_u64().expect("versions");
        let no_ops = summary["no_ops"].as_u64().expect("no_ops");
        assert_eq!(versions + no_ops, 300, "every op is a version or a no-op");
        let micros = |field: &str| summary[field].as_f64().unwrap_or_else(|| panic!("{field} in {summary}"));
        assert!(micros("p50_us") > 0.0 && micros("p50_us") <= micros("p99_us"), "{summary}");
        assert!(micros("p99_us") <= micros("max_us"), "{summary}");
        assert!(
            micros("update_seconds") * 1e6 >= micros("max_us"),
            "the wall time holds the slowest update: {summary}"
        );
    }
}

#[test]
fn dump_prints_every_version_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let workload = dir.path().join("w.txt");
    std::fs::write(&workload, "4\n1 5\n1 3\n0 5\n1 9\n").expect("write");
    let path = workload.to_str().expect("path");
    let text = stdout(&varve(dir.path(), &["pds", "run", path, "--structure", "bst", "--dump", "--name", "a"]));
    assert_eq!(text, "1: [5]\n2: [3, 5]\n3: [3]\n4: [3, 9]\n");
    let list =
        stdout(&varve(dir.path(), &["--json", "pds", "run", path, "--structure", "list", "--dump", "--name", "b"]));
    let versions: Vec<serde_json::Value> = list.lines().map(|l| serde_json::from_str(l).expect("json line")).collect();
    assert_eq!(versions.len(), 4);
    assert_eq!(versions[3], serde_json::json!({"version": 4, "items": [3, 9]}), "the list keeps insertion order");
}

#[test]
fn demo_prints_the_papers_example() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = stdout(&varve(dir.path(), &["pds", "demo"]));
    assert!(text.contains("version 4 (after delete(2)): preorder [7, 5]"), "{text}");
    assert!(text.contains("APLog"));
    // The APLog's last entry: version 4's root is node 1 at LinkLog seq 4.
    assert!(text.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["4", "4", "1", "4"]), "{text}");
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&varve(dir.path(), &["--json", "pds", "demo"]))).expect("json");
    assert_eq!(json["ap_log"].as_array().expect("rows").len(), 4);
    assert_eq!(json["versions"][3]["preorder"], serde_json::json!([7, 5]));
}

#[test]
fn bad_input_is_one_error_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.txt");
    std::fs::write(&bad, "2\n1 5\n7 x\n").expect("write");
    let cases: [&[&str]; 3] = [
        &["pds", "run", bad.to_str().expect("path")],
        &["pds", "run", "/nonexistent/workload.txt"],
        &["pds", "run", bad.to_str().expect("path"), "--structure", "heap"],
    ];
    for args in cases {
        let output = varve(dir.path(), args);
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.starts_with("error: ") && stderr.lines().count() == 1, "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"));
    }
}

/// `varve bench pds --scale --quick` (what `make bench-pds-scale QUICK=1`
/// runs): a row per backend and size, the same log calls on both backends
/// (the structure decides them, not the Log), and the journal's totals.
#[test]
fn the_scale_benchmark_measures_both_backends_at_each_size() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bench = dir.path().join("bench");
    let scale = |extra: &[&str]| {
        let mut args = vec!["bench", "pds", "--scale", "--quick", "--dir", bench.to_str().expect("path")];
        args.extend_from_slice(extra);
        stdout(&varve(dir.path(), &args))
    };
    let text = scale(&[]);
    let table = Table::parse(&text);
    let keys: Vec<(&str, &str)> = table.rows.iter().map(|r| (r[0], r[1])).collect();
    assert_eq!(keys, [("journal", "1000"), ("journal", "4000"), ("memory", "1000"), ("memory", "4000")], "{text}");
    let (calls, disk) = (table.column("log calls / insert"), table.column("disk B / key"));
    for (journal, memory) in table.rows[..2].iter().zip(&table.rows[2..]) {
        assert_eq!(journal[calls], memory[calls], "log calls per insert, journal vs memory:\n{text}");
        let disk: f64 = journal[disk].parse().expect("disk bytes per key");
        assert!(disk > 100.0, "a key costs bytes on disk: {text}");
    }
    // A node cache smaller than the map costs log calls per insert.
    let small = scale(&["--node-cache", "64"]);
    let small_table = Table::parse(&small);
    let per_insert = |t: &Table<'_>| -> f64 { t.rows[1][calls].parse().expect("log calls per insert") };
    assert!(per_insert(&small_table) > per_insert(&table), "{small}\nagainst\n{text}");
    assert!(text.contains("reopen to the first read"), "{text}");
    assert!(!bench.join("pds-scale").exists(), "the journal is removed after the run");
    let output = varve(dir.path(), &["bench", "pds", "--scale", "--quick", "--scale-max", "10"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--scale-max 10 is below"), "a clear error");
}

/// A Markdown table printed by a benchmark: its header and its rows of
/// backend figures, cells trimmed.
struct Table<'t> {
    header: Vec<&'t str>,
    rows: Vec<Vec<&'t str>>,
}

impl<'t> Table<'t> {
    fn parse(text: &'t str) -> Table<'t> {
        let cells = |line: &'t str| line.split('|').map(str::trim).filter(|c| !c.is_empty()).collect::<Vec<_>>();
        let header = cells(text.lines().find(|l| l.starts_with("| backend")).expect("a table header"));
        let rows =
            text.lines().filter(|l| l.starts_with("| journal") || l.starts_with("| memory")).map(cells).collect();
        Table { header, rows }
    }

    fn column(&self, name: &str) -> usize {
        self.header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no column {name:?} in {:?}", self.header))
    }
}
