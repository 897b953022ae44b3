//! A manual migration killed with SIGKILL at random points (setup, the
//! middle of a batch, the generation switch) resumes and finishes with
//! every record migrated exactly once, in order; before the switch the
//! subject is entirely in its old generation, after it entirely in the new.
//!
//! `VARVE_CRASH_KILLS=N` runs a longer soak; `VARVE_SEED=S` replays a run.
#![allow(clippy::cast_precision_loss, reason = "small test values as floats")]

use std::process::Command;
use std::sync::Arc;

use varve_log::{JournalOptions, JournalStore, Namespace};
use varve_schema::{Schemas, Value};
use varve_testkit::crash::CrashLoop;

#[path = "bin/migrator.rs"]
#[allow(dead_code, reason = "the child's half")]
mod migrator;
use migrator::RECORDS;

#[test]
fn a_killed_migration_resumes_and_migrates_each_record_exactly_once() {
    let mut crashes = CrashLoop::new("migration crash loop", 24, 10..160);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut finished_at = None;
    let mut progress_seen = 0;
    // At least the configured kills, and on until three runs after the
    // migration finished (a cap keeps a broken resume from looping).
    let minimum = crashes.kills();
    for kill in 0..minimum.max(400) {
        let run = crashes.kill_next(Command::new(env!("CARGO_BIN_EXE_varve-schema-migrator")).arg(dir.path()));
        let context = run.context.clone();
        let mut acked = 0;
        for line in &run.lines {
            if let Some(done) = line.strip_prefix("batch ") {
                acked = done.parse().expect("count");
                progress_seen += 1;
            } else if line == "done" && finished_at.is_none() {
                finished_at = Some(kill);
            }
        }
        let store = JournalStore::open(dir.path(), JournalOptions::default()).expect("store");
        let ns: Arc<dyn Namespace> = Arc::new(store.journal_namespace("app").expect("namespace"));
        let schemas = Schemas::open(ns.clone()).expect("schemas");
        let Ok(subject) = schemas.subject("orders") else { continue };
        let migrated = ns.latest("orders.gen2").unwrap_or(0);
        assert!(migrated >= acked, "{context}: {acked} acknowledged, {migrated} stored");
        assert!(migrated <= RECORDS, "{context}: {migrated} records migrated from {RECORDS}");
        match subject.current().generation {
            1 => assert!(finished_at.is_none(), "{context}: finished, yet writers are in generation 1"),
            2 => {
                assert_eq!(migrated, RECORDS, "{context}: switched before every record was migrated");
                assert_eq!(subject.current().source_through, RECORDS, "{context}");
            }
            other => panic!("{context}: generation {other}"),
        }
        // Exactly once, in order: record k of the new generation is the
        // migration of record k of the old one (checked at the ends and
        // at a spread of points, so the loop stays quick).
        let log = schemas.log("orders").expect("log");
        let checks: Vec<u64> =
            if migrated == 0 { vec![] } else { vec![1, migrated / 3 + 1, migrated / 2 + 1, migrated] };
        for seq in checks {
            let record = log.get_in(2, seq).unwrap_or_else(|e| panic!("{context}: {e}"));
            assert_eq!(
                record.get("key").expect("key"),
                Some(Value::Text(format!("order-{}", seq - 1))),
                "{context}: seq {seq}"
            );
            assert_eq!(
                record.get("euros").expect("euros"),
                Some(Value::Float((seq - 1) as f64 * 3.0 / 100.0)),
                "{context}"
            );
        }
        if kill + 1 >= minimum && finished_at.is_some_and(|at| kill >= at + 3) {
            break;
        }
    }
    assert!(finished_at.is_some(), "the migration never finished (seed {})", crashes.seed());
    assert!(progress_seen >= 3, "kills landed in the migration too rarely: {progress_seen} batches seen");
    // Every record, once more, now that it is over.
    let store = JournalStore::open(dir.path(), JournalOptions::default()).expect("store");
    let ns: Arc<dyn Namespace> = Arc::new(store.journal_namespace("app").expect("namespace"));
    let schemas = Schemas::open(ns).expect("schemas");
    let all = schemas.log("orders").expect("log").scan(..).expect("scan");
    assert_eq!(all.len() as u64, RECORDS);
    for (seq, record) in all {
        assert_eq!(record.get("key").expect("key"), Some(Value::Text(format!("order-{}", seq - 1))));
    }
    crashes.finish();
}
