//! Repair and replay (`varve-repair`, Sans-Souci ch. 7) from Python:
//! `Namespace.repair_plan` (the dry run, a [`RepairPlan`]) and
//! `Namespace.repair` (the plan executed with Python callables as the
//! handlers). The `Namespace` methods in `log.rs` delegate here.
//!
//! **Offline only.** The executor writes shadows and swaps logs under the
//! namespace's writer: a runtime of this process running on the namespace
//! is refused (`RepairError`, kind `unsupported`); another process cannot
//! hold the namespace at the same time (the journal's single-writer lock).
//! The namespace's own writer (made by `Log.append` outside a runtime) is
//! released first, as a starting runtime releases it.
//!
//! **The GIL.** The plan and the execution run with the GIL released
//! ([`Python::detach`]); each replayed handler attaches for its call, the
//! same wrapper as the runtime's workers ([`python_handler`]), so its `ctx`
//! is a replaying `HandlerContext` (reads pinned, appends held). No lock of
//! this module is held while the GIL is taken.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use varve_log::Seq;
use varve_repair::{Correction, Inputs, NotReplayable, RepairOutcome, Since};
use varve_runtime::trace::RecordRef;
use varve_runtime::{HandlerFn, StoredEvent};

use crate::error::{Error, Result};
use crate::log::{data, NsState};
use crate::object::json_to_py;
use crate::runtime::python_handler;

/// The repair graph of one correction (a dry run: nothing is changed): the
/// handler runs to replay, in causal order, with the reason for each, and per
/// log the seqs that change. Made by :meth:`Namespace.repair_plan`.
#[pyclass(frozen, module = "varve")]
pub struct RepairPlan {
    plan: varve_repair::RepairPlan,
}

#[pymethods]
impl RepairPlan {
    /// The runs to replay, in causal order, as dicts (``handler``,
    /// ``trigger``, ``why``, ``replaces``, ``certain``, ``replayable``, ...).
    #[getter]
    fn reruns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, serde_json::to_value(&self.plan.reruns))
    }

    /// The logs that change, as dicts (``namespace``, ``log``, ``first``,
    /// ``seqs``, ``may_change``).
    #[getter]
    fn changed<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, serde_json::to_value(&self.plan.changed))
    }

    /// Handlers among the reruns marked not replayable, sorted.
    #[getter]
    fn not_replayable(&self) -> Vec<String> {
        self.plan.not_replayable.clone()
    }

    /// Events read to build the plan.
    #[getter]
    fn events_scanned(&self) -> usize {
        self.plan.events_scanned
    }

    /// The plan as text (as ``varve repair plan`` prints it).
    fn text(&self) -> String {
        self.plan.to_text()
    }

    /// The repair graph in Graphviz DOT (as ``varve repair plan --dot``).
    fn dot(&self) -> String {
        self.plan.to_dot()
    }

    /// The whole plan as a dict (as ``varve repair plan --json``).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, serde_json::to_value(&self.plan))
    }

    fn __repr__(&self) -> String {
        let text = self.plan.to_text();
        format!("<varve.RepairPlan {}>", text.lines().next().unwrap_or_default())
    }
}

/// Part of a plan as Python objects (through its JSON, so types are `json.loads`'s).
fn to_py(
    py: Python<'_>,
    value: std::result::Result<serde_json::Value, serde_json::Error>,
) -> PyResult<Bound<'_, PyAny>> {
    let value = value.map_err(|e| Error::Corrupt(format!("a repair plan as JSON: {e}")))?;
    json_to_py(py, &value)
}

/// The arguments that say what is corrected (`record=` or `handler=`).
pub(crate) struct Target<'a, 'py> {
    pub record: Option<(String, Seq)>,
    pub handler: Option<String>,
    pub since_seq: Option<Seq>,
    /// `Some` only for `repair` (`repair_plan` takes no value).
    pub value: Option<&'a Bound<'py, PyAny>>,
}

/// The correction and, for a record, its new value. `repair` is true for
/// `Namespace.repair` (a record needs its value there).
fn correction(namespace: &str, target: &Target<'_, '_>, repair: bool) -> PyResult<(Correction, Option<Vec<u8>>)> {
    match (&target.record, &target.handler) {
        (Some(_), Some(_)) => Err(PyValueError::new_err(
            "pass either record=(log, seq), the record corrected, or handler=NAME, the handler with new code; not both \
             (repair one, then the other)",
        )),
        (None, None) => Err(PyValueError::new_err(
            "say what to repair: record=(log, seq) for a corrected record, or handler=NAME for a handler with new code",
        )),
        (Some((log, seq)), None) => {
            if target.since_seq.is_some() {
                return Err(PyValueError::new_err(
                    "since_seq goes with handler=NAME (which of its runs re-run); a corrected record is one seq",
                ));
            }
            if *seq == 0 {
                return Err(PyValueError::new_err(format!("record=({log:?}, 0): seqs start at 1")));
            }
            let value = match (target.value, repair) {
                (Some(value), _) => Some(data(value)?.as_slice().to_vec()),
                (None, true) => {
                    return Err(PyTypeError::new_err(format!(
                        "record=({log:?}, {seq}) needs value=, the corrected record's bytes"
                    )))
                }
                (None, false) => None,
            };
            let record = RecordRef { namespace: namespace.to_owned(), log: log.clone(), seq: *seq };
            Ok((Correction::Record(record), value))
        }
        (None, Some(handler)) => {
            if target.value.is_some() {
                return Err(PyValueError::new_err(format!(
                    "value= goes with record=(log, seq); handler={handler:?} gets its new code in handlers="
                )));
            }
            let since = target.since_seq.map_or(Since::Start, Since::Seq);
            Ok((Correction::Handler { handler: handler.clone(), since }, None))
        }
    }
}

/// Handler names from an iterable of str (a lone str is refused: it is
/// iterable too, letter by letter).
pub(crate) fn handler_names(names: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<HashSet<String>> {
    let Some(names) = names else { return Ok(HashSet::new()) };
    if names.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!("{what} is an iterable of handler names, e.g. [{names}], not a str")));
    }
    names.try_iter()?.map(|name| name?.extract::<String>()).collect()
}

/// The events of the namespace the repair needs (a corrected record's: from
/// its APPEND on, `varve_repair::events_needed`), and the plan of `correction`.
fn build(
    ns: &NsState,
    correction: Correction,
    not_replayable: &HashSet<String>,
) -> Result<(Vec<StoredEvent>, varve_repair::RepairPlan)> {
    let corrections = std::slice::from_ref(&correction);
    let events = ns.with(|ns| Ok(varve_repair::events_needed(corrections, std::slice::from_ref(ns))?))?;
    let plan = varve_repair::RepairPlan::build(&events, corrections, not_replayable);
    Ok((events, plan))
}

/// `Namespace.repair_plan`.
pub(crate) fn repair_plan(
    py: Python<'_>,
    ns: &NsState,
    target: &Target<'_, '_>,
    not_replayable: Option<&Bound<'_, PyAny>>,
) -> PyResult<RepairPlan> {
    let (correction, _) = correction(&ns.name, target, false)?;
    let not_replayable = handler_names(not_replayable, "not_replayable")?;
    let (_, plan) = py.detach(|| build(ns, correction, &not_replayable))?;
    Ok(RepairPlan { plan })
}

/// `Namespace.repair`.
pub(crate) fn repair<'py>(
    py: Python<'py>,
    ns: &Arc<NsState>,
    target: &Target<'_, 'py>,
    handlers: &Bound<'py, PyAny>,
    not_replayable: Option<&Bound<'py, PyAny>>,
    on_not_replayable: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let (correction, value) = correction(&ns.name, target, true)?;
    let not_replayable = handler_names(not_replayable, "not_replayable")?;
    let choice = match on_not_replayable {
        "refuse" => NotReplayable::Refuse,
        "run" => NotReplayable::Run,
        "skip" => NotReplayable::Skip,
        other => {
            return Err(PyValueError::new_err(format!(
                "on_not_replayable={other:?}: use \"refuse\" (raise RepairError), \"run\" (run them again) or \
                 \"skip\" (keep their outputs as they were)"
            )))
        }
    };
    let handlers = handler_fns(handlers)?;
    if let Correction::Handler { handler, .. } = &correction {
        if !handlers.contains_key(handler) {
            return Err(PyValueError::new_err(format!(
                "handler={handler:?} is repaired with new code: pass it in handlers={{{handler:?}: new_function, ...}}"
            )));
        }
    }
    let outcome = py.detach(|| execute(ns, correction, value, &not_replayable, &handlers, choice))?;
    outcome_dict(py, outcome)
}

/// Python callables by handler name, as Rust handlers.
fn handler_fns(handlers: &Bound<'_, PyAny>) -> PyResult<HashMap<String, HandlerFn>> {
    let items = handlers.call_method0("items").map_err(|_| {
        PyTypeError::new_err("handlers is a mapping of handler name to function, e.g. {\"double\": double}")
    })?;
    let mut fns = HashMap::new();
    for item in items.try_iter()? {
        let (name, callable): (String, Bound<'_, PyAny>) = item?.extract()?;
        if !callable.is_callable() {
            return Err(PyTypeError::new_err(format!(
                "handlers[{name:?}] must be callable (a function taking the context), not {}",
                callable.get_type().name()?
            )));
        }
        let handler: HandlerFn = Arc::new(python_handler(callable.unbind()));
        fns.insert(name, handler);
    }
    Ok(fns)
}

/// What a repair did; `online` when a runtime of this process served the namespace.
struct Repaired {
    outcome: RepairOutcome,
    online: Option<varve_repair::OnlineOutcome>,
    /// Repairs a crash interrupted, finished (or called off) first.
    resumed: Vec<varve_repair::Resumed>,
}

/// Build the plan and carry it out (without the GIL): offline, or online
/// while a runtime of this process serves the namespace.
fn execute(
    ns: &Arc<NsState>,
    correction: Correction,
    value: Option<Vec<u8>>,
    not_replayable: &HashSet<String>,
    handlers: &HashMap<String, HandlerFn>,
    choice: NotReplayable,
) -> Result<Repaired> {
    let mut values = HashMap::new();
    if let (Correction::Record(record), Some(value)) = (&correction, value) {
        // The record must exist: a NotFound names it.
        ns.with(|handle| Ok(handle.get(&record.log, record.seq)?))?;
        values.insert(record.clone(), value);
    }
    if let Some(runtime) = ns.running_runtime() {
        let corrections = [correction];
        let mut online = varve_repair::Online::new(&corrections, &values, handlers, not_replayable);
        online.not_replayable = choice;
        let mut done = varve_repair::repair_online(&runtime, &online)?;
        return Ok(Repaired { outcome: std::mem::take(&mut done.outcome), online: Some(done), resumed: Vec::new() });
    }
    // The repair writes the logs: the namespace's writer must not predict seqs meanwhile.
    ns.release_writer();
    let namespaces = HashMap::from([(ns.name.clone(), ns.handle()?)]);
    let resumed = varve_repair::resume(&namespaces)?;
    let corrections = [correction];
    if let Some(same) = resumed.iter().find(|r| !r.finished.is_empty() && r.is_request(&corrections, &values)) {
        // Asked again after a crash: finishing it was the repair.
        let outcome = RepairOutcome { swapped: same.finished.clone(), ..RepairOutcome::default() };
        return Ok(Repaired { outcome, online: None, resumed });
    }
    let [correction] = corrections;
    let (events, plan) = build(ns, correction, not_replayable)?;
    let inputs = Inputs { events: &events, namespaces: &namespaces, handlers, values: &values, not_replayable: choice };
    Ok(Repaired { outcome: varve_repair::execute(&plan, &inputs)?, online: None, resumed })
}

/// `Namespace.resume_repairs`.
pub(crate) fn resume_repairs<'py>(py: Python<'py>, ns: &Arc<NsState>) -> PyResult<Bound<'py, PyList>> {
    if ns.running_runtime().is_some() {
        return Err(Error::State {
            state: "running",
            message: format!(
                "a runtime of this process serves namespace {:?}: stop it first (a resume renames logs, which \
                 must not happen under a running application)",
                ns.name
            ),
        }
        .into());
    }
    ns.release_writer();
    let namespaces = HashMap::from([(ns.name.clone(), ns.handle()?)]);
    let resumed = py.detach(|| varve_repair::resume(&namespaces)).map_err(Error::from)?;
    resumed_list(py, resumed)
}

/// `[{"id", "finished", "swapped_now", "called_off"}]`.
fn resumed_list(py: Python<'_>, resumed: Vec<varve_repair::Resumed>) -> PyResult<Bound<'_, PyList>> {
    let list = PyList::empty(py);
    for r in resumed {
        let item = PyDict::new(py);
        item.set_item("id", r.id)?;
        item.set_item("finished", generations_dict(py, r.finished)?)?;
        item.set_item("swapped_now", r.swapped_now)?;
        item.set_item("called_off", r.called_off.into_iter().collect::<HashMap<_, _>>())?;
        list.append(item)?;
    }
    Ok(list)
}

/// `{namespace: [(log, generation), ...]}`: where each swapped log's old history is kept.
fn generations_dict(
    py: Python<'_>,
    swapped: std::collections::BTreeMap<String, Vec<(String, String)>>,
) -> PyResult<Bound<'_, PyDict>> {
    let dict = PyDict::new(py);
    for (namespace, logs) in swapped {
        let pairs = logs
            .into_iter()
            .map(|(log, generation)| PyTuple::new(py, [log, generation]))
            .collect::<PyResult<Vec<_>>>()?;
        dict.set_item(namespace, PyList::new(py, pairs)?)?;
    }
    Ok(dict)
}

/// `{"swapped": {namespace: [(log, generation), ...]}, "replayed", "written", "changed", "event_error",
/// "online", "resumed"}` (`online`: `None`, or `{"rounds", "paused_seconds", "appends_held_seconds"}`;
/// `resumed`: the interrupted repairs finished first, `[{"id", "finished", "swapped_now", "called_off"}]`).
fn outcome_dict(py: Python<'_>, repaired: Repaired) -> PyResult<Bound<'_, PyDict>> {
    let Repaired { outcome, online, resumed } = repaired;
    let resumed_list = resumed_list(py, resumed)?;
    let dict = PyDict::new(py);
    dict.set_item("swapped", generations_dict(py, outcome.swapped)?)?;
    dict.set_item("replayed", outcome.replayed)?;
    dict.set_item("written", outcome.written)?;
    dict.set_item("changed", outcome.changed)?;
    dict.set_item("event_error", outcome.event_error)?;
    dict.set_item("resumed", resumed_list)?;
    match online {
        None => dict.set_item("online", py.None())?,
        Some(online) => {
            let details = PyDict::new(py);
            details.set_item("rounds", online.rounds)?;
            details.set_item("paused_seconds", online.paused.as_secs_f64())?;
            details.set_item("appends_held_seconds", online.appends_held.as_secs_f64())?;
            dict.set_item("online", details)?;
        }
    }
    Ok(dict)
}
