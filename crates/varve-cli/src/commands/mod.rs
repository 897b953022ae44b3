//! The subcommands, one module each, and what they share: where the data is
//! and how a namespace is opened.
//!
//! Reads open the namespace read-only (no lock; they follow a writer in
//! another process). Writes go through the namespace's runtime when one
//! serves it, else open it for writing, which takes the namespace's writer
//! lock ([`write`] waits while another process holds it); each append is
//! fsynced before it is reported (`SyncPolicy::Always`).

pub mod bench;
pub mod bench_runtime;
pub mod fsck;
pub mod log;
pub mod pds;
pub mod runtime;
pub mod write;

use std::path::{Path, PathBuf};

use varve_log::{JournalNamespace, JournalOptions, JournalStore, SyncPolicy};

use crate::output::Output;

/// What every command needs: the global options and the printer.
pub struct Context<'a> {
    pub data: PathBuf,
    pub namespace: String,
    pub out: &'a Output,
}

impl Context<'_> {
    /// Open the namespace for reading only. Fails with `NamespaceNotFound`
    /// if it was never written.
    pub fn open_read(&self) -> varve_log::Result<JournalNamespace> {
        let options = JournalOptions { read_only: true, ..JournalOptions::default() };
        JournalStore::open(&self.data, options)?.journal_namespace(&self.namespace)
    }

    /// Open (creating if needed) the namespace for writing, durable appends.
    /// Warns on stderr if opening cut off a torn tail.
    pub fn open_write(&self) -> varve_log::Result<JournalNamespace> {
        let options = JournalOptions { sync: SyncPolicy::Always, ..JournalOptions::default() };
        let ns = JournalStore::open(&self.data, options)?.journal_namespace(&self.namespace)?;
        if let Some(torn) = &ns.recovery_report().torn_tail {
            crate::output::warn(&format!(
                "opening cut a torn tail off {} at byte offset {}: {}; dropped {} bytes, saved to {}",
                torn.segment.display(),
                torn.offset,
                torn.reason,
                torn.dropped_bytes,
                torn.saved_to.display(),
            ));
        }
        Ok(ns)
    }
}

/// `DIR/<namespace>`: where the journal keeps one namespace (see
/// `JournalStore`; the two must agree).
pub fn namespace_dir(data: &Path, namespace: &str) -> PathBuf {
    data.join(namespace)
}
