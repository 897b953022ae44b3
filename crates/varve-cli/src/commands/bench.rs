//! `varve bench log|pds|runtime|serve|nats|object`: the arguments mapped onto the benchmarks
//! of `varve-bench`, which measure (progress on stderr); the reports
//! printed here — a Markdown table on stdout, `bench runtime --json` one
//! JSON object, as `bench serve --json` — and `bench pds`'s CSV files written.

use std::io::Write as _;
use std::path::Path;

use anyhow::Context as _;
use varve_bench::{log, nats, object, pds, runtime, serve};

use crate::output;

/// `varve bench log`.
pub fn log(dir: &Path, quick: bool, open_mib: u64, only: Option<&str>) -> anyhow::Result<()> {
    let options =
        log::BenchOptions { dir: dir.to_owned(), quick, open_bytes: open_mib << 20, only: only.map(str::to_owned) };
    print(&log::run(&options)?.to_markdown())
}

/// `varve bench pds`, with a progress bar over the workload runs.
pub fn pds(
    workloads: usize,
    ops: usize,
    dir: Option<&Path>,
    csv: Option<&Path>,
    series_csv: Option<&Path>,
) -> anyhow::Result<()> {
    let config = pds::BenchConfig { workloads, ops, dir: dir.map(Path::to_owned), ..pds::BenchConfig::default() };
    let bar = output::progress_bar(0, output::Unit::Steps, "workload runs", false);
    let report = pds::run(&config, &mut |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    })?;
    bar.finish_and_clear();
    for (path, text) in [(csv, report.to_csv()), (series_csv, report.series_csv())] {
        if let Some(path) = path {
            std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        }
    }
    print(&format!("{}\n", report.to_markdown()))
}

/// `varve bench pds --scale`: one sorted map grown to `scale_max` keys.
pub fn pds_scale(
    dir: Option<&Path>,
    scale_max: u64,
    node_cache: usize,
    checkpoint_bytes_min: u64,
    packed_on_heap: bool,
    quick: bool,
) -> anyhow::Result<()> {
    let dir = dir.map_or_else(|| Path::new("target/bench").to_owned(), Path::to_owned);
    let mut config = if quick {
        varve_bench::pds_scale::ScaleConfig::quick(dir)
    } else {
        varve_bench::pds_scale::ScaleConfig::full(dir)
    };
    config.sizes.retain(|&size| size <= scale_max);
    config.node_cache_entries = node_cache;
    config.checkpoint_bytes_min = checkpoint_bytes_min;
    if packed_on_heap {
        config.packed_in_file_bytes_min = u64::MAX;
    }
    if config.sizes.is_empty() {
        anyhow::bail!("--scale-max {scale_max} is below the smallest size measured; use at least 1000 with --quick, 10000 without");
    }
    let bar = output::progress_bar(0, output::Unit::Steps, "inserts", false);
    let report = varve_bench::pds_scale::run(&config, &mut |backend, done, of| {
        bar.set_length(of);
        bar.set_position(done);
        bar.set_message(format!("inserts ({backend})"));
    })?;
    bar.finish_and_clear();
    print(&format!("{}\n", report.to_markdown()))
}

/// `varve bench runtime`; the external-command figures run this binary as
/// the handler (see `varve_bench::runtime::stamp_if_asked` in `main`).
pub fn runtime(dir: &Path, quick: bool, only: Option<&str>, json: bool) -> anyhow::Result<()> {
    let options = runtime::RuntimeBenchOptions {
        dir: dir.to_owned(),
        stamp_program: std::env::current_exe().context("finding the varve binary")?,
        quick,
        only: only.map(str::to_owned),
    };
    let report = runtime::run(&options)?;
    print(&if json { format!("{}\n", report.to_json()) } else { report.to_markdown() })
}

/// `varve bench nats`.
pub fn nats(dir: &Path, quick: bool, nats_server: Option<&Path>) -> anyhow::Result<()> {
    let options = nats::NatsBenchOptions { dir: dir.to_owned(), quick, nats_server: nats_server.map(Path::to_owned) };
    print(&nats::run(&options)?.to_markdown())
}

/// `varve bench object`.
pub fn object(dir: &Path, quick: bool, only: Option<&str>) -> anyhow::Result<()> {
    let options = object::ObjectBenchOptions {
        only: only.map(str::to_owned),
        ..object::ObjectBenchOptions::new(dir.to_owned(), quick)
    };
    print(&object::run(&options)?.to_markdown())
}

/// `varve bench repair`: repair-graph construction at 100k and 1M events
/// (what caused one record, from every event and by index; what depends on
/// a model, from every event and walked forward; the plan from every event
/// and from the events needed), then the
/// pause of online repairs while readings arrive.
pub fn repair(dir: &Path, quick: bool) -> anyhow::Result<()> {
    let options = varve_bench::repair::RepairBenchOptions::new(dir.to_owned(), quick);
    let report = varve_bench::repair::run(&options)?;
    print(&report.to_markdown())?;
    print(&report.causes_markdown())?;
    print(&report.effects_markdown())?;
    print(&report.needed_markdown())?;
    print(&varve_bench::repair_online::run(dir, quick)?.to_markdown())
}

/// `varve bench schema`: the retention models on typed records.
pub fn schema(dir: &Path, quick: bool, seed: u64) -> anyhow::Result<()> {
    let options = varve_bench::schema::SchemaBenchOptions::new(dir.to_owned(), quick, seed);
    print(&varve_bench::schema::run(&options)?.to_markdown())
}

/// `varve bench serve`: this binary is the `varve serve` measured.
pub fn serve(
    dir: &Path,
    quick: bool,
    nats_server: Option<&Path>,
    only: Option<&str>,
    json: bool,
) -> anyhow::Result<()> {
    let options = serve::ServeBenchOptions {
        dir: dir.to_owned(),
        varve_program: std::env::current_exe().context("finding the varve binary")?,
        nats_server: nats_server.map(Path::to_owned),
        quick,
        only: only.map(str::to_owned),
    };
    let report = serve::run(&options)?;
    print(&if json { format!("{}\n", report.to_json()) } else { report.to_markdown() })
}

/// Write `text` to stdout (a closed pipe is an error `main` treats as success).
fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}
