//! Node copying on logs (`PEDaLS` §III–IV, Algorithm 1), shared by every
//! structure of this crate.
//!
//! A node is a pair of seqs: `dseq`, its DataLog entry (constant contents and
//! the name of its LinkLog), and `lseq`, the first LinkLog entry of the node
//! *copy* in use. A copy is `o` contiguous entries, one per original field
//! (`rem = extra`), followed by up to `extra` entries that update one field
//! each (`rem` counts down to 0, which ends the copy). When a version needs
//! more changes to a node than its copy has `rem` left, the node is copied:
//! its current fields are appended as a fresh copy (unchanged fields first, as
//! in Figure 3) and its predecessor is changed to point to the copy — which
//! may copy the predecessor, and so on up to the APLog.
//!
//! **Writes.** An update runs against an in-memory working set ([`Txn`])
//! loaded from the latest committed version, then [`Txn::finish`] turns it
//! into a *plan*: every append it needs, with the seq each one must land at.
//! The plan is a pure function of the committed state and the op, so running
//! it again after a crash reproduces it exactly. Appends go DataLog →
//! LinkLogs (children before parents) → APLog; the APLog append commits.
//! They go in one atomic batch when they can (see [`Engine::write_plan`]),
//! so on the Log's backends an update is written whole or not at all; the
//! order and the per-entry path below still hold for an update that a
//! failed batch leaves to be completed entry by entry.
//!
//! **Failures (C3, C4).** Each append is `append_if(log, seq - 1, entry)`: if
//! an earlier attempt already wrote it (a lost acknowledgement — Type 2 — or a
//! crashed run of the same op), the log answers `Conflict`, we read the entry
//! at `seq` and accept it when it is byte-identical. So retries never create
//! duplicates and every copy stays exactly `o + extra` entries long. Before
//! the first append of an update its op is appended to the op log; reopening
//! a structure whose op log is ahead of its APLog re-plans that op from the
//! committed state and completes it (entries already written are recognised
//! and skipped). Entries above the latest committed version ("rogue") carry
//! `vs = latest + 1` and readers never see them: a reader at version `v`
//! stops scanning a copy at the first entry with `vs > v`.
//!
//! **Reads.** Finding a node of version `v` costs one DataLog `get`, one
//! `latest` of its LinkLog and at most `o + extra` LinkLog `get`s — never a
//! scan of a whole log (C2).

use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use varve_log::{LogConfig, LogError, Namespace, OnFull, Seq, SeqRange};

use crate::cache::TwoGenerationCache;
use crate::codec::{ApEntry, DataEntry, FieldKind, LinkEntry, MetaEntry, OpEntry};
use crate::error::{PdsError, Result};
use crate::{Options, Structure, Version};

/// Most fields (original pointers and versioned scalars) a node has.
pub(crate) const FIELDS_MAX: usize = 3;

/// How many times one append (or log creation) is tried when the log reports
/// a transient error (`LogError::Io`), before the update gives up. The op
/// stays in the op log and is completed by the next update or reopen.
pub const APPEND_ATTEMPTS_MAX: u32 = 8;

/// How many times an update is planned again after another writer's update
/// took its version (see [`Engine::update`]), before it gives up with
/// [`PdsError::Contended`]. Each lost race means another update committed.
pub const UPDATE_ATTEMPTS_MAX: u32 = 64;

/// Largest `extra` accepted: a copy is `o + extra` entries and a read of a
/// node scans at most that many, so this bounds the cost of a node visit.
pub const EXTRA_MAX: u32 = 1024;

/// Node copies kept decoded in memory (see [`Engine::load`]) unless
/// [`Options::node_cache_entries`](crate::Options) says otherwise: a
/// two-generation cache, so the nodes on every update's path stay.
///
/// Each generation holds half, 57,344 copies: exactly what a hash table
/// of 65,536 buckets holds before it grows (7/8 of them). A capacity of
/// 65,536 would take tables of that size too and leave them half empty.
pub const NODE_CACHE_ENTRIES_DEFAULT: usize = 7 << 14;
const _: () = assert!(NODE_CACHE_ENTRIES_DEFAULT / 2 == (1 << 16) / 8 * 7);

/// What is known of one node copy. Log entries never change once written,
/// so this is never stale; it only grows as extra pointers are appended.
struct CachedCopy {
    val: Bytes,
    link: String,
    entries: Vec<LinkEntry>,
    /// The copy ended (`rem` 0 or `o + extra` entries): nothing more to read.
    complete: bool,
    /// The cache epoch in which `entries` held every entry of the copy in
    /// its LinkLog (see [`NodeCache`]); 0 when not known to.
    synced: u64,
}

impl CachedCopy {
    fn note_complete(&mut self, window: usize) {
        self.complete = self.entries.len() >= window || self.entries.last().is_some_and(|e| e.rem == 0);
    }
}

/// The decoded node copies, and what lets a visit skip the LinkLog's
/// `latest`: within one epoch, only this engine's own updates have written,
/// and each wrote its entries into the cache as well as the logs (`Engine::
/// write_through`). So a copy synced in the current epoch holds every entry
/// of its LinkLog with a version up to `known_through`, and a visit at such
/// a version needs no log call. An update by another writer (seen when
/// catching up), completing an interrupted update, or a failed write starts
/// a new epoch: every copy is read again at its next visit.
struct NodeCache {
    copies: TwoGenerationCache<Ref, CachedCopy>,
    epoch: u64,
    known_through: Version,
}

impl NodeCache {
    fn new_epoch(&mut self, known_through: Version) {
        self.epoch += 1;
        self.known_through = known_through;
    }
}

/// The entries an update wrote to one node copy, for [`Engine::write_through`].
pub(crate) struct CopyWrite {
    copy: Ref,
    /// The node's value when the copy is new (the entries are all of it);
    /// `None` for extra pointers appended to an existing copy.
    new_val: Option<Bytes>,
    first_seq: Seq,
    entries: Vec<LinkEntry>,
}

/// A node copy: DataLog seq and first LinkLog seq (0, 0 is the null node).
/// For a scalar field (colour) the value travels in `dseq`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Ref {
    pub dseq: Seq,
    pub lseq: Seq,
}

impl Ref {
    pub const NULL: Ref = Ref { dseq: 0, lseq: 0 };

    pub fn is_null(self) -> bool {
        self.dseq == 0
    }
}

/// One node as it reads at some version.
#[derive(Clone, Debug)]
pub(crate) struct NodeView {
    pub val: Bytes,
    pub fields: [Ref; FIELDS_MAX],
    /// The last entry of the copy visible at that version, and its `rem`.
    pub tail_seq: Seq,
    pub tail_rem: u32,
}

/// One append of a plan.
#[derive(Clone, Debug)]
pub(crate) struct PlannedAppend {
    pub log: String,
    pub seq: Seq,
    pub bytes: Vec<u8>,
    /// The log is a new node's LinkLog and must be created first.
    pub create: bool,
}

/// How a structure applies one logged op to the working set; `Ok(false)`
/// means the op changes nothing (no version is written).
pub(crate) type ApplyFn = fn(&mut Txn<'_>, &OpEntry) -> Result<bool>;

pub(crate) struct Engine {
    pub ns: Arc<dyn Namespace>,
    pub name: String,
    pub structure: Structure,
    pub extra: u32,
    pub keep: Option<u64>,
    pub kinds: &'static [FieldKind],
    pub data_log: String,
    pub ap_log: String,
    pub ops_log: String,
    link_prefix: String,
    committed: Version,
    /// Set by this engine's own update once it is written whole; taken by
    /// the next update, which then skips the catch-up reads (see
    /// [`OwnTail`]). `None` after anything else: an open, a catch-up, an
    /// error, a lost race.
    own_tail: Option<OwnTail>,
    cache: Mutex<NodeCache>,
}

/// Where the logs end after this engine's own last update, as it wrote
/// them. While the op log still ends at `ops`, no other writer has logged
/// an op since — and none commits a version without logging its op first —
/// so the next update plans on this tail after one `latest` of the op log,
/// instead of catching up (two `latest` and two `get` calls, then the
/// root's APLog entry and the DataLog's end: on a `varve serve` store, five
/// round trips fewer of about nine per update). The op is then logged as
/// after a catch-up, with `append_if` right after `ops`.
#[derive(Clone, Copy, Debug)]
struct OwnTail {
    /// The op log's last seq (this update's op).
    ops: Seq,
    /// The version committed.
    version: Version,
    /// Its root.
    root: Ref,
    /// The DataLog's last seq.
    data: Seq,
}

/// The longest structure name: its longest log name, `pds.<name>.link.<u64>`,
/// must be a valid log name.
pub const STRUCTURE_NAME_BYTES_MAX: usize =
    varve_log::NAME_BYTES_MAX - "pds.".len() - ".link.".len() - "18446744073709551615".len();
const _: () = assert!(STRUCTURE_NAME_BYTES_MAX == 170);

fn transient(e: &LogError) -> bool {
    matches!(e, LogError::Io { .. })
}

impl Engine {
    /// Open (creating if needed) the logs of structure `name`.
    pub fn open(
        ns: Arc<dyn Namespace>,
        name: &str,
        structure: Structure,
        options: Options,
        apply: ApplyFn,
    ) -> Result<Engine> {
        let Options { extra, keep, node_cache_entries } = options;
        if !(1..=EXTRA_MAX).contains(&extra) {
            return Err(PdsError::InvalidArgument { reason: format!("extra must be 1..={EXTRA_MAX}, not {extra}") });
        }
        if keep == Some(0) {
            return Err(PdsError::InvalidArgument { reason: "keep must be at least 1 version".into() });
        }
        varve_log::validate_name(name, false)?;
        if name.len() > STRUCTURE_NAME_BYTES_MAX {
            return Err(PdsError::InvalidArgument {
                reason: format!(
                    "structure name {name:?} is {} bytes; at most {STRUCTURE_NAME_BYTES_MAX} (its logs are named pds.<name>.link.<n>, and a log name is at most {} bytes)",
                    name.len(),
                    varve_log::NAME_BYTES_MAX
                ),
            });
        }
        let prefix = format!("pds.{name}");
        let meta_log = format!("{prefix}.meta");
        let requested = MetaEntry { kind: structure.code(), extra, keep: keep.unwrap_or(0) };
        let mut engine = Engine {
            ns,
            name: name.to_owned(),
            structure,
            extra,
            keep,
            kinds: structure.kinds(),
            data_log: format!("{prefix}.data"),
            ap_log: format!("{prefix}.ap"),
            ops_log: format!("{prefix}.ops"),
            link_prefix: format!("{prefix}.link."),
            committed: 0,
            own_tail: None,
            cache: Mutex::new(NodeCache {
                copies: TwoGenerationCache::new(node_cache_entries),
                epoch: 1,
                known_through: 0,
            }),
        };
        engine.create(&meta_log, LogConfig::unbounded())?;
        if engine.ns.latest(&meta_log)? == 0 {
            engine.put(&meta_log, 1, &requested.encode())?;
        }
        let existing = MetaEntry::decode(&engine.ns.get(&meta_log, 1)?, &meta_log, 1)?;
        if existing != requested {
            let describe = |m: &MetaEntry| {
                let kind = Structure::from_code(m.kind).map_or_else(|| format!("kind {}", m.kind), |s| s.to_string());
                let keep = if m.keep == 0 { "unbounded".to_owned() } else { format!("keep {}", m.keep) };
                format!("{kind} with extra {} and {keep}", m.extra)
            };
            return Err(PdsError::ConfigMismatch {
                structure: name.to_owned(),
                existing: describe(&existing),
                requested: describe(&requested),
            });
        }
        engine.create(&engine.data_log.clone(), LogConfig::unbounded())?;
        let ap_config = keep.map_or_else(LogConfig::unbounded, |k| LogConfig::keep(k, OnFull::Refuse));
        engine.create(&engine.ap_log.clone(), ap_config)?;
        engine.create(&engine.ops_log.clone(), LogConfig::unbounded())?;
        engine.recover(apply)?;
        Ok(engine)
    }

    pub fn link_log(&self, dseq: Seq) -> String {
        format!("{}{dseq}", self.link_prefix)
    }

    /// The latest committed version as the APLog says.
    pub fn latest(&self) -> Result<Version> {
        Ok(self.ns.latest(&self.ap_log)?)
    }

    /// The version a read names: `None` is the latest (0 when there is none yet).
    pub fn resolve(&self, at: Option<Version>) -> Result<Version> {
        let latest = self.latest()?;
        match at {
            None => Ok(latest),
            Some(v) if v == 0 || v > latest => {
                Err(PdsError::NoSuchVersion { structure: self.name.clone(), version: v, latest })
            }
            Some(v) => Ok(v),
        }
    }

    /// The root of version `at` (0: the empty structure before any update).
    pub fn root(&self, at: Version) -> Result<Ref> {
        if at == 0 {
            return Ok(Ref::NULL);
        }
        let entry = ApEntry::decode(&self.ns.get(&self.ap_log, at)?, &self.ap_log, at)?;
        if entry.vs != at {
            return Err(PdsError::Corrupt {
                log: self.ap_log.clone(),
                seq: at,
                reason: format!("APLog entry at seq {at} names version {}", entry.vs),
            });
        }
        Ok(Ref { dseq: entry.dseq, lseq: entry.lseq })
    }

    /// Read node copy `r` as of version `at`: one DataLog get, one LinkLog
    /// scan of at most `o + extra` entries.
    ///
    /// Decoded copies are cached: a repeated visit costs one scan (to see
    /// extra pointers appended since) until the copy is complete, then
    /// no log call at all — nor while only this engine has written since
    /// the copy was read (see [`NodeCache`]).
    pub fn load(&self, r: Ref, at: Version) -> Result<NodeView> {
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        let (epoch, known_through) = (cache.epoch, cache.known_through);
        let copy = cache.copies.get_or_try_insert(r, || {
            let data = self.ns.get(&self.data_log, r.dseq).map_err(|e| self.dangling(e, &self.data_log, r.dseq))?;
            let data = DataEntry::decode(&data, &self.data_log, r.dseq)?;
            Ok::<_, PdsError>(CachedCopy {
                val: data.val,
                link: data.link,
                entries: Vec::new(),
                complete: false,
                synced: 0,
            })
        })?;
        let o = self.kinds.len();
        let window = o + self.extra as usize;
        let seen_enough = |copy: &CachedCopy| copy.entries.last().is_some_and(|e| e.vs > at);
        let known = copy.synced == epoch && at <= known_through;
        if !copy.complete && !seen_enough(copy) && !known {
            // The rest of the copy's window in one scan (one request on a
            // remote store, where a `latest` and a `get` per entry were up
            // to ten), clipped to the log's end.
            let first = r.lseq + copy.entries.len() as u64;
            let range = SeqRange { first, last: r.lseq + window as u64 - 1 };
            for (expected, record) in (first..).zip(self.ns.scan(&copy.link, range)?) {
                let record = record?;
                if record.seq != expected {
                    return Err(PdsError::Corrupt {
                        log: copy.link.clone(),
                        seq: record.seq,
                        reason: format!("a scan from seq {first} gave seq {} where {expected} was due", record.seq),
                    });
                }
                // Entries past a copy's end are the next copy's; read on
                // (at most the window) rather than cut a streamed scan short.
                if !copy.complete {
                    let entry = LinkEntry::decode(&record.value, &copy.link, record.seq)?;
                    copy.entries.push(entry);
                    copy.complete = entry.rem == 0 || copy.entries.len() == window;
                }
            }
            // Read to the log's end, or the copy's: every entry there now is known.
            copy.synced = epoch;
        }
        let mut fields = [Ref::NULL; FIELDS_MAX];
        let mut seen = [false; FIELDS_MAX];
        let (mut tail_seq, mut tail_rem) = (0, 0);
        for (seq, entry) in (r.lseq..).zip(&copy.entries) {
            if entry.vs > at {
                break;
            }
            let Some(index) = self.kinds.iter().position(|&k| k == entry.kind) else {
                return Err(PdsError::Corrupt {
                    log: copy.link.clone(),
                    seq,
                    reason: format!("a {} has no {:?} field", self.structure, entry.kind),
                });
            };
            fields[index] = Ref { dseq: entry.dseq, lseq: entry.lseq };
            seen[index] = true;
            (tail_seq, tail_rem) = (seq, entry.rem);
            if entry.rem == 0 {
                break;
            }
        }
        if !seen[..o].iter().all(|&s| s) {
            return Err(PdsError::Corrupt {
                log: copy.link.clone(),
                seq: r.lseq,
                reason: format!("node copy starting here lacks fields as of version {at}"),
            });
        }
        Ok(NodeView { val: copy.val.clone(), fields, tail_seq, tail_rem })
    }

    fn dangling(&self, e: LogError, log: &str, seq: Seq) -> PdsError {
        match e {
            LogError::SeqNotFound { .. } => PdsError::Corrupt {
                log: log.to_owned(),
                seq,
                reason: format!("structure {:?} points to an entry that does not exist", self.name),
            },
            other => other.into(),
        }
    }

    /// Catch up with the logs: take the committed version from the APLog
    /// and complete the op the op log holds beyond it, if any — an
    /// interrupted update of this process, or another writer's update in
    /// flight (completing it writes exactly the entries its writer writes).
    /// Returns the op log's latest seq as seen, which the next op must
    /// follow directly.
    ///
    /// The op log is read before the APLog: an op is logged only once the
    /// version before it is committed, so an op seen beyond the committed
    /// version is exactly the next one, even while other writers move on.
    fn catch_up(&mut self, apply: ApplyFn) -> Result<Seq> {
        self.own_tail = None;
        let ops_latest = self.ns.latest(&self.ops_log)?;
        let last_op = match ops_latest {
            0 => None,
            seq => Some(OpEntry::decode(&self.ns.get(&self.ops_log, seq)?, &self.ops_log, seq)?),
        };
        let committed = self.latest()?;
        let pending = last_op.filter(|op| op.vs > committed);
        if committed != self.committed || pending.is_some() {
            // Another writer's updates (or this one's, before a reopen):
            // cached copies may lack their entries.
            self.cache.lock().unwrap_or_else(PoisonError::into_inner).new_epoch(committed);
        }
        self.committed = committed;
        if let Some(op) = pending {
            if op.vs != self.committed + 1 {
                return Err(PdsError::Corrupt {
                    log: self.ops_log.clone(),
                    seq: ops_latest,
                    reason: format!("pending op for version {} but {} versions are committed", op.vs, self.committed),
                });
            }
            self.run(&op, None, None, apply)?;
        }
        Ok(ops_latest)
    }

    /// Complete an interrupted update, if the op log has one.
    pub fn recover(&mut self, apply: ApplyFn) -> Result<()> {
        self.catch_up(apply).map(|_| ())
    }

    /// Run one update: catch up, plan it, log the op, append the plan,
    /// commit. Returns the new version, or the current one if the op changes
    /// nothing.
    ///
    /// **Several writers** (processes sharing the structure through a
    /// `varve serve`) are serialised by the op log: an op is logged with
    /// `append_if` right after the op seen by [`Engine::catch_up`], so of two
    /// writers planning the same version one logs its op and the other gets
    /// `Conflict`, completes the winner's update and plans again on the new
    /// version — up to [`UPDATE_ATTEMPTS_MAX`] times, then
    /// [`PdsError::Contended`].
    pub fn update(&mut self, op: u8, a: Vec<u8>, b: Vec<u8>, apply: ApplyFn) -> Result<Version> {
        let mut op = OpEntry { vs: 0, op, a, b };
        for _ in 0..UPDATE_ATTEMPTS_MAX {
            let tail = match self.own_tail.take() {
                Some(tail) if tail.version == self.committed && self.ns.latest(&self.ops_log)? == tail.ops => {
                    Some(tail)
                }
                _ => None,
            };
            let ops_seen = match tail {
                Some(tail) => tail.ops,
                None => self.catch_up(apply)?,
            };
            op.vs = self.committed + 1;
            if let Some(version) = self.run(&op, Some(ops_seen + 1), tail, apply)? {
                return Ok(version);
            }
        }
        Err(PdsError::Contended { structure: self.name.clone(), attempts: UPDATE_ATTEMPTS_MAX })
    }

    /// Plan `op` on the committed version and write it. With `log_op_at`,
    /// first log the op at that seq of the op log; `None` if another
    /// writer's op is there (nothing was written). Without, complete an op
    /// already logged. With `tail`, plan on this engine's own last update
    /// instead of reading the logs' ends.
    fn run(
        &mut self,
        op: &OpEntry,
        log_op_at: Option<Seq>,
        tail: Option<OwnTail>,
        apply: ApplyFn,
    ) -> Result<Option<Version>> {
        if let Some(keep) = self.keep {
            if self.committed >= keep {
                return Err(PdsError::RetentionFull { structure: self.name.clone(), keep });
            }
        }
        let v = self.committed + 1;
        debug_assert_eq!(op.vs, v);
        let root = match tail {
            Some(tail) => tail.root,
            None => self.root(v - 1)?,
        };
        let mut txn = Txn { engine: self, v, nodes: Vec::new(), root: Slot::Stored(root) };
        if !apply(&mut txn, op)? {
            return Ok(Some(self.committed));
        }
        let Finished { plan, copies, root, data_end } = txn.finish(tail.map(|tail| tail.data))?;
        if let Some(seq) = log_op_at {
            if !self.claim(&self.ops_log, seq, &op.encode())? {
                return Ok(None);
            }
        }
        let written = self.write_plan(&plan);
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        match (&written, log_op_at) {
            // This engine's own update, whole: the cache learns its entries.
            (Ok(()), Some(_)) if cache.known_through == v - 1 => self.write_through(&mut cache, v, copies),
            // Completing another's update (some entries were there already),
            // or a failed write: read copies again.
            _ => cache.new_epoch(if written.is_ok() { v } else { v - 1 }),
        }
        drop(cache);
        written?;
        self.committed = v;
        self.own_tail = log_op_at.map(|ops| OwnTail { ops, version: v, root, data: data_end });
        Ok(Some(v))
    }

    /// Write a plan: its new LinkLogs, then every entry in one atomic batch
    /// (one journal frame: a frame header per update instead of one per
    /// entry). When the batch does not land as planned — an earlier attempt
    /// or a crashed run of the op wrote some of it, or the batch failed —
    /// the entries are written one by one, each idempotently.
    fn write_plan(&self, plan: &[PlannedAppend]) -> Result<()> {
        for append in plan.iter().filter(|a| a.create) {
            self.create(&append.log, LogConfig::unbounded())?;
        }
        if self.write_batch(plan) {
            return Ok(());
        }
        for append in plan {
            self.put(&append.log, append.seq, &append.bytes)?;
        }
        Ok(())
    }

    /// The plan as one `append_batch_if`, each log expected to end right
    /// before its first entry. `true` when every entry landed at its seq;
    /// `false` when the batch was refused or failed (written or not: the
    /// entry-by-entry path finds out) or the plan's seqs of a log are not
    /// consecutive.
    fn write_batch(&self, plan: &[PlannedAppend]) -> bool {
        // (log, next seq): a plan touches a few dozen logs at most.
        let mut ends: Vec<(&str, Seq)> = Vec::new();
        let mut expected: Vec<(&str, Seq)> = Vec::new();
        for append in plan {
            match ends.iter_mut().find(|(log, _)| *log == append.log) {
                Some((_, next)) if *next == append.seq => *next += 1,
                Some(_) => return false,
                None => {
                    ends.push((&append.log, append.seq + 1));
                    expected.push((&append.log, append.seq - 1));
                }
            }
        }
        let batch: Vec<(&str, &[u8])> = plan.iter().map(|a| (a.log.as_str(), &a.bytes[..])).collect();
        match self.ns.append_batch_if(&batch, &expected) {
            Ok(seqs) => seqs.len() == plan.len() && seqs.iter().zip(plan).all(|(&got, a)| got == a.seq),
            Err(_) => false,
        }
    }

    /// Add version `v`'s entries, just written, to the cached copies they
    /// belong to, so that visits of them need no `latest` (see [`NodeCache`]).
    fn write_through(&self, cache: &mut NodeCache, v: Version, copies: Vec<CopyWrite>) {
        let window = self.kinds.len() + self.extra as usize;
        let epoch = cache.epoch;
        for write in copies {
            if let Some(val) = write.new_val {
                let mut copy = CachedCopy {
                    val,
                    link: self.link_log(write.copy.dseq),
                    entries: write.entries,
                    complete: false,
                    synced: epoch,
                };
                copy.note_complete(window);
                cache.copies.insert(write.copy, copy);
            } else if let Some(copy) = cache.copies.get_mut(&write.copy) {
                if copy.synced == epoch && write.copy.lseq + copy.entries.len() as u64 == write.first_seq {
                    copy.entries.extend(write.entries);
                    copy.note_complete(window);
                } else {
                    copy.synced = 0;
                }
            }
        }
        cache.known_through = v;
    }

    fn create(&self, log: &str, config: LogConfig) -> Result<()> {
        let mut last = None;
        for _ in 0..APPEND_ATTEMPTS_MAX {
            match self.ns.create_log(log, config) {
                Ok(()) => return Ok(()),
                Err(e) if transient(&e) => last = Some(e),
                Err(e) => return Err(e.into()),
            }
        }
        Err(PdsError::RetriesExhausted {
            log: log.to_owned(),
            attempts: APPEND_ATTEMPTS_MAX,
            last: last.expect("at least one attempt"),
        })
    }

    /// Idempotent append: make `bytes` the entry at `seq` of `log`, whether
    /// this call or an earlier attempt writes it.
    pub fn put(&self, log: &str, seq: Seq, bytes: &[u8]) -> Result<()> {
        if self.claim(log, seq, bytes)? {
            return Ok(());
        }
        Err(PdsError::Corrupt {
            log: log.to_owned(),
            seq,
            reason: "holds another entry than the update being completed writes there".into(),
        })
    }

    /// [`Engine::put`], except that another entry at `seq` is `Ok(false)`
    /// (another writer's) instead of an error.
    fn claim(&self, log: &str, seq: Seq, bytes: &[u8]) -> Result<bool> {
        let mut last = None;
        for _ in 0..APPEND_ATTEMPTS_MAX {
            match self.ns.append_if(log, seq - 1, bytes) {
                Ok(got) if got == seq => return Ok(true),
                Ok(got) => {
                    return Err(PdsError::Corrupt {
                        log: log.to_owned(),
                        seq: got,
                        reason: format!("append expected to land at seq {seq}"),
                    })
                }
                Err(LogError::Conflict { actual, .. }) if actual >= seq => {
                    return Ok(self.ns.get(log, seq)?[..] == bytes[..]);
                }
                Err(LogError::Conflict { actual, .. }) => {
                    return Err(PdsError::Corrupt {
                        log: log.to_owned(),
                        seq: actual,
                        reason: format!("log ends at seq {actual}, before the committed state (seq {})", seq - 1),
                    })
                }
                Err(e) if transient(&e) => last = Some(e),
                Err(e) => return Err(e.into()),
            }
        }
        Err(PdsError::RetriesExhausted {
            log: log.to_owned(),
            attempts: APPEND_ATTEMPTS_MAX,
            last: last.expect("at least one attempt"),
        })
    }

    /// The seq of the DataLog's last committed entry (entries of the version
    /// being written, `vs >= v`, are skipped: at most a few per op).
    fn data_tail(&self, v: Version) -> Result<Seq> {
        let mut seq = self.ns.latest(&self.data_log)?;
        while seq > 0 {
            let entry = DataEntry::decode(&self.ns.get(&self.data_log, seq)?, &self.data_log, seq)?;
            if entry.vs < v {
                break;
            }
            seq -= 1;
        }
        Ok(seq)
    }
}

/// What [`Txn::finish`] makes of an update.
struct Finished {
    /// The appends, in order.
    plan: Vec<PlannedAppend>,
    /// The entries written to each copy, for the node cache.
    copies: Vec<CopyWrite>,
    /// The new version's root.
    root: Ref,
    /// The DataLog's last seq once the plan is written.
    data_end: Seq,
}

/// Index of a node in a [`Txn`]'s working set.
pub(crate) type NodeId = usize;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    /// A pointer not followed yet (or a scalar): the committed value.
    Stored(Ref),
    /// A node of the working set.
    Node(NodeId),
}

struct WorkNode {
    /// `dseq` 0 until a new node is given its DataLog seq in `finish`.
    r: Ref,
    val: Bytes,
    is_new: bool,
    /// Field values in the committed version (for new nodes: unused).
    orig: [Ref; FIELDS_MAX],
    slots: [Slot; FIELDS_MAX],
    tail_seq: Seq,
    tail_rem: u32,
}

/// The working set of one update: nodes loaded from the committed version
/// and changed in memory, turned into appends by [`Txn::finish`].
pub(crate) struct Txn<'e> {
    engine: &'e Engine,
    v: Version,
    nodes: Vec<WorkNode>,
    root: Slot,
}

impl Txn<'_> {
    fn resolve(&mut self, slot: Slot) -> Result<Option<NodeId>> {
        match slot {
            Slot::Node(id) => Ok(Some(id)),
            Slot::Stored(r) if r.is_null() => Ok(None),
            Slot::Stored(r) => {
                let view = self.engine.load(r, self.v - 1)?;
                let mut slots = [Slot::Stored(Ref::NULL); FIELDS_MAX];
                for (slot, field) in slots.iter_mut().zip(view.fields) {
                    *slot = Slot::Stored(field);
                }
                self.nodes.push(WorkNode {
                    r,
                    val: view.val,
                    is_new: false,
                    orig: view.fields,
                    slots,
                    tail_seq: view.tail_seq,
                    tail_rem: view.tail_rem,
                });
                Ok(Some(self.nodes.len() - 1))
            }
        }
    }

    pub fn root(&mut self) -> Result<Option<NodeId>> {
        let id = self.resolve(self.root)?;
        if let Some(id) = id {
            self.root = Slot::Node(id);
        }
        Ok(id)
    }

    pub fn set_root(&mut self, node: Option<NodeId>) {
        self.root = node.map_or(Slot::Stored(Ref::NULL), Slot::Node);
    }

    pub fn child(&mut self, id: NodeId, field: usize) -> Result<Option<NodeId>> {
        let child = self.resolve(self.nodes[id].slots[field])?;
        if let Some(child) = child {
            self.nodes[id].slots[field] = Slot::Node(child);
        }
        Ok(child)
    }

    pub fn set_child(&mut self, id: NodeId, field: usize, child: Option<NodeId>) {
        self.nodes[id].slots[field] = child.map_or(Slot::Stored(Ref::NULL), Slot::Node);
    }

    pub fn scalar(&self, id: NodeId, field: usize) -> u64 {
        match self.nodes[id].slots[field] {
            Slot::Stored(r) => r.dseq,
            Slot::Node(_) => unreachable!("scalar fields never hold nodes"),
        }
    }

    pub fn set_scalar(&mut self, id: NodeId, field: usize, value: u64) {
        self.nodes[id].slots[field] = Slot::Stored(Ref { dseq: value, lseq: 0 });
    }

    pub fn val(&self, id: NodeId) -> &Bytes {
        &self.nodes[id].val
    }

    /// Whether `field` of `id` points to working node `child` (never loads).
    pub fn slot_is(&self, id: NodeId, field: usize, child: NodeId) -> bool {
        self.nodes[id].slots[field] == Slot::Node(child)
    }

    /// Give `to` every field of `from` (used when a node's contents change
    /// and a new node takes its place).
    pub fn copy_fields(&mut self, from: NodeId, to: NodeId) {
        self.nodes[to].slots = self.nodes[from].slots;
    }

    /// A new node with null pointers and scalar fields 0.
    pub fn new_node(&mut self, val: Bytes) -> NodeId {
        self.nodes.push(WorkNode {
            r: Ref::NULL,
            val,
            is_new: true,
            orig: [Ref::NULL; FIELDS_MAX],
            slots: [Slot::Stored(Ref::NULL); FIELDS_MAX],
            tail_seq: 0,
            tail_rem: 0,
        });
        self.nodes.len() - 1
    }

    /// Turn the working set into the ordered appends of this version.
    /// `data_tail`: the DataLog's last committed seq, when known (else it is
    /// read).
    fn finish(mut self, data_tail: Option<Seq>) -> Result<Finished> {
        let engine = self.engine;
        let (v, o, extra) = (self.v, engine.kinds.len(), engine.extra);
        // Post-order over the working nodes reachable in the new version, so
        // that a child's (possibly new) copy is known before its parent's
        // pointer to it is written. Nodes no longer reachable are dropped.
        let mut order = Vec::new();
        if let Slot::Node(root) = self.root {
            let mut stack = vec![(root, false)];
            while let Some((id, expanded)) = stack.pop() {
                if expanded {
                    order.push(id);
                    continue;
                }
                stack.push((id, true));
                for slot in self.nodes[id].slots[..o].iter().rev() {
                    if let Slot::Node(child) = *slot {
                        stack.push((child, false));
                    }
                }
            }
        }
        let mut plan = Vec::new();
        let mut copies = Vec::new();
        let mut dseq = match data_tail {
            Some(seq) => seq,
            None => engine.data_tail(v)?,
        };
        for &id in &order {
            let node = &mut self.nodes[id];
            if node.is_new {
                dseq += 1;
                node.r = Ref { dseq, lseq: 1 };
                let entry = DataEntry { vs: v, val: node.val.clone(), link: engine.link_log(dseq) };
                plan.push(PlannedAppend {
                    log: engine.data_log.clone(),
                    seq: dseq,
                    bytes: entry.encode(),
                    create: false,
                });
            }
        }
        for &id in &order {
            let mut fields = [Ref::NULL; FIELDS_MAX];
            for (field, slot) in fields.iter_mut().zip(&self.nodes[id].slots[..o]) {
                *field = match *slot {
                    Slot::Stored(r) => r,
                    Slot::Node(child) => self.nodes[child].r,
                };
            }
            let node = &mut self.nodes[id];
            let log = engine.link_log(node.r.dseq);
            let entry = |f: usize, rem: u32| LinkEntry {
                vs: v,
                dseq: fields[f].dseq,
                lseq: fields[f].lseq,
                rem,
                kind: engine.kinds[f],
            };
            if node.is_new {
                let entries: Vec<LinkEntry> = (0..o).map(|f| entry(f, extra)).collect();
                for (seq, e) in (1..).zip(&entries) {
                    plan.push(PlannedAppend { log: log.clone(), seq, bytes: e.encode(), create: seq == 1 });
                }
                copies.push(CopyWrite { copy: node.r, new_val: Some(node.val.clone()), first_seq: 1, entries });
                continue;
            }
            let changed: Vec<usize> = (0..o).filter(|&f| fields[f] != node.orig[f]).collect();
            if changed.is_empty() {
                continue;
            }
            let mut seq = node.tail_seq;
            let mut write = CopyWrite { copy: node.r, new_val: None, first_seq: seq + 1, entries: Vec::new() };
            if changed.len() <= node.tail_rem as usize {
                // Room in the copy: one extra pointer per changed field.
                let mut rem = node.tail_rem;
                for &f in &changed {
                    rem -= 1;
                    write.entries.push(entry(f, rem));
                }
            } else {
                // Copy the node: unchanged fields first, then the new ones.
                node.r.lseq = seq + 1;
                write.copy = node.r;
                write.new_val = Some(node.val.clone());
                let unchanged = (0..o).filter(|f| !changed.contains(f));
                write.entries = unchanged.chain(changed.iter().copied()).map(|f| entry(f, extra)).collect();
            }
            for e in &write.entries {
                seq += 1;
                plan.push(PlannedAppend { log: log.clone(), seq, bytes: e.encode(), create: false });
            }
            copies.push(write);
        }
        let root = match self.root {
            Slot::Stored(r) => r,
            Slot::Node(id) => self.nodes[id].r,
        };
        let ap = ApEntry { vs: v, dseq: root.dseq, lseq: root.lseq };
        plan.push(PlannedAppend { log: engine.ap_log.clone(), seq: v, bytes: ap.encode(), create: false });
        Ok(Finished { plan, copies, root, data_end: dseq })
    }
}
