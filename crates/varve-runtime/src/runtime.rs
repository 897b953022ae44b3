//! The running runtime's facade: [`Runtime`] (appends, topics,
//! subscriptions, reads, `wait_idle`, `stop`) and the cloneable
//! [`RuntimeHandle`] for other threads. The work is done in `trigger.rs`,
//! `subscriptions.rs` and `worker.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use varve_log::{Namespace, Seq, SeqRange};

use crate::error::Result;
use crate::event::{EventId, HostId, StoredEvent, TraceId};
use crate::inner::{Cause, Inner};
use crate::system_logs::read_events;

/// A running runtime over one namespace. Dropping it stops it (see [`Runtime::stop`]).
pub struct Runtime {
    inner: Arc<Inner>,
    threads: Vec<JoinHandle<()>>,
    socket: Option<crate::socket::SocketServer>,
    /// `stop` ran (so `Drop` does not wait a second time).
    stop_done: bool,
}

/// A cheap, cloneable handle for appending and publishing from other threads.
#[derive(Clone)]
pub struct RuntimeHandle {
    inner: Arc<Inner>,
}

impl Runtime {
    pub(crate) fn new(
        inner: Arc<Inner>,
        threads: Vec<JoinHandle<()>>,
        socket: Option<crate::socket::SocketServer>,
    ) -> Self {
        Runtime { inner, threads, socket, stop_done: false }
    }

    /// A handle usable from other threads while the runtime runs.
    #[must_use]
    pub fn handle(&self) -> RuntimeHandle {
        RuntimeHandle { inner: Arc::clone(&self.inner) }
    }

    /// The namespace underneath (for reads; do not append to it directly).
    #[must_use]
    pub fn namespace(&self) -> &Arc<dyn Namespace> {
        &self.inner.ns
    }

    /// The host id events carry.
    #[must_use]
    pub fn host(&self) -> HostId {
        self.inner.options.host
    }

    /// Append one record from outside any handler: a new trace; fires the
    /// handlers subscribed to `log` now.
    pub fn append(&self, log: &str, value: &[u8]) -> Result<Seq> {
        Ok(self.inner.append_traced(&[(log, value)], None)?[0])
    }

    /// Append records to several logs in one atomic batch, with their triggers.
    pub fn append_batch(&self, batch: &[(&str, &[u8])]) -> Result<Vec<Seq>> {
        self.inner.append_traced(batch, None)
    }

    /// Append with an explicit cause (an event of this or another namespace).
    pub fn append_caused(&self, batch: &[(&str, &[u8])], parent: EventId, trace: TraceId) -> Result<Vec<Seq>> {
        self.inner.append_traced(batch, Some(&Cause { parent, trace }))
    }

    /// Canal's `create_topic`: a log plus an entry in the subscription log.
    pub fn create_topic(&self, topic: &str) -> Result<()> {
        self.inner.create_topic(topic)
    }

    /// Subscribe a registered handler to a topic or log (from the next append on).
    pub fn subscribe(&self, topic: &str, handler: &str) -> Result<()> {
        self.inner.subscribe(topic, handler)
    }

    /// Stop firing `handler` for appends to `topic` (from the next append on).
    pub fn unsubscribe(&self, topic: &str, handler: &str) -> Result<()> {
        self.inner.unsubscribe(topic, handler)
    }

    /// Canal's `publish`: append `data` to the topic; returns its index (seq).
    pub fn publish(&self, topic: &str, data: &[u8]) -> Result<Seq> {
        self.append(topic, data)
    }

    /// Canal's `latest_index`.
    pub fn latest_index(&self, topic: &str) -> Result<Seq> {
        Ok(self.inner.ns.latest(topic)?)
    }

    /// Canal's `get`.
    pub fn get(&self, topic: &str, index: Seq) -> Result<Bytes> {
        Ok(self.inner.ns.get(topic, index)?)
    }

    /// Handlers subscribed to each log now.
    #[must_use]
    pub fn subscriptions(&self) -> BTreeMap<String, BTreeSet<String>> {
        self.inner.lock_writer().subscriptions.subscriptions.clone()
    }

    /// Topics created so far.
    #[must_use]
    pub fn topics(&self) -> BTreeSet<String> {
        self.inner.lock_writer().subscriptions.topics.clone()
    }

    /// Wait until nothing is ready, running or waiting for a retry (triggers
    /// for handlers this runtime does not have are not waited for). `false`
    /// on timeout.
    #[must_use]
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        self.inner.wait_idle(timeout)
    }

    /// Every event of `_events` so far.
    pub fn events(&self) -> Result<Vec<StoredEvent>> {
        read_events(self.inner.ns.as_ref(), self.inner.options.host, SeqRange::ALL)
    }

    /// Stop: no new claims; wait up to `grace` for running handlers; write
    /// the progress mark. Handlers still running after `grace` are abandoned:
    /// their threads end when the handler returns, and everything they try to
    /// write after the stop is refused ([`RuntimeError::Stopped`]), so their
    /// triggers stay unfinished and are re-run by the next start — like a crash.
    pub fn stop(mut self, grace: Duration) {
        self.stop_mut(grace);
    }

    fn stop_mut(&mut self, grace: Duration) {
        if self.stop_done {
            return;
        }
        self.stop_done = true;
        {
            let _work = self.inner.lock_work();
            self.inner.stopped.store(true, Ordering::SeqCst);
        }
        self.inner.work_cv.notify_all();
        let deadline = Instant::now() + grace;
        {
            let mut work = self.inner.lock_work();
            while work.running > 0 {
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                work = self.inner.idle_cv.wait_timeout(work, deadline - now).unwrap_or_else(PoisonError::into_inner).0;
            }
        }
        let all_returned = self.inner.lock_work().running == 0;
        for thread in self.threads.drain(..) {
            if all_returned || thread.is_finished() {
                let _ = thread.join();
            }
        }
        if let Some(socket) = self.socket.take() {
            socket.stop();
        }
        // The mark is written under the writer lock, which stopped appends also take.
        let _ = self.inner.write_progress(true);
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.stop_mut(Duration::from_secs(5));
    }
}

impl RuntimeHandle {
    /// See [`Runtime::append`].
    pub fn append(&self, log: &str, value: &[u8]) -> Result<Seq> {
        Ok(self.inner.append_traced(&[(log, value)], None)?[0])
    }

    /// See [`Runtime::append_batch`].
    pub fn append_batch(&self, batch: &[(&str, &[u8])]) -> Result<Vec<Seq>> {
        self.inner.append_traced(batch, None)
    }

    /// See [`Runtime::publish`].
    pub fn publish(&self, topic: &str, data: &[u8]) -> Result<Seq> {
        self.append(topic, data)
    }

    /// See [`Runtime::append_caused`]: how a handler in one namespace appends
    /// to another with its FIRING as the cause.
    pub fn append_caused(&self, batch: &[(&str, &[u8])], parent: EventId, trace: TraceId) -> Result<Vec<Seq>> {
        self.inner.append_traced(batch, Some(&Cause { parent, trace }))
    }

    /// See [`Runtime::wait_idle`].
    #[must_use]
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        self.inner.wait_idle(timeout)
    }
}
