//! Python callables as handlers: the Rust handler that calls one on a
//! worker thread, the loan of the run's Rust context to Python (the only
//! `unsafe` of the package), the FAILED reason made from an exception, and
//! the `HandlerContext` class the callable receives.

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use varve_log::{Seq, SeqRange};
use varve_runtime::event::trace_hex;
use varve_runtime::{HandlerContext as RustContext, HandlerResult};

use super::args::with_batch;
use crate::error::{Error, Result};
use crate::log::{data, lock};

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

    pub(super) fn with<R>(&self, f: impl FnOnce(&RustContext<'_>) -> Result<R>) -> Result<R> {
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
pub(crate) fn python_handler(
    callable: Py<PyAny>,
) -> impl Fn(&mut RustContext<'_>) -> HandlerResult + Send + Sync + 'static {
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

/// What a Python handler is called with: the triggering record and the API
/// whose every call is recorded in ``_events`` with this run (its FIRING
/// event) as the cause, as for Rust handlers. Valid only during the call.
#[pyclass(frozen, module = "varve")]
pub struct HandlerContext {
    pub(super) slot: Arc<ContextSlot>,
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

    /// The sorted map whose op log is `log` (an existing, unbounded log):
    /// see :class:`HandlerMap`.
    fn sorted_map(slf: Bound<'_, Self>, log: &str) -> super::sorted_map::HandlerMap {
        super::sorted_map::HandlerMap { ctx: slf.unbind(), log: log.to_owned() }
    }

    fn __repr__(&self) -> String {
        format!(
            "<varve.HandlerContext handler={:?} log={:?} seq={} attempt={}>",
            self.handler, self.log, self.seq, self.attempt
        )
    }
}
