//! `Schemas`, `TypedLog`, `TypedScan`: typed records and their schema
//! versions (`varve-schema`) from Python, records as dicts.
//!
//! `ns.schemas()` is the namespace's registry (one [`SchemaState`] per
//! namespace, shared by every `Schemas` object of it and emptied when the
//! store closes, like a structure's state). INITs and migrations are Python
//! functions `fn(old: dict) -> dict`, called with the GIL taken back from
//! the Rust call that needs them.
//!
//! **Values.** `bool`, `int`, `float`, `str` and `bytes` (or `bytearray`)
//! become [`Value`]s: a non-negative int is `UInt`, a negative one `Int`;
//! the Rust side coerces each to its field's type and refuses what does not
//! fit (`varve.SchemaError`). Read back, each is the Python type of its
//! field's type (`bytes` for a `bytes` field). A `None` value is a field
//! left unset (its default applies).
//!
//! **A function's exception.** A Python INIT or migration that raises fails
//! on that record: its `TypeName: message` is the reason of the Rust
//! `InitFailed`/`MigrationFailed`, which names the record (`log@seq`), and
//! the exception itself becomes that error's `__cause__` ([`RAISED`]). An
//! exception that is not an `Exception` (`KeyboardInterrupt`, `SystemExit`)
//! is raised as itself.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use pyo3::exceptions::{PyException, PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyString, PyTuple};
use pyo3::IntoPyObjectExt;
use serde_json::json;
use varve_log::{LogError, Seq, SeqRange};
use varve_schema::{
    Compat, Field, FieldType, Fields, Location, Model, Record, Registered, SchemaError, Schemas as RustSchemas, Spec,
    Subject, Value, FIELD_TYPES,
};

use crate::error::{invalid_argument, Error, Result};
use crate::log::{lock, NsState};
use crate::object::json_to_py;
use crate::records::SCAN_BATCH_RECORDS;

// ------------------------------------------------------------------ state

/// The registry of one namespace, shared by its `Schemas` and `TypedLog`
/// objects; `None` once the store is closed (its namespace handle is
/// dropped with it, so the writer lock is released).
pub(crate) struct SchemaState {
    namespace: String,
    schemas: RwLock<Option<Arc<RustSchemas>>>,
}

impl SchemaState {
    /// The namespace's registry, read from its `_schema` log on first use.
    fn open(ns: &NsState) -> Result<Arc<SchemaState>> {
        // Held while the handle is taken, so a concurrent close (which
        // empties this slot first) cannot miss the new state.
        let mut slot = lock(&ns.schemas);
        if let Some(state) = slot.as_ref() {
            return Ok(Arc::clone(state));
        }
        let schemas = RustSchemas::open(ns.handle()?)?;
        let state = Arc::new(SchemaState { namespace: ns.name.clone(), schemas: RwLock::new(Some(schemas)) });
        *slot = Some(Arc::clone(&state));
        Ok(state)
    }

    /// Drop the registry (its store is closing): later calls raise `Closed`.
    pub(crate) fn close(&self) {
        self.schemas.write().unwrap_or_else(PoisonError::into_inner).take();
    }

    /// Run `f` on the open registry; `Closed` once the store is closed.
    fn with<R>(&self, f: impl FnOnce(&Arc<RustSchemas>) -> Result<R>) -> Result<R> {
        let guard = self.schemas.read().unwrap_or_else(PoisonError::into_inner);
        let schemas =
            guard.as_ref().ok_or_else(|| Error::Closed(format!("the schemas of namespace {:?}", self.namespace)))?;
        f(schemas)
    }

    /// Run `f` on the registry with the GIL released; an error becomes its
    /// exception (with a Python function's exception as its cause).
    fn call<R: Send>(&self, py: Python<'_>, f: impl FnOnce(&Arc<RustSchemas>) -> Result<R> + Send) -> PyResult<R> {
        take_raised(); // one from an earlier call is no cause of this one's
        py.detach(|| self.with(f)).map_err(|e| raise(py, e))
    }
}

thread_local! {
    /// The last exception a Python INIT or migration raised on this thread,
    /// with the text it became. Rust calls the function on the thread that
    /// called into Rust (`Python::detach` does not change threads), so the
    /// error that thread gets back is the one this exception caused when
    /// the texts agree ([`raise`]).
    static RAISED: RefCell<Option<Raised>> = const { RefCell::new(None) };
}

/// A Python function's exception and the text the Rust error carries for it.
type Raised = (String, PyErr);

/// `error` as a Python exception: an `InitFailed` or `MigrationFailed` that
/// a Python function's exception caused gets it as `__cause__`; an
/// exception that is not an `Exception` (Ctrl-C's `KeyboardInterrupt`) is
/// raised as itself.
fn raise(py: Python<'_>, error: Error) -> PyErr {
    raise_with(py, error, take_raised())
}

/// The exception a Python function raised last on this thread, if any.
fn take_raised() -> Option<Raised> {
    RAISED.with(|raised| raised.borrow_mut().take())
}

/// [`raise`], with the Python function's exception taken earlier.
fn raise_with(py: Python<'_>, error: Error, raised: Option<Raised>) -> PyErr {
    let Error::Schema(SchemaError::InitFailed { reason, .. } | SchemaError::MigrationFailed { reason, .. }) = &error
    else {
        return error.into();
    };
    match raised {
        Some((text, exception)) if text == *reason => {
            if !exception.is_instance_of::<PyException>(py) {
                return exception;
            }
            let err = PyErr::from(error);
            err.set_cause(py, Some(exception));
            err
        }
        _ => error.into(),
    }
}

// ----------------------------------------------------------------- values

/// A field value from Python (None: not set).
fn value_from_py(value: &Bound<'_, PyAny>) -> PyResult<Option<Value>> {
    if value.is_none() {
        return Ok(None);
    }
    // bool before int: `True` is an int too.
    if let Ok(b) = value.cast::<PyBool>() {
        return Ok(Some(Value::Bool(b.is_true())));
    }
    if value.is_instance_of::<PyInt>() {
        if let Ok(u) = value.extract::<u64>() {
            return Ok(Some(Value::UInt(u)));
        }
        if let Ok(i) = value.extract::<i64>() {
            return Ok(Some(Value::Int(i)));
        }
        return Err(PyOverflowError::new_err(format!("{value} is out of a field's range (-2**63 to 2**64-1)")));
    }
    if value.is_instance_of::<PyFloat>() {
        return Ok(Some(Value::Float(value.extract()?)));
    }
    if value.is_instance_of::<PyString>() {
        return Ok(Some(Value::Text(value.extract()?)));
    }
    if let Ok(b) = value.cast::<PyBytes>() {
        return Ok(Some(Value::Bytes(b.as_bytes().to_vec())));
    }
    if let Ok(b) = value.cast::<PyByteArray>() {
        return Ok(Some(Value::Bytes(b.to_vec())));
    }
    Err(PyTypeError::new_err(format!(
        "a field's value is a bool, int, float, str, bytes or None, not {}",
        value.get_type().name()?
    )))
}

fn value_to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    match value {
        Value::Bool(b) => b.into_bound_py_any(py),
        Value::Int(i) => i.into_bound_py_any(py),
        Value::UInt(u) => u.into_bound_py_any(py),
        Value::Float(x) => x.into_bound_py_any(py),
        Value::Text(s) => s.into_bound_py_any(py),
        Value::Bytes(b) => Ok(PyBytes::new(py, b).into_any()),
    }
}

/// A record's fields as a dict (defaults filled in; a field without a value
/// or a default is left out).
fn record_to_py<'py>(py: Python<'py>, record: &Record) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for field in &record.version().fields {
        if let Some(value) = record.get(&field.name) {
            dict.set_item(&field.name, value_to_py(py, &value)?)?;
        }
    }
    Ok(dict)
}

/// The `(name, value)` pairs of a mapping of field names to values.
fn fields_from_py(mapping: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<(String, Option<Value>)>> {
    let items = if let Ok(dict) = mapping.cast::<PyDict>() {
        dict.items().into_any()
    } else if mapping.hasattr("items")? {
        mapping.call_method0("items")?
    } else {
        return Err(PyTypeError::new_err(format!(
            "{what} is a dict of field name to value, not {}",
            mapping.get_type().name()?
        )));
    };
    let mut out = Vec::new();
    for item in items.try_iter()? {
        let (name, value): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item?.extract()?;
        let name: String = name.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "{what}: field names are str, not {}",
                name.get_type().name().map_or_else(|_| "?".into(), |n| n.to_string())
            ))
        })?;
        let value = value_from_py(&value).map_err(|e| {
            let py = mapping.py();
            PyErr::from_type(e.get_type(py), format!("{what}, field '{name}': {}", e.value(py)))
        })?;
        out.push((name, value));
    }
    Ok(out)
}

// ------------------------------------------------------------- functions

/// How a Python exception reads as the reason of a Rust error.
fn exception_text(py: Python<'_>, error: &PyErr) -> String {
    let name = error.get_type(py).name().map_or_else(|_| "Exception".to_owned(), |n| n.to_string());
    let message = error.value(py).str().map_or_else(|_| String::new(), |s| s.to_string());
    if message.is_empty() {
        name
    } else {
        format!("{name}: {message}")
    }
}

/// A Python function `f(old: dict) -> dict` as an INIT or a migration.
/// `kind` names it in messages ("an INIT", "a migration").
fn python_function(
    kind: &'static str,
    function: Py<PyAny>,
) -> impl Fn(&Record) -> std::result::Result<Fields, String> + Send + Sync + 'static {
    move |old| {
        Python::attach(|py| {
            let computed = (|| -> PyResult<Fields> {
                let returned = function.bind(py).call1((record_to_py(py, old)?,))?;
                let fields = fields_from_py(&returned, &format!("what {kind} returns"))?;
                Ok(fields.into_iter().filter_map(|(name, value)| value.map(|v| (name.into(), v))).collect())
            })();
            computed.map_err(|error| {
                let text = exception_text(py, &error);
                RAISED.with(|raised| *raised.borrow_mut() = Some((text.clone(), error)));
                text
            })
        })
    }
}

// ------------------------------------------------------------------ specs

fn field_type(name: &str, field: &str) -> Result<FieldType> {
    FieldType::parse(name).ok_or_else(|| {
        let names: Vec<&str> = FIELD_TYPES.iter().map(|t| t.name()).collect();
        invalid_argument(format!("field '{field}': type {name:?} is not one of {}", names.join(", ")))
    })
}

/// One field of a spec: a `varve.Field` (or any object with its
/// attributes) or a dict with the same keys.
fn field_from_py(item: &Bound<'_, PyAny>) -> PyResult<Field> {
    let dict = item.cast::<PyDict>().ok();
    if let Some(dict) = &dict {
        for key in dict.keys() {
            let key: String = key.extract()?;
            if !["number", "name", "type", "default"].contains(&key.as_str()) {
                return Err(invalid_argument(format!(
                    "a field's keys are number, name, type and default, not {key:?}"
                ))
                .into());
            }
        }
    }
    let get = |key: &str| -> PyResult<Option<Bound<'_, PyAny>>> {
        match &dict {
            Some(dict) => dict.get_item(key),
            None if item.hasattr(key)? => item.getattr(key).map(Some),
            None => Ok(None),
        }
    };
    let required = |key: &str| -> PyResult<Bound<'_, PyAny>> {
        get(key)?.ok_or_else(|| {
            let shown = item.repr().map_or_else(|_| "it".to_owned(), |r| r.to_string());
            PyTypeError::new_err(format!(
                "a field is a varve.Field(number, name, type, default=None) or a dict with those keys; {shown} has no {key:?}"
            ))
        })
    };
    let number: u32 = required("number")?.extract()?;
    let name: String = required("name")?.extract()?;
    let ty: String = required("type")?.extract()?;
    let ty = field_type(&ty, &name)?;
    let mut field = Field::new(number, &name, ty);
    if let Some(default) = get("default")? {
        if let Some(value) = value_from_py(&default)? {
            // As the field's type, so a bytes default reads as bytes and a
            // str one as text; a value of another type is passed on for the
            // registry to refuse with its message.
            field = field.with_default(value.coerce(ty).unwrap_or(value).to_json());
        }
    }
    Ok(field)
}

fn spec_from_py(
    fields: &Bound<'_, PyAny>,
    model: Option<&str>,
    init: Option<String>,
    migration: Option<String>,
    compat: &str,
) -> PyResult<Spec> {
    if fields.is_instance_of::<PyString>() || fields.is_instance_of::<PyDict>() {
        return Err(PyTypeError::new_err("fields is a list of varve.Field (or of dicts)"));
    }
    let fields = fields.try_iter()?.map(|item| field_from_py(&item?)).collect::<PyResult<Vec<_>>>()?;
    let model = match model {
        None if migration.is_some() => Model::Manual,
        None | Some("automatic") => Model::Automatic,
        Some("manual") => Model::Manual,
        Some("reset") => Model::Reset,
        Some(other) => {
            return Err(invalid_argument(format!(
                "model={other:?}: use \"automatic\", \"manual\" or \"reset\" (or None: manual when a migration is \
                 given, else automatic)"
            ))
            .into())
        }
    };
    let compat = Compat::parse(compat).ok_or_else(|| {
        let names: Vec<&str> = Compat::ALL.iter().map(|c| c.name()).collect();
        invalid_argument(format!("compat={compat:?}: use one of {}", names.join(", ")))
    })?;
    Ok(Spec { fields, model, init, migration, compat })
}

/// What `register` and `upgrade_eager` return: the version's JSON with
/// `created` and `warnings`; each warning is also issued as a
/// `varve.SchemaWarning`.
fn registered_to_py<'py>(py: Python<'py>, registered: &Registered) -> PyResult<Bound<'py, PyAny>> {
    let mut json = registered.version.to_json();
    if let Some(object) = json.as_object_mut() {
        object.insert("created".into(), registered.created.into());
        object.insert("warnings".into(), registered.warnings.clone().into());
    }
    if !registered.warnings.is_empty() {
        let category = py.import("varve.errors")?.getattr("SchemaWarning")?;
        let warn = py.import("warnings")?.getattr("warn")?;
        for warning in &registered.warnings {
            warn.call1((warning, &category))?;
        }
    }
    json_to_py(py, &json)
}

// ---------------------------------------------------------------- Schemas

/// The record types of a namespace (``Namespace.schemas()``), kept in its
/// ``_schema`` log: each subject (a log name) has versions of numbered,
/// typed fields, and every record stores the id of the version it was
/// written with. A new version keeps old records readable by one of three
/// models: ``"automatic"`` (old records are read in the new shape, added
/// fields from defaults or an INIT, nothing rewritten), ``"manual"`` (a
/// migration function rewrites every record into a new generation of the
/// log: :meth:`migrate`) or ``"reset"`` (the data starts over in a new,
/// empty generation). Old generations stay readable.
#[pyclass(frozen, module = "varve")]
pub struct Schemas {
    state: Arc<SchemaState>,
}

impl Schemas {
    pub(crate) fn open(py: Python<'_>, ns: &Arc<NsState>) -> PyResult<Schemas> {
        let state = py.detach(|| SchemaState::open(ns))?;
        Ok(Schemas { state })
    }
}

#[pymethods]
impl Schemas {
    /// Register ``fields`` as ``subject``'s next version (creating the
    /// subject and its log on the first), checked against the earlier
    /// versions in ``compat`` mode; a spec equal to a registered version is
    /// that version (``created`` False), so a program may register on every
    /// start. ``model`` None means ``"manual"`` when ``migration`` is given,
    /// else ``"automatic"``. Returns the version as a dict, with ``created``
    /// and ``warnings`` (each also issued as a :class:`varve.SchemaWarning`).
    /// :class:`varve.IncompatibleSchema` names the field and rule broken.
    #[pyo3(signature = (subject, fields, *, model = None, init = None, migration = None, compat = "BACKWARD"))]
    #[expect(clippy::too_many_arguments, reason = "Python keyword arguments")]
    fn register<'py>(
        &self,
        py: Python<'py>,
        subject: &str,
        fields: &Bound<'py, PyAny>,
        model: Option<&str>,
        init: Option<String>,
        migration: Option<String>,
        compat: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let spec = spec_from_py(fields, model, init, migration, compat)?;
        let registered = self.state.call(py, |s| Ok(s.register(subject, &spec)?))?;
        registered_to_py(py, &registered)
    }

    /// The version :meth:`register` would register, as a dict (``id`` 0),
    /// without registering it; :class:`varve.IncompatibleSchema` if it
    /// would be refused.
    #[pyo3(signature = (subject, fields, *, model = None, init = None, migration = None, compat = "BACKWARD"))]
    #[expect(clippy::too_many_arguments, reason = "Python keyword arguments")]
    fn check<'py>(
        &self,
        py: Python<'py>,
        subject: &str,
        fields: &Bound<'py, PyAny>,
        model: Option<&str>,
        init: Option<String>,
        migration: Option<String>,
        compat: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let spec = spec_from_py(fields, model, init, migration, compat)?;
        let version = self.state.call(py, |s| Ok(s.check(subject, &spec)?))?;
        json_to_py(py, &version.to_json())
    }

    /// Every subject with a registered type, in name order.
    fn subjects(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.state.call(py, |s| {
            s.refresh()?;
            Ok(s.subjects())
        })
    }

    /// What the registry knows of ``subject``: a dict of ``subject``,
    /// ``versions`` (each as :meth:`register` returns it, oldest first),
    /// ``generations`` (``generation``, ``log``, ``version``,
    /// ``source_through``), the current ``generation`` and its ``log``,
    /// ``write_version`` (the version appends use) and ``pending`` (a manual
    /// version waiting for :meth:`migrate`, or None).
    fn show<'py>(&self, py: Python<'py>, subject: &str) -> PyResult<Bound<'py, PyAny>> {
        let found = self.state.call(py, |s| {
            s.refresh()?;
            Ok(s.subject(subject)?)
        })?;
        let generations: Vec<serde_json::Value> = found
            .generations
            .iter()
            .map(|g| {
                json!({"generation": g.generation, "log": g.log, "version": g.version, "source_through": g.source_through})
            })
            .collect();
        let shown = json!({
            "subject": subject,
            "versions": found.versions.iter().map(|v| v.to_json()).collect::<Vec<_>>(),
            "generations": generations,
            "generation": found.current().generation,
            "log": found.current().log,
            "write_version": found.write_version().version,
            "pending": found.pending().map(|p| p.version),
        });
        json_to_py(py, &shown)
    }

    /// Define (or replace) the INIT ``name``: ``function(old)`` gets the
    /// record in the previous version's shape (a dict) and returns a dict of
    /// the fields the version adds. It runs on the first read of an added
    /// field of each old record, and its results are never stored. If it
    /// raises, reading that field raises :class:`varve.InitFailed` (naming
    /// the record, with the exception as ``__cause__``).
    fn define_init(&self, py: Python<'_>, name: &str, function: &Bound<'_, PyAny>) -> PyResult<()> {
        let function = callable(function, "an INIT")?;
        self.state.call(py, |s| {
            s.define_init(name, python_function("an INIT", function));
            Ok(())
        })
    }

    /// Define (or replace) the migration ``name``: ``function(old)`` gets a
    /// record of the old generation (a dict) and returns a dict of every
    /// field of the new version. If it raises, :meth:`migrate` raises
    /// :class:`varve.MigrationFailed` naming the record.
    fn define_migration(&self, py: Python<'_>, name: &str, function: &Bound<'_, PyAny>) -> PyResult<()> {
        let function = callable(function, "a migration")?;
        self.state.call(py, |s| {
            s.define_migration(name, python_function("a migration", function));
            Ok(())
        })
    }

    /// The typed log of ``subject`` (a :class:`TypedLog`);
    /// :class:`varve.SchemaError` if no type is registered for it.
    fn log(&self, py: Python<'_>, subject: &str) -> PyResult<TypedLog> {
        self.state.call(py, |s| Ok(s.log(subject).map(drop)?))?;
        Ok(TypedLog { state: Arc::clone(&self.state), subject: subject.to_owned() })
    }

    /// Run ``subject``'s pending manual migration (or resume an interrupted
    /// one), appending ``batch`` records at a time, then switch writers to
    /// the new generation. ``progress(done, total)`` is called after each
    /// batch; an exception it raises (Ctrl-C too) stops the migration after
    /// that batch and is raised here: the batches appended stay, and calling
    /// ``migrate`` again resumes. Returns a dict of ``subject``,
    /// ``from_generation``, ``to_generation``, ``migrated``, ``resumed_from``
    /// and ``source_through``.
    #[pyo3(signature = (subject, progress = None, batch = 512))]
    fn migrate<'py>(
        &self,
        py: Python<'py>,
        subject: &str,
        progress: Option<&Bound<'py, PyAny>>,
        batch: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        if batch == 0 {
            return Err(invalid_argument("batch is at least 1 record").into());
        }
        let progress = progress.map(|p| callable(p, "progress")).transpose()?;
        let mut stopped: Option<PyErr> = None;
        let report = self.state.call(py, |s| {
            let mut report = |done: u64, total: u64| {
                let outcome = Python::attach(|py| -> PyResult<()> {
                    py.check_signals()?;
                    if let Some(progress) = &progress {
                        progress.bind(py).call1((done, total))?;
                    }
                    Ok(())
                });
                if let Err(error) = outcome {
                    stopped = Some(error);
                    // Leaves the migration between two batches, which it is
                    // built to resume from (`varve_schema::migrate`). No
                    // panic hook runs: this is not a panic.
                    resume_unwind(Box::new(ProgressStopped));
                }
            };
            match catch_unwind(AssertUnwindSafe(|| s.migrate_in_batches(subject, batch, &mut report))) {
                Ok(result) => Ok(Some(result?)),
                Err(payload) if payload.is::<ProgressStopped>() => Ok(None),
                Err(payload) => resume_unwind(payload),
            }
        })?;
        let Some(report) = report else {
            return Err(stopped.unwrap_or_else(|| PyTypeError::new_err("the migration's progress callback failed")));
        };
        let dict = PyDict::new(py);
        dict.set_item("subject", &report.subject)?;
        dict.set_item("from_generation", report.from_generation)?;
        dict.set_item("to_generation", report.to_generation)?;
        dict.set_item("migrated", report.migrated)?;
        dict.set_item("resumed_from", report.resumed_from)?;
        dict.set_item("source_through", report.source_through)?;
        Ok(dict)
    }

    /// Register a manual version with the write version's fields, migrated
    /// by the built-in eager copy: :meth:`migrate` then writes every record,
    /// upgraded, into a new generation. Returns what :meth:`register` does.
    fn upgrade_eager<'py>(&self, py: Python<'py>, subject: &str) -> PyResult<Bound<'py, PyAny>> {
        let registered = self.state.call(py, |s| Ok(s.upgrade_eager(subject)?))?;
        registered_to_py(py, &registered)
    }

    fn __repr__(&self) -> String {
        format!("<varve.Schemas of namespace {:?}>", self.state.namespace)
    }
}

/// The payload that unwinds a migration out of its progress callback.
struct ProgressStopped;

fn callable(function: &Bound<'_, PyAny>, what: &str) -> PyResult<Py<PyAny>> {
    if !function.is_callable() {
        return Err(PyTypeError::new_err(format!("{what} is a function, not {}", function.get_type().name()?)));
    }
    Ok(function.clone().unbind())
}

// --------------------------------------------------------------- TypedLog

/// A subject's records as dicts (:meth:`Schemas.log`): appends go to the
/// current generation in the write version; reads return every record in
/// the newest shape its generation reaches (old records upgraded on read,
/// never rewritten). ``generation=`` reads an older generation.
#[pyclass(frozen, module = "varve")]
pub struct TypedLog {
    state: Arc<SchemaState>,
    subject: String,
}

/// The generation `given`, or the subject's current one.
fn generation_or_current(schemas: &RustSchemas, subject: &str, given: Option<u32>) -> Result<u32> {
    if let Some(generation) = given {
        return Ok(generation);
    }
    schemas.refresh()?;
    Ok(schemas.subject(subject)?.current().generation)
}

#[pymethods]
impl TypedLog {
    /// The subject.
    #[getter]
    fn subject(&self) -> &str {
        &self.subject
    }

    /// The log of the current generation (``subject``, then
    /// ``subject.gen2``, … after a reset or a migration).
    #[getter]
    fn current_log(&self, py: Python<'_>) -> PyResult<String> {
        self.state.call(py, |s| {
            s.refresh()?;
            Ok(s.log(&self.subject)?.current_log()?)
        })
    }

    /// The current generation (1, 2, …).
    #[getter]
    fn generation(&self, py: Python<'_>) -> PyResult<u32> {
        self.state.call(py, |s| generation_or_current(s, &self.subject, None))
    }

    /// The newest seq of the current generation; 0 when it is empty.
    #[getter]
    fn latest(&self, py: Python<'_>) -> PyResult<u64> {
        self.state.call(py, |s| {
            s.refresh()?;
            Ok(s.log(&self.subject)?.latest()?)
        })
    }

    /// Append a record given as a dict of field name to value (every field
    /// of the write version without a default must be set); returns its seq.
    /// :class:`varve.SchemaError` if a field is unknown or a value does not
    /// fit its type.
    fn append(&self, py: Python<'_>, record: &Bound<'_, PyAny>) -> PyResult<u64> {
        let values = fields_from_py(record, "a record")?;
        self.state.call(py, |s| {
            s.refresh()?;
            let log = s.log(&self.subject)?;
            let mut record = log.record()?;
            for (name, value) in values {
                if let Some(value) = value {
                    record.set(&name, value)?;
                }
            }
            Ok(log.append(&record)?)
        })
    }

    /// The record at ``seq`` (of the current generation, or of
    /// ``generation``) as a dict, in the newest shape: fields added since it
    /// was written come from defaults and INITs (:class:`varve.InitFailed`
    /// if one fails). :class:`varve.NotFound` past the latest.
    #[pyo3(signature = (seq, generation = None))]
    fn get<'py>(&self, py: Python<'py>, seq: u64, generation: Option<u32>) -> PyResult<Bound<'py, PyDict>> {
        let record = self.state.call(py, |s| {
            let generation = generation_or_current(s, &self.subject, generation)?;
            Ok(s.log(&self.subject)?.get_in(generation, seq)?.into_record()?)
        })?;
        record_to_py(py, &record)
    }

    /// The record at ``seq`` as written: ``(version, fields)``, the number of
    /// the version it was written with and its fields in that version's
    /// shape (defaults filled in). No INIT runs.
    #[pyo3(signature = (seq, generation = None))]
    fn original<'py>(&self, py: Python<'py>, seq: u64, generation: Option<u32>) -> PyResult<Bound<'py, PyTuple>> {
        let record = self.state.call(py, |s| {
            let generation = generation_or_current(s, &self.subject, generation)?;
            Ok(s.log(&self.subject)?.get_in(generation, seq)?.original().clone())
        })?;
        (record.version().version, record_to_py(py, &record)?).into_pyobject(py)
    }

    /// Records with ``start <= seq < stop`` (of the current generation, or
    /// of ``generation``) as ``(seq, dict)`` pairs in the newest shape, read
    /// in batches of 256. `start` defaults to the earliest record kept,
    /// `stop` to one past the latest when the scan starts. A record that
    /// cannot be read (a failing INIT, lost bytes) raises once, after the
    /// records before it; iterating again goes on after it.
    #[pyo3(signature = (start = None, stop = None, generation = None))]
    fn scan(
        &self,
        py: Python<'_>,
        start: Option<u64>,
        stop: Option<u64>,
        generation: Option<u32>,
    ) -> PyResult<TypedScan> {
        let (log, earliest, latest) = self.state.call(py, |s| {
            let generation = generation_or_current(s, &self.subject, generation)?;
            let log = Subject::log_of(&self.subject, generation);
            let info = s.namespace().log_info(&log)?;
            Ok((log, info.earliest, info.latest))
        })?;
        let next = start.unwrap_or(earliest).max(1);
        let end = stop.unwrap_or(Seq::MAX).min(latest.saturating_add(1));
        Ok(TypedScan {
            state: Arc::clone(&self.state),
            log: log.into(),
            inner: Mutex::new(TypedScanState { next, stop: end, buffered: VecDeque::new() }),
        })
    }

    fn __repr__(&self) -> String {
        format!("<varve.TypedLog {:?} in namespace {:?}>", self.subject, self.state.namespace)
    }
}

// -------------------------------------------------------------- TypedScan

/// ``(seq, dict)`` pairs of a range of a typed log (from
/// :meth:`TypedLog.scan`), upgraded to the newest shape.
#[pyclass(frozen, module = "varve")]
pub struct TypedScan {
    state: Arc<SchemaState>,
    /// The generation's log, fixed when the scan was made.
    log: Arc<str>,
    inner: Mutex<TypedScanState>,
}

struct TypedScanState {
    /// The next seq to read.
    next: Seq,
    /// Where the scan ends (exclusive).
    stop: Seq,
    /// Records read ahead, or the error one of them raised with the
    /// exception that caused it (in seq order).
    buffered: VecDeque<ScanItem>,
}

/// A record read ahead by a scan, or why it could not be read.
type ScanItem = std::result::Result<(Seq, Record), (Error, Option<Raised>)>;

impl TypedScan {
    /// Read the next batch of records into `buffered`, each upgraded (or
    /// the error of the one that could not be, with the exception its
    /// Python INIT raised), then a run of lost records as one error.
    fn fill(&self, schemas: &RustSchemas) -> Result<()> {
        let mut inner = lock(&self.inner);
        let TypedScanState { next, stop, buffered } = &mut *inner;
        if !buffered.is_empty() || *next >= *stop {
            return Ok(());
        }
        let last = (*stop - 1).min(next.saturating_add(SCAN_BATCH_RECORDS - 1));
        let mut resume = last + 1;
        for record in schemas.namespace().scan(&self.log, SeqRange { first: *next, last })? {
            match record {
                Ok(record) => {
                    let location = Location::Record { log: Arc::clone(&self.log), seq: record.seq };
                    let upgraded = schemas.decode(&record.value, location).and_then(varve_schema::Stored::into_record);
                    buffered.push_back(match upgraded {
                        Ok(upgraded) => Ok((record.seq, upgraded)),
                        Err(error) => Err((Error::from(error), take_raised())),
                    });
                    resume = record.seq + 1;
                }
                Err(error) => {
                    if let LogError::Lost { last: lost_last, .. } = &error {
                        resume = lost_last.saturating_add(1); // raised once, then the scan goes on after the run
                    } else if buffered.is_empty() {
                        return Err(error.into()); // nothing read: raised now, and tried again on the next call
                    }
                    // Otherwise `resume` is the failing seq: the next call tries it again.
                    buffered.push_back(Err((error.into(), None)));
                    break;
                }
            }
        }
        *next = resume;
        Ok(())
    }
}

#[pymethods]
impl TypedScan {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        loop {
            {
                let mut inner = lock(&self.inner);
                if let Some(item) = inner.buffered.pop_front() {
                    drop(inner);
                    let (seq, record) = item.map_err(|(error, raised)| raise_with(py, error, raised))?;
                    return (seq, record_to_py(py, &record)?).into_pyobject(py).map(Some);
                }
                if inner.next >= inner.stop {
                    return Ok(None);
                }
            }
            self.state.call(py, |s| self.fill(s))?;
        }
    }

    fn __repr__(&self) -> String {
        let inner = lock(&self.inner);
        format!("<varve.TypedScan of log {:?} at seq {}>", self.log, inner.next)
    }
}
