//! The namespaces a server holds open: it is the single writer of each one
//! it serves, and opens a namespace on its first request (a write creates it;
//! a read of a namespace that was never written is `namespace_not_found`).
//!
//! Writes go through each namespace's [`NamespaceWriter`], the same one the
//! CLI and the Python package use: through the runtime of a manifest the
//! server hosts (`--manifest`, handlers run here), a writer-only runtime
//! when the namespace has subscriptions or an append carries a cause, and
//! straight to the journal otherwise; request ids are remembered in
//! `_runtime.requests`, so a client that lost an answer can send the append
//! again and it lands once, also across a restart.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use varve_log::{JournalNamespace, JournalOptions, JournalStore, LogError, Namespace, Store};
use varve_runtime::manifest::{Builtins, Manifest};
use varve_runtime::{NamespaceWriter, RuntimeOptions};

use crate::error::ApiError;

/// How long a hosted runtime's running handlers get when the server stops.
const RUNTIME_STOP_GRACE: Duration = Duration::from_secs(10);

/// One namespace the server serves.
pub struct Served {
    /// Its writer; reads go to [`Served::ns`].
    pub writer: NamespaceWriter,
    /// The same namespace as the journal type, for what only it tells
    /// (its memory, for `/metrics`).
    journal: JournalNamespace,
}

impl Served {
    /// The namespace, for reads.
    pub fn ns(&self) -> &dyn Namespace {
        self.writer.namespace().as_ref()
    }

    /// The same namespace as the journal type.
    pub fn journal(&self) -> &JournalNamespace {
        &self.journal
    }
}

/// Every namespace of the data directory, opened on demand.
pub struct Namespaces {
    store: JournalStore,
    open: Mutex<HashMap<String, Arc<Served>>>,
}

impl Namespaces {
    /// Serve the namespaces of `data`, and start the runtime of each manifest
    /// (its handlers from `builtins` or external commands), which then
    /// writes its namespace.
    pub fn new(
        data: PathBuf,
        options: JournalOptions,
        manifests: &[Manifest],
        builtins: &Builtins,
    ) -> Result<Namespaces, ApiError> {
        let store = JournalStore::open(data, JournalOptions { read_only: false, ..options })?;
        let namespaces = Namespaces { store, open: Mutex::default() };
        for manifest in manifests {
            namespaces.host_runtime(manifest, builtins)?;
        }
        Ok(namespaces)
    }

    /// The namespace for a read: `namespace_not_found` if it was never written.
    pub fn for_read(&self, name: &str) -> Result<Arc<Served>, ApiError> {
        varve_log::validate_name(name, true)?;
        if let Some(served) = self.cached(name) {
            return Ok(served);
        }
        if !self.store.dir().join(name).is_dir() {
            return Err(LogError::NamespaceNotFound { namespace: name.to_owned() }.into());
        }
        self.open(name)
    }

    /// The namespace of an operation on `log`, which must exist already (a
    /// read, an append, a trim, a rename, a delete): `log_not_found` when
    /// the namespace was never written, as for any log that does not exist
    /// (a client's namespace handle stands for a namespace, written or
    /// not). A write refused so leaves no namespace behind, as a typo in
    /// its name would.
    pub fn for_log(&self, name: &str, log: &str) -> Result<Arc<Served>, ApiError> {
        match self.for_read(name) {
            Err(ApiError::Log(LogError::NamespaceNotFound { namespace })) => {
                Err(LogError::LogNotFound { namespace, log: log.to_owned() }.into())
            }
            other => other,
        }
    }

    /// The namespace for a write that creates (a log, an object store),
    /// created if needed.
    pub fn for_write(&self, name: &str) -> Result<Arc<Served>, ApiError> {
        varve_log::validate_name(name, true)?;
        match self.cached(name) {
            Some(served) => Ok(served),
            None => self.open(name),
        }
    }

    /// The names of every namespace in the data directory.
    pub fn list(&self) -> Result<Vec<String>, LogError> {
        self.store.list_namespaces()
    }

    /// The runtimes of the namespaces open now (hosted, or writer-only),
    /// by namespace name, for `/metrics`. Blocks while a writer of one of
    /// them changes its path (not while holding the table of namespaces).
    pub fn runtimes(&self) -> Vec<(String, varve_runtime::RuntimeHandle)> {
        let open: Vec<(String, Arc<Served>)> = {
            let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
            open.iter().map(|(name, served)| (name.clone(), Arc::clone(served))).collect()
        };
        let mut runtimes: Vec<_> =
            open.into_iter().filter_map(|(name, served)| Some((name, served.writer.runtime()?))).collect();
        runtimes.sort_by(|a, b| a.0.cmp(&b.0));
        runtimes
    }

    /// The namespaces open now, by name, as journals (for `/metrics`).
    pub fn journals(&self) -> Vec<(String, JournalNamespace)> {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let mut journals: Vec<_> = open.iter().map(|(name, served)| (name.clone(), served.journal.clone())).collect();
        journals.sort_by(|a, b| a.0.cmp(&b.0));
        journals
    }

    /// Stop the runtimes and close every namespace (releasing their locks
    /// once no request holds them).
    pub fn close_all(&self) {
        let open: Vec<Arc<Served>> =
            self.open.lock().unwrap_or_else(PoisonError::into_inner).drain().map(|(_, served)| served).collect();
        for served in open {
            served.writer.stop(RUNTIME_STOP_GRACE);
        }
    }

    fn cached(&self, name: &str) -> Option<Arc<Served>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner).get(name).cloned()
    }

    fn open(&self, name: &str) -> Result<Arc<Served>, ApiError> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(served) = open.get(name) {
            return Ok(Arc::clone(served));
        }
        let journal = self.open_journal(name)?;
        let ns: Arc<dyn Namespace> = Arc::new(journal.clone());
        let served = Arc::new(Served { writer: NamespaceWriter::open(ns, self.store.dir())?, journal });
        open.insert(name.to_owned(), Arc::clone(&served));
        Ok(served)
    }

    fn open_journal(&self, name: &str) -> Result<JournalNamespace, ApiError> {
        let ns = self.store.journal_namespace(name)?;
        let report = ns.recovery_report();
        if report.needs_attention() {
            tracing::warn!(namespace = name, "namespace has damage or lost records: `varve fsck` lists them");
        }
        if let Some(torn) = &report.torn_tail {
            tracing::warn!(namespace = name, segment = %torn.segment.display(), offset = torn.offset, "cut a torn tail");
        }
        if let varve_log::CheckpointUse::Ignored { reason } = &report.checkpoint {
            tracing::info!(namespace = name, reason = %reason, "index checkpoint not used: replayed every frame");
        }
        tracing::debug!(namespace = name, seconds = report.duration.as_secs_f64(), checkpoint = ?report.checkpoint, "opened");
        Ok(ns)
    }

    /// Start `manifest`'s runtime as `varve run` does: host id from the
    /// manifest or the data directory, its socket in the namespace's
    /// directory (so external handlers and local CLI writes reach it).
    fn host_runtime(&self, manifest: &Manifest, builtins: &Builtins) -> Result<(), ApiError> {
        let name = &manifest.namespace;
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if open.contains_key(name) {
            return Err(LogError::InvalidArgument {
                reason: format!("two manifests run namespace {name}: one runtime per namespace"),
            }
            .into());
        }
        let journal = self.open_journal(name)?;
        let ns: Arc<dyn Namespace> = Arc::new(journal.clone());
        let data_dir = std::path::absolute(self.store.dir()).unwrap_or_else(|_| self.store.dir().to_path_buf());
        let host = match manifest.host {
            Some(host) => host,
            None => varve_runtime::host_id_for_dir(&data_dir)?,
        };
        let options = RuntimeOptions {
            host,
            socket: Some(data_dir.join(name).join(varve_runtime::socket::SOCKET_FILE)),
            data_dir: Some(data_dir),
            // The server serves journal namespaces only: it is their one writer.
            shared: None,
            ..manifest.options()
        };
        let runtime = manifest.builder(ns, builtins)?.options(options).start()?;
        tracing::info!(namespace = %name, host = %format!("{host:016x}"), handlers = manifest.handlers.len(), "runtime started");
        open.insert(name.clone(), Arc::new(Served { writer: NamespaceWriter::with_runtime(runtime), journal }));
        Ok(())
    }
}
