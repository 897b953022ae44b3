//! Node loss under load: four writers (each its own connection, as four
//! hosts would be) append single records and multi-log batches to a
//! namespace replicated three times, while the stream's leader is killed
//! (SIGKILL) and restarted, or paused (SIGSTOP/SIGCONT), round after round.
//! Then a checker reads everything back and holds the store to the
//! contract: every acknowledged append present once, at its seq; seqs dense;
//! batches all or nothing; nothing that was never sent.
//!
//! `VARVE_NATS_LOSS_ROUNDS=N` runs more rounds (the longer run); the seed of
//! the writers' choices is printed (`VARVE_SEED` replays it).

mod support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use varve_log::{LogConfig, LogError, Namespace as _, SeqRange};
use varve_nats::NatsStore;

const WRITERS: u64 = 4;
const LOGS: [&str; 4] = ["l0", "l1", "l2", "l3"];
const ROUNDS_DEFAULT: usize = 10;
/// The longest the test waits for appends to resume, or the cluster to heal.
const HEAL_MAX: Duration = Duration::from_secs(60);
/// How long a paused leader stays paused.
const PAUSE: Duration = Duration::from_secs(3);

/// What a writer sent and what it was told.
#[derive(Debug)]
struct Sent {
    records: Vec<(&'static str, String)>,
    outcome: Outcome,
}

#[derive(Debug)]
enum Outcome {
    Acked(Vec<u64>),
    /// `OutcomeUnknown`: may or may not have landed (all or nothing still).
    Maybe,
    /// `Unavailable`: nothing landed.
    NotLanded,
}

fn leader(servers: &support::Servers, stream: &str) -> usize {
    let started = Instant::now();
    loop {
        if let Ok(Some(node)) = servers.cluster.lock().expect("cluster").stream_leader(stream) {
            return node;
        }
        assert!(started.elapsed() < HEAL_MAX, "stream {stream} has no leader after {HEAL_MAX:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn write(
    ns: &varve_nats::NatsNamespace,
    writer: u64,
    seed: u64,
    stop: &AtomicBool,
    last_ack: &AtomicU64,
    epoch: Instant,
) -> Vec<Sent> {
    let mut rng = StdRng::seed_from_u64(seed ^ writer);
    let mut sent = Vec::new();
    let mut counter = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let size = if rng.gen_bool(0.5) { 1 } else { rng.gen_range(2..=5) };
        let records: Vec<(&'static str, String)> = (0..size)
            .map(|_| {
                counter += 1;
                (LOGS[rng.gen_range(0..LOGS.len())], format!("w{writer}-{counter}"))
            })
            .collect();
        let batch: Vec<(&str, &[u8])> = records.iter().map(|(log, value)| (*log, value.as_bytes())).collect();
        let outcome = match ns.append_batch(&batch) {
            Ok(seqs) => {
                last_ack.fetch_max(u64::try_from(epoch.elapsed().as_micros()).unwrap_or(u64::MAX), Ordering::Relaxed);
                Outcome::Acked(seqs)
            }
            Err(LogError::OutcomeUnknown { .. }) => Outcome::Maybe,
            Err(LogError::Unavailable { .. }) => Outcome::NotLanded,
            Err(other) => panic!("writer {writer}: an append failed with {other}"),
        };
        sent.push(Sent { records, outcome });
    }
    sent
}

#[test]
fn every_acknowledged_append_survives_leaders_killed_and_paused() {
    let rounds: usize =
        std::env::var("VARVE_NATS_LOSS_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(ROUNDS_DEFAULT);
    let seed = varve_testkit::seed::from_env_or_clock();
    eprintln!("node_loss: seed {seed} ({}), {rounds} rounds", varve_testkit::seed::replay_hint(seed));
    let servers = support::start(3, "loss");
    let url = format!("{}?replicas=3&timeout_ms=2000&deadline_ms=30000", servers.url);
    let namespace = support::fresh_name("loss");
    let setup = NatsStore::open(&url).expect("connect");
    let ns = setup.nats_namespace(&namespace).expect("namespace");
    for log in LOGS {
        ns.create_log(log, LogConfig::unbounded()).expect("create");
    }
    let stream = ns.stream_name().to_owned();

    let stop = Arc::new(AtomicBool::new(false));
    let last_ack = Arc::new(AtomicU64::new(0));
    let epoch = Instant::now();
    // Connected before the first fault, each writer its own connection.
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let store = NatsStore::open(&url).expect("connect");
            let ns = store.nats_namespace(&namespace).expect("namespace");
            let (stop, last_ack) = (Arc::clone(&stop), Arc::clone(&last_ack));
            std::thread::spawn(move || {
                let _store = store;
                write(&ns, writer, seed, &stop, &last_ack, epoch)
            })
        })
        .collect();

    let mut failovers: Vec<Duration> = Vec::new();
    for round in 0..rounds {
        let node = leader(&servers, &stream);
        let faulted = Instant::now();
        let since = u64::try_from(epoch.elapsed().as_micros()).unwrap_or(u64::MAX);
        let pause = round % 3 == 2;
        {
            let mut cluster = servers.cluster.lock().expect("cluster");
            if pause {
                cluster.pause(node).expect("pause");
            } else {
                cluster.kill(node).expect("kill");
            }
        }
        if pause {
            std::thread::sleep(PAUSE);
            servers.cluster.lock().expect("cluster").resume(node).expect("resume");
        }
        // Appends resume: some writer is acknowledged after the fault.
        while last_ack.load(Ordering::Relaxed) <= since {
            assert!(faulted.elapsed() < HEAL_MAX, "round {round}: no append succeeded within {HEAL_MAX:?}");
            std::thread::sleep(Duration::from_millis(5));
        }
        if !pause {
            failovers.push(Duration::from_micros(last_ack.load(Ordering::Relaxed) - since));
            servers.cluster.lock().expect("cluster").restart(node).expect("restart");
        }
        servers.cluster.lock().expect("cluster").wait_healthy(HEAL_MAX).expect("the cluster heals");
    }
    stop.store(true, Ordering::Relaxed);
    let sent: Vec<Sent> = writers.into_iter().flat_map(|w| w.join().expect("a writer panicked")).collect();

    failovers.sort();
    if let (Some(p50), Some(max)) = (failovers.get(failovers.len() / 2), failovers.last()) {
        eprintln!(
            "node_loss: failover (kill to the first acknowledged append) p50 {p50:?}, max {max:?}, {} kills",
            failovers.len()
        );
    }
    check(&url, &namespace, &sent);
}

/// Read every log back through a new connection and hold it to the contract.
fn check(url: &str, namespace: &str, sent: &[Sent]) {
    let store = NatsStore::open(url).expect("connect");
    let ns = store.nats_namespace(namespace).expect("namespace");
    // value → (log, seq), for every record in the store.
    let mut stored: HashMap<String, (&str, u64)> = HashMap::new();
    for log in LOGS {
        let latest = ns.latest(log).expect("latest");
        let records: Vec<_> = ns.scan(log, SeqRange::ALL).expect("scan").map(|r| r.expect("a record")).collect();
        let seqs: Vec<u64> = records.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, (1..=latest).collect::<Vec<_>>(), "log {log}: seqs dense from 1 to {latest}");
        for record in records {
            let value = String::from_utf8(record.value.to_vec()).expect("utf-8");
            assert!(stored.insert(value.clone(), (log, record.seq)).is_none(), "{value} stored twice");
        }
    }
    let (mut acked, mut maybe, mut refused) = (0, 0, 0);
    let mut known: HashSet<&str> = HashSet::new();
    for entry in sent {
        let present: Vec<bool> = entry.records.iter().map(|(_, v)| stored.contains_key(v)).collect();
        assert!(present.iter().all(|p| *p) || present.iter().all(|p| !*p), "batch torn: {entry:?} present {present:?}");
        match &entry.outcome {
            Outcome::Acked(seqs) => {
                acked += 1;
                for ((log, value), seq) in entry.records.iter().zip(seqs) {
                    assert_eq!(stored.get(value), Some(&(*log, *seq)), "acknowledged {value} at {log}:{seq}");
                }
            }
            Outcome::Maybe => maybe += 1,
            Outcome::NotLanded => {
                refused += 1;
                assert!(!present[0], "{entry:?} was reported unavailable yet landed");
            }
        }
        for (_, value) in &entry.records {
            known.insert(value);
        }
    }
    for value in stored.keys() {
        assert!(known.contains(value.as_str()), "{value} is in the store but nobody sent it");
    }
    // Each writer's records of one log are in the order it sent them.
    let mut last: BTreeMap<(&str, String), u64> = BTreeMap::new();
    for entry in sent {
        for (log, value) in &entry.records {
            let Some(&(_, seq)) = stored.get(value) else { continue };
            let writer = value.split('-').next().unwrap_or_default().to_owned();
            let key = (*log, writer);
            assert!(last.get(&key).is_none_or(|before| *before < seq), "{value} out of order in {log}");
            last.insert(key, seq);
        }
    }
    eprintln!(
        "node_loss: {acked} acknowledged, {maybe} unknown, {refused} unavailable; {} records checked",
        stored.len()
    );
    assert!(acked > 0, "the writers made progress");
}
