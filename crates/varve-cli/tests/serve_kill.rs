//! `varve serve` killed with SIGKILL under load, again and again, and
//! restarted on the same port and data directory: what clients were told
//! stays true.
//!
//! Writer threads append batches through the remote backend's
//! `append_batch_once`, each batch under a fresh request id and with
//! payloads found nowhere else; one whose outcome is unknown (or that could
//! not be sent) is sent again under the same id until it is acknowledged.
//! After each batch a writer reads one of its records back with `get`
//! (resent only briefly, so it meets the server down): it is there, or the
//! read is `Unavailable`.
//! Watcher threads follow logs through the remote `watch`, which reconnects
//! with `Last-Event-ID` after each kill. The server runs with the default
//! `--sync always`. At the end:
//!
//! - every acknowledged record is in its log exactly once, at the seq the
//!   writer was told, and nothing else is (no payload twice, no record that
//!   no writer was told of, no gap);
//! - each watcher saw every record of its log once, in seq order;
//! - the server was killed at least [`KILLS`] times, and no client call
//!   hung: each returned within its attempts' timeouts, and the only errors
//!   were `Unavailable` and `OutcomeUnknown`.
//!
//! Randomness (batch sizes, logs, kill moments) comes from one seed, printed
//! at the start; `VARVE_SEED=N` replays it.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{Env, Served, WAIT};
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use varve_log::{LogConfig, LogError, Namespace as _, Record, Seq, Store};
use varve_remote::{RemoteOptions, RemoteStore, ONCE_ATTEMPTS_MAX};

/// Times the server is killed; the test fails below it.
const KILLS: usize = 24;
/// Threads appending batches.
const WRITERS: usize = 4;
/// The logs written, in namespace [`NAMESPACE`]; a batch may span several.
const LOGS: [&str; 3] = ["a", "b", "c"];
/// The logs followed by a watcher each.
const WATCHED: [&str; 2] = ["a", "b"];
const NAMESPACE: &str = "kill";
/// Records in one batch, at most.
const BATCH_RECORDS_MAX: usize = 4;
/// After the writers have made progress on a restarted server, the kill
/// comes within this many milliseconds.
const KILL_DELAY_MS_MAX: u64 = 250;
/// The server stays down for up to this many milliseconds, so that clients
/// meet a refused connection, not only a broken one.
const DOWN_MS_MAX: u64 = 150;
/// Every this many kills, the server stays down for [`DOWN_LONG`] instead.
const DOWN_LONG_EVERY: usize = 8;
/// Longer than the attempts of one `append_batch_once` span (about 5.2 s
/// of backoff): its caller then sees the error and sends the batch again.
const DOWN_LONG: Duration = Duration::from_secs(7);
/// The clients' per-request timeout.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest one `append_batch_once` call may take: each of its attempts
/// within the timeout, plus its backoff between them (under 6 s in all).
const CALL_TIME_MAX: Duration =
    CLIENT_TIMEOUT.saturating_mul(ONCE_ATTEMPTS_MAX).saturating_add(Duration::from_secs(10));
/// The pause before a writer sends a failed batch again.
const RESEND_PAUSE: Duration = Duration::from_millis(20);

/// A record a writer was told landed.
#[derive(Clone, Debug)]
struct Acked {
    log: String,
    seq: Seq,
    payload: Vec<u8>,
}

/// What the client threads share with the test.
#[derive(Default)]
struct Shared {
    /// Set when the writers should stop (after their batch in flight).
    stop: AtomicBool,
    acked: Mutex<Vec<Acked>>,
    /// Batches acknowledged so far.
    batches: AtomicUsize,
    /// How often each kind of error was seen, by name.
    errors: Mutex<BTreeMap<&'static str, usize>>,
    /// The longest `append_batch_once` call.
    call_time_max: Mutex<Duration>,
    /// The latest seq of each log once the writers are done: watchers stop there.
    final_latest: Mutex<Option<HashMap<String, Seq>>>,
}

fn connect(uri: &str) -> RemoteStore {
    let options = RemoteOptions { timeout: CLIENT_TIMEOUT, ..RemoteOptions::from_uri(uri, None).expect("uri") };
    RemoteStore::connect(options).expect("connect")
}

/// Start `varve serve` on `listen`, trying again while the port is not yet
/// free; then wait until `/healthz` answers.
fn start(env: &Env, listen: &str) -> Served {
    let deadline = Instant::now() + WAIT;
    let served = loop {
        match env.try_serve_at(listen, &[]) {
            Ok(served) => break served,
            Err(log) => {
                assert!(Instant::now() < deadline, "varve serve did not start on {listen}: {log}");
                thread::sleep(Duration::from_millis(50));
            }
        }
    };
    common::wait_until("the server answers /healthz", || common::healthz_ok(served.authority()));
    served
}

fn writer(id: usize, seed: u64, uri: &str, shared: &Shared) -> Result<(), String> {
    let store = connect(uri);
    let ns = store.remote_namespace(NAMESPACE).map_err(|e| e.to_string())?;
    let mut rng = StdRng::seed_from_u64(seed ^ (id as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut batch_number = 0_u64;
    while !shared.stop.load(Ordering::SeqCst) {
        let request_id = format!("w{id}-b{batch_number}");
        let records: Vec<(&str, Vec<u8>)> = (0..rng.gen_range(1..=BATCH_RECORDS_MAX))
            .map(|i| (LOGS[rng.gen_range(0..LOGS.len())], format!("{request_id}-r{i}").into_bytes()))
            .collect();
        let batch: Vec<(&str, &[u8])> = records.iter().map(|(log, payload)| (*log, payload.as_slice())).collect();
        let deadline = Instant::now() + WAIT;
        let seqs = loop {
            let started = Instant::now();
            let result = ns.append_batch_once(&batch, &request_id);
            let took = started.elapsed();
            {
                let mut max = shared.call_time_max.lock().expect("lock");
                *max = (*max).max(took);
            }
            let kind = match result {
                Ok((seqs, _repeated)) => break seqs,
                Err(LogError::Unavailable { .. }) => "unavailable",
                Err(LogError::OutcomeUnknown { .. }) => "outcome_unknown",
                Err(other) => return Err(format!("writer {id}, batch {request_id}: {other}")),
            };
            *shared.errors.lock().expect("lock").entry(kind).or_default() += 1;
            if Instant::now() > deadline {
                return Err(format!("writer {id}: batch {request_id} not acknowledged within {WAIT:?}"));
            }
            thread::sleep(RESEND_PAUSE);
        };
        if seqs.len() != batch.len() {
            return Err(format!("batch {request_id} of {} records got {} seqs", batch.len(), seqs.len()));
        }
        // Read one record back: an acknowledged record is there, also on a restarted server.
        let (log, payload) = &records[0];
        match ns.get(log, seqs[0]) {
            Ok(value) if value == payload.as_slice() => {}
            Ok(value) => return Err(format!("{log}/{} reads {value:?}, acknowledged as {payload:?}", seqs[0])),
            Err(LogError::Unavailable { .. }) => {
                *shared.errors.lock().expect("lock").entry("unavailable (get)").or_default() += 1;
            }
            Err(other) => return Err(format!("writer {id}: get {log}/{}: {other}", seqs[0])),
        }
        let mut acked = shared.acked.lock().expect("lock");
        for ((log, payload), seq) in records.into_iter().zip(seqs) {
            acked.push(Acked { log: log.to_owned(), seq, payload });
        }
        drop(acked);
        shared.batches.fetch_add(1, Ordering::SeqCst);
        batch_number += 1;
    }
    Ok(())
}

/// Follow `log` from seq 1 until it has passed on the final latest seq.
fn watcher(log: &str, uri: &str, shared: &Shared) -> Result<Vec<Record>, String> {
    let store = connect(uri);
    let ns = store.namespace(NAMESPACE).map_err(|e| e.to_string())?;
    let mut watch = ns.watch(log, 1).map_err(|e| format!("watch {log}: {e}"))?;
    let mut received = Vec::new();
    let mut catch_up_deadline = None;
    loop {
        let target = shared.final_latest.lock().expect("lock").as_ref().map(|latest| latest[log]);
        if let Some(target) = target {
            if received.len() as u64 >= target {
                return Ok(received);
            }
            let deadline = *catch_up_deadline.get_or_insert_with(|| Instant::now() + WAIT);
            if Instant::now() > deadline {
                return Err(format!("the watch of {log} passed on {} of {target} records", received.len()));
            }
        }
        match watch.next_timeout(Duration::from_millis(200)) {
            Ok(Some(record)) => received.push(record),
            Ok(None) => {}
            Err(error) => return Err(format!("the watch of {log} after {} records: {error}", received.len())),
        }
    }
}

#[test]
fn acknowledged_appends_and_watches_survive_repeated_sigkills() {
    let seed = common::seed_from_env();
    println!("serve_kill: seed {seed} (replay with VARVE_SEED={seed})");
    let started = Instant::now();
    let env = Env::new();
    let listen = format!("127.0.0.1:{}", common::fixed_loopback_port());
    let mut served = start(&env, &listen);
    let uri = served.uri.clone();
    {
        let ns = connect(&uri).namespace(NAMESPACE).expect("namespace");
        for log in LOGS {
            ns.create_log(log, LogConfig::unbounded()).expect("create");
        }
    }

    let shared = Arc::new(Shared::default());
    let writers: Vec<_> = (0..WRITERS)
        .map(|id| {
            let (shared, uri) = (Arc::clone(&shared), uri.clone());
            thread::spawn(move || writer(id, seed, &uri, &shared))
        })
        .collect();
    let watchers: Vec<_> = WATCHED
        .into_iter()
        .map(|log| {
            let (shared, uri) = (Arc::clone(&shared), uri.clone());
            thread::spawn(move || watcher(log, &uri, &shared))
        })
        .collect();

    let mut rng = StdRng::seed_from_u64(seed);
    let mut kills = 0;
    while kills < KILLS {
        // Kill a server that is taking appends: after some progress since it started.
        let before = shared.batches.load(Ordering::SeqCst);
        common::wait_until("the writers make progress (or one of them fails)", || {
            shared.batches.load(Ordering::SeqCst) > before || writers.iter().any(thread::JoinHandle::is_finished)
        });
        if writers.iter().any(thread::JoinHandle::is_finished) {
            break; // A writer failed: its error is reported below.
        }
        thread::sleep(Duration::from_millis(rng.gen_range(0..=KILL_DELAY_MS_MAX)));
        served.child.kill().expect("SIGKILL");
        served.child.wait().expect("reap");
        kills += 1;
        let down = if kills % DOWN_LONG_EVERY == DOWN_LONG_EVERY / 2 {
            DOWN_LONG
        } else {
            Duration::from_millis(rng.gen_range(0..=DOWN_MS_MAX))
        };
        thread::sleep(down);
        served = start(&env, &listen);
        assert_eq!(served.uri, uri, "restarted on the same port");
    }

    shared.stop.store(true, Ordering::SeqCst);
    for (id, writer) in writers.into_iter().enumerate() {
        writer.join().expect("writer thread").unwrap_or_else(|e| panic!("seed {seed}: writer {id}: {e}"));
    }
    assert!(kills >= KILLS, "seed {seed}: killed {kills} times");

    // The logs as the last server has them, against what clients were told and saw.
    let stored = common::scan_logs(connect(&uri).namespace(NAMESPACE).expect("namespace").as_ref(), &LOGS);
    *shared.final_latest.lock().expect("lock") =
        Some(stored.iter().map(|(log, records)| (log.clone(), records.len() as Seq)).collect());
    let acked = shared.acked.lock().expect("lock").clone();
    common::check_acknowledged(&stored, acked.iter().map(|a| (a.log.as_str(), a.seq, a.payload.as_slice())))
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    for (log, watcher) in WATCHED.iter().zip(watchers) {
        let watched = watcher.join().expect("watcher thread").unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        common::check_watched(log, &watched, &stored).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }

    let call_time_max = *shared.call_time_max.lock().expect("lock");
    assert!(call_time_max < CALL_TIME_MAX, "seed {seed}: a call took {call_time_max:?}");
    let errors = shared.errors.lock().expect("lock").clone();
    assert!(
        errors.get("unavailable").or(errors.get("outcome_unknown")).is_some(),
        "seed {seed}: the long outages reached no writer as an error: {errors:?}"
    );
    println!(
        "serve_kill: {kills} kills, {} batches ({} records) acknowledged, errors seen {:?}, longest call {call_time_max:?}, {:?} in all",
        shared.batches.load(Ordering::SeqCst),
        acked.len(),
        errors,
        started.elapsed()
    );
}
