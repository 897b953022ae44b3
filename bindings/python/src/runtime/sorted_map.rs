//! Sorted maps that handlers build (`varve_runtime`'s `sorted_map.rs`):
//! `ctx.sorted_map(log)` inside a handler, `Runtime.sorted_map(log)` to
//! read one at any version, and any old generation a repair kept.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use varve_runtime::MapReader;

use super::handler::HandlerContext;
use crate::error::Result;
use crate::log::{data, Data};

fn entries<'py>(py: Python<'py>, entries: &[(bytes::Bytes, bytes::Bytes)]) -> PyResult<Bound<'py, PyList>> {
    let items = entries
        .iter()
        .map(|(k, v)| (PyBytes::new(py, k), PyBytes::new(py, v)).into_pyobject(py))
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, items)
}

/// A sorted map a handler builds, got from :meth:`HandlerContext.sorted_map`:
/// its op log ``log`` (an ordinary log: one put or delete per record) is its
/// truth, so a repair that changes the op log changes the map. Every call is
/// recorded as the context's are: a read depends on every op before it.
/// Valid during the handler call only.
#[pyclass(frozen, module = "varve")]
pub struct HandlerMap {
    pub(super) ctx: Py<HandlerContext>,
    pub(super) log: String,
}

#[pymethods]
impl HandlerMap {
    /// The op log's name.
    #[getter]
    fn log(&self) -> &str {
        &self.log
    }

    /// Set `key` to `value` (bytes); returns the op's seq, the map's new version.
    fn put(&self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<u64> {
        let (key, value) = (data(key)?, data(value)?);
        let (key, value) = (key.as_slice(), value.as_slice());
        let ctx = self.ctx.get();
        py.detach(|| ctx.slot.with(|c| Ok(c.sorted_map(&self.log).put(key, value)?))).map_err(Into::into)
    }

    /// Remove `key` (an op also when absent); returns the op's seq.
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<u64> {
        let key = data(key)?;
        let key = key.as_slice();
        let ctx = self.ctx.get();
        py.detach(|| ctx.slot.with(|c| Ok(c.sorted_map(&self.log).delete(key)?))).map_err(Into::into)
    }

    /// The value of `key` now, or None.
    fn get<'py>(&self, py: Python<'py>, key: &Bound<'_, PyAny>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let key = data(key)?;
        let key = key.as_slice();
        let ctx = self.ctx.get();
        let value = py.detach(|| ctx.slot.with(|c| Ok(c.sorted_map(&self.log).get(key)?)))?;
        Ok(value.map(|v: bytes::Bytes| PyBytes::new(py, &v)))
    }

    /// ``[(key, value), ...]`` with ``start <= key < stop`` in key order
    /// (None leaves that end open).
    #[pyo3(signature = (start = None, stop = None))]
    fn range<'py>(
        &self,
        py: Python<'py>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let (start, stop) = (start.map(data).transpose()?, stop.map(data).transpose()?);
        let (from, to) = (start.as_ref().map(Data::as_slice), stop.as_ref().map(Data::as_slice));
        let ctx = self.ctx.get();
        let found = py.detach(|| ctx.slot.with(|c| Ok(c.sorted_map(&self.log).range(from, to)?)))?;
        entries(py, &found)
    }

    fn __repr__(&self) -> String {
        format!("<varve.HandlerMap {:?}>", self.log)
    }
}

/// Reads of a sorted map handlers build, from :meth:`Runtime.sorted_map`:
/// any version (an op seq of its op log), of the current generation or of
/// an old one a repair kept. Not recorded.
#[pyclass(frozen, name = "MapReader", module = "varve")]
pub struct PyMapReader {
    pub(super) reader: MapReader,
    pub(super) log: String,
}

#[pymethods]
impl PyMapReader {
    /// The latest version (the op log's latest seq), 0 when empty.
    #[getter]
    fn latest(&self, py: Python<'_>) -> PyResult<u64> {
        py.detach(|| -> Result<u64> { Ok(self.reader.latest()?) }).map_err(Into::into)
    }

    /// The op log this map is built from (``_gen.LOG.N`` for an old generation).
    #[getter]
    fn log(&self) -> &str {
        self.reader.log()
    }

    /// The value of `key` at version `at` (None: the latest), or None.
    #[pyo3(signature = (key, at = None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'_, PyAny>,
        at: Option<u64>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let key = data(key)?;
        let key = key.as_slice();
        let value = py.detach(|| -> Result<_> { Ok(self.reader.get(key, at)?) })?;
        Ok(value.map(|v: bytes::Bytes| PyBytes::new(py, &v)))
    }

    /// ``[(key, value), ...]`` with ``start <= key < stop`` at version `at`.
    #[pyo3(signature = (start = None, stop = None, at = None))]
    fn range<'py>(
        &self,
        py: Python<'py>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        at: Option<u64>,
    ) -> PyResult<Bound<'py, PyList>> {
        let (start, stop) = (start.map(data).transpose()?, stop.map(data).transpose()?);
        let (from, to) = (start.as_ref().map(Data::as_slice), stop.as_ref().map(Data::as_slice));
        let found = py.detach(|| -> Result<_> { Ok(self.reader.range(from, to, at)?) })?;
        entries(py, &found)
    }

    fn __repr__(&self) -> String {
        format!("<varve.MapReader {:?}>", self.log)
    }
}
