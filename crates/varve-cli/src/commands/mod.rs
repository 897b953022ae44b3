//! The subcommands, one module each, and what they share: where the data is
//! and how a namespace is opened.
//!
//! Reads open the namespace read-only (no lock; they follow a writer in
//! another process). Writes open it for writing, which takes the namespace's
//! writer lock, so a second writer fails with `LogError::Locked`; each append
//! is fsynced before it is reported (`SyncPolicy::Always`).

pub mod fsck;
pub mod log;

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use varve_log::{JournalNamespace, JournalOptions, JournalStore, LogError, SyncPolicy};

use crate::output::Output;

/// Most attempts [`read_retrying`] makes while a read keeps failing transiently.
const READ_ATTEMPTS_MAX: u32 = 50;
/// Pause between those attempts (so at most about half a second in all).
const READ_RETRY_DELAY: Duration = Duration::from_millis(10);

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

/// Run a read on a read-only handle, riding out one transient failure of
/// the journal library: a writer process that closes truncates its
/// preallocated active segment back to the bytes it holds, and a reader
/// that sized the file just before (`JournalNamespace::refresh`) then reads
/// past the new end and fails with `UnexpectedEof`. With `varve log append`
/// processes coming and going this hits a few percent of concurrent reads.
/// The failed refresh changes nothing, so trying again is safe. Remove once
/// the library tolerates a shrinking active segment.
pub fn read_retrying<T>(mut read: impl FnMut() -> varve_log::Result<T>) -> varve_log::Result<T> {
    let mut attempt = 1;
    loop {
        match read() {
            Err(error) if is_transient(&error) && attempt < READ_ATTEMPTS_MAX => {
                attempt += 1;
                std::thread::sleep(READ_RETRY_DELAY);
            }
            other => return other,
        }
    }
}

/// The failure [`read_retrying`] rides out.
pub fn is_transient(error: &LogError) -> bool {
    matches!(error, LogError::Io { source, .. } if source.kind() == io::ErrorKind::UnexpectedEof)
}
