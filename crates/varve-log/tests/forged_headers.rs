//! Journals whose segment headers are forged (valid checksums, absurd
//! claims): a gap of any size costs one hole (journal/holes.rs), every open
//! and fsck finishes, seqs are never reused, and a claim past `SEQ_MAX` is
//! refused whole.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use varve_log::journal::{fsck, CHECKPOINT_FILE};
use varve_log::{JournalNamespace, JournalOptions, LogConfig, LogError, Namespace, SyncPolicy, SEQ_MAX};

fn options() -> JournalOptions {
    JournalOptions { sync: SyncPolicy::Never, segment_bytes_max: 64 << 10, ..JournalOptions::default() }
}

fn open(dir: &Path) -> JournalNamespace {
    JournalNamespace::open(dir, "ns", options()).expect("opens")
}

fn segment(dir: &Path, id: u32) -> PathBuf {
    dir.join(format!("{id:010}.seg"))
}

fn forget_checkpoint(dir: &Path) {
    match fs::remove_file(dir.join(CHECKPOINT_FILE)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => panic!("removing the checkpoint: {e}"),
        _ => {}
    }
}

/// One frame: `magic u16 | kind u8 | 0 u8 | body_len u32 | body_crc u32 | header_crc u32`, body.
fn frame(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&0x5656u16.to_le_bytes());
    out.push(kind);
    out.push(0);
    out.extend_from_slice(&u32::try_from(body.len()).expect("fits").to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(body).to_le_bytes());
    let header_crc = crc32c::crc32c(&out);
    out.extend_from_slice(&header_crc.to_le_bytes());
    out.extend_from_slice(body);
    out
}

/// A descriptor: `id u32 | latest u64 | tag u8 | k u64 | system u8 | name_len u16 | name` (unbounded).
fn descriptor(id: u32, name: &str, latest: u64, system: bool) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&latest.to_le_bytes());
    out.push(0);
    out.extend_from_slice(&0u64.to_le_bytes());
    out.push(u8::from(system));
    out.extend_from_slice(&u16::try_from(name.len()).expect("fits").to_le_bytes());
    out.extend_from_slice(name.as_bytes());
    out
}

/// The ids of the logs the `CreateLog` frames of segment `id` create, by name.
fn created_ids(dir: &Path, id: u32) -> Vec<(String, u32)> {
    let bytes = fs::read(segment(dir, id)).expect("read");
    let mut at = 0;
    let mut found = Vec::new();
    while at + 16 <= bytes.len() && bytes[at..at + 2] == 0x5656u16.to_le_bytes() {
        let kind = bytes[at + 2];
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("fits")) as usize;
        let body = &bytes[at + 16..at + 16 + len];
        if kind == 2 {
            let log_id = u32::from_le_bytes(body[0..4].try_into().expect("fits"));
            let name_len = u16::from_le_bytes(body[22..24].try_into().expect("fits")) as usize;
            found.push((String::from_utf8(body[24..24 + name_len].to_vec()).expect("fits"), log_id));
        }
        at += 16 + len;
    }
    found
}

/// Write segment `id`: only a (forged, well-formed) header frame stating `logs`.
fn forge_segment(dir: &Path, id: u32, next_log_id: u32, logs: &[Vec<u8>]) {
    let mut body = Vec::new();
    body.extend_from_slice(&4u16.to_le_bytes());
    body.extend_from_slice(&id.to_le_bytes());
    body.extend_from_slice(&next_log_id.to_le_bytes());
    body.extend_from_slice(&u32::try_from(logs.len()).expect("fits").to_le_bytes());
    for log in logs {
        body.extend_from_slice(log);
    }
    fs::write(segment(dir, id), frame(1, &body)).expect("write");
}

/// A journal with log `t` (3 records) in segment 1, then a forged segment 2
/// whose header says `t` is at `t_latest` (and lists `extra` logs too).
fn forged(dir: &Path, t_latest: u64, extra: &[(&str, u64, bool)]) -> u32 {
    let ns = open(dir);
    ns.create_log("t", LogConfig::unbounded()).expect("create");
    for i in 1..=3u64 {
        ns.append("t", format!("t{i}").as_bytes()).expect("append");
    }
    ns.close().expect("close");
    assert!(!segment(dir, 2).exists());
    let ids = created_ids(dir, 1);
    let t_id = ids.iter().find(|(n, _)| n == "t").expect("t created").1;
    let mut logs = vec![descriptor(t_id, "t", t_latest, false)];
    let mut next = t_id + 1;
    for (name, latest, system) in extra {
        logs.push(descriptor(next, name, *latest, *system));
        next += 1;
    }
    forge_segment(dir, 2, next, &logs);
    forget_checkpoint(dir);
    // As in a copy of the directory: no writer has published an end, so
    // readers (fsck) read every segment.
    fs::remove_file(dir.join("END")).expect("remove END");
    t_id
}

/// A header may claim up to `SEQ_MAX`; the writer appends up to it and
/// refuses past it, and what it appended reads back after a reopen and
/// from a read-only handle.
#[test]
fn a_log_ends_at_the_last_seq_and_what_reached_it_reads_back_everywhere() {
    let dir = tempfile::tempdir().expect("tempdir");
    forged(dir.path(), SEQ_MAX - 1, &[]);
    let ns = open(dir.path());
    assert_eq!(ns.latest("t").expect("latest"), SEQ_MAX - 1);
    assert_eq!(ns.append("t", b"a").expect("append"), SEQ_MAX);
    match ns.append("t", b"b") {
        Err(LogError::InvalidArgument { reason }) => assert!(reason.contains("the last a log can have"), "{reason}"),
        other => panic!("an append past SEQ_MAX: {other:?}"),
    }
    let batch: &[(&str, &[u8])] = &[("t", b"b")];
    let refused = ns.append_batch(batch).expect_err("a batch past SEQ_MAX");
    assert!(refused.to_string().contains("append to a new log"), "{refused}");
    let reader = JournalNamespace::open(dir.path(), "ns", JournalOptions { read_only: true, ..options() }).expect("ro");
    assert_eq!(&reader.get("t", SEQ_MAX).expect("the reader reads it")[..], b"a");
    drop(reader);
    ns.close().expect("close");
    let ns = open(dir.path());
    assert_eq!(ns.latest("t").expect("latest"), SEQ_MAX, "{:?}", ns.recovery_report());
    assert_eq!(&ns.get("t", SEQ_MAX).expect("get")[..], b"a");
    assert!(ns.append("t", b"c").is_err(), "still refused after a reopen");
}

/// `f`'s answer, or a failure naming `what` if it takes longer than 30 s
/// (it runs on a thread of its own, so a defect fails the test instead of
/// hanging it).
fn finishes<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done_tx.send(f());
    });
    let limit = Duration::from_secs(30);
    done_rx.recv_timeout(limit).unwrap_or_else(|_| panic!("{what} did not finish within {limit:?}"))
}

/// A forged header gives the `_losses` log a huge hole. Each open and each
/// fsck reads `_losses` (`fsck::recorded_losses`): by its positions, not
/// seq by seq, which a hole of 2^40 seqs would make hours long.
#[test]
fn an_open_and_an_fsck_with_a_huge_hole_in_the_losses_log_finish() {
    let dir = tempfile::tempdir().expect("tempdir");
    forged(dir.path(), 3, &[("_losses", 1 << 40, true)]);
    let path = dir.path().to_owned();
    let losses = finishes("the open", move || open(&path).recovery_report().losses.len());
    assert!(losses >= 1);
    let path = dir.path().to_owned();
    let report = finishes("fsck", move || fsck(&path, false, &mut |_, _| {}).expect("fsck"));
    assert!(!report.losses.is_empty(), "{report:?}");
}

/// A huge hole in an ordinary log: the open is quick, reads of it are
/// `Lost`, and appends go on after it.
#[test]
fn control_a_huge_hole_in_an_ordinary_log_is_cheap() {
    let dir = tempfile::tempdir().expect("tempdir");
    forged(dir.path(), 1 << 40, &[]);
    let ns = open(dir.path());
    assert_eq!(ns.latest("t").expect("latest"), 1 << 40);
    assert!(matches!(ns.get("t", 10), Err(varve_log::LogError::Lost { .. })));
    assert_eq!(&ns.get("t", 3).expect("get")[..], b"t3");
    assert_eq!(ns.append("t", b"x").expect("append"), (1 << 40) + 1);
}

fn value(log: &str, seq: u64) -> Vec<u8> {
    format!("{log} record {seq:05} ").repeat(6).into_bytes()
}

/// Every seq of `t` on `ns` as `Ok(value)` or `Err((first, last))` of its lost run.
fn contents(ns: &JournalNamespace, log: &str) -> Vec<Result<Vec<u8>, (u64, u64)>> {
    let latest = ns.latest(log).expect("latest");
    (1..=latest)
        .map(|seq| match ns.get(log, seq) {
            Ok(v) => Ok(v.to_vec()),
            Err(varve_log::LogError::Lost { first, last, .. }) => Err((first, last)),
            Err(e) => panic!("{log} {seq}: {e}"),
        })
        .collect()
}

/// The first segment of a small journal deleted (`t` gets a hole, as in
/// damage.rs), then the writer compacts while the hole exists (`u` keeps
/// few records, so its segments die) and a read-only handle follows; every
/// open, before and after, reads `t` alike.
#[test]
fn compaction_with_a_hole_keeps_reads_the_same_for_writer_reader_and_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t_len = 520;
    {
        let ns = open(dir.path());
        ns.create_log("t", LogConfig::unbounded()).expect("create");
        ns.create_log("u", LogConfig::keep(5, varve_log::OnFull::Overwrite)).expect("create");
        for seq in 1..=t_len {
            ns.append("t", &value("t", seq)).expect("append");
        }
    }
    assert!(segment(dir.path(), 2).exists() && !segment(dir.path(), 3).exists());
    fs::remove_file(segment(dir.path(), 1)).expect("delete");
    forget_checkpoint(dir.path());
    let ns = open(dir.path());
    let before = contents(&ns, "t");
    assert!(matches!(before[0], Err((1, _))), "{:?}", &before[..2]);
    let reader = JournalNamespace::open(dir.path(), "ns", JournalOptions { read_only: true, ..options() }).expect("ro");
    assert_eq!(contents(&reader, "t"), before);
    // Lots of dead data in `u`: the compactor moves `t`'s live records out.
    let big = vec![7u8; 2000];
    for _ in 0..400 {
        ns.append("u", &big).expect("append");
    }
    let mut expected = before.clone();
    for seq in t_len + 1..=t_len + 5 {
        assert_eq!(ns.append("t", &value("t", seq)).expect("append"), seq);
        expected.push(Ok(value("t", seq)));
    }
    assert!(!segment(dir.path(), 2).exists(), "the compactor reclaimed the segment holding t's records");
    assert_eq!(contents(&ns, "t"), expected, "writer");
    assert_eq!(contents(&reader, "t"), expected, "reader following");
    drop(reader);
    drop(ns);
    let ns = open(dir.path());
    assert_eq!(contents(&ns, "t"), expected, "reopen");
    let reader = JournalNamespace::open(dir.path(), "ns", JournalOptions { read_only: true, ..options() }).expect("ro");
    assert_eq!(contents(&reader, "t"), expected, "read-only reopen");
    assert_eq!(ns.append("t", b"z").expect("append"), t_len + 6);
}

/// A header claiming a seq past `SEQ_MAX` is refused whole: its trim floor
/// (past the log's latest) must not trim the records before it.
#[test]
fn a_refused_header_past_the_last_seq_does_not_trim_the_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ns = open(dir.path());
    ns.create_log("t", LogConfig::unbounded()).expect("create");
    for i in 1..=3u64 {
        ns.append("t", format!("t{i}").as_bytes()).expect("append");
    }
    ns.close().expect("close");
    let t_id = created_ids(dir.path(), 1).iter().find(|(n, _)| n == "t").expect("t").1;
    // t: latest SEQ_MAX + 10, trimmed before SEQ_MAX + 5 (a well-formed descriptor).
    let mut t = Vec::new();
    t.extend_from_slice(&t_id.to_le_bytes());
    t.extend_from_slice(&(SEQ_MAX + 10).to_le_bytes());
    t.push(0x80);
    t.extend_from_slice(&0u64.to_le_bytes());
    t.push(0);
    t.extend_from_slice(&(SEQ_MAX + 5).to_le_bytes());
    t.extend_from_slice(&1u16.to_le_bytes());
    t.extend_from_slice(b"t");
    forge_segment(dir.path(), 2, t_id + 1, &[t]);
    forget_checkpoint(dir.path());
    let ns = open(dir.path());
    let report = ns.recovery_report().clone();
    assert!(!report.damage.is_empty(), "the header is refused: {report:?}");
    let info = ns.log_info("t").expect("info");
    let old = ns.get("t", 3);
    let seq = ns.append("t", b"after").expect("append");
    let after = ns.get("t", seq);
    assert!(
        matches!(&old, Ok(v) if &v[..] == b"t3") || matches!(old, Err(varve_log::LogError::Lost { .. })),
        "seq 3 is neither kept nor lost: {old:?}; {info:?}; the append after it, seq {seq}: {after:?}"
    );
    assert_eq!(&after.expect("an acknowledged append reads back")[..], b"after", "{info:?}");
}
