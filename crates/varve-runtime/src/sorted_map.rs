//! Sorted maps that handlers build ([`HandlerContext::sorted_map`]): a
//! versioned map kept as an op log plus a `PEDaLS` structure made from it, so
//! that a repair which changes the op log changes the map, and both the old
//! and the repaired version histories stay readable.
//!
//! - **The op log `LOG` is the map's truth**: an ordinary log, each record
//!   one [`MapOp`] (put or delete a key), appended through the handler's
//!   context and so recorded like any append (APPEND, triggers, causes).
//!   Other handlers may subscribe to it as the map's change feed. Version s
//!   of the map is the map after ops `1..=s`.
//! - **The structure** is a `PEDaLS` [`SortedMap`] (`map.LOG.sK`, its logs
//!   `pds.map.LOG.sK.*`) built by applying the op log in seq order, and a
//!   version index `map.LOG.at`: record 1 names the structure, record
//!   s + 1 holds its version after op s and op s's CRC32C. Reading "the map
//!   as of op s" is reading that version. The runtime writes both without
//!   recording them: they are derived from the op log, which is what a
//!   repair changes. They lag the op log only until the next access, which
//!   applies what is missing first (also after a crash between the two:
//!   re-applying an op that is in changes nothing).
//! - **A read depends on every op before it.** `get`/`range` take the op
//!   log's latest seq s (a LATEST, pinned when a repair replays the run) and
//!   record a READ of `LOG:1..=s`: a repair that changes any of those ops
//!   re-runs the reader.
//! - **The index follows its op log.** A repair swaps `LOG` for its
//!   repaired shadow and keeps the old one as `_gen.LOG.N`; the same
//!   `rename_logs` moves `map.LOG.at` to `map._gen.LOG.N.at`
//!   ([`with_map_indexes`], also in the runtime's own `rename_logs`), so
//!   the map built so far is the map of `_gen.LOG.N` — the old version
//!   history, still readable ([`RuntimeHandle::sorted_map_generation`]) —
//!   and the next access to `LOG`'s map finds no index and builds a new
//!   structure from the repaired ops. Versions before the correction hold
//!   the same entries in both; versions after reflect it. Deleting an op
//!   log through the runtime deletes its index first. An index that does
//!   not describe its log (the log replaced without the runtime) is found
//!   when the map is opened — fewer ops than it applied, or a different
//!   CRC of the last — and the map is built afresh.
//! - **In a replay** (a repair re-running a past run) the map as of s is
//!   folded in memory from ops `1..=s` read as the replay reads records,
//!   plus the run's own ops, which reach the shadow only when the run ends:
//!   O(s) per read.
//!
//! The op log must keep every record (unbounded retention): the map as of s
//! is rebuilt from ops `1..=s`.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use varve_log::{LogConfig, LogError, Namespace, OnFull, Retention, Seq, SeqRange};
use varve_pds::{Options, SortedMap, Version};

use crate::context::{Backing, HandlerContext};
use crate::error::{Result, RuntimeError};
use crate::event::{Event, EventKind, ReadDep};
use crate::inner::{Cause, Inner};

const OP_PUT: u8 = 1;
const OP_DELETE: u8 = 2;

/// One record of a map's op log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MapOp {
    /// Set `key` to `value`.
    Put {
        /// The key.
        key: Vec<u8>,
        /// Its new value.
        value: Vec<u8>,
    },
    /// Remove `key` (no change when absent).
    Delete {
        /// The key.
        key: Vec<u8>,
    },
}

impl MapOp {
    /// The record: `1 | key_len u32 LE | key | value`, or `2 | key`.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        match self {
            MapOp::Put { key, value } => {
                let mut out = Vec::with_capacity(5 + key.len() + value.len());
                out.push(OP_PUT);
                out.extend_from_slice(&u32::try_from(key.len()).unwrap_or(u32::MAX).to_le_bytes());
                out.extend_from_slice(key);
                out.extend_from_slice(value);
                out
            }
            MapOp::Delete { key } => {
                let mut out = Vec::with_capacity(1 + key.len());
                out.push(OP_DELETE);
                out.extend_from_slice(key);
                out
            }
        }
    }

    /// Decode the record at `log`:`seq`; one that is not a map op is an
    /// error naming it (correct it with a repair, or use another log).
    pub fn decode(log: &str, seq: Seq, record: &[u8]) -> Result<MapOp> {
        let bad = |why: &str| RuntimeError::InvalidArgument {
            reason: format!(
                "{log}:{seq} is not a sorted-map op ({why}): a map's op log holds only what its puts and deletes \
                 append; correct the record with a repair, or keep other records out of the log"
            ),
        };
        match record.split_first() {
            Some((&OP_PUT, rest)) => {
                let (len, rest) = rest.split_first_chunk::<4>().ok_or_else(|| bad("a put without its key length"))?;
                let len = usize::try_from(u32::from_le_bytes(*len)).map_err(|_| bad("a key longer than memory"))?;
                if rest.len() < len {
                    return Err(bad("a put whose key is cut short"));
                }
                let (key, value) = rest.split_at(len);
                Ok(MapOp::Put { key: key.to_vec(), value: value.to_vec() })
            }
            Some((&OP_DELETE, key)) => Ok(MapOp::Delete { key: key.to_vec() }),
            Some((kind, _)) => Err(bad(&format!("unknown kind {kind}"))),
            None => Err(bad("an empty record")),
        }
    }

    fn apply_to(self, map: &mut BTreeMap<Vec<u8>, Vec<u8>>) {
        match self {
            MapOp::Put { key, value } => {
                map.insert(key, value);
            }
            MapOp::Delete { key } => {
                map.remove(&key);
            }
        }
    }
}

/// Keys from `from` (inclusive) to `to` (exclusive); `None` is open.
fn bounds(from: Option<&[u8]>, to: Option<&[u8]>) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    (
        from.map_or(Bound::Unbounded, |k| Bound::Included(k.to_vec())),
        to.map_or(Bound::Unbounded, |k| Bound::Excluded(k.to_vec())),
    )
}

fn entries(iter: impl Iterator<Item = (Vec<u8>, Vec<u8>)>) -> Vec<(Bytes, Bytes)> {
    iter.map(|(k, v)| (Bytes::from(k), Bytes::from(v))).collect()
}

/// Longest op log name a map is kept for: its structure's name
/// (`map.LOG.sK`) must fit `PEDaLS`'s limit. A repair's old history of
/// `LOG` is `_gen.LOG.N`, so keep `LOG` about 10 bytes shorter for the old
/// history's map to be readable too.
pub const OP_LOG_NAME_BYTES_MAX: usize = 160;

/// The version index of the map of op log `log`.
fn index_log(log: &str) -> String {
    format!("map.{log}.at")
}

/// Record 1 of a version index: this, then the structure's name.
const INDEX_HEADER: &[u8] = b"varve sorted map index 1\n";
/// Bytes of an index record after the header: the structure's version
/// after op s, then the CRC32C of op s's record.
const INDEX_RECORD_BYTES: usize = 12;

fn exists(ns: &dyn Namespace, log: &str) -> Result<bool> {
    match ns.latest(log) {
        Ok(_) => Ok(true),
        Err(LogError::LogNotFound { .. }) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// `renames` (for `Namespace::rename_logs`) with each op log's map index
/// moved along with it, so the index keeps describing the history it was
/// built from: after a repair's swap `LOG` → `_gen.LOG.N`, the map of
/// `_gen.LOG.N` is the one built before, and `LOG` (the shadow until now)
/// has none until its next access builds it. An index at a target name
/// whose log does not exist — left by a log deleted without the runtime —
/// describes nothing the rename produces and is removed first; while the
/// target log exists nothing is touched (the rename will be refused).
/// The runtime's `rename_logs` and `varve-repair`'s swap call this.
pub fn with_map_indexes(ns: &dyn Namespace, renames: &[(&str, &str)]) -> Result<Vec<(String, String)>> {
    let mut out: Vec<(String, String)> = renames.iter().map(|(f, t)| ((*f).to_owned(), (*t).to_owned())).collect();
    let froms: Vec<&str> = renames.iter().map(|(from, _)| *from).collect();
    for (_, to) in renames {
        let target = index_log(to);
        if !froms.contains(to) && !exists(ns, to)? && exists(ns, &target)? {
            ns.delete_log(&target)?;
        }
    }
    for (from, to) in renames {
        let source = index_log(from);
        if exists(ns, &source)? {
            out.push((source, index_log(to)));
        }
    }
    Ok(out)
}

/// Remove the map index of `log` (before `log` itself is deleted: the
/// index must never outlive the history it describes). The structure's
/// logs stay, unreferenced.
pub(crate) fn forget_map(ns: &dyn Namespace, log: &str) -> Result<()> {
    match ns.delete_log(&index_log(log)) {
        Ok(()) | Err(LogError::LogNotFound { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The structure built from one op log, and how far.
pub(crate) struct Built {
    ns: Arc<dyn Namespace>,
    /// The op log it is built from.
    log: String,
    map: SortedMap<Vec<u8>, Vec<u8>>,
    /// The structure's name (`map.LOG.sK`).
    name: String,
    /// `map.LOG.at`: record 1 names the structure, record s + 1 holds its
    /// version after op s and the op's CRC32C.
    index: String,
    /// Ops applied (the version index's latest seq − 1).
    applied: Seq,
}

impl Built {
    /// Open the map of op log `log`: its index and structure, or new ones
    /// when it has none or the index does not describe `log` (the log was
    /// replaced without the runtime, which would have moved or removed it).
    fn open(ns: Arc<dyn Namespace>, log: &str) -> Result<Built> {
        if log.len() > OP_LOG_NAME_BYTES_MAX {
            return Err(RuntimeError::InvalidArgument {
                reason: format!(
                    "{log:?} is {} bytes: a sorted map's op log name is at most {OP_LOG_NAME_BYTES_MAX} bytes (the \
                     map's own logs are named after it); use a shorter log name",
                    log.len()
                ),
            });
        }
        let info = ns.log_info(log)?;
        if matches!(info.config.retention, Retention::Keep { on_full: OnFull::Overwrite, .. }) || info.earliest > 1 {
            return Err(RuntimeError::InvalidArgument {
                reason: format!(
                    "{log} cannot be a sorted map's op log: it drops its oldest records (retention or a trim), and \
                     the map is made from every op; use a log that keeps every record"
                ),
            });
        }
        let index = index_log(log);
        if let Some(built) = Self::open_existing(&ns, log, &index, info.latest)? {
            return Ok(built);
        }
        forget_map(ns.as_ref(), log)?;
        // A structure name no map used before (old ones may still exist).
        let mut k = 1;
        let name = loop {
            let name = format!("map.{log}.s{k}");
            if !exists(ns.as_ref(), &format!("pds.{name}.meta"))? {
                break name;
            }
            k += 1;
        };
        ns.create_log(&index, LogConfig::unbounded())?;
        ns.append_if(&index, 0, &[INDEX_HEADER, name.as_bytes()].concat())?;
        let map = SortedMap::open(Arc::clone(&ns), &name, Options::default())?;
        Ok(Built { ns, log: log.to_owned(), map, name, index, applied: 0 })
    }

    /// The map `index` describes, if it describes `log` as it is: its
    /// header checks, `log` holds every op it applied, and the last one's
    /// CRC matches (a cheap check, run once per open).
    fn open_existing(ns: &Arc<dyn Namespace>, log: &str, index: &str, latest: Seq) -> Result<Option<Built>> {
        let indexed = match ns.latest(index) {
            Ok(0) | Err(LogError::LogNotFound { .. }) => return Ok(None),
            Ok(seq) => seq,
            Err(e) => return Err(e.into()),
        };
        let header = ns.get(index, 1)?;
        let Some(name) = header.strip_prefix(INDEX_HEADER).and_then(|n| std::str::from_utf8(n).ok()) else {
            return Ok(None);
        };
        let applied = indexed - 1;
        if applied > latest {
            return Ok(None);
        }
        if applied > 0 {
            let (_, crc) = decode_index(index, applied, &ns.get(index, applied + 1)?)?;
            if crc != crc32c::crc32c(&ns.get(log, applied)?) {
                return Ok(None);
            }
        }
        let map = SortedMap::open(Arc::clone(ns), name, Options::default())?;
        // The structure holds every version the index names (its logs were
        // not deleted from under it).
        if applied > 0 && map.latest()? < decode_index(index, applied, &ns.get(index, applied + 1)?)?.0 {
            return Ok(None);
        }
        let name = name.to_owned();
        Ok(Some(Built { ns: Arc::clone(ns), log: log.to_owned(), map, name, index: index.to_owned(), applied }))
    }

    /// Whether the index log at this map's index name is still this map's
    /// (a swap moves it away, and may move another map's index there).
    fn index_is_ours(&self) -> Result<bool> {
        match self.ns.get(&self.index, 1) {
            // Its header names this structure, and it ends where this map
            // left it (renamed away and back, another map may have grown it).
            Ok(header) => Ok(header.strip_prefix(INDEX_HEADER) == Some(self.name.as_bytes())
                && self.ns.latest(&self.index)? == self.applied + 1),
            Err(LogError::LogNotFound { .. } | LogError::SeqNotFound { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// The next ops to apply, up to `to`, at most `max` of them.
    fn next_ops(&self, to: Seq, max: u64) -> Result<Vec<varve_log::Record>> {
        if to <= self.applied {
            return Ok(Vec::new());
        }
        let last = to.min(self.applied + max);
        Ok(self.ns.scan(&self.log, SeqRange { first: self.applied + 1, last })?.collect::<varve_log::Result<_>>()?)
    }

    /// Apply `ops` to the structure; returns the index records to append.
    fn apply(&mut self, ops: &[varve_log::Record]) -> Result<Vec<Vec<u8>>> {
        let mut records = Vec::with_capacity(ops.len());
        for op in ops {
            let version = match MapOp::decode(&self.log, op.seq, &op.value)? {
                // A put or delete that changes nothing writes nothing and
                // answers the current version: so re-applying an op after
                // a crash between the structure and its index is harmless.
                MapOp::Put { key, value } => self.map.insert(&key, &value)?,
                MapOp::Delete { key } => self.map.delete(&key)?,
            };
            let mut record = version.to_le_bytes().to_vec();
            record.extend_from_slice(&crc32c::crc32c(&op.value).to_le_bytes());
            records.push(record);
        }
        Ok(records)
    }

    /// Append the index records of the ops after the last applied.
    fn record(&mut self, records: &[Vec<u8>]) -> Result<()> {
        for record in records {
            let expected = self.applied + 1; // the index's latest: its header, then one per op
            match self.ns.append_if(&self.index, expected, record) {
                Ok(_) => {}
                // Another builder of the same map (two runtimes, say) wrote
                // this op's record first: the same record is no conflict.
                Err(LogError::Conflict { actual, .. })
                    if actual > expected && self.ns.get(&self.index, expected + 1)? == record[..] => {}
                Err(LogError::Conflict { actual, .. }) => {
                    return Err(RuntimeError::InvalidArgument {
                        reason: format!(
                            "the map index {} of {} holds {actual} records where this builder expected {expected}, \
                             with a different version: build each map from one runtime",
                            self.index, self.log
                        ),
                    })
                }
                Err(e) => return Err(e.into()),
            }
            self.applied += 1;
        }
        Ok(())
    }

    /// The structure's version holding ops `1..=seq` (0: the empty map).
    fn version_at(&self, seq: Seq) -> Result<Version> {
        if seq == 0 {
            return Ok(0);
        }
        Ok(decode_index(&self.index, seq, &self.ns.get(&self.index, seq + 1)?)?.0)
    }

    pub(crate) fn get(&self, key: &[u8], seq: Seq) -> Result<Option<Bytes>> {
        let version = self.version_at(seq)?;
        if version == 0 {
            return Ok(None);
        }
        Ok(self.map.get(&key.to_vec(), Some(version))?.map(Bytes::from))
    }

    pub(crate) fn range(&self, from: Option<&[u8]>, to: Option<&[u8]>, seq: Seq) -> Result<Vec<(Bytes, Bytes)>> {
        let version = self.version_at(seq)?;
        if version == 0 {
            return Ok(Vec::new());
        }
        Ok(entries(self.map.range(bounds(from, to), Some(version))?))
    }
}

/// `(version, op CRC)` of the index record of op `seq`.
fn decode_index(index: &str, seq: Seq, record: &[u8]) -> Result<(Version, u32)> {
    let bad = || RuntimeError::InvalidArgument {
        reason: format!(
            "{index}:{} is not a map index record ({INDEX_RECORD_BYTES} bytes): delete {index} and the next access \
             rebuilds the map",
            seq + 1
        ),
    };
    let bytes: &[u8; INDEX_RECORD_BYTES] = record.try_into().map_err(|_| bad())?;
    let (version, crc) = bytes.split_at(8);
    Ok((
        u64::from_le_bytes(version.try_into().map_err(|_| bad())?),
        u32::from_le_bytes(crc.try_into().map_err(|_| bad())?),
    ))
}

/// The maps a running runtime builds, by op log (in [`Inner`]).
#[derive(Default)]
pub(crate) struct Maps {
    built: Mutex<HashMap<String, Arc<Mutex<Built>>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Ops applied per step of a catch-up: the writer lock is held while a
/// step reads them, not while the structure takes them.
const CATCH_UP_STEP: u64 = 1_024;

impl Inner {
    /// The map of op log `log`, with ops `1..=to` applied.
    ///
    /// A swap of `log` (a repair's, or `rename_logs`) moves its index away
    /// ([`with_map_indexes`]) under the writer lock. So each step looks for
    /// the index and reads the next ops under that lock — both from the same
    /// history — and applies them without it; the index records are written
    /// only if no swap came between (else the ops went to the structure of
    /// the history they came from, whose next catch-up re-applies them as
    /// no-ops). Lock order: a map, then the writer.
    fn map_built(&self, log: &str, to: Seq) -> Result<Arc<Mutex<Built>>> {
        let entry = {
            let mut built = lock(&self.maps.built);
            if let Some(entry) = built.get(log) {
                Arc::clone(entry)
            } else {
                let entry = {
                    let _writer = self.lock_writer();
                    Arc::new(Mutex::new(Built::open(Arc::clone(&self.ns), log)?))
                };
                built.insert(log.to_owned(), Arc::clone(&entry));
                entry
            }
        };
        let mut b = lock(&entry);
        loop {
            let ops = {
                let _writer = self.lock_writer();
                if !b.index_is_ours()? {
                    *b = Built::open(Arc::clone(&self.ns), log)?;
                }
                let to = to.min(self.ns.latest(log)?);
                let ops = b.next_ops(to, CATCH_UP_STEP)?;
                if !ops.is_empty() {
                    self.check_running()?;
                }
                ops
            };
            if ops.is_empty() {
                break;
            }
            let records = b.apply(&ops)?;
            let _writer = self.lock_writer();
            // The same index, not one a swap put at its name since.
            if b.index_is_ours()? {
                b.record(&records)?;
            }
        }
        drop(b);
        Ok(entry)
    }

    /// Apply the ops of `log`'s map up to `seq` (after an op appended
    /// through the socket).
    pub(crate) fn map_catch_up(&self, log: &str, seq: Seq) -> Result<()> {
        self.map_built(log, seq).map(drop)
    }

    /// A read of `log`'s map now, for the socket: with `cause`, recorded as
    /// a handler's map read is (a LATEST of the op log, a READ of every op
    /// before it), as events of their own like the socket's other reads.
    pub(crate) fn map_read<R>(
        &self,
        log: &str,
        cause: Option<Cause>,
        read: impl FnOnce(&Built, Seq) -> Result<R>,
    ) -> Result<R> {
        let seq = self.ns.latest(log)?;
        if let Some(cause) = cause {
            self.record_read(Event::new(EventKind::Latest, cause.trace, Some(cause.parent.clone())).at(log, seq))?;
            if seq > 0 {
                let mut ops = Event::new(EventKind::Read, cause.trace, Some(cause.parent)).at(log, 1);
                ops.seq_last = seq;
                self.record_read(ops)?;
            }
        }
        let built = self.map_built(log, seq)?;
        let b = lock(&built);
        read(&b, seq)
    }
}

/// A sorted map a handler builds: see the module docs. Got from
/// [`HandlerContext::sorted_map`]; every call is recorded (or replayed) as
/// the context's calls are.
pub struct HandlerMap<'c, 'a> {
    ctx: &'c HandlerContext<'a>,
    log: String,
}

impl HandlerContext<'_> {
    /// The sorted map whose op log is `log` (which must exist, unbounded).
    #[must_use]
    pub fn sorted_map(&self, log: &str) -> HandlerMap<'_, '_> {
        HandlerMap { ctx: self, log: log.to_owned() }
    }
}

impl HandlerMap<'_, '_> {
    /// Set `key` to `value`: appends a put to the op log. Returns its seq,
    /// the map's new version.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<Seq> {
        self.write(&MapOp::Put { key: key.to_vec(), value: value.to_vec() })
    }

    /// Remove `key`: appends a delete to the op log (also when the key is
    /// absent, so the version count follows the calls). Returns its seq.
    pub fn delete(&self, key: &[u8]) -> Result<Seq> {
        self.write(&MapOp::Delete { key: key.to_vec() })
    }

    fn write(&self, op: &MapOp) -> Result<Seq> {
        let record = op.encode();
        let seq = self.ctx.append(&self.log, &record)?;
        match self.ctx.backing {
            Backing::Live(inner) => {
                inner.map_built(&self.log, seq)?;
            }
            Backing::Replay(_) => self.ctx.map_ops.borrow_mut().push((self.log.clone(), seq, record)),
        }
        Ok(seq)
    }

    /// The value of `key` in the map now.
    pub fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        let seq = self.read_to()?;
        match self.ctx.backing {
            Backing::Live(inner) => {
                let built = inner.map_built(&self.log, seq)?;
                let b = lock(&built);
                b.get(key, seq)
            }
            Backing::Replay(_) => Ok(self.fold(seq)?.remove(key).map(Bytes::from)),
        }
    }

    /// Entries with keys from `from` (inclusive) to `to` (exclusive), in
    /// key order; `None` leaves that end open.
    pub fn range(&self, from: Option<&[u8]>, to: Option<&[u8]>) -> Result<Vec<(Bytes, Bytes)>> {
        let seq = self.read_to()?;
        match self.ctx.backing {
            Backing::Live(inner) => {
                let built = inner.map_built(&self.log, seq)?;
                let b = lock(&built);
                b.range(from, to, seq)
            }
            Backing::Replay(_) => {
                Ok(entries(self.fold(seq)?.range(bounds(from, to)).map(|(k, v)| (k.clone(), v.clone()))))
            }
        }
    }

    /// The op log's latest seq (a recorded LATEST), and a recorded READ of
    /// every op up to it: what a read of the map depends on.
    fn read_to(&self) -> Result<Seq> {
        let seq = self.ctx.latest(&self.log)?;
        if seq > 0 {
            self.ctx.record_read(|| ReadDep::read(&self.log, 1, seq));
        }
        Ok(seq)
    }

    /// The map after ops `1..=seq` as the replayed run sees them: each op
    /// read as the replay reads a record (the shadow's where the repair
    /// placed it, the original's where it leaves it; one the repair changes
    /// but has not placed yet is refused, never skipped), the run's own
    /// from its writes so far.
    fn fold(&self, seq: Seq) -> Result<BTreeMap<Vec<u8>, Vec<u8>>> {
        let Backing::Replay(replay) = self.ctx.backing else { unreachable!("fold is only for replays") };
        let own: HashMap<Seq, Vec<u8>> = self
            .ctx
            .map_ops
            .borrow()
            .iter()
            .filter(|(log, s, _)| *log == self.log && *s <= seq)
            .map(|(_, s, record)| (*s, record.clone()))
            .collect();
        let mut map = BTreeMap::new();
        for s in 1..=seq {
            let op = match own.get(&s) {
                Some(record) => MapOp::decode(&self.log, s, record)?,
                None => MapOp::decode(&self.log, s, &replay.get(&self.log, s)?)?,
            };
            op.apply_to(&mut map);
        }
        Ok(map)
    }
}

/// Reads of a sorted map outside handlers ([`RuntimeHandle::sorted_map`]),
/// at any version. Not recorded: nothing a handler writes depends on them.
/// Each read first applies the ops the map lacks.
pub struct MapReader {
    inner: Arc<Inner>,
    log: String,
}

impl MapReader {
    fn built(&self) -> Result<Arc<Mutex<Built>>> {
        self.inner.map_built(&self.log, self.inner.ns.latest(&self.log)?)
    }

    /// The op log this map is built from.
    #[must_use]
    pub fn log(&self) -> &str {
        &self.log
    }

    /// The latest version (the op log's latest seq).
    pub fn latest(&self) -> Result<Seq> {
        let built = self.built()?;
        let applied = lock(&built).applied;
        Ok(applied)
    }

    /// The value of `key` at version `at` (an op seq; `None`: the latest).
    pub fn get(&self, key: &[u8], at: Option<Seq>) -> Result<Option<Bytes>> {
        let built = self.built()?;
        let b = lock(&built);
        b.get(key, check_version(&b, at)?)
    }

    /// Entries from `from` (inclusive) to `to` (exclusive) at version `at`.
    pub fn range(&self, from: Option<&[u8]>, to: Option<&[u8]>, at: Option<Seq>) -> Result<Vec<(Bytes, Bytes)>> {
        let built = self.built()?;
        let b = lock(&built);
        b.range(from, to, check_version(&b, at)?)
    }
}

fn check_version(b: &Built, at: Option<Seq>) -> Result<Seq> {
    match at {
        None => Ok(b.applied),
        Some(seq) if seq <= b.applied => Ok(seq),
        Some(seq) => Err(RuntimeError::InvalidArgument {
            reason: format!("the sorted map of {} has versions 0..={}, not {seq}", b.log, b.applied),
        }),
    }
}

impl Inner {
    pub(crate) fn sorted_map_reader(self: &Arc<Self>, log: &str) -> Result<MapReader> {
        self.map_built(log, self.ns.latest(log)?)?;
        Ok(MapReader { inner: Arc::clone(self), log: log.to_owned() })
    }

    pub(crate) fn sorted_map_generation(self: &Arc<Self>, log: &str, generation: u64) -> Result<MapReader> {
        let source = format!("_gen.{log}.{generation}");
        if !exists(self.ns.as_ref(), &source)? {
            return Err(RuntimeError::InvalidArgument {
                reason: format!(
                    "{log} has no old generation {generation} ({source} does not exist): repairs keep them, numbered \
                     from 1 (`varve log ls` lists the _gen.{log}.N kept); read the current map with sorted_map"
                ),
            });
        }
        self.sorted_map_reader(&source)
    }
}
