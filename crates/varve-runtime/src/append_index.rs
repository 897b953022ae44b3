//! The index beside `_events` that finds a record's APPEND event without
//! reading the whole event log: what makes "what caused this record?"
//! cost O(answer), not O(events kept).
//!
//! **What is written.** For each log `L` the runtime appends to, a system
//! log `_runtime.appends.L` of *entries* `(seq in L, seq in _events of its
//! APPEND)`, 16 bytes each. The runtime writes an entry in the batch of an
//! append (so it is on disk exactly when the record and its APPEND are)
//! when `L` has no entry from this runtime yet, or its last one is at least
//! [`STRIDE`] events back. Both seqs grow along the index: a hot log costs
//! one entry per [`STRIDE`] events, a log appended less often one per append.
//! `_runtime.index` holds the `_events` seq from which every APPEND has its
//! entries (the first runtime of this version to serve the namespace wrote
//! it; events before it are found by a scan).
//!
//! **Invariant** (why a lookup reads at most [`STRIDE`] events): an APPEND
//! of `(L, s)` at event `e` has an entry `(s', e')` with `s' <= s` and
//! `e - e' < STRIDE` — the writer wrote one at `e` or had written one less
//! than [`STRIDE`] events before. So the last entry at or below `s`, `(sᵢ,
//! eᵢ)`, has `eᵢ <= e < eᵢ + STRIDE` (and `e` is below the next entry's
//! event). Several runtimes sharing a namespace each keep the invariant for
//! their own appends, so it holds for all — as long as none deletes a log
//! the others append to (their memory of its entries outlives the index).
//!
//! Records appended straight to the log (no runtime) have no APPEND event
//! and no entry: a lookup says so after its bounded scan. A log deleted
//! through the runtime, a [`crate::NamespaceWriter`] or `varve log rm`
//! loses its index first. An index left by an earlier log of the same name
//! anyway is started afresh at the next entry (`prepare_index_logs`), so a
//! lookup never lands on the old log's APPENDs. Event retention trims the
//! entries whose events it trimmed, keeping the last one below.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;

use varve_log::codec::ByteReader;
use varve_log::{LogConfig, LogError, Namespace, Seq, SeqRange, NAME_BYTES_MAX};

use crate::error::{Result, RuntimeError};
use crate::event::{peek_header, Event, EventId, EventKind, HostId, StoredEvent};
use crate::system_logs::{namespace_host, EVENTS_LOG};

/// Prefix of a log's index (a runtime log: see `system_logs::is_runtime_log`).
pub const APPENDS_PREFIX: &str = "_runtime.appends.";
/// The `_events` seq from which every APPEND is indexed (u64 LE; the first record counts).
pub const INDEX_SINCE_LOG: &str = "_runtime.index";
/// At most this many events lie between an APPEND and its log's entry at or before it.
pub const STRIDE: Seq = 128;
/// How many times a lookup starts again after event retention trimmed the
/// index entries it was reading (each time means another trim ran meanwhile).
const TRIMMED_ATTEMPTS_MAX: u32 = 8;

/// The index log of `log`, or `None` when the name would be too long (a
/// log name over 183 bytes: its APPENDs are found by a scan).
#[must_use]
pub fn appends_log(log: &str) -> Option<String> {
    (APPENDS_PREFIX.len() + log.len() <= NAME_BYTES_MAX).then(|| format!("{APPENDS_PREFIX}{log}"))
}

fn encode_entry(seq: Seq, event: Seq) -> [u8; 16] {
    let mut bytes = [0; 16];
    bytes[..8].copy_from_slice(&seq.to_le_bytes());
    bytes[8..].copy_from_slice(&event.to_le_bytes());
    bytes
}

fn decode_entry(bytes: &[u8], log: &str, at: Seq) -> Result<(Seq, Seq)> {
    let mut reader = ByteReader::new(bytes);
    let entry = reader.u64().and_then(|seq| Ok((seq, reader.u64()?))).and_then(|e| reader.finish().map(|()| e));
    entry.map_err(|_| RuntimeError::InvalidArgument {
        reason: format!("{log} seq {at} is not an index entry (16 bytes): the namespace's index is damaged"),
    })
}

/// The writer's side: the event seq of the last entry it wrote per log.
#[derive(Default)]
pub(crate) struct IndexWriter {
    last_entry: HashMap<String, Seq>,
}

/// Entries one batch adds: `(index log, entry)`.
pub(crate) type Entries = Vec<(String, [u8; 16])>;

impl IndexWriter {
    /// The entries for a batch whose records `(log, seq)` have their APPENDs
    /// at the given event seqs (in batch order).
    pub(crate) fn entries<'a>(&self, appends: impl Iterator<Item = (&'a str, Seq, Seq)>) -> Entries {
        let mut out: Entries = Vec::new();
        // This batch's entries so far, by log (a batch has few): a batch may
        // span more than STRIDE events, and each record must be within
        // STRIDE of an entry at or before it.
        let mut written: Vec<(&str, Seq)> = Vec::new();
        // The previous record's log and its last entry: records of one log
        // usually come together, and then no lookup is needed.
        let mut previous: Option<(&str, Option<Seq>)> = None;
        for (log, seq, event) in appends {
            let last = match previous {
                Some((p, last)) if p == log => last,
                _ => written
                    .iter()
                    .rev()
                    .find(|(l, _)| *l == log)
                    .map(|&(_, e)| e)
                    .or_else(|| self.last_entry.get(log).copied()),
            };
            previous = Some((log, last));
            if last.is_some_and(|last| event.saturating_sub(last) < STRIDE) {
                continue;
            }
            let Some(name) = appends_log(log) else { continue };
            out.push((name, encode_entry(seq, event)));
            written.push((log, event));
            previous = Some((log, Some(event)));
        }
        out
    }

    /// Note the entries of a batch that landed.
    pub(crate) fn landed(&mut self, entries: &Entries) {
        for (name, entry) in entries {
            let event = u64::from_le_bytes(entry[8..].try_into().expect("16-byte entry"));
            self.last_entry.insert(name[APPENDS_PREFIX.len()..].to_owned(), event);
        }
    }

    /// Forget `log` (deleted: a log created again under its name starts a new index).
    pub(crate) fn forget(&mut self, log: &str) {
        self.last_entry.remove(log);
    }
}

/// Make ready the index logs a batch's entries go to (before the batch;
/// about one call per 128 events of a log): create a missing one, and start
/// afresh one whose last entry is not below the new entry's seq — an index
/// left by an earlier log of the same name (deleted or renamed without its
/// index, or by another runtime sharing the namespace), whose entries would
/// send lookups to that log's APPENDs.
pub(crate) fn prepare_index_logs(ns: &dyn Namespace, entries: &Entries) -> Result<()> {
    for (i, (name, entry)) in entries.iter().enumerate() {
        if entries[..i].iter().any(|(n, _)| n == name) {
            continue; // a later entry of this batch, above the first
        }
        let seq = u64::from_le_bytes(entry[..8].try_into().expect("16-byte entry"));
        match ns.log_info(name) {
            Err(LogError::LogNotFound { .. }) => ns.create_log(name, LogConfig::unbounded().system())?,
            Err(e) => return Err(e.into()),
            Ok(info) if info.latest > 0 => {
                let stale = match decode_entry(&ns.get(name, info.latest)?, name, info.latest) {
                    Ok((last, _)) => last >= seq,
                    Err(_) => true, // damaged: start afresh rather than mislead lookups
                };
                if stale {
                    ns.delete_log(name)?;
                    ns.create_log(name, LogConfig::unbounded().system())?;
                }
            }
            Ok(_) => {}
        }
    }
    Ok(())
}

/// Mark where indexing starts, unless a runtime already did (at start).
pub(crate) fn mark_index_start(ns: &dyn Namespace) -> Result<()> {
    ns.create_log(INDEX_SINCE_LOG, LogConfig::unbounded().system())?;
    if ns.latest(INDEX_SINCE_LOG)? == 0 {
        let since = ns.latest(EVENTS_LOG)? + 1;
        ns.append(INDEX_SINCE_LOG, &since.to_le_bytes())?;
    }
    Ok(())
}

/// Delete `log`'s index, if it has one (before the log itself: see the module docs).
pub fn delete_index(ns: &dyn Namespace, log: &str) -> Result<()> {
    let Some(name) = appends_log(log) else { return Ok(()) };
    match ns.delete_log(&name) {
        Ok(()) | Err(LogError::LogNotFound { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Trim every index's entries whose events are below `earliest` (trimmed
/// from `_events`), keeping the last such entry: the lookups of records
/// appended after it start from it. Returns the entries trimmed.
pub(crate) fn trim_indexes(ns: &dyn Namespace, earliest: Seq) -> Result<u64> {
    let mut trimmed = 0;
    for info in ns.list_logs()? {
        if !info.name.starts_with(APPENDS_PREFIX) {
            continue;
        }
        let name = &info.name;
        let (first, last) = (info.earliest.max(1), info.latest);
        // The last entry whose event is below `earliest` (binary search: events grow along the index).
        let (mut lo, mut hi, mut keep_from) = (first, last, first);
        while lo <= hi {
            let mid = lo + (hi - lo) / 2;
            let bytes = match ns.get(name, mid) {
                Ok(bytes) => bytes,
                // Deleted or trimmed meanwhile (its log was deleted): the others still get trimmed.
                Err(LogError::LogNotFound { .. } | LogError::Trimmed { .. } | LogError::SeqNotFound { .. }) => break,
                Err(e) => return Err(e.into()),
            };
            let (_, event) = decode_entry(&bytes, name, mid)?;
            if event < earliest {
                keep_from = mid;
                lo = mid + 1;
            } else {
                hi = mid - 1;
            }
        }
        if keep_from > first {
            match ns.trim(name, keep_from) {
                Ok(_) => trimmed += keep_from - first,
                Err(LogError::LogNotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(trimmed)
}

/// Reads one namespace's events by seq and finds APPENDs through the index.
/// Read-only handles work. Every lookup reads O(log entries) index records
/// and at most [`STRIDE`] events (see the module docs), except for the
/// records appended before the index started (a scan of the events before
/// it) and for logs whose names are too long to index (a scan of all).
pub struct EventIndex {
    ns: Arc<dyn Namespace>,
    host: HostId,
    /// Every APPEND at or after this event seq has its entries.
    since: Seq,
    earliest: Seq,
    latest: Seq,
    /// Whether a repair wrote REPAIR events here (`_repairs` exists).
    repaired: bool,
    /// Records read from `_events` and the indexes (what a lookup costs).
    reads: std::cell::Cell<u64>,
    /// The namespace's REPAIR events, once looked for (`repairs_of`).
    repairs: std::cell::OnceCell<Vec<StoredEvent>>,
}

impl EventIndex {
    /// The index of `ns`, or `None` when no runtime has served it (no `_events`).
    pub fn open(ns: Arc<dyn Namespace>) -> Result<Option<EventIndex>> {
        let (earliest, latest) = match ns.log_info(EVENTS_LOG) {
            Ok(info) => (info.earliest.max(1), info.latest),
            Err(LogError::LogNotFound { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let since = match ns.log_info(INDEX_SINCE_LOG) {
            Ok(info) if info.latest > 0 => {
                let bytes = ns.get(INDEX_SINCE_LOG, info.earliest.max(1))?;
                let mut reader = ByteReader::new(&bytes);
                reader.u64().and_then(|v| reader.finish().map(|()| v)).map_err(|_| RuntimeError::InvalidArgument {
                    reason: format!("{INDEX_SINCE_LOG} does not hold a seq: the namespace's index is damaged"),
                })?
            }
            Ok(_) | Err(LogError::LogNotFound { .. }) => Seq::MAX, // written before the index existed
            Err(e) => return Err(e.into()),
        };
        let repaired = ns.log_info("_repairs").is_ok();
        let host = namespace_host(ns.as_ref())?.unwrap_or(0);
        Ok(Some(EventIndex {
            ns,
            host,
            since,
            earliest,
            latest,
            repaired,
            reads: std::cell::Cell::new(0),
            repairs: std::cell::OnceCell::new(),
        }))
    }

    /// Records read from `_events` and the index logs so far.
    #[must_use]
    pub fn records_read(&self) -> u64 {
        self.reads.get()
    }

    fn count(&self) {
        self.reads.set(self.reads.get() + 1);
    }

    /// The namespace's name.
    #[must_use]
    pub fn namespace(&self) -> &str {
        self.ns.name()
    }

    /// The earliest event kept.
    #[must_use]
    pub fn earliest(&self) -> Seq {
        self.earliest
    }

    /// The event at `seq`, if it is kept (and was there when this index was opened).
    pub fn event(&self, seq: Seq) -> Result<Option<StoredEvent>> {
        if seq < self.earliest || seq > self.latest {
            return Ok(None);
        }
        match self.ns.get(EVENTS_LOG, seq) {
            Ok(bytes) => Ok(Some(self.stored(seq, &bytes)?)),
            Err(LogError::Trimmed { .. } | LogError::SeqNotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Whether every event kept was written with the index (no APPEND kept
    /// predates it): a log without index entries then has no APPEND event.
    #[must_use]
    pub fn indexes_every_event(&self) -> bool {
        self.since <= self.earliest
    }

    /// The host id that labels this namespace's events.
    #[must_use]
    pub fn host(&self) -> HostId {
        self.host
    }

    /// The latest event (when this index was opened).
    #[must_use]
    pub fn latest(&self) -> Seq {
        self.latest
    }

    /// Call `visit` with each event kept from `first` to [`EventIndex::latest`],
    /// in order. Events that event retention trims meanwhile are passed
    /// over: the walk goes on from the earliest event still kept.
    pub fn for_each_from(&self, first: Seq, mut visit: impl FnMut(StoredEvent) -> Result<()>) -> Result<()> {
        self.walk_kept(first, self.latest, |seq, bytes| {
            visit(self.stored(seq, bytes)?)?;
            Ok(ControlFlow::Continue(()))
        })
    }

    /// Call `visit` with the seq and bytes of each event kept in
    /// `first..=last`, in order, until it breaks. Event retention may trim
    /// while an index is open (its `earliest` is then stale): the events
    /// trimmed are passed over, as if they had been trimmed before.
    fn walk_kept(
        &self,
        first: Seq,
        last: Seq,
        mut visit: impl FnMut(Seq, &[u8]) -> Result<ControlFlow<()>>,
    ) -> Result<()> {
        let mut next = first.max(self.earliest);
        'scans: while next <= last {
            let records = match self.ns.scan(EVENTS_LOG, SeqRange { first: next, last }) {
                Ok(records) => records,
                Err(LogError::Trimmed { .. }) => {
                    next = self.kept_after(next)?;
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            for record in records {
                match record {
                    Ok(record) => {
                        next = record.seq + 1;
                        if visit(record.seq, &record.value)?.is_break() {
                            return Ok(());
                        }
                    }
                    Err(LogError::Trimmed { .. }) => {
                        next = self.kept_after(next)?;
                        continue 'scans;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            return Ok(());
        }
        Ok(())
    }

    /// The first event at or after `seq` still kept (retention trimmed `seq`).
    fn kept_after(&self, seq: Seq) -> Result<Seq> {
        let earliest = self.ns.earliest(EVENTS_LOG)?;
        // Trimmed means `seq` is below the earliest kept; step on regardless.
        Ok(earliest.max(seq + 1))
    }

    fn stored(&self, seq: Seq, bytes: &[u8]) -> Result<StoredEvent> {
        self.count();
        let event = Event::decode(bytes, seq)?;
        Ok(StoredEvent { id: EventId { host: self.host, namespace: self.ns.name().to_owned(), seq }, event })
    }

    /// The APPEND event of `log`'s record `seq`, if one is kept.
    pub fn append_of(&self, log: &str, seq: Seq) -> Result<Option<StoredEvent>> {
        // Event retention trims index entries as it trims events: a lookup
        // that meets one trimmed under it reads the index's bounds again.
        let mut attempts = 1;
        loop {
            match self.append_of_once(log, seq) {
                Err(RuntimeError::Log(LogError::Trimmed { .. })) if attempts < TRIMMED_ATTEMPTS_MAX => attempts += 1,
                result => return result,
            }
        }
    }

    fn append_of_once(&self, log: &str, seq: Seq) -> Result<Option<StoredEvent>> {
        if seq == 0 {
            return Ok(None);
        }
        let unindexed = (self.earliest, self.since.min(self.latest.saturating_add(1)));
        let Some(name) = appends_log(log) else {
            return self.scan_for_append(log, seq, self.earliest, self.latest.saturating_add(1));
        };
        let (first, last) = match self.ns.log_info(&name) {
            Ok(info) => (info.earliest.max(1), info.latest),
            Err(LogError::LogNotFound { .. }) => return self.scan_for_append(log, seq, unindexed.0, unindexed.1),
            Err(e) => return Err(e.into()),
        };
        // The last entry at or below `seq`, and the one after it.
        let (mut lo, mut hi, mut found) = (first, last, None);
        while lo <= hi {
            let mid = lo + (hi - lo) / 2;
            self.count();
            let entry = decode_entry(&self.ns.get(&name, mid)?, &name, mid)?;
            if entry.0 <= seq {
                found = Some((mid, entry));
                lo = mid + 1;
            } else {
                hi = mid - 1;
            }
        }
        match found {
            None => {
                let first_entry =
                    if first <= last { decode_entry(&self.ns.get(&name, first)?, &name, first)?.1 } else { Seq::MAX };
                self.scan_for_append(log, seq, unindexed.0, unindexed.1.min(first_entry))
            }
            Some((at, (entry_seq, entry_event))) => {
                if entry_seq == seq {
                    return Ok(self.event(entry_event)?.filter(|e| is_append_of(e, log, seq)));
                }
                let next_event =
                    if at < last { decode_entry(&self.ns.get(&name, at + 1)?, &name, at + 1)?.1 } else { Seq::MAX };
                let end = entry_event.saturating_add(STRIDE).min(next_event);
                self.scan_for_append(log, seq, entry_event.max(self.earliest), end)
            }
        }
    }

    /// Look for the APPEND of `(log, seq)` among the events in `[from, to)`.
    fn scan_for_append(&self, log: &str, seq: Seq, from: Seq, to: Seq) -> Result<Option<StoredEvent>> {
        let last = to.min(self.latest.saturating_add(1)).saturating_sub(1);
        let mut found = None;
        self.walk_kept(from, last, |event_seq, bytes| {
            if kind_byte(bytes).is_some_and(|kind| kind != EventKind::Append as u8) {
                self.count();
                return Ok(ControlFlow::Continue(())); // not an APPEND: no need to decode it
            }
            let event = self.stored(event_seq, bytes)?;
            if event.event.kind == EventKind::Append && event.event.log == log {
                if event.event.seq == seq {
                    found = Some(event);
                    return Ok(ControlFlow::Break(()));
                }
                if event.event.seq > seq {
                    return Ok(ControlFlow::Break(())); // appended without the runtime
                }
            }
            Ok(ControlFlow::Continue(()))
        })?;
        Ok(found)
    }

    /// The events the run of the FIRING at `firing` wrote in this namespace
    /// (its children here), from the FIRING to its DONE or FAILED: a scan of
    /// the events written while it ran (to the end of the log if it never
    /// finished).
    pub fn run_of(&self, firing: Seq) -> Result<Vec<StoredEvent>> {
        let mut out = Vec::new();
        if firing >= self.latest {
            return Ok(out);
        }
        let here = self.ns.name().as_bytes();
        self.walk_kept(firing + 1, self.latest, |seq, bytes| {
            // Most events between a FIRING and its DONE belong to other runs:
            // judged by their header, without decoding them.
            if let Some((_, parent)) = peek_header(bytes) {
                self.count();
                if parent.is_none_or(|(namespace, seq)| seq != firing || namespace != here) {
                    return Ok(ControlFlow::Continue(()));
                }
            }
            let event = self.stored(seq, bytes)?;
            let child = event.event.parent.as_ref().is_some_and(|p| p.seq == firing && p.namespace == self.ns.name());
            if !child {
                return Ok(ControlFlow::Continue(()));
            }
            let end = matches!(event.event.kind, EventKind::Done | EventKind::Failed);
            out.push(event);
            Ok(if end { ControlFlow::Break(()) } else { ControlFlow::Continue(()) })
        })?;
        Ok(out)
    }

    /// The REPAIR events that replaced `(log, seq)`, looked for after its
    /// APPEND at `append` (none, without reading, in a namespace never
    /// repaired). The namespace's REPAIR events are found once per index
    /// (a scan of every event, by kind byte) and kept.
    pub fn repairs_of(&self, log: &str, seq: Seq, append: Seq) -> Result<Vec<StoredEvent>> {
        if !self.repaired {
            return Ok(Vec::new());
        }
        if self.repairs.get().is_none() {
            let mut found = Vec::new();
            self.walk_kept(self.earliest, self.latest, |seq, bytes| {
                if kind_byte(bytes).is_some_and(|kind| kind != EventKind::Repair as u8) {
                    self.count();
                } else {
                    found.push(self.stored(seq, bytes)?);
                }
                Ok(ControlFlow::Continue(()))
            })?;
            let _ = self.repairs.set(found);
        }
        let repairs = self.repairs.get().map_or(&[][..], Vec::as_slice);
        Ok(repairs
            .iter()
            .filter(|e| e.id.seq > append)
            .filter(|e| e.event.replaced().any(|(l, first, last)| l == log && (first..=last).contains(&seq)))
            .cloned()
            .collect())
    }

    /// The latest seq of `log` now (0 if there is no such log): bounds a
    /// ranged read's lookups to records that exist.
    pub fn log_latest(&self, log: &str) -> Result<Seq> {
        match self.ns.latest(log) {
            Ok(latest) => Ok(latest),
            Err(LogError::LogNotFound { .. }) => Ok(0),
            Err(e) => Err(e.into()),
        }
    }
}

/// An event's kind byte without decoding it (every format version puts it
/// second, after the version); `None` for bytes too short, which the
/// decoder then reports.
fn kind_byte(bytes: &[u8]) -> Option<u8> {
    bytes.get(1).copied()
}

fn is_append_of(e: &StoredEvent, log: &str, seq: Seq) -> bool {
    e.event.kind == EventKind::Append && e.event.log == log && e.event.seq == seq
}
