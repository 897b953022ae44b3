//! Times one PART workload on a map of random 4-byte keys, for comparing
//! two builds of the crate run alternately (the Node2 and sparse-chunk
//! figures in `docs/benchmarks.md`):
//!
//! `cargo run --release -p varve-part --example part_timing -- KEYS MODE`
//!
//! MODE is `hits` (random absent, then present keys, looked up for 8 s
//! each, then the same in a `HashMap<u32, u32>` of the keys), `insert`
//! (200k fresh keys inserted, timed alone, then removed untimed, for 6 s)
//! or `snapshot` (the same keys, a snapshot before each insert, four kept;
//! inserts and removals timed together, for 8 s) or `scan` (whole scans of
//! the values by `sum`, then by a `for` loop, 8 s each, then by `sum` of a
//! `BTreeMap` built from the keys in the same order). Keys come from a fixed
//! xorshift seed, so both builds see the same map.

use std::time::{Duration, Instant};

use varve_part::ArtMap;

fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn key(state: &mut u64) -> u32 {
    #[expect(clippy::cast_possible_truncation, reason = "the low 32 bits are the key")]
    let k = next(state) as u32;
    k
}

/// Time `run` over and over for 8 s; the time of one run.
fn per_run(mut run: impl FnMut() -> u64) -> Duration {
    let start = Instant::now();
    let (mut sum, mut runs) = (0u64, 0u32);
    while start.elapsed() < Duration::from_secs(8) {
        sum = sum.wrapping_add(run());
        runs += 1;
    }
    std::hint::black_box(sum);
    start.elapsed() / runs
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = match args.next() {
        None => 10_000_000,
        Some(keys) => match keys.parse() {
            Ok(n) if n > 0 => n,
            _ => {
                eprintln!("KEYS {keys:?}: give a positive number of keys (10000000 if left out)");
                std::process::exit(2);
            }
        },
    };
    let mode = args.next().unwrap_or_else(|| "hits".to_owned());
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut keys = Vec::with_capacity(n);
    let mut map = ArtMap::new();
    while map.len() < n {
        let k = key(&mut state);
        if map.insert(&k.to_be_bytes(), k).is_none() {
            keys.push(k);
        }
    }
    let fresh: Vec<u32> =
        (0..200_000).map(|_| key(&mut state)).filter(|k| map.get(&k.to_be_bytes()).is_none()).collect();
    let (per_op, what) = match mode.as_str() {
        "hits" => {
            lookups_beside_hash_map(&map, &keys, &fresh, &mut state);
            return;
        }
        "insert" => {
            let (mut timed, mut ops) = (Duration::ZERO, 0usize);
            while timed < Duration::from_secs(6) {
                let start = Instant::now();
                for k in &fresh {
                    map.insert(&k.to_be_bytes(), *k);
                }
                timed += start.elapsed();
                for k in &fresh {
                    map.remove(&k.to_be_bytes());
                }
                ops += fresh.len();
            }
            (timed / u32::try_from(ops).unwrap_or(u32::MAX), "insert")
        }
        "snapshot" => {
            let start = Instant::now();
            let mut ops = 0usize;
            while start.elapsed() < Duration::from_secs(8) {
                let mut snapshots = std::collections::VecDeque::new();
                for k in &fresh {
                    snapshots.push_back(map.snapshot());
                    if snapshots.len() > 4 {
                        snapshots.pop_front();
                    }
                    map.insert(&k.to_be_bytes(), *k);
                }
                drop(snapshots);
                for k in &fresh {
                    map.remove(&k.to_be_bytes());
                }
                ops += fresh.len();
            }
            (start.elapsed() / u32::try_from(ops).unwrap_or(u32::MAX), "insert + snapshot + remove")
        }
        "scan" => {
            let by_sum = per_run(|| map.values().map(|v| u64::from(*v)).sum());
            // The same through `next` (a `for` loop), not `fold` (`sum`).
            let by_loop = per_run(|| {
                let mut sum = 0;
                for v in map.values() {
                    sum += u64::from(*v);
                }
                sum
            });
            println!("{n} keys, full scan by a for loop: {} us per scan", by_loop.as_micros());
            // One insert at a time, as the map was built (`collect` would
            // sort first and lay the nodes out in order).
            let mut btree = std::collections::BTreeMap::new();
            for k in &keys {
                btree.insert(*k, *k);
            }
            let btree_sum = per_run(|| btree.values().map(|v| u64::from(*v)).sum());
            println!("{n} keys, BTreeMap full scan by sum: {} us per scan", btree_sum.as_micros());
            (by_sum, "full scan by sum")
        }
        other => {
            eprintln!("unknown mode {other:?}: expected hits, insert, snapshot or scan");
            std::process::exit(2);
        }
    };
    println!("{n} keys, {what}: {} ns per operation", per_op.as_nanos());
}

/// Random absent, then present keys looked up in `map`, then the same in a
/// `HashMap` of the keys (the baseline of the lookup goal, in the same
/// process, so a run on a noisy machine still gives a fair ratio).
fn lookups_beside_hash_map(map: &ArtMap<u32>, keys: &[u32], fresh: &[u32], state: &mut u64) {
    let n = keys.len();
    let probes: Vec<u32> = (0..PROBES).map(|_| keys[usize::try_from(next(state)).unwrap_or(0) % n]).collect();
    let absent: Vec<u32> = fresh.iter().copied().cycle().take(probes.len()).collect();
    let part_get = |k: u32| map.get(&k.to_be_bytes()).copied();
    let misses = time_lookups(&absent, part_get);
    println!("{n} keys, lookup, miss: {} ns per operation", misses.as_nanos());
    let hits = time_lookups(&probes, part_get);
    println!("{n} keys, lookup, hit: {} ns per operation", hits.as_nanos());
    let hash: std::collections::HashMap<u32, u32> = keys.iter().map(|&k| (k, k)).collect();
    let hash_get = |k: u32| hash.get(&k).copied();
    let hash_hits = time_lookups(&probes, hash_get);
    let hash_misses = time_lookups(&absent, hash_get);
    println!(
        "{n} keys, HashMap lookup, hit: {} ns (PART {:.2}x), miss: {} ns (PART {:.2}x) per operation",
        hash_hits.as_nanos(),
        hits.as_secs_f64() / hash_hits.as_secs_f64(),
        hash_misses.as_nanos(),
        misses.as_secs_f64() / hash_misses.as_secs_f64(),
    );
}

/// Lookups in a random order, per lookup: all of `probes`, over and over
/// for 8 s. Generic, not `dyn`: an indirect call per lookup would add the
/// same nanoseconds to both maps and flatter the ratio.
fn time_lookups(probes: &[u32], get: impl Fn(u32) -> Option<u32>) -> Duration {
    per_run(|| probes.iter().map(|&k| u64::from(get(k).unwrap_or(0))).sum::<u64>()) / PROBES
}

/// Keys looked up per round of `hits`.
const PROBES: u32 = 2_000_000;
