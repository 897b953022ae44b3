//! `Scan` and `Watch`: a log's records as Python iterators — a range read in
//! batches, and a follow that blocks without the GIL (or runs in a thread
//! for `async for`). [`Log::scan`](crate::log) and `Log::watch` make them.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use varve_log::{LogError, Record, Seq, SeqRange, Watch as RustWatch};

use crate::duration::seconds_or_none;
use crate::error::{Error, Result};
use crate::log::{lock, record_tuple, NsState};

/// How long a blocking watch waits in one go before it checks for Ctrl-C and
/// for a closed store (and lets `close` proceed).
pub(crate) const WATCH_POLL: Duration = Duration::from_millis(100);

/// A scan reads the store in batches of this many records (one request each on a remote store).
pub(crate) const SCAN_BATCH_RECORDS: u64 = 256;

// ------------------------------------------------------------------- Scan

/// An iterator over ``(seq, record)`` pairs of a range, returned by
/// :meth:`Log.scan`. Reads the store in batches of 256 records. A run of
/// lost records raises :class:`varve.Lost` once, after the records before
/// it; iterating again goes on after the run.
#[pyclass(frozen, module = "varve")]
pub struct Scan {
    ns: Arc<NsState>,
    log: String,
    inner: Mutex<ScanState>,
}

impl Scan {
    /// A scan of `log` from `next` to before `stop`, reading nothing yet.
    pub(crate) fn new(ns: Arc<NsState>, log: String, next: Seq, stop: Seq) -> Scan {
        let state = ScanState { next, stop, buffered: VecDeque::new(), lost: None };
        Scan { ns, log, inner: Mutex::new(state) }
    }
}

struct ScanState {
    /// The next seq to read.
    next: Seq,
    /// Where the scan ends (exclusive).
    stop: Seq,
    buffered: VecDeque<Record>,
    /// A `Lost` run met while reading ahead: raised once `buffered` is drained.
    lost: Option<LogError>,
}

impl Scan {
    pub(crate) fn fill(&self) -> Result<()> {
        let mut inner = lock(&self.inner);
        let ScanState { next, stop, buffered, lost } = &mut *inner;
        if !buffered.is_empty() || lost.is_some() || *next >= *stop {
            return Ok(());
        }
        let last = (*stop - 1).min(next.saturating_add(SCAN_BATCH_RECORDS - 1));
        let mut resume = last + 1;
        self.ns.with(|ns| {
            for record in ns.scan(&self.log, SeqRange { first: *next, last })? {
                match record {
                    Ok(record) => buffered.push_back(record),
                    Err(error @ LogError::Lost { .. }) => {
                        if let LogError::Lost { last: lost_last, .. } = &error {
                            resume = lost_last.saturating_add(1);
                        }
                        *lost = Some(error);
                        break;
                    }
                    Err(error) => return Err(error.into()),
                }
            }
            Ok(())
        })?;
        *next = resume;
        Ok(())
    }
}

#[pymethods]
impl Scan {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        loop {
            {
                let mut inner = lock(&self.inner);
                if let Some(record) = inner.buffered.pop_front() {
                    drop(inner);
                    return record_tuple(py, &record).map(Some);
                }
                if let Some(lost) = inner.lost.take() {
                    return Err(Error::Log(lost).into());
                }
                if inner.next >= inner.stop {
                    return Ok(None);
                }
            }
            py.detach(|| self.fill())?;
        }
    }
}

// ------------------------------------------------------------------ Watch

pub(crate) struct WatchState {
    /// `None` once the store is closed.
    watch: Mutex<Option<RustWatch>>,
}

impl WatchState {
    pub(crate) fn new(watch: RustWatch) -> WatchState {
        WatchState { watch: Mutex::new(Some(watch)) }
    }

    /// Drop the watch (its store is closing): later calls raise `Closed`.
    pub(crate) fn close(&self) {
        *lock(&self.watch) = None;
    }

    fn next(&self, timeout: Duration, what: &str) -> Result<Option<Record>> {
        let mut guard = lock(&self.watch);
        let watch = guard.as_mut().ok_or_else(|| Error::Closed(what.to_owned()))?;
        Ok(watch.next_timeout(timeout)?)
    }
}

/// Follows a log: existing records, then new ones as they land, as
/// ``(seq, record)`` pairs. Returned by :meth:`Log.watch`.
///
/// - ``for seq, record in watch:`` blocks (without holding the GIL) until
///   each record lands; Ctrl-C interrupts it.
/// - ``watch.next(timeout=1.0)`` waits at most `timeout` seconds and returns
///   None on timeout.
/// - ``async for seq, record in watch:`` waits in a worker thread
///   (``asyncio.to_thread``), so the event loop goes on.
///
/// It never ends by itself; after ``store.close()`` it raises
/// :class:`varve.Closed`.
#[pyclass(frozen, module = "varve")]
pub struct Watch {
    state: Arc<WatchState>,
    what: String,
}

impl Watch {
    pub(crate) fn new(state: Arc<WatchState>, what: String) -> Watch {
        Watch { state, what }
    }
}

#[pymethods]
impl Watch {
    /// The next record, waiting at most `timeout` seconds (0 to 1e9; forever
    /// if None); None on timeout.
    #[pyo3(signature = (timeout = None))]
    fn next<'py>(&self, py: Python<'py>, timeout: Option<f64>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let deadline = seconds_or_none("timeout", timeout)?.map(|t| Instant::now() + t);
        loop {
            let wait = deadline.map_or(WATCH_POLL, |d| d.saturating_duration_since(Instant::now()).min(WATCH_POLL));
            if let Some(record) = py.detach(|| self.state.next(wait, &self.what))? {
                return record_tuple(py, &record).map(Some);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(None);
            }
            py.check_signals()?;
        }
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        self.next(py, None)
    }

    fn __aiter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Awaitable for ``async for``: waits in a worker thread.
    fn __anext__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, PyAny>> {
        let py = slf.py();
        py.import("varve._aio")?.getattr("anext_record")?.call1((slf,))
    }

    fn __repr__(&self) -> String {
        format!("<varve.Watch ({})>", self.what)
    }
}
