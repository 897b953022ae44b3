//! `table` end to end: Decibel's queries (scan a branch, diff two branches,
//! scan an old version, scan every branch) and merges, run as the real binary.

mod common;

use common::{fails, id_after, ok};

const TABLE: &str = env!("CARGO_BIN_EXE_table");

/// The rows a scan printed, as "ID JSON" lines.
fn rows(scan: &str) -> Vec<&str> {
    scan.lines().skip(1).map(str::trim).collect()
}

#[test]
fn branches_diff_and_scan_at_an_old_version() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path();
    ok(TABLE, store, &["insert", "apple", r#"{"qty":3,"price":1.2}"#]);
    let v2 = id_after(&ok(TABLE, store, &["insert", "pear", r#"{"qty":5}"#]), "table version ");
    ok(TABLE, store, &["branch", "dev"]);
    ok(TABLE, store, &["update", "apple", r#"{"qty":4}"#, "--branch", "dev"]);
    ok(TABLE, store, &["insert", "kiwi", r#"{"qty":1}"#, "--branch", "dev"]);
    ok(TABLE, store, &["delete", "pear", "--branch", "dev"]);
    ok(TABLE, store, &["update", "apple", r#"{"price":1.5,"note":"ripe"}"#]);

    // 1. One branch.
    let main = ok(TABLE, store, &["scan"]);
    assert_eq!(rows(&main), [r#"apple {"note":"ripe","price":1.5,"qty":3}"#, r#"pear {"qty":5}"#], "{main}");
    let dev = ok(TABLE, store, &["scan", "--branch", "dev"]);
    assert_eq!(rows(&dev), [r#"apple {"price":1.2,"qty":4}"#, r#"kiwi {"qty":1}"#], "{dev}");
    // 2. Two branches.
    let diff = ok(TABLE, store, &["diff", "main", "dev"]);
    assert!(diff.contains("~ apple price: 1.5 -> 1.2, qty: 3 -> 4, -note: \"ripe\""), "{diff}");
    assert!(diff.contains(r#"- pear {"qty":5} (only in main)"#), "{diff}");
    assert!(diff.contains(r#"+ kiwi {"qty":1} (only in dev)"#), "{diff}");
    // 3. A past version: main before its update, by id prefix.
    let old = ok(TABLE, store, &["scan", "--at", &v2]);
    assert_eq!(rows(&old), [r#"apple {"price":1.2,"qty":3}"#, r#"pear {"qty":5}"#], "{old}");
    // 4. Every branch: a row version once, with the branches holding it.
    let all = ok(TABLE, store, &["scan", "--all"]);
    assert!(all.contains(r#"pear {"qty":5} [main]"#) && all.contains(r#"kiwi {"qty":1} [dev]"#), "{all}");
    ok(TABLE, store, &["branch", "snapshot", "--from", &v2]);
    let all = ok(TABLE, store, &["scan", "--all"]);
    assert!(all.contains(r#"pear {"qty":5} [main, snapshot]"#), "{all}");

    // A clean merge: per row, field by field.
    assert!(ok(TABLE, store, &["merge", "dev"]).contains("merged dev"));
    let merged = ok(TABLE, store, &["scan"]);
    assert_eq!(rows(&merged), [r#"apple {"note":"ripe","price":1.5,"qty":4}"#, r#"kiwi {"qty":1}"#], "{merged}");
    assert!(ok(TABLE, store, &["log"]).lines().next().unwrap().ends_with("(merge)"));
    assert!(ok(TABLE, store, &["merge", "main", "--into", "dev"]).contains("fast-forward"));
    assert!(ok(TABLE, store, &["diff", "main", "dev"]).contains("(2 rows the same)"));
}

#[test]
fn a_conflicting_merge_names_the_rows_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path();
    ok(TABLE, store, &["insert", "a", r#"{"x":1,"y":1}"#]);
    ok(TABLE, store, &["branch", "dev"]);
    ok(TABLE, store, &["update", "a", r#"{"x":2}"#]);
    ok(TABLE, store, &["update", "a", r#"{"x":3}"#, "--branch", "dev"]);
    let before = ok(TABLE, store, &["scan"]);
    let err = fails(TABLE, store, &["merge", "dev"]);
    assert!(err.contains("merge conflict in 1 row(s)") && err.contains("a (x)"), "{err}");
    assert_eq!(ok(TABLE, store, &["scan"]), before);
}

#[test]
fn bad_input_is_a_one_line_error() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path();
    assert!(fails(TABLE, store, &["insert", "a", "[1]"]).contains("JSON object"));
    assert!(fails(TABLE, store, &["insert", "a", "{"]).contains("not JSON"));
    assert!(fails(TABLE, store, &["insert", "a b", "{}"]).contains("row id"));
    assert!(fails(TABLE, store, &["update", "a", "{}"]).contains("no row a in main"));
    assert!(fails(TABLE, store, &["insert", "a", "{}", "--branch", "dev"]).contains("no branch dev"));
    ok(TABLE, store, &["insert", "a", "{}"]);
    assert!(fails(TABLE, store, &["insert", "a", "{}"]).contains("exists"));
    assert!(fails(TABLE, store, &["scan", "--at", "ffff"]).contains("no version"));
    assert!(fails(TABLE, store, &["diff", "main", "nope"]).contains("no version"));
}
