//! The repair half of the example (Sans-Souci §7.4.1): the true readings
//! arrive late — the device's readings converted back to °C, the reference
//! station's logger read out after its outage — and `temperature repair`
//! corrects every published raw reading that differs from them, replays the
//! handlers that depended on those readings (`smooth`, `train`, `predict`,
//! with their reads pinned to what they saw), and swaps the repaired logs in.
//! The replaced histories stay readable as generations (`_gen.prediction.1`).
//!
//! The repair is offline: `temperature run` must not be running on the
//! directory (the journal's writer lock refuses the second writer).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use varve_log::{JournalOptions, JournalStore, Namespace, SeqRange};
use varve_repair::{Correction, Inputs, NotReplayable, RepairPlan, GENERATION_PREFIX};
use varve_runtime::trace::RecordRef;
use varve_runtime::{HandlerFn, HandlerRun};

use crate::app::{self, cpu_raw, read_topic, Params, ALERTS_HANDLER, ENV_RAW, NAMESPACE, PREDICTION};
use crate::data::Reading;
use crate::model::{error_summary, ErrorSummary, Prediction};

/// Written into the data directory by a repair that changed something: from
/// then on the raw topics hold the truth, and `check` expects it.
pub const REPAIR_FILE: &str = "repair.json";

/// What one `temperature repair` did.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RepairReport {
    /// Raw readings corrected, per topic.
    pub corrected: Vec<(String, usize)>,
    /// Handler runs the plan replays.
    pub reruns: usize,
    /// Records of outputs the plan says change (certain), all logs together.
    pub records_to_change: usize,
    /// Runs actually replayed.
    pub replayed: usize,
    /// Records written to the shadows (copied, corrected or replayed).
    pub written: u64,
    /// Records whose value changed.
    pub changed: u64,
    /// Per log swapped, the generation that keeps its old history.
    pub generations: Vec<(String, String)>,
    /// Runs of the external `alert` handler left as they were (its alerts were sent).
    pub alerts_kept: usize,
    /// Reading the events, planning, shadows, replay and swap.
    pub elapsed: Duration,
    /// Of `elapsed`: comparing the raw topics with the truth, reading and
    /// decoding `_events`, building the plan, executing it (shadows, replay, swap).
    pub phases: Phases,
}

/// Where a repair's time went.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct Phases {
    /// Comparing every raw record with the truth.
    pub compare: Duration,
    /// Reading and decoding the events the repair needs (from the first
    /// corrected reading's APPEND on, `varve_repair::events_needed`).
    pub events: Duration,
    /// `RepairPlan::build`.
    pub plan: Duration,
    /// `varve_repair::execute`: shadows, replay, swap.
    pub execute: Duration,
}

impl RepairReport {
    /// The generation holding the predictions as they were before this repair.
    #[must_use]
    pub fn old_predictions(&self) -> Option<&str> {
        self.generations.iter().find(|(log, _)| log == PREDICTION).map(|(_, generation)| generation.as_str())
    }
}

/// The corrections the true data set asks for: every raw record whose bytes
/// differ from the true reading's JSON.
pub fn corrections(ns: &dyn Namespace, params: &Params) -> anyhow::Result<Vec<(RecordRef, Vec<u8>)>> {
    let truth = params.generate();
    let series = truth
        .devices
        .iter()
        .enumerate()
        .map(|(d, s)| (cpu_raw(d), s))
        .chain([(ENV_RAW.to_owned(), &truth.environment)]);
    let mut out = Vec::new();
    for (topic, readings) in series {
        for record in ns.scan(&topic, SeqRange::ALL)? {
            let record = record?;
            let index = usize::try_from(record.seq - 1).unwrap_or(usize::MAX);
            let Some(true_reading) = readings.get(index) else {
                anyhow::bail!(
                    "{topic}:{} has no reading in the data set: is this a temperature data directory?",
                    record.seq
                );
            };
            let want = true_reading.to_json();
            if record.value[..] != want[..] {
                let reference = RecordRef { namespace: NAMESPACE.to_owned(), log: topic.clone(), seq: record.seq };
                out.push((reference, want));
            }
        }
    }
    Ok(out)
}

/// Repair the directory `dir` against the true data set. `Ok(None)`: every
/// raw record already holds the truth, nothing was changed.
pub fn repair(dir: &Path) -> anyhow::Result<Option<RepairReport>> {
    let params = Params::load(dir)?;
    let manifest = app::manifest()?;
    let in_use = || format!("opening the journal in {} (is `temperature run` still running on it?)", dir.display());
    let store = JournalStore::open(dir, JournalOptions { sync: manifest.sync, ..JournalOptions::default() })
        .with_context(in_use)?;
    let ns: Arc<dyn Namespace> = Arc::new(store.journal_namespace(NAMESPACE).with_context(in_use)?);
    let started = Instant::now();
    let mut phases = Phases::default();
    let mut lap = Instant::now();
    let mut split = |phase: &mut Duration| {
        *phase = lap.elapsed();
        lap = Instant::now();
    };
    let corrections = corrections(ns.as_ref(), &params)?;
    if corrections.is_empty() {
        return Ok(None);
    }
    split(&mut phases.compare);
    let corrected_records: Vec<Correction> = corrections.iter().map(|(r, _)| Correction::Record(r.clone())).collect();
    // From the first corrected reading's APPEND on: the history before the fault is not read.
    let events = varve_repair::events_needed(&corrected_records, std::slice::from_ref(&ns))?;
    split(&mut phases.events);
    // The alerts were sent: they are facts about the past, not derived data to recompute.
    let mut not_replayable: HashSet<String> = HashSet::from([ALERTS_HANDLER.to_owned()]);
    not_replayable.extend(manifest.handlers.iter().filter(|h| !h.replayable).map(|h| h.name.clone()));
    let plan = RepairPlan::build(&events, &corrected_records, &not_replayable);
    split(&mut phases.plan);
    let builtins = app::builtins(params.devices);
    let handlers: HashMap<String, HandlerFn> = manifest
        .handlers
        .iter()
        .filter_map(|h| match &h.run {
            HandlerRun::Builtin(builtin) => builtins.get(builtin).map(|f| (h.name.clone(), Arc::clone(f))),
            HandlerRun::Command(_) => None,
        })
        .collect();
    let values: HashMap<RecordRef, Vec<u8>> = corrections.iter().cloned().collect();
    let namespaces = HashMap::from([(NAMESPACE.to_owned(), Arc::clone(&ns))]);
    let inputs = Inputs {
        events: &events,
        namespaces: &namespaces,
        handlers: &handlers,
        values: &values,
        not_replayable: NotReplayable::Skip,
    };
    let outcome = varve_repair::execute(&plan, &inputs)?;
    split(&mut phases.execute);
    let elapsed = started.elapsed();
    let mut corrected: Vec<(String, usize)> = Vec::new();
    for (r, _) in &corrections {
        match corrected.last_mut() {
            Some((log, n)) if *log == r.log => *n += 1,
            _ => corrected.push((r.log.clone(), 1)),
        }
    }
    let report = RepairReport {
        corrected,
        reruns: plan.reruns.len(),
        records_to_change: plan.changed.iter().map(|c| c.seqs.len()).sum(),
        replayed: outcome.replayed,
        written: outcome.written,
        changed: outcome.changed,
        generations: outcome.swapped.get(NAMESPACE).cloned().unwrap_or_default(),
        alerts_kept: plan.reruns.iter().filter(|r| r.handler == ALERTS_HANDLER).count(),
        elapsed,
        phases,
    };
    drop(ns);
    drop(store);
    let path = dir.join(REPAIR_FILE);
    std::fs::write(&path, serde_json::to_vec_pretty(&report)?)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(Some(report))
}

/// Prediction error, against the truth, of the predictions in `log` (the
/// current `prediction` topic or a generation of it).
pub fn prediction_error_of(dir: &Path, log: &str) -> anyhow::Result<Option<ErrorSummary>> {
    let truth = Params::load(dir)?.generate();
    let store = JournalStore::open(dir, JournalOptions { read_only: true, ..JournalOptions::default() })?;
    let ns = store.journal_namespace(NAMESPACE)?;
    let predictions = read_topic(&ns, log, Prediction::from_json)?;
    let truth: HashMap<i64, f64> = truth.environment.iter().map(|r: &Reading| (r.unix_secs, r.value)).collect();
    Ok(error_summary(predictions.iter().filter_map(|p| truth.get(&p.unix_secs).map(|&v| (p.value, v)))))
}

/// The generations of `log` in `dir`, oldest first (`_gen.prediction.1`, …).
pub fn generations_of(dir: &Path, log: &str) -> anyhow::Result<Vec<String>> {
    let store = JournalStore::open(dir, JournalOptions { read_only: true, ..JournalOptions::default() })?;
    let ns = store.journal_namespace(NAMESPACE)?;
    let prefix = format!("{GENERATION_PREFIX}{log}.");
    let mut out: Vec<(u64, String)> = ns
        .list_logs()?
        .into_iter()
        .filter_map(|info| {
            let n = info.name.strip_prefix(&prefix)?.parse().ok()?;
            Some((n, info.name))
        })
        .collect();
    out.sort();
    Ok(out.into_iter().map(|(_, name)| name).collect())
}

/// The logs the application writes (raw, smoothed, models, predictions)
/// whose records differ between the data directories `a` and `b`.
pub fn differing_logs(a: &Path, b: &Path) -> anyhow::Result<Vec<String>> {
    let params = Params::load(a)?;
    let open = |dir: &Path| -> anyhow::Result<_> {
        let store = JournalStore::open(dir, JournalOptions { read_only: true, ..JournalOptions::default() })?;
        Ok(store.journal_namespace(NAMESPACE)?)
    };
    let (ns_a, ns_b) = (open(a)?, open(b)?);
    let logs = (0..params.devices)
        .flat_map(|d| [cpu_raw(d), app::cpu_smooth(d)])
        .chain([ENV_RAW, app::ENV_SMOOTH, app::MODEL, PREDICTION].map(str::to_owned));
    let mut out = Vec::new();
    for log in logs {
        let records = |ns: &varve_log::JournalNamespace| -> anyhow::Result<Vec<bytes::Bytes>> {
            ns.scan(&log, SeqRange::ALL)?.map(|r| Ok(r?.value)).collect()
        };
        if records(&ns_a)? != records(&ns_b)? {
            out.push(log);
        }
    }
    Ok(out)
}
