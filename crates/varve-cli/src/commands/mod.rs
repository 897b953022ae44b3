//! The subcommands, one module each, and what they share: where the data is
//! and how a namespace is opened.
//!
//! Reads open the namespace read-only (no lock; they follow a writer in
//! another process). Writes go through the namespace's runtime when one
//! serves it, else open it for writing, which takes the namespace's writer
//! lock ([`write`] waits while another process holds it); each append is
//! fsynced before it is reported (`SyncPolicy::Always`).

pub mod bench;
pub mod fsck;
pub mod log;
pub mod map;
pub mod nats;
pub mod object;
pub mod part;
pub mod pds;
pub mod repair;
pub mod runtime;
pub mod schema;
pub mod serve;
pub mod set;
pub mod sorted;
pub mod sorted_map;
pub mod write;

use std::path::{Path, PathBuf};

use varve_log::{JournalNamespace, JournalOptions, JournalStore, RecoveryReport, SyncPolicy};

use crate::output::Output;

/// What every command needs: the global options and the printer.
pub struct Context<'a> {
    pub data: PathBuf,
    pub namespace: String,
    pub out: &'a Output,
    /// How the store is opened: segment size and limits from the global
    /// options (read-only and sync are set per command).
    pub journal: JournalOptions,
    /// The `varve serve` of `--store varve://…`, connected; `None` for the
    /// embedded store in `data`.
    pub remote: Option<varve_remote::RemoteStore>,
    /// The JetStream cluster of `--store nats://…`, connected.
    pub nats: Option<varve_nats::NatsStore>,
}

impl<'a> Context<'a> {
    /// The same embedded store (`--data`), namespace `namespace`.
    pub fn embedded_namespace(&self, namespace: &str) -> Context<'a> {
        Context {
            data: self.data.clone(),
            namespace: namespace.to_owned(),
            out: self.out,
            journal: self.journal,
            remote: None,
            nats: None,
        }
    }

    /// The namespace for reading, on whichever store `--store` names.
    pub fn reader(&self) -> varve_log::Result<std::sync::Arc<dyn varve_log::Namespace>> {
        match (&self.remote, &self.nats) {
            (Some(remote), _) => varve_log::Store::namespace(remote, &self.namespace),
            (None, Some(nats)) => varve_log::Store::namespace(nats, &self.namespace),
            (None, None) => Ok(std::sync::Arc::new(self.open_read()?)),
        }
    }

    /// The namespace for writing, on whichever store `--store` names: the
    /// embedded journal's writer lock is taken here (`why` says, when another
    /// process holds it, why only one may write).
    pub fn writer(&self, why: &str) -> anyhow::Result<std::sync::Arc<dyn varve_log::Namespace>> {
        Ok(match (&self.remote, &self.nats) {
            (Some(remote), _) => varve_log::Store::namespace(remote, &self.namespace)?,
            (None, Some(nats)) => varve_log::Store::namespace(nats, &self.namespace)?,
            (None, None) => std::sync::Arc::new(self.open_write().map_err(|e| write::explain_locked(self, e, why))?),
        })
    }

    /// Open the namespace for reading only. Fails with `NamespaceNotFound`
    /// if it was never written. Warns on stderr about damage or lost records.
    pub fn open_read(&self) -> varve_log::Result<JournalNamespace> {
        let options = JournalOptions { read_only: true, ..self.journal };
        let ns = JournalStore::open(&self.data, options)?.journal_namespace(&self.namespace)?;
        warn_about_damage(&self.namespace, ns.recovery_report());
        Ok(ns)
    }

    /// Open (creating if needed) the namespace for writing, durable appends.
    /// Warns on stderr if opening cut off a torn tail, or found damage.
    pub fn open_write(&self) -> varve_log::Result<JournalNamespace> {
        let options = JournalOptions { sync: SyncPolicy::Always, read_only: false, ..self.journal };
        let ns = JournalStore::open(&self.data, options)?.journal_namespace(&self.namespace)?;
        warn_about_damage(&self.namespace, ns.recovery_report());
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

/// Ok if `log` exists in `ns`; `missing()` if it does not (how a command
/// tells that the structure it names was never created).
pub fn require_log(
    ns: &dyn varve_log::Namespace,
    log: &str,
    missing: impl FnOnce() -> anyhow::Error,
) -> anyhow::Result<()> {
    match ns.log_info(log) {
        Ok(_) => Ok(()),
        Err(varve_log::LogError::LogNotFound { .. }) => Err(missing()),
        Err(e) => Err(e.into()),
    }
}

/// One line on stderr when a namespace holds damage or lost records that no
/// repair has recorded: reads of those records fail, the others work.
fn warn_about_damage(namespace: &str, report: &RecoveryReport) {
    if !report.needs_attention() {
        return;
    }
    let lost: u64 = report.losses.iter().filter(|l| !l.acknowledged).map(|l| l.last - l.first + 1).sum();
    let logs: std::collections::BTreeSet<&str> =
        report.losses.iter().filter(|l| !l.acknowledged).map(|l| l.log.as_str()).collect();
    let damaged = report.damage.iter().filter(|d| !d.at_tail).count();
    let mut found = Vec::new();
    if damaged > 0 {
        found.push(format!("{damaged} damaged region(s)"));
    }
    if lost > 0 {
        found.push(format!("{lost} record(s) lost in {}", logs.into_iter().collect::<Vec<_>>().join(", ")));
    }
    crate::output::warn(&format!(
        "namespace {namespace} has damage: {}; the other records read as usual; \
         `varve fsck` lists every loss, `varve fsck --repair` salvages the rest",
        found.join(", ")
    ));
}

/// `DIR/<namespace>`: where the journal keeps one namespace (see
/// `JournalStore`; the two must agree).
pub fn namespace_dir(data: &Path, namespace: &str) -> PathBuf {
    data.join(namespace)
}
