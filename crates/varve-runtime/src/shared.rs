//! Several runtimes on one namespace (`RuntimeOptions::shared`): on NATS
//! `JetStream`, processes on several hosts each run a runtime over the same
//! namespace, and every append still fires its handlers exactly once per
//! append, wherever it was made.
//!
//! **Invariant: each runtime has folded a prefix of `_events`, and every
//! write that depends on what was folded extends exactly that prefix.** Such
//! a write — an append with its TRIGGERs, a claim (FIRING), a subscription
//! change, a dead letter from a claim — is an `append_batch_if` that expects
//! `_events` to end where this runtime's fold ends (and each data log where
//! its seqs were predicted from). If anyone wrote in between, the batch is
//! refused, the runtime folds what it missed, and plans again. So:
//! - the seqs an append's events name are the seqs the records get;
//! - an append fires exactly the handlers subscribed (on any host) when it
//!   landed, because every SUBSCRIBE/UNSUBSCRIBE before it was folded;
//! - two runtimes cannot both claim a trigger's attempt n: the second's
//!   claim was planned on a prefix that did not hold the first's FIRING.
//!
//! Writes that depend on nothing folded (DONE, FAILED, READ, the progress
//! mark) are plain appends; every runtime folds them later, like others'.
//!
//! **Claims are leases.** A trigger another runtime claimed (or failed and
//! will retry) is left to it for [`RuntimeOptions::shared`]'s lease, counted
//! on this host's clock from the last event seen about it; after that,
//! this runtime may claim it (attempt + 1), so a crashed host's triggers
//! run elsewhere. A runtime that outlives its lease and then finishes writes
//! a second outcome: visible in `_events`, never silent. Set the lease
//! above the longest run of any handler. On start every unfinished FIRING
//! is treated as another's (even if it was this host's, before a crash).
//!
//! A follower thread folds `_events` as it grows (a [`varve_log::Watch`]), so
//! triggers appended elsewhere reach this runtime's workers.
//!
//! [`RuntimeOptions::shared`]: crate::RuntimeOptions::shared

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use varve_log::{LogError, Seq, SeqRange};

use crate::error::{Result, RuntimeError};
use crate::event::{Event, EventKind};
use crate::inner::{Inner, WriterState};
use crate::pending::PendingTrigger;
use crate::system_logs::{EVENTS_LOG, HOST_LOG};
use crate::worker::Job;

/// The claim lease of a shared runtime when nothing asks for another: how
/// long another runtime's claim is left to it (see the module docs).
pub const SHARED_LEASE_DEFAULT: Duration = Duration::from_secs(60);

/// Most times one write is planned again after conflicts before it gives up.
pub(crate) const REPLANS_MAX: u32 = 10_000;
/// How often the follower checks for a stop while `_events` is quiet.
const FOLLOW_PAUSE: Duration = Duration::from_millis(200);

/// What a shared claim did with the jobs it was given.
#[derive(Default)]
pub(crate) struct Claimed {
    /// Claimed: the job and its FIRING's seq.
    pub(crate) runs: Vec<(Job, Seq)>,
    /// Found finished (DONE or dead-lettered) elsewhere.
    pub(crate) finished: Vec<Seq>,
    /// Their retry budget is spent (their holder died before dead-lettering them).
    pub(crate) exhausted: Vec<Job>,
}

/// What one runtime has folded of a shared namespace's `_events`.
pub(crate) struct SharedFold {
    /// The last seq of `_events` folded.
    pub(crate) folded_to: Seq,
    /// Triggers without DONE or `DEAD_LETTER`, by trigger seq.
    pub(crate) pending: BTreeMap<Seq, PendingTrigger>,
    /// Triggers another runtime holds, and since when (this host's clock).
    pub(crate) held_by_others: HashMap<Seq, Instant>,
    /// FIRINGs this runtime wrote.
    pub(crate) own_firings: HashSet<Seq>,
    /// Triggers put back in the delayed queue while another runtime holds
    /// them, and their key's instant there (so a DONE can take them out).
    pub(crate) parked: HashMap<Seq, Instant>,
    pub(crate) lease: Duration,
}

impl SharedFold {
    pub(crate) fn new(from: Seq, lease: Duration) -> SharedFold {
        SharedFold {
            folded_to: from.saturating_sub(1),
            pending: BTreeMap::new(),
            held_by_others: HashMap::new(),
            own_firings: HashSet::new(),
            parked: HashMap::new(),
            lease,
        }
    }

    /// When the holder's lease on `trigger` ends, if another runtime holds it.
    pub(crate) fn held_until(&self, trigger: Seq) -> Option<Instant> {
        self.held_by_others.get(&trigger).map(|since| *since + self.lease)
    }
}

/// The result of one planned write: landed, or planned on a stale prefix.
pub(crate) enum Extended {
    Landed(Vec<Seq>),
    /// Another writer got in first; the fold has caught up: plan again.
    Stale,
}

impl Inner {
    /// Whether this runtime shares its namespace with other runtimes.
    pub(crate) fn is_shared(&self) -> bool {
        self.options.shared.is_some()
    }

    /// Shared mode: the namespace's host id (the first runtime's, kept by
    /// every later one, so all of them label events alike).
    pub(crate) fn adopt_host(ns: &dyn varve_log::Namespace, mine: u64) -> Result<u64> {
        if let Some(stored) = crate::system_logs::namespace_host(ns)? {
            return Ok(stored);
        }
        match ns.append_if(HOST_LOG, 0, &mine.to_le_bytes()) {
            Ok(_) => Ok(mine),
            // Another runtime stored its host first: take that one.
            Err(LogError::Conflict { .. }) => {
                crate::system_logs::namespace_host(ns)?.ok_or_else(|| RuntimeError::InvalidArgument {
                    reason: format!("{HOST_LOG} changed while this runtime started and is now empty; start it again"),
                })
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Append `batch` if `_events` still ends at this runtime's fold and each
    /// of `expected` holds; then fold the batch's events as this runtime's
    /// own. A conflict on `_events` catches the fold up ([`Extended::Stale`]);
    /// a conflict on a data log is [`Extended::Stale`] too (its seqs are read
    /// again when planning); other errors are returned.
    pub(crate) fn append_extending(
        &self,
        writer: &mut WriterState,
        batch: &[(&str, &[u8])],
        expected: &[(&str, Seq)],
    ) -> Result<Extended> {
        let fold = writer.fold.as_ref().expect("shared mode");
        let mut expect: Vec<(&str, Seq)> = expected.to_vec();
        expect.push((EVENTS_LOG, fold.folded_to));
        match self.ns.append_batch_if(batch, &expect) {
            Ok(seqs) => {
                for ((log, bytes), &seq) in batch.iter().zip(&seqs) {
                    if *log == EVENTS_LOG {
                        let event = Event::decode(bytes, seq)?;
                        self.absorb(writer, seq, &event, true);
                    }
                }
                Ok(Extended::Landed(seqs))
            }
            Err(LogError::Conflict { log, .. }) => {
                if log == EVENTS_LOG {
                    self.catch_up(writer)?;
                }
                Ok(Extended::Stale)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Fold every event of `_events` after this runtime's fold.
    pub(crate) fn catch_up(&self, writer: &mut WriterState) -> Result<()> {
        let from = writer.fold.as_ref().expect("shared mode").folded_to + 1;
        for record in self.ns.scan(EVENTS_LOG, SeqRange { first: from, last: Seq::MAX })? {
            let record = record?;
            let event = Event::decode(&record.value, record.seq)?;
            self.absorb(writer, record.seq, &event, false);
        }
        Ok(())
    }

    /// Fold one event at `seq` (the next after the fold; others are ignored).
    /// `own`: written by this runtime through [`Inner::append_extending`].
    fn absorb(&self, writer: &mut WriterState, seq: Seq, event: &Event, own: bool) {
        let fold = writer.fold.as_mut().expect("shared mode");
        if seq != fold.folded_to + 1 {
            return;
        }
        fold.folded_to = seq;
        match event.kind {
            EventKind::Subscribe | EventKind::Unsubscribe if !own => {
                let record = if event.kind == EventKind::Subscribe {
                    crate::subscriptions::SubscriptionRecord::Subscribe {
                        log: event.log.clone(),
                        handler: event.handler.clone(),
                    }
                } else {
                    crate::subscriptions::SubscriptionRecord::Unsubscribe {
                        log: event.log.clone(),
                        handler: event.handler.clone(),
                    }
                };
                writer.subscriptions.apply(&record);
            }
            EventKind::Trigger => {
                let job = PendingTrigger::new(seq, &event.log, event.seq, &event.handler, event.trace);
                fold.pending.insert(seq, job.clone());
                self.enqueue(vec![job]);
            }
            EventKind::Firing => {
                if let Some(p) = fold.pending.get_mut(&event.trigger) {
                    p.attempt = p.attempt.max(event.attempt + 1);
                    p.last_firing = seq;
                }
                if own {
                    fold.own_firings.insert(seq);
                    fold.held_by_others.remove(&event.trigger);
                } else {
                    fold.held_by_others.insert(event.trigger, Instant::now());
                }
            }
            EventKind::Failed => {
                if let Some(p) = fold.pending.get_mut(&event.trigger) {
                    p.failures += 1;
                    p.last_reason.clone_from(&event.reason);
                }
                let by_us = event.parent.as_ref().is_some_and(|firing| fold.own_firings.contains(&firing.seq));
                if !by_us {
                    // Its holder retries it after a pause: still held.
                    fold.held_by_others.insert(event.trigger, Instant::now());
                }
            }
            EventKind::Done | EventKind::DeadLetter => {
                fold.pending.remove(&event.trigger);
                fold.held_by_others.remove(&event.trigger);
                if let Some(p) = event.parent.as_ref() {
                    fold.own_firings.remove(&p.seq);
                }
                let parked = fold.parked.remove(&event.trigger);
                let mut work = self.lock_work();
                work.outstanding.remove(&event.trigger);
                if let Some(until) = parked {
                    work.delayed.remove(&(until, event.trigger));
                    if work.is_idle() {
                        self.idle_cv.notify_all();
                    }
                }
            }
            _ => {}
        }
    }

    /// Shared mode: of `jobs` (drawn from the ready queue), claim those
    /// still unfinished and not held by another runtime, in one batch that
    /// extends this runtime's fold. Jobs another runtime holds go back to
    /// the delayed queue until its lease ends.
    pub(crate) fn claim_shared(&self, jobs: Vec<Job>) -> Result<Claimed> {
        let mut writer = self.lock_writer();
        self.check_running()?;
        let mut out = Claimed::default();
        let mut jobs = jobs;
        for _ in 0..REPLANS_MAX {
            let fold = writer.fold.as_mut().expect("shared mode");
            let now = Instant::now();
            let mut claim = Vec::new();
            for mut job in jobs.drain(..) {
                let Some(known) = fold.pending.get(&job.trigger) else {
                    out.finished.push(job.trigger);
                    continue;
                };
                job.attempt = job.attempt.max(known.attempt);
                job.failures = job.failures.max(known.failures);
                if job.last_reason.is_empty() {
                    job.last_reason.clone_from(&known.last_reason);
                }
                match fold.held_until(job.trigger) {
                    Some(until) if until > now => {
                        fold.parked.insert(job.trigger, until);
                        self.lock_work().delayed.insert((until, job.trigger), job);
                        // A worker waiting with no deadline must learn of this one.
                        self.work_cv.notify_all();
                    }
                    _ if self.handlers.get(&job.handler).is_some_and(|h| h.retry.is_exhausted(job.failures)) => {
                        out.exhausted.push(job);
                    }
                    _ => claim.push(job),
                }
            }
            if claim.is_empty() {
                return Ok(out);
            }
            let firings: Vec<Vec<u8>> = claim.iter().map(|job| self.firing(job).encode()).collect();
            let batch: Vec<(&str, &[u8])> = firings.iter().map(|e| (EVENTS_LOG, e.as_slice())).collect();
            match self.append_extending(&mut writer, &batch, &[])? {
                Extended::Landed(seqs) => {
                    out.runs = claim.into_iter().zip(seqs).collect();
                    return Ok(out);
                }
                Extended::Stale => jobs = claim,
            }
        }
        Err(self.gave_up("claim triggers"))
    }

    /// The error of a write planned again [`REPLANS_MAX`] times.
    pub(crate) fn gave_up(&self, what: &str) -> RuntimeError {
        RuntimeError::Contended {
            namespace: self.namespace.clone(),
            reason: format!("could not {what}: other writers changed `_events` before each of {REPLANS_MAX} attempts"),
        }
    }

    /// The follower: fold `_events` as other runtimes extend it, until a stop.
    pub(crate) fn follow(self: &Arc<Inner>) {
        let from = self.lock_writer().fold.as_ref().map_or(1, |f| f.folded_to + 1);
        // Without a watch (it could not start), read what is new every pause.
        let mut watch = self.ns.watch(EVENTS_LOG, from).ok();
        while !self.stopping.load(Ordering::SeqCst) {
            let wake = if let Some(watch) = watch.as_mut() {
                watch.next_timeout(FOLLOW_PAUSE)
            } else {
                std::thread::sleep(FOLLOW_PAUSE);
                Err(LogError::InvalidArgument { reason: "no watch".into() })
            };
            let mut writer = self.lock_writer();
            let behind = writer.fold.as_ref().map_or(0, |f| f.folded_to);
            match wake {
                Ok(Some(record)) if record.seq <= behind => {}
                Ok(Some(record)) if record.seq == behind + 1 => match Event::decode(&record.value, record.seq) {
                    Ok(event) => self.absorb(&mut writer, record.seq, &event, false),
                    Err(_) => {
                        let _ = self.catch_up(&mut writer);
                    }
                },
                // Past a gap, or the watch failed (deleted, a lost answer): read what was missed.
                Ok(Some(_)) | Err(_) => {
                    if self.catch_up(&mut writer).is_err() {
                        drop(writer);
                        std::thread::sleep(FOLLOW_PAUSE);
                    }
                }
                Ok(None) => {}
            }
        }
    }
}
