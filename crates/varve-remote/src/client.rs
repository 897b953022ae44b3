//! HTTP plumbing: the one shared `ureq` agent (a keep-alive connection
//! pool), how a request is sent, how a failed exchange is classified, and
//! which requests are sent again.
//!
//! The classification is the heart of the crate's error promise. A request
//! that failed without an answer is one of:
//!
//! - **not sent**: nothing reached the server (connection refused, name not
//!   resolved, connect timeout). `Unavailable` may say "nothing was done".
//! - **answer lost**: the request may have reached the server (the
//!   connection broke after connecting). For a write this is
//!   `OutcomeUnknown`: it may have landed.
//! - **timed out**: no answer within the timeout; like a lost answer, but
//!   never sent again: the server is there, and slow.
//! - **garbled**: an answer came that is not HTTP this client reads.
//! - **rejected**: the TLS handshake failed in a way a resend cannot mend
//!   (a certificate that is not trusted, a server without TLS); nothing
//!   was sent (`crate::tls`).
//!
//! When `ureq`'s error does not say which, the failure is "answer lost":
//! this crate never claims that nothing was done unless that is true.

use std::thread;
use std::time::Duration;

use serde::Serialize;
use ureq::http::{self, Method, Response};
use ureq::tls::TlsConfig;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};
use ureq::{Agent, Body, BodyReader, Timeout};
use varve_log::{LogError, Result};

use crate::errors::error_from_answer;
use crate::lines::RECORD_BYTES_MAX;
use crate::tls;
use crate::uri::{Endpoint, RemoteOptions};

/// Most sends of a request that is safe to resend after a connection
/// failure, beyond the first: reads, `sync`, `create_log`.
pub(crate) const RETRIES_MAX: u32 = 3;

/// The wait before the first resend; it doubles for each further one.
const RETRY_BACKOFF_FIRST: Duration = Duration::from_millis(50);

/// The longest wait between two resends.
const RETRY_BACKOFF_MAX: Duration = Duration::from_millis(400);

/// Longest wait for a TCP connection, capped at half the request timeout.
/// It must be shorter than the request timeout: then a server that cannot be
/// reached times out *connecting* (nothing sent, `Unavailable`) rather than
/// on the request as a whole (which could be after sending: `OutcomeUnknown`).
const CONNECT_TIMEOUT_MAX: Duration = Duration::from_secs(10);

/// Bodies from this size on are sent with `Expect: 100-continue`: the server
/// then refuses one it will not take (`too_large`, a bad token) before the
/// body is sent. Without it the server answers and closes while the body is
/// still being written, the write fails, and the refusal is lost: an append
/// that surely did not land would read as `OutcomeUnknown`. Small bodies go
/// without it, to spare the round trip (and the server reads them whole).
const EXPECT_CONTINUE_BYTES_MIN: usize = 1 << 20;

/// Idle keep-alive connections kept to the server, so that this many threads
/// sharing one store reuse connections instead of opening new ones.
const IDLE_CONNECTIONS_MAX: usize = 16;

/// Longest time an idle keep-alive connection is kept for reuse. `varve
/// serve` closes a connection that sends no request for 10 s (its header
/// read timeout); a request sent on one just as the server closes it breaks,
/// and an append's answer would read as lost. Half that leaves a margin.
const IDLE_AGE_MAX: Duration = Duration::from_secs(5);

/// Longest answer body read whole: a record read with `get` (records are
/// limited to [`RECORD_BYTES_MAX`]); JSON answers are far smaller.
const ANSWER_BYTES_MAX: u64 = RECORD_BYTES_MAX as u64;

/// Longest error answer read; an error object with its message is < 1 KiB.
const ERROR_ANSWER_BYTES_MAX: u64 = 1 << 20;

/// What a request does to the store, which decides whether it is sent again
/// after a connection failure and what a failure that remains means.
#[derive(Clone, Debug)]
pub(crate) enum Effect {
    /// Changes nothing a reader sees (reads, `sync`): resent up to
    /// [`RETRIES_MAX`] times; a failure that remains is `Unavailable`.
    Read,
    /// Changes the store, but landing twice is landing once (`create_log`
    /// with one config): resent like a read. A failure that remains is
    /// `OutcomeUnknown` if any attempt may have reached the server.
    Idempotent {
        /// What it does, as a phrase (`"create log t"`).
        operation: String,
    },
    /// Changes the store each time it lands (appends, `delete_log`): sent
    /// once; a lost answer is `OutcomeUnknown`.
    Once {
        /// What it does, as a phrase (`"append to log t"`).
        operation: String,
    },
}

/// A request's body.
#[derive(Debug)]
pub(crate) enum Payload<'a> {
    Empty,
    /// A record's raw bytes (`application/octet-stream`).
    Raw(&'a [u8]),
    /// A JSON document (`application/json`).
    Json(Vec<u8>),
}

impl Payload<'_> {
    fn len(&self) -> usize {
        match self {
            Payload::Empty => 0,
            Payload::Raw(bytes) => bytes.len(),
            Payload::Json(bytes) => bytes.len(),
        }
    }
}

/// One request of the API, kept so that it can be built again for a resend.
#[derive(Debug)]
pub(crate) struct Call<'a> {
    pub(crate) method: Method,
    /// The path and query, starting with `/`.
    pub(crate) path: String,
    pub(crate) payload: Payload<'a>,
    pub(crate) headers: Vec<(&'static str, String)>,
    pub(crate) effect: Effect,
}

impl<'a> Call<'a> {
    /// A request without a body or extra headers.
    pub(crate) fn new(method: Method, path: String, effect: Effect) -> Call<'a> {
        Call { method, path, payload: Payload::Empty, headers: Vec::new(), effect }
    }

    /// A `GET`: a read.
    pub(crate) fn get(path: String) -> Call<'a> {
        Call::new(Method::GET, path, Effect::Read)
    }

    /// The same request with a raw body.
    pub(crate) fn raw(self, bytes: &'a [u8]) -> Call<'a> {
        Call { payload: Payload::Raw(bytes), ..self }
    }

    /// The same request with a JSON body.
    pub(crate) fn json(self, document: &impl Serialize) -> Call<'a> {
        // Serializing the crate's own plain structs cannot fail (no maps with
        // non-string keys, no failing `Serialize` impls).
        let bytes = serde_json::to_vec(document).unwrap_or_else(|e| unreachable!("JSON of a wire struct: {e}"));
        Call { payload: Payload::Json(bytes), ..self }
    }

    /// The same request with one more header.
    pub(crate) fn header(mut self, name: &'static str, value: String) -> Call<'a> {
        self.headers.push((name, value));
        self
    }
}

/// A request that got no usable answer, or an answer that is an error.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Nothing reached the server.
    NotSent(String),
    /// The request may have reached the server; its answer did not come back whole.
    AnswerLost(String),
    /// No answer within the timeout. The request may have reached the server,
    /// which is then alive but slow: it is not sent again, as the timeout is
    /// the caller's bound on waiting.
    TimedOut(String),
    /// An answer came that is not HTTP (or not an answer) this client reads.
    Garbled(String),
    /// The server answered with an error.
    Refused(LogError),
    /// Nothing was sent, and a resend would fail the same way: the TLS
    /// handshake failed for good (see `crate::tls`).
    Rejected(String),
}

impl Failure {
    /// A failure worth a resend of a request that is safe to resend.
    fn is_transient(&self) -> bool {
        matches!(self, Failure::NotSent(_) | Failure::AnswerLost(_))
    }

    /// The same failure, its reason saying how many attempts were made
    /// when there were several.
    pub(crate) fn after_attempts(self, attempts: u32) -> Failure {
        match self {
            Failure::NotSent(reason) if attempts > 1 => Failure::NotSent(format!("{reason} ({attempts} attempts)")),
            Failure::AnswerLost(reason) if attempts > 1 => {
                Failure::AnswerLost(format!("{reason} ({attempts} attempts)"))
            }
            Failure::TimedOut(reason) if attempts > 1 => Failure::TimedOut(format!("{reason} ({attempts} attempts)")),
            other => other,
        }
    }

    /// May the request have changed the store?
    pub(crate) fn may_have_landed(&self) -> bool {
        matches!(self, Failure::AnswerLost(_) | Failure::TimedOut(_) | Failure::Garbled(_))
    }
}

/// A 2xx answer, read whole.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) body: Vec<u8>,
}

/// Timeouts of a streamed answer (a scan or a watch), which may last long:
/// no bound on the whole, only on each wait for more bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StreamTimeouts {
    /// Longest wait for the answer's headers.
    pub(crate) answer: Duration,
    /// Longest wait for each read of the body.
    pub(crate) read: Duration,
}

/// The server, as every namespace of one store talks to it.
pub(crate) struct Client {
    agent: Agent,
    /// The TLS settings of every agent (used only for `https://`).
    tls: TlsConfig,
    base_url: String,
    target: String,
    authorization: Option<String>,
    timeout: Duration,
}

/// The token is a secret: only the target is printed.
impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("target", &self.target).field("timeout", &self.timeout).finish_non_exhaustive()
    }
}

impl Client {
    /// A client for `options`; checks the address and the token, and reads
    /// the CA file of a TLS one; sends nothing.
    pub(crate) fn new(options: RemoteOptions) -> Result<Client> {
        let endpoint = Endpoint::from_base(&options.base)?;
        if let Some(token) = &options.token {
            if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(LogError::InvalidArgument {
                    reason: "a token is one word of printable ASCII (no spaces or control characters)".into(),
                });
            }
        }
        if options.timeout.is_zero() {
            return Err(LogError::InvalidArgument { reason: "the request timeout must be above zero".into() });
        }
        let tls = if endpoint.tls() { tls::config(options.tls_ca.as_deref())? } else { TlsConfig::default() };
        Ok(Client {
            agent: new_agent(options.timeout, None, &tls),
            tls,
            base_url: endpoint.base_url(),
            target: endpoint.target(),
            authorization: options.token.map(|token| format!("Bearer {token}")),
            timeout: options.timeout,
        })
    }

    /// The store's URI, `varve://HOST:PORT`: the target of every error.
    pub(crate) fn target(&self) -> &str {
        &self.target
    }

    /// A new agent of its own for a watch, whose long-lived connection can
    /// then be shut down (`Agent::shutdown`) without touching the shared pool.
    pub(crate) fn watch_agent(&self, read_timeout: Duration) -> Agent {
        new_agent(self.timeout, Some(StreamTimeouts { answer: self.timeout, read: read_timeout }), &self.tls)
    }

    /// Send `call`, resending it as its effect allows, and read its answer whole.
    pub(crate) fn send(&self, call: &Call<'_>) -> Result<Answer> {
        self.with_retries(&call.effect, || self.exchange(call))
    }

    /// Send `call` (a read) on the shared pool and return its streamed body
    /// once a 2xx answer has begun; resent like any read until then.
    pub(crate) fn open_stream(&self, call: &Call<'_>) -> Result<BodyReader<'static>> {
        let timeouts = StreamTimeouts { answer: self.timeout, read: self.timeout };
        self.with_retries(&call.effect, || self.open_stream_once(&self.agent, call, Some(timeouts)))
    }

    /// Send `call` (a read) on a watch's own `agent` and return its streamed
    /// body once a 2xx answer has begun; resent like any read until then.
    pub(crate) fn open_watch_stream(&self, agent: &Agent, call: &Call<'_>) -> Result<BodyReader<'static>> {
        self.with_retries(&call.effect, || self.open_stream_once(agent, call, None))
    }

    /// Send `call` once on `agent` and return its streamed body once a 2xx
    /// answer has begun. `timeouts` overrides the agent's for this request.
    pub(crate) fn open_stream_once(
        &self,
        agent: &Agent,
        call: &Call<'_>,
        timeouts: Option<StreamTimeouts>,
    ) -> Result<BodyReader<'static>, Failure> {
        let response = self.start(agent, call, timeouts)?;
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            Ok(response.into_body().into_reader())
        } else {
            Err(self.refusal(status, response))
        }
    }

    /// The error a failure that remains stands for, for a request with `effect`.
    /// `may_have_landed` says whether any attempt may have reached the server.
    pub(crate) fn error_for(&self, failure: Failure, effect: &Effect, may_have_landed: bool) -> LogError {
        let target = self.target.clone();
        match (failure, effect) {
            (Failure::Refused(error), _) => error,
            (Failure::Rejected(reason), _) => LogError::Unavailable { target, reason },
            (Failure::Garbled(reason), Effect::Read) => LogError::Protocol { target, reason },
            (Failure::NotSent(reason) | Failure::AnswerLost(reason) | Failure::TimedOut(reason), Effect::Read) => {
                LogError::Unavailable { target, reason }
            }
            (Failure::NotSent(reason), Effect::Idempotent { .. } | Effect::Once { .. }) if !may_have_landed => {
                LogError::Unavailable { target, reason }
            }
            (
                Failure::NotSent(reason)
                | Failure::AnswerLost(reason)
                | Failure::TimedOut(reason)
                | Failure::Garbled(reason),
                Effect::Idempotent { operation } | Effect::Once { operation },
            ) => LogError::OutcomeUnknown { target, operation: operation.clone(), reason },
        }
    }

    fn with_retries<T>(&self, effect: &Effect, mut attempt: impl FnMut() -> Result<T, Failure>) -> Result<T> {
        let resendable = matches!(effect, Effect::Read | Effect::Idempotent { .. });
        let mut may_have_landed = false;
        let mut retry = 0;
        loop {
            let failure = match attempt() {
                Ok(done) => return Ok(done),
                Err(failure) => failure,
            };
            may_have_landed |= failure.may_have_landed();
            if !(resendable && failure.is_transient() && retry < RETRIES_MAX) {
                return Err(self.error_for(failure.after_attempts(retry + 1), effect, may_have_landed));
            }
            thread::sleep(backoff(RETRY_BACKOFF_FIRST, retry, RETRY_BACKOFF_MAX));
            retry += 1;
        }
    }

    /// One exchange on the shared pool, its answer read whole; never resent.
    pub(crate) fn exchange(&self, call: &Call<'_>) -> Result<Answer, Failure> {
        let mut response = self.start(&self.agent, call, None)?;
        let status = response.status().as_u16();
        if !(200..300).contains(&status) {
            return Err(self.refusal(status, response));
        }
        match response.body_mut().with_config().limit(ANSWER_BYTES_MAX).read_to_vec() {
            Ok(body) => Ok(Answer { body }),
            Err(ureq::Error::BodyExceedsLimit(limit)) => {
                Err(Failure::Garbled(format!("status {status} with an answer longer than {limit} bytes")))
            }
            Err(e @ ureq::Error::Timeout(_)) => {
                Err(Failure::TimedOut(format!("the answer (status {status}) stalled: {e}")))
            }
            Err(e) => Err(Failure::AnswerLost(format!("the answer (status {status}) broke off: {e}"))),
        }
    }

    /// The error an answer with a non-2xx `status` stands for.
    fn refusal(&self, status: u16, mut response: Response<Body>) -> Failure {
        let error = match response.body_mut().with_config().limit(ERROR_ANSWER_BYTES_MAX).read_to_vec() {
            Ok(body) => error_from_answer(&self.target, status, &body),
            Err(e) => LogError::Protocol {
                target: self.target.clone(),
                reason: format!("status {status}, and its error could not be read: {e}"),
            },
        };
        Failure::Refused(error)
    }

    /// Send the request and wait for the answer's status and headers.
    fn start(
        &self,
        agent: &Agent,
        call: &Call<'_>,
        timeouts: Option<StreamTimeouts>,
    ) -> Result<Response<Body>, Failure> {
        let mut builder =
            http::Request::builder().method(call.method.clone()).uri(format!("{}{}", self.base_url, call.path));
        if let Some(authorization) = &self.authorization {
            builder = builder.header(http::header::AUTHORIZATION, authorization);
        }
        for (name, value) in &call.headers {
            builder = builder.header(*name, value);
        }
        if call.payload.len() >= EXPECT_CONTINUE_BYTES_MIN {
            builder = builder.header(http::header::EXPECT, "100-continue");
        }
        let built = |e: http::Error| Failure::NotSent(format!("the request could not be built: {e}"));
        let sent = match &call.payload {
            // An empty POST or PUT goes with `Content-Length: 0`. Without a body
            // ureq sends it chunked, its closing chunk in a write of its own, and
            // a server that answers before that chunk arrives (`POST …/sync` reads
            // no body) must close the connection after its answer: the next
            // request, sent on it from the pool, then breaks, and a write's
            // answer reads as lost (`OutcomeUnknown`).
            Payload::Empty if matches!(call.method, Method::POST | Method::PUT) => {
                agent.run(configure(agent, builder.body(&[][..]).map_err(built)?, timeouts))
            }
            Payload::Empty => agent.run(configure(agent, builder.body(()).map_err(built)?, timeouts)),
            Payload::Raw(bytes) => {
                let request = builder.header(http::header::CONTENT_TYPE, "application/octet-stream").body(*bytes);
                agent.run(configure(agent, request.map_err(built)?, timeouts))
            }
            Payload::Json(bytes) => {
                let request = builder.header(http::header::CONTENT_TYPE, "application/json").body(bytes.as_slice());
                agent.run(configure(agent, request.map_err(built)?, timeouts))
            }
        };
        sent.map_err(classify)
    }
}

/// The request with streaming timeouts, when given, in place of the agent's.
fn configure<S: ureq::AsSendBody>(
    agent: &Agent,
    request: http::Request<S>,
    timeouts: Option<StreamTimeouts>,
) -> http::Request<S> {
    match timeouts {
        None => request,
        Some(timeouts) => agent
            .configure_request(request)
            .timeout_global(None)
            .timeout_recv_response(Some(timeouts.answer))
            .timeout_per_read(Some(timeouts.read))
            .build(),
    }
}

/// An agent whose requests each take at most `timeout`, or that streams
/// with `streaming`'s timeouts, and that makes TLS connections with `tls`.
/// Non-2xx answers are answers, not errors, so that their JSON error bodies
/// can be read. No proxy: `varve://` addresses are reached directly,
/// whatever `HTTP_PROXY` says.
fn new_agent(timeout: Duration, streaming: Option<StreamTimeouts>, tls: &TlsConfig) -> Agent {
    let builder = Agent::config_builder()
        .tls_config(tls.clone())
        .http_status_as_error(false)
        .proxy(None)
        .max_idle_connections(IDLE_CONNECTIONS_MAX)
        .max_idle_connections_per_host(IDLE_CONNECTIONS_MAX)
        .max_idle_age(IDLE_AGE_MAX)
        .timeout_connect(Some(CONNECT_TIMEOUT_MAX.min(timeout / 2)))
        .user_agent(concat!("varve-remote/", env!("CARGO_PKG_VERSION")));
    let builder = match streaming {
        None => builder.timeout_global(Some(timeout)),
        Some(timeouts) => builder.timeout_recv_response(Some(timeouts.answer)).timeout_per_read(Some(timeouts.read)),
    };
    Agent::with_parts(builder.build(), DefaultConnector::default(), LiteralResolver(DefaultResolver::default()))
}

/// `ureq`'s resolver, except that an IP address in the URI is used as it is.
///
/// `ureq` resolves the URI's host on every request, before it looks for a
/// pooled connection, and when the request has a timeout (every request
/// here does) its default resolver does so on a thread it spawns for the
/// purpose, so that the lookup can be abandoned — also for an IP address,
/// which needs no lookup. That thread is created and ended per request: on
/// loopback it doubled the time of a `get` (`docs/benchmarks.md`, "varve
/// serve"). Host names still go to the default resolver, timeout and all.
/// (`ureq`'s resolver API is outside its semver promise: an update of
/// `ureq` may need this adapted.)
#[derive(Debug)]
struct LiteralResolver(DefaultResolver);

impl Resolver for LiteralResolver {
    fn resolve(
        &self,
        uri: &http::Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let literal = uri.authority().and_then(|authority| {
            let host = authority.host().trim_start_matches('[').trim_end_matches(']');
            let ip = host.parse::<std::net::IpAddr>().ok()?;
            let port = authority.port_u16().or_else(|| match uri.scheme_str() {
                Some("https") => Some(443),
                _ => Some(80),
            })?;
            Some(std::net::SocketAddr::new(ip, port))
        });
        match literal {
            Some(addr) => {
                let mut addrs = self.empty();
                addrs.push(addr);
                Ok(addrs)
            }
            None => self.0.resolve(uri, config, timeout),
        }
    }
}

/// Which failure a `ureq` error is. Only errors raised before a connection
/// exists are "not sent"; an I/O error on a connection may come after the
/// server read the request, and so does any error this does not know.
pub(crate) fn classify(error: ureq::Error) -> Failure {
    use std::io::ErrorKind;
    if let Some(failure) = tls::handshake_failure(&error) {
        return failure;
    }
    let reason = error.to_string();
    match error {
        ureq::Error::Io(e)
            if matches!(
                e.kind(),
                ErrorKind::ConnectionRefused
                    | ErrorKind::HostUnreachable
                    | ErrorKind::NetworkUnreachable
                    | ErrorKind::AddrNotAvailable
                    | ErrorKind::NotConnected
            ) =>
        {
            Failure::NotSent(reason)
        }
        ureq::Error::HostNotFound
        | ureq::Error::ConnectionFailed
        | ureq::Error::Timeout(Timeout::Resolve | Timeout::Connect)
        | ureq::Error::BadUri(_)
        | ureq::Error::Http(_)
        | ureq::Error::RequireHttpsOnly(_)
        | ureq::Error::InvalidProxyUrl
        | ureq::Error::ConnectProxyFailed(_)
        | ureq::Error::TlsRequired
        | ureq::Error::Tls(_)
        | ureq::Error::Rustls(_) => Failure::NotSent(reason),
        ureq::Error::Timeout(_) => Failure::TimedOut(reason),
        ureq::Error::Protocol(_) | ureq::Error::LargeResponseHeader(..) => Failure::Garbled(reason),
        _ => Failure::AnswerLost(reason),
    }
}

/// The wait before resend number `retry` (0 for the first): `first`
/// doubled `retry` times, at most `max`.
pub(crate) fn backoff(first: Duration, retry: u32, max: Duration) -> Duration {
    first.saturating_mul(1 << retry.min(16)).min(max)
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::net::TcpListener;

    use super::*;

    #[test]
    fn ip_addresses_are_not_looked_up() {
        let resolver = LiteralResolver(DefaultResolver::default());
        let config = ureq::config::Config::default();
        let resolve = |uri: &str| {
            let uri: http::Uri = uri.parse().unwrap();
            resolver.resolve(&uri, &config, NextTimeout::default()).unwrap().to_vec()
        };
        assert_eq!(resolve("http://127.0.0.1:7070/healthz"), ["127.0.0.1:7070".parse().unwrap()]);
        assert_eq!(resolve("http://[::1]:7070/x"), ["[::1]:7070".parse().unwrap()]);
        assert_eq!(resolve("http://127.0.0.1/x"), ["127.0.0.1:80".parse().unwrap()]);
        assert!(resolve("http://localhost:7070/x").iter().all(|addr| addr.port() == 7070 && addr.ip().is_loopback()));
    }

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let waits: Vec<_> =
            (0..9).map(|retry| backoff(Duration::from_millis(50), retry, Duration::from_secs(2)).as_millis()).collect();
        assert_eq!(waits, [50, 100, 200, 400, 800, 1600, 2000, 2000, 2000]);
        assert_eq!(backoff(Duration::from_millis(50), u32::MAX, Duration::from_secs(1)), Duration::from_secs(1));
    }

    #[test]
    fn only_errors_before_a_connection_are_not_sent() {
        let io = |kind| ureq::Error::Io(io::Error::from(kind));
        assert!(matches!(classify(io(io::ErrorKind::ConnectionRefused)), Failure::NotSent(_)));
        assert!(matches!(classify(ureq::Error::Timeout(Timeout::Connect)), Failure::NotSent(_)));
        assert!(matches!(classify(ureq::Error::HostNotFound), Failure::NotSent(_)));
        assert!(matches!(classify(io(io::ErrorKind::ConnectionReset)), Failure::AnswerLost(_)));
        assert!(matches!(classify(io(io::ErrorKind::BrokenPipe)), Failure::AnswerLost(_)));
        assert!(matches!(classify(io(io::ErrorKind::UnexpectedEof)), Failure::AnswerLost(_)));
        assert!(matches!(classify(ureq::Error::Timeout(Timeout::Global)), Failure::TimedOut(_)));
        assert!(matches!(classify(ureq::Error::Timeout(Timeout::RecvResponse)), Failure::TimedOut(_)));
    }

    fn client_for(base: &str) -> Client {
        Client::new(RemoteOptions { timeout: Duration::from_secs(5), ..RemoteOptions::new(base) }).unwrap()
    }

    /// A port on which nothing listens: bound, then closed.
    fn closed_port() -> u16 {
        TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
    }

    #[test]
    fn a_refused_connection_is_unavailable_for_reads_and_writes() {
        let client = client_for(&format!("http://127.0.0.1:{}", closed_port()));
        let err = client.send(&Call::get("/healthz".into())).unwrap_err();
        assert!(
            matches!(&err, LogError::Unavailable { target, reason } if target.starts_with("varve://127.0.0.1:") && reason.contains("4 attempts")),
            "{err}"
        );
        let append = Call::new(Method::POST, "/v1/x".into(), Effect::Once { operation: "append to log t".into() });
        let err = client.send(&append.raw(b"x")).unwrap_err();
        assert!(matches!(&err, LogError::Unavailable { reason, .. } if !reason.contains("attempts")), "{err}");
    }

    #[test]
    fn a_request_that_times_out_is_not_sent_again() {
        // A "server" that reads each request and never answers.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = thread::spawn(move || {
            let mut held = Vec::new();
            for _ in 0..2 {
                let (mut stream, _) = listener.accept().unwrap();
                let mut request = [0; 4096];
                let _ = io::Read::read(&mut stream, &mut request);
                held.push(stream);
            }
            held
        });
        let client =
            Client::new(RemoteOptions { timeout: Duration::from_millis(300), ..RemoteOptions::new(base) }).unwrap();
        let err = client.send(&Call::get("/v1/namespaces".into())).unwrap_err();
        assert!(matches!(&err, LogError::Unavailable { reason, .. } if !reason.contains("attempts")), "{err}");
        let append = Call::new(Method::POST, "/v1/x".into(), Effect::Once { operation: "append to log t".into() });
        let err = client.send(&append.raw(b"x")).unwrap_err();
        assert!(matches!(&err, LogError::OutcomeUnknown { .. }), "{err}");
        drop(server.join().unwrap());
    }

    #[test]
    fn an_empty_post_says_its_length_instead_of_being_chunked() {
        // A "server" that reads one request head and answers 204, returning the head.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut head = Vec::new();
            let mut byte = [0; 1];
            while !head.ends_with(b"\r\n\r\n") && io::Read::read(&mut stream, &mut byte).unwrap() == 1 {
                head.push(byte[0]);
            }
            io::Write::write_all(&mut stream, b"HTTP/1.1 204 No Content\r\n\r\n").unwrap();
            String::from_utf8(head).unwrap().to_ascii_lowercase()
        });
        let client = client_for(&base);
        client.send(&Call::new(Method::POST, "/v1/namespaces/ns/sync".into(), Effect::Read)).unwrap();
        let head = server.join().unwrap();
        assert!(head.starts_with("post /v1/namespaces/ns/sync "), "{head}");
        assert!(head.contains("\r\ncontent-length: 0\r\n") && !head.contains("transfer-encoding"), "{head}");
    }

    #[test]
    fn a_write_whose_answer_is_lost_is_outcome_unknown() {
        // A "server" that reads the request and closes without answering.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = thread::spawn(move || {
            for _ in 0..(RETRIES_MAX + 2) {
                let (mut stream, _) = listener.accept().unwrap();
                let mut request = [0; 4096];
                let _ = io::Read::read(&mut stream, &mut request);
            }
        });
        let client = client_for(&base);
        let append = Call::new(Method::POST, "/v1/x".into(), Effect::Once { operation: "append to log t".into() });
        let err = client.send(&append.raw(b"x")).unwrap_err();
        assert!(matches!(&err, LogError::OutcomeUnknown { operation, .. } if operation == "append to log t"), "{err}");
        // A read is resent, then said to be unavailable.
        let err = client.send(&Call::get("/v1/namespaces".into())).unwrap_err();
        assert!(matches!(&err, LogError::Unavailable { reason, .. } if reason.contains("4 attempts")), "{err}");
        server.join().unwrap();
    }
}
