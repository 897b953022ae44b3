//! Real-process crash loop: a child stores versions (deltas with a chain
//! limit, branches, merges) on the embedded journal and prints each one
//! acknowledged; we SIGKILL it at random moments, reopen, and check that
//! every acknowledged version reads back with the value of its step and
//! that every head verifies (value digests, parent links and ids of the
//! whole DAG recomputed from the stored bytes).
//!
//! `VARVE_CRASH_KILLS=N` runs a longer soak; `VARVE_SEED=S` replays a run.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;

use varve_log::{JournalOptions, JournalStore, Namespace};
use varve_object::{ObjectStore, VersionId};
use varve_testkit::crash::CrashLoop;

#[path = "bin/workload.rs"]
#[allow(dead_code, reason = "the child's half of the workload")]
mod workload;
use workload::value_for;

#[test]
fn acknowledged_versions_survive_sigkill_and_verify() {
    let mut crashes = CrashLoop::new("object crash loop", 24, 5..60);
    let seed = crashes.seed();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut acked: BTreeMap<u64, VersionId> = BTreeMap::new();
    for _ in 0..crashes.kills() {
        let run = crashes.kill_next(
            Command::new(env!("CARGO_BIN_EXE_varve-object-crash-writer")).arg(dir.path()).arg(seed.to_string()),
        );
        let context = run.context.clone();
        for line in &run.lines {
            let mut parts = line.strip_prefix("ack ").expect("ack line").split(' ');
            let step: u64 = parts.next().expect("step").parse().expect("step number");
            let id: VersionId = parts.next().expect("id").parse().expect("version id");
            if let Some(earlier) = acked.insert(step, id) {
                assert_eq!(earlier, id, "{context}: step {step} acknowledged as two versions");
            }
        }
        let store = JournalStore::open(dir.path(), JournalOptions::default()).expect("store");
        let ns: Arc<dyn Namespace> = Arc::new(store.journal_namespace("objects").expect("namespace"));
        let objects = ObjectStore::open(ns, "crash").expect("reopen");
        let stored = objects.versions("doc").expect("versions");
        assert!(stored.len() >= acked.len(), "{context}: {} stored, {} acknowledged", stored.len(), acked.len());
        for (&step, id) in &acked {
            let value = objects.get("doc", id).unwrap_or_else(|e| panic!("{context}: acknowledged step {step}: {e}"));
            assert_eq!(value, value_for(seed, step), "{context}: value of step {step}");
            // Store order is step order: step n is the n-th version stored.
            assert_eq!(stored[usize::try_from(step - 1).expect("fits")].id, *id, "{context}: step {step} in order");
        }
        let mut checked = 0;
        for head in objects.heads("doc").expect("heads") {
            checked += objects.verify("doc", &head.id).unwrap_or_else(|e| panic!("{context}: {e}")).versions;
        }
        assert!(checked >= stored.len().min(1), "{context}: verify reached the versions");
    }
    println!("object crash loop: {} versions acknowledged", acked.len());
    crashes.finish();
}
