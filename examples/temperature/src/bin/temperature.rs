//! `temperature`: the dissertation's temperature application on the Varve
//! runtime (see the crate docs and `examples/temperature/README.md`).
//!
//! ```text
//! temperature run    --data DIR [--days 3 --devices 4 --seed 42] [--fahrenheit DEVICE:DAY] [--outage START_HOUR:HOURS]
//! temperature check  --data DIR
//! temperature graph  --data DIR [--out FILE.png] [--dot FILE.dot] [--otel FILE.json] [--prediction N]
//! temperature repair --data DIR
//! temperature bench-repair [--days 3 …] [--runs 3] [--work DIR]
//! ```

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use clap::{Parser, Subcommand};
use varve_example_temperature::app::{self, Params, PREDICTION};
use varve_example_temperature::check::{self, Outputs};
use varve_example_temperature::fault::{self, FahrenheitDay, Faults, Outage};
use varve_example_temperature::graph::{add_read_links, prediction_graph};
use varve_example_temperature::model::ErrorSummary;
use varve_example_temperature::repair::{self as repairing, RepairReport};
use varve_example_temperature::say;
use varve_runtime::event::trace_hex;
use varve_runtime::trace::{to_dot, to_otel_json};

/// `run` waits this long for the handlers to drain before giving up.
const IDLE_WAIT_MAX: Duration = Duration::from_secs(3600);

#[derive(Parser)]
#[command(name = "temperature", about = "The temperature prediction application (Canal §4.3.5) on the Varve runtime")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

/// The generated data set a run feeds.
#[derive(clap::Args, Clone, Copy)]
struct DataSetArgs {
    #[arg(long, default_value_t = 3)]
    days: u32,
    #[arg(long, default_value_t = 4)]
    devices: usize,
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

impl DataSetArgs {
    fn params(self, faults: Faults) -> Params {
        Params { seed: self.seed, devices: self.devices, days: self.days, faults }
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// Feed a generated data set through smooth → train/predict; resumes a killed run.
    Run {
        #[arg(long)]
        data: PathBuf,
        #[command(flatten)]
        set: DataSetArgs,
        /// Also run the external-command handler `alert` on `model` (a shell
        /// script appending to the `alerts` log through this `varve` binary).
        #[arg(long, value_name = "VARVE")]
        alerts_with: Option<PathBuf>,
        /// Inject a fault: device DEVICE reports °F during day DAY (0-based).
        #[arg(long, value_name = "DEVICE:DAY", value_parser = fault::parse_fahrenheit)]
        fahrenheit: Option<FahrenheitDay>,
        /// Inject a fault: the reference sensor is down for HOURS hours from
        /// hour `START_HOUR`; its last reading is held (published) meanwhile.
        #[arg(long, value_name = "START_HOUR:HOURS", value_parser = fault::parse_outage)]
        outage: Option<Outage>,
    },
    /// Correct every raw reading that differs from the true data set (the
    /// late, true readings) and replay what depended on them (Sans-Souci).
    Repair {
        #[arg(long)]
        data: PathBuf,
    },
    /// Time a repair beside a run from scratch on the true data (a run with the
    /// faults, repaired, must hold exactly what the run from scratch holds).
    BenchRepair {
        #[command(flatten)]
        set: DataSetArgs,
        #[arg(long, value_name = "DEVICE:DAY", value_parser = fault::parse_fahrenheit, default_value = "1:1")]
        fahrenheit: FahrenheitDay,
        #[arg(long, value_name = "START_HOUR:HOURS", value_parser = fault::parse_outage, default_value = "30:6")]
        outage: Outage,
        /// Repeat this many times; medians are reported.
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Where the data directories go (default: the system's temporary directory).
        #[arg(long)]
        work: Option<PathBuf>,
    },
    /// Verify the outputs against the inputs and the event log; exits 1 if inconsistent.
    Check {
        #[arg(long)]
        data: PathBuf,
    },
    /// Export (and draw) the causal graph of one prediction.
    Graph {
        #[arg(long)]
        data: PathBuf,
        /// Draw it to this PNG (needs matplotlib in --python).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Write Graphviz DOT here.
        #[arg(long)]
        dot: Option<PathBuf>,
        /// Write OpenTelemetry JSON spans here (default: next to --out).
        #[arg(long)]
        otel: Option<PathBuf>,
        /// Which prediction (its index in the `prediction` topic); default the last.
        #[arg(long)]
        prediction: Option<u64>,
        /// The Python that runs `scripts/render_trace.py`; default `.venv/bin/python` if it exists, else `python3`.
        #[arg(long)]
        python: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Cmd::Run { data, set, alerts_with, fahrenheit, outage } => {
            run(&data, set.params(Faults { fahrenheit, outage }), alerts_with.as_deref())
        }
        Cmd::Repair { data } => repair(&data),
        Cmd::BenchRepair { set, fahrenheit, outage, runs, work } => {
            bench_repair(set.params(Faults { fahrenheit: Some(fahrenheit), outage: Some(outage) }), runs, work)
        }
        Cmd::Check { data } => check(&data),
        Cmd::Graph { data, out, dot, otel, prediction, python } => {
            graph(&data, out.as_deref(), dot.as_deref(), otel, prediction, python)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(dir: &Path, params: Params, alerts_with: Option<&Path>) -> anyhow::Result<ExitCode> {
    let fed = app::feed(dir, &params, alerts_with, IDLE_WAIT_MAX)?;
    say!(
        "published {} readings ({} already there) from {} devices and the reference sensor, {} days every 5 minutes",
        fed.published,
        fed.total - fed.published,
        params.devices,
        params.days
    );
    if let Some(f) = params.faults.fahrenheit {
        say!("fault injected: device {} reported °F during day {}", f.device, f.day);
    }
    if let Some(o) = params.faults.outage {
        say!(
            "fault injected: the reference sensor was down for {} h from hour {}; its last reading was held meanwhile",
            o.hours,
            o.start_hour
        );
    }
    let outputs = Outputs::read(dir)?;
    say!(
        "handlers done in {:.1} s: {} smoothed readings, {} models, {} predictions, {} events",
        fed.elapsed.as_secs_f64(),
        outputs.smoothed.iter().map(Vec::len).sum::<usize>(),
        outputs.models.len(),
        outputs.predictions.len(),
        outputs.events.len()
    );
    match outputs.prediction_error() {
        Some(e) => say!(
            "prediction error against the reference sensor: mean |err| {:.3} °C, p95 {:.3} °C over {} predictions (Canal §4.3.5 reports 0.21 / 0.54 on its real data)",
            e.mean_abs, e.p95_abs, e.count
        ),
        None => say!("no predictions yet (a model needs a few hours of data)"),
    }
    if let Some((index, trace)) = last_prediction_trace(&outputs) {
        say!("prediction {index}'s trace: {}", trace_hex(trace));
        say!("draw its causal graph: temperature graph --data {} --out trace.png", dir.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn repair(dir: &Path) -> anyhow::Result<ExitCode> {
    let before = repairing::prediction_error_of(dir, PREDICTION)?;
    let Some(report) = repairing::repair(dir)? else {
        say!("nothing to repair: every raw reading in {} equals the true data", dir.display());
        return Ok(ExitCode::SUCCESS);
    };
    print_report(&report);
    let after = repairing::prediction_error_of(dir, PREDICTION)?;
    let show = |e: Option<ErrorSummary>| {
        e.map_or_else(
            || "no predictions".to_owned(),
            |e| format!("mean |err| {:.3} °C, p95 {:.3} °C, max {:.3} °C", e.mean_abs, e.p95_abs, e.max_abs),
        )
    };
    say!("prediction error against the true reference readings:");
    say!("  before the repair: {}", show(before));
    say!("  after the repair:  {}", show(after));
    if let Some(old) = report.old_predictions() {
        say!("  the old predictions, still readable in {old}: {}", show(repairing::prediction_error_of(dir, old)?));
        say!("  (varve --data {} --ns temperature log scan {old})", dir.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn print_report(report: &RepairReport) {
    let corrected: Vec<String> = report.corrected.iter().map(|(log, n)| format!("{log}: {n}")).collect();
    say!(
        "corrected {} raw readings with the true data ({})",
        report.corrected.iter().map(|(_, n)| n).sum::<usize>(),
        corrected.join(", ")
    );
    say!(
        "repaired in {:.2} s: {} handler runs replayed with their reads pinned, {} records written to shadows, {} of them changed",
        report.elapsed.as_secs_f64(),
        report.replayed,
        report.written,
        report.changed
    );
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let p = report.phases;
    say!(
        "  (compare with the true data {:.0} ms, read _events {:.0} ms, plan {:.0} ms, shadows + replay + swap {:.0} ms)",
        ms(p.compare),
        ms(p.events),
        ms(p.plan),
        ms(p.execute)
    );
    if report.alerts_kept > 0 {
        say!(
            "{} runs of the external `alert` handler were not replayed: their alerts were sent, they stay as they were",
            report.alerts_kept
        );
    }
    let swapped: Vec<&str> = report.generations.iter().map(|(log, _)| log.as_str()).collect();
    say!("swapped atomically: {} (each old history kept as _gen.LOG.N)", swapped.join(", "));
}

/// A fresh directory under `work` (removed first if a previous bench left it).
fn bench_dir(work: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let dir = work.join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    Ok(dir)
}

fn bench_repair(params: Params, runs: usize, work: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    params.validate()?;
    if runs == 0 {
        bail!("--runs must be at least 1");
    }
    let work =
        work.unwrap_or_else(|| std::env::temp_dir().join(format!("temperature-bench-repair-{}", std::process::id())));
    let clean = Params { faults: Faults::default(), ..params };
    let (mut repairs, mut reruns) = (Vec::new(), Vec::new());
    let mut last = None;
    for round in 1..=runs {
        let faulty_dir = bench_dir(&work, "repaired")?;
        app::feed(&faulty_dir, &params, None, IDLE_WAIT_MAX)?;
        let started = Instant::now();
        let report = repairing::repair(&faulty_dir)?.context("the faults changed no reading")?;
        let repair = started.elapsed();
        let scratch_dir = bench_dir(&work, "from-scratch")?;
        let rerun = app::feed(&scratch_dir, &clean, None, IDLE_WAIT_MAX)?.elapsed;
        let differing = repairing::differing_logs(&faulty_dir, &scratch_dir)?;
        if !differing.is_empty() {
            bail!("the repaired directory differs from the run from scratch in {}", differing.join(", "));
        }
        say!(
            "round {round}: repair {:.3} s ({} runs replayed, {} records changed); run from scratch {:.3} s; logs identical",
            repair.as_secs_f64(),
            report.replayed,
            report.changed,
            rerun.as_secs_f64()
        );
        repairs.push(repair);
        reruns.push(rerun);
        last = Some(report);
    }
    std::fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let (repair, rerun) = (median(&mut repairs), median(&mut reruns));
    if let Some(report) = last {
        print_report(&report);
    }
    say!(
        "median of {runs}: repair {:.3} s, run from scratch {:.3} s: the repair takes {:.2}× the time of a rerun ({:.1}× faster)",
        repair.as_secs_f64(),
        rerun.as_secs_f64(),
        repair.as_secs_f64() / rerun.as_secs_f64(),
        rerun.as_secs_f64() / repair.as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

fn last_prediction_trace(outputs: &Outputs) -> Option<(u64, u128)> {
    let index = outputs.predictions.len() as u64;
    outputs
        .events
        .iter()
        .find(|e| e.event.kind == varve_runtime::EventKind::Append && e.event.log == PREDICTION && e.event.seq == index)
        .map(|e| (index, e.event.trace))
}

fn check(dir: &Path) -> anyhow::Result<ExitCode> {
    let report = check::check(dir)?;
    say!("{report}");
    Ok(if report.is_consistent() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn graph(
    dir: &Path,
    out: Option<&Path>,
    dot: Option<&Path>,
    otel: Option<PathBuf>,
    prediction: Option<u64>,
    python: Option<PathBuf>,
) -> anyhow::Result<ExitCode> {
    if out.is_none() && dot.is_none() && otel.is_none() {
        bail!("give --out FILE.png, --dot FILE.dot or --otel FILE.json");
    }
    let outputs = Outputs::read(dir)?;
    let count = outputs.predictions.len() as u64;
    let index = prediction.unwrap_or(count);
    if index == 0 || index > count {
        bail!("there is no prediction {index}: {} holds {count} (run `temperature run` first)", dir.display());
    }
    let events = prediction_graph(&outputs.events, index);
    if events.is_empty() {
        bail!("prediction {index} has no APPEND event in the event log");
    }
    let p = &outputs.predictions[usize::try_from(index - 1)?];
    say!(
        "prediction {index}: {:.2} °C at t={} with model {}; its causal graph has {} events",
        p.value,
        p.unix_secs,
        p.model,
        events.len()
    );
    if let Some(path) = dot {
        std::fs::write(path, to_dot(&events)).with_context(|| format!("writing {}", path.display()))?;
        say!("wrote {}", path.display());
    }
    let otel_path = otel.or_else(|| out.map(|png| png.with_extension("json")));
    if let Some(path) = &otel_path {
        let mut json = to_otel_json(&events);
        add_read_links(&mut json, &events);
        std::fs::write(path, serde_json::to_vec_pretty(&json)?)
            .with_context(|| format!("writing {}", path.display()))?;
        say!("wrote {}", path.display());
    }
    if let (Some(png), Some(json)) = (out, &otel_path) {
        render(
            json,
            png,
            &format!("causal graph of prediction {index} (t={}, model {})", p.unix_secs, p.model),
            python,
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Draw with `scripts/render_trace.py`, after checking matplotlib is there.
fn render(json: &Path, png: &Path, title: &str, python: Option<PathBuf>) -> anyhow::Result<()> {
    let python = python.unwrap_or_else(|| {
        let venv = PathBuf::from(".venv/bin/python");
        if venv.exists() {
            venv
        } else {
            PathBuf::from("python3")
        }
    });
    // The repository's script (where this binary was built from), else one
    // under the current directory (a binary copied elsewhere, run from a checkout).
    let built_from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/render_trace.py");
    let script = if built_from.exists() { built_from } else { PathBuf::from("scripts/render_trace.py") };
    if !script.exists() {
        bail!("scripts/render_trace.py not found: run from the repository's top directory");
    }
    let probe = Command::new(&python)
        .args(["-c", "import matplotlib"])
        .output()
        .with_context(|| format!("running {} (give another with --python)", python.display()))?;
    if !probe.status.success() {
        bail!(
            "matplotlib is missing for {}: run `make plot-deps` (installs it into .venv) or `{} -m pip install matplotlib`",
            python.display(),
            python.display()
        );
    }
    let status = Command::new(&python)
        .arg(&script)
        .arg(json)
        .arg(png)
        .arg(title)
        .status()
        .with_context(|| format!("running {} {}", python.display(), script.display()))?;
    if !status.success() {
        bail!("{} failed ({status})", script.display());
    }
    Ok(())
}
