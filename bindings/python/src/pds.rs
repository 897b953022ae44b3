//! `SortedSet`, `SortedMap`, `List`: the versioned structures of `varve-pds`
//! with Python keys and values (encoded by [`crate::key`]).
//!
//! One [`StructState`] per structure name and namespace is shared by every
//! Python object that opened it, so they see one cached key shape and one
//! writer; it is emptied when the store closes.

use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyIndexError, PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use varve_pds::{Options, PdsError, Structure, Version};

use crate::error::{Error, Result};
use crate::key::{self, Role};
use crate::log::{lock, NsState};

/// ``start <= key < stop`` as range bounds (a missing end is unbounded);
/// `None` when the range is empty, as Python's slices are.
fn half_open(start: Option<Raw>, stop: Option<Raw>) -> Option<(std::ops::Bound<Raw>, std::ops::Bound<Raw>)> {
    use std::ops::Bound;
    if let (Some(lo), Some(hi)) = (&start, &stop) {
        if lo.0 >= hi.0 {
            return None;
        }
    }
    Some((start.map_or(Bound::Unbounded, Bound::Included), stop.map_or(Bound::Unbounded, Bound::Excluded)))
}

/// An encoded key or value, stored as is (the tags make it self-describing).
#[derive(Clone, PartialEq, Eq)]
pub struct Raw(pub Vec<u8>);

impl varve_pds::Key for Raw {
    fn encode_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0);
    }
    /// Takes all of the input: a `Raw` is always a whole key or value (tree
    /// nodes length-prefix their key).
    fn decode_from(input: &mut &[u8]) -> varve_pds::Result<Self> {
        let raw = Raw(input.to_vec());
        *input = &[];
        Ok(raw)
    }
}

pub enum Kind {
    Set(varve_pds::SortedSet<Raw>),
    Map(varve_pds::SortedMap<Raw, Raw>),
    List(varve_pds::VersionedList<Raw>),
}

pub struct Opened {
    pub kind: Kind,
    /// The shape every key of the latest version has (see `key::shape_of`);
    /// `None` while unknown or when the latest version is empty.
    shape: Option<String>,
    shape_known: bool,
}

pub struct StructState {
    name: String,
    label: &'static str,
    config: (u32, Option<u64>, Structure),
    /// `None` once the store is closed.
    inner: Mutex<Option<Opened>>,
}

impl StructState {
    pub fn close(&self) {
        *lock(&self.inner) = None;
    }

    fn with<R>(&self, f: impl FnOnce(&mut Opened) -> Result<R>) -> Result<R> {
        let mut guard = lock(&self.inner);
        let opened = guard.as_mut().ok_or_else(|| Error::Closed(format!("{} {:?}", self.label, self.name)))?;
        f(opened)
    }
}

fn tree_kind(tree: &str) -> PyResult<Structure> {
    match tree {
        "balanced" => Ok(Structure::Balanced),
        "bst" => Ok(Structure::Bst),
        other => Err(Error::Pds(PdsError::InvalidArgument {
            reason: format!("tree={other:?}: use \"balanced\" (red-black, the default) or \"bst\" (the paper's)"),
        })
        .into()),
    }
}

/// Find or open the structure `name` of the given label in `ns`.
fn open_state(
    py: Python<'_>,
    ns: &Arc<NsState>,
    name: &str,
    label: &'static str,
    config: (u32, Option<u64>, Structure),
    open: impl FnOnce(Arc<dyn varve_log::Namespace>, Options) -> varve_pds::Result<Kind> + Send,
) -> PyResult<Arc<StructState>> {
    let state = py.detach(|| -> Result<Arc<StructState>> {
        let handle = ns.handle()?;
        let mut structures = lock(&ns.structures);
        if let Some(existing) = structures.get(name) {
            if existing.label != label || existing.config != config {
                return Err(Error::Pds(PdsError::ConfigMismatch {
                    structure: name.to_owned(),
                    existing: format!(
                        "a {} (extra {}, keep {:?})",
                        existing.label, existing.config.0, existing.config.1
                    ),
                    requested: format!("a {label} (extra {}, keep {:?})", config.0, config.1),
                }));
            }
            return Ok(existing.clone());
        }
        let kind = open(handle, Options { extra: config.0, keep: config.1, ..Options::default() })?;
        let state = Arc::new(StructState {
            name: name.to_owned(),
            label,
            config,
            inner: Mutex::new(Some(Opened { kind, shape: None, shape_known: false })),
        });
        structures.insert(name.to_owned(), state.clone());
        Ok(state)
    })?;
    Ok(state)
}

fn py_list(py: Python<'_>, items: impl IntoIterator<Item = Raw>) -> PyResult<Bound<'_, PyList>> {
    let objs = items.into_iter().map(|r| key::decode(py, &r.0)).collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, objs)
}

fn versions_range(py: Python<'_>, latest: Version) -> PyResult<Bound<'_, PyAny>> {
    py.import("builtins")?.getattr("range")?.call1((1, latest + 1))
}

// -------------------------------------------------------- the sorted tree

/// The shared body of `SortedSet` and `SortedMap`: a map whose values are
/// empty for a set.
struct Tree {
    state: Arc<StructState>,
}

impl Opened {
    /// The key shape of the latest version, read from its first key once.
    fn shape(&mut self) -> Result<Option<String>> {
        if !self.shape_known {
            let first = match &self.kind {
                Kind::Set(s) => s.first(None).or_else(latest_empty(None, None))?,
                Kind::Map(m) => m.first(None).or_else(latest_empty(None, None))?.map(|(k, _)| k),
                Kind::List(_) => None,
            };
            self.shape = first.map(|k| key::shape_of(&k.0));
            self.shape_known = true;
        }
        Ok(self.shape.clone())
    }
}

#[expect(clippy::panic, reason = "Tree methods are only reached through SortedMap objects, which hold maps")]
fn unreachable_kind() -> ! {
    panic!("a sorted map object holds a map")
}

/// A read of the latest version (`at` None) before the first update names
/// version 0, which pds refuses; from Python that is simply "empty".
fn latest_empty<T>(at: Option<Version>, empty: T) -> impl FnOnce(PdsError) -> varve_pds::Result<T> {
    move |e| match e {
        PdsError::NoSuchVersion { latest: 0, .. } if at.is_none() => Ok(empty),
        e => Err(e),
    }
}

impl Tree {
    fn label(&self) -> &'static str {
        self.state.label
    }

    /// Encode a key for an update or an ordered read, checking its shape
    /// against the structure's.
    fn key_checked(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Raw> {
        let raw = key::encode(key, Role::Key)?;
        let shape = key::shape_of(&raw);
        let existing = py.detach(|| self.state.with(Opened::shape))?;
        if let Some(existing) = existing {
            if existing != shape {
                return Err(PyTypeError::new_err(format!(
                    "key {} is a {shape}, but the keys of {} {:?} are {existing}: one structure holds keys of one type \
                     (tuples: one length and one type per field), so that Python's order and Varve's agree",
                    key.repr()?,
                    self.label(),
                    self.state.name,
                )));
            }
        }
        Ok(Raw(raw))
    }

    fn after_update(opened: &mut Opened, shape: String, deleted: bool) {
        if deleted {
            // The last key may have gone; learn the shape again when needed.
            opened.shape_known = false;
        } else {
            opened.shape = Some(shape);
            opened.shape_known = true;
        }
    }
}

macro_rules! tree_common {
    ($ty:ident) => {
        impl $ty {
            fn with<R>(&self, py: Python<'_>, f: impl FnOnce(&mut Opened) -> Result<R> + Send) -> PyResult<R>
            where
                R: Send,
            {
                py.detach(|| self.tree.state.with(f)).map_err(Into::into)
            }
        }
    };
}

// -------------------------------------------------------------- SortedSet

/// A versioned sorted set: every version stays readable.
///
/// Each update (:meth:`insert`, :meth:`delete`) returns the new version
/// number; reads take ``at=version`` (default: the latest). Keys are int,
/// str, bytes or tuples of these, all of one type per set, and iterate in
/// Python's order. Stored only as appends to logs ``pds.<name>.*`` of its
/// namespace (the `PEDaLS` node-copy method), so it survives crashes.
#[pyclass(frozen, module = "varve")]
pub struct SortedSet {
    tree: Tree,
}

tree_common!(SortedSet);

fn set_of(opened: &mut Opened) -> &mut varve_pds::SortedSet<Raw> {
    match &mut opened.kind {
        Kind::Set(s) => s,
        _ => unreachable_kind(),
    }
}

impl SortedSet {
    pub(crate) fn open(
        py: Python<'_>,
        ns: &Arc<NsState>,
        name: &str,
        extra: u32,
        keep: Option<u64>,
        tree: &str,
    ) -> PyResult<SortedSet> {
        let structure = tree_kind(tree)?;
        let state = open_state(py, ns, name, "sorted set", (extra, keep, structure), |h, o| {
            Ok(Kind::Set(varve_pds::SortedSet::open_as(h, name, structure, o)?))
        })?;
        Ok(SortedSet { tree: Tree { state } })
    }
}

#[pymethods]
impl SortedSet {
    /// The structure's name.
    #[getter]
    fn name(&self) -> &str {
        &self.tree.state.name
    }

    /// Insert `key`; returns the new version (the current one if `key` was
    /// already present: nothing is written then).
    fn insert(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Version> {
        let raw = self.tree.key_checked(py, key)?;
        let shape = key::shape_of(&raw.0);
        self.with(py, |o| {
            let v = set_of(o).insert(&raw)?;
            Tree::after_update(o, shape, false);
            Ok(v)
        })
    }

    /// Delete `key`; returns the new version (the current one if absent).
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Version> {
        let raw = Raw(key::encode(key, Role::Key)?);
        self.with(py, |o| {
            let v = set_of(o).delete(&raw)?;
            Tree::after_update(o, String::new(), true);
            Ok(v)
        })
    }

    /// Whether `key` is in version `at` (default: the latest).
    #[pyo3(signature = (key, at = None))]
    fn contains(&self, py: Python<'_>, key: &Bound<'_, PyAny>, at: Option<Version>) -> PyResult<bool> {
        let raw = Raw(key::encode(key, Role::Key)?);
        self.with(py, |o| Ok(set_of(o).contains(&raw, at).or_else(latest_empty(at, false))?))
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        if key::encode(key, Role::Key).is_err() {
            return Ok(false);
        }
        self.contains(py, key, None)
    }

    /// The keys of version `at`, in order, as a list.
    #[pyo3(signature = (at = None))]
    fn to_list<'py>(&self, py: Python<'py>, at: Option<Version>) -> PyResult<Bound<'py, PyList>> {
        let keys = self.with(py, |o| {
            Ok(set_of(o).iter(at).map(Iterator::collect::<Vec<_>>).or_else(latest_empty(at, Vec::new()))?)
        })?;
        py_list(py, keys)
    }

    /// Keys of version `at` with ``start <= key < stop`` (either bound may be None).
    #[pyo3(signature = (start = None, stop = None, at = None))]
    fn range<'py>(
        &self,
        py: Python<'py>,
        start: Option<Bound<'py, PyAny>>,
        stop: Option<Bound<'py, PyAny>>,
        at: Option<Version>,
    ) -> PyResult<Bound<'py, PyList>> {
        let lo = start.map(|k| self.tree.key_checked(py, &k)).transpose()?;
        let hi = stop.map(|k| self.tree.key_checked(py, &k)).transpose()?;
        let keys = self.with(py, |o| {
            let r = match half_open(lo, hi) {
                None => Ok(Vec::new()),
                Some(bounds) => set_of(o).range(bounds, at).map(Iterator::collect),
            };
            Ok(r.or_else(latest_empty(at, Vec::new()))?)
        })?;
        py_list(py, keys)
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.to_list(py, None)?.try_iter().map(Bound::into_any)
    }

    /// The smallest key of version `at`, None if empty.
    #[pyo3(signature = (at = None))]
    fn first<'py>(&self, py: Python<'py>, at: Option<Version>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let k = self.with(py, |o| Ok(set_of(o).first(at).or_else(latest_empty(at, None))?))?;
        k.map(|k| key::decode(py, &k.0)).transpose()
    }

    /// The largest key of version `at`, None if empty.
    #[pyo3(signature = (at = None))]
    fn last<'py>(&self, py: Python<'py>, at: Option<Version>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let k = self.with(py, |o| Ok(set_of(o).last(at).or_else(latest_empty(at, None))?))?;
        k.map(|k| key::decode(py, &k.0)).transpose()
    }

    /// How many keys version `at` holds (walks the version: O(n)).
    #[pyo3(signature = (at = None))]
    fn len(&self, py: Python<'_>, at: Option<Version>) -> PyResult<usize> {
        self.with(py, |o| Ok(set_of(o).len(at).or_else(latest_empty(at, 0))?))
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        self.len(py, None)
    }

    /// The latest version (0 before the first update).
    #[getter]
    fn latest(&self, py: Python<'_>) -> PyResult<Version> {
        self.with(py, |o| Ok(set_of(o).latest()?))
    }

    /// Every readable version, as ``range(1, latest + 1)``.
    fn versions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let latest = self.latest(py)?;
        versions_range(py, latest)
    }

    /// Keys of version `at` in preorder (the tree's shape, root first).
    #[pyo3(signature = (at = None))]
    fn preorder<'py>(&self, py: Python<'py>, at: Option<Version>) -> PyResult<Bound<'py, PyList>> {
        let keys = self.with(py, |o| Ok(set_of(o).preorder(at).or_else(latest_empty(at, Vec::new()))?))?;
        py_list(py, keys)
    }

    /// What changed from version `v1` to `v2`: ``(added, removed)`` key lists.
    fn diff<'py>(&self, py: Python<'py>, v1: Version, v2: Version) -> PyResult<Bound<'py, PyTuple>> {
        let (added, removed) = self.with(py, |o| Ok(set_of(o).diff(v1, v2)?))?;
        PyTuple::new(py, [py_list(py, added)?, py_list(py, removed)?])
    }

    fn __repr__(&self) -> String {
        format!("<varve.SortedSet {:?}>", self.tree.state.name)
    }
}

// -------------------------------------------------------------- SortedMap

/// A versioned sorted map: every version stays readable.
///
/// :meth:`insert` and :meth:`delete` return the new version; reads take
/// ``at=version``. Keys as for :class:`SortedSet` (one type per map);
/// values are int, str, bytes, float, bool, None or tuples of these.
#[pyclass(frozen, module = "varve")]
pub struct SortedMap {
    tree: Tree,
}

tree_common!(SortedMap);

fn map_of(opened: &mut Opened) -> &mut varve_pds::SortedMap<Raw, Raw> {
    match &mut opened.kind {
        Kind::Map(m) => m,
        _ => unreachable_kind(),
    }
}

fn pairs(py: Python<'_>, items: Vec<(Raw, Raw)>) -> PyResult<Bound<'_, PyList>> {
    let objs = items
        .into_iter()
        .map(|(k, v)| PyTuple::new(py, [key::decode(py, &k.0)?, key::decode(py, &v.0)?]))
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, objs)
}

impl SortedMap {
    pub(crate) fn open(
        py: Python<'_>,
        ns: &Arc<NsState>,
        name: &str,
        extra: u32,
        keep: Option<u64>,
        tree: &str,
    ) -> PyResult<SortedMap> {
        let structure = tree_kind(tree)?;
        let state = open_state(py, ns, name, "sorted map", (extra, keep, structure), |h, o| {
            Ok(Kind::Map(varve_pds::SortedMap::open_as(h, name, structure, o)?))
        })?;
        Ok(SortedMap { tree: Tree { state } })
    }

    fn items_at(&self, py: Python<'_>, at: Option<Version>) -> PyResult<Vec<(Raw, Raw)>> {
        self.with(py, |o| Ok(map_of(o).iter(at).map(Iterator::collect).or_else(latest_empty(at, Vec::new()))?))
    }
}

#[pymethods]
impl SortedMap {
    /// The structure's name.
    #[getter]
    fn name(&self) -> &str {
        &self.tree.state.name
    }

    /// Set `key` to `value`; returns the new version (the current one if
    /// `key` already had this value).
    fn insert(&self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<Version> {
        let raw = self.tree.key_checked(py, key)?;
        let value = Raw(key::encode(value, Role::Value)?);
        let shape = key::shape_of(&raw.0);
        self.with(py, |o| {
            let v = map_of(o).insert(&raw, &value)?;
            Tree::after_update(o, shape, false);
            Ok(v)
        })
    }

    /// Delete `key`; returns the new version (the current one if absent).
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Version> {
        let raw = Raw(key::encode(key, Role::Key)?);
        self.with(py, |o| {
            let v = map_of(o).delete(&raw)?;
            Tree::after_update(o, String::new(), true);
            Ok(v)
        })
    }

    /// The value of `key` in version `at`, or `default`.
    #[pyo3(signature = (key, default = None, at = None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
        at: Option<Version>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let raw = Raw(key::encode(key, Role::Key)?);
        let v = self.with(py, |o| Ok(map_of(o).get(&raw, at).or_else(latest_empty(at, None))?))?;
        match v {
            Some(v) => key::decode(py, &v.0).map(Some),
            None => Ok(default),
        }
    }

    fn __getitem__<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let raw = Raw(key::encode(key, Role::Key)?);
        let v = self.with(py, |o| Ok(map_of(o).get(&raw, None).or_else(latest_empty(None, None))?))?;
        match v {
            Some(v) => key::decode(py, &v.0),
            None => Err(PyKeyError::new_err(key.clone().unbind())),
        }
    }

    /// Whether `key` is in version `at`.
    #[pyo3(signature = (key, at = None))]
    fn contains(&self, py: Python<'_>, key: &Bound<'_, PyAny>, at: Option<Version>) -> PyResult<bool> {
        let raw = Raw(key::encode(key, Role::Key)?);
        self.with(py, |o| Ok(map_of(o).contains(&raw, at).or_else(latest_empty(at, false))?))
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        if key::encode(key, Role::Key).is_err() {
            return Ok(false);
        }
        self.contains(py, key, None)
    }

    /// ``(key, value)`` pairs of version `at`, in key order.
    #[pyo3(signature = (at = None))]
    fn items<'py>(&self, py: Python<'py>, at: Option<Version>) -> PyResult<Bound<'py, PyList>> {
        let items = self.items_at(py, at)?;
        pairs(py, items)
    }

    /// Keys of version `at`, in order.
    #[pyo3(signature = (at = None))]
    fn keys<'py>(&self, py: Python<'py>, at: Option<Version>) -> PyResult<Bound<'py, PyList>> {
        let items = self.items_at(py, at)?;
        py_list(py, items.into_iter().map(|(k, _)| k))
    }

    /// Values of version `at`, in key order.
    #[pyo3(signature = (at = None))]
    fn values<'py>(&self, py: Python<'py>, at: Option<Version>) -> PyResult<Bound<'py, PyList>> {
        let items = self.items_at(py, at)?;
        py_list(py, items.into_iter().map(|(_, v)| v))
    }

    /// ``(key, value)`` pairs of version `at` with ``start <= key < stop``.
    #[pyo3(signature = (start = None, stop = None, at = None))]
    fn range<'py>(
        &self,
        py: Python<'py>,
        start: Option<Bound<'py, PyAny>>,
        stop: Option<Bound<'py, PyAny>>,
        at: Option<Version>,
    ) -> PyResult<Bound<'py, PyList>> {
        let lo = start.map(|k| self.tree.key_checked(py, &k)).transpose()?;
        let hi = stop.map(|k| self.tree.key_checked(py, &k)).transpose()?;
        let items = self.with(py, |o| {
            let r = match half_open(lo, hi) {
                None => Ok(Vec::new()),
                Some(bounds) => map_of(o).range(bounds, at).map(Iterator::collect),
            };
            Ok(r.or_else(latest_empty(at, Vec::new()))?)
        })?;
        pairs(py, items)
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.keys(py, None)?.try_iter().map(Bound::into_any)
    }

    /// The ``(key, value)`` with the smallest key in version `at`, or None.
    #[pyo3(signature = (at = None))]
    fn first<'py>(&self, py: Python<'py>, at: Option<Version>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let kv = self.with(py, |o| Ok(map_of(o).first(at).or_else(latest_empty(at, None))?))?;
        kv.map(|(k, v)| PyTuple::new(py, [key::decode(py, &k.0)?, key::decode(py, &v.0)?])).transpose()
    }

    /// The ``(key, value)`` with the largest key in version `at`, or None.
    #[pyo3(signature = (at = None))]
    fn last<'py>(&self, py: Python<'py>, at: Option<Version>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let kv = self.with(py, |o| Ok(map_of(o).last(at).or_else(latest_empty(at, None))?))?;
        kv.map(|(k, v)| PyTuple::new(py, [key::decode(py, &k.0)?, key::decode(py, &v.0)?])).transpose()
    }

    /// How many keys version `at` holds (O(n)).
    #[pyo3(signature = (at = None))]
    fn len(&self, py: Python<'_>, at: Option<Version>) -> PyResult<usize> {
        self.with(py, |o| Ok(map_of(o).len(at).or_else(latest_empty(at, 0))?))
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        self.len(py, None)
    }

    /// The latest version (0 before the first update).
    #[getter]
    fn latest(&self, py: Python<'_>) -> PyResult<Version> {
        self.with(py, |o| Ok(map_of(o).latest()?))
    }

    /// Every readable version, as ``range(1, latest + 1)``.
    fn versions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let latest = self.latest(py)?;
        versions_range(py, latest)
    }

    /// What changed from version `v1` to `v2`: ``(added, removed, changed)``
    /// where added and removed hold ``(key, value)`` pairs and changed holds
    /// ``(key, old_value, new_value)``.
    fn diff<'py>(&self, py: Python<'py>, v1: Version, v2: Version) -> PyResult<Bound<'py, PyTuple>> {
        let diff = self.with(py, |o| Ok(map_of(o).diff(v1, v2)?))?;
        let changed = diff
            .changed
            .into_iter()
            .map(|(k, a, b)| PyTuple::new(py, [key::decode(py, &k.0)?, key::decode(py, &a.0)?, key::decode(py, &b.0)?]))
            .collect::<PyResult<Vec<_>>>()?;
        PyTuple::new(py, [pairs(py, diff.added)?, pairs(py, diff.removed)?, PyList::new(py, changed)?])
    }

    fn __repr__(&self) -> String {
        format!("<varve.SortedMap {:?}>", self.tree.state.name)
    }
}

// ------------------------------------------------------------------- List

/// A versioned list: every version stays readable.
///
/// Updates return the new version; reads take ``at=version``. Items are
/// int, str, bytes, float, bool, None or tuples of these; equal items are
/// items with equal encodings (so ``1`` and ``1.0`` differ).
#[pyclass(frozen, module = "varve")]
pub struct List {
    state: Arc<StructState>,
}

fn list_of(opened: &mut Opened) -> &mut varve_pds::VersionedList<Raw> {
    match &mut opened.kind {
        Kind::List(l) => l,
        _ => unreachable_kind(),
    }
}

impl List {
    pub(crate) fn open(py: Python<'_>, ns: &Arc<NsState>, name: &str, extra: u32, keep: Option<u64>) -> PyResult<List> {
        let state = open_state(py, ns, name, "list", (extra, keep, Structure::List), |h, o| {
            Ok(Kind::List(varve_pds::VersionedList::open(h, name, o)?))
        })?;
        Ok(List { state })
    }

    fn with<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut varve_pds::VersionedList<Raw>) -> Result<R> + Send,
    ) -> PyResult<R> {
        py.detach(|| self.state.with(|o| f(list_of(o)))).map_err(Into::into)
    }
}

#[pymethods]
impl List {
    /// The structure's name.
    #[getter]
    fn name(&self) -> &str {
        &self.state.name
    }

    /// Append `value` at the end; returns the new version.
    fn push_back(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Version> {
        let raw = Raw(key::encode(value, Role::Value)?);
        self.with(py, |l| Ok(l.push_back(&raw)?))
    }

    /// Insert `value` at the head; returns the new version.
    fn push_front(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Version> {
        let raw = Raw(key::encode(value, Role::Value)?);
        self.with(py, |l| Ok(l.push_front(&raw)?))
    }

    /// Insert `value` after the item at `position` (0 is the head);
    /// :class:`varve.PositionOutOfRange` (an `IndexError`) if there is none.
    fn insert_after(&self, py: Python<'_>, position: usize, value: &Bound<'_, PyAny>) -> PyResult<Version> {
        let raw = Raw(key::encode(value, Role::Value)?);
        self.with(py, |l| Ok(l.insert_after(position, &raw)?))
    }

    /// Remove the first item equal to `value` (no-op if absent); returns the version.
    fn remove(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Version> {
        let raw = Raw(key::encode(value, Role::Value)?);
        self.with(py, |l| Ok(l.remove(&raw)?))
    }

    /// Remove the item at `position`; :class:`varve.PositionOutOfRange` if none.
    fn remove_at(&self, py: Python<'_>, position: usize) -> PyResult<Version> {
        self.with(py, |l| Ok(l.remove_at(position)?))
    }

    /// The items of version `at`, head first.
    #[pyo3(signature = (at = None))]
    fn to_list<'py>(&self, py: Python<'py>, at: Option<Version>) -> PyResult<Bound<'py, PyList>> {
        let items = self
            .with(py, |l| Ok(l.iter(at).map(Iterator::collect::<Vec<_>>).or_else(latest_empty(at, Vec::new()))?))?;
        py_list(py, items)
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.to_list(py, None)?.try_iter().map(Bound::into_any)
    }

    /// The position of the first item equal to `value` in version `at`, or None.
    #[pyo3(signature = (value, at = None))]
    fn find(&self, py: Python<'_>, value: &Bound<'_, PyAny>, at: Option<Version>) -> PyResult<Option<usize>> {
        let raw = Raw(key::encode(value, Role::Value)?);
        self.with(py, |l| Ok(l.find(&raw, at).or_else(latest_empty(at, None))?))
    }

    /// The item at `position` in version `at`, or None.
    #[pyo3(signature = (position, at = None))]
    fn get<'py>(&self, py: Python<'py>, position: usize, at: Option<Version>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let item = self.with(py, |l| Ok(l.get(position, at).or_else(latest_empty(at, None))?))?;
        item.map(|r| key::decode(py, &r.0)).transpose()
    }

    fn __getitem__<'py>(&self, py: Python<'py>, position: isize) -> PyResult<Bound<'py, PyAny>> {
        let position = if position < 0 {
            let len = self.len(py, None)?;
            usize::try_from(position + isize::try_from(len).unwrap_or(isize::MAX))
                .map_err(|_| PyIndexError::new_err("list index out of range"))?
        } else {
            position.unsigned_abs()
        };
        self.get(py, position, None)?.ok_or_else(|| PyIndexError::new_err("list index out of range"))
    }

    /// The last item of version `at`, or None.
    #[pyo3(signature = (at = None))]
    fn last<'py>(&self, py: Python<'py>, at: Option<Version>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let item = self.with(py, |l| Ok(l.last(at).or_else(latest_empty(at, None))?))?;
        item.map(|r| key::decode(py, &r.0)).transpose()
    }

    /// How many items version `at` holds (O(n)).
    #[pyo3(signature = (at = None))]
    fn len(&self, py: Python<'_>, at: Option<Version>) -> PyResult<usize> {
        self.with(py, |l| Ok(l.len(at).or_else(latest_empty(at, 0))?))
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        self.len(py, None)
    }

    /// The latest version (0 before the first update).
    #[getter]
    fn latest(&self, py: Python<'_>) -> PyResult<Version> {
        self.with(py, |l| Ok(l.latest()?))
    }

    /// Every readable version, as ``range(1, latest + 1)``.
    fn versions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let latest = self.latest(py)?;
        versions_range(py, latest)
    }

    /// Items added and removed from version `v1` to `v2`, as multisets:
    /// ``(added, removed)``.
    fn diff<'py>(&self, py: Python<'py>, v1: Version, v2: Version) -> PyResult<Bound<'py, PyTuple>> {
        let (added, removed) = self.with(py, |l| Ok(l.diff(v1, v2)?))?;
        PyTuple::new(py, [py_list(py, added)?, py_list(py, removed)?])
    }

    fn __repr__(&self) -> String {
        format!("<varve.List {:?}>", self.state.name)
    }
}
