//! `temperature`: the dissertation's temperature application on the Varve
//! runtime (see the crate docs and `examples/temperature/README.md`).
//!
//! ```text
//! temperature run   --data DIR [--days 3 --devices 4 --seed 42]
//! temperature check --data DIR
//! temperature graph --data DIR [--out FILE.png] [--dot FILE.dot] [--otel FILE.json] [--prediction N]
//! ```

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use clap::{Parser, Subcommand};
use varve_example_temperature::app::{self, Params, PREDICTION};
use varve_example_temperature::check::{self, Outputs};
use varve_example_temperature::graph::{add_read_links, prediction_graph};
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

#[derive(Subcommand)]
enum Cmd {
    /// Feed a generated data set through smooth → train/predict; resumes a killed run.
    Run {
        #[arg(long)]
        data: PathBuf,
        #[arg(long, default_value_t = 3)]
        days: u32,
        #[arg(long, default_value_t = 4)]
        devices: usize,
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Also run the external-command handler `alert` on `model` (a shell
        /// script appending to the `alerts` log through this `varve` binary).
        #[arg(long, value_name = "VARVE")]
        alerts_with: Option<PathBuf>,
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
        Cmd::Run { data, days, devices, seed, alerts_with } => {
            run(&data, Params { seed, devices, days }, alerts_with.as_deref())
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
    // Everything that can refuse the run is checked before anything is
    // written, so a refused run leaves `dir` as it was.
    params.validate()?;
    if let Some(varve_bin) = alerts_with {
        app::check_alerts_with(varve_bin)?;
    }
    params.store_or_match(dir)?;
    let started = Instant::now();
    let data = params.generate();
    let runtime = app::start_full(dir, params.devices, &app::builtins(params.devices), alerts_with)?;
    let published = app::publish_missing(&runtime, &data)?;
    let total = data.environment.len() * (params.devices + 1);
    println!(
        "published {published} readings ({} already there) from {} devices and the reference sensor, {} days every 5 minutes",
        total - published,
        params.devices,
        params.days
    );
    if !runtime.wait_idle(IDLE_WAIT_MAX) {
        bail!("the handlers did not finish within {IDLE_WAIT_MAX:?}");
    }
    runtime.stop(Duration::from_secs(10));
    let elapsed = started.elapsed();
    let outputs = Outputs::read(dir)?;
    println!(
        "handlers done in {:.1} s: {} smoothed readings, {} models, {} predictions, {} events",
        elapsed.as_secs_f64(),
        outputs.smoothed.iter().map(Vec::len).sum::<usize>(),
        outputs.models.len(),
        outputs.predictions.len(),
        outputs.events.len()
    );
    match outputs.prediction_error() {
        Some(e) => println!(
            "prediction error against the reference sensor: mean |err| {:.3} °C, p95 {:.3} °C over {} predictions (Canal §4.3.5 reports 0.21 / 0.54 on its real data)",
            e.mean_abs, e.p95_abs, e.count
        ),
        None => println!("no predictions yet (a model needs a few hours of data)"),
    }
    if let Some((index, trace)) = last_prediction_trace(&outputs) {
        println!("prediction {index}'s trace: {}", trace_hex(trace));
        println!("draw its causal graph: temperature graph --data {} --out trace.png", dir.display());
    }
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
    println!("{report}");
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
    println!(
        "prediction {index}: {:.2} °C at t={} with model {}; its causal graph has {} events",
        p.value,
        p.unix_secs,
        p.model,
        events.len()
    );
    if let Some(path) = dot {
        std::fs::write(path, to_dot(&events)).with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    let otel_path = otel.or_else(|| out.map(|png| png.with_extension("json")));
    if let Some(path) = &otel_path {
        let mut json = to_otel_json(&events);
        add_read_links(&mut json, &events);
        std::fs::write(path, serde_json::to_vec_pretty(&json)?)
            .with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
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
