//! The memory backend: for tests and ephemeral state. Nothing survives the
//! process; everything else in the contract holds. Logs are kept by an id
//! that a rename keeps, so scans and watches follow the log they opened.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use bytes::Bytes;

use crate::contract::{
    validate_name, Limits, LogConfig, LogInfo, Namespace, Record, Scan, Seq, SeqRange, Store, Watch,
};
use crate::error::{LogError, Result};
use crate::notify::{NotifiedWatch, Notifier};
use crate::rules;

/// A store whose namespaces live in memory.
#[derive(Default)]
pub struct MemoryStore {
    limits: Limits,
    namespaces: Mutex<BTreeMap<String, MemoryNamespace>>,
}

impl MemoryStore {
    /// An empty store whose namespaces enforce the default [`Limits`].
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store whose namespaces enforce `limits`.
    #[must_use]
    pub fn with_limits(limits: Limits) -> Self {
        MemoryStore { limits, ..Self::default() }
    }
}

impl Store for MemoryStore {
    fn namespace(&self, name: &str) -> Result<Arc<dyn Namespace>> {
        validate_name(name, true)?;
        let mut namespaces = self.namespaces.lock().unwrap_or_else(PoisonError::into_inner);
        let ns = namespaces.entry(name.to_owned()).or_insert_with(|| MemoryNamespace::new(name, self.limits));
        Ok(Arc::new(ns.clone()))
    }

    fn list_namespaces(&self) -> Result<Vec<String>> {
        Ok(self.namespaces.lock().unwrap_or_else(PoisonError::into_inner).keys().cloned().collect())
    }
}

struct MemoryLog {
    name: String,
    config: LogConfig,
    latest: Seq,
    /// Records `earliest..=latest`, oldest first.
    records: VecDeque<Bytes>,
}

impl MemoryLog {
    fn earliest(&self) -> Seq {
        if self.records.is_empty() {
            0
        } else {
            self.latest + 1 - self.records.len() as u64
        }
    }

    fn info(&self) -> LogInfo {
        LogInfo { name: self.name.clone(), config: self.config, earliest: self.earliest(), latest: self.latest }
    }

    fn push(&mut self, value: Bytes) -> Seq {
        self.latest += 1;
        self.records.push_back(value);
        let keep_from = rules::earliest_kept(self.config.retention, self.latest);
        while self.earliest() < keep_from {
            self.records.pop_front();
        }
        self.latest
    }

    /// Drop the records below `before` (checked by `rules::check_trim`, so
    /// the newest stays).
    fn trim(&mut self, before: Seq) {
        while self.earliest() < before {
            self.records.pop_front();
        }
    }

    fn get(&self, seq: Seq) -> Result<Bytes> {
        rules::check_readable(&self.name, seq, self.earliest(), self.latest)?;
        let index = usize::try_from(seq - self.earliest()).expect("in-memory index fits usize");
        Ok(self.records[index].clone())
    }
}

/// A log's identity for the life of the namespace: never reused, kept
/// across renames, so that scans and watches follow the log they opened.
type LogId = u64;

/// The logs of a namespace, found by name and by id.
///
/// Invariant: `by_name` maps each log's `name` to its id, and nothing else.
#[derive(Default)]
struct Logs {
    /// foldhash, as the journal's catalog (see `journal::catalog`).
    by_name: HashMap<String, LogId, foldhash::fast::RandomState>,
    by_id: HashMap<LogId, MemoryLog, foldhash::fast::RandomState>,
    next_id: LogId,
}

impl Logs {
    fn get(&self, name: &str) -> Option<&MemoryLog> {
        self.by_id.get(self.by_name.get(name)?)
    }
}

/// One namespace of a [`MemoryStore`]. Cheap to clone; clones share state.
#[derive(Clone)]
pub struct MemoryNamespace {
    shared: Arc<Shared>,
}

struct Shared {
    name: String,
    limits: Limits,
    logs: RwLock<Logs>,
    notifier: Arc<Notifier>,
}

impl MemoryNamespace {
    /// A standalone namespace, not attached to any store.
    #[must_use]
    pub fn new(name: &str, limits: Limits) -> Self {
        let shared = Shared { name: name.to_owned(), limits, logs: RwLock::default(), notifier: Arc::default() };
        MemoryNamespace { shared: Arc::new(shared) }
    }
}

impl Shared {
    fn not_found(&self, log: &str) -> LogError {
        LogError::LogNotFound { namespace: self.name.clone(), log: log.to_owned() }
    }

    fn read<T>(&self, log: &str, f: impl FnOnce(&MemoryLog) -> Result<T>) -> Result<T> {
        let logs = self.logs.read().unwrap_or_else(PoisonError::into_inner);
        f(logs.get(log).ok_or_else(|| self.not_found(log))?)
    }

    /// The id of the log named `log` now.
    fn id_of(&self, log: &str) -> Result<LogId> {
        let logs = self.logs.read().unwrap_or_else(PoisonError::into_inner);
        logs.by_name.get(log).copied().ok_or_else(|| self.not_found(log))
    }

    /// Read the log `id` (whatever its name now); `opened_as` names it in
    /// the error once it is deleted.
    fn read_id<T>(&self, id: LogId, opened_as: &str, f: impl FnOnce(&MemoryLog) -> Result<T>) -> Result<T> {
        let logs = self.logs.read().unwrap_or_else(PoisonError::into_inner);
        f(logs.by_id.get(&id).ok_or_else(|| self.not_found(opened_as))?)
    }

    fn append_checked(&self, batch: &[(&str, &[u8])], expect: rules::Expect<'_>) -> Result<Vec<Seq>> {
        rules::check_batch(&self.limits, batch)?;
        let mut logs = self.logs.write().unwrap_or_else(PoisonError::into_inner);
        let ids_and_seqs = rules::assign_seqs(batch, expect, |log| {
            let id = *logs.by_name.get(log).ok_or_else(|| self.not_found(log))?;
            let state = &logs.by_id[&id];
            Ok((id, rules::LogBounds { latest: state.latest, retention: state.config.retention }))
        })?;
        let seqs = batch
            .iter()
            .zip(ids_and_seqs)
            .map(|((_, value), (id, _))| {
                logs.by_id.get_mut(&id).expect("checked above").push(Bytes::copy_from_slice(value))
            })
            .collect();
        drop(logs);
        self.notifier.notify();
        Ok(seqs)
    }
}

impl Namespace for MemoryNamespace {
    fn name(&self) -> &str {
        &self.shared.name
    }

    fn create_log(&self, log: &str, config: LogConfig) -> Result<()> {
        rules::check_create(log, &config)?;
        let mut logs = self.shared.logs.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(existing) = logs.get(log) {
            return rules::check_recreate(log, &existing.config, &config);
        }
        let id = logs.next_id;
        logs.next_id += 1;
        logs.by_name.insert(log.to_owned(), id);
        logs.by_id.insert(id, MemoryLog { name: log.to_owned(), config, latest: 0, records: VecDeque::new() });
        Ok(())
    }

    fn delete_log(&self, log: &str) -> Result<()> {
        let mut logs = self.shared.logs.write().unwrap_or_else(PoisonError::into_inner);
        let id = logs.by_name.remove(log).ok_or_else(|| self.shared.not_found(log))?;
        logs.by_id.remove(&id);
        drop(logs);
        self.shared.notifier.notify();
        Ok(())
    }

    fn rename_logs(&self, renames: &[(&str, &str)]) -> Result<()> {
        let mut logs = self.shared.logs.write().unwrap_or_else(PoisonError::into_inner);
        rules::check_renames(&self.shared.name, renames, |name| logs.by_name.contains_key(name))?;
        let ids: Vec<LogId> = renames.iter().map(|(from, _)| logs.by_name[*from]).collect();
        // Free every old name first, so that a swap or shift finds its targets free.
        for (from, _) in renames {
            logs.by_name.remove(*from);
        }
        for ((_, to), id) in renames.iter().zip(ids) {
            let previous = logs.by_name.insert((*to).to_owned(), id);
            debug_assert!(previous.is_none(), "check_renames: every target is free or freed");
            let log = logs.by_id.get_mut(&id).expect("by_name points at existing logs");
            (*to).clone_into(&mut log.name);
            log.config = rules::config_renamed(log.config, to);
        }
        drop(logs);
        self.shared.notifier.notify();
        Ok(())
    }

    fn trim(&self, log: &str, before: Seq) -> Result<Seq> {
        let mut logs = self.shared.logs.write().unwrap_or_else(PoisonError::into_inner);
        let id = *logs.by_name.get(log).ok_or_else(|| self.shared.not_found(log))?;
        let state = logs.by_id.get_mut(&id).expect("by_name points at existing logs");
        if let Some(before) = rules::check_trim(log, state.config.retention, before, state.earliest(), state.latest)? {
            state.trim(before);
        }
        Ok(state.earliest())
    }

    fn list_logs(&self) -> Result<Vec<LogInfo>> {
        let logs = self.shared.logs.read().unwrap_or_else(PoisonError::into_inner);
        let mut infos: Vec<LogInfo> = logs.by_id.values().map(MemoryLog::info).collect();
        infos.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(infos)
    }

    fn log_info(&self, log: &str) -> Result<LogInfo> {
        self.shared.read(log, |state| Ok(state.info()))
    }

    fn append_batch(&self, batch: &[(&str, &[u8])]) -> Result<Vec<Seq>> {
        self.shared.append_checked(batch, rules::Expect::Nothing)
    }

    fn append_if(&self, log: &str, expected_latest: Seq, value: &[u8]) -> Result<Seq> {
        Ok(self.shared.append_checked(&[(log, value)], rules::Expect::Latest(expected_latest))?[0])
    }

    fn append_batch_if(&self, batch: &[(&str, &[u8])], expected: &[(&str, Seq)]) -> Result<Vec<Seq>> {
        self.shared.append_checked(batch, rules::Expect::Each(expected))
    }

    fn get(&self, log: &str, seq: Seq) -> Result<Bytes> {
        self.shared.read(log, |state| state.get(seq))
    }

    fn scan(&self, log: &str, range: SeqRange) -> Result<Scan<'_>> {
        let id = self.shared.id_of(log)?;
        let bounds = self
            .shared
            .read_id(id, log, |state| rules::clip_scan(log, range.first, range.last, state.earliest(), state.latest))?;
        let Some((first, last)) = bounds else { return Ok(Box::new(std::iter::empty())) };
        let log = log.to_owned();
        // By id: the scan reads the log it opened, whatever it is renamed to.
        Ok(Box::new(
            (first..=last).map(move |seq| Ok(Record { seq, value: self.shared.read_id(id, &log, |s| s.get(seq))? })),
        ))
    }

    fn watch(&self, log: &str, from: Seq) -> Result<Watch> {
        let id = self.shared.id_of(log)?;
        let shared = self.shared.clone();
        let log = log.to_owned();
        // By id: the watch follows the log it opened across renames.
        let fetch = Box::new(move |seq| {
            shared.read_id(id, &log, |state| {
                if seq > state.latest {
                    return Ok(None);
                }
                Ok(Some(Record { seq, value: state.get(seq)? }))
            })
        });
        let source = NotifiedWatch { fetch, notifier: self.shared.notifier.clone(), poll: None };
        Ok(Watch::new(Box::new(source), from))
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }
}
