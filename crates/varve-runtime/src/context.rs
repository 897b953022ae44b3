//! What a Rust handler gets: the triggering record and an API whose every
//! call is recorded in `_events` with the FIRING as its cause (appends as
//! atomic triggers, reads as READ/LATEST events written with the next write).

use std::cell::RefCell;

use bytes::Bytes;
use varve_log::{Record, Seq, SeqRange};

use crate::error::{Result, RuntimeError};
use crate::event::{EventId, ReadDep, TraceId};
use crate::inner::{Cause, Inner};
use crate::runtime::RuntimeHandle;
use crate::trigger::AppendOptions;

/// Most records one [`HandlerContext::scan`] returns (it materialises them).
pub const SCAN_RECORDS_MAX: u64 = 100_000;

/// What a handler's calls do while a repair replays one of its past runs
/// (`varve-repair` implements it): reads come from the repaired history as
/// the run originally saw it, appends go to shadow logs. Nothing is recorded
/// in `_events` and no handler is triggered: the repair drives the replay.
///
/// `Sync`, so that a [`HandlerContext`] is `Send` whatever backs it: a
/// handler may hand its context to a thread it waits for (the Python
/// binding relies on it, `bindings/python/src/runtime/handler.rs`).
pub trait Replay: Sync {
    /// The record at `seq` of `log`, as the replayed run sees it.
    fn get(&self, log: &str, seq: Seq) -> Result<Bytes>;
    /// The latest seq of `log` as the replayed run sees it.
    fn latest(&self, log: &str) -> Result<Seq>;
    /// Records of `log` in `range`, as the replayed run sees them.
    fn scan(&self, log: &str, range: SeqRange) -> Result<Vec<Record>>;
    /// Take the run's appends; returns the seqs they will have.
    fn append_batch(&self, batch: &[(&str, &[u8])]) -> Result<Vec<Seq>>;
    /// Take the run's appends to another namespace's logs
    /// ([`HandlerContext::append_via`]). By default refused: a replay that
    /// cannot place them must not drop them.
    fn append_batch_in(&self, namespace: &str, batch: &[(&str, &[u8])]) -> Result<Vec<Seq>> {
        let _ = batch;
        Err(RuntimeError::InvalidArgument {
            reason: format!("this replay cannot take appends to namespace {namespace:?}"),
        })
    }
}

// A handler may hand its context to a thread it waits for (see `Replay`).
const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<HandlerContext<'static>>();
};

/// What a context's calls act on.
#[derive(Clone, Copy)]
pub(crate) enum Backing<'a> {
    /// A running runtime: the store, with every call recorded.
    Live(&'a Inner),
    /// A repair replaying a past run.
    Replay(&'a dyn Replay),
}

/// What a Rust handler gets: the triggering record and the API whose every
/// call is recorded in `_events` with the FIRING as its cause.
pub struct HandlerContext<'a> {
    pub(crate) backing: Backing<'a>,
    pub(crate) firing: EventId,
    pub(crate) trace: TraceId,
    pub(crate) handler: &'a str,
    pub(crate) log: &'a str,
    pub(crate) seq: Seq,
    pub(crate) value: Bytes,
    pub(crate) attempt: u32,
    /// Reads not yet written (when `record_reads`). They are folded into
    /// the first event of the handler's next write — the first APPEND of its
    /// next `append`, else its DONE or FAILED — not written as events of
    /// their own: a read changes nothing until something written depends on
    /// it, and every such write carries the reads before it, in the order
    /// they happened. A run cut short before its next write loses them with
    /// the run, which is re-run (at least once) and records its reads again.
    /// A READ/LATEST event per read cost 17 % of a latest + get + append
    /// handler's wall time (`varve bench runtime`, docs/benchmarks.md).
    pub(crate) reads: RefCell<Vec<ReadDep>>,
    /// In a replay, the sorted-map ops this run appended, `(log, seq,
    /// record)`: its later map reads include them, though the repair puts
    /// them in the shadow only when the run ends (`sorted_map.rs`).
    pub(crate) map_ops: RefCell<Vec<(String, Seq, Vec<u8>)>>,
}

impl HandlerContext<'_> {
    /// The triggering record's bytes.
    #[must_use]
    pub fn record(&self) -> &Bytes {
        &self.value
    }

    /// The log the triggering record is in.
    #[must_use]
    pub fn log(&self) -> &str {
        self.log
    }

    /// The triggering record's seq.
    #[must_use]
    pub fn seq(&self) -> Seq {
        self.seq
    }

    /// This handler's name.
    #[must_use]
    pub fn handler(&self) -> &str {
        self.handler
    }

    /// The FIRING event being handled: the cause of everything this handler does.
    #[must_use]
    pub fn event_id(&self) -> &EventId {
        &self.firing
    }

    /// The trace id of the FIRING: every event this handler causes carries it.
    #[must_use]
    pub fn trace_id(&self) -> TraceId {
        self.trace
    }

    /// 1 on the first run, 2 on the first re-run, …
    #[must_use]
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    fn cause(&self) -> Cause {
        Cause { parent: self.firing.clone(), trace: self.trace }
    }

    /// Append a record (fires its subscribers, same trace, parent = this FIRING).
    pub fn append(&self, log: &str, value: &[u8]) -> Result<Seq> {
        Ok(self.append_batch(&[(log, value)])?[0])
    }

    /// Append records to several logs atomically, with their triggers (and
    /// the reads made since the last write, folded into the first APPEND).
    pub fn append_batch(&self, batch: &[(&str, &[u8])]) -> Result<Vec<Seq>> {
        let inner = match self.backing {
            Backing::Live(inner) => inner,
            Backing::Replay(replay) => return replay.append_batch(batch),
        };
        let mut reads = self.reads.borrow_mut();
        let seqs = inner
            .append_request(
                batch,
                &AppendOptions { cause: Some(&self.cause()), reads: &reads, ..AppendOptions::default() },
            )?
            .seqs;
        reads.clear();
        Ok(seqs)
    }

    /// Keep a read for the next write (see [`HandlerContext`]'s `reads`).
    pub(crate) fn record_read(&self, read: impl FnOnce() -> ReadDep) {
        if matches!(self.backing, Backing::Live(inner) if inner.options.record_reads) {
            self.reads.borrow_mut().push(read());
        }
    }

    /// Append records to another namespace's logs through its runtime
    /// (`remote`), with this run's FIRING as their cause — how a handler
    /// crosses namespaces. A repair replays it like an own append (the
    /// records go to that namespace's shadows), which a direct
    /// [`RuntimeHandle::append_caused`] in the handler's code cannot offer.
    pub fn append_via(&self, remote: &RuntimeHandle, batch: &[(&str, &[u8])]) -> Result<Vec<Seq>> {
        match self.backing {
            Backing::Live(_) => remote.append_caused(batch, self.firing.clone(), self.trace),
            Backing::Replay(replay) => replay.append_batch_in(remote.namespace_name(), batch),
        }
    }

    /// Whether this context replays a past run (a repair) rather than
    /// serving a live one: a handler may skip work that only makes sense
    /// live (waiting for another runtime, say). It must compute the same
    /// records either way.
    #[must_use]
    pub fn is_replay(&self) -> bool {
        matches!(self.backing, Backing::Replay(_))
    }

    /// Publish to a topic (the same as `append`).
    pub fn publish(&self, topic: &str, data: &[u8]) -> Result<Seq> {
        self.append(topic, data)
    }

    fn latest_unrecorded(&self, log: &str) -> Result<Seq> {
        match self.backing {
            Backing::Live(inner) => Ok(inner.ns.latest(log)?),
            Backing::Replay(replay) => replay.latest(log),
        }
    }

    /// A context for replaying a past run of `handler` on the record
    /// `log`/`seq` holding `value`: every call goes to `replay`. The FIRING
    /// and trace are those of the run replayed (for handlers that log them).
    #[must_use]
    pub fn replaying<'a>(
        replay: &'a dyn Replay,
        firing: EventId,
        trace: TraceId,
        handler: &'a str,
        log: &'a str,
        seq: Seq,
        value: Bytes,
    ) -> HandlerContext<'a> {
        HandlerContext {
            backing: Backing::Replay(replay),
            firing,
            trace,
            handler,
            log,
            seq,
            value,
            attempt: 1,
            reads: RefCell::new(Vec::new()),
            map_ops: RefCell::new(Vec::new()),
        }
    }

    /// Read a record; recorded as READ `log`/`seq`.
    pub fn get(&self, log: &str, seq: Seq) -> Result<Bytes> {
        let value = match self.backing {
            Backing::Live(inner) => inner.ns.get(log, seq)?,
            Backing::Replay(replay) => replay.get(log, seq)?,
        };
        self.record_read(|| ReadDep::read(log, seq, seq));
        Ok(value)
    }

    /// The latest seq of a log; recorded as LATEST with the seq returned.
    pub fn latest(&self, log: &str) -> Result<Seq> {
        let seq = self.latest_unrecorded(log)?;
        self.record_read(|| ReadDep::latest(log, seq));
        Ok(seq)
    }

    /// Records in a range; recorded as one READ of `first..=last` actually returned.
    pub fn scan(&self, log: &str, range: impl Into<SeqRange>) -> Result<Vec<Record>> {
        let range = range.into();
        let inner = match self.backing {
            Backing::Live(inner) => inner,
            // The repair clips the range to the history the run saw (and a
            // scan's own look at the tail is not one of the run's LATESTs).
            Backing::Replay(replay) => return replay.scan(log, range),
        };
        let records = bounded_scan(inner.ns.as_ref(), log, range)?;
        if let (Some(first), Some(last)) = (records.first(), records.last()) {
            self.record_read(|| ReadDep::read(log, first.seq, last.seq));
        }
        Ok(records)
    }
}

/// The records of `log` in `range`, clipped to its newest record (an empty
/// answer when nothing is in range yet, not the store's "range ends before
/// it starts"); more than [`SCAN_RECORDS_MAX`] is refused. A handler's scan
/// and a scan through the runtime's socket alike.
pub(crate) fn bounded_scan(ns: &dyn varve_log::Namespace, log: &str, range: SeqRange) -> Result<Vec<Record>> {
    let latest = ns.latest(log)?;
    let last = range.last.min(latest);
    if last >= range.first && last - range.first >= SCAN_RECORDS_MAX {
        return Err(RuntimeError::InvalidArgument {
            reason: format!(
                "a handler scan returns at most {SCAN_RECORDS_MAX} records; {log}:{}..={last} is more: scan in parts",
                range.first
            ),
        });
    }
    if last < range.first {
        return Ok(Vec::new());
    }
    Ok(ns.scan(log, SeqRange { first: range.first, last })?.collect::<varve_log::Result<_>>()?)
}
