//! `Runtime`, `HandlerContext`, `Event`: the runtime of `varve-runtime`
//! (handlers on append, topics, the causal event log) from Python, with
//! Python callables as handlers.
//!
//! **Lifecycle.** A Python `Runtime` is *planned* first (handlers, topics,
//! subscriptions are collected), then `start()` builds the Rust
//! [`varve_runtime::Runtime`] with a [`RuntimeBuilder`] — handlers are fixed
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
//! module is held while the GIL is taken, so the GIL and the runtime's locks
//! never wait for each other.
//!
//! **Errors in handlers.** A Python exception escaping a handler (any
//! `BaseException`) becomes the handler's `Err`: the runtime writes a FAILED
//! event whose reason is `Type: message` followed by the traceback, then
//! retries or dead-letters it per the handler's [`RetryPolicy`]. Nothing of
//! it reaches the worker thread as a panic.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use varve_log::{LogError, Namespace as _, Seq, SeqRange};
use varve_runtime::event::{parse_trace, trace_hex};
use varve_runtime::trace::{trace_events, CausalGraph};
use varve_runtime::{
    DeadLetter, HandlerContext as RustContext, HandlerKind, HandlerResult, HandlerSpec, RetryPolicy,
    Runtime as RustRuntime, RuntimeBuilder, RuntimeHandle, RuntimeOptions, StoredEvent, DEAD_LETTERS_LOG,
};

use crate::error::{Error, Result};
use crate::log::{data, lock, retention, Data, Namespace, NsState, WATCH_POLL};

/// How long `stop()` waits by default, and how long closing the store or
/// leaving the interpreter waits, for handlers still running.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(5);

/// Every runtime of this process, so the interpreter's exit can stop those
/// still running (`varve/runtime.py` registers [`stop_all_runtimes`] with
/// `atexit`): a worker must not try to run Python while it shuts down.
static RUNTIMES: Mutex<Vec<Weak<RuntimeState>>> = Mutex::new(Vec::new());

// ------------------------------------------------------------ state

/// What `start()` builds the runtime from.
#[derive(Clone, Default)]
struct Plan {
    handlers: Vec<HandlerSpec>,
    topics: Vec<String>,
    subscriptions: Vec<(String, String)>,
}

enum Phase {
    Planned(Plan),
    Running { runtime: RustRuntime, handle: RuntimeHandle, handlers: Vec<String> },
    Stopped,
}

impl Phase {
    fn name(&self) -> &'static str {
        match self {
            Phase::Planned(_) => "not started",
            Phase::Running { .. } => "running",
            Phase::Stopped => "stopped",
        }
    }
}

pub(crate) struct RuntimeState {
    ns: Arc<NsState>,
    options: RuntimeOptions,
    /// Never held while the GIL is taken, nor across a handler run.
    phase: Mutex<Phase>,
    /// Held (without the GIL) for the whole of `start`, so two threads
    /// calling it never build two runtimes over the namespace at once.
    starting: Mutex<()>,
}

impl RuntimeState {
    /// Call without the GIL (inside `py.detach`), and drop the guard
    /// before attaching again: a thread holding `phase` must never wait for
    /// the GIL, or it could wait for a thread that holds the GIL and waits
    /// for `phase`.
    fn lock_phase(&self) -> std::sync::MutexGuard<'_, Phase> {
        lock(&self.phase)
    }

    /// Run `f` on the running runtime (GIL released; `phase` held only inside).
    fn with_running<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&RustRuntime) -> varve_runtime::Result<R> + Send,
    ) -> PyResult<R> {
        py.detach(|| match &*self.lock_phase() {
            Phase::Running { runtime, .. } => f(runtime).map_err(Error::from),
            other => Err(not_running(other)),
        })
        .map_err(Into::into)
    }

    /// Look at the phase (GIL released).
    fn read_phase<R: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut Phase) -> Result<R> + Send) -> PyResult<R> {
        py.detach(|| f(&mut self.lock_phase())).map_err(Into::into)
    }

    /// Stop for good, waiting up to `grace` for running handlers (call
    /// without the GIL: the handlers may need it to finish).
    pub(crate) fn shut_down(&self, grace: Duration) {
        let previous = std::mem::replace(&mut *self.lock_phase(), Phase::Stopped);
        if let Phase::Running { runtime, .. } = previous {
            runtime.stop(grace);
        }
    }

    /// The running runtime's handle (appends), or why there is none.
    fn handle(&self) -> Result<RuntimeHandle> {
        match &*self.lock_phase() {
            Phase::Running { handle, .. } => Ok(handle.clone()),
            phase => Err(not_running(phase)),
        }
    }

    /// Build and start the runtime from the plan (without the GIL; the
    /// workers may run Python handlers at once).
    fn start(&self) -> Result<()> {
        let _starting = lock(&self.starting);
        let plan = match &*self.lock_phase() {
            Phase::Planned(plan) => plan.clone(),
            Phase::Running { .. } => return Ok(()),
            Phase::Stopped => return Err(not_running(&Phase::Stopped)),
        };
        let handlers: Vec<String> = plan.handlers.iter().map(|h| h.name.clone()).collect();
        let ns: Arc<dyn varve_log::Namespace> = Arc::new(self.ns.with(|ns| Ok(ns.clone()))?);
        let mut builder = RuntimeBuilder::new(ns).options(self.options.clone());
        for spec in plan.handlers {
            builder = builder.register(spec);
        }
        for topic in &plan.topics {
            builder = builder.topic(topic);
        }
        for (log, handler) in &plan.subscriptions {
            builder = builder.subscribe(log, handler);
        }
        let runtime = builder.start()?;
        let mut phase = self.lock_phase();
        if !matches!(&*phase, Phase::Planned(_)) {
            // Stopped meanwhile (`stop()`, the store closed).
            drop(phase);
            runtime.stop(STOP_GRACE);
            return Err(not_running(&Phase::Stopped));
        }
        let handle = runtime.handle();
        *phase = Phase::Running { runtime, handle, handlers };
        Ok(())
    }

    fn events(&self, range: SeqRange) -> Result<Vec<StoredEvent>> {
        self.ns.with(|ns| Ok(varve_runtime::namespace_events(ns, range)?))
    }
}

impl Drop for RuntimeState {
    fn drop(&mut self) {
        // Dropped by the garbage collector, GIL held: stopping here would wait
        // for workers that wait for the GIL. Stop on a thread of its own.
        let phase = std::mem::replace(self.phase.get_mut().unwrap_or_else(PoisonError::into_inner), Phase::Stopped);
        if let Phase::Running { runtime, .. } = phase {
            let _ =
                std::thread::Builder::new().name("varve-runtime-stop".into()).spawn(move || runtime.stop(STOP_GRACE));
        }
    }
}

fn not_running(phase: &Phase) -> Error {
    match phase {
        Phase::Planned(_) => Error::State {
            state: "not started",
            message: "the runtime is not started: call start() (or use it in a `with` block) first".into(),
        },
        _ => Error::State {
            state: "stopped",
            message: "the runtime is stopped: a stopped runtime does not restart; create a new varve.Runtime over \
                      the namespace (it re-runs what this one left unfinished)"
                .into(),
        },
    }
}

/// Stop every runtime still running (called by `atexit`, GIL held).
#[pyfunction]
#[pyo3(name = "_stop_all_runtimes")]
pub fn stop_all_runtimes(py: Python<'_>) {
    let runtimes: Vec<_> = lock(&RUNTIMES).drain(..).filter_map(|r| r.upgrade()).collect();
    py.detach(|| {
        for runtime in runtimes {
            runtime.shut_down(STOP_GRACE);
        }
    });
}

// ----------------------------------------------------- Python handlers

/// A pointer to the [`RustContext`] of the handler run in progress.
struct ContextPtr(*const RustContext<'static>);

// SAFETY: the pointee is only dereferenced through `ContextSlot::with`, under
// the slot's mutex and while the slot holds it (see `ContextSlot`). Under the
// mutex, the threads that use the context do so one at a time, each
// synchronised with the last — as if the context moved between them, which
// `RustContext: Send` (asserted below) allows. (`RustContext` need not be
// `Sync`: it buffers the run's reads in a `RefCell`.)
#[expect(unsafe_code, reason = "a borrowed handler context is lent to Python for the duration of one call")]
unsafe impl Send for ContextPtr {}

const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<RustContext<'static>>();
};

/// Lends a handler's context to the Python `HandlerContext` object for the
/// duration of one call. Invariant: `ptr` is `Some` only between
/// [`ContextSlot::lend`] and the drop of the [`Lent`] guard it returns, and
/// the guard lives inside the borrow of the context it points to, during
/// which the worker itself does not touch the context (it is inside the
/// Python call). Methods use the pointer under the mutex and the guard
/// clears it under the mutex, so a method call from any Python thread
/// either finishes before the handler's run ends or sees `None` and raises.
/// The mutex is only taken with the GIL released.
pub(crate) struct ContextSlot {
    ptr: Mutex<Option<ContextPtr>>,
}

/// Clears its slot when dropped (also on unwind).
struct Lent<'a>(&'a ContextSlot);

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        *lock(&self.0.ptr) = None;
    }
}

impl ContextSlot {
    fn lend<'s>(slot: &'s ContextSlot, ctx: &RustContext<'_>) -> Lent<'s> {
        // Erase the lifetime; `Lent` ends the loan before `ctx`'s borrow ends.
        let ptr = std::ptr::from_ref(ctx).cast::<RustContext<'static>>();
        *lock(&slot.ptr) = Some(ContextPtr(ptr));
        Lent(slot)
    }

    fn with<R>(&self, f: impl FnOnce(&RustContext<'_>) -> Result<R>) -> Result<R> {
        let guard = lock(&self.ptr);
        let Some(ptr) = guard.as_ref() else {
            return Err(Error::State {
                state: "finished",
                message: "this handler context belongs to a handler run that has finished: use ctx only inside \
                          the handler call (and threads the handler waits for)"
                    .into(),
            });
        };
        // SAFETY: `ptr` is `Some`, so the loan is live (see the invariant
        // above): the context is alive and nobody else uses it, and the guard
        // keeps the loan from ending until `f` returns.
        #[expect(unsafe_code, reason = "see ContextSlot's invariant")]
        let ctx = unsafe { &*ptr.0 };
        f(ctx)
    }
}

/// The Rust handler that runs a Python callable.
fn python_handler(callable: Py<PyAny>) -> impl Fn(&mut RustContext<'_>) -> HandlerResult + Send + Sync + 'static {
    move |ctx| {
        let slot = Arc::new(ContextSlot { ptr: Mutex::new(None) });
        let lent = ContextSlot::lend(&slot, ctx);
        let outcome = Python::try_attach(|py| -> std::result::Result<(), String> {
            let py_ctx = HandlerContext {
                slot: Arc::clone(&slot),
                record: PyBytes::new(py, ctx.record()).unbind(),
                log: ctx.log().to_owned(),
                seq: ctx.seq(),
                handler: ctx.handler().to_owned(),
                event_id: ctx.event_id().to_string(),
                trace_id: trace_hex(ctx.trace_id()),
                attempt: ctx.attempt(),
            };
            let py_ctx = Py::new(py, py_ctx).map_err(|e| failure_reason(py, &e))?;
            callable.bind(py).call1((py_ctx,)).map(drop).map_err(|e| failure_reason(py, &e))
        });
        drop(lent);
        match outcome {
            Some(result) => result.map_err(Into::into),
            // The interpreter is shutting down: fail this run; the runtime
            // retries it, or the next start re-runs it.
            None => Err("the Python interpreter is shutting down".into()),
        }
    }
}

/// `Type: message`, then the traceback (the runtime cuts FAILED reasons at
/// `REASON_BYTES_MAX` bytes, so the type and message come first).
fn failure_reason(py: Python<'_>, error: &PyErr) -> String {
    let kind = error.get_type(py).qualname().map_or_else(|_| "exception".to_owned(), |n| n.to_string());
    let message = error.value(py).str().map_or_else(|_| String::new(), |s| s.to_string());
    let mut reason = if message.is_empty() { kind } else { format!("{kind}: {message}") };
    if let Some(text) = error.traceback(py).and_then(|tb| tb.format().ok()) {
        reason.push('\n');
        reason.push_str(text.trim_end());
    }
    reason
}

// ------------------------------------------------------------ Runtime

fn seconds(name: &str, value: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(value)
        .map_err(|_| PyValueError::new_err(format!("{name} is in seconds: a finite number at least 0, not {value}")))
}

/// Log names from `log=`: None, one name, or a sequence of names.
fn log_names(log: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<String>> {
    match log {
        None => Ok(Vec::new()),
        Some(one) if one.is_instance_of::<PyString>() => Ok(vec![one.extract()?]),
        Some(many) => many.try_iter()?.map(|name| name?.extract::<String>()).collect(),
    }
}

fn retry_policy(attempts: u32, backoff: f64, backoff_max: f64, timeout: Option<f64>) -> PyResult<RetryPolicy> {
    Ok(RetryPolicy {
        attempts,
        backoff: seconds("backoff", backoff)?,
        backoff_max: seconds("backoff_max", backoff_max)?,
        timeout: timeout.map(|t| seconds("timeout", t)).transpose()?,
    })
}

/// Records of an append batch: a list of ``(log, data)`` pairs.
fn batch_pairs<'py>(batch: &Bound<'py, PyAny>) -> PyResult<(Vec<String>, Vec<Bound<'py, PyAny>>)> {
    let mut names = Vec::new();
    let mut records = Vec::new();
    for pair in batch.try_iter()? {
        let (log, record): (String, Bound<'py, PyAny>) = pair?.extract().map_err(|_| {
            PyTypeError::new_err(
                "an append batch is a list of (log, record) pairs, e.g. [(\"a\", b\"1\"), (\"b\", b\"2\")]",
            )
        })?;
        names.push(log);
        records.push(record);
    }
    Ok((names, records))
}

fn with_batch<R>(batch: &Bound<'_, PyAny>, f: impl FnOnce(&[(&str, &[u8])]) -> PyResult<R>) -> PyResult<R> {
    let (names, records) = batch_pairs(batch)?;
    let datas = records.iter().map(|r| data(r)).collect::<PyResult<Vec<Data<'_>>>>()?;
    let entries: Vec<(&str, &[u8])> = names.iter().map(String::as_str).zip(datas.iter().map(Data::as_slice)).collect();
    f(&entries)
}

fn event_list(py: Python<'_>, events: impl IntoIterator<Item = StoredEvent>) -> PyResult<Vec<Py<Event>>> {
    events.into_iter().map(|event| Py::new(py, Event { inner: event })).collect()
}

/// The event-driven runtime over one namespace: handlers run when records
/// are appended to the logs they subscribe to, and every append, trigger,
/// run and handler read is recorded in the namespace's ``_events`` log with
/// its cause. See docs/python.md, "Handlers in Python".
///
/// Register handlers (``@rt.handler(log=...)``, :meth:`add_handler`,
/// :meth:`add_command`), then :meth:`start` (or ``with rt:``); append with
/// :meth:`append` / :meth:`publish`; :meth:`stop` when done. While a runtime
/// serves a namespace it must be its only writer: append through the
/// runtime, not through ``Log.append``.
#[pyclass(frozen, subclass, module = "varve")]
pub struct Runtime {
    state: Arc<RuntimeState>,
}

#[pymethods]
impl Runtime {
    #[new]
    #[pyo3(signature = (namespace, *, concurrency = 4, record_reads = true, host = None, socket = None))]
    fn new(
        py: Python<'_>,
        namespace: PyRef<'_, Namespace>,
        concurrency: usize,
        record_reads: bool,
        host: Option<u64>,
        socket: Option<std::path::PathBuf>,
    ) -> PyResult<Self> {
        let ns = Arc::clone(&namespace.state);
        if ns.read_only {
            return Err(
                Error::Log(LogError::ReadOnly { namespace: ns.name.clone(), operation: "start a runtime" }).into()
            );
        }
        if concurrency > varve_runtime::CONCURRENCY_MAX {
            return Err(PyValueError::new_err(format!(
                "concurrency is at most {} (0: a writer-only runtime that runs no handler)",
                varve_runtime::CONCURRENCY_MAX
            )));
        }
        let host = match host {
            Some(host) => host,
            // As the CLI does, so `varve run` and Python agree on the namespace's host.
            None => py.detach(|| varve_runtime::host_id_for_dir(&ns.store_path)).map_err(Error::from)?,
        };
        let options = RuntimeOptions { host, concurrency, record_reads, socket, data_dir: Some(ns.store_path.clone()) };
        let state = Arc::new(RuntimeState {
            ns,
            options,
            phase: Mutex::new(Phase::Planned(Plan::default())),
            starting: Mutex::new(()),
        });
        {
            let mut runtimes = lock(&RUNTIMES);
            runtimes.retain(|r| r.strong_count() > 0);
            runtimes.push(Arc::downgrade(&state));
        }
        let mut registry = lock(&state.ns.runtimes);
        registry.retain(|r| r.strong_count() > 0);
        registry.push(Arc::downgrade(&state));
        drop(registry);
        Ok(Runtime { state })
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
    /// `attempts` failures the record goes to ``_dead_letters``.
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
        let retry = retry_policy(attempts, backoff, backoff_max, None)?;
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
            return Err(PyValueError::new_err(format!("command handler {name:?} needs a program: argv is empty")));
        }
        let retry = retry_policy(attempts, backoff, backoff_max, timeout)?;
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
        let deadline = timeout.map(|t| seconds("timeout", t)).transpose()?.map(|t| Instant::now() + t);
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
        let grace = seconds("timeout", timeout)?;
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

    /// What caused record `log`/`seq`: the record's APPEND event first, then
    /// its ancestors in the causal graph (appends, triggers, runs, and the
    /// appends the runs read), in event order. Empty for an unknown record.
    fn causes(&self, py: Python<'_>, log: &str, seq: u64) -> PyResult<Vec<Py<Event>>> {
        let events = py.detach(|| self.state.events(SeqRange::ALL))?;
        let graph = CausalGraph::new(&events);
        event_list(py, graph.ancestors(&self.state.ns.name, log, seq).into_iter().cloned())
    }

    /// What depends on record `log`/`seq`, transitively: the record's APPEND
    /// first, then the runs it triggered, what they appended, the reads of
    /// it and what followed, in event order.
    fn effects(&self, py: Python<'_>, log: &str, seq: u64) -> PyResult<Vec<Py<Event>>> {
        let events = py.detach(|| self.state.events(SeqRange::ALL))?;
        let graph = CausalGraph::new(&events);
        event_list(py, graph.descendants(&self.state.ns.name, log, seq).into_iter().cloned())
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

// ----------------------------------------------------- HandlerContext

/// What a Python handler is called with: the triggering record and the API
/// whose every call is recorded in ``_events`` with this run (its FIRING
/// event) as the cause, as for Rust handlers. Valid only during the call.
#[pyclass(frozen, module = "varve")]
pub struct HandlerContext {
    slot: Arc<ContextSlot>,
    record: Py<PyBytes>,
    log: String,
    seq: u64,
    handler: String,
    event_id: String,
    trace_id: String,
    attempt: u32,
}

#[pymethods]
impl HandlerContext {
    /// The triggering record's bytes.
    #[getter]
    fn record(&self, py: Python<'_>) -> Py<PyBytes> {
        self.record.clone_ref(py)
    }

    /// The log (or topic) the record was appended to.
    #[getter]
    fn log(&self) -> &str {
        &self.log
    }

    /// The record's seq in its log.
    #[getter]
    fn seq(&self) -> u64 {
        self.seq
    }

    /// This handler's name.
    #[getter]
    fn handler(&self) -> &str {
        &self.handler
    }

    /// The id of this run's FIRING event (``HOST:NAMESPACE:SEQ``).
    #[getter]
    fn event_id(&self) -> &str {
        &self.event_id
    }

    /// The trace (hex) shared by everything one outside append caused.
    #[getter]
    fn trace_id(&self) -> &str {
        &self.trace_id
    }

    /// 1 on the first run, 2 on the first retry or re-run, ...
    #[getter]
    fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Append `record` to `log` (same trace, caused by this run; fires its
    /// subscribers). Returns the seq.
    fn append(&self, py: Python<'_>, log: &str, record: &Bound<'_, PyAny>) -> PyResult<u64> {
        let record = data(record)?;
        let bytes = record.as_slice();
        py.detach(|| self.slot.with(|ctx| Ok(ctx.append(log, bytes)?))).map_err(Into::into)
    }

    /// Append ``[(log, record), ...]`` atomically; returns the seqs.
    fn append_batch(&self, py: Python<'_>, batch: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
        with_batch(batch, |entries| {
            py.detach(|| self.slot.with(|ctx| Ok(ctx.append_batch(entries)?))).map_err(Into::into)
        })
    }

    /// Publish to a topic (as :meth:`append`); returns the index.
    fn publish(&self, py: Python<'_>, topic: &str, data: &Bound<'_, PyAny>) -> PyResult<u64> {
        self.append(py, topic, data)
    }

    /// Read `log` at `seq` (recorded as READ).
    fn get<'py>(&self, py: Python<'py>, log: &str, seq: u64) -> PyResult<Bound<'py, PyBytes>> {
        let value = py.detach(|| self.slot.with(|ctx| Ok(ctx.get(log, seq)?)))?;
        Ok(PyBytes::new(py, &value))
    }

    /// The latest seq of `log`, 0 if empty (recorded as LATEST with the seq returned).
    fn latest(&self, py: Python<'_>, log: &str) -> PyResult<u64> {
        py.detach(|| self.slot.with(|ctx| Ok(ctx.latest(log)?))).map_err(Into::into)
    }

    /// The records of `log` with ``start <= seq < stop`` (stop: past the
    /// latest) as ``[(seq, record), ...]``, recorded as one READ of the range
    /// returned. At most 100,000 records per call.
    #[pyo3(signature = (log, start = 1, stop = None))]
    fn scan<'py>(&self, py: Python<'py>, log: &str, start: u64, stop: Option<u64>) -> PyResult<Bound<'py, PyList>> {
        let first = start.max(1);
        let last = stop.map_or(Seq::MAX, |s| s.saturating_sub(1));
        let records = if last < first {
            Vec::new()
        } else {
            py.detach(|| self.slot.with(|ctx| Ok(ctx.scan(log, SeqRange { first, last })?)))?
        };
        let items = records
            .iter()
            .map(|r| (r.seq, PyBytes::new(py, &r.value)).into_pyobject(py))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    fn __repr__(&self) -> String {
        format!(
            "<varve.HandlerContext handler={:?} log={:?} seq={} attempt={}>",
            self.handler, self.log, self.seq, self.attempt
        )
    }
}

// -------------------------------------------------------------- Event

/// One event of a namespace's ``_events`` log (from :meth:`Runtime.events`
/// and the causal queries). ``kind`` is one of APPEND, TRIGGER, FIRING,
/// READ, LATEST, DONE, FAILED, ``DEAD_LETTER``, SUBSCRIBE, UNSUBSCRIBE.
#[pyclass(frozen, module = "varve")]
pub struct Event {
    inner: StoredEvent,
}

#[pymethods]
impl Event {
    /// ``HOST:NAMESPACE:SEQ`` (SEQ: the event's seq in ``_events``).
    #[getter]
    fn id(&self) -> String {
        self.inner.id.to_string()
    }

    /// The event's seq in its namespace's ``_events`` log.
    #[getter]
    fn event_seq(&self) -> u64 {
        self.inner.id.seq
    }

    #[getter]
    fn namespace(&self) -> &str {
        &self.inner.id.namespace
    }

    #[getter]
    fn host(&self) -> u64 {
        self.inner.id.host
    }

    #[getter]
    fn kind(&self) -> &'static str {
        self.inner.event.kind.name()
    }

    /// Nanoseconds since the Unix epoch when it was written.
    #[getter]
    fn timestamp_ns(&self) -> u64 {
        self.inner.event.timestamp_ns
    }

    /// The trace (32 hex digits).
    #[getter]
    fn trace_id(&self) -> String {
        trace_hex(self.inner.event.trace)
    }

    /// The id of the event that caused it, or None (an outside append, a subscription).
    #[getter]
    fn parent(&self) -> Option<String> {
        self.inner.event.parent.as_ref().map(ToString::to_string)
    }

    /// The log (or topic) concerned, or "".
    #[getter]
    fn log(&self) -> &str {
        &self.inner.event.log
    }

    /// The record's seq in `log` (the first of a READ range; LATEST: the seq returned).
    #[getter]
    fn seq(&self) -> u64 {
        self.inner.event.seq
    }

    /// The last seq of a READ range (= `seq` otherwise).
    #[getter]
    fn seq_last(&self) -> u64 {
        self.inner.event.seq_last
    }

    /// The handler concerned, or "".
    #[getter]
    fn handler(&self) -> &str {
        &self.inner.event.handler
    }

    /// The attempt number (FIRING, DONE, FAILED; ``DEAD_LETTER``: failures), or 0.
    #[getter]
    fn attempt(&self) -> u32 {
        self.inner.event.attempt
    }

    /// The TRIGGER's seq in ``_events`` (FIRING, DONE, FAILED, ``DEAD_LETTER``), or 0.
    #[getter]
    fn trigger(&self) -> u64 {
        self.inner.event.trigger
    }

    /// Why a FAILED or ``DEAD_LETTER`` happened, or "".
    #[getter]
    fn reason(&self) -> &str {
        &self.inner.event.reason
    }

    /// The event as a dict (the JSON form of ``varve events tail``).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        dict.set_item("id", self.id())?;
        dict.set_item("kind", self.kind())?;
        dict.set_item("timestamp_ns", self.timestamp_ns())?;
        dict.set_item("trace", self.trace_id())?;
        dict.set_item("parent", self.parent())?;
        dict.set_item("log", self.log())?;
        dict.set_item("seq", self.seq())?;
        dict.set_item("seq_last", self.seq_last())?;
        dict.set_item("handler", self.handler())?;
        dict.set_item("attempt", self.attempt())?;
        dict.set_item("trigger", self.trigger())?;
        dict.set_item("reason", self.reason())?;
        Ok(dict)
    }

    fn __repr__(&self) -> String {
        self.inner.to_line()
    }
}

fn borrow_events<'a>(events: &'a [PyRef<'a, Event>]) -> Vec<&'a StoredEvent> {
    events.iter().map(|e| &e.inner).collect()
}

/// Graphviz DOT of these events (records' appends as boxes, failures red,
/// read dependencies dashed).
#[pyfunction]
pub fn to_dot(events: Vec<PyRef<'_, Event>>) -> String {
    varve_runtime::trace::to_dot(&borrow_events(&events))
}

/// OpenTelemetry-compatible JSON (OTLP/JSON ``resourceSpans``) of these
/// events, as a string: one span per event.
#[pyfunction]
pub fn to_otel(events: Vec<PyRef<'_, Event>>) -> String {
    varve_runtime::trace::to_otel_json(&borrow_events(&events)).to_string()
}
