//! The Rust side of `python -m varve.bench`: the same operations as the
//! Python benchmark, looped in Rust, in the same process and on the same
//! kind of store, so the difference per call is the binding's overhead.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use varve_log::{JournalOptions, JournalStore, LogConfig, Namespace as _, SyncPolicy};

use crate::error::{Error, Result};
use crate::pds::Raw;

/// Run `n` operations `op` from Rust on a fresh store in `path` (Group(5ms)
/// sync, as `varve.open`'s default) and return the seconds they took.
///
/// `op`: "append" (`record_bytes`-byte records), "get" (reads n records
/// appended first, untimed), "`sorted_set_insert`" (n distinct int keys, in
/// the Python encoding), "`append_batch`" (n records in batches of `batch`).
#[pyfunction]
#[pyo3(name = "_bench_rust", signature = (op, n, path, record_bytes = 16, batch = 1000))]
pub fn bench_rust(py: Python<'_>, op: &str, n: u64, path: PathBuf, record_bytes: usize, batch: usize) -> PyResult<f64> {
    if !matches!(op, "append" | "get" | "sorted_set_insert" | "append_batch") || batch == 0 {
        return Err(PyValueError::new_err(format!("unknown benchmark op {op:?} (or batch 0)")));
    }
    let seconds = py.detach(|| run(op, n, &path, record_bytes, batch))?;
    Ok(seconds)
}

fn run(op: &str, n: u64, path: &PathBuf, record_bytes: usize, batch: usize) -> Result<f64> {
    let options = JournalOptions { sync: SyncPolicy::Group(Duration::from_millis(5)), ..JournalOptions::default() };
    let store = JournalStore::open(path, options)?;
    let ns = store.journal_namespace("bench")?;
    ns.create_log("rust", LogConfig::unbounded())?;
    let record = vec![0x5a_u8; record_bytes];
    let started;
    match op {
        "append" => {
            started = Instant::now();
            for _ in 0..n {
                std::hint::black_box(ns.append("rust", &record)?);
            }
        }
        "get" => {
            for _ in 0..n {
                ns.append("rust", &record)?;
            }
            started = Instant::now();
            for seq in 1..=n {
                std::hint::black_box(ns.get("rust", seq)?);
            }
        }
        "sorted_set_insert" => {
            let mut set =
                varve_pds::SortedSet::<Raw>::open(Arc::new(ns.clone()), "rust", varve_pds::Options::default())
                    .map_err(Error::from)?;
            started = Instant::now();
            for i in 0..n {
                // The encoding `varve` gives a non-negative int key (see key.rs).
                let mut key = vec![0x02];
                key.extend_from_slice(&i.to_be_bytes());
                set.insert(&Raw(key)).map_err(Error::from)?;
            }
        }
        _ => {
            let entries: Vec<(&str, &[u8])> = (0..batch).map(|_| ("rust", &record[..])).collect();
            started = Instant::now();
            let mut left = usize::try_from(n).unwrap_or(usize::MAX);
            while left > 0 {
                let take = left.min(batch);
                std::hint::black_box(ns.append_batch(&entries[..take])?);
                left -= take;
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    ns.close()?;
    Ok(seconds)
}
