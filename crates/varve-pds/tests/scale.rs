//! The cost of an update grows with the structure's depth, not its size
//! (`PEDaLS`: "algorithmic complexities similar to those of in-memory
//! versioning"): counted in log calls per insert on the real journal, an
//! insert into a map of 4n keys costs at most twice one into n keys.
//!
//! Counts, not times: the trend holds on a loaded machine too. The times
//! are `varve bench pds --scale`'s (docs/benchmarks.md).

use std::sync::Arc;
use std::time::Duration;

use varve_log::{JournalOptions, JournalStore, Namespace, SyncPolicy};
use varve_pds::testing::CountingNamespace;
use varve_pds::{Options, SortedMap};

/// Distinct keys in a scattered order (7919 is prime to the modulus).
fn key(i: u64) -> u64 {
    i * 7919 % 1_000_003
}

/// Log calls (reads and appends) per insert over the next `window` inserts.
fn calls_per_insert(map: &mut SortedMap<u64, u64>, counting: &CountingNamespace, from: u64, window: u64) -> f64 {
    let before = counting.counts();
    for i in from..from + window {
        map.insert(&key(i), &i).expect("insert");
    }
    let after = counting.counts();
    let calls = (after.gets + after.latests + after.scans + after.appends)
        - (before.gets + before.latests + before.scans + before.appends);
    #[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
    let per_insert = calls as f64 / window as f64;
    per_insert
}

#[test]
fn an_insert_into_four_times_the_keys_costs_at_most_twice_the_log_calls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = JournalOptions { sync: SyncPolicy::Group(Duration::from_millis(5)), ..JournalOptions::default() };
    let store = JournalStore::open(dir.path(), options).expect("store");
    let journal: Arc<dyn Namespace> = Arc::new(store.journal_namespace("scale").expect("namespace"));
    let counting = CountingNamespace::new(journal);
    let mut map =
        SortedMap::<u64, u64>::open(counting.clone(), "m", Options { extra: 5, keep: None, ..Options::default() })
            .expect("open");
    let (n, window) = (2_000, 500);
    for i in 0..n {
        map.insert(&key(i), &i).expect("insert");
    }
    let at_one_n = calls_per_insert(&mut map, &counting, n, window);
    for i in n + window..4 * n {
        map.insert(&key(i), &i).expect("insert");
    }
    let at_four_n = calls_per_insert(&mut map, &counting, 4 * n, window);
    println!("log calls per insert: {at_one_n:.1} at {n} keys, {at_four_n:.1} at {} keys", 4 * n);
    assert!(at_one_n > 1.0, "an insert makes log calls ({at_one_n})");
    assert!(at_four_n <= 2.0 * at_one_n, "{at_four_n:.1} calls per insert at 4n > 2 × {at_one_n:.1} at n");
    assert_eq!(map.len(None).expect("len"), usize::try_from(4 * n + window).expect("fits"));
    assert_eq!(map.get(&key(4 * n), None).expect("get"), Some(4 * n));
}

/// The node cache is the knob between memory and log reads: the same map
/// with a cache smaller than its nodes reads its logs more per insert, and
/// still answers the same.
#[test]
fn a_smaller_node_cache_costs_log_calls_not_answers() {
    let mut per_insert = Vec::new();
    for node_cache_entries in [256, 1 << 16] {
        let ns: Arc<dyn Namespace> = Arc::new(varve_log::MemoryNamespace::new("cache", varve_log::Limits::default()));
        let counting = CountingNamespace::new(ns);
        let options = Options { node_cache_entries, ..Options::default() };
        let mut map = SortedMap::<u64, u64>::open(counting.clone(), "m", options).expect("open");
        let (n, window) = (4_000, 500);
        for i in 0..n {
            map.insert(&key(i), &i).expect("insert");
        }
        per_insert.push(calls_per_insert(&mut map, &counting, n, window));
        for i in (0..n + window).step_by(97) {
            assert_eq!(map.get(&key(i), None).expect("get"), Some(i), "key {i} with a cache of {node_cache_entries}");
        }
    }
    println!(
        "log calls per insert at 4,000 keys: {:.1} with 256 cached copies, {:.1} with 65,536",
        per_insert[0], per_insert[1]
    );
    assert!(per_insert[0] > 1.5 * per_insert[1], "a cache smaller than the map costs more log calls: {per_insert:?}");
}
