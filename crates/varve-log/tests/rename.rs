//! `rename_logs` on the journal, beyond the shared contract: a rename is one
//! frame that survives reopen (by replay and by index checkpoint), is
//! restated by later segment headers when the segment holding it is
//! reclaimed, reaches read-only handles in other threads and their
//! watches, and checks clean in `fsck`.

use std::path::Path;
use std::time::Duration;

use varve_log::journal::{fsck, CHECKPOINT_FILE};
use varve_log::{
    CheckpointUse, JournalNamespace, JournalOptions, JournalStore, LogConfig, LogError, Namespace, OnFull, SeqRange,
    SyncPolicy,
};

fn open(dir: &Path, options: JournalOptions) -> JournalNamespace {
    JournalStore::open(dir, options).expect("open store").journal_namespace("ns").expect("open namespace")
}

fn small_segments() -> JournalOptions {
    // Logs packed at nearly every chance: reads and changes meet packed logs.
    JournalOptions {
        segment_bytes_max: 16 << 10,
        sync: SyncPolicy::Never,
        hot_logs_min: 0,
        ..JournalOptions::default()
    }
}

fn summary(ns: &JournalNamespace) -> Vec<(String, LogConfig, u64, u64)> {
    ns.list_logs().expect("list").into_iter().map(|l| (l.name, l.config, l.earliest, l.latest)).collect()
}

/// Three logs, a shift and a swap; returns the summary it should leave.
fn write_and_rename(ns: &JournalNamespace) -> Vec<(String, LogConfig, u64, u64)> {
    ns.create_log("readings", LogConfig::unbounded()).expect("create");
    ns.create_log("_shadow.readings", LogConfig::unbounded().system()).expect("create");
    ns.create_log("x", LogConfig::keep(3, OnFull::Overwrite)).expect("create");
    ns.create_log("y", LogConfig::keep(9, OnFull::Refuse)).expect("create");
    for i in 0..5u8 {
        ns.append_batch(&[("readings", &[i]), ("_shadow.readings", &[i, i]), ("x", &[i])]).expect("batch");
    }
    ns.append("y", b"y1").expect("append");
    ns.rename_logs(&[("readings", "_gen.readings.1"), ("_shadow.readings", "readings")]).expect("shift");
    ns.rename_logs(&[("x", "y"), ("y", "x")]).expect("swap");
    ns.append("readings", b"after").expect("append");
    vec![
        ("_gen.readings.1".to_owned(), LogConfig::unbounded().system(), 1, 5),
        ("readings".to_owned(), LogConfig::unbounded(), 1, 6),
        ("x".to_owned(), LogConfig::keep(9, OnFull::Refuse), 1, 1),
        ("y".to_owned(), LogConfig::keep(3, OnFull::Overwrite), 3, 5),
    ]
}

#[test]
fn renames_survive_reopen_from_the_checkpoint_and_by_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let expected = {
        let ns = open(dir.path(), JournalOptions::default());
        let expected = write_and_rename(&ns);
        assert_eq!(summary(&ns), expected);
        ns.close().expect("close");
        expected
    };
    let ns = open(dir.path(), JournalOptions::default());
    assert_eq!(ns.recovery_report().checkpoint, CheckpointUse::Loaded);
    assert_eq!(summary(&ns), expected);
    drop(ns);
    std::fs::remove_file(dir.path().join("ns").join(CHECKPOINT_FILE)).expect("remove the checkpoint");
    let ns = open(dir.path(), JournalOptions::default());
    assert_eq!(ns.recovery_report().checkpoint, CheckpointUse::Absent);
    assert_eq!(summary(&ns), expected);
    assert_eq!(ns.get("_gen.readings.1", 5).expect("get"), &[4u8][..]);
    assert_eq!(ns.get("readings", 5).expect("get"), &[4u8, 4][..]);
    assert_eq!(ns.get("readings", 6).expect("get"), &b"after"[..]);
    assert_eq!(ns.get("x", 1).expect("get"), &b"y1"[..]);
    assert_eq!(ns.append("y", b"next").expect("append"), 6);
    drop(ns);
    let report = fsck(&dir.path().join("ns"), false, &mut |_, _| {}).expect("fsck");
    assert!(report.damage.is_empty() && report.losses.is_empty(), "{report:?}");
}

/// The segment that held the rename frame is reclaimed while the segment
/// that created the renamed logs stays: the headers of later segments state
/// the new names, and a replay renames the logs from there.
#[test]
fn a_rename_in_a_reclaimed_segment_is_restated_by_later_headers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let segment = |id: u32| dir.path().join(format!("ns/{id:010}.seg"));
    {
        let ns = open(dir.path(), small_segments());
        ns.create_log("a", LogConfig::unbounded()).expect("create");
        ns.create_log("b", LogConfig::keep(2, OnFull::Overwrite)).expect("create");
        ns.create_log("hot", LogConfig::keep(2, OnFull::Overwrite)).expect("create");
        // Segment 1 stays: mostly live records of `a` and `b`.
        for i in 0..10u8 {
            ns.append("a", &[i; 1400]).expect("append");
        }
        ns.append("b", b"b1").expect("append");
        while !segment(2).exists() {
            ns.append("hot", &[0; 1000]).expect("append");
        }
        ns.rename_logs(&[("a", "b"), ("b", "_gen.b.1")]).expect("shift, in segment 2");
        for _ in 0..200 {
            ns.append("hot", &[1; 1000]).expect("append");
        }
        ns.create_log("a", LogConfig::unbounded()).expect("a new log under a freed name");
        ns.append("a", b"new a").expect("append");
        assert!(segment(1).exists() && !segment(2).exists(), "segment 2, with the rename, reclaimed");
    }
    std::fs::remove_file(dir.path().join("ns").join(CHECKPOINT_FILE)).expect("remove the checkpoint");
    let ns = open(dir.path(), small_segments());
    assert!(ns.recovery_report().damage.is_empty(), "{:?}", ns.recovery_report().damage);
    let names: Vec<(String, u64, u64)> = ns
        .list_logs()
        .expect("list")
        .into_iter()
        .filter(|l| l.name != "hot")
        .map(|l| (l.name, l.earliest, l.latest))
        .collect();
    let expected = [("_gen.b.1", 1, 1), ("a", 1, 1), ("b", 1, 10)].map(|(name, e, l)| (name.to_owned(), e, l));
    assert_eq!(names, expected);
    assert_eq!(ns.get("a", 1).expect("get"), &b"new a"[..]);
    assert_eq!(ns.get("b", 10).expect("get"), &[9u8; 1400][..]);
    assert_eq!(ns.get("_gen.b.1", 1).expect("get"), &b"b1"[..]);
    assert_eq!(ns.log_info("_gen.b.1").expect("info").config, LogConfig::keep(2, OnFull::Overwrite).system());
}

#[test]
fn read_only_handles_and_their_watches_follow_renames() {
    let dir = tempfile::tempdir().expect("tempdir");
    let writer = open(dir.path(), JournalOptions::default());
    writer.create_log("w", LogConfig::unbounded()).expect("create");
    writer.create_log("_shadow.w", LogConfig::unbounded().system()).expect("create");
    writer.append("w", b"w1").expect("append");
    let options =
        JournalOptions { read_only: true, read_only_poll: Duration::from_millis(5), ..JournalOptions::default() };
    let reader = open(dir.path(), options);
    let mut watch = reader.watch("w", 1).expect("watch");
    assert_eq!(watch.next_timeout(Duration::from_secs(5)).expect("ok").expect("w1").value, &b"w1"[..]);
    writer.rename_logs(&[("w", "_gen.w.1"), ("_shadow.w", "w")]).expect("shift");
    writer.append("w", b"shadow 1").expect("append");
    writer.append("w", b"shadow 2").expect("append");
    writer.append("_gen.w.1", b"w2").expect("append");
    let record = watch.next_timeout(Duration::from_secs(5)).expect("ok").expect("w2");
    assert_eq!((record.seq, record.value.to_vec()), (2, b"w2".to_vec()), "the watch follows the log it opened");
    let names: Vec<String> = reader.list_logs().expect("list").into_iter().map(|l| l.name).collect();
    assert_eq!(names, ["_gen.w.1", "w"]);
    assert_eq!(reader.get("w", 2).expect("get"), &b"shadow 2"[..]);
    assert!(matches!(reader.rename_logs(&[("w", "v")]), Err(LogError::ReadOnly { .. })));
    assert!(matches!(reader.rename_logs(&[("nope", "v")]), Err(LogError::LogNotFound { .. })));
    let all: Vec<_> = reader.scan("_gen.w.1", SeqRange::ALL).expect("scan").map(|r| r.expect("r").value).collect();
    assert_eq!(all, [&b"w1"[..], &b"w2"[..]]);
}
