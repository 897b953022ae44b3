//! # varve-bench-peers — the journal beside the embedded stores users pick instead
//!
//! Varve's journal (`varve_log::JournalNamespace`) beside redb, fjall,
//! SQLite in WAL mode and RocksDB, on the same records at matched
//! durability, in one run: single and batched appends, random gets, a full
//! scan and disk bytes per record, at three durability levels (no fsync,
//! fsync per append, group commit from 4 threads). It prints a Markdown
//! table of medians with the journal's ratio to the best other store
//! (`docs/benchmarks.md`, "The journal beside embedded stores").
//!
//! A satellite crate (STYLE.md): RocksDB and SQLite are C and C++ builds, so
//! `make test`, `make lint` and `make build` leave this crate out, and
//! `make bench-peers` builds and runs it:
//!
//! ```text
//! varve-bench-peers --dir target/bench [--quick] [--out table.md] [--seed N] [--only journal]
//! ```
//!
//! Built with `--no-default-features`, it leaves RocksDB out (its C++ build
//! takes about 40 minutes here): a quick run or profile of the others.
//!
//! - `stores/`: one adapter per store behind the `Peer` contract, its
//!   settings per durability level in the adapter's docs.
//! - `run.rs`: the measurement loop, sizes and values.
//! - `report.rs`: the table and its notes.

#![expect(
    clippy::doc_markdown,
    reason = "the stores' names (SQLite, RocksDB) are written as their projects write them"
)]

mod report;
mod run;
mod stores;

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Parser;
use varve_bench::stats::load_average;

use crate::report::Report;
use crate::run::{measure, median_figures, Sizes, Values};
use crate::stores::{Kind, Level};

/// The journal beside redb, fjall, SQLite (WAL) and RocksDB at matched durability.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Directory for the stores (on the disk to measure); each store's
    /// directory is deleted after it is measured.
    #[arg(long)]
    dir: PathBuf,
    /// A tenth of the records and one trial: a smoke run (under a minute), not figures to publish.
    #[arg(long)]
    quick: bool,
    /// Also write the Markdown report to this file.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Seed of the values' generator (and of the gets' seqs).
    #[arg(long, default_value_t = 0x7661_7276)]
    seed: u64,
    /// Measure only this store (journal, redb, fjall, sqlite, rocksdb), for profiling.
    #[arg(long)]
    only: Option<String>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let sizes = if args.quick { Sizes::QUICK } else { Sizes::FULL };
    let kinds: Vec<Kind> = match &args.only {
        None => Kind::ALL.to_vec(),
        Some(name) => match Kind::ALL.iter().copied().find(|k| k.label().eq_ignore_ascii_case(name)) {
            Some(kind) => vec![kind],
            None => bail!("--only {name}: not one of journal, redb, fjall, sqlite, rocksdb"),
        },
    };
    std::fs::create_dir_all(&args.dir).with_context(|| format!("creating {}", args.dir.display()))?;
    let started = Instant::now();
    let load_start = load_average();
    eprintln!(
        "varve-bench-peers: stores under {}, seed {}, {} trial(s){}",
        args.dir.display(),
        args.seed,
        sizes.trials,
        if args.quick { ", quick" } else { "" }
    );
    let values = Values::new(args.seed);
    let mut levels = Vec::new();
    for level in Level::ALL {
        let mut trials: Vec<Vec<_>> = vec![Vec::new(); kinds.len()];
        for trial in 0..sizes.trials {
            for (i, &kind) in kinds.iter().enumerate() {
                let figures = measure(&args.dir, kind, level, &sizes, &values, args.seed, trial)
                    .with_context(|| format!("{} at {}, trial {}", kind.label(), level.label(), trial + 1))?;
                eprintln!(
                    "  {:<26} trial {} {:<8} {:>9.0} appends/s {:>9.0} batched rec/s  get p50 {:>6.1} p99 {:>6.1} µs  \
                     scan {:>5.0} MB/s  {:>6.1} B/rec",
                    level.label(),
                    trial + 1,
                    kind.label(),
                    figures.appends_per_s,
                    figures.batch_records_per_s,
                    figures.get_p50_us,
                    figures.get_p99_us,
                    figures.scan_mb_per_s,
                    figures.disk_bytes_per_record,
                );
                trials[i].push(figures);
            }
        }
        levels.push((level, kinds.iter().zip(&trials).map(|(&k, t)| (k, median_figures(t))).collect()));
    }
    let report = Report {
        sizes,
        seed: args.seed,
        levels,
        load: [load_start, load_average()],
        seconds: started.elapsed().as_secs_f64(),
    };
    let markdown = report.to_markdown();
    print!("{markdown}");
    if let Some(out) = &args.out {
        std::fs::write(out, &markdown).with_context(|| format!("writing {}", out.display()))?;
    }
    Ok(())
}
