//! `Store`, `Namespace`, `Log`: the Log contract from Python (`records.rs` has
//! the `Scan` and `Watch` iterators they return).
//!
//! **Stores.** `varve.open` takes a directory (the embedded journal) or a
//! `varve://HOST:PORT` URI (a `varve serve`), through [`varve::open`]; every
//! object here holds the store's namespaces as `Arc<dyn Namespace>`, so the
//! same code serves both. What differs is [`Location`]'s to say: closing
//! syncs an embedded journal and sends nothing to a server, and a runtime
//! refuses a remote namespace (it must be its namespace's only writer).
//!
//! **Closing.** A journal namespace holds its writer lock for as long as any
//! handle to it lives, and Python objects may outlive `store.close()`. So
//! Python objects never hold a namespace handle directly: they hold an
//! [`NsState`], whose handle `close` takes away (waiting for calls in
//! flight), and every later call raises `varve.Closed`. Structures and
//! watches hold their own `Arc`s to the namespace, so the namespace keeps a
//! registry of them and empties them on close too.
//!
//! **The GIL** is released around every call into the store
//! (`Python::detach`), so other Python threads run while one waits on disk,
//! on a lock or on a watch.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, Weak};
use std::time::Duration;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyList, PyTuple};
use varve::{OpenOptions, StoreUri};
use varve_log::{
    JournalOptions, JournalStore, Limits, LogConfig, LogError, LogInfo as RustLogInfo, Namespace as RustNamespace,
    OnFull, Record, Retention, Seq, Store as RustStore, SyncPolicy, RECORD_OVERHEAD_BYTES,
};
use varve_runtime::NamespaceWriter;

use crate::error::{invalid_argument, Error, Result};
use crate::pds::StructState;
use crate::read_only::ReadOnlyNamespace;
use crate::records::{Scan, Watch, WatchState};

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

// ------------------------------------------------------------------ state

/// Where a store lives, as [`varve::StoreUri`] read it.
#[derive(Clone, Debug)]
pub(crate) enum Location {
    /// The embedded journal in this directory.
    Embedded(PathBuf),
    /// A store on other hosts, by its URI: a `varve serve` (`varve://HOST:PORT`).
    Remote(String),
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Embedded(dir) => write!(f, "{}", dir.display()),
            Location::Remote(uri) => f.write_str(uri),
        }
    }
}

struct StoreState {
    location: Location,
    read_only: bool,
    /// `None` once closed.
    store: RwLock<Option<Arc<dyn RustStore>>>,
    namespaces: Mutex<HashMap<String, Arc<NsState>>>,
}

impl StoreState {
    /// Run `f` on the open store; `Closed` once it is closed.
    fn with<R>(&self, f: impl FnOnce(&dyn RustStore) -> Result<R>) -> Result<R> {
        let guard = self.store.read().unwrap_or_else(PoisonError::into_inner);
        let store = guard.as_ref().ok_or_else(|| Error::Closed(format!("store {}", self.location)))?;
        f(store.as_ref())
    }
}

pub(crate) struct NsState {
    pub name: String,
    handle: RwLock<Option<Arc<dyn RustNamespace>>>,
    pub structures: Mutex<HashMap<String, Arc<StructState>>>,
    /// PART durable maps open on this namespace, by name (one writer each).
    pub durable_maps: Mutex<HashMap<String, Arc<crate::durable_map::DurableState>>>,
    /// The namespace's record types (`Namespace.schemas()`), once asked for.
    pub schemas: Mutex<Option<Arc<crate::schema::SchemaState>>>,
    watches: Mutex<Vec<Weak<WatchState>>>,
    /// Runtimes serving this namespace: stopped (and their handles dropped)
    /// on close, before the handle is released.
    pub runtimes: Mutex<Vec<Weak<crate::runtime::RuntimeState>>>,
    pub read_only: bool,
    /// Where the namespace's store is (runtimes take their host id from an
    /// embedded store's directory, as the CLI does, and refuse a remote one).
    pub location: Location,
    /// The namespace's writer in this process (embedded, writable stores),
    /// made on the first append no runtime of this process takes.
    writer: Mutex<Option<Arc<NamespaceWriter>>>,
}

impl NsState {
    /// Run `f` on the open namespace; `Closed` once the store is closed.
    pub fn with<R>(&self, f: impl FnOnce(&Arc<dyn RustNamespace>) -> Result<R>) -> Result<R> {
        let guard = self.handle.read().unwrap_or_else(PoisonError::into_inner);
        let ns = guard.as_ref().ok_or_else(|| Error::Closed(format!("namespace {:?}", self.name)))?;
        match (f(ns), &self.location) {
            (Err(Error::Log(LogError::TooLarge { what, size, limit })), Location::Remote(target)) => {
                Err(Error::TooLargeForServer { target: target.clone(), what, size, limit })
            }
            (result, _) => result,
        }
    }

    /// Append `batch` (an `append_batch_if` when `expected` names logs,
    /// each one the batch writes, and where each must end) the way every
    /// surface does (`varve_runtime::writer`): through a runtime of this
    /// process running on the namespace, so its handlers fire; else through
    /// the namespace's writer, which records the TRIGGERs of a namespace
    /// with subscriptions for the next runtime. A remote store decides that
    /// on the server; a read-only one refuses.
    pub fn append(&self, batch: &[(&str, &[u8])], expected: &[(&str, Seq)]) -> Result<Vec<Seq>> {
        if let Some(runtime) = self.running_runtime() {
            return Ok(if expected.is_empty() {
                runtime.append_batch(batch)?
            } else {
                runtime.append_batch_if_once(None, batch, expected, None)?.seqs
            });
        }
        if let (Location::Embedded(dir), false) = (&self.location, self.read_only) {
            let writer = self.writer(dir)?;
            let appended = if expected.is_empty() {
                writer.append(batch, None, None)?
            } else {
                writer.append_batch_if(batch, expected, None, None)?
            };
            return Ok(appended.seqs);
        }
        self.with(|ns| {
            Ok(if expected.is_empty() { ns.append_batch(batch)? } else { ns.append_batch_if(batch, expected)? })
        })
    }

    /// The handle of a runtime of this process running on the namespace.
    pub(crate) fn running_runtime(&self) -> Option<varve_runtime::RuntimeHandle> {
        let runtimes: Vec<_> = lock(&self.runtimes).iter().filter_map(Weak::upgrade).collect();
        runtimes.iter().find_map(|runtime| runtime.handle().ok())
    }

    fn writer(&self, dir: &std::path::Path) -> Result<Arc<NamespaceWriter>> {
        let mut slot = lock(&self.writer);
        if let Some(writer) = slot.as_ref() {
            return Ok(Arc::clone(writer));
        }
        let writer = Arc::new(NamespaceWriter::open(self.handle()?, dir)?);
        *slot = Some(Arc::clone(&writer));
        Ok(writer)
    }

    /// Stop the namespace's writer (and its writer-only runtime, if it has
    /// one): a runtime is starting here and must be the only writer, or the
    /// store is closing.
    pub fn release_writer(&self) {
        if let Some(writer) = lock(&self.writer).take() {
            writer.stop(Duration::ZERO);
        }
    }

    /// A handle of its own on the open namespace (for a structure or a
    /// runtime, which the namespace's registries drop on close).
    pub fn handle(&self) -> Result<Arc<dyn RustNamespace>> {
        self.with(|ns| Ok(Arc::clone(ns)))
    }

    /// Drop every handle to the namespace; an embedded one is synced first,
    /// and released (its writer lock too) with the last handle.
    fn close(&self) -> Result<()> {
        for runtime in lock(&self.runtimes).drain(..).filter_map(|r| r.upgrade()) {
            runtime.shut_down(crate::runtime::STOP_GRACE);
        }
        self.release_writer();
        for structure in lock(&self.structures).drain().map(|(_, s)| s) {
            structure.close();
        }
        for map in lock(&self.durable_maps).drain().map(|(_, m)| m) {
            map.close();
        }
        if let Some(schemas) = lock(&self.schemas).take() {
            schemas.close();
        }
        for watch in lock(&self.watches).drain(..).filter_map(|w| w.upgrade()) {
            watch.close();
        }
        let handle = self.handle.write().unwrap_or_else(PoisonError::into_inner).take();
        match (handle, &self.location) {
            (Some(ns), Location::Embedded(_)) => Ok(ns.sync()?),
            // A server's appends are as durable as its sync policy makes them;
            // closing a client sends nothing (`Namespace.sync` asks for an fsync).
            (Some(_) | None, _) => Ok(()),
        }
    }
}

fn sync_policy(sync: &str, group_delay: f64) -> Result<SyncPolicy> {
    match sync {
        "always" => Ok(SyncPolicy::Always),
        "never" => Ok(SyncPolicy::Never),
        "group" => {
            if !(group_delay > 0.0 && group_delay <= 60.0) {
                return Err(invalid_argument(format!(
                    "group_delay is in seconds, above 0 and at most 60, not {group_delay:?}"
                )));
            }
            Ok(SyncPolicy::Group(Duration::from_secs_f64(group_delay)))
        }
        other => Err(invalid_argument(format!("sync={other:?}: use \"always\", \"group\" or \"never\""))),
    }
}

/// `open`'s default limits are literals in its signature, so that Python
/// shows them (`PyO3` renders no other expression there); this reads them back
/// from the signature and panics, at import, unless they are
/// `JournalOptions::default()`'s: Python and Rust must refuse the same records.
pub(crate) fn check_open_defaults(open: &Bound<'_, PyAny>) -> PyResult<()> {
    let signature: String = open.getattr("__text_signature__")?.extract()?;
    let rust = JournalOptions::default();
    let defaults = [
        ("record_bytes_max", rust.limits.record_bytes_max.to_string()),
        ("batch_bytes_max", rust.limits.batch_bytes_max.to_string()),
        ("batch_records_max", rust.limits.batch_records_max.to_string()),
        ("segment_bytes_max", rust.segment_bytes_max.to_string()),
    ];
    for (name, value) in defaults {
        assert!(
            signature.contains(&format!(" {name}={value},")) || signature.contains(&format!(" {name}={value})")),
            "varve.open's default {name} must be JournalOptions::default()'s, {value}: {signature}"
        );
    }
    Ok(())
}

/// Refuses the limits that the journal accepts but that make no sense; it
/// checks the rest itself (`JournalOptions::validate`: the segment size's
/// range, `record_bytes_max <= batch_bytes_max <= 1 GiB - 4`).
fn check_limits(limits: &Limits) -> Result<()> {
    if limits.record_bytes_max == 0 {
        return Err(invalid_argument("record_bytes_max is at least 1: no record could be appended"));
    }
    if limits.batch_records_max == 0 {
        return Err(invalid_argument("batch_records_max is at least 1: no batch could be appended"));
    }
    let one_record = limits.record_bytes_max.saturating_add(RECORD_OVERHEAD_BYTES);
    if limits.batch_bytes_max < one_record {
        return Err(invalid_argument(format!(
            "batch_bytes_max ({}) counts each record plus {RECORD_OVERHEAD_BYTES} bytes, so it is at least \
             record_bytes_max + {RECORD_OVERHEAD_BYTES} ({one_record}): else a record of record_bytes_max fits \
             no batch",
            limits.batch_bytes_max
        )));
    }
    Ok(())
}

/// The environment variable read for the token when `varve.open` is given
/// none (as the CLI's `--token`).
const TOKEN_ENV: &str = "VARVE_TOKEN";
/// The environment variable read for `tls_ca` when `varve.open` is given
/// none (as the CLI's `--tls-ca`).
const TLS_CA_ENV: &str = "VARVE_TLS_CA";

/// Open a store: a directory (the embedded journal, created unless
/// read-only) or a `varve serve` on another host.
///
/// `uri` is a path, ``file:PATH`` or ``varve://HOST:PORT``. A server started
/// with ``--token-file`` needs `token`, its bearer token; when `token` is
/// None the ``VARVE_TOKEN`` environment variable is used, as the CLI does. A
/// directory ignores the token. Opening a server checks that it answers
/// (:class:`varve.Unavailable` if it cannot be reached); the token is
/// checked by the first call that needs it (:class:`varve.Denied`).
///
/// ``varves://HOST:PORT`` is a server started with ``--tls-cert/--tls-key``
/// (HTTPS). Its certificate must chain to a public root or to `tls_ca`, a
/// PEM file of the CA that signed it (default: the ``VARVE_TLS_CA``
/// environment variable); an untrusted certificate raises
/// :class:`varve.Unavailable`.
///
/// `sync`: ``"always"`` (fsync before every append returns; survives power
/// loss), ``"group"`` (appends return at once and are fsynced within
/// `group_delay` seconds; a process crash loses nothing) or ``"never"``.
///
/// Limits, for the appends of this open (records already stored are read
/// whatever their size): `record_bytes_max` bytes per record,
/// `batch_bytes_max` bytes per batch (each record counts 20 bytes more),
/// `batch_records_max` records per batch; an append over one raises
/// :class:`varve.TooLarge`. A segment file of the journal is rolled once it
/// would grow past `segment_bytes_max` bytes (4096 to 2 GiB).
///
/// `sync`, `group_delay`, the limits and `segment_bytes_max` configure the
/// embedded journal only: with a ``varve://`` URI they are checked but do
/// not apply, since the server's own options (``varve serve --sync …``,
/// its limits) govern what it stores.
///
/// `read_only=True`: a directory is opened without the writer lock, to
/// read and follow another process's appends; a server is sent reads only,
/// and this store's writes raise :class:`varve.ReadOnly` before anything is
/// sent (with a read-only token the server refuses writes as well).
#[pyfunction]
#[pyo3(signature = (
    uri,
    sync = "group",
    *,
    read_only = false,
    token = None,
    tls_ca = None,
    group_delay = 0.005,
    record_bytes_max = 16_777_216,
    batch_bytes_max = 67_108_864,
    batch_records_max = 65_536,
    segment_bytes_max = 67_108_864,
))]
#[expect(clippy::too_many_arguments, reason = "Python keyword arguments")]
pub fn open(
    py: Python<'_>,
    uri: PathBuf,
    sync: &str,
    read_only: bool,
    token: Option<String>,
    tls_ca: Option<PathBuf>,
    group_delay: f64,
    record_bytes_max: u64,
    batch_bytes_max: u64,
    batch_records_max: usize,
    segment_bytes_max: u64,
) -> PyResult<Store> {
    let limits = Limits { record_bytes_max, batch_bytes_max, batch_records_max };
    check_limits(&limits)?;
    let sync = sync_policy(sync, group_delay)?;
    let journal = JournalOptions { sync, read_only, segment_bytes_max, limits, ..JournalOptions::default() };
    let token = token.or_else(|| std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty()));
    let tls_ca = tls_ca.or_else(|| std::env::var_os(TLS_CA_ENV).filter(|p| !p.is_empty()).map(PathBuf::from));
    let options = OpenOptions { journal, token, tls_ca };
    let (location, store) = py.detach(|| -> Result<(Location, Arc<dyn RustStore>)> {
        // A URI is text; a path that is not UTF-8 can only be a directory.
        let Some(text) = uri.to_str() else {
            return Ok((Location::Embedded(uri.clone()), Arc::new(JournalStore::open(&uri, options.journal)?)));
        };
        let location = match StoreUri::parse(text)? {
            StoreUri::Embedded(dir) => Location::Embedded(dir),
            StoreUri::Remote(uri) => Location::Remote(uri),
            // A store elsewhere too: a NATS JetStream cluster.
            StoreUri::Nats(_) => Location::Remote(text.to_owned()),
        };
        Ok((location, varve::open(text, &options)?))
    })?;
    Ok(Store {
        state: Arc::new(StoreState {
            location,
            read_only,
            store: RwLock::new(Some(store)),
            namespaces: Mutex::default(),
        }),
    })
}

// ------------------------------------------------------------------ Store

/// A store of namespaces, opened by :func:`varve.open`: a directory (the
/// embedded journal) or a `varve serve` (``varve://HOST:PORT``), with the
/// same API.
///
/// Use it as a context manager (``with varve.open(path) as store:``) or call
/// :meth:`close`. Safe to share between threads. After ``close()`` every
/// object obtained from it raises :class:`varve.Closed`.
#[pyclass(frozen, module = "varve")]
pub struct Store {
    state: Arc<StoreState>,
}

#[pymethods]
impl Store {
    /// Open (creating it on first write) the namespace `name`: a set of logs
    /// with one journal, the unit of atomic batches. One process may write a
    /// namespace at a time (:class:`varve.Locked` otherwise); on a server,
    /// the server is that process and its clients may all write.
    fn namespace(&self, py: Python<'_>, name: &str) -> PyResult<Namespace> {
        let state = py.detach(|| {
            self.state.with(|store| {
                let mut namespaces = lock(&self.state.namespaces);
                if let Some(ns) = namespaces.get(name) {
                    return Ok(ns.clone());
                }
                let mut handle = store.namespace(name)?;
                if self.state.read_only && matches!(self.state.location, Location::Remote(_)) {
                    // The journal refuses a read-only handle's writes itself; a server cannot tell.
                    handle = Arc::new(ReadOnlyNamespace::new(handle));
                }
                let ns = Arc::new(NsState {
                    name: name.to_owned(),
                    handle: RwLock::new(Some(handle)),
                    structures: Mutex::default(),
                    durable_maps: Mutex::default(),
                    schemas: Mutex::default(),
                    watches: Mutex::default(),
                    runtimes: Mutex::default(),
                    read_only: self.state.read_only,
                    location: self.state.location.clone(),
                    writer: Mutex::default(),
                });
                namespaces.insert(name.to_owned(), ns.clone());
                Ok(ns)
            })
        })?;
        Ok(Namespace { state })
    }

    /// Names of the namespaces in this store, sorted.
    fn namespaces(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        py.detach(|| self.state.with(|store| Ok(store.list_namespaces()?))).map_err(Into::into)
    }

    /// Release the store: an embedded one syncs every namespace and releases
    /// its writer locks; a remote one closes its connections (it sends
    /// nothing: :meth:`Namespace.sync` asks the server to fsync). Objects
    /// obtained from it raise :class:`varve.Closed` afterwards. Closing twice
    /// is harmless.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| -> Result<()> {
            let store = self.state.store.write().unwrap_or_else(PoisonError::into_inner).take();
            let namespaces: Vec<_> = lock(&self.state.namespaces).drain().map(|(_, ns)| ns).collect();
            let mut first_error = None;
            for ns in namespaces {
                if let Err(e) = ns.close() {
                    first_error.get_or_insert(e);
                }
            }
            drop(store);
            first_error.map_or(Ok(()), Err)
        })
        .map_err(Into::into)
    }

    /// Whether :meth:`close` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.state.store.read().unwrap_or_else(PoisonError::into_inner).is_none()
    }

    /// The store's directory; None for a remote store (see :attr:`uri`).
    #[getter]
    fn path(&self) -> Option<PathBuf> {
        match &self.state.location {
            Location::Embedded(dir) => Some(dir.clone()),
            Location::Remote(_) => None,
        }
    }

    /// Where the store is: its directory, or ``varve://HOST:PORT`` for a
    /// `varve serve`. :func:`varve.open` opens it again from this.
    #[getter]
    fn uri(&self) -> String {
        self.state.location.to_string()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let state = if self.closed() { " closed" } else { "" };
        format!("<varve.Store {}{state}>", self.state.location)
    }
}

// -------------------------------------------------------------- Namespace

/// A namespace: named logs sharing one journal, and the versioned structures
/// stored in them. Batches across its logs are atomic.
#[pyclass(frozen, module = "varve")]
pub struct Namespace {
    pub(crate) state: Arc<NsState>,
}

pub(crate) fn retention(keep: Option<u64>, on_full: &str) -> Result<LogConfig> {
    let on_full = match on_full {
        "refuse" => OnFull::Refuse,
        "overwrite" => OnFull::Overwrite,
        other => return Err(invalid_argument(format!("on_full={other:?}: use \"refuse\" or \"overwrite\""))),
    };
    match keep {
        Some(k) => Ok(LogConfig::keep(k, on_full)),
        // As `varve log create` refuses --on-full without --keep.
        None if on_full == OnFull::Overwrite => Err(invalid_argument(
            "on_full=\"overwrite\" needs keep=k, the number of records to keep: a log without keep keeps every \
             record, so it is never full and nothing is overwritten",
        )),
        None => Ok(LogConfig::unbounded()),
    }
}

/// Bytes of a record argument: `bytes` (no copy) or `bytearray`.
pub(crate) enum Data<'a> {
    Borrowed(&'a [u8]),
    Owned(Vec<u8>),
}

impl Data<'_> {
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            Data::Borrowed(b) => b,
            Data::Owned(v) => v,
        }
    }
}

pub(crate) fn data<'a>(obj: &'a Bound<'_, PyAny>) -> PyResult<Data<'a>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        Ok(Data::Borrowed(b.as_bytes()))
    } else if let Ok(b) = obj.cast::<PyByteArray>() {
        Ok(Data::Owned(b.to_vec()))
    } else {
        Err(PyTypeError::new_err(format!(
            "a record is bytes (or bytearray), not {}; encode text first, e.g. value.encode()",
            obj.get_type().name()?
        )))
    }
}

#[pymethods]
impl Namespace {
    /// The namespace's name.
    #[getter]
    fn name(&self) -> &str {
        &self.state.name
    }

    /// The log `name`, created if absent.
    ///
    /// `keep=None` opens an existing log whatever its retention, or creates
    /// one that keeps every record. `keep=k` keeps at most k records; then
    /// `on_full="refuse"` fails appends with :class:`varve.Full` (reads go
    /// on) and `on_full="overwrite"` trims the oldest. An existing log with
    /// another retention raises :class:`varve.AlreadyExists`.
    #[pyo3(signature = (name, keep = None, on_full = "refuse"))]
    fn log(&self, py: Python<'_>, name: &str, keep: Option<u64>, on_full: &str) -> PyResult<Log> {
        let config = retention(keep, on_full)?;
        py.detach(|| {
            self.state.with(|ns| {
                let exists = match ns.log_info(name) {
                    Ok(info) => Some(info),
                    // A server creates a namespace with its first log.
                    Err(LogError::LogNotFound { .. } | LogError::NamespaceNotFound { .. }) => None,
                    Err(e) => return Err(e.into()),
                };
                match exists {
                    Some(_) if keep.is_none() => Ok(()),
                    None if self.state.read_only => ns.log_info(name).map(drop).map_err(Into::into),
                    _ => Ok(ns.create_log(name, config)?),
                }
            })
        })?;
        Ok(Log { ns: self.state.clone(), name: name.to_owned() })
    }

    /// Append records to several logs at once, all or nothing.
    ///
    /// `batch` is a dict ``{log_name: [record, ...]}`` — returns
    /// ``{log_name: [seq, ...]}`` — or a list of ``(log_name, record)``
    /// pairs — returns the list of seqs in input order. Records for one log
    /// get consecutive seqs. The logs must exist.
    ///
    /// With ``expected`` (a dict ``{log_name: latest_seq}`` of logs the
    /// batch writes), the batch lands only while each of those logs ends at
    /// that seq; otherwise :class:`varve.Conflict` names the first that does
    /// not (``.actual``) and nothing lands — optimistic concurrency across
    /// logs.
    #[pyo3(signature = (batch, expected=None))]
    fn append_batch<'py>(
        &self,
        py: Python<'py>,
        batch: &Bound<'py, PyAny>,
        expected: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let expected: Vec<(String, Seq)> = match expected {
            Some(dict) => {
                dict.iter().map(|(log, latest)| Ok((log.extract()?, latest.extract()?))).collect::<PyResult<_>>()?
            }
            None => Vec::new(),
        };
        let mut names: Vec<String> = Vec::new();
        let mut owned: Vec<Bound<'py, PyAny>> = Vec::new();
        let mut counts: Vec<usize> = Vec::new();
        let is_dict = if let Ok(dict) = batch.cast::<PyDict>() {
            for (log, records) in dict.iter() {
                let log: String = log.extract()?;
                let mut n = 0;
                for record in records.try_iter()? {
                    names.push(log.clone());
                    owned.push(record?);
                    n += 1;
                }
                counts.push(n);
            }
            true
        } else {
            for pair in batch.try_iter()? {
                let (log, record): (String, Bound<'py, PyAny>) = pair?.extract()?;
                names.push(log);
                owned.push(record);
            }
            false
        };
        let datas = owned.iter().map(|o| data(o)).collect::<PyResult<Vec<_>>>()?;
        let entries: Vec<(&str, &[u8])> =
            names.iter().map(String::as_str).zip(datas.iter().map(Data::as_slice)).collect();
        let expected: Vec<(&str, Seq)> = expected.iter().map(|(log, latest)| (log.as_str(), *latest)).collect();
        let seqs = py.detach(|| self.state.append(&entries, &expected))?;
        if !is_dict {
            return Ok(PyList::new(py, seqs)?.into_any());
        }
        let out = PyDict::new(py);
        let (mut at, dict) = (0, batch.cast::<PyDict>()?);
        for ((log, _), n) in dict.iter().zip(counts) {
            out.set_item(log, PyList::new(py, &seqs[at..at + n])?)?;
            at += n;
        }
        Ok(out.into_any())
    }

    /// Every log of the namespace, in name order, as :class:`LogInfo`.
    /// Versioned structures keep their data in logs named ``pds.<name>.*``.
    fn logs(&self, py: Python<'_>) -> PyResult<Vec<LogInfo>> {
        let infos = py.detach(|| {
            self.state.with(|ns| match ns.list_logs() {
                // A server creates a namespace with its first log; until then it has none,
                // as an embedded namespace just opened.
                Err(LogError::NamespaceNotFound { .. }) if matches!(self.state.location, Location::Remote(_)) => {
                    Ok(Vec::new())
                }
                other => Ok(other?),
            })
        })?;
        Ok(infos.into_iter().map(LogInfo::from).collect())
    }

    /// Delete a log and its records; the name may be created again (from seq 1).
    fn delete_log(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        py.detach(|| self.state.with(|ns| Ok(ns.delete_log(name)?))).map_err(Into::into)
    }

    /// Remove the records of log ``name`` below seq ``before`` (they read as
    /// trimmed from then on; seqs are never reused; the newest record always
    /// stays); returns the log's new earliest seq. Durable, and final. The
    /// runtime's own logs (``_events``, ``_runtime.*``, ``_dead_letters``)
    /// are refused: set ``events_keep`` or ``events_keep_for`` and the runtime trims its events.
    fn trim(&self, py: Python<'_>, name: &str, before: u64) -> PyResult<u64> {
        py.detach(|| trim_log(&self.state, name, before)).map_err(Into::into)
    }

    /// Make every acknowledged append durable now, whatever the sync policy
    /// (on a remote store: the server's fsync of the namespace).
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.state.with(|ns| Ok(ns.sync()?))).map_err(Into::into)
    }

    /// A versioned sorted set (see :class:`SortedSet`), created if absent.
    #[pyo3(signature = (name, extra = 5, keep_versions = None, tree = "balanced"))]
    fn sorted_set(
        &self,
        py: Python<'_>,
        name: &str,
        extra: u32,
        keep_versions: Option<u64>,
        tree: &str,
    ) -> PyResult<crate::pds::SortedSet> {
        crate::pds::SortedSet::open(py, &self.state, name, extra, keep_versions, tree)
    }

    /// A versioned sorted map (see :class:`SortedMap`), created if absent.
    #[pyo3(signature = (name, extra = 5, keep_versions = None, tree = "balanced"))]
    fn sorted_map(
        &self,
        py: Python<'_>,
        name: &str,
        extra: u32,
        keep_versions: Option<u64>,
        tree: &str,
    ) -> PyResult<crate::pds::SortedMap> {
        crate::pds::SortedMap::open(py, &self.state, name, extra, keep_versions, tree)
    }

    /// A versioned list (see :class:`List`), created if absent.
    #[pyo3(signature = (name, extra = 5, keep_versions = None))]
    fn list(&self, py: Python<'_>, name: &str, extra: u32, keep_versions: Option<u64>) -> PyResult<crate::pds::List> {
        crate::pds::List::open(py, &self.state, name, extra, keep_versions)
    }

    /// A PART durable map (see :class:`DurableMap`), created if absent:
    /// ``bytes`` values, keys ``bytes``/``str`` (``key_type=bytes``, returned
    /// as bytes) or ``str`` only (``key_type=str``). Its data is in logs
    /// named ``part.<name>.*``.
    #[pyo3(signature = (name, *, key_type = None))]
    fn durable_map(
        &self,
        py: Python<'_>,
        name: &str,
        key_type: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<crate::durable_map::DurableMap> {
        crate::durable_map::DurableMap::open(py, &self.state, name, key_type)
    }

    /// The versioned-object store ``name`` (see :class:`ObjectStore`),
    /// created if absent; its data is in logs named ``obj.<name>.*``.
    fn objects(&self, py: Python<'_>, name: &str) -> PyResult<crate::object::ObjectStore> {
        crate::object::ObjectStore::open(py, &self.state, name)
    }

    /// The namespace's record types and typed logs (see :class:`Schemas`),
    /// kept in its ``_schema`` log.
    fn schemas(&self, py: Python<'_>) -> PyResult<crate::schema::Schemas> {
        crate::schema::Schemas::open(py, &self.state)
    }

    /// A :class:`varve.Runtime` over this namespace (same keyword arguments).
    #[pyo3(signature = (**options))]
    fn runtime<'py>(slf: &Bound<'py, Self>, options: Option<&Bound<'py, PyDict>>) -> PyResult<Bound<'py, PyAny>> {
        slf.py().import("varve")?.getattr("Runtime")?.call((slf,), options)
    }

    /// The repair plan (a dry run: nothing changes) of correcting the record
    /// ``record=(log, seq)``, or of new code for ``handler=`` (its runs on
    /// inputs with seq ``since_seq`` or later; all of them by default).
    /// ``not_replayable`` names handlers that act on the world. See
    /// docs/python.md, "Repair and replay".
    #[pyo3(signature = (*, record = None, handler = None, since_seq = None, not_replayable = None))]
    fn repair_plan(
        &self,
        py: Python<'_>,
        record: Option<(String, u64)>,
        handler: Option<String>,
        since_seq: Option<u64>,
        not_replayable: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<crate::repair::RepairPlan> {
        let target = crate::repair::Target { record, handler, since_seq, value: None };
        crate::repair::repair_plan(py, &self.state, &target, not_replayable)
    }

    /// Repair: correct the record ``record=(log, seq)`` to ``value``, or
    /// re-run ``handler=`` with its new code (from inputs with seq
    /// ``since_seq`` on), replaying every run that depends on it with the
    /// callables of ``handlers`` and swapping the repaired logs in
    /// atomically (the old history stays readable as ``_gen.LOG.N``).
    /// Offline, or — while a runtime of this process serves the namespace —
    /// beside it, pausing it only for the swap. Returns ``{"swapped":
    /// {namespace: [(log, generation), ...]}, "replayed", "written",
    /// "changed", "event_error", "online"}``; raises
    /// :class:`varve.RepairError`, changing nothing, when the repair cannot
    /// be carried out.
    #[pyo3(signature = (
        *, handlers, record = None, value = None, handler = None, since_seq = None, not_replayable = None,
        on_not_replayable = "refuse"
    ))]
    #[expect(clippy::too_many_arguments, reason = "Python keyword arguments")]
    fn repair<'py>(
        &self,
        py: Python<'py>,
        handlers: &Bound<'py, PyAny>,
        record: Option<(String, u64)>,
        value: Option<&Bound<'py, PyAny>>,
        handler: Option<String>,
        since_seq: Option<u64>,
        not_replayable: Option<&Bound<'py, PyAny>>,
        on_not_replayable: &str,
    ) -> PyResult<Bound<'py, PyDict>> {
        let target = crate::repair::Target { record, handler, since_seq, value };
        crate::repair::repair(py, &self.state, &target, handlers, not_replayable, on_not_replayable)
    }

    /// Finish the repairs a crash cut short while they committed (an
    /// offline :meth:`repair` does it first on its own): swap what is not
    /// swapped yet and write the REPAIR event, or call the repair off where
    /// an original gained records since. Returns ``[{"id", "finished",
    /// "swapped_now", "called_off"}]``, empty when there was none. Offline
    /// only (no runtime of this process may serve the namespace).
    fn resume_repairs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        crate::repair::resume_repairs(py, &self.state)
    }

    fn __repr__(&self) -> String {
        format!("<varve.Namespace {:?}>", self.state.name)
    }
}

// -------------------------------------------------------------------- Log

/// One append-only log: a dense sequence of byte records, seq 1 first.
///
/// ``append`` returns the new record's seq; ``get(seq)`` reads it back;
/// ``scan`` and ``watch`` iterate as ``(seq, record)`` pairs. ``len(log)``
/// counts the records still kept; ``latest`` and ``earliest`` are 0 when
/// there are none.
#[pyclass(frozen, module = "varve")]
pub struct Log {
    ns: Arc<NsState>,
    name: String,
}

impl Log {
    fn info(&self, py: Python<'_>) -> Result<RustLogInfo> {
        py.detach(|| self.ns.with(|ns| Ok(ns.log_info(&self.name)?)))
    }
}

/// `Namespace.trim` and `Log.trim`.
fn trim_log(ns: &NsState, name: &str, before: u64) -> Result<u64> {
    if varve_runtime::is_runtime_log(name) {
        return Err(invalid_argument(format!(
            "{name} is the runtime's own log: it is not trimmed by hand; give the runtime events_keep or \
             events_keep_for and it trims its event log itself"
        )));
    }
    if name.starts_with('_') {
        return Err(invalid_argument(format!(
            "{name} is a system log (names beginning with `_` are Varve's own): it is not trimmed by hand; an old \
             repair generation `_gen.LOG.N` can be deleted whole with delete_log"
        )));
    }
    ns.with(|ns| Ok(ns.trim(name, before)?))
}

pub(crate) fn record_tuple<'py>(py: Python<'py>, record: &Record) -> PyResult<Bound<'py, PyTuple>> {
    (record.seq, PyBytes::new(py, &record.value)).into_pyobject(py)
}

#[pymethods]
impl Log {
    /// The log's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Append `record` (bytes); returns its seq. Durable as the store's
    /// `sync` policy says when it returns.
    fn append(&self, py: Python<'_>, record: &Bound<'_, PyAny>) -> PyResult<u64> {
        let record = data(record)?;
        let bytes = record.as_slice();
        py.detach(|| Ok(self.ns.append(&[(&self.name, bytes)], &[])?[0])).map_err(|e: Error| e.into())
    }

    /// Append `record` only if the log's latest seq is still `expected`;
    /// raises :class:`varve.Conflict` (with ``.actual``) otherwise.
    fn append_if(&self, py: Python<'_>, expected: u64, record: &Bound<'_, PyAny>) -> PyResult<u64> {
        let record = data(record)?;
        let bytes = record.as_slice();
        let name = self.name.as_str();
        py.detach(|| Ok(self.ns.append(&[(name, bytes)], &[(name, expected)])?[0])).map_err(|e: Error| e.into())
    }

    /// The record at `seq`. :class:`varve.NotFound` beyond the latest (or
    /// for 0), :class:`varve.Trimmed` below the earliest kept.
    fn get<'py>(&self, py: Python<'py>, seq: u64) -> PyResult<Bound<'py, PyBytes>> {
        let value = py.detach(|| self.ns.with(|ns| Ok(ns.get(&self.name, seq)?)))?;
        Ok(PyBytes::new(py, &value))
    }

    /// Remove the records below seq ``before`` for good (they read as
    /// :class:`varve.Trimmed`; seqs are never reused; the newest record
    /// always stays); returns the new :attr:`earliest`.
    fn trim(&self, py: Python<'_>, before: u64) -> PyResult<u64> {
        py.detach(|| trim_log(&self.ns, &self.name, before)).map_err(Into::into)
    }

    /// The newest seq; 0 when nothing was appended.
    #[getter]
    fn latest(&self, py: Python<'_>) -> PyResult<u64> {
        py.detach(|| self.ns.with(|ns| Ok(ns.latest(&self.name)?))).map_err(Into::into)
    }

    /// The oldest seq still kept; 0 when the log holds no record.
    #[getter]
    fn earliest(&self, py: Python<'_>) -> PyResult<u64> {
        py.detach(|| self.ns.with(|ns| Ok(ns.earliest(&self.name)?))).map_err(Into::into)
    }

    /// Retention: the most records kept, or None for unbounded.
    #[getter]
    fn keep(&self, py: Python<'_>) -> PyResult<Option<u64>> {
        Ok(LogInfo::from(self.info(py)?).keep)
    }

    /// What happens when a ``keep`` log is full: "refuse", "overwrite", or None.
    #[getter]
    fn on_full(&self, py: Python<'_>) -> PyResult<Option<&'static str>> {
        Ok(LogInfo::from(self.info(py)?).on_full)
    }

    /// Records with ``start <= seq < stop``, in order, as ``(seq, record)``.
    ///
    /// `start` defaults to the earliest kept record (a `start` below it
    /// raises :class:`varve.Trimmed`: records were lost); `stop` to one past
    /// the latest record when the scan starts (later appends are not seen —
    /// use :meth:`watch` to follow them).
    #[pyo3(signature = (start = None, stop = None))]
    fn scan(&self, py: Python<'_>, start: Option<u64>, stop: Option<u64>) -> PyResult<Scan> {
        let (earliest, latest) = py.detach(|| {
            self.ns.with(|ns| {
                let info = ns.log_info(&self.name)?;
                Ok((info.earliest, info.latest))
            })
        })?;
        let next = start.unwrap_or(earliest).max(1);
        let end = stop.unwrap_or(Seq::MAX).min(latest.saturating_add(1));
        let scan = Scan::new(self.ns.clone(), self.name.clone(), next, end);
        // Read the first batch now, so a bad start raises here and not at the first next().
        py.detach(|| scan.fill())?;
        Ok(scan)
    }

    /// Follow the log: the records from `start` on (default: the earliest
    /// kept), then each new one as it is appended. A blocking iterator
    /// (``for seq, record in log.watch(): ...``) and an async one
    /// (``async for seq, record in log.watch(): ...``); see :class:`Watch`.
    #[pyo3(signature = (start = None))]
    fn watch(&self, py: Python<'_>, start: Option<u64>) -> PyResult<Watch> {
        let state = py.detach(|| {
            self.ns.with(|ns| {
                let start = match start {
                    Some(s) => s,
                    None => ns.earliest(&self.name)?.max(1),
                };
                Ok(Arc::new(WatchState::new(ns.watch(&self.name, start)?)))
            })
        })?;
        let mut watches = lock(&self.ns.watches);
        watches.retain(|w| w.strong_count() > 0); // forget watches already dropped
        watches.push(Arc::downgrade(&state));
        Ok(Watch::new(state, format!("watch of log {:?}", self.name)))
    }

    /// Records kept now (``latest - earliest + 1``, or 0).
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(usize::try_from(self.info(py)?.len()).unwrap_or(usize::MAX))
    }

    fn __repr__(&self) -> String {
        format!("<varve.Log {:?} in namespace {:?}>", self.name, self.ns.name)
    }
}

// ---------------------------------------------------------------- LogInfo

/// What a namespace knows about one log (see :meth:`Namespace.logs`).
#[pyclass(frozen, module = "varve", get_all)]
pub struct LogInfo {
    /// The log's name.
    name: String,
    /// Oldest seq kept (0: none).
    earliest: u64,
    /// Newest seq (0: none ever).
    latest: u64,
    /// Records kept now.
    len: u64,
    /// Retention: most records kept, None for unbounded.
    keep: Option<u64>,
    /// "refuse", "overwrite", or None for unbounded logs.
    on_full: Option<&'static str>,
}

impl From<RustLogInfo> for LogInfo {
    fn from(info: RustLogInfo) -> Self {
        let (keep, on_full) = match info.config.retention {
            Retention::Unbounded => (None, None),
            Retention::Keep { k, on_full: OnFull::Refuse } => (Some(k), Some("refuse")),
            Retention::Keep { k, on_full: OnFull::Overwrite } => (Some(k), Some("overwrite")),
        };
        LogInfo { len: info.len(), name: info.name, earliest: info.earliest, latest: info.latest, keep, on_full }
    }
}

#[pymethods]
impl LogInfo {
    fn __repr__(&self) -> String {
        let keep = self.keep.map_or_else(|| "None".to_owned(), |k| k.to_string());
        let on_full = self.on_full.map_or_else(|| "None".to_owned(), |o| format!("{o:?}"));
        format!(
            "LogInfo(name={:?}, earliest={}, latest={}, len={}, keep={keep}, on_full={on_full})",
            self.name, self.earliest, self.latest, self.len
        )
    }
}
