//! [`NatsWatch`]: a log's records from a seq on, then new ones as they
//! land. No `JetStream` consumer: a core subscription to the log's subject
//! says when something was published, and direct gets read what committed
//! (so a watch costs the servers no state, and a rejected publish that
//! reached the subscription only wakes the watch for nothing).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::Subscriber;
use futures_util::{FutureExt as _, StreamExt as _};
use varve_log::{rules, LogError, Record, Result, Seq, WatchSource};

use crate::namespace::Inner;
use crate::scan::{fetch, SCAN_BATCH};
use crate::stored::Stored;

/// How often a watch with nothing new reads the stream anyway, in case a
/// record arrived without a message on the subscription (through a mirror
/// or source, or while the connection was re-established).
const POLL_EVERY: Duration = Duration::from_millis(500);

pub(crate) struct NatsWatch {
    inner: Arc<Inner>,
    log: String,
    wakeups: Subscriber,
    /// Records fetched and not yet asked for, in seq order.
    buffer: VecDeque<Stored>,
    /// The stream sequence of the record before the next one to yield.
    after_sseq: Option<(Seq, u64)>,
}

impl NatsWatch {
    /// Subscribe first, so nothing appended after the first read is missed.
    pub(crate) fn start(inner: Arc<Inner>, log: &str) -> Result<NatsWatch> {
        inner.state(log)?;
        let subject = inner.layout.data(log);
        let wakeups = inner.conn.block_on(inner.conn.client.subscribe(subject)).map_err(|e| LogError::Unavailable {
            target: inner.target().to_owned(),
            reason: format!("cannot subscribe to log {log:?}: {e}"),
        })?;
        Ok(NatsWatch { inner, log: log.to_owned(), wakeups, buffer: VecDeque::new(), after_sseq: None })
    }

    /// Fill the buffer with records from `seq` on, if there are any.
    fn read_from(&mut self, seq: Seq) -> Result<()> {
        let start = match self.after_sseq {
            Some((before, stream_seq)) if before + 1 == seq => stream_seq,
            _ => {
                let state = self.inner.refresh(&self.log)?;
                if seq > state.latest {
                    if seq == state.latest + 1 {
                        self.after_sseq = Some((state.latest, state.latest_sseq.max(state.config_sseq)));
                    }
                    return Ok(());
                }
                rules::check_readable(&self.log, seq, state.earliest(), state.latest)?;
                let found = self.inner.locate(&self.log, &state, seq)?;
                self.after_sseq = Some((seq - 1, found.sseq - 1));
                found.sseq - 1
            }
        };
        let config_sseq = self.inner.state(&self.log)?.config_sseq;
        let mut expected = seq;
        for stored in fetch(&self.inner, &self.log, start + 1, SCAN_BATCH)? {
            if stored.sseq <= config_sseq || stored.seq < expected {
                continue;
            }
            if stored.seq > expected {
                if self.buffer.is_empty() {
                    // `seq` is gone from where the watch stood: a trim or
                    // overwrite retention purged it. Below `earliest` now,
                    // that is `Trimmed`; else the next read finds it anew.
                    self.after_sseq = None;
                    let state = self.inner.refresh(&self.log)?;
                    rules::check_readable(&self.log, seq, state.earliest(), state.latest)?;
                }
                break;
            }
            expected += 1;
            self.buffer.push_back(stored);
        }
        Ok(())
    }

    /// Wait up to `timeout` for a publish to the log's subject.
    fn wait(&mut self, timeout: Duration) {
        let wakeups = &mut self.wakeups;
        self.inner.conn.block_on(async {
            if tokio::time::timeout(timeout, wakeups.next()).await.is_ok() {
                // Several publishes need one read: take what else is queued.
                while let Some(Some(_)) = wakeups.next().now_or_never() {}
            }
        });
    }
}

impl WatchSource for NatsWatch {
    fn wait_for(&mut self, seq: Seq, timeout: Option<Duration>) -> Result<Option<Record>> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            while let Some(front) = self.buffer.front() {
                if front.seq == seq {
                    break;
                }
                self.buffer.pop_front();
            }
            if let Some(stored) = self.buffer.pop_front() {
                self.after_sseq = Some((stored.seq, stored.sseq));
                return Ok(Some(Record { seq: stored.seq, value: stored.value }));
            }
            self.read_from(seq)?;
            if !self.buffer.is_empty() {
                continue;
            }
            let pause = match deadline {
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Ok(None);
                    }
                    left.min(POLL_EVERY)
                }
                None => POLL_EVERY,
            };
            self.wait(pause);
        }
    }
}
