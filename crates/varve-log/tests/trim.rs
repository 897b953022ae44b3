//! `trim` on the journal, beyond the shared contract: a trim is one frame
//! that survives reopen (by replay and by index checkpoint), is restated by
//! later segment headers when the segment holding it is reclaimed, frees
//! the disk its records took, reaches read-only handles, and checks clean
//! in `fsck`. (Crash safety: `crash_rename.rs` kills a writer that trims.)

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

fn bounds(ns: &JournalNamespace) -> Vec<(String, u64, u64)> {
    ns.list_logs().expect("list").into_iter().map(|l| (l.name, l.earliest, l.latest)).collect()
}

fn segment_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir.join("ns"))
        .expect("list")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .map(|p| std::fs::metadata(p).expect("stat").len())
        .sum()
}

#[test]
fn trims_survive_reopen_from_the_checkpoint_and_by_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let ns = open(dir.path(), JournalOptions::default());
        ns.create_log("events", LogConfig::unbounded()).expect("create");
        ns.create_log("ring", LogConfig::keep(8, OnFull::Overwrite)).expect("create");
        for i in 0..20u8 {
            ns.append_batch(&[("events", &[i][..]), ("ring", &[i])]).expect("batch");
        }
        assert_eq!(ns.trim("events", 15).expect("trim"), 15);
        assert_eq!(ns.trim("ring", 16).expect("trim"), 16);
        ns.append("events", b"after").expect("append");
        ns.close().expect("close");
    }
    let expected = vec![("events".to_owned(), 15, 21), ("ring".to_owned(), 16, 20)];
    let ns = open(dir.path(), JournalOptions::default());
    assert_eq!(ns.recovery_report().checkpoint, CheckpointUse::Loaded);
    assert_eq!(bounds(&ns), expected);
    drop(ns);
    std::fs::remove_file(dir.path().join("ns").join(CHECKPOINT_FILE)).expect("remove the checkpoint");
    let ns = open(dir.path(), JournalOptions::default());
    assert_eq!(ns.recovery_report().checkpoint, CheckpointUse::Absent);
    assert_eq!(bounds(&ns), expected);
    assert!(matches!(ns.get("events", 14), Err(LogError::Trimmed { earliest: 15, .. })));
    assert_eq!(ns.get("events", 15).expect("get"), &[14u8][..]);
    assert_eq!(ns.get("events", 21).expect("get"), &b"after"[..]);
    // Retention goes on from the trim: four more records pass it.
    for _ in 0..4 {
        ns.append("ring", b"more").expect("append");
    }
    assert_eq!(ns.earliest("ring").expect("earliest"), 17);
    drop(ns);
    let report = fsck(&dir.path().join("ns"), false, &mut |_, _| {}).expect("fsck");
    assert!(report.damage.is_empty() && report.losses.is_empty(), "{report:?}");
}

/// The segment that held the trim frame is reclaimed while the segment that
/// holds the trimmed records stays: the headers of later segments state the
/// floor, and a replay trims from there — no trimmed record comes back.
#[test]
fn a_trim_in_a_reclaimed_segment_is_restated_by_later_headers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let segment = |id: u32| dir.path().join(format!("ns/{id:010}.seg"));
    {
        let ns = open(dir.path(), small_segments());
        ns.create_log("a", LogConfig::unbounded()).expect("create");
        ns.create_log("hot", LogConfig::keep(2, OnFull::Overwrite)).expect("create");
        // Segment 1 stays: mostly live records of `a`, above the trim.
        for i in 0..10u8 {
            ns.append("a", &[i; 1400]).expect("append");
        }
        while !segment(2).exists() {
            ns.append("hot", &[0; 1000]).expect("append");
        }
        assert_eq!(ns.trim("a", 3).expect("trim, in segment 2"), 3);
        for _ in 0..200 {
            ns.append("hot", &[1; 1000]).expect("append");
        }
        assert!(segment(1).exists() && !segment(2).exists(), "segment 2, with the trim, reclaimed");
    }
    std::fs::remove_file(dir.path().join("ns").join(CHECKPOINT_FILE)).expect("remove the checkpoint");
    let ns = open(dir.path(), small_segments());
    assert!(ns.recovery_report().damage.is_empty(), "{:?}", ns.recovery_report().damage);
    let info = ns.log_info("a").expect("info");
    assert_eq!((info.earliest, info.latest), (3, 10), "the trim holds after its frame's segment is gone");
    assert!(matches!(ns.get("a", 2), Err(LogError::Trimmed { .. })));
    assert_eq!(ns.get("a", 3).expect("get"), &[2u8; 1400][..]);
}

#[test]
fn trimmed_records_give_their_disk_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ns = open(dir.path(), small_segments());
    ns.create_log("big", LogConfig::unbounded()).expect("create");
    for i in 0..2_000u32 {
        ns.append("big", &[u8::try_from(i % 251).expect("small"); 1000]).expect("append");
    }
    let before = segment_bytes(dir.path());
    assert_eq!(ns.trim("big", 1_990).expect("trim"), 1_990);
    // The compactor runs as the writer writes.
    ns.create_log("nudge", LogConfig::unbounded()).expect("create");
    for _ in 0..50 {
        ns.append("nudge", b"x").expect("append");
    }
    let after = segment_bytes(dir.path());
    println!("segments: {before} bytes before the trim, {after} after");
    assert!(before > 1_900_000, "{before}");
    assert!(after < before / 10, "the trimmed records' segments were reclaimed: {before} -> {after}");
    let seqs: Vec<u64> = ns.scan("big", SeqRange::from(1_990..)).expect("scan").map(|r| r.expect("r").seq).collect();
    assert_eq!(seqs, (1_990..=2_000).collect::<Vec<_>>());
}

#[test]
fn read_only_handles_see_trims_and_cannot_trim() {
    let dir = tempfile::tempdir().expect("tempdir");
    let writer = open(dir.path(), JournalOptions::default());
    writer.create_log("w", LogConfig::unbounded()).expect("create");
    for i in 0..5u8 {
        writer.append("w", &[i]).expect("append");
    }
    let options =
        JournalOptions { read_only: true, read_only_poll: Duration::from_millis(5), ..JournalOptions::default() };
    let reader = open(dir.path(), options);
    assert_eq!(reader.earliest("w").expect("earliest"), 1);
    writer.trim("w", 4).expect("trim");
    writer.append("w", b"next").expect("append");
    let mut watch = reader.watch("w", 6).expect("watch");
    assert_eq!(watch.next_timeout(Duration::from_secs(5)).expect("ok").expect("record 6").value, &b"next"[..]);
    assert_eq!(reader.earliest("w").expect("earliest"), 4, "the reader applied the trim frame");
    assert!(matches!(reader.get("w", 3), Err(LogError::Trimmed { .. })));
    assert!(matches!(reader.trim("w", 5), Err(LogError::ReadOnly { .. })));
    assert!(matches!(reader.trim("w", 9), Err(LogError::InvalidArgument { .. })), "checked before ReadOnly");
}
