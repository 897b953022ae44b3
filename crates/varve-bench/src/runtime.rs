//! The runtime's figures (`varve bench runtime`, `make bench-runtime`),
//! each beside a baseline measured in the same run, on the embedded journal
//! in a scratch directory. Progress lines go to stderr as each figure is
//! measured.
//!
//! | figure | what is timed | baseline (same run) |
//! |---|---|---|
//! | in-process trigger latency | `Runtime::append` → first line of a Rust handler | `append` to the same journal without the runtime + an mpsc wake of a waiting thread |
//! | external-command trigger latency | `Runtime::append` → `main` of the spawned process | spawning the same command with `std::process::Command`, no runtime |
//! | events recorded per second | a handler-heavy workload, events counted in `_events` | — |
//! | event-recording overhead | the same workload, READ/LATEST recording on vs off | the "off" runs |
//! | topic publish throughput | `publish` ×N until the subscriber has handled every one | plain `append` ×N to a log of the same namespace |
//! | sorted-map puts by a handler | N inputs, each a handler's `ctx.sorted_map(..).put` of a new key, until all handled | the same handler appending the input to a log instead |
//! | a repaired map's next generation | building a new structure from the N ops of a swapped op log | the same N inserts into a `varve_pds::SortedMap` directly |
//!
//! **How an external command reports its start.** The command is
//! [`RuntimeBenchOptions::stamp_program`] — the `varve` binary itself, run
//! as `varve __bench-stamp FILE`: its `main` reads `CLOCK_REALTIME` before
//! anything else (before argument parsing) and, when its first argument is
//! [`STAMP_ARG`], writes those nanoseconds to `FILE` and exits 0 (see
//! [`stamp_if_asked`]). So what is measured is the runtime's work *plus*
//! `fork`/`exec`, dynamic loading and Rust's start-up of a 26 MB binary (release, with debug info) —
//! a real process start, not a shell builtin. The benchmark compares that
//! stamp with `CLOCK_REALTIME` read just before the append (same machine,
//! same clock). The baseline spawns the same argv with the same stdio and
//! process-group setup as the runtime's `command::run`.
//!
//! Latencies are taken one append at a time, waiting for the runtime to be
//! idle between samples, baseline and runtime samples interleaved so drift
//! on a noisy machine hits both alike; the first samples of each trial are
//! discarded (warm-up); a figure is the median over trials of each trial's
//! percentile. Rates are medians of repetitions, runtime and baseline
//! alternating.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use varve_log::{JournalOptions, JournalStore, LogConfig, Namespace, Store, SyncPolicy};
use varve_runtime::{HandlerKind, HandlerSpec, RetryPolicy, RuntimeBuilder, RuntimeOptions, EVENTS_LOG};

use crate::stats::{load_average, median, median_each, nanos, p50_p99};
use crate::table::{ratio_cell, Align, Table};
use crate::{fresh_dir, BenchError, IoContext, Result};

/// A failed check of the benchmark itself, as an error.
fn check_failed(what: impl Into<String>) -> BenchError {
    BenchError::Check(what.into())
}

/// The hidden first argument that makes `varve` write its start time and exit.
pub const STAMP_ARG: &str = "__bench-stamp";

/// Longest wait for the runtime to become idle; a bug if reached.
const IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// Group commit delay used throughout (the Log's default group policy).
const GROUP_DELAY: Duration = Duration::from_millis(5);
/// Records per `append_batch` in the handler-heavy workload.
const WORKLOAD_BATCH: usize = 100;

/// If this process was started as `varve __bench-stamp FILE`, write
/// `entered` (`CLOCK_REALTIME` ns, read first thing in `main`) to FILE and
/// return the exit code; otherwise `None`.
#[must_use]
pub fn stamp_if_asked(entered: SystemTime) -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != STAMP_ARG {
        return None;
    }
    let ns = entered.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let written = args.next().is_some_and(|file| std::fs::write(file, ns.to_string()).is_ok());
    Some(if written { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// What to run.
pub struct RuntimeBenchOptions {
    /// Directory for the scratch stores (deleted after).
    pub dir: PathBuf,
    /// The program the external-command handler runs as
    /// `PROGRAM __bench-stamp FILE`: a binary whose `main` starts with
    /// [`stamp_if_asked`] (the `varve` binary).
    pub stamp_program: PathBuf,
    /// Small sizes and one trial: a smoke run, not figures to publish.
    pub quick: bool,
    /// Run only one part: `latency`, `command`, `workload` or `publish`.
    pub only: Option<String>,
}

struct Sizes {
    trials: usize,
    latency_samples: usize,
    latency_warmup: usize,
    command_samples: usize,
    command_warmup: usize,
    workload_records: usize,
    overhead_reps: usize,
    publishes: usize,
    publish_reps: usize,
}

impl Sizes {
    fn new(quick: bool) -> Sizes {
        if quick {
            Sizes {
                trials: 1,
                latency_samples: 200,
                latency_warmup: 20,
                command_samples: 20,
                command_warmup: 3,
                workload_records: 1_000,
                overhead_reps: 1,
                publishes: 5_000,
                publish_reps: 1,
            }
        } else {
            Sizes {
                trials: 3,
                latency_samples: 3_000,
                latency_warmup: 200,
                command_samples: 400,
                command_warmup: 20,
                workload_records: 50_000,
                overhead_reps: 15,
                publishes: 200_000,
                publish_reps: 5,
            }
        }
    }
}

/// One line of the table.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Stable key for scripts.
    pub key: &'static str,
    /// What was measured, for people: figure, percentile, sync policy.
    pub what: String,
    /// The figure (a median over trials or repetitions), in `unit`.
    pub value: f64,
    /// The unit of `value` and `baseline`: `µs`, `ms`, `events/s`, `publishes/s`, `µs/record` or `%`.
    pub unit: &'static str,
    /// The goal the figure is held to, as text; `None` for reference figures.
    pub goal: Option<&'static str>,
    /// Whether `value` meets `goal`; `None` when there is no goal.
    pub goal_met: Option<bool>,
    /// What the baseline is; `None` for figures without one.
    pub baseline_what: Option<String>,
    /// The baseline's figure in `unit`, measured in the same run; `None` for figures without one.
    pub baseline: Option<f64>,
    /// value / baseline.
    pub ratio: Option<f64>,
    /// For rates higher is better; for latencies and overheads lower is better.
    pub higher_is_better: bool,
}

impl Row {
    fn new(key: &'static str, what: String, value: f64, unit: &'static str, higher_is_better: bool) -> Row {
        Row {
            key,
            what,
            value,
            unit,
            goal: None,
            goal_met: None,
            baseline_what: None,
            baseline: None,
            ratio: None,
            higher_is_better,
        }
    }

    fn goal(mut self, text: &'static str, met: bool) -> Row {
        self.goal = Some(text);
        self.goal_met = Some(met);
        self
    }

    fn baseline(mut self, what: &str, value: f64) -> Row {
        self.baseline_what = Some(what.to_owned());
        self.baseline = Some(value);
        self.ratio = Some(self.value / value);
        self
    }
}

/// Every figure measured, in run order, and the machine's load around the run.
#[derive(Clone, Debug, Serialize)]
pub struct RuntimeReport {
    /// The command that produced the report (`varve bench runtime`).
    pub command: &'static str,
    /// Whether this was a quick smoke run (fewer samples), not figures to publish.
    pub quick: bool,
    /// `/proc/loadavg` (1, 5, 15 min) before the run; `None` where it cannot be read.
    pub load_before: Option<[f64; 3]>,
    /// `/proc/loadavg` (1, 5, 15 min) after the run; `None` where it cannot be read.
    pub load_after: Option<[f64; 3]>,
    /// One row per figure.
    pub rows: Vec<Row>,
}

fn group() -> SyncPolicy {
    SyncPolicy::Group(GROUP_DELAY)
}

fn sync_name(sync: SyncPolicy) -> String {
    match sync {
        SyncPolicy::Always => "Always".into(),
        SyncPolicy::Group(d) => format!("Group({} ms)", d.as_millis()),
        SyncPolicy::Never => "Never".into(),
    }
}

/// Run the measurements (the parts `options.only` selects).
pub fn run(options: &RuntimeBenchOptions) -> Result<RuntimeReport> {
    std::fs::create_dir_all(&options.dir).with_context(|| format!("creating {}", options.dir.display()))?;
    let sizes = Sizes::new(options.quick);
    let load_before = load_average();
    eprintln!(
        "varve bench runtime: scratch in {}, load average before {:?}",
        options.dir.display(),
        load_before.unwrap_or_default()
    );
    let mut rows = Vec::new();
    let wanted = |part: &str| options.only.as_deref().is_none_or(|only| only == part);
    if wanted("latency") {
        in_process_rows(&options.dir, &sizes, &mut rows)?;
    }
    if wanted("command") {
        command_rows(&options.dir, &options.stamp_program, &sizes, &mut rows)?;
    }
    if wanted("workload") {
        workload_rows(&options.dir, &sizes, &mut rows)?;
    }
    if wanted("retention") {
        retention_rows(&options.dir, &sizes, &mut rows)?;
    }
    if wanted("publish") {
        publish_rows(&options.dir, &sizes, &mut rows)?;
    }
    if wanted("map") {
        map_rows(&options.dir, &sizes, &mut rows)?;
    }
    let report = RuntimeReport {
        command: "varve bench runtime",
        quick: options.quick,
        load_before,
        load_after: load_average(),
        rows,
    };
    std::fs::remove_dir_all(options.dir.join("runtime")).ok();
    Ok(report)
}

fn in_process_rows(dir: &Path, sizes: &Sizes, rows: &mut Vec<Row>) -> Result<()> {
    for sync in [group(), SyncPolicy::Never] {
        let (ours, raw) = in_process_latency(dir, sync, sizes)?;
        eprintln!(
            "  in-process trigger, {}: p50 {:.1} µs p99 {:.1} µs; append + wake p50 {:.1} µs p99 {:.1} µs",
            sync_name(sync),
            ours[0] / 1e3,
            ours[1] / 1e3,
            raw[0] / 1e3,
            raw[1] / 1e3
        );
        let is_group = matches!(sync, SyncPolicy::Group(_));
        let baseline = "journal append + mpsc wake of a waiting thread";
        let p50 = Row::new(
            if is_group { "in_process_trigger_p50_us" } else { "in_process_trigger_never_p50_us" },
            format!("in-process trigger latency p50, {}", sync_name(sync)),
            ours[0] / 1e3,
            "µs",
            false,
        )
        .baseline(baseline, raw[0] / 1e3);
        rows.push(if is_group { p50.goal("p50 ≤ 50 µs", ours[0] <= 50e3) } else { p50 });
        rows.push(
            Row::new(
                if is_group { "in_process_trigger_p99_us" } else { "in_process_trigger_never_p99_us" },
                format!("in-process trigger latency p99, {}", sync_name(sync)),
                ours[1] / 1e3,
                "µs",
                false,
            )
            .baseline(baseline, raw[1] / 1e3),
        );
    }
    Ok(())
}

fn command_rows(dir: &Path, program: &Path, sizes: &Sizes, rows: &mut Vec<Row>) -> Result<()> {
    let (ours, raw) = command_latency(dir, program, sizes)?;
    eprintln!(
        "  external-command trigger: p50 {:.2} ms p99 {:.2} ms; direct spawn p50 {:.2} ms p99 {:.2} ms",
        ours[0] / 1e6,
        ours[1] / 1e6,
        raw[0] / 1e6,
        raw[1] / 1e6
    );
    let baseline = "the same command spawned with std::process::Command";
    rows.push(
        Row::new(
            "command_trigger_p50_ms",
            "external-command trigger latency p50, Group(5 ms)".into(),
            ours[0] / 1e6,
            "ms",
            false,
        )
        .goal("p50 ≤ 2 ms", ours[0] <= 2e6)
        .baseline(baseline, raw[0] / 1e6),
    );
    rows.push(
        Row::new(
            "command_trigger_p99_ms",
            "external-command trigger latency p99, Group(5 ms)".into(),
            ours[1] / 1e6,
            "ms",
            false,
        )
        .baseline(baseline, raw[1] / 1e6),
    );
    Ok(())
}

fn workload_rows(dir: &Path, sizes: &Sizes, rows: &mut Vec<Row>) -> Result<()> {
    let workload = recording_workload(dir, sizes)?;
    eprintln!(
        "  workload: {:.0} events/s ({:.1} events/record); {:.2} µs/record with READ/LATEST, {:.2} µs without",
        workload.events_per_s, workload.events_per_record, workload.on_us, workload.off_us
    );
    rows.push(Row::new(
        "events_per_s",
        format!(
            "events recorded per second (latest + get + append per trigger, {:.1} events/record, 1 worker)",
            workload.events_per_record
        ),
        workload.events_per_s,
        "events/s",
        true,
    ));
    let (workers, rate) = default_workers_events_per_s(dir, sizes)?;
    eprintln!("  workload with {workers} workers: {rate:.0} events/s");
    rows.push(Row::new(
        "events_per_s_default_workers",
        format!("events recorded per second, the same workload with the default {workers} workers"),
        rate,
        "events/s",
        true,
    ));
    let overhead = workload.overhead;
    rows.push(
        Row::new(
            "recording_overhead_pct",
            "event-recording overhead: READ/LATEST on vs off, wall time per record (median of per-rep ratios)".into(),
            overhead * 100.0,
            "%",
            false,
        )
        .goal("≤ 5 %", overhead <= 0.05),
    );
    rows.push(
        Row::new(
            "workload_us_per_record_on",
            "handler-heavy workload, READ/LATEST recorded, wall".into(),
            workload.on_us,
            "µs/record",
            false,
        )
        .baseline("the same with READ/LATEST off", workload.off_us),
    );
    if let (Some(on), Some(off), Some(cpu_overhead)) = (workload.on_cpu_us, workload.off_cpu_us, workload.cpu_overhead)
    {
        rows.push(Row::new(
            "recording_overhead_cpu_pct",
            "event-recording overhead, CPU time of all threads (median of per-rep ratios)".into(),
            cpu_overhead * 100.0,
            "%",
            false,
        ));
        rows.push(
            Row::new(
                "workload_cpu_us_per_record_on",
                "handler-heavy workload, READ/LATEST recorded, CPU time".into(),
                on,
                "µs/record",
                false,
            )
            .baseline("the same with READ/LATEST off", off),
        );
    }
    Ok(())
}

fn retention_rows(dir: &Path, sizes: &Sizes, rows: &mut Vec<Row>) -> Result<()> {
    let RetentionFigures { count, age, all, count_overhead, age_overhead, held, written } =
        retention_workload(dir, sizes)?;
    eprintln!(
        "  retention: {count:.2} µs/record with events_keep ({:+.1} %), {age:.2} with events_keep_for ({:+.1} %), \
         {all:.2} keeping all; {held} of {written} events held",
        count_overhead * 100.0,
        age_overhead * 100.0
    );
    rows.push(
        Row::new(
            "retention_us_per_record",
            "the handler-heavy workload with event retention keeping a tenth of its events, wall".into(),
            count,
            "µs/record",
            false,
        )
        .baseline("the same keeping every event", all),
    );
    rows.push(Row::new(
        "retention_overhead_pct",
        "event retention's cost: events_keep on vs off, wall time per record (median of per-rep ratios)".into(),
        count_overhead * 100.0,
        "%",
        false,
    ));
    rows.push(
        Row::new(
            "retention_age_us_per_record",
            "the same with events_keep_for = 1 h: the age rule checked (nothing that young is trimmed), wall".into(),
            age,
            "µs/record",
            false,
        )
        .baseline("the same keeping every event", all),
    );
    rows.push(Row::new(
        "retention_age_overhead_pct",
        "the age rule's checks: events_keep_for on vs off, wall time per record (median of per-rep ratios)".into(),
        age_overhead * 100.0,
        "%",
        false,
    ));
    #[expect(clippy::cast_precision_loss, reason = "counts")]
    rows.push(
        Row::new(
            "retention_events_held",
            "events _events holds at the end of that run with events_keep".into(),
            held as f64,
            "events",
            false,
        )
        .baseline("events written in the run", written as f64),
    );
    Ok(())
}

fn publish_rows(dir: &Path, sizes: &Sizes, rows: &mut Vec<Row>) -> Result<()> {
    let (ours, raw) = publish_rate(dir, sizes)?;
    eprintln!("  publish with one subscriber: {ours:.0}/s; plain append {raw:.0}/s");
    rows.push(
        Row::new(
            "publish_per_s",
            "topic publishes/s, one in-process subscriber, Group(5 ms), until all handled".into(),
            ours,
            "publishes/s",
            true,
        )
        .goal("≥ 100,000/s", ours >= 100_000.0)
        .baseline("plain append to a log of the same namespace", raw),
    );
    Ok(())
}

fn map_rows(dir: &Path, sizes: &Sizes, rows: &mut Vec<Row>) -> Result<()> {
    let figures = map_figures(dir, sizes)?;
    eprintln!(
        "  sorted-map puts by a handler: {:.0}/s; appends by a handler {:.0}/s; next generation {:.1} µs/op, direct inserts {:.1} µs",
        figures.puts_per_s, figures.appends_per_s, figures.rebuild_us, figures.direct_us
    );
    rows.push(
        Row::new(
            "map_puts_per_s",
            format!(
                "inputs/s, a handler putting each into a sorted map (new key), Group(5 ms), {} inputs until handled",
                sizes.workload_records
            ),
            figures.puts_per_s,
            "inputs/s",
            true,
        )
        .baseline("the same handler appending each to a log", figures.appends_per_s),
    );
    rows.push(
        Row::new(
            "map_rebuild_us",
            format!("a repaired map's next generation: build from {} ops, per op", sizes.workload_records),
            figures.rebuild_us,
            "µs/op",
            false,
        )
        .baseline("the same inserts into a varve_pds::SortedMap directly", figures.direct_us),
    );
    Ok(())
}

struct MapFigures {
    puts_per_s: f64,
    appends_per_s: f64,
    rebuild_us: f64,
    direct_us: f64,
}

/// The key of input `i`: distinct, in no order (a multiplicative hash).
fn map_key(i: u64) -> [u8; 8] {
    (i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).to_be_bytes()
}

/// Inputs/s of a handler putting each input into a sorted map, and of the
/// same handler appending it instead; then the time per op to build a
/// repaired map's next generation (the op log swapped for a copy, as a
/// repair leaves it), and per insert into a `SortedMap` directly.
fn map_figures(base: &Path, sizes: &Sizes) -> Result<MapFigures> {
    let n = sizes.workload_records as u64;
    #[expect(clippy::cast_precision_loss, reason = "counts to rates")]
    let count = n as f64;
    let (mut puts, mut appends, mut rebuilds, mut directs) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..sizes.publish_reps.max(3) {
        for into_map in [true, false] {
            let store = open_store(base, "map", group())?;
            let ns = store.namespace("map")?;
            let rt = RuntimeBuilder::new(Arc::clone(&ns))
                .concurrency(1)
                .log("in", LogConfig::unbounded())
                .log("m", LogConfig::unbounded())
                .log("out", LogConfig::unbounded())
                .handler("index", RetryPolicy::default(), move |ctx| {
                    if into_map {
                        ctx.sorted_map("m").put(&map_key(ctx.seq()), ctx.record())?;
                    } else {
                        ctx.append("out", ctx.record())?;
                    }
                    Ok(())
                })
                .subscribe("in", "index")
                .start()?;
            let started = Instant::now();
            for i in 1..=n {
                rt.append("in", &i.to_le_bytes())?;
            }
            if !rt.wait_idle(IDLE_TIMEOUT) {
                return Err(check_failed("the runtime did not become idle"));
            }
            let rate = count / started.elapsed().as_secs_f64();
            if !into_map {
                check_handled(ns.as_ref(), "out", sizes.workload_records)?;
                appends.push(rate);
                rt.stop(IDLE_TIMEOUT);
                continue;
            }
            check_handled(ns.as_ref(), "m", sizes.workload_records)?;
            puts.push(rate);
            // As a repair leaves it: the op log swapped for a copy, the old
            // one kept as generation 1. The next read builds generation 2.
            let ops: Vec<_> = ns.scan("m", varve_log::SeqRange::ALL)?.collect::<varve_log::Result<_>>()?;
            ns.create_log("m.copy", LogConfig::unbounded())?;
            for chunk in ops.chunks(1_000) {
                let batch: Vec<(&str, &[u8])> = chunk.iter().map(|r| ("m.copy", &r.value[..])).collect();
                ns.append_batch(&batch)?;
            }
            rt.rename_logs(&[("m", "_gen.m.1"), ("m.copy", "m")])?;
            let started = Instant::now();
            let map = rt.sorted_map("m")?;
            rebuilds.push(started.elapsed().as_secs_f64() * 1e6 / count);
            if map.latest()? != n {
                return Err(check_failed("the next generation was not built from every op"));
            }
            rt.stop(IDLE_TIMEOUT);
            // The baseline: the same inserts, into a SortedMap directly.
            let mut direct = varve_pds::SortedMap::<Vec<u8>, Vec<u8>>::open(
                Arc::clone(&ns),
                "direct",
                varve_pds::Options::default(),
            )?;
            let started = Instant::now();
            for i in 1..=n {
                direct.insert(&map_key(i).to_vec(), &i.to_le_bytes().to_vec())?;
            }
            directs.push(started.elapsed().as_secs_f64() * 1e6 / count);
        }
    }
    Ok(MapFigures {
        puts_per_s: median(puts),
        appends_per_s: median(appends),
        rebuild_us: median(rebuilds),
        direct_us: median(directs),
    })
}

impl RuntimeReport {
    /// The figures as a Markdown table (`docs/benchmarks.md`, "The
    /// runtime"), then the load average before and after.
    #[must_use]
    pub fn to_markdown(&self) -> String {
        let number = |v: f64, unit: &str| -> String {
            match unit {
                "µs" | "ms" | "µs/record" | "%" => format!("{v:.2} {unit}"),
                _ => format!("{v:.0} {unit}"),
            }
        };
        let mut table = Table::new(&[
            ("figure", Align::Left),
            ("varve", Align::Right),
            ("goal", Align::Left),
            ("met?", Align::Left),
            ("baseline", Align::Left),
            ("baseline value", Align::Right),
            ("varve / baseline", Align::Right),
        ]);
        for row in &self.rows {
            let met = match row.goal_met {
                Some(true) => "met",
                Some(false) => "**missed**",
                None => "",
            };
            table.row(vec![
                row.what.clone(),
                number(row.value, row.unit),
                row.goal.unwrap_or("").to_owned(),
                met.to_owned(),
                row.baseline_what.clone().unwrap_or_else(|| "—".into()),
                row.baseline.map_or_else(|| "—".into(), |b| number(b, row.unit)),
                row.ratio.map_or_else(|| "—".into(), |r| ratio_cell(r, row.higher_is_better)),
            ]);
        }
        let load =
            |l: Option<[f64; 3]>| l.map_or_else(|| "unknown".into(), |[a, b, c]| format!("{a:.2} {b:.2} {c:.2}"));
        format!(
            "{}\nload average before: {}, after: {}\n",
            table.to_markdown(),
            load(self.load_before),
            load(self.load_after)
        )
    }

    /// The report as one JSON object (`varve bench runtime --json`).
    ///
    /// # Panics
    ///
    /// Never: the report is numbers and strings (a NaN becomes `null`).
    #[must_use]
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a report of numbers and strings serializes")
    }
}

fn open_store(base: &Path, name: &str, sync: SyncPolicy) -> Result<JournalStore> {
    let dir = fresh_dir(&base.join("runtime"), name)?;
    Ok(JournalStore::open(&dir, JournalOptions { sync, ..JournalOptions::default() })?)
}

/// In-process trigger latency and the append + wake baseline, p50/p99 in ns.
fn in_process_latency(base: &Path, sync: SyncPolicy, sizes: &Sizes) -> Result<([f64; 2], [f64; 2])> {
    let (mut ours, mut raw) = (Vec::new(), Vec::new());
    for trial in 0..sizes.trials {
        let store = open_store(base, &format!("latency-{trial}"), sync)?;
        // The handler's first act is to read the clock.
        let (started_tx, started_rx) = mpsc::channel::<Instant>();
        let started_tx = Mutex::new(started_tx);
        let rt = RuntimeBuilder::new(store.namespace("latency")?)
            .log("x", LogConfig::unbounded())
            .handler("t", RetryPolicy::default(), move |_| {
                let now = Instant::now();
                let _ = started_tx.lock().map(|tx| tx.send(now));
                Ok(())
            })
            .subscribe("x", "t")
            .start()?;
        // The baseline: the same journal, another namespace, no runtime; a
        // thread blocked on a channel is woken after the append, as a worker is.
        let plain = store.namespace("latency-baseline")?;
        plain.create_log("x", LogConfig::unbounded())?;
        let (wake_tx, wake_rx) = mpsc::channel::<()>();
        let (woke_tx, woke_rx) = mpsc::channel::<Instant>();
        let waiter = std::thread::spawn(move || {
            while wake_rx.recv().is_ok() {
                if woke_tx.send(Instant::now()).is_err() {
                    break;
                }
            }
        });
        let total = sizes.latency_samples + sizes.latency_warmup;
        let (mut ours_ns, mut raw_ns) = (Vec::with_capacity(total), Vec::with_capacity(total));
        for i in 0..total {
            let value = (i as u64).to_le_bytes();
            let before = Instant::now();
            rt.append("x", &value)?;
            let started =
                started_rx.recv_timeout(IDLE_TIMEOUT).map_err(|_| check_failed("the handler did not start"))?;
            ours_ns.push(nanos(started - before));
            if !rt.wait_idle(IDLE_TIMEOUT) {
                return Err(check_failed("the runtime did not become idle"));
            }
            let before = Instant::now();
            plain.append("x", &value)?;
            wake_tx.send(()).map_err(|_| check_failed("the waiting thread ended"))?;
            let woke =
                woke_rx.recv_timeout(IDLE_TIMEOUT).map_err(|_| check_failed("the waiting thread did not wake"))?;
            raw_ns.push(nanos(woke - before));
        }
        drop(wake_tx);
        let _ = waiter.join();
        rt.stop(IDLE_TIMEOUT);
        ours.push(p50_p99(ours_ns, sizes.latency_warmup));
        raw.push(p50_p99(raw_ns, sizes.latency_warmup));
    }
    Ok((median_each(&ours), median_each(&raw)))
}

fn realtime_ns() -> u128 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

/// The stamp the last `__bench-stamp` process wrote, minus `before`, in ns.
fn stamp_since(file: &Path, before: u128) -> Result<u64> {
    let text = std::fs::read_to_string(file).with_context(|| format!("reading the stamp {}", file.display()))?;
    let stamp: u128 = text.trim().parse().map_err(|_| check_failed(format!("the stamp {text:?} is not a number")))?;
    std::fs::remove_file(file).ok();
    if stamp < before {
        return Err(check_failed("the command's start stamp precedes the append: the clock stepped"));
    }
    Ok(u64::try_from(stamp - before).unwrap_or(u64::MAX))
}

/// External-command trigger latency and the direct-spawn baseline, p50/p99 in ns.
fn command_latency(base: &Path, program: &Path, sizes: &Sizes) -> Result<([f64; 2], [f64; 2])> {
    let (mut ours, mut raw) = (Vec::new(), Vec::new());
    for trial in 0..sizes.trials {
        let store = open_store(base, &format!("command-{trial}"), group())?;
        let stamp = base.join("runtime").join(format!("command-{trial}.stamp"));
        let argv = vec![program.display().to_string(), STAMP_ARG.to_owned(), stamp.display().to_string()];
        let rt = RuntimeBuilder::new(store.namespace("command")?)
            .log("x", LogConfig::unbounded())
            .register(HandlerSpec {
                name: "stamp".into(),
                kind: HandlerKind::Command(argv.clone()),
                retry: RetryPolicy { attempts: 1, ..RetryPolicy::default() },
            })
            .subscribe("x", "stamp")
            .start()?;
        let total = sizes.command_samples + sizes.command_warmup;
        let (mut ours_ns, mut raw_ns) = (Vec::with_capacity(total), Vec::with_capacity(total));
        for i in 0..total {
            let value = (i as u64).to_le_bytes();
            let before = realtime_ns();
            rt.append("x", &value)?;
            if !rt.wait_idle(IDLE_TIMEOUT) {
                return Err(check_failed("the runtime did not become idle"));
            }
            ours_ns.push(stamp_since(&stamp, before)?);
            let before = realtime_ns();
            spawn_directly(&argv, &value)?;
            raw_ns.push(stamp_since(&stamp, before)?);
        }
        rt.stop(IDLE_TIMEOUT);
        ours.push(p50_p99(ours_ns, sizes.command_warmup));
        raw.push(p50_p99(raw_ns, sizes.command_warmup));
    }
    Ok((median_each(&ours), median_each(&raw)))
}

/// The baseline: `argv` spawned as the runtime's `command::run` spawns it
/// (stdin and stderr piped, its own process group), record on stdin, waited for.
fn spawn_directly(argv: &[String], record: &[u8]) -> Result<()> {
    let mut command = Command::new(&argv[0]);
    command.args(&argv[1..]).stdin(Stdio::piped()).stdout(Stdio::inherit()).stderr(Stdio::piped());
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command.spawn().with_context(|| format!("spawning the stamp command {}", argv[0]))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(record); // it exits without reading: fine
    }
    let status = child.wait().with_context(|| format!("waiting for the stamp command {}", argv[0]))?;
    if !status.success() {
        return Err(check_failed(format!("the stamp command failed: {status}")));
    }
    Ok(())
}

struct Workload {
    events_per_s: f64,
    events_per_record: f64,
    /// Median wall time per record with READ/LATEST recorded, and without.
    on_us: f64,
    off_us: f64,
    /// Median over repetitions of (on / off − 1), each rep's on and off run
    /// back to back: less sensitive to drift than the ratio of the medians.
    overhead: f64,
    /// The same from CPU time (all threads), when the OS reports it.
    on_cpu_us: Option<f64>,
    off_cpu_us: Option<f64>,
    cpu_overhead: Option<f64>,
}

/// The handler-heavy workload, READ/LATEST recording on and off alternately.
fn recording_workload(base: &Path, sizes: &Sizes) -> Result<Workload> {
    let (mut on, mut off, mut on_cpu, mut off_cpu) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut rates, mut per_record, mut ratios, mut cpu_ratios) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    #[expect(clippy::cast_precision_loss, reason = "counts to rates")]
    let records = sizes.workload_records as f64;
    for rep in 0..sizes.overhead_reps {
        // Alternate which goes first, so neither always runs on a warmer machine.
        let order = if rep % 2 == 0 { [false, true] } else { [true, false] };
        let mut pair = [(0.0, None); 2];
        for record_reads in order {
            // One worker: what is measured is the cost of the work and its
            // recording, not how two busy cores share four workers.
            let run = workload_once(base, 1, record_reads, Retention::All, sizes.workload_records)?;
            let us = run.elapsed.as_secs_f64() * 1e6 / records;
            #[expect(clippy::cast_precision_loss, reason = "nanoseconds and counts to rates")]
            let cpu_us = run.cpu_ns.map(|ns| ns as f64 / 1e3 / records);
            eprintln!(
                "    workload rep {rep}, READ/LATEST {}: {us:.2} µs/record wall, {} CPU",
                if record_reads { "on" } else { "off" },
                cpu_us.map_or_else(|| "?".into(), |c| format!("{c:.2} µs/record"))
            );
            pair[usize::from(record_reads)] = (us, cpu_us);
            if record_reads {
                on.push(us);
                on_cpu.extend(cpu_us);
                #[expect(clippy::cast_precision_loss, reason = "counts to rates")]
                let events = run.events as f64;
                rates.push(events / run.elapsed.as_secs_f64());
                per_record.push(events / records);
            } else {
                off.push(us);
                off_cpu.extend(cpu_us);
            }
        }
        ratios.push(pair[1].0 / pair[0].0 - 1.0);
        if let (Some(on), Some(off)) = (pair[1].1, pair[0].1) {
            cpu_ratios.push(on / off - 1.0);
        }
    }
    let complete = cpu_ratios.len() == sizes.overhead_reps;
    Ok(Workload {
        events_per_s: median(rates),
        events_per_record: median(per_record),
        on_us: median(on),
        off_us: median(off),
        overhead: median(ratios),
        on_cpu_us: complete.then(|| median(on_cpu)),
        off_cpu_us: complete.then(|| median(off_cpu)),
        cpu_overhead: complete.then(|| median(cpu_ratios)),
    })
}

/// Events/s of the same workload (READ/LATEST on) with the default number of
/// workers: median of `trials` runs.
fn default_workers_events_per_s(base: &Path, sizes: &Sizes) -> Result<(usize, f64)> {
    let workers = RuntimeOptions::default().concurrency;
    let mut rates = Vec::new();
    for _ in 0..sizes.trials {
        let run = workload_once(base, workers, true, Retention::All, sizes.workload_records)?;
        #[expect(clippy::cast_precision_loss, reason = "counts to rates")]
        rates.push(run.events as f64 / run.elapsed.as_secs_f64());
    }
    Ok((workers, median(rates)))
}

/// CPU time used so far by this process's live threads (ns), from
/// `/proc/self/task/*/schedstat` (first field: time on a CPU). `None` where
/// the OS does not report it. Threads that ended are not counted: call it
/// around a region in which no thread ends.
fn cpu_ns() -> Option<u64> {
    let mut total = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let text = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
        total += text.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(total)
}

struct WorkloadRun {
    elapsed: Duration,
    cpu_ns: Option<u64>,
    /// Events written to `_events` during the run.
    events: u64,
    /// Events `_events` holds at the end (all of them without retention).
    events_held: u64,
}

/// Event retention for a workload run.
#[derive(Clone, Copy, Debug)]
enum Retention {
    /// Every event kept.
    All,
    /// `events_keep`.
    Count(u64),
    /// `events_keep_for`.
    Age(Duration),
}

/// `records` appends (batches of [`WORKLOAD_BATCH`]) to a subscribed log,
/// each handled by `latest` + `get` + one `append` to an unsubscribed log;
/// timed until idle, with `workers` workers.
fn workload_once(
    base: &Path,
    workers: usize,
    record_reads: bool,
    retention: Retention,
    records: usize,
) -> Result<WorkloadRun> {
    let store = open_store(base, "workload", group())?;
    let ns = store.namespace("workload")?;
    let mut builder = RuntimeBuilder::new(Arc::clone(&ns));
    match retention {
        Retention::All => {}
        Retention::Count(keep) => builder = builder.events_keep(keep),
        Retention::Age(age) => builder = builder.events_keep_for(age),
    }
    let rt = builder
        .concurrency(workers)
        .record_reads(record_reads)
        .log("in", LogConfig::unbounded())
        .log("out", LogConfig::unbounded())
        .handler("work", RetryPolicy::default(), |ctx| {
            let latest = ctx.latest(ctx.log())?;
            let value = ctx.get(ctx.log(), latest)?;
            ctx.append("out", &value)?;
            Ok(())
        })
        .subscribe("in", "work")
        .start()?;
    let payload = [7u8; 64];
    let batch: Vec<(&str, &[u8])> = vec![("in", &payload[..]); WORKLOAD_BATCH];
    let events_before = ns.latest(EVENTS_LOG)?;
    let cpu_before = cpu_ns();
    let started = Instant::now();
    let mut left = records;
    while left > 0 {
        let n = left.min(WORKLOAD_BATCH);
        rt.append_batch(&batch[..n])?;
        left -= n;
    }
    if !rt.wait_idle(IDLE_TIMEOUT) {
        return Err(check_failed("the runtime did not become idle"));
    }
    let elapsed = started.elapsed();
    let cpu_ns = cpu_before.zip(cpu_ns()).map(|(before, after)| after.saturating_sub(before));
    let events = ns.latest(EVENTS_LOG)? - events_before;
    let events_held = ns.log_info(EVENTS_LOG)?.len();
    check_handled(ns.as_ref(), "out", records)?;
    rt.stop(IDLE_TIMEOUT);
    Ok(WorkloadRun { elapsed, cpu_ns, events, events_held })
}

/// Wall µs per record of the workload with each retention (medians), the
/// medians of the per-rep ratios − 1, and the events held at the end of the
/// count rule's runs (medians).
struct RetentionFigures {
    count: f64,
    age: f64,
    all: f64,
    count_overhead: f64,
    age_overhead: f64,
    held: u64,
    written: u64,
}

/// The workload (READ/LATEST on, one worker) keeping a tenth of its events
/// (`events_keep`), with an age rule of an hour (`events_keep_for`: checked
/// all along, never due), and keeping all, in rotating order.
fn retention_workload(base: &Path, sizes: &Sizes) -> Result<RetentionFigures> {
    let (mut us, mut ratios) = ([Vec::new(), Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
    let (mut held, mut written) = (Vec::new(), Vec::new());
    #[expect(clippy::cast_precision_loss, reason = "counts to rates")]
    let records = sizes.workload_records as f64;
    // About four events per record: keep a tenth of what the run writes.
    let keep = (sizes.workload_records as u64 * 4 / 10).max(100);
    let kinds = [Retention::All, Retention::Count(keep), Retention::Age(Duration::from_secs(3600))];
    for rep in 0..sizes.overhead_reps {
        let mut this = [0.0; 3];
        for k in 0..3 {
            let i = (k + rep) % 3;
            let run = workload_once(base, 1, true, kinds[i], sizes.workload_records)?;
            this[i] = run.elapsed.as_secs_f64() * 1e6 / records;
            eprintln!(
                "    retention rep {rep}, {:?}: {:.2} µs/record wall, {} of {} events held",
                kinds[i], this[i], run.events_held, run.events
            );
            if i == 1 {
                #[expect(clippy::cast_precision_loss, reason = "counts")]
                held.push(run.events_held as f64);
                #[expect(clippy::cast_precision_loss, reason = "counts")]
                written.push(run.events as f64);
            }
        }
        for i in 0..3 {
            us[i].push(this[i]);
        }
        ratios[0].push(this[1] / this[0] - 1.0);
        ratios[1].push(this[2] / this[0] - 1.0);
    }
    let [all, count, age] = us.map(median);
    let [count_overhead, age_overhead] = ratios.map(median);
    #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "medians of counts")]
    Ok(RetentionFigures {
        count,
        age,
        all,
        count_overhead,
        age_overhead,
        held: median(held) as u64,
        written: median(written) as u64,
    })
}

/// Every trigger ran its handler: `log` got one record per input record.
fn check_handled(ns: &dyn Namespace, log: &str, records: usize) -> Result<()> {
    let written = ns.latest(log)?;
    if written != records as u64 {
        return Err(check_failed(format!("{written} of {records} records handled")));
    }
    Ok(())
}

/// Publishes/s with one subscriber (until all handled), and plain appends/s.
fn publish_rate(base: &Path, sizes: &Sizes) -> Result<(f64, f64)> {
    let (mut ours, mut raw) = (Vec::new(), Vec::new());
    for _ in 0..sizes.publish_reps {
        let store = open_store(base, "publish", group())?;
        let ns = store.namespace("publish")?;
        let handled = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&handled);
        let rt = RuntimeBuilder::new(Arc::clone(&ns))
            .concurrency(1)
            .topic("t")
            .handler("sub", RetryPolicy::default(), move |_| {
                counter.fetch_add(1, Ordering::Relaxed);
                Ok(())
            })
            .subscribe("t", "sub")
            .start()?;
        let started = Instant::now();
        for i in 0..sizes.publishes as u64 {
            rt.publish("t", &i.to_le_bytes())?;
        }
        if !rt.wait_idle(IDLE_TIMEOUT) {
            return Err(check_failed("the runtime did not become idle"));
        }
        let elapsed = started.elapsed();
        rt.stop(IDLE_TIMEOUT);
        if handled.load(Ordering::Relaxed) != sizes.publishes as u64 {
            return Err(check_failed(format!(
                "{} of {} publishes handled",
                handled.load(Ordering::Relaxed),
                sizes.publishes
            )));
        }
        #[expect(clippy::cast_precision_loss, reason = "counts to rates")]
        let n = sizes.publishes as f64;
        ours.push(n / elapsed.as_secs_f64());
        // The baseline, on the same namespace once the runtime has stopped.
        ns.create_log("plain", LogConfig::unbounded())?;
        let started = Instant::now();
        for i in 0..sizes.publishes as u64 {
            ns.append("plain", &i.to_le_bytes())?;
        }
        raw.push(n / started.elapsed().as_secs_f64());
    }
    Ok((median(ours), median(raw)))
}
