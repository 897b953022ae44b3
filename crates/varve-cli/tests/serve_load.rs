//! 64 clients at once against one `varve serve` on loopback, for a bounded
//! time: every operation succeeds, nothing acknowledged is lost or stored
//! twice, and the throughput and `get` latency seen are printed. These are
//! smoke figures from a shared machine; `varve bench` gives the published
//! ones.
//!
//! Each client has its own store (its own connection pool) and thread.
//! [`FOLLOWERS`] of them follow a log with `watch` from seq 1 for the whole
//! run; the others mix appends (single and batch), `get`s and `scan`s of
//! records they were acknowledged, `latest`, and short watches. Randomness
//! comes from one printed seed (`VARVE_SEED=N` replays the mix).

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{Env, WAIT};
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use varve_log::{LogConfig, Record, Seq, SeqRange, Store};
use varve_remote::{RemoteOptions, RemoteStore};

/// Clients in all, followers included.
const CLIENTS: usize = 64;
/// Clients that follow one log each with a watch for the whole run.
const FOLLOWERS: usize = 4;
/// The logs written, in namespace [`NAMESPACE`]; follower `i` follows `LOGS[i]`.
const LOGS: [&str; 8] = ["l0", "l1", "l2", "l3", "l4", "l5", "l6", "l7"];
const _: () = assert!(FOLLOWERS <= LOGS.len());
const NAMESPACE: &str = "load";
/// How long the mixed clients run.
const RUN_TIME: Duration = Duration::from_secs(6);
/// Records in one batch, at most.
const BATCH_RECORDS_MAX: usize = 5;
/// Records a scan reads, at most.
const SCAN_RECORDS_MAX: u64 = 20;

/// A record a client was told landed.
#[derive(Clone, Debug)]
struct Acked {
    log: &'static str,
    seq: Seq,
    payload: Vec<u8>,
}

/// What one mixed client did.
#[derive(Default)]
struct Tally {
    acked: Vec<Acked>,
    operations: u64,
    get_latencies: Vec<Duration>,
}

fn connect(uri: &str) -> RemoteStore {
    RemoteStore::connect(RemoteOptions::from_uri(uri, None).expect("uri")).expect("connect")
}

/// One mixed client until `stop`; the first error ends it, as its result.
fn mixed_client(id: usize, seed: u64, uri: &str, stop: &AtomicBool) -> Result<Tally, String> {
    let store = connect(uri);
    let ns = store.namespace(NAMESPACE).map_err(|e| e.to_string())?;
    let mut rng = StdRng::seed_from_u64(seed ^ (id as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut tally = Tally::default();
    let mut next_payload = 0_u64;
    let mut payload = || {
        next_payload += 1;
        format!("c{id}-{next_payload}").into_bytes()
    };
    while !stop.load(Ordering::Relaxed) {
        let choice = rng.gen_range(0..100);
        let known = (!tally.acked.is_empty()).then(|| tally.acked[rng.gen_range(0..tally.acked.len())].clone());
        match (choice, known) {
            (0..30, _) | (_, None) => {
                let log = LOGS[rng.gen_range(0..LOGS.len())];
                let value = payload();
                let seq = ns.append(log, &value).map_err(|e| format!("client {id}: append to {log}: {e}"))?;
                tally.acked.push(Acked { log, seq, payload: value });
            }
            (30..45, _) => {
                let records: Vec<(&'static str, Vec<u8>)> = (0..rng.gen_range(2..=BATCH_RECORDS_MAX))
                    .map(|_| (LOGS[rng.gen_range(0..LOGS.len())], payload()))
                    .collect();
                let batch: Vec<(&str, &[u8])> = records.iter().map(|(log, value)| (*log, value.as_slice())).collect();
                let seqs = ns.append_batch(&batch).map_err(|e| format!("client {id}: batch: {e}"))?;
                for ((log, payload), seq) in records.into_iter().zip(seqs) {
                    tally.acked.push(Acked { log, seq, payload });
                }
            }
            (45..75, Some(known)) => {
                let started = Instant::now();
                let value = ns.get(known.log, known.seq).map_err(|e| format!("client {id}: get: {e}"))?;
                tally.get_latencies.push(started.elapsed());
                check(value == known.payload.as_slice(), || format!("client {id}: get {known:?} read {value:?}"))?;
            }
            (75..85, Some(known)) => {
                let latest = ns.latest(known.log).map_err(|e| format!("client {id}: latest: {e}"))?;
                check(latest >= known.seq, || {
                    format!("client {id}: latest of {} is {latest} < {}", known.log, known.seq)
                })?;
            }
            (85..95, Some(known)) => {
                let range = SeqRange::from_bounds(known.seq..known.seq + SCAN_RECORDS_MAX);
                let scanned: Vec<Record> = ns
                    .scan(known.log, range)
                    .map_err(|e| format!("client {id}: scan: {e}"))?
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("client {id}: scan: {e}"))?;
                let dense = scanned.iter().zip(known.seq..).all(|(record, seq)| record.seq == seq);
                check(dense && scanned.first().is_some_and(|first| first.value == known.payload), || {
                    format!("client {id}: scan of {} from {} read seqs {:?}", known.log, known.seq, seqs(&scanned))
                })?;
            }
            (_, Some(known)) => {
                let mut watch = ns.watch(known.log, known.seq).map_err(|e| format!("client {id}: watch: {e}"))?;
                let first = watch.next_timeout(WAIT).map_err(|e| format!("client {id}: watch: {e}"))?;
                check(first.as_ref().is_some_and(|r| r.seq == known.seq && r.value == known.payload), || {
                    format!("client {id}: the watch of {} from {} began with {first:?}", known.log, known.seq)
                })?;
            }
        }
        tally.operations += 1;
    }
    Ok(tally)
}

fn check(holds: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if holds {
        Ok(())
    } else {
        Err(what())
    }
}

fn seqs(records: &[Record]) -> Vec<Seq> {
    records.iter().map(|r| r.seq).collect()
}

/// Follow `log` from seq 1 until `latest_of` says where it ends and the
/// watch has passed on that many records.
fn follower(
    log: &str,
    uri: &str,
    ended: &std::sync::Mutex<Option<HashMap<String, Seq>>>,
) -> Result<Vec<Record>, String> {
    let store = connect(uri);
    let ns = store.namespace(NAMESPACE).map_err(|e| e.to_string())?;
    let mut watch = ns.watch(log, 1).map_err(|e| format!("follow {log}: {e}"))?;
    let mut received = Vec::new();
    let mut deadline = None;
    loop {
        let end = ended.lock().expect("lock").as_ref().map(|latest| latest[log]);
        if let Some(end) = end {
            if received.len() as u64 >= end {
                return Ok(received);
            }
            if Instant::now() > *deadline.get_or_insert_with(|| Instant::now() + WAIT) {
                return Err(format!("the follower of {log} passed on {} of {end} records", received.len()));
            }
        }
        match watch.next_timeout(Duration::from_millis(200)) {
            Ok(Some(record)) => received.push(record),
            Ok(None) => {}
            Err(error) => return Err(format!("the follower of {log}: {error}")),
        }
    }
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted.get((sorted.len().saturating_sub(1)) * p / 100).copied().unwrap_or_default()
}

#[test]
fn sixty_four_clients_at_once_lose_nothing_and_get_no_error() {
    let seed = common::seed_from_env();
    println!("serve_load: seed {seed} (replay with VARVE_SEED={seed})");
    let env = Env::new();
    let served = env.serve(&[]);
    {
        let ns = connect(&served.uri).namespace(NAMESPACE).expect("namespace");
        for log in LOGS {
            ns.create_log(log, LogConfig::unbounded()).expect("create");
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let ended = Arc::new(std::sync::Mutex::new(None::<HashMap<String, Seq>>));
    let followers: Vec<_> = LOGS[..FOLLOWERS]
        .iter()
        .map(|log| {
            let (uri, ended) = (served.uri.clone(), Arc::clone(&ended));
            thread::spawn(move || follower(log, &uri, &ended))
        })
        .collect();
    let started = Instant::now();
    let clients: Vec<_> = (FOLLOWERS..CLIENTS)
        .map(|id| {
            let (uri, stop) = (served.uri.clone(), Arc::clone(&stop));
            thread::spawn(move || mixed_client(id, seed, &uri, &stop))
        })
        .collect();
    while started.elapsed() < RUN_TIME && !clients.iter().any(thread::JoinHandle::is_finished) {
        thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    let tallies: Vec<Tally> = clients
        .into_iter()
        .map(|client| client.join().expect("client thread").unwrap_or_else(|e| panic!("seed {seed}: {e}")))
        .collect();
    let elapsed = started.elapsed();

    // The logs as the server has them, against what the clients were told and saw.
    let stored = common::scan_logs(connect(&served.uri).namespace(NAMESPACE).expect("namespace").as_ref(), &LOGS);
    *ended.lock().expect("lock") =
        Some(stored.iter().map(|(log, records)| (log.clone(), records.len() as Seq)).collect());
    let acked: Vec<&Acked> = tallies.iter().flat_map(|tally| &tally.acked).collect();
    common::check_acknowledged(&stored, acked.iter().map(|a| (a.log, a.seq, a.payload.as_slice())))
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    for (log, follower) in LOGS.iter().zip(followers) {
        let watched = follower.join().expect("follower thread").unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        common::check_watched(log, &watched, &stored).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }

    let operations: u64 = tallies.iter().map(|tally| tally.operations).sum();
    let mut gets: Vec<Duration> = tallies.iter().flat_map(|tally| tally.get_latencies.iter().copied()).collect();
    gets.sort_unstable();
    assert!(!gets.is_empty() && operations > 0, "the clients did something");
    let per_second = |count: u128| count * 1000 / elapsed.as_millis().max(1);
    println!(
        "serve_load: {CLIENTS} clients for {elapsed:.1?}: {operations} operations ({}/s), {} records appended \
         ({}/s), {} gets: p50 {:?}, p99 {:?}",
        per_second(u128::from(operations)),
        acked.len(),
        per_second(acked.len() as u128),
        gets.len(),
        percentile(&gets, 50),
        percentile(&gets, 99),
    );
}
