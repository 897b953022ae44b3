//! `varve bench nats --quick` starts real nats-servers (one, then a 3-node
//! cluster), measures Varve beside raw `JetStream` publishes, a get, and one
//! failover, and prints the tables. Not a timing assertion: the figures only
//! have to be there and positive (the machine may be busy); the real run is
//! `make bench-nats`.

use std::process::Command;

#[test]
fn bench_nats_quick_measures_every_part() {
    let temp = tempfile::tempdir().expect("temp dir");
    let out = Command::new(env!("CARGO_BIN_EXE_varve"))
        .args(["bench", "nats", "--quick", "--dir"])
        .arg(temp.path().join("bench"))
        .env_remove("VARVE_DATA")
        .env_remove("VARVE_STORE")
        .env_remove("VARVE_NAMESPACE")
        .output()
        .expect("run varve");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "varve bench nats --quick failed: {}", String::from_utf8_lossy(&out.stderr));
    // Eight traffic shapes, each with a positive rate for Varve and for raw publishes.
    let rows: Vec<&str> = stdout.lines().filter(|l| l.starts_with("| 1 |") || l.starts_with("| 3 |")).collect();
    assert_eq!(rows.len(), 8, "{stdout}");
    for row in rows {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        for column in [4, 7] {
            let rate: f64 = cells[column].parse().unwrap_or_else(|_| panic!("a rate in {row}"));
            assert!(rate > 0.0, "{row}");
        }
    }
    for needle in ["append_batch", "get p50", "failover", "Canal reports"] {
        assert!(stdout.contains(needle), "no {needle:?} in {stdout}");
    }
    assert!(!temp.path().join("bench/nats-r3").exists(), "the servers' data is deleted after");
}
