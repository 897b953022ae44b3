//! `varve bench object --quick`'s bookkeeping, not its timings: every part
//! reports its rows, the figures are positive, deltas store less than whole
//! values, `history(m)` returns m versions, verify checks the whole chain,
//! and the git side is measured when `git` runs here.

use varve_bench::object::{run, ObjectBenchOptions, HISTORY_M_MAX};
use varve_object::Storage;

#[test]
fn a_quick_run_reports_every_part() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = ObjectBenchOptions::new(dir.path().to_owned(), true);
    let report = run(&options).expect("bench runs");

    assert_eq!(report.put_get.len(), 4, "1 KiB and 32 KiB, Complete and Delta");
    for row in &report.put_get {
        assert!(row.versions > 1);
        assert!(row.put_ns[0] > 0.0 && row.put_ns[0] <= row.put_ns[1]);
        assert!(row.get_uncached_ns[0] > 0.0 && row.get_cached_ns[0] > 0.0);
        assert!(row.puts_per_s > 0.0 && row.gets_uncached_per_s > 0.0);
    }
    for size in [1024, 32 * 1024] {
        let bytes = |storage| {
            report
                .put_get
                .iter()
                .find(|r| r.value_bytes == size && r.storage == storage)
                .expect("row")
                .stored_bytes_per_version
        };
        assert!(bytes(Storage::Delta) < bytes(Storage::Complete), "{size} B: a small edit stores a small delta");
    }

    let ms: Vec<usize> = report.history.iter().map(|r| r.m).collect();
    assert_eq!(ms.first(), Some(&1));
    assert_eq!(ms.last(), Some(&HISTORY_M_MAX));
    assert!(report.history.iter().all(|r| r.returned == r.m && r.history_ns > 0.0 && r.walk_ns > 0.0));

    let git = &report.git;
    assert_eq!(git.checkouts.len(), 3, "first, middle and last");
    assert!(git.delta_bytes > 0 && git.delta_bytes < git.complete_bytes && git.complete_bytes < git.raw_bytes);
    let git_runs = std::process::Command::new("git").arg("--version").output().is_ok_and(|o| o.status.success());
    assert_eq!(git.git_skipped.is_none(), git_runs);
    if git_runs {
        assert!(git.git_commit_p50_ns.is_some_and(|ns| ns > 0.0));
        assert!(git.git_pack_bytes.is_some_and(|b| b > 0));
        assert!(git.checkouts.iter().all(|c| c.git_show_ns.is_some()));
    }

    assert_eq!(report.verify.len(), 2);
    assert!(report.verify.iter().all(|v| v.versions == git.versions && v.versions_per_s > 0.0));
    assert_eq!(report.goals.len(), 6, "three for history(32), three against git");

    let text = report.to_markdown();
    assert!(text.contains("seed 1"), "the seed is printed");
    assert!(text.contains("| 32 KiB | Delta |"));
    assert!(text.contains("Goals:"));
}
