//! fjall: one keyspace in one database. Every write goes to fjall's journal
//! (one for all keyspaces); at a durable level each write is followed by
//! `persist(SyncData)`, fjall's own call for "durable now". fjall has no
//! group commit: concurrent appenders each persist, one at a time under its
//! journal lock.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result};
use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};

use super::{key, Level, Peer};

/// fjall at one level: writes buffered to the OS (its default) for none,
/// each followed by `persist(PersistMode::SyncData)` otherwise.
pub struct FjallPeer {
    db: Database,
    keyspace: Keyspace,
    durable_each: bool,
    /// The next record's seq.
    next: AtomicU64,
}

impl FjallPeer {
    /// Open (or create) the database in `dir` and its keyspace.
    pub fn open(dir: &Path, level: Level) -> Result<FjallPeer> {
        let db = Database::builder(dir).open()?;
        let keyspace = db.keyspace("log", KeyspaceCreateOptions::default)?;
        let last = match keyspace.last_key_value() {
            Some(guard) => {
                let key = guard.key()?;
                u64::from_be_bytes(key.as_ref().try_into().context("a fjall key of other than 8 bytes")?)
            }
            None => 0,
        };
        Ok(FjallPeer { db, keyspace, durable_each: level.durable_each(), next: AtomicU64::new(last + 1) })
    }
}

impl Peer for FjallPeer {
    fn append(&self, value: &[u8]) -> Result<()> {
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        self.keyspace.insert(&key(seq)[..], value)?;
        if self.durable_each {
            self.db.persist(PersistMode::SyncData)?;
        }
        Ok(())
    }

    fn append_batch(&self, values: &[&[u8]]) -> Result<()> {
        let first = self.next.fetch_add(values.len() as u64, Ordering::Relaxed);
        let mut batch = self.db.batch();
        for (seq, value) in (first..).zip(values) {
            batch.insert(&self.keyspace, &key(seq)[..], *value);
        }
        if self.durable_each {
            batch = batch.durability(Some(PersistMode::SyncData));
        }
        batch.commit()?;
        Ok(())
    }

    fn get(&self, seq: u64) -> Result<usize> {
        let value = self.keyspace.get(key(seq))?.with_context(|| format!("fjall has no record {seq}"))?;
        Ok(value.len())
    }

    fn scan(&self) -> Result<(u64, u64)> {
        let (mut records, mut bytes) = (0, 0);
        for guard in self.keyspace.iter() {
            let value = guard.value()?;
            records += 1;
            bytes += value.len() as u64;
        }
        Ok((records, bytes))
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.db.persist(PersistMode::SyncAll)?;
        // Write the memtable out as a table file, as RocksDB's `flush` does,
        // so that a reopened store reads tables rather than replaying its
        // journal. fjall keeps this call hidden from its docs (its tests use it).
        self.keyspace.rotate_memtable_and_wait()?;
        drop(self.keyspace);
        drop(self.db);
        Ok(())
    }
}
