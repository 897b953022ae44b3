//! What a journal namespace holds in memory, by part: the figures behind
//! "memory grows with the number of logs" (docs/design.md, "Every log's
//! state is in memory"), counted rather than estimated.
//!
//! Counted from lengths and capacities, not measured from the allocator:
//! the allocator rounds each block up to its size class (up to an eighth
//! more for small blocks), and that rounding is not in these figures.

/// Bytes a journal namespace holds in memory, by part.
///
/// [`JournalNamespace::memory`](crate::JournalNamespace::memory) counts it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct JournalMemory {
    /// Logs in the namespace.
    pub logs: u64,
    /// Records the logs' indexes locate (those retention keeps).
    pub records: u64,
    /// Each log's fixed state: its descriptor (id, configuration, latest
    /// seq, trim floor), the bounds of its index and the index's header,
    /// the same size for every log.
    pub log_states: u64,
    /// The logs' names, one copy each.
    pub names: u64,
    /// The indexes: 12 bytes per record's position, and the room each index
    /// has grown into but not yet filled.
    pub indexes: u64,
    /// The two hash tables that find a log by id and by name (of the logs
    /// held decoded).
    pub lookup_tables: u64,
    /// Small logs that nothing changed lately, packed compactly (about 90
    /// bytes a log where a decoded one takes about 390; docs/design.md),
    /// with the tables that find them, when they are on the heap (a small
    /// set; or one for which no scratch file could be made), and the bits
    /// that mark entries gone. The parts above count the logs held
    /// decoded; `logs` and `records` count both.
    pub packed_logs: u64,
    /// The packed logs and their tables when they are in a scratch file,
    /// mapped: memory of the page cache, which the kernel evicts when
    /// memory runs short, not of the heap, so not in [`total`](Self::total).
    pub packed_mapped: u64,
    /// How many of `logs` are packed.
    pub packed: u64,
    /// The buffer the writer keeps for its next index checkpoint: the most
    /// bytes a save has encoded into it (the largest index, before
    /// compression). Its allocation may be up to twice that, but pages never
    /// written take no memory. It is kept so that encoding the next index,
    /// which holds appends, does not wait for the kernel to zero fresh
    /// pages; 0 before the first save of this open.
    pub checkpoint_buffer: u64,
}

impl JournalMemory {
    /// Every part on the heap together (`packed_mapped` aside).
    #[must_use]
    pub fn total(&self) -> u64 {
        self.log_states + self.names + self.indexes + self.lookup_tables + self.packed_logs + self.checkpoint_buffer
    }
}
