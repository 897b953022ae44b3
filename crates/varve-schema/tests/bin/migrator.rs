//! Crash-test child (tests/migrate_crash.rs): in the journal namespace
//! `DIR/app`, makes sure log `orders` holds `RECORDS` typed records of v1
//! and that v2 (manual, migration `rekey`) is registered, prints `ready`,
//! then runs (or resumes) the migration, printing `batch DONE` after each
//! batch it appends and `done` when writers have switched; then waits to
//! be killed. The migration is slowed (`SLOW_US` per record) so that kills
//! land inside it. Usage: `migrator DIR`.
#![allow(clippy::doc_markdown, reason = "the papers' terms and file names in prose")]
#![allow(clippy::cast_precision_loss, reason = "small test values as floats")]

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use varve_log::{JournalOptions, JournalStore, Namespace, SyncPolicy};
use varve_schema::{Field, FieldType, Schemas, Spec, Value};

/// Records in the old generation.
pub const RECORDS: u64 = 6000;
const SLOW_US: u64 = 150;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir] = args.as_slice() else {
        eprintln!("usage: migrator DIR");
        std::process::exit(2);
    };
    let options = JournalOptions { sync: SyncPolicy::Group(Duration::from_millis(2)), ..JournalOptions::default() };
    let store = JournalStore::open(dir, options).expect("open store");
    let ns: Arc<dyn Namespace> = Arc::new(store.journal_namespace("app").expect("namespace"));
    let schemas = Schemas::open(ns.clone()).expect("schemas");
    schemas
        .register(
            "orders",
            &Spec::new(vec![Field::new(1, "id", FieldType::U32), Field::new(2, "cents", FieldType::I32)]),
        )
        .expect("v1");
    let log = schemas.log("orders").expect("log");
    if schemas.subject("orders").expect("orders").versions.len() == 1 {
        // Setup, resumable: top the log up to RECORDS, in batches.
        loop {
            let have = ns.latest("orders").expect("latest");
            if have >= RECORDS {
                break;
            }
            let batch: Vec<_> = (have..(have + 500).min(RECORDS))
                .map(|i| {
                    let id = u32::try_from(i).expect("fits");
                    let cents = i32::try_from(i * 3).expect("fits");
                    log.record().expect("record").with("id", id).expect("id").with("cents", cents).expect("cents")
                })
                .collect();
            log.append_batch(&batch).expect("append");
        }
    }
    schemas.define_migration("rekey", |old| {
        std::thread::sleep(Duration::from_micros(SLOW_US));
        let (Some(Value::UInt(id)), Some(Value::Int(cents))) = (old.get("id"), old.get("cents")) else {
            return Err("missing fields".into());
        };
        Ok(vec![
            ("key".into(), Value::Text(format!("order-{id}"))),
            ("euros".into(), Value::Float(cents as f64 / 100.0)),
        ])
    });
    let v2 = Spec::new(vec![Field::new(3, "key", FieldType::String), Field::new(4, "euros", FieldType::F64)])
        .migration("rekey");
    schemas.register("orders", &v2).expect("v2");
    let stdout = std::io::stdout();
    let say = |line: &str| {
        let mut out = stdout.lock();
        writeln!(out, "{line}").expect("stdout");
        out.flush().expect("stdout");
    };
    say("ready");
    if schemas.subject("orders").expect("orders").pending().is_some() {
        schemas.migrate_in_batches("orders", 40, &mut |done, _| say(&format!("batch {done}"))).expect("migrate");
    }
    say("done");
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}
