//! `temperature check`: are the outputs in a data directory consistent with
//! its inputs? Every output is recomputed from the inputs with the same pure
//! functions the handlers use ([`crate::model`]), and the event log is
//! checked for delivery: every trigger DONE, and duplicates only where a
//! re-run (a trigger with two or more FIRINGs) explains them.
//!
//! This is the oracle of the kill loop (`tests/kill_loop.rs`): whatever the
//! kills did, the store must pass it once a run has finished.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use varve_log::{JournalOptions, JournalStore, Namespace, Seq, SeqRange};
use varve_runtime::{EventKind, StoredEvent};

use crate::app::{
    cpu_raw, cpu_smooth, read_topic, training_rows, Params, ENV_RAW, ENV_SMOOTH, MODEL, NAMESPACE, PREDICTION,
};
use crate::data::{DataSet, Reading};
use crate::model::{
    error_summary, smooth, ErrorSummary, Prediction, Regression, RETRAIN_PERIOD_SECS, TRAIN_SAMPLES_MIN,
    TRAIN_WINDOW_SECS,
};

/// Problems listed in full before the rest are only counted.
const PROBLEMS_SHOWN_MAX: usize = 20;
/// Recomputed values may differ from stored ones by JSON's last-digit rounding.
const TOLERANCE: f64 = 1e-9;

/// Everything a data directory holds, read once.
pub struct Outputs {
    /// The run's parameters, from `temperature.json`.
    pub params: Params,
    /// The data set the parameters generate: the truth, which predictions are measured against.
    pub data: DataSet,
    /// What the raw topics should hold: what the run published (the truth with
    /// the run's faults), or the truth once `temperature repair` corrected them.
    pub published: DataSet,
    /// Per device, then the environment: the raw topics' readings in index order.
    pub raw: Vec<Vec<Reading>>,
    /// Per device, then the environment: the smoothed topics' readings in index order.
    pub smoothed: Vec<Vec<Reading>>,
    /// The `model` topic's records, in index order.
    pub models: Vec<Regression>,
    /// The `prediction` topic's records, in index order.
    pub predictions: Vec<Prediction>,
    /// The namespace's whole event log, in `_events` order.
    pub events: Vec<StoredEvent>,
}

impl Outputs {
    /// Read a data directory (read-only: works beside nothing else writing).
    pub fn read(dir: &Path) -> anyhow::Result<Outputs> {
        let params = Params::load(dir)?;
        let store = JournalStore::open(dir, JournalOptions { read_only: true, ..JournalOptions::default() })?;
        let ns = store.journal_namespace(NAMESPACE)?;
        let raw_topics = (0..params.devices).map(cpu_raw).chain([ENV_RAW.to_owned()]);
        let smooth_topics = (0..params.devices).map(cpu_smooth).chain([ENV_SMOOTH.to_owned()]);
        let raw = raw_topics.map(|t| read_topic(&ns, &t, Reading::from_json)).collect::<anyhow::Result<_>>()?;
        let smoothed = smooth_topics.map(|t| read_topic(&ns, &t, Reading::from_json)).collect::<anyhow::Result<_>>()?;
        let repaired = dir.join(crate::repair::REPAIR_FILE).exists();
        Ok(Outputs {
            params,
            data: params.generate(),
            published: if repaired { params.generate() } else { params.published() },
            raw,
            smoothed,
            models: read_topic(&ns, MODEL, Regression::from_json)?,
            predictions: read_topic(&ns, PREDICTION, Prediction::from_json)?,
            events: varve_runtime::namespace_events(&ns as &dyn Namespace, SeqRange::ALL)?,
        })
    }

    fn raw_topic(&self, series: usize) -> String {
        if series == self.params.devices {
            ENV_RAW.to_owned()
        } else {
            cpu_raw(series)
        }
    }

    fn smooth_topic(&self, series: usize) -> String {
        if series == self.params.devices {
            ENV_SMOOTH.to_owned()
        } else {
            cpu_smooth(series)
        }
    }

    /// Prediction error against the environment reading at the same timestamp.
    #[must_use]
    pub fn prediction_error(&self) -> Option<ErrorSummary> {
        let truth: BTreeMap<i64, f64> = self.data.environment.iter().map(|r| (r.unix_secs, r.value)).collect();
        error_summary(self.predictions.iter().filter_map(|p| truth.get(&p.unix_secs).map(|&v| (p.value, v))))
    }
}

/// What `check` found.
#[derive(Debug, Default)]
pub struct CheckReport {
    /// Records in the raw topics, all devices and the environment.
    pub raw_readings: usize,
    /// Records in the smoothed topics, all devices and the environment.
    pub smoothed: usize,
    /// Records in the `model` topic.
    pub models: usize,
    /// Records in the `prediction` topic.
    pub predictions: usize,
    /// TRIGGER events in `_events`.
    pub triggers: usize,
    /// FIRING events in `_events` (first runs and re-runs).
    pub firings: usize,
    /// Triggers with two or more FIRINGs (re-runs after a crash or a failure).
    pub reruns: usize,
    /// FAILED events in `_events`.
    pub failures: usize,
    /// The first few FAILED reasons (failures are retried; they are not
    /// inconsistencies unless the trigger never reaches DONE).
    pub failure_reasons: Vec<String>,
    /// Output records beyond the first for their timestamp (each explained by a re-run).
    pub duplicates: usize,
    /// Everything inconsistent (the first [`PROBLEMS_SHOWN_MAX`]).
    pub problems: Vec<String>,
    /// How many inconsistencies were found, shown or not; 0 means consistent.
    pub problems_total: usize,
}

impl CheckReport {
    /// Whether nothing inconsistent was found.
    #[must_use]
    pub fn is_consistent(&self) -> bool {
        self.problems_total == 0
    }

    fn problem(&mut self, text: String) {
        self.problems_total += 1;
        if self.problems.len() < PROBLEMS_SHOWN_MAX {
            self.problems.push(text);
        }
    }
}

impl std::fmt::Display for CheckReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{} raw readings, {} smoothed, {} models, {} predictions; {} triggers, {} firings, {} re-run(s), {} failure(s), {} duplicate output(s) explained by re-runs",
            self.raw_readings,
            self.smoothed,
            self.models,
            self.predictions,
            self.triggers,
            self.firings,
            self.reruns,
            self.failures,
            self.duplicates
        )?;
        for reason in &self.failure_reasons {
            writeln!(f, "  failed (then retried): {reason}")?;
        }
        if self.is_consistent() {
            write!(f, "consistent: every input kept, every trigger done, every output recomputed equal")
        } else {
            writeln!(f, "INCONSISTENT: {} problem(s)", self.problems_total)?;
            for p in &self.problems {
                writeln!(f, "  - {p}")?;
            }
            if self.problems_total > self.problems.len() {
                writeln!(f, "  … and {} more", self.problems_total - self.problems.len())?;
            }
            Ok(())
        }
    }
}

/// The event log, indexed for the checks.
struct Delivery<'a> {
    by_seq: HashMap<Seq, &'a StoredEvent>,
    /// (log, seq) → the record's APPEND event seq.
    appends: HashMap<(&'a str, Seq), Seq>,
    /// APPEND event seq → its TRIGGER event seqs.
    triggers_of: HashMap<Seq, Vec<Seq>>,
    firings: HashMap<Seq, usize>,
    done: BTreeSet<Seq>,
}

impl<'a> Delivery<'a> {
    fn new(events: &'a [StoredEvent]) -> Delivery<'a> {
        let mut d = Delivery {
            by_seq: HashMap::new(),
            appends: HashMap::new(),
            triggers_of: HashMap::new(),
            firings: HashMap::new(),
            done: BTreeSet::new(),
        };
        for e in events {
            d.by_seq.insert(e.id.seq, e);
            match e.event.kind {
                EventKind::Append => {
                    d.appends.insert((e.event.log.as_str(), e.event.seq), e.id.seq);
                }
                EventKind::Trigger => {
                    if let Some(parent) = &e.event.parent {
                        d.triggers_of.entry(parent.seq).or_default().push(e.id.seq);
                    }
                }
                EventKind::Firing => *d.firings.entry(e.event.trigger).or_default() += 1,
                EventKind::Done => {
                    d.done.insert(e.event.trigger);
                }
                _ => {}
            }
        }
        d
    }

    /// The FIRING that appended `log`/`seq`, if the record was made by a handler.
    fn producer(&self, log: &str, seq: Seq) -> Option<&'a StoredEvent> {
        let append = self.by_seq.get(self.appends.get(&(log, seq))?)?;
        let parent = self.by_seq.get(&append.event.parent.as_ref()?.seq)?;
        (parent.event.kind == EventKind::Firing).then_some(*parent)
    }
}

/// Check the data directory's outputs against its inputs.
pub fn check(dir: &Path) -> anyhow::Result<CheckReport> {
    Ok(check_outputs(&Outputs::read(dir)?))
}

/// [`check`] on outputs already read.
#[must_use]
pub fn check_outputs(out: &Outputs) -> CheckReport {
    let mut report = CheckReport::default();
    let delivery = Delivery::new(&out.events);
    check_delivery(out, &delivery, &mut report);
    check_inputs(out, &delivery, &mut report);
    check_smoothed(out, &delivery, &mut report);
    let by_time = first_by_time(out);
    check_models(out, &delivery, &by_time, &mut report);
    check_predictions(out, &delivery, &by_time, &mut report);
    report
}

fn check_delivery(out: &Outputs, d: &Delivery<'_>, report: &mut CheckReport) {
    for e in &out.events {
        match e.event.kind {
            EventKind::Trigger => {
                report.triggers += 1;
                if !d.done.contains(&e.id.seq) {
                    report.problem(format!(
                        "trigger {} ({} for {}:{}) never reached DONE",
                        e.id.seq, e.event.handler, e.event.log, e.event.seq
                    ));
                }
            }
            EventKind::Firing => report.firings += 1,
            EventKind::Failed => {
                report.failures += 1;
                if report.failure_reasons.len() < PROBLEMS_SHOWN_MAX {
                    report.failure_reasons.push(format!(
                        "{} on {}:{} attempt {}: {}",
                        e.event.handler, e.event.log, e.event.seq, e.event.attempt, e.event.reason
                    ));
                }
            }
            EventKind::DeadLetter => report.problem(format!(
                "{} for {}:{} was dead-lettered: {}",
                e.event.handler, e.event.log, e.event.seq, e.event.reason
            )),
            _ => {}
        }
    }
    report.reruns = d.firings.values().filter(|&&n| n >= 2).count();
}

fn check_inputs(out: &Outputs, d: &Delivery<'_>, report: &mut CheckReport) {
    let generated = out.published.devices.iter().chain([&out.published.environment]);
    for (series, (stored, expected)) in out.raw.iter().zip(generated).enumerate() {
        let topic = out.raw_topic(series);
        report.raw_readings += stored.len();
        if stored.len() != expected.len() {
            report.problem(format!(
                "{topic} holds {} readings, the data set {}: inputs {}",
                stored.len(),
                expected.len(),
                if stored.len() < expected.len() { "lost" } else { "duplicated" }
            ));
        }
        for (index, (got, want)) in stored.iter().zip(expected).enumerate() {
            if got != want {
                report.problem(format!("{topic}:{}: {got:?} is not the generated {want:?}", index + 1));
            }
        }
        for seq in 1..=stored.len() as Seq {
            let Some(append) = d.appends.get(&(topic.as_str(), seq)) else {
                report.problem(format!("{topic}:{seq} has no APPEND event"));
                continue;
            };
            match d.triggers_of.get(append) {
                Some(triggers) if triggers.iter().all(|t| d.done.contains(t)) => {}
                Some(_) => {} // reported by check_delivery
                None => report.problem(format!("{topic}:{seq} has no TRIGGER: its smooth never ran")),
            }
        }
    }
}

/// Duplicates of an output (same topic, same timestamp) are allowed only when
/// one trigger, run more than once, made them all.
fn check_duplicates(topic: &str, times: &[i64], d: &Delivery<'_>, report: &mut CheckReport) {
    let mut by_time: BTreeMap<i64, Vec<Seq>> = BTreeMap::new();
    for (index, &t) in times.iter().enumerate() {
        by_time.entry(t).or_default().push(index as Seq + 1);
    }
    for (t, seqs) in by_time.into_iter().filter(|(_, seqs)| seqs.len() > 1) {
        let triggers: BTreeSet<Seq> =
            seqs.iter().filter_map(|&seq| d.producer(topic, seq)).map(|f| f.event.trigger).collect();
        let explained = triggers.len() == 1
            && triggers.iter().all(|trigger| d.firings.get(trigger).copied().unwrap_or(0) >= 2)
            && seqs.iter().all(|&seq| d.producer(topic, seq).is_some());
        if explained {
            report.duplicates += seqs.len() - 1;
        } else {
            report.problem(format!(
                "{topic} has {} records at t={t} (seqs {seqs:?}) not explained by one re-run trigger (triggers {triggers:?})",
                seqs.len()
            ));
        }
    }
}

fn check_smoothed(out: &Outputs, d: &Delivery<'_>, report: &mut CheckReport) {
    for (series, smoothed) in out.smoothed.iter().enumerate() {
        let topic = out.smooth_topic(series);
        let raw_topic = out.raw_topic(series);
        let raw = &out.raw[series];
        report.smoothed += smoothed.len();
        for (index, record) in smoothed.iter().enumerate() {
            let seq = index as Seq + 1;
            let Some(firing) = d.producer(&topic, seq) else {
                report.problem(format!("{topic}:{seq} was not appended by a handler"));
                continue;
            };
            let input = usize::try_from(firing.event.seq).unwrap_or(usize::MAX);
            if firing.event.log != raw_topic || input == 0 || input > raw.len() {
                report.problem(format!(
                    "{topic}:{seq} was made from {}:{}, not a reading of {raw_topic}",
                    firing.event.log, firing.event.seq
                ));
                continue;
            }
            let expected = smooth(&raw[input - 1], &raw[..input]);
            if !expected.is_some_and(|e| e.unix_secs == record.unix_secs && (e.value - record.value).abs() <= TOLERANCE)
            {
                report
                    .problem(format!("{topic}:{seq} is {record:?}; smooth of {raw_topic}:{input} gives {expected:?}"));
            }
        }
        let made: BTreeSet<i64> = smoothed.iter().map(|r| r.unix_secs).collect();
        let wanted: BTreeSet<i64> = raw.iter().map(|r| crate::model::align_to_interval(r.unix_secs)).collect();
        for missing in wanted.difference(&made) {
            report.problem(format!("{topic} lacks the smoothed reading at t={missing}"));
        }
        let times: Vec<i64> = smoothed.iter().map(|r| r.unix_secs).collect();
        check_duplicates(&topic, &times, d, report);
    }
}

/// Each smoothed series as timestamp → value (the first record per timestamp).
fn first_by_time(out: &Outputs) -> Vec<BTreeMap<i64, f64>> {
    out.smoothed
        .iter()
        .map(|series| {
            let mut map = BTreeMap::new();
            for r in series {
                map.entry(r.unix_secs).or_insert(r.value);
            }
            map
        })
        .collect()
}

/// The rows `train` fits for a model trained at `at`, from the final smoothed series.
fn rows_at(out: &Outputs, at: i64) -> Vec<(Vec<f64>, f64)> {
    let window = |series: &Vec<Reading>| -> Vec<Reading> {
        series.iter().filter(|r| r.unix_secs > at - TRAIN_WINDOW_SECS && r.unix_secs <= at).copied().collect()
    };
    let devices = out.params.devices;
    let cpus: Vec<Vec<Reading>> = out.smoothed[..devices].iter().map(window).collect();
    training_rows(&window(&out.smoothed[devices]), &cpus)
}

fn check_models(out: &Outputs, d: &Delivery<'_>, by_time: &[BTreeMap<i64, f64>], report: &mut CheckReport) {
    report.models = out.models.len();
    for (index, model) in out.models.iter().enumerate() {
        let seq = index + 1;
        let rows = rows_at(out, model.trained_at);
        match Regression::fit(&rows) {
            Ok(refit) => {
                let same = refit.samples == model.samples
                    && refit.coefficients.len() == model.coefficients.len()
                    && refit
                        .coefficients
                        .iter()
                        .zip(&model.coefficients)
                        .all(|(a, b)| (a - b).abs() <= 1e-6 * a.abs().max(1.0));
                if !same {
                    report.problem(format!(
                        "{MODEL}:{seq} (trained at {}) has {} samples {:?}; the refit on its window has {} samples {:?}",
                        model.trained_at, model.samples, model.coefficients, refit.samples, refit.coefficients
                    ));
                }
            }
            Err(e) => report.problem(format!("{MODEL}:{seq}: its window cannot be refitted: {e}")),
        }
    }
    // The schedule: a model at the first environment sample with enough
    // history, then whenever the latest is RETRAIN_PERIOD_SECS old.
    let mut expected = Vec::new();
    let mut last: Option<i64> = None;
    for &t in by_time[out.params.devices].keys() {
        if last.is_none_or(|last| t - last >= RETRAIN_PERIOD_SECS) && rows_at(out, t).len() >= TRAIN_SAMPLES_MIN {
            expected.push(t);
            last = Some(t);
        }
    }
    let made: Vec<i64> = out.models.iter().map(|m| m.trained_at).collect();
    let mut unique = made.clone();
    unique.dedup();
    if unique != expected {
        report.problem(format!("models were trained at {unique:?}; the retrain rule gives {expected:?}"));
    }
    check_duplicates(MODEL, &made, d, report);
}

fn check_predictions(out: &Outputs, d: &Delivery<'_>, by_time: &[BTreeMap<i64, f64>], report: &mut CheckReport) {
    report.predictions = out.predictions.len();
    let devices = out.params.devices;
    let newest_before = |at: i64| out.models.iter().map(|m| m.trained_at).filter(|&t| t < at).max();
    for (index, p) in out.predictions.iter().enumerate() {
        let seq = index + 1;
        let Some(model) = usize::try_from(p.model).ok().and_then(|i| i.checked_sub(1)).and_then(|i| out.models.get(i))
        else {
            report.problem(format!("{PREDICTION}:{seq} names model {}, which does not exist", p.model));
            continue;
        };
        if Some(model.trained_at) != newest_before(p.unix_secs) {
            report.problem(format!(
                "{PREDICTION}:{seq} at t={} used model {} (trained at {}), not the newest trained before it",
                p.unix_secs, p.model, model.trained_at
            ));
        }
        let cpus: Option<Vec<f64>> = by_time[..devices].iter().map(|m| m.get(&p.unix_secs).copied()).collect();
        match cpus {
            Some(cpus) if (model.predict(&cpus) - p.value).abs() <= TOLERANCE => {}
            Some(cpus) => report.problem(format!(
                "{PREDICTION}:{seq} at t={} is {}; model {} on the smoothed CPUs gives {}",
                p.unix_secs,
                p.value,
                p.model,
                model.predict(&cpus)
            )),
            None => report
                .problem(format!("{PREDICTION}:{seq} at t={} has no smoothed reading of every device", p.unix_secs)),
        }
    }
    let made: BTreeSet<i64> = out.predictions.iter().map(|p| p.unix_secs).collect();
    for &t in by_time[0].keys() {
        let complete = by_time[..devices].iter().all(|m| m.contains_key(&t));
        if complete && newest_before(t).is_some() && !made.contains(&t) {
            report.problem(format!("no prediction at t={t}, though every device and a model were there"));
        }
    }
    let times: Vec<i64> = out.predictions.iter().map(|p| p.unix_secs).collect();
    check_duplicates(PREDICTION, &times, d, report);
}
