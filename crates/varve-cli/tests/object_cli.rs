//! `varve object` through the real binary on a temporary data directory:
//! puts and merges across invocations, versions named by prefix and ref,
//! history, refs' compare-and-set, verify, proofs checked (and a forged one
//! refused), grants, watch, the `--json` shapes, and errors as one line.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};

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
    assert!(!stderr.contains("panicked"), "varve {args:?} panicked: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "varve {args:?}: one line on stderr, not {stderr:?}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    lines[0].to_owned()
}

/// The full id of a `put` or `merge`, from its `--json` answer.
fn put(data: &Path, args: &[&str]) -> String {
    let mut all = vec!["object", "put"];
    all.extend_from_slice(args);
    json(data, &all)["version"]["id"].as_str().expect("an id").to_owned()
}

fn ids(answer: &Value) -> Vec<String> {
    answer["versions"].as_array().expect("versions").iter().map(|v| v["id"].as_str().expect("id").to_owned()).collect()
}

#[test]
fn put_get_history_heads_and_a_map_merge() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    let v1 = put(data, &["cfg", "svc", r#"{"port":80,"tls":false}"#]);
    assert_eq!(v1.len(), 64);
    // A base given by a prefix (people see 12 characters; 6 are enough here).
    let left = put(data, &["cfg", "svc", "--base", &v1[..6], r#"{"port":8080,"tls":false}"#]);
    let right = put(data, &["cfg", "svc", "--base", &v1, r#"{"port":80,"tls":true}"#]);
    assert_eq!(ok(data, &["object", "get", "cfg", "svc", &left[..12]]), r#"{"port":8080,"tls":false}"#);

    let heads = json(data, &["object", "heads", "cfg", "svc"]);
    assert_eq!(ids(&heads), vec![left.clone(), right.clone()]);
    assert_eq!(heads["versions"][0]["depth"], 2);
    let human = ok(data, &["object", "heads", "cfg", "svc"]);
    assert_eq!(human, format!("{}\tdepth 2\n{}\tdepth 2", &left[..12], &right[..12]));

    let merged = json(data, &["object", "merge", "cfg", "svc", &left, &right, "--with", "map"]);
    let merged = merged["version"]["id"].as_str().expect("id").to_owned();
    assert_eq!(ok(data, &["object", "get", "cfg", "svc", &merged]), r#"{"port":8080,"tls":true}"#);
    assert_eq!(ids(&json(data, &["object", "heads", "cfg", "svc"])), vec![merged.clone()]);
    assert_eq!(ids(&json(data, &["object", "previous", "cfg", "svc", &merged])), vec![left.clone(), right.clone()]);

    // History stops after a merge: from `left` it is just v1.
    let history = json(data, &["object", "history", "cfg", "svc", &left, "--values"]);
    assert_eq!(
        history,
        json!({"key": "svc", "versions": [{"id": v1, "depth": 1, "value": r#"{"port":80,"tls":false}"#}]})
    );
    let a = put(data, &["cfg", "log", "a"]);
    let b = put(data, &["cfg", "log", "--base", &a, "b"]);
    let c = put(data, &["cfg", "log", "--base", &b, "c"]);
    assert_eq!(ids(&json(data, &["object", "history", "cfg", "log", &c])), vec![b.clone(), a.clone()]);
    assert_eq!(ids(&json(data, &["object", "history", "cfg", "log", &c, "-m", "1"])), vec![b]);
    assert_eq!(json(data, &["object", "keys", "cfg"]), json!({"keys": ["svc", "log"]}));

    let diff = json(data, &["object", "diff", "cfg", "svc", &v1, &merged]);
    assert_eq!(diff["changed"], json!({"port": [80, 8080], "tls": [false, true]}));
    let info = json(data, &["object", "info", "cfg", "svc", &merged]);
    assert_eq!(info["parents"], json!([{"id": left, "depth": 2}, {"id": right, "depth": 2}]));
    assert_eq!(info["version"]["depth"], 3);
}

#[test]
fn values_come_from_stdin_and_files_and_merge_conflicts_are_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    let mut child = Command::new(env!("CARGO_BIN_EXE_varve"))
        .arg("--data")
        .arg(data)
        .args(["--json", "object", "put", "c", "n", "-"])
        .env_remove("VARVE_DATA")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    child.stdin.take().expect("stdin").write_all(b"10").expect("write");
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success());
    let base: Value = serde_json::from_slice(&out.stdout).expect("json");
    let base = base["version"]["id"].as_str().expect("id").to_owned();
    let file = data.join("value.txt");
    std::fs::write(&file, "15").expect("write");
    let left = put(data, &["c", "n", "--base", &base, "--file", file.to_str().expect("utf-8")]);
    let right = put(data, &["c", "n", "--base", &base, "12"]);
    let sum = json(data, &["object", "merge", "c", "n", &left, &right, "--with", "counter"]);
    let sum = sum["version"]["id"].as_str().expect("id").to_owned();
    assert_eq!(ok(data, &["object", "get", "c", "n", &sum]), "17");

    let a = put(data, &["c", "m", "{\"x\":1}"]);
    let l = put(data, &["c", "m", "--base", &a, "{\"x\":2}"]);
    let r = put(data, &["c", "m", "--base", &a, "{\"x\":3}"]);
    let error = fails(data, &["object", "merge", "c", "m", &l, &r, "--with", "map"]);
    assert!(error.contains("merge conflict in x"), "{error}");
    // An explicit value resolves it.
    let resolved = json(data, &["object", "merge", "c", "m", &l, &r, "{\"x\":5}"]);
    assert_eq!(resolved["version"]["depth"], 3);
}

#[test]
fn refs_move_by_compare_and_set() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    let a = put(data, &["s", "k", "a"]);
    let b = put(data, &["s", "k", "--base", &a, "b"]);
    let c = put(data, &["s", "k", "--base", &b, "c"]);
    ok(data, &["object", "ref", "set-branch", "s", "k", "main", &a, "--expect", "none"]);
    ok(data, &["object", "ref", "set-branch", "s", "k", "main", &b, "--expect", &a]);
    let error = fails(data, &["object", "ref", "set-branch", "s", "k", "main", &c, "--expect", &a]);
    assert_eq!(
        error,
        format!("error: ref \"main\" of key \"k\" is at {}, not {}: re-read it and retry", &b[..12], &a[..12])
    );
    ok(data, &["object", "ref", "tag", "s", "k", "v1.0", &a]);
    // Versions are named by refs wherever one is taken.
    assert_eq!(ok(data, &["object", "get", "s", "k", "main"]), "b");
    assert_eq!(ok(data, &["object", "get", "s", "k", "v1.0"]), "a");
    let refs = json(data, &["object", "ref", "list", "s", "k"]);
    assert_eq!(
        refs["refs"],
        json!([
            {"name": "main", "kind": "branch", "version": {"id": b, "depth": 2}},
            {"name": "v1.0", "kind": "tag", "version": {"id": a, "depth": 1}},
        ])
    );
    let error = fails(data, &["object", "ref", "tag", "s", "k", "v1.0", &c]);
    assert!(error.contains("ref \"v1.0\""), "{error}");
    ok(data, &["object", "ref", "delete", "s", "k", "main", "--expect", "main"]);
    assert_eq!(ok(data, &["object", "ref", "list", "s", "k"]), format!("v1.0\ttag\t{}", &a[..12]));
    let error = fails(data, &["object", "get", "s", "k", "main"]);
    assert!(error.contains("has no version main"), "{error}");
}

#[test]
fn verify_and_proofs_checked_by_id_and_a_forged_one_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    let root = put(data, &["p", "k", "r"]);
    let left = put(data, &["p", "k", "--base", &root, "l"]);
    let right = put(data, &["p", "k", "--base", &root, "x"]);
    let verified = json(data, &["object", "verify", "p", "k"]);
    let counts: Vec<&Value> =
        verified["verified"].as_array().expect("list").iter().map(|v| &v["versions_checked"]).collect();
    assert_eq!(counts, [&json!(2), &json!(2)], "{verified}");
    let head = json(data, &["object", "merge", "p", "k", &left, &right, "--with", "lww"]);
    let head = head["version"]["id"].as_str().expect("id").to_owned();
    assert_eq!(
        ok(data, &["object", "verify", "p", "k", &head]),
        format!("verified k {}: 4 versions checked", &head[..12])
    );

    let proof = ok(data, &["object", "prove", "p", "k", &root, &head]);
    let file = data.join("proof.json");
    std::fs::write(&file, &proof).expect("write");
    let path = file.to_str().expect("utf-8");
    let checked = json(data, &["object", "check-proof", path, "--key", "k", "--head", &head, "--ancestor", &root]);
    assert_eq!(checked["valid"], true);
    assert_eq!(checked["ancestor"], json!({"id": root, "depth": 1}));

    // The proof does not make another version an ancestor, nor work for another key.
    let error = fails(data, &["object", "check-proof", path, "--key", "k", "--head", &head, "--ancestor", &left]);
    assert!(error.contains("the ancestry proof does not check"), "{error}");
    let error = fails(data, &["object", "check-proof", path, "--key", "other", "--head", &head, "--ancestor", &root]);
    assert!(error.contains("it is for key \"k\", not \"other\""), "{error}");
    // A forged digest: the first step no longer hashes to the head.
    let mut forged: Value = serde_json::from_str(&proof).expect("json");
    forged["steps"][0]["digest"] = json!("00".repeat(32));
    let forged_file = data.join("forged.json");
    std::fs::write(&forged_file, forged.to_string()).expect("write");
    let forged_path = forged_file.to_str().expect("utf-8");
    let error =
        fails(data, &["object", "check-proof", forged_path, "--key", "k", "--head", &head, "--ancestor", &root]);
    assert!(error.contains("step 0 hashes to"), "{error}");
}

#[test]
fn grants_decide_what_a_principal_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    // alice writes the key first, so she owns it.
    let v1 = put(data, &["--as", "alice", "g", "doc", "one"]);
    let v2 = put(data, &["g", "doc", "--base", &v1, "two", "--as", "alice"]);
    ok(data, &["object", "--as", "alice", "restrict", "g", "doc"]);
    let error = fails(data, &["object", "--as", "bob", "get", "g", "doc", &v1]);
    assert_eq!(
        error,
        format!(
            "error: \"bob\" may not read version {} of key \"doc\": ask its owner (\"alice\") for a grant",
            &v1[..12]
        )
    );
    ok(data, &["object", "--as", "alice", "grant", "g", "doc", "bob", &v1]);
    let error = fails(data, &["object", "--as", "bob", "grant", "g", "doc", "carol", &v1]);
    assert!(error.contains("only its owner \"alice\" may"), "{error}");
    assert_eq!(ok(data, &["object", "--as", "bob", "get", "g", "doc", &v1]), "one");
    assert!(fails(data, &["object", "--as", "bob", "get", "g", "doc", &v2]).contains("may not read"));
    // The administrator (no --as) reads everything; bob lists only what he may read.
    assert_eq!(ok(data, &["object", "get", "g", "doc", &v2]), "two");
    assert_eq!(ids(&json(data, &["object", "--as", "bob", "versions", "g", "doc"])), vec![v1.clone()]);

    let grants = json(data, &["object", "grants", "g", "doc"]);
    assert_eq!(grants["owner"], "alice");
    let kinds: Vec<&Value> = grants["grants"].as_array().expect("list").iter().map(|g| &g["kind"]).collect();
    assert_eq!(kinds, [&json!("restrict"), &json!("grant")]);
    assert_eq!(grants["grants"][1]["principal"], "bob");
    assert_eq!(grants["grants"][1]["versions"], json!([v1]));
}

#[test]
fn watch_prints_versions_and_stops_after_count() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    let a = put(data, &["w", "app/x", "1"]);
    put(data, &["w", "other", "2"]);
    let b = put(data, &["w", "app/y", "3"]);
    let out = ok(data, &["--json", "object", "watch", "w", "--prefix", "app/", "--count", "2"]);
    let lines: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).expect("json line")).collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["key"], "app/x");
    assert_eq!(lines[0]["version"]["id"], json!(a));
    assert_eq!(lines[1]["seq"], 3);
    assert_eq!(lines[1]["version"]["id"], json!(b));
    let human = ok(data, &["object", "watch", "w", "--from", "2", "--count", "1"]);
    assert!(human.starts_with("2\tother\t"), "{human}");
}

#[test]
fn bad_input_is_a_one_line_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    let error = fails(data, &["object", "heads", "nothing", "k"]);
    assert!(error.contains("no object store \"nothing\""), "{error}");
    let a = put(data, &["e", "k", "a"]);
    assert!(fails(data, &["object", "get", "e", "k", "abc"]).contains("has no version abc"));
    assert!(fails(data, &["object", "get", "e", "k", "ffff"]).contains("has no version ffff"));
    assert!(fails(data, &["object", "merge", "e", "k", &a, &a, "x"]).contains("with itself"));
    let error = fails(data, &["object", "check-proof", "-", "--key", "k", "--head", "12", "--ancestor", &a]);
    assert!(error.contains("64 hex characters"), "{error}");
}
