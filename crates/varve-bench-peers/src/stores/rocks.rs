//! RocksDB: one column family (the default one) in one database, the WAL
//! on. At a durable level every write is `sync=true`; concurrent writers
//! join RocksDB's write group, whose leader writes and syncs the WAL once
//! for all of them (group commit).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result};
use rocksdb::{Options, WriteBatch, WriteOptions, DB};

use super::{key, Level, Peer};

/// RocksDB at one level: `WriteOptions::set_sync(false)` for none, `true`
/// otherwise. Default options otherwise (no compression library is built in).
pub struct RocksPeer {
    db: DB,
    write: WriteOptions,
    /// The next record's seq.
    next: AtomicU64,
}

impl RocksPeer {
    /// Open (or create) the database in `dir`.
    pub fn open(dir: &Path, level: Level) -> Result<RocksPeer> {
        let mut options = Options::default();
        options.create_if_missing(true);
        let db = DB::open(&options, dir)?;
        let mut write = WriteOptions::default();
        write.set_sync(level.durable_each());
        let last = {
            let mut it = db.raw_iterator();
            it.seek_to_last();
            it.status()?;
            match it.key() {
                Some(k) => u64::from_be_bytes(k.try_into().context("a RocksDB key of other than 8 bytes")?),
                None => 0,
            }
        };
        Ok(RocksPeer { db, write, next: AtomicU64::new(last + 1) })
    }
}

impl Peer for RocksPeer {
    fn append(&self, value: &[u8]) -> Result<()> {
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        self.db.put_opt(key(seq), value, &self.write)?;
        Ok(())
    }

    fn append_batch(&self, values: &[&[u8]]) -> Result<()> {
        let first = self.next.fetch_add(values.len() as u64, Ordering::Relaxed);
        let mut batch = WriteBatch::default();
        for (seq, value) in (first..).zip(values) {
            batch.put(key(seq), value);
        }
        self.db.write_opt(batch, &self.write)?;
        Ok(())
    }

    fn get(&self, seq: u64) -> Result<usize> {
        let value = self.db.get_pinned(key(seq))?.with_context(|| format!("RocksDB has no record {seq}"))?;
        Ok(value.len())
    }

    fn scan(&self) -> Result<(u64, u64)> {
        // The raw iterator: no allocation per record, RocksDB's fastest scan.
        let mut it = self.db.raw_iterator();
        it.seek_to_first();
        let (mut records, mut bytes) = (0, 0);
        while let Some(value) = it.value() {
            records += 1;
            bytes += value.len() as u64;
            it.next();
        }
        it.status()?;
        Ok((records, bytes))
    }

    fn close(self: Box<Self>) -> Result<()> {
        // Sync the WAL (the writes at none were not), then write the memtable
        // out as a table file; closing with the WAL on flushes nothing itself.
        self.db.flush_wal(true)?;
        self.db.flush()?;
        drop(self.db);
        Ok(())
    }
}
