//! The Manual model's batch job (`seeds/003_…` §3.2): a migration function
//! rewrites every record of the current generation into the next one.
//!
//! Invariant that makes it resumable and exactly-once: record k of the new
//! generation (seq k) is the migration of record `source_first + k − 1` of
//! the old one. Each batch is appended only if the new log still ends
//! where this job read it (`append_batch_if`), so a job killed at any point
//! — or two jobs at once — never migrate a record twice or skip one; a
//! restarted job reads the new log's latest seq and goes on from there.
//! When it has caught up, it switches the subject's writers to the new
//! generation with one `_schema` record, holding the registry's gate so no
//! append of this process lands in the old generation after the switch.

use std::panic::{catch_unwind, AssertUnwindSafe};
use varve_log::{LogError, Seq, SeqRange};

use crate::error::{Result, SchemaError};
use crate::record::{panic_text, Record};
use crate::registry::{Schemas, Subject};

/// Records migrated per appended batch, unless the caller says otherwise.
pub const DEFAULT_BATCH: u64 = 512;

/// What a finished migration did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigrationReport {
    /// The subject migrated.
    pub subject: String,
    /// The generation read.
    pub from_generation: u32,
    /// The generation written (writers use it now).
    pub to_generation: u32,
    /// Records in the new generation.
    pub migrated: u64,
    /// Records an earlier, interrupted run had already migrated.
    pub resumed_from: u64,
    /// The old generation's last seq that was migrated.
    pub source_through: Seq,
}

impl Schemas {
    /// Run `subject`'s pending manual migration to the end (or resume it),
    /// then switch writers to the new generation. `progress(done, total)`
    /// is called after each batch.
    pub fn migrate(&self, subject: &str, progress: &mut dyn FnMut(u64, u64)) -> Result<MigrationReport> {
        self.migrate_in_batches(subject, DEFAULT_BATCH, progress)
    }

    /// [`Schemas::migrate`], appending `batch` records at a time (each
    /// batch is one all-or-nothing append: the unit of progress a crash
    /// can lose).
    pub fn migrate_in_batches(
        &self,
        subject: &str,
        batch: u64,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<MigrationReport> {
        let batch_size = batch.max(1);
        self.refresh()?;
        let found = self.subject(subject)?;
        let Some(pending) = found.pending().cloned() else {
            return Err(SchemaError::Migration(format!(
                "no migration is pending for '{subject}' (it is at v{}, generation {}): register a manual version first",
                found.write_version().version,
                found.current().generation
            )));
        };
        let migration = pending.migration.clone().unwrap_or_default();
        let function = self.functions().read().ok().and_then(|t| t.get(&migration).cloned()).ok_or_else(|| {
            SchemaError::Migration(format!(
                "'{subject}' v{} migrates with '{migration}', which this program has not defined (Schemas::define_migration)",
                pending.version
            ))
        })?;
        let source = found.current().log.clone();
        let from_generation = found.current().generation;
        let target = Subject::log_of(subject, pending.generation);
        let first = pending.source_first.unwrap_or(1);
        let ns = self.namespace().clone();
        let resumed_from = ns.latest(&target)?;
        loop {
            let done = ns.latest(&target)?;
            let source_latest = ns.latest(&source)?;
            let total = (source_latest + 1).saturating_sub(first);
            if done >= total {
                let folded = self.folded();
                let exclusive = self.gate_exclusive();
                if ns.latest(&source)? != source_latest {
                    continue; // an append landed meanwhile: migrate it too
                }
                if self.switch_generation(&pending, source_latest, folded)? {
                    progress(done, total);
                    return Ok(MigrationReport {
                        subject: subject.to_owned(),
                        from_generation,
                        to_generation: pending.generation,
                        migrated: done,
                        resumed_from,
                        source_through: source_latest,
                    });
                }
                drop(exclusive);
                self.refresh()?;
                if self.subject(subject)?.pending().is_none() {
                    return Err(SchemaError::Migration(format!(
                        "another process finished the migration of '{subject}' first"
                    )));
                }
                continue;
            }
            let from = first + done;
            let to = (from + batch_size - 1).min(source_latest);
            let mut encoded = Vec::new();
            for record in ns.scan(&source, SeqRange::from_bounds(from..=to))? {
                let record = record?;
                let location = format!("{source}@{}", record.seq);
                let stored = self.decode(&record.value, location.clone())?;
                let old = stored.record()?;
                let fields = match catch_unwind(AssertUnwindSafe(|| function(old))) {
                    Ok(Ok(fields)) => fields,
                    Ok(Err(reason)) => return Err(failed(subject, &migration, &location, reason)),
                    Err(panic) => {
                        return Err(failed(
                            subject,
                            &migration,
                            &location,
                            format!("it panicked: {}", panic_text(&*panic)),
                        ));
                    }
                };
                let mut new = Record::new(pending.clone());
                for (name, value) in fields {
                    new.set(&name, value).map_err(|e| failed(subject, &migration, &location, e.to_string()))?;
                }
                encoded.push(new.encode().map_err(|e| failed(subject, &migration, &location, e.to_string()))?);
            }
            let batch: Vec<(&str, &[u8])> = encoded.iter().map(|b| (target.as_str(), b.as_slice())).collect();
            match ns.append_batch_if(&batch, &[(target.as_str(), done)]) {
                Ok(_) => progress(done + batch.len() as u64, total),
                Err(LogError::Conflict { .. }) => {} // another job got there first
                Err(e) => return Err(e.into()),
            }
        }
    }
}

fn failed(subject: &str, migration: &str, location: &str, reason: String) -> SchemaError {
    SchemaError::MigrationFailed {
        subject: subject.to_owned(),
        migration: migration.to_owned(),
        location: location.to_owned(),
        reason,
    }
}
