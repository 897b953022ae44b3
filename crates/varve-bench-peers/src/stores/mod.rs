//! The stores under measurement, each behind one small contract ([`Peer`]) so
//! that the measurement loop (`run.rs`) times the same work on every one.
//!
//! Each adapter holds one log (a journal log, a redb table, a fjall
//! keyspace, an SQLite table, a RocksDB column family) and writes it the way
//! a user of that store would write a log at the durability [`Level`] asks:
//! the settings per store are listed in [`Level`]'s docs and in the notes the
//! report prints.

pub mod fjall;
pub mod journal;
pub mod redb;
#[cfg(feature = "rocksdb")]
pub mod rocks;
pub mod sqlite;

use std::path::Path;

use anyhow::Result;

/// How durable an acknowledged append is, matched across the stores.
///
/// | level | journal | redb | fjall | SQLite (WAL) | RocksDB |
/// |---|---|---|---|---|---|
/// | `None` | `SyncPolicy::Never` | `Durability::None`, a final `Immediate` commit | no persist per write | `synchronous=OFF` | `sync=false`, WAL on |
/// | `Fsync` | `SyncPolicy::Always` | `Durability::Immediate` per commit | `persist(SyncData)` per write | `synchronous=FULL`, a transaction per write | `sync=true` |
/// | `Group` | `Always`, 4 threads (shared fsyncs) | as `Fsync`, 4 threads (redb serialises writers) | as `Fsync`, 4 threads | as `Fsync`, 4 threads behind a mutex | `sync=true`, 4 threads (its write group) |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// No fsync on the write path; one at the end (close).
    None,
    /// Each append durable before it returns, one writer.
    Fsync,
    /// Each append durable before it returns, [`GROUP_THREADS`] writers at once.
    Group,
}

/// Writers appending at once at [`Level::Group`].
pub const GROUP_THREADS: usize = 4;

impl Level {
    /// Every level, in the order the report lists them.
    pub const ALL: [Level; 3] = [Level::None, Level::Fsync, Level::Group];

    /// The level's name in the report.
    pub fn label(self) -> &'static str {
        match self {
            Level::None => "none",
            Level::Fsync => "fsync per append",
            Level::Group => "group commit (4 threads)",
        }
    }

    /// Whether each acknowledged append must be durable.
    pub fn durable_each(self) -> bool {
        self != Level::None
    }

    /// Threads that append at once.
    pub fn threads(self) -> usize {
        if self == Level::Group {
            GROUP_THREADS
        } else {
            1
        }
    }
}

/// One store holding one log, opened at one [`Level`].
///
/// Records are numbered from 1 in append order (the journal's seqs; the KV
/// stores' keys are the same numbers, u64 big-endian, SQLite's the integer
/// primary key). Every method may be called from several threads at once.
pub trait Peer: Send + Sync {
    /// Append one record; at a durable level it is durable when this returns.
    fn append(&self, value: &[u8]) -> Result<()>;

    /// Append `values` as one atomic write (one transaction, one batch);
    /// durable when this returns at a durable level.
    fn append_batch(&self, values: &[&[u8]]) -> Result<()>;

    /// The length of record `seq` (the bytes are read, then dropped), an
    /// error if it is missing.
    fn get(&self, seq: u64) -> Result<usize>;

    /// Read every record in order: (records, value bytes).
    fn scan(&self) -> Result<(u64, u64)>;

    /// Make every write durable, flush what the store buffers in memory to
    /// its files (no compaction asked for), and close.
    fn close(self: Box<Self>) -> Result<()>;
}

/// The stores compared, in the report's column order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Varve's journal (`varve_log::JournalNamespace`).
    Journal,
    /// redb, a copy-on-write B-tree in one file.
    Redb,
    /// fjall, an LSM-tree with a journal.
    Fjall,
    /// SQLite in WAL mode (rusqlite, bundled).
    Sqlite,
    /// RocksDB (rust-rocksdb).
    #[cfg(feature = "rocksdb")]
    Rocksdb,
}

impl Kind {
    /// Every store built in, the journal first.
    #[cfg(feature = "rocksdb")]
    pub const ALL: &[Kind] = &[Kind::Journal, Kind::Redb, Kind::Fjall, Kind::Sqlite, Kind::Rocksdb];
    /// Every store built in, the journal first (RocksDB left out: built
    /// without the `rocksdb` feature, for a quick profile of the others).
    #[cfg(not(feature = "rocksdb"))]
    pub const ALL: &[Kind] = &[Kind::Journal, Kind::Redb, Kind::Fjall, Kind::Sqlite];

    /// The store's name in the report.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Journal => "journal",
            Kind::Redb => "redb",
            Kind::Fjall => "fjall",
            Kind::Sqlite => "SQLite",
            #[cfg(feature = "rocksdb")]
            Kind::Rocksdb => "RocksDB",
        }
    }

    /// Open (creating) the store in the empty directory `dir` at `level`,
    /// or reopen what an earlier open left there.
    pub fn open(self, dir: &Path, level: Level) -> Result<Box<dyn Peer>> {
        Ok(match self {
            Kind::Journal => Box::new(journal::JournalPeer::open(dir, level)?),
            Kind::Redb => Box::new(redb::RedbPeer::open(dir, level)?),
            Kind::Fjall => Box::new(fjall::FjallPeer::open(dir, level)?),
            Kind::Sqlite => Box::new(sqlite::SqlitePeer::open(dir, level)?),
            #[cfg(feature = "rocksdb")]
            Kind::Rocksdb => Box::new(rocks::RocksPeer::open(dir, level)?),
        })
    }
}

/// The key of record `seq` in the KV stores: u64 big-endian, so that key
/// order is seq order.
pub fn key(seq: u64) -> [u8; 8] {
    seq.to_be_bytes()
}
