//! The runtime's system logs in a namespace — their names, what each record
//! holds — and the readers any process may use on them (read-only handles
//! work): the namespace's host id and its decoded events.

use serde::{Deserialize, Serialize};
use varve_log::codec::ByteReader;
use varve_log::{LogError, Namespace, Seq, SeqRange};

use crate::error::{Result, RuntimeError};
use crate::event::{Event, EventId, HostId, StoredEvent};

/// The causal event log of a namespace (a system log).
pub const EVENTS_LOG: &str = "_events";
/// Subscribe/unsubscribe/topic records, replayed on start (JSON, one per record).
pub const SUBSCRIPTIONS_LOG: &str = "_runtime.subscriptions";
/// The low-water mark: the `_events` seq from which start-up looks for unfinished triggers (u64 LE).
pub const PROGRESS_LOG: &str = "_runtime.progress";
/// The host id that labels this namespace's events (u64 LE, written once).
/// Event ids are implicit, so readers take the host from here.
pub const HOST_LOG: &str = "_runtime.host";
/// Records that kept failing: JSON `{handler, log, seq, trigger, attempts, reason, trace}`.
pub const DEAD_LETTERS_LOG: &str = "_dead_letters";

/// Whether `name` is one of the logs the runtime itself keeps (`_events`,
/// `_dead_letters`, `_runtime.*`), which only the runtime writes and which
/// must keep their names.
#[must_use]
pub fn is_runtime_log(name: &str) -> bool {
    name == EVENTS_LOG || name == DEAD_LETTERS_LOG || name.starts_with("_runtime.")
}

/// The one log of Varve's own (a name beginning with `_`) that clients
/// write through a runtime: the schema registry's (`varve_schema::SCHEMA_LOG`),
/// registered from any process. Varve's other `_` logs are written only by
/// the part that keeps them, in the process that holds the namespace: the
/// runtime its own ([`is_runtime_log`]), a repair its shadows, generations
/// and `_repairs` (a client's record in a shadow would become part of the
/// repaired log), `fsck` its `_losses`.
pub const CLIENT_SYSTEM_LOGS: [&str; 1] = ["_schema"];

/// Whether clients may create, append to or delete `name` through a
/// runtime: any name not beginning with `_`, and [`CLIENT_SYSTEM_LOGS`].
#[must_use]
pub fn is_client_writable(name: &str) -> bool {
    !name.starts_with('_') || CLIENT_SYSTEM_LOGS.contains(&name)
}

/// Progress marks kept (the newest is the one read; older ones are history).
pub(crate) const PROGRESS_MARKS_KEPT: u64 = 16;

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
/// One record of `_dead_letters`.
pub struct DeadLetter {
    /// The handler that kept failing.
    pub handler: String,
    /// The log of the record it failed on.
    pub log: String,
    /// The seq of that record in `log`.
    pub seq: Seq,
    /// The TRIGGER's seq in `_events`.
    pub trigger: Seq,
    /// FAILED runs counted against the retry budget (runs cut short by a stop or crash are not).
    pub attempts: u32,
    /// The reason of the last FAILED.
    pub reason: String,
    /// The trigger's trace id, 32 lower-case hex digits.
    pub trace: String,
}

/// The host id a runtime labelled this namespace's events with (`None`
/// before a runtime first started on it).
pub fn namespace_host(ns: &dyn Namespace) -> Result<Option<HostId>> {
    let latest = match ns.latest(HOST_LOG) {
        Ok(latest) => latest,
        Err(LogError::LogNotFound { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    if latest == 0 {
        return Ok(None);
    }
    Ok(Some(u64_record(&ns.get(HOST_LOG, latest)?, HOST_LOG, latest)?))
}

/// A record of `log` at `seq` that holds one `u64` and nothing else.
fn u64_record(bytes: &[u8], log: &str, seq: Seq) -> Result<u64> {
    let mut reader = ByteReader::new(bytes);
    let value = reader.u64().and_then(|value| reader.finish().map(|()| value));
    value.map_err(|_| RuntimeError::InvalidArgument { reason: format!("{log} seq {seq} is not 8 bytes") })
}

/// Every event kept of a namespace's `_events` in `range`, labelled with
/// the namespace's host ([`namespace_host`]; 0 if none): a range that
/// starts below the earliest event kept (event retention trimmed the
/// oldest) starts there. Read-only handles work.
pub fn namespace_events(ns: &dyn Namespace, range: SeqRange) -> Result<Vec<StoredEvent>> {
    let host = namespace_host(ns)?.unwrap_or(0);
    let first = range.first.max(ns.earliest(EVENTS_LOG)?);
    if first > range.last {
        return Ok(Vec::new());
    }
    read_events(ns, host, SeqRange { first, ..range })
}

/// Read and decode `_events` in `range` from any namespace handle
/// (read-only is fine). A range starting below the earliest event kept is
/// `Trimmed` (for a reader that must not miss events: an online repair).
pub fn read_events(ns: &dyn Namespace, host: HostId, range: SeqRange) -> Result<Vec<StoredEvent>> {
    let mut out = Vec::new();
    for record in ns.scan(EVENTS_LOG, range)? {
        let record = record?;
        let event = Event::decode(&record.value, record.seq)?;
        out.push(StoredEvent { id: EventId { host, namespace: ns.name().to_owned(), seq: record.seq }, event });
    }
    Ok(out)
}

/// The newest progress mark (1 if none was written yet).
pub(crate) fn read_progress(ns: &dyn Namespace) -> Result<Seq> {
    match ns.latest(PROGRESS_LOG)? {
        0 => Ok(1),
        seq => Ok(u64_record(&ns.get(PROGRESS_LOG, seq)?, PROGRESS_LOG, seq)?.max(1)),
    }
}
