//! Every write-error path of the journal, made to happen at an exact call by
//! the fault-injecting [`FaultyIo`]: what the failing operation returns, what
//! the namespace does next, and what a reopen finds on disk.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::io::faults::{Fault, FaultyIo, Op};
use super::mapped::RESERVE_BYTES_MIN;
use super::{JournalNamespace, JournalOptions};
use crate::contract::{LogConfig, Namespace, OnFull, SeqRange, SyncPolicy};
use crate::error::LogError;

const EIO: i32 = 5;
const ENOSPC: i32 = 28;

fn open_faulty(dir: &Path, options: JournalOptions) -> (JournalNamespace, Arc<FaultyIo>) {
    let io = Arc::new(FaultyIo::default());
    let ns = JournalNamespace::open_with_io(dir, "ns", options, io.clone()).expect("open");
    (ns, io)
}

fn reopen(dir: &Path) -> JournalNamespace {
    let ns = JournalNamespace::open(dir, "ns", JournalOptions::default()).expect("reopen");
    assert!(!ns.recovery_report().needs_attention(), "{:?}", ns.recovery_report());
    ns
}

fn segments(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .expect("ls")
        .filter(|e| e.as_ref().expect("entry").path().extension().is_some_and(|x| x == "seg"))
        .count()
}

fn values(ns: &JournalNamespace, log: &str) -> Vec<Vec<u8>> {
    ns.scan(log, SeqRange::ALL).expect("scan").map(|r| r.expect("record").value.to_vec()).collect()
}

#[test]
fn a_failed_fsync_poisons_the_namespace_and_reads_go_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ns, io) = open_faulty(dir.path(), JournalOptions::default());
    ns.create_log("a", LogConfig::unbounded()).expect("create");
    assert_eq!(ns.append("a", b"one").expect("append"), 1);
    io.fail_nth(Op::SyncData, 1, Fault::Error(EIO));
    let failed = ns.append("a", b"two").expect_err("the fsync failed");
    assert!(matches!(&failed, LogError::Poisoned { cause, .. } if cause.contains("fsync")), "{failed}");
    // Never retried: every later write is refused, even with the disk healthy.
    io.heal();
    assert!(matches!(ns.append("a", b"three"), Err(LogError::Poisoned { .. })));
    assert!(matches!(ns.create_log("b", LogConfig::unbounded()), Err(LogError::Poisoned { .. })));
    assert!(matches!(ns.sync(), Err(LogError::Poisoned { .. })));
    assert_eq!(&ns.get("a", 1).expect("reads go on")[..], b"one");
    drop(ns);
    // Reopening reads what is on disk: here the unsynced frame did reach the
    // page cache, so it is there; what matters is that the journal is whole.
    let ns = reopen(dir.path());
    assert_eq!(values(&ns, "a")[0], b"one");
    assert!(ns.latest("a").expect("latest") <= 2);
}

#[test]
fn a_failed_group_commit_poisons_the_appends_after_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = JournalOptions { sync: SyncPolicy::Group(Duration::from_millis(2)), ..JournalOptions::default() };
    let (ns, io) = open_faulty(dir.path(), options);
    ns.create_log("a", LogConfig::unbounded()).expect("create");
    io.fail_from_now(Op::SyncData, Fault::Error(EIO));
    ns.append("a", b"acknowledged before the fsync").expect("group commit acknowledges at once");
    let deadline = Instant::now() + Duration::from_secs(30);
    while ns.append("a", b"more").is_ok() {
        assert!(Instant::now() < deadline, "the flusher's failed fsync never poisoned the namespace");
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(matches!(ns.append("a", b"x"), Err(LogError::Poisoned { .. })));
    assert!(matches!(ns.sync(), Err(LogError::Poisoned { .. })));
}

#[test]
fn a_failed_large_write_changes_nothing_and_the_next_append_takes_its_place() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ns, io) = open_faulty(dir.path(), JournalOptions::default());
    ns.create_log("a", LogConfig::unbounded()).expect("create");
    let big = vec![7u8; 40 << 10]; // large frames are written with pwrite
    assert_eq!(ns.append("a", &big).expect("append"), 1);
    io.fail_nth(Op::WriteAt, 1, Fault::Error(EIO));
    assert!(matches!(ns.append("a", &big), Err(LogError::Io { .. })));
    assert_eq!(ns.latest("a").expect("latest"), 1, "a failed write publishes nothing");
    io.fail_nth(Op::WriteAt, 1, Fault::ShortWrite(1000));
    assert!(matches!(ns.append("a", &vec![9u8; 30 << 10]), Err(LogError::Io { .. })));
    assert_eq!(ns.latest("a").expect("latest"), 1);
    assert_eq!(ns.append("a", b"small").expect("append"), 2);
    assert_eq!(ns.append("a", &big).expect("append"), 3);
    drop(ns);
    let ns = reopen(dir.path());
    assert_eq!(values(&ns, "a"), vec![big.clone(), b"small".to_vec(), big]);
}

#[test]
fn a_full_disk_when_the_segment_grows_is_no_space_and_nothing_is_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ns, io) = open_faulty(dir.path(), JournalOptions::default());
    ns.create_log("a", LogConfig::unbounded()).expect("create");
    let record = vec![1u8; 8 << 10];
    let mut appended = 0;
    // Fill the first reserve; the next append must grow it.
    while (appended + 1) * (record.len() as u64 + 40) < RESERVE_BYTES_MIN {
        ns.append("a", &record).expect("append");
        appended += 1;
    }
    io.fail_from_now(Op::Reserve, Fault::Error(ENOSPC));
    let mut failed = None;
    for _ in 0..4 {
        if let Err(e) = ns.append("a", &record) {
            failed = Some(e);
            break;
        }
        appended += 1;
    }
    let failed = failed.expect("growing the reserve hit the full disk");
    assert!(matches!(&failed, LogError::NoSpace { .. }), "{failed}");
    assert!(failed.to_string().contains("nothing was written"), "{failed}");
    assert_eq!(ns.latest("a").expect("latest"), appended);
    io.heal();
    assert_eq!(ns.append("a", &record).expect("space is back"), appended + 1);
    drop(ns);
    assert_eq!(reopen(dir.path()).latest("a").expect("latest"), appended + 1);
}

#[test]
fn a_roll_that_fails_leaves_no_segment_behind_and_the_next_one_works() {
    for (op, errno) in [(Op::Reserve, ENOSPC), (Op::SyncDir, EIO)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let options = JournalOptions { segment_bytes_max: 8192, ..JournalOptions::default() };
        let (ns, io) = open_faulty(dir.path(), options);
        ns.create_log("a", LogConfig::unbounded()).expect("create");
        let record = vec![3u8; 3000];
        ns.append("a", &record).expect("append");
        ns.append("a", &record).expect("append");
        assert_eq!(segments(dir.path()), 1);
        io.fail_from_now(op, Fault::Error(errno));
        let failed = ns.append("a", &record).expect_err("the roll failed");
        io.heal();
        assert!(matches!(failed, LogError::NoSpace { .. } | LogError::Io { .. }), "{op:?}: {failed}");
        assert_eq!(segments(dir.path()), 1, "{op:?}: a failed roll removes the segment it started");
        assert_eq!(ns.latest("a").expect("latest"), 2);
        assert_eq!(ns.append("a", &record).expect("the roll succeeds now"), 3);
        assert_eq!(segments(dir.path()), 2);
        drop(ns);
        assert_eq!(reopen(dir.path()).latest("a").expect("latest"), 3);
    }
}

#[test]
fn a_nearly_full_disk_still_takes_small_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ns, io) = open_faulty(dir.path(), JournalOptions { sync: SyncPolicy::Never, ..JournalOptions::default() });
    ns.create_log("a", LogConfig::unbounded()).expect("create");
    let record = vec![1u8; 8 << 10];
    while ns.append("a", &record).is_ok() && io.calls(Op::Reserve) < 2 {}
    // Doubling the reserve no longer fits; a page more does.
    io.fail_nth(Op::Reserve, 1, Fault::Error(ENOSPC));
    let latest = ns.latest("a").expect("latest");
    let mut appended = latest;
    while io.calls(Op::Reserve) < 4 {
        appended = ns.append("a", b"small").expect("a small write fits a page");
    }
    assert!(appended > latest);
}

#[test]
fn a_failed_fsync_at_a_roll_poisons() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = JournalOptions { segment_bytes_max: 8192, sync: SyncPolicy::Never, ..JournalOptions::default() };
    let (ns, io) = open_faulty(dir.path(), options);
    ns.create_log("a", LogConfig::unbounded()).expect("create");
    ns.append("a", &[1u8; 5000]).expect("append");
    io.fail_nth(Op::SyncData, 1, Fault::Error(EIO));
    assert!(matches!(ns.append("a", &[1u8; 5000]), Err(LogError::Poisoned { .. })));
    io.heal();
    assert!(matches!(ns.append("a", b"x"), Err(LogError::Poisoned { .. })));
}

#[test]
fn housekeeping_that_fails_never_fails_the_append_that_landed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = JournalOptions { segment_bytes_max: 8192, sync: SyncPolicy::Never, ..JournalOptions::default() };
    let (ns, io) = open_faulty(dir.path(), options);
    ns.create_log("ring", LogConfig::keep(2, OnFull::Overwrite)).expect("create");
    io.fail_from_now(Op::RemoveFile, Fault::Error(EIO));
    for i in 0..40u32 {
        ns.append("ring", &[u8::try_from(i % 251).expect("small"); 3000])
            .expect("the append lands; a failed deletion waits");
    }
    let kept = segments(dir.path());
    assert!(kept > 5, "dead segments stay while deletion fails ({kept})");
    assert!(io.calls(Op::RemoveFile) > 0);
    io.heal();
    ns.append("ring", b"after").expect("append");
    assert!(segments(dir.path()) <= 3, "the next append deletes them ({} left)", segments(dir.path()));
    ns.delete_log("ring").expect("delete");
    drop(ns);
    assert!(reopen(dir.path()).list_logs().expect("ls").is_empty());
}

/// Run `appends` on a thread of its own: `None` if it did not return
/// within 30 s (held by the writer, say).
fn returns_in_time<T: Send + 'static>(appends: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(appends());
    });
    receiver.recv_timeout(Duration::from_secs(30)).ok()
}

/// Releases a held operation when dropped, so that a failing test does not
/// leave a thread waiting for it (and the namespace's drop with it).
struct ReleaseOnDrop(Arc<FaultyIo>, Op);

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        self.0.release(self.1);
    }
}

/// `Never`, so that only rolls (none here: segments of 4 MiB) and
/// checkpoint saves (every 4 KiB written) fsync.
fn saving_checkpoints_often() -> JournalOptions {
    JournalOptions {
        sync: SyncPolicy::Never,
        segment_bytes_max: 4 << 20,
        checkpoint_bytes_min: 4096,
        ..JournalOptions::default()
    }
}

/// The fsync, compression and write of a checkpoint saved as the writer
/// writes run on a thread of their own, so a slow fsync there holds no
/// append (under `Never`, appends themselves do not wait for one).
#[test]
fn a_checkpoint_saved_as_the_writer_writes_holds_no_append_while_it_is_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ns, io) = open_faulty(dir.path(), saving_checkpoints_often());
    ns.create_log("a", LogConfig::unbounded()).expect("create");
    io.hold(Op::SyncData);
    let _release = ReleaseOnDrop(io.clone(), Op::SyncData);
    // Append until a save's fsync waits (about 4 KiB in).
    let (writer, held) = (ns.clone(), io.clone());
    let appended = returns_in_time(move || {
        let mut appended = 0u64;
        while held.waiting(Op::SyncData) == 0 && appended < 100_000 {
            writer.append("a", &[7u8; 100]).expect("append");
            appended += 1;
        }
        appended
    })
    .expect("an append was held while the checkpoint's fsync waited");
    assert_eq!(io.waiting(Op::SyncData), 1, "no checkpoint save began its fsync in {appended} appends");
    // The checkpoint thread waits in its fsync: appends go on meanwhile.
    let writer = ns.clone();
    returns_in_time(move || (0..1000).for_each(|_| _ = writer.append("a", &[8u8; 100]).expect("append")))
        .expect("appends were held while the checkpoint's fsync waited");
    io.release(Op::SyncData);
    drop(ns);
    let ns = reopen(dir.path());
    assert_eq!(ns.recovery_report().checkpoint, crate::journal::CheckpointUse::Loaded);
    assert_eq!(ns.latest("a").expect("latest"), appended + 1000);
}

/// A failed fsync on the checkpoint thread poisons the namespace, as one
/// made by an append does: the checkpoint is not written, and later writes
/// are refused with the cause.
#[test]
fn a_failed_fsync_on_the_checkpoint_thread_poisons_the_namespace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ns, io) = open_faulty(dir.path(), saving_checkpoints_often());
    ns.create_log("a", LogConfig::unbounded()).expect("create");
    io.fail_from_now(Op::SyncData, Fault::Error(EIO));
    let deadline = Instant::now() + Duration::from_secs(30);
    let failed = loop {
        assert!(Instant::now() < deadline, "no append saw the checkpoint thread's failed fsync");
        match ns.append("a", &[7u8; 100]) {
            Ok(_) => {}
            Err(e) => break e,
        }
    };
    assert!(matches!(&failed, LogError::Poisoned { cause, .. } if cause.contains("fsync")), "{failed}");
    assert!(!dir.path().join(super::CHECKPOINT_FILE).exists(), "a checkpoint was written over unsynced frames");
    assert_eq!(&ns.get("a", 1).expect("reads go on")[..], &[7u8; 100][..]);
    io.heal();
    assert!(matches!(ns.append("a", b"x"), Err(LogError::Poisoned { .. })));
}

/// A writer that opens after a crash and closes without writing still
/// fsyncs before its close saves a checkpoint: the crashed writer's frames
/// may be in the page cache only. (From a review.)
#[test]
fn a_close_after_a_crash_saves_a_checkpoint_only_after_an_fsync() {
    let dir = tempfile::tempdir().expect("tempdir");
    let crashed = tempfile::tempdir().expect("tempdir");
    let options = JournalOptions { sync: SyncPolicy::Never, ..JournalOptions::default() };
    let ns = JournalNamespace::open(dir.path(), "ns", options).expect("open");
    ns.create_log("a", LogConfig::unbounded()).expect("create");
    for i in 0..100u32 {
        ns.append("a", &i.to_le_bytes()).expect("append");
    }
    // The process "dies" here: its frames are in the page cache only.
    for entry in std::fs::read_dir(dir.path()).expect("ls") {
        let entry = entry.expect("entry");
        if entry.file_type().expect("type").is_file() && entry.file_name() != super::CHECKPOINT_FILE {
            std::fs::copy(entry.path(), crashed.path().join(entry.file_name())).expect("copy");
        }
    }
    drop(ns);
    let (ns, io) = open_faulty(crashed.path(), options);
    assert_eq!(ns.latest("a").expect("latest"), 100);
    drop(ns);
    assert!(crashed.path().join(super::CHECKPOINT_FILE).exists(), "the close saved a checkpoint");
    assert!(
        io.calls(Op::SyncData) > 0,
        "the close saved a checkpoint of 100 records no fsync since the crash made durable"
    );
}
