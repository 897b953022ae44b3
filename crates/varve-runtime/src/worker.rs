//! The worker pool: the queues of ready and delayed triggers, claiming
//! (FIRING), running a handler (a Rust function or an external command),
//! recording DONE or FAILED, scheduling retries and writing dead letters.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::PoisonError;
use std::time::{Duration, Instant};

use varve_log::Seq;

use crate::command;
use crate::context::{Backing, HandlerContext};
use crate::error::{Result, RuntimeError};
use crate::event::{trace_hex, Event, EventKind, ReadDep};
use crate::handler::HandlerKind;
use crate::inner::Inner;
use crate::pending::PendingTrigger;
use crate::recovery::PROGRESS_EVERY_FINISHED;
use crate::retry::AfterFailure;
use crate::shared::Claimed;
use crate::system_logs::{DeadLetter, DEAD_LETTERS_LOG, EVENTS_LOG};

/// Most worker threads per namespace.
pub const CONCURRENCY_MAX: usize = 1024;
/// Most claims (FIRING events) one worker writes in one batch.
pub const CLAIM_BATCH_MAX: usize = 64;

/// A trigger a worker runs: a pending trigger with its attempt and budget.
pub(crate) type Job = PendingTrigger;

#[derive(Default)]
pub(crate) struct WorkState {
    pub(crate) ready: VecDeque<Job>,
    /// Retries waiting for their time: (due, trigger) → job.
    pub(crate) delayed: BTreeMap<(Instant, Seq), Job>,
    pub(crate) running: usize,
    /// External commands running now (a stop waits for them after killing them).
    pub(crate) running_commands: usize,
    /// Unfinished triggers (ready, delayed, running or without a handler here).
    pub(crate) outstanding: BTreeSet<Seq>,
    /// Triggers for handlers this runtime does not have: kept, not run.
    pub(crate) orphans: usize,
    pub(crate) last_progress: Seq,
    /// Claimed runs not yet finished (what a stop reports as cut short), by trigger.
    pub(crate) claimed: BTreeMap<Seq, ClaimedRun>,
}

/// A claimed run, as a stop reports it.
pub(crate) struct ClaimedRun {
    pub handler: String,
    pub log: String,
    pub seq: Seq,
    pub attempt: u32,
    /// Its handler was called.
    pub started: bool,
    /// Its handler is an external command.
    pub command: bool,
}

impl WorkState {
    pub(crate) fn is_idle(&self) -> bool {
        self.ready.is_empty() && self.delayed.is_empty() && self.running == 0
    }

    /// Triggers this runtime will run that have not finished: queued, waiting
    /// to be retried, or running.
    pub(crate) fn backlog(&self) -> usize {
        self.ready.len() + self.delayed.len() + self.running
    }
}

impl Inner {
    pub(crate) fn enqueue(&self, jobs: Vec<Job>) {
        let mut work = self.lock_work();
        for job in jobs {
            work.outstanding.insert(job.trigger);
            if self.handlers.contains_key(&job.handler) && self.options.concurrency > 0 {
                work.ready.push_back(job);
            } else {
                work.orphans += 1;
            }
        }
        drop(work);
        self.work_cv.notify_all();
    }

    /// Before an append from outside the handlers: wait while the backlog is
    /// at its limit (see [`crate::Backlog`]). Refused with
    /// [`RuntimeError::Backlogged`] when no room comes in time, and with
    /// [`RuntimeError::Stopped`] when the runtime stops meanwhile.
    pub(crate) fn wait_for_room(&self) -> Result<()> {
        let crate::Backlog { max, wait } = self.options.backlog;
        if max == 0 || self.options.concurrency == 0 {
            return Ok(());
        }
        let started = Instant::now();
        let deadline = started + wait;
        let mut work = self.lock_work();
        while work.backlog() >= max {
            if self.stopping.load(Ordering::SeqCst) || self.stopped.load(Ordering::SeqCst) {
                return Err(RuntimeError::Stopped);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(RuntimeError::Backlogged { backlog: work.backlog(), max, waited: now - started });
            }
            work = self.room_cv.wait_timeout(work, deadline - now).unwrap_or_else(PoisonError::into_inner).0;
        }
        Ok(())
    }

    pub(crate) fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut work = self.lock_work();
        while !work.is_idle() {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            work = self.idle_cv.wait_timeout(work, deadline - now).unwrap_or_else(PoisonError::into_inner).0;
        }
        true
    }

    /// Wait until no handler runs (`commands_only`: no external command),
    /// at most until `deadline`; `false` on timeout.
    pub(crate) fn wait_running(&self, deadline: Instant, commands_only: bool) -> bool {
        let mut work = self.lock_work();
        while (if commands_only { work.running_commands } else { work.running }) > 0 {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            work = self.idle_cv.wait_timeout(work, deadline - now).unwrap_or_else(PoisonError::into_inner).0;
        }
        true
    }

    /// The DONE or FAILED of these runs is on disk: they are no longer claimed.
    fn outcome_written(&self, triggers: &[Seq]) {
        let mut work = self.lock_work();
        for trigger in triggers {
            work.claimed.remove(trigger);
        }
    }

    fn is_command(&self, handler: &str) -> bool {
        self.handlers.get(handler).is_some_and(|h| matches!(h.kind, HandlerKind::Command(_)))
    }

    pub(crate) fn work_loop(&self) {
        loop {
            let jobs = {
                let mut work = self.lock_work();
                loop {
                    if self.stopping.load(Ordering::SeqCst) {
                        return;
                    }
                    if self.paused.load(Ordering::SeqCst) {
                        // Nothing is claimed while paused; `pause.rs` wakes us.
                        work = self.work_cv.wait(work).unwrap_or_else(PoisonError::into_inner);
                        continue;
                    }
                    let now = Instant::now();
                    while let Some(entry) = work.delayed.first_entry() {
                        if entry.key().0 > now {
                            break;
                        }
                        let job = entry.remove();
                        work.ready.push_back(job);
                    }
                    if !work.ready.is_empty() {
                        break;
                    }
                    let wait = work.delayed.keys().next().map(|(due, _)| due.saturating_duration_since(now));
                    work = match wait {
                        Some(wait) => self.work_cv.wait_timeout(work, wait).unwrap_or_else(PoisonError::into_inner).0,
                        None => self.work_cv.wait(work).unwrap_or_else(PoisonError::into_inner),
                    };
                }
                // Share the queue among the workers; claim several at once when it is long.
                let share = (work.ready.len() / self.options.concurrency).clamp(1, CLAIM_BATCH_MAX);
                let jobs: Vec<Job> = work.ready.drain(..share).collect();
                work.running += jobs.len();
                for job in &jobs {
                    let run = ClaimedRun {
                        handler: job.handler.clone(),
                        log: job.log.clone(),
                        seq: job.seq,
                        attempt: job.attempt,
                        started: false,
                        command: self.is_command(&job.handler),
                    };
                    work.claimed.insert(job.trigger, run);
                }
                jobs
            };
            let count = jobs.len();
            let triggers: Vec<Seq> = jobs.iter().map(|j| j.trigger).collect();
            let finished = self.run_jobs(jobs);
            let mut work = self.lock_work();
            work.running -= count;
            if !self.stopped.load(Ordering::SeqCst) {
                // (A stopped runtime keeps the runs whose outcome is not on
                // disk: its stop reports them.)
                for trigger in &triggers {
                    work.claimed.remove(trigger);
                }
            }
            for trigger in finished {
                work.outstanding.remove(&trigger);
            }
            // `wait_idle` waits for an empty queue and no running job; a
            // stopping or pausing runtime (`stop_mut`, `pause`) only for no
            // running job, with triggers possibly still queued.
            let at_rest = self.stopping.load(Ordering::SeqCst) || self.paused.load(Ordering::SeqCst);
            if work.is_idle() || (work.running == 0 && at_rest) {
                self.idle_cv.notify_all();
            }
            drop(work);
            self.room_cv.notify_all();
            let total = self.finished_total.fetch_add(count as u64, Ordering::Relaxed) + count as u64;
            if total % PROGRESS_EVERY_FINISHED < count as u64 {
                let _ = self.write_progress(false);
            }
            self.retain_events();
        }
    }

    /// The FIRING that claims `job`'s next attempt.
    pub(crate) fn firing(&self, job: &Job) -> Event {
        let mut event = Event::new(EventKind::Firing, job.trace, Some(self.event_id(job.trigger)))
            .at(&job.log, job.seq)
            .for_handler(&job.handler);
        event.attempt = job.attempt;
        event.trigger = job.trigger;
        event
    }

    /// Claim jobs (see [`Claimed`]); exhausted ones are dead-lettered here.
    /// `None`: stopped, or the store failed — the triggers stay unfinished
    /// on disk and the next start re-runs them.
    fn claim(&self, jobs: Vec<Job>) -> Option<Claimed> {
        if !self.is_shared() {
            let firings: Vec<Event> = jobs.iter().map(|job| self.firing(job)).collect();
            let seqs = self.append_events(&firings).ok()?;
            return Some(Claimed { runs: jobs.into_iter().zip(seqs).collect(), ..Claimed::default() });
        }
        let mut claimed = self.claim_shared(jobs).ok()?;
        for job in std::mem::take(&mut claimed.exhausted) {
            if self.dead_letter(&job).is_ok() {
                claimed.finished.push(job.trigger);
            }
        }
        Some(claimed)
    }

    /// Claim and run jobs; returns the triggers that are finished (DONE or dead-lettered).
    fn run_jobs(&self, jobs: Vec<Job>) -> Vec<Seq> {
        let Some(Claimed { runs, mut finished, .. }) = self.claim(jobs) else {
            return Vec::new();
        };
        // DONE events of this batch, written together at the end (or before
        // a failure is recorded, so each trigger's events stay in order).
        let mut done_events: Vec<Event> = Vec::new();
        let mut done_triggers: Vec<Seq> = Vec::new();
        let flush = |events: &mut Vec<Event>, triggers: &mut Vec<Seq>, finished: &mut Vec<Seq>| {
            if !events.is_empty() && self.append_events(events).is_ok() {
                self.outcome_written(triggers);
                finished.append(triggers);
            }
            events.clear();
            triggers.clear();
        };
        for (mut job, firing) in runs {
            if self.stopping.load(Ordering::SeqCst) {
                // Claimed but not started: left unfinished, re-run by the next start.
                continue;
            }
            job.last_firing = firing;
            if let Some(run) = self.lock_work().claimed.get_mut(&job.trigger) {
                run.started = true;
            }
            let (outcome, reads) = self.run_one(&job, firing);
            match outcome {
                Ok(()) => {
                    let mut done = Event::new(EventKind::Done, job.trace, Some(self.event_id(firing)))
                        .at(&job.log, job.seq)
                        .for_handler(&job.handler);
                    done.attempt = job.attempt;
                    done.trigger = job.trigger;
                    done.reads = reads;
                    done_events.push(done);
                    done_triggers.push(job.trigger);
                }
                Err(reason) => {
                    flush(&mut done_events, &mut done_triggers, &mut finished);
                    if self.stopped.load(Ordering::SeqCst) {
                        // Cut short by the stop (killed, or refused its writes): not a failure.
                        continue;
                    }
                    let mut failed = Event::new(EventKind::Failed, job.trace, Some(self.event_id(firing)))
                        .at(&job.log, job.seq)
                        .for_handler(&job.handler);
                    failed.attempt = job.attempt;
                    failed.trigger = job.trigger;
                    failed.reason.clone_from(&reason);
                    failed.reads = reads;
                    if self.append_events(&[failed]).is_err() {
                        continue;
                    }
                    self.outcome_written(&[job.trigger]);
                    job.failures += 1;
                    job.last_reason = reason;
                    let retry = self.handlers.get(&job.handler).map(|h| h.retry).unwrap_or_default();
                    match retry.after_failure(job.failures) {
                        AfterFailure::DeadLetter => {
                            if self.dead_letter(&job).is_ok() {
                                finished.push(job.trigger);
                            }
                        }
                        AfterFailure::RetryAfter(pause) => {
                            let due = Instant::now() + pause;
                            job.attempt += 1;
                            let mut work = self.lock_work();
                            work.delayed.insert((due, job.trigger), job);
                            drop(work);
                            self.work_cv.notify_one();
                        }
                    }
                }
            }
        }
        flush(&mut done_events, &mut done_triggers, &mut finished);
        finished
    }

    pub(crate) fn dead_letter(&self, job: &Job) -> Result<()> {
        let letter = DeadLetter {
            handler: job.handler.clone(),
            log: job.log.clone(),
            seq: job.seq,
            trigger: job.trigger,
            attempts: job.failures,
            reason: job.last_reason.clone(),
            trace: trace_hex(job.trace),
        };
        let record =
            serde_json::to_vec(&letter).map_err(|e| RuntimeError::InvalidArgument { reason: e.to_string() })?;
        let parent = if job.last_firing == 0 { job.trigger } else { job.last_firing };
        let mut event = Event::new(EventKind::DeadLetter, job.trace, Some(self.event_id(parent))).at(&job.log, job.seq);
        event.handler.clone_from(&job.handler);
        event.attempt = job.failures;
        event.trigger = job.trigger;
        event.reason.clone_from(&job.last_reason);
        let event = event.encode();
        let _writer = self.lock_writer();
        self.check_running()?;
        self.ns.append_batch(&[(DEAD_LETTERS_LOG, &record), (EVENTS_LOG, &event)])?;
        Ok(())
    }

    /// Run one job's handler. Also returns the reads of a Rust handler not
    /// yet written (its reads after its last write): the caller folds them
    /// into the DONE or FAILED event.
    fn run_one(&self, job: &Job, firing: Seq) -> (std::result::Result<(), String>, Vec<ReadDep>) {
        let Some(spec) = self.handlers.get(&job.handler) else {
            return (Err(format!("handler {:?} is not registered", job.handler)), Vec::new());
        };
        let value = match self.ns.get(&job.log, job.seq) {
            Ok(value) => value,
            Err(e) => return (Err(format!("cannot read the triggering record: {e}")), Vec::new()),
        };
        match &spec.kind {
            HandlerKind::Rust(f) => {
                let mut ctx = HandlerContext {
                    backing: Backing::Live(self),
                    firing: self.event_id(firing),
                    trace: job.trace,
                    handler: &job.handler,
                    log: &job.log,
                    seq: job.seq,
                    value,
                    attempt: job.attempt,
                    reads: RefCell::new(Vec::new()),
                    map_ops: RefCell::new(Vec::new()),
                };
                let outcome = match catch_unwind(AssertUnwindSafe(|| f(&mut ctx))) {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(error)) => Err(error.to_string()),
                    Err(panic) => {
                        let message = panic
                            .downcast_ref::<&str>()
                            .map(|s| (*s).to_owned())
                            .or_else(|| panic.downcast_ref::<String>().cloned())
                            .unwrap_or_else(|| "a non-string payload".to_owned());
                        Err(format!("panicked: {message}"))
                    }
                };
                (outcome, ctx.reads.into_inner())
            }
            HandlerKind::Command(argv) => {
                let mut env = vec![
                    (command::ENV_NAMESPACE, self.namespace.clone()),
                    (command::ENV_LOG, job.log.clone()),
                    (command::ENV_SEQ, job.seq.to_string()),
                    (command::ENV_EVENT_ID, self.event_id(firing).to_string()),
                    (command::ENV_TRACE_ID, trace_hex(job.trace)),
                ];
                if let Some(dir) = &self.options.data_dir {
                    env.push((command::ENV_DATA, dir.display().to_string()));
                }
                if let Some(socket) = &self.options.socket {
                    env.push((command::ENV_RUNTIME_SOCKET, socket.display().to_string()));
                }
                self.lock_work().running_commands += 1;
                // Reads through the socket are recorded as they happen (socket.rs).
                let outcome = command::run_until(argv, &env, &value, spec.retry.timeout, &self.kill_commands);
                let mut work = self.lock_work();
                work.running_commands -= 1;
                if work.running_commands == 0 && self.stopping.load(Ordering::SeqCst) {
                    self.idle_cv.notify_all();
                }
                drop(work);
                (outcome, Vec::new())
            }
        }
    }
}
