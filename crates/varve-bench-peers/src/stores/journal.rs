//! Varve's journal: one namespace, one log. It assigns seqs itself, so this
//! adapter holds no counter.

use std::path::Path;

use anyhow::{ensure, Result};
use varve_log::{JournalNamespace, JournalOptions, LogConfig, Namespace, SeqRange, SyncPolicy};

use super::{Level, Peer};

/// The log's name in the namespace.
const LOG: &str = "log";

/// The journal at one level: `Never` for none; `Always` for fsync per append
/// and for group commit, where appenders waiting at once share one fsync.
pub struct JournalPeer {
    namespace: JournalNamespace,
}

impl JournalPeer {
    /// Open the namespace in `dir`, creating the log if it is not there.
    pub fn open(dir: &Path, level: Level) -> Result<JournalPeer> {
        let sync = if level.durable_each() { SyncPolicy::Always } else { SyncPolicy::Never };
        let namespace = JournalNamespace::open(dir, "bench", JournalOptions { sync, ..JournalOptions::default() })?;
        if namespace.log_info(LOG).is_err() {
            namespace.create_log(LOG, LogConfig::unbounded())?;
        }
        Ok(JournalPeer { namespace })
    }
}

impl Peer for JournalPeer {
    fn append(&self, value: &[u8]) -> Result<()> {
        self.namespace.append(LOG, value)?;
        Ok(())
    }

    fn append_batch(&self, values: &[&[u8]]) -> Result<()> {
        let batch: Vec<(&str, &[u8])> = values.iter().map(|v| (LOG, *v)).collect();
        self.namespace.append_batch(&batch)?;
        Ok(())
    }

    fn get(&self, seq: u64) -> Result<usize> {
        Ok(self.namespace.get(LOG, seq)?.len())
    }

    fn scan(&self) -> Result<(u64, u64)> {
        let (mut records, mut bytes) = (0, 0);
        for record in self.namespace.scan(LOG, SeqRange::from_bounds(..))? {
            let record = record?;
            records += 1;
            bytes += record.value.len() as u64;
        }
        ensure!(records == self.namespace.latest(LOG)?, "the journal's scan missed records");
        Ok((records, bytes))
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.namespace.close()?;
        Ok(())
    }
}
