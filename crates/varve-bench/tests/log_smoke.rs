//! `varve bench log --only long|many --quick`'s bookkeeping, not its
//! timings: the log grows across many segments, segments roll among many
//! logs, and the rows carry figures.

use varve_bench::log::{run, BenchOptions};

#[test]
fn a_quick_long_log_run_reports_both_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = BenchOptions { dir: dir.path().to_owned(), quick: true, open_bytes: 0, only: Some("long".into()) };
    let report = run(&options).expect("bench runs");
    assert_eq!(report.rows.len(), 2, "{:?}", report.rows);
    for row in &report.rows {
        assert!(row.ours.is_finite() && row.ours > 0.0 && row.baseline.is_finite() && row.baseline > 0.0, "{row:?}");
    }
    // 400k records of 64 B in 1 MiB segments: dozens of them.
    let segments: usize = report.rows[0]
        .what
        .split(" segments")
        .next()
        .and_then(|head| head.rsplit('(').next())
        .and_then(|n| n.parse().ok())
        .expect("the segment count in the row's label");
    assert!(segments >= 20, "{}", report.rows[0].what);
    assert!(report.to_markdown().contains("| longest append of those 400k"));
}

#[test]
fn a_quick_many_logs_run_rolls_segments_and_reports_both_figures() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = BenchOptions { dir: dir.path().to_owned(), quick: true, open_bytes: 0, only: Some("many".into()) };
    let report = run(&options).expect("bench runs");
    assert_eq!(report.rows.len(), 1, "{:?}", report.rows);
    let row = &report.rows[0];
    assert!(row.ours.is_finite() && row.ours > 0.0 && row.baseline.is_finite() && row.baseline > 0.0, "{row:?}");
    let rolled: usize = row
        .what
        .split(" segments rolled")
        .next()
        .and_then(|head| head.rsplit('(').next())
        .and_then(|n| n.parse().ok())
        .expect("the roll count in the row's label");
    assert!(rolled >= 1, "{}", row.what);
}
