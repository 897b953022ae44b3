//! Rust errors → the exception classes of `varve/errors.py`.
//!
//! The classes are defined in Python (so that `InvalidName` can be both a
//! `VarveError` and a `ValueError`, and `VarveIOError` an `OSError`); this
//! module builds an instance with the error's message and its fields as
//! keyword arguments. The field names here and the class docs in
//! `errors.py` must agree.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyModule};
use varve_log::LogError;
use varve_part::durable::DurableError;
use varve_pds::PdsError;
use varve_repair::RepairError;
use varve_runtime::RuntimeError;
use varve_schema::SchemaError;

/// Every error a binding call can fail with before it becomes a Python exception.
#[derive(Debug)]
pub enum Error {
    Log(LogError),
    Pds(PdsError),
    /// The store (or namespace) was closed; `what` names the object used.
    Closed(String),
    /// A stored key or value does not decode.
    Corrupt(String),
    /// A PART durable map failed (`durable_map.rs`).
    Durable(DurableError),
    /// A durable map used after its `close()`: `String` is its name.
    MapClosed(String),
    Runtime(RuntimeError),
    /// A versioned-object store failed (its log errors arrive as `Error::Log`).
    Object(varve_object::ObjectError),
    /// A record type, a typed record or a migration failed (its log errors
    /// arrive as `Error::Log`).
    Schema(SchemaError),
    /// A repair could not be carried out (its log and runtime errors arrive
    /// as `Error::Log` and `Error::Runtime`).
    Repair(RepairError),
    /// A runtime (or a handler context) used in the wrong phase of its
    /// life: `state` is where it is, the message says what to do.
    State {
        state: &'static str,
        message: String,
    },
    /// A record or batch over the limits of the server at `target`: a remote
    /// store's `TooLarge`, whose limit is the server's (set where it runs),
    /// not `varve.open`'s. Fields as `LogError::TooLarge`'s.
    TooLargeForServer {
        target: String,
        what: &'static str,
        size: u64,
        limit: u64,
    },
}

impl From<RuntimeError> for Error {
    fn from(e: RuntimeError) -> Self {
        match e {
            RuntimeError::Log(e) => Error::Log(e),
            RuntimeError::Structure(e) => Error::from(e),
            other => Error::Runtime(other),
        }
    }
}

impl From<varve_object::ObjectError> for Error {
    fn from(e: varve_object::ObjectError) -> Self {
        match e {
            varve_object::ObjectError::Log(e) => Error::Log(e),
            other => Error::Object(other),
        }
    }
}

impl From<SchemaError> for Error {
    fn from(e: SchemaError) -> Self {
        match e {
            SchemaError::Log(e) => Error::Log(e),
            other => Error::Schema(other),
        }
    }
}

impl From<RepairError> for Error {
    fn from(e: RepairError) -> Self {
        match e {
            RepairError::Log(e) => Error::Log(e),
            RepairError::Runtime(e) => e.into(),
            other => Error::Repair(other),
        }
    }
}

impl From<LogError> for Error {
    fn from(e: LogError) -> Self {
        Error::Log(e)
    }
}

impl From<DurableError> for Error {
    fn from(e: DurableError) -> Self {
        match e {
            DurableError::Log(e) => Error::Log(e),
            other => Error::Durable(other),
        }
    }
}

impl From<PdsError> for Error {
    fn from(e: PdsError) -> Self {
        match e {
            PdsError::Log(e) | PdsError::RetriesExhausted { last: e, .. } => Error::Log(e),
            other => Error::Pds(other),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An argument out of its range: raised as `varve.InvalidArgument` (a
/// `ValueError`), `reason` saying what is accepted.
pub fn invalid_argument(reason: impl Into<String>) -> Error {
    Error::Log(LogError::InvalidArgument { reason: reason.into() })
}

/// What is over which limit: the message's start ("record is N bytes, over
/// the limit of L bytes") and the name of the limit (`record_bytes_max`).
/// `what` is as `varve_log`'s `check_batch` (`rules.rs`) names the limit;
/// another `what` has none of these.
fn over_limit(what: &str, size: u64, limit: u64) -> Option<(String, &'static str)> {
    let (measure, parameter) = match what {
        "record" => (format!("is {size} bytes, over the limit of {limit} bytes"), "record_bytes_max"),
        "batch" => (
            format!(
                "is {size} bytes (its records plus {} bytes each), over the limit of {limit} bytes",
                varve_log::RECORD_OVERHEAD_BYTES
            ),
            "batch_bytes_max",
        ),
        "batch (in records)" => (format!("has {size} records, over the limit of {limit}"), "batch_records_max"),
        _ => return None,
    };
    let subject = if what == "record" { "record" } else { "batch" };
    Some((format!("{subject} {measure}"), parameter))
}

/// The message of a record or batch over a limit, naming the `varve.open`
/// parameter that sets it; `None` keeps the Rust message.
fn too_large_message(what: &str, size: u64, limit: u64) -> Option<String> {
    let (over, parameter) = over_limit(what, size, limit)?;
    Some(format!("{over}: split it, or raise the limit: varve.open(..., {parameter}=N)"))
}

/// The message of a record or batch over a server's limit, naming the
/// option of `varve` that sets it where the server runs.
fn too_large_for_server_message(target: &str, what: &str, size: u64, limit: u64) -> String {
    match over_limit(what, size, limit) {
        Some((over, parameter)) => format!(
            "{over} of the server {target}: split it, or start the server with a higher limit (`varve --{} SIZE \
             serve`)",
            parameter.replace('_', "-")
        ),
        None => format!("{what} of {size} bytes is over the limit of {limit} bytes of the server {target}: split it"),
    }
}

static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

fn build(py: Python<'_>, error: Error) -> PyResult<PyErr> {
    let kwargs = PyDict::new(py);
    let message = match &error {
        Error::Log(e @ LogError::TooLarge { what, size, limit }) => {
            too_large_message(what, *size, *limit).unwrap_or_else(|| e.to_string())
        }
        Error::Log(e) => e.to_string(),
        Error::Pds(e) => e.to_string(),
        Error::Closed(what) => format!("{what} is closed: its store was closed; open the store again to go on"),
        Error::Corrupt(reason) => reason.clone(),
        Error::Durable(e) => e.to_string(),
        Error::MapClosed(name) => {
            format!("durable map {name:?} is closed: open it again with namespace.durable_map({name:?})")
        }
        Error::Runtime(e) => e.to_string(),
        Error::Object(e) => e.to_string(),
        Error::Schema(e) => e.to_string(),
        Error::Repair(e @ RepairError::NotReplayable { .. }) => {
            format!("{e} (Namespace.repair: on_not_replayable=\"run\", or \"skip\" to keep its outputs)")
        }
        Error::Repair(e) => e.to_string(),
        Error::State { message, .. } => message.clone(),
        Error::TooLargeForServer { target, what, size, limit } => {
            too_large_for_server_message(target, what, *size, *limit)
        }
    };
    let class = match error {
        Error::Closed(what) => {
            kwargs.set_item("what", what)?;
            "Closed"
        }
        Error::Corrupt(reason) => {
            kwargs.set_item("reason", reason)?;
            "Corrupt"
        }
        Error::MapClosed(name) => {
            kwargs.set_item("what", format!("durable map {name:?}"))?;
            "Closed"
        }
        Error::Durable(e) => durable_fields(e, &kwargs)?,
        Error::Log(e) => log_fields(e, &kwargs)?,
        Error::Pds(e) => pds_fields(e, &kwargs)?,
        Error::Runtime(e) => runtime_fields(e, &kwargs)?,
        Error::Object(e) => object_fields(e, &kwargs)?,
        Error::Schema(e) => schema_fields(e, &kwargs)?,
        Error::Repair(e) => repair_fields(e, &kwargs)?,
        Error::TooLargeForServer { what, size, limit, .. } => {
            kwargs.set_item("what", what)?;
            kwargs.set_item("size", size)?;
            kwargs.set_item("limit", limit)?;
            "TooLarge"
        }
        Error::State { state, .. } => {
            kwargs.set_item("state", state)?;
            if state == "stopped" {
                "Stopped"
            } else {
                "RuntimeStateError"
            }
        }
    };
    let module = ERRORS.get_or_try_init(py, || py.import("varve.errors").map(Bound::unbind))?;
    let instance = module.bind(py).getattr(class)?.call((message,), Some(&kwargs))?;
    Ok(PyErr::from_value(instance))
}

/// A versioned-object store's errors: `Forbidden` (also for a grant by
/// someone not the owner), `Tampered`, `RefMoved`, `MergeConflict`,
/// `ProofInvalid`, and the common classes for the rest.
fn object_fields(e: varve_object::ObjectError, kw: &Bound<'_, PyDict>) -> PyResult<&'static str> {
    use varve_object::ObjectError as E;
    Ok(match e {
        E::VersionNotFound { store, key, version } => {
            kw.set_item("store", store)?;
            kw.set_item("key", key)?;
            kw.set_item("version", version)?;
            "VersionNotFound"
        }
        E::Forbidden { principal, key, version, owner } => {
            kw.set_item("principal", principal)?;
            kw.set_item("key", key)?;
            kw.set_item("version", version)?;
            kw.set_item("owner", owner)?;
            "Forbidden"
        }
        E::NotOwner { principal, key, owner } => {
            kw.set_item("principal", principal)?;
            kw.set_item("key", key)?;
            kw.set_item("owner", owner)?;
            "Forbidden"
        }
        E::Tampered { key, version, reason, log, seq } => {
            kw.set_item("key", key)?;
            kw.set_item("version", version)?;
            kw.set_item("reason", reason)?;
            kw.set_item("log", log)?;
            kw.set_item("seq", seq)?;
            "Tampered"
        }
        E::Corrupt { log, seq, reason } => {
            kw.set_item("log", log)?;
            kw.set_item("seq", seq)?;
            kw.set_item("reason", reason)?;
            "Corrupt"
        }
        E::RefMoved { key, name, expected, actual } => {
            kw.set_item("key", key)?;
            kw.set_item("name", name)?;
            kw.set_item("expected", expected)?;
            kw.set_item("actual", actual)?;
            "RefMoved"
        }
        E::MergeConflict { fields } => {
            kw.set_item("fields", fields)?;
            "MergeConflict"
        }
        E::ProofInvalid { reason } => {
            kw.set_item("reason", reason)?;
            "ProofInvalid"
        }
        e @ (E::AmbiguousVersion { .. } | E::ValueType { .. } | E::MergeFunction { .. }) => {
            kw.set_item("reason", e.to_string())?;
            "InvalidArgument"
        }
        E::InvalidArgument { reason } => {
            kw.set_item("reason", reason)?;
            "InvalidArgument"
        }
        // ObjectError is non_exhaustive: a variant added later still arrives
        // as a VarveError with its message.
        _ => "VarveError",
    })
}

/// A repair's errors: `RepairError` with `kind` (the Rust variant, in
/// snake case) and the fields that apply (`errors.RepairError` declares them).
fn repair_fields(e: RepairError, kw: &Bound<'_, PyDict>) -> PyResult<&'static str> {
    use RepairError as E;
    for field in ["namespace", "handler", "record", "log"] {
        kw.set_item(field, None::<()>)?;
    }
    let kind = match e {
        E::MissingNamespace { namespace } => {
            kw.set_item("namespace", namespace)?;
            "missing_namespace"
        }
        E::MissingHandler { handler } => {
            kw.set_item("handler", handler)?;
            "missing_handler"
        }
        E::MissingValue { record } => {
            kw.set_item("record", record)?;
            "missing_value"
        }
        E::NotReplayable { handler, .. } => {
            kw.set_item("handler", handler)?;
            "not_replayable"
        }
        E::CountChanged { handler, trigger, log, .. } => {
            kw.set_item("handler", handler)?;
            kw.set_item("record", trigger)?;
            kw.set_item("log", log)?;
            "count_changed"
        }
        E::HandlerFailed { handler, trigger, .. } => {
            kw.set_item("handler", handler)?;
            kw.set_item("record", trigger)?;
            "handler_failed"
        }
        E::Interrupted { namespace, .. } => {
            kw.set_item("namespace", namespace)?;
            "interrupted"
        }
        E::BadJournal { namespace, .. } => {
            kw.set_item("namespace", namespace)?;
            "bad_journal"
        }
        E::BeyondRetention { namespace, .. } => {
            kw.set_item("namespace", namespace)?;
            "beyond_retention"
        }
        // Unsupported, and any variant added later (RepairError is
        // non_exhaustive): the message says what.
        _ => "unsupported",
    };
    kw.set_item("kind", kind)?;
    Ok("RepairError")
}

/// A record type's errors: `IncompatibleSchema` (with the field and the
/// rule), `InitFailed` and `MigrationFailed` (with the record's location),
/// and `SchemaError` with the fields that apply for the rest.
fn schema_fields(e: SchemaError, kw: &Bound<'_, PyDict>) -> PyResult<&'static str> {
    use SchemaError as E;
    if let E::Log(e) = e {
        return log_fields(e, kw);
    }
    // Every field `errors.SchemaError` declares, None unless set below (the
    // class has no defaults, so that its subclasses declare theirs not None).
    for field in ["subject", "version", "reason", "location", "init", "schema_id"] {
        kw.set_item(field, None::<()>)?;
    }
    Ok(match e {
        E::Incompatible { subject, version, against, field, rule, reason } => {
            kw.set_item("subject", subject)?;
            kw.set_item("version", version)?;
            kw.set_item("against", against)?;
            kw.set_item("field", field)?;
            kw.set_item("rule", rule)?;
            kw.set_item("reason", reason)?;
            "IncompatibleSchema"
        }
        E::InitFailed { subject, version, init, location, reason } => {
            kw.set_item("subject", subject)?;
            kw.set_item("version", version)?;
            kw.set_item("init", init)?;
            kw.set_item("location", location)?;
            kw.set_item("reason", reason)?;
            "InitFailed"
        }
        E::MigrationFailed { subject, migration, location, reason } => {
            kw.set_item("subject", subject)?;
            kw.set_item("migration", migration)?;
            kw.set_item("location", location)?;
            kw.set_item("reason", reason)?;
            "MigrationFailed"
        }
        E::Invalid { subject, reason } => {
            kw.set_item("subject", subject)?;
            kw.set_item("reason", reason)?;
            "SchemaError"
        }
        E::UnknownSubject(subject) => {
            kw.set_item("subject", subject)?;
            "SchemaError"
        }
        E::UnknownSchemaId { location, id } => {
            kw.set_item("location", location)?;
            kw.set_item("schema_id", id)?;
            "SchemaError"
        }
        E::Corrupt { location, subject, version, reason } => {
            kw.set_item("location", location)?;
            kw.set_item("subject", subject)?;
            kw.set_item("version", version)?;
            kw.set_item("reason", reason)?;
            "SchemaError"
        }
        E::BadValue { subject, version, reason } => {
            kw.set_item("subject", subject)?;
            kw.set_item("version", version)?;
            kw.set_item("reason", reason)?;
            "SchemaError"
        }
        E::MissingInit { subject, version, init } => {
            kw.set_item("subject", subject)?;
            kw.set_item("version", version)?;
            kw.set_item("init", init)?;
            "SchemaError"
        }
        E::Migration(reason) => {
            kw.set_item("reason", reason)?;
            "SchemaError"
        }
        // SchemaError is non_exhaustive: a variant added later still
        // arrives as a SchemaError with its message.
        _ => "SchemaError",
    })
}

fn log_fields(e: LogError, kw: &Bound<'_, PyDict>) -> PyResult<&'static str> {
    Ok(match e {
        LogError::NamespaceNotFound { namespace } => {
            kw.set_item("namespace", namespace)?;
            "NotFound"
        }
        LogError::LogNotFound { namespace, log } => {
            kw.set_item("namespace", namespace)?;
            kw.set_item("log", log)?;
            "NotFound"
        }
        LogError::SeqNotFound { log, seq, latest } => {
            kw.set_item("log", log)?;
            kw.set_item("seq", seq)?;
            kw.set_item("latest", latest)?;
            "NotFound"
        }
        LogError::Trimmed { log, seq, earliest } => {
            kw.set_item("log", log)?;
            kw.set_item("seq", seq)?;
            kw.set_item("earliest", earliest)?;
            "Trimmed"
        }
        LogError::Full { log, keep } => {
            kw.set_item("log", log)?;
            kw.set_item("keep", keep)?;
            "Full"
        }
        LogError::Conflict { log, expected, actual } => {
            kw.set_item("log", log)?;
            kw.set_item("expected", expected)?;
            kw.set_item("actual", actual)?;
            "Conflict"
        }
        LogError::InvalidName { name, reason } => {
            kw.set_item("name", name)?;
            kw.set_item("reason", reason)?;
            "InvalidName"
        }
        LogError::TooLarge { what, size, limit } => {
            kw.set_item("what", what)?;
            kw.set_item("size", size)?;
            kw.set_item("limit", limit)?;
            "TooLarge"
        }
        LogError::AlreadyExists { log, existing, requested } => {
            kw.set_item("name", log)?;
            kw.set_item("existing", existing)?;
            kw.set_item("requested", requested)?;
            "AlreadyExists"
        }
        LogError::InvalidArgument { reason } => {
            kw.set_item("reason", reason)?;
            "InvalidArgument"
        }
        e @ (LogError::Lost { .. } | LogError::UnsupportedFormat { .. } | LogError::NoSpace { .. }) => {
            storage_fields(e, kw)?
        }
        LogError::Locked { path } => {
            kw.set_item("path", path.display().to_string())?;
            "Locked"
        }
        LogError::ReadOnly { namespace, operation } => {
            kw.set_item("namespace", namespace)?;
            kw.set_item("operation", operation)?;
            "ReadOnly"
        }
        LogError::Poisoned { namespace, cause } => {
            kw.set_item("namespace", namespace)?;
            kw.set_item("cause", cause)?;
            "Poisoned"
        }
        LogError::Io { context, source } => {
            kw.set_item("context", context)?;
            kw.set_item("errno", source.raw_os_error())?;
            "VarveIOError"
        }
        e @ (LogError::Unavailable { .. }
        | LogError::OutcomeUnknown { .. }
        | LogError::Denied { .. }
        | LogError::Protocol { .. }) => network_fields(e, kw)?,
        // LogError is non_exhaustive: a variant added later still arrives
        // as a VarveError with its message.
        _ => "VarveError",
    })
}

/// The fields of the journal's storage errors: lost records, a newer
/// format, a full disk.
fn storage_fields(e: LogError, kw: &Bound<'_, PyDict>) -> PyResult<&'static str> {
    Ok(match e {
        LogError::Lost { log, first, last, cause } => {
            kw.set_item("log", log)?;
            kw.set_item("first", first)?;
            kw.set_item("last", last)?;
            kw.set_item("segment", cause.segment.display().to_string())?;
            kw.set_item("offset", cause.offset)?;
            kw.set_item("reason", cause.reason)?;
            "Lost"
        }
        LogError::UnsupportedFormat { segment, offset, reason } => {
            kw.set_item("segment", segment.display().to_string())?;
            kw.set_item("offset", offset)?;
            kw.set_item("reason", reason)?;
            "UnsupportedFormat"
        }
        LogError::NoSpace { path, bytes } => {
            kw.set_item("path", path.display().to_string())?;
            kw.set_item("bytes", bytes)?;
            "NoSpace"
        }
        _ => "VarveError",
    })
}

/// The fields of a remote store's own errors; each names the store's URI
/// as `target`.
fn network_fields(e: LogError, kw: &Bound<'_, PyDict>) -> PyResult<&'static str> {
    Ok(match e {
        LogError::Unavailable { target, reason } => {
            kw.set_item("target", target)?;
            kw.set_item("reason", reason)?;
            "Unavailable"
        }
        LogError::OutcomeUnknown { target, operation, reason } => {
            kw.set_item("target", target)?;
            kw.set_item("operation", operation)?;
            kw.set_item("reason", reason)?;
            "OutcomeUnknown"
        }
        LogError::Denied { target, reason } => {
            kw.set_item("target", target)?;
            kw.set_item("reason", reason)?;
            "Denied"
        }
        LogError::Protocol { target, reason } => {
            kw.set_item("target", target)?;
            kw.set_item("reason", reason)?;
            "ProtocolError"
        }
        _ => "VarveError",
    })
}

fn pds_fields(e: PdsError, kw: &Bound<'_, PyDict>) -> PyResult<&'static str> {
    Ok(match e {
        PdsError::Corrupt { log, seq, reason } => {
            kw.set_item("log", log)?;
            kw.set_item("seq", seq)?;
            kw.set_item("reason", reason)?;
            "Corrupt"
        }
        PdsError::NoSuchVersion { structure, version, latest } => {
            kw.set_item("structure", structure)?;
            kw.set_item("version", version)?;
            kw.set_item("latest", latest)?;
            "NoSuchVersion"
        }
        PdsError::RetentionFull { structure, keep } => {
            kw.set_item("structure", structure)?;
            kw.set_item("keep", keep)?;
            "Full"
        }
        PdsError::ConfigMismatch { structure, existing, requested } => {
            kw.set_item("name", structure)?;
            kw.set_item("existing", existing)?;
            kw.set_item("requested", requested)?;
            "AlreadyExists"
        }
        PdsError::PositionOutOfRange { position, len } => {
            kw.set_item("position", position)?;
            kw.set_item("len", len)?;
            "PositionOutOfRange"
        }
        PdsError::Decode { ty, reason } => {
            kw.set_item("reason", format!("{ty}: {reason}"))?;
            "Corrupt"
        }
        PdsError::InvalidArgument { reason } => {
            kw.set_item("reason", reason)?;
            "InvalidArgument"
        }
        _ => "VarveError",
    })
}

/// A PART durable map's errors (its log errors arrive as `Error::Log`).
/// A record of a newer format is `UnsupportedFormat` with the log and seq
/// as its `segment` (durable maps live in logs, not segments of their own)
/// and offset 0; a map poisoned by a failed append is `Poisoned` with the
/// map named in `namespace`.
fn durable_fields(e: DurableError, kw: &Bound<'_, PyDict>) -> PyResult<&'static str> {
    Ok(match e {
        DurableError::Corrupt { log, seq, offset, reason } => {
            kw.set_item("log", log)?;
            kw.set_item("seq", seq)?;
            kw.set_item("offset", offset)?;
            kw.set_item("reason", reason)?;
            "Corrupt"
        }
        e @ DurableError::Version { .. } => {
            if let DurableError::Version { log, seq, .. } = &e {
                kw.set_item("segment", format!("log {log:?} seq {seq}"))?;
            }
            kw.set_item("offset", 0)?;
            kw.set_item("reason", e.to_string())?;
            "UnsupportedFormat"
        }
        DurableError::Poisoned { name, cause } => {
            kw.set_item("namespace", format!("durable map {name:?}"))?;
            kw.set_item("cause", cause)?;
            "Poisoned"
        }
        e @ DurableError::TooDeep => {
            kw.set_item(
                "reason",
                format!("{e}: keys that are prefixes of each other in long chains make the tree this deep"),
            )?;
            "InvalidArgument"
        }
        // A checkpoint already in flight, a foreign job, a reference limit:
        // a VarveError with the map's message.
        _ => "VarveError",
    })
}

fn runtime_fields(e: RuntimeError, kw: &Bound<'_, PyDict>) -> PyResult<&'static str> {
    Ok(match e {
        RuntimeError::Log(e) => log_fields(e, kw)?,
        RuntimeError::BadEvent { seq, reason } => {
            kw.set_item("log", varve_runtime::EVENTS_LOG)?;
            kw.set_item("seq", seq)?;
            kw.set_item("reason", reason)?;
            "Corrupt"
        }
        RuntimeError::UnknownHandler { name } => {
            kw.set_item("handler", name)?;
            "NotFound"
        }
        RuntimeError::UnknownLog { namespace, log } => {
            kw.set_item("namespace", namespace)?;
            kw.set_item("log", log)?;
            "NotFound"
        }
        RuntimeError::DuplicateHandler { name } => {
            kw.set_item("name", name)?;
            kw.set_item("existing", "a handler")?;
            kw.set_item("requested", "a handler")?;
            "AlreadyExists"
        }
        RuntimeError::SeqMismatch { namespace, log, expected, actual } => {
            kw.set_item("namespace", namespace)?;
            kw.set_item("log", log)?;
            kw.set_item("expected", expected)?;
            kw.set_item("actual", actual)?;
            "Conflict"
        }
        RuntimeError::Stopped => {
            kw.set_item("state", "stopped")?;
            "Stopped"
        }
        RuntimeError::Backlogged { backlog, max, waited } => {
            kw.set_item("backlog", backlog)?;
            kw.set_item("max", max)?;
            kw.set_item("waited", waited.as_secs_f64())?;
            "Backlogged"
        }
        RuntimeError::Io { context, source } => {
            kw.set_item("context", context)?;
            kw.set_item("errno", source.raw_os_error())?;
            "VarveIOError"
        }
        RuntimeError::Socket { path, reason } => {
            kw.set_item("context", format!("runtime socket {}: {reason}", path.display()))?;
            kw.set_item("errno", None::<i32>)?;
            "VarveIOError"
        }
        // Malformed ids, a changed host, a bad manifest, bad arguments: the
        // caller passed something wrong (the message says what).
        RuntimeError::BadEventId { .. }
        | RuntimeError::BadTraceId { .. }
        | RuntimeError::HostChanged { .. }
        | RuntimeError::Manifest { .. }
        | RuntimeError::InvalidArgument { .. } => {
            kw.set_item("reason", e.to_string())?;
            "InvalidArgument"
        }
        _ => "VarveError",
    })
}

impl From<Error> for PyErr {
    fn from(error: Error) -> PyErr {
        Python::attach(|py| {
            build(py, error)
                .unwrap_or_else(|e| PyRuntimeError::new_err(format!("varve: could not raise its error: {e}")))
        })
    }
}
