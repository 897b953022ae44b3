//! Events from Python: the `Event` class over one stored event of
//! `_events`, and `to_dot` / `to_otel` over a list of them.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use varve_runtime::event::trace_hex;
use varve_runtime::StoredEvent;

/// One event of a namespace's ``_events`` log (from :meth:`Runtime.events`
/// and the causal queries). ``kind`` is one of APPEND, TRIGGER, FIRING,
/// READ, LATEST, DONE, FAILED, ``DEAD_LETTER``, SUBSCRIBE, UNSUBSCRIBE, REPAIR.
#[pyclass(frozen, module = "varve")]
pub struct Event {
    inner: StoredEvent,
}

pub(super) fn event_list(py: Python<'_>, events: impl IntoIterator<Item = StoredEvent>) -> PyResult<Vec<Py<Event>>> {
    events.into_iter().map(|event| Py::new(py, Event { inner: event })).collect()
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

    /// The reads the same FIRING made before this write, folded into this
    /// event (an APPEND, DONE or FAILED), in call order: ``(kind, log, seq,
    /// seq_last)`` with kind ``"READ"`` or ``"LATEST"``. For a REPAIR: the
    /// ranges of records it replaced (kind ``"READ"``). Empty for other events.
    #[getter]
    fn reads(&self) -> Vec<(&'static str, String, u64, u64)> {
        self.inner.event.reads.iter().map(|r| (r.kind.name(), r.log.clone(), r.seq, r.seq_last)).collect()
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
        dict.set_item("reads", self.reads())?;
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
