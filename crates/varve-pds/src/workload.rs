//! The paper's workloads (§V-A): a text file whose first line is the number
//! of operations and each further line `op value` — `1` insert, `0` delete —
//! with values 1..=100. The generator draws operations uniformly; an insert
//! of a present value takes the next absent one, a delete picks a present
//! value uniformly, so every operation changes the structure.
//!
//! ```
//! use std::sync::Arc;
//! use varve_log::{Limits, MemoryNamespace};
//! use varve_pds::{workload, Structure};
//!
//! let text = workload::generate(50, 7);
//! let w = workload::parse(&text)?;
//! let ns = Arc::new(MemoryNamespace::new("w", Limits::default()));
//! let options = workload::RunOptions { verify: true, contents: false };
//! let report = workload::run(ns, &w, Structure::Bst, 1, options)?;
//! assert!(report.verified);
//! assert_eq!(report.version_count, 50);
//! # Ok::<(), varve_pds::PdsError>(())
//! ```

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use varve_log::Namespace;

use crate::error::{PdsError, Result};
use crate::{Options, SortedSet, Structure, Version, VersionedList};

/// Values are drawn from 1..=`VALUE_MAX` (§V-A).
pub const VALUE_MAX: u64 = 100;

/// Longest workload `parse` accepts, in operations.
pub const OPS_MAX: usize = 10_000_000;

/// One line of a workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkloadOp {
    /// `1 value`: a tree inserts the value as a key; the list appends it at the end.
    Insert(u64),
    /// `0 value`: a tree deletes the key; the list removes the value's first occurrence.
    Delete(u64),
}

/// A parsed workload.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Workload {
    /// The operations, in file order (as many as the first line says).
    pub ops: Vec<WorkloadOp>,
}

/// Generate a workload of `ops` operations from `seed`, in the file format.
///
/// # Panics
///
/// Never: a delete is only drawn when the structure is not empty.
#[must_use]
pub fn generate(ops: usize, seed: u64) -> String {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut present = BTreeSet::new();
    let mut out = format!("{ops}\n");
    for _ in 0..ops {
        let full = present.len() as u64 == VALUE_MAX;
        let insert = !full && (present.is_empty() || rng.gen_bool(0.5));
        if insert {
            let mut value = rng.gen_range(1..=VALUE_MAX);
            while present.contains(&value) {
                value = value % VALUE_MAX + 1;
            }
            present.insert(value);
            let _ = writeln!(out, "1 {value}");
        } else {
            let index = rng.gen_range(0..present.len());
            let value = *present.iter().nth(index).expect("index < len");
            present.remove(&value);
            let _ = writeln!(out, "0 {value}");
        }
    }
    out
}

/// Parse the workload format; errors name the line (1-based).
pub fn parse(text: &str) -> Result<Workload> {
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let bad = |line: usize, reason: String| PdsError::WorkloadParse { line: line + 1, reason };
    let Some((first_line, first)) = lines.next() else {
        return Err(bad(0, "empty file: the first line must be the number of operations".into()));
    };
    let count: usize = first.trim().parse().map_err(|e| bad(first_line, format!("operation count {first:?}: {e}")))?;
    if count > OPS_MAX {
        return Err(bad(first_line, format!("{count} operations is over the limit of {OPS_MAX}")));
    }
    let mut ops = Vec::with_capacity(count);
    for (line, text) in lines {
        let mut fields = text.split_whitespace();
        let (Some(op), Some(value), None) = (fields.next(), fields.next(), fields.next()) else {
            return Err(bad(line, format!("expected `op value`, found {text:?}")));
        };
        let value: u64 = value.parse().map_err(|e| bad(line, format!("value {value:?}: {e}")))?;
        ops.push(match op {
            "1" => WorkloadOp::Insert(value),
            "0" => WorkloadOp::Delete(value),
            other => return Err(bad(line, format!("op {other:?} is neither 1 (insert) nor 0 (delete)"))),
        });
        if ops.len() > count {
            return Err(bad(line, format!("more operations than the {count} the first line announces")));
        }
    }
    if ops.len() != count {
        return Err(bad(0, format!("the first line announces {count} operations, the file has {}", ops.len())));
    }
    Ok(Workload { ops })
}

/// One version's contents, in the structure's order (sorted for trees,
/// head first for the list) — what `--dump` prints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionDump {
    /// The version, from 1.
    pub version: Version,
    /// Its contents: sorted for trees, head first for the list.
    pub items: Vec<u64>,
}

/// What [`run`] reads back after the updates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// Check every version's full contents against a model of all versions
    /// (`VerifyFailed` on the first difference).
    pub verify: bool,
    /// Keep every version's contents in the report (what `--dump` prints).
    pub contents: bool,
}

impl RunOptions {
    fn reads_versions(self) -> bool {
        self.verify || self.contents
    }
}

/// What [`run`] did.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// The structure the workload ran on.
    pub structure: Structure,
    /// Extra pointers per node it was created with (the paper's `e`).
    pub extra: u32,
    /// Operations in the workload.
    pub ops: usize,
    /// Operations that changed nothing (and wrote no version).
    pub no_ops: usize,
    /// Versions after the run.
    pub version_count: Version,
    /// Every version's contents, oldest first, with [`RunOptions::contents`]
    /// (empty otherwise: reading all versions of a large run back costs far
    /// more than the run).
    pub versions: Vec<VersionDump>,
    /// Wall time of the updates, all of them, from the first to the last.
    pub update_time: Duration,
    /// Each update's time (no-ops included), sorted, for percentiles.
    pub update_times_sorted: Vec<Duration>,
    /// Every version was checked against the in-memory model.
    pub verified: bool,
}

impl RunReport {
    /// The `q`-quantile (0.0..=1.0) of the per-update times.
    #[must_use]
    pub fn update_quantile(&self, q: f64) -> Duration {
        let times = &self.update_times_sorted;
        if times.is_empty() {
            return Duration::ZERO;
        }
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss,
            reason = "an index within the slice"
        )]
        let index = ((times.len() - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize;
        times[index]
    }
}

enum Target {
    Set(SortedSet<u64>),
    List(VersionedList<u64>),
}

impl Target {
    fn latest(&self) -> Result<Version> {
        match self {
            Target::Set(s) => s.latest(),
            Target::List(l) => l.latest(),
        }
    }
    fn items(&self, v: Version) -> Result<Vec<u64>> {
        Ok(match self {
            Target::Set(s) => s.iter(Some(v))?.collect(),
            Target::List(l) => l.iter(Some(v))?.collect(),
        })
    }
}

/// Run `workload` on a new structure named `workload.<structure>.e<extra>`
/// in `ns` (see [`run_named`]).
pub fn run(
    ns: Arc<dyn Namespace>,
    workload: &Workload,
    structure: Structure,
    extra: u32,
    options: RunOptions,
) -> Result<RunReport> {
    run_named(ns, &format!("workload.{structure}.e{extra}"), workload, structure, extra, options)
}

/// Run `workload` on the new, empty structure `name` (an existing structure
/// with versions is refused: `InvalidArgument`). Trees insert and delete
/// keys; the list appends at the end and removes the value (§V-A). What is
/// read back afterwards (one full read of each version) is up to `options`.
///
/// # Panics
///
/// Never: the model only removes values a delete has just removed.
pub fn run_named(
    ns: Arc<dyn Namespace>,
    name: &str,
    workload: &Workload,
    structure: Structure,
    extra: u32,
    options: RunOptions,
) -> Result<RunReport> {
    let verify = options.verify;
    let structure_options = Options { extra, keep: None, ..Options::default() };
    let mut target = match structure {
        Structure::List => Target::List(VersionedList::open(ns, name, structure_options)?),
        tree => Target::Set(SortedSet::open_as(ns, name, tree, structure_options)?),
    };
    if target.latest()? > 0 {
        return Err(PdsError::InvalidArgument {
            reason: format!("structure {name:?} already has versions; run workloads on a new namespace"),
        });
    }
    let mut model: Vec<Vec<u64>> = vec![Vec::new()];
    let mut no_ops = 0;
    let mut update_times = Vec::with_capacity(workload.ops.len());
    let mut before = target.latest()?;
    let started = Instant::now();
    for op in &workload.ops {
        let update_started = Instant::now();
        let v = match (&mut target, *op) {
            (Target::Set(s), WorkloadOp::Insert(k)) => s.insert(&k)?,
            (Target::Set(s), WorkloadOp::Delete(k)) => s.delete(&k)?,
            (Target::List(l), WorkloadOp::Insert(k)) => l.push_back(&k)?,
            (Target::List(l), WorkloadOp::Delete(k)) => l.remove(&k)?,
        };
        update_times.push(update_started.elapsed());
        if v == before {
            no_ops += 1;
        }
        if verify && v != before {
            let mut next = model.last().expect("version 0").clone();
            match *op {
                WorkloadOp::Insert(k) if structure == Structure::List => next.push(k),
                WorkloadOp::Insert(k) => {
                    let at = next.binary_search(&k).unwrap_or_else(|i| i);
                    next.insert(at, k);
                }
                WorkloadOp::Delete(k) => {
                    let at = next.iter().position(|&x| x == k).expect("a delete that changed something");
                    next.remove(at);
                }
            }
            model.push(next);
        }
        before = v;
    }
    let update_time = started.elapsed();
    update_times.sort_unstable();
    let latest = target.latest()?;
    let mut versions = Vec::new();
    for version in (1..=latest).filter(|_| options.reads_versions()) {
        let items = target.items(version)?;
        if verify {
            let expected = &model[usize::try_from(version).expect("fits")];
            if *expected != items {
                return Err(PdsError::VerifyFailed { version, expected: expected.clone(), found: items });
            }
        }
        if options.contents {
            versions.push(VersionDump { version, items });
        }
    }
    Ok(RunReport {
        structure,
        extra,
        ops: workload.ops.len(),
        no_ops,
        version_count: latest,
        versions,
        update_time,
        update_times_sorted: update_times,
        verified: verify,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_workloads_parse_and_every_op_is_valid() {
        let text = generate(1000, 42);
        assert_eq!(text, generate(1000, 42), "same seed, same workload");
        let w = parse(&text).expect("parse");
        assert_eq!(w.ops.len(), 1000);
        let mut present = BTreeSet::new();
        for op in w.ops {
            match op {
                WorkloadOp::Insert(v) => assert!((1..=VALUE_MAX).contains(&v) && present.insert(v)),
                WorkloadOp::Delete(v) => assert!(present.remove(&v)),
            }
        }
    }

    /// Reading every version back is quadratic in the run's length (each
    /// version holds up to every key): only `verify` or `contents` does it.
    #[test]
    fn a_run_reads_its_versions_back_only_when_asked() {
        let w = parse(&generate(200, 3)).expect("parse");
        let reads_of = |options: RunOptions| {
            let ns = crate::testing::CountingNamespace::new(Arc::new(varve_log::MemoryNamespace::new(
                "w",
                varve_log::Limits::default(),
            )));
            let report = run(ns.clone(), &w, Structure::Balanced, 2, options).expect("run");
            assert_eq!(report.versions.len() as u64, if options.contents { report.version_count } else { 0 });
            assert_eq!(report.update_times_sorted.len(), 200);
            assert!(report.update_quantile(0.5) <= report.update_quantile(0.99));
            (ns.reads(), report.version_count)
        };
        let (plain, versions) = reads_of(RunOptions::default());
        let (read_back, _) = reads_of(RunOptions { verify: false, contents: true });
        let (verified, _) = reads_of(RunOptions { verify: true, contents: false });
        assert!(read_back >= plain + versions, "contents: {read_back} reads, plain {plain}, {versions} versions");
        assert!(verified >= plain + versions, "verify: {verified} reads, plain {plain}, {versions} versions");
    }

    #[test]
    fn malformed_workloads_name_the_line() {
        for (text, line) in [("", 1), ("2\n1 5\n", 1), ("1\n2 5\n", 2), ("1\n1 x\n", 2), ("x\n", 1), ("1\n1 5 6\n", 2)]
        {
            match parse(text) {
                Err(PdsError::WorkloadParse { line: l, .. }) => assert_eq!(l, line, "{text:?}"),
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }
}
