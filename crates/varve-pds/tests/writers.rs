//! Several handles updating one structure in turn (as processes do through
//! a `varve serve`): each handle's cache of node copies must notice the
//! others' updates. Every version, read through every writer's own handle
//! and through a fresh one, against a model of all versions.
//!
//! Seeded: set `VARVE_TEST_SEED` to replay a run (the seed is printed).

use std::collections::BTreeSet;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use varve_log::{Limits, MemoryNamespace, Namespace};
use varve_pds::{Options, SortedSet, Structure, Version};

fn seed() -> u64 {
    let seed = std::env::var("VARVE_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    println!("VARVE_TEST_SEED={seed}");
    seed
}

#[test]
fn every_writer_reads_every_version_while_others_update() {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    for structure in [Structure::Balanced, Structure::Bst] {
        for extra in [1, 5] {
            let ns: Arc<dyn Namespace> = Arc::new(MemoryNamespace::new("w", Limits::default()));
            let options = Options { extra, node_cache_entries: 64, ..Options::default() };
            let open = || SortedSet::<u64>::open_as(ns.clone(), "s", structure, options).expect("open");
            let mut writers = [open(), open(), open()];
            let mut versions: Vec<BTreeSet<u64>> = vec![BTreeSet::new()];
            for step in 0..400 {
                // Runs of several updates by one writer, then another's turn.
                let writer = if step % 7 == 0 { rng.gen_range(0..writers.len()) } else { step % writers.len() };
                let key = rng.gen_range(0..200u64);
                let mut next = versions.last().expect("version 0").clone();
                let version = if rng.gen_bool(0.7) {
                    next.insert(key);
                    writers[writer].insert(&key)
                } else {
                    next.remove(&key);
                    writers[writer].delete(&key)
                }
                .expect("update");
                if next != *versions.last().expect("version 0") {
                    versions.push(next);
                }
                let latest = Version::try_from(versions.len() - 1).expect("fits");
                assert_eq!(version, latest, "seed {seed}: step {step} by writer {writer}");
                if latest == 0 {
                    continue; // version 0 (before any update) is not readable
                }
                // The writer's own view, at the new version and an older one.
                let back = rng.gen_range(1..=latest);
                for at in [latest, back] {
                    let items: Vec<u64> = writers[writer].iter(Some(at)).expect("iter").collect();
                    let model: Vec<u64> = versions[usize::try_from(at).expect("fits")].iter().copied().collect();
                    assert_eq!(items, model, "seed {seed}: {structure} extra {extra}, writer {writer} at version {at}");
                }
            }
            let fresh = open();
            for (at, model) in versions.iter().enumerate().skip(1) {
                let at = Version::try_from(at).expect("fits");
                let model: Vec<u64> = model.iter().copied().collect();
                for (name, handle) in writers.iter().chain([&fresh]).enumerate() {
                    let items: Vec<u64> = handle.iter(Some(at)).expect("iter").collect();
                    assert_eq!(items, model, "seed {seed}: {structure} extra {extra}, handle {name} at version {at}");
                }
            }
        }
    }
}
