//! A read-only open and the writer's open judge a checkpoint alike when
//! segments it lists are gone. The writer's open distrusts one when no
//! segment from the checkpoint's last one on is left; a reader must too,
//! or with its newest segment deleted by hand (no writer running) it would
//! trust a checkpoint whose newest catalog changes are gone, and list other
//! logs than a replay. (From a review; before the fix the reader listed
//! `["u", "x"]` where the writer and a replay list `["o", "u"]`.)

use std::path::Path;
use std::time::Duration;

use varve_log::journal::CHECKPOINT_FILE;
use varve_log::{
    CheckpointUse, JournalNamespace, JournalOptions, JournalStore, LogConfig, Namespace, OnFull, SyncPolicy,
};

fn open(dir: &Path, options: JournalOptions) -> JournalNamespace {
    JournalStore::open(dir, options).expect("open store").journal_namespace("ns").expect("open namespace")
}

fn small_segments() -> JournalOptions {
    JournalOptions { segment_bytes_max: 4096, sync: SyncPolicy::Never, ..JournalOptions::default() }
}

fn read_only() -> JournalOptions {
    JournalOptions { read_only: true, read_only_poll: Duration::from_millis(5), ..JournalOptions::default() }
}

fn segment_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("ns"))
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| Path::new(name).extension().is_some_and(|e| e == "seg"))
        .collect();
    names.sort();
    names
}

fn log_names(ns: &JournalNamespace) -> Vec<String> {
    ns.list_logs().expect("list").into_iter().map(|l| l.name).collect()
}

#[test]
fn a_reader_and_the_writer_agree_on_a_checkpoint_whose_newest_segment_was_deleted_by_hand() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let ns = open(dir.path(), small_segments());
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
    let writer = open(dir.path(), small_segments());
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
