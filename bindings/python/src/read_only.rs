//! [`ReadOnlyNamespace`]: a namespace of a remote store opened with
//! `read_only=True`.
//!
//! A read-only journal handle refuses writes itself (it holds no writer
//! lock). A server cannot tell a read-only client from another one when its
//! token allows writes, so this wrapper refuses them before anything is sent,
//! with the same `ReadOnly` error and operation phrases as the journal
//! (`varve_log::journal`), and passes reads through.

use std::sync::Arc;

use bytes::Bytes;
use varve_log::{LogConfig, LogError, LogInfo, Namespace, Result, Scan, Seq, SeqRange, Watch};

/// Reads of the wrapped namespace; `ReadOnly` for every write.
pub(crate) struct ReadOnlyNamespace {
    inner: Arc<dyn Namespace>,
}

impl ReadOnlyNamespace {
    pub(crate) fn new(inner: Arc<dyn Namespace>) -> ReadOnlyNamespace {
        ReadOnlyNamespace { inner }
    }

    fn refuse<T>(&self, operation: &'static str) -> Result<T> {
        Err(LogError::ReadOnly { namespace: self.inner.name().to_owned(), operation })
    }
}

impl Namespace for ReadOnlyNamespace {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn create_log(&self, _log: &str, _config: LogConfig) -> Result<()> {
        self.refuse("create a log")
    }

    fn delete_log(&self, _log: &str) -> Result<()> {
        self.refuse("delete a log")
    }

    fn rename_logs(&self, _renames: &[(&str, &str)]) -> Result<()> {
        self.refuse("rename logs")
    }

    fn trim(&self, _log: &str, _before: Seq) -> Result<Seq> {
        self.refuse("trim a log")
    }

    fn list_logs(&self) -> Result<Vec<LogInfo>> {
        self.inner.list_logs()
    }

    fn log_info(&self, log: &str) -> Result<LogInfo> {
        self.inner.log_info(log)
    }

    fn append_batch(&self, _batch: &[(&str, &[u8])]) -> Result<Vec<Seq>> {
        self.refuse("append")
    }

    fn append_if(&self, _log: &str, _expected_latest: Seq, _value: &[u8]) -> Result<Seq> {
        self.refuse("append")
    }

    fn append_batch_if(&self, _batch: &[(&str, &[u8])], _expected: &[(&str, Seq)]) -> Result<Vec<Seq>> {
        self.refuse("append")
    }

    fn get(&self, log: &str, seq: Seq) -> Result<Bytes> {
        self.inner.get(log, seq)
    }

    fn latest(&self, log: &str) -> Result<Seq> {
        self.inner.latest(log)
    }

    fn earliest(&self, log: &str) -> Result<Seq> {
        self.inner.earliest(log)
    }

    fn scan(&self, log: &str, range: SeqRange) -> Result<Scan<'_>> {
        self.inner.scan(log, range)
    }

    fn watch(&self, log: &str, from: Seq) -> Result<Watch> {
        self.inner.watch(log, from)
    }

    /// Nothing was written through this handle, so there is nothing to make
    /// durable (as a read-only journal handle's `sync`).
    fn sync(&self) -> Result<()> {
        Ok(())
    }
}
