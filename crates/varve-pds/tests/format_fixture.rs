//! The entry formats of `codec` are frozen by a committed fixture
//! (`tests/fixtures/paper-example-v1/`): the paper's example (insert 7, 2, 5,
//! delete 2, one extra pointer) written to the embedded journal. This build
//! must write exactly those entries — every log, every seq, every byte — and
//! read every version back from them. (How entries are grouped into journal
//! frames is the journal's format, frozen by its own fixture: the fixture
//! here has a frame per entry, as builds before the batched updates wrote.)
//! Regenerate on purpose with
//! `VARVE_WRITE_FIXTURES=1 cargo test -p varve-pds --test format_fixture`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use varve_log::{JournalNamespace, JournalOptions, Namespace, SeqRange, SyncPolicy};
use varve_pds::{Options, SortedSet, Structure};

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/paper-example-v1")
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
fn this_build_writes_the_frozen_entry_formats() {
    let fresh = tempfile::tempdir().expect("tempdir");
    {
        let options = JournalOptions { sync: SyncPolicy::Never, ..JournalOptions::default() };
        let ns: Arc<dyn Namespace> = Arc::new(JournalNamespace::open(fresh.path(), "fixture", options).expect("open"));
        varve_pds::demo::paper_example_on(&ns, "paper").expect("the paper's example");
    }
    if std::env::var_os("VARVE_WRITE_FIXTURES").is_some() {
        std::fs::remove_dir_all(fixture_dir()).ok();
        std::fs::create_dir_all(fixture_dir()).expect("mkdir");
        for (name, bytes) in segments(fresh.path()) {
            std::fs::write(fixture_dir().join(name), bytes).expect("write fixture");
        }
    }
    assert!(!segments(&fixture_dir()).is_empty(), "fixture missing: see this file's doc comment");
    let frozen = tempfile::tempdir().expect("tempdir");
    copy_fixture(frozen.path());
    let written = entries(fresh.path());
    assert!(written.len() > 10, "the example writes entries");
    assert!(written == entries(frozen.path()), "entries differ from the frozen formats");
}

/// Every record of every log, read back: (log, seq, bytes).
fn entries(dir: &Path) -> Vec<(String, u64, Vec<u8>)> {
    let options = JournalOptions { read_only: true, ..JournalOptions::default() };
    let ns = JournalNamespace::open(dir, "fixture", options).expect("open");
    let mut all = Vec::new();
    for log in ns.list_logs().expect("list") {
        for record in ns.scan(&log.name, SeqRange::ALL).expect("scan") {
            let record = record.expect("record");
            all.push((log.name.clone(), record.seq, record.value.to_vec()));
        }
    }
    all
}

fn copy_fixture(to: &Path) {
    for (name, bytes) in segments(&fixture_dir()) {
        std::fs::write(to.join(name), bytes).expect("copy");
    }
}

#[test]
fn this_build_reads_every_version_of_the_fixture() {
    let copy = tempfile::tempdir().expect("tempdir");
    copy_fixture(copy.path());
    let options = JournalOptions { read_only: true, ..JournalOptions::default() };
    let ns: Arc<dyn Namespace> = Arc::new(JournalNamespace::open(copy.path(), "fixture", options).expect("open"));
    let tree =
        SortedSet::<u64>::open_as(ns, "paper", Structure::Bst, Options { extra: 1, keep: None, ..Options::default() })
            .expect("open tree");
    assert_eq!(tree.latest().expect("latest"), 4);
    let expected: [&[u64]; 4] = [&[7], &[7, 2], &[7, 2, 5], &[7, 5]];
    for (v, preorder) in (1..=4).zip(expected) {
        assert_eq!(tree.preorder(Some(v)).expect("preorder"), preorder, "version {v}");
    }
    assert!(tree.contains(&2, Some(3)).expect("find(2, 3)"));
    assert!(!tree.contains(&2, Some(4)).expect("find(2, 4)"));
}
