//! The journal's byte format is frozen by committed fixtures: this build must
//! write exactly the bytes of `tests/fixtures/format-v4/` for the same
//! operations, and read every older format's fixture (`format-v1/` to
//! `format-v3/`) too.
//! Changing the format is a conscious act: bump `FORMAT_VERSION`, describe it
//! in `docs/design.md`, keep the old fixture, and write the new one with
//! `VARVE_WRITE_FIXTURES=1 cargo test -p varve-log --test format_fixture`.

use std::path::{Path, PathBuf};

use varve_log::{JournalNamespace, JournalOptions, LogConfig, Namespace, OnFull, SeqRange, SyncPolicy};

/// The format this build writes.
const CURRENT: &str = "format-v4";
/// Every format this build must still read.
const READABLE: [&str; 4] = ["format-v1", "format-v2", "format-v3", "format-v4"];

fn fixture_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// The operations the fixture records: every frame kind appears. The two
/// logs are created under each other's names and swapped by one
/// `RenameLogs` frame (format 3), so the logs every fixture must hold come
/// out right only if the rename is read back. Format 4 adds a `TrimLog`
/// frame and the floor segment headers restate (`readings` before seq 3).
fn write_journal(dir: &Path) {
    let options = JournalOptions { segment_bytes_max: 4096, sync: SyncPolicy::Never, ..JournalOptions::default() };
    let ns = JournalNamespace::open(dir, "fixture", options).expect("open");
    ns.create_log("latest", LogConfig::unbounded()).expect("create");
    ns.create_log("readings", LogConfig::keep(2, OnFull::Overwrite)).expect("create");
    ns.create_log("doomed", LogConfig::keep(9, OnFull::Refuse)).expect("create");
    ns.append("doomed", b"soon gone").expect("append");
    ns.delete_log("doomed").expect("delete");
    ns.rename_logs(&[("latest", "readings"), ("readings", "latest")]).expect("swap");
    for i in 0..60u32 {
        let reading = format!("sensor-{} {}.{}", i % 3, 20 + i % 7, i % 10);
        ns.append_batch(&[("readings", reading.as_bytes()), ("latest", &i.to_le_bytes())]).expect("batch");
    }
    ns.trim("readings", 3).expect("trim");
    ns.append("readings", &[0, 255, 1, 254]).expect("binary record");
    ns.close().expect("close");
}

fn segments(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .map(|p| (p.file_name().expect("name").to_string_lossy().into_owned(), std::fs::read(&p).expect("read")))
        .collect();
    files.sort();
    files
}

#[test]
fn this_build_writes_the_frozen_format() {
    let fresh = tempfile::tempdir().expect("tempdir");
    write_journal(fresh.path());
    if std::env::var_os("VARVE_WRITE_FIXTURES").is_some() {
        let target = fixture_dir(CURRENT);
        std::fs::remove_dir_all(&target).ok();
        std::fs::create_dir_all(&target).expect("mkdir");
        for (name, bytes) in segments(fresh.path()) {
            std::fs::write(target.join(name), bytes).expect("write fixture");
        }
    }
    let written = segments(fresh.path());
    let frozen = segments(&fixture_dir(CURRENT));
    assert!(!frozen.is_empty(), "fixture missing: see this file's doc comment");
    assert_eq!(written.len(), frozen.len(), "segment count changed");
    for ((name, bytes), (frozen_name, frozen_bytes)) in written.iter().zip(&frozen) {
        assert_eq!(name, frozen_name);
        assert!(bytes == frozen_bytes, "{name}: bytes differ from the frozen format");
    }
}

#[test]
fn this_build_reads_every_frozen_format() {
    for fixture in READABLE {
        reads_the_fixture(fixture);
    }
}

fn reads_the_fixture(fixture: &str) {
    let copy = tempfile::tempdir().expect("tempdir");
    for (name, bytes) in segments(&fixture_dir(fixture)) {
        std::fs::write(copy.path().join(name), bytes).expect("copy");
    }
    let options = JournalOptions { read_only: true, ..JournalOptions::default() };
    let ns = JournalNamespace::open(copy.path(), "fixture", options).unwrap_or_else(|e| panic!("{fixture}: {e}"));
    let logs: Vec<(String, u64, u64)> =
        ns.list_logs().expect("list").into_iter().map(|l| (l.name, l.earliest, l.latest)).collect();
    // Format 4 trimmed `readings` before seq 3; older formats have no trims.
    let earliest = if fixture == "format-v4" { 3 } else { 1 };
    assert_eq!(logs, [("latest".to_owned(), 59, 60), ("readings".to_owned(), earliest, 61)]);
    assert_eq!(ns.get("readings", 3).expect("get"), &b"sensor-2 22.2"[..]);
    assert_eq!(ns.get("readings", 61).expect("get"), &[0, 255, 1, 254][..]);
    assert_eq!(ns.get("latest", 60).expect("get"), &59u32.to_le_bytes()[..]);
    assert_eq!(ns.scan("readings", SeqRange::from(earliest..)).expect("scan").count() as u64, 62 - earliest);
    assert!(ns.recovery_report().segments >= 2, "the fixture spans a segment roll");
}
