//! `PEDaLS` structures on a real nats-server: two clients (two connections,
//! two node caches) update one sorted map at once — the op log's
//! `append_if` orders them, each update's entries land in one conditional
//! batch — and every committed version reads back, through each writer and
//! a third client, as the model built from the versions' own ops.

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Barrier};
use std::thread;

use varve_log::Store;
use varve_nats::NatsStore;
use varve_pds::{Options, SortedMap, Version};

const UPDATES_PER_WRITER: u64 = 25;

fn map(namespace: &str) -> SortedMap<u64, u64> {
    let uri = support::uri(support::single(), "");
    let store = NatsStore::open(&uri).unwrap_or_else(|e| panic!("connecting to {uri}: {e}"));
    SortedMap::open(store.namespace(namespace).expect("namespace"), "m", Options::default()).expect("map")
}

#[test]
fn two_writers_share_a_sorted_map_on_nats() {
    let namespace = support::fresh_name("pds");
    let start = Arc::new(Barrier::new(2));
    let writers: Vec<_> = [0u64, 1]
        .into_iter()
        .map(|who| {
            let (namespace, start) = (namespace.clone(), Arc::clone(&start));
            thread::spawn(move || {
                let mut map = map(&namespace);
                start.wait();
                // (version, key, value or None for a delete) of each update this writer made.
                let mut mine: Vec<(Version, u64, Option<u64>)> = Vec::new();
                for i in 0..UPDATES_PER_WRITER {
                    // Keys both writers touch, so their updates interleave in the same nodes.
                    let key = i % 10;
                    if i % 4 == 3 {
                        mine.push((map.delete(&key).expect("delete"), key, None));
                    } else {
                        let value = who * 1000 + i;
                        mine.push((map.insert(&key, &value).expect("insert"), key, Some(value)));
                    }
                }
                (map, mine)
            })
        })
        .collect();
    let results: Vec<_> = writers.into_iter().map(|w| w.join().expect("writer")).collect();
    // The updates each version answered: the one that made it, and deletes
    // that changed nothing (their key was absent; they answer the current
    // version). Inserts always change the map (every value is new).
    let mut by_version: BTreeMap<Version, Vec<(u64, Option<u64>)>> = BTreeMap::new();
    for (_, mine) in &results {
        for &(version, key, value) in mine {
            by_version.entry(version).or_default().push((key, value));
        }
    }
    let reader = map(&namespace);
    let latest = reader.latest().expect("latest");
    assert!(latest >= 2 * UPDATES_PER_WRITER * 3 / 4, "{latest} versions from {} updates", 2 * UPDATES_PER_WRITER);
    let mut model: BTreeMap<u64, u64> = BTreeMap::new();
    for version in 1..=latest {
        let updates = by_version
            .get(&version)
            .unwrap_or_else(|| panic!("version {version} was committed, but no update answered it"));
        let inserts: Vec<_> = updates.iter().filter_map(|&(key, value)| Some((key, value?))).collect();
        assert!(inserts.len() <= 1, "version {version} answered two inserts: {updates:?}");
        // Deleting a key absent at this version changes nothing, so the
        // deletes may all be applied: the one that made the version, if any,
        // and the no-ops.
        model.extend(inserts);
        for &(key, value) in updates {
            if value.is_none() {
                model.remove(&key);
            }
        }
        let expected: Vec<(u64, u64)> = model.iter().map(|(k, v)| (*k, *v)).collect();
        for (name, handle) in [("writer 0", &results[0].0), ("writer 1", &results[1].0), ("reader", &reader)] {
            let items: Vec<(u64, u64)> = handle.iter(Some(version)).expect("iter").collect();
            assert_eq!(items, expected, "{name} at version {version}");
        }
    }
}
