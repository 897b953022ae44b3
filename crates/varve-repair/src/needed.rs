//! The events a repair needs, instead of every event kept.
//!
//! **A corrected record** is found by the event index (`EventIndex`,
//! docs/runtime.md): everything that depends on it comes after its APPEND
//! in causal order, so its namespace's events are read from there on —
//! and from a little earlier: a run that was going when the record landed
//! and read it afterwards is replayed whole, so the plan needs that run's
//! FIRING and its appends before the read (they count as kept). The events
//! start at the earliest event before the APPEND that an APPEND, READ,
//! LATEST or outcome after it names as its parent: the FIRING of such a
//! run. (A FIRING's TRIGGER, a TRIGGER's APPEND and the record a REPAIR
//! corrected are parents the plan never looks up.) Events between that
//! point and the APPEND whose runs began earlier cannot depend on the
//! record (it did not exist yet), and the plan passes over a run whose
//! FIRING it has not seen.
//!
//! **Read whole instead:**
//! - the other namespaces: a namespace is reached from another only by a
//!   parent link, which names no position in the namespace reached;
//! - the record's own namespace too when a parent link crosses between it
//!   and another namespace after the record's APPEND (an event there whose
//!   parent is here, at or after the APPEND, or an event here whose parent
//!   is there): a run of the other namespace may then depend on the record
//!   and have appended here before it landed — appends the plan counts as
//!   "may change", which only a read from the start finds;
//! - every namespace when the corrections span several namespaces, or
//!   replace a handler from the start or from a time (its runs can be
//!   anywhere). A handler replaced from a seq on is read from that seq's
//!   APPEND in each log it was subscribed to (its runs there come after),
//!   when one namespace's subscriptions name it;
//! - the namespace of a record without an APPEND event in the index
//!   (appended without the runtime) or beyond event retention (the plan
//!   then reports what it reports from every event), of events written
//!   before the index existed, and of a log that got records without the
//!   runtime after its last APPEND before the events read
//!   (`appended_unrecorded`: the walk would take them as there all along).
//!
//! The saving is therefore a single namespace's, or an application's whose
//! namespaces exchanged nothing since the record landed.
//!
//! The plan built from these events is the plan built from every event
//! (`tests/plan.rs` builds both on random applications and compares them,
//! `tests/needed.rs` on the runs going and the crossings above); it costs
//! the events after the record, not the history before it.
//!
//! **Not for a repair while the application runs** (`crate::online`): a run
//! going when the record landed may not have written the event that names
//! its FIRING yet, so no starting point read from the events is safe there;
//! an online repair reads every event kept.

use std::collections::HashMap;
use std::sync::Arc;

use varve_log::{LogError, Namespace, Seq, SeqRange};
use varve_runtime::append_index::{appends_log, EventIndex};
use varve_runtime::subscriptions::{decode_subscription, SubscriptionRecord};
use varve_runtime::trace::merge_owned;
use varve_runtime::{namespace_events, EventId, EventKind, RuntimeError, StoredEvent, SUBSCRIPTIONS_LOG};

use crate::execute::RepairError;
use crate::plan::{Correction, Since};

/// Logs whose last APPEND before the events is looked up (about a binary
/// search and a scan of up to 128 events each); a namespace with more logs
/// the runtime appended to is read whole.
const LOGS_CHECKED_MAX: usize = 1_000;

/// The events of `namespaces` a repair of `corrections` needs, merged in
/// causal order (see the module docs): what [`crate::RepairPlan::build`],
/// [`crate::execute`] and [`crate::check_reach`] take. Namespaces that no
/// runtime has served (no `_events`) give none.
pub fn events_needed(
    corrections: &[Correction],
    namespaces: &[Arc<dyn Namespace>],
) -> Result<Vec<StoredEvent>, RepairError> {
    let cut = cut(corrections, namespaces)?;
    let mut per_namespace = Vec::with_capacity(namespaces.len());
    for (i, ns) in namespaces.iter().enumerate() {
        if cut.as_ref().is_none_or(|cut| cut.at != i) {
            per_namespace.push(all(ns)?);
        }
    }
    if let Some(Cut { at, append, index }) = cut {
        let ns = &namespaces[at];
        let mut events = from(ns, append)?;
        if crosses(ns.name(), append, &events, &per_namespace) || appended_unrecorded(ns, &index, &events)? {
            events = all(ns)?;
        }
        per_namespace.push(events);
    }
    Ok(merge_owned(per_namespace))
}

/// Where the one namespace read in part begins.
struct Cut {
    /// Its index in `namespaces`.
    at: usize,
    /// The event seq of the earliest APPEND the corrections start from.
    append: Seq,
    /// Its event index.
    index: EventIndex,
}

/// The one namespace whose events may be read from the APPEND of a record
/// on, and the earliest such APPEND: a corrected record's, or for a handler
/// replaced from a seq on, that seq's record of each log the handler was
/// subscribed to (its runs on them come after). `None`: read every
/// namespace whole.
fn cut(corrections: &[Correction], namespaces: &[Arc<dyn Namespace>]) -> Result<Option<Cut>, RepairError> {
    let mut at: Option<usize> = None;
    // (log, seq, whether a missing record just means no runs there)
    let mut records: Vec<(String, Seq, bool)> = Vec::new();
    for correction in corrections {
        let (here, more) = match correction {
            Correction::Record(record) => {
                let Some(i) = namespaces.iter().position(|ns| ns.name() == record.namespace) else { return Ok(None) };
                (i, vec![(record.log.clone(), record.seq, false)])
            }
            Correction::Handler { handler, since: Since::Seq(seq) } => {
                let Some((i, logs)) = subscribed(handler, namespaces)? else { return Ok(None) };
                (i, logs.into_iter().map(|log| (log, *seq, true)).collect())
            }
            Correction::Handler { .. } => return Ok(None),
        };
        if at.is_some_and(|at| at != here) {
            return Ok(None);
        }
        at = Some(here);
        records.extend(more);
    }
    let Some(at) = at else { return Ok(None) };
    let ns = &namespaces[at];
    let Some(index) = EventIndex::open(Arc::clone(ns))? else { return Ok(None) };
    if !index.indexes_every_event() {
        return Ok(None); // APPENDs written before the index existed are found only by reading them
    }
    let mut first = Seq::MAX;
    for (log, seq, may_be_missing) in records {
        if may_be_missing && ns.log_info(&log).map_or(true, |info| info.latest < seq) {
            continue; // no record there yet: no run of the handler to replay on it
        }
        match index.append_of(&log, seq) {
            Ok(Some(append)) => first = first.min(append.id.seq),
            Ok(None) | Err(RuntimeError::Log(LogError::Trimmed { .. })) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
    }
    Ok((first < Seq::MAX).then_some(Cut { at, append: first, index }))
}

/// The one namespace of `namespaces` whose subscriptions ever named
/// `handler`, and the logs it was subscribed to there; `None` when none or
/// several did (a handler is known by name only).
fn subscribed(handler: &str, namespaces: &[Arc<dyn Namespace>]) -> Result<Option<(usize, Vec<String>)>, RepairError> {
    let mut found = None;
    for (i, ns) in namespaces.iter().enumerate() {
        let records = match ns.scan(SUBSCRIPTIONS_LOG, SeqRange::ALL) {
            Ok(records) => records,
            Err(LogError::LogNotFound { .. }) => continue,
            Err(e) => return Err(e.into()),
        };
        let mut logs: Vec<String> = Vec::new();
        for record in records {
            let record = record?;
            if let SubscriptionRecord::Subscribe { log, handler: h } = decode_subscription(&record.value, record.seq)? {
                if h == handler && !logs.contains(&log) {
                    logs.push(log);
                }
            }
        }
        if logs.is_empty() {
            continue;
        }
        if found.is_some() {
            return Ok(None);
        }
        found = Some((i, logs));
    }
    Ok(found)
}

/// Whether a parent link crosses between namespace `name` and another at or
/// after its event `append`: an event of `here` (its events from about
/// `append` on) whose parent is elsewhere, or an event of `elsewhere` (the
/// other namespaces, whole) whose parent is here.
fn crosses(name: &str, append: Seq, here: &[StoredEvent], elsewhere: &[Vec<StoredEvent>]) -> bool {
    let Some(host) = here.first().map(|e| e.id.host) else { return false };
    let is_here = |id: &EventId| id.host == host && id.namespace == name;
    here.iter().filter(|e| e.id.seq >= append).any(|e| e.event.parent.as_ref().is_some_and(|p| !is_here(p)))
        || elsewhere.iter().flatten().any(|e| e.event.parent.as_ref().is_some_and(|p| is_here(p) && p.seq >= append))
}

/// Whether a log of `ns` got records without the runtime (without APPEND
/// events) between its last APPEND before `events` and its first among
/// them (or its end). The walk takes the records of a log before its first
/// APPEND among the events it is given as there from the start (a log the
/// runtime never appended to holds such records only): true of every
/// event, not of a suffix, where such records came later. Logs the runtime
/// never appended to (no index entries) are taken the same way both ways.
fn appended_unrecorded(
    ns: &Arc<dyn Namespace>,
    index: &EventIndex,
    events: &[StoredEvent],
) -> Result<bool, RepairError> {
    let Some(start) = events.first().map(|e| e.id.seq) else { return Ok(false) };
    let mut first_append: HashMap<&str, Seq> = HashMap::new();
    for e in events {
        if e.event.kind == EventKind::Append && e.id.namespace == ns.name() {
            first_append.entry(e.event.log.as_str()).or_insert(e.event.seq);
        }
    }
    let mut checked = 0;
    for info in ns.list_logs()? {
        if info.config.system {
            continue;
        }
        let Some(entries) = appends_log(&info.name) else { return Ok(true) }; // found only by reading every event
        match ns.log_info(&entries) {
            Ok(_) => {}
            Err(LogError::LogNotFound { .. }) => continue, // never appended through the runtime
            Err(e) => return Err(e.into()),
        }
        checked += 1;
        if checked > LOGS_CHECKED_MAX {
            return Ok(true);
        }
        let before = first_append.get(info.name.as_str()).map_or(info.latest, |&seq| seq - 1);
        if before == 0 {
            continue;
        }
        match index.append_of(&info.name, before) {
            Ok(Some(append)) if append.id.seq < start => {}
            Ok(_) | Err(RuntimeError::Log(LogError::Trimmed { .. })) => return Ok(true),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(false)
}

/// The events of `ns` from `first` on, and before it those of the runs
/// still going at `first` (from the earliest of their FIRINGs).
fn from(ns: &Arc<dyn Namespace>, first: Seq) -> Result<Vec<StoredEvent>, RepairError> {
    let after = namespace_events(ns.as_ref(), SeqRange { first, last: Seq::MAX })?;
    let Some(host) = after.first().map(|e| e.id.host) else { return Ok(after) };
    let begun_before = after
        .iter()
        // The kinds a run's FIRING causes (a FIRING's TRIGGER, a TRIGGER's
        // APPEND and a REPAIR's corrected record are not looked up).
        .filter(|e| {
            matches!(
                e.event.kind,
                EventKind::Append
                    | EventKind::Read
                    | EventKind::Latest
                    | EventKind::Done
                    | EventKind::Failed
                    | EventKind::DeadLetter
            )
        })
        .filter_map(|e| e.event.parent.as_ref())
        .filter(|p| p.host == host && p.namespace == ns.name() && p.seq < first)
        .map(|p| p.seq)
        .min();
    let Some(earliest) = begun_before else { return Ok(after) };
    let mut events = namespace_events(ns.as_ref(), SeqRange { first: earliest, last: first - 1 })?;
    events.extend(after);
    Ok(events)
}

fn all(ns: &Arc<dyn Namespace>) -> Result<Vec<StoredEvent>, RepairError> {
    match namespace_events(ns.as_ref(), SeqRange::ALL) {
        Ok(events) => Ok(events),
        Err(RuntimeError::Log(LogError::LogNotFound { .. })) => Ok(Vec::new()),
        Err(e) => Err(e.into()),
    }
}
