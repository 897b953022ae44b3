//! `Namespace` wrappers for testing and measuring structures on any backend.
//!
//! - [`FaultyNamespace`] injects the paper's failures (§IV-A, C4): an append
//!   that fails before it is written (Type 1), one that is written but whose
//!   acknowledgement is lost (Type 2), and a *stop*: from a chosen write on,
//!   every call fails, as if the process died between two appends.
//! - [`CountingNamespace`] counts reads (`get`, `latest`) and appended bytes,
//!   to check that a find reads a bounded number of entries per node (C2) and
//!   to measure bytes stored per update (Figure 4).
//!
//! ```
//! use std::sync::Arc;
//! use varve_log::{Limits, MemoryNamespace, Namespace};
//! use varve_pds::testing::FaultyNamespace;
//! use varve_pds::{Options, VersionedList};
//!
//! let memory: Arc<dyn Namespace> = Arc::new(MemoryNamespace::new("t", Limits::default()));
//! let faulty = FaultyNamespace::new(memory.clone());
//! faulty.lose_ack(faulty.writes() + 3); // some append of the next update
//! let mut list: VersionedList<u64> = VersionedList::open(faulty.clone(), "l", Options::default())?;
//! list.push_back(&1)?; // retried, recognised as written, not duplicated
//! assert_eq!(list.iter(None)?.collect::<Vec<_>>(), vec![1]);
//! # Ok::<(), varve_pds::PdsError>(())
//! ```

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use varve_log::{LogConfig, LogError, LogInfo, Namespace, Scan, Seq, SeqRange, Watch, RECORD_OVERHEAD_BYTES};

#[derive(Default)]
struct Faults {
    /// Writes (create, append, append_if, append_batch) attempted so far.
    writes: u64,
    fail_before: BTreeSet<u64>,
    lose_ack: BTreeSet<u64>,
    stop_at: Option<u64>,
    stopped: bool,
    injected: u64,
}

/// A namespace that injects failures into the writes of another. Writes
/// are numbered from 0 in the order they are attempted (retries count).
pub struct FaultyNamespace {
    inner: Arc<dyn Namespace>,
    faults: Mutex<Faults>,
}

fn injected(what: &str) -> LogError {
    LogError::Io { context: format!("injected fault: {what}"), source: std::io::Error::other("injected") }
}

enum Step {
    Pass,
    FailBefore,
    LoseAck,
}

impl FaultyNamespace {
    /// Wrap `inner`; every write passes until a fault is armed.
    #[must_use]
    pub fn new(inner: Arc<dyn Namespace>) -> Arc<FaultyNamespace> {
        Arc::new(FaultyNamespace { inner, faults: Mutex::default() })
    }

    fn faults(&self) -> std::sync::MutexGuard<'_, Faults> {
        self.faults.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes attempted so far (the index the next write gets).
    pub fn writes(&self) -> u64 {
        self.faults().writes
    }

    /// Faults injected so far.
    pub fn injected(&self) -> u64 {
        self.faults().injected
    }

    /// Type 1: write number `index` fails without being written.
    pub fn fail_before(&self, index: u64) {
        self.faults().fail_before.insert(index);
    }

    /// Type 2: write number `index` is written, then reports an error.
    pub fn lose_ack(&self, index: u64) {
        self.faults().lose_ack.insert(index);
    }

    /// Stop: write number `index` and every call after it fail, as if the
    /// process had died just before that write.
    pub fn stop_at(&self, index: u64) {
        self.faults().stop_at = Some(index);
    }

    /// Whether a stop has happened.
    pub fn stopped(&self) -> bool {
        self.faults().stopped
    }

    fn check_alive(&self) -> Result<(), LogError> {
        if self.faults().stopped {
            Err(injected("stopped"))
        } else {
            Ok(())
        }
    }

    fn next_write(&self) -> Result<Step, LogError> {
        let mut f = self.faults();
        if f.stopped {
            return Err(injected("stopped"));
        }
        let index = f.writes;
        f.writes += 1;
        if f.stop_at == Some(index) {
            f.stopped = true;
            f.injected += 1;
            return Err(injected("stopped"));
        }
        if f.fail_before.remove(&index) {
            f.injected += 1;
            return Ok(Step::FailBefore);
        }
        if f.lose_ack.remove(&index) {
            f.injected += 1;
            return Ok(Step::LoseAck);
        }
        Ok(Step::Pass)
    }

    fn write<T>(&self, what: &str, op: impl FnOnce() -> Result<T, LogError>) -> Result<T, LogError> {
        match self.next_write()? {
            Step::Pass => op(),
            Step::FailBefore => Err(injected(&format!("{what} failed before writing (type 1)"))),
            Step::LoseAck => {
                op()?;
                Err(injected(&format!("{what} written, acknowledgement lost (type 2)")))
            }
        }
    }
}

impl Namespace for FaultyNamespace {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn create_log(&self, log: &str, config: LogConfig) -> Result<(), LogError> {
        self.write("create_log", || self.inner.create_log(log, config))
    }
    fn delete_log(&self, log: &str) -> Result<(), LogError> {
        self.write("delete_log", || self.inner.delete_log(log))
    }
    fn rename_logs(&self, renames: &[(&str, &str)]) -> Result<(), LogError> {
        self.write("rename_logs", || self.inner.rename_logs(renames))
    }
    fn trim(&self, log: &str, before: Seq) -> Result<Seq, LogError> {
        self.write("trim", || self.inner.trim(log, before))
    }
    fn list_logs(&self) -> Result<Vec<LogInfo>, LogError> {
        self.check_alive()?;
        self.inner.list_logs()
    }
    fn log_info(&self, log: &str) -> Result<LogInfo, LogError> {
        self.check_alive()?;
        self.inner.log_info(log)
    }
    fn append(&self, log: &str, value: &[u8]) -> Result<Seq, LogError> {
        self.write("append", || self.inner.append(log, value))
    }
    fn append_batch(&self, batch: &[(&str, &[u8])]) -> Result<Vec<Seq>, LogError> {
        self.write("append_batch", || self.inner.append_batch(batch))
    }
    fn append_if(&self, log: &str, expected_latest: Seq, value: &[u8]) -> Result<Seq, LogError> {
        self.write("append_if", || self.inner.append_if(log, expected_latest, value))
    }
    fn append_batch_if(&self, batch: &[(&str, &[u8])], expected: &[(&str, Seq)]) -> Result<Vec<Seq>, LogError> {
        self.write("append_batch_if", || self.inner.append_batch_if(batch, expected))
    }
    fn get(&self, log: &str, seq: Seq) -> Result<Bytes, LogError> {
        self.check_alive()?;
        self.inner.get(log, seq)
    }
    fn latest(&self, log: &str) -> Result<Seq, LogError> {
        self.check_alive()?;
        self.inner.latest(log)
    }
    fn earliest(&self, log: &str) -> Result<Seq, LogError> {
        self.check_alive()?;
        self.inner.earliest(log)
    }
    fn scan(&self, log: &str, range: SeqRange) -> Result<Scan<'_>, LogError> {
        self.check_alive()?;
        self.inner.scan(log, range)
    }
    fn watch(&self, log: &str, from: Seq) -> Result<Watch, LogError> {
        self.check_alive()?;
        self.inner.watch(log, from)
    }
    fn sync(&self) -> Result<(), LogError> {
        self.check_alive()?;
        self.inner.sync()
    }
}

/// What a [`CountingNamespace`] has seen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// `get` calls, failed ones included.
    pub gets: u64,
    /// `latest`, `earliest` and `log_info` calls.
    pub latests: u64,
    /// `scan` calls (structures never scan: this stays 0).
    pub scans: u64,
    /// Records appended successfully (each record of a batch counts once).
    pub appends: u64,
    /// Bytes of appended records, plus `RECORD_OVERHEAD_BYTES` each (the
    /// journal's per-record framing), so comparable across backends.
    pub bytes_appended: u64,
    /// Payload bytes only.
    pub payload_bytes: u64,
}

/// A namespace that counts the calls made to another.
pub struct CountingNamespace {
    inner: Arc<dyn Namespace>,
    gets: AtomicU64,
    latests: AtomicU64,
    scans: AtomicU64,
    appends: AtomicU64,
    bytes: AtomicU64,
    payload: AtomicU64,
}

impl CountingNamespace {
    /// Wrap `inner`, with every count at 0.
    #[must_use]
    pub fn new(inner: Arc<dyn Namespace>) -> Arc<CountingNamespace> {
        Arc::new(CountingNamespace {
            inner,
            gets: AtomicU64::new(0),
            latests: AtomicU64::new(0),
            scans: AtomicU64::new(0),
            appends: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            payload: AtomicU64::new(0),
        })
    }

    /// The counts so far.
    pub fn counts(&self) -> Counts {
        Counts {
            gets: self.gets.load(Ordering::Relaxed),
            latests: self.latests.load(Ordering::Relaxed),
            scans: self.scans.load(Ordering::Relaxed),
            appends: self.appends.load(Ordering::Relaxed),
            bytes_appended: self.bytes.load(Ordering::Relaxed),
            payload_bytes: self.payload.load(Ordering::Relaxed),
        }
    }

    /// Reads (`get` + `latest`-like calls) so far.
    pub fn reads(&self) -> u64 {
        let c = self.counts();
        c.gets + c.latests + c.scans
    }

    fn count_append(&self, len: usize) {
        self.appends.fetch_add(1, Ordering::Relaxed);
        self.payload.fetch_add(len as u64, Ordering::Relaxed);
        self.bytes.fetch_add(len as u64 + RECORD_OVERHEAD_BYTES, Ordering::Relaxed);
    }
}

impl Namespace for CountingNamespace {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn create_log(&self, log: &str, config: LogConfig) -> Result<(), LogError> {
        self.inner.create_log(log, config)
    }
    fn delete_log(&self, log: &str) -> Result<(), LogError> {
        self.inner.delete_log(log)
    }
    fn rename_logs(&self, renames: &[(&str, &str)]) -> Result<(), LogError> {
        self.inner.rename_logs(renames)
    }
    fn trim(&self, log: &str, before: Seq) -> Result<Seq, LogError> {
        self.inner.trim(log, before)
    }
    fn list_logs(&self) -> Result<Vec<LogInfo>, LogError> {
        self.inner.list_logs()
    }
    fn log_info(&self, log: &str) -> Result<LogInfo, LogError> {
        self.latests.fetch_add(1, Ordering::Relaxed);
        self.inner.log_info(log)
    }
    fn append(&self, log: &str, value: &[u8]) -> Result<Seq, LogError> {
        let seq = self.inner.append(log, value)?;
        self.count_append(value.len());
        Ok(seq)
    }
    fn append_batch(&self, batch: &[(&str, &[u8])]) -> Result<Vec<Seq>, LogError> {
        let seqs = self.inner.append_batch(batch)?;
        for (_, value) in batch {
            self.count_append(value.len());
        }
        Ok(seqs)
    }
    fn append_if(&self, log: &str, expected_latest: Seq, value: &[u8]) -> Result<Seq, LogError> {
        let seq = self.inner.append_if(log, expected_latest, value)?;
        self.count_append(value.len());
        Ok(seq)
    }
    fn append_batch_if(&self, batch: &[(&str, &[u8])], expected: &[(&str, Seq)]) -> Result<Vec<Seq>, LogError> {
        let seqs = self.inner.append_batch_if(batch, expected)?;
        for (_, value) in batch {
            self.count_append(value.len());
        }
        Ok(seqs)
    }
    fn get(&self, log: &str, seq: Seq) -> Result<Bytes, LogError> {
        self.gets.fetch_add(1, Ordering::Relaxed);
        self.inner.get(log, seq)
    }
    fn latest(&self, log: &str) -> Result<Seq, LogError> {
        self.latests.fetch_add(1, Ordering::Relaxed);
        self.inner.latest(log)
    }
    fn earliest(&self, log: &str) -> Result<Seq, LogError> {
        self.latests.fetch_add(1, Ordering::Relaxed);
        self.inner.earliest(log)
    }
    fn scan(&self, log: &str, range: SeqRange) -> Result<Scan<'_>, LogError> {
        self.scans.fetch_add(1, Ordering::Relaxed);
        self.inner.scan(log, range)
    }
    fn watch(&self, log: &str, from: Seq) -> Result<Watch, LogError> {
        self.inner.watch(log, from)
    }
    fn sync(&self) -> Result<(), LogError> {
        self.inner.sync()
    }
}
