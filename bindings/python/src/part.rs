//! `PersistentMap`: PART's in-memory persistent map ([`varve_part::ArtMap`],
//! `seeds/002_…` §3) with `bytes` or `str` keys and any Python object as
//! value; its iterators; the key rule both it and `DurableMap`
//! (`durable_map.rs`) follow ([`KeyType`]); and the `varve.DELETE` marker
//! of `update` batches.
//!
//! **The GIL is held** through every call here, unlike the rest of the
//! package: values are Python objects, and an update that copies a node
//! shared with a snapshot clones the values it holds, which is a reference
//! count increment and needs the GIL (see [`PyValue`]). The calls are
//! in-memory and short.
//!
//! **Iterators own a snapshot** (an O(1) clone of the map taken when the
//! iterator is made), so writes to the map while an iterator is alive are
//! allowed, and the iterator goes on over the contents as they were.

use std::collections::VecDeque;
use std::ops::Bound as RangeBound;

use pyo3::exceptions::{PyKeyError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyString, PyTuple, PyType};
use varve_part::{ArtMap, BatchOp};

/// A Python object as a map value.
///
/// `ArtMap<V>` needs `V: Clone` (copying a node shared with a snapshot
/// clones the leaves it holds inline), and `Py<PyAny>` has no `Clone` in
/// pyo3 without its `py-clone` feature, whose clone panics off the GIL.
/// This clone is `clone_ref` under `Python::attach`, which is sound on any
/// thread: it takes the GIL if the thread does not hold it. The maps of this
/// module are only updated with the GIL held (see the module doc), so in
/// practice it is a reference count increment and `attach` only checks a
/// thread-local count. Dropping needs no GIL: pyo3 defers a decrement made
/// without it.
pub(crate) struct PyValue(Py<PyAny>);

impl Clone for PyValue {
    fn clone(&self) -> Self {
        Python::attach(|py| PyValue(self.0.clone_ref(py)))
    }
}

impl From<Py<PyAny>> for PyValue {
    fn from(value: Py<PyAny>) -> Self {
        PyValue(value)
    }
}

/// How values are handed to Python: the in-memory map's are objects, a
/// durable map's are bytes.
pub(crate) trait ToPython {
    fn to_python<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny>;
}

impl ToPython for PyValue {
    fn to_python<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        self.0.bind(py).clone()
    }
}

impl ToPython for Vec<u8> {
    fn to_python<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        PyBytes::new(py, self).into_any()
    }
}

// ------------------------------------------------------------------ keys

/// The key type of a map, fixed when it is made.
///
/// - `Bytes` (the default): keys are `bytes`, `bytearray` or `str` (encoded
///   UTF-8) and are returned as `bytes`.
/// - `Str`: keys are `str` only, stored UTF-8, and returned as `str`.
///
/// Either way keys are ordered by their bytes (for `str`: UTF-8 order, which
/// is code point order, so Python's `sorted` agrees).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyType {
    Bytes,
    Str,
}

/// A key's bytes: borrowed from a `bytes` or `str` object, owned for a
/// `bytearray`.
pub(crate) enum KeyBytes<'a> {
    Borrowed(&'a [u8]),
    Owned(Vec<u8>),
}

impl std::ops::Deref for KeyBytes<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            KeyBytes::Borrowed(b) => b,
            KeyBytes::Owned(v) => v,
        }
    }
}

impl KeyType {
    /// `key_type=` of a constructor: the type `bytes` or `str` (None: bytes).
    pub(crate) fn from_arg(arg: Option<&Bound<'_, PyAny>>) -> PyResult<KeyType> {
        let Some(arg) = arg else { return Ok(KeyType::Bytes) };
        let py = arg.py();
        if arg.is(py.get_type::<PyBytes>()) {
            Ok(KeyType::Bytes)
        } else if arg.is(py.get_type::<PyString>()) {
            Ok(KeyType::Str)
        } else {
            Err(PyTypeError::new_err(format!(
                "key_type={}: use key_type=bytes (keys bytes or str, returned as bytes) or key_type=str (keys str, \
                 returned as str)",
                arg.repr()?
            )))
        }
    }

    pub(crate) fn python_type(self, py: Python<'_>) -> Bound<'_, PyType> {
        match self {
            KeyType::Bytes => py.get_type::<PyBytes>(),
            KeyType::Str => py.get_type::<PyString>(),
        }
    }

    /// The bytes of `key`, or a `TypeError` saying what keys this map takes.
    pub(crate) fn encode<'a>(self, key: &'a Bound<'_, PyAny>) -> PyResult<KeyBytes<'a>> {
        if let Ok(s) = key.cast::<PyString>() {
            // A str with lone surrogates has no UTF-8 form: UnicodeEncodeError.
            return Ok(match s.to_cow()? {
                std::borrow::Cow::Borrowed(s) => KeyBytes::Borrowed(s.as_bytes()),
                std::borrow::Cow::Owned(s) => KeyBytes::Owned(s.into_bytes()),
            });
        }
        if self == KeyType::Bytes {
            if let Ok(b) = key.cast::<PyBytes>() {
                return Ok(KeyBytes::Borrowed(b.as_bytes()));
            }
            if let Ok(b) = key.cast::<PyByteArray>() {
                return Ok(KeyBytes::Owned(b.to_vec()));
            }
        }
        let wanted = match self {
            KeyType::Bytes => "bytes or str (str is stored as its UTF-8 bytes)",
            KeyType::Str => "str (this map was made with key_type=str; make it with key_type=bytes for bytes keys)",
        };
        Err(PyTypeError::new_err(format!(
            "a key of this map is {wanted}, not {}: convert the key first, e.g. str(key)",
            key.get_type().name()?
        )))
    }

    /// A stored key as Python returns it.
    pub(crate) fn decode<'py>(self, py: Python<'py>, key: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        match self {
            KeyType::Bytes => Ok(PyBytes::new(py, key).into_any()),
            KeyType::Str => match std::str::from_utf8(key) {
                Ok(s) => Ok(PyString::new(py, s).into_any()),
                // Only a durable map written with key_type=bytes can hold these.
                Err(e) => Err(PyValueError::new_err(format!(
                    "stored key {key:?} is not UTF-8 ({e}), so it has no str form: open the map with key_type=bytes"
                ))),
            },
        }
    }
}

/// ``start <= key < stop`` bounds; either end may be missing.
fn bounds(start: Option<&[u8]>, stop: Option<&[u8]>) -> (RangeBound<Vec<u8>>, Option<Vec<u8>>) {
    (start.map_or(RangeBound::Unbounded, |s| RangeBound::Included(s.to_vec())), stop.map(<[u8]>::to_vec))
}

/// The smallest byte string greater than every string starting with
/// `prefix`, or `None` if there is none (`prefix` is empty or all `0xff`).
/// The same rule as `ArtMap::prefix`'s.
fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|&b| b != 0xff)?;
    let mut end = prefix[..=last].to_vec();
    end[last] += 1;
    Some(end)
}

// -------------------------------------------------------------- iterator

/// What an iterator yields.
#[derive(Clone, Copy)]
pub(crate) enum Yield {
    Keys,
    Values,
    Items,
}

/// The snapshot an iterator walks: an in-memory map's or a durable map's.
pub(crate) enum Source {
    Objects(ArtMap<PyValue>),
    Bytes(ArtMap<Vec<u8>>),
}

/// Entries fetched from the snapshot at a time: amortizes the O(k) seek that
/// resumes after the last key, and bounds what one refill holds.
const ITER_CHUNK_ENTRIES: usize = 256;

/// An iterator over a PART map as it was when the iterator was made (it
/// owns an O(1) snapshot, so later writes to the map do not affect it).
#[pyclass(module = "varve")]
pub struct PartIterator {
    source: Source,
    key_type: KeyType,
    what: Yield,
    /// Where the next refill starts: the start bound, then after the last key.
    lower: RangeBound<Vec<u8>>,
    /// Exclusive upper bound.
    upper: Option<Vec<u8>>,
    buffer: VecDeque<(Vec<u8>, Py<PyAny>)>,
    exhausted: bool,
}

impl PartIterator {
    pub(crate) fn new(
        source: Source,
        key_type: KeyType,
        what: Yield,
        lower: RangeBound<Vec<u8>>,
        upper: Option<Vec<u8>>,
    ) -> PartIterator {
        PartIterator { source, key_type, what, lower, upper, buffer: VecDeque::new(), exhausted: false }
    }

    /// Over `start <= key < stop`.
    pub(crate) fn range(
        source: Source,
        key_type: KeyType,
        what: Yield,
        start: Option<&[u8]>,
        stop: Option<&[u8]>,
    ) -> Self {
        let (lower, upper) = bounds(start, stop);
        PartIterator::new(source, key_type, what, lower, upper)
    }

    /// Over the keys starting with `prefix`.
    pub(crate) fn prefix(source: Source, key_type: KeyType, what: Yield, prefix: &[u8]) -> Self {
        PartIterator::new(source, key_type, what, RangeBound::Included(prefix.to_vec()), prefix_successor(prefix))
    }

    fn refill(&mut self, py: Python<'_>) {
        fn take<V: ToPython>(
            py: Python<'_>,
            map: &ArtMap<V>,
            lower: &RangeBound<Vec<u8>>,
            upper: Option<&Vec<u8>>,
            out: &mut VecDeque<(Vec<u8>, Py<PyAny>)>,
        ) {
            let lower = match lower {
                RangeBound::Included(k) => RangeBound::Included(k.as_slice()),
                RangeBound::Excluded(k) => RangeBound::Excluded(k.as_slice()),
                RangeBound::Unbounded => RangeBound::Unbounded,
            };
            let upper = upper.map_or(RangeBound::Unbounded, |u| RangeBound::Excluded(u.as_slice()));
            for (key, value) in
                map.range::<(RangeBound<&[u8]>, RangeBound<&[u8]>)>((lower, upper)).take(ITER_CHUNK_ENTRIES)
            {
                out.push_back((key, value.to_python(py).unbind()));
            }
        }
        if let (RangeBound::Included(lo) | RangeBound::Excluded(lo), Some(hi)) = (&self.lower, &self.upper) {
            if lo >= hi {
                self.exhausted = true;
                return;
            }
        }
        match &self.source {
            Source::Objects(map) => take(py, map, &self.lower, self.upper.as_ref(), &mut self.buffer),
            Source::Bytes(map) => take(py, map, &self.lower, self.upper.as_ref(), &mut self.buffer),
        }
        if self.buffer.len() < ITER_CHUNK_ENTRIES {
            self.exhausted = true;
        }
        if let Some((last, _)) = self.buffer.back() {
            self.lower = RangeBound::Excluded(last.clone());
        }
    }
}

#[pymethods]
impl PartIterator {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        if self.buffer.is_empty() && !self.exhausted {
            self.refill(py);
        }
        let Some((key, value)) = self.buffer.pop_front() else { return Ok(None) };
        let item = match self.what {
            Yield::Keys => self.key_type.decode(py, &key)?,
            Yield::Values => value.into_bound(py),
            Yield::Items => PyTuple::new(py, [self.key_type.decode(py, &key)?, value.into_bound(py)])?.into_any(),
        };
        Ok(Some(item))
    }
}

// ---------------------------------------------------------- DELETE marker

/// The type of :data:`varve.DELETE`, the value that deletes a key in an
/// ``update`` batch.
#[pyclass(frozen, module = "varve", name = "DeleteType")]
pub struct DeleteType;

#[pymethods]
impl DeleteType {
    #[expect(clippy::unused_self, reason = "a Python method takes self")]
    fn __repr__(&self) -> &'static str {
        "varve.DELETE"
    }
}

/// The entries of an ``update`` batch: a mapping (its ``items()``) or an
/// iterable of ``(key, value)`` pairs, in the given order.
pub(crate) fn batch_entries<'py>(batch: &Bound<'py, PyAny>) -> PyResult<Vec<(Bound<'py, PyAny>, Bound<'py, PyAny>)>> {
    let pairs = if let Ok(dict) = batch.cast::<PyDict>() {
        dict.items().into_any()
    } else if batch.hasattr("items")? {
        batch.call_method0("items")?
    } else {
        batch.clone()
    };
    let mut out = Vec::new();
    for pair in pairs.try_iter().map_err(|_| {
        PyTypeError::new_err("update takes a mapping or an iterable of (key, value) pairs (value varve.DELETE deletes)")
    })? {
        let pair = pair?;
        let (key, value): (Bound<'py, PyAny>, Bound<'py, PyAny>) = pair.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "an update batch holds (key, value) pairs, not {}: pass a dict or a list of pairs",
                pair.repr().map_or_else(|_| "an unprintable object".to_owned(), |r| r.to_string())
            ))
        })?;
        out.push((key, value));
    }
    Ok(out)
}

pub(crate) fn is_delete(value: &Bound<'_, PyAny>) -> bool {
    value.is_instance_of::<DeleteType>()
}

// --------------------------------------------------------- PersistentMap

/// Entries a ``repr`` shows before it elides the rest.
const REPR_ENTRIES_MAX: usize = 32;

/// A persistent ordered map (PART, an adaptive radix tree with path
/// copying): ``bytes`` or ``str`` keys in byte order, any Python objects as
/// values, and O(1) snapshots.
///
/// ``PersistentMap(items=None, *, key_type=bytes)``: with ``key_type=bytes``
/// keys are ``bytes``, ``bytearray`` or ``str`` (stored as UTF-8) and come
/// back as ``bytes``; with ``key_type=str`` keys are ``str`` only and come
/// back as ``str``. Keys are ordered by their bytes.
///
/// ``snapshot()`` returns a read-only ``PersistentMap`` in O(1) that never
/// changes; writing to it raises ``TypeError`` (``copy()`` makes a writable
/// map from it, also in O(1)). Iterators (``iter``, ``keys``, ``values``,
/// ``items``, ``range``, ``prefix``) are over a snapshot taken when they are
/// made: writes to the map meanwhile are allowed and not seen.
///
/// Costs: ``m[k]``, ``in``, ``m[k] = v``, ``del m[k]`` O(len(k)); ``len``,
/// ``snapshot``, ``copy`` O(1); ``update`` sorts the batch and applies it
/// in one descent; set operations reuse the subtrees the maps share.
/// Each call holds the GIL (values are Python objects), so threads sharing
/// a map take turns; a write from inside a call on the same map (the
/// ``__del__`` of a value that ``m[k] = v`` replaces, say) raises
/// ``RuntimeError`` (already borrowed) rather than corrupting it
/// (``union``'s ``combine`` and ``==`` work on O(1) copies, so they may
/// write to either map).
#[pyclass(module = "varve")]
pub struct PersistentMap {
    map: ArtMap<PyValue>,
    key_type: KeyType,
    read_only: bool,
}

impl PersistentMap {
    /// A writable map.
    pub(crate) fn writable(map: ArtMap<PyValue>, key_type: KeyType) -> PersistentMap {
        PersistentMap { map, key_type, read_only: false }
    }

    /// A read-only map (a snapshot).
    pub(crate) fn snapshot_of(map: ArtMap<PyValue>, key_type: KeyType) -> PersistentMap {
        PersistentMap { map, key_type, read_only: true }
    }

    fn check_writable(&self) -> PyResult<()> {
        if self.read_only {
            return Err(PyTypeError::new_err(
                "this PersistentMap is a snapshot and is read-only: call .copy() for a writable map (O(1)) holding \
                 the same entries",
            ));
        }
        Ok(())
    }

    fn same_key_type(&self, other: &PersistentMap, operation: &str) -> PyResult<()> {
        if self.key_type != other.key_type {
            return Err(PyTypeError::new_err(format!(
                "{operation} of a map with key_type={} and one with key_type={}: both maps must have the same key \
                 type",
                key_type_name(self.key_type),
                key_type_name(other.key_type)
            )));
        }
        Ok(())
    }

    fn ops_of(&self, batch: &Bound<'_, PyAny>) -> PyResult<Vec<BatchOp<PyValue>>> {
        batch_entries(batch)?
            .into_iter()
            .map(|(key, value)| {
                let key = self.key_type.encode(&key)?.to_vec();
                Ok(if is_delete(&value) { BatchOp::Delete(key) } else { BatchOp::Put(key, PyValue(value.unbind())) })
            })
            .collect()
    }

    fn iter_of(&self, what: Yield) -> PartIterator {
        PartIterator::range(Source::Objects(self.map.clone()), self.key_type, what, None, None)
    }

    fn entry<'py>(&self, py: Python<'py>, entry: Option<(Vec<u8>, &PyValue)>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        entry.map(|(k, v)| PyTuple::new(py, [self.key_type.decode(py, &k)?, v.to_python(py)])).transpose()
    }
}

pub(crate) fn key_type_name(key_type: KeyType) -> &'static str {
    match key_type {
        KeyType::Bytes => "bytes",
        KeyType::Str => "str",
    }
}

#[pymethods]
impl PersistentMap {
    #[new]
    #[pyo3(signature = (items = None, *, key_type = None))]
    fn new(items: Option<&Bound<'_, PyAny>>, key_type: Option<&Bound<'_, PyAny>>) -> PyResult<PersistentMap> {
        let mut map = PersistentMap::writable(ArtMap::new(), KeyType::from_arg(key_type)?);
        if let Some(items) = items {
            map.update(items)?;
        }
        Ok(map)
    }

    /// ``bytes`` or ``str``: the type keys are returned as.
    #[getter]
    fn key_type<'py>(&self, py: Python<'py>) -> Bound<'py, PyType> {
        self.key_type.python_type(py)
    }

    /// Whether this map is a snapshot (writes raise ``TypeError``).
    #[getter]
    fn read_only(&self) -> bool {
        self.read_only
    }

    fn __len__(&self) -> usize {
        self.map.len()
    }

    fn __contains__(&self, key: &Bound<'_, PyAny>) -> bool {
        // As for a dict, a key of another type is simply absent.
        self.key_type.encode(key).is_ok_and(|k| self.map.contains_key(&k))
    }

    fn __getitem__<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        match self.map.get(&self.key_type.encode(key)?) {
            Some(v) => Ok(v.to_python(py)),
            None => Err(PyKeyError::new_err(key.clone().unbind())),
        }
    }

    /// The value of `key`, or `default`.
    #[pyo3(signature = (key, default = None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        Ok(self.map.get(&self.key_type.encode(key)?).map(|v| v.to_python(py)).or(default))
    }

    fn __setitem__(&mut self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.check_writable()?;
        let key = self.key_type.encode(key)?;
        // The replaced value is dropped after the map is consistent again.
        let _old = self.map.insert(&key, PyValue(value.clone().unbind()));
        Ok(())
    }

    fn __delitem__(&mut self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.check_writable()?;
        match self.map.remove(&self.key_type.encode(key)?) {
            Some(_) => Ok(()),
            None => Err(PyKeyError::new_err(key.clone().unbind())),
        }
    }

    /// Apply a batch of puts and deletes as if one by one in the given order
    /// (the last update of a key wins), in one descent of the tree: `batch`
    /// is a mapping or an iterable of ``(key, value)`` pairs, and the value
    /// :data:`varve.DELETE` deletes the key (absent keys are ignored).
    /// Every key is checked before anything is applied.
    fn update(&mut self, batch: &Bound<'_, PyAny>) -> PyResult<()> {
        self.check_writable()?;
        let ops = self.ops_of(batch)?;
        self.map.apply(ops);
        Ok(())
    }

    fn __iter__(&self) -> PartIterator {
        self.iter_of(Yield::Keys)
    }

    /// Keys in order, over a snapshot taken now (an iterator).
    fn keys(&self) -> PartIterator {
        self.iter_of(Yield::Keys)
    }

    /// Values in key order, over a snapshot taken now (an iterator).
    fn values(&self) -> PartIterator {
        self.iter_of(Yield::Values)
    }

    /// ``(key, value)`` pairs in key order, over a snapshot taken now (an iterator).
    fn items(&self) -> PartIterator {
        self.iter_of(Yield::Items)
    }

    /// ``(key, value)`` pairs with ``start <= key < stop`` in key order
    /// (either bound may be None: unbounded), over a snapshot taken now.
    #[pyo3(signature = (start = None, stop = None))]
    fn range(&self, start: Option<&Bound<'_, PyAny>>, stop: Option<&Bound<'_, PyAny>>) -> PyResult<PartIterator> {
        let start = start.map(|k| self.key_type.encode(k)).transpose()?;
        let stop = stop.map(|k| self.key_type.encode(k)).transpose()?;
        Ok(PartIterator::range(
            Source::Objects(self.map.clone()),
            self.key_type,
            Yield::Items,
            start.as_deref(),
            stop.as_deref(),
        ))
    }

    /// ``(key, value)`` pairs whose key starts with `prefix`, in key order,
    /// over a snapshot taken now.
    fn prefix(&self, prefix: &Bound<'_, PyAny>) -> PyResult<PartIterator> {
        let prefix = self.key_type.encode(prefix)?;
        Ok(PartIterator::prefix(Source::Objects(self.map.clone()), self.key_type, Yield::Items, &prefix))
    }

    /// The ``(key, value)`` with the smallest key, or None when empty.
    fn first<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        self.entry(py, self.map.first())
    }

    /// The ``(key, value)`` with the largest key, or None when empty.
    fn last<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        self.entry(py, self.map.last())
    }

    /// A read-only map of the entries as they are now, O(1); it never
    /// changes, whatever is written to this map later.
    fn snapshot(&self) -> PersistentMap {
        PersistentMap::snapshot_of(self.map.clone(), self.key_type)
    }

    /// Lay the map out again for scans (PART's idle-time compaction, §3.4):
    /// the nodes this map holds alone are rebuilt in key order, so a scan
    /// reads memory in order. Entries are unchanged. O(n), and while it runs
    /// the map's nodes take twice their memory: call it when the map is idle
    /// after many updates. Nodes shared with a snapshot, a copy or a live
    /// iterator stay where they are. Returns ``nodes_moved`` and
    /// ``nodes_shared`` (shared nodes left in place, their subtrees uncounted).
    fn compact<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let done = self.map.compact();
        let stats = PyDict::new(py);
        stats.set_item("nodes_moved", done.nodes_moved)?;
        stats.set_item("nodes_shared", done.nodes_shared)?;
        Ok(stats)
    }

    /// A writable map holding the same entries, O(1) (it shares the tree
    /// until either map is written).
    fn copy(&self) -> PersistentMap {
        PersistentMap::writable(self.map.clone(), self.key_type)
    }

    /// A new writable map with the entries of both. For a key in both, the
    /// value is ``combine(ours, theirs)``, called once per such key in key
    /// order; without `combine`, `other`'s value (the last wins, as in
    /// ``dict | dict``). Subtrees the maps share are reused.
    #[pyo3(signature = (other, combine = None))]
    fn union(slf: &Bound<'_, Self>, other: &Bound<'_, Self>, combine: Option<Bound<'_, PyAny>>) -> PyResult<Self> {
        // Clones (O(1)) first: `combine` may write to either map.
        let (ours, theirs, key_type) = {
            let (a, b) = (slf.borrow(), other.borrow());
            a.same_key_type(&b, "union")?;
            (a.map.clone(), b.map.clone(), a.key_type)
        };
        let mut merged = ours.union_with(&theirs, |_, _, theirs| theirs.clone());
        if let Some(combine) = combine {
            // `union_with` does not call its merge for shared subtrees, but
            // `combine` must see every common key (it need not return a
            // value itself for equal inputs): one pass over the intersection.
            let mut ops = Vec::new();
            for (key, ours_value) in &ours.intersection(&theirs) {
                let Some(theirs_value) = theirs.get(&key) else { continue };
                let py = slf.py();
                let value = combine.call1((ours_value.to_python(py), theirs_value.to_python(py)))?;
                ops.push(BatchOp::Put(key, PyValue(value.unbind())));
            }
            merged.apply(ops);
        }
        Ok(PersistentMap::writable(merged, key_type))
    }

    /// A new writable map with our entries whose keys are also in `other`.
    fn intersection(&self, other: PyRef<'_, Self>) -> PyResult<Self> {
        self.same_key_type(&other, "intersection")?;
        Ok(PersistentMap::writable(self.map.intersection(&other.map), self.key_type))
    }

    /// A new writable map with our entries whose keys are not in `other`.
    fn difference(&self, other: PyRef<'_, Self>) -> PyResult<Self> {
        self.same_key_type(&other, "difference")?;
        Ok(PersistentMap::writable(self.map.difference(&other.map), self.key_type))
    }

    /// Equal to another ``PersistentMap`` of the same key type with the same
    /// keys and equal (``==``) values; read-only or not does not matter.
    fn __eq__<'py>(slf: &Bound<'py, Self>, other: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let Ok(other) = other.cast::<PersistentMap>() else {
            return Ok(py.NotImplemented().into_bound(py));
        };
        // Clones (O(1)) first: a value's `__eq__` may write to either map.
        let (a, b) = {
            let (a, b) = (slf.borrow(), other.borrow());
            if a.key_type != b.key_type || a.map.len() != b.map.len() {
                return Ok(false.into_pyobject(py)?.to_owned().into_any());
            }
            (a.map.clone(), b.map.clone())
        };
        for ((ka, va), (kb, vb)) in a.iter().zip(b.iter()) {
            if ka != kb || !va.to_python(py).eq(vb.to_python(py))? {
                return Ok(false.into_pyobject(py)?.to_owned().into_any());
            }
        }
        Ok(true.into_pyobject(py)?.to_owned().into_any())
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let mut entries = Vec::new();
        for (key, value) in self.map.iter().take(REPR_ENTRIES_MAX) {
            entries.push(format!("{}: {}", self.key_type.decode(py, &key)?.repr()?, value.to_python(py).repr()?));
        }
        if self.map.len() > REPR_ENTRIES_MAX {
            entries.push(format!("... {} more", self.map.len() - REPR_ENTRIES_MAX));
        }
        let mut out = format!("PersistentMap({{{}", entries.join(", "));
        out.push('}');
        if self.key_type == KeyType::Str {
            out.push_str(", key_type=str");
        }
        if self.read_only {
            out.push_str(", read_only=True");
        }
        out.push(')');
        Ok(out)
    }
}
