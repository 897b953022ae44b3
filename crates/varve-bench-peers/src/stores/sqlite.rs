//! SQLite in WAL mode: one table keyed by an `INTEGER PRIMARY KEY` (the
//! rowid, SQLite's own integer key, rather than an 8-byte blob), one
//! connection behind a mutex. SQLite allows one writer at a time and has no
//! group commit, so concurrent appenders take turns on the mutex, each
//! committing (and, at a durable level, syncing the WAL) on its own: what an
//! application sharing one connection does.

use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};

use anyhow::{ensure, Result};
use rusqlite::{params, Connection};

use super::{Level, Peer};

/// SQLite at one level: `synchronous=OFF` for none, `synchronous=FULL` (the
/// WAL synced at every commit) otherwise; each append its own transaction.
pub struct SqlitePeer {
    /// The connection and the next record's seq, taken together.
    inner: Mutex<(Connection, u64)>,
}

impl SqlitePeer {
    /// Open (or create) `dir/log.sqlite` in WAL mode and its table.
    pub fn open(dir: &Path, level: Level) -> Result<SqlitePeer> {
        let conn = Connection::open(dir.join("log.sqlite"))?;
        let mode: String = conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
        ensure!(mode.eq_ignore_ascii_case("wal"), "SQLite refused WAL mode (journal_mode is {mode})");
        conn.pragma_update(None, "synchronous", if level.durable_each() { "FULL" } else { "OFF" })?;
        conn.execute("CREATE TABLE IF NOT EXISTS log (seq INTEGER PRIMARY KEY, value BLOB NOT NULL)", [])?;
        let last: i64 = conn.query_row("SELECT coalesce(max(seq), 0) FROM log", [], |row| row.get(0))?;
        Ok(SqlitePeer { inner: Mutex::new((conn, u64::try_from(last)? + 1)) })
    }

    fn lock(&self) -> MutexGuard<'_, (Connection, u64)> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn insert(conn: &Connection, seq: u64, value: &[u8]) -> Result<()> {
        conn.prepare_cached("INSERT INTO log (seq, value) VALUES (?1, ?2)")?
            .execute(params![i64::try_from(seq)?, value])?;
        Ok(())
    }
}

impl Peer for SqlitePeer {
    fn append(&self, value: &[u8]) -> Result<()> {
        let mut inner = self.lock();
        let seq = inner.1;
        // Outside a transaction the INSERT commits on its own (autocommit).
        Self::insert(&inner.0, seq, value)?;
        inner.1 += 1;
        Ok(())
    }

    fn append_batch(&self, values: &[&[u8]]) -> Result<()> {
        let mut inner = self.lock();
        let first = inner.1;
        let txn = inner.0.unchecked_transaction()?;
        for (seq, value) in (first..).zip(values) {
            Self::insert(&txn, seq, value)?;
        }
        txn.commit()?;
        inner.1 += values.len() as u64;
        Ok(())
    }

    fn get(&self, seq: u64) -> Result<usize> {
        let inner = self.lock();
        let len = inner
            .0
            .prepare_cached("SELECT value FROM log WHERE seq = ?1")?
            .query_row(params![i64::try_from(seq)?], |row| Ok(row.get_ref(0)?.as_blob()?.len()))?;
        Ok(len)
    }

    fn scan(&self) -> Result<(u64, u64)> {
        let inner = self.lock();
        let mut statement = inner.0.prepare_cached("SELECT value FROM log ORDER BY seq")?;
        let mut rows = statement.query([])?;
        let (mut records, mut bytes) = (0, 0);
        while let Some(row) = rows.next()? {
            records += 1;
            bytes += row.get_ref(0)?.as_blob()?.len() as u64;
        }
        Ok((records, bytes))
    }

    fn close(self: Box<Self>) -> Result<()> {
        let (conn, _) = self.inner.into_inner().unwrap_or_else(PoisonError::into_inner);
        // Closing the last connection checkpoints the WAL into the database
        // file (synced) and deletes the WAL.
        conn.close().map_err(|(_, e)| e)?;
        Ok(())
    }
}
