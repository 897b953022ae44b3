//! `DurableMap`: PART's durable map ([`varve_part::durable::DurableMap`],
//! `seeds/002_…` §4.1) on a namespace, values `bytes`, keys as for
//! `PersistentMap` ([`KeyType`]).
//!
//! One [`DurableState`] per map name and namespace is shared by every Python
//! object that opened it (one writer per map), in the namespace's registry;
//! `close()` on any of them, or the store's close, takes the map away and
//! later calls raise `varve.Closed`. Its logs are `part.<name>.manifest`,
//! `part.<name>.batches.<g>` and `part.<name>.blobs.<g>` (the `part.`
//! prefix keeps them apart from the logs of `pds` structures and the
//! user's). The GIL is released around every call into the map.

use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyTuple, PyType};
use varve_part::durable::{CheckpointStats, DurableMap as RustDurableMap, DurableOptions};
use varve_part::{ArtMap, BatchOp};

use crate::error::{Error, Result};
use crate::log::{lock, NsState};
use crate::part::{batch_entries, is_delete, KeyType, PartIterator, PersistentMap, PyValue, Source, ToPython, Yield};

/// The prefix of a durable map's log names.
const LOG_PREFIX: &str = "part.";

pub(crate) struct DurableState {
    name: String,
    /// `None` once closed.
    inner: Mutex<Option<RustDurableMap<Vec<u8>>>>,
}

impl DurableState {
    pub(crate) fn close(&self) {
        *lock(&self.inner) = None;
    }

    fn with<R>(&self, f: impl FnOnce(&mut RustDurableMap<Vec<u8>>) -> Result<R>) -> Result<R> {
        let mut guard = lock(&self.inner);
        let map = guard.as_mut().ok_or_else(|| Error::MapClosed(self.name.clone()))?;
        f(map)
    }
}

/// A value: `bytes` or `bytearray`.
fn value_bytes(value: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(b) = value.cast::<PyBytes>() {
        Ok(b.as_bytes().to_vec())
    } else if let Ok(b) = value.cast::<PyByteArray>() {
        Ok(b.to_vec())
    } else {
        Err(PyTypeError::new_err(format!(
            "a durable map's value is bytes (or bytearray), not {}: encode it first, e.g. value.encode() or \
             json.dumps(value).encode(); for any object use the in-memory varve.PersistentMap",
            value.get_type().name()?
        )))
    }
}

/// A durable persistent ordered map (PART) on a namespace: values are
/// ``bytes``, keys as for :class:`PersistentMap` (``key_type``).
///
/// Every update (``m[k] = v``, ``put``, ``delete``, ``del m[k]``,
/// ``update``) appends one batch record to the map's batch log before it
/// returns (durable per the store's ``sync`` policy), and survives a crash
/// from then on. ``checkpoint()`` writes the changed part of the tree, so
/// reopening replays only later batches. Reads see the current contents;
/// iterators walk a snapshot taken when they are made. ``snapshot()``
/// copies the current contents into a read-only in-memory
/// :class:`PersistentMap` (O(n): values become Python ``bytes``).
#[pyclass(frozen, module = "varve")]
pub struct DurableMap {
    ns: Arc<NsState>,
    state: Arc<DurableState>,
    key_type: KeyType,
}

impl DurableMap {
    pub(crate) fn open(
        py: Python<'_>,
        ns: &Arc<NsState>,
        name: &str,
        key_type: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<DurableMap> {
        let key_type = KeyType::from_arg(key_type)?;
        let state = py.detach(|| -> Result<Arc<DurableState>> {
            let mut maps = lock(&ns.durable_maps);
            if let Some(existing) = maps.get(name) {
                return Ok(existing.clone());
            }
            let handle = ns.handle()?;
            let map = RustDurableMap::open(handle, &format!("{LOG_PREFIX}{name}"), DurableOptions::default())?;
            let state = Arc::new(DurableState { name: name.to_owned(), inner: Mutex::new(Some(map)) });
            maps.insert(name.to_owned(), state.clone());
            Ok(state)
        })?;
        Ok(DurableMap { ns: ns.clone(), state, key_type })
    }

    fn with<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut RustDurableMap<Vec<u8>>) -> Result<R> + Send,
    ) -> PyResult<R> {
        py.detach(|| self.state.with(f)).map_err(Into::into)
    }

    /// Drop the map and its entry in the namespace's registry, so the next
    /// `durable_map(name)` opens it again from its logs.
    fn close_state(&self) {
        let mut maps = lock(&self.ns.durable_maps);
        if maps.get(&self.state.name).is_some_and(|s| Arc::ptr_eq(s, &self.state)) {
            maps.remove(&self.state.name);
        }
        drop(maps);
        self.state.close();
    }

    /// The current contents, O(1).
    fn current(&self, py: Python<'_>) -> PyResult<ArtMap<Vec<u8>>> {
        self.with(py, |m| Ok(m.snapshot().to_map()))
    }

    /// Append `ops` as one batch record; an empty batch writes nothing.
    fn apply(&self, py: Python<'_>, ops: Vec<BatchOp<Vec<u8>>>) -> PyResult<()> {
        if ops.is_empty() {
            return Ok(());
        }
        self.with(py, |m| m.apply(ops).map(drop).map_err(Into::into))
    }

    fn iter_of(&self, py: Python<'_>, what: Yield) -> PyResult<PartIterator> {
        Ok(PartIterator::range(Source::Bytes(self.current(py)?), self.key_type, what, None, None))
    }
}

fn stats_dict(py: Python<'_>, stats: CheckpointStats) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("full", stats.full)?;
    d.set_item("generation", stats.generation)?;
    d.set_item("blobs", stats.blobs)?;
    d.set_item("records", stats.records)?;
    d.set_item("blob_bytes", stats.blob_bytes)?;
    d.set_item("manifest_bytes", stats.manifest_bytes)?;
    d.set_item("total_bytes", stats.total_bytes())?;
    d.set_item("reused", stats.reused)?;
    d.set_item("deltas", stats.deltas)?;
    Ok(d)
}

#[pymethods]
impl DurableMap {
    /// The map's name.
    #[getter]
    fn name(&self) -> &str {
        &self.state.name
    }

    /// ``bytes`` or ``str``: the type keys are returned as.
    #[getter]
    fn key_type<'py>(&self, py: Python<'py>) -> Bound<'py, PyType> {
        self.key_type.python_type(py)
    }

    /// Set `key` to `value` (bytes); durable when it returns.
    fn put(&self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = self.key_type.encode(key)?.to_vec();
        let value = value_bytes(value)?;
        self.apply(py, vec![BatchOp::Put(key, value)])
    }

    fn __setitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.put(py, key, value)
    }

    /// Delete `key` (a batch record is written even if it is absent).
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = self.key_type.encode(key)?.to_vec();
        self.apply(py, vec![BatchOp::Delete(key)])
    }

    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let raw = self.key_type.encode(key)?.to_vec();
        let removed = self.with(py, move |m| {
            if !m.contains_key(&raw) {
                return Ok(false);
            }
            m.apply(vec![BatchOp::Delete(raw)])?;
            Ok(true)
        })?;
        if removed {
            Ok(())
        } else {
            Err(PyKeyError::new_err(key.clone().unbind()))
        }
    }

    /// Apply a batch of puts and deletes as one durable batch record (all or
    /// nothing): a mapping or an iterable of ``(key, value)`` pairs, value
    /// ``bytes`` or :data:`varve.DELETE`; the last update of a key wins. An
    /// empty batch writes nothing.
    fn update(&self, py: Python<'_>, batch: &Bound<'_, PyAny>) -> PyResult<()> {
        let ops = batch_entries(batch)?
            .into_iter()
            .map(|(key, value)| {
                let key = self.key_type.encode(&key)?.to_vec();
                Ok(if is_delete(&value) { BatchOp::Delete(key) } else { BatchOp::Put(key, value_bytes(&value)?) })
            })
            .collect::<PyResult<Vec<_>>>()?;
        self.apply(py, ops)
    }

    /// The value of `key`, or `default`.
    #[pyo3(signature = (key, default = None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let key = self.key_type.encode(key)?.to_vec();
        let value = self.with(py, move |m| Ok(m.get(&key).cloned()))?;
        Ok(value.map(|v| PyBytes::new(py, &v).into_any()).or(default))
    }

    fn __getitem__<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        self.get(py, key, None)?.ok_or_else(|| PyKeyError::new_err(key.clone().unbind()))
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let Ok(key) = self.key_type.encode(key) else { return Ok(false) };
        let key = key.to_vec();
        self.with(py, move |m| Ok(m.contains_key(&key)))
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |m| Ok(m.len()))
    }

    fn __iter__(&self, py: Python<'_>) -> PyResult<PartIterator> {
        self.iter_of(py, Yield::Keys)
    }

    /// Keys in order, over a snapshot taken now (an iterator).
    fn keys(&self, py: Python<'_>) -> PyResult<PartIterator> {
        self.iter_of(py, Yield::Keys)
    }

    /// Values in key order, over a snapshot taken now (an iterator).
    fn values(&self, py: Python<'_>) -> PyResult<PartIterator> {
        self.iter_of(py, Yield::Values)
    }

    /// ``(key, value)`` pairs in key order, over a snapshot taken now.
    fn items(&self, py: Python<'_>) -> PyResult<PartIterator> {
        self.iter_of(py, Yield::Items)
    }

    /// ``(key, value)`` pairs with ``start <= key < stop`` (None: unbounded).
    #[pyo3(signature = (start = None, stop = None))]
    fn range(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PartIterator> {
        let start = start.map(|k| self.key_type.encode(k)).transpose()?;
        let stop = stop.map(|k| self.key_type.encode(k)).transpose()?;
        let current = self.current(py)?;
        Ok(PartIterator::range(Source::Bytes(current), self.key_type, Yield::Items, start.as_deref(), stop.as_deref()))
    }

    /// ``(key, value)`` pairs whose key starts with `prefix`, in key order.
    fn prefix(&self, py: Python<'_>, prefix: &Bound<'_, PyAny>) -> PyResult<PartIterator> {
        let prefix = self.key_type.encode(prefix)?;
        let current = self.current(py)?;
        Ok(PartIterator::prefix(Source::Bytes(current), self.key_type, Yield::Items, &prefix))
    }

    /// The ``(key, value)`` with the smallest key, or None when empty.
    fn first<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let entry = self.with(py, |m| Ok(m.first().map(|(k, v)| (k, v.clone()))))?;
        entry.map(|(k, v)| PyTuple::new(py, [self.key_type.decode(py, &k)?, v.to_python(py)])).transpose()
    }

    /// The ``(key, value)`` with the largest key, or None when empty.
    fn last<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let entry = self.with(py, |m| Ok(m.last().map(|(k, v)| (k, v.clone()))))?;
        entry.map(|(k, v)| PyTuple::new(py, [self.key_type.decode(py, &k)?, v.to_python(py)])).transpose()
    }

    /// A read-only in-memory :class:`PersistentMap` of the current contents
    /// (values ``bytes``, same key type). O(n): it copies every entry.
    fn snapshot(&self, py: Python<'_>) -> PyResult<PersistentMap> {
        let current = self.current(py)?;
        let mut entries = Vec::with_capacity(current.len());
        for (key, value) in &current {
            entries.push((key, PyValue::from(value.to_python(py).unbind())));
        }
        Ok(PersistentMap::snapshot_of(entries.into_iter().collect(), self.key_type))
    }

    /// Write a checkpoint (full or incremental, as the map decides) and
    /// return what it wrote: a dict of ``full``, ``generation``, ``blobs``,
    /// ``records``, ``blob_bytes``, ``manifest_bytes``, ``total_bytes``,
    /// ``reused`` and ``deltas``.
    fn checkpoint<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let stats = self.with(py, |m| Ok(m.checkpoint()?))?;
        stats_dict(py, stats)
    }

    /// Close the map (for every object that opened it): later calls raise
    /// :class:`varve.Closed`; ``namespace.durable_map(name)`` opens it
    /// again from its logs. Every acknowledged update is already in the
    /// batch log; closing writes nothing.
    fn close(&self, py: Python<'_>) {
        py.detach(|| self.close_state());
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> bool {
        py.detach(|| self.close_state());
        false
    }

    /// Whether the map is closed.
    #[getter]
    fn closed(&self) -> bool {
        lock(&self.state.inner).is_none()
    }

    fn __repr__(&self) -> String {
        format!("<varve.DurableMap {:?}>", self.state.name)
    }
}
