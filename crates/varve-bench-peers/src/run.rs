//! The measurement loop: for each durability level and trial, each store in
//! turn is filled, closed, measured on disk, reopened and read, then its
//! directory is deleted. Stores take turns within a trial (journal, redb,
//! fjall, SQLite, RocksDB, then the next trial) so that drift on a shared
//! machine hits them alike; each figure is the median of the trials.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use rand::{Rng, RngCore, SeedableRng};
use varve_bench::fresh_dir;
use varve_bench::stats::{median, nanos, p50_p99, rate};

use crate::stores::{Kind, Level, Peer};

/// Bytes of every record's value.
pub const VALUE_BYTES: usize = 100;
/// Records in one batch of the batch-append shape (one transaction each).
pub const BATCH_RECORDS: usize = 100;
/// Distinct values, used in turn: enough that no store sees repeats close together.
const VALUE_POOL: usize = 1 << 16;
/// Timed random gets per trial, after [`GETS_WARMUP`] untimed ones.
pub const GETS: usize = 10_000;
/// Untimed random gets before the timed ones (after an untimed full scan).
pub const GETS_WARMUP: usize = 1_000;

/// How much to write at each level, and how many trials.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// Trials of every shape; figures are their medians.
    pub trials: usize,
    /// Single-record appends per trial at none, fsync per append and group commit.
    pub singles: [u64; 3],
    /// Records appended in batches of [`BATCH_RECORDS`] per trial, per level as `singles`.
    pub batched: [u64; 3],
}

impl Sizes {
    /// The published run: a few minutes on 2 cores.
    pub const FULL: Sizes =
        Sizes { trials: 3, singles: [200_000, 20_000, 20_000], batched: [500_000, 100_000, 100_000] };
    /// A smoke run of the same code: a tenth of the records, one trial.
    pub const QUICK: Sizes = Sizes { trials: 1, singles: [20_000, 2_000, 2_000], batched: [50_000, 10_000, 10_000] };

    fn index(level: Level) -> usize {
        match level {
            Level::None => 0,
            Level::Fsync => 1,
            Level::Group => 2,
        }
    }

    /// Single-record appends per trial at `level`.
    pub fn singles(&self, level: Level) -> u64 {
        self.singles[Self::index(level)]
    }

    /// Records appended in batches per trial at `level`.
    pub fn batched(&self, level: Level) -> u64 {
        self.batched[Self::index(level)]
    }
}

/// The figures of one store at one level: each the median of the trials.
#[derive(Clone, Copy, Debug, Default)]
pub struct Figures {
    /// Single-record appends per second.
    pub appends_per_s: f64,
    /// Records per second appended in batches of [`BATCH_RECORDS`].
    pub batch_records_per_s: f64,
    /// Random `get` latency from the page cache, p50, microseconds.
    pub get_p50_us: f64,
    /// Random `get` latency from the page cache, p99, microseconds.
    pub get_p99_us: f64,
    /// Full scan, value bytes per second, MB/s (10^6).
    pub scan_mb_per_s: f64,
    /// Disk use of the store's directory after close (as `du`), per record.
    pub disk_bytes_per_record: f64,
}

/// Deterministic pseudo-random values, [`VALUE_BYTES`] each, from a seed.
pub struct Values {
    pool: Vec<u8>,
}

impl Values {
    /// [`VALUE_POOL`] values drawn from a generator seeded with `seed`.
    pub fn new(seed: u64) -> Values {
        let mut pool = vec![0; VALUE_POOL * VALUE_BYTES];
        rand::rngs::StdRng::seed_from_u64(seed).fill_bytes(&mut pool);
        Values { pool }
    }

    /// The `i`-th value (the pool in turn).
    pub fn get(&self, i: u64) -> &[u8] {
        #[expect(clippy::cast_possible_truncation, reason = "the remainder is below VALUE_POOL")]
        let at = (i % VALUE_POOL as u64) as usize * VALUE_BYTES;
        &self.pool[at..at + VALUE_BYTES]
    }
}

/// One trial of `kind` at `level`: fill a fresh directory under `base`,
/// close, measure its disk use, reopen, read, close, delete it. `seed` and
/// `trial` pick the gets' seqs.
pub fn measure(
    base: &Path,
    kind: Kind,
    level: Level,
    sizes: &Sizes,
    values: &Values,
    seed: u64,
    trial: usize,
) -> Result<Figures> {
    let dir = fresh_dir(base, &format!("peers-{}", kind.label().to_lowercase()))?;
    let (singles, batched) = (sizes.singles(level), sizes.batched(level));
    let total = singles + batched;

    let peer = kind.open(&dir, level)?;
    let elapsed = append_singles(peer.as_ref(), level.threads(), singles, values)?;
    let appends_per_s = rate(singles, elapsed);
    let elapsed = append_batches(peer.as_ref(), level.threads(), singles, batched, values)?;
    let batch_records_per_s = rate(batched, elapsed);
    peer.close()?;
    #[expect(clippy::cast_precision_loss, reason = "bytes to a ratio")]
    let disk_bytes_per_record = disk_bytes(&dir)? as f64 / total as f64;

    let peer = kind.open(&dir, level)?;
    // Warm-up: every page into the cache, then some gets.
    let (records, _) = peer.scan()?;
    ensure!(records == total, "{} holds {records} records after {total} appends", kind.label());
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ (trial as u64));
    for _ in 0..GETS_WARMUP {
        peer.get(rng.gen_range(1..=total))?;
    }
    let mut samples = Vec::with_capacity(GETS);
    for _ in 0..GETS {
        let seq = rng.gen_range(1..=total);
        let started = Instant::now();
        let len = peer.get(seq)?;
        samples.push(nanos(started.elapsed()));
        ensure!(len == VALUE_BYTES, "{} returned {len} bytes for record {seq}", kind.label());
    }
    let [p50, p99] = p50_p99(samples, 0);
    let started = Instant::now();
    let (records, bytes) = peer.scan()?;
    let scan_elapsed = started.elapsed();
    ensure!(records == total, "{} scanned {records} records of {total}", kind.label());
    #[expect(clippy::cast_precision_loss, reason = "bytes to a rate")]
    let scan_mb_per_s = bytes as f64 / 1e6 / scan_elapsed.as_secs_f64();
    peer.close()?;
    std::fs::remove_dir_all(&dir).with_context(|| format!("deleting {}", dir.display()))?;

    Ok(Figures {
        appends_per_s,
        batch_records_per_s,
        get_p50_us: p50 / 1e3,
        get_p99_us: p99 / 1e3,
        scan_mb_per_s,
        disk_bytes_per_record,
    })
}

/// The median of each figure across trials.
pub fn median_figures(trials: &[Figures]) -> Figures {
    let of = |f: fn(&Figures) -> f64| median(trials.iter().map(f).collect());
    Figures {
        appends_per_s: of(|t| t.appends_per_s),
        batch_records_per_s: of(|t| t.batch_records_per_s),
        get_p50_us: of(|t| t.get_p50_us),
        get_p99_us: of(|t| t.get_p99_us),
        scan_mb_per_s: of(|t| t.scan_mb_per_s),
        disk_bytes_per_record: of(|t| t.disk_bytes_per_record),
    }
}

/// `count` single-record appends from `threads` threads (a share each);
/// the time until the last returned.
fn append_singles(peer: &dyn Peer, threads: usize, count: u64, values: &Values) -> Result<Duration> {
    let started = Instant::now();
    on_threads(threads, count, |thread_first, thread_count| {
        for i in thread_first..thread_first + thread_count {
            peer.append(values.get(i))?;
        }
        Ok(())
    })?;
    Ok(started.elapsed())
}

/// `count` records in batches of [`BATCH_RECORDS`] from `threads` threads,
/// values from `values.get(first)` on; the time until the last returned.
fn append_batches(peer: &dyn Peer, threads: usize, first: u64, count: u64, values: &Values) -> Result<Duration> {
    let batches = count / BATCH_RECORDS as u64;
    ensure!(batches * BATCH_RECORDS as u64 == count, "{count} records is not a whole number of batches");
    let started = Instant::now();
    on_threads(threads, batches, |thread_first, thread_count| {
        let mut batch = Vec::with_capacity(BATCH_RECORDS);
        for b in thread_first..thread_first + thread_count {
            batch.clear();
            let at = first + b * BATCH_RECORDS as u64;
            batch.extend((at..at + BATCH_RECORDS as u64).map(|i| values.get(i)));
            peer.append_batch(&batch)?;
        }
        Ok(())
    })?;
    Ok(started.elapsed())
}

/// Run `work(first, count)` on `threads` threads that split `0..total`
/// between them (on this thread when there is one).
fn on_threads(threads: usize, total: u64, work: impl Fn(u64, u64) -> Result<()> + Sync) -> Result<()> {
    if threads == 1 {
        return work(0, total);
    }
    let share = total.div_ceil(threads as u64);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads as u64)
            .map(|t| {
                let (first, end) = ((t * share).min(total), ((t + 1) * share).min(total));
                let work = &work;
                scope.spawn(move || work(first, end - first))
            })
            .collect();
        handles.into_iter().try_for_each(|h| h.join().expect("an appending thread panicked"))
    })
}

/// Bytes the files under `dir` take on disk (allocated blocks, as `du`).
pub fn disk_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
        let meta = entry.metadata().with_context(|| format!("reading {}", entry.path().display()))?;
        total += if meta.is_dir() { disk_bytes(&entry.path())? } else { meta.blocks() * 512 };
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_seeded_and_distinct() {
        let (a, b) = (Values::new(7), Values::new(7));
        assert_eq!(a.get(3), b.get(3));
        assert_ne!(a.get(3), a.get(4));
        assert_eq!(a.get(3), a.get(3 + VALUE_POOL as u64));
        assert_ne!(Values::new(8).get(3), a.get(3));
    }

    #[test]
    fn threads_split_the_range_exactly() {
        let seen = std::sync::Mutex::new(Vec::new());
        on_threads(4, 10, |first, count| {
            seen.lock().expect("not poisoned").extend(first..first + count);
            Ok(())
        })
        .expect("no work fails");
        let mut seen = seen.into_inner().expect("not poisoned");
        seen.sort_unstable();
        assert_eq!(seen, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn disk_bytes_counts_nested_files() {
        let dir = std::env::temp_dir().join(format!("varve-bench-peers-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).expect("temp dir");
        std::fs::write(dir.join("a"), [1u8; 5000]).expect("write");
        std::fs::write(dir.join("sub/b"), [1u8; 10]).expect("write");
        let bytes = disk_bytes(&dir).expect("readable");
        std::fs::remove_dir_all(&dir).expect("cleanup");
        assert!(bytes >= 5010, "{bytes}");
    }
}
