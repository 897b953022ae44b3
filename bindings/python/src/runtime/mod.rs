//! `Runtime`, `HandlerContext`, `Event`: the runtime of `varve-runtime`
//! (handlers on append, topics, the causal event log) from Python, with
//! Python callables as handlers.
//!
//! **Lifecycle.** A Python `Runtime` is *planned* first (handlers, topics,
//! subscriptions are collected), then `start()` builds the Rust
//! [`varve_runtime::Runtime`] with a [`varve_runtime::RuntimeBuilder`] — handlers are fixed
//! for a runtime's life, as in Rust — and `stop()` (or the end of a `with`
//! block, the store's `close()`, the interpreter's exit) stops it for good.
//! A stopped runtime does not restart; a new one over the same namespace
//! re-runs whatever the old one left unfinished.
//!
//! **The GIL.** Python handlers run on the runtime's worker threads. A
//! worker attaches to the interpreter only for the call of the callable
//! ([`Python::try_attach`]); every store or runtime call made from Python —
//! the `Runtime` methods and the context's — releases the GIL
//! ([`Python::detach`]), so workers and other Python threads go on while one
//! waits on the journal or on the runtime's writer lock. No lock of this
//! module (or its files) is held while the GIL is taken, so the GIL and the runtime's locks
//! never wait for each other.
//!
//! **Errors in handlers.** A Python exception escaping a handler (any
//! `BaseException`) becomes the handler's `Err`: the runtime writes a FAILED
//! event whose reason is `Type: message` followed by the traceback, then
//! retries or dead-letters it per the handler's [`varve_runtime::RetryPolicy`]. Nothing of
//! it reaches the worker thread as a panic.
//!
//! **Files.** This one owns the `Runtime` class (the Python API);
//! [`state`] the lifecycle, [`handler`] Python handlers and their
//! `HandlerContext`, [`event`] the `Event` class and its exports, [`args`]
//! the conversion of Python arguments.

mod args;
mod event;
mod handler;
mod sorted_map;
mod state;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use varve_log::{LogError, Seq, SeqRange};
use varve_runtime::event::parse_trace;
use varve_runtime::trace::trace_events;
use varve_runtime::{DeadLetter, HandlerKind, HandlerSpec, RuntimeOptions, CONCURRENCY_MAX, DEAD_LETTERS_LOG};

use self::args::{log_names, retry_policy, with_batch};
use self::event::event_list;
pub use self::event::{to_dot, to_otel, Event};
pub(crate) use self::handler::python_handler;
pub use self::handler::HandlerContext;
pub use self::sorted_map::{HandlerMap, PyMapReader};
pub use self::state::stop_all_runtimes;
use self::state::{not_running, Phase};
pub(crate) use self::state::{RuntimeState, STOP_GRACE};
use crate::duration::{seconds, seconds_or_none};
use crate::error::{invalid_argument, Error};
use crate::log::{data, retention, Location, Namespace};
use crate::records::WATCH_POLL;

/// The event-driven runtime over one namespace: handlers run when records
/// are appended to the logs they subscribe to, and every append, trigger,
/// run and handler read is recorded in the namespace's ``_events`` log with
/// its cause. See docs/python.md, "Handlers in Python".
///
/// Register handlers (``@rt.handler(log=...)``, :meth:`add_handler`,
/// :meth:`add_command`), then :meth:`start` (or ``with rt:``); append with
/// :meth:`append` / :meth:`publish`; :meth:`stop` when done. While a runtime
/// serves a namespace it must be its only writer: append through the
/// runtime, not through ``Log.append``. So a runtime runs where its
/// namespace lives: one over a namespace of a remote store
/// (``varve://``) raises :class:`varve.InvalidArgument`.
#[pyclass(frozen, subclass, module = "varve")]
pub struct Runtime {
    state: Arc<RuntimeState>,
}

#[pymethods]
impl Runtime {
    #[new]
    #[pyo3(signature = (
        namespace, *, concurrency = 4, record_reads = true, host = None, socket = None, backlog_max = 100_000,
        backlog_wait = 60.0, events_keep = None, events_keep_for = None
    ))]
    #[expect(clippy::too_many_arguments, reason = "the Python constructor's keyword arguments")]
    fn new(
        py: Python<'_>,
        namespace: PyRef<'_, Namespace>,
        concurrency: usize,
        record_reads: bool,
        host: Option<u64>,
        socket: Option<std::path::PathBuf>,
        backlog_max: usize,
        backlog_wait: f64,
        events_keep: Option<u64>,
        events_keep_for: Option<f64>,
    ) -> PyResult<Self> {
        let backlog_wait = std::time::Duration::try_from_secs_f64(backlog_wait).map_err(|_| {
            invalid_argument(format!("backlog_wait is a number of seconds, 0 or more, not {backlog_wait}"))
        })?;
        // Zero passes here and is refused at start with the Rust runtime's message.
        let events_keep_for = seconds_or_none("events_keep_for", events_keep_for)?;
        let ns = Arc::clone(&namespace.state);
        let dir = match &ns.location {
            Location::Embedded(dir) => dir.clone(),
            Location::Remote(uri) => return Err(remote_runtime(&ns.name, uri).into()),
        };
        if ns.read_only {
            return Err(
                Error::Log(LogError::ReadOnly { namespace: ns.name.clone(), operation: "start a runtime" }).into()
            );
        }
        // 0 would make Rust's writer-only runtime, which runs no handler: the
        // Python handlers registered on it would never run.
        if !(1..=CONCURRENCY_MAX).contains(&concurrency) {
            return Err(invalid_argument(format!(
                "concurrency (the worker threads that run handlers) is between 1 and {CONCURRENCY_MAX}, not \
                 {concurrency}"
            ))
            .into());
        }
        let host = match host {
            Some(host) => host,
            // As the CLI does, so `varve run` and Python agree on the namespace's host.
            None => py.detach(|| varve_runtime::host_id_for_dir(&dir)).map_err(Error::from)?,
        };
        let options = RuntimeOptions {
            host,
            concurrency,
            record_reads,
            socket,
            data_dir: Some(dir),
            shared: None,
            backlog: varve_runtime::Backlog { max: backlog_max, wait: backlog_wait },
            events_keep,
            events_keep_for,
        };
        Ok(Runtime { state: RuntimeState::new(ns, options) })
    }

    /// The namespace's name.
    #[getter]
    fn namespace(&self) -> &str {
        &self.state.ns.name
    }

    /// The host id that labels this runtime's events (16 hex digits in event ids).
    #[getter]
    fn host(&self) -> u64 {
        self.state.options.host
    }

    /// ``"not started"``, ``"running"`` or ``"stopped"``.
    #[getter]
    fn state(&self, py: Python<'_>) -> PyResult<&'static str> {
        self.state.read_phase(py, |phase| Ok(phase.name()))
    }

    /// Register the Python callable `handler` (called with a
    /// :class:`HandlerContext`) as handler `name`, subscribed to `log` (a name
    /// or a list of names) when the runtime starts. Only before :meth:`start`.
    ///
    /// A handler that raises is recorded as FAILED with the exception and
    /// retried after `backoff` seconds (doubling up to `backoff_max`); after
    /// `attempts` failures (1 to 1000) the record goes to ``_dead_letters``.
    #[pyo3(signature = (name, handler, *, log = None, attempts = 3, backoff = 0.1, backoff_max = 10.0))]
    #[expect(clippy::too_many_arguments, reason = "Python keyword arguments")]
    fn add_handler(
        &self,
        py: Python<'_>,
        name: &str,
        handler: &Bound<'_, PyAny>,
        log: Option<&Bound<'_, PyAny>>,
        attempts: u32,
        backoff: f64,
        backoff_max: f64,
    ) -> PyResult<()> {
        if !handler.is_callable() {
            return Err(PyTypeError::new_err(format!(
                "handler {name:?} must be callable (a function taking the context), not {}",
                handler.get_type().name()?
            )));
        }
        let retry = retry_policy(name, attempts, backoff, backoff_max, None)?;
        let kind = HandlerKind::Rust(Arc::new(python_handler(handler.clone().unbind())));
        self.plan_handler(py, HandlerSpec { name: name.to_owned(), kind, retry }, log_names(log)?)
    }

    /// Register an external command as handler `name`: `argv` (``argv[0]``
    /// found on ``PATH``) runs per record with the record on stdin and its
    /// context in ``VARVE_*`` environment variables; a non-zero exit or
    /// running longer than `timeout` seconds is a failure. Only before
    /// :meth:`start`.
    #[pyo3(signature = (name, argv, *, log = None, attempts = 3, backoff = 0.1, backoff_max = 10.0, timeout = Some(30.0)))]
    #[expect(clippy::too_many_arguments, reason = "Python keyword arguments")]
    fn add_command(
        &self,
        py: Python<'_>,
        name: &str,
        argv: Vec<String>,
        log: Option<&Bound<'_, PyAny>>,
        attempts: u32,
        backoff: f64,
        backoff_max: f64,
        timeout: Option<f64>,
    ) -> PyResult<()> {
        if argv.is_empty() {
            return Err(invalid_argument(format!("command handler {name:?} needs a program: argv is empty")).into());
        }
        let retry = retry_policy(name, attempts, backoff, backoff_max, timeout)?;
        self.plan_handler(
            py,
            HandlerSpec { name: name.to_owned(), kind: HandlerKind::Command(argv), retry },
            log_names(log)?,
        )
    }

    /// Names of the registered handlers, sorted.
    #[getter]
    fn handlers(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.state.read_phase(py, |phase| {
            let mut names: Vec<String> = match phase {
                Phase::Planned(plan) => plan.handlers.iter().map(|h| h.name.clone()).collect(),
                Phase::Running { handlers, .. } => handlers.clone(),
                Phase::Stopped => Vec::new(),
            };
            names.sort();
            Ok(names)
        })
    }

    /// Create the log `name` if absent (``keep``/``on_full`` as
    /// :meth:`Namespace.log`). Any time; append to it through the runtime.
    #[pyo3(signature = (name, keep = None, on_full = "refuse"))]
    fn create_log(&self, py: Python<'_>, name: &str, keep: Option<u64>, on_full: &str) -> PyResult<()> {
        let config = retention(keep, on_full)?;
        py.detach(|| {
            self.state.ns.with(|ns| match ns.log_info(name) {
                Ok(_) if keep.is_none() => Ok(()),
                Ok(_) | Err(LogError::LogNotFound { .. }) => Ok(ns.create_log(name, config)?),
                Err(e) => Err(e.into()),
            })
        })
        .map_err(Into::into)
    }

    /// Canal's ``create_topic``: a log whose subscriptions are kept in the
    /// store. Before :meth:`start` it is created when the runtime starts.
    fn create_topic(&self, py: Python<'_>, topic: &str) -> PyResult<()> {
        self.state.read_phase(py, |phase| match phase {
            Phase::Planned(plan) => {
                varve_log::validate_name(topic, false)?;
                plan.topics.push(topic.to_owned());
                Ok(())
            }
            Phase::Running { runtime, .. } => Ok(runtime.create_topic(topic)?),
            Phase::Stopped => Err(not_running(phase)),
        })
    }

    /// Run `handler` for every record appended to `log` (a log or topic) from
    /// now on. Subscriptions are kept in the store, so a later runtime over
    /// the namespace keeps them. Before :meth:`start` it takes effect then.
    fn subscribe(&self, py: Python<'_>, log: &str, handler: &str) -> PyResult<()> {
        self.state.read_phase(py, |phase| match phase {
            Phase::Planned(plan) => {
                if !plan.handlers.iter().any(|h| h.name == handler) {
                    return Err(varve_runtime::RuntimeError::UnknownHandler { name: handler.to_owned() }.into());
                }
                plan.subscriptions.push((log.to_owned(), handler.to_owned()));
                Ok(())
            }
            Phase::Running { runtime, .. } => Ok(runtime.subscribe(log, handler)?),
            Phase::Stopped => Err(not_running(phase)),
        })
    }

    /// Stop running `handler` for records appended to `log` from now on (a
    /// running runtime only).
    fn unsubscribe(&self, py: Python<'_>, log: &str, handler: &str) -> PyResult<()> {
        self.state.with_running(py, |runtime| runtime.unsubscribe(log, handler))
    }

    /// ``{log: [handler, ...]}``: the subscriptions now (a running runtime)
    /// or those planned for the start.
    fn subscriptions(&self, py: Python<'_>) -> PyResult<BTreeMap<String, Vec<String>>> {
        self.state.read_phase(py, |phase| {
            Ok(match phase {
                Phase::Running { runtime, .. } => runtime
                    .subscriptions()
                    .into_iter()
                    .map(|(log, handlers)| (log, handlers.into_iter().collect()))
                    .collect(),
                Phase::Planned(plan) => {
                    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
                    for (log, handler) in &plan.subscriptions {
                        out.entry(log.clone()).or_default().push(handler.clone());
                    }
                    out
                }
                Phase::Stopped => BTreeMap::new(),
            })
        })
    }

    /// The topics created so far (a running runtime) or planned.
    fn topics(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.state.read_phase(py, |phase| {
            Ok(match phase {
                Phase::Running { runtime, .. } => runtime.topics().into_iter().collect(),
                Phase::Planned(plan) => plan.topics.clone(),
                Phase::Stopped => Vec::new(),
            })
        })
    }

    /// Start: create the topics, apply the subscriptions, re-queue what a
    /// previous runtime left unfinished, and start the workers. Calling it on
    /// a running runtime does nothing; on a stopped one raises
    /// :class:`varve.Stopped`.
    fn start(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.state.start()).map_err(Into::into)
    }

    /// Append `record` to `log` from outside any handler (a new trace); the
    /// handlers subscribed to `log` now run for it. Returns its seq.
    fn append(&self, py: Python<'_>, log: &str, record: &Bound<'_, PyAny>) -> PyResult<u64> {
        let record = data(record)?;
        let bytes = record.as_slice();
        py.detach(|| Ok(self.state.handle()?.append(log, bytes)?)).map_err(|e: Error| e.into())
    }

    /// Append ``[(log, record), ...]`` atomically, with their triggers;
    /// returns the seqs in input order.
    fn append_batch(&self, py: Python<'_>, batch: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
        with_batch(batch, |entries| {
            py.detach(|| Ok(self.state.handle()?.append_batch(entries)?)).map_err(|e: Error| e.into())
        })
    }

    /// Canal's ``publish``: append `data` to `topic`; returns its index (seq).
    fn publish(&self, py: Python<'_>, topic: &str, data: &Bound<'_, PyAny>) -> PyResult<u64> {
        self.append(py, topic, data)
    }

    /// Canal's ``get``: the record at `index` (seq) of a topic or log. Any time.
    fn get<'py>(&self, py: Python<'py>, log: &str, index: u64) -> PyResult<Bound<'py, PyBytes>> {
        let value = py.detach(|| self.state.ns.with(|ns| Ok(ns.get(log, index)?)))?;
        Ok(PyBytes::new(py, &value))
    }

    /// Read the sorted map handlers build on the op log `log`
    /// (:meth:`HandlerContext.sorted_map`) at any version: its current
    /// generation, or with `generation` the old one a repair kept (from 1).
    /// While running.
    #[pyo3(signature = (log, generation = None))]
    fn sorted_map(&self, py: Python<'_>, log: &str, generation: Option<u64>) -> PyResult<PyMapReader> {
        let reader = py.detach(|| -> crate::error::Result<_> {
            let handle = self.state.handle()?;
            Ok(match generation {
                None => handle.sorted_map(log)?,
                Some(generation) => handle.sorted_map_generation(log, generation)?,
            })
        })?;
        Ok(PyMapReader { reader, log: log.to_owned() })
    }

    /// Canal's ``latest_index``: the newest index (seq) of a topic or log; 0 if empty.
    fn latest_index(&self, py: Python<'_>, topic: &str) -> PyResult<u64> {
        py.detach(|| self.state.ns.with(|ns| Ok(ns.latest(topic)?))).map_err(Into::into)
    }

    /// Wait until no handler is ready, running or waiting for a retry;
    /// False if `timeout` seconds (None: forever) pass first. Ctrl-C
    /// interrupts it. Do not call it from inside a handler (it would wait
    /// for itself).
    #[pyo3(signature = (timeout = None))]
    fn wait_idle(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        let deadline = seconds_or_none("timeout", timeout)?.map(|t| Instant::now() + t);
        let handle = py.detach(|| self.state.handle())?;
        loop {
            let wait = deadline.map_or(WATCH_POLL, |d| d.saturating_duration_since(Instant::now()).min(WATCH_POLL));
            if py.detach(|| handle.wait_idle(wait)) {
                return Ok(true);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(false);
            }
            py.check_signals()?;
        }
    }

    /// Stop: no new runs; wait up to `timeout` seconds for running handlers,
    /// then leave them (what they try to write afterwards raises
    /// :class:`varve.Stopped`, and their records run again under the next
    /// runtime). Stopping twice is harmless.
    #[pyo3(signature = (timeout = 5.0))]
    fn stop(&self, py: Python<'_>, timeout: f64) -> PyResult<()> {
        let grace = seconds("timeout", timeout).map_err(PyErr::from)?;
        py.detach(|| self.state.shut_down(grace));
        Ok(())
    }

    /// Every event of the namespace's ``_events`` log with ``start <= seq <
    /// stop`` (seq in ``_events``), oldest first. Any time, also after stop.
    #[pyo3(signature = (start = None, stop = None))]
    fn events(&self, py: Python<'_>, start: Option<u64>, stop: Option<u64>) -> PyResult<Vec<Py<Event>>> {
        let first = start.unwrap_or(1).max(1);
        let last = stop.map_or(Seq::MAX, |s| s.saturating_sub(1));
        if last < first {
            return Ok(Vec::new());
        }
        let events = py.detach(|| self.state.events(SeqRange { first, last }))?;
        event_list(py, events)
    }

    /// What event retention (``events_keep``, ``events_keep_for``) has done,
    /// as a dict ``{keep, keep_for, earliest, latest, trims, last_error}``:
    /// the rules (``keep_for`` in seconds; None where unset), the events
    /// kept, the trims made since start, the last trim's failure (None if
    /// it succeeded).
    #[getter]
    fn event_retention<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let retention = py.detach(|| -> crate::error::Result<_> { Ok(self.state.handle()?.event_retention()?) })?;
        let out = PyDict::new(py);
        out.set_item("keep", retention.keep)?;
        out.set_item("keep_for", retention.keep_for.map(|d| d.as_secs_f64()))?;
        out.set_item("earliest", retention.earliest)?;
        out.set_item("latest", retention.latest)?;
        out.set_item("trims", retention.trims)?;
        out.set_item("last_error", retention.last_error)?;
        Ok(out)
    }

    /// What caused record `log`/`seq`: the record's APPEND event first, then
    /// its ancestors in the causal graph (appends, triggers, runs, and the
    /// appends the runs read), in event order. Empty for an unknown record.
    /// Found by the index beside ``_events``: it reads the answer's events,
    /// not every event (docs/runtime.md).
    fn causes(&self, py: Python<'_>, log: &str, seq: u64) -> PyResult<Vec<Py<Event>>> {
        let found = py.detach(|| self.state.causes(log, seq))?;
        event_list(py, found)
    }

    /// What depends on record `log`/`seq`, transitively: the record's APPEND
    /// first, then the runs it triggered, what they appended, the reads of
    /// it and what followed, in event order.
    /// Found by a walk over the events after the record (docs/runtime.md).
    fn effects(&self, py: Python<'_>, log: &str, seq: u64) -> PyResult<Vec<Py<Event>>> {
        let found = py.detach(|| self.state.effects(log, seq))?;
        event_list(py, found)
    }

    /// Every event of the trace `trace_id` (hex, as :attr:`Event.trace_id`).
    fn trace(&self, py: Python<'_>, trace_id: &str) -> PyResult<Vec<Py<Event>>> {
        let trace = parse_trace(trace_id).map_err(Error::from)?;
        let events = py.detach(|| self.state.events(SeqRange::ALL))?;
        event_list(py, trace_events(&events, trace).into_iter().cloned())
    }

    /// The records that kept failing, oldest first, as dicts ``{handler,
    /// log, seq, trigger, attempts, reason, trace}``.
    fn dead_letters<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let letters = py.detach(|| {
            self.state.ns.with(|ns| {
                let records = match ns.scan(DEAD_LETTERS_LOG, SeqRange::ALL) {
                    Ok(records) => records,
                    Err(LogError::LogNotFound { .. }) => return Ok(Vec::new()),
                    Err(e) => return Err(e.into()),
                };
                let mut letters = Vec::new();
                for record in records {
                    let record = record?;
                    let letter: DeadLetter = serde_json::from_slice(&record.value).map_err(|e| {
                        Error::Corrupt(format!("{DEAD_LETTERS_LOG} seq {} does not parse: {e}", record.seq))
                    })?;
                    letters.push(letter);
                }
                Ok(letters)
            })
        })?;
        letters
            .into_iter()
            .map(|l| {
                let dict = PyDict::new(py);
                dict.set_item("handler", l.handler)?;
                dict.set_item("log", l.log)?;
                dict.set_item("seq", l.seq)?;
                dict.set_item("trigger", l.trigger)?;
                dict.set_item("attempts", l.attempts)?;
                dict.set_item("reason", l.reason)?;
                dict.set_item("trace", l.trace)?;
                Ok(dict)
            })
            .collect()
    }

    fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        slf.get().start(slf.py())?;
        Ok(slf)
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.stop(py, STOP_GRACE.as_secs_f64())?;
        Ok(false)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("<varve.Runtime namespace={:?} {}>", self.state.ns.name, self.state(py)?))
    }
}

/// Why a runtime cannot serve a namespace of a remote store.
fn remote_runtime(namespace: &str, uri: &str) -> Error {
    if uri.starts_with("nats://") {
        return invalid_argument(format!(
            "namespace {namespace:?} is in the NATS cluster {uri}: a Python runtime there is not supported yet; host \
             the handlers with `varve --store {uri} --data DIR run APP.toml` (external-command handlers may be \
             Python scripts), or from Rust"
        ));
    }
    invalid_argument(format!(
        "namespace {namespace:?} is on the server {uri}: a runtime predicts the seqs of its appends, so it must be \
         its namespace's only writer, and handlers run where the namespace lives: on the server's host, in the \
         server itself (`varve serve --manifest APP.toml`); a client appends to its logs, and the handlers there \
         run for those records"
    ))
}

impl Runtime {
    fn plan_handler(&self, py: Python<'_>, spec: HandlerSpec, logs: Vec<String>) -> PyResult<()> {
        varve_log::validate_name(&spec.name, false).map_err(Error::from)?;
        self.state.read_phase(py, |phase| {
            let Phase::Planned(plan) = phase else {
                return Err(Error::State {
                    state: phase.name(),
                    message: format!(
                        "handler {:?}: handlers are registered before start(); a runtime's handlers are fixed while \
                         it runs",
                        spec.name
                    ),
                });
            };
            if plan.handlers.iter().any(|h| h.name == spec.name) {
                return Err(varve_runtime::RuntimeError::DuplicateHandler { name: spec.name }.into());
            }
            for log in logs {
                plan.subscriptions.push((log, spec.name.clone()));
            }
            plan.handlers.push(spec);
            Ok(())
        })
    }
}
