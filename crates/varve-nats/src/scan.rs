//! [`NatsScan`]: a log's records in seq order, fetched in batches by direct
//! get (`next_by_subj` from a stream sequence, up to [`SCAN_BATCH`] at once).

use std::collections::VecDeque;
use std::sync::Arc;

use varve_log::{LogError, Record, Result, Seq};

use crate::conn::Failure;
use crate::namespace::{Inner, LogState};
use crate::stored::Stored;

/// Most records one direct get of a scan asks for.
pub(crate) const SCAN_BATCH: u64 = 256;
/// Most bytes one direct get of a scan asks for (a record larger than this
/// still comes, alone).
const SCAN_BYTES_MAX: u64 = 8 << 20;

/// Fetch the records of `log` from stream sequence `from` on, at most
/// `count`, in stream order (seq order).
pub(crate) fn fetch(inner: &Inner, log: &str, from: u64, count: u64) -> Result<Vec<Stored>> {
    let body = serde_json::json!({
        "seq": from.max(1),
        "next_by_subj": inner.layout.data(log),
        "batch": count.clamp(1, SCAN_BATCH),
        "max_bytes": SCAN_BYTES_MAX,
    });
    let messages = inner
        .conn
        .block_on(inner.conn.direct_batch(&inner.layout.stream, &body))
        .map_err(|f| f.into_read_error(inner.target(), &format!("read log {log:?}")))?;
    messages
        .into_iter()
        .map(Stored::from_direct)
        .collect::<Result<Vec<_>, Failure>>()
        .map_err(|f| f.into_read_error(inner.target(), &format!("read log {log:?}")))
}

/// The records `first..=last` of a log, which existed when the scan began.
pub(crate) struct NatsScan {
    inner: Arc<Inner>,
    log: String,
    state: LogState,
    /// The next seq to yield.
    next: Seq,
    last: Seq,
    /// The stream sequence after which `next` lies, once known.
    after_sseq: Option<u64>,
    buffer: VecDeque<Stored>,
    failed: bool,
}

impl NatsScan {
    pub(crate) fn new(inner: Arc<Inner>, log: &str, state: LogState, first: Seq, last: Seq) -> NatsScan {
        NatsScan {
            inner,
            log: log.to_owned(),
            state,
            next: first,
            last,
            after_sseq: None,
            buffer: VecDeque::new(),
            failed: false,
        }
    }

    fn refill(&mut self) -> Result<()> {
        let Some(after) = self.after_sseq else {
            let first = self.inner.locate(&self.log, &self.state, self.next)?;
            self.buffer.push_back(first);
            return Ok(());
        };
        let fetched = fetch(&self.inner, &self.log, after + 1, self.last - self.next + 1)?;
        if fetched.is_empty() {
            // The replica that answered may be behind the leader: `locate`
            // asks the leader before calling the record gone.
            let next = self.inner.locate(&self.log, &self.state, self.next)?;
            self.buffer.push_back(next);
            return Ok(());
        }
        self.buffer.extend(fetched);
        Ok(())
    }

    /// Record `next` is gone: trimmed or deleted while the scan ran.
    fn vanished(&self) -> LogError {
        match self.inner.refresh(&self.log) {
            Ok(now) if self.next < now.earliest() => {
                LogError::Trimmed { log: self.log.clone(), seq: self.next, earliest: now.earliest() }
            }
            Ok(now) => LogError::SeqNotFound { log: self.log.clone(), seq: self.next, latest: now.latest },
            Err(error) => error,
        }
    }
}

impl Iterator for NatsScan {
    type Item = Result<Record>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.next > self.last {
            return None;
        }
        loop {
            if self.buffer.is_empty() {
                if let Err(error) = self.refill() {
                    self.failed = true;
                    return Some(Err(error));
                }
            }
            let stored = self.buffer.pop_front()?;
            self.after_sseq = Some(stored.sseq);
            // Messages of a deleted log of the same name are skipped.
            if stored.sseq <= self.state.config_sseq || stored.seq < self.next {
                continue;
            }
            if stored.seq > self.next {
                self.failed = true;
                return Some(Err(self.vanished()));
            }
            self.next += 1;
            return Some(Ok(Record { seq: stored.seq, value: stored.value }));
        }
    }
}
