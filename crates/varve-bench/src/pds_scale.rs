//! PEDaLS at scale (`varve bench pds --scale`): distinct inserts into one
//! red-black sorted map, up to a million keys, on the journal with group
//! commit beside the memory backend.
//!
//! At each size the next `window` inserts are timed one by one (p50, p99,
//! mean) and their log calls counted; the process's resident memory and the
//! journal's bytes on disk per node are read there too. After the run the
//! journal is closed and reopened, and the open timed up to the first read.
//! The paper's claim under test: an update costs about what it costs in
//! memory, growing with the tree's depth (log n), not with its size.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use varve_log::journal::JournalMemory;
use varve_log::{JournalOptions, JournalStore, Limits, MemoryNamespace, Namespace, SyncPolicy};
use varve_pds::testing::CountingNamespace;
use varve_pds::{Options, SortedMap};

use crate::stats::{nanos, percentile};
use crate::table::{Align, Table};
use crate::{fresh_dir, IoContext, Result};

/// What to run.
#[derive(Clone, Debug)]
pub struct ScaleConfig {
    /// Map sizes (keys) at which to measure, ascending.
    pub sizes: Vec<u64>,
    /// Inserts timed at each size.
    pub window: u64,
    /// Extra pointers per node.
    pub extra: u32,
    /// The journal lives in `base/pds-scale` (emptied first, removed after).
    pub base: PathBuf,
    /// Measure the memory backend too.
    pub memory: bool,
    /// The map's node cache ([`Options::node_cache_entries`]).
    pub node_cache_entries: usize,
    /// The journal's [`JournalOptions::checkpoint_bytes_min`].
    pub checkpoint_bytes_min: u64,
    /// The journal's [`JournalOptions::packed_in_file_bytes_min`].
    pub packed_in_file_bytes_min: u64,
}

impl ScaleConfig {
    /// The goal: up to 1,000,000 keys.
    #[must_use]
    pub fn full(base: PathBuf) -> ScaleConfig {
        ScaleConfig {
            sizes: vec![10_000, 40_000, 100_000, 400_000, 1_000_000],
            window: 2_000,
            extra: 5,
            base,
            memory: true,
            node_cache_entries: varve_pds::NODE_CACHE_ENTRIES_DEFAULT,
            checkpoint_bytes_min: JournalOptions::default().checkpoint_bytes_min,
            packed_in_file_bytes_min: JournalOptions::default().packed_in_file_bytes_min,
        }
    }

    /// A smoke run of the same code (seconds).
    #[must_use]
    pub fn quick(base: PathBuf) -> ScaleConfig {
        ScaleConfig {
            sizes: vec![1_000, 4_000],
            window: 200,
            extra: 5,
            base,
            memory: true,
            node_cache_entries: varve_pds::NODE_CACHE_ENTRIES_DEFAULT,
            checkpoint_bytes_min: JournalOptions::default().checkpoint_bytes_min,
            packed_in_file_bytes_min: JournalOptions::default().packed_in_file_bytes_min,
        }
    }
}

/// One size of one backend.
#[derive(Clone, Debug)]
pub struct ScalePoint {
    /// `journal`, `memory`, or an in-memory reference (`imbl OrdMap`,
    /// `std BTreeMap`: no logs, no versions kept).
    pub backend: &'static str,
    /// Keys in the map after the timed window.
    pub keys: u64,
    /// Per insert of the window, in µs.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// The window's wall time over its inserts.
    pub mean_us: f64,
    /// Log calls (gets, latests, appends) per insert (none for references).
    pub calls_per_insert: Option<f64>,
    /// The process's resident set there, in MiB: heap and mapped file pages.
    pub rss_mib: f64,
    /// Its anonymous part (heap, caches), in MiB: what the structure holds.
    /// The rest is the journal's segments mapped for reading, page cache
    /// the kernel reclaims under pressure.
    pub anon_mib: f64,
    /// The journal's segment bytes over the keys (journal only).
    pub disk_bytes_per_key: Option<f64>,
}

/// What [`run`] measured.
#[derive(Clone, Debug, Default)]
pub struct ScaleReport {
    /// Every point, journal first.
    pub points: Vec<ScalePoint>,
    /// Wall time of all the journal's inserts.
    pub journal_seconds: f64,
    /// Wall time of all the memory backend's inserts.
    pub memory_seconds: Option<f64>,
    /// Reopening the journal after the run, to the first read answered.
    pub reopen_seconds: f64,
    /// The same after a crash: the store's files copied while the writer
    /// had them open (as a killed process leaves them), reopened.
    pub crash_reopen_seconds: f64,
    /// Bytes of frames that reopen replayed (after the index checkpoint
    /// the writer saved last, if it loaded one).
    pub crash_replayed_bytes: u64,
    /// Whether that reopen loaded an index checkpoint.
    pub crash_checkpoint: String,
    /// The size of the index checkpoint the crash left (0 if none).
    pub crash_checkpoint_bytes: u64,
    /// The clean close after the run (an fsync and an index checkpoint saved).
    pub close_seconds: f64,
    /// The size of the index checkpoint that close saved.
    pub close_checkpoint_bytes: u64,
    /// Bytes appended per key on the memory backend (payloads plus the
    /// 20-byte record overhead every backend counts).
    pub memory_bytes_per_key: Option<f64>,
    /// The process's peak resident set after the journal's run, in MiB.
    pub journal_peak_rss_mib: f64,
    /// What the journal namespace held in memory after its run, by part.
    pub journal_memory: JournalMemory,
    /// How long [`varve_log::JournalNamespace::memory`] took to count it
    /// (a walk over every log, appends held meanwhile).
    pub journal_memory_seconds: f64,
    /// The process's anonymous resident memory then, in MiB (the journal's
    /// part of it is `journal_memory`; the rest is the node cache, the
    /// allocator's rounding and the freed memory it keeps).
    pub journal_anon_mib: f64,
    /// The same after the namespace idled [`IDLE_SECONDS`] (synced, no
    /// write): what it keeps once work under way in the background (a
    /// pack of small logs) has ended.
    pub journal_idle_anon_mib: f64,
}

/// How long the journal idles before its heap is read again.
pub const IDLE_SECONDS: u64 = 3;

/// In-memory maps timed on the same keys in the same order: what the
/// memory hierarchy alone makes an insert cost as the map grows, for the
/// goal "an insert at 1M within 1.5× of its cost at 10k". `imbl`'s `OrdMap`
/// is a persistent B-tree (path copying, the old version dropped), `std`'s
/// `BTreeMap` an ephemeral one.
fn grow_references(config: &ScaleConfig) -> Vec<ScalePoint> {
    let mut persistent = imbl::OrdMap::<u64, u64>::new();
    let mut ephemeral = std::collections::BTreeMap::<u64, u64>::new();
    let mut points = grow_reference("imbl OrdMap", config, |k, v| {
        persistent.insert(k, v);
    });
    points.extend(grow_reference("std BTreeMap", config, |k, v| {
        ephemeral.insert(k, v);
    }));
    points
}

/// Inserts per timed run of an in-memory reference.
const REFERENCE_RUN: u64 = 20;

#[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
fn grow_reference(backend: &'static str, config: &ScaleConfig, mut insert: impl FnMut(u64, u64)) -> Vec<ScalePoint> {
    let mut points = Vec::new();
    let mut inserted = 0u64;
    for &size in &config.sizes {
        while inserted < size.saturating_sub(config.window).max(inserted) {
            insert(key(inserted), inserted);
            inserted += 1;
        }
        // An insert takes tens of ns, as long as reading the clock: time
        // runs of `REFERENCE_RUN` inserts, each counting as its mean.
        let mut times = Vec::new();
        let window_started = Instant::now();
        while inserted < size {
            let run = REFERENCE_RUN.min(size - inserted);
            let t = Instant::now();
            for _ in 0..run {
                insert(key(inserted), inserted);
                inserted += 1;
            }
            times.push(nanos(t.elapsed()) / run);
        }
        let window = window_started.elapsed();
        times.sort_unstable();
        let n = config.window.min(size).max(1) as f64;
        points.push(ScalePoint {
            backend,
            keys: size,
            p50_us: percentile(&times, 0.5) / 1e3,
            p99_us: percentile(&times, 0.99) / 1e3,
            mean_us: window.as_secs_f64() * 1e6 / n,
            calls_per_insert: None,
            rss_mib: rss_mib().0,
            anon_mib: rss_mib().2,
            disk_bytes_per_key: None,
        });
    }
    points
}

/// Distinct keys in a scattered order (7919 is prime to the modulus, so
/// keys `0..1_000_003` are all different).
#[must_use]
pub fn key(i: u64) -> u64 {
    i * 7919 % 1_000_003
}

/// Resident, peak resident and anonymous resident memory of this process, in MiB.
fn rss_mib() -> (f64, f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next()?.parse::<f64>().ok())
            .map_or(0.0, |kib| kib / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"), field("RssAnon:"))
}

#[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
fn grow(
    backend: &'static str,
    ns: Arc<dyn Namespace>,
    config: &ScaleConfig,
    disk: &dyn Fn() -> Option<u64>,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<(Vec<ScalePoint>, f64, Arc<CountingNamespace>)> {
    let counting = CountingNamespace::new(ns);
    let mut map = SortedMap::<u64, u64>::open(
        counting.clone(),
        "scale",
        Options { extra: config.extra, keep: None, node_cache_entries: config.node_cache_entries },
    )?;
    let last = config.sizes.last().copied().unwrap_or(0);
    let mut points = Vec::new();
    let mut inserted = 0u64;
    let started = Instant::now();
    for &size in &config.sizes {
        let window_start = size.saturating_sub(config.window).max(inserted);
        while inserted < window_start {
            map.insert(&key(inserted), &inserted)?;
            inserted += 1;
            if inserted.is_multiple_of(10_000) {
                progress(backend, inserted, last);
            }
        }
        let calls = |c: varve_pds::testing::Counts| c.gets + c.latests + c.scans + c.appends;
        let calls_before = calls(counting.counts());
        let mut times = Vec::new();
        let window_started = Instant::now();
        while inserted < size {
            let t = Instant::now();
            map.insert(&key(inserted), &inserted)?;
            times.push(nanos(t.elapsed()));
            inserted += 1;
        }
        let window = window_started.elapsed();
        times.sort_unstable();
        let n = times.len().max(1) as f64;
        points.push(ScalePoint {
            backend,
            keys: size,
            p50_us: percentile(&times, 0.5) / 1e3,
            p99_us: percentile(&times, 0.99) / 1e3,
            mean_us: window.as_secs_f64() * 1e6 / n,
            calls_per_insert: Some((calls(counting.counts()) - calls_before) as f64 / n),
            rss_mib: rss_mib().0,
            anon_mib: rss_mib().2,
            disk_bytes_per_key: disk().map(|bytes| bytes as f64 / size as f64),
        });
    }
    Ok((points, started.elapsed().as_secs_f64(), counting))
}

/// Copy the regular files under `from` into `to`, directories included.
/// A file gone as it is copied (the writer's checkpoint thread renamed its
/// temporary file, or the compactor reclaimed a segment) is what a crash at
/// that moment would not have left either: skipped.
fn copy_tree(from: &std::path::Path, to: &std::path::Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("listing {}", from.display()))? {
        let entry = entry.with_context(|| format!("listing {}", from.display()))?;
        let target = to.join(entry.file_name());
        if entry.file_type().with_context(|| format!("reading {}", entry.path().display()))?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            match std::fs::copy(entry.path(), &target) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(e).with_context(|| format!("copying {}", entry.path().display()));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// Run the benchmark; `progress(backend, keys, of)` every 10,000 inserts.
///
/// # Errors
///
/// A log or structure error, or the directory cannot be emptied.
#[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
pub fn run(config: &ScaleConfig, progress: &mut dyn FnMut(&str, u64, u64)) -> Result<ScaleReport> {
    let dir = fresh_dir(&config.base, "pds-scale")?;
    let options = JournalOptions {
        sync: SyncPolicy::Group(Duration::from_millis(5)),
        checkpoint_bytes_min: config.checkpoint_bytes_min,
        packed_in_file_bytes_min: config.packed_in_file_bytes_min,
        ..JournalOptions::default()
    };
    let mut report = ScaleReport::default();
    {
        let store = JournalStore::open(&dir, options)?;
        let journal = store.journal_namespace("scale")?;
        let disk = || Some(journal.disk_usage().0);
        let (points, seconds, _) = grow("journal", Arc::new(journal.clone()), config, &disk, progress)?;
        let counting = Instant::now();
        report.journal_memory = journal.memory();
        report.journal_memory_seconds = counting.elapsed().as_secs_f64();
        report.journal_anon_mib = rss_mib().2;
        journal.sync()?;
        std::thread::sleep(Duration::from_secs(IDLE_SECONDS));
        report.journal_idle_anon_mib = rss_mib().2;
        // What a crash now would leave: every frame written, in the page cache.
        copy_tree(&dir, &fresh_dir(&config.base, "pds-scale-crash")?)?;
        report.crash_checkpoint_bytes =
            std::fs::metadata(config.base.join("pds-scale-crash/scale").join(varve_log::journal::CHECKPOINT_FILE))
                .map_or(0, |m| m.len());
        report.points = points;
        report.journal_seconds = seconds;
        report.journal_peak_rss_mib = rss_mib().1;
        let closing = Instant::now();
        drop(journal);
        drop(store);
        report.close_seconds = closing.elapsed().as_secs_f64();
        report.close_checkpoint_bytes =
            std::fs::metadata(dir.join("scale").join(varve_log::journal::CHECKPOINT_FILE)).map_or(0, |m| m.len());
    }
    let reopened = reopen(&dir, options, config)?;
    report.reopen_seconds = reopened.seconds;
    std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    let crashed = config.base.join("pds-scale-crash");
    let reopened = reopen(&crashed, options, config)?;
    report.crash_reopen_seconds = reopened.seconds;
    report.crash_replayed_bytes = reopened.recovery.bytes;
    report.crash_checkpoint = format!("{:?}", reopened.recovery.checkpoint);
    std::fs::remove_dir_all(&crashed).with_context(|| format!("removing {}", crashed.display()))?;
    if config.memory {
        let memory = Arc::new(MemoryNamespace::new("scale", Limits::default()));
        let (points, seconds, counting) = grow("memory", memory, config, &|| None, progress)?;
        let keys = config.sizes.last().copied().unwrap_or(1).max(1);
        report.memory_bytes_per_key = Some(counting.counts().bytes_appended as f64 / keys as f64);
        report.points.extend(points);
        report.memory_seconds = Some(seconds);
        report.points.extend(grow_references(config));
    }
    Ok(report)
}

/// What [`reopen`] measured.
struct Reopened {
    /// From the open of the store to the first read of the map.
    seconds: f64,
    /// What the journal's open read and found.
    recovery: varve_log::RecoveryReport,
}

/// Open the store in `dir` and the map in it, and read one key: what a
/// user waits for before the first answer.
fn reopen(dir: &std::path::Path, options: JournalOptions, config: &ScaleConfig) -> Result<Reopened> {
    let started = Instant::now();
    let store = JournalStore::open(dir, options)?;
    let journal = store.journal_namespace("scale")?;
    let ns: Arc<dyn Namespace> = Arc::new(journal.clone());
    let map = SortedMap::<u64, u64>::open(
        ns,
        "scale",
        Options { extra: config.extra, keep: None, node_cache_entries: config.node_cache_entries },
    )?;
    std::hint::black_box(map.get(&key(0), None)?);
    let seconds = started.elapsed().as_secs_f64();
    Ok(Reopened { seconds, recovery: journal.recovery_report().clone() })
}

/// One decimal, or three significant digits below 1 µs (the references).
fn micros(us: f64) -> String {
    if us < 1.0 {
        format!("{us:.3}")
    } else {
        format!("{us:.1}")
    }
}

impl ScaleReport {
    /// The points as a Markdown table, with the run's totals below.
    #[must_use]
    #[expect(clippy::cast_precision_loss, reason = "byte counts far below 2^52")]
    pub fn to_markdown(&self) -> String {
        let mut table = Table::new(&[
            ("backend", Align::Left),
            ("keys", Align::Right),
            ("p50 µs", Align::Right),
            ("p99 µs", Align::Right),
            ("mean µs", Align::Right),
            ("log calls / insert", Align::Right),
            ("RSS MiB", Align::Right),
            ("of which heap", Align::Right),
            ("disk B / key", Align::Right),
        ]);
        for p in &self.points {
            table.row(vec![
                p.backend.to_owned(),
                format!("{}", p.keys),
                micros(p.p50_us),
                micros(p.p99_us),
                micros(p.mean_us),
                p.calls_per_insert.map_or_else(|| "–".to_owned(), |c| format!("{c:.1}")),
                format!("{:.0}", p.rss_mib),
                format!("{:.0}", p.anon_mib),
                p.disk_bytes_per_key.map_or_else(|| "–".to_owned(), |b| format!("{b:.0}")),
            ]);
        }
        let mut out = table.to_markdown();
        let _ = writeln!(out, "\np50 at the largest size ÷ p50 at the smallest (the goal: ≤ 1.5× from 10k to 1M):");
        let mut backends: Vec<&str> = self.points.iter().map(|p| p.backend).collect();
        backends.dedup();
        for backend in backends {
            let mut sizes = self.points.iter().filter(|p| p.backend == backend);
            if let (Some(first), Some(last)) = (sizes.next(), sizes.next_back()) {
                let _ = writeln!(
                    out,
                    "- {backend}: {:.2}× ({} → {} keys)",
                    last.p50_us / first.p50_us.max(f64::MIN_POSITIVE),
                    first.keys,
                    last.keys
                );
            }
        }
        let _ = writeln!(
            out,
            "\njournal: all inserts {:.1} s, peak RSS {:.0} MiB, clean close {:.2} s (index checkpoint {:.1} MB), \
             reopen to the first read {:.2} s; \
             after a crash {:.2} s ({:.0} MB of frames replayed after the last index checkpoint, {:.0} MB; {})",
            self.journal_seconds,
            self.journal_peak_rss_mib,
            self.close_seconds,
            self.close_checkpoint_bytes as f64 / 1e6,
            self.reopen_seconds,
            self.crash_reopen_seconds,
            self.crash_replayed_bytes as f64 / 1e6,
            self.crash_checkpoint_bytes as f64 / 1e6,
            self.crash_checkpoint
        );
        let m = &self.journal_memory;
        let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
        let _ = writeln!(
            out,
            "journal memory after the inserts: {:.0} MiB of the {:.0} MiB heap ({:.0} MiB after {IDLE_SECONDS} s idle; \
             {:.0} B per log; {} logs, {} records): \
             log states {:.0}, names {:.0}, indexes {:.0}, lookup tables {:.0}, packed logs {:.0} ({} logs), \
             checkpoint buffer {:.0} MiB; packed logs mapped from a scratch file {:.0} MiB; \
             counted in {:.1} ms",
            mib(m.total()),
            self.journal_anon_mib,
            self.journal_idle_anon_mib,
            m.total() as f64 / m.logs.max(1) as f64,
            m.logs,
            m.records,
            mib(m.log_states),
            mib(m.names),
            mib(m.indexes),
            mib(m.lookup_tables),
            mib(m.packed_logs),
            m.packed,
            mib(m.checkpoint_buffer),
            mib(m.packed_mapped),
            self.journal_memory_seconds * 1e3,
        );
        if let (Some(seconds), Some(bytes)) = (self.memory_seconds, self.memory_bytes_per_key) {
            let _ = writeln!(out, "memory: all inserts {seconds:.1} s, {bytes:.0} B appended per key");
        }
        out
    }
}
