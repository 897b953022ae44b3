//! The namespaces a server holds open: it is the single writer of each one
//! it serves, and opens a namespace on its first request (a write creates it;
//! a read of a namespace that was never written is `namespace_not_found`).
//!
//! Appends that carry a request id are remembered in the namespace's
//! `_runtime.requests` log in the same batch as their records (see
//! `varve_runtime::requests`), so a client that lost an answer can send the
//! append again and it lands once, also across a restart. Remembering
//! predicts the seqs of the batch, so an identified append runs alone:
//! [`Served::order`] lets unidentified appends run together (sharing the
//! journal's group commit) and gives an identified one the namespace to itself.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use varve_log::{JournalNamespace, JournalOptions, JournalStore, LogError, Namespace, Seq, Store};
use varve_runtime::requests::{self, RequestMemory};
use varve_runtime::RequestId;

use crate::error::ApiError;

/// One namespace the server serves.
pub struct Served {
    /// The open journal; this server is its writer.
    pub ns: JournalNamespace,
    /// Unidentified appends share it (read), identified appends hold it alone (write).
    order: RwLock<()>,
    /// The ids of the last identified appends, loaded on the first one.
    requests: Mutex<Option<RequestMemory>>,
}

impl Served {
    /// Append a batch: once per request id when one is given. Blocks on the
    /// journal (fsync): call it from a blocking thread.
    pub fn append_batch(
        &self,
        batch: &[(&str, &[u8])],
        request: Option<&RequestId>,
        expected_latest: Option<Seq>,
    ) -> Result<(Vec<Seq>, bool), ApiError> {
        let Some(id) = request else {
            let _shared = self.order.read().unwrap_or_else(PoisonError::into_inner);
            let seqs = match expected_latest {
                Some(expected) => vec![self.ns.append_if(batch[0].0, expected, batch[0].1)?],
                None => self.ns.append_batch(batch)?,
            };
            return Ok((seqs, false));
        };
        let _alone = self.order.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(expected) = expected_latest {
            // A repeat answers before the check: the first attempt moved latest on.
            let remembered = self.with_memory(|memory| Ok(memory.recall(id).is_some()))?;
            if !remembered {
                let actual = self.ns.latest(batch[0].0)?;
                if actual != expected {
                    return Err(LogError::Conflict { log: batch[0].0.to_owned(), expected, actual }.into());
                }
            }
        }
        self.with_memory(|memory| {
            let appended = requests::append_batch_remembering(&self.ns, memory, id, batch)?;
            Ok((appended.seqs, appended.repeated))
        })
    }

    fn with_memory<T>(&self, f: impl FnOnce(&mut RequestMemory) -> Result<T, ApiError>) -> Result<T, ApiError> {
        let mut guard = self.requests.lock().unwrap_or_else(PoisonError::into_inner);
        if guard.is_none() {
            *guard = Some(requests::read_requests(&self.ns)?);
        }
        f(guard.get_or_insert_with(RequestMemory::default))
    }
}

/// Every namespace of the data directory, opened on demand.
pub struct Namespaces {
    store: JournalStore,
    open: Mutex<HashMap<String, Arc<Served>>>,
}

impl Namespaces {
    /// Serve the namespaces of `data`.
    pub fn new(data: PathBuf, options: JournalOptions) -> Result<Namespaces, LogError> {
        let store = JournalStore::open(data, JournalOptions { read_only: false, ..options })?;
        Ok(Namespaces { store, open: Mutex::default() })
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

    /// The namespace for a write, created if needed.
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

    /// Close every namespace (releasing their locks once no request holds them).
    pub fn close_all(&self) {
        self.open.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }

    fn cached(&self, name: &str) -> Option<Arc<Served>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner).get(name).cloned()
    }

    fn open(&self, name: &str) -> Result<Arc<Served>, ApiError> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(served) = open.get(name) {
            return Ok(Arc::clone(served));
        }
        let ns = self.store.journal_namespace(name)?;
        let report = ns.recovery_report();
        if report.needs_attention() {
            tracing::warn!(namespace = name, "namespace has damage or lost records: `varve fsck` lists them");
        }
        if let Some(torn) = &report.torn_tail {
            tracing::warn!(namespace = name, segment = %torn.segment.display(), offset = torn.offset, "cut a torn tail");
        }
        let served = Arc::new(Served { ns, order: RwLock::new(()), requests: Mutex::new(None) });
        open.insert(name.to_owned(), Arc::clone(&served));
        Ok(served)
    }
}
