//! The state one running runtime shares among its facade, workers, socket
//! and handler contexts, and the two locks that order everything:
//! `writer` serialises every write the runtime makes (so a trigger batch
//! can predict its seqs, see `trigger.rs`), `work` guards the queues
//! (`worker.rs`). Lock order: `writer`, then `work`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use varve_log::{LogConfig, Namespace, Seq};

use crate::builder::RuntimeOptions;
use crate::error::{Result, RuntimeError};
use crate::event::{Event, EventId, TraceId};
use crate::handler::HandlerSpec;
use crate::requests::RequestMemory;
use crate::shared::SharedFold;
use crate::subscriptions::SubscriptionState;
use crate::system_logs::{is_client_writable, is_runtime_log, EVENTS_LOG};
use crate::worker::WorkState;

/// The cause of an append: the event it descends from, and its trace.
#[derive(Clone, Debug)]
pub(crate) struct Cause {
    pub parent: EventId,
    pub trace: TraceId,
}

/// What the writer lock guards besides the right to write.
#[derive(Default)]
pub(crate) struct WriterState {
    pub subscriptions: SubscriptionState,
    /// Request ids of recent appends (`requests.rs`).
    pub requests: RequestMemory,
    /// What this runtime folded of `_events`, when it shares the namespace (`shared.rs`).
    pub fold: Option<SharedFold>,
    /// The last index entry written per log (`append_index.rs`).
    pub index: crate::append_index::IndexWriter,
}

pub(crate) struct Inner {
    pub(crate) ns: Arc<dyn Namespace>,
    pub(crate) namespace: String,
    pub(crate) options: RuntimeOptions,
    pub(crate) handlers: HashMap<String, Arc<HandlerSpec>>,
    /// Serialises every write the runtime makes, so the seqs of a trigger
    /// batch can be predicted (lock order: `writer`, then `work`).
    pub(crate) writer: Mutex<WriterState>,
    pub(crate) work: Mutex<WorkState>,
    pub(crate) work_cv: Condvar,
    pub(crate) idle_cv: Condvar,
    /// Signalled when runs finish (or the runtime stops): appends waiting
    /// for room in the backlog look again (`worker.rs`).
    pub(crate) room_cv: Condvar,
    /// No new claims (a stop began; running handlers may still write).
    pub(crate) stopping: AtomicBool,
    /// Every write is refused (the stop's grace is over).
    pub(crate) stopped: AtomicBool,
    /// No new claims until a `Paused` guard drops (`pause.rs`).
    pub(crate) paused: AtomicBool,
    /// Operations the hosting program added to the socket, by name.
    pub(crate) socket_ops: Mutex<HashMap<String, crate::socket::SocketOp>>,
    /// External commands still running kill their process groups.
    pub(crate) kill_commands: AtomicBool,
    pub(crate) finished_total: AtomicU64,
    /// Event retention's counts and last error (`retention.rs`).
    pub(crate) retention: Mutex<crate::retention::RetentionState>,
    /// Held while a thread trims `_events` (others skip their check).
    pub(crate) trimming: Mutex<()>,
    /// The sorted maps handlers build, by op log (`sorted_map.rs`).
    pub(crate) maps: crate::sorted_map::Maps,
}

impl Inner {
    pub(crate) fn lock_writer(&self) -> MutexGuard<'_, WriterState> {
        self.writer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn lock_work(&self) -> MutexGuard<'_, WorkState> {
        self.work.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn event_id(&self, seq: Seq) -> EventId {
        EventId { host: self.options.host, namespace: self.namespace.clone(), seq }
    }

    pub(crate) fn check_running(&self) -> Result<()> {
        if self.stopped.load(Ordering::SeqCst) {
            return Err(RuntimeError::Stopped);
        }
        Ok(())
    }

    /// Append events (not data) under the writer lock; returns their seqs.
    pub(crate) fn append_events(&self, events: &[Event]) -> Result<Vec<Seq>> {
        let encoded: Vec<Vec<u8>> = events.iter().map(Event::encode).collect();
        let batch: Vec<(&str, &[u8])> = encoded.iter().map(|e| (EVENTS_LOG, e.as_slice())).collect();
        let _writer = self.lock_writer();
        self.check_running()?;
        Ok(self.ns.append_batch(&batch)?)
    }

    /// Create a log through the runtime (it is the namespace's only writer);
    /// `true` if it is new. Idempotent for the same configuration.
    pub(crate) fn create_log(&self, name: &str, config: LogConfig) -> Result<bool> {
        refuse_writing_system_logs(name, "create")?;
        let _writer = self.lock_writer();
        self.check_running()?;
        let existed = self.ns.log_info(name).is_ok();
        if !existed {
            // A map index left by an earlier log of this name (deleted
            // without the runtime) would describe another history.
            crate::sorted_map::forget_map(self.ns.as_ref(), name)?;
        }
        self.ns.create_log(name, config)?;
        Ok(!existed)
    }

    /// Delete a log through the runtime. Handlers stay subscribed to the
    /// name: a log created again under it fires them again.
    pub(crate) fn delete_log(&self, name: &str) -> Result<()> {
        refuse_writing_system_logs(name, "delete")?;
        let mut writer = self.lock_writer();
        self.check_running()?;
        // The index first: a crash between leaves a log without an index
        // (found by scan), never an index describing a log that is gone.
        writer.index.forget(name);
        crate::append_index::delete_index(self.ns.as_ref(), name)?;
        // A sorted map's index too: it must not describe a later log of this name.
        crate::sorted_map::forget_map(self.ns.as_ref(), name)?;
        Ok(self.ns.delete_log(name)?)
    }

    /// Rename logs through the runtime, all at once (`Namespace::rename_logs`).
    /// The runtime's own logs keep their names: a call that renames one, or
    /// renames a log onto one, is refused. Handlers stay subscribed to the
    /// names: a handler of `a` fires for appends to whichever log is named
    /// `a` when they land.
    pub(crate) fn rename_logs(&self, renames: &[(&str, &str)]) -> Result<()> {
        refuse_renaming_runtime_logs(renames)?;
        let mut writer = self.lock_writer();
        self.check_running()?;
        for (from, to) in renames {
            // The next entry of either name checks its index afresh (`append_index.rs`).
            writer.index.forget(from);
            writer.index.forget(to);
        }
        // A sorted map's index moves with its op log (`sorted_map.rs`).
        let renames = crate::sorted_map::with_map_indexes(self.ns.as_ref(), renames)?;
        let renames: Vec<(&str, &str)> = renames.iter().map(|(f, t)| (f.as_str(), t.as_str())).collect();
        Ok(self.ns.rename_logs(&renames)?)
    }

    /// Trim one of the application's logs (the runtime's own are refused).
    /// Under the writer's lock, like every write through the runtime.
    pub(crate) fn trim(&self, log: &str, before: Seq) -> Result<Seq> {
        refuse_trimming_runtime_logs(log)?;
        let _writer = self.lock_writer();
        self.check_running()?;
        Ok(self.ns.trim(log, before)?)
    }

    /// Record a READ or LATEST event unless reads are not recorded.
    pub(crate) fn record_read(&self, event: Event) -> Result<()> {
        if self.options.record_reads {
            self.append_events(&[event])?;
        }
        Ok(())
    }
}

/// Refuse a trim of one of the runtime's own logs (see
/// `system_logs::is_runtime_log`): `_events` is trimmed by the runtime's
/// retention, which knows what its recovery and repairs still need.
pub(crate) fn refuse_trimming_runtime_logs(log: &str) -> Result<()> {
    if is_runtime_log(log) {
        return Err(RuntimeError::InvalidArgument {
            reason: format!(
                "{log} is the runtime's own log: it is not trimmed by hand; set the runtime's event retention \
                 (manifest `events_keep` or `events_keep_for`) and the runtime trims its event log itself"
            ),
        });
    }
    Ok(())
}

/// Refuse to create or delete (`what`) a system log clients do not write
/// (see `system_logs::is_client_writable`: of Varve's `_` logs, only the
/// schema registry's goes through the runtime).
pub(crate) fn refuse_writing_system_logs(name: &str, what: &str) -> Result<()> {
    varve_log::validate_name(name, true)?;
    if !is_client_writable(name) {
        return Err(RuntimeError::InvalidArgument {
            reason: format!(
                "{name} is a system log (names beginning with `_` are Varve's own): only the part of Varve that keeps it may {what} it"
            ),
        });
    }
    Ok(())
}

/// Refuse a rename that touches one of the runtime's own logs (see
/// `system_logs::is_runtime_log`): they keep their names.
pub(crate) fn refuse_renaming_runtime_logs(renames: &[(&str, &str)]) -> Result<()> {
    let touched = renames.iter().flat_map(|(from, to)| [*from, *to]).find(|name| is_runtime_log(name));
    match touched {
        Some(name) => Err(RuntimeError::InvalidArgument {
            reason: format!(
                "log {name:?} is one of the runtime's own logs, which keep their names: rename only other logs"
            ),
        }),
        None => Ok(()),
    }
}
