//! Several handles updating one structure at once, from threads (the
//! handle that wrote last must notice the others: `OwnTail`), and a handle
//! completing another's interrupted update on its fast path. Seeded: set
//! `VARVE_TEST_SEED` to replay a run (the seed is printed).

use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use varve_log::{Limits, MemoryNamespace, Namespace};
use varve_pds::{Options, SortedSet, Structure, Version, VersionedList};

fn seed() -> u64 {
    let seed = std::env::var("VARVE_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    println!("VARVE_TEST_SEED={seed}");
    seed
}

#[test]
fn concurrent_set_inserts_every_version_grows_by_one() {
    let seed = seed();
    for round in 0..5u64 {
        let ns: Arc<dyn Namespace> = Arc::new(MemoryNamespace::new("c", Limits::default()));
        let options = Options { extra: 1, node_cache_entries: 64, ..Options::default() };
        SortedSet::<u64>::open_as(ns.clone(), "s", Structure::Balanced, options).expect("open");
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let ns = ns.clone();
                std::thread::spawn(move || {
                    let mut rng = StdRng::seed_from_u64(seed ^ (round * 31 + t));
                    let mut set = SortedSet::<u64>::open_as(ns, "s", Structure::Balanced, options).expect("open");
                    for i in 0..60u64 {
                        set.insert(&(i * 4 + t)).expect("insert");
                        if rng.gen_bool(0.3) {
                            // a no-op (already there)
                            set.insert(&(i * 4 + t)).expect("noop");
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("join");
        }
        let fresh = SortedSet::<u64>::open_as(ns, "s", Structure::Balanced, options).expect("open");
        let latest = fresh.latest().expect("latest");
        assert_eq!(latest, 240, "seed {seed}");
        let all: Vec<u64> = fresh.iter(None).expect("iter").collect();
        assert_eq!(all, (0..240).collect::<Vec<_>>(), "seed {seed}");
        let mut prev: Vec<u64> = Vec::new();
        for v in 1..=latest {
            let items: Vec<u64> = fresh.iter(Some(v as Version)).expect("iter").collect();
            assert_eq!(items.len() as u64, v, "seed {seed} version {v}");
            assert!(prev.iter().all(|k| items.contains(k)), "seed {seed} version {v}");
            prev = items;
        }
    }
}

#[test]
fn concurrent_list_pushes_every_version_extends_the_last() {
    let seed = seed();
    for round in 0..5u64 {
        let ns: Arc<dyn Namespace> = Arc::new(MemoryNamespace::new("c", Limits::default()));
        let options = Options { extra: 1, node_cache_entries: 64, ..Options::default() };
        VersionedList::<u64>::open(ns.clone(), "l", options).expect("open");
        let threads: Vec<_> = (0..3u64)
            .map(|t| {
                let ns = ns.clone();
                std::thread::spawn(move || {
                    let mut rng = StdRng::seed_from_u64(seed ^ (round * 17 + t));
                    let mut list = VersionedList::<u64>::open(ns, "l", options).expect("open");
                    for i in 0..40u64 {
                        if rng.gen_bool(0.5) {
                            list.push_front(&(i * 3 + t)).expect("push");
                        } else {
                            list.push_back(&(i * 3 + t)).expect("push");
                        }
                        if rng.gen_bool(0.2) {
                            list.remove(&1_000_000).expect("noop remove");
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("join");
        }
        let fresh = VersionedList::<u64>::open(ns, "l", options).expect("open");
        let latest = fresh.latest().expect("latest");
        assert_eq!(latest, 120, "seed {seed}");
        let mut all: Vec<u64> = fresh.iter(None).expect("iter").collect();
        all.sort_unstable();
        assert_eq!(all, (0..120).collect::<Vec<_>>(), "seed {seed}");
        for v in 1..=latest {
            assert_eq!(fresh.len(Some(v)).expect("len") as u64, v, "seed {seed} version {v}");
        }
    }
}

/// Another handle logs its op and stops before writing its entries, at every
/// write of its update; this handle's next update (after one of its own, so
/// on the fast path) must complete that op, then apply its own.
#[test]
fn an_interrupted_update_by_another_handle_is_completed_after_an_own_update() {
    use varve_pds::testing::FaultyNamespace;
    for structure in [Structure::Balanced, Structure::List] {
        for stop in 0..12u64 {
            let memory: Arc<dyn Namespace> = Arc::new(MemoryNamespace::new("c", Limits::default()));
            let options = Options { extra: 1, ..Options::default() };
            let faulty = FaultyNamespace::new(memory.clone());
            let (mut a_set, mut a_list, mut b_set, mut b_list) = (None, None, None, None);
            if structure == Structure::List {
                a_list = Some(VersionedList::<u64>::open(memory.clone(), "s", options).expect("open"));
                b_list = Some(VersionedList::<u64>::open(faulty.clone(), "s", options).expect("open"));
            } else {
                a_set = Some(SortedSet::<u64>::open_as(memory.clone(), "s", structure, options).expect("open"));
                b_set = Some(SortedSet::<u64>::open_as(faulty.clone(), "s", structure, options).expect("open"));
            }
            let mut a = |k: u64| match (&mut a_set, &mut a_list) {
                (Some(s), _) => s.insert(&k),
                (_, Some(l)) => l.push_back(&k),
                _ => unreachable!(),
            };
            for k in [5, 3, 8] {
                a(k).expect("a");
            }
            faulty.stop_at(faulty.writes() + stop);
            let b_result = match (&mut b_set, &mut b_list) {
                (Some(s), _) => s.insert(&4),
                (_, Some(l)) => l.push_back(&4),
                _ => unreachable!(),
            };
            let v = a(9).expect("a after b");
            let items: Vec<u64> = match structure {
                Structure::List => {
                    VersionedList::<u64>::open(memory.clone(), "s", options).unwrap().iter(None).unwrap().collect()
                }
                _ => SortedSet::<u64>::open_as(memory.clone(), "s", structure, options)
                    .unwrap()
                    .iter(None)
                    .unwrap()
                    .collect(),
            };
            // b's op either landed in the op log (then it is applied) or not.
            let ops = memory.latest("pds.s.ops").unwrap();
            let has_b = ops == 5;
            let want: Vec<u64> = match (structure, has_b) {
                (Structure::List, true) => vec![5, 3, 8, 4, 9],
                (Structure::List, false) => vec![5, 3, 8, 9],
                (_, true) => vec![3, 4, 5, 8, 9],
                (_, false) => vec![3, 5, 8, 9],
            };
            assert_eq!(items, want, "{structure} stop {stop}: b {b_result:?}, version {v}, ops {ops}");
            assert_eq!(v, ops, "{structure} stop {stop}");
        }
    }
}
