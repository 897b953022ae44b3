//! Committing a repair, and finishing one that a crash interrupted.
//!
//! When the walk ends every shadow is complete. The commit makes the
//! shadows the store's state in three steps, each recorded in the
//! namespace's **repair journal**, the system log `_repairs` (one JSON
//! record per step):
//!
//! 1. an **INTENT** in every namespace the repair changes: the renames of
//!    that namespace, how long each original and each shadow was, and the
//!    REPAIR event to write. Synced in every namespace before the first
//!    rename when there are several (in one namespace the journal's order
//!    is enough: the rename's frame comes after the intent's);
//! 2. per namespace, one `rename_logs`: `LOG` → `_gen.LOG.N`, shadow → `LOG`;
//! 3. per namespace, one batch of the REPAIR event (in `_events`, if the
//!    namespace has one) and **DONE** (in `_repairs`).
//!
//! A crash (or an error) after step 1 leaves an intent without its DONE.
//! [`resume`] finishes it: it **rolls forward** — renames what is not
//! renamed yet, writes what is not written — where the shadows are as the
//! intent recorded and the originals have not grown since (a roll forward
//! then loses nothing). Where that does not hold (the application appended
//! to an original before the repair was resumed), and no namespace of the
//! repair was renamed yet, it **calls the repair off** everywhere: shadows
//! deleted, ABANDONED recorded, the old history as it was. Only a repair
//! spanning namespaces, interrupted between two renames and then appended
//! to before resuming, can end half done; [`Resumed::called_off`] says
//! where.
//!
//! Invariant: a namespace's repair journal holds, for each repair, one
//! INTENT followed by at most one DONE or ABANDONED; a repair is
//! **interrupted** in a namespace while its INTENT there has neither.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use varve_log::{LogConfig, LogError, Namespace, Seq, SeqRange};
use varve_runtime::trace::RecordRef;
use varve_runtime::{Event, EventKind, ReadDep, StoredEvent, EVENTS_LOG};

use crate::execute::{namespace_in, LogKey, RepairError, RepairOutcome, GENERATION_PREFIX};
use crate::plan::Correction;
use crate::walk::Shadow;

/// The repair journal of a namespace (see the module docs).
pub const REPAIRS_LOG: &str = "_repairs";

/// The version of the journal's records; a newer one is refused by name.
const FORMAT: u32 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Step {
    Intent,
    Done,
    Abandoned,
}

/// One record of `_repairs`.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Entry {
    format: u32,
    /// The repair's id (16 hex digits), the same in every namespace.
    id: String,
    step: Step,
    /// INTENT: what was asked (a digest of the corrections and corrected
    /// values, see `request`), to tell a repair asked again after a crash
    /// from a new one.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    request: Value,
    /// INTENT: what the commit does in each namespace.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    namespaces: BTreeMap<String, Part>,
    /// ABANDONED: why.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    reason: String,
}

/// The commit in one namespace.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Part {
    renames: Vec<Rename>,
    /// The REPAIR event for `_events`, encoded, in hex; empty when the
    /// namespace has no `_events` (no runtime ever served it).
    event: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Rename {
    log: String,
    /// Where the old history goes: `_gen.LOG.N`.
    generation: String,
    shadow: String,
    /// The original's latest seq when the intent was written.
    original_latest: Seq,
    /// The shadow's latest seq (complete) when the intent was written.
    shadow_latest: Seq,
}

/// A repair ready to commit: the intent, computed from the finished walk.
pub(crate) struct Commit {
    intent: Entry,
}

impl Commit {
    /// The intent of committing `shadows` (every one complete). `cause` is
    /// the REPAIR event's parent (see `repair_cause`).
    pub(crate) fn prepare(
        corrections: &[Correction],
        values: &HashMap<RecordRef, Vec<u8>>,
        shadows: &HashMap<LogKey, Shadow>,
        outcome: &RepairOutcome,
        cause: Option<&StoredEvent>,
    ) -> Result<Commit, RepairError> {
        let mut by_namespace: BTreeMap<&str, Vec<(&str, &Shadow)>> = BTreeMap::new();
        for ((namespace, log), shadow) in shadows {
            by_namespace.entry(namespace).or_default().push((log, shadow));
        }
        let mut parts = BTreeMap::new();
        for (namespace, mut logs) in by_namespace {
            logs.sort_by_key(|(log, _)| *log);
            let ns = &logs[0].1.ns;
            let existing: HashMap<String, Seq> = ns.list_logs()?.into_iter().map(|l| (l.name, l.latest)).collect();
            let mut renames = Vec::new();
            for (log, shadow) in &logs {
                // The first free generation number; at most one per log exists per earlier repair.
                let generation = (1..=existing.len() + 1)
                    .map(|n| format!("{GENERATION_PREFIX}{log}.{n}"))
                    .find(|name| !existing.contains_key(name))
                    .unwrap_or_default();
                renames.push(Rename {
                    log: (*log).to_owned(),
                    generation,
                    shadow: shadow.name.clone(),
                    original_latest: existing.get(*log).copied().unwrap_or(0),
                    shadow_latest: existing.get(&shadow.name).copied().unwrap_or(0),
                });
            }
            let event = if existing.contains_key(EVENTS_LOG) {
                let changed = outcome.changed_records.get(namespace).map_or(&[][..], Vec::as_slice);
                hex(&repair_event(corrections, cause, &renames, changed).encode())
            } else {
                String::new()
            };
            parts.insert(namespace.to_owned(), Part { renames, event });
        }
        let intent = Entry {
            format: FORMAT,
            id: format!("{:016x}", rand::random::<u64>()),
            step: Step::Intent,
            request: request(corrections, values),
            namespaces: parts,
            reason: String::new(),
        };
        Ok(Commit { intent })
    }

    /// Steps 1–3 of the module docs. An error before any rename calls the
    /// repair off (ABANDONED where the intent was written) and leaves the
    /// shadows for the caller to delete; after a rename the commit is
    /// [`resume`]'s to finish, and a failed last step is reported in
    /// `outcome.event_error` (the repair itself is done).
    pub(crate) fn run(
        self,
        namespaces: &HashMap<String, Arc<dyn Namespace>>,
        outcome: &mut RepairOutcome,
    ) -> Result<(), RepairError> {
        let intent = &self.intent;
        let mut written = Vec::new();
        let result = (|| {
            for name in intent.namespaces.keys() {
                let ns = namespace_in(namespaces, name)?;
                append_entry(ns.as_ref(), intent)?;
                written.push(Arc::clone(ns));
            }
            if written.len() > 1 {
                for ns in &written {
                    ns.sync()?;
                }
            }
            Ok::<(), RepairError>(())
        })();
        if let Err(e) = result {
            abandon_in(&written, &intent.id, &format!("the intent could not be written: {e}"));
            return Err(e);
        }
        for (name, part) in &intent.namespaces {
            let ns = namespace_in(namespaces, name)?;
            if let Err(e) = rename(ns.as_ref(), part) {
                if outcome.swapped.is_empty() {
                    abandon_in(&written, &intent.id, &format!("the first swap failed: {e}"));
                }
                return Err(e);
            }
            outcome.swapped.insert(name.clone(), swapped(part));
        }
        for (name, part) in &intent.namespaces {
            let ns = namespace_in(namespaces, name)?;
            match finish(ns.as_ref(), &intent.id, part) {
                Ok(Some(seq)) => {
                    outcome.repair_events.insert(name.clone(), seq);
                }
                Ok(None) => {}
                Err(e) => {
                    outcome
                        .event_error
                        .get_or_insert_with(|| format!("{e}; `varve repair resume` (or the next repair) writes it"));
                }
            }
        }
        Ok(())
    }
}

/// What was asked, in a bounded size whatever the corrections: a BLAKE3
/// digest of the corrections and the corrected values (the values
/// themselves are in the repaired logs), their count, and the first one.
fn request(corrections: &[Correction], values: &HashMap<RecordRef, Vec<u8>>) -> Value {
    let mut hasher = blake3::Hasher::new();
    let mut part = |bytes: &[u8]| {
        hasher.update(&(bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    };
    part(&serde_json::to_vec(corrections).unwrap_or_default());
    let mut values: Vec<(String, &Vec<u8>)> =
        values.iter().map(|(r, v)| (format!("{}/{}:{}", r.namespace, r.log, r.seq), v)).collect();
    values.sort();
    for (record, value) in values {
        part(record.as_bytes());
        part(value);
    }
    let first = corrections.first().map(|c| match c {
        Correction::Record(r) => format!("record {}/{}:{}", r.namespace, r.log, r.seq),
        Correction::Handler { handler, .. } => format!("handler {handler}"),
    });
    json!({ "digest": hasher.finalize().to_hex().to_string(), "corrections": corrections.len(), "first": first })
}

/// The REPAIR event of one namespace: the records it replaced, what was
/// corrected, where the old histories are.
fn repair_event(
    corrections: &[Correction],
    cause: Option<&StoredEvent>,
    renames: &[Rename],
    changed: &[(String, Seq, Seq)],
) -> Event {
    let records: Vec<&RecordRef> = corrections
        .iter()
        .filter_map(|c| match c {
            Correction::Record(r) => Some(r),
            Correction::Handler { .. } => None,
        })
        .collect();
    let handler = corrections.iter().find_map(|c| match c {
        Correction::Handler { handler, .. } => Some(handler.as_str()),
        Correction::Record(_) => None,
    });
    let mut what = Vec::new();
    if let Some(first) = records.first() {
        let more = match records.len() {
            1 => String::new(),
            n => format!(" and {} more record(s)", n - 1),
        };
        what.push(format!("corrected {}/{}:{}{more}", first.namespace, first.log, first.seq));
    }
    if let Some(handler) = handler {
        what.push(format!("replaced handler {handler:?}"));
    }
    let generations: Vec<&str> = renames.iter().map(|r| r.generation.as_str()).collect();
    let trace = cause.map_or_else(rand::random::<u128>, |c| c.event.trace);
    let mut event = Event::new(EventKind::Repair, trace, cause.map(|c| c.id.clone()));
    handler.unwrap_or_default().clone_into(&mut event.handler);
    event.reason = format!("{}; old histories kept as {}", what.join(", "), generations.join(", "));
    event.reads = changed.iter().map(|(log, first, last)| ReadDep::read(log, *first, *last)).collect();
    event
}

fn append_entry(ns: &dyn Namespace, entry: &Entry) -> Result<Seq, RepairError> {
    ns.create_log(REPAIRS_LOG, LogConfig::unbounded().system())?;
    let bytes =
        serde_json::to_vec(entry).map_err(|e| RepairError::Unsupported(format!("encoding a repair record: {e}")))?;
    Ok(ns.append(REPAIRS_LOG, &bytes)?)
}

/// One `rename_logs`: every log of `part` to its generation, its shadow to its name.
fn rename(ns: &dyn Namespace, part: &Part) -> Result<(), RepairError> {
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    for r in &part.renames {
        pairs.push((&r.log, &r.generation));
        pairs.push((&r.shadow, &r.log));
    }
    // A sorted map built on a swapped log keeps describing its old
    // history: its index moves with it (`varve_runtime::with_map_indexes`).
    let pairs = varve_runtime::with_map_indexes(ns, &pairs)?;
    let pairs: Vec<(&str, &str)> = pairs.iter().map(|(f, t)| (f.as_str(), t.as_str())).collect();
    ns.rename_logs(&pairs)?;
    Ok(())
}

fn swapped(part: &Part) -> Vec<(String, String)> {
    part.renames.iter().map(|r| (r.log.clone(), r.generation.clone())).collect()
}

/// Step 3 in one namespace: the REPAIR event and DONE, one batch. The
/// REPAIR event's seq in `_events`, if there is one.
fn finish(ns: &dyn Namespace, id: &str, part: &Part) -> Result<Option<Seq>, RepairError> {
    let done = Entry {
        format: FORMAT,
        id: id.to_owned(),
        step: Step::Done,
        request: Value::Null,
        namespaces: BTreeMap::new(),
        reason: String::new(),
    };
    let done =
        serde_json::to_vec(&done).map_err(|e| RepairError::Unsupported(format!("encoding a repair record: {e}")))?;
    ns.create_log(REPAIRS_LOG, LogConfig::unbounded().system())?;
    if part.event.is_empty() {
        ns.append(REPAIRS_LOG, &done)?;
        return Ok(None);
    }
    let event = unhex(&part.event).ok_or_else(|| RepairError::BadJournal {
        namespace: ns.name().to_owned(),
        reason: format!("the REPAIR event of repair {id} is not hex"),
    })?;
    let seqs = ns.append_batch(&[(EVENTS_LOG, &event), (REPAIRS_LOG, &done)])?;
    Ok(seqs.first().copied())
}

/// Record ABANDONED for `id` in each namespace (best effort: a failure
/// leaves the intent, which the next [`resume`] calls off, as the shadows
/// are gone by then).
fn abandon_in(namespaces: &[Arc<dyn Namespace>], id: &str, reason: &str) {
    for ns in namespaces {
        let _ = abandon(ns.as_ref(), id, reason);
    }
}

fn abandon(ns: &dyn Namespace, id: &str, reason: &str) -> Result<(), RepairError> {
    let entry = Entry {
        format: FORMAT,
        id: id.to_owned(),
        step: Step::Abandoned,
        request: Value::Null,
        namespaces: BTreeMap::new(),
        reason: reason.to_owned(),
    };
    append_entry(ns, &entry)?;
    Ok(())
}

/// The records of a namespace's repair journal (none if it has none).
fn entries(ns: &dyn Namespace) -> Result<Vec<Entry>, RepairError> {
    let latest = match ns.latest(REPAIRS_LOG) {
        Ok(0) | Err(LogError::LogNotFound { .. }) => return Ok(Vec::new()), // none, or created by a repair that died
        Ok(latest) => latest,
        Err(e) => return Err(e.into()),
    };
    let mut out = Vec::new();
    for record in ns.scan(REPAIRS_LOG, SeqRange { first: 1, last: latest })? {
        let record = record?;
        let entry: Entry = serde_json::from_slice(&record.value).map_err(|e| RepairError::BadJournal {
            namespace: ns.name().to_owned(),
            reason: format!("record {} is not a repair record ({e})", record.seq),
        })?;
        if entry.format > FORMAT {
            return Err(RepairError::BadJournal {
                namespace: ns.name().to_owned(),
                reason: format!(
                    "record {} has format {}, newer than this varve's {FORMAT}: use a newer varve",
                    record.seq, entry.format
                ),
            });
        }
        out.push(entry);
    }
    Ok(out)
}

/// The intents of `ns` that have neither DONE nor ABANDONED there.
fn open_intents(ns: &dyn Namespace) -> Result<Vec<Entry>, RepairError> {
    let entries = entries(ns)?;
    let closed: HashSet<&str> = entries.iter().filter(|e| e.step != Step::Intent).map(|e| e.id.as_str()).collect();
    Ok(entries.iter().filter(|e| e.step == Step::Intent && !closed.contains(e.id.as_str())).cloned().collect())
}

/// Whether `id` has DONE or ABANDONED in `ns`.
fn closed_in(ns: &dyn Namespace, id: &str) -> Result<bool, RepairError> {
    Ok(entries(ns)?.iter().any(|e| e.id == id && e.step != Step::Intent))
}

/// Refuse to start a repair over a namespace where an earlier one is
/// interrupted: its shadows would be taken for stale ones.
pub(crate) fn check_none_interrupted(namespaces: &HashMap<String, Arc<dyn Namespace>>) -> Result<(), RepairError> {
    for (name, ns) in namespaces {
        if let Some(open) = open_intents(ns.as_ref())?.first() {
            return Err(RepairError::Interrupted { namespace: name.clone(), id: open.id.clone() });
        }
    }
    Ok(())
}

/// What [`resume`] did with one interrupted repair.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Resumed {
    /// The repair's id (in each namespace's `_repairs`).
    pub id: String,
    /// What it was asked to correct: `{"digest", "corrections", "first"}` (a
    /// digest of the corrections and corrected values, their count, the first).
    pub request: Value,
    /// Namespaces where it is now complete, with `(log, generation)` of every swapped log.
    pub finished: BTreeMap<String, Vec<(String, String)>>,
    /// Of those, the namespaces whose logs were swapped now (by this resume).
    pub swapped_now: Vec<String>,
    /// Per namespace, the REPAIR event's seq in `_events`, if written now.
    pub repair_events: BTreeMap<String, Seq>,
    /// Namespaces where it was called off instead, and why (their logs are as before the repair).
    pub called_off: BTreeMap<String, String>,
}

impl Resumed {
    /// Whether this repair was asked with these corrections and values — a
    /// repair asked again after its crash is finished by [`resume`], not
    /// repeated.
    #[must_use]
    pub fn is_request(&self, corrections: &[Correction], values: &HashMap<RecordRef, Vec<u8>>) -> bool {
        self.request == request(corrections, values)
    }
}

/// The state of an interrupted repair in one namespace.
enum State {
    /// DONE or ABANDONED there already.
    Closed,
    /// Renamed; the REPAIR event and DONE are missing.
    Swapped,
    /// Not renamed; shadows and originals as the intent recorded.
    Ready,
    /// Not renamed, and cannot be: why.
    Stale(String),
}

fn state(ns: &dyn Namespace, id: &str, part: &Part) -> Result<State, RepairError> {
    if closed_in(ns, id)? {
        return Ok(State::Closed);
    }
    let logs: HashMap<String, Seq> = ns.list_logs()?.into_iter().map(|l| (l.name, l.latest)).collect();
    let renamed = part.renames.iter().all(|r| logs.contains_key(&r.generation) && !logs.contains_key(&r.shadow));
    if renamed {
        return Ok(State::Swapped);
    }
    for r in &part.renames {
        if logs.contains_key(&r.generation) {
            return Ok(State::Stale(format!("{} exists already", r.generation)));
        }
        match logs.get(&r.shadow) {
            None => return Ok(State::Stale(format!("its shadow {} is gone", r.shadow))),
            Some(&latest) if latest != r.shadow_latest => {
                return Ok(State::Stale(format!(
                    "its shadow {} holds {latest} records, not the {} it had",
                    r.shadow, r.shadow_latest
                )))
            }
            Some(_) => {}
        }
        let latest = logs.get(&r.log).copied().unwrap_or(0);
        if latest != r.original_latest {
            return Ok(State::Stale(format!(
                "{} was appended to since the repair was interrupted (latest seq {latest}, was {}); swapping \
                 would lose those records: run the repair again",
                r.log, r.original_latest
            )));
        }
    }
    Ok(State::Ready)
}

/// Finish every repair interrupted in `namespaces` (see the module docs).
/// Every namespace an interrupted repair spans must be given (else
/// [`RepairError::MissingNamespace`], nothing changed). No runtime may
/// serve them meanwhile (no append may land during a resume).
#[allow(clippy::implicit_hasher, reason = "the namespaces map of `Inputs`, std's hasher")]
pub fn resume(namespaces: &HashMap<String, Arc<dyn Namespace>>) -> Result<Vec<Resumed>, RepairError> {
    let mut intents: BTreeMap<String, Entry> = BTreeMap::new();
    let mut names: Vec<&String> = namespaces.keys().collect();
    names.sort();
    for name in names {
        for intent in open_intents(namespaces[name].as_ref())? {
            intents.entry(intent.id.clone()).or_insert(intent);
        }
    }
    let mut done = Vec::new();
    for intent in intents.values() {
        // Look before changing anything: every namespace given, each one's state.
        let mut states = Vec::new();
        for (name, part) in &intent.namespaces {
            let ns = namespace_in(namespaces, name)?;
            states.push((name, part, Arc::clone(ns), state(ns.as_ref(), &intent.id, part)?));
        }
        let any_swapped = states.iter().any(|(_, _, _, s)| matches!(s, State::Swapped));
        let any_stale = states.iter().any(|(_, _, _, s)| matches!(s, State::Stale(_)));
        let mut resumed = Resumed { id: intent.id.clone(), request: intent.request.clone(), ..Resumed::default() };
        for (name, part, ns, state) in states {
            let roll_forward = match &state {
                State::Closed => continue,
                State::Swapped => true,
                State::Ready => any_swapped || !any_stale,
                State::Stale(_) => false,
            };
            if roll_forward {
                if matches!(state, State::Ready) {
                    rename(ns.as_ref(), part)?;
                    resumed.swapped_now.push(name.clone());
                }
                if let Some(seq) = finish(ns.as_ref(), &intent.id, part)? {
                    resumed.repair_events.insert(name.clone(), seq);
                }
                resumed.finished.insert(name.clone(), swapped(part));
            } else {
                let why = match state {
                    State::Stale(why) => why,
                    _ => "another namespace of the repair cannot be swapped".to_owned(),
                };
                for r in &part.renames {
                    match ns.delete_log(&r.shadow) {
                        Ok(()) | Err(LogError::LogNotFound { .. }) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                abandon(ns.as_ref(), &intent.id, &why)?;
                resumed.called_off.insert(name.clone(), why);
            }
        }
        done.push(resumed);
    }
    Ok(done)
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(seq: Seq) -> RecordRef {
        RecordRef { namespace: "app".into(), log: "in".into(), seq }
    }

    #[test]
    fn a_request_is_small_whatever_its_values_and_tells_requests_apart() {
        let corrections = [Correction::Record(record(1))];
        let big = HashMap::from([(record(1), vec![7u8; 1 << 20])]);
        let text = serde_json::to_string(&request(&corrections, &big)).expect("json");
        assert!(text.len() < 256, "{} bytes: {text}", text.len());
        assert_eq!(request(&corrections, &big), request(&corrections, &big.clone()));
        let other = HashMap::from([(record(1), vec![8u8; 1 << 20])]);
        assert_ne!(request(&corrections, &big), request(&corrections, &other), "another value");
        let moved = [Correction::Record(record(2))];
        let moved_values = HashMap::from([(record(2), vec![7u8; 1 << 20])]);
        assert_ne!(request(&corrections, &big), request(&moved, &moved_values), "another record");
    }

    #[test]
    fn hex_round_trips_and_refuses_what_is_not_hex() {
        let bytes = [0u8, 1, 0x7f, 0x80, 0xff];
        assert_eq!(unhex(&hex(&bytes)).as_deref(), Some(&bytes[..]));
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("zz"), None);
    }
}
