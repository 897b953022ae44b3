//! Damage stays local: a flipped byte, a segment cut short, deleted or
//! emptied never makes a namespace unreadable. Intact records read as
//! before; the damaged or missing ones are `Lost`, naming log, seqs, segment
//! and offset, and their seqs are not reused; appends go on; `fsck` lists
//! every loss, and `fsck --repair` salvages every intact record, records the
//! losses in `_losses`, and leaves a namespace that checks clean.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use varve_log::journal::{fsck, FsckReport, CHECKPOINT_FILE, LOSSES_LOG};
use varve_log::{
    CheckpointUse, JournalNamespace, JournalOptions, LogConfig, LogError, Namespace, SeqRange, SyncPolicy,
};

fn options() -> JournalOptions {
    JournalOptions { sync: SyncPolicy::Never, segment_bytes_max: 64 << 10, ..JournalOptions::default() }
}

fn open(dir: &Path) -> JournalNamespace {
    JournalNamespace::open(dir, "ns", options()).expect("a damaged namespace still opens")
}

fn open_read_only(dir: &Path) -> JournalNamespace {
    JournalNamespace::open(dir, "ns", JournalOptions { read_only: true, ..options() }).expect("opens read-only")
}

fn segment(dir: &Path, id: u32) -> PathBuf {
    dir.join(format!("{id:010}.seg"))
}

fn value(log: &str, seq: u64) -> Vec<u8> {
    format!("{log} record {seq:05} ").repeat(6).into_bytes()
}

/// Two logs across several sealed segments: `t` with `t_len` records, `u`
/// with one for every tenth of `t`'s.
fn build(dir: &Path, t_len: u64) {
    let ns = open(dir);
    ns.create_log("t", LogConfig::unbounded()).expect("create");
    ns.create_log("u", LogConfig::unbounded()).expect("create");
    for seq in 1..=t_len {
        ns.append("t", &value("t", seq)).expect("append");
        if seq % 10 == 0 {
            ns.append("u", &value("u", seq / 10)).expect("append");
        }
    }
    assert!(segment(dir, 2).exists(), "several segments");
}

fn forget_checkpoint(dir: &Path) {
    match fs::remove_file(dir.join(CHECKPOINT_FILE)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => panic!("removing the checkpoint: {e}"),
        _ => {}
    }
}

/// Where a record's payload starts in a segment file.
fn find(dir: &Path, id: u32, needle: &[u8]) -> usize {
    let bytes = fs::read(segment(dir, id)).expect("read");
    bytes.windows(needle.len()).position(|w| w == needle).expect("on disk")
}

/// Damage at rest. These tests are about what a replay of the frames makes
/// of it, so the index checkpoint the clean close saved goes too, as after
/// a crash; `damage_after_a_clean_close_is_found_by_reads_and_fsck` is the
/// open that trusts the checkpoint.
fn flip(dir: &Path, id: u32, at: usize) {
    forget_checkpoint(dir);
    flip_at_rest(dir, id, at);
}

/// Flip a bit, leaving the file's length (and the checkpoint) as they were.
fn flip_at_rest(dir: &Path, id: u32, at: usize) {
    let path = segment(dir, id);
    let mut bytes = fs::read(&path).expect("read");
    bytes[at] ^= 0x10;
    fs::write(&path, bytes).expect("write");
}

/// Which segment holds `needle`.
fn segment_holding(dir: &Path, needle: &[u8]) -> u32 {
    (1..100)
        .find(|&id| {
            segment(dir, id).exists()
                && fs::read(segment(dir, id)).expect("read").windows(needle.len()).any(|w| w == needle)
        })
        .expect("some segment holds it")
}

/// Every record of `log` reads back, except exactly `lost`, which are `Lost`.
fn assert_reads(ns: &JournalNamespace, log: &str, latest: u64, lost: &[u64]) {
    assert_eq!(ns.latest(log).expect("latest"), latest, "{log}");
    for seq in 1..=latest {
        match ns.get(log, seq) {
            Ok(v) => {
                assert!(!lost.contains(&seq), "{log} {seq} should be lost");
                assert_eq!(v, value(log, seq), "{log} {seq}");
            }
            Err(LogError::Lost { log: l, first, last, .. }) => {
                assert_eq!(l, log);
                assert!(first <= seq && seq <= last);
                assert!(lost.contains(&seq), "{log} {seq} is lost but should read");
            }
            Err(e) => panic!("{log} {seq}: {e}"),
        }
    }
}

fn repair(dir: &Path) -> FsckReport {
    let report = fsck(dir, true, &mut |_, _| {}).expect("fsck --repair");
    assert!(report.repaired, "{report:?}");
    let after = fsck(dir, false, &mut |_, _| {}).expect("fsck");
    assert!(after.is_clean(), "clean after the repair: {after:?}");
    assert!(after.losses.iter().all(|l| l.acknowledged));
    report
}

#[test]
fn a_flipped_byte_in_a_sealed_segment_loses_that_record_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    build(dir.path(), 1500);
    let needle = value("t", 40);
    let id = segment_holding(dir.path(), &needle);
    flip(dir.path(), id, find(dir.path(), id, &needle) + 7);
    for ns in [open_read_only(dir.path()), open(dir.path())] {
        let report = ns.recovery_report().clone();
        assert!(report.needs_attention());
        assert_eq!(report.damage.len(), 1, "{report:?}");
        assert_eq!(report.damage[0].segment, segment(dir.path(), id));
        assert_eq!((report.losses.len(), report.losses[0].first, report.losses[0].last), (1, 40, 40));
        assert_reads(&ns, "t", 1500, &[40]);
        assert_reads(&ns, "u", 150, &[]);
        match ns.get("t", 40) {
            Err(e @ LogError::Lost { .. }) => {
                let message = e.to_string();
                assert!(message.contains("seq 40 is lost") && message.contains(".seg at byte offset"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
    // The writer goes on; the damaged segment is kept as evidence.
    let ns = open(dir.path());
    assert_eq!(ns.append("t", &value("t", 1501)).expect("append"), 1501);
    drop(ns);
    assert!(segment(dir.path(), id).exists());

    let checked = fsck(dir.path(), false, &mut |_, _| {}).expect("fsck");
    assert!(!checked.is_clean());
    assert_eq!((checked.losses[0].log.as_str(), checked.losses[0].first, checked.losses[0].last), ("t", 40, 40));
    let repaired = repair(dir.path());
    assert_eq!(repaired.quarantined.len(), 1);
    assert!(repaired.salvaged_records > 0);
    assert!(!segment(dir.path(), id).exists(), "the damaged segment was salvaged and removed");
    let ns = open(dir.path());
    assert!(!ns.recovery_report().needs_attention(), "{:?}", ns.recovery_report());
    assert_reads(&ns, "t", 1501, &[40]);
    assert_reads(&ns, "u", 150, &[]);
    assert_eq!(ns.latest(LOSSES_LOG).expect("the loss is recorded"), 1);
    assert_eq!(ns.append("t", &value("t", 1502)).expect("append"), 1502);
}

#[test]
fn damage_after_a_clean_close_is_found_by_reads_and_fsck() {
    // The clean close saved an index checkpoint, and the writer's open
    // trusts it instead of replaying the frames before its end, so it does not see a bit
    // flipped at rest. The read that touches the record reports it (`Lost`,
    // naming segment and offset); `fsck`, which reads every byte, finds it
    // and repairs it.
    let dir = tempfile::tempdir().expect("tempdir");
    build(dir.path(), 1500);
    assert!(dir.path().join(CHECKPOINT_FILE).exists(), "a clean close saves a checkpoint");
    let needle = value("t", 40);
    let id = segment_holding(dir.path(), &needle);
    flip_at_rest(dir.path(), id, find(dir.path(), id, &needle) + 7);
    let ns = open(dir.path());
    assert_eq!(ns.recovery_report().checkpoint, CheckpointUse::Loaded);
    assert!(dir.path().join(CHECKPOINT_FILE).exists(), "it stays: it describes a prefix of the journal");
    match ns.get("t", 40) {
        Err(e @ LogError::Lost { .. }) => {
            let message = e.to_string();
            assert!(message.contains("seq 40 is lost") && message.contains(".seg at byte offset"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(ns.get("t", 41).expect("intact"), value("t", 41));
    drop(ns);
    let checked = fsck(dir.path(), false, &mut |_, _| {}).expect("fsck");
    assert_eq!((checked.losses[0].log.as_str(), checked.losses[0].first, checked.losses[0].last), ("t", 40, 40));
    repair(dir.path());
    let ns = open(dir.path());
    assert!(!ns.recovery_report().needs_attention(), "{:?}", ns.recovery_report());
    assert_reads(&ns, "t", 1500, &[40]);
    assert_reads(&ns, "u", 150, &[]);
}

#[test]
fn damage_in_a_frame_header_in_the_middle_loses_that_frame_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    build(dir.path(), 1500);
    let needle = value("t", 123);
    let id = segment_holding(dir.path(), &needle);
    // 20 bytes of entry header and 16 of frame header before the payload.
    flip(dir.path(), id, find(dir.path(), id, &needle) - 36 + 2);
    let ns = open(dir.path());
    assert_eq!(ns.recovery_report().damage.len(), 1);
    assert_reads(&ns, "t", 1500, &[123]);
    assert_reads(&ns, "u", 150, &[]);
    drop(ns);
    repair(dir.path());
    assert_reads(&open(dir.path()), "t", 1500, &[123]);
}

#[test]
fn a_deleted_segment_loses_its_records_and_the_rest_read_and_append() {
    let dir = tempfile::tempdir().expect("tempdir");
    build(dir.path(), 1500);
    let needle = value("t", 700);
    let id = segment_holding(dir.path(), &needle);
    fs::remove_file(segment(dir.path(), id)).expect("delete a segment");
    let ns = open(dir.path());
    let losses = ns.recovery_report().losses.clone();
    assert!(!losses.is_empty());
    let t_loss = losses.iter().find(|l| l.log == "t").expect("t lost records");
    assert!(t_loss.first <= 700 && 700 <= t_loss.last, "{t_loss:?}");
    assert_eq!(t_loss.segment, segment(dir.path(), id), "names the missing segment");
    assert!(t_loss.reason.contains("missing"), "{}", t_loss.reason);
    let lost: Vec<u64> = (t_loss.first..=t_loss.last).collect();
    assert_reads(&ns, "t", 1500, &lost);
    assert_eq!(ns.list_logs().expect("ls").len(), 2);
    // Scans yield the run once, then go on.
    let results: Vec<_> = ns.scan("t", SeqRange::ALL).expect("scan").collect();
    assert_eq!(results.iter().filter(|r| r.is_err()).count(), 1);
    assert_eq!(results.len() as u64, 1500 - lost.len() as u64 + 1);
    // Watches too.
    let mut watch = ns.watch("t", t_loss.first - 1).expect("watch");
    assert_eq!(watch.next_timeout(Duration::from_secs(5)).expect("record").expect("there").seq, t_loss.first - 1);
    assert!(matches!(watch.next_timeout(Duration::from_secs(5)), Err(LogError::Lost { .. })));
    assert_eq!(watch.next_timeout(Duration::from_secs(5)).expect("record").expect("there").seq, t_loss.last + 1);
    drop(watch);
    // Seqs are not reused.
    assert_eq!(ns.append("t", b"after").expect("append"), 1501);
    drop(ns);

    let report = repair(dir.path());
    assert!(report.quarantined.is_empty(), "nothing to salvage from a missing file");
    let ns = open(dir.path());
    assert!(!ns.recovery_report().needs_attention());
    assert!(matches!(ns.get("t", 700), Err(LogError::Lost { .. })));
    assert_eq!(ns.append("t", b"more").expect("append"), 1502);
}

#[test]
fn an_emptied_first_segment_loses_its_records_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    build(dir.path(), 1500);
    // The seqs of `t` in segment 1: each record starts "t record NNNNN ".
    let first = fs::read(segment(dir.path(), 1)).expect("read");
    let mut in_first: Vec<u64> = first
        .windows(15)
        .filter(|w| w.starts_with(b"t record "))
        .map(|w| std::str::from_utf8(&w[9..14]).expect("digits").parse::<u64>().expect("seq"))
        .collect();
    in_first.dedup();
    assert!(!in_first.is_empty());
    fs::OpenOptions::new().write(true).open(segment(dir.path(), 1)).expect("open").set_len(0).expect("truncate");
    let ns = open(dir.path());
    assert_reads(&ns, "t", 1500, &in_first);
    drop(ns);
    repair(dir.path());
    assert_reads(&open(dir.path()), "t", 1500, &in_first);
}

#[test]
fn a_sealed_segment_cut_short_is_damage_not_a_torn_tail() {
    let dir = tempfile::tempdir().expect("tempdir");
    build(dir.path(), 1500);
    let path = segment(dir.path(), 1);
    let len = fs::metadata(&path).expect("stat").len();
    fs::OpenOptions::new().write(true).open(&path).expect("open").set_len(len - 50).expect("truncate");
    let ns = open(dir.path());
    let report = ns.recovery_report().clone();
    assert!(report.torn_tail.is_none(), "only the newest segment can end in a torn write");
    assert_eq!(report.damage.len(), 1);
    assert!(report.damage[0].reason.contains("cut short"), "{}", report.damage[0].reason);
    assert_eq!(report.losses.len(), 1);
}

#[test]
fn a_flipped_byte_in_the_open_segment_is_damage_in_the_middle() {
    let dir = tempfile::tempdir().expect("tempdir");
    build(dir.path(), 1500);
    let needle = value("t", 1490);
    let id = segment_holding(dir.path(), &needle);
    assert!(!segment(dir.path(), id + 1).exists(), "the newest segment");
    flip(dir.path(), id, find(dir.path(), id, &needle) + 3);
    let ns = open(dir.path());
    assert_reads(&ns, "t", 1500, &[1490]);
    drop(ns);
    repair(dir.path());
    let ns = open(dir.path());
    assert_reads(&ns, "t", 1500, &[1490]);
    assert_eq!(ns.append("t", b"x").expect("append"), 1501);
}

#[test]
fn a_repair_refused_while_a_writer_runs_leaves_the_writers_checkpoint() {
    let dir = tempfile::tempdir().expect("tempdir");
    build(dir.path(), 1500);
    let needle = value("t", 40);
    let id = segment_holding(dir.path(), &needle);
    flip_at_rest(dir.path(), id, find(dir.path(), id, &needle) + 7);
    let writer = open(dir.path());
    assert!(dir.path().join(CHECKPOINT_FILE).exists(), "the writer keeps the checkpoint it loaded");
    match fsck(dir.path(), true, &mut |_, _| {}) {
        Err(e @ LogError::Locked { .. }) => assert!(e.to_string().contains("locked by another writer"), "{e}"),
        other => panic!("a repair beside a running writer: {other:?}"),
    }
    assert!(dir.path().join(CHECKPOINT_FILE).exists(), "the refused repair left the writer's checkpoint");
    drop(writer);
    let repaired = repair(dir.path());
    assert_eq!(repaired.quarantined.len(), 1);
}

/// Damage the writer itself found (the compactor, relocating the live
/// records of a segment, finds a record that does not check and marks the
/// segment damaged) is reported by every later open, as a replay of every
/// frame reports it: the checkpoint saved before, which knows nothing of
/// it, is removed. (From a review.)
#[test]
fn damage_the_compactor_found_is_reported_by_the_next_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    build(dir.path(), 1500);
    assert!(dir.path().join(CHECKPOINT_FILE).exists(), "a clean close saves a checkpoint");
    // A bit flipped at rest in one of `u`'s records (the open that trusts
    // the checkpoint does not see it).
    let needle = value("u", 4);
    let id = segment_holding(dir.path(), &needle);
    flip_at_rest(dir.path(), id, find(dir.path(), id, &needle) + 7);
    {
        let ns = open(dir.path());
        assert_eq!(ns.recovery_report().checkpoint, CheckpointUse::Loaded);
        // `t`'s records die: the old segments are mostly dead, and the
        // compactor moves `u`'s records out of them, reading segment `id`.
        ns.trim("t", 1500).expect("trim");
        for seq in 1501..=1600 {
            ns.append("t", &value("t", seq)).expect("append");
        }
        assert!(segment(dir.path(), id).exists(), "the damaged segment is kept, as the evidence");
        assert!(!segment(dir.path(), 1).exists() || id == 1, "the compactor reclaimed old segments");
    }
    // What a replay of every frame reports now.
    let copy = tempfile::tempdir().expect("tempdir");
    for entry in fs::read_dir(dir.path()).expect("list") {
        let entry = entry.expect("entry");
        if entry.file_type().expect("type").is_file() && entry.file_name() != CHECKPOINT_FILE {
            fs::copy(entry.path(), copy.path().join(entry.file_name())).expect("copy");
        }
    }
    let full = open(copy.path());
    assert!(full.recovery_report().needs_attention(), "{:?}", full.recovery_report());
    let ns = open(dir.path());
    assert!(
        ns.recovery_report().needs_attention(),
        "the open ({:?}) does not report the damage the writer found (a replay of every frame reports {:?} and {:?})",
        ns.recovery_report().checkpoint,
        full.recovery_report().damage,
        full.recovery_report().losses
    );
}

/// A read-only open that loads the index checkpoint reads the frames the
/// writer wrote after it before it returns. Damage in those frames is in its
/// report, as in the report of a read-only open that replays every frame up
/// to the same published end. (From a review.)
#[test]
fn a_read_only_open_from_the_checkpoint_reports_damage_in_the_frames_after_it() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().expect("tempdir");
    // Closed cleanly: a checkpoint at the end of the journal.
    build(dir.path(), 1500);
    assert!(dir.path().join(CHECKPOINT_FILE).exists(), "a clean close saves a checkpoint");
    // A writer opens from it and writes on, into new segments; it keeps the
    // checkpoint (16 MiB before its first save).
    let writer = open(dir.path());
    assert_eq!(writer.recovery_report().checkpoint, CheckpointUse::Loaded);
    for seq in 1501..=3000 {
        writer.append("t", &value("t", seq)).expect("append");
    }
    // A bit flips in a record written after the checkpoint, in a sealed segment.
    let needle = value("t", 2000);
    let id = segment_holding(dir.path(), &needle);
    assert!(segment(dir.path(), id + 1).exists(), "segment {id} is sealed");
    let at = find(dir.path(), id, &needle) + 7;
    let file = fs::OpenOptions::new().read(true).write(true).open(segment(dir.path(), id)).expect("open");
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, at as u64).expect("read");
    file.write_all_at(&[byte[0] ^ 0x10], at as u64).expect("write");
    drop(file);
    // A reader that replays every frame up to the writer's published end
    // (the same files and END, without the checkpoint).
    let copy = tempfile::tempdir().expect("tempdir");
    for entry in fs::read_dir(dir.path()).expect("list") {
        let entry = entry.expect("entry");
        if entry.file_type().expect("type").is_file() && entry.file_name() != CHECKPOINT_FILE {
            fs::copy(entry.path(), copy.path().join(entry.file_name())).expect("copy");
        }
    }
    let replayed = open_read_only(copy.path());
    assert!(matches!(replayed.recovery_report().checkpoint, CheckpointUse::Absent));
    let where_ = |ns: &JournalNamespace| -> Vec<(String, u64, u64)> {
        ns.recovery_report()
            .damage
            .iter()
            .map(|d| (d.segment.file_name().expect("a file").to_string_lossy().into_owned(), d.offset, d.len))
            .collect()
    };
    assert!(!where_(&replayed).is_empty(), "the replay finds the damage: {:?}", replayed.recovery_report());
    // A reader that loads the checkpoint and reads on from it.
    let reader = open_read_only(dir.path());
    assert_eq!(reader.recovery_report().checkpoint, CheckpointUse::Loaded);
    assert!(matches!(reader.get("t", 2000), Err(LogError::Lost { .. })), "its state knows of the damage");
    assert_eq!(
        where_(&reader),
        where_(&replayed),
        "the read-only open from the checkpoint read the damaged frame but its report lists no damage"
    );
    assert!(reader.recovery_report().needs_attention());
    drop(writer);
}

/// The first segment of a small journal deleted by hand: the header of the
/// only segment left says where each log was, which is more records than
/// the bytes left could hold. They are lost, not forgotten: the logs keep
/// their seqs, reads of the old ones say `Lost`, and appends go on after
/// them instead of reusing seq 1. The same on a read-only open.
#[test]
fn a_deleted_first_segment_of_a_small_journal_keeps_the_seqs_it_held() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Just past the first roll: the second segment holds a few records.
    let t_len = 520;
    build(dir.path(), t_len);
    assert!(!segment(dir.path(), 3).exists(), "two segments, the second small");
    let in_first = fs::read(segment(dir.path(), 1)).expect("read");
    let t_first_kept =
        (1..=t_len).find(|&seq| !in_first.windows(19).any(|w| w == &value("t", seq)[..19])).expect("kept");
    fs::remove_file(segment(dir.path(), 1)).expect("delete a segment");
    forget_checkpoint(dir.path());
    let lost_t: Vec<u64> = (1..t_first_kept).collect();
    for read_only in [true, false] {
        let ns = if read_only { open_read_only(dir.path()) } else { open(dir.path()) };
        let report = ns.recovery_report();
        let t_loss =
            report.losses.iter().find(|l| l.log == "t").unwrap_or_else(|| panic!("t lost records: {report:?}"));
        assert_eq!((t_loss.first, t_loss.last), (1, t_first_kept - 1), "{t_loss:?}");
        assert_eq!(t_loss.segment, segment(dir.path(), 1), "names the missing segment");
        assert_reads(&ns, "t", t_len, &lost_t);
        assert_eq!(ns.latest("u").expect("latest"), t_len / 10);
    }
    let ns = open(dir.path());
    assert_eq!(ns.append("t", b"after").expect("append"), t_len + 1, "seqs are not reused");
    assert_eq!(ns.append("u", b"after").expect("append"), t_len / 10 + 1);
    drop(ns);
    repair(dir.path());
    let ns = open(dir.path());
    assert!(!ns.recovery_report().needs_attention());
    assert!(matches!(ns.get("t", 1), Err(LogError::Lost { .. })));
    assert_eq!(ns.append("t", b"more").expect("append"), t_len + 2);
}
