//! Request ids: an append retried with the same id lands once.
//!
//! A client that loses the answer to an append (the runtime died after
//! writing, before answering) cannot tell whether it landed. So an append
//! may carry a [`RequestId`]; the runtime writes a [`RequestRecord`] (JSON:
//! the id, the logs and the seqs appended) to [`REQUESTS_LOG`] **in the
//! same atomic batch** as the data, and answers a repeat of the id with the
//! seqs of the first append instead of appending again. The record is on
//! disk exactly when the data is, so this holds across crashes too: on
//! start the runtime rebuilds its [`RequestMemory`] from the log.
//!
//! The memory is bounded: the log keeps the last [`REQUESTS_REMEMBERED`]
//! records (older ones are trimmed) and the map holds as many ids, oldest
//! forgotten first. A repeat that comes after more than that many other
//! identified appends is appended again. Clients retry within seconds, and
//! 16,384 records of about 80 bytes cost ~1.3 MB on disk and a few
//! milliseconds to replay on start.

use std::collections::{HashMap, VecDeque};
use std::fmt;

use serde::{Deserialize, Serialize};
use varve_log::{LogConfig, LogError, Namespace, OnFull, Seq, SeqRange};

use crate::error::{Result, RuntimeError};

/// The system log of request records (JSON, one per identified append).
pub const REQUESTS_LOG: &str = "_runtime.requests";
/// How many identified appends a namespace remembers (see the module docs).
pub const REQUESTS_REMEMBERED: u64 = 16_384;
/// Longest request id, in bytes.
pub const REQUEST_ID_BYTES_MAX: usize = 128;

/// The id of an append request: 1 to [`REQUEST_ID_BYTES_MAX`] bytes of
/// `A-Z a-z 0-9 . _ : -`. Generated ids are 32 hex digits (128 random bits).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(String);

impl RequestId {
    /// Check `text` and wrap it.
    pub fn parse(text: &str) -> Result<RequestId> {
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-');
        if text.is_empty() || text.len() > REQUEST_ID_BYTES_MAX || !text.chars().all(allowed) {
            return Err(RuntimeError::InvalidArgument {
                reason: format!(
                    "request id {text:?}: use 1 to {REQUEST_ID_BYTES_MAX} characters of A-Z a-z 0-9 . _ : -"
                ),
            });
        }
        Ok(RequestId(text.to_owned()))
    }

    /// A new random id (32 hex digits).
    #[must_use]
    pub fn random() -> RequestId {
        RequestId(format!("{:032x}", rand::random::<u128>()))
    }

    /// The id's text, as given or generated.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One record of [`REQUESTS_LOG`]: what the request appended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// The request id, as [`RequestId::as_str`].
    pub id: String,
    /// The logs appended to, in request order …
    pub logs: Vec<String>,
    /// … and the seq each record got.
    pub seqs: Vec<Seq>,
}

/// The answer to an append that may be a repeat.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Appended {
    /// The seq of each record appended, in request order.
    pub seqs: Vec<Seq>,
    /// The request id had landed before: nothing was appended now, `seqs`
    /// are the first append's.
    pub repeated: bool,
}

/// The bounded map id → what it appended, oldest forgotten first.
/// `remember` and `recall` are O(1).
#[derive(Clone, Debug)]
pub struct RequestMemory {
    by_id: HashMap<String, RequestRecord>,
    order: VecDeque<String>,
    capacity: usize,
}

impl RequestMemory {
    /// A memory of at most `capacity` ids (at least 1).
    #[must_use]
    pub fn new(capacity: usize) -> RequestMemory {
        RequestMemory { by_id: HashMap::new(), order: VecDeque::new(), capacity: capacity.max(1) }
    }

    /// Remember a landed request; forgets the oldest past the capacity.
    pub fn remember(&mut self, record: RequestRecord) {
        if self.by_id.contains_key(&record.id) {
            return; // the first append is the answer
        }
        while self.order.len() >= self.capacity {
            if let Some(oldest) = self.order.pop_front() {
                self.by_id.remove(&oldest);
            }
        }
        self.order.push_back(record.id.clone());
        self.by_id.insert(record.id.clone(), record);
    }

    /// What `id` appended, if remembered.
    #[must_use]
    pub fn recall(&self, id: &RequestId) -> Option<&RequestRecord> {
        self.by_id.get(id.as_str())
    }

    /// How many ids are remembered, at most the capacity.
    #[must_use]
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether no id is remembered.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

impl Default for RequestMemory {
    fn default() -> Self {
        RequestMemory::new(usize::try_from(REQUESTS_REMEMBERED).unwrap_or(usize::MAX))
    }
}

/// The answer to a repeat of `id` for `logs`: the first append's seqs, or
/// an error if the id was used for an append to other logs.
pub(crate) fn repeat_answer(id: &RequestId, logs: &[&str], first: &RequestRecord) -> Result<Appended> {
    if first.logs.len() != logs.len() || first.logs.iter().zip(logs).any(|(a, b)| a != b) {
        return Err(RuntimeError::InvalidArgument {
            reason: format!(
                "request id {id} was used for an append to {:?}, not {logs:?}: use a new id for a new append",
                first.logs
            ),
        });
    }
    Ok(Appended { seqs: first.seqs.clone(), repeated: true })
}

pub(crate) fn encode(record: &RequestRecord) -> Result<Vec<u8>> {
    serde_json::to_vec(record).map_err(|e| RuntimeError::InvalidArgument { reason: e.to_string() })
}

/// The configuration of [`REQUESTS_LOG`].
pub(crate) fn requests_log_config() -> LogConfig {
    LogConfig::keep(REQUESTS_REMEMBERED, OnFull::Overwrite).system()
}

/// Rebuild the memory from [`REQUESTS_LOG`] (empty if the log does not exist).
pub fn read_requests(ns: &dyn Namespace) -> Result<RequestMemory> {
    let mut memory = RequestMemory::default();
    let info = match ns.log_info(REQUESTS_LOG) {
        Ok(info) => info,
        Err(LogError::LogNotFound { .. }) => return Ok(memory),
        Err(e) => return Err(e.into()),
    };
    if info.latest == 0 {
        return Ok(memory);
    }
    for record in ns.scan(REQUESTS_LOG, SeqRange { first: info.earliest.max(1), last: info.latest })? {
        let record = record?;
        let parsed: RequestRecord = serde_json::from_slice(&record.value).map_err(|e| {
            RuntimeError::InvalidArgument { reason: format!("{REQUESTS_LOG} seq {} does not parse: {e}", record.seq) }
        })?;
        memory.remember(parsed);
    }
    Ok(memory)
}

/// Append `batch` once under `id` in a namespace **no runtime serves** (the
/// caller holds its writer lock): data and request record in one batch, or
/// the first append's seqs if `id` landed before. Creates [`REQUESTS_LOG`].
/// Replays the log on every call (O([`REQUESTS_REMEMBERED`])): for one-off
/// writers such as the CLI, not for loops.
pub fn append_batch_once(ns: &dyn Namespace, id: &RequestId, batch: &[(&str, &[u8])]) -> Result<Appended> {
    ns.create_log(REQUESTS_LOG, requests_log_config())?;
    let mut memory = read_requests(ns)?;
    append_batch_remembering(ns, &mut memory, id, batch)
}

/// [`append_batch_once`] for a long-lived writer that keeps the namespace's
/// [`RequestMemory`] (from [`read_requests`]) and updates it here.
///
/// The seqs are predicted before the batch is written (the request record
/// names them), so no other append to the namespace may run between the
/// prediction and the write: the caller serialises this call with every
/// other append of the namespace. A wrong prediction is `SeqMismatch`.
pub fn append_batch_remembering(
    ns: &dyn Namespace,
    memory: &mut RequestMemory,
    id: &RequestId,
    batch: &[(&str, &[u8])],
) -> Result<Appended> {
    let logs: Vec<&str> = batch.iter().map(|(log, _)| *log).collect();
    if let Some(first) = memory.recall(id) {
        return repeat_answer(id, &logs, first);
    }
    ns.create_log(REQUESTS_LOG, requests_log_config())?;
    let mut record =
        RequestRecord { id: id.to_string(), logs: logs.iter().map(|l| (*l).to_owned()).collect(), seqs: Vec::new() };
    for (i, log) in logs.iter().enumerate() {
        let earlier = logs[..i].iter().filter(|l| *l == log).count() as u64;
        record.seqs.push(ns.latest(log)? + 1 + earlier);
    }
    let bytes = encode(&record)?;
    let mut full: Vec<(&str, &[u8])> = batch.to_vec();
    full.push((REQUESTS_LOG, &bytes));
    let seqs = ns.append_batch(&full)?;
    if seqs[..batch.len()] != record.seqs[..] {
        return Err(RuntimeError::SeqMismatch {
            namespace: ns.name().to_owned(),
            log: logs[0].to_owned(),
            expected: record.seqs[0],
            actual: seqs[0],
        });
    }
    let seqs = record.seqs.clone();
    memory.remember(record);
    Ok(Appended { seqs, repeated: false })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, seq: Seq) -> RequestRecord {
        RequestRecord { id: id.to_owned(), logs: vec!["in".to_owned()], seqs: vec![seq] }
    }

    #[test]
    fn ids_are_checked() {
        assert!(RequestId::parse("order-17:retry_2.x").is_ok());
        for bad in ["", "has space", "semi;colon", &"x".repeat(REQUEST_ID_BYTES_MAX + 1)] {
            assert!(RequestId::parse(bad).is_err(), "{bad:?}");
        }
        let id = RequestId::random();
        assert_eq!(id.as_str().len(), 32);
        assert_eq!(RequestId::parse(id.as_str()).expect("a random id parses"), id);
    }

    #[test]
    fn the_memory_forgets_the_oldest_past_its_capacity() {
        let mut m = RequestMemory::new(2);
        m.remember(record("a", 1));
        m.remember(record("b", 2));
        m.remember(record("a", 9)); // a repeat keeps the first answer and its age
        assert_eq!(m.recall(&RequestId::parse("a").expect("id")).map(|r| r.seqs[0]), Some(1));
        m.remember(record("c", 3));
        assert!(m.recall(&RequestId::parse("a").expect("id")).is_none(), "a was the oldest");
        assert_eq!(m.len(), 2);
        assert!(m.recall(&RequestId::parse("b").expect("id")).is_some());
        assert!(m.recall(&RequestId::parse("c").expect("id")).is_some());
    }

    #[test]
    fn a_repeat_answers_the_first_seqs_for_the_same_logs_only() {
        let id = RequestId::parse("r1").expect("id");
        let first = RequestRecord { id: "r1".into(), logs: vec!["a".into(), "b".into()], seqs: vec![4, 7] };
        assert_eq!(
            repeat_answer(&id, &["a", "b"], &first).expect("same logs"),
            Appended { seqs: vec![4, 7], repeated: true }
        );
        let err = repeat_answer(&id, &["b", "a"], &first).expect_err("other logs");
        assert!(err.to_string().contains("use a new id"), "{err}");
    }

    #[test]
    fn the_stored_form_is_frozen() {
        let bytes = encode(&record("r", 5)).expect("encode");
        assert_eq!(std::str::from_utf8(&bytes).expect("utf-8"), r#"{"id":"r","logs":["in"],"seqs":[5]}"#);
    }
}
