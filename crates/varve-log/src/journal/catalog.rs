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
//! Invariant: `by_id` and `by_name` each hold every index of `slots` exactly
//! once, under the hash of that slot's id and name.

use foldhash::fast::RandomState;
use hashbrown::HashTable;
use std::hash::BuildHasher;

use crate::journal::state::LogState;

#[derive(Debug, Default)]
pub(crate) struct Catalog {
    slots: Vec<LogState>,
    by_id: HashTable<u32>,
    by_name: HashTable<u32>,
    hasher: RandomState,
}

impl Catalog {
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn contains(&self, id: u32) -> bool {
        self.slot_of_id(id).is_some()
    }

    pub(crate) fn get(&self, id: u32) -> Option<&LogState> {
        self.slot_of_id(id).map(|slot| &self.slots[slot])
    }

    pub(crate) fn get_mut(&mut self, id: u32) -> Option<&mut LogState> {
        self.slot_of_id(id).map(|slot| &mut self.slots[slot])
    }

    pub(crate) fn by_name(&self, name: &str) -> Option<&LogState> {
        let hash = self.hasher.hash_one(name);
        let slots = &self.slots;
        self.by_name.find(hash, |&slot| slots[slot as usize].descriptor.name == name).map(|&slot| &slots[slot as usize])
    }

    /// Every log, in no particular order.
    pub(crate) fn values(&self) -> impl Iterator<Item = &LogState> {
        self.slots.iter()
    }

    pub(crate) fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.slots.iter().map(|log| log.descriptor.id)
    }

    /// Room for `additional` more logs without growing a table.
    pub(crate) fn reserve(&mut self, additional: usize) {
        self.slots.reserve(additional);
        let (slots, hasher) = (&self.slots, &self.hasher);
        self.by_id.reserve(additional, |&s| hasher.hash_one(slots[s as usize].descriptor.id));
        self.by_name.reserve(additional, |&s| hasher.hash_one(slots[s as usize].descriptor.name.as_str()));
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
        let id_taken = self.by_id.find(id_hash, |&s| slots[s as usize].descriptor.id == log.descriptor.id).is_some();
        let name_taken =
            self.by_name.find(name_hash, |&s| slots[s as usize].descriptor.name == log.descriptor.name).is_some();
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

    pub(crate) fn remove(&mut self, id: u32) -> Option<LogState> {
        let slot = self.slot_of_id(id)?;
        let last = self.slots.len() - 1;
        self.unlink(slot);
        if slot != last {
            // The last log moves into the freed slot: point its entries there.
            self.unlink(last);
            self.slots.swap(slot, last);
            self.link(slot);
        }
        self.slots.pop()
    }

    /// Give each listed log its new name, all at once: the caller has checked
    /// that every id exists once and that the new names are distinct and
    /// free but for names the same call moves away.
    pub(crate) fn rename(&mut self, renames: &[(u32, String)]) {
        let slots: Vec<usize> =
            renames.iter().map(|(id, _)| self.slot_of_id(*id).expect("the caller checked the ids")).collect();
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

    /// Bytes of the logs' fixed states (the slots in use: a slot past the
    /// last log is reserved but never touched) and of the two tables.
    pub(crate) fn heap_bytes(&self) -> (u64, u64) {
        let states = self.slots.len() * std::mem::size_of::<LogState>();
        let tables = self.by_id.allocation_size() + self.by_name.allocation_size();
        (states as u64, tables as u64)
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

impl std::ops::Index<u32> for Catalog {
    type Output = LogState;

    fn index(&self, id: u32) -> &LogState {
        self.get(id).expect("the caller checked that the log exists")
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, VecDeque};

    use proptest::prelude::*;

    use super::*;
    use crate::contract::LogConfig;
    use crate::journal::format::LogDescriptor;

    fn log(id: u32) -> LogState {
        let descriptor =
            LogDescriptor { id, name: format!("log-{id}"), config: LogConfig::default(), latest: 0, trimmed_before: 0 };
        LogState::new(descriptor, 1, VecDeque::new())
    }

    proptest! {
        /// Inserts and removes in any order leave the catalog finding
        /// exactly the logs a plain map would, by id and by name.
        #[test]
        fn finds_what_a_map_would(ops in proptest::collection::vec((any::<bool>(), 0u32..64), 0..400)) {
            let mut catalog = Catalog::default();
            let mut model = BTreeSet::new();
            for (insert, id) in ops {
                if insert {
                    prop_assert_eq!(catalog.try_insert(log(id)).is_ok(), model.insert(id));
                } else {
                    prop_assert_eq!(catalog.remove(id).map(|l| l.descriptor.id), model.remove(&id).then_some(id));
                }
                prop_assert_eq!(catalog.len(), model.len());
            }
            for id in 0..64 {
                let name = format!("log-{id}");
                let expected = model.contains(&id).then_some(id);
                prop_assert_eq!(catalog.get(id).map(|l| l.descriptor.id), expected);
                prop_assert_eq!(catalog.by_name(&name).map(|l| l.descriptor.id), expected);
            }
            let mut ids: Vec<u32> = catalog.ids().collect();
            ids.sort_unstable();
            prop_assert_eq!(ids, model.iter().copied().collect::<Vec<_>>());
        }
    }
}
