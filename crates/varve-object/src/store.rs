//! The object store: versions of keys on three logs of a namespace.
//!
//! | log | holds |
//! |---|---|
//! | `obj.NAME.versions` | one [`VersionRecord`] per version: the DAG and the values |
//! | `obj.NAME.refs` | branch and tag moves, written with `append_if` so a move is a compare-and-set |
//! | `obj.NAME.grants` | restrictions and read grants, in the order issued (the audit trail) |
//!
//! Invariants:
//! - A version's record follows its parents' records in the versions log.
//! - A version's id is computed from its key, its parents and its value's
//!   digest ([`version_of`]); a put of an existing id appends nothing.
//! - A delta's base is an earlier record of the same key (a first-parent
//!   ancestor); no read decodes more than [`ObjectOptions::chain_max`] deltas.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use varve_log::{LogConfig, LogError, Namespace, Seq, Watch};

use crate::codec::{Codec, ZstdCodec};
use crate::error::{ObjectError, Result};
use crate::index::{FoldError, Index, NodeIx};
use crate::merge::{map_diff, MapDiff, MergeFn, MergeInput};
use crate::proof::{AncestryProof, ProofStep};
use crate::record::{decode_version, Encoding, GrantKind, GrantRecord, ParentLink, RefKind, RefRecord, VersionRecord};
use crate::version::{value_digest, version_of, Version, VersionId};

/// The longest key, in bytes.
pub const KEY_BYTES_MAX: usize = 4096;

/// Values shorter than this are stored as they are: compressing them saves nothing.
const COMPRESS_MIN_BYTES: usize = 64;

/// Appends records for the store. By default the namespace itself; give the
/// runtime's append instead ([`ObjectOptions::writer`]) so that new versions
/// fire the handlers subscribed to the versions log.
///
/// A closure does: `Arc::new(move |log: &str, value: &[u8]| runtime.append(log, value).map_err(ObjectError::writer))`.
pub trait Appender: Send + Sync {
    /// Append one record to `log`.
    fn append(&self, log: &str, value: &[u8]) -> Result<Seq>;
}

impl<F> Appender for F
where
    F: Fn(&str, &[u8]) -> Result<Seq> + Send + Sync,
{
    fn append(&self, log: &str, value: &[u8]) -> Result<Seq> {
        self(log, value)
    }
}

/// How a put stores its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    /// Whole (compressed when that saves space).
    Complete,
    /// As a delta against an ancestor on the first-parent line (a
    /// skip-delta: see `docs/objects.md`) when that is smaller and the chain
    /// stays within [`ObjectOptions::chain_max`]; whole otherwise.
    Delta,
}

/// How an object store is opened.
#[derive(Clone)]
pub struct ObjectOptions {
    /// How puts store values unless told otherwise. Default [`Storage::Delta`].
    pub storage: Storage,
    /// The most deltas a read decodes (git packs allow 50). Default 16.
    pub chain_max: u32,
    /// Bytes of decoded values kept in memory for reads and deltas. Default 64 MiB.
    pub cache_bytes: usize,
    /// The codec. Default [`ZstdCodec`] at level 3.
    pub codec: Arc<dyn Codec>,
    /// Who appends to the versions log; `None` for the namespace.
    pub writer: Option<Arc<dyn Appender>>,
}

impl Default for ObjectOptions {
    fn default() -> Self {
        ObjectOptions {
            storage: Storage::Delta,
            chain_max: 16,
            cache_bytes: 64 << 20,
            codec: Arc::new(ZstdCodec::default()),
            writer: None,
        }
    }
}

impl fmt::Debug for ObjectOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectOptions")
            .field("storage", &self.storage)
            .field("chain_max", &self.chain_max)
            .field("cache_bytes", &self.cache_bytes)
            .field("codec", &self.codec.id())
            .field("writer", &self.writer.as_ref().map(|_| "custom"))
            .finish()
    }
}

/// What is stored about a version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionInfo {
    /// The version.
    pub version: Version,
    /// Its key.
    pub key: String,
    /// Its parents, in order.
    pub parents: Vec<Version>,
    /// Who wrote it ("" for the administrator).
    pub author: String,
    /// The seq of its record in the versions log.
    pub seq: Seq,
    /// The value's length.
    pub value_len: u64,
    /// How the value is stored.
    pub encoding: Encoding,
    /// The bytes the stored value takes (the record's payload).
    pub stored_bytes: usize,
}

impl VersionInfo {
    /// The info as JSON, as `varve object info --json` and the server's
    /// `…/info` route answer it.
    #[must_use]
    pub fn to_json(&self) -> serde_json::Value {
        let (encoding, delta) = match self.encoding {
            Encoding::Raw => ("raw", serde_json::Value::Null),
            Encoding::Compressed { .. } => ("compressed", serde_json::Value::Null),
            Encoding::Delta { base, chain, .. } => {
                ("delta", serde_json::json!({"base": base.to_hex(), "chain": chain}))
            }
        };
        serde_json::json!({
            "key": self.key,
            "version": self.version.to_json(),
            "parents": self.parents.iter().map(Version::to_json).collect::<Vec<_>>(),
            "author": self.author,
            "seq": self.seq,
            "value_bytes": self.value_len,
            "encoding": encoding,
            "delta": delta,
            "stored_bytes": self.stored_bytes,
        })
    }
}

/// Where a named ref points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RefTarget {
    /// The version.
    pub version: Version,
    /// A tag (set once) rather than a branch.
    pub tag: bool,
}

/// What `verify` checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VerifyReport {
    /// Versions whose value, parents and id were recomputed and matched.
    pub versions: usize,
}

/// A new version, as a watch yields it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notification {
    /// The seq of its record (resume a watch after it with `seq + 1`).
    pub seq: Seq,
    /// The key.
    pub key: String,
    /// The version.
    pub version: Version,
    /// Its parents.
    pub parents: Vec<Version>,
    /// Who wrote it.
    pub author: String,
}

impl Notification {
    /// Read a record of the versions log (e.g. a runtime handler's trigger record).
    pub fn decode(record: &[u8], seq: Seq) -> Result<Notification> {
        let r = decode_version(record).map_err(|reason| ObjectError::Corrupt {
            log: "versions".to_owned(),
            seq,
            reason,
        })?;
        Ok(Notification {
            seq,
            key: r.key.to_owned(),
            version: r.version,
            parents: r.parents.iter().map(|p| p.version).collect(),
            author: r.author.to_owned(),
        })
    }
}

/// A grant record and where it is in the grants log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantEntry {
    /// Its seq in the grants log.
    pub seq: Seq,
    /// What it says.
    pub record: GrantRecord,
}

/// An object store. Cheap to clone; clones share the index.
#[derive(Clone)]
pub struct ObjectStore {
    inner: Arc<Inner>,
    /// Who reads and writes through this handle; `None` is the
    /// administrator, who reads everything (see [`ObjectStore::as_principal`]).
    principal: Option<String>,
}

impl fmt::Debug for ObjectStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectStore").field("name", &self.inner.name).field("principal", &self.principal).finish()
    }
}

struct Inner {
    ns: Arc<dyn Namespace>,
    name: String,
    versions_log: String,
    refs_log: String,
    grants_log: String,
    options: ObjectOptions,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    index: Index,
    refs: Refs,
    grants: Grants,
    cache: ValueCache,
}

#[derive(Default)]
struct Refs {
    upto: Seq,
    current: BTreeMap<(String, String), RefTarget>,
}

#[derive(Default)]
struct Grants {
    upto: Seq,
    restricted: HashSet<String>,
    /// (key, principal) → versions granted, each with its ancestors or not.
    granted: HashMap<(String, String), Vec<(VersionId, bool)>>,
    by_key: HashMap<String, Vec<GrantEntry>>,
}

/// Hash maps with foldhash (keys are the store's own slots and names).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// Values decoded during one call, by node (a [`ValueCache`] of
/// [`MEMO_BYTES`], so a `verify` of a long history stays bounded).
type Memo = ValueCache;

/// The bytes of decoded values one call keeps for reuse as bases.
const MEMO_BYTES: usize = 32 << 20;

/// Decoded values by node, evicted oldest first past a byte budget.
#[derive(Default)]
struct ValueCache {
    values: HashMap<NodeIx, Arc<[u8]>>,
    order: VecDeque<NodeIx>,
    bytes: usize,
}

impl ValueCache {
    fn get(&self, ix: NodeIx) -> Option<Arc<[u8]>> {
        self.values.get(&ix).cloned()
    }

    fn insert(&mut self, ix: NodeIx, value: Arc<[u8]>, budget: usize) {
        if value.len() > budget / 4 || self.values.contains_key(&ix) {
            return;
        }
        self.bytes += value.len();
        self.values.insert(ix, value);
        self.order.push_back(ix);
        while self.bytes > budget {
            let Some(old) = self.order.pop_front() else { break };
            if let Some(v) = self.values.remove(&old) {
                self.bytes -= v.len();
            }
        }
    }
}

impl ObjectStore {
    /// Open (creating its logs if needed) the object store `name` in `ns`.
    pub fn open(ns: Arc<dyn Namespace>, name: &str) -> Result<ObjectStore> {
        ObjectStore::open_with(ns, name, ObjectOptions::default())
    }

    /// [`ObjectStore::open`] with options.
    pub fn open_with(ns: Arc<dyn Namespace>, name: &str, options: ObjectOptions) -> Result<ObjectStore> {
        if options.chain_max == 0 && options.storage == Storage::Delta {
            return Err(ObjectError::InvalidArgument {
                reason: "chain_max 0 allows no delta: use Storage::Complete, or a chain_max of 1 or more".to_owned(),
            });
        }
        let inner = Inner {
            versions_log: format!("obj.{name}.versions"),
            refs_log: format!("obj.{name}.refs"),
            grants_log: format!("obj.{name}.grants"),
            name: name.to_owned(),
            ns,
            options,
            state: Mutex::new(State::default()),
        };
        for log in [&inner.versions_log, &inner.refs_log, &inner.grants_log] {
            match inner.ns.log_info(log) {
                Ok(_) => {}
                Err(LogError::LogNotFound { .. } | LogError::NamespaceNotFound { .. }) => {
                    inner.ns.create_log(log, LogConfig::unbounded())?;
                }
                Err(other) => return Err(other.into()),
            }
        }
        let store = ObjectStore { inner: Arc::new(inner), principal: None };
        {
            let mut st = store.state();
            store.catch_up(&mut st)?;
            store.catch_up_refs(&mut st)?;
            store.catch_up_grants(&mut st)?;
        }
        Ok(store)
    }

    /// The same store, read and written as `principal`: reads of restricted
    /// keys need the owner's grant, and new keys are owned by `principal`.
    /// The handle from [`ObjectStore::open`] is the administrator's.
    pub fn as_principal(&self, principal: &str) -> Result<ObjectStore> {
        if principal.is_empty() {
            return Err(ObjectError::InvalidArgument { reason: "a principal needs a non-empty name".to_owned() });
        }
        Ok(ObjectStore { inner: Arc::clone(&self.inner), principal: Some(principal.to_owned()) })
    }

    /// The store's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The log holding the versions (subscribe a handler to it to react to new versions).
    #[must_use]
    pub fn versions_log(&self) -> &str {
        &self.inner.versions_log
    }

    // ----- writes ---------------------------------------------------------

    /// Store `value` as a new version of `key` derived from `base` (`None`
    /// for a new root), with the store's default [`Storage`]. The same put
    /// twice returns the same version and stores nothing the second time.
    pub fn put(&self, key: &str, base: Option<&VersionId>, value: &[u8]) -> Result<Version> {
        self.put_with(key, base, value, self.inner.options.storage)
    }

    /// [`ObjectStore::put`] with the storage chosen for this value.
    pub fn put_with(&self, key: &str, base: Option<&VersionId>, value: &[u8], storage: Storage) -> Result<Version> {
        let parents: Vec<VersionId> = base.into_iter().copied().collect();
        self.write(key, &parents, value, storage)
    }

    /// Store `value` as the merge of `left` and `right` (two parents, in that order).
    pub fn merge(&self, key: &str, left: &VersionId, right: &VersionId, value: &[u8]) -> Result<Version> {
        if left == right {
            return Err(ObjectError::InvalidArgument {
                reason: format!("cannot merge version {} with itself", left.short(12)),
            });
        }
        self.write(key, &[*left, *right], value, self.inner.options.storage)
    }

    /// Merge `left` and `right` with a three-way merge function: it gets the
    /// closest common ancestor's value ([`ObjectStore::merge_bases`], the
    /// deepest when there are several) and both sides'.
    pub fn merge_with(&self, key: &str, left: &VersionId, right: &VersionId, f: &dyn MergeFn) -> Result<Version> {
        let (lv, rv) = (self.info(key, left)?.version, self.info(key, right)?.version);
        let base = self.merge_bases(key, left, right)?.into_iter().next();
        let base_value = base.map(|b| self.get(key, &b.id)).transpose()?;
        let (l, r) = (self.get(key, left)?, self.get(key, right)?);
        let input = MergeInput {
            key,
            ancestor: base.zip(base_value.as_deref()),
            left: (lv, l.as_slice()),
            right: (rv, r.as_slice()),
        };
        let value = f.merge(&input)?;
        self.merge(key, left, right, &value)
    }

    /// Merge every head of `key` into one with `f` (deepest first, ties by
    /// id, so every process merges the same heads alike). `None` when the
    /// key has fewer than two heads. This is what a merge handler
    /// subscribed to the versions log calls.
    pub fn merge_heads(&self, key: &str, f: &dyn MergeFn) -> Result<Option<Version>> {
        let mut heads = self.heads(key)?;
        if heads.len() < 2 {
            return Ok(None);
        }
        heads.sort_by(|a, b| b.depth.cmp(&a.depth).then(a.id.cmp(&b.id)));
        let mut merged = heads[0];
        for head in &heads[1..] {
            merged = self.merge_with(key, &merged.id, &head.id, f)?;
        }
        Ok(Some(merged))
    }

    fn write(&self, key: &str, parent_ids: &[VersionId], value: &[u8], storage: Storage) -> Result<Version> {
        check_key(key)?;
        let inner = &*self.inner;
        let mut st = self.state();
        let mut parents = Vec::with_capacity(parent_ids.len());
        for id in parent_ids {
            let ix = self.node_of(&mut st, key, id)?;
            let node = st.index.at(ix);
            parents.push((ix, ParentLink { version: node.version, seq: node.seq }));
        }
        let digest = value_digest(value);
        let links: Vec<Version> = parents.iter().map(|(_, link)| link.version).collect();
        let version = version_of(key, &links, &digest);
        if st.index.node(&version.id).is_some() {
            return Ok(version);
        }
        self.catch_up_grants_if_principal(&mut st)?;
        if let Some(key_ix) = st.index.key(key) {
            let owner = &st.index.keys[key_ix as usize].owner;
            if self.principal.as_deref().is_some_and(|p| p != owner) && st.grants.restricted.contains(key) {
                return Err(self.forbidden(key, &version.id, owner));
            }
        }
        let codec = &inner.options.codec;
        let whole = |value: &[u8]| -> Result<(Encoding, Vec<u8>)> {
            if value.len() >= COMPRESS_MIN_BYTES {
                let compressed = codec.encode(value).map_err(|e| codec_error(&e))?;
                if compressed.len() < value.len() {
                    return Ok((Encoding::Compressed { codec: codec.id() }, compressed));
                }
            }
            Ok((Encoding::Raw, value.to_vec()))
        };
        let (encoding, payload) = match (storage, parents.first()) {
            (Storage::Delta, Some(&(parent_ix, _))) if value.len() >= COMPRESS_MIN_BYTES => {
                let base_ix = st.index.skip_delta_base(parent_ix);
                let base_node = st.index.at(base_ix);
                let base_link = ParentLink { version: base_node.version, seq: base_node.seq };
                let chain = base_node.chain + 1;
                if chain > inner.options.chain_max {
                    whole(value)?
                } else {
                    let base_value = self.value_of(&mut st, base_ix, true)?;
                    let encoding = Encoding::Delta {
                        codec: codec.id(),
                        base_seq: base_link.seq,
                        base: base_link.version.id,
                        chain,
                    };
                    match codec.encode_delta(&base_value, value) {
                        // Half the value or less: no whole compression does
                        // much better, so it is not tried.
                        Ok(delta) if delta.len() * 2 <= value.len() => (encoding, delta),
                        Ok(delta) => {
                            let (kind, bytes) = whole(value)?;
                            if delta.len() < bytes.len() {
                                (encoding, delta)
                            } else {
                                (kind, bytes)
                            }
                        }
                        Err(_) => whole(value)?,
                    }
                }
            }
            _ => whole(value)?,
        };
        let record = VersionRecord {
            key,
            parents: parents.iter().map(|(_, link)| *link).collect(),
            version,
            digest,
            value_len: value.len() as u64,
            encoding,
            author: self.principal.as_deref().unwrap_or(""),
            payload: &payload,
        };
        let bytes = record.encode();
        // Unlocked while the append waits (for an fsync, a server, a
        // cluster), so that other threads' puts share a group commit.
        drop(st);
        let seq = match &inner.options.writer {
            Some(writer) => writer.append(&inner.versions_log, &bytes)?,
            None => inner.ns.append(&inner.versions_log, &bytes)?,
        };
        let mut st = self.state();
        // Records appended before ours (by other threads or processes) are
        // folded first, so the index keeps log order; one of them may have
        // folded ours already.
        self.catch_up_to(&mut st, seq.saturating_sub(1))?;
        st.index.fold(&record, seq).map_err(|e| self.fold_error(seq, &e))?;
        st.index.folded_upto = st.index.folded_upto.max(seq);
        let ix = st.index.node(&version.id).expect("just folded");
        let budget = inner.options.cache_bytes;
        st.cache.insert(ix, Arc::from(value), budget);
        Ok(version)
    }

    // ----- reads ----------------------------------------------------------

    /// The value of a version.
    pub fn get(&self, key: &str, version: &VersionId) -> Result<Vec<u8>> {
        let mut st = self.state();
        let ix = self.readable(&mut st, key, version)?;
        Ok(self.value_of(&mut st, ix, true)?.to_vec())
    }

    /// What is stored about a version (its parents, author, encoding…).
    pub fn info(&self, key: &str, version: &VersionId) -> Result<VersionInfo> {
        let mut st = self.state();
        let ix = self.readable(&mut st, key, version)?;
        let seq = st.index.at(ix).seq;
        let bytes = self.read_record(seq)?;
        let r = self.decode(&bytes, seq)?;
        Ok(VersionInfo {
            version: r.version,
            key: r.key.to_owned(),
            parents: r.parents.iter().map(|p| p.version).collect(),
            author: r.author.to_owned(),
            seq,
            value_len: r.value_len,
            encoding: r.encoding,
            stored_bytes: r.payload.len(),
        })
    }

    /// The parents of a version: one after a put, two after a merge, none for a root.
    pub fn previous(&self, key: &str, version: &VersionId) -> Result<Vec<Version>> {
        let mut st = self.state();
        let ix = self.readable(&mut st, key, version)?;
        let parents = st.index.at(ix).parents.clone();
        let mut out = Vec::with_capacity(parents.len());
        for p in parents {
            let node = st.index.at(p);
            let v = node.version;
            if self.may_read(&st, key, p) {
                out.push(v);
            } else {
                return Err(self.forbidden(key, &v.id, &Self::owner_of(&st, key)));
            }
        }
        Ok(out)
    }

    /// Up to `m` predecessors of `version`, nearest first, in one call
    /// (`UStore`'s `GetKPreviousVersion`, §3.2.3): it follows single parents
    /// and stops after `m`, at a root, or after including a merge (a version
    /// with two parents), so fewer than `m` means "a branch or the start is
    /// here; choose with [`ObjectStore::previous`]". Also stops before a
    /// version the principal may not read.
    pub fn history(&self, key: &str, version: &VersionId, m: usize) -> Result<Vec<Version>> {
        let mut st = self.state();
        let path = self.history_path(&mut st, key, version, m)?;
        Ok(path.iter().map(|&ix| st.index.at(ix).version).collect())
    }

    /// [`ObjectStore::history`] with each version's value (`GetKPreviousValue`).
    pub fn history_values(&self, key: &str, version: &VersionId, m: usize) -> Result<Vec<(Version, Vec<u8>)>> {
        let mut st = self.state();
        let path = self.history_path(&mut st, key, version, m)?;
        let mut out = Vec::with_capacity(path.len());
        let mut memo = Memo::default();
        for ix in path {
            let value = self.value_of_in(&mut st, ix, true, &mut memo)?;
            out.push((st.index.at(ix).version, value.to_vec()));
        }
        Ok(out)
    }

    fn history_path(&self, st: &mut State, key: &str, version: &VersionId, m: usize) -> Result<Vec<NodeIx>> {
        let mut at = self.readable(st, key, version)?;
        let mut out = Vec::with_capacity(m.min(1024));
        while out.len() < m {
            let parents = &st.index.at(at).parents;
            if parents.len() != 1 {
                break;
            }
            let parent = parents[0];
            if !self.may_read(st, key, parent) {
                break;
            }
            out.push(parent);
            at = parent;
        }
        Ok(out)
    }

    /// The versions of `key` no version derives from, in the order written.
    /// Local truth: on a shared backend (remote, NATS) a head may already
    /// have a successor that this process has not read yet.
    pub fn heads(&self, key: &str) -> Result<Vec<Version>> {
        let mut st = self.state();
        self.catch_up(&mut st)?;
        let Some(key_ix) = st.index.key(key) else { return Ok(Vec::new()) };
        let mut out = Vec::new();
        self.catch_up_grants_if_principal(&mut st)?;
        for ix in st.index.heads(key_ix).to_vec() {
            if self.may_read(&st, key, ix) {
                out.push(st.index.at(ix).version);
            }
        }
        Ok(out)
    }

    /// Every version of `key` the principal may read, in the order written.
    pub fn versions(&self, key: &str) -> Result<Vec<Version>> {
        let mut st = self.state();
        self.catch_up(&mut st)?;
        let Some(key_ix) = st.index.key(key) else { return Ok(Vec::new()) };
        let all = st.index.keys[key_ix as usize].versions.clone();
        self.catch_up_grants_if_principal(&mut st)?;
        let mut out = Vec::new();
        for ix in all {
            if self.may_read(&st, key, ix) {
                out.push(st.index.at(ix).version);
            }
        }
        Ok(out)
    }

    /// Every key with at least one version, in the order first written.
    pub fn keys(&self) -> Result<Vec<String>> {
        let mut st = self.state();
        self.catch_up(&mut st)?;
        Ok(st.index.keys.iter().map(|k| k.name.clone()).collect())
    }

    /// The owner of `key`: who wrote its first version ("" for the administrator).
    pub fn owner(&self, key: &str) -> Result<String> {
        let mut st = self.state();
        self.catch_up(&mut st)?;
        Ok(Self::owner_of(&st, key))
    }

    /// The closest common ancestors of two versions, deepest first (several
    /// after criss-cross merges; none if they share no history).
    pub fn merge_bases(&self, key: &str, a: &VersionId, b: &VersionId) -> Result<Vec<Version>> {
        let mut st = self.state();
        let (ia, ib) = (self.readable(&mut st, key, a)?, self.readable(&mut st, key, b)?);
        Ok(st.index.merge_bases(ia, ib).into_iter().map(|ix| st.index.at(ix).version).collect())
    }

    /// How the map value of `second` differs from that of `first` (both JSON objects).
    pub fn diff(&self, key: &str, first: &VersionId, second: &VersionId) -> Result<MapDiff> {
        let (a, b) = (self.info(key, first)?.version, self.info(key, second)?.version);
        map_diff((a, &self.get(key, first)?), (b, &self.get(key, second)?))
    }

    /// A version named by a ref of `key`, a unique id prefix (4 or more hex
    /// characters) or a full id.
    pub fn resolve(&self, key: &str, text: &str) -> Result<Version> {
        if let Some(target) = self.refs(key)?.get(text) {
            return Ok(target.version);
        }
        let not_found = || ObjectError::VersionNotFound {
            store: self.inner.name.clone(),
            key: key.to_owned(),
            version: text.to_owned(),
        };
        if text.len() == 64 {
            if let Ok(id) = text.parse::<VersionId>() {
                // A full id: Forbidden says why, where a prefix search over
                // the readable versions would only say "not found".
                return Ok(self.info(key, &id)?.version);
            }
        }
        let lower = text.to_ascii_lowercase();
        if lower.len() < 4 || lower.len() > 64 || !lower.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(not_found());
        }
        let matches: Vec<Version> =
            self.versions(key)?.into_iter().filter(|v| v.id.to_hex().starts_with(&lower)).collect();
        match matches.len() {
            0 => Err(not_found()),
            1 => Ok(matches[0]),
            count => Err(ObjectError::AmbiguousVersion {
                store: self.inner.name.clone(),
                key: key.to_owned(),
                prefix: text.to_owned(),
                count,
            }),
        }
    }

    // ----- integrity ------------------------------------------------------

    /// Recompute `version` and every ancestor from the stored bytes: each
    /// value's digest, each parent link and each id. The first version that
    /// disagrees is named in [`ObjectError::Tampered`].
    pub fn verify(&self, key: &str, version: &VersionId) -> Result<VerifyReport> {
        let mut st = self.state();
        let start = self.readable(&mut st, key, version)?;
        let mut stack = vec![start];
        let mut seen = HashSet::from([start]);
        let mut checked = 0;
        let mut memo = Memo::default();
        while let Some(ix) = stack.pop() {
            self.verify_one(&mut st, key, ix, &mut memo)?;
            checked += 1;
            for &parent in &st.index.at(ix).parents {
                if seen.insert(parent) {
                    stack.push(parent);
                }
            }
        }
        Ok(VerifyReport { versions: checked })
    }

    /// Check one version from its stored bytes. `memo` holds values this
    /// `verify` decoded from the log (never the cache), so a base shared by
    /// many versions is decoded once; a base whose bytes were altered fails
    /// its own check in the same call.
    fn verify_one(&self, st: &mut State, key: &str, ix: NodeIx, memo: &mut Memo) -> Result<()> {
        let node = st.index.at(ix).clone();
        let tampered = |reason: String| ObjectError::Tampered {
            key: key.to_owned(),
            version: node.version.id.to_hex(),
            reason,
            log: self.inner.versions_log.clone(),
            seq: node.seq,
        };
        let bytes = self.read_record(node.seq)?;
        let r = decode_version(&bytes).map_err(|e| tampered(format!("the record does not decode: {e}")))?;
        if r.key != key {
            return Err(tampered(format!("the record names key {:?}", r.key)));
        }
        if r.version != node.version {
            return Err(tampered(format!("the record claims version {}", r.version.id.short(12))));
        }
        let index_parents: Vec<Version> = node.parents.iter().map(|&p| st.index.at(p).version).collect();
        let record_parents: Vec<Version> = r.parents.iter().map(|p| p.version).collect();
        if record_parents != index_parents {
            return Err(tampered("its parent links differ from the DAG's".to_owned()));
        }
        let recomputed = version_of(key, &record_parents, &r.digest);
        if recomputed != node.version {
            return Err(tampered(format!("its parents and digest hash to {}", recomputed.id.short(12))));
        }
        let value =
            self.value_of_in(st, ix, false, memo).map_err(|e| tampered(format!("its value does not decode: {e}")))?;
        if value_digest(&value) != r.digest {
            return Err(tampered("its value's BLAKE3 differs from the digest in its id".to_owned()));
        }
        Ok(())
    }

    /// A proof that `ancestor` is an ancestor of (or is) `head`, which a
    /// client holding only `head`'s id checks with [`AncestryProof::check`].
    pub fn prove(&self, key: &str, ancestor: &VersionId, head: &VersionId) -> Result<AncestryProof> {
        let mut st = self.state();
        let (ia, ih) = (self.readable(&mut st, key, ancestor)?, self.readable(&mut st, key, head)?);
        let path = st.index.path(ih, ia).ok_or_else(|| ObjectError::InvalidArgument {
            reason: format!("{} is not an ancestor of {}", ancestor.short(12), head.short(12)),
        })?;
        let mut steps = Vec::with_capacity(path.len());
        for (i, &ix) in path.iter().enumerate() {
            let seq = st.index.at(ix).seq;
            let bytes = self.read_record(seq)?;
            let r = self.decode(&bytes, seq)?;
            let follow = match path.get(i + 1) {
                Some(&next) => {
                    let next_id = st.index.at(next).version.id;
                    let at = r.parents.iter().position(|p| p.version.id == next_id).unwrap_or(0);
                    u8::try_from(at).unwrap_or(0)
                }
                None => 0,
            };
            steps.push(ProofStep { parents: r.parents.iter().map(|p| p.version).collect(), digest: r.digest, follow });
        }
        Ok(AncestryProof { key: key.to_owned(), steps })
    }

    // ----- refs -----------------------------------------------------------

    /// The refs of `key`, by name.
    pub fn refs(&self, key: &str) -> Result<BTreeMap<String, RefTarget>> {
        let mut st = self.state();
        self.catch_up_refs(&mut st)?;
        Ok(st
            .refs
            .current
            .range((key.to_owned(), String::new())..)
            .take_while(|((k, _), _)| k == key)
            .map(|((_, name), target)| (name.clone(), *target))
            .collect())
    }

    /// Point branch `name` of `key` at `to` if it is at `expected` now
    /// (`None`: the branch must not exist). [`ObjectError::RefMoved`] otherwise.
    pub fn set_branch(&self, key: &str, name: &str, expected: Option<&VersionId>, to: &VersionId) -> Result<()> {
        self.move_ref(key, name, RefKind::Branch, expected, Some(to))
    }

    /// Create tag `name` of `key` at `to`. Tags do not move: setting an
    /// existing tag to another version is [`ObjectError::RefMoved`].
    pub fn set_tag(&self, key: &str, name: &str, to: &VersionId) -> Result<()> {
        if let Some(target) = self.refs(key)?.get(name) {
            if target.tag && target.version.id == *to {
                return Ok(());
            }
        }
        self.move_ref(key, name, RefKind::Tag, None, Some(to))
    }

    /// Delete ref `name` of `key` if it is at `expected`.
    pub fn delete_ref(&self, key: &str, name: &str, expected: &VersionId) -> Result<()> {
        self.move_ref(key, name, RefKind::Delete, Some(expected), None)
    }

    fn move_ref(
        &self,
        key: &str,
        name: &str,
        kind: RefKind,
        expected: Option<&VersionId>,
        to: Option<&VersionId>,
    ) -> Result<()> {
        check_ref_name(name)?;
        let mut st = self.state();
        let new = match to {
            Some(id) => {
                let ix = self.readable(&mut st, key, id)?;
                Some(st.index.at(ix).version)
            }
            None => None,
        };
        loop {
            self.catch_up_refs(&mut st)?;
            let slot = (key.to_owned(), name.to_owned());
            let actual = st.refs.current.get(&slot).map(|t| t.version.id);
            if actual.as_ref() != expected {
                let show = |v: Option<&VersionId>| v.map_or_else(|| "none".to_owned(), |id| id.short(12));
                return Err(ObjectError::RefMoved {
                    key: key.to_owned(),
                    name: name.to_owned(),
                    expected: show(expected),
                    actual: show(actual.as_ref()),
                });
            }
            let record = RefRecord {
                kind,
                key: key.to_owned(),
                name: name.to_owned(),
                old: actual,
                new,
                author: self.principal.clone().unwrap_or_default(),
                unix_ms: unix_ms(),
            };
            match self.inner.ns.append_if(&self.inner.refs_log, st.refs.upto, &record.encode()) {
                Ok(_) => {
                    self.catch_up_refs(&mut st)?;
                    return Ok(());
                }
                // Another writer moved some ref first: read it and check again.
                Err(LogError::Conflict { .. }) => {}
                Err(other) => return Err(other.into()),
            }
        }
    }

    // ----- grants ---------------------------------------------------------

    /// Make `key` private: from now on only its owner and the principals it
    /// grants read it. Only the owner (or the administrator) may.
    pub fn restrict(&self, key: &str) -> Result<()> {
        self.append_grant(key, GrantKind::Restrict, "", &[], false)
    }

    /// Let `principal` read `versions` of `key` (and their ancestors if
    /// `with_ancestors`). Grants are permanent, as in `UStore`: a version once
    /// readable stays readable. Only the owner (or the administrator) may.
    pub fn grant(&self, key: &str, principal: &str, versions: &[VersionId], with_ancestors: bool) -> Result<()> {
        if principal.is_empty() {
            return Err(ObjectError::InvalidArgument { reason: "grant to whom? the principal is empty".to_owned() });
        }
        self.append_grant(key, GrantKind::Grant, principal, versions, with_ancestors)
    }

    /// Every restriction and grant of `key`, in the order issued.
    pub fn grants(&self, key: &str) -> Result<Vec<GrantEntry>> {
        let mut st = self.state();
        self.catch_up_grants(&mut st)?;
        Ok(st.grants.by_key.get(key).cloned().unwrap_or_default())
    }

    fn append_grant(
        &self,
        key: &str,
        kind: GrantKind,
        principal: &str,
        versions: &[VersionId],
        with_ancestors: bool,
    ) -> Result<()> {
        let mut st = self.state();
        self.catch_up(&mut st)?;
        let owner = st.index.key(key).map(|k| st.index.keys[k as usize].owner.clone()).ok_or_else(|| {
            ObjectError::InvalidArgument { reason: format!("key {key:?} has no versions: put one before granting") }
        })?;
        if let Some(me) = &self.principal {
            if *me != owner {
                return Err(ObjectError::NotOwner { principal: me.clone(), key: key.to_owned(), owner });
            }
        }
        for id in versions {
            self.node_of(&mut st, key, id)?;
        }
        let record = GrantRecord {
            kind,
            key: key.to_owned(),
            principal: principal.to_owned(),
            versions: versions.to_vec(),
            with_ancestors,
            author: self.principal.clone().unwrap_or_default(),
            unix_ms: unix_ms(),
        };
        self.inner.ns.append(&self.inner.grants_log, &record.encode())?;
        self.catch_up_grants(&mut st)
    }

    // ----- notifications --------------------------------------------------

    /// New versions of keys starting with `prefix` ("" for all), from the
    /// versions log's seq `from` on (1 for everything; resume after a
    /// notification with its `seq + 1`). Durable: what it yields is stored.
    /// A version two processes stored at once may be yielded twice (same id).
    pub fn watch(&self, prefix: &str, from: Seq) -> Result<ObjectWatch> {
        let watch = self.inner.ns.watch(&self.inner.versions_log, from)?;
        Ok(ObjectWatch { store: self.clone(), watch, prefix: prefix.to_owned() })
    }

    // ----- internals ------------------------------------------------------

    fn state(&self) -> MutexGuard<'_, State> {
        // The state is rebuilt from the logs; a panic elsewhere leaves it usable.
        self.inner.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn read_record(&self, seq: Seq) -> Result<Bytes> {
        Ok(self.inner.ns.get(&self.inner.versions_log, seq)?)
    }

    fn decode<'a>(&self, bytes: &'a [u8], seq: Seq) -> Result<VersionRecord<'a>> {
        decode_version(bytes).map_err(|reason| ObjectError::Corrupt {
            log: self.inner.versions_log.clone(),
            seq,
            reason,
        })
    }

    fn catch_up(&self, st: &mut State) -> Result<()> {
        let latest = self.inner.ns.latest(&self.inner.versions_log)?;
        self.catch_up_to(st, latest)
    }

    fn catch_up_to(&self, st: &mut State, upto: Seq) -> Result<()> {
        if upto <= st.index.folded_upto {
            return Ok(());
        }
        let from = st.index.folded_upto + 1;
        for record in self.inner.ns.scan(&self.inner.versions_log, (from..=upto).into())? {
            let record = record?;
            let r = self.decode(&record.value, record.seq)?;
            st.index.fold(&r, record.seq).map_err(|e| self.fold_error(record.seq, &e))?;
            st.index.folded_upto = record.seq;
        }
        Ok(())
    }

    fn catch_up_refs(&self, st: &mut State) -> Result<()> {
        let latest = self.inner.ns.latest(&self.inner.refs_log)?;
        if latest <= st.refs.upto {
            return Ok(());
        }
        for record in self.inner.ns.scan(&self.inner.refs_log, ((st.refs.upto + 1)..=latest).into())? {
            let record = record?;
            let r = RefRecord::decode(&record.value).map_err(|reason| ObjectError::Corrupt {
                log: self.inner.refs_log.clone(),
                seq: record.seq,
                reason,
            })?;
            let slot = (r.key, r.name);
            match (r.kind, r.new) {
                (RefKind::Branch | RefKind::Tag, Some(version)) => {
                    st.refs.current.insert(slot, RefTarget { version, tag: r.kind == RefKind::Tag });
                }
                _ => {
                    st.refs.current.remove(&slot);
                }
            }
            st.refs.upto = record.seq;
        }
        Ok(())
    }

    fn catch_up_grants(&self, st: &mut State) -> Result<()> {
        let latest = self.inner.ns.latest(&self.inner.grants_log)?;
        if latest <= st.grants.upto {
            return Ok(());
        }
        for record in self.inner.ns.scan(&self.inner.grants_log, ((st.grants.upto + 1)..=latest).into())? {
            let record = record?;
            let r = GrantRecord::decode(&record.value).map_err(|reason| ObjectError::Corrupt {
                log: self.inner.grants_log.clone(),
                seq: record.seq,
                reason,
            })?;
            match r.kind {
                GrantKind::Restrict => {
                    st.grants.restricted.insert(r.key.clone());
                }
                GrantKind::Grant => {
                    let granted = st.grants.granted.entry((r.key.clone(), r.principal.clone())).or_default();
                    granted.extend(r.versions.iter().map(|&id| (id, r.with_ancestors)));
                }
            }
            st.grants.by_key.entry(r.key.clone()).or_default().push(GrantEntry { seq: record.seq, record: r });
            st.grants.upto = record.seq;
        }
        Ok(())
    }

    fn fold_error(&self, seq: Seq, error: &FoldError) -> ObjectError {
        let reason = match error {
            FoldError::MissingParent(id) => format!("it names parent {} which no earlier record holds", id.short(12)),
            FoldError::KeyMismatch => "it stores an existing version under another key".to_owned(),
            FoldError::ParentOfAnotherKey(id) => format!("it names parent {}, a version of another key", id.short(12)),
        };
        ObjectError::Corrupt { log: self.inner.versions_log.clone(), seq, reason }
    }

    /// The node of `id` under `key`, catching up from the log on a miss.
    fn node_of(&self, st: &mut State, key: &str, id: &VersionId) -> Result<NodeIx> {
        if st.index.node(id).is_none() {
            self.catch_up(st)?;
        }
        match st.index.node(id) {
            Some(ix) if st.index.keys[st.index.at(ix).key as usize].name == key => Ok(ix),
            _ => Err(ObjectError::VersionNotFound {
                store: self.inner.name.clone(),
                key: key.to_owned(),
                version: id.short(12),
            }),
        }
    }

    /// [`ObjectStore::node_of`], refused with `Forbidden` if the principal may not read it.
    fn readable(&self, st: &mut State, key: &str, id: &VersionId) -> Result<NodeIx> {
        let ix = self.node_of(st, key, id)?;
        self.catch_up_grants_if_principal(st)?;
        if self.may_read(st, key, ix) {
            Ok(ix)
        } else {
            Err(self.forbidden(key, id, &Self::owner_of(st, key)))
        }
    }

    fn catch_up_grants_if_principal(&self, st: &mut State) -> Result<()> {
        if self.principal.is_some() {
            self.catch_up_grants(st)?;
        }
        Ok(())
    }

    /// Whether the principal may read a node; grants as of the last catch-up.
    fn may_read(&self, st: &State, key: &str, ix: NodeIx) -> bool {
        let Some(me) = &self.principal else { return true };
        if !st.grants.restricted.contains(key) || *me == Self::owner_of(st, key) {
            return true;
        }
        let Some(granted) = st.grants.granted.get(&(key.to_owned(), me.clone())) else { return false };
        let id = st.index.at(ix).version.id;
        granted.iter().any(|(g, with_ancestors)| {
            *g == id || (*with_ancestors && st.index.node(g).is_some_and(|gx| st.index.is_ancestor(ix, gx)))
        })
    }

    fn owner_of(st: &State, key: &str) -> String {
        st.index.key(key).map(|k| st.index.keys[k as usize].owner.clone()).unwrap_or_default()
    }

    fn forbidden(&self, key: &str, id: &VersionId, owner: &str) -> ObjectError {
        ObjectError::Forbidden {
            principal: self.principal.clone().unwrap_or_default(),
            key: key.to_owned(),
            version: id.short(12),
            owner: owner.to_owned(),
        }
    }

    /// The value of a node, through its delta chain. `use_cache` false
    /// decodes every step from the stored bytes (for `verify`).
    fn value_of(&self, st: &mut State, ix: NodeIx, use_cache: bool) -> Result<Arc<[u8]>> {
        self.value_of_in(st, ix, use_cache, &mut Memo::default())
    }

    /// [`ObjectStore::value_of`] that also keeps every value it decodes in
    /// `memo`, for calls that decode many versions sharing skip-delta bases
    /// (`history_values`, `verify`): each base is then decoded once per call,
    /// even with no value cache.
    fn value_of_in(&self, st: &mut State, ix: NodeIx, use_cache: bool, memo: &mut Memo) -> Result<Arc<[u8]>> {
        let codec = &self.inner.options.codec;
        // Walk down to a value held whole (or cached), keeping the deltas.
        let mut deltas: Vec<(NodeIx, Bytes, usize)> = Vec::new();
        let mut at = ix;
        // Whether the value at the bottom was decoded here (not found in the
        // memo or the cache), so the memo should keep it.
        let mut decoded_here = true;
        let mut value: Arc<[u8]> = loop {
            if let Some(v) = memo.get(at) {
                decoded_here = false;
                break v;
            }
            if use_cache {
                if let Some(v) = st.cache.get(at) {
                    decoded_here = false;
                    break v;
                }
            }
            let seq = st.index.at(at).seq;
            let bytes = self.read_record(seq)?;
            let r = self.decode(&bytes, seq)?;
            let corrupt = |reason: String| ObjectError::Corrupt { log: self.inner.versions_log.clone(), seq, reason };
            let len = usize::try_from(r.value_len).map_err(|_| corrupt("value length overflows".to_owned()))?;
            match r.encoding {
                Encoding::Raw => break Arc::from(r.payload),
                Encoding::Compressed { codec: id } => {
                    check_codec(codec.as_ref(), id).map_err(corrupt)?;
                    break Arc::from(codec.decode(r.payload, len).map_err(|e| corrupt(e.to_string()))?);
                }
                Encoding::Delta { codec: id, base_seq, base, .. } => {
                    check_codec(codec.as_ref(), id).map_err(corrupt)?;
                    let base_ix = st.index.node(&base).filter(|&b| st.index.at(b).seq == base_seq && base_seq < seq);
                    let Some(base_ix) = base_ix else {
                        return Err(corrupt(format!("its delta base {} is not an earlier record", base.short(12))));
                    };
                    if deltas.len() > self.inner.options.chain_max.max(64) as usize {
                        return Err(corrupt("its delta chain is longer than any this store writes".to_owned()));
                    }
                    let offset = bytes.len() - r.payload.len();
                    deltas.push((at, bytes.slice(offset..), len));
                    at = base_ix;
                }
            }
        };
        if decoded_here {
            if use_cache {
                st.cache.insert(at, Arc::clone(&value), self.inner.options.cache_bytes);
            }
            memo.insert(at, Arc::clone(&value), MEMO_BYTES);
        }
        while let Some((node, payload, len)) = deltas.pop() {
            let seq = st.index.at(node).seq;
            let decoded = codec.decode_delta(&value, &payload, len).map_err(|e| ObjectError::Corrupt {
                log: self.inner.versions_log.clone(),
                seq,
                reason: format!("its delta does not decode: {e}"),
            })?;
            value = Arc::from(decoded);
            if use_cache {
                st.cache.insert(node, Arc::clone(&value), self.inner.options.cache_bytes);
            }
            memo.insert(node, Arc::clone(&value), MEMO_BYTES);
        }
        Ok(value)
    }
}

/// New versions as they are stored; see [`ObjectStore::watch`].
pub struct ObjectWatch {
    store: ObjectStore,
    watch: Watch,
    prefix: String,
}

impl ObjectWatch {
    /// The versions-log seq the next notification is read from (resume here).
    #[must_use]
    pub fn next_seq(&self) -> Seq {
        self.watch.next_seq()
    }

    /// The next matching notification, waiting at most `timeout` for it;
    /// `Ok(None)` on timeout.
    pub fn next_timeout(&mut self, timeout: Duration) -> Result<Option<Notification>> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let Some(record) = self.watch.next_timeout(left)? else { return Ok(None) };
            if let Some(n) = self.accept(&record.value, record.seq)? {
                return Ok(Some(n));
            }
        }
    }

    fn accept(&self, bytes: &[u8], seq: Seq) -> Result<Option<Notification>> {
        let n = Notification::decode(bytes, seq)?;
        if !n.key.starts_with(&self.prefix) {
            return Ok(None);
        }
        if self.store.principal.is_some() {
            let mut st = self.store.state();
            let ix = self.store.node_of(&mut st, &n.key, &n.version.id)?;
            self.store.catch_up_grants(&mut st)?;
            if !self.store.may_read(&st, &n.key, ix) {
                return Ok(None);
            }
        }
        Ok(Some(n))
    }
}

impl Iterator for ObjectWatch {
    type Item = Result<Notification>;

    /// Blocks until the next matching version is stored.
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let record = match self.watch.next()? {
                Ok(record) => record,
                Err(e) => return Some(Err(e.into())),
            };
            match self.accept(&record.value, record.seq) {
                Ok(Some(n)) => return Some(Ok(n)),
                Ok(None) => {}
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

fn check_key(key: &str) -> Result<()> {
    if key.is_empty() || key.len() > KEY_BYTES_MAX {
        return Err(ObjectError::InvalidArgument {
            reason: format!("a key is 1 to {KEY_BYTES_MAX} bytes of UTF-8, not {} bytes", key.len()),
        });
    }
    Ok(())
}

fn check_ref_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 200
        && name.bytes().all(|c| c.is_ascii_alphanumeric() || b"_.-/".contains(&c))
        && !name.bytes().all(|c| c.is_ascii_hexdigit());
    if ok {
        Ok(())
    } else {
        Err(ObjectError::InvalidArgument {
            reason: format!(
                "ref name {name:?}: use 1 to 200 of [A-Za-z0-9_.-/], and not only hex digits (that reads as a version id)"
            ),
        })
    }
}

fn check_codec(codec: &dyn Codec, id: u8) -> std::result::Result<(), String> {
    if codec.id() == id {
        Ok(())
    } else {
        Err(format!("its value was written by codec {id}; this store was opened with codec {}", codec.id()))
    }
}

fn codec_error(e: &std::io::Error) -> ObjectError {
    ObjectError::InvalidArgument { reason: format!("the codec failed to compress the value: {e}") }
}

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
