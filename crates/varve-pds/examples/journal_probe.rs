//! Profile helper: one BST workload on the embedded journal.
use std::sync::Arc;
use std::time::{Duration, Instant};
use varve_log::{JournalOptions, JournalStore, Namespace, SyncPolicy};
fn main() {
    let dir = std::env::temp_dir().join(format!("varve-probe-{}", std::process::id()));
    let options = JournalOptions { sync: SyncPolicy::Group(Duration::from_millis(5)), ..JournalOptions::default() };
    let store = JournalStore::open(&dir, options).expect("store");
    let ns: Arc<dyn Namespace> = Arc::new(store.journal_namespace("p").expect("ns"));
    let w = varve_pds::workload::parse(&varve_pds::workload::generate(1000, 1)).expect("parse");
    for i in 0..5 {
        let t = Instant::now();
        varve_pds::workload::run_named(
            ns.clone(),
            &format!("w{i}"),
            &w,
            varve_pds::Structure::Bst,
            5,
            varve_pds::workload::RunOptions::default(),
        )
        .expect("run");
        eprintln!("{:?}", t.elapsed());
    }
    drop(ns);
    drop(store);
    std::fs::remove_dir_all(&dir).ok();
}
