#![allow(clippy::doc_markdown, reason = "the paper's terms and file names in prose")]
//! Real-process crash loop (§IV-A C3/C4): a child runs a deterministic
//! workload on the embedded journal and prints each committed version; we
//! SIGKILL it (most kills while it updates, one in three aimed at its
//! recovery: see `varve_testkit::crash`), reopen — which completes an update
//! the child was killed in — and check that every acknowledged version reads
//! exactly as the model says, that the interrupted op was applied at most
//! once, and that the next child goes on.
//!
//! `VARVE_CRASH_KILLS=N` runs a longer soak; `VARVE_SEED=S` replays a run.

use std::collections::HashMap;
use std::process::Command;
use std::sync::Arc;

use rand::Rng;
use varve_log::{JournalOptions, JournalStore, Namespace};
use varve_pds::{Options, SortedSet, Structure, Version, VersionedList};
use varve_testkit::crash::CrashLoop;

#[path = "bin/crash_ops.rs"]
mod ops;
use ops::value_for;

/// `model[v]`: the contents of version v, extended on demand.
fn model_up_to(model: &mut Vec<Vec<u64>>, seed: u64, structure: Structure, v: Version) {
    while (model.len() as u64) <= v {
        let version = model.len() as u64;
        let value = value_for(seed, version);
        let mut next = model.last().expect("version 0").clone();
        if let Some(at) = next.iter().position(|&x| x == value) {
            next.remove(at);
        } else if structure == Structure::List {
            next.push(value);
        } else {
            let at = next.binary_search(&value).unwrap_or_else(|i| i);
            next.insert(at, value);
        }
        model.push(next);
    }
}

fn items(ns: Arc<dyn Namespace>, structure: Structure, name: &str) -> (Version, Box<dyn Fn(Version) -> Vec<u64>>) {
    let opts = Options { extra: 2, keep: None, ..Options::default() };
    if structure == Structure::List {
        let list = VersionedList::<u64>::open(ns, name, opts).expect("reopen list");
        (list.latest().expect("latest"), Box::new(move |v| list.iter(Some(v)).expect("iter").collect()))
    } else {
        let set = SortedSet::<u64>::open_as(ns, name, structure, opts).expect("reopen set");
        (set.latest().expect("latest"), Box::new(move |v| set.iter(Some(v)).expect("iter").collect()))
    }
}

#[test]
fn committed_versions_survive_sigkill_and_interrupted_updates_complete_once() {
    let mut crashes = CrashLoop::new("pds crash loop", 36, 5..80);
    let seed = crashes.seed();
    let dir = tempfile::tempdir().expect("tempdir");
    let structures = [Structure::Bst, Structure::Balanced, Structure::List];
    let mut models: HashMap<Structure, Vec<Vec<u64>>> = structures.iter().map(|&s| (s, vec![Vec::new()])).collect();
    let mut acked: HashMap<Structure, Version> = HashMap::new();
    let mut checked: HashMap<Structure, Version> = HashMap::new();
    let mut completed_on_reopen = 0;
    for kill in 0..crashes.kills() {
        let structure = structures[kill % structures.len()];
        let run = crashes.kill_next(
            Command::new(env!("CARGO_BIN_EXE_varve-pds-crash-writer"))
                .arg(dir.path())
                .arg(seed.to_string())
                .arg(structure.to_string()),
        );
        let context = format!("{}, {structure}", run.context);
        for line in &run.lines {
            let v: Version = line.strip_prefix("ack ").expect("ack line").parse().expect("version");
            let last = acked.entry(structure).or_insert(0);
            assert_eq!(v, *last + 1, "{context}: versions are acknowledged densely");
            *last = v;
        }
        // Reopen (completing an interrupted update) and check.
        let store = JournalStore::open(dir.path(), JournalOptions::default()).expect("store");
        let ns: Arc<dyn Namespace> = Arc::new(store.journal_namespace("crash").expect("namespace"));
        let (latest, read) = items(ns, structure, &format!("crash-{structure}"));
        let last_acked = acked.get(&structure).copied().unwrap_or(0);
        assert!(
            latest == last_acked || latest == last_acked + 1,
            "{context}: latest {latest} but {last_acked} acknowledged: the interrupted op applied more than once or a version was lost"
        );
        if latest == last_acked + 1 {
            completed_on_reopen += 1;
            acked.insert(structure, latest);
        }
        let model = models.get_mut(&structure).expect("model");
        model_up_to(model, seed, structure, latest);
        let from = checked.get(&structure).copied().unwrap_or(0) + 1;
        let samples: Vec<Version> =
            (0..8).filter(|_| latest > 0).map(|_| crashes.rng().gen_range(1..=latest)).collect();
        for v in (from..=latest).chain(samples) {
            assert_eq!(read(v), model[usize::try_from(v).expect("fits")], "{context}: version {v}");
        }
        checked.insert(structure, latest);
    }
    println!("pds crash loop: {completed_on_reopen} interrupted updates completed on reopen, versions {acked:?}");
    crashes.finish();
}
