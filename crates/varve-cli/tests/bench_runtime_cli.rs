//! `varve bench runtime --quick --json` runs end to end and reports every
//! figure with the right shape. Not a timing assertion: the numbers only
//! have to be positive and finite (the machine may be busy).

use std::process::Command;

use serde_json::Value;

#[test]
fn bench_runtime_quick_reports_every_figure() {
    let temp = tempfile::tempdir().expect("temp dir");
    let out = Command::new(env!("CARGO_BIN_EXE_varve"))
        .args(["bench", "runtime", "--quick", "--json", "--dir"])
        .arg(temp.path().join("bench"))
        .env_remove("VARVE_DATA")
        .env_remove("VARVE_NAMESPACE")
        .env_remove("VARVE_RUNTIME_SOCKET")
        .output()
        .expect("run varve");
    assert!(out.status.success(), "varve bench runtime failed: {}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).expect("one JSON object on stdout");
    assert_eq!(report["quick"], Value::Bool(true));
    let rows = report["rows"].as_array().expect("rows");
    let positive = |v: &Value| v.as_f64().is_some_and(|x| x.is_finite() && x > 0.0);
    for key in [
        "in_process_trigger_p50_us",
        "in_process_trigger_p99_us",
        "in_process_trigger_never_p50_us",
        "command_trigger_p50_ms",
        "command_trigger_p99_ms",
        "events_per_s",
        "events_per_s_default_workers",
        "recording_overhead_pct",
        "workload_us_per_record_on",
        "publish_per_s",
    ] {
        let row = rows.iter().find(|r| r["key"] == key).unwrap_or_else(|| panic!("no row {key}: {report}"));
        assert!(row["what"].is_string(), "{row}");
        assert!(row["unit"].is_string(), "{row}");
        // The overhead is a difference of two timings: any finite number.
        if key == "recording_overhead_pct" {
            assert!(row["value"].as_f64().is_some_and(f64::is_finite), "{row}");
        } else {
            assert!(positive(&row["value"]), "{row}");
        }
        if !row["baseline"].is_null() {
            assert!(positive(&row["baseline"]) && positive(&row["ratio"]), "{row}");
        }
    }
    for key in ["in_process_trigger_p50_us", "command_trigger_p50_ms", "recording_overhead_pct", "publish_per_s"] {
        let row = rows.iter().find(|r| r["key"] == key).expect("row");
        assert!(row["goal"].is_string() && row["goal_met"].is_boolean(), "{row}");
    }
}
