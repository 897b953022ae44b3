//! `varve bench serve --quick --json` starts a real `varve serve` (this
//! binary), measures `get` and the watch fan-out through it and beside the
//! embedded journal, and says why the `JetStream` figures are missing when no
//! `nats-server` is given. Not a timing assertion: the numbers only have to
//! be positive and finite (the machine may be busy). The append part and
//! `JetStream` run in `make bench-serve QUICK=1`.

use std::process::Command;

use serde_json::Value;

#[test]
fn bench_serve_quick_reports_get_and_watch_and_says_why_jetstream_is_missing() {
    let temp = tempfile::tempdir().expect("temp dir");
    let mut rows = Vec::new();
    for part in ["get", "watch"] {
        let out = Command::new(env!("CARGO_BIN_EXE_varve"))
            .args(["--json", "bench", "serve", "--quick", "--only", part, "--dir"])
            .arg(temp.path().join("bench"))
            .env_remove("VARVE_DATA")
            .env_remove("VARVE_STORE")
            .env_remove("VARVE_NAMESPACE")
            .output()
            .expect("run varve");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "varve bench serve --only {part} failed: {stderr}");
        assert!(stderr.contains("no --nats-server given"), "the skip is said on stderr: {stderr}");
        let report: Value = serde_json::from_slice(&out.stdout).expect("one JSON object on stdout");
        assert_eq!(report["quick"], Value::Bool(true));
        assert!(report["nats_server"].is_null(), "{report}");
        assert!(report["jetstream_skipped"].as_str().is_some_and(|why| why.contains("--nats-server")), "{report}");
        rows.extend(report["rows"].as_array().expect("rows").iter().cloned());
    }
    let positive = |v: &Value| v.as_f64().is_some_and(|x| x.is_finite() && x > 0.0);
    for key in ["get_p50_us", "get_p99_us", "watch_delivery_p50_us", "watch_delivery_p99_us"] {
        let row = rows.iter().find(|r| r["key"] == key).unwrap_or_else(|| panic!("no row {key}: {rows:?}"));
        assert!(positive(&row["serve"]) && positive(&row["embedded"]), "{row}");
        assert!(row["jetstream"].is_null(), "{row}");
        if key.contains("p50") {
            let goals = row["goals"].as_array().expect("goals");
            assert!(goals.len() == 1 && goals[0]["met"].is_boolean(), "{row}");
        }
    }
}
