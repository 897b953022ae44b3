//! The journal's logs in memory, found by id (frames name logs by id) and by
//! name (every log call).
//!
//! A namespace may hold millions of logs (a `PEDaLS` node is a log), so the
//! per-log cost matters more than it would for a catalog of a few names.
//! Each log's state lives once, in a dense vector; two hash tables of 4-byte
//! slot numbers find it by id and by name. The name is stored once, in the
//! descriptor: the name table hashes it from there. Against two `HashMap`s
//! (id → state, name → id), this drops a second copy of every name and the
//! hash tables' slack on the whole state (buckets of ~100 bytes at up to
//! 2.3 buckets per log) for slack on 4-byte slots.
//!
//! Both tables hash with foldhash (seeded per process): looked up on every
//! log call, it halved what hashing cost against std's `SipHash` (4.7 % →
//! 2.3 % of the samples of `varve bench pds --scale` to 100k keys).
//!
//! Small logs that nothing changed lately are packed compactly
//! (`packed.rs`), about 90 bytes a log where a decoded one takes about
//! 390: the catalog holds its *hot* logs decoded in `slots`, and packs the
//! small ones among them once they outnumber both [`HOT_LOGS_MIN`] and an
//! eighth of the packed ones (so packing, which rewrites every packed log,
//! stays in proportion to the logs changed). Changing a packed log thaws
//! it back into `slots`; reading one decodes a copy. A pack is built on a
//! thread of its own from what it packs, encoded under the caller's lock;
//! the catalog notes the logs that change meanwhile and keeps them hot when
//! it swaps the new set in.
//!
//! Invariant: `by_id` and `by_name` each hold every index of `slots` exactly
//! once, under the hash of that slot's id and name; no log is both in
//! `slots` and live in `packed`, and no two logs share an id or a name.

use std::borrow::Cow;
use std::collections::HashSet;
use std::hash::BuildHasher;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};

use foldhash::fast::RandomState;
use hashbrown::HashTable;

use crate::journal::format::LogDescriptor;
use crate::journal::packed::{EncodedLogs, NotPacked, PackedLogs, PackedSnapshot, Placement};
use crate::journal::state::LogState;

/// Hot logs a catalog keeps decoded, at least, before it packs the small
/// ones among them: a `PEDaLS` insert changes a few logs, so about
/// ten thousand inserts' worth.
pub const HOT_LOGS_MIN: usize = 65_536;

/// Packing waits until the hot logs it would pack are at least an eighth of
/// the packed ones: each pack rewrites every packed log.
const PACKED_PER_HOT: usize = 8;

/// A log in the catalog: borrowed when hot, decoded when packed.
pub(crate) type LogView<'a> = Cow<'a, LogState>;

#[derive(Debug)]
pub(crate) struct Catalog {
    slots: Vec<LogState>,
    by_id: HashTable<u32>,
    by_name: HashTable<u32>,
    hasher: RandomState,
    packed: PackedLogs,
    /// Hot logs the last pack left decoded, as too large or damaged to pack.
    unpackable: usize,
    /// The least hot logs kept before a pack ([`HOT_LOGS_MIN`] by default).
    hot_logs_min: usize,
    /// Where new packed sets go (the heap unless set).
    placement: Placement,
    /// A pack being built, if one is.
    pending: Option<PendingPack>,
    /// Run on a pack's thread once the pack is built, to swap it in.
    on_built: PackBuilt,
}

/// What a pack's thread runs once the pack is built: the namespace sets it
/// to swap the pack in (`Catalog::swap_built_pack`) under its lock, so that
/// an idle namespace does not hold the old set and the new one until the
/// next write. Unset, the next `pack_if_due` swaps the pack in.
#[derive(Clone, Default)]
struct PackBuilt(Arc<OnceLock<Box<dyn Fn() + Send + Sync>>>);

impl std::fmt::Debug for PackBuilt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() { "PackBuilt(set)" } else { "PackBuilt(unset)" })
    }
}

/// A new packed set being built from the packed logs and the hot ones
/// that were small and whole when it began (`Catalog::begin_pack`).
#[derive(Debug)]
struct PendingPack {
    built: Arc<BuiltPack>,
    /// The hot logs it packs, by id, ascending.
    packing: Vec<u32>,
    /// Logs changed or removed since it began (thawed ones too): their
    /// entries in the new set are stale, and they stay hot.
    changed: HashSet<u32, RandomState>,
}

/// Where a pack's thread leaves the set it built. The thread is not
/// joined: it may be waiting for the namespace's lock to swap the set in
/// while the lock's holder looks here.
#[derive(Debug, Default)]
struct BuiltPack {
    set: Mutex<Option<Result<PackedLogs, NotPacked>>>,
    ready: Condvar,
}

impl BuiltPack {
    fn put(&self, built: Result<PackedLogs, NotPacked>) {
        *self.set.lock().unwrap_or_else(PoisonError::into_inner) = Some(built);
        self.ready.notify_all();
    }

    fn is_ready(&self) -> bool {
        self.set.lock().unwrap_or_else(PoisonError::into_inner).is_some()
    }

    /// The set, once built (waits for it).
    fn take(&self) -> Result<PackedLogs, NotPacked> {
        let mut set = self.set.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(built) = set.take() {
                return built;
            }
            set = self.ready.wait(set).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

impl Default for Catalog {
    fn default() -> Catalog {
        Catalog {
            slots: Vec::new(),
            by_id: HashTable::new(),
            by_name: HashTable::new(),
            hasher: RandomState::default(),
            packed: PackedLogs::default(),
            unpackable: 0,
            hot_logs_min: HOT_LOGS_MIN,
            placement: Placement::default(),
            pending: None,
            on_built: PackBuilt::default(),
        }
    }
}

impl Catalog {
    /// Logs, hot and packed.
    pub(crate) fn len(&self) -> usize {
        self.slots.len() + self.packed.len()
    }

    pub(crate) fn set_hot_logs_min(&mut self, hot_logs_min: usize) {
        self.hot_logs_min = hot_logs_min;
    }

    /// Keep packed sets of at least `bytes_min` bytes in scratch files in
    /// `dir`, mapped (see `packed.rs`), from the next pack on.
    pub(crate) fn set_packed_in_files(&mut self, dir: &std::path::Path, bytes_min: u64) {
        self.placement = Placement { dir: Some(dir.to_owned()), bytes_min };
    }

    pub(crate) fn contains(&self, id: u32) -> bool {
        self.slot_of_id(id).is_some() || self.packed.find_id(id).is_some()
    }

    pub(crate) fn get(&self, id: u32) -> Option<LogView<'_>> {
        match self.slot_of_id(id) {
            Some(slot) => Some(Cow::Borrowed(&self.slots[slot])),
            None => self.packed.find_id(id).map(|ordinal| Cow::Owned(self.packed.decode(ordinal))),
        }
    }

    /// The log, thawed first if packed (it is about to change).
    pub(crate) fn get_mut(&mut self, id: u32) -> Option<&mut LogState> {
        self.note_change(id);
        let slot = match self.slot_of_id(id) {
            Some(slot) => slot,
            None => self.thaw(self.packed.find_id(id)?),
        };
        Some(&mut self.slots[slot])
    }

    pub(crate) fn by_name(&self, name: &str) -> Option<LogView<'_>> {
        let hash = self.hasher.hash_one(name);
        let slots = &self.slots;
        match self.by_name.find(hash, |&slot| slots[slot as usize].descriptor.name == name) {
            Some(&slot) => Some(Cow::Borrowed(&slots[slot as usize])),
            None => self.packed.find_name(hash, name).map(|ordinal| Cow::Owned(self.packed.decode(ordinal))),
        }
    }

    /// Every log, in no particular order (packed ones decoded one by one).
    pub(crate) fn values(&self) -> impl Iterator<Item = LogView<'_>> {
        let packed = self.packed.live().map(|ordinal| Cow::Owned(self.packed.decode(ordinal)));
        self.slots.iter().map(Cow::Borrowed).chain(packed)
    }

    /// The logs held decoded.
    pub(crate) fn hot(&self) -> impl Iterator<Item = &LogState> {
        self.slots.iter()
    }

    /// The packed logs as they are now, for a checkpoint to write later.
    pub(crate) fn packed_snapshot(&self) -> PackedSnapshot {
        self.packed.snapshot()
    }

    /// The packed logs, each as the index checkpoint lays a log out.
    #[cfg(test)]
    pub(crate) fn packed_entries(&self) -> impl Iterator<Item = &[u8]> {
        self.packed.live().map(|ordinal| self.packed.entry(ordinal))
    }

    pub(crate) fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        let packed = self.packed.live().map(|ordinal| self.packed.id(ordinal));
        self.slots.iter().map(|log| log.descriptor.id).chain(packed)
    }

    /// Adds a log whose id and name are not in the catalog (the caller checks).
    pub(crate) fn insert(&mut self, log: LogState) {
        debug_assert!(!self.contains(log.descriptor.id) && self.by_name(&log.descriptor.name).is_none());
        let id_hash = self.hasher.hash_one(log.descriptor.id);
        let name_hash = self.hasher.hash_one(log.descriptor.name.as_str());
        self.insert_hashed(log, id_hash, name_hash);
    }

    /// Adds `log` unless its id or its name is taken; then hands it back.
    pub(crate) fn try_insert(&mut self, log: LogState) -> Result<(), LogState> {
        let id_hash = self.hasher.hash_one(log.descriptor.id);
        let name_hash = self.hasher.hash_one(log.descriptor.name.as_str());
        let slots = &self.slots;
        let id_taken = self.by_id.find(id_hash, |&s| slots[s as usize].descriptor.id == log.descriptor.id).is_some()
            || self.packed.find_id(log.descriptor.id).is_some();
        let name_taken =
            self.by_name.find(name_hash, |&s| slots[s as usize].descriptor.name == log.descriptor.name).is_some()
                || self.packed.find_name(name_hash, &log.descriptor.name).is_some();
        if id_taken || name_taken {
            return Err(log);
        }
        self.insert_hashed(log, id_hash, name_hash);
        Ok(())
    }

    fn insert_hashed(&mut self, log: LogState, id_hash: u64, name_hash: u64) {
        let slot = u32::try_from(self.slots.len()).expect("log ids are u32, so are slots");
        self.slots.push(log);
        let (slots, hasher) = (&self.slots, &self.hasher);
        self.by_id.insert_unique(id_hash, slot, |&s| hasher.hash_one(slots[s as usize].descriptor.id));
        self.by_name.insert_unique(name_hash, slot, |&s| hasher.hash_one(slots[s as usize].descriptor.name.as_str()));
    }

    /// Decode a packed log into the hot ones; returns its slot.
    fn thaw(&mut self, ordinal: usize) -> usize {
        let log = self.packed.decode(ordinal);
        self.packed.mark_gone(ordinal);
        self.insert(log);
        self.slots.len() - 1
    }

    pub(crate) fn remove(&mut self, id: u32) -> Option<LogState> {
        self.note_change(id);
        let Some(slot) = self.slot_of_id(id) else {
            let ordinal = self.packed.find_id(id)?;
            let log = self.packed.decode(ordinal);
            self.packed.mark_gone(ordinal);
            return Some(log);
        };
        let last = self.slots.len() - 1;
        self.unlink(slot);
        if slot != last {
            // The last log moves into the freed slot: point its entries there.
            self.unlink(last);
            self.slots.swap(slot, last);
            self.link(slot);
        }
        self.unpackable = self.unpackable.min(self.slots.len() - 1);
        self.slots.pop()
    }

    /// Give each listed log its new name, all at once: the caller has checked
    /// that every id exists once and that the new names are distinct and
    /// free but for names the same call moves away.
    pub(crate) fn rename(&mut self, renames: &[(u32, String)]) {
        for (id, _) in renames {
            self.get_mut(*id).expect("the caller checked the ids");
        }
        let slots: Vec<usize> = renames.iter().map(|(id, _)| self.slot_of_id(*id).expect("thawed above")).collect();
        for &slot in &slots {
            self.unlink(slot);
        }
        for (&slot, (_, name)) in slots.iter().zip(renames) {
            self.slots[slot].descriptor.name.clone_from(name);
        }
        for &slot in &slots {
            self.link(slot);
        }
        debug_assert!(renames.iter().all(|(id, name)| self.by_name(name).map(|l| l.descriptor.id) == Some(*id)));
    }

    /// Whether the small hot logs are due to be packed (see the module
    /// docs), or a pack built on its own thread is ready to swap in.
    pub(crate) fn pack_due(&self) -> bool {
        if let Some(pending) = &self.pending {
            return pending.built.is_ready();
        }
        let packable = self.slots.len().saturating_sub(self.unpackable);
        packable > self.hot_logs_min.max(self.packed.len() / PACKED_PER_HOT)
    }

    /// Begin a pack if one is due, or swap in the one built if it is
    /// ready. Returns the hot logs a swap packed, for the caller to drop
    /// once it has let go of its lock (freeing 100k states took a third of
    /// a swap's time).
    #[must_use = "drop the packed logs' states after the lock"]
    pub(crate) fn pack_if_due(&mut self) -> Vec<LogState> {
        if !self.pack_due() {
            Vec::new()
        } else if self.pending.is_some() {
            self.finish_pack(false)
        } else {
            self.begin_pack();
            Vec::new()
        }
    }

    /// Have a pack's thread swap the pack in through `swap` once built
    /// (set once: later calls change nothing).
    pub(crate) fn on_pack_built(&mut self, swap: impl Fn() + Send + Sync + 'static) {
        let _ = self.on_built.0.set(Box::new(swap));
    }

    /// Swap in the pack under way if it is built, and begin none: what
    /// `on_pack_built`'s `swap` calls. Returns what `pack_if_due` does.
    #[must_use = "drop the packed logs' states after the lock"]
    pub(crate) fn swap_built_pack(&mut self) -> Vec<LogState> {
        self.finish_pack(false)
    }

    /// Pack every small, whole hot log with the packed ones into a new set,
    /// now (after any pack under way).
    #[cfg(test)]
    pub(crate) fn pack(&mut self) {
        drop(self.finish_pack(true));
        self.begin_pack();
        drop(self.finish_pack(true));
    }

    /// Start building a new set from the packed logs and the small, whole
    /// hot ones, on a thread of its own: under the caller's lock, only the
    /// hot logs are encoded (about a tenth of the work at a million logs,
    /// where a whole pack held appends for 90–300 ms). The catalog goes on
    /// as before meanwhile, noting the logs that change. With no thread to
    /// be had, the pack is built here.
    fn begin_pack(&mut self) {
        // Sorted as (id, slot) pairs, in one array, not by chasing each state.
        let mut to_pack: Vec<(u32, usize)> = (self.slots.iter().enumerate())
            .filter(|(_, log)| log.packable())
            .map(|(slot, log)| (log.descriptor.id, slot))
            .collect();
        to_pack.sort_unstable();
        let mut hot = EncodedLogs::default();
        for &(_, slot) in &to_pack {
            hot.push(&self.slots[slot]);
        }
        let packing: Vec<u32> = to_pack.iter().map(|&(id, _)| id).collect();
        let inputs = Arc::new((self.packed.snapshot(), hot, self.hasher.clone(), self.placement.clone()));
        let built = Arc::new(BuiltPack::default());
        let (shared, put, on_built) = (Arc::clone(&inputs), Arc::clone(&built), self.on_built.clone());
        let job = move || {
            // A panic (a bug) leaves the hot logs decoded, as a set too
            // large does, rather than a pack that never finishes.
            let set = std::panic::catch_unwind(AssertUnwindSafe(|| shared.0.merge(&shared.1, &shared.2, &shared.3)));
            drop(shared);
            put.put(set.unwrap_or(Err(NotPacked::TooLarge)));
            if let Some(swap) = on_built.0.get() {
                swap();
            }
        };
        let spawned = std::thread::Builder::new().name("varve-pack".into()).spawn(job).is_ok();
        if !spawned {
            // No thread to be had: built here.
            built.put(inputs.0.merge(&inputs.1, &inputs.2, &inputs.3));
        }
        drop(inputs);
        self.pending = Some(PendingPack { built, packing, changed: HashSet::default() });
        if !spawned {
            drop(self.finish_pack(true));
        }
    }

    /// Swap in the pack under way once built (`wait`: wait for it), less
    /// the entries of logs changed since it began, which stay hot; returns
    /// the states of the hot logs it packed.
    fn finish_pack(&mut self, wait: bool) -> Vec<LogState> {
        let Some(pending) = self.pending.take_if(|pending| wait || pending.built.is_ready()) else {
            return Vec::new();
        };
        let PendingPack { built, packing, changed } = pending;
        let Ok(mut packed) = built.take() else {
            // Past what a set can address (ids and names are unique here,
            // and the build cannot panic but by a bug): the hot logs stay
            // decoded.
            self.unpackable = self.slots.len();
            return Vec::new();
        };
        for &id in &changed {
            if let Some(ordinal) = packed.find_id(id) {
                packed.mark_gone(ordinal);
            }
        }
        self.packed = packed;
        let packed_now = |id: u32| packing.binary_search(&id).is_ok() && !changed.contains(&id);
        // The vector and tables keep their room: the hot logs grow back to
        // about this many before the next pack.
        let removed: Vec<LogState> = self.slots.extract_if(.., |log| packed_now(log.descriptor.id)).collect();
        self.by_id.clear();
        self.by_name.clear();
        for slot in 0..self.slots.len() {
            self.link(slot);
        }
        self.unpackable = self.slots.iter().filter(|log| !log.packable()).count();
        removed
    }

    /// Note that log `id` changes (or goes): a pack under way must not
    /// take the entry it encoded before.
    fn note_change(&mut self, id: u32) {
        if let Some(pending) = &mut self.pending {
            pending.changed.insert(id);
        }
    }

    /// Take `entries` (logs as the index checkpoint lays them out, checked,
    /// in any order) as the packed set of a catalog that has none yet.
    /// Refused, with the reason, when an id or a name is there twice.
    pub(crate) fn adopt_packed(&mut self, mut entries: Vec<(u32, &[u8])>) -> Result<(), String> {
        debug_assert_eq!(self.packed.len(), 0);
        entries.sort_unstable_by_key(|&(id, _)| id);
        let count = entries.len();
        let bytes: usize = entries.iter().map(|(_, entry)| entry.len()).sum();
        let packed = match PackedLogs::build(entries.into_iter(), count, bytes, &self.hasher, &self.placement) {
            Ok(packed) => packed,
            Err(NotPacked::IdTwice(id)) => return Err(format!("log id {id} listed twice")),
            Err(NotPacked::NameTwice(name)) => return Err(format!("log {name:?} listed twice")),
            Err(NotPacked::TooLarge) => return Err("more logs than one process can hold packed".into()),
        };
        for log in &self.slots {
            let hash = self.hasher.hash_one(log.descriptor.name.as_str());
            if packed.find_id(log.descriptor.id).is_some() || packed.find_name(hash, &log.descriptor.name).is_some() {
                return Err(format!("log {:?} (id {}) listed twice", log.descriptor.name, log.descriptor.id));
            }
        }
        self.packed = packed;
        self.unpackable = self.slots.len();
        Ok(())
    }

    /// Bytes of the hot logs' fixed states (the slots in use: a slot past
    /// the last log is reserved but never touched) and of their two tables.
    pub(crate) fn heap_bytes(&self) -> (u64, u64) {
        let states = self.slots.len() * std::mem::size_of::<LogState>();
        let tables = self.by_id.allocation_size() + self.by_name.allocation_size();
        (states as u64, tables as u64)
    }

    /// Bytes of the packed logs and the tables that find them: on the
    /// heap, and mapped from a scratch file.
    pub(crate) fn packed_bytes(&self) -> (u64, u64) {
        self.packed.bytes()
    }

    /// Packed logs (live ones).
    pub(crate) fn packed_len(&self) -> usize {
        self.packed.len()
    }

    /// Records the packed logs locate.
    pub(crate) fn packed_records(&self) -> u64 {
        self.packed.records()
    }

    /// The packed logs' descriptors, in id order, decoded one at a time.
    pub(crate) fn packed_descriptors(&self) -> impl Iterator<Item = LogDescriptor> + '_ {
        self.packed.live().map(|ordinal| self.packed.descriptor(ordinal))
    }

    fn slot_of_id(&self, id: u32) -> Option<usize> {
        let slots = &self.slots;
        self.by_id.find(self.hasher.hash_one(id), |&slot| slots[slot as usize].descriptor.id == id).map(|&s| s as usize)
    }

    /// Removes `slot`'s entries from both tables (its state stays in `slots`).
    fn unlink(&mut self, slot: usize) {
        let log = &self.slots[slot];
        let target = u32::try_from(slot).expect("slots fit u32");
        let id_hash = self.hasher.hash_one(log.descriptor.id);
        let name_hash = self.hasher.hash_one(log.descriptor.name.as_str());
        if let Ok(entry) = self.by_id.find_entry(id_hash, |&s| s == target) {
            entry.remove();
        }
        if let Ok(entry) = self.by_name.find_entry(name_hash, |&s| s == target) {
            entry.remove();
        }
    }

    /// Adds `slot`'s entries to both tables.
    fn link(&mut self, slot: usize) {
        let log = &self.slots[slot];
        let target = u32::try_from(slot).expect("slots fit u32");
        let id_hash = self.hasher.hash_one(log.descriptor.id);
        let name_hash = self.hasher.hash_one(log.descriptor.name.as_str());
        let (slots, hasher) = (&self.slots, &self.hasher);
        self.by_id.insert_unique(id_hash, target, |&s| hasher.hash_one(slots[s as usize].descriptor.id));
        self.by_name.insert_unique(name_hash, target, |&s| hasher.hash_one(slots[s as usize].descriptor.name.as_str()));
    }
}

/// Tests look hot logs up by id.
#[cfg(test)]
impl std::ops::Index<u32> for Catalog {
    type Output = LogState;

    fn index(&self, id: u32) -> &LogState {
        &self.slots[self.slot_of_id(id).expect("a hot log")]
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, VecDeque};

    use proptest::prelude::*;

    use super::*;
    use crate::contract::LogConfig;
    use crate::journal::format::LogDescriptor;

    fn log(id: u32) -> LogState {
        let descriptor =
            LogDescriptor { id, name: format!("log-{id}"), config: LogConfig::default(), latest: 0, trimmed_before: 0 };
        LogState::new(descriptor, 1, VecDeque::new())
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u32),
        Remove(u32),
        /// Give the log a new name (`log-{id}-{n}`), or take the name of
        /// another log that this call renames away.
        Rename(u32, u8),
        /// Change the log (its latest seq), as an append would.
        Touch(u32),
        Pack,
        /// Begin a pack on its own thread; the ops after it run while it
        /// builds, until `Finish` (or `pack_if_due` finding it built).
        Begin,
        Finish,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u32..48).prop_map(Op::Insert),
            2 => (0u32..48).prop_map(Op::Remove),
            2 => (0u32..48, 0u8..3).prop_map(|(id, n)| Op::Rename(id, n)),
            3 => (0u32..48).prop_map(Op::Touch),
            1 => Just(Op::Pack),
            1 => Just(Op::Begin),
            1 => Just(Op::Finish),
        ]
    }

    proptest! {
        /// Inserts, removes, renames, changes and packs in any order, packs
        /// built on their own threads while the others go on, leave the
        /// catalog finding exactly the logs a plain map would, by id and by
        /// name, with the state last given to each, whether it ends hot or
        /// packed.
        #[test]
        fn finds_what_a_map_would(
            ops in proptest::collection::vec(op(), 0..300),
            hot_logs_min in 0usize..4,
            in_files in any::<bool>(),
        ) {
            let mut catalog = Catalog::default();
            catalog.set_hot_logs_min(hot_logs_min);
            let scratch = tempfile::tempdir().expect("tempdir");
            if in_files {
                catalog.set_packed_in_files(scratch.path(), 0);
            }
            // id -> (name, latest)
            let mut model: BTreeMap<u32, (String, u64)> = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Insert(id) => {
                        let taken = model.contains_key(&id) || model.values().any(|(n, _)| *n == format!("log-{id}"));
                        prop_assert_eq!(catalog.try_insert(log(id)).is_ok(), !taken);
                        if !taken {
                            model.insert(id, (format!("log-{id}"), 0));
                        }
                    }
                    Op::Remove(id) => {
                        let removed = catalog.remove(id).map(|l| (l.descriptor.name, l.descriptor.latest));
                        prop_assert_eq!(removed, model.remove(&id));
                    }
                    Op::Rename(id, n) => {
                        let Some((name, _)) = model.get(&id).cloned() else { continue };
                        let new = format!("log-{id}-{n}");
                        if new == name || model.values().any(|(held, _)| *held == new) {
                            continue;
                        }
                        catalog.rename(&[(id, new.clone())]);
                        model.get_mut(&id).expect("in the model").0 = new;
                    }
                    Op::Touch(id) => {
                        let touched = catalog.get_mut(id).map(|log| {
                            log.descriptor.latest += 1;
                            log.base = log.descriptor.latest + 1;
                        });
                        prop_assert_eq!(touched.is_some(), model.contains_key(&id));
                        if let Some((_, latest)) = model.get_mut(&id) {
                            *latest += 1;
                        }
                    }
                    Op::Pack => catalog.pack(),
                    Op::Begin => {
                        if catalog.pending.is_none() {
                            catalog.begin_pack();
                        }
                    }
                    Op::Finish => drop(catalog.finish_pack(true)),
                }
                drop(catalog.pack_if_due());
                prop_assert_eq!(catalog.len(), model.len());
            }
            for id in 0..48 {
                let expected = model.get(&id).cloned();
                let found = catalog.get(id).map(|l| (l.descriptor.name.clone(), l.descriptor.latest));
                prop_assert_eq!(&found, &expected);
                prop_assert_eq!(catalog.contains(id), expected.is_some());
                for n in [String::new(), "-0".into(), "-1".into(), "-2".into()] {
                    let name = format!("log-{id}{n}");
                    let holder = model.iter().find(|(_, (held, _))| *held == name).map(|(&id, _)| id);
                    prop_assert_eq!(catalog.by_name(&name).map(|l| l.descriptor.id), holder, "{}", name);
                }
            }
            let mut ids: Vec<u32> = catalog.ids().collect();
            ids.sort_unstable();
            prop_assert_eq!(ids, model.keys().copied().collect::<Vec<_>>());
            let mut values: Vec<(u32, String, u64)> =
                catalog.values().map(|l| (l.descriptor.id, l.descriptor.name.clone(), l.descriptor.latest)).collect();
            values.sort_unstable();
            let expected: Vec<(u32, String, u64)> =
                model.iter().map(|(&id, (name, latest))| (id, name.clone(), *latest)).collect();
            prop_assert_eq!(values, expected);
            prop_assert_eq!(catalog.packed_entries().count(), catalog.packed_len());
        }
    }

    /// Packing frees what the hot logs held: at a thousand logs of a few
    /// records, the packed set takes less than half their decoded size.
    #[test]
    fn packing_takes_less_memory_than_decoded_logs() {
        let mut catalog = Catalog::default();
        for id in 0..1000 {
            let mut log = log(id);
            for n in 0..8u32 {
                log.positions.push_back(crate::journal::state::Position { segment: 3, offset: n * 100, len: 40 });
            }
            log.descriptor.latest = 8;
            catalog.insert(log);
        }
        let (states, tables) = catalog.heap_bytes();
        let heap = |log: &LogState| log.descriptor.name.capacity() + log.positions.capacity() * 12;
        let decoded = states + tables + catalog.hot().map(heap).sum::<usize>() as u64;
        catalog.pack();
        assert_eq!((catalog.packed_len(), catalog.hot().count()), (1000, 0));
        let (packed, mapped) = catalog.packed_bytes();
        assert_eq!(mapped, 0, "no directory for scratch files was given");
        assert!(packed * 2 < decoded, "packed {packed} B, decoded {decoded} B");
        let thawed = catalog.get_mut(500).expect("packed log 500");
        assert_eq!(thawed.positions.len(), 8);
        assert_eq!(thawed.positions[7], crate::journal::state::Position { segment: 3, offset: 700, len: 40 });
    }
}
