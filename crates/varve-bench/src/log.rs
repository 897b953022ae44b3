//! The Log's throughput, latency and recovery figures (`varve bench log`,
//! `make bench`), each beside a baseline measured in the same run on the
//! same disk.
//!
//! Baselines are the machine's own ceiling for the same work:
//! - appends: a plain file written sequentially with the same bytes (one
//!   `write` per record) and the same fsync policy (`fdatasync` after every
//!   record for Always, every `max_delay` for Group, never for Never);
//! - `get`: `pread` of the same number of bytes at the same kind of offsets
//!   from a plain file in the page cache;
//! - open: reading every byte of the same segment files;
//! - a long log (`--only long`): appends/s over its last 2M records against
//!   its first 2M (what a writer loses as segments accumulate), and the
//!   longest append against the same run with index checkpoints saved only
//!   at the close (what saving them while writing holds appends for).
//!
//! Every figure is the median of several trials, run alternately (ours,
//! baseline, ours, …) so drift on a noisy machine hits both alike. Progress
//! lines go to stderr as each figure is measured.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use varve_log::{JournalNamespace, JournalOptions, LogConfig, Namespace, SyncPolicy};

use crate::stats::{median, percentile, rate};
use crate::table::{ratio_cell, Align, Table};
use crate::{fresh_dir, IoContext, Result};

/// What to run.
pub struct BenchOptions {
    /// Directory for the scratch files (on the disk you want to measure).
    pub dir: PathBuf,
    /// Fewer trials and smaller data: a smoke run, not figures to publish.
    pub quick: bool,
    /// Size of the journal for the open/recovery measurement.
    pub open_bytes: u64,
    /// Run only this part: `append`, `get`, `open` or `long`.
    pub only: Option<String>,
}

/// One figure beside its baseline.
#[derive(Clone, Debug)]
pub struct Row {
    /// What was measured: operation, record size, sync policy, …
    pub what: String,
    /// The Log's figure (the median of the trials), in `unit`.
    pub ours: f64,
    /// The plain-file baseline's figure, in `unit`, measured in the same run.
    pub baseline: f64,
    /// The unit of `ours` and `baseline`: `rec/s`, `ns` or `s`.
    pub unit: &'static str,
    /// For rates of records: bytes per record, to show MB/s beside.
    pub record_bytes: Option<usize>,
    /// For rates higher is better; for latencies lower is better.
    pub higher_is_better: bool,
}

impl Row {
    /// ours / baseline.
    #[must_use]
    pub fn ratio(&self) -> f64 {
        self.ours / self.baseline
    }
}

/// Every figure measured, in run order.
#[derive(Clone, Debug, Default)]
pub struct LogReport {
    /// One row per figure.
    pub rows: Vec<Row>,
}

/// Run the benchmark (the parts `options.only` selects).
pub fn run(options: &BenchOptions) -> Result<LogReport> {
    std::fs::create_dir_all(&options.dir).with_context(|| format!("creating {}", options.dir.display()))?;
    let trials = if options.quick { 1 } else { 5 };
    let budget = if options.quick { Duration::from_millis(200) } else { Duration::from_millis(1500) };
    let mut rows = Vec::new();
    eprintln!("varve bench log: scratch in {}, {trials} trial(s) per figure", options.dir.display());
    let wanted = |part: &str| options.only.as_deref().is_none_or(|only| only == part);
    let group = SyncPolicy::Group(Duration::from_millis(5));
    for size in [64usize, 1024, 65536].into_iter().filter(|_| wanted("append")) {
        for sync in [SyncPolicy::Always, group, SyncPolicy::Never] {
            let (mut ours, mut raw) = (Vec::new(), Vec::new());
            for trial in 0..trials {
                ours.push(append_rate(&options.dir, size, sync, budget, trial)?);
                raw.push(raw_write_rate(&options.dir, size, sync, budget)?);
            }
            let (ours, raw) = (median(ours), median(raw));
            eprintln!("  append {size:>5} B {:<12} {ours:>12.0}/s   raw {raw:>12.0}/s", sync_name(sync));
            rows.push(Row {
                what: format!("append {size} B records, {}", sync_name(sync)),
                ours,
                baseline: raw,
                unit: "rec/s",
                record_bytes: Some(size),
                higher_is_better: true,
            });
        }
    }
    let records: u64 = if options.quick { 20_000 } else { 1_000_000 };
    for (size, random) in [(64usize, true), (64, false), (1024, true)].into_iter().filter(|_| wanted("get")) {
        let (mut ours50, mut ours99, mut raw50, mut raw99) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let dir = options.dir.join("get");
        let ns = fill_for_reads(&dir, size, records)?;
        let raw = dir.join("raw.bin");
        fill_raw(&raw, size, records)?;
        for trial in 0..trials {
            let (p50, p99) = get_latency(&ns, records, random, trial)?;
            ours50.push(p50);
            ours99.push(p99);
            let (p50, p99) = raw_pread_latency(&raw, size, records, random, trial)?;
            raw50.push(p50);
            raw99.push(p99);
        }
        drop(ns);
        std::fs::remove_dir_all(&dir).ok();
        let kind = if random { "random" } else { "sequential" };
        for (label, ours, raw) in [("p50", ours50, raw50), ("p99", ours99, raw99)] {
            let (ours, raw) = (median(ours), median(raw));
            eprintln!("  get {size} B {kind} {label}: {ours:.0} ns   raw pread {raw:.0} ns");
            rows.push(Row {
                what: format!("get {size} B, {kind}, {label}, page cache ({records} records)"),
                ours,
                baseline: raw,
                unit: "ns",
                record_bytes: None,
                higher_is_better: false,
            });
        }
    }
    for size in [1024usize, 65536].into_iter().filter(|_| wanted("open")) {
        let (ours, raw, recovered) = open_time(&options.dir, size, options.open_bytes, trials)?;
        eprintln!(
            "  open {} MiB of {size} B records: {ours:.3} s   raw read {raw:.3} s ({recovered} records)",
            options.open_bytes >> 20
        );
        rows.push(Row {
            what: format!(
                "open {} MiB journal of {size} B records ({recovered} records), page cache",
                options.open_bytes >> 20
            ),
            ours,
            baseline: raw,
            unit: "s",
            record_bytes: None,
            higher_is_better: false,
        });
    }
    if wanted("long") {
        rows.extend(long_log(&options.dir, options.quick)?);
    }
    if wanted("many") {
        rows.push(many_logs(&options.dir, options.quick)?);
    }
    Ok(LogReport { rows })
}

/// One log grown to 16M records of 64 B (400k with `quick`), `Never`, in
/// segments of 1 MiB, so that it spans about 1,000 of them, as a 64 GB log
/// does in the default 64 MiB segments. Two rows: appends/s over the last
/// 2M records against the first 2M, and the longest append against the
/// same run with checkpoints saved only at the close.
fn long_log(base: &Path, quick: bool) -> Result<Vec<Row>> {
    let (records, window) = if quick { (400_000u64, 100_000u64) } else { (16_000_000, 2_000_000) };
    // (appends/s over the first window, over the last, the longest append in µs, segments at the end)
    let grow = |checkpoint_bytes_min: u64| -> Result<(f64, f64, f64, usize)> {
        let dir = fresh_dir(base, "long")?;
        let options = JournalOptions {
            sync: SyncPolicy::Never,
            segment_bytes_max: 1 << 20,
            checkpoint_bytes_min,
            ..JournalOptions::default()
        };
        let ns = JournalNamespace::open(&dir, "bench", options)?;
        ns.create_log("b", LogConfig::unbounded())?;
        let value = payload(64, 0);
        let (mut longest, mut window_started, mut first_rate) = (Duration::ZERO, Instant::now(), 0.0);
        for i in 1..=records {
            let started = Instant::now();
            ns.append("b", &value)?;
            longest = longest.max(started.elapsed());
            if i == window {
                first_rate = rate(window, window_started.elapsed());
            }
            if i == records - window {
                window_started = Instant::now();
            }
        }
        let last_rate = rate(window, window_started.elapsed());
        drop(ns);
        let segments = std::fs::read_dir(&dir)
            .with_context(|| format!("listing {}", dir.display()))?
            .filter(|entry| entry.as_ref().is_ok_and(|e| e.path().extension().is_some_and(|x| x == "seg")))
            .count();
        std::fs::remove_dir_all(&dir).ok();
        Ok((first_rate, last_rate, longest.as_secs_f64() * 1e6, segments))
    };
    let (first, last, longest, segments) = grow(JournalOptions::default().checkpoint_bytes_min)?;
    let (_, _, longest_at_close, _) = grow(1 << 40)?;
    let millions =
        |n: u64| if n.is_multiple_of(1_000_000) { format!("{}M", n / 1_000_000) } else { format!("{}k", n / 1000) };
    eprintln!(
        "  long log: {last:.0}/s over the last {} of {} records, {first:.0}/s over the first; longest append {longest:.0} µs ({longest_at_close:.0} µs with checkpoints at the close only)",
        millions(window),
        millions(records)
    );
    Ok(vec![
        Row {
            what: format!(
                "append 64 B, Never: the last {} of {} records ({segments} segments of 1 MiB) against the first",
                millions(window),
                millions(records),
            ),
            ours: last,
            baseline: first,
            unit: "rec/s",
            record_bytes: Some(64),
            higher_is_better: true,
        },
        Row {
            what: format!(
                "longest append of those {}, checkpoints saved as it writes against at the close only",
                millions(records)
            ),
            ours: longest,
            baseline: longest_at_close,
            unit: "µs",
            record_bytes: None,
            higher_is_better: false,
        },
    ])
}

/// Appends in a namespace of 400k logs (20k with `quick`), each created
/// with one record, as a PEDaLS map's LinkLogs are: 4 KB appends round the
/// logs, group commit, until segments roll (each new segment's header
/// restates every log) and index checkpoints are saved (each encodes every
/// log's index while appends wait). One row: the longest append against
/// the same appends in a namespace of one log.
fn many_logs(base: &Path, quick: bool) -> Result<Row> {
    let (logs, appends) = if quick { (20_000usize, 12_000usize) } else { (400_000, 120_000) };
    // Small segments: a segment then rolls at 16 times its header's size.
    let options = JournalOptions {
        sync: SyncPolicy::Group(Duration::from_millis(5)),
        segment_bytes_max: 1 << 20,
        ..JournalOptions::default()
    };
    let segments = |dir: &Path| -> Result<usize> {
        Ok(std::fs::read_dir(dir)
            .with_context(|| format!("listing {}", dir.display()))?
            .filter(|entry| entry.as_ref().is_ok_and(|e| e.path().extension().is_some_and(|x| x == "seg")))
            .count())
    };
    // (the longest append in µs, segments rolled during the appends)
    let run = |logs: usize| -> Result<(f64, usize)> {
        let dir = fresh_dir(base, "many")?;
        let ns = JournalNamespace::open(&dir, "bench", options)?;
        let names: Vec<String> = (0..logs).map(|i| format!("s.link.{i:08}")).collect();
        for name in &names {
            ns.create_log(name, LogConfig::unbounded())?;
            ns.append(name, &payload(40, 0))?;
        }
        let before = segments(&dir)?;
        let value = payload(4096, 1);
        let mut longest = Duration::ZERO;
        for i in 0..appends {
            let started = Instant::now();
            ns.append(&names[i % logs], &value)?;
            longest = longest.max(started.elapsed());
        }
        let rolled = segments(&dir)? - before;
        drop(ns);
        std::fs::remove_dir_all(&dir).ok();
        Ok((longest.as_secs_f64() * 1e6, rolled))
    };
    let (ours, rolled) = run(logs)?;
    let (alone, _) = run(1)?;
    eprintln!("  many logs: longest append {ours:.0} µs among {logs} logs ({rolled} rolls), {alone:.0} µs in one log");
    Ok(Row {
        what: format!(
            "longest of {appends} appends of 4 KB, Group(5ms), in a namespace of {logs} logs ({rolled} segments rolled) against one of 1 log"
        ),
        ours,
        baseline: alone,
        unit: "µs",
        record_bytes: None,
        higher_is_better: false,
    })
}

fn sync_name(sync: SyncPolicy) -> String {
    match sync {
        SyncPolicy::Always => "Always".into(),
        SyncPolicy::Group(d) => format!("Group({}ms)", d.as_millis()),
        SyncPolicy::Never => "Never".into(),
    }
}

impl LogReport {
    /// The figures as a Markdown table (`docs/benchmarks.md`, "The Log").
    #[must_use]
    pub fn to_markdown(&self) -> String {
        let value = |v: f64, row: &Row| -> String {
            match row.record_bytes {
                #[expect(clippy::cast_precision_loss, reason = "record size")]
                Some(bytes) => format!("{v:.0} {} ({:.1} MB/s)", row.unit, v * bytes as f64 / 1e6),
                None if row.unit == "s" => format!("{v:.3} s"),
                None => format!("{v:.0} {}", row.unit),
            }
        };
        let mut table = Table::new(&[
            ("measurement", Align::Left),
            ("varve", Align::Right),
            ("baseline", Align::Right),
            ("varve / baseline", Align::Right),
        ]);
        for row in &self.rows {
            table.row(vec![
                row.what.clone(),
                value(row.ours, row),
                value(row.baseline, row),
                ratio_cell(row.ratio(), row.higher_is_better),
            ]);
        }
        table.to_markdown()
    }
}

fn payload(size: usize, trial: usize) -> Vec<u8> {
    (0..size).map(|i| i.wrapping_mul(31).wrapping_add(trial).to_le_bytes()[0]).collect()
}

/// Appends per second into a fresh journal for about `budget`, then `sync`.
fn append_rate(base: &Path, size: usize, sync: SyncPolicy, budget: Duration, trial: usize) -> Result<f64> {
    let dir = fresh_dir(base, "append")?;
    let options = JournalOptions { sync, ..JournalOptions::default() };
    let ns = JournalNamespace::open(&dir, "bench", options)?;
    ns.create_log("b", LogConfig::unbounded())?;
    let value = payload(size, trial);
    let started = Instant::now();
    let mut count = 0u64;
    loop {
        for _ in 0..64 {
            ns.append("b", &value)?;
        }
        count += 64;
        if started.elapsed() >= budget {
            break;
        }
    }
    ns.sync()?;
    let elapsed = started.elapsed();
    drop(ns);
    std::fs::remove_dir_all(&dir).ok();
    Ok(rate(count, elapsed))
}

/// The ceiling: the same bytes written with plain `write` calls and the same
/// fsync policy.
fn raw_write_rate(base: &Path, size: usize, sync: SyncPolicy, budget: Duration) -> Result<f64> {
    let dir = fresh_dir(base, "raw")?;
    let path = dir.join("raw.bin");
    let mut file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&path)
        .with_context(|| format!("creating {}", path.display()))?;
    let failed = || format!("writing {}", path.display());
    let value = payload(size, 0);
    let started = Instant::now();
    let mut last_sync = started;
    let mut count = 0u64;
    loop {
        for _ in 0..64 {
            file.write_all(&value).with_context(failed)?;
            match sync {
                SyncPolicy::Always => file.sync_data().with_context(failed)?,
                SyncPolicy::Group(delay) if last_sync.elapsed() >= delay => {
                    file.sync_data().with_context(failed)?;
                    last_sync = Instant::now();
                }
                _ => {}
            }
        }
        count += 64;
        if started.elapsed() >= budget {
            break;
        }
    }
    file.sync_data().with_context(failed)?;
    let elapsed = started.elapsed();
    drop(file);
    std::fs::remove_dir_all(&dir).ok();
    Ok(rate(count, elapsed))
}

fn fill_for_reads(dir: &Path, size: usize, records: u64) -> Result<JournalNamespace> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("clearing {}", dir.display()))?;
    }
    let options = JournalOptions { sync: SyncPolicy::Never, ..JournalOptions::default() };
    let ns = JournalNamespace::open(dir, "bench", options)?;
    ns.create_log("r", LogConfig::unbounded())?;
    let value = payload(size, 0);
    let batch: Vec<(&str, &[u8])> = vec![("r", &value); 1000];
    for _ in 0..records / 1000 {
        ns.append_batch(&batch)?;
    }
    Ok(ns)
}

fn fill_raw(path: &Path, size: usize, records: u64) -> Result<()> {
    let failed = || format!("writing {}", path.display());
    let mut file = std::io::BufWriter::new(File::create(path).with_context(failed)?);
    let value = payload(size, 0);
    for _ in 0..records {
        file.write_all(&value).with_context(failed)?;
    }
    file.flush().with_context(failed)?;
    Ok(())
}

const GETS_PER_TRIAL: usize = 200_000;

fn seqs(records: u64, random: bool, trial: usize) -> Vec<u64> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(trial as u64);
    (0..GETS_PER_TRIAL as u64).map(|i| if random { rng.gen_range(1..=records) } else { i % records + 1 }).collect()
}

/// p50 and p99 of single `get` calls, in nanoseconds.
fn get_latency(ns: &JournalNamespace, records: u64, random: bool, trial: usize) -> Result<(f64, f64)> {
    let mut times = Vec::with_capacity(GETS_PER_TRIAL);
    for seq in seqs(records, random, trial) {
        let started = Instant::now();
        let value = ns.get("r", seq)?;
        times.push(u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX));
        std::hint::black_box(value);
    }
    times.sort_unstable();
    Ok((percentile(&times, 0.5), percentile(&times, 0.99)))
}

fn raw_pread_latency(path: &Path, size: usize, records: u64, random: bool, trial: usize) -> Result<(f64, f64)> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut times = Vec::with_capacity(GETS_PER_TRIAL);
    for seq in seqs(records, random, trial) {
        let started = Instant::now();
        // Allocate per read as `get` does, so the baseline does the same work.
        let mut buf = vec![0; size];
        file.read_exact_at(&mut buf, (seq - 1) * size as u64).with_context(|| format!("reading {}", path.display()))?;
        times.push(u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX));
        std::hint::black_box(buf);
    }
    times.sort_unstable();
    Ok((percentile(&times, 0.5), percentile(&times, 0.99)))
}

/// Seconds to open a journal of `bytes` by replaying its frames (median),
/// seconds to read the same files start to end, and the records recovered.
fn open_time(base: &Path, size: usize, bytes: u64, trials: usize) -> Result<(f64, f64, u64)> {
    let dir = fresh_dir(base, "open")?;
    {
        let options = JournalOptions { sync: SyncPolicy::Never, ..JournalOptions::default() };
        let ns = JournalNamespace::open(&dir, "bench", options)?;
        ns.create_log("o", LogConfig::unbounded())?;
        let value = payload(size, 0);
        let per_batch = (1 << 20) / (size + 20);
        let batch: Vec<(&str, &[u8])> = vec![("o", &value); per_batch];
        let batches = bytes / ((size as u64 + 20) * per_batch as u64);
        for _ in 0..batches.max(1) {
            ns.append_batch(&batch)?;
        }
        ns.close()?;
    }
    let files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    let (mut ours, mut raw) = (Vec::new(), Vec::new());
    let mut recovered = 0;
    for _ in 0..trials.max(3) {
        // The open after a crash, which replays every frame: without the
        // index checkpoint the last clean close saved (whose load `bench
        // pds --scale` times).
        match std::fs::remove_file(dir.join(varve_log::journal::CHECKPOINT_FILE)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("removing the checkpoint in {}", dir.display()));
            }
            _ => {}
        }
        let started = Instant::now();
        let ns = JournalNamespace::open(&dir, "bench", JournalOptions::default())?;
        ours.push(started.elapsed().as_secs_f64());
        recovered = ns.recovery_report().records;
        drop(ns);
        let started = Instant::now();
        let mut total = 0;
        for file in &files {
            total += std::fs::read(file).with_context(|| format!("reading {}", file.display()))?.len();
        }
        std::hint::black_box(total);
        raw.push(started.elapsed().as_secs_f64());
    }
    std::fs::remove_dir_all(&dir).ok();
    Ok((median(ours), median(raw), recovered))
}
