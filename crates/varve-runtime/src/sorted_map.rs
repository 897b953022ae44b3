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
//! - **The structure** is a `PEDaLS` [`SortedMap`] named `map.LOG.gN`
//!   (its logs `pds.map.LOG.gN.*`), built by applying the op log in seq
//!   order, and a version index `map.LOG.gN.at` whose record s is the
//!   structure's version after op s. The runtime writes both without
//!   recording them: they are derived from the op log, which is what a
//!   repair changes. They lag the op log only until the next access, which
//!   applies what is missing first (also after a crash between the two).
//! - **A read depends on every op before it.** `get`/`range` take the op
//!   log's latest seq s (a LATEST, pinned when a repair replays the run) and
//!   record a READ of `LOG:1..=s`: a repair that changes any of those ops
//!   re-runs the reader.
//! - **Generations.** A repair swaps the op log and keeps the old one as
//!   `_gen.LOG.N` (`varve-repair`'s commit). Structure `gN` then describes
//!   `_gen.LOG.N` and stays readable as that history
//!   ([`RuntimeHandle::sorted_map_generation`]); the next access builds
//!   `map.LOG.g(N+1)` from the repaired op log. Versions before the
//!   correction hold the same entries in both; versions after reflect it.
//! - **In a replay** (a repair re-running a past run) the map as of s is
//!   folded in memory from the op log's records `1..=s` as the replayed run
//!   sees them, plus the run's own ops, which reach the shadow only when the
//!   run ends: O(s) per read.
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
use crate::event::ReadDep;
use crate::inner::Inner;

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

/// The old history a repair kept of `log`'s generation `generation`.
fn generation_log(log: &str, generation: u64) -> String {
    format!("_gen.{log}.{generation}")
}

fn exists(ns: &dyn Namespace, log: &str) -> Result<bool> {
    match ns.latest(log) {
        Ok(_) => Ok(true),
        Err(LogError::LogNotFound { .. }) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// The generation the op log `log` is in now: one more than the old
/// histories repairs kept of it.
fn current_generation(ns: &dyn Namespace, log: &str) -> Result<u64> {
    let mut generation = 1;
    while exists(ns, &generation_log(log, generation))? {
        generation += 1;
    }
    Ok(generation)
}

/// The structure built from one generation of an op log, and how far.
pub(crate) struct Built {
    ns: Arc<dyn Namespace>,
    /// The op log it is built from: `LOG`, or `_gen.LOG.N` once swapped.
    log: String,
    generation: u64,
    map: SortedMap<Vec<u8>, Vec<u8>>,
    /// `map.LOG.gN.at`: record s is the structure's version after op s.
    versions: String,
    /// Ops applied (the version index's latest seq).
    applied: Seq,
}

impl Built {
    fn open(ns: Arc<dyn Namespace>, log: &str, generation: u64, source: String) -> Result<Built> {
        let info = ns.log_info(&source)?;
        if matches!(info.config.retention, Retention::Keep { on_full: OnFull::Overwrite, .. }) || info.earliest > 1 {
            return Err(RuntimeError::InvalidArgument {
                reason: format!(
                    "{source} cannot be a sorted map's op log: it drops its oldest records (retention or a trim), and \
                     the map is made from every op; use a log that keeps every record"
                ),
            });
        }
        let name = format!("map.{log}.g{generation}");
        let versions = format!("{name}.at");
        ns.create_log(&versions, LogConfig::unbounded())?;
        let applied = ns.latest(&versions)?;
        let map = SortedMap::open(Arc::clone(&ns), &name, Options::default())?;
        Ok(Built { ns, log: source, generation, map, versions, applied })
    }

    /// Apply the ops after the last applied, up to `to`.
    fn catch_up(&mut self, to: Seq) -> Result<()> {
        if to <= self.applied {
            return Ok(());
        }
        let ops: Vec<_> = self.ns.scan(&self.log, SeqRange { first: self.applied + 1, last: to })?.collect();
        for op in ops {
            let op = op?;
            let version = match MapOp::decode(&self.log, op.seq, &op.value)? {
                // A put or delete that changes nothing writes nothing and
                // answers the current version: so re-applying an op after
                // a crash between the structure and its index is harmless.
                MapOp::Put { key, value } => self.map.insert(&key, &value)?,
                MapOp::Delete { key } => self.map.delete(&key)?,
            };
            match self.ns.append_if(&self.versions, op.seq - 1, &version.to_le_bytes()) {
                Ok(_) => self.applied = op.seq,
                Err(LogError::Conflict { actual, .. }) => {
                    return Err(RuntimeError::InvalidArgument {
                        reason: format!(
                            "the sorted map of {} is being built by another writer ({} is at {actual}, this one \
                             at {}): build each map from one runtime",
                            self.log,
                            self.versions,
                            op.seq - 1
                        ),
                    })
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// The structure's version holding ops `1..=seq` (0: the empty map).
    fn version_at(&self, seq: Seq) -> Result<Version> {
        if seq == 0 {
            return Ok(0);
        }
        let record = self.ns.get(&self.versions, seq)?;
        let bytes: [u8; 8] = record[..].try_into().map_err(|_| RuntimeError::InvalidArgument {
            reason: format!(
                "{}:{seq} is not a version (8 bytes): remove the map.* logs to rebuild them",
                self.versions
            ),
        })?;
        Ok(u64::from_le_bytes(bytes))
    }

    fn get(&self, key: &[u8], seq: Seq) -> Result<Option<Bytes>> {
        let version = self.version_at(seq)?;
        if version == 0 {
            return Ok(None);
        }
        Ok(self.map.get(&key.to_vec(), Some(version))?.map(Bytes::from))
    }

    fn range(&self, from: Option<&[u8]>, to: Option<&[u8]>, seq: Seq) -> Result<Vec<(Bytes, Bytes)>> {
        let version = self.version_at(seq)?;
        if version == 0 {
            return Ok(Vec::new());
        }
        Ok(entries(self.map.range(bounds(from, to), Some(version))?))
    }
}

/// The maps a running runtime builds, by op log (in [`Inner`]).
#[derive(Default)]
pub(crate) struct Maps {
    built: Mutex<HashMap<String, Arc<Mutex<Built>>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Inner {
    /// The structure of `log`'s current generation, with ops `1..=to` applied.
    fn map_built(&self, log: &str, to: Seq) -> Result<Arc<Mutex<Built>>> {
        let entry = {
            let mut built = lock(&self.maps.built);
            if let Some(entry) = built.get(log) {
                Arc::clone(entry)
            } else {
                let generation = current_generation(self.ns.as_ref(), log)?;
                let entry = Arc::new(Mutex::new(Built::open(Arc::clone(&self.ns), log, generation, log.to_owned())?));
                built.insert(log.to_owned(), Arc::clone(&entry));
                entry
            }
        };
        {
            let mut b = lock(&entry);
            // With the writer lock, no online repair swaps the op log
            // between the look at its generation and the catch-up (its
            // swap holds the lock). Lock order: a map, then the writer.
            let _writer = self.lock_writer();
            // A repair swapped the op log since: what was built describes
            // the old history now; build the repaired one beside it.
            if exists(self.ns.as_ref(), &generation_log(log, b.generation))? {
                let generation = current_generation(self.ns.as_ref(), log)?;
                *b = Built::open(Arc::clone(&self.ns), log, generation, log.to_owned())?;
            }
            b.catch_up(to)?;
        }
        Ok(entry)
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

    /// The map after ops `1..=seq` as the replayed run sees them.
    fn fold(&self, seq: Seq) -> Result<BTreeMap<Vec<u8>, Vec<u8>>> {
        let Backing::Replay(replay) = self.ctx.backing else { unreachable!("fold is only for replays") };
        let mut ops: BTreeMap<Seq, Bytes> =
            replay.scan(&self.log, SeqRange { first: 1, last: seq })?.into_iter().map(|r| (r.seq, r.value)).collect();
        for (log, own, record) in self.ctx.map_ops.borrow().iter() {
            if *log == self.log && *own <= seq {
                ops.insert(*own, Bytes::copy_from_slice(record));
            }
        }
        let mut map = BTreeMap::new();
        for (s, record) in ops {
            MapOp::decode(&self.log, s, &record)?.apply_to(&mut map);
        }
        Ok(map)
    }
}

/// Reads of a sorted map outside handlers ([`RuntimeHandle::sorted_map`]).
/// Not recorded: nothing a handler writes depends on them.
pub struct MapReader {
    built: Arc<Mutex<Built>>,
    /// `None`: the current generation, caught up on every read.
    inner: Option<Arc<Inner>>,
    log: String,
}

impl MapReader {
    fn built(&self) -> Result<Arc<Mutex<Built>>> {
        match &self.inner {
            Some(inner) => inner.map_built(&self.log, inner.ns.latest(&self.log)?),
            None => Ok(Arc::clone(&self.built)),
        }
    }

    /// The latest version (the op log's latest seq).
    pub fn latest(&self) -> Result<Seq> {
        let built = self.built()?;
        let applied = lock(&built).applied;
        Ok(applied)
    }

    /// Which generation of the op log this reads (1 before any repair).
    pub fn generation(&self) -> Result<u64> {
        let built = self.built()?;
        let generation = lock(&built).generation;
        Ok(generation)
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
        let built = self.map_built(log, self.ns.latest(log)?)?;
        Ok(MapReader { built, inner: Some(Arc::clone(self)), log: log.to_owned() })
    }

    pub(crate) fn sorted_map_generation(&self, log: &str, generation: u64) -> Result<MapReader> {
        let source = generation_log(log, generation);
        if !exists(self.ns.as_ref(), &source)? {
            return Err(RuntimeError::InvalidArgument {
                reason: format!(
                    "{log} has no old generation {generation} ({source} does not exist): generations are kept by \
                     repairs, numbered from 1; read the current one with sorted_map"
                ),
            });
        }
        let mut built = Built::open(Arc::clone(&self.ns), log, generation, source.clone())?;
        // Old histories do not change: finish building this one once.
        built.catch_up(self.ns.latest(&source)?)?;
        Ok(MapReader { built: Arc::new(Mutex::new(built)), inner: None, log: log.to_owned() })
    }
}
