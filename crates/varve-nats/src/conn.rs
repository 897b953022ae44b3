//! [`Conn`]: one NATS connection, the runtime that drives it, and the
//! `JetStream` API requests the backend sends, with their failures told apart
//! (nothing sent, answer lost, refused) so callers can say what happened.

use std::future::Future;
use std::time::Duration;

use async_nats::header::HeaderMap;
use async_nats::{Client, ConnectOptions, Message, RequestErrorKind};
use bytes::Bytes;
use futures_util::StreamExt as _;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use varve_log::{LogError, Result};

use crate::options::NatsOptions;

/// Worker threads of each store's runtime: the client's I/O needs little.
const RUNTIME_THREADS: usize = 2;

/// The first wait for a read's answer; each retry of a lost one waits twice
/// as long (see [`Conn::read`]).
const READ_WAIT_FIRST: Duration = Duration::from_secs(1);

/// Why a request failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// It never reached a server that could act on it (not connected, no
    /// responders: no stream leader, or `JetStream` off): nothing happened.
    NotSent(String),
    /// It was sent but no answer came in time: it may have taken effect.
    Lost(String),
    /// `JetStream` answered with an error.
    Api(ApiError),
}

/// An error answer of the `JetStream` API.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct ApiError {
    /// The HTTP-like status (400, 404, 503 …).
    #[serde(default)]
    pub(crate) code: u16,
    /// `JetStream`'s own error number (10071 = wrong last sequence …).
    #[serde(default)]
    pub(crate) err_code: u32,
    #[serde(default)]
    pub(crate) description: String,
}

/// `JetStream`'s error numbers the backend acts on.
pub(crate) mod err_code {
    /// The stream does not exist.
    pub(crate) const STREAM_NOT_FOUND: u32 = 10059;
    /// Wrong last sequence: an expected-sequence check failed.
    pub(crate) const WRONG_LAST_SEQUENCE: u32 = 10071;
    /// Wrong last sequence while another write to the subject is in flight.
    pub(crate) const WRONG_LAST_SEQUENCE_CONSTANT: u32 = 10164;
    /// The stream already exists with another configuration.
    pub(crate) const STREAM_NAME_IN_USE: u32 = 10058;
    /// Insufficient resources, or the cluster has no leader for the request.
    pub(crate) const CLUSTER_NOT_AVAILABLE: u32 = 10008;
    /// No suitable peers for a stream's placement: too few servers, tags
    /// no server has, or (transient) peers the meta leader sees offline.
    pub(crate) const NO_SUITABLE_PEERS: u32 = 10005;
    /// A message exceeds the stream's or the server's size limit.
    pub(crate) const MESSAGE_TOO_LARGE: u32 = 10054;
    pub(crate) const NO_MESSAGE_FOUND: u32 = 10037;
}

impl Failure {
    /// The answer of a sent request that may have changed something.
    pub(crate) fn into_log_error(self, target: &str, operation: &str) -> LogError {
        match self {
            Failure::NotSent(reason) => LogError::Unavailable { target: target.to_owned(), reason },
            Failure::Lost(reason) => {
                LogError::OutcomeUnknown { target: target.to_owned(), operation: operation.to_owned(), reason }
            }
            Failure::Api(error) => error.into_log_error(target, operation),
        }
    }
}

impl Failure {
    /// The failure of a read: a lost answer changed nothing, so it is
    /// `Unavailable` like one never sent.
    pub(crate) fn into_read_error(self, target: &str, operation: &str) -> LogError {
        match self {
            Failure::Lost(reason) => LogError::Unavailable { target: target.to_owned(), reason },
            other => other.into_log_error(target, operation),
        }
    }
}

impl ApiError {
    /// Whether the cluster refused for a passing reason: no leader yet (503,
    /// 10008), or a replicated stream's placement while the meta leader sees
    /// a peer offline (10005 "… peer offline", as in a cluster just started
    /// or one whose server is restarting). Too few servers or tags no
    /// server has are also 10005, and stay until an operator acts.
    pub(crate) fn is_transient(&self) -> bool {
        self.code == 503
            || self.err_code == err_code::CLUSTER_NOT_AVAILABLE
            || (self.err_code == err_code::NO_SUITABLE_PEERS && self.description.contains("offline"))
    }

    pub(crate) fn into_log_error(self, target: &str, operation: &str) -> LogError {
        if self.is_transient() {
            return LogError::Unavailable {
                target: target.to_owned(),
                reason: format!(
                    "JetStream could not {operation}: {} (no leader yet, or a peer offline: try again once the \
                     cluster's servers are up)",
                    self.description
                ),
            };
        }
        LogError::Protocol {
            target: target.to_owned(),
            reason: format!("JetStream refused to {operation}: {} (error {})", self.description, self.err_code),
        }
    }
}

/// An API answer: the value, or `error`.
#[derive(Deserialize)]
struct Answer<T> {
    error: Option<ApiError>,
    #[serde(flatten)]
    value: Option<T>,
}

/// A connection to a NATS cluster with `JetStream`, and its runtime.
pub(crate) struct Conn {
    runtime: tokio::runtime::Runtime,
    pub(crate) client: Client,
    /// `$JS.API` or `$JS.<domain>.API`.
    api_prefix: String,
    pub(crate) options: NatsOptions,
    pub(crate) target: String,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn").field("target", &self.target).finish_non_exhaustive()
    }
}

impl Conn {
    /// Connect to `options.servers` and check that `JetStream` answers.
    pub(crate) fn connect(options: NatsOptions) -> Result<Conn> {
        let target = options.target();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(RUNTIME_THREADS)
            .thread_name("varve-nats")
            .enable_all()
            .build()
            .map_err(|e| LogError::Unavailable {
                target: target.clone(),
                reason: format!("cannot start a runtime: {e}"),
            })?;
        let urls: Vec<String> = options.servers.iter().map(|s| format!("nats://{s}")).collect();
        let connect = ConnectOptions::new()
            .name("varve")
            .connection_timeout(options.request_timeout)
            .request_timeout(Some(options.request_timeout))
            .connect(urls);
        let client = runtime.block_on(connect).map_err(|e| LogError::Unavailable {
            target: target.clone(),
            reason: format!("cannot connect ({e}); is nats-server running there (`varve nats up` starts one)?"),
        })?;
        let api_prefix = match &options.domain {
            Some(domain) => format!("$JS.{domain}.API"),
            None => "$JS.API".to_owned(),
        };
        let conn = Conn { runtime, client, api_prefix, options, target };
        conn.check_jetstream()?;
        Ok(conn)
    }

    /// `$JS.API.INFO` answers only where `JetStream` is on. In a cluster only
    /// the meta leader answers it, so it is asked as [`api_read`](Conn::api_read)
    /// asks: again while a leader is elected.
    fn check_jetstream(&self) -> Result<()> {
        #[derive(Deserialize)]
        struct AccountInfo {}
        match self.block_on(self.api_read::<AccountInfo>("INFO", &serde_json::json!({}))) {
            Ok(_) => Ok(()),
            Err(Failure::Lost(reason)) => Err(LogError::Unavailable {
                target: self.target.clone(),
                reason: format!(
                    "JetStream did not answer ({reason}): the servers may be electing a leader or lack a quorum; \
                     retry, or check their logs"
                ),
            }),
            Err(Failure::NotSent(reason)) => Err(LogError::Unavailable {
                target: self.target.clone(),
                reason: format!(
                    "JetStream does not answer ({reason}): start nats-server with JetStream on (-js, or a jetstream \
                     block in its config){}",
                    self.options.domain.as_deref().map(|d| format!(", in domain {d:?}")).unwrap_or_default()
                ),
            }),
            Err(Failure::Api(error)) => Err(error.into_log_error(&self.target, "read the account's JetStream info")),
        }
    }

    /// Run `future` to completion on this connection's runtime, also when
    /// called from inside another tokio runtime (then on a scoped thread).
    pub(crate) fn block_on<F: Future + Send>(&self, future: F) -> F::Output
    where
        F::Output: Send,
    {
        if tokio::runtime::Handle::try_current().is_ok() {
            std::thread::scope(|scope| {
                let handle = scope.spawn(|| self.runtime.block_on(future));
                match handle.join() {
                    Ok(output) => output,
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            })
        } else {
            self.runtime.block_on(future)
        }
    }

    /// The subject of `JetStream` API call `op` (`STREAM.INFO.NAME` …).
    pub(crate) fn api_subject(&self, op: &str) -> String {
        format!("{}.{op}", self.api_prefix)
    }

    /// Send a request and wait for its answer, up to the request timeout.
    pub(crate) async fn request(
        &self,
        subject: String,
        headers: Option<HeaderMap>,
        payload: Bytes,
    ) -> Result<Message, Failure> {
        self.request_within(subject, headers, payload, self.options.request_timeout).await
    }

    /// Send a request and wait up to `timeout` for its answer.
    async fn request_within(
        &self,
        subject: String,
        headers: Option<HeaderMap>,
        payload: Bytes,
        timeout: Duration,
    ) -> Result<Message, Failure> {
        let request = async_nats::Request::new().payload(payload).timeout(Some(timeout));
        let request = match headers {
            Some(headers) => request.headers(headers),
            None => request,
        };
        match self.client.send_request(subject, request).await {
            Ok(message) => {
                if message.status.is_some_and(|s| s.as_u16() == 503) {
                    return Err(Failure::NotSent("no server answers for it (no responders)".into()));
                }
                Ok(message)
            }
            Err(error) => Err(match error.kind() {
                RequestErrorKind::NoResponders => Failure::NotSent("no server answers for it (no responders)".into()),
                RequestErrorKind::TimedOut => Failure::Lost(format!("no answer within {timeout:?}")),
                RequestErrorKind::MaxPayloadExceeded => Failure::Api(ApiError {
                    code: 413,
                    err_code: err_code::MESSAGE_TOO_LARGE,
                    description: error.to_string(),
                }),
                _ => Failure::NotSent(error.to_string()),
            }),
        }
    }

    /// Call `JetStream` API `op` with a JSON body and read its JSON answer.
    pub(crate) async fn api<T: DeserializeOwned>(&self, op: &str, body: &impl Serialize) -> Result<T, Failure> {
        self.api_within(op, body, self.options.request_timeout).await
    }

    /// [`api`](Conn::api), waiting up to `timeout` for the answer.
    async fn api_within<T: DeserializeOwned>(
        &self,
        op: &str,
        body: &impl Serialize,
        timeout: Duration,
    ) -> Result<T, Failure> {
        let payload =
            serde_json::to_vec(body).map_err(|e| Failure::NotSent(format!("cannot encode the request: {e}")))?;
        let message = self.request_within(self.api_subject(op), None, payload.into(), timeout).await?;
        parse_answer(&message.payload)
    }

    /// Call `JetStream` API `op` that changes nothing and that only a leader
    /// answers (the account's info, stream names and info: the meta leader;
    /// a stream's messages by `STREAM.MSG.GET`: the stream's leader), as
    /// [`read`](Conn::read) asks: again while a leader is elected.
    pub(crate) async fn api_read<T: DeserializeOwned>(&self, op: &str, body: &impl Serialize) -> Result<T, Failure> {
        self.read(|wait| self.api_within(op, body, wait)).await
    }

    /// Send a request that changes nothing (a direct get), as
    /// [`read`](Conn::read) asks: again while its answer is lost.
    pub(crate) async fn request_read(&self, subject: String, payload: Bytes) -> Result<Message, Failure> {
        self.read(|wait| self.request_within(subject.clone(), None, payload.clone(), wait)).await
    }

    /// Run `attempt` (a request that changes nothing, given how long to wait
    /// for its answer) until it is answered, for up to three request
    /// timeouts, as a stream's creation is. A lost answer is asked again at
    /// once, each wait twice the last (from [`READ_WAIT_FIRST`] up to the
    /// request timeout): only a leader answers some requests, and the other
    /// servers drop them in silence, so one sent while a leader is elected
    /// is lost however long it waits; and a direct get goes to any replica
    /// of the stream, which may be one that stopped answering. A passing
    /// refusal (no leader yet) is asked again after a short pause.
    async fn read<T, F, A>(&self, mut attempt: A) -> Result<T, Failure>
    where
        A: FnMut(Duration) -> F,
        F: Future<Output = Result<T, Failure>>,
    {
        let timeout = self.options.request_timeout;
        let deadline = timeout * 3;
        let started = std::time::Instant::now();
        let mut wait = READ_WAIT_FIRST.min(timeout);
        let mut attempts: u32 = 0;
        loop {
            attempts += 1;
            let failure = match attempt(wait).await {
                Ok(value) => return Ok(value),
                Err(failure) => failure,
            };
            let lost = matches!(failure, Failure::Lost(_));
            if !lost && !matches!(&failure, Failure::Api(error) if error.is_transient()) {
                return Err(failure);
            }
            if !lost {
                tokio::time::sleep(backoff(attempts).min(deadline.saturating_sub(started.elapsed()))).await;
            }
            let left = deadline.saturating_sub(started.elapsed());
            if left.is_zero() {
                return Err(match failure {
                    Failure::Lost(reason) => Failure::Lost(format!(
                        "no answer to {attempts} requests over {:.1?}; the last: {reason}",
                        started.elapsed()
                    )),
                    refused => refused,
                });
            }
            wait = (wait * 2).min(timeout).min(left);
        }
    }

    /// Send `count` direct-get requests' worth of messages: a batch direct
    /// get (`batch`/`multi_last`) answers with several messages and an
    /// end-of-batch status; collect them until it, or until the timeout.
    /// It changes nothing, so it is asked as [`read`](Conn::read) asks.
    pub(crate) async fn direct_batch(&self, stream: &str, body: &serde_json::Value) -> Result<Vec<Message>, Failure> {
        self.read(|wait| self.direct_batch_within(stream, body, wait)).await
    }

    /// One [`direct_batch`](Conn::direct_batch) request, waiting up to
    /// `timeout` for each message.
    async fn direct_batch_within(
        &self,
        stream: &str,
        body: &serde_json::Value,
        timeout: Duration,
    ) -> Result<Vec<Message>, Failure> {
        let inbox = self.client.new_inbox();
        let mut subscriber = self
            .client
            .subscribe(inbox.clone())
            .await
            .map_err(|e| Failure::NotSent(format!("cannot subscribe: {e}")))?;
        let payload =
            serde_json::to_vec(body).map_err(|e| Failure::NotSent(format!("cannot encode the request: {e}")))?;
        self.client
            .publish_with_reply(self.api_subject(&format!("DIRECT.GET.{stream}")), inbox, payload.into())
            .await
            .map_err(|e| Failure::NotSent(format!("cannot send: {e}")))?;
        let mut messages = Vec::new();
        loop {
            let next = tokio::time::timeout(timeout, subscriber.next()).await;
            let Ok(Some(message)) = next else {
                return if messages.is_empty() {
                    Err(Failure::Lost(format!("no answer within {timeout:?}")))
                } else {
                    Err(Failure::Lost(format!("the batch stopped after {} messages", messages.len())))
                };
            };
            match message.status.map(|s| s.as_u16()) {
                // End of batch, or nothing at all.
                Some(204 | 404) => return Ok(messages),
                Some(503) => return Err(Failure::NotSent("no server answers for it (no responders)".into())),
                Some(408) => return Err(Failure::Api(api_error_of_status(&message))),
                _ => messages.push(message),
            }
        }
    }
}

fn api_error_of_status(message: &Message) -> ApiError {
    ApiError {
        code: message.status.map_or(0, |s| s.as_u16()),
        err_code: 0,
        description: message.description.clone().unwrap_or_default(),
    }
}

/// A `JetStream` API answer: `{"error": …}` or the value.
pub(crate) fn parse_answer<T: DeserializeOwned>(payload: &[u8]) -> Result<T, Failure> {
    let answer: Answer<T> = serde_json::from_slice(payload).map_err(|e| {
        Failure::Api(ApiError {
            code: 0,
            err_code: 0,
            description: format!("unreadable answer ({e}): {}", String::from_utf8_lossy(payload)),
        })
    })?;
    match (answer.error, answer.value) {
        (Some(error), _) => Err(Failure::Api(error)),
        (None, Some(value)) => Ok(value),
        (None, None) => Err(Failure::Api(ApiError { code: 0, err_code: 0, description: "an empty answer".into() })),
    }
}

/// A short pause before the next attempt, growing with `attempt`.
pub(crate) fn backoff(attempt: u32) -> Duration {
    Duration::from_millis((10u64 << attempt.min(6)).min(500))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(code: u16, err_code: u32, description: &str) -> LogError {
        ApiError { code, err_code, description: description.into() }.into_log_error("nats://x", "create stream S")
    }

    /// A placement refused while a peer is offline passes (a cluster just
    /// started); one refused for too few servers does not, and says so.
    #[test]
    fn placement_refusals_are_told_apart() {
        let offline = refusal(500, 10005, "no suitable peers for placement, peer offline");
        assert!(matches!(offline, LogError::Unavailable { .. }), "{offline:?}");
        let too_few = refusal(500, 10005, "no suitable peers for placement, insufficient resources");
        assert!(
            matches!(&too_few, LogError::Protocol { reason, .. } if reason.contains("insufficient")),
            "{too_few:?}"
        );
        assert!(matches!(refusal(503, 0, "no responders"), LogError::Unavailable { .. }));
        assert!(matches!(refusal(500, 10008, "JetStream cluster not available"), LogError::Unavailable { .. }));
    }
}
