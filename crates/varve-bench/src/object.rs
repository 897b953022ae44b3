//! Versioned objects (`varve bench object`, `make bench-object`): the
//! object store of `varve-object` (`UStore`, `seeds/001_…` §5) on the
//! embedded journal, with group commit (`SyncPolicy::Group(5 ms)`, as `bench
//! log` and `bench pds`: a put returns once its record is written, fsynced
//! within 5 ms), beside baselines measured in the same run:
//!
//! 1. put and get of 1 KiB and 32 KiB values, [`Storage::Complete`] beside
//!    [`Storage::Delta`], on the same data;
//! 2. `history(m)` and `history_values(m)` beside `m` calls of `previous` and
//!    `get` walking the same parents;
//! 3. the paper's Git experiment (§5.2): one 32 KiB text file, 1,000
//!    versions, committed into an object store and into a real `git`
//!    repository (the `git` binary on PATH; skipped, saying so, without one):
//!    commit latency, reading a version at several depths, bytes on disk
//!    after `git gc --aggressive`;
//! 4. `verify` of the head of that chain (which checks every ancestor).
//!
//! Data: every version is the previous one with a few small edits — runs of
//! [`EDIT_RUN_BYTES`] bytes overwritten at random places, about 1 % of the
//! value in all — from a seeded RNG whose seed the report prints. The
//! Complete and Delta stores get the same values.
//!
//! Reads are measured twice: through a store whose value cache holds the
//! values (every put caches its value, so reads after writes hit it), and
//! through a second handle on the same logs opened with no cache
//! (`cache_bytes: 0`), which decodes every value from its record and its
//! delta chain — the fair comparison with `git`, which keeps nothing in
//! memory between commands. Both read from the page cache.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use varve_log::{JournalNamespace, JournalOptions, JournalStore, Namespace, SyncPolicy};
use varve_object::{ObjectOptions, ObjectStore, Storage, Version};

use crate::stats::{median, nanos, p50_p99, percentile};
use crate::table::{ratio_cell, Align, Table};
use crate::{fresh_dir, BenchError, IoContext, Result};

/// Bytes overwritten by one edit; a version changes `len / 100 / EDIT_RUN_BYTES` runs (at least one).
pub const EDIT_RUN_BYTES: usize = 8;

/// The most versions `history(m)` is asked for (m = 1, 2, 4, …, this).
pub const HISTORY_M_MAX: usize = 128;

/// The group-commit delay of the journal measured (as `bench log` and `bench pds`).
const GROUP_COMMIT: Duration = Duration::from_millis(5);

/// The key every figure writes.
const KEY: &str = "doc";

/// The file of the Git experiment.
const GIT_FILE: &str = "file.txt";

/// What to run.
#[derive(Clone, Debug)]
pub struct ObjectBenchOptions {
    /// Directory for the journal and the git repository (deleted after).
    pub dir: PathBuf,
    /// Small counts: a smoke run of seconds, not figures to publish.
    pub quick: bool,
    /// The seed of the values and of the versions read.
    pub seed: u64,
    /// The `git` program (`git`: found on PATH).
    pub git: PathBuf,
    /// Run only one part: `put` (1), `history` (2) or `git` (3 and 4).
    pub only: Option<String>,
}

impl ObjectBenchOptions {
    /// Full sizes, seed 1, `git` from PATH.
    #[must_use]
    pub fn new(dir: PathBuf, quick: bool) -> ObjectBenchOptions {
        ObjectBenchOptions { dir, quick, seed: 1, git: PathBuf::from("git"), only: None }
    }
}

/// How much of everything a run does.
#[derive(Clone, Copy, Debug)]
struct Sizes {
    /// Versions put per value size and storage (part 1).
    puts: usize,
    /// Gets timed per value size and storage.
    gets: usize,
    /// Calls timed per `m` (part 2); the uncached reads a quarter of it.
    history_calls: usize,
    /// Versions of the Git experiment (the paper: 1,000).
    git_versions: usize,
    /// Reads timed per version of each checkout window (git: an eighth of it).
    checkouts: usize,
    /// `verify` calls timed.
    verifies: usize,
}

impl Sizes {
    fn new(quick: bool) -> Sizes {
        if quick {
            Sizes { puts: 60, gets: 60, history_calls: 8, git_versions: 20, checkouts: 3, verifies: 1 }
        } else {
            Sizes { puts: 2000, gets: 2000, history_calls: 400, git_versions: 1000, checkouts: 40, verifies: 5 }
        }
    }
}

/// Put and get figures for one value size and storage (part 1).
#[derive(Clone, Debug)]
pub struct PutGetRow {
    /// Value size in bytes.
    pub value_bytes: usize,
    /// `Complete` or `Delta`.
    pub storage: Storage,
    /// Versions put (one chain).
    pub versions: usize,
    /// Put latency p50 and p99, ns.
    pub put_ns: [f64; 2],
    /// Puts per second, one writer (versions ÷ the sum of put times).
    pub puts_per_s: f64,
    /// Get latency through a store with no value cache, p50 and p99, ns.
    pub get_uncached_ns: [f64; 2],
    /// Gets per second with no value cache, one reader.
    pub gets_uncached_per_s: f64,
    /// Get latency through the store that wrote them (values cached), p50 and p99, ns.
    pub get_cached_ns: [f64; 2],
    /// Journal bytes per version (records of the versions log and their framing).
    pub stored_bytes_per_version: f64,
}

/// `history(m)` beside `m` single steps (part 2), p50s in ns.
#[derive(Clone, Debug)]
pub struct HistoryRow {
    /// Versions asked for.
    pub m: usize,
    /// Versions `history` returned (m on this chain).
    pub returned: usize,
    /// `history(m)`: ids only.
    pub history_ns: f64,
    /// `history_values(m)`, values cached.
    pub history_values_ns: f64,
    /// `m` × (`previous` then `get`), values cached.
    pub walk_ns: f64,
    /// `history_values(m)` with no value cache.
    pub history_values_uncached_ns: f64,
    /// `m` × (`previous` then `get`) with no value cache.
    pub walk_uncached_ns: f64,
}

/// Reads at one depth of the Git experiment's chain: every version of a
/// window of [`CHECKOUT_WINDOW`] consecutive versions (a whole delta-chain
/// cycle at the default `chain_max`, so each window holds versions at every
/// chain position and windows differ only in how deep in history they are).
#[derive(Clone, Debug)]
pub struct CheckoutRow {
    /// `first`, `middle` or `last`.
    pub which: &'static str,
    /// The window's first and last version numbers (1 is the first version).
    pub numbers: (usize, usize),
    /// `get` with no value cache (a fresh handle), p50 over the window's reads, ns.
    pub get_uncached_ns: f64,
    /// The slowest version of the window (its own p50) with no value cache, ns.
    pub get_uncached_worst_ns: f64,
    /// `get` through the handle that wrote the chain (values cached), p50, ns.
    pub get_cached_ns: f64,
    /// `git show SHA:file.txt` after `git gc --aggressive`, p50 over the window; `None` without git.
    pub git_show_ns: Option<f64>,
}

/// Versions per checkout window: `chain_max` + 1 at the default `chain_max` (16).
pub const CHECKOUT_WINDOW: usize = 17;

/// The windows of first, middle and last versions of a chain of `versions`.
fn windows(versions: usize) -> [(&'static str, (usize, usize)); 3] {
    let w = CHECKOUT_WINDOW.min(versions);
    let middle = (versions / 2).saturating_sub(w / 2).max(1);
    [("first", (1, w)), ("middle", (middle, middle + w - 1)), ("last", (versions - w + 1, versions))]
}

/// Read every version of `numbers` `reps` times with `read`: the p50 of all
/// reads, and the highest p50 of one version (ns).
fn time_window(numbers: (usize, usize), reps: usize, mut read: impl FnMut(usize) -> Result<()>) -> Result<(f64, f64)> {
    let mut all = Vec::new();
    let mut worst = 0.0f64;
    for number in numbers.0..=numbers.1 {
        let mut times = Vec::with_capacity(reps);
        for _ in 0..reps.max(1) {
            let started = Instant::now();
            read(number)?;
            times.push(nanos(started.elapsed()));
        }
        times.sort_unstable();
        worst = worst.max(percentile(&times, 0.5));
        all.extend(times);
    }
    all.sort_unstable();
    Ok((percentile(&all, 0.5), worst))
}

/// The Git experiment (part 3).
#[derive(Clone, Debug)]
pub struct GitExperiment {
    /// Versions committed.
    pub versions: usize,
    /// The file's size.
    pub file_bytes: usize,
    /// Put latency p50, Delta storage, ns.
    pub put_delta_p50_ns: f64,
    /// Put latency p50, Complete storage, ns.
    pub put_complete_p50_ns: f64,
    /// Write the file, `git add`, `git commit`: p50, ns; `None` without git.
    pub git_commit_p50_ns: Option<f64>,
    /// `git --version`: what starting a git process costs at least, p50, ns.
    pub git_spawn_p50_ns: Option<f64>,
    /// Reads at three depths.
    pub checkouts: Vec<CheckoutRow>,
    /// Journal bytes of the Delta store's namespace (segment bytes, framing included).
    pub delta_bytes: u64,
    /// The same for the Complete store.
    pub complete_bytes: u64,
    /// Bytes of `.git/objects/pack/*.pack` after `git gc --aggressive`.
    pub git_pack_bytes: Option<u64>,
    /// Bytes of every file under `.git` after gc.
    pub git_dir_bytes: Option<u64>,
    /// The file's bytes times the versions: what storing every version whole takes.
    pub raw_bytes: u64,
    /// Why git was not measured, if it was not.
    pub git_skipped: Option<String>,
}

impl GitExperiment {
    /// The figures of a run that left the Git experiment out (`only`).
    fn not_run() -> GitExperiment {
        GitExperiment {
            versions: 0,
            file_bytes: 0,
            put_delta_p50_ns: 0.0,
            put_complete_p50_ns: 0.0,
            git_commit_p50_ns: None,
            git_spawn_p50_ns: None,
            checkouts: Vec::new(),
            delta_bytes: 0,
            complete_bytes: 0,
            git_pack_bytes: None,
            git_dir_bytes: None,
            raw_bytes: 0,
            git_skipped: Some("not run (--only)".to_owned()),
        }
    }
}

/// `verify` of a chain's head (part 4).
#[derive(Clone, Debug)]
pub struct VerifyRow {
    /// `Complete` or `Delta`.
    pub storage: Storage,
    /// Versions checked per call (the whole chain).
    pub versions: usize,
    /// Versions checked per second, median of the calls.
    pub versions_per_s: f64,
}

/// One goal of the issue, judged.
#[derive(Clone, Debug)]
pub struct Goal {
    /// The goal.
    pub goal: &'static str,
    /// What was measured.
    pub measured: String,
    /// Met, missed, or not measured (`None`).
    pub met: Option<bool>,
}

/// Everything measured.
#[derive(Clone, Debug)]
pub struct ObjectReport {
    /// What was run: sizes, seed, journal, git version.
    pub config_line: String,
    /// Part 1.
    pub put_get: Vec<PutGetRow>,
    /// Part 2.
    pub history: Vec<HistoryRow>,
    /// Part 3.
    pub git: GitExperiment,
    /// Part 4.
    pub verify: Vec<VerifyRow>,
    /// The goals.
    pub goals: Vec<Goal>,
}

/// Values of one key, each the previous one with a few small edits.
struct Versions {
    value: Vec<u8>,
    rng: StdRng,
    text: bool,
}

impl Versions {
    /// A first value of `len` bytes: binary-ish bytes, or with `text` lines of lowercase words.
    fn new(len: usize, seed: u64, text: bool) -> Versions {
        let mut rng = StdRng::seed_from_u64(seed);
        let value = (0..len).map(|i| if text { text_byte(&mut rng, i) } else { rng.gen_range(0..=255u8) }).collect();
        Versions { value, rng, text }
    }

    /// The current value.
    fn value(&self) -> &[u8] {
        &self.value
    }

    /// Move to the next version: overwrite about 1 % of the bytes, in runs of
    /// [`EDIT_RUN_BYTES`] at random places (line ends of text stay).
    fn advance(&mut self) {
        let len = self.value.len();
        let runs = (len / 100 / EDIT_RUN_BYTES).max(1);
        for _ in 0..runs {
            let start = self.rng.gen_range(0..len.saturating_sub(EDIT_RUN_BYTES).max(1));
            for i in start..(start + EDIT_RUN_BYTES).min(len) {
                if self.text {
                    if self.value[i] != b'\n' {
                        self.value[i] = text_byte(&mut self.rng, 1);
                    }
                } else {
                    self.value[i] = self.rng.gen();
                }
            }
        }
    }
}

/// A byte of text: a newline every 64 bytes, otherwise a lowercase letter
/// or (one in six) a space.
fn text_byte(rng: &mut StdRng, at: usize) -> u8 {
    if at % 64 == 63 {
        b'\n'
    } else if rng.gen_ratio(1, 6) {
        b' '
    } else {
        rng.gen_range(b'a'..=b'z')
    }
}

fn storage_name(storage: Storage) -> &'static str {
    match storage {
        Storage::Complete => "Complete",
        Storage::Delta => "Delta",
    }
}

/// An object store in a fresh namespace of `store`, and the namespace.
fn open_objects(
    store: &JournalStore,
    ns_name: &str,
    options: ObjectOptions,
) -> Result<(ObjectStore, JournalNamespace)> {
    let journal = store.journal_namespace(ns_name)?;
    let ns: Arc<dyn Namespace> = Arc::new(journal.clone());
    Ok((ObjectStore::open_with(ns, "bench", options)?, journal))
}

/// A second handle on the same logs with no value cache: every read decodes.
fn uncached(journal: &JournalNamespace, storage: Storage) -> Result<ObjectStore> {
    let ns: Arc<dyn Namespace> = Arc::new(journal.clone());
    Ok(ObjectStore::open_with(ns, "bench", ObjectOptions { storage, cache_bytes: 0, ..ObjectOptions::default() })?)
}

/// Put `count` versions of `values` as one chain, each timed; the versions, oldest first.
fn put_chain(objects: &ObjectStore, values: &mut Versions, count: usize, times: &mut Vec<u64>) -> Result<Vec<Version>> {
    let mut chain: Vec<Version> = Vec::with_capacity(count);
    for i in 0..count {
        if i > 0 {
            values.advance();
        }
        let base = chain.last().map(|v| v.id);
        let started = Instant::now();
        let version = objects.put(KEY, base.as_ref(), values.value())?;
        times.push(nanos(started.elapsed()));
        chain.push(version);
    }
    Ok(chain)
}

/// Get latency samples (ns) of `count` random versions of `chain`.
fn time_gets(objects: &ObjectStore, chain: &[Version], count: usize, seed: u64) -> Result<Vec<u64>> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut times = Vec::with_capacity(count);
    for _ in 0..count {
        let version = &chain[rng.gen_range(0..chain.len())];
        let started = Instant::now();
        let value = objects.get(KEY, &version.id)?;
        times.push(nanos(started.elapsed()));
        std::hint::black_box(value);
    }
    Ok(times)
}

#[expect(clippy::cast_precision_loss, reason = "counts and nanoseconds to rates")]
fn per_second(samples: &[u64]) -> f64 {
    let total: u64 = samples.iter().sum();
    samples.len() as f64 / (total as f64 / 1e9)
}

/// Part 1.
#[expect(clippy::cast_precision_loss, reason = "bytes per version")]
fn put_get(store: &JournalStore, sizes: Sizes, seed: u64) -> Result<Vec<PutGetRow>> {
    let mut rows = Vec::new();
    for value_bytes in [1024usize, 32 * 1024] {
        for storage in [Storage::Complete, Storage::Delta] {
            let ns_name = format!("put-{value_bytes}-{}", storage_name(storage).to_lowercase());
            let (objects, journal) =
                open_objects(store, &ns_name, ObjectOptions { storage, ..ObjectOptions::default() })?;
            let before = journal.disk_usage().0;
            let mut values = Versions::new(value_bytes, seed, false);
            let mut put_times = Vec::with_capacity(sizes.puts);
            let chain = put_chain(&objects, &mut values, sizes.puts, &mut put_times)?;
            let stored = journal.disk_usage().0 - before;
            let puts_per_s = per_second(&put_times);
            let cold = uncached(&journal, storage)?;
            let uncached_times = time_gets(&cold, &chain, sizes.gets, seed)?;
            let gets_uncached_per_s = per_second(&uncached_times);
            let cached_times = time_gets(&objects, &chain, sizes.gets, seed)?;
            let row = PutGetRow {
                value_bytes,
                storage,
                versions: chain.len(),
                put_ns: p50_p99(put_times, 0),
                puts_per_s,
                get_uncached_ns: p50_p99(uncached_times, 0),
                gets_uncached_per_s,
                get_cached_ns: p50_p99(cached_times, 0),
                stored_bytes_per_version: stored as f64 / chain.len() as f64,
            };
            eprintln!(
                "  {value_bytes} B {}: put p50 {:.1} µs, get p50 {:.1} µs uncached / {:.1} µs cached, {:.0} B/version",
                storage_name(storage),
                row.put_ns[0] / 1e3,
                row.get_uncached_ns[0] / 1e3,
                row.get_cached_ns[0] / 1e3,
                row.stored_bytes_per_version
            );
            rows.push(row);
        }
    }
    Ok(rows)
}

/// The p50 (ns) of `calls` runs of `f`.
fn p50_of(calls: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let mut times = Vec::with_capacity(calls);
    for _ in 0..calls.max(1) {
        let started = Instant::now();
        f()?;
        times.push(nanos(started.elapsed()));
    }
    times.sort_unstable();
    Ok(percentile(&times, 0.5))
}

/// `m` steps down from `head`: `previous`, then `get` of that parent.
fn walk(objects: &ObjectStore, head: &Version, m: usize) -> Result<usize> {
    let mut at = head.id;
    let mut steps = 0;
    while steps < m {
        let parents = objects.previous(KEY, &at)?;
        let [parent] = parents.as_slice() else { break };
        std::hint::black_box(objects.get(KEY, &parent.id)?);
        at = parent.id;
        steps += 1;
    }
    Ok(steps)
}

/// Part 2: a chain of `HISTORY_M_MAX + 1` versions of 1 KiB, Delta storage.
fn history(store: &JournalStore, sizes: Sizes, seed: u64) -> Result<Vec<HistoryRow>> {
    let (objects, journal) = open_objects(store, "history", ObjectOptions::default())?;
    let mut values = Versions::new(1024, seed, false);
    let chain = put_chain(&objects, &mut values, HISTORY_M_MAX + 1, &mut Vec::new())?;
    let head = *chain.last().ok_or_else(|| BenchError::Check("an empty chain".into()))?;
    let cold = uncached(&journal, Storage::Delta)?;
    let uncached_calls = (sizes.history_calls / 4).max(1);
    let mut rows = Vec::new();
    let mut m = 1;
    while m <= HISTORY_M_MAX {
        let returned = objects.history(KEY, &head.id, m)?.len();
        let steps = walk(&objects, &head, m)?;
        if returned != m || steps != m {
            return Err(BenchError::Check(format!("history({m}) returned {returned} versions, the walk took {steps}")));
        }
        let row = HistoryRow {
            m,
            returned,
            history_ns: p50_of(sizes.history_calls, || {
                std::hint::black_box(objects.history(KEY, &head.id, m)?);
                Ok(())
            })?,
            history_values_ns: p50_of(sizes.history_calls, || {
                std::hint::black_box(objects.history_values(KEY, &head.id, m)?);
                Ok(())
            })?,
            walk_ns: p50_of(sizes.history_calls, || walk(&objects, &head, m).map(|_| ()))?,
            history_values_uncached_ns: p50_of(uncached_calls, || {
                std::hint::black_box(cold.history_values(KEY, &head.id, m)?);
                Ok(())
            })?,
            walk_uncached_ns: p50_of(uncached_calls, || walk(&cold, &head, m).map(|_| ()))?,
        };
        eprintln!(
            "  history({m}): {:.1} µs ids, {:.1} µs values; walk {:.1} µs; uncached {:.1} / {:.1} µs",
            row.history_ns / 1e3,
            row.history_values_ns / 1e3,
            row.walk_ns / 1e3,
            row.history_values_uncached_ns / 1e3,
            row.walk_uncached_ns / 1e3
        );
        rows.push(row);
        m *= 2;
    }
    Ok(rows)
}

/// A `git` command in `repo` with a fixed identity and no system or user configuration.
fn git(program: &Path, repo: &Path, home: &Path) -> Command {
    let mut command = Command::new(program);
    command
        .current_dir(repo)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.invalid")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.invalid")
        // One gc, the explicit one after the commits, so no commit pays for an automatic one.
        .args(["-c", "gc.auto=0"])
        .stdin(Stdio::null());
    command
}

/// Run `command`; its stdout, or an error naming `what`.
fn run_git(mut command: Command, what: &str) -> Result<Vec<u8>> {
    let output = command.output().map_err(|e| BenchError::External(format!("git {what}: {e}")))?;
    if !output.status.success() {
        return Err(BenchError::External(format!(
            "git {what} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(output.stdout)
}

/// `git --version`, or why git cannot be run.
fn git_version(program: &Path) -> std::result::Result<String, String> {
    match Command::new(program).arg("--version").stdin(Stdio::null()).output() {
        Ok(out) if out.status.success() => Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned()),
        Ok(out) => Err(format!("`{} --version` failed ({})", program.display(), out.status)),
        Err(e) => Err(format!("`{}` could not be run ({e}): is git on PATH?", program.display())),
    }
}

/// Total bytes of the files under `dir`.
fn dir_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
        let meta = entry.metadata().with_context(|| format!("reading {}", entry.path().display()))?;
        total += if meta.is_dir() { dir_bytes(&entry.path())? } else { meta.len() };
    }
    Ok(total)
}

/// The git side of part 3: commit every version, gc, then time `git show` in each window.
struct GitSide {
    commit_p50_ns: f64,
    spawn_p50_ns: f64,
    /// p50 of `git show` per window.
    show_p50_ns: Vec<f64>,
    pack_bytes: u64,
    dir_bytes: u64,
}

fn git_side(
    program: &Path,
    base: &Path,
    seed: u64,
    file_bytes: usize,
    sizes: Sizes,
    windows: &[(usize, usize)],
) -> Result<GitSide> {
    let repo = fresh_dir(base, "git")?;
    let home = fresh_dir(base, "git-home")?;
    let mut init = git(program, &repo, &home);
    init.args(["init", "-q"]);
    run_git(init, "init")?;
    let file = repo.join(GIT_FILE);
    let mut values = Versions::new(file_bytes, seed, true);
    let mut times = Vec::with_capacity(sizes.git_versions);
    for i in 0..sizes.git_versions {
        if i > 0 {
            values.advance();
        }
        let started = Instant::now();
        std::fs::write(&file, values.value()).with_context(|| format!("writing {}", file.display()))?;
        let mut add = git(program, &repo, &home);
        add.args(["add", GIT_FILE]);
        run_git(add, "add")?;
        let mut commit = git(program, &repo, &home);
        commit.args(["commit", "-q", "-m", &format!("version {}", i + 1)]);
        run_git(commit, "commit")?;
        times.push(nanos(started.elapsed()));
    }
    let mut list = git(program, &repo, &home);
    list.args(["rev-list", "--reverse", "HEAD"]);
    let shas: Vec<String> = String::from_utf8_lossy(&run_git(list, "rev-list")?).lines().map(str::to_owned).collect();
    if shas.len() != sizes.git_versions {
        return Err(BenchError::Check(format!("git holds {} commits, not {}", shas.len(), sizes.git_versions)));
    }
    let mut gc = git(program, &repo, &home);
    gc.args(["gc", "--aggressive", "-q"]);
    run_git(gc, "gc --aggressive")?;
    let pack_dir = repo.join(".git/objects/pack");
    let mut pack_bytes = 0;
    for entry in std::fs::read_dir(&pack_dir).with_context(|| format!("listing {}", pack_dir.display()))? {
        let entry = entry.with_context(|| format!("listing {}", pack_dir.display()))?;
        if entry.path().extension().is_some_and(|e| e == "pack") {
            pack_bytes += entry.metadata().with_context(|| format!("reading {}", entry.path().display()))?.len();
        }
    }
    let dot_git_bytes = dir_bytes(&repo.join(".git"))?;
    let mut show_p50_ns = Vec::new();
    // A git read costs a process start (milliseconds): fewer reads per version than ours.
    let reads_per_version = (sizes.checkouts / 8).max(1);
    for &numbers in windows {
        let (p50, _) = time_window(numbers, reads_per_version, |number| {
            let spec = format!("{}:{GIT_FILE}", shas[number - 1]);
            let mut show = git(program, &repo, &home);
            show.args(["show", &spec]);
            let out = run_git(show, "show")?;
            if out.len() == file_bytes {
                Ok(())
            } else {
                Err(BenchError::Check(format!("git show {spec} gave {} bytes, not {file_bytes}", out.len())))
            }
        })?;
        show_p50_ns.push(p50);
    }
    let spawn_p50_ns = p50_of(sizes.checkouts, || {
        let mut version = git(program, &repo, &home);
        version.arg("--version");
        run_git(version, "--version").map(|_| ())
    })?;
    std::fs::remove_dir_all(&repo).ok();
    std::fs::remove_dir_all(&home).ok();
    Ok(GitSide { commit_p50_ns: p50_p99(times, 0)[0], spawn_p50_ns, show_p50_ns, pack_bytes, dir_bytes: dot_git_bytes })
}

/// Part 3 and part 4 (verify runs on the chains part 3 writes).
fn git_experiment(
    store: &JournalStore,
    options: &ObjectBenchOptions,
    sizes: Sizes,
) -> Result<(GitExperiment, Vec<VerifyRow>)> {
    let file_bytes = 32 * 1024;
    let versions = sizes.git_versions;
    let windows = windows(versions);
    let mut put_p50 = Vec::new();
    let mut stored = Vec::new();
    let mut verify = Vec::new();
    let mut checkouts: Vec<CheckoutRow> = Vec::new();
    for storage in [Storage::Delta, Storage::Complete] {
        let ns_name = format!("git-{}", storage_name(storage).to_lowercase());
        let (objects, journal) = open_objects(store, &ns_name, ObjectOptions { storage, ..ObjectOptions::default() })?;
        let mut values = Versions::new(file_bytes, options.seed, true);
        let mut times = Vec::with_capacity(versions);
        let chain = put_chain(&objects, &mut values, versions, &mut times)?;
        put_p50.push(p50_p99(times, 0)[0]);
        journal.sync()?;
        // The whole namespace: its three logs' records, framing and catalog.
        stored.push(journal.disk_usage().0);
        if storage == Storage::Delta {
            let cold = uncached(&journal, storage)?;
            for (which, numbers) in windows {
                let (get_uncached_ns, get_uncached_worst_ns) = time_window(numbers, sizes.checkouts, |number| {
                    std::hint::black_box(cold.get(KEY, &chain[number - 1].id)?);
                    Ok(())
                })?;
                let (get_cached_ns, _) = time_window(numbers, sizes.checkouts, |number| {
                    std::hint::black_box(objects.get(KEY, &chain[number - 1].id)?);
                    Ok(())
                })?;
                checkouts.push(CheckoutRow {
                    which,
                    numbers,
                    get_uncached_ns,
                    get_uncached_worst_ns,
                    get_cached_ns,
                    git_show_ns: None,
                });
            }
        }
        let head = chain.last().ok_or_else(|| BenchError::Check("an empty chain".into()))?.id;
        let mut rates = Vec::new();
        for _ in 0..sizes.verifies {
            let started = Instant::now();
            let report = objects.verify(KEY, &head)?;
            if report.versions != versions {
                return Err(BenchError::Check(format!("verify checked {} of {versions} versions", report.versions)));
            }
            rates.push(crate::stats::rate(report.versions as u64, started.elapsed()));
        }
        verify.push(VerifyRow { storage, versions, versions_per_s: median(rates) });
    }
    let mut experiment = GitExperiment {
        versions,
        file_bytes,
        put_delta_p50_ns: put_p50[0],
        put_complete_p50_ns: put_p50[1],
        git_commit_p50_ns: None,
        git_spawn_p50_ns: None,
        checkouts,
        delta_bytes: stored[0],
        complete_bytes: stored[1],
        git_pack_bytes: None,
        git_dir_bytes: None,
        raw_bytes: (file_bytes * versions) as u64,
        git_skipped: None,
    };
    if let Err(reason) = git_version(&options.git) {
        eprintln!("  git experiment: git not measured: {reason}");
        experiment.git_skipped = Some(reason);
    } else {
        let numbers: Vec<(usize, usize)> = windows.iter().map(|w| w.1).collect();
        let side = git_side(&options.git, &options.dir, options.seed, file_bytes, sizes, &numbers)?;
        experiment.git_commit_p50_ns = Some(side.commit_p50_ns);
        experiment.git_spawn_p50_ns = Some(side.spawn_p50_ns);
        experiment.git_pack_bytes = Some(side.pack_bytes);
        experiment.git_dir_bytes = Some(side.dir_bytes);
        for (row, show) in experiment.checkouts.iter_mut().zip(side.show_p50_ns) {
            row.git_show_ns = Some(show);
        }
    }
    eprintln!(
        "  git experiment: put p50 {:.1} µs, git commit p50 {}, {} B journal vs {} B pack",
        experiment.put_delta_p50_ns / 1e3,
        experiment.git_commit_p50_ns.map_or_else(|| "-".to_owned(), |ns| format!("{:.0} µs", ns / 1e3)),
        experiment.delta_bytes,
        experiment.git_pack_bytes.map_or_else(|| "-".to_owned(), |b| b.to_string()),
    );
    Ok((experiment, verify))
}

/// Run the benchmark.
pub fn run(options: &ObjectBenchOptions) -> Result<ObjectReport> {
    let sizes = Sizes::new(options.quick);
    std::fs::create_dir_all(&options.dir).with_context(|| format!("creating {}", options.dir.display()))?;
    let journal_dir = fresh_dir(&options.dir, "object-journal")?;
    let git_line = git_version(&options.git).unwrap_or_else(|reason| format!("no git: {reason}"));
    let config_line = format!(
        "seed {}; edits: {}-byte runs at random places, ~1 % of each value per version; \
         embedded journal in {}, SyncPolicy::Group({} ms); ObjectOptions default (zstd level 3, chain_max 16, \
         64 MiB value cache); {}{}",
        options.seed,
        EDIT_RUN_BYTES,
        journal_dir.display(),
        GROUP_COMMIT.as_millis(),
        git_line,
        if options.quick { "; --quick: a smoke run, not figures to publish" } else { "" },
    );
    eprintln!("varve bench object: {config_line}");
    let store = JournalStore::open(
        &journal_dir,
        JournalOptions { sync: SyncPolicy::Group(GROUP_COMMIT), ..JournalOptions::default() },
    )?;
    let wanted = |part: &str| options.only.as_deref().is_none_or(|only| only == part);
    let put_get = if wanted("put") { put_get(&store, sizes, options.seed)? } else { Vec::new() };
    let history = if wanted("history") { history(&store, sizes, options.seed)? } else { Vec::new() };
    let (git, verify) =
        if wanted("git") { git_experiment(&store, options, sizes)? } else { (GitExperiment::not_run(), Vec::new()) };
    drop(store);
    std::fs::remove_dir_all(&journal_dir).ok();
    let goals = goals(&history, &git);
    Ok(ObjectReport { config_line, put_get, history, git, verify, goals })
}

/// Judge the goals.
#[expect(clippy::cast_precision_loss, reason = "byte counts to ratios")]
fn goals(history: &[HistoryRow], git: &GitExperiment) -> Vec<Goal> {
    let mut goals = Vec::new();
    if let Some(row) = history.iter().find(|r| r.m == 32) {
        for (goal, ns) in [
            ("history(32) ≤ 20 µs embedded: `history` (ids)", row.history_ns),
            ("the same with values: `history_values(32)`, values in the store's cache", row.history_values_ns),
            ("the same with values: `history_values(32)`, no value cache", row.history_values_uncached_ns),
        ] {
            goals.push(Goal {
                goal,
                measured: format!(
                    "{:.1} µs p50 (walk: {:.1} µs cached, {:.1} µs uncached)",
                    ns / 1e3,
                    row.walk_ns / 1e3,
                    row.walk_uncached_ns / 1e3
                ),
                met: Some(ns <= 20_000.0),
            });
        }
    }
    if git.checkouts.is_empty() {
        return goals;
    }
    // A read decodes at most log2(place) + 1 skip-deltas (capped by
    // chain_max), so it costs more for the first versions than for later
    // ones, and then stops growing: the goal compares the middle of the
    // history with its end, where a cost that grew with the history's
    // length would show.
    let by_name = |name: &str| git.checkouts.iter().find(|c| c.which == name).map(|c| c.get_uncached_ns);
    let growth = match (by_name("middle"), by_name("last")) {
        (Some(middle), Some(last)) => Some(last / middle),
        _ => None,
    };
    goals.push(Goal {
        goal: "checkout of any version independent of history length (no value cache; last window's p50 ÷ middle window's ≤ 1.5; a read decodes at most log2(place) + 1 ≤ chain_max deltas)",
        measured: format!(
            "{}; last ÷ middle {}",
            git.checkouts
                .iter()
                .map(|c| format!("{} {:.1} µs (worst version {:.1} µs)", c.which, c.get_uncached_ns / 1e3, c.get_uncached_worst_ns / 1e3))
                .collect::<Vec<_>>()
                .join(", "),
            growth.map_or_else(|| "-".to_owned(), |g| format!("{g:.2}"))
        ),
        met: growth.map(|g| g <= 1.5),
    });
    goals.push(match git.git_pack_bytes {
        Some(pack) => Goal {
            goal: "storage ≤ 1.5× git gc --aggressive's pack",
            measured: format!(
                "{} B journal ÷ {pack} B pack = {:.2}×",
                git.delta_bytes,
                git.delta_bytes as f64 / pack as f64
            ),
            met: Some(git.delta_bytes as f64 <= 1.5 * pack as f64),
        },
        None => {
            Goal {
                goal: "storage ≤ 1.5× git gc --aggressive's pack", measured: "git not measured".into(), met: None
            }
        }
    });
    goals.push(match git.git_commit_p50_ns {
        Some(commit) => Goal {
            goal: "commit ≥ 10× faster than git commit",
            measured: format!(
                "put {:.1} µs, git add + commit {:.0} µs (p50): {:.0}×",
                git.put_delta_p50_ns / 1e3,
                commit / 1e3,
                commit / git.put_delta_p50_ns
            ),
            met: Some(commit >= 10.0 * git.put_delta_p50_ns),
        },
        None => Goal { goal: "commit ≥ 10× faster than git commit", measured: "git not measured".into(), met: None },
    });
    goals
}

fn us(ns: f64) -> String {
    format!("{:.1} µs", ns / 1e3)
}

impl ObjectReport {
    /// The figures as Markdown tables (`docs/benchmarks.md`, "Versioned objects"); parts not run are left out.
    #[must_use]
    pub fn to_markdown(&self) -> String {
        let mut out = format!("{}\n\n", self.config_line);
        if !self.put_get.is_empty() {
            out.push_str(&self.put_get_markdown());
            out.push('\n');
        }
        if !self.history.is_empty() {
            out.push_str(&self.history_markdown());
            out.push('\n');
        }
        if self.git.versions > 0 {
            out.push_str(&self.git_markdown());
            out.push('\n');
        }
        out.push_str(&self.goals_markdown());
        out
    }

    /// Part 1.
    fn put_get_markdown(&self) -> String {
        let mut out = String::new();
        out.push_str("Put and get (one chain per row, the same values for Complete and Delta):\n\n");
        let mut table = Table::new(&[
            ("value", Align::Left),
            ("storage", Align::Left),
            ("versions", Align::Right),
            ("put p50", Align::Right),
            ("put p99", Align::Right),
            ("puts/s", Align::Right),
            ("get p50 uncached", Align::Right),
            ("get p99 uncached", Align::Right),
            ("gets/s uncached", Align::Right),
            ("get p50 cached", Align::Right),
            ("journal B/version", Align::Right),
            ("put, Delta ÷ Complete", Align::Right),
            ("bytes, Delta ÷ Complete", Align::Right),
        ]);
        for row in &self.put_get {
            let complete =
                self.put_get.iter().find(|r| r.value_bytes == row.value_bytes && r.storage == Storage::Complete);
            let (put_ratio, bytes_ratio) = match (row.storage, complete) {
                (Storage::Delta, Some(c)) => (
                    ratio_cell(row.put_ns[0] / c.put_ns[0], false),
                    ratio_cell(row.stored_bytes_per_version / c.stored_bytes_per_version, false),
                ),
                _ => ("-".into(), "-".into()),
            };
            table.row(vec![
                format!("{} KiB", row.value_bytes / 1024),
                storage_name(row.storage).into(),
                row.versions.to_string(),
                us(row.put_ns[0]),
                us(row.put_ns[1]),
                format!("{:.0}", row.puts_per_s),
                us(row.get_uncached_ns[0]),
                us(row.get_uncached_ns[1]),
                format!("{:.0}", row.gets_uncached_per_s),
                us(row.get_cached_ns[0]),
                format!("{:.0}", row.stored_bytes_per_version),
                put_ratio,
                bytes_ratio,
            ]);
        }
        out.push_str(&table.to_markdown());
        out
    }

    /// Part 2.
    fn history_markdown(&self) -> String {
        let mut out = format!(
            "history(m) on a chain of {} versions of 1 KiB (Delta), p50; walk = m × (previous + get):\n\n",
            HISTORY_M_MAX + 1
        );
        let mut table = Table::new(&[
            ("m", Align::Right),
            ("history (ids)", Align::Right),
            ("history_values", Align::Right),
            ("walk", Align::Right),
            ("history_values ÷ walk", Align::Right),
            ("history_values uncached", Align::Right),
            ("walk uncached", Align::Right),
            ("uncached: history_values ÷ walk", Align::Right),
        ]);
        for row in &self.history {
            table.row(vec![
                row.m.to_string(),
                us(row.history_ns),
                us(row.history_values_ns),
                us(row.walk_ns),
                ratio_cell(row.history_values_ns / row.walk_ns, false),
                us(row.history_values_uncached_ns),
                us(row.walk_uncached_ns),
                ratio_cell(row.history_values_uncached_ns / row.walk_uncached_ns, false),
            ]);
        }
        out.push_str(&table.to_markdown());
        out
    }

    /// Parts 3 and 4.
    #[expect(clippy::cast_precision_loss, reason = "byte counts to ratios")]
    fn git_markdown(&self) -> String {
        let git = &self.git;
        let mut out = format!(
            "The Git experiment (§5.2): one {} KiB text file, {} versions; git reads with `git show SHA:{GIT_FILE}` after `git gc --aggressive`:\n\n",
            git.file_bytes / 1024,
            git.versions
        );
        if let Some(reason) = &git.git_skipped {
            let _ = write!(out, "git not measured: {reason}\n\n");
        }
        let dash = || "-".to_owned();
        let mut table = Table::new(&[
            ("figure", Align::Left),
            ("object store", Align::Right),
            ("git", Align::Right),
            ("git ÷ object store", Align::Right),
        ]);
        table.row(vec![
            "commit p50 (put, Delta; git: write + add + commit)".into(),
            us(git.put_delta_p50_ns),
            git.git_commit_p50_ns.map_or_else(dash, us),
            git.git_commit_p50_ns.map_or_else(dash, |g| format!("{:.0}×", g / git.put_delta_p50_ns)),
        ]);
        table.row(vec![
            "commit p50 (put, Complete)".into(),
            us(git.put_complete_p50_ns),
            git.git_commit_p50_ns.map_or_else(dash, us),
            git.git_commit_p50_ns.map_or_else(dash, |g| format!("{:.0}×", g / git.put_complete_p50_ns)),
        ]);
        for c in &git.checkouts {
            let versions = format!("versions {}–{} ({})", c.numbers.0, c.numbers.1, c.which);
            table.row(vec![
                format!("read {versions} p50, no value cache"),
                us(c.get_uncached_ns),
                c.git_show_ns.map_or_else(dash, us),
                c.git_show_ns.map_or_else(dash, |g| format!("{:.0}×", g / c.get_uncached_ns)),
            ]);
            table.row(vec![
                format!("read {versions}: slowest version's p50, no value cache"),
                us(c.get_uncached_worst_ns),
                "-".into(),
                "-".into(),
            ]);
            table.row(vec![format!("read {versions} p50, value cached"), us(c.get_cached_ns), "-".into(), "-".into()]);
        }
        table.row(vec![
            "starting git (`git --version`) p50".into(),
            "-".into(),
            git.git_spawn_p50_ns.map_or_else(dash, us),
            "-".into(),
        ]);
        let bytes_ratio = |ours: u64| {
            git.git_pack_bytes.map_or_else(dash, |pack| format!("{:.2} (ours ÷ pack)", ours as f64 / pack as f64))
        };
        table.row(vec![
            "bytes: Delta journal / git pack".into(),
            git.delta_bytes.to_string(),
            git.git_pack_bytes.map_or_else(dash, |b| b.to_string()),
            bytes_ratio(git.delta_bytes),
        ]);
        table.row(vec![
            "bytes: Complete journal / git pack".into(),
            git.complete_bytes.to_string(),
            git.git_pack_bytes.map_or_else(dash, |b| b.to_string()),
            bytes_ratio(git.complete_bytes),
        ]);
        table.row(vec![
            "bytes: all of .git after gc".into(),
            "-".into(),
            git.git_dir_bytes.map_or_else(dash, |b| b.to_string()),
            "-".into(),
        ]);
        table.row(vec!["bytes: every version whole".into(), git.raw_bytes.to_string(), "-".into(), "-".into()]);
        out.push_str(&table.to_markdown());
        out.push_str("\nverify of the head (every ancestor recomputed from its stored bytes), median:\n\n");
        let mut table =
            Table::new(&[("storage", Align::Left), ("versions", Align::Right), ("versions/s", Align::Right)]);
        for row in &self.verify {
            table.row(vec![
                storage_name(row.storage).into(),
                row.versions.to_string(),
                format!("{:.0}", row.versions_per_s),
            ]);
        }
        out.push_str(&table.to_markdown());
        out
    }

    /// The goals.
    fn goals_markdown(&self) -> String {
        let mut out = String::new();
        out.push_str("Goals:\n\n");
        let mut table = Table::new(&[("goal", Align::Left), ("measured", Align::Left), ("", Align::Left)]);
        for goal in &self.goals {
            let verdict = match goal.met {
                Some(true) => "met",
                Some(false) => "**missed**",
                None => "not measured",
            };
            table.row(vec![goal.goal.into(), goal.measured.clone(), verdict.into()]);
        }
        out.push_str(&table.to_markdown());
        out
    }
}
