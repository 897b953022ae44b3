//! `varve map`, `varve set` and `varve part` through the real binary on a
//! temporary data directory: values at old versions, versions and diffs,
//! ranges, PART batches, checkpoints and reopening across invocations,
//! `--json` shapes, and every bad input as a one-line error.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{json, Value};

fn varve(data: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_varve"))
        .arg("--data")
        .arg(data)
        .args(args)
        .env_remove("VARVE_DATA")
        .env_remove("VARVE_STORE")
        .env_remove("VARVE_NAMESPACE")
        .output()
        .expect("run varve")
}

/// stdout of a run that must succeed.
fn ok(data: &Path, args: &[&str]) -> String {
    let out = varve(data, args);
    assert!(out.status.success(), "varve {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8").trim_end().to_owned()
}

/// The JSON answer of a run that must succeed.
fn json(data: &Path, args: &[&str]) -> Value {
    let mut with_json = vec!["--json"];
    with_json.extend_from_slice(args);
    let text = ok(data, &with_json);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("varve {args:?}: {e}: {text}"))
}

/// The error of a run that must fail: exit code 1, one line `error: …` on
/// stderr, no panic; returns the line.
fn fails(data: &Path, args: &[&str]) -> String {
    let out = varve(data, args);
    let stderr = String::from_utf8(out.stderr).expect("utf-8");
    assert_eq!(out.status.code(), Some(1), "varve {args:?} should fail with 1: {stderr}");
    assert!(!stderr.contains("panicked") && !stderr.contains("backtrace"), "varve {args:?} panicked: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "varve {args:?}: one line on stderr, not {stderr:?}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    lines[0].to_owned()
}

#[test]
fn map_reads_old_versions_lists_versions_and_diffs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    ok(data, &["map", "put", "cities", "fr=Paris", "de=Berlin", "it=Rome"]);
    ok(data, &["map", "put", "cities", "fr=Lyon", "es=Madrid"]);
    ok(data, &["map", "rm", "cities", "de"]);

    assert_eq!(ok(data, &["map", "get", "cities", "fr", "--at", "1"]), "Paris");
    assert_eq!(ok(data, &["map", "get", "cities", "fr"]), "Lyon");
    assert_eq!(ok(data, &["map", "get", "cities", "de", "--at", "5"]), "Berlin");
    let listing = json(data, &["map", "ls", "cities", "--at", "3"]);
    assert_eq!(
        listing,
        json!({"map": "cities", "version": 3, "entries": [["de", "Berlin"], ["fr", "Paris"], ["it", "Rome"]]})
    );

    let versions = json(data, &["map", "versions", "cities"]);
    assert_eq!(versions["latest"], 6);
    assert_eq!(
        versions["versions"],
        json!([
            {"version": 1, "op": "put", "key": "fr", "value": "Paris"},
            {"version": 2, "op": "put", "key": "de", "value": "Berlin"},
            {"version": 3, "op": "put", "key": "it", "value": "Rome"},
            {"version": 4, "op": "put", "key": "fr", "value": "Lyon"},
            {"version": 5, "op": "put", "key": "es", "value": "Madrid"},
            {"version": 6, "op": "rm", "key": "de"},
        ])
    );
    let last_two = json(data, &["map", "versions", "cities", "--limit", "2"]);
    let listed: Vec<u64> =
        last_two["versions"].as_array().expect("versions").iter().map(|v| v["version"].as_u64().expect("n")).collect();
    assert_eq!(listed, [5, 6]);
    let text = ok(data, &["map", "versions", "cities"]);
    assert!(text.starts_with("map cities: versions 1..=6") && text.contains("6\trm de"), "{text}");

    let diff = json(data, &["map", "diff", "cities", "3", "6"]);
    assert_eq!(
        diff,
        json!({
            "map": "cities", "from": 3, "to": 6,
            "added": [["es", "Madrid"]],
            "removed": [["de", "Berlin"]],
            "changed": [{"key": "fr", "old": "Paris", "new": "Lyon"}],
        })
    );
    let text = ok(data, &["map", "diff", "cities", "3", "6"]);
    assert!(
        text.contains("+ es=Madrid") && text.contains("- de=Berlin") && text.contains("~ fr: Paris -> Lyon"),
        "{text}"
    );
}

#[test]
fn map_ls_selects_ranges_prefixes_and_limits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    ok(data, &["map", "put", "m", "apple=1", "apricot=2", "banana=3", "cherry=4", "date=5"]);
    let keys = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["map", "ls", "m"];
        all.extend_from_slice(args);
        let listing = json(data, &all);
        listing["entries"].as_array().expect("entries").iter().map(|e| e[0].as_str().expect("key").to_owned()).collect()
    };
    assert_eq!(keys(&[]), ["apple", "apricot", "banana", "cherry", "date"]);
    assert_eq!(keys(&["--prefix", "ap"]), ["apple", "apricot"]);
    assert_eq!(keys(&["--from", "b", "--to", "cherry"]), ["banana", "cherry"]);
    assert_eq!(keys(&["--from", "apricot", "--limit", "2"]), ["apricot", "banana"]);
    assert_eq!(keys(&["--prefix", "ap", "--at", "1"]), ["apple"]);
    assert!(keys(&["--prefix", "zz"]).is_empty());
}

#[test]
fn set_adds_removes_and_reads_versions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    let added = json(data, &["set", "add", "tags", "red"]);
    assert_eq!(added, json!({"set": "tags", "op": "add", "key": "red", "version": 1}));
    ok(data, &["set", "add", "tags", "green", "blue", "red"]); // red again: no new version
    ok(data, &["set", "rm", "tags", "green"]);

    assert_eq!(ok(data, &["set", "has", "tags", "green"]), "false");
    assert_eq!(ok(data, &["set", "has", "tags", "green", "--at", "2"]), "true");
    assert_eq!(json(data, &["set", "has", "tags", "blue"]), json!({"set": "tags", "key": "blue", "present": true}));
    assert_eq!(ok(data, &["set", "ls", "tags"]), "set tags at version 4: 2 key(s)\nblue\nred");
    assert_eq!(json(data, &["set", "ls", "tags", "--at", "3"])["entries"], json!(["blue", "green", "red"]));
    assert_eq!(json(data, &["set", "ls", "tags", "--prefix", "b"])["entries"], json!(["blue"]));

    let versions = json(data, &["set", "versions", "tags"]);
    assert_eq!(versions["latest"], 4);
    assert_eq!(versions["versions"][3], json!({"version": 4, "op": "rm", "key": "green"}));
    assert_eq!(versions["versions"][2], json!({"version": 3, "op": "add", "key": "blue"}));
    let diff = json(data, &["set", "diff", "tags", "1", "4"]);
    assert_eq!(diff, json!({"set": "tags", "from": 1, "to": 4, "added": ["blue"], "removed": []}));
    assert_eq!(json(data, &["set", "diff", "tags", "3", "4"])["removed"], json!(["green"]));
}

#[test]
fn part_batches_survive_reopening_and_checkpoints_move_the_replay_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    let put = json(data, &["part", "put", "inv", "apple=3", "apricot=5", "banana=7"]);
    assert_eq!(put, json!({"part": "inv", "batch": 1, "batch_log": "inv.batches.1", "keys": 3, "entries": 3}));
    ok(data, &["part", "rm", "inv", "banana"]);
    // Each invocation opens the map again from the logs.
    assert_eq!(ok(data, &["part", "get", "inv", "apple"]), "3");
    assert_eq!(json(data, &["part", "get", "inv", "apricot"]), json!({"key": "apricot", "value": "5"}));
    assert_eq!(ok(data, &["part", "scan", "inv"]), "apple\t3\napricot\t5");

    let info = json(data, &["part", "info", "inv"]);
    assert_eq!(info["entries"], 2);
    assert_eq!(info["checkpoints_kept"], json!([]));
    assert_eq!(info["replay"], json!({"log": "inv.batches.1", "from_seq": 1, "batches": 2}));

    let first = json(data, &["part", "checkpoint", "inv"]);
    assert_eq!(first["full"], true, "the first checkpoint is full: {first}");
    for field in ["generation", "blobs", "records", "blob_bytes", "manifest_bytes", "reused", "deltas"] {
        assert!(first[field].is_u64(), "{field} in {first}");
    }
    let generation = first["generation"].as_u64().expect("generation");
    let info = json(data, &["part", "info", "inv"]);
    let batches = format!("inv.batches.{generation}");
    assert_eq!(info["replay"], json!({"log": batches, "from_seq": 1, "batches": 0}), "nothing left to replay");

    ok(data, &["part", "put", "inv", "cherry=11"]);
    ok(data, &["part", "put", "inv", "date=13", "apple=4"]);
    assert_eq!(json(data, &["part", "info", "inv"])["replay"], json!({"log": batches, "from_seq": 1, "batches": 2}));
    let second = json(data, &["part", "checkpoint", "inv"]);
    assert_eq!(second["full"], false, "{second}");
    let info = json(data, &["part", "info", "inv"]);
    assert_eq!(
        info["replay"],
        json!({"log": batches, "from_seq": 3, "batches": 0}),
        "the replay start moved past both batches"
    );
    let kept = info["checkpoints_kept"].as_array().expect("kept");
    assert_eq!(kept.len(), 2);
    assert_eq!(kept[1]["manifest_seq"], 2);
    assert_eq!(kept[1]["batch_seq"], 2);
    assert_eq!(kept[1]["full"], false);

    // After the checkpoint, the data still reads back whole.
    let lines: Vec<Value> = ok(data, &["--json", "part", "scan", "inv", "--from", "apricot"])
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(
        lines,
        [
            json!({"key": "apricot", "value": "5"}),
            json!({"key": "cherry", "value": "11"}),
            json!({"key": "date", "value": "13"})
        ]
    );
    assert_eq!(ok(data, &["part", "get", "inv", "apple"]), "4");
    assert_eq!(ok(data, &["part", "scan", "inv", "--prefix", "ap", "--limit", "1"]), "apple\t4");
    assert_eq!(ok(data, &["part", "scan", "inv", "--to", "b"]), "apple\t4\napricot\t5");

    let full = json(data, &["part", "checkpoint", "inv", "--full"]);
    assert_eq!(full["full"], true);
    assert!(full["generation"].as_u64().expect("generation") > generation);
    assert_eq!(json(data, &["part", "info", "inv"])["entries"], 4);
}

#[test]
fn bad_input_is_a_one_line_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    // Nothing written yet: the namespace does not exist.
    assert!(fails(data, &["map", "get", "nope", "k"]).contains("no map \"nope\""));
    ok(data, &["map", "put", "m", "a=1", "b=2"]);
    ok(data, &["set", "add", "s", "x"]);
    ok(data, &["part", "put", "p", "a=1"]);

    for (args, expected) in [
        (&["map", "ls", "nope"][..], "no map \"nope\" in namespace default: create it with `varve map put nope"),
        (&["set", "has", "nope", "x"][..], "no set \"nope\""),
        (&["part", "get", "nope", "k"][..], "no PART map \"nope\""),
        (&["part", "checkpoint", "nope"][..], "no PART map \"nope\""),
        (&["part", "info", "nope"][..], "no PART map \"nope\""),
        (&["map", "get", "m", "a", "--at", "9"][..], "map \"m\" has no version 9: its versions are 1..=2"),
        (&["map", "ls", "m", "--at", "0"][..], "has no version 0"),
        (&["map", "diff", "m", "1", "3"][..], "has no version 3"),
        (&["set", "ls", "s", "--at", "2"][..], "set \"s\" has no version 2"),
        (&["map", "get", "m", "zz"][..], "no key \"zz\""),
        (&["part", "get", "p", "zz"][..], "no key \"zz\""),
        (&["map", "put", "m", "c=3", "oops"][..], "\"oops\" is not KEY=VALUE"),
        (&["part", "put", "p", "c=3", "oops"][..], "\"oops\" is not KEY=VALUE"),
        (&["map", "ls", "s"][..], "is it a set? try `varve set ls s`"),
        (&["set", "ls", "m"][..], "is it a map? try `varve map ls m`"),
        (&["--store", "varve://127.0.0.1:1", "part", "info", "p"][..], "`varve part` works on an embedded store"),
    ] {
        let error = fails(data, args);
        assert!(error.contains(expected), "varve {args:?}: {error:?} lacks {expected:?}");
    }
    // A malformed pair fails the whole invocation before anything is written.
    assert_eq!(json(data, &["map", "versions", "m"])["latest"], 2);
    assert!(fails(data, &["part", "get", "p", "c"]).contains("no key"));
}

#[test]
fn a_second_writer_is_refused_with_one_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    ok(data, &["part", "put", "p", "a=1"]);
    ok(data, &["map", "put", "m", "a=1"]);
    // This test process holds the namespace's writer lock, as another writer would.
    let store = varve_log::JournalStore::open(data, varve_log::JournalOptions::default()).expect("open store");
    let held = store.journal_namespace("default").expect("hold the writer lock");
    for args in [
        &["part", "put", "p", "b=2"][..],
        &["part", "checkpoint", "p"],
        &["map", "put", "m", "b=2"],
        &["set", "add", "s", "x"],
    ] {
        let error = fails(data, args);
        assert!(error.contains("locked by another writer"), "varve {args:?}: {error}");
    }
    // Readers need no lock.
    assert_eq!(ok(data, &["part", "get", "p", "a"]), "1");
    assert_eq!(ok(data, &["map", "get", "m", "a"]), "1");
    drop(held);
    ok(data, &["part", "put", "p", "b=2"]);
}
