//! The pause of an online repair (`varve bench repair`, `make
//! bench-repair`): how long `varve_repair::repair_online` holds the
//! application while readings keep arriving.
//!
//! The application is `repair.rs`'s (readings → `predict`, which reads the
//! latest `model`), kept running on the embedded journal with group commit
//! (`Sync::Group(5 ms)`, what a deployment would use: the swap's frame is
//! made durable inside the pause) after a history of ~100,000 events. A thread appends a batch of 100 readings every 10 ms (10,000
//! readings/s, ~50,000 events/s) and times each `append_batch`. Then, one
//! after another, repairs correct the model before the latest one (about
//! 1,000 predictions replayed each), with a quiet spell between them.
//!
//! Reported, over the repairs: the pause (from the moment no new runs are
//! claimed to the resumption; p50 and max: the runs in flight finishing,
//! the replay of the last of them, then appends held), the part of it
//! during which appends were held, the repair's whole wall time, its
//! rounds; and the
//! appender's latency while repairs ran against its latency in the quiet
//! spells of the same run (the baseline: the same appends, no repair).
//! Checked: every reading appended is in `sens` at the end.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use varve_log::{JournalOptions, JournalStore, Namespace, SyncPolicy};
use varve_repair::{repair_online, Correction, Online, OnlineOutcome};
use varve_runtime::trace::RecordRef;
use varve_runtime::{HandlerFn, Runtime};

use crate::repair::{append_readings, feed_history, predict, start_app, BATCH};
use crate::stats::{median, percentile};
use crate::table::{Align, Table};
use crate::{fresh_dir, BenchError, Result};

/// Between two batches of the live appender.
const APPEND_EVERY: Duration = Duration::from_millis(10);
/// Between two repairs (the baseline's samples are taken then).
const QUIET: Duration = Duration::from_millis(300);

/// The figures of a run.
#[derive(Clone, Debug)]
pub struct OnlineReport {
    /// Events in `_events` before the first repair.
    pub history_events: u64,
    /// Repairs made.
    pub repairs: usize,
    /// Pause per repair (claims stopped → resumed).
    pub paused: Vec<Duration>,
    /// Of it, appends held.
    pub held: Vec<Duration>,
    /// Whole repair, per repair.
    pub wall: Vec<Duration>,
    /// Rounds before the pause, per repair.
    pub rounds: Vec<usize>,
    /// Events read while appends were held, per repair.
    pub last_round_events: Vec<usize>,
    /// Runs replayed, per repair.
    pub replayed: Vec<usize>,
    /// `append_batch` latencies (ns, sorted) while a repair ran.
    pub during: Vec<u64>,
    /// The same in the quiet spells.
    pub quiet: Vec<u64>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median_ms(values: &[Duration]) -> f64 {
    median(values.iter().map(|d| ms(*d)).collect())
}

fn max_ms(values: &[Duration]) -> f64 {
    values.iter().map(|d| ms(*d)).fold(0.0, f64::max)
}

impl OnlineReport {
    /// The table for docs/benchmarks.md.
    #[must_use]
    pub fn to_markdown(&self) -> String {
        let mut table = Table::new(&[
            ("figure", Align::Left),
            ("p50", Align::Right),
            ("max", Align::Right),
            ("baseline (no repair running)", Align::Right),
        ]);
        let latency = |samples: &[u64], p: f64| {
            if samples.is_empty() {
                "—".to_owned()
            } else {
                format!("{:.2} ms", percentile(samples, p) / 1e6)
            }
        };
        #[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
        let as_f64 = |v: &[usize]| v.iter().map(|&n| n as f64).collect::<Vec<f64>>();
        let max_of = |v: &[usize]| v.iter().copied().max().unwrap_or(0);
        table.row(vec![
            format!("pause per repair (no run started → resumed), {} repairs", self.repairs),
            format!("{:.2} ms", median_ms(&self.paused)),
            format!("{:.2} ms", max_ms(&self.paused)),
            "—".into(),
        ]);
        table.row(vec![
            "of it, appends held".into(),
            format!("{:.2} ms", median_ms(&self.held)),
            format!("{:.2} ms", max_ms(&self.held)),
            "—".into(),
        ]);
        table.row(vec![
            "whole repair (wall)".into(),
            format!("{:.1} ms", median_ms(&self.wall)),
            format!("{:.1} ms", max_ms(&self.wall)),
            "—".into(),
        ]);
        table.row(vec![
            "rounds before appends were held (the last with runs stopped)".into(),
            format!("{:.0}", median(as_f64(&self.rounds))),
            max_of(&self.rounds).to_string(),
            "—".into(),
        ]);
        table.row(vec![
            "events read while appends were held".into(),
            format!("{:.0}", median(as_f64(&self.last_round_events))),
            max_of(&self.last_round_events).to_string(),
            "—".into(),
        ]);
        table.row(vec![
            "runs replayed per repair".into(),
            format!("{:.0}", median(as_f64(&self.replayed))),
            max_of(&self.replayed).to_string(),
            "—".into(),
        ]);
        table.row(vec![
            "append_batch of 100 readings, p99 / max while repairs ran".into(),
            latency(&self.during, 0.99),
            latency(&self.during, 1.0),
            format!("{} / {}", latency(&self.quiet, 0.99), latency(&self.quiet, 1.0)),
        ]);
        table.to_markdown()
    }
}

impl OnlineReport {
    fn add(&mut self, (outcome, wall): (OnlineOutcome, Duration)) {
        self.paused.push(outcome.paused);
        self.held.push(outcome.appends_held);
        self.wall.push(wall);
        self.rounds.push(outcome.rounds);
        self.last_round_events.push(outcome.events_per_round.last().copied().unwrap_or(0));
        self.replayed.push(outcome.outcome.replayed);
    }
}

/// Correct the model before the latest one, online; the outcome and the repair's wall time.
fn repair_once(
    runtime: &Runtime,
    handlers: &HashMap<String, HandlerFn>,
    i: usize,
) -> Result<(OnlineOutcome, Duration)> {
    let model = runtime.namespace().latest("model")?.saturating_sub(1).max(1);
    let record = RecordRef { namespace: "temp".into(), log: "model".into(), seq: model };
    let corrections = [Correction::Record(record.clone())];
    let values = HashMap::from([(record, format!("model {model} corrected {i}").into_bytes())]);
    let none = HashSet::new();
    let online = Online::new(&corrections, &values, handlers, &none);
    let start = Instant::now();
    let outcome = repair_online(&runtime.handle(), &online);
    let wall = start.elapsed();
    let outcome = outcome.map_err(|e| BenchError::Check(format!("online repair {}: {e}", i + 1)))?;
    eprintln!(
        "  repair {}: paused {:.2} ms (appends held {:.2} ms), {} rounds {:?}, {} runs replayed, {:.1} ms in all",
        i + 1,
        ms(outcome.paused),
        ms(outcome.appends_held),
        outcome.rounds,
        outcome.events_per_round,
        outcome.outcome.replayed,
        ms(wall)
    );
    Ok((outcome, wall))
}

/// Build the history, then repair `repairs` times while readings arrive.
pub fn run(dir: &Path, quick: bool) -> Result<OnlineReport> {
    let (history, repairs) = if quick { (2_000, 3) } else { (20_000, 9) };
    let dir = fresh_dir(dir, "repair-online")?;
    let sync = SyncPolicy::Group(Duration::from_millis(5));
    let store = JournalStore::open(&dir, JournalOptions { sync, ..JournalOptions::default() })?;
    let ns: Arc<dyn Namespace> = Arc::new(store.journal_namespace("temp")?);
    let runtime = start_app(&ns)?;
    let handle = runtime.handle();
    let history_readings = feed_history(&runtime, history)?;
    let history_events = ns.latest(varve_runtime::EVENTS_LOG)?;
    eprintln!("  online repair: a history of {history_events} events; {repairs} repairs while readings arrive");

    let repairing = AtomicBool::new(false);
    let stop = AtomicBool::new(false);
    let samples: Mutex<(Vec<u64>, Vec<u64>)> = Mutex::new((Vec::new(), Vec::new()));
    let handlers = HashMap::from([("predict".to_owned(), predict())]);
    let mut report = OnlineReport {
        history_events,
        repairs,
        paused: Vec::new(),
        held: Vec::new(),
        wall: Vec::new(),
        rounds: Vec::new(),
        last_round_events: Vec::new(),
        replayed: Vec::new(),
        during: Vec::new(),
        quiet: Vec::new(),
    };
    let live = std::thread::scope(|scope| -> Result<usize> {
        let appender = scope.spawn(|| -> Result<usize> {
            let mut next = history_readings;
            while !stop.load(Ordering::SeqCst) {
                let during = repairing.load(Ordering::SeqCst);
                let start = Instant::now();
                append_readings(&handle, next, BATCH)?;
                let took = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
                // A batch that began or ended during a repair counts for it.
                let during = during || repairing.load(Ordering::SeqCst);
                let mut samples = samples.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if during {
                    samples.0.push(took);
                } else {
                    samples.1.push(took);
                }
                drop(samples);
                next += BATCH;
                std::thread::sleep(APPEND_EVERY.saturating_sub(start.elapsed()));
            }
            Ok(next - history_readings)
        });
        let result = (|| -> Result<()> {
            for i in 0..repairs {
                std::thread::sleep(QUIET);
                repairing.store(true, Ordering::SeqCst);
                let repaired = repair_once(&runtime, &handlers, i);
                repairing.store(false, Ordering::SeqCst);
                report.add(repaired?);
            }
            std::thread::sleep(QUIET);
            Ok(())
        })();
        stop.store(true, Ordering::SeqCst);
        let live = appender.join().map_err(|_| BenchError::Check("the appender panicked".into()))??;
        result?;
        Ok(live)
    })?;
    if !runtime.wait_idle(Duration::from_secs(600)) {
        return Err(BenchError::Check("the runtime did not go idle".into()));
    }
    runtime.stop(Duration::from_secs(10));
    let held = ns.latest("sens")?;
    if held != (history_readings + live) as u64 {
        return Err(BenchError::Check(format!(
            "sens holds {held} readings where {} were appended: the repairs lost some",
            history_readings + live
        )));
    }
    let (mut during, mut quiet) = samples.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    during.sort_unstable();
    quiet.sort_unstable();
    report.during = during;
    report.quiet = quiet;
    Ok(report)
}
