//! The PEDaLS paper's evaluation (§V, Figures 4–6; `varve bench pds`,
//! `make bench-pds`): generated workloads (§V-A) on the list, the
//! paper's BST and the balanced tree, for several `extra`, on the embedded
//! journal (group commit) and on the memory backend (the paper's
//! "persistent-n" baseline), with ephemeral std baselines (`BTreeSet`, `Vec`)
//! measured in the same run. Also sorted inserts, where the paper's BST
//! degenerates and the balanced tree does not.
//!
//! Figures: bytes stored per update is the slope of Figure 4 (bytes of every
//! appended record, plus the journal's 20-byte per-record framing, divided
//! by updates — DataLog, LinkLogs, APLog and op log all count); µs per
//! update is Figure 5 (including the search each update does); µs per
//! access is Figure 6 (the list's last node, the tree's maximum, on the
//! latest version). Medians across workloads.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use varve_log::{JournalNamespace, JournalOptions, JournalStore, Limits, MemoryNamespace, Namespace, SyncPolicy};
use varve_pds::testing::CountingNamespace;
use varve_pds::workload::{generate, parse, WorkloadOp};
use varve_pds::{Options, SortedSet, Structure, VersionedList};

use crate::stats::median;
use crate::table::{Align, Table};
use crate::{IoContext, Result};

/// What to run.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// Generated workloads per variant (the paper: 100).
    pub workloads: usize,
    /// Operations per workload (the paper: 1,000).
    pub ops: usize,
    /// Extra pointers (the paper: 1, 5, 10).
    pub extras: Vec<u32>,
    /// The structures measured (default: list, BST and balanced tree).
    pub structures: Vec<Structure>,
    /// Where the journal goes (a temporary directory when `None`).
    pub dir: Option<PathBuf>,
    /// First workload seed; workload i uses `seed + i`.
    pub seed: u64,
    /// Accesses timed per workload (median taken).
    pub accesses: usize,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            workloads: 100,
            ops: 1000,
            extras: vec![1, 5, 10],
            structures: vec![Structure::List, Structure::Bst, Structure::Balanced],
            dir: None,
            seed: 1,
            accesses: 15,
        }
    }
}

/// One line of the results.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchRow {
    /// `list`, `bst`, `balanced`, or `bst sorted` / `balanced sorted`.
    pub structure: String,
    /// `journal`, `memory` (persistent-n) or `ephemeral`.
    pub backend: &'static str,
    /// `None` for the ephemeral baseline.
    pub extra: Option<u32>,
    /// Bytes stored per update, framing included (Figure 4's slope); median across workloads.
    pub bytes_per_update: f64,
    /// µs per update, its search included (Figure 5); median across workloads.
    pub us_per_update: f64,
    /// µs per access on the latest version (Figure 6); median across workloads.
    pub us_per_access: f64,
    /// Versions written across all workloads.
    pub updates: u64,
}

/// All rows, in run order.
#[derive(Clone, Debug, Default)]
pub struct BenchReport {
    /// One line saying what was run (workloads, ops, seeds, extras, journal directory), printed above the table.
    pub config_line: String,
    /// One row per structure, backend and `extra`.
    pub rows: Vec<BenchRow>,
    /// Curves of the first workload of each persistent variant.
    pub series: Vec<SeriesPoint>,
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

#[derive(Default)]
struct Samples {
    bytes: Vec<f64>,
    update_us: Vec<f64>,
    access_us: Vec<f64>,
    updates: u64,
}

impl Samples {
    fn row(self, structure: String, backend: &'static str, extra: Option<u32>) -> BenchRow {
        BenchRow {
            structure,
            backend,
            extra,
            bytes_per_update: median(self.bytes),
            us_per_update: median(self.update_us),
            us_per_access: median(self.access_us),
            updates: self.updates,
        }
    }
}

/// The structure a workload runs on.
enum Subject {
    List(VersionedList<u64>),
    Set(SortedSet<u64>),
}

impl Subject {
    fn open(ns: Arc<dyn Namespace>, name: &str, structure: Structure, options: Options) -> varve_pds::Result<Subject> {
        Ok(match structure {
            Structure::List => Subject::List(VersionedList::open(ns, name, options)?),
            tree => Subject::Set(SortedSet::open_as(ns, name, tree, options)?),
        })
    }

    /// Trees insert and delete keys; the list appends at the end and removes the value (§V-A).
    fn apply(&mut self, op: WorkloadOp) -> varve_pds::Result<()> {
        match (self, op) {
            (Subject::List(list), WorkloadOp::Insert(k)) => list.push_back(&k)?,
            (Subject::List(list), WorkloadOp::Delete(k)) => list.remove(&k)?,
            (Subject::Set(set), WorkloadOp::Insert(k)) => set.insert(&k)?,
            (Subject::Set(set), WorkloadOp::Delete(k)) => set.delete(&k)?,
        };
        Ok(())
    }

    /// The paper's access: the last node of the list, the maximum of the tree.
    fn access(&self) -> varve_pds::Result<Option<u64>> {
        match self {
            Subject::List(list) => list.last(None),
            Subject::Set(set) => set.last(None),
        }
    }

    fn latest(&self) -> varve_pds::Result<u64> {
        match self {
            Subject::List(list) => list.latest(),
            Subject::Set(set) => set.latest(),
        }
    }
}

/// Record a point of the space/time curves every this many operations.
const SERIES_STEP_OPS: usize = 50;

/// One point of the curves of Figures 4-6, for one variant's first workload.
#[derive(Clone, Debug, PartialEq)]
pub struct SeriesPoint {
    /// `bst journal e1`, …
    pub variant: String,
    /// Workload operations applied so far (a multiple of the series step, 50).
    pub ops_done: usize,
    /// Bytes stored so far.
    pub bytes: u64,
    /// Update time so far (accesses excluded), µs.
    pub update_us: f64,
    /// One access at this point, µs.
    pub access_us: f64,
}

#[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
#[expect(clippy::too_many_arguments, reason = "a private benchmark step; a struct would only rename the arguments")]
fn one_workload(
    ns: Arc<dyn Namespace>,
    journal: Option<&JournalNamespace>,
    name: &str,
    structure: Structure,
    extra: u32,
    ops: &[WorkloadOp],
    accesses: usize,
    samples: &mut Samples,
    mut series: Option<(&str, &mut Vec<SeriesPoint>)>,
) -> Result<()> {
    // Bytes stored: on the journal, what its segment files grew by (frame
    // headers, catalog frames for each new LinkLog and all); elsewhere,
    // payloads plus the 20-byte record overhead every backend counts.
    let counting = CountingNamespace::new(ns);
    let stored = || match journal {
        Some(journal) => journal.disk_usage().0,
        None => counting.counts().bytes_appended,
    };
    let mut subject =
        Subject::open(counting.clone(), name, structure, Options { extra, keep: None, ..Options::default() })?;
    let base = stored();
    let mut elapsed = Duration::ZERO;
    for (done, op) in ops.iter().enumerate() {
        let started = Instant::now();
        subject.apply(*op)?;
        elapsed += started.elapsed();
        if let Some((variant, points)) = series.as_mut() {
            if (done + 1) % SERIES_STEP_OPS == 0 {
                let t = Instant::now();
                std::hint::black_box(subject.access()?);
                let access_us = us(t.elapsed());
                let point = SeriesPoint {
                    variant: (*variant).to_owned(),
                    ops_done: done + 1,
                    bytes: stored() - base,
                    update_us: us(elapsed),
                    access_us,
                };
                points.push(point);
            }
        }
    }
    let versions = subject.latest()?;
    samples.update_us.push(us(elapsed) / ops.len().max(1) as f64);
    samples.bytes.push((stored() - base) as f64 / versions.max(1) as f64);
    let mut access = Vec::new();
    for _ in 0..accesses {
        let t = Instant::now();
        std::hint::black_box(subject.access()?);
        access.push(us(t.elapsed()));
    }
    samples.updates += versions;
    samples.access_us.push(median(access));
    Ok(())
}

#[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
fn ephemeral(structure: Structure, workloads: &[Vec<WorkloadOp>], accesses: usize) -> Samples {
    let mut samples = Samples::default();
    for ops in workloads {
        let started = Instant::now();
        let mut access = Vec::new();
        if structure == Structure::List {
            let mut list: Vec<u64> = Vec::new();
            for op in ops {
                match *op {
                    WorkloadOp::Insert(k) => list.push(k),
                    WorkloadOp::Delete(k) => {
                        if let Some(i) = list.iter().position(|&x| x == k) {
                            list.remove(i);
                        }
                    }
                }
            }
            samples.update_us.push(us(started.elapsed()) / ops.len().max(1) as f64);
            for _ in 0..accesses {
                let t = Instant::now();
                std::hint::black_box(list.iter().last());
                access.push(us(t.elapsed()));
            }
            samples.bytes.push((list.len() * 8) as f64 / ops.len().max(1) as f64);
        } else {
            let mut set = BTreeSet::new();
            for op in ops {
                match *op {
                    WorkloadOp::Insert(k) => set.insert(k),
                    WorkloadOp::Delete(k) => set.remove(&k),
                };
            }
            samples.update_us.push(us(started.elapsed()) / ops.len().max(1) as f64);
            for _ in 0..accesses {
                let t = Instant::now();
                std::hint::black_box(set.last());
                access.push(us(t.elapsed()));
            }
            samples.bytes.push((set.len() * 8) as f64 / ops.len().max(1) as f64);
        }
        samples.updates += ops.len() as u64;
        samples.access_us.push(median(access));
    }
    samples
}

/// A fresh namespace of `backend` (`journal` or `memory`); the journal's
/// concrete handle too, for its disk usage.
fn open_backend(
    store: &JournalStore,
    backend: &str,
    name: &str,
) -> Result<(Arc<dyn Namespace>, Option<JournalNamespace>)> {
    if backend == "journal" {
        let journal = store.journal_namespace(name)?;
        Ok((Arc::new(journal.clone()), Some(journal)))
    } else {
        Ok((Arc::new(MemoryNamespace::new(name, Limits::default())), None))
    }
}

/// Run the benchmark. `progress(done, total)` is called after each workload.
pub fn run(config: &BenchConfig, progress: &mut dyn FnMut(usize, usize)) -> Result<BenchReport> {
    let temp;
    let dir = if let Some(dir) = &config.dir {
        dir.clone()
    } else {
        temp = TempDir::new()?;
        temp.0.clone()
    };
    let options = JournalOptions { sync: SyncPolicy::Group(Duration::from_millis(5)), ..JournalOptions::default() };
    let store = JournalStore::open(&dir, options)?;
    let workloads: Vec<Vec<WorkloadOp>> = (0..config.workloads)
        .map(|i| parse(&generate(config.ops, config.seed + i as u64)).map(|w| w.ops))
        .collect::<varve_pds::Result<_>>()?;
    let sorted: Vec<WorkloadOp> = (1..=config.ops as u64).map(WorkloadOp::Insert).collect();
    let trees: Vec<Structure> = config.structures.iter().copied().filter(|s| *s != Structure::List).collect();
    let total =
        config.structures.len() * config.extras.len() * config.workloads * 2 + trees.len() * config.extras.len() * 2;
    let mut done = 0;
    let mut report = BenchReport {
        config_line: format!(
            "{} workloads x {} ops (seeds {}..), extra {:?}, journal with group commit (5 ms) in {}",
            config.workloads,
            config.ops,
            config.seed,
            config.extras,
            dir.display()
        ),
        rows: Vec::new(),
        series: Vec::new(),
    };
    for &structure in &config.structures {
        report.rows.push(ephemeral(structure, &workloads, config.accesses).row(
            structure.to_string(),
            "ephemeral",
            None,
        ));
        for &extra in &config.extras {
            for backend in ["journal", "memory"] {
                let (ns, journal) = open_backend(&store, backend, &format!("bench-{structure}-e{extra}"))?;
                let mut samples = Samples::default();
                let variant = format!("{structure} {backend} e{extra}");
                for (i, ops) in workloads.iter().enumerate() {
                    let name = format!("w{i}");
                    let series = (i == 0).then_some((variant.as_str(), &mut report.series));
                    one_workload(
                        ns.clone(),
                        journal.as_ref(),
                        &name,
                        structure,
                        extra,
                        ops,
                        config.accesses,
                        &mut samples,
                        series,
                    )?;
                    done += 1;
                    progress(done, total);
                }
                report.rows.push(samples.row(structure.to_string(), backend, Some(extra)));
            }
        }
    }
    for &structure in &trees {
        for &extra in &config.extras {
            for backend in ["journal", "memory"] {
                let (ns, journal) = open_backend(&store, backend, &format!("bench-sorted-{structure}-e{extra}"))?;
                let mut samples = Samples::default();
                let variant = format!("{structure} sorted {backend} e{extra}");
                let series = Some((variant.as_str(), &mut report.series));
                one_workload(
                    ns,
                    journal.as_ref(),
                    "sorted",
                    structure,
                    extra,
                    &sorted,
                    config.accesses,
                    &mut samples,
                    series,
                )?;
                done += 1;
                progress(done, total);
                report.rows.push(samples.row(format!("{structure} sorted"), backend, Some(extra)));
            }
        }
    }
    Ok(report)
}

impl BenchReport {
    /// The results as a Markdown table, with the journal/memory ratios.
    #[must_use]
    pub fn to_markdown(&self) -> String {
        let mut table = Table::new(&[
            ("structure", Align::Left),
            ("backend", Align::Left),
            ("extra", Align::Right),
            ("bytes/update", Align::Right),
            ("µs/update", Align::Right),
            ("µs/access", Align::Right),
            ("bytes vs memory", Align::Right),
            ("update vs memory", Align::Right),
        ]);
        for row in &self.rows {
            let memory = self
                .rows
                .iter()
                .find(|r| r.structure == row.structure && r.extra == row.extra && r.backend == "memory");
            let ratio = |a: f64, b: f64| if b > 0.0 { format!("{:.2}x", a / b) } else { "-".into() };
            let (bytes_ratio, time_ratio) = match (row.backend, memory) {
                ("journal", Some(m)) => {
                    (ratio(row.bytes_per_update, m.bytes_per_update), ratio(row.us_per_update, m.us_per_update))
                }
                _ => ("-".into(), "-".into()),
            };
            table.row(vec![
                row.structure.clone(),
                row.backend.to_owned(),
                row.extra.map_or_else(|| "-".into(), |e| e.to_string()),
                format!("{:.1}", row.bytes_per_update),
                format!("{:.2}", row.us_per_update),
                format!("{:.2}", row.us_per_access),
                bytes_ratio,
                time_ratio,
            ]);
        }
        format!("{}\n\n{}", self.config_line, table.to_markdown())
    }

    /// The curves as CSV: `variant,ops,bytes,update_us,access_us`.
    #[must_use]
    pub fn series_csv(&self) -> String {
        let mut out = String::from("variant,ops,bytes,update_us,access_us\n");
        for p in &self.series {
            let _ = writeln!(out, "{},{},{},{:.3},{:.3}", p.variant, p.ops_done, p.bytes, p.update_us, p.access_us);
        }
        out
    }

    /// The rows as CSV (for charts).
    #[must_use]
    pub fn to_csv(&self) -> String {
        let mut out = String::from("structure,backend,extra,bytes_per_update,us_per_update,us_per_access,updates\n");
        for r in &self.rows {
            let _ = writeln!(
                out,
                "{},{},{},{:.3},{:.3},{:.3},{}",
                r.structure,
                r.backend,
                r.extra.map_or_else(String::new, |e| e.to_string()),
                r.bytes_per_update,
                r.us_per_update,
                r.us_per_access,
                r.updates
            );
        }
        out
    }
}

/// A temporary directory removed on drop (tempfile is a dev-dependency only).
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<TempDir> {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let path = std::env::temp_dir().join(format!("varve-bench-pds-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(TempDir(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
