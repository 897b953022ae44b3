//! `ObjectStore`, `Version`, `ObjectWatch`: the versioned objects of
//! `varve-object` (`UStore`) from Python, with `bytes` values.
//!
//! Wherever a version is taken, a [`Version`] or a `str` is accepted: a
//! ref name, a unique id prefix (4 or more hex characters) or a full id.
//! Every store call runs with the GIL released; a Python merge function
//! (`merge(..., with_=f)`) takes the GIL back for each call, and an
//! exception it raises reaches the caller as itself.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use varve_object::record::GrantKind;
use varve_object::{AncestryProof, Encoding, MergeFn, MergeInput, ObjectError, VersionId};

use crate::duration::seconds_or_none;
use crate::error::{invalid_argument, Error, Result};
use crate::log::{lock, NsState};
use crate::records::WATCH_POLL;

/// A version of a key: its id (64 hex characters) and its depth in the
/// key's DAG (1 for a root). Equal when the ids are.
#[pyclass(frozen, eq, hash, module = "varve", name = "Version")]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PyVersion(pub varve_object::Version);

#[pymethods]
impl PyVersion {
    /// The id, 64 lowercase hex characters.
    #[getter]
    fn id(&self) -> String {
        self.0.id.to_hex()
    }

    /// The depth: 1 for a root, one more than the deepest parent otherwise.
    #[getter]
    fn depth(&self) -> u64 {
        self.0.depth
    }

    fn __repr__(&self) -> String {
        format!("Version('{}', depth={})", self.0.id.short(12), self.0.depth)
    }
}

/// A store of versioned objects (``Namespace.objects(name)``): every key
/// owns a DAG of immutable versions whose ids (BLAKE3 of key, parents and
/// value) verify content and history. Values are ``bytes``; a version
/// argument is a :class:`Version` or a ``str`` (ref name, unique id prefix
/// of 4+ hex characters, or full id).
#[pyclass(frozen, module = "varve")]
pub struct ObjectStore {
    ns: Arc<NsState>,
    store: varve_object::ObjectStore,
}

impl ObjectStore {
    pub(crate) fn open(py: Python<'_>, ns: &Arc<NsState>, name: &str) -> PyResult<ObjectStore> {
        let store = py.detach(|| -> Result<varve_object::ObjectStore> {
            Ok(varve_object::ObjectStore::open(ns.handle()?, name)?)
        })?;
        Ok(ObjectStore { ns: Arc::clone(ns), store })
    }

    /// Run `f` on the store with the GIL released; `Closed` once the store is closed.
    fn call<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&varve_object::ObjectStore) -> Result<R> + Send,
    ) -> PyResult<R> {
        py.detach(|| {
            self.ns.handle()?;
            f(&self.store)
        })
        .map_err(Into::into)
    }
}

/// What a version argument names, read while the GIL is held.
enum VersionArg {
    Exact(VersionId),
    Text(String),
}

fn version_arg(value: &Bound<'_, PyAny>) -> PyResult<VersionArg> {
    if let Ok(v) = value.cast::<PyVersion>() {
        return Ok(VersionArg::Exact(v.get().0.id));
    }
    if let Ok(text) = value.extract::<String>() {
        return Ok(VersionArg::Text(text));
    }
    Err(PyTypeError::new_err(format!(
        "a version is a varve.Version or a str (ref name, id prefix or full id), not {}",
        value.get_type().name()?
    )))
}

/// The id `arg` names under `key`. A full id the principal may not read is
/// `Forbidden` (resolving matches only among readable versions, so it
/// would say "not found" and hide why).
fn resolve(store: &varve_object::ObjectStore, key: &str, arg: &VersionArg) -> Result<varve_object::Version> {
    match arg {
        VersionArg::Exact(id) => Ok(store.info(key, id)?.version),
        VersionArg::Text(text) => match store.resolve(key, text) {
            Err(ObjectError::VersionNotFound { .. }) if text.len() == 64 => {
                let id: VersionId = text.parse()?;
                Ok(store.info(key, &id)?.version)
            }
            other => Ok(other?),
        },
    }
}

fn versions_list<'py>(py: Python<'py>, versions: &[varve_object::Version]) -> PyResult<Bound<'py, PyList>> {
    PyList::new(py, versions.iter().map(|v| PyVersion(*v)))
}

/// A JSON value as Python objects (through the `json` module, so types match `json.loads`).
pub(crate) fn json_to_py<'py>(py: Python<'py>, value: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?.getattr("loads")?.call1((value.to_string(),))
}

fn py_to_json(value: &Bound<'_, PyAny>) -> PyResult<serde_json::Value> {
    let text: String = value.py().import("json")?.getattr("dumps")?.call1((value,))?.extract()?;
    serde_json::from_str(&text).map_err(|e| invalid_argument(format!("not JSON: {e}")).into())
}

/// A Python callable as a merge function: `f(ancestor, left, right) -> bytes`.
/// An exception it raises is kept in `raised` and re-raised as itself.
struct PyMerge {
    function: Py<PyAny>,
    raised: Mutex<Option<PyErr>>,
}

impl MergeFn for PyMerge {
    fn merge(&self, input: &MergeInput<'_>) -> varve_object::Result<Vec<u8>> {
        Python::attach(|py| {
            let ancestor = input.ancestor.map(|(_, value)| PyBytes::new(py, value));
            let args = (ancestor, PyBytes::new(py, input.left.1), PyBytes::new(py, input.right.1));
            let result = self.function.bind(py).call1(args).and_then(|value| {
                value.cast::<PyBytes>().map(|b| b.as_bytes().to_vec()).map_err(|_| {
                    PyTypeError::new_err(format!(
                        "a merge function returns bytes, not {}",
                        value.get_type().name().map_or_else(|_| "?".to_owned(), |n| n.to_string())
                    ))
                })
            });
            result.map_err(|error| {
                let reason = error.to_string();
                *lock(&self.raised) = Some(error);
                ObjectError::MergeFunction { reason }
            })
        })
    }
}

/// How a merge computes its value.
enum Merger {
    Builtin(&'static dyn MergeFn),
    Python(PyMerge),
}

fn builtin_merge(name: &str) -> Result<&'static dyn MergeFn> {
    varve_object::builtin(name).ok_or_else(|| {
        invalid_argument(format!(
            "with_={name:?}: a built-in merge is one of {}; or pass a function f(ancestor, left, right) -> bytes",
            varve_object::BUILTIN_MERGES.join(", ")
        ))
    })
}

#[pymethods]
impl ObjectStore {
    /// The store's name.
    #[getter]
    fn name(&self) -> &str {
        self.store.name()
    }

    /// The same store, read and written as ``principal``: restricted keys
    /// need the owner's grant, and new keys are owned by ``principal``.
    fn as_principal(&self, principal: &str) -> PyResult<ObjectStore> {
        let store = self.store.as_principal(principal).map_err(Error::from)?;
        Ok(ObjectStore { ns: Arc::clone(&self.ns), store })
    }

    /// Store ``value`` as a new version of ``key`` derived from ``base``
    /// (None: a new root). The same put twice stores nothing the second time.
    #[pyo3(signature = (key, value, base = None))]
    fn put(&self, py: Python<'_>, key: &str, value: &[u8], base: Option<&Bound<'_, PyAny>>) -> PyResult<PyVersion> {
        let base = base.map(version_arg).transpose()?;
        self.call(py, |s| {
            let base = base.map(|b| resolve(s, key, &b)).transpose()?;
            Ok(PyVersion(s.put(key, base.as_ref().map(|b| &b.id), value)?))
        })
    }

    /// Store the merge of ``left`` and ``right``: ``value``, or what
    /// ``with_`` computes — a built-in (``"lww"``, ``"counter"``, ``"set"``,
    /// ``"map"``, ``"lines"``) or a function ``f(ancestor, left, right) ->
    /// bytes`` given the closest common ancestor's value (None if none) and both sides'.
    #[pyo3(signature = (key, left, right, value = None, *, with_ = None))]
    fn merge(
        &self,
        py: Python<'_>,
        key: &str,
        left: &Bound<'_, PyAny>,
        right: &Bound<'_, PyAny>,
        value: Option<Vec<u8>>,
        with_: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyVersion> {
        let (left, right) = (version_arg(left)?, version_arg(right)?);
        let function: Option<Merger> = match (&value, with_) {
            (Some(_), None) => None,
            (None, Some(with)) => Some(if let Ok(name) = with.extract::<String>() {
                Merger::Builtin(builtin_merge(&name)?)
            } else if with.is_callable() {
                Merger::Python(PyMerge { function: with.clone().unbind(), raised: Mutex::new(None) })
            } else {
                return Err(PyTypeError::new_err("with_ is the name of a built-in merge or a callable"));
            }),
            _ => return Err(invalid_argument("give either value or with_ (not both)").into()),
        };
        let result = py.detach(|| -> Result<varve_object::Version> {
            self.ns.handle()?;
            let s = &self.store;
            let (l, r) = (resolve(s, key, &left)?, resolve(s, key, &right)?);
            Ok(match (&value, &function) {
                (Some(bytes), _) => s.merge(key, &l.id, &r.id, bytes)?,
                (None, Some(Merger::Builtin(f))) => s.merge_with(key, &l.id, &r.id, *f)?,
                (None, Some(Merger::Python(f))) => s.merge_with(key, &l.id, &r.id, f)?,
                (None, None) => unreachable!("checked above"),
            })
        });
        match (result, function) {
            (Ok(version), _) => Ok(PyVersion(version)),
            // The Python function raised: re-raise its exception as it is.
            (Err(Error::Object(ObjectError::MergeFunction { reason })), Some(Merger::Python(f))) => {
                Err(lock(&f.raised).take().unwrap_or_else(|| PyTypeError::new_err(reason)))
            }
            (Err(e), _) => Err(e.into()),
        }
    }

    /// The value of a version.
    fn get<'py>(&self, py: Python<'py>, key: &str, version: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
        let version = version_arg(version)?;
        let value = self.call(py, |s| Ok(s.get(key, &resolve(s, key, &version)?.id)?))?;
        Ok(PyBytes::new(py, &value))
    }

    /// What is stored about a version: a dict of ``version``, ``key``,
    /// ``parents``, ``author``, ``seq``, ``value_len``, ``encoding`` (``"raw"``,
    /// ``"compressed"`` or ``"delta"``) and ``stored_bytes``.
    fn info<'py>(&self, py: Python<'py>, key: &str, version: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
        let version = version_arg(version)?;
        let info = self.call(py, |s| Ok(s.info(key, &resolve(s, key, &version)?.id)?))?;
        let dict = PyDict::new(py);
        dict.set_item("version", PyVersion(info.version))?;
        dict.set_item("key", info.key)?;
        dict.set_item("parents", versions_list(py, &info.parents)?)?;
        dict.set_item("author", info.author)?;
        dict.set_item("seq", info.seq)?;
        dict.set_item("value_len", info.value_len)?;
        let encoding = match info.encoding {
            Encoding::Raw => "raw",
            Encoding::Compressed { .. } => "compressed",
            Encoding::Delta { .. } => "delta",
        };
        dict.set_item("encoding", encoding)?;
        dict.set_item("stored_bytes", info.stored_bytes)?;
        Ok(dict)
    }

    /// The parents of a version (none for a root, two for a merge).
    fn previous<'py>(&self, py: Python<'py>, key: &str, version: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        let version = version_arg(version)?;
        let parents = self.call(py, |s| Ok(s.previous(key, &resolve(s, key, &version)?.id)?))?;
        versions_list(py, &parents)
    }

    /// Up to ``m`` predecessors of ``version``, nearest first, in one call:
    /// stops early at a root or after a merge. With ``values=True``, a list
    /// of ``(Version, bytes)``.
    #[pyo3(signature = (key, version, m = 32, values = false))]
    fn history<'py>(
        &self,
        py: Python<'py>,
        key: &str,
        version: &Bound<'py, PyAny>,
        m: usize,
        values: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let version = version_arg(version)?;
        if !values {
            let history = self.call(py, |s| Ok(s.history(key, &resolve(s, key, &version)?.id, m)?))?;
            return versions_list(py, &history);
        }
        let history = self.call(py, |s| Ok(s.history_values(key, &resolve(s, key, &version)?.id, m)?))?;
        let items: Vec<Bound<'py, PyTuple>> = history
            .iter()
            .map(|(v, value)| {
                PyTuple::new(py, [PyVersion(*v).into_pyobject(py)?.into_any(), PyBytes::new(py, value).into_any()])
            })
            .collect::<PyResult<_>>()?;
        PyList::new(py, items)
    }

    /// The versions of ``key`` nothing derives from yet, in the order written.
    fn heads<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyList>> {
        let heads = self.call(py, |s| Ok(s.heads(key)?))?;
        versions_list(py, &heads)
    }

    /// Every version of ``key`` (that the principal may read), in the order written.
    fn versions<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyList>> {
        let versions = self.call(py, |s| Ok(s.versions(key)?))?;
        versions_list(py, &versions)
    }

    /// Every key with at least one version, in the order first written.
    fn keys(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.call(py, |s| Ok(s.keys()?))
    }

    /// The owner of ``key``: who wrote its first version ("" for the administrator).
    fn owner(&self, py: Python<'_>, key: &str) -> PyResult<String> {
        self.call(py, |s| Ok(s.owner(key)?))
    }

    /// The version a ref name, unique id prefix or full id names.
    fn resolve(&self, py: Python<'_>, key: &str, text: &str) -> PyResult<PyVersion> {
        let arg = VersionArg::Text(text.to_owned());
        self.call(py, |s| Ok(PyVersion(resolve(s, key, &arg)?)))
    }

    /// The refs of ``key``: name → ``(Version, "branch" | "tag")``.
    fn refs<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyDict>> {
        let refs = self.call(py, |s| Ok(s.refs(key)?))?;
        let dict = PyDict::new(py);
        for (name, target) in refs {
            dict.set_item(name, (PyVersion(target.version), if target.tag { "tag" } else { "branch" }))?;
        }
        Ok(dict)
    }

    /// Point branch ``name`` at ``to`` if it is at ``expected`` now (None:
    /// only if the branch does not exist); :class:`varve.RefMoved` otherwise.
    #[pyo3(signature = (key, name, to, expected = None))]
    fn set_branch(
        &self,
        py: Python<'_>,
        key: &str,
        name: &str,
        to: &Bound<'_, PyAny>,
        expected: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let to = version_arg(to)?;
        let expected = expected.map(version_arg).transpose()?;
        self.call(py, |s| {
            let to = resolve(s, key, &to)?;
            let expected = expected.map(|e| resolve(s, key, &e)).transpose()?;
            Ok(s.set_branch(key, name, expected.as_ref().map(|e| &e.id), &to.id)?)
        })
    }

    /// Create tag ``name`` at ``to``; tags never move.
    fn set_tag(&self, py: Python<'_>, key: &str, name: &str, to: &Bound<'_, PyAny>) -> PyResult<()> {
        let to = version_arg(to)?;
        self.call(py, |s| Ok(s.set_tag(key, name, &resolve(s, key, &to)?.id)?))
    }

    /// Delete ref ``name`` if it is at ``expected``.
    fn delete_ref(&self, py: Python<'_>, key: &str, name: &str, expected: &Bound<'_, PyAny>) -> PyResult<()> {
        let expected = version_arg(expected)?;
        self.call(py, |s| Ok(s.delete_ref(key, name, &resolve(s, key, &expected)?.id)?))
    }

    /// How the JSON-object value of ``second`` differs from ``first``'s: a
    /// dict of ``added`` and ``removed`` (field → value) and ``changed``
    /// (field → ``(first's, second's)``).
    fn diff<'py>(
        &self,
        py: Python<'py>,
        key: &str,
        first: &Bound<'py, PyAny>,
        second: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let (first, second) = (version_arg(first)?, version_arg(second)?);
        let diff = self.call(py, |s| {
            let (a, b) = (resolve(s, key, &first)?, resolve(s, key, &second)?);
            Ok(s.diff(key, &a.id, &b.id)?)
        })?;
        let dict = PyDict::new(py);
        let fields = |map: &std::collections::BTreeMap<String, serde_json::Value>| -> PyResult<Bound<'py, PyDict>> {
            let out = PyDict::new(py);
            for (field, value) in map {
                out.set_item(field, json_to_py(py, value)?)?;
            }
            Ok(out)
        };
        dict.set_item("added", fields(&diff.added)?)?;
        dict.set_item("removed", fields(&diff.removed)?)?;
        let changed = PyDict::new(py);
        for (field, (a, b)) in &diff.changed {
            changed.set_item(field, (json_to_py(py, a)?, json_to_py(py, b)?))?;
        }
        dict.set_item("changed", changed)?;
        Ok(dict)
    }

    /// Recompute ``version`` and all its ancestors from the stored bytes
    /// (values, parents, ids); the number of versions checked.
    /// :class:`varve.Tampered` names the first that disagrees.
    fn verify(&self, py: Python<'_>, key: &str, version: &Bound<'_, PyAny>) -> PyResult<usize> {
        let version = version_arg(version)?;
        self.call(py, |s| Ok(s.verify(key, &resolve(s, key, &version)?.id)?.versions))
    }

    /// A proof (JSON, as a dict) that ``ancestor`` is an ancestor of
    /// ``head``; :func:`varve.check_proof` checks it with only the two ids.
    fn prove<'py>(
        &self,
        py: Python<'py>,
        key: &str,
        ancestor: &Bound<'py, PyAny>,
        head: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (ancestor, head) = (version_arg(ancestor)?, version_arg(head)?);
        let proof = self.call(py, |s| {
            let (a, h) = (resolve(s, key, &ancestor)?, resolve(s, key, &head)?);
            Ok(s.prove(key, &a.id, &h.id)?)
        })?;
        json_to_py(py, &proof.to_json())
    }

    /// Make ``key`` private: from now on only its owner and the principals
    /// it grants read it. Only the owner (or the administrator) may.
    fn restrict(&self, py: Python<'_>, key: &str) -> PyResult<()> {
        self.call(py, |s| Ok(s.restrict(key)?))
    }

    /// Let ``principal`` read ``versions`` of ``key`` (and their ancestors
    /// if ``with_ancestors``), permanently. Only the owner (or the administrator) may.
    #[pyo3(signature = (key, principal, versions, with_ancestors = false))]
    fn grant(
        &self,
        py: Python<'_>,
        key: &str,
        principal: &str,
        versions: Vec<Bound<'_, PyAny>>,
        with_ancestors: bool,
    ) -> PyResult<()> {
        let versions: Vec<VersionArg> = versions.iter().map(version_arg).collect::<PyResult<_>>()?;
        self.call(py, |s| {
            let ids: Vec<VersionId> =
                versions.iter().map(|v| resolve(s, key, v).map(|v| v.id)).collect::<Result<_>>()?;
            Ok(s.grant(key, principal, &ids, with_ancestors)?)
        })
    }

    /// Every restriction and grant of ``key``, in the order issued: dicts
    /// of ``seq``, ``kind`` (``"restrict"`` or ``"grant"``), ``principal``,
    /// ``versions`` (ids), ``with_ancestors``, ``author``, ``unix_ms``.
    fn grants<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyList>> {
        let entries = self.call(py, |s| Ok(s.grants(key)?))?;
        let list = PyList::empty(py);
        for entry in entries {
            let r = entry.record;
            let dict = PyDict::new(py);
            dict.set_item("seq", entry.seq)?;
            dict.set_item(
                "kind",
                match r.kind {
                    GrantKind::Restrict => "restrict",
                    GrantKind::Grant => "grant",
                },
            )?;
            dict.set_item("principal", r.principal)?;
            dict.set_item("versions", r.versions.iter().map(VersionId::to_hex).collect::<Vec<_>>())?;
            dict.set_item("with_ancestors", r.with_ancestors)?;
            dict.set_item("author", r.author)?;
            dict.set_item("unix_ms", r.unix_ms)?;
            list.append(dict)?;
        }
        Ok(list)
    }

    /// New versions of keys starting with ``prefix``, from the versions
    /// log's seq ``from_seq`` on (1: every version ever stored), as dicts of
    /// ``seq``, ``key``, ``version``, ``parents``, ``author``.
    #[pyo3(signature = (prefix = "", from_seq = 1))]
    fn watch(&self, py: Python<'_>, prefix: &str, from_seq: u64) -> PyResult<ObjectWatch> {
        let watch = self.call(py, |s| Ok(s.watch(prefix, from_seq)?))?;
        Ok(ObjectWatch { ns: Arc::clone(&self.ns), watch: Mutex::new(watch) })
    }

    fn __repr__(&self) -> String {
        format!("<varve.ObjectStore {:?}>", self.store.name())
    }
}

/// New versions as they are stored (from :meth:`ObjectStore.watch`).
#[pyclass(frozen, module = "varve")]
pub struct ObjectWatch {
    ns: Arc<NsState>,
    watch: Mutex<varve_object::ObjectWatch>,
}

#[pymethods]
impl ObjectWatch {
    /// The next new version, waiting at most ``timeout`` seconds (None:
    /// forever); None on timeout.
    #[pyo3(signature = (timeout = None))]
    fn next<'py>(&self, py: Python<'py>, timeout: Option<f64>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let deadline = seconds_or_none("timeout", timeout)?.map(|t| Instant::now() + t);
        loop {
            let wait = deadline.map_or(WATCH_POLL, |d| d.saturating_duration_since(Instant::now()).min(WATCH_POLL));
            let next = py.detach(|| -> Result<_> {
                self.ns.handle()?;
                Ok(lock(&self.watch).next_timeout(wait)?)
            })?;
            if let Some(n) = next {
                let dict = PyDict::new(py);
                dict.set_item("seq", n.seq)?;
                dict.set_item("key", n.key)?;
                dict.set_item("version", PyVersion(n.version))?;
                dict.set_item("parents", versions_list(py, &n.parents)?)?;
                dict.set_item("author", n.author)?;
                return Ok(Some(dict));
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

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        self.next(py, None)
    }

    fn __repr__(&self) -> String {
        format!("<varve.ObjectWatch next seq {}>", lock(&self.watch).next_seq())
    }
}

/// Check an ancestry proof (a dict from :meth:`ObjectStore.prove`) against
/// ids the caller trusts; the ancestor as a :class:`Version`, or
/// :class:`varve.ProofInvalid`.
#[pyfunction]
pub fn check_proof(
    proof: &Bound<'_, PyAny>,
    key: &str,
    head: &Bound<'_, PyAny>,
    ancestor: &Bound<'_, PyAny>,
) -> PyResult<PyVersion> {
    let full = |value: &Bound<'_, PyAny>| -> PyResult<VersionId> {
        match version_arg(value)? {
            VersionArg::Exact(id) => Ok(id),
            VersionArg::Text(text) => Ok(text.parse::<VersionId>().map_err(Error::from)?),
        }
    };
    let (head, ancestor) = (full(head)?, full(ancestor)?);
    let json = py_to_json(proof)?;
    let proof = AncestryProof::from_json(&json).map_err(Error::from)?;
    Ok(PyVersion(proof.check(key, &head, &ancestor).map_err(Error::from)?))
}
