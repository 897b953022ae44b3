//! redb: one table in one database file, a write transaction per append or
//! batch. redb lets one write transaction run at a time, so concurrent
//! appenders queue on its writer lock: the mutex-serialised writer a user
//! gets without asking.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result};
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};

use super::{key, Level, Peer};

const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("log");

/// redb at one level: commits with `Durability::None` (then one `Immediate`
/// commit at close) for none, the default `Immediate` otherwise.
pub struct RedbPeer {
    db: Database,
    durability: Durability,
    /// The next record's seq.
    next: AtomicU64,
}

impl RedbPeer {
    /// Open (or create) `dir/log.redb` and its table.
    pub fn open(dir: &Path, level: Level) -> Result<RedbPeer> {
        let db = Database::create(dir.join("log.redb"))?;
        let txn = db.begin_write()?;
        txn.open_table(TABLE)?;
        txn.commit()?;
        let last = {
            let txn = db.begin_read()?;
            let table = txn.open_table(TABLE)?;
            let last = table.last()?;
            last.map_or(Ok(0), |(k, _)| seq_of(k.value()))?
        };
        let durability = if level.durable_each() { Durability::Immediate } else { Durability::None };
        Ok(RedbPeer { db, durability, next: AtomicU64::new(last + 1) })
    }

    fn write(&self, values: &[&[u8]]) -> Result<()> {
        let mut txn = self.db.begin_write()?;
        txn.set_durability(self.durability)?;
        {
            let mut table = txn.open_table(TABLE)?;
            // Seqs are taken inside the write transaction, which redb runs one
            // at a time, so they land in seq order.
            let first = self.next.fetch_add(values.len() as u64, Ordering::Relaxed);
            for (seq, value) in (first..).zip(values) {
                table.insert(key(seq).as_slice(), *value)?;
            }
        }
        txn.commit()?;
        Ok(())
    }
}

fn seq_of(key: &[u8]) -> Result<u64> {
    Ok(u64::from_be_bytes(key.try_into().context("a redb key of other than 8 bytes")?))
}

impl Peer for RedbPeer {
    fn append(&self, value: &[u8]) -> Result<()> {
        self.write(&[value])
    }

    fn append_batch(&self, values: &[&[u8]]) -> Result<()> {
        self.write(values)
    }

    fn get(&self, seq: u64) -> Result<usize> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(TABLE)?;
        let value = table.get(key(seq).as_slice())?.with_context(|| format!("redb has no record {seq}"))?;
        Ok(value.value().len())
    }

    fn scan(&self) -> Result<(u64, u64)> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(TABLE)?;
        let (mut records, mut bytes) = (0, 0);
        for entry in table.iter()? {
            let (_, value) = entry?;
            records += 1;
            bytes += value.value().len() as u64;
        }
        Ok((records, bytes))
    }

    fn close(self: Box<Self>) -> Result<()> {
        // An empty Immediate commit makes the Durability::None commits before it durable.
        let mut txn = self.db.begin_write()?;
        txn.set_durability(Durability::Immediate)?;
        txn.commit()?;
        drop(self.db);
        Ok(())
    }
}
