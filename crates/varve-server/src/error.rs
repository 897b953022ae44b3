//! Errors as the API answers them: `{"error": KIND, "message": …, fields…}`
//! with the HTTP status that fits each typed error (the table in
//! `docs/http.md`). Bad input is always a 4xx; 5xx means the server or its
//! storage failed.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};
use varve_log::LogError;
use varve_object::ObjectError;
use varve_runtime::RuntimeError;

/// An error on its way to the client.
#[derive(Debug)]
pub enum ApiError {
    /// A Log operation failed.
    Log(LogError),
    /// A versioned-object operation failed (`crate::objects`).
    Object(ObjectError),
    /// No object store of that name in the namespace (404).
    ObjectStoreNotFound {
        /// The namespace.
        namespace: String,
        /// The object store asked for.
        store: String,
    },
    /// No token, or one the server does not know (401).
    Unauthorized(String),
    /// A token that does not allow this (403).
    Forbidden(String),
    /// No such route (404), or a method the route does not take (405).
    NoRoute {
        /// 404 or 405.
        status: StatusCode,
        /// What was asked for.
        message: String,
    },
    /// The server is stopping and takes no new work (503).
    Stopping,
    /// A body in a format the route does not take (415).
    UnsupportedMediaType(String),
}

impl From<LogError> for ApiError {
    fn from(error: LogError) -> Self {
        ApiError::Log(error)
    }
}

impl From<ObjectError> for ApiError {
    fn from(error: ObjectError) -> Self {
        match error {
            ObjectError::Log(error) => ApiError::Log(error),
            other => ApiError::Object(other),
        }
    }
}

impl From<RuntimeError> for ApiError {
    fn from(error: RuntimeError) -> Self {
        match error {
            RuntimeError::Log(error) => ApiError::Log(error),
            RuntimeError::InvalidArgument { reason } => ApiError::Log(LogError::InvalidArgument { reason }),
            RuntimeError::UnknownLog { namespace, log } => ApiError::Log(LogError::LogNotFound { namespace, log }),
            error @ (RuntimeError::BadEventId { .. } | RuntimeError::BadTraceId { .. }) => {
                ApiError::invalid(error.to_string())
            }
            RuntimeError::Stopped => ApiError::Log(LogError::Unavailable {
                target: "this server".into(),
                reason: "the namespace's runtime is stopping: nothing was written; send it again".into(),
            }),
            other => ApiError::Log(LogError::Io {
                context: "appending".into(),
                source: std::io::Error::other(other.to_string()),
            }),
        }
    }
}

impl ApiError {
    /// Shorthand for a 400 `invalid_argument`.
    pub fn invalid(reason: impl Into<String>) -> ApiError {
        ApiError::Log(LogError::InvalidArgument { reason: reason.into() })
    }

    /// The status, kind and fields of this error.
    fn parts(&self) -> (StatusCode, &'static str, Map<String, Value>) {
        let mut fields = Map::new();
        let mut put = |key: &str, value: Value| {
            fields.insert(key.to_owned(), value);
        };
        let (status, kind) = match self {
            ApiError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            ApiError::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            ApiError::NoRoute { status, .. } => {
                (*status, if *status == StatusCode::NOT_FOUND { "no_route" } else { "method_not_allowed" })
            }
            ApiError::Stopping => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            ApiError::UnsupportedMediaType(_) => (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type"),
            ApiError::Log(error) => log_parts(error, &mut put),
            ApiError::Object(error) => object_parts(error, &mut put),
            ApiError::ObjectStoreNotFound { namespace, store } => {
                put("namespace", json!(namespace));
                put("store", json!(store));
                (StatusCode::NOT_FOUND, "object_store_not_found")
            }
        };
        (status, kind, fields)
    }
}

/// The status and kind of a Log error, its fields put with `put`.
fn log_parts(error: &LogError, put: &mut impl FnMut(&str, Value)) -> (StatusCode, &'static str) {
    match error {
        LogError::NamespaceNotFound { namespace } => {
            put("namespace", json!(namespace));
            (StatusCode::NOT_FOUND, "namespace_not_found")
        }
        LogError::LogNotFound { namespace, log } => {
            put("namespace", json!(namespace));
            put("log", json!(log));
            (StatusCode::NOT_FOUND, "log_not_found")
        }
        LogError::SeqNotFound { log, seq, latest } => {
            put("log", json!(log));
            put("seq", json!(seq));
            put("latest", json!(latest));
            (StatusCode::NOT_FOUND, "seq_not_found")
        }
        LogError::Trimmed { log, seq, earliest } => {
            put("log", json!(log));
            put("seq", json!(seq));
            put("earliest", json!(earliest));
            (StatusCode::GONE, "trimmed")
        }
        LogError::Lost { log, first, last, cause } => {
            put("log", json!(log));
            put("first", json!(first));
            put("last", json!(last));
            put("segment", json!(cause.segment.display().to_string()));
            put("offset", json!(cause.offset));
            put("reason", json!(cause.reason));
            (StatusCode::GONE, "lost")
        }
        LogError::Full { log, keep } => {
            put("log", json!(log));
            put("keep", json!(keep));
            (StatusCode::CONFLICT, "full")
        }
        LogError::Conflict { log, expected, actual } => {
            put("log", json!(log));
            put("expected", json!(expected));
            put("actual", json!(actual));
            (StatusCode::CONFLICT, "conflict")
        }
        LogError::AlreadyExists { log, existing, requested } => {
            put("log", json!(log));
            put("existing", json!(existing));
            put("requested", json!(requested));
            (StatusCode::CONFLICT, "already_exists")
        }
        error @ (LogError::RenameTargetExists { .. } | LogError::Unsupported { .. }) => rename_parts(error, put),
        LogError::InvalidName { name, reason } => {
            put("name", json!(name));
            put("reason", json!(reason));
            (StatusCode::BAD_REQUEST, "invalid_name")
        }
        LogError::InvalidArgument { reason } => {
            put("reason", json!(reason));
            (StatusCode::BAD_REQUEST, "invalid_argument")
        }
        LogError::TooLarge { what, size, limit } => {
            put("what", json!(what));
            put("size", json!(size));
            put("limit", json!(limit));
            (StatusCode::PAYLOAD_TOO_LARGE, "too_large")
        }
        LogError::NoSpace { path, bytes } => {
            put("path", json!(path.display().to_string()));
            put("bytes", json!(bytes));
            (StatusCode::INSUFFICIENT_STORAGE, "no_space")
        }
        LogError::Locked { path } => {
            put("path", json!(path.display().to_string()));
            (StatusCode::SERVICE_UNAVAILABLE, "locked")
        }
        LogError::Unavailable { target, reason } => {
            put("target", json!(target));
            put("reason", json!(reason));
            (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
        }
        LogError::ReadOnly { namespace, operation } => {
            put("namespace", json!(namespace));
            put("operation", json!(operation));
            (StatusCode::INTERNAL_SERVER_ERROR, "read_only")
        }
        LogError::Poisoned { namespace, cause } => {
            put("namespace", json!(namespace));
            put("cause", json!(cause));
            (StatusCode::INTERNAL_SERVER_ERROR, "poisoned")
        }
        LogError::UnsupportedFormat { segment, offset, reason } => {
            put("segment", json!(segment.display().to_string()));
            put("offset", json!(offset));
            put("reason", json!(reason));
            (StatusCode::INTERNAL_SERVER_ERROR, "unsupported_format")
        }
        LogError::Io { context, .. } => {
            put("context", json!(context));
            (StatusCode::INTERNAL_SERVER_ERROR, "io")
        }
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
    }
}

/// The status and kind of the errors only a rename answers (a backend that
/// cannot rename answers `unsupported`), their fields put with `put`.
fn rename_parts(error: &LogError, put: &mut impl FnMut(&str, Value)) -> (StatusCode, &'static str) {
    match error {
        LogError::RenameTargetExists { namespace, from, to } => {
            put("namespace", json!(namespace));
            put("from", json!(from));
            put("to", json!(to));
            (StatusCode::CONFLICT, "rename_target_exists")
        }
        LogError::Unsupported { target, operation, reason } => {
            put("target", json!(target));
            put("operation", json!(operation));
            put("reason", json!(reason));
            (StatusCode::NOT_IMPLEMENTED, "unsupported")
        }
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
    }
}

/// The status and kind of an object-store error, its fields put with `put`.
/// A version the principal may not read, or grants it does not own, is 403;
/// stored bytes that fail their hash or do not decode are 500, because the
/// request was fine and the server's storage is not (as `unsupported_format`).
fn object_parts(error: &ObjectError, put: &mut impl FnMut(&str, Value)) -> (StatusCode, &'static str) {
    match error {
        ObjectError::Log(error) => log_parts(error, put),
        ObjectError::VersionNotFound { store, key, version } => {
            put("store", json!(store));
            put("key", json!(key));
            put("version", json!(version));
            (StatusCode::NOT_FOUND, "version_not_found")
        }
        ObjectError::AmbiguousVersion { store, key, prefix, count } => {
            put("store", json!(store));
            put("key", json!(key));
            put("prefix", json!(prefix));
            put("count", json!(count));
            (StatusCode::BAD_REQUEST, "ambiguous_version")
        }
        ObjectError::Forbidden { principal, key, version, owner } => {
            put("principal", json!(principal));
            put("key", json!(key));
            put("version", json!(version));
            put("owner", json!(owner));
            (StatusCode::FORBIDDEN, "forbidden")
        }
        ObjectError::NotOwner { principal, key, owner } => {
            put("principal", json!(principal));
            put("key", json!(key));
            put("owner", json!(owner));
            (StatusCode::FORBIDDEN, "not_owner")
        }
        ObjectError::RefMoved { key, name, expected, actual } => {
            put("key", json!(key));
            put("ref", json!(name));
            put("expected", json!(expected));
            put("actual", json!(actual));
            (StatusCode::CONFLICT, "ref_moved")
        }
        ObjectError::MergeConflict { fields } => {
            put("fields", json!(fields));
            (StatusCode::CONFLICT, "merge_conflict")
        }
        ObjectError::ValueType { version, expected, reason } => {
            put("version", json!(version));
            put("expected", json!(expected));
            put("reason", json!(reason));
            (StatusCode::BAD_REQUEST, "value_type")
        }
        ObjectError::InvalidArgument { reason } => {
            put("reason", json!(reason));
            (StatusCode::BAD_REQUEST, "invalid_argument")
        }
        ObjectError::ProofInvalid { reason } => {
            put("reason", json!(reason));
            (StatusCode::BAD_REQUEST, "proof_invalid")
        }
        ObjectError::Tampered { key, version, reason, log, seq } => {
            put("key", json!(key));
            put("version", json!(version));
            put("reason", json!(reason));
            put("log", json!(log));
            put("seq", json!(seq));
            (StatusCode::INTERNAL_SERVER_ERROR, "tampered")
        }
        ObjectError::Corrupt { log, seq, reason } => {
            put("log", json!(log));
            put("seq", json!(seq));
            put("reason", json!(reason));
            (StatusCode::INTERNAL_SERVER_ERROR, "corrupt")
        }
        ObjectError::MergeFunction { reason } => {
            put("reason", json!(reason));
            (StatusCode::INTERNAL_SERVER_ERROR, "merge_function")
        }
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApiError::Log(error) => write!(f, "{error}"),
            ApiError::Object(error) => write!(f, "{error}"),
            ApiError::ObjectStoreNotFound { namespace, store } => write!(
                f,
                "no object store {store:?} in namespace {namespace:?}: create it with a put (`POST …/objects/{store}/keys/KEY/versions`), or check the name"
            ),
            ApiError::Unauthorized(reason) | ApiError::Forbidden(reason) | ApiError::UnsupportedMediaType(reason) => {
                f.write_str(reason)
            }
            ApiError::NoRoute { message, .. } => f.write_str(message),
            ApiError::Stopping => {
                f.write_str("the server is stopping and takes no new requests; retry on its successor")
            }
        }
    }
}

impl ApiError {
    /// The error as its JSON object, for NDJSON lines and SSE `error` events too.
    #[must_use]
    pub fn to_json(&self) -> Value {
        let (_, kind, mut fields) = self.parts();
        fields.insert("error".into(), json!(kind));
        fields.insert("message".into(), json!(self.to_string()));
        Value::Object(fields)
    }

    /// The HTTP status this error answers with.
    #[must_use]
    pub fn status(&self) -> StatusCode {
        self.parts().0
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::warn!(status = status.as_u16(), error = %self, "request failed");
        }
        let mut response = (status, axum::Json(self.to_json())).into_response();
        if status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(axum::http::header::WWW_AUTHENTICATE, axum::http::HeaderValue::from_static("Bearer"));
        }
        response
    }
}
