//! Torn writes: every cut of the last frame recovers the valid prefix and
//! says what it dropped; a flipped byte in a last frame that was written
//! completely is damage, not a torn write (`damage.rs` has damage elsewhere).

use std::fs;
use std::path::{Path, PathBuf};

use varve_log::journal::CHECKPOINT_FILE;
use varve_log::{JournalNamespace, JournalOptions, LogConfig, LogError, Namespace, SeqRange, SyncPolicy};

const RECORDS: u64 = 12;

fn options() -> JournalOptions {
    JournalOptions { sync: SyncPolicy::Never, ..JournalOptions::default() }
}

fn open(dir: &Path) -> Result<JournalNamespace, LogError> {
    JournalNamespace::open(dir, "ns", options())
}

fn segment(dir: &Path, id: u32) -> PathBuf {
    dir.join(format!("{id:010}.seg"))
}

/// A journal of `RECORDS` records in log "a"; returns the offset at which
/// each record's frame starts, and the file length at the end.
fn build(dir: &Path) -> (Vec<u64>, u64) {
    let ns = open(dir).expect("open");
    ns.create_log("a", LogConfig::unbounded()).expect("create");
    for seq in 1..=RECORDS {
        ns.append("a", &record(seq)).expect("append");
    }
    drop(ns);
    // The active segment is preallocated while open and cut to its frames on
    // close, so frame starts follow from the end and the frame sizes: a
    // one-record frame is its 16-byte header, the 20-byte record header and
    // the payload.
    let end = fs::metadata(segment(dir, 1)).expect("stat").len();
    let mut starts = Vec::new();
    let mut at = end;
    for seq in (1..=RECORDS).rev() {
        at -= 16 + 20 + record(seq).len() as u64;
        starts.push(at);
    }
    starts.reverse();
    (starts, end)
}

fn record(seq: u64) -> Vec<u8> {
    format!("record {seq} ").repeat(usize::try_from(seq).expect("small")).into_bytes()
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("mkdir");
    for entry in fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        if entry.file_type().expect("type").is_file() {
            fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
        }
    }
}

fn assert_prefix(ns: &JournalNamespace, latest: u64) {
    assert_eq!(ns.latest("a").expect("latest"), latest);
    for r in ns.scan("a", SeqRange::ALL).expect("scan") {
        let r = r.expect("record");
        assert_eq!(r.value, record(r.seq), "seq {}", r.seq);
    }
}

#[test]
fn every_cut_of_the_last_frame_recovers_the_prefix() {
    let template = tempfile::tempdir().expect("tempdir");
    let (starts, end) = build(template.path());
    let last_start = *starts.last().expect("frames");
    assert!(last_start < end && end - last_start > 100, "the last frame is where we think");
    let original = fs::read(segment(template.path(), 1)).expect("read");
    for cut in last_start..end {
        let work = tempfile::tempdir().expect("tempdir");
        copy_dir(template.path(), work.path());
        let seg = segment(work.path(), 1);
        fs::OpenOptions::new().write(true).open(&seg).expect("open").set_len(cut).expect("truncate");
        let ns = open(work.path()).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        assert_prefix(&ns, RECORDS - 1);
        let torn = ns.recovery_report().torn_tail.clone();
        if cut == last_start {
            assert!(torn.is_none(), "a cut on a frame boundary is a clean end");
        } else {
            let torn = torn.unwrap_or_else(|| panic!("cut at {cut} not reported"));
            // Trailing zero bytes cannot be told from the active segment's
            // zero reserve, so what is reported and saved ends at the last
            // non-zero byte.
            let region = &original[usize::try_from(last_start).expect("small")..usize::try_from(cut).expect("small")];
            let written = region.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
            assert_eq!((torn.offset, torn.dropped_bytes), (last_start, written as u64), "cut at {cut}");
            assert_eq!(fs::read(&torn.saved_to).expect("saved"), &region[..written]);
        }
        // The journal goes on: the next append takes the dropped seq.
        assert_eq!(ns.append("a", &record(RECORDS)).expect("append"), RECORDS);
        drop(ns);
        assert_prefix(&open(work.path()).expect("reopen"), RECORDS);
    }
}

#[test]
fn a_flipped_byte_in_a_completely_written_last_frame_is_damage_not_a_torn_write() {
    // The journal was closed cleanly, so its file ends exactly where the last
    // frame does: that write completed (and was fsynced). A flipped byte in
    // it loses that record — reported, its seq kept — rather than cutting it
    // off as if it had never been acknowledged. Only a flip in the length
    // field leaves nothing to tell the frame's extent by: that is cut as a
    // torn tail.
    let template = tempfile::tempdir().expect("tempdir");
    let (starts, end) = build(template.path());
    let last_start = *starts.last().expect("frames");
    let original = fs::read(segment(template.path(), 1)).expect("read");
    let length_field = last_start + 4..last_start + 8;
    for at in last_start..end {
        let work = tempfile::tempdir().expect("tempdir");
        copy_dir(template.path(), work.path());
        // About what a replay makes of the flip: as after a crash, so no
        // index checkpoint (tests/damage.rs has the open that trusts one).
        fs::remove_file(work.path().join(CHECKPOINT_FILE)).expect("a clean close saved a checkpoint");
        let mut bytes = original.clone();
        bytes[usize::try_from(at).expect("small")] ^= 0x5a;
        fs::write(segment(work.path(), 1), &bytes).expect("write");
        let ns = open(work.path()).unwrap_or_else(|e| panic!("flip at {at}: {e}"));
        let report = ns.recovery_report().clone();
        if length_field.contains(&at) {
            let torn = report.torn_tail.clone().unwrap_or_else(|| panic!("flip at {at} not reported"));
            assert_eq!((torn.offset, torn.dropped_bytes), (last_start, end - last_start));
            assert_prefix(&ns, RECORDS - 1);
            continue;
        }
        assert!(report.torn_tail.is_none(), "flip at {at}: a completed write was cut as torn");
        assert_eq!(report.damage.len(), 1, "flip at {at}: {report:?}");
        assert_eq!((report.damage[0].offset, report.damage[0].len), (last_start, end - last_start));
        assert_eq!(ns.latest("a").expect("latest"), RECORDS, "flip at {at}: the damaged record keeps its seq");
        match ns.get("a", RECORDS) {
            Err(LogError::Lost { first, last, cause, .. }) => {
                assert_eq!((first, last), (RECORDS, RECORDS), "flip at {at}");
                assert!(cause.offset.is_some_and(|o| o >= last_start), "flip at {at}: {cause:?}");
            }
            other => panic!("flip at {at}: {other:?}"),
        }
        for seq in 1..RECORDS {
            assert_eq!(ns.get("a", seq).expect("intact"), record(seq));
        }
        // The seq is never reused; the damaged bytes stay as evidence.
        assert_eq!(ns.append("a", b"next").expect("append"), RECORDS + 1, "flip at {at}");
        drop(ns);
        assert_eq!(&fs::read(segment(work.path(), 1)).expect("read")[..bytes.len()], &bytes[..]);
    }
}

#[test]
fn a_torn_segment_header_from_a_crashed_roll_is_rewritten() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, _) = build(dir.path());
    // A crash right after creating segment 2, mid-way through its header.
    fs::write(segment(dir.path(), 2), [0x56, 0x56, 1]).expect("write");
    let ns = open(dir.path()).expect("open");
    assert!(ns.recovery_report().torn_tail.is_some());
    assert_prefix(&ns, RECORDS);
    assert_eq!(ns.append("a", b"next").expect("append"), RECORDS + 1);
    drop(ns);
    assert_eq!(open(dir.path()).expect("reopen").latest("a").expect("latest"), RECORDS + 1);
}

#[test]
fn a_sealed_segment_left_with_its_zero_reserve_is_cut_back_on_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let small = JournalOptions { segment_bytes_max: 4096, ..options() };
    {
        let ns = JournalNamespace::open(dir.path(), "ns", small).expect("open");
        ns.create_log("a", LogConfig::unbounded()).expect("create");
        for seq in 1..=60 {
            ns.append("a", &record(seq % 10 + 1)).expect("append");
        }
    }
    // A crash between starting segment 2 and cutting segment 1's reserve.
    let first = segment(dir.path(), 1);
    let sealed_len = fs::metadata(&first).expect("stat").len();
    fs::OpenOptions::new().write(true).open(&first).expect("open").set_len(1 << 20).expect("grow");
    let ns = JournalNamespace::open(dir.path(), "ns", small).expect("reopen");
    assert_eq!(fs::metadata(&first).expect("stat").len(), sealed_len, "reserve cut back");
    assert!(ns.recovery_report().torn_tail.is_none(), "zeros are not damage");
    assert_eq!(ns.latest("a").expect("latest"), 60);
    for r in ns.scan("a", SeqRange::ALL).expect("scan") {
        let r = r.expect("record");
        assert_eq!(r.value, record(r.seq % 10 + 1));
    }
}
