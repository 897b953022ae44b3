//! `varve bench schema --quick`'s bookkeeping, not its timings: every
//! kernel, layout and input has a row; the models write what they should
//! (Manual rewrites every record, Automatic only what the program inserts
//! and nothing for untouched records); the TPC-C mix materialises customers
//! it wrote under the automatic model.

use varve_bench::schema::{run, SchemaBenchOptions};

#[test]
fn a_quick_run_reports_every_kernel_and_model() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = SchemaBenchOptions::new(dir.path().to_owned(), true, 7);
    let report = run(&options).expect("bench runs");

    assert_eq!(report.kernels.len(), 3 * 2 * 3, "3 kernels × 2 layouts × 3 inputs");
    for row in &report.kernels {
        let what = format!("{} {} {}", row.kernel, row.layout, row.input);
        assert!(row.retain_ms > 0.0 && row.manual_ms > 0.0 && row.auto_ms > 0.0, "{what}");
        assert_eq!(row.untouched_auto, 0, "{what}: the automatic model rewrote untouched records");
        assert!(row.bytes_manual >= row.bytes_auto, "{what}: Manual writes the retained records too");
        if row.input == "INS" {
            assert!(row.untouched_manual > 0, "{what}: Manual rewrote the records the program never touched");
            assert!(row.bytes_auto > 0, "{what}: the program inserted");
        }
        if row.input == "DEL" {
            assert_eq!(row.bytes_auto, 0, "{what}: deleting every key writes no record");
        }
    }
    assert_eq!(report.access.len(), 3, "Layout-Change by INIT and by promotion, Layout-Add");
    assert!(report.access.iter().all(|a| a.old_ns > 0.0 && a.current_ns > 0.0));
    assert_eq!(report.tpcc.len(), 2);
    for row in &report.tpcc {
        assert!(row.customers_upgraded_auto > 0 && row.customers_upgraded_auto <= row.customers, "{row:?}");
    }
    let text = report.to_markdown();
    assert!(text.contains("Goal: Automatic overhead"), "{text}");
}
