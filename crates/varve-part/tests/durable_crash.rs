//! Real-process crash loop for `DurableMap` (§4.1): a child applies
//! acknowledged batches and checkpoints continually (some checkpoints
//! written on a background thread while batches go on) on the embedded
//! journal; we SIGKILL it at random moments — in the middle of checkpoints
//! too, and one kill in three aimed at its open (see
//! `varve_testkit::crash`) — reopen, and check that every acknowledged
//! batch is there, that the one batch in flight is all there or not at all,
//! and that the map equals the model rebuilt from the batches it holds.
//!
//! `VARVE_CRASH_KILLS=N` runs a longer soak; `VARVE_SEED=S` replays a run.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;

use varve_log::{JournalOptions, JournalStore, Namespace};
use varve_part::durable::{DurableMap, DurableOptions};
use varve_part::BatchOp;
use varve_testkit::crash::CrashLoop;

#[path = "bin/durable_crash_ops.rs"]
mod ops;

#[test]
fn acknowledged_batches_survive_sigkill_during_checkpoints() {
    let mut crashes = CrashLoop::new("durable crash loop", 16, 40..400);
    let seed = crashes.seed();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let (mut model_at, mut acked) = (0u64, 0u64);
    let (mut mid_checkpoint, mut checkpoints, mut in_flight_present) = (0, 0, 0);
    for _ in 0..crashes.kills() {
        let run = crashes.kill_next(
            Command::new(env!("CARGO_BIN_EXE_varve-part-crash-writer")).arg(dir.path()).arg(seed.to_string()),
        );
        let context = run.context;
        let mut in_checkpoint = false;
        for line in &run.lines {
            if let Some(id) = line.strip_prefix("ack ") {
                let id: u64 = id.parse().expect("batch id");
                assert_eq!(id, acked + 1, "{context}: batches are acknowledged densely");
                acked = id;
            } else if line == "checkpoint begin" {
                in_checkpoint = true;
            } else if line == "checkpoint commit" {
                in_checkpoint = false;
                checkpoints += 1;
            } else {
                panic!("{context}: unexpected line {line:?}");
            }
        }
        mid_checkpoint += usize::from(in_checkpoint);
        // Reopen and check.
        let store = JournalStore::open(dir.path(), JournalOptions::default()).expect("store");
        let ns: Arc<dyn Namespace> = Arc::new(store.journal_namespace("crash").expect("namespace"));
        let map = DurableMap::<Vec<u8>>::open(ns.clone(), "crash", DurableOptions::default()).expect("reopen");
        // Reclaimed: only the checkpoint in force has a blob log.
        let blob_logs: Vec<String> = ns
            .list_logs()
            .expect("list")
            .into_iter()
            .map(|l| l.name)
            .filter(|l| l.starts_with("crash.blobs."))
            .collect();
        assert!(blob_logs.len() <= 1, "{context}: blob logs {blob_logs:?}");
        let held = map.get(ops::LAST_BATCH_KEY).map_or(0, |v| u64::from_le_bytes(v[..8].try_into().expect("id")));
        assert!(
            held == acked || held == acked + 1,
            "{context}: the map holds batches up to {held} but {acked} were acknowledged"
        );
        if held == acked + 1 {
            in_flight_present += 1;
            acked = held; // the next child goes on from it
        }
        while model_at < held {
            model_at += 1;
            for op in ops::batch_for(seed, model_at) {
                match op {
                    BatchOp::Put(k, v) => {
                        model.insert(k, v);
                    }
                    BatchOp::Delete(k) => {
                        model.remove(&k);
                    }
                }
            }
        }
        assert_eq!(map.len(), model.len(), "{context}: length");
        assert!(map.iter().map(|(k, v)| (k, v.clone())).eq(model.clone()), "{context}: contents differ from the model");
    }
    println!(
        "durable crash loop: {mid_checkpoint} kills mid-checkpoint, {checkpoints} checkpoints committed, \
         {acked} batches, {in_flight_present} unacknowledged batches found whole"
    );
    assert!(acked > 0 && checkpoints > 0, "seed {seed}: the child made progress");
    crashes.finish();
}
