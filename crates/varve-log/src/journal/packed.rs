//! Logs packed compactly: the states of small logs that nothing changed
//! lately, each encoded as the index checkpoint lays a log out (varints,
//! positions as deltas), in one buffer.
//!
//! A namespace may hold millions of small logs of which few change at a
//! time (a `PEDaLS` structure has a `LinkLog` of at most a handful of records
//! per node). Decoded, a log takes about 390 bytes (docs/design.md, "Every
//! log's state is in memory"); packed, a log of ten records takes about 80,
//! and its lookup tables about 13 more. The catalog keeps the logs it
//! changed lately decoded (its *hot* logs) and packs the small ones among
//! them here once there are many (`Catalog::pack_if_due`).
//!
//! A packed set is immutable. Changing a packed log *thaws* it: the catalog
//! decodes it into its hot logs and marks its entry here gone; deleting it
//! marks it gone too. The next pack rebuilds the set from the entries still
//! live and the hot logs it packs, so a gone entry's bytes last until then.
//!
//! A checkpoint saved as the writer writes shares the set (`PackedSnapshot`)
//! rather than copying it: its entries are in the checkpoint's layout.
//!
//! Invariant: `set.ids` ascends; `set.offsets[i]` is where the entry of
//! `set.ids[i]` starts in `set.bytes` (each entry ends where the next starts,
//! the last at the end); `set.by_name` holds every ordinal once, under the
//! hash of its entry's name; bit `i` of `gone` is set exactly when entry `i`
//! was thawed or deleted since the pack; `live` and `live_bytes` count the
//! entries whose bit is clear, and their bytes.

use std::collections::VecDeque;
use std::sync::Arc;

use foldhash::fast::RandomState;
use hashbrown::HashTable;
use std::hash::BuildHasher;

use crate::codec::ByteReader;
use crate::journal::checkpoint::{put_log, read_log, read_log_count, read_log_name, read_position};
use crate::journal::format::LogDescriptor;
use crate::journal::state::{LogState, Position};

#[derive(Debug, Default)]
pub(crate) struct PackedLogs {
    set: Arc<PackedSet>,
    gone: Vec<u64>,
    live: usize,
    /// Bytes of the live entries.
    live_bytes: usize,
    /// Records the live entries locate.
    live_records: u64,
}

/// The immutable part of a packed set, shared with a checkpoint being
/// written (which reads the entries live when it was encoded).
#[derive(Debug, Default)]
struct PackedSet {
    bytes: Vec<u8>,
    ids: Vec<u32>,
    offsets: Vec<u32>,
    by_name: HashTable<u32>,
}

/// Why a set was not built.
#[derive(Debug)]
pub(crate) enum NotPacked {
    /// The entries would pass 4 GiB, which `u32` offsets cannot address
    /// (the caller keeps its logs decoded).
    TooLarge,
    /// Sources out of id order, or an id twice (only a damaged checkpoint).
    IdTwice(u32),
    /// Two logs of one name (only a damaged checkpoint).
    NameTwice(String),
}

/// The live entries of a packed set at one moment, for a checkpoint to
/// write after the set has moved on.
#[derive(Debug)]
pub(crate) struct PackedSnapshot {
    set: Arc<PackedSet>,
    gone: Vec<u64>,
    live_bytes: usize,
}

/// Hot logs encoded for a pack, ascending by id.
#[derive(Debug, Default)]
pub(crate) struct EncodedLogs {
    ids: Vec<u32>,
    ends: Vec<usize>,
    bytes: Vec<u8>,
}

impl EncodedLogs {
    /// Add `log`, whose id is above every id added so far.
    pub(crate) fn push(&mut self, log: &LogState) {
        debug_assert!(self.ids.last().is_none_or(|&last| last < log.descriptor.id));
        put_log(&mut self.bytes, log);
        self.ids.push(log.descriptor.id);
        self.ends.push(self.bytes.len());
    }

    pub(crate) fn len(&self) -> usize {
        self.ids.len()
    }

    fn entries(&self) -> impl Iterator<Item = (u32, &[u8])> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        self.ids.iter().zip(starts.zip(&self.ends)).map(|(&id, (start, &end))| (id, &self.bytes[start..end]))
    }
}

impl PackedSnapshot {
    /// The live entries, each as the index checkpoint lays a log out.
    pub(crate) fn entries(&self) -> impl Iterator<Item = &[u8]> {
        self.entries_with_ids().map(|(_, entry)| entry)
    }

    /// The live entries with their logs' ids, ascending.
    fn entries_with_ids(&self) -> impl Iterator<Item = (u32, &[u8])> {
        (0..self.set.ids.len()).filter(|&o| !is_gone(&self.gone, o)).map(|o| (self.set.ids[o], self.set.entry(o)))
    }

    /// A new set of these entries and `hot`'s (no id in both): the work
    /// of a pack, which needs nothing but its inputs, so it can run on a
    /// thread of its own.
    pub(crate) fn merge(&self, hot: &EncodedLogs, hasher: &RandomState) -> Result<PackedLogs, NotPacked> {
        let mut hot_entries = hot.entries().peekable();
        let mut cold = self.entries_with_ids().peekable();
        let merged = std::iter::from_fn(|| match (hot_entries.peek(), cold.peek()) {
            (Some((h, _)), Some((c, _))) if c < h => cold.next(),
            (Some(_), _) => hot_entries.next(),
            (None, _) => cold.next(),
        });
        let count = hot.len() + self.set.ids.len();
        let bytes = self.live_bytes + hot.bytes.len();
        PackedLogs::build(merged, count, bytes, hasher)
    }

    /// Bytes of the live entries.
    pub(crate) fn len(&self) -> usize {
        self.live_bytes
    }
}

impl PackedSet {
    fn entry(&self, ordinal: usize) -> &[u8] {
        let end = self.offsets.get(ordinal + 1).map_or(self.bytes.len(), |&end| end as usize);
        &self.bytes[self.offsets[ordinal] as usize..end]
    }
}

impl PackedLogs {
    /// Build a set from `entries` (logs as the index checkpoint lays them
    /// out, with their ids), which must ascend by id with no id twice, and
    /// have no name twice.
    pub(crate) fn build<'a>(
        entries: impl Iterator<Item = (u32, &'a [u8])>,
        count: usize,
        bytes_hint: usize,
        hasher: &RandomState,
    ) -> Result<PackedLogs, NotPacked> {
        let mut set = PackedSet {
            bytes: Vec::with_capacity(bytes_hint),
            ids: Vec::with_capacity(count),
            offsets: Vec::with_capacity(count),
            by_name: HashTable::with_capacity(count),
        };
        for (id, entry) in entries {
            if set.ids.last().is_some_and(|&last| last >= id) {
                return Err(NotPacked::IdTwice(id));
            }
            set.offsets.push(u32::try_from(set.bytes.len()).map_err(|_| NotPacked::TooLarge)?);
            set.ids.push(id);
            set.bytes.extend_from_slice(entry);
        }
        u32::try_from(set.bytes.len()).map_err(|_| NotPacked::TooLarge)?;
        for ordinal in 0..set.ids.len() {
            let PackedSet { by_name, bytes, offsets, .. } = &mut set;
            let hash = hasher.hash_one(entry_name(bytes, offsets, ordinal));
            let name = entry_name_bytes(bytes, offsets, ordinal);
            let same_name = |&o: &u32| entry_name_bytes(bytes, offsets, o as usize) == name;
            if by_name.find(hash, same_name).is_some() {
                return Err(NotPacked::NameTwice(String::from_utf8_lossy(name).into_owned()));
            }
            let slot = u32::try_from(ordinal).expect("ordinals fit u32, as offsets do");
            // Sized for every entry above, so this never rehashes; the
            // hasher is for form's sake.
            by_name.insert_unique(hash, slot, |&o| hasher.hash_one(entry_name(bytes, offsets, o as usize)));
        }
        let live_records = (0..set.ids.len()).map(|o| entry_records(set.entry(o))).sum();
        Ok(PackedLogs {
            live_records,
            gone: vec![0; set.ids.len().div_ceil(64)],
            live: set.ids.len(),
            live_bytes: set.bytes.len(),
            set: Arc::new(set),
        })
    }

    /// Live entries.
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    /// The live entry of log `id`.
    pub(crate) fn find_id(&self, id: u32) -> Option<usize> {
        self.set.ids.binary_search(&id).ok().filter(|&ordinal| !self.is_gone(ordinal))
    }

    /// The live entry of the log named `name`, which hashes to `hash`.
    pub(crate) fn find_name(&self, hash: u64, name: &str) -> Option<usize> {
        let set = &*self.set;
        let matches = |&o: &u32| entry_name_bytes(&set.bytes, &set.offsets, o as usize) == name.as_bytes();
        let ordinal = *set.by_name.find(hash, matches)? as usize;
        (!self.is_gone(ordinal)).then_some(ordinal)
    }

    pub(crate) fn id(&self, ordinal: usize) -> u32 {
        self.set.ids[ordinal]
    }

    /// The entry's bytes: a log as the index checkpoint lays it out.
    pub(crate) fn entry(&self, ordinal: usize) -> &[u8] {
        self.set.entry(ordinal)
    }

    /// The entry's descriptor, decoded.
    pub(crate) fn descriptor(&self, ordinal: usize) -> LogDescriptor {
        read_log(&mut ByteReader::new(self.entry(ordinal))).expect("entries are encoded by this process").0
    }

    /// Records the live entries locate.
    pub(crate) fn records(&self) -> u64 {
        self.live_records
    }

    /// The entry's log, decoded.
    pub(crate) fn decode(&self, ordinal: usize) -> LogState {
        let mut reader = ByteReader::new(self.entry(ordinal));
        let (descriptor, base, count) = read_log(&mut reader).expect("entries are encoded by this process");
        let mut positions = VecDeque::with_capacity(usize::try_from(count).expect("counted in memory"));
        let mut previous = Position { segment: 0, offset: 0, len: 0 };
        for _ in 0..count {
            previous = read_position(&mut reader, previous).expect("entries are encoded by this process");
            positions.push_back(previous);
        }
        LogState::new(descriptor, base, positions)
    }

    /// The entry is thawed or deleted: no longer found, nor live.
    pub(crate) fn mark_gone(&mut self, ordinal: usize) {
        debug_assert!(!self.is_gone(ordinal));
        self.gone[ordinal / 64] |= 1 << (ordinal % 64);
        self.live -= 1;
        self.live_bytes -= self.entry(ordinal).len();
        self.live_records -= entry_records(self.entry(ordinal));
    }

    fn is_gone(&self, ordinal: usize) -> bool {
        is_gone(&self.gone, ordinal)
    }

    /// The live entries' ordinals, in id order.
    pub(crate) fn live(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.set.ids.len()).filter(|&ordinal| !self.is_gone(ordinal))
    }

    /// The live entries as they are now, shared (see [`PackedSnapshot`]).
    pub(crate) fn snapshot(&self) -> PackedSnapshot {
        PackedSnapshot { set: Arc::clone(&self.set), gone: self.gone.clone(), live_bytes: self.live_bytes }
    }

    /// Bytes on the heap: the entries (gone ones too, until the next pack),
    /// and the tables that find them.
    pub(crate) fn heap_bytes(&self) -> u64 {
        let set = &*self.set;
        let tables = set.ids.capacity() * 4
            + set.offsets.capacity() * 4
            + self.gone.capacity() * 8
            + set.by_name.allocation_size();
        (set.bytes.capacity() + tables) as u64
    }
}

fn entry_records(entry: &[u8]) -> u64 {
    read_log_count(entry).expect("entries are encoded by this process")
}

fn is_gone(gone: &[u64], ordinal: usize) -> bool {
    gone[ordinal / 64] & (1 << (ordinal % 64)) != 0
}

fn entry_name<'b>(bytes: &'b [u8], offsets: &[u32], ordinal: usize) -> &'b str {
    std::str::from_utf8(entry_name_bytes(bytes, offsets, ordinal)).expect("names are UTF-8")
}

/// The name's bytes, unchecked: comparing bytes is what a lookup needs.
fn entry_name_bytes<'b>(bytes: &'b [u8], offsets: &[u32], ordinal: usize) -> &'b [u8] {
    let start = offsets[ordinal] as usize;
    read_log_name(&bytes[start..]).expect("entries are encoded by this process")
}
