//! [`NatsNamespace`]: a namespace as one `JetStream` stream, and the
//! per-log state this client keeps of it.
//!
//! Invariants (docs/nats.md):
//! - a log exists while its configuration subject holds a message;
//! - its records are the messages of its data subject, in stream order,
//!   each with header `Varve-Seq`; those seqs are dense from 1, because
//!   every append is published with `Nats-Expected-Last-Subject-Sequence`
//!   set to the stream sequence of the log's latest record (0 when empty);
//! - a log's trim floor is the `Varve-Seq` of the last message of its
//!   floor subject, when that message names the log's configuration (its
//!   payload): no record below it is readable, whether or not its purge
//!   has run yet;
//!   floors only rise (each is published with a compare-and-set on the
//!   floor subject);
//! - this client's cached `latest` and floor never go back (a replica may
//!   answer with an older state; the cache keeps the newest seen).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_nats::header::HeaderMap;
use bytes::Bytes;
use serde::Deserialize;
use varve_log::rules::{self, earliest_after_trims, Expect};
use varve_log::{LogConfig, LogError, LogInfo, Namespace, Result, Scan, Seq, SeqRange, Watch};

use crate::conn::{err_code, Conn, Failure};
use crate::names::Layout;
use crate::scan::NatsScan;
use crate::stored::{ConfigJson, PubAck, Stored, SEQ_HEADER};
use crate::watch::NatsWatch;

/// Most seq → stream-sequence anchors kept per log (hints for `get`).
const ANCHORS_MAX: usize = 4096;

/// How long reading a log's state retries while the servers do not answer.
const REFRESH_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

/// Most probes one lookup of a record by seq may take (each halves the
/// range, so 64 covers any stream).
const PROBES_MAX: u32 = 128;

/// Who answers a read: any replica (a direct get), or the stream's leader.
#[derive(Clone, Copy, Debug)]
enum Source {
    AnyReplica,
    Leader,
}

/// What this client knows of one log.
#[derive(Clone, Debug)]
pub(crate) struct LogState {
    pub(crate) config: LogConfig,
    /// The stream sequence of the configuration message: a log deleted and
    /// created again has a new one, and the stale state is dropped.
    pub(crate) config_sseq: u64,
    pub(crate) latest: Seq,
    /// The stream sequence of the last message of the log's data subject:
    /// record `latest`, or 0 when the subject is empty (the value every
    /// append's compare-and-set expects).
    pub(crate) latest_sseq: u64,
    /// No record below this seq is kept (`trim`); 0 when never trimmed.
    pub(crate) floor: Seq,
    /// The stream sequence of the floor subject's last message, 0 when it
    /// has none: what the next trim's compare-and-set expects.
    pub(crate) floor_sseq: u64,
    /// Known positions of records: seq → stream sequence.
    anchors: BTreeMap<Seq, u64>,
}

impl LogState {
    pub(crate) fn earliest(&self) -> Seq {
        earliest_after_trims(self.config.retention, self.latest, self.floor)
    }

    pub(crate) fn info(&self, name: &str) -> LogInfo {
        LogInfo { name: name.to_owned(), config: self.config, earliest: self.earliest(), latest: self.latest }
    }
}

/// The shared part of a namespace handle.
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) conn: Arc<Conn>,
    pub(crate) name: String,
    pub(crate) layout: Layout,
    logs: Mutex<HashMap<String, LogState>>,
    /// The configuration (stream sequence) of each log this client deleted,
    /// until it sees a newer one: a replica that still answers with it is
    /// behind, and the log is not there any more.
    deleted: Mutex<HashMap<String, u64>>,
    pub(crate) limits: varve_log::Limits,
}

/// A namespace of a NATS store. Cheap to clone; clones share the
/// connection and the cached state of the logs.
#[derive(Clone, Debug)]
pub struct NatsNamespace {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Deserialize)]
struct StreamInfoJson {}

/// `STREAM.INFO` with `subjects_filter`: the matching subjects and their counts.
#[derive(Deserialize)]
struct SubjectsInfo {
    #[serde(default)]
    state: SubjectsState,
}
#[derive(Deserialize, Default)]
struct SubjectsState {
    #[serde(default)]
    subjects: Option<HashMap<String, u64>>,
}

impl NatsNamespace {
    pub(crate) fn new(conn: Arc<Conn>, name: &str, limits: varve_log::Limits) -> NatsNamespace {
        NatsNamespace {
            inner: Arc::new(Inner {
                conn,
                name: name.to_owned(),
                layout: Layout::new(name),
                logs: Mutex::new(HashMap::new()),
                deleted: Mutex::new(HashMap::new()),
                limits,
            }),
        }
    }

    /// The stream that holds this namespace.
    #[must_use]
    pub fn stream_name(&self) -> &str {
        &self.inner.layout.stream
    }
}

impl Inner {
    pub(crate) fn target(&self) -> &str {
        &self.conn.target
    }

    pub(crate) fn cache(&self) -> MutexGuard<'_, HashMap<String, LogState>> {
        self.logs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn deleted(&self) -> MutexGuard<'_, HashMap<String, u64>> {
        self.deleted.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn not_found(&self, log: &str) -> LogError {
        LogError::LogNotFound { namespace: self.name.clone(), log: log.to_owned() }
    }

    /// Create the namespace's stream if it does not exist yet.
    fn ensure_stream(&self) -> Result<()> {
        let options = &self.conn.options;
        let mut config = serde_json::json!({
            "name": self.layout.stream,
            "subjects": [self.layout.stream_subjects()],
            "retention": "limits",
            "storage": "file",
            "num_replicas": options.replicas,
            "discard": "old",
            "allow_direct": true,
            "allow_atomic": true,
            "duplicate_window": 120_000_000_000_u64,
        });
        if !options.tags.is_empty() {
            config["placement"] = serde_json::json!({ "tags": options.tags });
        }
        let op = format!("STREAM.CREATE.{}", self.layout.stream);
        let started = std::time::Instant::now();
        // Creating a stream is idempotent (the same config again answers
        // with the stream), so a lost answer is asked again: at least once
        // more, however long the first wait took.
        let deadline = options.append_deadline.max(options.request_timeout * 3);
        let mut attempt = 0;
        // A cluster just started may not have heard from every peer yet: its
        // meta leader refuses a replicated stream's placement ("peer
        // offline") for a moment, as it answers 503 without a leader, or
        // its answer is lost while the meta group elects a leader.
        let answer = loop {
            attempt += 1;
            let answer = self.conn.block_on(self.conn.api::<StreamInfoJson>(&op, &config));
            let transient = match &answer {
                Err(Failure::NotSent(_) | Failure::Lost(_)) => true,
                Err(Failure::Api(error)) => error.is_transient(),
                _ => false,
            };
            if !transient || started.elapsed() > deadline {
                break answer;
            }
            std::thread::sleep(crate::conn::backoff(attempt));
        };
        match answer {
            Ok(_) => Ok(()),
            // It exists already, created by another client with other options.
            Err(Failure::Api(error)) if error.err_code == err_code::STREAM_NAME_IN_USE => Ok(()),
            Err(failure) => Err(failure.into_log_error(
                self.target(),
                &format!("create stream {} for namespace {:?}", self.layout.stream, self.name),
            )),
        }
    }

    /// Whether the namespace's stream exists (asked of the leader).
    fn stream_exists(&self) -> Result<bool> {
        let op = format!("STREAM.INFO.{}", self.layout.stream);
        match self.conn.block_on(self.conn.api_read::<StreamInfoJson>(&op, &serde_json::json!({}))) {
            Ok(_) => Ok(true),
            Err(Failure::Api(error)) if error.err_code == err_code::STREAM_NOT_FOUND => Ok(false),
            Err(failure) => Err(failure.into_read_error(self.target(), "read the namespace's stream info")),
        }
    }

    /// Why a publish to this namespace found no responders, when that is
    /// final: the stream is a read-only mirror (a cloud copy of an edge
    /// namespace), or it is gone. `None` when it should be retried.
    pub(crate) fn refusal_of_no_responders(&self) -> Option<LogError> {
        let op = format!("STREAM.INFO.{}", self.layout.stream);
        match self.conn.block_on(self.conn.api::<serde_json::Value>(&op, &serde_json::json!({}))) {
            Ok(info) if info["config"]["mirror"].is_object() => Some(LogError::InvalidArgument {
                reason: format!(
                    "namespace {:?} here is a read-only mirror of stream {} in another domain: append where it is \
                     written (the edge), and read it here",
                    self.name, info["config"]["mirror"]["name"]
                ),
            }),
            Err(Failure::Api(error)) if error.err_code == err_code::STREAM_NOT_FOUND => {
                Some(LogError::NamespaceNotFound { namespace: self.name.clone() })
            }
            _ => None,
        }
    }

    /// A direct get (any replica answers): `None` when no message matches.
    pub(crate) async fn direct(&self, body: serde_json::Value) -> Result<Option<Stored>, Failure> {
        let subject = self.conn.api_subject(&format!("DIRECT.GET.{}", self.layout.stream));
        let message = self.conn.request_read(subject, serde_json::to_vec(&body).unwrap_or_default().into()).await?;
        direct_answer(message)
    }

    /// The last message of `subject`, from any replica.
    pub(crate) async fn direct_last(&self, subject: &str) -> Result<Option<Stored>, Failure> {
        let api = self.conn.api_subject(&format!("DIRECT.GET.{}.{subject}", self.layout.stream));
        let message = self.conn.request_read(api, Bytes::new()).await?;
        direct_answer(message)
    }

    /// The first message of `subject` at stream sequence `from` or later.
    pub(crate) async fn direct_next(&self, subject: &str, from: u64) -> Result<Option<Stored>, Failure> {
        self.direct(serde_json::json!({ "seq": from.max(1), "next_by_subj": subject })).await
    }

    /// Read a log's configuration and latest record from the servers, and
    /// merge them into the cache (which never goes back).
    pub(crate) fn refresh(&self, log: &str) -> Result<LogState> {
        let started = std::time::Instant::now();
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.refresh_once(log) {
                // Direct gets of a stream just created (or just re-elected)
                // may find no responders for a moment.
                Err(LogError::Unavailable { .. }) if started.elapsed() < REFRESH_PATIENCE => {
                    std::thread::sleep(crate::conn::backoff(attempt));
                }
                other => return other,
            }
        }
    }

    /// [`refresh`](Self::refresh) of a log whose configuration the stream
    /// has just acknowledged or refused to overwrite: it exists, but the
    /// replica answering a direct get may not hold it yet (an ack needs a
    /// majority), so `LogNotFound` is asked again until the append deadline.
    fn refresh_existing(&self, log: &str) -> Result<LogState> {
        let started = std::time::Instant::now();
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.refresh(log) {
                Err(LogError::LogNotFound { .. }) if started.elapsed() < self.conn.options.append_deadline => {
                    std::thread::sleep(crate::conn::backoff(attempt));
                }
                other => return other,
            }
        }
    }

    fn refresh_once(&self, log: &str) -> Result<LogState> {
        let (config_subject, data_subject, floor_subject) =
            (self.layout.config(log), self.layout.data(log), self.layout.floor(log));
        let read = |source: Source| {
            self.conn.block_on(async {
                let config = self.last_of(source, &config_subject);
                let last = self.last_of(source, &data_subject);
                let floor = self.last_of(source, &floor_subject);
                futures_util::future::join3(config, last, floor).await
            })
        };
        let (mut config, mut last, mut floor) = read(Source::AnyReplica);
        // The three reads may each be answered by another replica, and a
        // replica may be behind the leader (an acknowledgement needs a
        // majority): a log created a moment ago could read as missing, as
        // the log deleted before it, or with the records of that log (which
        // would make the next append's compare-and-set expect them). Such
        // answers, rare outside deletes and creates, are asked again of
        // the leader, which has every acknowledged message.
        let seen = self.cache().get(log).map(|state| state.config_sseq);
        let deleted = self.deleted().get(log).copied();
        let doubtful = match (&config, &last) {
            (Ok(None), _) => true,
            (Ok(Some(config)), _) if seen.is_some_and(|seen| config.sseq < seen) => true,
            (Ok(Some(config)), _) if deleted.is_some_and(|deleted| config.sseq <= deleted) => true,
            (Ok(Some(config)), Ok(Some(last))) => last.sseq < config.sseq,
            _ => false,
        };
        if doubtful {
            (config, last, floor) = read(Source::Leader);
        }
        let map = |failure: Failure| failure.into_read_error(self.target(), &format!("read log {log:?}"));
        let config = match config {
            Ok(config) => config,
            // No stream: no log.
            Err(Failure::NotSent(_)) if !self.stream_exists()? => None,
            Err(failure) => return Err(map(failure)),
        };
        let Some(config_message) = config else {
            self.cache().remove(log);
            return Err(self.not_found(log));
        };
        if deleted.is_some_and(|deleted| config_message.sseq <= deleted) {
            // Even the leader: this client's delete has not been applied yet.
            return Err(self.not_found(log));
        }
        if deleted.is_some() {
            self.deleted().remove(log);
        }
        let parsed: ConfigJson = serde_json::from_slice(&config_message.value).map_err(|e| LogError::Protocol {
            target: self.target().to_owned(),
            reason: format!("log {log:?} has an unreadable configuration message ({e})"),
        })?;
        let last = last.map_err(map)?;
        // Records written before the configuration belong to a deleted log
        // of the same name whose purge has not reached this replica.
        let (latest, latest_sseq) = match last {
            Some(record) if record.sseq > config_message.sseq => (record.seq, record.sseq),
            Some(orphan) => (0, orphan.sseq),
            None => (0, 0),
        };
        // So does a floor for another configuration (each floor names the
        // one it was published for: a trim racing a delete and re-create
        // must not floor the new log).
        let (floor, floor_sseq) = match floor.map_err(map)? {
            Some(message) if floor_config(&message) == Some(config_message.sseq) => (message.seq, message.sseq),
            Some(other) => (0, other.sseq),
            None => (0, 0),
        };
        let fresh = || LogState {
            config: parsed.config(),
            config_sseq: config_message.sseq,
            latest,
            latest_sseq,
            floor,
            floor_sseq,
            anchors: BTreeMap::new(),
        };
        let mut cache = self.cache();
        let state = cache.entry(log.to_owned()).or_insert_with(fresh);
        if state.config_sseq == config_message.sseq {
            if latest > state.latest || (latest == state.latest && latest_sseq > state.latest_sseq) {
                state.latest = latest;
                state.latest_sseq = latest_sseq;
            }
            if floor_sseq > state.floor_sseq {
                state.floor = state.floor.max(floor);
                state.floor_sseq = floor_sseq;
            }
        } else {
            *state = fresh();
        }
        if latest > 0 {
            state.anchors.insert(latest, latest_sseq);
        }
        Ok(state.clone())
    }

    /// The cached state of `log`, read from the servers if not cached.
    pub(crate) fn state(&self, log: &str) -> Result<LogState> {
        if let Some(state) = self.cache().get(log) {
            return Ok(state.clone());
        }
        self.refresh(log)
    }

    /// Record that `log`'s record `seq` is at stream sequence `sseq`.
    pub(crate) fn learn(&self, log: &str, config_sseq: u64, seq: Seq, stream_seq: u64) {
        let mut cache = self.cache();
        let Some(state) = cache.get_mut(log) else { return };
        if state.config_sseq != config_sseq {
            return;
        }
        if seq > state.latest {
            state.latest = seq;
            state.latest_sseq = stream_seq;
        }
        if state.anchors.len() >= ANCHORS_MAX {
            state.anchors.pop_first();
        }
        state.anchors.insert(seq, stream_seq);
    }

    /// Forget what is cached of `log` (after a conflict).
    pub(crate) fn forget(&self, log: &str) {
        self.cache().remove(log);
    }

    /// Record `seq` of `log`, which must exist (`seq` in `[earliest,
    /// latest]` of `state`): found from the anchors, by probing the stream.
    ///
    /// Probes go first to any replica (direct gets). A replica may not yet
    /// have applied what the leader acknowledged (`JetStream` acknowledges
    /// once a quorum stores a message), so a record a reader saw in
    /// `latest` can be missing there for a moment: then the stream's leader
    /// is asked, which has every acknowledged message.
    pub(crate) fn locate(&self, log: &str, state: &LogState, seq: Seq) -> Result<Stored> {
        let map = |failure: Failure| failure.into_read_error(self.target(), &format!("read log {log:?} seq {seq}"));
        for source in [Source::AnyReplica, Source::Leader] {
            if let Some(found) = self.search(log, state, seq, source).map_err(map)? {
                return Ok(found);
            }
        }
        // Not where it must be: trimmed or deleted meanwhile.
        let now = self.refresh(log)?;
        rules::check_readable(log, seq, now.earliest(), now.latest)?;
        Err(LogError::Protocol {
            target: self.target().to_owned(),
            reason: format!("log {log:?} seq {seq} is not in stream {} where it must be", self.layout.stream),
        })
    }

    /// Probe `source` for record `seq` of `log`, between bounds on its
    /// stream sequence; `None` if `source` does not have it.
    fn search(&self, log: &str, state: &LogState, seq: Seq, source: Source) -> Result<Option<Stored>, Failure> {
        let subject = self.layout.data(log);
        // Bounds on its stream sequence: every record of the log has its own
        // stream sequence, in seq order, after the configuration message.
        let mut low = state.config_sseq + seq;
        let mut high = state.latest_sseq.saturating_sub(state.latest - seq);
        let exact = {
            let cache = self.cache();
            let anchors = cache.get(log).filter(|s| s.config_sseq == state.config_sseq).map(|s| &s.anchors);
            if let Some(anchors) = anchors {
                if let Some((&below, &at)) = anchors.range(..=seq).next_back() {
                    low = low.max(at + (seq - below));
                }
                if let Some((&above, &at)) = anchors.range(seq..).next() {
                    high = high.min(at.saturating_sub(above - seq));
                }
                anchors.get(&seq).copied()
            } else {
                None
            }
        };
        if let Some(sseq) = exact {
            if let Some(found) = self.conn.block_on(self.next_of(source, &subject, sseq))? {
                if found.sseq == sseq && found.subject == subject && found.seq == seq {
                    return Ok(Some(found));
                }
            }
        }
        for probe_count in 0..PROBES_MAX {
            if low > high {
                break;
            }
            // Alternate a probe at the lower bound (right at once when the
            // log is dense in the stream) with one in the middle.
            let probe = if probe_count % 2 == 0 { low } else { low + (high - low) / 2 };
            let Some(found) = self.conn.block_on(self.next_of(source, &subject, probe))? else {
                high = probe.saturating_sub(1);
                continue;
            };
            if found.seq > 0 {
                self.learn(log, state.config_sseq, found.seq, found.sseq);
            }
            match found.seq.cmp(&seq) {
                std::cmp::Ordering::Equal => return Ok(Some(found)),
                std::cmp::Ordering::Less => low = found.sseq + (seq - found.seq),
                std::cmp::Ordering::Greater => high = high.min(probe.saturating_sub(1)),
            }
        }
        Ok(None)
    }

    /// The last message of `subject`, as `source` has it.
    async fn last_of(&self, source: Source, subject: &str) -> Result<Option<Stored>, Failure> {
        match source {
            Source::AnyReplica => self.direct_last(subject).await,
            Source::Leader => {
                let op = format!("STREAM.MSG.GET.{}", self.layout.stream);
                let body = serde_json::json!({ "last_by_subj": subject });
                match self.conn.api_read::<crate::stored::MessageGetJson>(&op, &body).await {
                    Ok(answer) => Stored::from_leader(answer).map(Some),
                    Err(Failure::Api(error)) if error.err_code == err_code::NO_MESSAGE_FOUND => Ok(None),
                    Err(failure) => Err(failure),
                }
            }
        }
    }

    /// The first message of `subject` at stream sequence `from` or later, as `source` has it.
    async fn next_of(&self, source: Source, subject: &str, from: u64) -> Result<Option<Stored>, Failure> {
        match source {
            Source::AnyReplica => self.direct_next(subject, from).await,
            Source::Leader => self.leader_next(subject, from).await,
        }
    }

    /// The first message of `subject` at stream sequence `from` or later,
    /// from the stream's leader (`STREAM.MSG.GET`, not a direct get).
    pub(crate) async fn leader_next(&self, subject: &str, from: u64) -> Result<Option<Stored>, Failure> {
        let op = format!("STREAM.MSG.GET.{}", self.layout.stream);
        let body = serde_json::json!({ "seq": from.max(1), "next_by_subj": subject });
        match self.conn.api_read::<crate::stored::MessageGetJson>(&op, &body).await {
            Ok(answer) => Stored::from_leader(answer).map(Some),
            Err(Failure::Api(error)) if error.err_code == err_code::NO_MESSAGE_FOUND => Ok(None),
            Err(failure) => Err(failure),
        }
    }

    /// Purge the records of an overwrite log that its retention no longer
    /// keeps (they are already invisible: reads stop at `earliest`).
    pub(crate) fn purge_overwritten(&self, log: &str, keep: u64) -> Result<()> {
        self.purge(&serde_json::json!({ "filter": self.layout.data(log), "keep": keep }), &format!("trim log {log:?}"))
    }

    fn purge(&self, body: &serde_json::Value, operation: &str) -> Result<()> {
        let op = format!("STREAM.PURGE.{}", self.layout.stream);
        self.conn
            .block_on(self.conn.api::<serde_json::Value>(&op, body))
            .map(drop)
            .map_err(|f| f.into_log_error(self.target(), operation))
    }

    /// Raise `log`'s trim floor to `floor` (unless it is that high already)
    /// by a compare-and-set on its floor subject: floors only rise, however
    /// many clients trim at once. A lost answer or a floor moved by another
    /// client is read again and, if still lower, published again.
    /// `state` is the log's state just read (the first attempt's).
    fn raise_floor(&self, log: &str, floor: Seq, state: LogState) -> Result<()> {
        let subject = self.layout.floor(log);
        let operation = format!("trim log {log:?} before seq {floor}");
        let started = std::time::Instant::now();
        let mut attempt = 0;
        let config_sseq = state.config_sseq;
        let mut state = state;
        loop {
            attempt += 1;
            if attempt > 1 {
                state = self.refresh(log)?;
                if state.config_sseq != config_sseq {
                    return Err(self.not_found(log)); // deleted meanwhile (and perhaps created again)
                }
            }
            if state.floor >= floor {
                return Ok(());
            }
            let mut headers = HeaderMap::new();
            headers.insert("Nats-Expected-Last-Subject-Sequence", state.floor_sseq.to_string().as_str());
            headers.insert(SEQ_HEADER, floor.to_string().as_str());
            let answer = self.conn.block_on(async {
                let message = self.conn.request(subject.clone(), Some(headers), config_sseq.to_string().into()).await?;
                crate::conn::parse_answer::<PubAck>(&message.payload)
            });
            let failure = match answer {
                Ok(ack) => {
                    self.note_floor(log, state.config_sseq, floor, ack.seq);
                    return Ok(());
                }
                Err(Failure::NotSent(reason)) => match self.refusal_of_no_responders() {
                    Some(refusal) => return Err(refusal),
                    None => Failure::NotSent(reason),
                },
                Err(Failure::Api(error))
                    if matches!(
                        error.err_code,
                        err_code::WRONG_LAST_SEQUENCE | err_code::WRONG_LAST_SEQUENCE_CONSTANT
                    ) || error.code == 503
                        || error.err_code == err_code::CLUSTER_NOT_AVAILABLE =>
                {
                    Failure::Api(error)
                }
                Err(lost @ Failure::Lost(_)) => lost,
                Err(failure) => return Err(failure.into_log_error(self.target(), &operation)),
            };
            if started.elapsed() > self.conn.options.append_deadline {
                return Err(failure.into_log_error(self.target(), &operation));
            }
            std::thread::sleep(crate::conn::backoff(attempt));
        }
    }

    /// Record that `log`'s floor is at least `floor`, published at stream
    /// sequence `floor_sseq`.
    fn note_floor(&self, log: &str, config_sseq: u64, floor: Seq, floor_sseq: u64) {
        let mut cache = self.cache();
        let Some(state) = cache.get_mut(log).filter(|s| s.config_sseq == config_sseq) else { return };
        state.floor = state.floor.max(floor);
        state.floor_sseq = state.floor_sseq.max(floor_sseq);
    }
}

/// The configuration (its stream sequence, the payload) a floor message
/// was published for.
fn floor_config(message: &Stored) -> Option<u64> {
    std::str::from_utf8(&message.value).ok()?.parse().ok()
}

/// A direct get's answer: the message, or `None` for "404 no message".
fn direct_answer(message: async_nats::Message) -> Result<Option<Stored>, Failure> {
    match message.status.map(|s| s.as_u16()) {
        None | Some(200) => Stored::from_direct(message).map(Some),
        Some(404) => Ok(None),
        Some(code) => Err(Failure::Api(crate::conn::ApiError {
            code,
            err_code: 0,
            description: message.description.unwrap_or_default(),
        })),
    }
}

impl Namespace for NatsNamespace {
    fn name(&self) -> &str {
        &self.inner.name
    }

    fn create_log(&self, log: &str, config: LogConfig) -> Result<()> {
        rules::check_create(log, &config)?;
        let inner = &self.inner;
        match inner.refresh(log) {
            Ok(existing) => return rules::check_recreate(log, &existing.config, &config),
            Err(LogError::LogNotFound { .. }) => {}
            Err(error) => return Err(error),
        }
        inner.ensure_stream()?;
        let subject = inner.layout.config(log);
        let mut headers = HeaderMap::new();
        // Only the first creation lands; a racing one conflicts, and reads.
        headers.insert("Nats-Expected-Last-Subject-Sequence", "0");
        let payload = serde_json::to_vec(&ConfigJson::from(config)).unwrap_or_default();
        let payload = bytes::Bytes::from(payload);
        let started = std::time::Instant::now();
        let mut attempt = 0;
        // A stream just created may have no leader yet: its subjects have no
        // responders, or it answers 503, for a moment.
        let answer = loop {
            attempt += 1;
            let answer = inner.conn.block_on(async {
                let message = inner.conn.request(subject.clone(), Some(headers.clone()), payload.clone()).await?;
                crate::conn::parse_answer::<crate::stored::PubAck>(&message.payload)
            });
            let transient = match &answer {
                Err(Failure::NotSent(_)) => true,
                Err(Failure::Api(error)) => error.code == 503 || error.err_code == err_code::CLUSTER_NOT_AVAILABLE,
                _ => false,
            };
            if !transient || started.elapsed() > inner.conn.options.append_deadline {
                break answer;
            }
            std::thread::sleep(crate::conn::backoff(attempt));
        };
        match answer {
            Ok(_) => {
                inner.refresh_existing(log)?;
                Ok(())
            }
            Err(Failure::Api(error))
                if matches!(error.err_code, err_code::WRONG_LAST_SEQUENCE | err_code::WRONG_LAST_SEQUENCE_CONSTANT) =>
            {
                let existing = inner.refresh_existing(log)?;
                rules::check_recreate(log, &existing.config, &config)
            }
            Err(failure) => Err(failure.into_log_error(inner.target(), &format!("create log {log:?}"))),
        }
    }

    /// Refused: a log's name is its subjects (`varve.<ns>.d.<log>` and
    /// `.c.<log>`, see `names.rs`), and `JetStream` cannot move messages from
    /// one subject to another. A rename would copy every record to the new
    /// subjects, which is neither atomic across logs nor cheap, and a reader
    /// between the copy and the purge would see both. There is no catalog of
    /// names to change instead: the configuration subject *is* the catalog.
    fn rename_logs(&self, renames: &[(&str, &str)]) -> Result<()> {
        Err(LogError::Unsupported {
            target: self.inner.target().to_owned(),
            operation: format!("rename logs ({} in the call)", renames.len()),
            reason: "a NATS JetStream namespace names each log by its subjects, and messages cannot move between subjects, so a rename cannot be atomic: copy the records to a log of the new name and delete the old one, or keep the namespace on the journal or `varve serve` to rename logs".into(),
        })
    }

    /// Two steps: the floor is published (the commit: from then on every
    /// client that reads the log's state finds nothing below it), then
    /// the log's messages below record `before` are purged. A purge that
    /// fails is an error that says the floor holds: a client whose cached
    /// state predates the trim could still read those records until it
    /// reads the log's state again, and trimming again purges them.
    fn trim(&self, log: &str, before: Seq) -> Result<Seq> {
        let inner = &self.inner;
        let state = inner.refresh(log)?;
        let Some(before) = rules::check_trim(log, state.config.retention, before, state.earliest(), state.latest)?
        else {
            return Ok(state.earliest());
        };
        // Found before the floor hides it: the purge stops at its message.
        let record = inner.locate(log, &state, before)?;
        inner.raise_floor(log, before, state)?;
        let purge = serde_json::json!({ "filter": inner.layout.data(log), "seq": record.sseq });
        let operation = format!(
            "purge the records of log {log:?} below seq {before} (its trim floor holds: reads below it are \
             refused once the log's state is read again; trim again to purge them)"
        );
        inner.purge(&purge, &operation)?;
        Ok(inner.state(log)?.earliest())
    }

    fn delete_log(&self, log: &str) -> Result<()> {
        let inner = &self.inner;
        let state = inner.refresh(log)?;
        // The configuration first: the log is gone for every reader at once
        // (records and a floor older than a configuration are ignored). A
        // crash after it leaves messages no reader sees, purged when a log
        // of this name is deleted again.
        for subject in [inner.layout.config(log), inner.layout.data(log), inner.layout.floor(log)] {
            let op = format!("STREAM.PURGE.{}", inner.layout.stream);
            inner
                .conn
                .block_on(inner.conn.api::<serde_json::Value>(&op, &serde_json::json!({ "filter": subject })))
                .map_err(|f| f.into_log_error(inner.target(), &format!("delete log {log:?}")))?;
        }
        inner.forget(log);
        inner.deleted().insert(log.to_owned(), state.config_sseq);
        Ok(())
    }

    fn list_logs(&self) -> Result<Vec<LogInfo>> {
        let inner = &self.inner;
        let op = format!("STREAM.INFO.{}", inner.layout.stream);
        let info = inner.conn.block_on(
            inner.conn.api_read::<SubjectsInfo>(&op, &serde_json::json!({ "subjects_filter": inner.layout.configs() })),
        );
        let subjects = match info {
            Ok(info) => info.state.subjects.unwrap_or_default(),
            Err(Failure::Api(error)) if error.err_code == err_code::STREAM_NOT_FOUND => HashMap::new(),
            Err(failure) => return Err(failure.into_read_error(inner.target(), "list the logs")),
        };
        let mut names: Vec<String> = subjects.keys().filter_map(|s| inner.layout.log_of_config(s)).collect();
        names.sort();
        let mut logs = Vec::with_capacity(names.len());
        for name in names {
            match inner.refresh(&name) {
                Ok(state) => logs.push(state.info(&name)),
                // Deleted since the listing.
                Err(LogError::LogNotFound { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(logs)
    }

    fn log_info(&self, log: &str) -> Result<LogInfo> {
        Ok(self.inner.refresh(log)?.info(log))
    }

    fn append_batch(&self, batch: &[(&str, &[u8])]) -> Result<Vec<Seq>> {
        crate::append::append(&self.inner, batch, Expect::Nothing)
    }

    fn append_if(&self, log: &str, expected_latest: Seq, value: &[u8]) -> Result<Seq> {
        Ok(crate::append::append(&self.inner, &[(log, value)], Expect::Latest(expected_latest))?[0])
    }

    fn append_batch_if(&self, batch: &[(&str, &[u8])], expected: &[(&str, Seq)]) -> Result<Vec<Seq>> {
        crate::append::append(&self.inner, batch, Expect::Each(expected))
    }

    fn get(&self, log: &str, seq: Seq) -> Result<Bytes> {
        let inner = &self.inner;
        let mut state = inner.state(log)?;
        if seq > state.latest || seq < state.earliest() {
            state = inner.refresh(log)?;
        }
        rules::check_readable(log, seq, state.earliest(), state.latest)?;
        Ok(inner.locate(log, &state, seq)?.value)
    }

    fn scan(&self, log: &str, range: SeqRange) -> Result<Scan<'_>> {
        let state = self.inner.refresh(log)?;
        let Some((first, last)) = rules::clip_scan(log, range.first, range.last, state.earliest(), state.latest)?
        else {
            return Ok(Box::new(std::iter::empty()));
        };
        Ok(Box::new(NatsScan::new(Arc::clone(&self.inner), log, state, first, last)))
    }

    fn watch(&self, log: &str, from: Seq) -> Result<Watch> {
        let source = NatsWatch::start(Arc::clone(&self.inner), log)?;
        Ok(Watch::new(Box::new(source), from))
    }

    /// Nothing to do: an acknowledged append is already stored as the
    /// servers' `sync_interval` says (docs/nats.md, "Durability").
    fn sync(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{ClusterOptions, LocalCluster};

    /// A record's value with bytes a header block would treat specially.
    fn value(i: u64) -> Vec<u8> {
        format!("v{i}\r\nVarve-Seq: 999\r\n\r\n").into_bytes().into_iter().chain([0, 255]).collect()
    }

    /// The leader's answers (`STREAM.MSG.GET`: headers and payload in
    /// base64) read exactly as a replica's direct gets, for every record of
    /// a log interleaved with another's: what `locate` asks when a replica
    /// is behind the leader. Past the log's end the leader has nothing.
    #[test]
    fn the_leader_finds_each_record_as_a_replica_does() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let options = ClusterOptions { name: "leader".to_owned(), ..ClusterOptions::new(dir.path(), 1) };
        let cluster = LocalCluster::start(options).unwrap_or_else(|e| panic!("starting a nats-server: {e}"));
        let store = crate::NatsStore::open(&format!("{}?timeout_ms=30000", cluster.url())).expect("connect");
        let ns = store.nats_namespace("leaderreads").expect("a namespace");
        ns.create_log("a", LogConfig::unbounded()).expect("create a");
        ns.create_log("b", LogConfig::unbounded()).expect("create b");
        for i in 1..=40u64 {
            ns.append("a", &value(i)).expect("append to a");
            if i % 3 == 0 {
                ns.append_batch(&[("b", b"other"), ("a", b"")]).expect("a batch");
                ns.append("b", b"").expect("append to b");
            }
        }
        let inner = &ns.inner;
        inner.forget("a");
        let state = inner.state("a").expect("a's state");
        assert_eq!(state.latest, 53);
        for seq in 1..=state.latest {
            let replica = inner.search("a", &state, seq, Source::AnyReplica).expect("a direct get").expect("found");
            let leader = inner.search("a", &state, seq, Source::Leader).expect("the leader").expect("found");
            assert_eq!(leader.seq, seq);
            assert!(leader.append_id.is_some(), "seq {seq}: the append id header");
            assert_eq!(
                (leader.sseq, &leader.subject, leader.seq, &leader.append_id, &leader.value),
                (replica.sseq, &replica.subject, replica.seq, &replica.append_id, &replica.value),
                "seq {seq}"
            );
        }
        let past = inner.conn.block_on(inner.leader_next(&inner.layout.data("a"), state.latest_sseq + 1));
        assert!(past.expect("the leader answers").is_none(), "nothing after the last record");
    }
}
