//! Start-up recovery and the progress mark. On start the runtime folds
//! `_events` from the mark on ([`TriggerFold`]) and re-queues every trigger
//! without DONE or `DEAD_LETTER` (one whose budget is spent goes to the dead
//! letters); the mark — the lowest unfinished trigger — is rewritten every
//! [`PROGRESS_EVERY_FINISHED`] finished triggers and on stop.

use varve_log::{Seq, SeqRange};

use crate::error::Result;
use crate::event::Event;
use crate::inner::Inner;
use crate::pending::TriggerFold;
use crate::shared::SharedFold;
use crate::system_logs::{read_progress, EVENTS_LOG, PROGRESS_LOG};

/// The progress mark is rewritten after this many finished triggers (and on stop).
pub(crate) const PROGRESS_EVERY_FINISHED: u64 = 1024;

impl Inner {
    /// Find unfinished triggers from the progress mark on and queue them.
    pub(crate) fn recover(&self) -> Result<()> {
        let from = read_progress(self.ns.as_ref())?;
        if let Some(lease) = self.options.shared {
            // The fold from the mark on finds what is pending, and which
            // FIRINGs are held (by others, or by this host before a crash).
            let mut writer = self.lock_writer();
            writer.fold = Some(SharedFold::new(from, lease));
            self.catch_up(&mut writer)?;
            drop(writer);
            self.lock_work().last_progress = from;
            return Ok(());
        }
        let mut fold = TriggerFold::new();
        // Event retention never trims past the mark on disk; a trim by other
        // means (the Rust API on `_events`) is read from what is kept.
        let first = from.max(self.ns.earliest(EVENTS_LOG)?);
        for record in self.ns.scan(EVENTS_LOG, SeqRange { first, last: Seq::MAX })? {
            let record = record?;
            fold.apply(record.seq, &Event::decode(&record.value, record.seq)?);
        }
        let mut to_dead = Vec::new();
        let mut jobs = Vec::new();
        for job in fold.into_pending() {
            if self.options.concurrency == 0 {
                jobs.push(job); // kept outstanding (for the progress mark), never run here
                continue;
            }
            let exhausted = self.handlers.get(&job.handler).is_some_and(|h| h.retry.is_exhausted(job.failures));
            if exhausted {
                to_dead.push(job);
            } else {
                jobs.push(job);
            }
        }
        {
            let _writer = self.lock_writer();
            self.enqueue(jobs);
        }
        for job in to_dead {
            self.dead_letter(&job)?;
        }
        self.lock_work().last_progress = from;
        Ok(())
    }

    /// Write the low-water mark if it moved (or `force`).
    pub(crate) fn write_progress(&self, force: bool) -> Result<()> {
        let writer = self.lock_writer();
        let mut work = self.lock_work();
        let mark = match (work.outstanding.first(), &writer.fold) {
            (Some(&first), _) => first,
            // Shared: `_events` may hold triggers past the fold, not yet outstanding here.
            (None, Some(fold)) => fold.folded_to + 1,
            (None, None) => self.ns.latest(EVENTS_LOG)? + 1,
        };
        if mark == work.last_progress && !force {
            return Ok(());
        }
        work.last_progress = mark;
        drop(work);
        self.ns.append(PROGRESS_LOG, &mark.to_le_bytes())?;
        drop(writer);
        Ok(())
    }
}
