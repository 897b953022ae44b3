//! Times one PART workload on a map of random 4-byte keys, for comparing
//! two builds of the crate run alternately (the Node2 and sparse-chunk
//! figures in `docs/benchmarks.md`):
//!
//! `cargo run --release -p varve-part --example part_timing -- KEYS MODE`
//!
//! MODE is `hits` (random present keys, looked up for 8 s), `insert`
//! (200k fresh keys inserted, timed alone, then removed untimed, for 6 s)
//! or `snapshot` (the same keys, a snapshot before each insert, four kept;
//! inserts and removals timed together, for 8 s). Keys come from a fixed
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

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000_000);
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
            let probes: Vec<u32> =
                (0..2_000_000).map(|_| keys[usize::try_from(next(&mut state)).unwrap_or(0) % n]).collect();
            let start = Instant::now();
            let (mut sum, mut ops) = (0u64, 0usize);
            while start.elapsed() < Duration::from_secs(8) {
                for k in &probes {
                    sum += u64::from(map.get(&k.to_be_bytes()).copied().unwrap_or(0));
                }
                ops += probes.len();
            }
            std::hint::black_box(sum);
            (start.elapsed() / u32::try_from(ops).unwrap_or(u32::MAX), "lookup, hit")
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
        other => {
            eprintln!("unknown mode {other:?}: expected hits, insert or snapshot");
            std::process::exit(2);
        }
    };
    println!("{n} keys, {what}: {} ns per operation", per_op.as_nanos());
}
