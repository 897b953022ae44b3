//! The application on the runtime: the handlers `smooth`, `train` and
//! `predict` (thin wrappers over [`crate::model`]), the manifest
//! (`app.toml`), and how `temperature run` feeds a data set in.
//!
//! # What the handlers rely on
//!
//! The manifest runs one worker, so triggers run in the order their records
//! were appended (the runtime's queue is FIFO and recovery re-queues
//! unfinished triggers in trigger order). From that:
//!
//! - each output topic is in **time order** (smoothed readings, models and
//!   predictions are published in the order of their inputs), so a reading
//!   at a timestamp is found by a short scan near a position hint
//!   ([`scan_by_time`]) and "already published" is a look at the latest
//!   record;
//! - when `train` runs for the environment reading at `t`, every device's
//!   smoothed reading at `t` is published (the publisher sends a step's
//!   device readings before its environment reading), and when `predict`
//!   runs for `t`, the model trained at the previous step is published.
//!
//! A re-run after a crash (same trigger, a second FIRING) finds its output
//! already there and publishes nothing, so outputs carry no duplicates;
//! `check` still accepts duplicates a re-run explains. Inputs are found by
//! timestamp, never by "whatever is latest", so outputs do not depend on
//! how far the publisher got when a handler ran.

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context as _};
use serde::{Deserialize, Serialize};
use varve_log::{JournalOptions, JournalStore, Namespace, Seq};
use varve_runtime::{
    Builtins, HandlerContext, HandlerKind, HandlerResult, HandlerSpec, Manifest, RetryPolicy, Runtime, RuntimeOptions,
};

use crate::data::{DataSet, Generator, Reading, INTERVAL_SECS};
use crate::fault::Faults;
use crate::model::{
    align_to_interval, smooth, Prediction, Regression, RETRAIN_PERIOD_SECS, SMOOTH_WINDOW_SECS, TRAIN_SAMPLES_MIN,
    TRAIN_WINDOW_SECS,
};

/// The manifest, compiled in so the binary runs from any directory.
pub const MANIFEST_TOML: &str = include_str!("../app.toml");
/// Where the manifest lives in the repository (for error messages).
pub const MANIFEST_PATH: &str = "examples/temperature/app.toml";
/// The namespace the manifest declares.
pub const NAMESPACE: &str = "temperature";
/// Devices the manifest has topics for (`cpu_raw.0..3`, Canal's 4 Pi Zeros).
pub const DEVICES_MAX: usize = 4;
/// The topic of the reference sensor's environment readings ([`Reading`] JSON), fed by `temperature run`.
pub const ENV_RAW: &str = "env_raw";
/// The topic `smooth.env` publishes the smoothed environment readings to; `train` subscribes to it.
pub const ENV_SMOOTH: &str = "env_smooth";
/// The topic `train` publishes fitted models to ([`Regression`] JSON), in training order.
pub const MODEL: &str = "model";
/// The topic `predict` publishes predictions to ([`Prediction`] JSON), one per timestamp.
pub const PREDICTION: &str = "prediction";
/// The run's parameters, kept in the data directory so a restarted run and
/// `check` use the same data set.
pub const PARAMS_FILE: &str = "temperature.json";

/// A time lookup scans this many records either side of its hint first and
/// doubles the margin until the range is covered.
const SCAN_MARGIN_RECORDS: u64 = 8;
/// … at most this many times; more means the topic is not in time order.
const SCAN_ROUNDS_MAX: u32 = 24;

/// The topic of device `device`'s raw CPU readings (`cpu_raw.<device>`, device below [`DEVICES_MAX`]).
#[must_use]
pub fn cpu_raw(device: usize) -> String {
    format!("cpu_raw.{device}")
}

/// The topic of device `device`'s smoothed CPU readings (`cpu_smooth.<device>`), which `predict.<device>`
/// subscribes to.
#[must_use]
pub fn cpu_smooth(device: usize) -> String {
    format!("cpu_smooth.{device}")
}

/// The smoothed topic for a raw one (`cpu_raw.2` → `cpu_smooth.2`, `env_raw` → `env_smooth`).
#[must_use]
pub fn smoothed_topic_for(raw: &str) -> Option<String> {
    if raw == ENV_RAW {
        return Some(ENV_SMOOTH.to_owned());
    }
    raw.strip_prefix("cpu_raw.").map(|device| format!("cpu_smooth.{device}"))
}

/// The data set a data directory is fed with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Params {
    /// The generator's seed: the same seed gives the same readings.
    pub seed: u64,
    /// Devices publishing CPU readings, 1 to [`DEVICES_MAX`].
    pub devices: usize,
    /// Days of readings, at least 1 (288 five-minute steps a day).
    pub days: u32,
    /// Faults injected into what is published (none by default; absent from
    /// the JSON of a run without faults).
    #[serde(default, skip_serializing_if = "Faults::is_none")]
    pub faults: Faults,
}

impl Params {
    /// Refuse parameters no run accepts: no days, or more devices than the
    /// manifest has topics for.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.days == 0 {
            bail!("--days must be at least 1");
        }
        check_devices(self.devices)?;
        self.faults.validate(self.devices, self.days)
    }

    /// The data set these parameters describe, the truth (deterministic: the same every time).
    #[must_use]
    pub fn generate(&self) -> DataSet {
        Generator::new(self.seed).devices(self.devices).days(self.days).generate()
    }

    /// What a run publishes: the truth with the [`Faults`] applied.
    #[must_use]
    pub fn published(&self) -> DataSet {
        self.faults.apply(&self.generate())
    }

    /// Read `DIR/temperature.json`; parameters no run accepts are an error.
    pub fn load(dir: &Path) -> anyhow::Result<Params> {
        let path = dir.join(PARAMS_FILE);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {} (was `temperature run` run on this directory?)", path.display()))?;
        let params: Params = serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        params.validate().with_context(|| {
            format!("{} holds parameters no run accepts; remove it if the directory holds no data yet", path.display())
        })?;
        Ok(params)
    }

    /// Write them on the first run; on later runs insist they are the same
    /// (resuming with another data set would mix two data sets). Refuses
    /// invalid parameters before writing anything.
    pub fn store_or_match(&self, dir: &Path) -> anyhow::Result<()> {
        self.validate()?;
        if dir.join(PARAMS_FILE).exists() {
            let stored = Params::load(dir)?;
            if stored != *self {
                bail!(
                    "{} was fed with --seed {} --devices {} --days {}{}; resume with those or use a new directory",
                    dir.display(),
                    stored.seed,
                    stored.devices,
                    stored.days,
                    stored.faults.flags()
                );
            }
            return Ok(());
        }
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let tmp = dir.join(format!("{PARAMS_FILE}.tmp"));
        std::fs::write(&tmp, serde_json::to_vec(self)?)
            .and_then(|()| std::fs::rename(&tmp, dir.join(PARAMS_FILE)))
            .with_context(|| format!("writing {}", dir.join(PARAMS_FILE).display()))
    }
}

/// The parsed manifest.
pub fn manifest() -> anyhow::Result<Manifest> {
    Ok(Manifest::parse(MANIFEST_TOML, Some(Path::new(MANIFEST_PATH)))?)
}

/// Refuse a device count the manifest has no topics for.
pub fn check_devices(devices: usize) -> anyhow::Result<()> {
    if !(1..=DEVICES_MAX).contains(&devices) {
        bail!("--devices must be between 1 and {DEVICES_MAX} (the manifest has topics cpu_raw.0..{})", DEVICES_MAX - 1);
    }
    Ok(())
}

/// Refuse an `--alerts-with` that is not a file (it must be the `varve` binary).
pub fn check_alerts_with(varve_bin: &Path) -> anyhow::Result<()> {
    if !varve_bin.is_file() {
        bail!("--alerts-with {}: no such file (give the `varve` binary)", varve_bin.display());
    }
    Ok(())
}

/// The builtins the manifest names, for a data set of `devices` devices.
#[must_use]
pub fn builtins(devices: usize) -> Builtins {
    Builtins::new()
        .with("smooth", handle_smooth)
        .with("train", move |ctx| handle_train(ctx, devices))
        .with("predict", move |ctx| handle_predict(ctx, devices))
}

/// Open the journal in `dir` (the manifest's sync policy) and start the runtime.
pub fn start(dir: &Path, devices: usize) -> anyhow::Result<Runtime> {
    start_with(dir, devices, &builtins(devices))
}

/// The log the external `alert` handler appends to.
pub const ALERTS: &str = "alerts";
/// The external handler's name.
pub const ALERTS_HANDLER: &str = "alert";

/// An external-command handler, to show handlers in any language: on each
/// new model, a shell script appends a line to `alerts` through the `varve`
/// CLI (`varve_bin`), which reaches the runtime over its socket with the
/// FIRING as the cause (so the line is in the model's trace). One process
/// per model (a dozen in three days), so it costs the demo nothing.
#[must_use]
pub fn alert_handler(varve_bin: &Path) -> HandlerSpec {
    let script = r#"model=$(cat); "$1" --data "$VARVE_DATA" --ns "$VARVE_NAMESPACE" log append alerts "model $VARVE_SEQ retrained: $model" >/dev/null"#;
    HandlerSpec {
        name: ALERTS_HANDLER.to_owned(),
        kind: HandlerKind::Command(vec![
            "sh".to_owned(),
            "-c".to_owned(),
            script.to_owned(),
            "alert".to_owned(),
            varve_bin.display().to_string(),
        ]),
        retry: RetryPolicy::default(),
    }
}

/// [`start`] with other builtins (tests inject faults this way).
pub fn start_with(dir: &Path, devices: usize, builtins: &Builtins) -> anyhow::Result<Runtime> {
    start_full(dir, devices, builtins, None)
}

/// [`start_with`], plus the external [`alert_handler`] on `model` when
/// `varve_bin` is given (then the runtime serves its socket). Subscriptions
/// are kept in the store: a directory run with alerts must be resumed with
/// them, or the alert triggers wait for a runtime that has the handler.
pub fn start_full(
    dir: &Path,
    devices: usize,
    builtins: &Builtins,
    varve_bin: Option<&Path>,
) -> anyhow::Result<Runtime> {
    check_devices(devices)?;
    if let Some(varve_bin) = varve_bin {
        check_alerts_with(varve_bin)?;
    }
    let manifest = manifest()?;
    manifest.check_builtins(builtins)?;
    let store = JournalStore::open(dir, JournalOptions { sync: manifest.sync, ..JournalOptions::default() })
        .with_context(|| format!("opening the journal in {}", dir.display()))?;
    let ns: Arc<dyn Namespace> = Arc::new(store.journal_namespace(&manifest.namespace)?);
    // Absolute, so an external handler finds the data whatever its directory.
    let data_dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
    let options = RuntimeOptions {
        host: varve_runtime::host_id_for_dir(dir)?,
        socket: varve_bin.map(|_| data_dir.join(NAMESPACE).join("runtime.sock")),
        data_dir: Some(data_dir),
        ..manifest.options()
    };
    let mut builder = manifest.builder(ns, builtins)?.options(options);
    if let Some(varve_bin) = varve_bin {
        builder = builder
            .log(ALERTS, varve_log::LogConfig::unbounded())
            .register(alert_handler(varve_bin))
            .subscribe(MODEL, ALERTS_HANDLER);
    }
    Ok(builder.start()?)
}

/// What [`feed`] did.
#[derive(Clone, Copy, Debug)]
pub struct Fed {
    /// Readings this call published.
    pub published: usize,
    /// Readings the data set has in all.
    pub total: usize,
    /// From opening the store to the handlers' last output.
    pub elapsed: std::time::Duration,
}

/// `temperature run`: store the parameters (or insist they match), start the
/// runtime, publish what the raw topics lack, wait until the handlers are
/// done (at most `idle_wait_max`), stop. Checks everything that can refuse
/// the run before anything is written.
pub fn feed(
    dir: &Path,
    params: &Params,
    alerts_with: Option<&Path>,
    idle_wait_max: std::time::Duration,
) -> anyhow::Result<Fed> {
    params.validate()?;
    if let Some(varve_bin) = alerts_with {
        check_alerts_with(varve_bin)?;
    }
    params.store_or_match(dir)?;
    let started = std::time::Instant::now();
    let data = params.published();
    let runtime = start_full(dir, params.devices, &builtins(params.devices), alerts_with)?;
    let published = publish_missing(&runtime, &data)?;
    if !runtime.wait_idle(idle_wait_max) {
        bail!("the handlers did not finish within {idle_wait_max:?}");
    }
    runtime.stop(std::time::Duration::from_secs(10));
    Ok(Fed { published, total: data.environment.len() * (params.devices + 1), elapsed: started.elapsed() })
}

/// The order readings are published in: step by step, each step's device
/// readings (device 0 first) and then its environment reading. Returns
/// `(topic, reading)` pairs.
#[must_use]
pub fn publish_order(data: &DataSet) -> Vec<(String, Reading)> {
    let mut out = Vec::with_capacity(data.environment.len() * (data.devices.len() + 1));
    for (step, env) in data.environment.iter().enumerate() {
        for (device, series) in data.devices.iter().enumerate() {
            out.push((cpu_raw(device), series[step]));
        }
        out.push((ENV_RAW.to_owned(), *env));
    }
    out
}

/// Publish what `data` holds beyond what each raw topic already has (a
/// restarted run resumes where the killed one stopped: each publish is
/// atomic, so a raw topic's latest index counts exactly the readings it
/// got). Returns how many readings this call published.
pub fn publish_missing(runtime: &Runtime, data: &DataSet) -> anyhow::Result<usize> {
    let mut have: std::collections::BTreeMap<String, Seq> = std::collections::BTreeMap::new();
    let mut published = 0;
    let mut seen: std::collections::BTreeMap<String, Seq> = std::collections::BTreeMap::new();
    for (topic, reading) in publish_order(data) {
        let index = seen.entry(topic.clone()).or_insert(0);
        *index += 1;
        let existing = if let Some(&n) = have.get(&topic) {
            n
        } else {
            let n = runtime.latest_index(&topic)?;
            have.insert(topic.clone(), n);
            n
        };
        if *index <= existing {
            continue;
        }
        let seq = runtime.publish(&topic, &reading.to_json())?;
        debug_assert_eq!(seq, *index, "{topic}: readings are published in order, one per index");
        published += 1;
    }
    Ok(published)
}

/// A handler's error.
pub type Boxed = Box<dyn std::error::Error + Send + Sync>;

fn reading_at(ctx: &HandlerContext<'_>, log: &str, seq: Seq) -> Result<Reading, Boxed> {
    Ok(Reading::from_json(&ctx.get(log, seq)?).map_err(|e| format!("{log}:{seq}: {e}"))?)
}

/// The latest record of `log` decoded by `decode`, if any (records a LATEST and a READ).
fn latest_of<T>(
    ctx: &HandlerContext<'_>,
    log: &str,
    decode: fn(&[u8]) -> Result<T, String>,
) -> Result<Option<(Seq, T)>, Boxed> {
    let latest = ctx.latest(log)?;
    if latest == 0 {
        return Ok(None);
    }
    let value = decode(&ctx.get(log, latest)?).map_err(|e| format!("{log}:{latest}: {e}"))?;
    Ok(Some((latest, value)))
}

/// The readings (with their seqs) of a time-ordered topic with a timestamp in
/// `(after, up_to]`, found by scanning around `hint` (a seq expected to be
/// near `up_to`), never past `seq_max`. The range is widened until the
/// records on both sides of it lie outside the time range (or the topic
/// ends), so the answer does not depend on the hint. One READ event per scan.
pub fn scan_by_time(
    ctx: &HandlerContext<'_>,
    topic: &str,
    after: i64,
    up_to: i64,
    hint: Seq,
    seq_max: Option<Seq>,
) -> Result<Vec<(Seq, Reading)>, Boxed> {
    let expected = u64::try_from((up_to - after) / INTERVAL_SECS).unwrap_or(0);
    let (mut below, mut above) = (expected + SCAN_MARGIN_RECORDS, SCAN_MARGIN_RECORDS);
    for _ in 0..SCAN_ROUNDS_MAX {
        let first = hint.saturating_sub(below).max(1);
        let last = hint.saturating_add(above).min(seq_max.unwrap_or(Seq::MAX));
        let records = ctx.scan(topic, first..=last)?;
        let readings = records
            .iter()
            .map(|r| {
                Reading::from_json(&r.value)
                    .map(|reading| (r.seq, reading))
                    .map_err(|e| format!("{topic}:{}: {e}", r.seq))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let low_covered = first == 1 || readings.first().is_some_and(|(_, r)| r.unix_secs <= after);
        let ended = records.last().is_none_or(|r| r.seq < last) || Some(last) == seq_max;
        let high_covered = ended || readings.last().is_some_and(|(_, r)| r.unix_secs > up_to);
        if low_covered && high_covered {
            return Ok(readings.into_iter().filter(|(_, r)| r.unix_secs > after && r.unix_secs <= up_to).collect());
        }
        if !low_covered {
            below = below.saturating_mul(2);
        }
        if !high_covered {
            above = above.saturating_mul(2);
        }
    }
    Err(format!("{topic}: no range around seq {hint} covers ({after}, {up_to}]: is the topic in time order?").into())
}

/// `smooth` (raw → smoothed): the mean of the readings of the last hour up to
/// this one, found by timestamp among the readings before it, published at
/// the aligned timestamp.
pub fn handle_smooth(ctx: &mut HandlerContext<'_>) -> HandlerResult {
    let reading = Reading::from_json(ctx.record()).map_err(|e| format!("{}:{}: {e}", ctx.log(), ctx.seq()))?;
    let out =
        smoothed_topic_for(ctx.log()).ok_or_else(|| format!("smooth subscribes to raw topics, not {}", ctx.log()))?;
    let at = align_to_interval(reading.unix_secs);
    if let Some((_, last)) = latest_of(ctx, &out, Reading::from_json)? {
        if last.unix_secs >= at {
            return Ok(()); // a re-run: this reading's mean is already published
        }
    }
    ctx.publish(&out, &smoothed_for(ctx, &reading)?.to_json())?;
    Ok(())
}

/// What `smooth` publishes for the triggering raw `reading`, without the
/// "already published?" guard.
pub fn smoothed_for(ctx: &HandlerContext<'_>, reading: &Reading) -> Result<Reading, Boxed> {
    let window: Vec<Reading> = scan_by_time(
        ctx,
        ctx.log(),
        reading.unix_secs - SMOOTH_WINDOW_SECS,
        reading.unix_secs,
        ctx.seq(),
        Some(ctx.seq()),
    )?
    .into_iter()
    .map(|(_, r)| r)
    .collect();
    Ok(smooth(reading, &window).ok_or("the window holds no reading (the triggering one is missing)")?)
}

/// `train` (`env_smooth` → model): refit when the latest model is older than
/// [`RETRAIN_PERIOD_SECS`], on the samples of the last [`TRAIN_WINDOW_SECS`]
/// where the environment and every device have a smoothed value.
pub fn handle_train(ctx: &mut HandlerContext<'_>, devices: usize) -> HandlerResult {
    let env = Reading::from_json(ctx.record()).map_err(|e| format!("{}:{}: {e}", ctx.log(), ctx.seq()))?;
    if let Some((_, model)) = latest_of(ctx, MODEL, Regression::from_json)? {
        if env.unix_secs - model.trained_at < RETRAIN_PERIOD_SECS {
            return Ok(()); // recent enough (or a re-run that already trained)
        }
    }
    let after = env.unix_secs - TRAIN_WINDOW_SECS;
    let values = |found: Vec<(Seq, Reading)>| found.into_iter().map(|(_, r)| r).collect::<Vec<_>>();
    let envs = values(scan_by_time(ctx, ENV_SMOOTH, after, env.unix_secs, ctx.seq(), Some(ctx.seq()))?);
    let mut cpus = Vec::with_capacity(devices);
    for device in 0..devices {
        cpus.push(values(scan_by_time(ctx, &cpu_smooth(device), after, env.unix_secs, ctx.seq(), None)?));
    }
    let rows = training_rows(&envs, &cpus);
    if rows.len() < TRAIN_SAMPLES_MIN {
        return Ok(()); // not enough history yet
    }
    let mut model = Regression::fit(&rows)?;
    model.trained_at = env.unix_secs;
    ctx.publish(MODEL, &model.to_json())?;
    Ok(())
}

/// Rows `(cpu temperatures, environment)` for every timestamp of `envs`
/// (first reading per timestamp, in order) at which every device series has
/// a reading. Shared by `train` and `check`.
#[must_use]
pub fn training_rows(envs: &[Reading], cpus: &[Vec<Reading>]) -> Vec<(Vec<f64>, f64)> {
    let lookup: Vec<std::collections::BTreeMap<i64, f64>> = cpus
        .iter()
        .map(|series| {
            let mut map = std::collections::BTreeMap::new();
            for r in series {
                map.entry(r.unix_secs).or_insert(r.value);
            }
            map
        })
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    envs.iter()
        .filter(|env| seen.insert(env.unix_secs))
        .filter_map(|env| {
            let row: Option<Vec<f64>> = lookup.iter().map(|m| m.get(&env.unix_secs).copied()).collect();
            row.map(|row| (row, env.value))
        })
        .collect()
}

/// `predict` (`cpu_smooth.<i>` → prediction): once every device has a
/// smoothed reading at this timestamp and a model trained before it exists,
/// publish the newest such model's prediction.
pub fn handle_predict(ctx: &mut HandlerContext<'_>, devices: usize) -> HandlerResult {
    let reading = Reading::from_json(ctx.record()).map_err(|e| format!("{}:{}: {e}", ctx.log(), ctx.seq()))?;
    let at = reading.unix_secs;
    if let Some((_, last)) = latest_of(ctx, PREDICTION, Prediction::from_json)? {
        if last.unix_secs >= at {
            return Ok(()); // another device's predict (or a re-run) already did it
        }
    }
    let mut cpus = Vec::with_capacity(devices);
    for device in 0..devices {
        let topic = cpu_smooth(device);
        if topic == ctx.log() {
            cpus.push(reading.value);
            continue;
        }
        let Some(&(seq, _)) = scan_by_time(ctx, &topic, at - 1, at, ctx.seq(), None)?.first() else {
            return Ok(()); // not every device yet: the last one's predict will run
        };
        // Read the one record used, so the event log names the exact input
        // (the scan's READ covers its whole range).
        cpus.push(reading_at(ctx, &topic, seq)?.value);
    }
    let Some((index, model)) = model_before(ctx, at)? else {
        return Ok(());
    };
    let prediction = Prediction { unix_secs: at, value: model.predict(&cpus), model: index };
    ctx.publish(PREDICTION, &prediction.to_json())?;
    Ok(())
}

/// The newest model trained on data before `at`, by walking back from the latest.
fn model_before(ctx: &HandlerContext<'_>, at: i64) -> Result<Option<(Seq, Regression)>, Boxed> {
    let mut index = ctx.latest(MODEL)?;
    while index > 0 {
        let model = Regression::from_json(&ctx.get(MODEL, index)?).map_err(|e| format!("{MODEL}:{index}: {e}"))?;
        if model.trained_at < at {
            return Ok(Some((index, model)));
        }
        index -= 1;
    }
    Ok(None)
}

/// Read a raw or smoothed topic whole (read-only callers: `run`'s report, `check`).
pub fn read_topic<T>(
    ns: &dyn Namespace,
    topic: &str,
    decode: fn(&[u8]) -> Result<T, String>,
) -> anyhow::Result<Vec<T>> {
    let mut out = Vec::new();
    for record in ns.scan(topic, varve_log::SeqRange::ALL)? {
        let record = record?;
        out.push(decode(&record.value).map_err(|e| anyhow::anyhow!("{topic}:{}: {e}", record.seq))?);
    }
    Ok(out)
}
