#![allow(clippy::doc_markdown, reason = "the paper's terms and file names in prose")]
//! Real-process crash loop (§IV-A C3/C4): a child runs a deterministic
//! workload on the embedded journal and prints each committed version; we
//! SIGKILL it at a random moment (sometimes while it is still recovering),
//! reopen — which completes an update the child was killed in — and check
//! that every acknowledged version reads exactly as the model says, that the
//! interrupted op was applied at most once, and that the next child goes on.
//!
//! `VARVE_CRASH_KILLS=N` runs a longer soak; `VARVE_TEST_SEED=S` replays a run.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use varve_log::{JournalOptions, JournalStore, Namespace};
use varve_pds::{Options, SortedSet, Structure, Version, VersionedList};

/// Must agree with `value_for` in tests/bin/crash_writer.rs.
fn value_for(seed: u64, version: u64) -> u64 {
    let mut x = seed ^ version.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 29;
    x % 40 + 1
}

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
    let opts = Options { extra: 2, keep: None };
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
    let kills: usize = std::env::var("VARVE_CRASH_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(36);
    let seed: u64 = std::env::var("VARVE_TEST_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
        u64::from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").subsec_nanos())
    });
    println!("pds crash loop: {kills} kills, seed {seed} (replay with VARVE_TEST_SEED={seed})");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let structures = [Structure::Bst, Structure::Balanced, Structure::List];
    let mut models: HashMap<Structure, Vec<Vec<u64>>> = structures.iter().map(|&s| (s, vec![Vec::new()])).collect();
    let mut acked: HashMap<Structure, Version> = HashMap::new();
    let mut checked: HashMap<Structure, Version> = HashMap::new();
    let (mut mid_workload, mut completed_on_reopen) = (0, 0);
    for kill in 0..kills {
        let structure = structures[kill % structures.len()];
        let mut child = Command::new(env!("CARGO_BIN_EXE_varve-pds-crash-writer"))
            .arg(dir.path())
            .arg(seed.to_string())
            .arg(structure.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn child");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
        // Opening takes longer as the store grows (recovery, completing an
        // interrupted update). One kill in three lands at a random moment
        // from the spawn, so also during the open; the others after the
        // child says `ready`, so that most land while it updates.
        if kill % 3 != 0 {
            let first = stdout.next().and_then(Result::ok);
            assert!(first.is_none() || first.as_deref() == Some("ready"), "seed {seed}: child said {first:?} first");
        }
        let reader = std::thread::spawn(move || {
            stdout.map_while(Result::ok).filter(|line| line != "ready").collect::<Vec<String>>()
        });
        std::thread::sleep(Duration::from_millis(rng.gen_range(5..80)));
        child.kill().expect("SIGKILL");
        let status = child.wait().expect("wait");
        let lines = reader.join().expect("reader");
        if status.code().is_some() {
            let mut stderr = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr).ok();
            panic!("seed {seed}: child exited on its own ({status}): {stderr}");
        }
        if !lines.is_empty() {
            mid_workload += 1;
        }
        for line in &lines {
            let v: Version = line.strip_prefix("ack ").expect("ack line").parse().expect("version");
            let last = acked.entry(structure).or_insert(0);
            assert_eq!(v, *last + 1, "seed {seed}: versions are acknowledged densely");
            *last = v;
        }
        // Reopen (completing an interrupted update) and check.
        let context = format!("seed {seed}, kill {kill}, {structure}");
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
        let samples: Vec<Version> = (0..8).filter(|_| latest > 0).map(|_| rng.gen_range(1..=latest)).collect();
        for v in (from..=latest).chain(samples) {
            assert_eq!(read(v), model[usize::try_from(v).expect("fits")], "{context}: version {v}");
        }
        checked.insert(structure, latest);
    }
    println!(
        "pds crash loop: {kills} kills, {mid_workload} mid-workload, {completed_on_reopen} interrupted updates completed on reopen, versions {acked:?}"
    );
    assert!(mid_workload * 2 >= kills, "most kills should land while the child is updating");
}
