//! Repair-graph construction (`varve bench repair`, `make bench-repair`):
//! how long `varve repair plan` takes to turn an application's event log
//! into a plan, at 100,000 and 1,000,000 events.
//!
//! The application is the temperature example's shape (Sans-Souci §7.4.1):
//! sensor readings appended in batches of 100 to `sens`, a `predict`
//! handler that reads the latest `model` record (LATEST + READ) and appends
//! a prediction to `pred`; a new model every 1,000 readings. One worker, on
//! the embedded journal in a scratch directory (no fsync: the events are
//! what is measured, not the disk). Five events per reading (APPEND and
//! TRIGGER of the reading, FIRING, APPEND of the prediction carrying the
//! folded reads, DONE).
//!
//! Timed, each the median of 5 repetitions: reading and decoding
//! `_events` (`namespace_events`), the causal merge
//! (`trace::merge`, as for several namespaces), and `RepairPlan::build`
//! for a correction of the model record in the middle of the history
//! (about half of the predictions depend on it). The goal is ≤ 100 ms per
//! 100,000 events for the whole (read + merge + plan); Sans-Souci reports
//! 2.6 s to parse 79,316 events (Table 7.3, their hardware — a figure from
//! the paper, not measured here; no other system builds such a graph).
//!
//! Then what caused one record (the last prediction), as `varve trace
//! causes` answers it: from every event (read, merge, graph, walk: how it
//! was answered before the index) and by the index beside `_events`
//! (`varve_runtime::causes`), the two answers checked equal.
//!
//! Then the plan of a corrected model from every event against the plan
//! from the events a repair needs (`varve_repair::events_needed`: from the
//! model's APPEND on, as `varve repair plan` reads them), for the middle
//! model and the last one, the two plans checked equal.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use varve_log::{JournalOptions, JournalStore, LogConfig, Namespace, Seq, SeqRange, SyncPolicy};
use varve_repair::{events_needed, Correction, RepairPlan};
use varve_runtime::causes::Causes;
use varve_runtime::effects::Effects;
use varve_runtime::trace::{merge_owned, CausalGraph, RecordRef};
use varve_runtime::{namespace_events, HandlerContext, HandlerFn, RetryPolicy, Runtime, RuntimeBuilder, RuntimeHandle};

use crate::stats::median;
use crate::table::{Align, Table};
use crate::{fresh_dir, BenchError, Result};

/// Readings per `append_batch`.
pub(crate) const BATCH: usize = 100;
/// Readings per model record.
const READINGS_PER_MODEL: usize = 1_000;
/// Events the application writes per reading.
const EVENTS_PER_READING: usize = 5;
/// Repetitions of each timing.
const REPS: usize = 5;

/// What `varve bench repair` runs.
#[derive(Clone, Debug)]
pub struct RepairBenchOptions {
    /// Scratch directory (emptied first).
    pub dir: PathBuf,
    /// Event-log sizes to measure.
    pub sizes: Vec<usize>,
}

impl RepairBenchOptions {
    /// 100,000 and 1,000,000 events; `quick`: 10,000 (a smoke run).
    #[must_use]
    pub fn new(dir: PathBuf, quick: bool) -> RepairBenchOptions {
        let sizes = if quick { vec![10_000] } else { vec![100_000, 1_000_000] };
        RepairBenchOptions { dir, sizes }
    }
}

/// One size's figures.
#[derive(Clone, Debug)]
pub struct RepairRow {
    /// Events in `_events`.
    pub events: usize,
    /// Read and decode `_events`.
    pub read: Duration,
    /// The causal merge.
    pub merge: Duration,
    /// `RepairPlan::build`.
    pub plan: Duration,
    /// Handler runs the plan replays.
    pub reruns: usize,
    /// Records the plan changes.
    pub changed: usize,
    /// `varve trace causes` of the last prediction from every event: read,
    /// merge, `CausalGraph::new`, `ancestors`.
    pub causes_full: Duration,
    /// The same answer by index (`varve_runtime::causes`).
    pub causes_indexed: Duration,
    /// Records the indexed answer read (events and index entries).
    pub causes_records_read: u64,
    /// Events in the answer.
    pub causes_events: usize,
    /// What depends on the middle model, then on the last one: from every
    /// event, and walked from the model's APPEND (`varve_runtime::effects`).
    pub effects: [EffectsFigures; 2],
    /// The plan of a corrected middle model, then last model: from every
    /// event, and from the events needed.
    pub needed: [NeededFigures; 2],
}

/// The plan of one corrected model, from every event and from the events needed.
#[derive(Clone, Debug)]
pub struct NeededFigures {
    /// The model's seq.
    pub model: Seq,
    /// Read, merge and plan from every event.
    pub every: Duration,
    /// `events_needed` and the plan.
    pub needed: Duration,
    /// Events `events_needed` returned.
    pub events: usize,
}

/// "What depends on this record", both ways.
#[derive(Clone, Debug)]
pub struct EffectsFigures {
    /// The model's seq.
    pub model: Seq,
    /// Read, merge, `CausalGraph::new`, `descendants` (as `varve trace effects` did).
    pub full: Duration,
    /// The walk from the record's APPEND.
    pub walked: Duration,
    /// Records the walk read (events and index entries).
    pub records_read: u64,
    /// Events in the answer.
    pub events: usize,
}

impl RepairRow {
    fn total(&self) -> Duration {
        self.read + self.merge + self.plan
    }

    #[expect(clippy::cast_precision_loss, reason = "event counts far below 2^52")]
    fn per_100k(&self, d: Duration) -> f64 {
        d.as_secs_f64() * 1e3 * 100_000.0 / self.events as f64
    }
}

/// The figures of a run.
#[derive(Clone, Debug)]
pub struct RepairReport {
    /// One row per size.
    pub rows: Vec<RepairRow>,
}

impl RepairReport {
    /// The table for docs/benchmarks.md.
    #[must_use]
    pub fn to_markdown(&self) -> String {
        let mut table = Table::new(&[
            ("events", Align::Right),
            ("read + decode ms", Align::Right),
            ("merge ms", Align::Right),
            ("plan ms", Align::Right),
            ("total ms", Align::Right),
            ("total ms per 100k (goal ≤ 100)", Align::Right),
            ("met?", Align::Left),
            ("reruns", Align::Right),
            ("records changed", Align::Right),
            ("Sans-Souci, ms per 100k (paper)", Align::Right),
        ]);
        for row in &self.rows {
            let per = row.per_100k(row.total());
            table.row(vec![
                row.events.to_string(),
                format!("{:.1}", row.read.as_secs_f64() * 1e3),
                format!("{:.1}", row.merge.as_secs_f64() * 1e3),
                format!("{:.1}", row.plan.as_secs_f64() * 1e3),
                format!("{:.1}", row.total().as_secs_f64() * 1e3),
                format!("{per:.1}"),
                if per <= 100.0 { "met".into() } else { "**missed**".into() },
                row.reruns.to_string(),
                row.changed.to_string(),
                format!("{:.0}", 2_600.0 * 100_000.0 / 79_316.0),
            ]);
        }
        table.to_markdown()
    }

    /// The second table: what caused one record, from every event vs by index.
    #[must_use]
    pub fn causes_markdown(&self) -> String {
        let mut table = Table::new(&[
            ("events", Align::Right),
            ("causes from every event, ms", Align::Right),
            ("causes by index, ms", Align::Right),
            ("ratio", Align::Right),
            ("records read by index", Align::Right),
            ("events in the answer", Align::Right),
        ]);
        for row in &self.rows {
            table.row(vec![
                row.events.to_string(),
                format!("{:.1}", row.causes_full.as_secs_f64() * 1e3),
                format!("{:.3}", row.causes_indexed.as_secs_f64() * 1e3),
                format!("{:.0}×", row.causes_full.as_secs_f64() / row.causes_indexed.as_secs_f64().max(1e-9)),
                row.causes_records_read.to_string(),
                row.causes_events.to_string(),
            ]);
        }
        table.to_markdown()
    }

    /// The third table: what depends on a model, from every event vs walked forward.
    #[must_use]
    pub fn effects_markdown(&self) -> String {
        let mut table = Table::new(&[
            ("events", Align::Right),
            ("effects of", Align::Left),
            ("from every event, ms", Align::Right),
            ("walked from the record, ms", Align::Right),
            ("ratio", Align::Right),
            ("records read by the walk", Align::Right),
            ("events in the answer", Align::Right),
        ]);
        for row in &self.rows {
            for (which, figures) in ["the middle model", "the last model"].iter().zip(&row.effects) {
                table.row(vec![
                    row.events.to_string(),
                    format!("{which} (model:{})", figures.model),
                    format!("{:.1}", figures.full.as_secs_f64() * 1e3),
                    format!("{:.1}", figures.walked.as_secs_f64() * 1e3),
                    format!("{:.1}×", figures.full.as_secs_f64() / figures.walked.as_secs_f64().max(1e-9)),
                    figures.records_read.to_string(),
                    figures.events.to_string(),
                ]);
            }
        }
        table.to_markdown()
    }

    /// The fourth table: the plan from every event vs from the events needed.
    #[must_use]
    pub fn needed_markdown(&self) -> String {
        let mut table = Table::new(&[
            ("events", Align::Right),
            ("plan of a corrected", Align::Left),
            ("from every event, ms", Align::Right),
            ("from the events needed, ms", Align::Right),
            ("ratio", Align::Right),
            ("events needed", Align::Right),
        ]);
        for row in &self.rows {
            for (which, figures) in ["middle model", "last model"].iter().zip(&row.needed) {
                table.row(vec![
                    row.events.to_string(),
                    format!("{which} (model:{})", figures.model),
                    format!("{:.1}", figures.every.as_secs_f64() * 1e3),
                    format!("{:.1}", figures.needed.as_secs_f64() * 1e3),
                    format!("{:.1}×", figures.every.as_secs_f64() / figures.needed.as_secs_f64().max(1e-9)),
                    figures.events.to_string(),
                ]);
            }
        }
        table.to_markdown()
    }
}

/// Build each size's event log with a real runtime, then time the plan.
pub fn run(options: &RepairBenchOptions) -> Result<RepairReport> {
    let mut rows = Vec::new();
    for &events in &options.sizes {
        let dir = fresh_dir(&options.dir, &format!("repair-{events}"))?;
        eprintln!("  building an event log of ~{events} events in {}", dir.display());
        let ns = build_app(&dir, events / EVENTS_PER_READING)?;
        let row = measure(&ns)?;
        eprintln!(
            "  {} events: read {:.1} ms, merge {:.1} ms, plan {:.1} ms ({} reruns)",
            row.events,
            row.read.as_secs_f64() * 1e3,
            row.merge.as_secs_f64() * 1e3,
            row.plan.as_secs_f64() * 1e3,
            row.reruns
        );
        eprintln!(
            "  causes of one record: {:.1} ms from every event, {:.3} ms by index ({} records read)",
            row.causes_full.as_secs_f64() * 1e3,
            row.causes_indexed.as_secs_f64() * 1e3,
            row.causes_records_read
        );
        for figures in &row.effects {
            eprintln!(
                "  effects of model:{}: {:.1} ms from every event, {:.1} ms walked ({} records read, {} events)",
                figures.model,
                figures.full.as_secs_f64() * 1e3,
                figures.walked.as_secs_f64() * 1e3,
                figures.records_read,
                figures.events
            );
        }
        for figures in &row.needed {
            eprintln!(
                "  plan of model:{}: {:.1} ms from every event, {:.1} ms from the {} events needed",
                figures.model,
                figures.every.as_secs_f64() * 1e3,
                figures.needed.as_secs_f64() * 1e3,
                figures.events
            );
        }
        rows.push(row);
    }
    Ok(RepairReport { rows })
}

fn build_app(dir: &std::path::Path, readings: usize) -> Result<Arc<dyn Namespace>> {
    let store = JournalStore::open(dir, JournalOptions { sync: SyncPolicy::Never, ..JournalOptions::default() })?;
    let ns: Arc<dyn Namespace> = Arc::new(store.journal_namespace("temp")?);
    let runtime = start_app(&ns)?;
    feed_history(&runtime, readings)?;
    runtime.stop(Duration::from_secs(10));
    Ok(ns)
}

/// The application's one handler: the reading, then the latest model (LATEST + READ).
pub(crate) fn predict() -> HandlerFn {
    Arc::new(|ctx: &mut HandlerContext<'_>| {
        let latest = ctx.latest("model")?;
        let model = ctx.get("model", latest)?;
        let mut out = ctx.record().to_vec();
        out.extend_from_slice(&model);
        ctx.append("pred", &out)?;
        Ok(())
    })
}

/// The application on `ns`, running (one worker).
pub(crate) fn start_app(ns: &Arc<dyn Namespace>) -> Result<Runtime> {
    let predict = predict();
    Ok(RuntimeBuilder::new(Arc::clone(ns))
        .concurrency(1)
        .log("sens", LogConfig::unbounded())
        .log("model", LogConfig::unbounded())
        .log("pred", LogConfig::unbounded())
        .handler("predict", RetryPolicy::default(), move |ctx| predict(ctx))
        .subscribe("sens", "predict")
        .start()?)
}

/// Append readings `from..from + n` to `sens` in one batch.
pub(crate) fn append_readings(runtime: &RuntimeHandle, from: usize, n: usize) -> Result<()> {
    let values: Vec<Vec<u8>> = (from..from + n).map(|i| format!("{}.{}", 20 + i % 5, i % 10).into_bytes()).collect();
    let batch: Vec<(&str, &[u8])> = values.iter().map(|v| ("sens", v.as_slice())).collect();
    runtime.append_batch(&batch)?;
    Ok(())
}

/// `readings` readings in batches of [`BATCH`], a new model every
/// [`READINGS_PER_MODEL`], handled in full; returns the readings appended.
pub(crate) fn feed_history(runtime: &Runtime, readings: usize) -> Result<usize> {
    let mut done = 0;
    while done < readings {
        if done % READINGS_PER_MODEL == 0 {
            // Readings before a new model are predicted with the old one.
            if !runtime.wait_idle(Duration::from_secs(600)) {
                return Err(BenchError::Check("the runtime did not go idle".into()));
            }
            runtime.append("model", format!("model {}", done / READINGS_PER_MODEL).as_bytes())?;
        }
        let n = BATCH.min(readings - done);
        append_readings(&runtime.handle(), done, n)?;
        done += n;
    }
    if !runtime.wait_idle(Duration::from_secs(600)) {
        return Err(BenchError::Check("the runtime did not go idle".into()));
    }
    Ok(done)
}

fn measure(ns_arc: &Arc<dyn Namespace>) -> Result<RepairRow> {
    let causes = measure_causes(ns_arc)?;
    let ns = ns_arc.as_ref();
    let models = ns.latest("model")?;
    let effects = [measure_effects(ns_arc, models.div_ceil(2).max(1))?, measure_effects(ns_arc, models)?];
    let needed = [measure_needed(ns_arc, models.div_ceil(2).max(1))?, measure_needed(ns_arc, models)?];
    let correction = vec![Correction::Record(RecordRef {
        namespace: ns.name().to_owned(),
        log: "model".into(),
        seq: models.div_ceil(2).max(1),
    })];
    let none = HashSet::new();
    let (mut read, mut merged_t, mut plan_t) = (Vec::new(), Vec::new(), Vec::new());
    let mut last = None;
    for _ in 0..REPS {
        let start = Instant::now();
        let events = namespace_events(ns, SeqRange::ALL)?;
        read.push(start.elapsed());
        let start = Instant::now();
        let merged = merge_owned(vec![events]);
        merged_t.push(start.elapsed());
        let start = Instant::now();
        let plan = RepairPlan::build(&merged, &correction, &none);
        plan_t.push(start.elapsed());
        last = Some((merged.len(), plan));
    }
    let (events, plan) = last.ok_or_else(|| BenchError::Check("no repetition ran".into()))?;
    if plan.reruns.is_empty() {
        return Err(BenchError::Check("the plan replays nothing: the correction reached no prediction".into()));
    }
    Ok(RepairRow {
        events,
        read: median_duration(&read),
        merge: median_duration(&merged_t),
        plan: median_duration(&plan_t),
        reruns: plan.reruns.len(),
        changed: plan.changed.iter().map(|c| c.seqs.len() + c.may_change.len()).sum(),
        causes_full: causes.full,
        causes_indexed: causes.indexed,
        causes_records_read: causes.records_read,
        causes_events: causes.events,
        effects,
        needed,
    })
}

/// The plan of a corrected `model:seq` from every event (read, merge,
/// plan) and from the events needed; the plans must agree.
fn measure_needed(ns: &Arc<dyn Namespace>, model: Seq) -> Result<NeededFigures> {
    let correction =
        [Correction::Record(RecordRef { namespace: ns.name().to_owned(), log: "model".into(), seq: model })];
    let none = HashSet::new();
    let (mut every, mut needed) = (Vec::new(), Vec::new());
    let (mut expected, mut found, mut events) = (RepairPlan::default(), RepairPlan::default(), 0);
    for _ in 0..REPS {
        let start = Instant::now();
        let merged = merge_owned(vec![namespace_events(ns.as_ref(), SeqRange::ALL)?]);
        expected = RepairPlan::build(&merged, &correction, &none);
        every.push(start.elapsed());
        let start = Instant::now();
        let some = events_needed(&correction, std::slice::from_ref(ns))
            .map_err(|e| BenchError::Check(format!("the events needed: {e}")))?;
        found = RepairPlan::build(&some, &correction, &none);
        needed.push(start.elapsed());
        events = some.len();
    }
    if (RepairPlan { events_scanned: 0, ..found.clone() }) != (RepairPlan { events_scanned: 0, ..expected })
        || found.reruns.is_empty()
    {
        return Err(BenchError::Check(format!(
            "the plan of model:{model} from the events needed differs from the plan of every event, or replays nothing"
        )));
    }
    Ok(NeededFigures { model, every: median_duration(&every), needed: median_duration(&needed), events })
}

/// What depends on `model:seq`: from every event (as `varve trace effects`
/// did before the walk) and walked from its APPEND; the answers must agree.
fn measure_effects(ns: &Arc<dyn Namespace>, model: Seq) -> Result<EffectsFigures> {
    let name = ns.name().to_owned();
    let (mut full, mut walked) = (Vec::new(), Vec::new());
    let (mut expected, mut found, mut records_read) = (Vec::new(), Vec::new(), 0);
    for _ in 0..REPS {
        let start = Instant::now();
        let merged = merge_owned(vec![namespace_events(ns.as_ref(), SeqRange::ALL)?]);
        let graph = CausalGraph::new(&merged);
        expected = graph.descendants(&name, "model", model).iter().map(|e| e.id.clone()).collect::<Vec<_>>();
        full.push(start.elapsed());
        let start = Instant::now();
        let open = |n: &str| Ok((n == name).then(|| Arc::clone(ns)));
        let namespaces = [name.clone()];
        let mut effects = Effects::new(&open, &namespaces);
        found = effects.descendants(&name, "model", model)?.into_iter().map(|e| e.id).collect();
        walked.push(start.elapsed());
        records_read = effects.records_read();
    }
    if found != expected || found.len() < 4 {
        return Err(BenchError::Check(format!(
            "effects of model:{model} walked ({} events) differ from the full graph's ({} events)",
            found.len(),
            expected.len()
        )));
    }
    Ok(EffectsFigures {
        model,
        full: median_duration(&full),
        walked: median_duration(&walked),
        records_read,
        events: found.len(),
    })
}

struct CausesFigures {
    full: Duration,
    indexed: Duration,
    records_read: u64,
    events: usize,
}

/// What caused the last prediction: from every event (as `varve trace
/// causes` did before the index) and by index; the answers must agree.
fn measure_causes(ns: &Arc<dyn Namespace>) -> Result<CausesFigures> {
    let (name, seq) = (ns.name().to_owned(), ns.latest("pred")?);
    let (mut full, mut indexed) = (Vec::new(), Vec::new());
    let (mut expected, mut found, mut records_read) = (Vec::new(), Vec::new(), 0);
    for _ in 0..REPS {
        let start = Instant::now();
        let merged = merge_owned(vec![namespace_events(ns.as_ref(), SeqRange::ALL)?]);
        let graph = CausalGraph::new(&merged);
        expected = graph.ancestors(&name, "pred", seq).iter().map(|e| e.id.clone()).collect::<Vec<_>>();
        full.push(start.elapsed());
        let start = Instant::now();
        let open = |n: &str| Ok((n == name).then(|| Arc::clone(ns)));
        let mut causes = Causes::new(&open);
        found = causes.ancestors(&name, "pred", seq)?.into_iter().map(|e| e.id).collect();
        indexed.push(start.elapsed());
        records_read = causes.records_read();
    }
    if found != expected || found.len() < 4 {
        return Err(BenchError::Check(format!(
            "causes by index ({} events) differ from the full graph's ({} events)",
            found.len(),
            expected.len()
        )));
    }
    Ok(CausesFigures {
        full: median_duration(&full),
        indexed: median_duration(&indexed),
        records_read,
        events: found.len(),
    })
}

fn median_duration(values: &[Duration]) -> Duration {
    Duration::from_secs_f64(median(values.iter().map(Duration::as_secs_f64).collect()))
}
