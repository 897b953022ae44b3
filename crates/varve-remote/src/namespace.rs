//! [`RemoteNamespace`]: each method of the [`Namespace`] contract as its
//! request of `docs/http.md`, plus [`RemoteNamespace::append_batch_once`],
//! the append that is safe to send again.

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use bytes::Bytes;
use ureq::http::Method;
use varve_log::{validate_name, LogConfig, LogError, LogInfo, Namespace, Result, Scan, Seq, SeqRange, Watch};

use crate::client::{backoff, Answer, Call, Client, Effect, Failure};
use crate::scan::RemoteScan;
use crate::watch::RemoteWatch;
use crate::wire::{
    parse_json, AppendedJson, BatchAppendedJson, BatchJson, CreateJson, LogInfoJson, LogsJson, RenameJson, TrimJson,
    TrimmedJson,
};

/// Most sends of one [`RemoteNamespace::append_batch_once`], the first included.
pub const ONCE_ATTEMPTS_MAX: u32 = 8;

/// The wait before the first resend of an identified append; it doubles
/// for each further one, up to [`ONCE_BACKOFF_MAX`] (so the eight attempts
/// span about 5 s, long enough for a server to restart).
const ONCE_BACKOFF_FIRST: Duration = Duration::from_millis(50);

/// The longest wait between two sends of an identified append.
const ONCE_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Longest request id, in bytes (`docs/http.md`, "Appends and lost answers").
pub const REQUEST_ID_BYTES_MAX: usize = 128;

/// A namespace of a remote store: a handle that sends each operation to
/// the server. Cheap to clone; clones share the store's connection pool.
///
/// Every method blocks for one request (or, for `scan` and `watch`, until
/// the answer starts) and takes at most the store's timeout per attempt.
/// How failed requests are retried, and which errors say what, is in the
/// [crate documentation](crate).
#[derive(Clone, Debug)]
pub struct RemoteNamespace {
    client: Arc<Client>,
    name: String,
}

impl RemoteNamespace {
    /// A handle on namespace `name`, which must be valid; sends nothing.
    pub(crate) fn new(client: Arc<Client>, name: &str) -> RemoteNamespace {
        RemoteNamespace { client, name: name.to_owned() }
    }

    /// The store's URI, `varve://HOST:PORT`.
    #[must_use]
    pub fn target(&self) -> &str {
        self.client.target()
    }

    /// A log's URI, `varve://HOST:PORT/NAMESPACE/LOG`, as messages name it.
    #[must_use]
    pub fn log_uri(&self, log: &str) -> String {
        format!("{}/{}/{log}", self.client.target(), self.name)
    }

    /// Append a batch, all or nothing, **at most once** however often it is
    /// sent: the request carries `Varve-Request-Id: request_id`, and the
    /// server answers a repeat of an id with the first append's seqs instead
    /// of appending again (it remembers the last 16,384 ids of a namespace,
    /// across restarts). Returns the seqs, and whether this answer is such a
    /// repeat (the records landed on an earlier send, with this id).
    ///
    /// Because a resend is harmless, this one *is* resent when the
    /// connection fails, when the answer is lost, and when the server
    /// answers `unavailable` (it is stopping): up to [`ONCE_ATTEMPTS_MAX`]
    /// attempts, waiting 50 ms, then twice as long each time up to 2 s.
    /// If every attempt fails, the error is `OutcomeUnknown` when any of
    /// them may have reached the server (call again with the same id to
    /// find out), `Unavailable` when none did.
    ///
    /// `request_id` is 1 to [`REQUEST_ID_BYTES_MAX`] bytes of
    /// `A-Z a-z 0-9 . _ : -`, else `InvalidArgument`. Use a new id for
    /// each new batch: an id already used answers with its first seqs.
    pub fn append_batch_once(&self, batch: &[(&str, &[u8])], request_id: &str) -> Result<(Vec<Seq>, bool)> {
        self.append_batch_caused(batch, request_id, None)
    }

    /// [`RemoteNamespace::append_batch_once`] with a cause: `(event, trace)`,
    /// the event that caused the append as `HOST:NAMESPACE:SEQ` and its
    /// trace as hex (an external handler's `VARVE_EVENT_ID` and
    /// `VARVE_TRACE_ID`), sent as the `Varve-Cause` and `Varve-Trace`
    /// headers. The server records the append in that trace, so a handler on
    /// one host appending to another is one trace.
    pub fn append_batch_caused(
        &self,
        batch: &[(&str, &[u8])],
        request_id: &str,
        cause: Option<(&str, &str)>,
    ) -> Result<(Vec<Seq>, bool)> {
        check_request_id(request_id)?;
        let operation =
            format!("append a batch of {} records to namespace {:?} (request id {request_id})", batch.len(), self.name);
        let mut call = Call::new(Method::POST, self.path("/batch"), Effect::Once { operation })
            .json(&BatchJson::new(batch))
            .header("Varve-Request-Id", request_id.to_owned());
        if let Some((event, trace)) = cause {
            call = call.header("Varve-Cause", event.to_owned()).header("Varve-Trace", trace.to_owned());
        }
        let mut may_have_landed = false;
        let mut attempt = 1;
        loop {
            let failure = match self.client.exchange(&call) {
                Ok(answer) => {
                    let appended = self.batch_answer(&answer, batch.len())?;
                    return Ok((appended.seqs, appended.repeated));
                }
                Err(failure) => failure,
            };
            may_have_landed |= failure.may_have_landed();
            let resend = matches!(
                failure,
                Failure::NotSent(_) | Failure::AnswerLost(_) | Failure::Refused(LogError::Unavailable { .. })
            );
            if !resend || attempt >= ONCE_ATTEMPTS_MAX {
                return Err(self.client.error_for(failure.after_attempts(attempt), &call.effect, may_have_landed));
            }
            thread::sleep(backoff(ONCE_BACKOFF_FIRST, attempt - 1, ONCE_BACKOFF_MAX));
            attempt += 1;
        }
    }

    /// `/v1/namespaces/NS` and `suffix`. Names are checked against the
    /// naming rules (`[A-Za-z0-9_.-]`, not `.` or `..`) before they are put
    /// in a path, so they need no escaping.
    fn path(&self, suffix: &str) -> String {
        format!("/v1/namespaces/{}{suffix}", self.name)
    }

    /// `/v1/namespaces/NS/logs/LOG` and `suffix`, for a valid log name
    /// (`_` names included: the server decides who may touch those).
    fn log_path(&self, log: &str, suffix: &str) -> Result<String> {
        validate_name(log, true)?;
        Ok(self.path(&format!("/logs/{log}{suffix}")))
    }

    fn batch_answer(&self, answer: &Answer, records: usize) -> Result<BatchAppendedJson> {
        let appended: BatchAppendedJson = parse_json(self.target(), "the answer to a batch", &answer.body)?;
        if appended.seqs.len() != records {
            return Err(LogError::Protocol {
                target: self.target().to_owned(),
                reason: format!("a batch of {records} records was answered with {} seqs", appended.seqs.len()),
            });
        }
        Ok(appended)
    }

    fn appended(&self, answer: &Answer) -> Result<Seq> {
        Ok(parse_json::<AppendedJson>(self.target(), "the answer to an append", &answer.body)?.seq)
    }
}

impl Namespace for RemoteNamespace {
    fn name(&self) -> &str {
        &self.name
    }

    /// `PUT …/logs/LOG` with CONFIG. Resent after a connection failure: a
    /// create with the same config is idempotent.
    fn create_log(&self, log: &str, config: LogConfig) -> Result<()> {
        validate_name(log, config.system)?;
        let operation = format!("create log {log:?}");
        let call = Call::new(Method::PUT, self.log_path(log, "")?, Effect::Idempotent { operation })
            .json(&CreateJson::from(config));
        self.client.send(&call).map(drop)
    }

    /// `DELETE …/logs/LOG`. Never resent: a second delete would find no log
    /// (or delete a new one of the same name).
    fn delete_log(&self, log: &str) -> Result<()> {
        let operation = format!("delete log {log:?}");
        let call = Call::new(Method::DELETE, self.log_path(log, "")?, Effect::Once { operation });
        self.client.send(&call).map(drop)
    }

    /// `POST …/rename` with RENAMES. Checked here first (names, count,
    /// duplicates), so nothing is sent that would be refused for those; an
    /// empty list sends nothing. Never resent: a second rename would find
    /// its logs moved.
    fn rename_logs(&self, renames: &[(&str, &str)]) -> Result<()> {
        varve_log::rules::check_rename_arguments(renames)?;
        if renames.is_empty() {
            return Ok(());
        }
        let operation = format!("rename {} logs in namespace {:?}", renames.len(), self.name);
        let call =
            Call::new(Method::POST, self.path("/rename"), Effect::Once { operation }).json(&RenameJson::new(renames));
        self.client.send(&call).map(drop)
    }

    /// `POST …/logs/LOG/trim` with `{"before": N}`, answered with the new
    /// earliest (`{"earliest": N}`). Resent after a connection failure: a
    /// trim repeated is a no-op.
    fn trim(&self, log: &str, before: Seq) -> Result<Seq> {
        let operation = format!("trim log {log:?} before seq {before}");
        let call = Call::new(Method::POST, self.log_path(log, "/trim")?, Effect::Idempotent { operation })
            .json(&TrimJson { before });
        let answer = self.client.send(&call)?;
        Ok(parse_json::<TrimmedJson>(self.target(), "the answer to a trim", &answer.body)?.earliest)
    }

    fn list_logs(&self) -> Result<Vec<LogInfo>> {
        let answer = self.client.send(&Call::get(self.path("/logs")))?;
        let logs: LogsJson = parse_json(self.target(), "the list of logs", &answer.body)?;
        Ok(logs.logs.into_iter().map(LogInfo::from).collect())
    }

    fn log_info(&self, log: &str) -> Result<LogInfo> {
        let answer = self.client.send(&Call::get(self.log_path(log, "")?))?;
        Ok(parse_json::<LogInfoJson>(self.target(), "LOGINFO", &answer.body)?.into())
    }

    /// `POST …/logs/LOG/records` with the raw bytes. Never resent.
    fn append(&self, log: &str, value: &[u8]) -> Result<Seq> {
        let operation = format!("append to log {log:?}");
        let call = Call::new(Method::POST, self.log_path(log, "/records")?, Effect::Once { operation }).raw(value);
        self.appended(&self.client.send(&call)?)
    }

    /// `POST …/batch` with BATCH. Never resent; see
    /// [`RemoteNamespace::append_batch_once`] for an append that is.
    fn append_batch(&self, batch: &[(&str, &[u8])]) -> Result<Vec<Seq>> {
        let operation = format!("append a batch of {} records to namespace {:?}", batch.len(), self.name);
        let call =
            Call::new(Method::POST, self.path("/batch"), Effect::Once { operation }).json(&BatchJson::new(batch));
        Ok(self.batch_answer(&self.client.send(&call)?, batch.len())?.seqs)
    }

    /// `POST …/batch` with BATCH and `expected`. Never resent. The
    /// expectations are checked here first (each log must be one the batch
    /// writes), so a batch refused for them sends nothing.
    fn append_batch_if(&self, batch: &[(&str, &[u8])], expected: &[(&str, Seq)]) -> Result<Vec<Seq>> {
        varve_log::rules::check_expected_logs(batch, expected)?;
        let operation = format!("append a conditional batch of {} records to namespace {:?}", batch.len(), self.name);
        let body = BatchJson::new(batch).expecting(expected);
        let call = Call::new(Method::POST, self.path("/batch"), Effect::Once { operation }).json(&body);
        Ok(self.batch_answer(&self.client.send(&call)?, batch.len())?.seqs)
    }

    /// `POST …/logs/LOG/records?if_latest=N` with the raw bytes. Never resent.
    fn append_if(&self, log: &str, expected_latest: Seq, value: &[u8]) -> Result<Seq> {
        let operation = format!("append to log {log:?} if its latest seq is {expected_latest}");
        let path = self.log_path(log, &format!("/records?if_latest={expected_latest}"))?;
        let call = Call::new(Method::POST, path, Effect::Once { operation }).raw(value);
        self.appended(&self.client.send(&call)?)
    }

    fn get(&self, log: &str, seq: Seq) -> Result<Bytes> {
        let answer = self.client.send(&Call::get(self.log_path(log, &format!("/records/{seq}"))?))?;
        Ok(Bytes::from(answer.body))
    }

    /// `GET …/records?from=A&to=B`, read line by line as the iterator is
    /// driven. Errors before the first record (an unknown log, a trimmed
    /// start) are this call's; later ones are items, and a scan that was cut
    /// short ends with an error item saying so.
    fn scan(&self, log: &str, range: SeqRange) -> Result<Scan<'_>> {
        let to = if range.last == Seq::MAX { String::new() } else { format!("&to={}", range.last) };
        let query = format!("/records?from={}{to}", range.first);
        let body = self.client.open_stream(&Call::get(self.log_path(log, &query)?))?;
        Ok(Box::new(RemoteScan::new(body, self.target(), log)))
    }

    /// `GET …/watch?from=N` (Server-Sent Events), read by a thread of the
    /// watch's own; see the `watch` module for reconnection and stopping.
    fn watch(&self, log: &str, from: Seq) -> Result<Watch> {
        let from = from.max(1);
        let source = RemoteWatch::open(&self.client, self.log_path(log, "/watch")?, log, from)?;
        Ok(Watch::new(Box::new(source), from))
    }

    /// `POST …/sync`. Resent after a connection failure: syncing twice is
    /// syncing once.
    fn sync(&self) -> Result<()> {
        self.client.send(&Call::new(Method::POST, self.path("/sync"), Effect::Read)).map(drop)
    }
}

/// 1..=[`REQUEST_ID_BYTES_MAX`] bytes of `A-Z a-z 0-9 . _ : -`.
fn check_request_id(id: &str) -> Result<()> {
    let valid = !id.is_empty()
        && id.len() <= REQUEST_ID_BYTES_MAX
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'));
    if valid {
        Ok(())
    } else {
        Err(LogError::InvalidArgument {
            reason: format!(
                "request id {id:?} is not 1 to {REQUEST_ID_BYTES_MAX} of the characters A-Z a-z 0-9 . _ : -"
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RemoteOptions;

    fn namespace() -> RemoteNamespace {
        let client = Client::new(RemoteOptions::new("http://127.0.0.1:7070")).unwrap();
        RemoteNamespace::new(Arc::new(client), "sensors")
    }

    #[test]
    fn paths_and_uris() {
        let ns = namespace();
        assert_eq!(ns.log_uri("temperature"), "varve://127.0.0.1:7070/sensors/temperature");
        assert_eq!(ns.log_path("t", "/records/3").unwrap(), "/v1/namespaces/sensors/logs/t/records/3");
        assert_eq!(ns.log_path("_runtime.requests", "").unwrap(), "/v1/namespaces/sensors/logs/_runtime.requests");
        for bad in ["", "a/b", "..", "a?b", "a b", "%2e"] {
            assert!(matches!(ns.log_path(bad, ""), Err(LogError::InvalidName { .. })), "{bad:?}");
        }
    }

    #[test]
    fn request_ids_follow_the_rules() {
        for good in ["a", "sensor-7:1042", "A.b_c:d-e", &"x".repeat(REQUEST_ID_BYTES_MAX)] {
            assert!(check_request_id(good).is_ok(), "{good:?}");
        }
        for bad in ["", "a b", "a/b", "é", &"x".repeat(REQUEST_ID_BYTES_MAX + 1)] {
            assert!(matches!(check_request_id(bad), Err(LogError::InvalidArgument { .. })), "{bad:?}");
        }
    }

    #[test]
    fn names_are_checked_before_anything_is_sent() {
        // Nothing listens on this namespace's server: an error other than
        // InvalidName would mean a request was tried.
        let ns = namespace();
        assert!(matches!(ns.create_log("_x", LogConfig::unbounded()), Err(LogError::InvalidName { .. })));
        assert!(matches!(ns.append("a/b", b"x"), Err(LogError::InvalidName { .. })));
        assert!(matches!(ns.scan("..", SeqRange::ALL).map(drop), Err(LogError::InvalidName { .. })));
        assert!(matches!(ns.watch("", 1).map(drop), Err(LogError::InvalidName { .. })));
        assert!(matches!(ns.append_batch_once(&[("a", b"x")], "no spaces"), Err(LogError::InvalidArgument { .. })));
    }
}
