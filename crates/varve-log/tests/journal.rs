//! Journal behaviour beyond the shared contract: persistence across reopen,
//! the writer lock, read-only followers, disk reclamation, sync policies.

#![allow(clippy::cast_precision_loss, reason = "disk-use ratios in assertions")]

mod support;

use std::path::Path;
use std::time::Duration;

use support::contents;
use varve_log::journal::CHECKPOINT_FILE;
use varve_log::{
    CheckpointUse, JournalNamespace, JournalOptions, JournalStore, LogConfig, LogError, Namespace, OnFull, SeqRange,
    SyncPolicy,
};

fn open(dir: &Path, options: JournalOptions) -> JournalNamespace {
    JournalStore::open(dir, options).expect("open store").journal_namespace("ns").expect("open namespace")
}

fn small_segments() -> JournalOptions {
    JournalOptions { segment_bytes_max: 16 << 10, sync: SyncPolicy::Never, ..JournalOptions::default() }
}

fn read_only() -> JournalOptions {
    JournalOptions { read_only: true, read_only_poll: Duration::from_millis(5), ..JournalOptions::default() }
}

fn segment_files(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("ns"))
        .expect("list")
        .filter(|e| e.as_ref().expect("entry").file_name().to_string_lossy().ends_with(".seg"))
        .count()
}

#[test]
fn everything_survives_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let ns = open(dir.path(), small_segments());
        ns.create_log("u", LogConfig::unbounded()).expect("create");
        ns.create_log("r", LogConfig::keep(5, OnFull::Refuse)).expect("create");
        ns.create_log("o", LogConfig::keep(7, OnFull::Overwrite)).expect("create");
        ns.create_log("gone", LogConfig::unbounded()).expect("create");
        ns.append("gone", b"bye").expect("append");
        for i in 1..=500u64 {
            ns.append_batch(&[("u", format!("u{i}").as_bytes()), ("o", format!("o{i}").as_bytes())]).expect("batch");
        }
        ns.append("r", b"r1").expect("append");
        ns.delete_log("gone").expect("delete");
        ns.close().expect("close");
    }
    let ns = open(dir.path(), small_segments());
    let logs = ns.list_logs().expect("list");
    let summary: Vec<(&str, u64, u64)> = logs.iter().map(|l| (l.name.as_str(), l.earliest, l.latest)).collect();
    assert_eq!(summary, [("o", 494, 500), ("r", 1, 1), ("u", 1, 500)]);
    assert_eq!(ns.log_info("o").expect("info").config, LogConfig::keep(7, OnFull::Overwrite));
    for i in 1..=500u64 {
        assert_eq!(ns.get("u", i).expect("get"), format!("u{i}").as_bytes());
    }
    assert_eq!(ns.get("o", 500).expect("get"), &b"o500"[..]);
    assert!(matches!(ns.get("o", 493), Err(LogError::Trimmed { earliest: 494, .. })));
    // Appends go on from where they were, seqs never reused.
    assert_eq!(ns.append("o", b"o501").expect("append"), 501);
    assert!(ns.recovery_report().torn_tail.is_none());
    assert!(ns.recovery_report().segments > 1, "small segments rolled");
    assert_eq!(ns.recovery_report().checkpoint, CheckpointUse::Loaded, "the clean close saved a checkpoint");
}

/// Three logs over several segments, `n` batches each; closed cleanly.
fn fill(dir: &Path, from: u64, n: u64) {
    let ns = open(dir, small_segments());
    for log in ["u", "o"] {
        let config = if log == "o" { LogConfig::keep(7, OnFull::Overwrite) } else { LogConfig::unbounded() };
        ns.create_log(log, config).expect("create");
    }
    for i in from..from + n {
        ns.append_batch(&[("u", format!("u{i}").as_bytes()), ("o", format!("o{i}").as_bytes())]).expect("batch");
    }
    ns.close().expect("close");
}

fn assert_filled(ns: &JournalNamespace, n: u64) {
    assert_eq!((ns.earliest("u").expect("earliest"), ns.latest("u").expect("latest")), (1, n));
    assert_eq!((ns.earliest("o").expect("earliest"), ns.latest("o").expect("latest")), (n - 6, n));
    for i in 1..=n {
        assert_eq!(ns.get("u", i).expect("get"), format!("u{i}").as_bytes());
    }
    assert_eq!(ns.get("o", n).expect("get"), format!("o{n}").as_bytes());
}

/// The segment files' names, ascending.
fn segment_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("ns"))
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| Path::new(name).extension().is_some_and(|e| e == "seg"))
        .collect();
    names.sort();
    names
}

/// Batches `from..from + n` of a small record to the unbounded log `u` and
/// a 1 KiB one to the overwrite log `o`, which keeps 7: most bytes die, so
/// the compactor moves `u`'s records out of old segments and reclaims them.
fn fill_mostly_overwritten(dir: &Path, from: u64, n: u64) {
    let ns = open(dir, small_segments());
    ns.create_log("u", LogConfig::unbounded()).expect("create");
    ns.create_log("o", LogConfig::keep(7, OnFull::Overwrite)).expect("create");
    for i in from..from + n {
        let big = format!("o{i}").into_bytes().into_iter().chain([b'.'; 1024]).collect::<Vec<u8>>();
        ns.append_batch(&[("u", format!("u{i}").as_bytes()), ("o", &big)]).expect("batch");
    }
    ns.close().expect("close");
}

fn assert_mostly_overwritten(ns: &JournalNamespace, n: u64) {
    assert_eq!((ns.earliest("u").expect("earliest"), ns.latest("u").expect("latest")), (1, n));
    assert_eq!((ns.earliest("o").expect("earliest"), ns.latest("o").expect("latest")), (n - 6, n));
    for i in 1..=n {
        assert_eq!(ns.get("u", i).expect("get"), format!("u{i}").as_bytes());
    }
    assert!(ns.get("o", n).expect("get").starts_with(format!("o{n}.").as_bytes()));
}

#[test]
fn an_older_checkpoint_is_loaded_and_the_frames_after_it_replayed_though_segments_were_reclaimed() {
    let dir = tempfile::tempdir().expect("tempdir");
    fill_mostly_overwritten(dir.path(), 1, 300);
    let checkpoint = dir.path().join("ns").join(CHECKPOINT_FILE);
    let old = std::fs::read(&checkpoint).expect("a clean close saves a checkpoint");
    let listed = segment_names(dir.path());
    // A second session writes more (the overwrite log's trimming lets the
    // compactor reclaim segments, moving the unbounded log's records out
    // of them), then closes cleanly: a new checkpoint.
    fill_mostly_overwritten(dir.path(), 301, 300);
    let now = segment_names(dir.path());
    assert!(listed.iter().any(|name| !now.contains(name)), "segments were reclaimed: {listed:?} → {now:?}");
    // Put the first session's checkpoint back, as if a crash had left it.
    std::fs::write(&checkpoint, &old).expect("write");
    let ns = open(dir.path(), small_segments());
    assert_eq!(ns.recovery_report().checkpoint, CheckpointUse::Loaded);
    assert!(ns.recovery_report().frames > 0, "the frames after it were replayed");
    assert_mostly_overwritten(&ns, 600);
    assert!(checkpoint.exists(), "the writer's open keeps it: it describes a prefix of the journal");
}

#[test]
fn a_checkpoint_placing_records_in_a_segment_deleted_by_hand_is_ignored_and_the_damage_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    fill(dir.path(), 1, 300);
    let names = segment_names(dir.path());
    assert!(names.len() >= 2, "{names:?}");
    // The oldest segment holds the first of the unbounded log's records.
    std::fs::remove_file(dir.path().join("ns").join(&names[0])).expect("remove");
    let ns = open(dir.path(), small_segments());
    match &ns.recovery_report().checkpoint {
        CheckpointUse::Ignored { reason } => assert!(reason.contains("no longer on disk"), "{reason}"),
        other => panic!("a checkpoint placing records in a missing segment was used: {other:?}"),
    }
    // The replay of every frame reports what is missing, as it would with no checkpoint.
    assert!(ns.recovery_report().needs_attention(), "{:?}", ns.recovery_report());
}

/// A reader loads an older checkpoint whose listed segments the compactor
/// reclaimed since, as the writer does: the frames after it moved or
/// dropped every record those segments held.
#[test]
fn a_read_only_open_loads_an_older_checkpoint_though_segments_were_reclaimed() {
    let dir = tempfile::tempdir().expect("tempdir");
    fill_mostly_overwritten(dir.path(), 1, 300);
    let checkpoint = dir.path().join("ns").join(CHECKPOINT_FILE);
    let old = std::fs::read(&checkpoint).expect("a clean close saves a checkpoint");
    let listed = segment_names(dir.path());
    let writer = open(dir.path(), small_segments());
    for i in 301..=600u64 {
        let big = format!("o{i}").into_bytes().into_iter().chain([b'.'; 1024]).collect::<Vec<u8>>();
        writer.append_batch(&[("u", format!("u{i}").as_bytes()), ("o", &big)]).expect("batch");
    }
    let now = segment_names(dir.path());
    assert!(listed.iter().any(|name| !now.contains(name)), "segments were reclaimed: {listed:?} → {now:?}");
    // The first session's checkpoint, as a reader finds one written late.
    std::fs::write(&checkpoint, &old).expect("write");
    let reader = open(dir.path(), read_only());
    assert_eq!(reader.recovery_report().checkpoint, CheckpointUse::Loaded);
    assert!(!reader.recovery_report().needs_attention(), "{:?}", reader.recovery_report());
    assert_mostly_overwritten(&reader, 600);
    assert!(contents(&reader) == contents(&writer), "the reader differs from the writer");
}

/// A reader whose checkpoint places live records in a segment deleted by
/// hand distrusts it once it has read on, and opens again replaying every
/// frame, which reports the damage.
#[test]
fn a_read_only_open_distrusts_a_checkpoint_placing_records_in_a_segment_deleted_by_hand() {
    let dir = tempfile::tempdir().expect("tempdir");
    fill(dir.path(), 1, 300);
    let names = segment_names(dir.path());
    assert!(names.len() >= 2, "{names:?}");
    // The oldest segment holds the first of the unbounded log's records.
    std::fs::remove_file(dir.path().join("ns").join(&names[0])).expect("remove");
    let reader = open(dir.path(), read_only());
    match &reader.recovery_report().checkpoint {
        CheckpointUse::Ignored { reason } => assert!(reason.contains("no longer on disk"), "{reason}"),
        other => panic!("a checkpoint placing records in a missing segment was used: {other:?}"),
    }
    assert!(reader.recovery_report().needs_attention(), "{:?}", reader.recovery_report());
    assert!(matches!(reader.get("u", 1), Err(LogError::Lost { .. })), "{:?}", reader.get("u", 1));
}

#[test]
fn a_read_only_open_loads_the_checkpoint_and_reads_on_to_the_writers_published_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    fill(dir.path(), 1, 300);
    let reader = open(dir.path(), read_only());
    assert_eq!(reader.recovery_report().checkpoint, CheckpointUse::Loaded);
    assert_filled(&reader, 300);
    // A writer opens (from the checkpoint) and appends:
    // the reader that loaded the checkpoint follows it from there.
    let writer = open(dir.path(), small_segments());
    assert_eq!(writer.recovery_report().checkpoint, CheckpointUse::Loaded);
    for i in 301..=400u64 {
        writer.append_batch(&[("u", format!("u{i}").as_bytes()), ("o", format!("o{i}").as_bytes())]).expect("batch");
    }
    reader.refresh().expect("refresh");
    assert_filled(&reader, 400);
    // The writer has written since the checkpoint: a reader loads it and
    // reads on to the writer's published end.
    let second = open(dir.path(), read_only());
    assert_eq!(second.recovery_report().checkpoint, CheckpointUse::Loaded);
    assert_filled(&second, 400);
    drop(writer);
    let third = open(dir.path(), read_only());
    assert_eq!(third.recovery_report().checkpoint, CheckpointUse::Loaded, "the writer's clean close saved one");
    assert_filled(&third, 400);
}

#[test]
fn a_damaged_or_cut_checkpoint_is_ignored_and_every_frame_replayed() {
    let dir = tempfile::tempdir().expect("tempdir");
    fill(dir.path(), 1, 300);
    let checkpoint = dir.path().join("ns").join(CHECKPOINT_FILE);
    let good = std::fs::read(&checkpoint).expect("a clean close saves a checkpoint");
    let mut flipped = good.clone();
    flipped[good.len() / 2] ^= 0x01;
    for (bytes, why) in
        [(flipped, "checksum"), (good[..good.len() - 3].to_vec(), "cut short"), (Vec::new(), "cut short")]
    {
        std::fs::write(&checkpoint, &bytes).expect("write");
        let ns = open(dir.path(), small_segments());
        match &ns.recovery_report().checkpoint {
            CheckpointUse::Ignored { reason } => assert!(reason.contains(why), "{reason}"),
            other => panic!("a bad checkpoint ({why}) was not ignored: {other:?}"),
        }
        assert_filled(&ns, 300);
    }
    // After a clean close again, the next open loads the new checkpoint.
    let ns = open(dir.path(), small_segments());
    assert_eq!(ns.recovery_report().checkpoint, CheckpointUse::Loaded);
    assert_filled(&ns, 300);
}

#[test]
fn second_writer_is_locked_out_until_the_first_is_gone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = open(dir.path(), JournalOptions::default());
    first.create_log("a", LogConfig::unbounded()).expect("create");
    let err = JournalStore::open(dir.path(), JournalOptions::default())
        .expect("store")
        .journal_namespace("ns")
        .err()
        .expect("second writer refused");
    assert!(matches!(err, LogError::Locked { .. }), "{err}");
    assert!(err.to_string().contains("locked by another writer"));
    // Readers need no lock.
    let reader = open(dir.path(), read_only());
    assert_eq!(reader.latest("a").expect("latest"), 0);
    assert!(matches!(reader.append("a", b"x"), Err(LogError::ReadOnly { .. })));
    drop(first);
    let second = open(dir.path(), JournalOptions::default());
    assert_eq!(second.append("a", b"x").expect("append"), 1);
}

#[test]
fn read_only_handle_follows_the_writer_across_rolls_and_reclamation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let writer = open(dir.path(), small_segments());
    writer.create_log("o", LogConfig::keep(10, OnFull::Overwrite)).expect("create");
    writer.append("o", b"first").expect("append");
    let reader = open(dir.path(), JournalOptions { segment_bytes_max: 16 << 10, ..read_only() });
    assert_eq!(reader.latest("o").expect("latest"), 1);
    let mut watch = reader.watch("o", 2).expect("watch");
    let payload = vec![b'x'; 900];
    for _ in 0..200 {
        writer.append("o", &payload).expect("append");
    }
    // The reader sees every new record in order, though most are trimmed by
    // the time it looks: it must report that, not skip silently.
    let mut seen = 0;
    loop {
        match watch.next_timeout(Duration::from_secs(5)) {
            Ok(Some(record)) => {
                seen = record.seq;
                if seen == 201 {
                    break;
                }
            }
            Ok(None) => panic!("watch stalled at {seen}"),
            Err(LogError::Trimmed { earliest, .. }) => {
                assert!(earliest > seen);
                watch = reader.watch("o", earliest).expect("resume");
            }
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert_eq!(reader.latest("o").expect("latest"), 201);
    assert_eq!(reader.get("o", 201).expect("get"), payload);
    assert!(segment_files(dir.path()) < 5, "old segments were deleted");
}

#[test]
fn watch_on_a_read_only_handle_sees_new_records_as_they_land() {
    let dir = tempfile::tempdir().expect("tempdir");
    let writer = open(dir.path(), JournalOptions::default());
    writer.create_log("t", LogConfig::unbounded()).expect("create");
    let reader = open(dir.path(), read_only());
    let mut watch = reader.watch("t", 1).expect("watch");
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for i in 1..=5u8 {
                std::thread::sleep(Duration::from_millis(10));
                writer.append("t", &[i]).expect("append");
            }
        });
        for i in 1..=5u8 {
            let record = watch.next_timeout(Duration::from_secs(5)).expect("ok").expect("arrives");
            assert_eq!((record.seq, record.value.to_vec()), (u64::from(i), vec![i]));
        }
    });
}

#[test]
fn overwrite_workload_keeps_disk_within_twice_the_live_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = JournalOptions { segment_bytes_max: 64 << 10, sync: SyncPolicy::Never, ..JournalOptions::default() };
    let ns = open(dir.path(), options);
    ns.create_log("hot", LogConfig::keep(200, OnFull::Overwrite)).expect("create");
    ns.create_log("cold", LogConfig::unbounded()).expect("create");
    let record = vec![7u8; 1000];
    let mut worst_ratio: f64 = 0.0;
    for i in 0..20_000u32 {
        ns.append("hot", &record).expect("append");
        // A slow unbounded log pins a few records in every segment, so only
        // the compactor can free them.
        if i % 50 == 0 {
            ns.append("cold", &i.to_le_bytes()).expect("append");
        }
        if i > 1000 && i % 100 == 0 {
            let (disk, live) = ns.disk_usage();
            worst_ratio = worst_ratio.max(disk as f64 / (live + (64 << 10)) as f64);
        }
    }
    let (disk, live) = ns.disk_usage();
    assert!(disk <= 2 * live + (64 << 10), "disk {disk} bytes for {live} live bytes");
    assert!(worst_ratio <= 2.0, "disk use peaked at {worst_ratio:.2}x (live + one segment)");
    // The cold records moved by compaction are all still there and intact.
    let cold: Vec<u32> = ns
        .scan("cold", SeqRange::ALL)
        .expect("scan")
        .map(|r| u32::from_le_bytes(r.expect("record").value[..].try_into().expect("4 bytes")))
        .collect();
    assert_eq!(cold, (0..20_000).step_by(50).collect::<Vec<u32>>());
    drop(ns);
    // And a reopen rebuilds the same index from segment headers, relocations
    // and the frames that are left.
    let ns = open(dir.path(), options);
    assert_eq!(ns.scan("cold", SeqRange::ALL).expect("scan").count(), 400);
    assert_eq!((ns.earliest("hot").expect("e"), ns.latest("hot").expect("l")), (19_801, 20_000));
    assert_eq!(ns.get("hot", 19_801).expect("get"), record);
}

#[test]
fn catalog_survives_the_deletion_of_the_segments_that_created_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let ns = open(dir.path(), small_segments());
        ns.create_log("early", LogConfig::keep(3, OnFull::Overwrite)).expect("create");
        ns.create_log("deleted", LogConfig::unbounded()).expect("create");
        ns.append("deleted", b"x").expect("append");
        ns.delete_log("deleted").expect("delete");
        for i in 0..2000u32 {
            ns.append("early", &i.to_le_bytes().repeat(50)).expect("append");
        }
        assert!(!dir.path().join("ns/0000000001.seg").exists(), "first segment reclaimed");
    }
    let ns = open(dir.path(), small_segments());
    let names: Vec<String> = ns.list_logs().expect("list").into_iter().map(|l| l.name).collect();
    assert_eq!(names, ["early"]);
    assert_eq!(ns.latest("early").expect("latest"), 2000);
    assert_eq!(ns.earliest("early").expect("earliest"), 1998);
}

/// Every segment starts with a header restating the catalog; with many logs
/// that header is larger than a small segment. Segments then grow to 16
/// times their header, so headers stay a small share of the disk instead of
/// one header per frame (`PEDaLS` keeps a log per node: issue 16).
#[test]
fn headers_stay_a_small_share_of_the_disk_when_a_namespace_has_many_logs() {
    const LOGS: usize = 400;
    let dir = tempfile::tempdir().expect("tempdir");
    let name = |i: usize| format!("pds.structure.link.{i:020}");
    {
        let ns = open(dir.path(), small_segments());
        for i in 0..LOGS {
            ns.create_log(&name(i), LogConfig::unbounded()).expect("create");
        }
        for round in 0..2_000usize {
            ns.append(&name(round % LOGS), &[u8::try_from(round % 251).expect("< 251"); 1000]).expect("append");
        }
        ns.close().expect("close");
    }
    let mut segments: Vec<(u64, u64)> = std::fs::read_dir(dir.path().join("ns"))
        .expect("list")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .map(|path| {
            let bytes = std::fs::read(&path).expect("read a segment");
            // The frame header: magic u16, kind u8, reserved u8, body_len u32, …, 16 bytes in all.
            let header = 16 + u64::from(u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes")));
            (header, bytes.len() as u64)
        })
        .collect();
    segments.pop(); // the active segment: not full yet
    let headers: u64 = segments.iter().map(|(header, _)| header).sum();
    let total: u64 = segments.iter().map(|(_, len)| len).sum();
    assert!(segments.len() >= 3, "the records fill several segments: {segments:?}");
    assert!(headers > 16 << 10, "each header ({headers} bytes in all) is larger than segment_bytes_max");
    assert!(headers * 10 <= total, "headers are {headers} of {total} bytes in sealed segments: {segments:?}");
    let ns = open(dir.path(), small_segments());
    assert_eq!(ns.list_logs().expect("list").len(), LOGS);
    for round in [0usize, 777, 1_999] {
        let seq = (round / LOGS + 1) as u64;
        let value = [u8::try_from(round % 251).expect("< 251"); 1000];
        assert_eq!(&ns.get(&name(round % LOGS), seq).expect("get")[..], &value[..]);
    }
}

#[test]
fn group_commit_and_never_acknowledge_and_sync_on_demand() {
    for sync in [SyncPolicy::Group(Duration::from_millis(2)), SyncPolicy::Never] {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let ns = open(dir.path(), JournalOptions { sync, ..JournalOptions::default() });
            ns.create_log("g", LogConfig::unbounded()).expect("create");
            std::thread::scope(|scope| {
                for t in 0..4u8 {
                    let ns = &ns;
                    scope.spawn(move || {
                        for _ in 0..250 {
                            ns.append("g", &[t]).expect("append");
                        }
                    });
                }
            });
            ns.sync().expect("sync");
        }
        let ns = open(dir.path(), JournalOptions::default());
        assert_eq!(ns.latest("g").expect("latest"), 1000, "{sync:?}");
    }
}

#[test]
fn records_above_a_custom_limit_are_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let limits = varve_log::Limits { record_bytes_max: 100, batch_bytes_max: 1000, batch_records_max: 5 };
    let ns = open(dir.path(), JournalOptions { limits, ..JournalOptions::default() });
    ns.create_log("l", LogConfig::unbounded()).expect("create");
    assert!(matches!(ns.append("l", &[0; 101]), Err(LogError::TooLarge { limit: 100, .. })));
    let batch: Vec<(&str, &[u8])> = vec![("l", &[0; 100]); 5];
    assert_eq!(ns.append_batch(&batch).expect("at the limits").len(), 5);
    let batch: Vec<(&str, &[u8])> = vec![("l", &[0; 10]); 6];
    let err = ns.append_batch(&batch).expect_err("six records");
    assert!(matches!(err, LogError::TooLarge { .. }));
    assert!(err.to_string().starts_with("batch has 6 records, over the limit of 5 records"), "{err}");
    assert!(err.to_string().contains("batch_records_max"), "{err}");
    let err = ns.append("l", &[0; 101]).expect_err("too large");
    assert!(err.to_string().starts_with("record is 101 bytes, over the limit of 100 bytes"), "{err}");
    assert!(err.to_string().contains("--record-bytes-max"), "names the CLI flag too: {err}");
    assert_eq!(ns.latest("l").expect("latest"), 5);
}

#[test]
fn read_only_open_of_a_missing_namespace_is_not_found() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = JournalStore::open(dir.path(), read_only()).expect("store").journal_namespace("ns").err().expect("err");
    assert!(matches!(err, LogError::NamespaceNotFound { .. }), "{err}");
}

#[test]
fn bad_options_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = JournalOptions { segment_bytes_max: 10, ..JournalOptions::default() };
    assert!(matches!(JournalStore::open(dir.path(), options), Err(LogError::InvalidArgument { .. })));
}

#[test]
fn get_checks_each_record_and_names_the_damage() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ns = open(dir.path(), small_segments());
    ns.create_log("a", LogConfig::unbounded()).expect("create");
    for i in 0..100u32 {
        ns.append("a", format!("record number {i:04} with some padding").as_bytes()).expect("append");
    }
    // Damage record 1's payload in the (sealed) first segment behind the
    // open handle's back: the next read of it must notice.
    let first = dir.path().join("ns/0000000001.seg");
    let mut bytes = std::fs::read(&first).expect("read");
    let at = bytes.windows(17).position(|w| w == b"record number 000").expect("record 0 on disk");
    bytes[at + 3] ^= 0x20;
    std::fs::write(&first, &bytes).expect("write");
    match ns.get("a", 1) {
        Err(LogError::Lost { log, first: 1, last: 1, cause }) => {
            assert_eq!((log.as_str(), &cause.segment), ("a", &first));
            assert_eq!(cause.offset, Some(at as u64 - 20), "names the record's offset");
            assert!(cause.reason.contains("checksum"), "{}", cause.reason);
        }
        other => panic!("damage not reported: {other:?}"),
    }
    assert_eq!(ns.get("a", 2).expect("undamaged records still read"), &b"record number 0001 with some padding"[..]);
}

/// The writer reads its segments through memory maps (the active one too):
/// a byte changed on disk behind its back is seen at the next read, in the
/// active segment as in a sealed one, and a scan reports it once and goes on.
#[test]
fn the_writers_mapped_reads_check_each_record_in_the_active_segment_too() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let ns = open(dir.path(), small_segments());
    ns.create_log("a", LogConfig::unbounded()).expect("create");
    for i in 0..2000u32 {
        ns.append("a", format!("record number {i:04} with some padding").as_bytes()).expect("append");
    }
    let scanned: Vec<_> = ns.scan("a", SeqRange::ALL).expect("scan").map(|r| r.expect("intact")).collect();
    assert_eq!(scanned.len(), 2000);
    for (i, record) in scanned.iter().enumerate() {
        assert_eq!(record.seq, i as u64 + 1);
        assert_eq!(record.value, format!("record number {i:04} with some padding").as_bytes());
    }
    let newest = std::fs::read_dir(dir.path().join("ns"))
        .expect("list")
        .map(|e| e.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|x| x == "seg"))
        .max()
        .expect("segments");
    assert_ne!(newest, dir.path().join("ns/0000000001.seg"), "the records span several segments");
    let bytes = std::fs::read(&newest).expect("read");
    let at = bytes.windows(18).position(|w| w == b"record number 1999").expect("the last record is in the newest");
    let file = std::fs::OpenOptions::new().write(true).open(&newest).expect("open");
    file.write_all_at(b"R", at as u64).expect("damage one byte in place");
    match ns.get("a", 2000) {
        Err(LogError::Lost { first: 2000, last: 2000, cause, .. }) => {
            assert_eq!(cause.segment, newest);
            assert!(cause.reason.contains("checksum"), "{}", cause.reason);
        }
        other => panic!("damage in the active segment not reported: {other:?}"),
    }
    let results: Vec<_> = ns.scan("a", SeqRange::from_bounds(1990..)).expect("scan").collect();
    assert_eq!(results.len(), 11, "ten records and one error");
    assert!(results[..10].iter().all(Result::is_ok));
    assert!(matches!(results[10], Err(LogError::Lost { first: 2000, .. })), "{:?}", results[10]);
    // Appends go on, and are read back through the grown map.
    for i in 2000..2400u32 {
        let seq = ns.append("a", format!("record number {i:04} after the damage").as_bytes()).expect("append");
        assert_eq!(ns.get("a", seq).expect("read back"), format!("record number {i:04} after the damage").as_bytes());
    }
}

#[test]
fn readers_never_see_damage_while_retention_and_compaction_move_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = JournalOptions { segment_bytes_max: 8 << 10, sync: SyncPolicy::Never, ..JournalOptions::default() };
    let ns = open(dir.path(), options);
    ns.create_log("hot", LogConfig::keep(50, OnFull::Overwrite)).expect("create");
    ns.create_log("cold", LogConfig::unbounded()).expect("create");
    let done = std::sync::atomic::AtomicBool::new(false);
    let value = |log: &str, seq: u64| format!("{log}:{seq}:").repeat(8).into_bytes();
    std::thread::scope(|scope| {
        for reader in 0..3u64 {
            let (ns, done) = (&ns, &done);
            scope.spawn(move || {
                let mut state = reader + 1;
                let mut reads = 0u64;
                while !done.load(std::sync::atomic::Ordering::Relaxed) || reads < 1000 {
                    for log in ["hot", "cold"] {
                        let (earliest, latest) = (ns.earliest(log).expect("earliest"), ns.latest(log).expect("latest"));
                        if latest == 0 {
                            continue;
                        }
                        // The bounds are two reads: an empty log's earliest (0)
                        // may be paired with a latest read after the first append.
                        let earliest = earliest.max(1);
                        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                        let seq = earliest + (state >> 33) % (latest - earliest + 1);
                        match ns.get(log, seq) {
                            Ok(bytes) => assert_eq!(bytes, value(log, seq), "{log} seq {seq}"),
                            // Trimmed between reading the bounds and the record.
                            Err(LogError::Trimmed { .. }) if log == "hot" => {}
                            Err(e) => panic!("{log} seq {seq}: {e}"),
                        }
                        reads += 1;
                    }
                }
            });
        }
        for i in 1..=6000u64 {
            ns.append("hot", &value("hot", i)).expect("append");
            if i % 20 == 0 {
                ns.append("cold", &value("cold", i / 20)).expect("append");
            }
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let (disk, live) = ns.disk_usage();
    assert!(disk <= 2 * live + (8 << 10), "compaction kept up: {disk} on disk for {live} live");
    assert_eq!(ns.scan("cold", SeqRange::ALL).expect("scan").count(), 300);
}

#[test]
fn a_reader_opened_while_the_writer_saves_checkpoints_reads_what_the_writer_has() {
    let dir = tempfile::tempdir().expect("tempdir");
    let writer = open(dir.path(), JournalOptions { checkpoint_bytes_min: 4096, ..small_segments() });
    writer.create_log("u", LogConfig::unbounded()).expect("create");
    writer.create_log("o", LogConfig::keep(7, OnFull::Overwrite)).expect("create");
    let mut loaded = 0;
    for i in 1..=600u64 {
        let big = format!("o{i}").into_bytes().into_iter().chain([b'.'; 1024]).collect::<Vec<u8>>();
        writer.append_batch(&[("u", format!("u{i}").as_bytes()), ("o", &big)]).expect("batch");
        if i % 37 == 0 {
            let reader = open(dir.path(), read_only());
            loaded += usize::from(reader.recovery_report().checkpoint == CheckpointUse::Loaded);
            // Before any read that would catch up on its own: the open did.
            assert_eq!(reader.latest("u").expect("latest"), i, "after batch {i}");
            assert!(contents(&reader) == contents(&writer), "after batch {i}: the reader differs from the writer");
        }
    }
    assert!(loaded > 0, "no reader loaded a checkpoint the writer saved as it wrote");
}

/// An open whose checkpoint lists a segment no longer on disk first resumes
/// from it (cutting the newest segment's torn tail), then distrusts it and
/// replays every frame, which no longer sees the torn tail: the report
/// still names the cut, as a replay of every frame does. (From a review.)
#[test]
fn a_torn_tail_cut_before_a_checkpoint_is_distrusted_is_still_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    fill(dir.path(), 1, 300);
    let names = segment_names(dir.path());
    assert!(names.len() >= 2, "{names:?}");
    let ns_dir = dir.path().join("ns");
    // The oldest segment holds the first of the unbounded log's records.
    std::fs::remove_file(ns_dir.join(&names[0])).expect("remove");
    // A crash mid-write: a frame header cut short at the end of the newest segment.
    let newest = ns_dir.join(names.last().expect("a segment"));
    let mut bytes = std::fs::read(&newest).expect("read");
    bytes.extend_from_slice(&[0x56, 0x56, 1, 0, 9, 9, 9]);
    std::fs::write(&newest, &bytes).expect("write");
    // The same files without the checkpoint: what a replay of every frame reports.
    let copy = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(copy.path().join("ns")).expect("mkdir");
    for entry in std::fs::read_dir(&ns_dir).expect("list") {
        let entry = entry.expect("entry");
        if entry.file_type().expect("type").is_file() && entry.file_name() != CHECKPOINT_FILE {
            std::fs::copy(entry.path(), copy.path().join("ns").join(entry.file_name())).expect("copy");
        }
    }
    let full = open(copy.path(), small_segments());
    assert!(full.recovery_report().torn_tail.is_some(), "a replay of every frame cuts and reports the torn tail");
    let ns = open(dir.path(), small_segments());
    assert!(
        matches!(&ns.recovery_report().checkpoint, CheckpointUse::Ignored { .. }),
        "{:?}",
        ns.recovery_report().checkpoint
    );
    assert_eq!(
        ns.recovery_report().torn_tail.as_ref().map(|t| (t.offset, t.dropped_bytes)),
        full.recovery_report().torn_tail.as_ref().map(|t| (t.offset, t.dropped_bytes)),
        "the open's report must name the torn tail it cut, as a replay of every frame does"
    );
    drop(ns);
    // The distrusted checkpoint is gone: the next open replays at once.
    assert!(!ns_dir.join(CHECKPOINT_FILE).exists());
}

/// A read-only open that loads the checkpoint reads the frames written after
/// it before it returns; its report counts them, as the report of an open
/// from a checkpoint says. (From a review.)
#[test]
fn a_read_only_open_from_the_checkpoint_counts_the_frames_it_read_after_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    fill(dir.path(), 1, 300);
    let writer = open(dir.path(), small_segments());
    assert_eq!(writer.recovery_report().checkpoint, CheckpointUse::Loaded);
    for i in 301..=400u64 {
        writer.append_batch(&[("u", format!("u{i}").as_bytes()), ("o", format!("o{i}").as_bytes())]).expect("batch");
    }
    let reader = open(dir.path(), read_only());
    let report = reader.recovery_report().clone();
    assert_eq!(report.checkpoint, CheckpointUse::Loaded);
    assert_eq!(reader.latest("u").expect("latest"), 400, "the open read the 100 batches after the checkpoint");
    assert!(
        report.frames >= 100 && report.records >= 200 && report.bytes > 0,
        "the open read 100 frames after the checkpoint, its report says {} frames, {} records, {} bytes",
        report.frames,
        report.records,
        report.bytes
    );
    drop(writer);
}

/// A trim whose frame lands after the active segment's header, then the
/// compactor reclaims every segment the trim emptied: the oldest segment
/// left says the log is at a seq far beyond what the bytes on disk could
/// hold, and only a later frame says the records below were trimmed. The
/// replay after a crash must end where the writer was — no damage, no lost
/// record, no seq reused.
#[test]
fn a_trim_after_the_header_of_the_oldest_segment_left_replays_clean() {
    let dir = tempfile::tempdir().expect("tempdir");
    let record = [7u8; 200];
    {
        let ns = open(dir.path(), small_segments());
        ns.create_log("t", LogConfig::unbounded()).expect("create");
        for _ in 0..3000 {
            ns.append("t", &record).expect("append");
        }
        assert!(segment_files(dir.path()) > 10);
        ns.trim("t", 3000).expect("trim");
        ns.append("t", b"after the trim").expect("append");
        let listed = segment_names(dir.path());
        assert!(listed.len() <= 2, "the compactor reclaimed the trimmed segments: {listed:?}");
    }
    std::fs::remove_file(dir.path().join("ns").join(CHECKPOINT_FILE)).expect("as after a crash");
    let ns = open(dir.path(), small_segments());
    let report = ns.recovery_report();
    assert!(!report.needs_attention(), "{report:?}");
    assert_eq!((ns.earliest("t").expect("earliest"), ns.latest("t").expect("latest")), (3000, 3001));
    assert_eq!(&ns.get("t", 3000).expect("get")[..], &record[..]);
    assert_eq!(ns.append("t", b"next").expect("append"), 3002);
}

/// A read-only open and the writer's open judge a checkpoint alike when
/// segments it lists are gone. The writer's open distrusts one when no
/// segment from the checkpoint's last one on is left; a reader must too,
/// or with its newest segment deleted by hand (no writer running) it would
/// trust a checkpoint whose newest catalog changes are gone, and list other
/// logs than a replay. (From a review; before the fix the reader listed
/// `["u", "x"]` where the writer and a replay list `["o", "u"]`.)
#[test]
fn a_reader_and_the_writer_agree_on_a_checkpoint_whose_newest_segment_was_deleted_by_hand() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let ns = open(dir.path(), JournalOptions { segment_bytes_max: 4096, ..small_segments() });
        ns.create_log("u", LogConfig::unbounded()).expect("create");
        ns.create_log("o", LogConfig::keep(1, OnFull::Overwrite)).expect("create");
        for i in 0..100u32 {
            ns.append("u", &i.to_le_bytes()).expect("append");
        }
        // Roll: the newest segment then holds only `o`'s last record.
        let before = segment_names(dir.path()).len();
        while segment_names(dir.path()).len() == before {
            ns.append("o", &[b'o'; 500]).expect("append");
        }
        // Now nothing live is left in it; it holds catalog changes only.
        ns.delete_log("o").expect("delete");
        ns.create_log("x", LogConfig::unbounded()).expect("create");
        ns.close().expect("close");
    }
    let names = segment_names(dir.path());
    let newest = names.last().expect("segments").clone();
    println!("segments {names:?}; deleting {newest} by hand");
    std::fs::remove_file(dir.path().join("ns").join(&newest)).expect("remove");
    let checkpoint = dir.path().join("ns").join(CHECKPOINT_FILE);
    let saved = std::fs::read(&checkpoint).expect("a clean close saves a checkpoint");

    let reader = open(dir.path(), read_only());
    let reader_report = reader.recovery_report().clone();
    let reader_logs = log_names(&reader);
    drop(reader);

    std::fs::remove_file(&checkpoint).expect("remove");
    let replay = open(dir.path(), read_only());
    let replay_logs = log_names(&replay);
    drop(replay);

    std::fs::write(&checkpoint, &saved).expect("put back");
    let writer = open(dir.path(), JournalOptions { segment_bytes_max: 4096, ..small_segments() });
    let writer_report = writer.recovery_report().clone();
    let writer_logs = log_names(&writer);
    drop(writer);

    println!("reader: {reader_logs:?}, {:?}", reader_report.checkpoint);
    println!("replaying reader: {replay_logs:?}");
    println!("writer: {writer_logs:?}, {:?}", writer_report.checkpoint);
    assert!(
        matches!(writer_report.checkpoint, CheckpointUse::Ignored { .. }),
        "the writer distrusts it: {:?}",
        writer_report.checkpoint
    );
    assert_eq!(replay_logs, writer_logs, "a replaying reader and the writer agree");
    assert!(
        matches!(reader_report.checkpoint, CheckpointUse::Ignored { .. }),
        "the reader distrusts it too: {:?}",
        reader_report.checkpoint
    );
    assert_eq!(
        reader_logs, writer_logs,
        "a read-only open trusted a checkpoint ({:?}) the writer's open distrusts ({:?}), and lists other logs",
        reader_report.checkpoint, writer_report.checkpoint
    );
}

fn log_names(ns: &JournalNamespace) -> Vec<String> {
    ns.list_logs().expect("list").into_iter().map(|l| l.name).collect()
}

/// `memory()` counts each part from what the namespace holds: it follows
/// logs created and deleted, records appended, and the checkpoint buffer
/// the writer keeps once it has saved an index as it writes.
#[test]
fn memory_counts_logs_records_and_the_checkpoint_buffer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = JournalOptions { sync: SyncPolicy::Never, checkpoint_bytes_min: 4096, ..JournalOptions::default() };
    let ns = open(dir.path(), options);
    let empty = ns.memory();
    assert_eq!((empty.logs, empty.records, empty.indexes), (0, 0, 0), "{empty:?}");

    let names: Vec<String> = (0..1_000).map(|i| format!("sensor.{i:04}")).collect();
    for name in &names {
        ns.create_log(name, LogConfig::unbounded()).expect("create");
        for r in 0..3u8 {
            ns.append(name, &[r; 64]).expect("append");
        }
    }
    let full = ns.memory();
    assert_eq!((full.logs, full.records), (1_000, 3_000), "{full:?}");
    assert!(full.indexes >= 3_000 * 12, "12 bytes per position at least: {full:?}");
    assert!(full.names >= names.iter().map(|n| n.len() as u64).sum::<u64>(), "{full:?}");
    assert!(full.log_states >= 1_000 * 24 && full.log_states.is_multiple_of(1_000), "the same for every log: {full:?}");
    assert!(full.lookup_tables >= 2 * 1_000 * 4, "two 4-byte slots per log at least: {full:?}");
    // 200 KB of frames against a 4 KiB interval: the writer has saved an
    // index, and kept (or lent to the saving thread) a buffer that large.
    assert!(full.checkpoint_buffer > 0, "{full:?}");
    assert_eq!(full.packed_logs, 0, "fewer logs than the default keeps decoded: {full:?}");
    assert_eq!(full.total(), full.log_states + full.names + full.indexes + full.lookup_tables + full.checkpoint_buffer);

    for name in &names[..500] {
        ns.delete_log(name).expect("delete");
    }
    let half = ns.memory();
    assert_eq!((half.logs, half.records), (500, 1_500), "{half:?}");
    assert_eq!(half.log_states, full.log_states / 2, "{half:?}");
    assert!(half.indexes < full.indexes && half.names < full.names, "{half:?} after {full:?}");
}

/// Small logs that nothing changed lately are packed (with `hot_logs_min`
/// 0, at nearly every write, on a thread of their own, while writes go on;
/// and at an open, from the checkpoint), and read, appended to, renamed,
/// deleted, checkpointed and reopened exactly as decoded ones are.
#[test]
fn a_built_pack_is_swapped_in_with_no_further_write() {
    // The last create begins a pack (the hot logs are due) on a thread of
    // its own; nothing is written after it, so only that thread can swap
    // the built set in (an idle namespace held both sets before). Creates
    // housekeep as appends do (they did not before 2026-11-28: a namespace
    // that only created logs never packed them).
    let dir = tempfile::tempdir().expect("tempdir");
    let options = JournalOptions { sync: SyncPolicy::Never, hot_logs_min: 500, ..JournalOptions::default() };
    let ns = open(dir.path(), options);
    for i in 0..=500 {
        ns.create_log(&format!("node.{i:03}"), LogConfig::unbounded()).expect("create");
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let memory = loop {
        let memory = ns.memory();
        if memory.packed == 501 || std::time::Instant::now() > deadline {
            break memory;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    assert_eq!((memory.logs, memory.packed), (501, 501), "the pack was not swapped in within 60 s: {memory:?}");
    assert_eq!(ns.latest("node.250").expect("a packed log"), 0);
    assert_eq!(ns.append("node.250", b"after").expect("append to a packed log"), 1);
    assert_eq!(ns.get("node.250", 1).expect("get"), b"after".to_vec());
}

#[test]
fn packed_logs_read_and_change_as_decoded_ones_do() {
    // Sets in scratch files, mapped; then every set on the heap.
    for packed_in_file_bytes_min in [0, u64::MAX] {
        packed_logs_read_and_change(packed_in_file_bytes_min);
    }
}

fn packed_logs_read_and_change(packed_in_file_bytes_min: u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = JournalOptions {
        sync: SyncPolicy::Never,
        checkpoint_bytes_min: 4096,
        hot_logs_min: 0,
        packed_in_file_bytes_min,
        ..JournalOptions::default()
    };
    let names: Vec<String> = (0..2_000).map(|i| format!("node.{i:05}")).collect();
    {
        let ns = open(dir.path(), options);
        for name in &names {
            ns.create_log(name, LogConfig::unbounded()).expect("create");
            for r in 0..3u8 {
                ns.append(name, &[r; 16]).expect("append");
            }
        }
        let memory = ns.memory();
        assert_eq!((memory.logs, memory.records), (2_000, 6_000), "{memory:?}");
    }
    {
        // The open takes every small log from the checkpoint packed.
        let ns = open(dir.path(), options);
        let memory = ns.memory();
        assert_eq!((memory.logs, memory.packed, memory.records), (2_000, 2_000, 6_000), "{memory:?}");
        assert_eq!(memory.indexes, 0, "{memory:?}");
        if packed_in_file_bytes_min == 0 {
            // The heap holds only the bits that mark entries gone.
            assert!(memory.packed_mapped > 100_000 && memory.packed_logs < 1_000, "{memory:?}");
        } else {
            assert!(memory.packed_logs > 100_000 && memory.packed_mapped == 0, "{memory:?}");
        }
        assert_eq!(ns.get("node.01234", 3).expect("a packed log's record"), vec![2u8; 16]);
        // Change some packed logs: each thaws, and the rest stay readable.
        for name in names.iter().step_by(7) {
            assert_eq!(ns.append(name, b"more").expect("append to a packed log"), 4);
        }
        let memory = ns.memory();
        assert_eq!((memory.logs, memory.records), (2_000, 6_000 + 286), "{memory:?}");
        ns.rename_logs(&[("node.00003", "renamed")]).expect("rename a packed log");
        ns.delete_log("node.00005").expect("delete a packed log");
        ns.create_log("node.00005", LogConfig::unbounded()).expect("its name is free again");
    }
    let ns = open(dir.path(), options);
    assert_eq!(ns.recovery_report().checkpoint, CheckpointUse::Loaded);
    for (i, name) in names.iter().enumerate() {
        let name = if i == 3 { "renamed" } else { name.as_str() };
        let expected = match i {
            5 => 0,
            _ if i % 7 == 0 => 4,
            _ => 3,
        };
        assert_eq!(ns.latest(name).expect("latest"), expected, "{name}");
        if expected > 0 {
            assert_eq!(ns.get(name, 2).expect("get"), vec![1u8; 16], "{name}");
        }
    }
    assert!(matches!(ns.latest("node.00003"), Err(LogError::LogNotFound { .. })));
    assert_eq!(ns.list_logs().expect("list").len(), 2_000);
}
