//! # varve-bench — Varve's benchmarks
//!
//! The figures of `docs/benchmarks.md`, each measured beside a baseline in
//! the same run on the same machine (STYLE.md, "Performance habits": the
//! machines are noisy, so medians and ratios, never one absolute time).
//! The `varve bench …` commands map their arguments onto these functions
//! and print the reports; `make bench`, `make bench-pds`, `make bench-runtime`,
//! `make bench-serve` and `make bench-object` run those commands.
//!
//! - [`log`]: the Log's append throughput, `get` latency and open time,
//!   beside plain-file baselines (`varve bench log`).
//! - [`pds`]: the PEDaLS evaluation (the paper's §V, Figures 4–6) beside
//!   ephemeral structures and the memory backend (`varve bench pds`).
//! - [`pds_scale`]: one sorted map grown to a million keys on the journal
//!   and in memory: cost per insert, memory, disk, reopen time
//!   (`varve bench pds --scale`).
//! - [`runtime`]: trigger latency, events per second, event-recording
//!   overhead and publish throughput (`varve bench runtime`).
//! - [`serve`]: `varve serve` on loopback (appends with 1–64 clients,
//!   `get`, watch fan-out) beside the embedded journal and a JetStream
//!   server (`varve bench serve`).
//! - [`object`]: versioned objects (`varve-object`) on the journal: put
//!   and get, Complete beside Delta storage, `history(m)` beside `m` single
//!   steps, and the paper's Git experiment beside a real `git` in the same
//!   run (`varve bench object`).
//! - [`stats`] and [`table`]: the medians, percentiles and Markdown tables
//!   they share.
//!
//! PART's comparison with other maps is a criterion suite of its own
//! (`crates/varve-part/benches`, `make bench-part`).
//!
//! ```
//! use varve_bench::pds::{run, BenchConfig};
//!
//! let config = BenchConfig { workloads: 1, ops: 50, extras: vec![1], ..BenchConfig::default() };
//! let report = run(&config, &mut |_done, _total| {})?;
//! println!("{}", report.to_markdown());
//! # Ok::<(), varve_bench::BenchError>(())
//! ```

#![expect(
    clippy::doc_markdown,
    reason = "the paper's terms (PEDaLS, DataLog, LinkLog, APLog) are written as the paper writes them"
)]

pub mod log;
pub mod nats;
pub mod object;
pub mod pds;
pub mod pds_scale;
pub mod repair;
pub mod repair_online;
pub mod runtime;
pub mod schema;
pub mod serve;
pub mod stats;
pub mod table;

use std::path::{Path, PathBuf};

/// Why a benchmark could not finish.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// The Log under measurement failed.
    #[error(transparent)]
    Log(#[from] varve_log::LogError),
    /// A PEDaLS structure under measurement failed.
    #[error(transparent)]
    Pds(#[from] varve_pds::PdsError),
    /// The object store under measurement failed.
    #[error(transparent)]
    Object(#[from] varve_object::ObjectError),
    /// A PART durable map under measurement failed.
    #[error(transparent)]
    Durable(#[from] varve_part::durable::DurableError),
    /// The typed records under measurement failed.
    #[error(transparent)]
    Schema(#[from] varve_schema::SchemaError),
    /// The runtime under measurement failed.
    #[error(transparent)]
    Runtime(#[from] varve_runtime::RuntimeError),
    /// A file operation of the benchmark itself (scratch files, baselines).
    #[error("{context}: {source}")]
    Io {
        /// What the benchmark was doing, naming the file or directory.
        context: String,
        /// The operating-system error.
        #[source]
        source: std::io::Error,
    },
    /// A benchmark's own check failed: the work it timed was not all done,
    /// or a wait for it ran out.
    #[error("{0}")]
    Check(String),
    /// A program measured beside Varve (`varve serve`, `nats-server`) could
    /// not be started, or failed while it was measured.
    #[error("{0}")]
    External(String),
}

/// Shorthand for benchmark results.
pub type Result<T, E = BenchError> = std::result::Result<T, E>;

/// Context for the I/O errors of a benchmark's own files.
pub(crate) trait IoContext<T> {
    fn with_context(self, context: impl FnOnce() -> String) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn with_context(self, context: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| BenchError::Io { context: context(), source })
    }
}

/// `base/name`, emptied (or created): a scratch directory for one measurement.
pub fn fresh_dir(base: &Path, name: &str) -> Result<PathBuf> {
    let dir = base.join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("clearing {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}
