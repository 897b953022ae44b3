//! # varve-runtime — handlers on append, topics, and a causal event log
//!
//! The event-driven runtime of CSPOT (§3.2–3.3 of `seeds/004_…`), with
//! Canal's topic API (§4.2.3), Lowgo's trace records (§6.2.1) and the event
//! kinds Sans-Souci needs for repair (§7.3.1–7.3.2), built on the Log
//! ([`varve_log::Namespace`]).
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use varve_log::{LogConfig, MemoryStore, Store};
//! use varve_runtime::{RetryPolicy, RuntimeBuilder};
//!
//! let store = MemoryStore::new();
//! let ns = store.namespace("app")?;
//! let runtime = RuntimeBuilder::new(ns)
//!     .log("celsius", LogConfig::unbounded())
//!     .log("fahrenheit", LogConfig::unbounded())
//!     .handler("convert", RetryPolicy::default(), |ctx| {
//!         let c: f64 = std::str::from_utf8(ctx.record())?.parse()?;
//!         ctx.append("fahrenheit", format!("{}", c * 9.0 / 5.0 + 32.0).as_bytes())?;
//!         Ok(())
//!     })
//!     .subscribe("celsius", "convert")
//!     .start()?;
//! runtime.append("celsius", b"100")?;
//! assert!(runtime.wait_idle(Duration::from_secs(10)));
//! assert_eq!(&runtime.get("fahrenheit", 1)?[..], b"212");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Design
//!
//! **Atomic trigger.** An append made through the runtime ([`Runtime::append`],
//! [`HandlerContext::append`], the socket) is *one* `append_batch` holding the
//! data records, an APPEND event per record and one TRIGGER event per handler
//! subscribed to that log at that moment, in `_events`. So every append fires
//! exactly the handlers subscribed when it landed, none lost and none
//! invented, across crashes too. To reference the data record from its
//! events before the batch is written, the runtime predicts the seqs: every
//! write it makes is serialised by one in-process mutex, and the seqs the
//! batch returns are checked ([`RuntimeError::SeqMismatch`] if another
//! writer got in). The runtime must therefore be the namespace's only
//! writer; other processes append, create and delete logs through its Unix
//! socket ([`socket`]) — unless it is **shared** ([`RuntimeOptions::shared`],
//! on NATS): then every such write is an `append_batch_if` that expects
//! `_events` to end where the runtime has folded it, and is planned again
//! when another runtime wrote first ([`shared`]).
//!
//! **Request ids.** An append may carry a [`RequestId`]; its record goes to
//! `_runtime.requests` in the same atomic batch as the data, and a repeat of
//! a remembered id appends nothing and returns the first append's seqs
//! ([`Runtime::append_once`], the socket's `request_id`). The runtime
//! rebuilds the bounded memory ([`requests::REQUESTS_REMEMBERED`] ids) from
//! that log on start, so a client that lost an answer to a crash can retry
//! safely; see [`requests`].
//!
//! **Delivery.** Workers (a pool of [`RuntimeOptions::concurrency`] threads,
//! CSPOT's throttle) take triggers from an in-memory queue that appends feed
//! directly and wake through a condvar — no polling. A claim is a FIRING
//! event (a worker claims up to [`CLAIM_BATCH_MAX`] triggers in one batch
//! when the queue is long); then DONE or FAILED. On start, the runtime scans
//! `_events` from the **progress mark** (`_runtime.progress`, the lowest
//! unfinished trigger, rewritten every 1024 finished triggers and on stop)
//! and re-queues every TRIGGER without DONE or `DEAD_LETTER`; one that had a
//! FIRING runs again with attempt + 1, so the re-run is visible. Delivery is
//! at least once.
//!
//! **Stopping** ([`Runtime::stop_report`]): no new claims; a grace period
//! in which running handlers finish and still write; then every write is
//! refused, external commands still running are killed with their process
//! groups, the socket is removed and the progress mark written. The runs cut
//! short keep a FIRING without outcome, so the next start re-runs exactly
//! those (attempt + 1); the [`StopReport`] names them.
//!
//! A worker claims several triggers only when the queue is longer than the
//! pool (all workers busy anyway); its batch runs in order, so one slow
//! handler delays at most its own batch-mates, never the other workers.
//! A store error while writing a claim or an outcome leaves the trigger
//! unfinished on disk: the next start re-runs it.
//!
//! **Retries.** FAILED (an `Err`, a panic caught with `catch_unwind`, a
//! non-zero exit, a signal, a timeout) is retried after an exponential,
//! capped backoff ([`RetryPolicy`]); retries wait in a timed queue, not in a
//! sleeping worker, so a poisoned record never stalls others. After
//! `attempts` failures the record reference and last reason go to
//! `_dead_letters` ([`DeadLetter`], JSON) with a `DEAD_LETTER` event. A run cut
//! short by a stop or crash is re-run but does not count as a failure.
//!
//! **Events** are compact binary records, documented in [`event`] and frozen
//! by `tests/fixtures/events_v1.bin`; their id `(host, namespace, seq in
//! _events)` is implicit. The host labelling a namespace's events is kept in
//! `_runtime.host` (readers use [`namespace_events`]); a namespace keeps one
//! host id ([`RuntimeError::HostChanged`] otherwise). The `varve` CLI takes
//! it from the manifest's `host_id`, else generates one per data directory
//! ([`host_id_for_dir`]). Each handler call through
//! [`HandlerContext`] records an event whose parent is the FIRING: `append`
//! → APPEND (+ TRIGGERs, same trace), `get`/`scan` → READ, `latest` → LATEST
//! with the seq returned. A Rust handler's READ/LATEST events are written in
//! the batch of its next write (its next append, else its DONE or FAILED),
//! in order and before that write's own events, not one batch per read.
//! [`RuntimeOptions::record_reads`] turns READ/LATEST
//! off (to measure recording overhead); APPEND, TRIGGER, FIRING, DONE and
//! FAILED are always written, because delivery depends on them. An append
//! from outside any handler starts a new random 128-bit trace.
//!
//! **External commands** ([`HandlerKind::Command`]) get the record on stdin
//! and `VARVE_DATA`, `VARVE_NAMESPACE`, `VARVE_LOG`, `VARVE_SEQ`,
//! `VARVE_EVENT_ID` (the FIRING), `VARVE_TRACE_ID` and `VARVE_RUNTIME_SOCKET`
//! in the environment; the `varve` CLI inside them appends with the FIRING
//! as cause, to their own namespace or another. Timeouts kill the process group.
//!
//! **Topics** (Canal) are logs listed in `_runtime.subscriptions`, which also
//! holds subscribe/unsubscribe records (JSON), replayed on start.
//! Subscribing writes that record and a SUBSCRIBE event in one batch under
//! the same mutex as appends, so "subscribed at that moment" is exact.
//!
//! **Limits:** [`CONCURRENCY_MAX`] workers, [`CLAIM_BATCH_MAX`] claims per
//! batch, [`ATTEMPTS_MAX`] attempts, [`SCAN_RECORDS_MAX`] records per
//! handler scan, [`event::REASON_BYTES_MAX`] bytes of FAILED reason,
//! [`socket::CONNECTIONS_MAX`] socket clients, [`requests::REQUESTS_REMEMBERED`]
//! request ids, [`KILLED_WAIT_MAX`] waited for killed commands at a stop.
//! Rust handlers cannot be interrupted safely, so their timeout is not
//! enforced (external commands' is) and a stop abandons them after the grace.
//! `_events` keeps every event unless [`RuntimeOptions::events_keep`] or
//! [`RuntimeOptions::events_keep_for`] bounds it (the rule: `retention.rs`).
//!
//! **Causal queries** ([`trace`]) are pure functions over events:
//! ancestors, descendants, traces, the O(n log n) deterministic causal merge
//! of several namespaces, DOT and OpenTelemetry JSON.
//!
//! **Measuring trigger latency** (for benchmarks): register a Rust handler
//! that takes `Instant::now()` first thing and compare with the instant just
//! before [`Runtime::append`]; use `SyncPolicy::Group` or `Never` so fsync is
//! not what you measure, and [`Runtime::wait_idle`] between rounds.

pub mod append_index;
mod builder;
pub mod causes;
pub mod command;
pub mod command_context;
mod context;
pub mod effects;
mod error;
pub mod event;
mod handler;
mod inner;
pub mod manifest;
mod pause;
pub mod pending;
mod recovery;
pub mod requests;
mod retention;
mod retry;
mod runtime;
pub mod shared;
pub mod socket;
mod sorted_map;
mod stop;
pub mod subscriptions;
mod system_logs;
pub mod trace;
mod trigger;
mod worker;
pub mod writer;

pub use builder::{Backlog, RuntimeBuilder, RuntimeOptions};
pub use context::{HandlerContext, Replay, SCAN_RECORDS_MAX};
pub use error::{Result, RuntimeError};
pub use event::{Event, EventId, EventKind, HostId, ReadDep, ReadView, StoredEvent, TraceId};
pub use handler::{HandlerFn, HandlerKind, HandlerResult, HandlerSpec};
pub use manifest::{Builtins, HandlerRun, Manifest, ManifestHandler};
pub use pause::Paused;
pub use requests::{Appended, RequestId};
pub use retention::EventRetention;
pub use retry::{AfterFailure, RetryPolicy, ATTEMPTS_MAX};
pub use runtime::{Runtime, RuntimeHandle};
pub use shared::SHARED_LEASE_DEFAULT;
pub use sorted_map::{with_map_indexes, HandlerMap, MapOp, MapReader, OP_LOG_NAME_BYTES_MAX};
pub use stop::{InterruptedRun, Interruption, StopReport, KILLED_WAIT_MAX};
pub use system_logs::{
    is_client_writable, is_runtime_log, namespace_events, namespace_host, read_events, DeadLetter, CLIENT_SYSTEM_LOGS,
    DEAD_LETTERS_LOG, EVENTS_LOG, HOST_LOG, PROGRESS_LOG, SUBSCRIPTIONS_LOG,
};
pub use worker::{CLAIM_BATCH_MAX, CONCURRENCY_MAX};
pub use writer::NamespaceWriter;

use std::path::Path;

/// File in a data directory that holds its host id (16 hex digits).
pub const HOST_ID_FILE: &str = "host_id";

/// The host id of a data directory: read from `DIR/host_id`, or generated
/// (random, non-zero) and stored there on first use.
pub fn host_id_for_dir(dir: &Path) -> Result<HostId> {
    let path = dir.join(HOST_ID_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => u64::from_str_radix(text.trim(), 16).map_err(|_| RuntimeError::InvalidArgument {
            reason: format!("{} does not hold 16 hex digits; delete it to generate a new host id", path.display()),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(|e| RuntimeError::io(format!("creating {}", dir.display()), e))?;
            let host = rand::random::<u64>().max(1);
            let tmp = dir.join(format!("{HOST_ID_FILE}.tmp"));
            std::fs::write(&tmp, format!("{host:016x}\n"))
                .and_then(|()| std::fs::rename(&tmp, &path))
                .map_err(|e| RuntimeError::io(format!("writing {}", path.display()), e))?;
            // Another process may have won the race; its id is the one on disk.
            host_id_for_dir(dir)
        }
        Err(e) => Err(RuntimeError::io(format!("reading {}", path.display()), e)),
    }
}
