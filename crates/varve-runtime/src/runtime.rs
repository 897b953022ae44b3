//! The running runtime's facade: [`Runtime`] (appends, topics,
//! subscriptions, reads, `wait_idle`, `stop`) and the cloneable
//! [`RuntimeHandle`] for other threads. The work is done in `trigger.rs`,
//! `subscriptions.rs`, `worker.rs` and `stop.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use varve_log::{LogConfig, Namespace, Seq, SeqRange};

use crate::error::Result;
use crate::event::{EventId, HostId, StoredEvent, TraceId};
use crate::inner::{Cause, Inner};
use crate::requests::{Appended, RequestId};
use crate::system_logs::read_events;

/// A running runtime over one namespace. Dropping it stops it (see [`Runtime::stop`]).
pub struct Runtime {
    pub(crate) inner: Arc<Inner>,
    pub(crate) threads: Vec<JoinHandle<()>>,
    pub(crate) socket: Option<crate::socket::SocketServer>,
    /// `stop` ran (so `Drop` does not wait a second time).
    pub(crate) stop_done: bool,
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

    /// Append once per request id: a repeat of an id this namespace
    /// remembers ([`crate::requests`]) appends nothing and returns the first
    /// append's seqs (`repeated`). With `cause`, like [`Runtime::append_caused`].
    pub fn append_once(
        &self,
        request: &RequestId,
        batch: &[(&str, &[u8])],
        cause: Option<(EventId, TraceId)>,
    ) -> Result<Appended> {
        self.inner.append_once(Some(request), batch, cause, &[])
    }

    /// `append_if` through the runtime: append `value` to `log` (firing its
    /// handlers) only if the log's latest seq is `expected_latest`, else
    /// `Conflict { actual }`. With `request`, once per id (a repeat answers
    /// the first append's seq, before the check); with `cause`, like
    /// [`Runtime::append_caused`].
    pub fn append_if_once(
        &self,
        request: Option<&RequestId>,
        log: &str,
        expected_latest: Seq,
        value: &[u8],
        cause: Option<(EventId, TraceId)>,
    ) -> Result<Appended> {
        self.inner.append_once(request, &[(log, value)], cause, &[(log, expected_latest)])
    }

    /// `append_batch_if` through the runtime: append `batch` (firing the
    /// handlers of its logs) only if each log of `expected` — all of them
    /// logs the batch writes — ends at its seq, else `Conflict` naming the
    /// first that does not. With `request`, once per id (a repeat answers
    /// the first append's seqs, before the check); with `cause`, like
    /// [`Runtime::append_caused`].
    pub fn append_batch_if_once(
        &self,
        request: Option<&RequestId>,
        batch: &[(&str, &[u8])],
        expected: &[(&str, Seq)],
        cause: Option<(EventId, TraceId)>,
    ) -> Result<Appended> {
        self.inner.append_once(request, batch, cause, expected)
    }

    /// Add an operation to the runtime's socket: a request `{"op":"call",
    /// "name":NAME,"args":…}` runs `op` on the connection's thread and
    /// answers with what it returns (`varve run` adds `repair`). A later
    /// call with the same name replaces it.
    pub fn add_socket_op(&self, name: &str, op: crate::socket::SocketOp) {
        self.inner.socket_ops.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(name.to_owned(), op);
    }

    /// Create a log (idempotent for the same configuration); `true` if it is new.
    /// Through the runtime, because it is the namespace's only writer.
    pub fn create_log(&self, name: &str, config: LogConfig) -> Result<bool> {
        self.inner.create_log(name, config)
    }

    /// Delete a log and its records (not a system log: see [`crate::is_client_writable`]).
    pub fn delete_log(&self, name: &str) -> Result<()> {
        self.inner.delete_log(name)
    }

    /// Read the sorted map handlers build on the op log `log`
    /// ([`HandlerContext::sorted_map`](crate::HandlerContext::sorted_map)),
    /// its current generation, at any version.
    pub fn sorted_map(&self, log: &str) -> Result<crate::MapReader> {
        self.inner.sorted_map_reader(log)
    }

    /// Read the sorted map as it was built from the old history a repair
    /// kept of `log` (`_gen.LOG.N`, generation N from 1).
    pub fn sorted_map_generation(&self, log: &str, generation: u64) -> Result<crate::MapReader> {
        self.inner.sorted_map_generation(log, generation)
    }

    /// Rename logs, all at once (`Namespace::rename_logs`), through the
    /// runtime; the runtime's own logs (`_events`, `_runtime.*`,
    /// `_dead_letters`) keep their names. Subscriptions stay on the names.
    pub fn rename_logs(&self, renames: &[(&str, &str)]) -> Result<()> {
        self.inner.rename_logs(renames)
    }

    /// Trim a log's records below `before` (`Namespace::trim`), through the
    /// runtime; the runtime's own logs are refused (it trims `_events` by
    /// its retention). Returns the log's new earliest seq.
    pub fn trim(&self, log: &str, before: Seq) -> Result<Seq> {
        self.inner.trim(log, before)
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

    /// Triggers this runtime will run that have not finished (queued,
    /// waiting for a retry, or running): what [`crate::Backlog`] bounds.
    #[must_use]
    pub fn backlog(&self) -> usize {
        self.inner.lock_work().backlog()
    }

    /// Every event of `_events` kept (all of them, unless event retention
    /// trimmed the oldest: [`RuntimeOptions::events_keep`](crate::RuntimeOptions::events_keep)).
    pub fn events(&self) -> Result<Vec<StoredEvent>> {
        let first = self.inner.ns.earliest(crate::system_logs::EVENTS_LOG)?.max(1);
        read_events(self.inner.ns.as_ref(), self.inner.options.host, SeqRange { first, last: Seq::MAX })
    }

    /// What event retention has done: the events kept, the trims made, the
    /// last failure (a trim that fails is tried again at the next check).
    pub fn event_retention(&self) -> Result<crate::EventRetention> {
        self.inner.event_retention()
    }

    /// Stop (see [`Runtime::stop_report`]), without the report.
    pub fn stop(self, grace: Duration) {
        let _ = self.stop_report(grace);
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        let _ = self.stop_mut(DROP_GRACE);
    }
}

/// How long dropping a runtime that was not stopped waits for running handlers.
const DROP_GRACE: Duration = Duration::from_secs(5);

impl RuntimeHandle {
    /// See [`Runtime::sorted_map`].
    pub fn sorted_map(&self, log: &str) -> Result<crate::MapReader> {
        self.inner.sorted_map_reader(log)
    }

    /// See [`Runtime::sorted_map_generation`].
    pub fn sorted_map_generation(&self, log: &str, generation: u64) -> Result<crate::MapReader> {
        self.inner.sorted_map_generation(log, generation)
    }

    /// See [`Runtime::backlog`].
    #[must_use]
    pub fn backlog(&self) -> usize {
        self.inner.lock_work().backlog()
    }

    /// See [`Runtime::event_retention`].
    pub fn event_retention(&self) -> Result<crate::EventRetention> {
        self.inner.event_retention()
    }

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

    /// The namespace underneath (for reads; append through the handle).
    #[must_use]
    pub fn namespace(&self) -> &Arc<dyn Namespace> {
        &self.inner.ns
    }

    /// The host id events carry.
    #[must_use]
    pub fn host(&self) -> HostId {
        self.inner.options.host
    }

    pub(crate) fn inner(&self) -> &Inner {
        &self.inner
    }

    /// The namespace this runtime serves.
    #[must_use]
    pub fn namespace_name(&self) -> &str {
        &self.inner.namespace
    }

    /// See [`Runtime::append_once`].
    pub fn append_once(
        &self,
        request: &RequestId,
        batch: &[(&str, &[u8])],
        cause: Option<(EventId, TraceId)>,
    ) -> Result<Appended> {
        self.inner.append_once(Some(request), batch, cause, &[])
    }

    /// See [`Runtime::append_if_once`].
    pub fn append_if_once(
        &self,
        request: Option<&RequestId>,
        log: &str,
        expected_latest: Seq,
        value: &[u8],
        cause: Option<(EventId, TraceId)>,
    ) -> Result<Appended> {
        self.inner.append_once(request, &[(log, value)], cause, &[(log, expected_latest)])
    }

    /// See [`Runtime::append_batch_if_once`].
    pub fn append_batch_if_once(
        &self,
        request: Option<&RequestId>,
        batch: &[(&str, &[u8])],
        expected: &[(&str, Seq)],
        cause: Option<(EventId, TraceId)>,
    ) -> Result<Appended> {
        self.inner.append_once(request, batch, cause, expected)
    }

    /// See [`Runtime::wait_idle`].
    #[must_use]
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        self.inner.wait_idle(timeout)
    }
}
