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
//! A large set is kept out of the heap: it is written to a scratch file in
//! the namespace's directory, unlinked from the start, and mapped
//! (`Placement`). Its pages are then the page cache's, which the kernel
//! writes back and evicts when memory runs short and reads again on the
//! next lookup, so the heap does not grow with the logs packed. So the
//! set's lookup tables are laid out in the same bytes (`PackedSet`).
//!
//! Invariant: the set's ids ascend; its offsets say where each entry
//! starts (each ends where the next starts, the last where the ids begin);
//! its name table holds every ordinal once, found by probing from its
//! name's hash; bit `i` of `gone` is set exactly when entry `i` was thawed
//! or deleted since the pack; `live` and `live_bytes` count the entries
//! whose bit is clear, and their bytes.

use std::collections::VecDeque;
use std::fs::File;
use std::hash::BuildHasher;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use foldhash::fast::RandomState;
use memmap2::{Mmap, MmapMut};

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

/// Where new packed sets are kept: a set of at least `bytes_min` bytes in
/// a scratch file in `dir` (the namespace's directory), mapped, so that
/// its pages are the page cache's — which the kernel evicts and reads
/// again as memory runs short — rather than the heap's; a smaller set, or
/// one for which no file can be made or written there (a reader without
/// write access, a full disk), on the heap.
#[derive(Clone, Debug)]
pub(crate) struct Placement {
    pub(crate) dir: Option<PathBuf>,
    pub(crate) bytes_min: u64,
}

impl Default for Placement {
    fn default() -> Placement {
        Placement { dir: None, bytes_min: u64::MAX }
    }
}

/// The immutable part of a packed set, shared with a checkpoint being
/// written (which reads the entries live when it was encoded).
///
/// `data` holds four sections ([`Layout`]), each entry and number
/// little-endian: the entries, one after the other (`ids_at` bytes); the
/// logs' ids (`u32` each, ascending); where each entry starts (`u32` each);
/// and the name table, `slots` slots of 8 bytes (a power of two; none for an empty set).
/// A slot holds 0 when empty, or an entry's ordinal plus one in its low 32
/// bits and the high 32 bits of its name's hash in its high ones (so a
/// probe reads an entry only when those match). An entry's name is found
/// by linear probing from the slot its hash's low bits pick; at most three
/// slots in four are taken.
#[derive(Debug, Default)]
struct PackedSet {
    data: SetBytes,
    layout: Layout,
}

/// Where a set's bytes are.
#[derive(Debug)]
enum SetBytes {
    Heap(Vec<u8>),
    /// A scratch file unlinked since it was made (nothing of it outlives
    /// the process, even a crash), mapped read-only.
    Mapped(Mmap),
}

impl Default for SetBytes {
    fn default() -> SetBytes {
        SetBytes::Heap(Vec::new())
    }
}

impl std::ops::Deref for SetBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            SetBytes::Heap(bytes) => bytes,
            SetBytes::Mapped(map) => map,
        }
    }
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

/// A build that failed: the set's fault, or the scratch file's.
enum BuildError {
    Set(NotPacked),
    Io,
}

impl From<NotPacked> for BuildError {
    fn from(not: NotPacked) -> BuildError {
        BuildError::Set(not)
    }
}

impl From<std::io::Error> for BuildError {
    fn from(_: std::io::Error) -> BuildError {
        BuildError::Io
    }
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

    fn entries(&self) -> impl Iterator<Item = (u32, &[u8])> + Clone {
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
    fn entries_with_ids(&self) -> impl Iterator<Item = (u32, &[u8])> + Clone {
        (0..self.set.count()).filter(|&o| !is_gone(&self.gone, o)).map(|o| (self.set.id(o), self.set.entry(o)))
    }

    /// A new set of these entries and `hot`'s (no id in both): the work
    /// of a pack, which needs nothing but its inputs, so it can run on a
    /// thread of its own.
    pub(crate) fn merge(
        &self,
        hot: &EncodedLogs,
        hasher: &RandomState,
        placement: &Placement,
    ) -> Result<PackedLogs, NotPacked> {
        let (hot_entries, cold) = (hot.entries().peekable(), self.entries_with_ids().peekable());
        let merged = MergeById { hot: hot_entries, cold };
        let count = hot.len() + self.set.count();
        let bytes = self.live_bytes + hot.bytes.len();
        PackedLogs::build(merged, count, bytes, hasher, placement)
    }

    /// Bytes of the live entries.
    pub(crate) fn len(&self) -> usize {
        self.live_bytes
    }
}

/// Two runs of entries ascending by id merged into one (cloneable, so a
/// build that cannot use its scratch file can start again on the heap).
struct MergeById<H: Iterator, C: Iterator> {
    hot: std::iter::Peekable<H>,
    cold: std::iter::Peekable<C>,
}

impl<'a, H, C> Clone for MergeById<H, C>
where
    H: Iterator<Item = (u32, &'a [u8])> + Clone,
    C: Iterator<Item = (u32, &'a [u8])> + Clone,
{
    fn clone(&self) -> Self {
        MergeById { hot: self.hot.clone(), cold: self.cold.clone() }
    }
}

impl<'a, H, C> Iterator for MergeById<H, C>
where
    H: Iterator<Item = (u32, &'a [u8])>,
    C: Iterator<Item = (u32, &'a [u8])>,
{
    type Item = (u32, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        match (self.hot.peek(), self.cold.peek()) {
            (Some((h, _)), Some((c, _))) if c < h => self.cold.next(),
            (Some(_), _) => self.hot.next(),
            (None, _) => self.cold.next(),
        }
    }
}

impl PackedSet {
    fn count(&self) -> usize {
        self.layout.count
    }

    fn id(&self, ordinal: usize) -> u32 {
        u32_at(&self.data, self.layout.ids_at + 4 * ordinal)
    }

    fn offset(&self, ordinal: usize) -> usize {
        u32_at(&self.data, self.layout.offsets_at() + 4 * ordinal) as usize
    }

    fn entry(&self, ordinal: usize) -> &[u8] {
        let end = if ordinal + 1 < self.count() { self.offset(ordinal + 1) } else { self.layout.ids_at };
        &self.data[self.offset(ordinal)..end]
    }

    /// Bytes of the entries.
    fn entries_bytes(&self) -> usize {
        self.layout.ids_at
    }

    fn find_id(&self, id: u32) -> Option<usize> {
        let ordinal = partition_point(self.count(), |o| self.id(o) < id);
        (ordinal < self.count() && self.id(ordinal) == id).then_some(ordinal)
    }

    /// The entry named `name`, whose hash is `hash`.
    fn find_name(&self, hash: u64, name: &[u8]) -> Option<usize> {
        if self.layout.slots == 0 {
            return None;
        }
        let table = &self.data[self.layout.table_at()..];
        probe(table, self.layout.slots, hash, |o| entry_name_bytes(&self.data[self.offset(o)..]) == name).ok()
    }

    /// Bytes of the set on the heap, and in a mapped file.
    fn bytes(&self) -> (u64, u64) {
        match &self.data {
            SetBytes::Heap(bytes) => (bytes.capacity() as u64, 0),
            SetBytes::Mapped(map) => (0, map.len() as u64),
        }
    }
}

/// Slots of the name table of a set of `count` entries: at most three in
/// four taken, so that a probe for a name not there stops soon.
fn table_slots(count: usize) -> usize {
    if count == 0 {
        0
    } else {
        (count * 4 / 3 + 1).next_power_of_two()
    }
}

/// The first of `0..len` for which `before` is false (`before` is true
/// for a prefix, false after).
fn partition_point(len: usize, before: impl Fn(usize) -> bool) -> usize {
    let (mut low, mut high) = (0, len);
    while low < high {
        let middle = low + (high - low) / 2;
        if before(middle) {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    low
}

/// The name table's slot a probe for `hash` starts at.
#[expect(clippy::cast_possible_truncation, reason = "its low bits pick the slot; the rest are meant to go")]
fn home_slot(hash: u64, mask: usize) -> usize {
    (hash as usize) & mask
}

/// The ordinal a taken slot of the name table holds.
fn slot_ordinal(taken: u64) -> usize {
    u32::try_from(taken & u64::from(u32::MAX)).expect("the low half") as usize - 1
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes"))
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("eight bytes"))
}

/// Where a set's sections are (see [`PackedSet`]): `count` entries, whose
/// ids start at byte `ids_at`, and a name table of `slots` slots.
#[derive(Clone, Copy, Debug, Default)]
struct Layout {
    count: usize,
    ids_at: usize,
    slots: usize,
}

impl Layout {
    fn offsets_at(&self) -> usize {
        self.ids_at + 4 * self.count
    }

    fn table_at(&self) -> usize {
        self.offsets_at() + 4 * self.count
    }
}

/// Write the entries, their ids and offsets, and an empty name table.
fn write_sections<'a>(
    entries: impl Iterator<Item = (u32, &'a [u8])>,
    count_hint: usize,
    out: &mut impl Write,
) -> Result<Layout, BuildError> {
    let mut ids: Vec<u32> = Vec::with_capacity(count_hint);
    let mut offsets: Vec<u32> = Vec::with_capacity(count_hint);
    let mut len = 0;
    for (id, entry) in entries {
        if ids.last().is_some_and(|&last| last >= id) {
            return Err(NotPacked::IdTwice(id).into());
        }
        offsets.push(u32::try_from(len).map_err(|_| NotPacked::TooLarge)?);
        ids.push(id);
        out.write_all(entry)?;
        len += entry.len();
    }
    u32::try_from(len).map_err(|_| NotPacked::TooLarge)?;
    for number in ids.iter().chain(&offsets) {
        out.write_all(&number.to_le_bytes())?;
    }
    let slots = table_slots(ids.len());
    // Written, not left a hole by growing the file: its blocks are then
    // reserved now, so filling the table in through a map later cannot
    // fault on a full disk.
    let zeros = [0; 4096];
    let mut left = 8 * slots;
    while left > 0 {
        let chunk = left.min(zeros.len());
        out.write_all(&zeros[..chunk])?;
        left -= chunk;
    }
    Ok(Layout { count: ids.len(), ids_at: len, slots })
}

/// Fill in the name table of a set written by [`write_sections`].
fn fill_names(data: &mut [u8], layout: &Layout, hasher: &RandomState) -> Result<(), NotPacked> {
    let (front, table) = data.split_at_mut(layout.table_at());
    let (entries, numbers) = front.split_at(layout.ids_at);
    let offsets = &numbers[4 * layout.count..];
    let name_of = |ordinal: usize| entry_name_bytes(&entries[u32_at(offsets, 4 * ordinal) as usize..]);
    for ordinal in 0..layout.count {
        let name = name_of(ordinal);
        let hash = hasher.hash_one(std::str::from_utf8(name).expect("names are UTF-8"));
        let Err(slot) = probe(table, layout.slots, hash, |other| name_of(other) == name) else {
            return Err(NotPacked::NameTwice(String::from_utf8_lossy(name).into_owned()));
        };
        let ordinal_plus_one = u64::try_from(ordinal + 1).expect("ordinals fit u32, as offsets do");
        table[8 * slot..8 * slot + 8].copy_from_slice(&((hash >> 32) << 32 | ordinal_plus_one).to_le_bytes());
    }
    Ok(())
}

/// Probe the name table (`slots` slots, a power of two, at least one
/// empty) for `hash`: the ordinal of the entry `is_it` accepts among those
/// whose slots hold the same 32 bits of hash, or the empty slot where the
/// probe ended, where such an entry would go.
fn probe(table: &[u8], slots: usize, hash: u64, is_it: impl Fn(usize) -> bool) -> Result<usize, usize> {
    let mask = slots - 1;
    let mut slot = home_slot(hash, mask);
    loop {
        let taken = u64_at(table, 8 * slot);
        if taken == 0 {
            return Err(slot);
        }
        let ordinal = slot_ordinal(taken);
        if taken >> 32 == hash >> 32 && is_it(ordinal) {
            return Ok(ordinal);
        }
        slot = (slot + 1) & mask;
    }
}

/// Build a set in a scratch file in `dir`, and map it.
fn build_mapped<'a>(
    entries: impl Iterator<Item = (u32, &'a [u8])>,
    count_hint: usize,
    dir: &Path,
    hasher: &RandomState,
) -> Result<PackedSet, BuildError> {
    let file: File = tempfile::tempfile_in(dir)?;
    let mut out = BufWriter::with_capacity(1 << 20, &file);
    let layout = write_sections(entries, count_hint, &mut out)?;
    out.flush()?;
    drop(out);
    #[expect(unsafe_code, reason = "memory-mapping a file is unsafe by nature; invariant below")]
    // SAFETY: the map is undefined behaviour only if another party
    // truncates or rewrites the file while it is mapped. The file was
    // made unlinked (or unlinked at once), so no other party can open it
    // by name, and this process writes it only here, before the map is
    // made read-only.
    let mut map = unsafe { MmapMut::map_mut(&file) }?;
    fill_names(&mut map, &layout, hasher)?;
    let map = map.make_read_only()?;
    Ok(PackedSet { data: SetBytes::Mapped(map), layout })
}

/// Build a set on the heap.
fn build_on_heap<'a>(
    entries: impl Iterator<Item = (u32, &'a [u8])>,
    count_hint: usize,
    bytes_hint: usize,
    hasher: &RandomState,
) -> Result<PackedSet, NotPacked> {
    let mut data = Vec::with_capacity(bytes_hint + 8 * count_hint + 8 * table_slots(count_hint));
    let layout = match write_sections(entries, count_hint, &mut data) {
        Ok(layout) => layout,
        Err(BuildError::Set(not)) => return Err(not),
        Err(BuildError::Io) => unreachable!("writing to a vector cannot fail"),
    };
    fill_names(&mut data, &layout, hasher)?;
    Ok(PackedSet { data: SetBytes::Heap(data), layout })
}

impl PackedLogs {
    /// Build a set from `entries` (logs as the index checkpoint lays them
    /// out, with their ids), which must ascend by id with no id twice, and
    /// have no name twice; `count` and `bytes_hint` are at least as many
    /// entries and bytes as there are. Placed as `placement` says.
    pub(crate) fn build<'a>(
        entries: impl Iterator<Item = (u32, &'a [u8])> + Clone,
        count: usize,
        bytes_hint: usize,
        hasher: &RandomState,
        placement: &Placement,
    ) -> Result<PackedLogs, NotPacked> {
        let size = bytes_hint + 8 * count + 8 * table_slots(count);
        let dir = placement.dir.as_deref().filter(|_| count > 0 && size as u64 >= placement.bytes_min);
        let mapped = match dir {
            Some(dir) => match build_mapped(entries.clone(), count, dir, hasher) {
                Ok(set) => Some(set),
                Err(BuildError::Set(not)) => return Err(not),
                // The set works the same on the heap.
                Err(BuildError::Io) => None,
            },
            None => None,
        };
        let set = match mapped {
            Some(set) => set,
            None => build_on_heap(entries, count, bytes_hint, hasher)?,
        };
        let live_records = (0..set.count()).map(|o| entry_records(set.entry(o))).sum();
        Ok(PackedLogs {
            live_records,
            gone: vec![0; set.count().div_ceil(64)],
            live: set.count(),
            live_bytes: set.entries_bytes(),
            set: Arc::new(set),
        })
    }

    /// Live entries.
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    /// The live entry of log `id`.
    pub(crate) fn find_id(&self, id: u32) -> Option<usize> {
        self.set.find_id(id).filter(|&ordinal| !self.is_gone(ordinal))
    }

    /// The live entry of the log named `name`, which hashes to `hash`.
    pub(crate) fn find_name(&self, hash: u64, name: &str) -> Option<usize> {
        self.set.find_name(hash, name.as_bytes()).filter(|&ordinal| !self.is_gone(ordinal))
    }

    pub(crate) fn id(&self, ordinal: usize) -> u32 {
        self.set.id(ordinal)
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
        (0..self.set.count()).filter(|&ordinal| !self.is_gone(ordinal))
    }

    /// The live entries as they are now, shared (see [`PackedSnapshot`]).
    pub(crate) fn snapshot(&self) -> PackedSnapshot {
        PackedSnapshot { set: Arc::clone(&self.set), gone: self.gone.clone(), live_bytes: self.live_bytes }
    }

    /// Bytes on the heap — the entries (gone ones too, until the next
    /// pack) and the tables that find them, unless mapped, and the gone
    /// bits — and bytes mapped from a scratch file.
    pub(crate) fn bytes(&self) -> (u64, u64) {
        let (heap, mapped) = self.set.bytes();
        (heap + self.gone.capacity() as u64 * 8, mapped)
    }
}

fn entry_records(entry: &[u8]) -> u64 {
    read_log_count(entry).expect("entries are encoded by this process")
}

fn is_gone(gone: &[u64], ordinal: usize) -> bool {
    gone[ordinal / 64] & (1 << (ordinal % 64)) != 0
}

/// The name's bytes, unchecked, of the entry `bytes` begins with:
/// comparing bytes is what a lookup needs.
fn entry_name_bytes(bytes: &[u8]) -> &[u8] {
    read_log_name(bytes).expect("entries are encoded by this process")
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::contract::LogConfig;

    fn log(id: u32, name: String, records: u32) -> LogState {
        let descriptor =
            LogDescriptor { id, name, config: LogConfig::default(), latest: records.into(), trimmed_before: 0 };
        let positions =
            (0..records).map(|n| Position { segment: id % 7 + 1, offset: n * 64 + id, len: 30 + n }).collect();
        LogState::new(descriptor, 1, positions)
    }

    /// Logs with ids 0, 3, 6, … and a few records each.
    fn encoded(count: u32) -> EncodedLogs {
        let mut logs = EncodedLogs::default();
        for id in (0..count).map(|n| n * 3) {
            logs.push(&log(id, format!("node-{id}"), id % 9));
        }
        logs
    }

    fn build(logs: &EncodedLogs, placement: &Placement) -> Result<PackedLogs, NotPacked> {
        PackedLogs::build(logs.entries(), logs.len(), logs.bytes.len(), &RandomState::default(), placement)
    }

    /// A set kept in a scratch file finds every log by id and by name, as
    /// one on the heap does, finds no other, and decodes each as it was;
    /// the file is not left in the directory.
    #[test]
    fn a_set_in_a_scratch_file_finds_what_one_on_the_heap_does() {
        let logs = encoded(5_000);
        let scratch = tempfile::tempdir().expect("tempdir");
        let in_file = Placement { dir: Some(scratch.path().to_owned()), bytes_min: 0 };
        let hasher = RandomState::default();
        let mapped =
            PackedLogs::build(logs.entries(), logs.len(), logs.bytes.len(), &hasher, &in_file).expect("mapped");
        let heap = PackedLogs::build(logs.entries(), logs.len(), logs.bytes.len(), &hasher, &Placement::default())
            .expect("heap");
        let (mapped_heap, mapped_file) = mapped.bytes();
        assert!(mapped_file > logs.bytes.len() as u64 && mapped_heap < 1024, "{:?}", mapped.bytes());
        assert_eq!(heap.bytes().1, 0);
        assert_eq!(std::fs::read_dir(scratch.path()).expect("list").count(), 0, "the scratch file is unlinked");
        for set in [&mapped, &heap] {
            assert_eq!(set.len(), 5_000);
            for id in 0..15_000 {
                let name = format!("node-{id}");
                let by_id = set.find_id(id);
                let by_name = set.find_name(hasher.hash_one(name.as_str()), &name);
                assert_eq!(by_id, by_name, "log {id}");
                if id % 3 == 0 {
                    let decoded = set.decode(by_id.expect("packed"));
                    let expected = log(id, name, id % 9);
                    assert_eq!((decoded.descriptor, decoded.positions), (expected.descriptor, expected.positions));
                } else {
                    assert_eq!(by_id, None, "log {id} was never packed");
                }
            }
        }
        assert_eq!(mapped.records(), heap.records());
        let merged = mapped.snapshot().merge(&EncodedLogs::default(), &hasher, &in_file).expect("merged");
        assert_eq!(merged.len(), 5_000);
    }

    /// Where no scratch file can be made, the set goes on the heap.
    #[test]
    fn a_set_goes_on_the_heap_where_no_scratch_file_can_be_made() {
        let logs = encoded(100);
        let scratch = tempfile::tempdir().expect("tempdir");
        let nowhere = Placement { dir: Some(scratch.path().join("no such directory")), bytes_min: 0 };
        let set = build(&logs, &nowhere).expect("built");
        assert_eq!(set.bytes().1, 0);
        assert!(set.bytes().0 > logs.bytes.len() as u64);
        assert_eq!(set.find_id(99), Some(33));
    }

    /// Two logs of one name are refused, in a file as on the heap.
    #[test]
    fn a_name_twice_is_refused_in_a_file_too() {
        let mut logs = EncodedLogs::default();
        logs.push(&log(1, "same".into(), 2));
        logs.push(&log(2, "other".into(), 2));
        logs.push(&log(3, "same".into(), 1));
        let scratch = tempfile::tempdir().expect("tempdir");
        let in_file = Placement { dir: Some(scratch.path().to_owned()), bytes_min: 0 };
        for placement in [in_file, Placement::default()] {
            assert!(matches!(build(&logs, &placement), Err(NotPacked::NameTwice(name)) if name == "same"));
        }
    }
}
