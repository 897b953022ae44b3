//! The router: which request goes to which operation, and the layers every
//! request passes (metrics, tokens, then reading a small body whole). The operations are in
//! [`crate::routes`] and [`crate::stream`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::Router;
use http_body_util::BodyExt;
use varve_log::Limits;

use crate::error::ApiError;
use crate::feed::Feeds;
use crate::metrics::Metrics;
use crate::namespaces::Namespaces;
use crate::objects::ObjectStores;
use crate::tokens::{Access, Permission, Tokens};
use crate::{objects, routes, stream};

/// What every request handler shares.
pub struct AppState {
    /// The namespaces served.
    pub namespaces: Namespaces,
    /// The object stores opened so far (closed before the namespaces).
    pub objects: ObjectStores,
    /// The record and batch limits (the journal's), checked before a body is read whole.
    pub limits: Limits,
    /// The tokens accepted; empty: no token needed.
    pub tokens: Tokens,
    /// The metrics served at `/metrics`.
    pub metrics: Metrics,
    /// The readers of watched logs, one per log, shared by its watches.
    pub feeds: Feeds,
    /// Set when shutdown begins: watches end, new requests are refused.
    pub stopping: AtomicBool,
    /// The URI clients reach this server by (`varve://HOST:PORT`), for log URIs in answers.
    pub uri: String,
    /// Longest wait for the next bytes of a body read before the request is
    /// checked (the header timeout): a client that declared a body and
    /// stopped sending it is answered, however slow its link.
    pub body_stall_timeout: std::time::Duration,
}

impl AppState {
    /// Whether shutdown has begun.
    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }
}

/// Shared state, as handlers receive it.
pub type Shared = Arc<AppState>;

/// The whole API.
pub fn router(state: Shared) -> Router {
    let v1 = Router::new()
        .route("/limits", get(routes::limits))
        .route("/namespaces", get(routes::list_namespaces))
        .route("/namespaces/{ns}/logs", get(routes::list_logs))
        .route("/namespaces/{ns}/logs/{log}", get(routes::log_info).put(routes::create_log).delete(routes::delete_log))
        .route("/namespaces/{ns}/logs/{log}/records", post(routes::append).get(stream::scan))
        .route("/namespaces/{ns}/logs/{log}/records/{seq}", get(routes::get_record))
        .route("/namespaces/{ns}/logs/{log}/watch", get(stream::watch))
        .route("/namespaces/{ns}/logs/{log}/trim", post(routes::trim))
        .route("/namespaces/{ns}/batch", post(routes::append_batch))
        .route("/namespaces/{ns}/sync", post(routes::sync))
        .route("/namespaces/{ns}/rename", post(routes::rename_logs))
        .route("/namespaces/{ns}/objects/{store}/keys", get(objects::keys))
        .route("/namespaces/{ns}/objects/{store}/keys/{key}/versions", get(objects::versions).post(objects::put))
        .route("/namespaces/{ns}/objects/{store}/keys/{key}/versions/{version}", get(objects::get))
        .route("/namespaces/{ns}/objects/{store}/keys/{key}/versions/{version}/info", get(objects::info))
        .route("/namespaces/{ns}/objects/{store}/keys/{key}/versions/{version}/previous", get(objects::previous))
        .route("/namespaces/{ns}/objects/{store}/keys/{key}/versions/{version}/history", get(objects::history))
        .route("/namespaces/{ns}/objects/{store}/keys/{key}/versions/{version}/verify", get(objects::verify))
        .route("/namespaces/{ns}/objects/{store}/keys/{key}/heads", get(objects::heads))
        .route("/namespaces/{ns}/objects/{store}/keys/{key}/merge", post(objects::merge))
        .route("/namespaces/{ns}/objects/{store}/keys/{key}/prove", get(objects::prove))
        .route("/namespaces/{ns}/objects/{store}/keys/{key}/refs", get(objects::refs))
        .route(
            "/namespaces/{ns}/objects/{store}/keys/{key}/refs/{name}",
            put(objects::set_ref).delete(objects::delete_ref),
        )
        .route("/namespaces/{ns}/objects/{store}/keys/{key}/restrict", post(objects::restrict))
        .route("/namespaces/{ns}/objects/{store}/keys/{key}/grants", get(objects::grants).post(objects::grant));
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/metrics", get(metrics_text))
        .nest("/v1", v1)
        .fallback(no_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(Arc::clone(&state), read_unsolicited_body))
        .layer(middleware::from_fn_with_state(Arc::clone(&state), authorize))
        .layer(middleware::from_fn_with_state(Arc::clone(&state), measure))
        .with_state(state)
}

async fn metrics_text(State(state): State<Shared>) -> Response {
    // Reading a runtime's state takes locks and reads the journal: off the async workers.
    let text = routes::blocking(move || {
        state.metrics.observe_runtimes(&state.namespaces.runtimes());
        state.metrics.observe_journals(&state.namespaces.journals());
        state.metrics.watched_logs.set(i64::try_from(state.feeds.running()).unwrap_or(i64::MAX));
        Ok(state.metrics.encode())
    })
    .await;
    match text {
        Ok(text) => ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], text)
            .into_response(),
        Err(e) => e.into_response(),
    }
}

async fn no_route(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError::NoRoute {
        status: StatusCode::NOT_FOUND,
        message: format!("no such resource: {method} {}; the API is under /v1 (see docs/http.md)", uri.path()),
    }
}

async fn method_not_allowed(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError::NoRoute {
        status: StatusCode::METHOD_NOT_ALLOWED,
        message: format!("{} does not take {method} (see docs/http.md)", uri.path()),
    }
}

/// The operation a route serves, for metrics and logs.
fn operation(method: &Method, route: Option<&str>) -> &'static str {
    let Some(route) = route else { return "unrouted" };
    let route = route.strip_prefix("/v1").unwrap_or(route);
    match (method.as_str(), route) {
        ("GET", "/healthz") => "healthz",
        ("GET", "/metrics") => "metrics",
        ("GET", "/limits") => "limits",
        ("GET", "/namespaces") => "list_namespaces",
        ("GET", "/namespaces/{ns}/logs") => "list_logs",
        ("GET", "/namespaces/{ns}/logs/{log}") => "log_info",
        ("PUT", "/namespaces/{ns}/logs/{log}") => "create_log",
        ("DELETE", "/namespaces/{ns}/logs/{log}") => "delete_log",
        ("POST", "/namespaces/{ns}/logs/{log}/records") => "append",
        ("GET", "/namespaces/{ns}/logs/{log}/records") => "scan",
        ("GET", "/namespaces/{ns}/logs/{log}/records/{seq}") => "get",
        ("GET", "/namespaces/{ns}/logs/{log}/watch") => "watch",
        ("POST", "/namespaces/{ns}/logs/{log}/trim") => "trim",
        ("POST", "/namespaces/{ns}/batch") => "append_batch",
        ("POST", "/namespaces/{ns}/sync") => "sync",
        ("POST", "/namespaces/{ns}/rename") => "rename_logs",
        _ => object_operation(method.as_str(), route),
    }
}

/// The operation of a route under `/namespaces/{ns}/objects/{store}/`.
fn object_operation(method: &str, route: &str) -> &'static str {
    let Some(rest) = route.strip_prefix("/namespaces/{ns}/objects/{store}") else { return "other" };
    match (method, rest) {
        ("GET", "/keys") => "object_keys",
        ("GET", "/keys/{key}/versions") => "object_versions",
        ("POST", "/keys/{key}/versions") => "object_put",
        ("GET", "/keys/{key}/versions/{version}") => "object_get",
        ("GET", "/keys/{key}/versions/{version}/info") => "object_info",
        ("GET", "/keys/{key}/versions/{version}/previous") => "object_previous",
        ("GET", "/keys/{key}/versions/{version}/history") => "object_history",
        ("GET", "/keys/{key}/versions/{version}/verify") => "object_verify",
        ("GET", "/keys/{key}/heads") => "object_heads",
        ("POST", "/keys/{key}/merge") => "object_merge",
        ("GET", "/keys/{key}/prove") => "object_prove",
        ("GET", "/keys/{key}/refs") => "object_refs",
        ("PUT", "/keys/{key}/refs/{name}") => "object_set_ref",
        ("DELETE", "/keys/{key}/refs/{name}") => "object_delete_ref",
        ("POST", "/keys/{key}/restrict") => "object_restrict",
        ("GET", "/keys/{key}/grants") => "object_grants",
        ("POST", "/keys/{key}/grants") => "object_grant",
        _ => "other",
    }
}

/// Count and time every request.
async fn measure(State(state): State<Shared>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let op = operation(request.method(), request.extensions().get::<MatchedPath>().map(MatchedPath::as_str));
    let response = next.run(request).await;
    state.metrics.observe(op, response.status().as_u16(), started.elapsed());
    response
}

/// Most bytes of a body read whole before a request is checked: what a
/// client sends without waiting for `100 Continue` (this project's client
/// and curl send bodies below 1 MiB so; larger ones wait for it).
const UNSOLICITED_BODY_BYTES_MAX: u64 = 1 << 20;

/// Read a body the client sends unasked (no `Expect: 100-continue`, a
/// declared length of at most [`UNSOLICITED_BODY_BYTES_MAX`]) before a
/// handler's checks may refuse the request. A refusal answered while the
/// client still writes such a body breaks its write, and the client cannot
/// tell a refused append (a record over the limit, a bad content type) from
/// one whose answer was lost. The token check comes first (no memory or
/// patience for a client without a token) and drops such a body when it
/// refuses. A body that waits for `100 Continue` is read only by the
/// handler that takes it, so a refusal goes out before it is sent.
async fn read_unsolicited_body(State(state): State<Shared>, request: Request, next: Next) -> Response {
    let Some(len) = unsolicited_len(&request) else { return next.run(request).await };
    let (parts, mut body) = request.into_parts();
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    loop {
        // hyper ends the body at its declared length (and fails one that
        // sends more), so this reads at most `len` bytes.
        let frame = match tokio::time::timeout(state.body_stall_timeout, body.frame()).await {
            Err(_) => {
                return ApiError::invalid(format!(
                    "the request body stalled: {} of its {len} bytes arrived, then nothing for {:?}; send the \
                     body right after the head",
                    bytes.len(),
                    state.body_stall_timeout
                ))
                .into_response();
            }
            Ok(None) => break,
            Ok(Some(Err(error))) => {
                return ApiError::invalid(format!("the request body could not be read: {error}")).into_response();
            }
            Ok(Some(Ok(frame))) => frame,
        };
        if let Some(data) = frame.data_ref() {
            bytes.extend_from_slice(data);
        }
    }
    next.run(Request::from_parts(parts, axum::body::Body::from(bytes))).await
}

/// The declared length of a body the client sends unasked (see
/// [`read_unsolicited_body`]), if the request has one.
fn unsolicited_len(request: &Request) -> Option<u64> {
    let headers = request.headers();
    if headers.contains_key(header::EXPECT) {
        return None;
    }
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok())?;
    (declared > 0 && declared <= UNSOLICITED_BODY_BYTES_MAX).then_some(declared)
}

/// Read and drop the unsolicited body of a request refused before it was
/// read (a bad token), so that the refusal reaches the client. Nothing is
/// kept, and a client without a token gets no patience: whatever has not
/// arrived by the header timeout is not waited for (its connection closes).
async fn discard_unsolicited_body(state: &AppState, request: Request) {
    if unsolicited_len(&request).is_none() {
        return;
    }
    let mut body = request.into_body();
    let _ =
        tokio::time::timeout(state.body_stall_timeout, async { while let Some(Ok(_)) = body.frame().await {} }).await;
}

/// Check the request's bearer token against the namespace and the method;
/// put the [`Permission`] into the request for handlers that filter by it.
async fn authorize(State(state): State<Shared>, mut request: Request, next: Next) -> Response {
    if request.uri().path() == "/healthz" && !state.is_stopping() {
        return next.run(request).await;
    }
    match permission(&state, &request) {
        Ok(permission) => {
            request.extensions_mut().insert(permission);
            next.run(request).await
        }
        Err(refusal) => {
            discard_unsolicited_body(&state, request).await;
            refusal.into_response()
        }
    }
}

/// What the request's token allows, or why the request is refused.
fn permission(state: &AppState, request: &Request) -> Result<Permission, ApiError> {
    if state.is_stopping() {
        return Err(ApiError::Stopping);
    }
    let permission = if state.tokens.is_empty() {
        Permission::all()
    } else {
        let presented = bearer(request).ok_or_else(|| {
            ApiError::Unauthorized(
                "this server needs a token: send `Authorization: Bearer TOKEN` (or `?access_token=TOKEN` on a GET)"
                    .into(),
            )
        })?;
        state
            .tokens
            .check(presented.as_bytes())
            .ok_or_else(|| ApiError::Unauthorized("the token is not one this server accepts".into()))?
    };
    let writes = !matches!(*request.method(), Method::GET | Method::HEAD);
    if writes && permission.access == Access::ReadOnly {
        return Err(ApiError::Forbidden("this token is read-only: use a read-write token to write".into()));
    }
    if let Some(namespace) = namespace_of(request.uri().path()) {
        if !permission.reaches(namespace) {
            return Err(ApiError::Forbidden(format!("this token does not reach namespace {namespace:?}")));
        }
    }
    Ok(permission)
}

/// The token of `Authorization: Bearer …`, or of `access_token=…` in a GET's
/// query (RFC 6750 §2.3; a browser's `EventSource` cannot set headers).
fn bearer(request: &Request) -> Option<String> {
    if let Some(value) = request.headers().get(header::AUTHORIZATION) {
        let text = value.to_str().ok()?;
        let (scheme, token) = text.split_once(' ')?;
        return scheme.eq_ignore_ascii_case("bearer").then(|| token.trim().to_owned());
    }
    if request.method() != Method::GET {
        return None;
    }
    form_urlencoded::parse(request.uri().query()?.as_bytes())
        .find(|(key, _)| key == "access_token")
        .map(|(_, value)| value.into_owned())
}

/// `NS` of a path `/v1/namespaces/NS/…`, still percent-encoded (names never need encoding).
fn namespace_of(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/v1/namespaces/")?;
    let namespace = rest.split('/').next()?;
    (!namespace.is_empty()).then_some(namespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_namespace_of_a_path() {
        assert_eq!(namespace_of("/v1/namespaces/app/logs/t"), Some("app"));
        assert_eq!(namespace_of("/v1/namespaces/app"), Some("app"));
        assert_eq!(namespace_of("/v1/namespaces"), None);
        assert_eq!(namespace_of("/v1/namespaces/"), None);
        assert_eq!(namespace_of("/healthz"), None);
    }
}
