//! `varve bench repair --quick`'s bookkeeping, not its timings: the event
//! log has the size asked for, and the plan of the middle model record
//! replays exactly the predictions made with it.

use varve_bench::repair::{run, RepairBenchOptions};

#[test]
fn a_quick_run_plans_the_predictions_of_the_corrected_model() {
    let dir = tempfile::tempdir().expect("tempdir");
    let report = run(&RepairBenchOptions::new(dir.path().to_owned(), true)).expect("bench runs");
    assert_eq!(report.rows.len(), 1);
    let row = &report.rows[0];
    // 2,000 readings × 5 events, the two model records' APPENDs and the SUBSCRIBE.
    assert_eq!(row.events, 10_002 + 1, "events: {row:?}");
    // Readings 1..=1000 were predicted with model:1, the one corrected (a Get dependency).
    assert_eq!(row.reruns, 1_000, "{row:?}");
    assert_eq!(row.changed, 1_001, "the model record and its 1,000 predictions: {row:?}");
    assert!(report.to_markdown().contains("| 10003 |"));
}

/// The online part's bookkeeping: each repair replays the corrected model's
/// predictions while readings arrive, none of which is lost (the run itself
/// fails if `sens` misses one), and the table has its rows.
#[test]
fn a_quick_online_run_repairs_while_readings_arrive_and_loses_none() {
    let dir = tempfile::tempdir().expect("tempdir");
    let report = varve_bench::repair_online::run(dir.path(), true).expect("bench runs");
    assert_eq!(report.repairs, 3);
    assert_eq!(report.paused.len(), 3);
    assert!(report.replayed.iter().all(|&n| n == 1_000), "{:?}", report.replayed);
    assert!(report.held.iter().zip(&report.paused).all(|(held, paused)| held <= paused));
    assert!(report.to_markdown().contains("| pause per repair"));
}
