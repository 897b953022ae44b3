//! `varve bench pds`'s bookkeeping on a tiny run: every variant gets a row, the
//! curves grow with the operations, and the journal's bytes include its
//! framing (so they are above the memory baseline's).

use varve_bench::pds::{run, BenchConfig};
use varve_pds::Structure;

#[test]
fn a_tiny_run_reports_rows_and_growing_curves() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = BenchConfig {
        workloads: 2,
        ops: 200,
        extras: vec![1],
        structures: vec![Structure::Bst, Structure::List],
        dir: Some(dir.path().to_owned()),
        ..BenchConfig::default()
    };
    let mut calls = 0;
    let report = run(&config, &mut |_, _| calls += 1).expect("bench runs");
    assert!(calls > 0, "progress is reported");
    let row = |structure: &str, backend: &str| {
        report.rows.iter().find(|r| r.structure == structure && r.backend == backend).expect("row")
    };
    for structure in ["bst", "list"] {
        let journal = row(structure, "journal");
        let memory = row(structure, "memory");
        assert!(journal.bytes_per_update > memory.bytes_per_update, "{structure}: journal framing counted");
        assert!(memory.bytes_per_update > 100.0, "{structure}: a node copy costs real bytes");
        assert!(journal.us_per_update > 0.0 && journal.us_per_access > 0.0);
    }
    let curve: Vec<_> = report.series.iter().filter(|p| p.variant == "bst journal e1").collect();
    assert_eq!(curve.len(), 200 / 50, "a point every 50 operations");
    assert!(curve.windows(2).all(|w| w[0].bytes < w[1].bytes && w[0].update_us <= w[1].update_us));
    let csv = report.series_csv();
    assert!(csv.starts_with("variant,ops,bytes,update_us,access_us\n"));
    assert!(csv.lines().count() > curve.len());
}
