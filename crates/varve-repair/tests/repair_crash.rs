//! A repair killed with SIGKILL at random points (copying prefixes, in the
//! middle of the replay, at the swap) leaves the store with either the
//! complete old history or the complete repaired one, never a mix; the
//! next repair (a new process) finishes a repair interrupted after its
//! intent (`varve_repair::resume`), deletes stale shadows and finishes;
//! the last one leaves one REPAIR event and nothing to resume.
//! After the swap the old history is readable as `_gen.LOG.1`. Once a
//! repair has finished, the store is put back to the original run (a copy
//! of its directory) so that every kill lands in a repair.
//!
//! `VARVE_CRASH_KILLS=N` runs a longer soak; `VARVE_SEED=S` replays a run.

use std::process::Command;

use varve_log::{MemoryStore, Store};
use varve_testkit::crash::CrashLoop;

#[path = "bin/repairer.rs"]
mod repairer;
use repairer::{build, contents, open, LOGS};

#[test]
fn a_killed_repair_leaves_the_old_or_the_repaired_history_and_finishes_when_run_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let original = tempfile::tempdir().expect("tempdir");
    // The original run, with a faulty reading at input CORRECTED, on the journal.
    build(&open(original.path()), true);
    copy_dir(original.path(), dir.path());
    let before: Vec<Vec<Vec<u8>>> = {
        let ns = open(dir.path());
        LOGS.iter().map(|l| contents(&*ns, l)).collect()
    };
    // The truth: a run from scratch with the corrected value from the start.
    let after: Vec<Vec<Vec<u8>>> = {
        let truth = MemoryStore::new().namespace("app").expect("namespace");
        build(&truth, false);
        LOGS.iter().map(|l| contents(&*truth, l)).collect()
    };
    assert!(before != after, "the correction changes the history");

    let mut crashes = CrashLoop::new("repair crash loop", 20, 1..120);
    let minimum = crashes.kills();
    let (mut old_seen, mut new_seen, mut finished, mut resumed) = (0, 0, 0, 0);
    for _ in 0..minimum {
        let run = crashes.kill_next(Command::new(env!("CARGO_BIN_EXE_varve-repair-child")).arg(dir.path()));
        let context = run.context.clone();
        let done = run.lines.iter().any(|l| l == "done");
        resumed += run.lines.iter().filter(|l| l.starts_with("resumed")).count();
        let ns = open(dir.path());
        let now: Vec<Vec<Vec<u8>>> = LOGS.iter().map(|l| contents(&*ns, l)).collect();
        let names: Vec<String> = ns.list_logs().expect("logs").into_iter().map(|l| l.name).collect();
        let swapped = names.iter().any(|n| n.starts_with("_gen."));
        if swapped {
            new_seen += 1;
            assert!(now == after, "{context}: swapped, so every log must be the repaired one");
            for (log, old) in LOGS.iter().zip(&before) {
                let generation = format!("_gen.{log}.1");
                if names.contains(&generation) {
                    assert!(&contents(&*ns, &generation) == old, "{context}: {generation} must be the old history");
                }
            }
        } else {
            old_seen += 1;
            assert!(!done, "{context}: the repair said done, yet nothing is swapped");
            assert!(now == before, "{context}: not swapped, so every log must be the original");
        }
        drop(ns);
        if done {
            finished += 1;
        }
        if swapped {
            // Back to the original run, for the next kill to land in a repair.
            std::fs::remove_dir_all(dir.path()).expect("clear");
            copy_dir(original.path(), dir.path());
        }
    }
    // A last repair, not killed, finishes whatever the last kill left.
    finish_repair(dir.path(), crashes.seed());
    let ns = open(dir.path());
    let now: Vec<Vec<Vec<u8>>> = LOGS.iter().map(|l| contents(&*ns, l)).collect();
    assert!(now == after, "seed {}: after the last repair every log must be the repaired one", crashes.seed());
    // Committed once: one REPAIR event, nothing left to resume.
    let events = varve_runtime::namespace_events(&*ns, varve_log::SeqRange::ALL).expect("events");
    let repairs = events.iter().filter(|e| e.event.kind == varve_runtime::EventKind::Repair).count();
    assert_eq!(repairs, 1, "seed {}: one REPAIR event", crashes.seed());
    let namespaces = std::collections::HashMap::from([("app".to_owned(), std::sync::Arc::clone(&ns))]);
    assert!(varve_repair::resume(&namespaces).expect("resume").is_empty(), "seed {}", crashes.seed());
    println!(
        "{old_seen} kills left the old history, {new_seen} the repaired one; {finished} repairs said done; {resumed} \
         started by finishing an interrupted one"
    );
    assert!(old_seen >= 3, "kills landed before the swap too rarely: {old_seen} (seed {})", crashes.seed());
    crashes.finish();
}

/// Run the child until it says `done` (at most two minutes), then stop it.
fn finish_repair(dir: &std::path::Path, seed: u64) {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_varve-repair-child"))
        .arg(dir)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the repair");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line == "done" {
                let _ = tx.send(());
                break;
            }
        }
    });
    let finished = rx.recv_timeout(std::time::Duration::from_secs(120)).is_ok();
    let _ = child.kill();
    let _ = child.wait();
    assert!(finished, "seed {seed}: the last repair did not finish in two minutes");
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}
