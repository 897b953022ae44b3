//! The workloads of `varve bench serve`, written once against the Log
//! contract ([`Namespace`]) and run on both sides of a comparison: the
//! embedded journal in this process, and a `varve serve` through the remote
//! backend (`varve_remote`). Concurrent clients are threads; what each
//! thread holds (one shared embedded namespace, or a remote store of its
//! own with its own connection) is the caller's choice.

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use varve_log::{Namespace, Seq};

use crate::stats::{nanos, p50_p99, rate};
use crate::{BenchError, Result};

/// Bytes of every record appended, read or watched.
pub(super) const RECORD_BYTES: usize = 100;
/// Records per request in the batched shape: one `append_batch` (one HTTP
/// request) or 100 pipelined JetStream publishes.
pub(super) const BATCH_RECORDS: usize = 100;
/// Records per `append_batch` when filling a log for reads.
const FILL_BATCH_RECORDS: usize = 1000;
/// Longest wait of a watcher for its next record: a bug or a dead server if reached.
const WATCH_WAIT_MAX: Duration = Duration::from_secs(30);

/// A record of [`RECORD_BYTES`] whose bytes depend on `seed`.
pub(super) fn payload(seed: usize) -> Vec<u8> {
    (0..RECORD_BYTES).map(|i| i.wrapping_mul(31).wrapping_add(seed).to_le_bytes()[0]).collect()
}

fn check_failed(what: impl Into<String>) -> BenchError {
    BenchError::Check(what.into())
}

/// What a run of concurrent clients did.
#[derive(Clone, Copy, Debug)]
pub(super) struct Throughput {
    /// Records done.
    pub(super) records: u64,
    /// From the start to the last client's end.
    pub(super) elapsed: Duration,
}

impl Throughput {
    /// Records per second.
    pub(super) fn rate(self) -> f64 {
        rate(self.records, self.elapsed)
    }
}

/// Records done by `clients` threads for about `budget`.
///
/// Each thread first runs `setup(index)` (connecting, say); then all start
/// together and call `op(state, n)` (`n` counts its calls from 0), which
/// returns how many records it did, until `budget` has passed. The time
/// runs from the start to the last thread's end, so the last operations in
/// flight are counted with the time they took.
pub(super) fn threaded_rate<C>(
    clients: usize,
    budget: Duration,
    setup: &(dyn Fn(usize) -> Result<C> + Sync),
    op: &(dyn Fn(&mut C, u64) -> Result<u64> + Sync),
) -> Result<Throughput> {
    let barrier = Barrier::new(clients + 1);
    let (total, elapsed) = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..clients)
            .map(|index| {
                let barrier = &barrier;
                scope.spawn(move || -> Result<u64> {
                    let state = setup(index);
                    // Every thread reaches the barrier, failed or not, so none waits forever.
                    barrier.wait();
                    let mut state = state?;
                    let deadline = Instant::now() + budget;
                    let (mut records, mut calls) = (0, 0);
                    while Instant::now() < deadline {
                        records += op(&mut state, calls)?;
                        calls += 1;
                    }
                    Ok(records)
                })
            })
            .collect();
        barrier.wait();
        let started = Instant::now();
        let mut total = 0;
        for thread in threads {
            match thread.join() {
                Ok(records) => total += records?,
                Err(_) => return Err(check_failed("a client thread panicked")),
            }
        }
        Ok((total, started.elapsed()))
    })?;
    Ok(Throughput { records: total, elapsed })
}

/// Appends to `log` by `clients` threads, each appending through the
/// namespace `connect(index)` gives it: one record per call when `batch`
/// is 1, else `append_batch` of `batch` records.
pub(super) fn append_rate(
    clients: usize,
    batch: usize,
    budget: Duration,
    log: &str,
    connect: &(dyn Fn(usize) -> Result<Arc<dyn Namespace>> + Sync),
) -> Result<Throughput> {
    let value = payload(0);
    let records: Vec<(&str, &[u8])> = vec![(log, &value[..]); batch];
    threaded_rate(clients, budget, connect, &|ns, _| {
        if batch == 1 {
            ns.append(log, &value)?;
        } else {
            let seqs = ns.append_batch(&records)?;
            if seqs.len() != batch {
                return Err(check_failed(format!("a batch of {batch} got {} seqs", seqs.len())));
            }
        }
        Ok(batch as u64)
    })
}

/// Append `records` records of [`RECORD_BYTES`] to `log`, in batches.
pub(super) fn fill(ns: &dyn Namespace, log: &str, records: u64) -> Result<()> {
    let value = payload(0);
    let mut left = records;
    while left > 0 {
        let n = usize::try_from(left).unwrap_or(usize::MAX).min(FILL_BATCH_RECORDS);
        let batch: Vec<(&str, &[u8])> = vec![(log, &value[..]); n];
        ns.append_batch(&batch)?;
        left -= n as u64;
    }
    Ok(())
}

/// p50 and p99 (ns) of `samples` single `get` calls of random seqs in
/// `1..=records`, one at a time, after `warmup` calls not counted.
pub(super) fn get_latency(
    ns: &dyn Namespace,
    log: &str,
    records: Seq,
    samples: usize,
    warmup: usize,
    seed: u64,
) -> Result<[f64; 2]> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut times = Vec::with_capacity(samples + warmup);
    for _ in 0..samples + warmup {
        let seq = rng.gen_range(1..=records);
        let started = Instant::now();
        let value = ns.get(log, seq)?;
        times.push(nanos(started.elapsed()));
        if value.len() != RECORD_BYTES {
            return Err(check_failed(format!("get of seq {seq} returned {} bytes", value.len())));
        }
    }
    Ok(p50_p99(times, warmup))
}

/// How a watch fan-out is run.
pub(super) struct FanOut {
    /// Watchers of the one log, each a thread with its own watch.
    pub(super) subscribers: usize,
    /// Records appended, one at a time.
    pub(super) records: usize,
    /// Time from one append's start to the next one's.
    pub(super) interval: Duration,
    /// The first records, whose deliveries are not counted (connections warming up).
    pub(super) warmup: usize,
}

/// Delivery latency of a watch fan-out, p50 and p99 (ns) over every
/// delivery: `fan_out.subscribers` threads each watch `log` through the
/// namespace `connect()` gives it, while this thread appends
/// `fan_out.records` records to it through `appender`, one every
/// `fan_out.interval`. Each record carries the time its `append` call
/// started (ns since a shared `Instant`) and its index; a delivery's latency
/// is the time the watcher received it minus that.
pub(super) fn watch_latency(
    appender: &dyn Namespace,
    log: &str,
    fan_out: &FanOut,
    connect: &(dyn Fn() -> Result<Arc<dyn Namespace>> + Sync),
) -> Result<[f64; 2]> {
    let from = appender.latest(log)? + 1;
    let epoch = Instant::now();
    let barrier = Barrier::new(fan_out.subscribers + 1);
    let records = fan_out.records;
    let latencies = std::thread::scope(|scope| -> Result<Vec<u64>> {
        let threads: Vec<_> = (0..fan_out.subscribers)
            .map(|_| {
                let barrier = &barrier;
                scope.spawn(move || -> Result<Vec<u64>> {
                    let watch = connect().and_then(|ns| Ok(ns.watch(log, from)?));
                    barrier.wait();
                    let mut watch = watch?;
                    let mut latencies = Vec::with_capacity(records);
                    for _ in 0..records {
                        let record = watch
                            .next_timeout(WATCH_WAIT_MAX)?
                            .ok_or_else(|| check_failed("a watcher waited 30 s for a record"))?;
                        let received = nanos(epoch.elapsed());
                        let (stamp, index) = stamp_of(&record.value)?;
                        if index >= fan_out.warmup as u64 {
                            latencies.push(received.saturating_sub(stamp));
                        }
                    }
                    Ok(latencies)
                })
            })
            .collect();
        barrier.wait();
        let mut value = payload(0);
        let started = Instant::now();
        let mut failure = None;
        for index in 0..records as u64 {
            let due = started + fan_out.interval * u32::try_from(index).unwrap_or(u32::MAX);
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
            value[..8].copy_from_slice(&nanos(epoch.elapsed()).to_le_bytes());
            value[8..16].copy_from_slice(&index.to_le_bytes());
            if let Err(error) = appender.append(log, &value) {
                failure = Some(error);
                break;
            }
        }
        let mut all = Vec::with_capacity(records * fan_out.subscribers);
        for thread in threads {
            match thread.join() {
                Ok(latencies) => all.extend(latencies?),
                Err(_) => return Err(check_failed("a watcher thread panicked")),
            }
        }
        match failure {
            Some(error) => Err(error.into()),
            None => Ok(all),
        }
    })?;
    if latencies.is_empty() {
        return Err(check_failed("no deliveries to measure"));
    }
    Ok(p50_p99(latencies, 0))
}

/// The append time and index a fan-out record carries in its first 16 bytes.
fn stamp_of(value: &[u8]) -> Result<(u64, u64)> {
    let word = |range: std::ops::Range<usize>| {
        value.get(range).and_then(|bytes| <[u8; 8]>::try_from(bytes).ok()).map(u64::from_le_bytes)
    };
    match (word(0..8), word(8..16)) {
        (Some(stamp), Some(index)) => Ok((stamp, index)),
        _ => Err(check_failed(format!("a watched record of {} bytes carries no stamp", value.len()))),
    }
}
