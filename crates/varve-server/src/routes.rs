//! The request/answer operations of the API: list, create, delete, append,
//! batch, get, sync. Streams (scan, watch) are in [`crate::stream`].
//!
//! Journal calls that may wait on the disk (every write: an fsync under
//! `--sync always`) run on tokio's blocking threads; reads of the mapped
//! journal answer in place.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::json;
use varve_log::{LogError, Seq};
use varve_runtime::event::parse_trace;
use varve_runtime::writer::CauseIds;
use varve_runtime::{Appended, EventId, RequestId};

use crate::app::Shared;
use crate::error::ApiError;
use crate::namespaces::Served;
use crate::tokens::Permission;
use crate::wire::{AppendedJson, BatchAppendedJson, BatchJson, CreateJson, LogInfoJson, RenameJson, TrimJson};

/// The header that makes an append safe to send again (see `docs/http.md`).
pub const REQUEST_ID_HEADER: &str = "varve-request-id";
/// The event that caused an append, `HOST:NAMESPACE:SEQ` (a handler's `VARVE_EVENT_ID`).
pub const CAUSE_HEADER: &str = "varve-cause";
/// The trace of [`CAUSE_HEADER`], up to 32 hex digits (a handler's `VARVE_TRACE_ID`).
pub const TRACE_HEADER: &str = "varve-trace";
/// JSON bodies beyond the records' own bytes (base64 grows them by 4/3) may add this much.
pub const JSON_OVERHEAD_BYTES: u64 = 1 << 20;
/// The largest rename body a valid call can need: the most pairs, each with
/// two names of the longest length (and room for their JSON), plus the overhead.
const RENAME_BODY_BYTES_MAX: u64 =
    varve_log::RENAMES_PER_CALL_MAX as u64 * (2 * varve_log::NAME_BYTES_MAX as u64 + 64) + JSON_OVERHEAD_BYTES;

/// The path's parameters, with rejections answered as JSON errors.
pub struct Params(HashMap<String, String>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Params {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, ApiError> {
        let map = match Path::<HashMap<String, String>>::from_request_parts(parts, state).await {
            Ok(Path(map)) => map,
            Err(rejection) => return Err(ApiError::invalid(format!("the path does not parse: {rejection}"))),
        };
        // Checked here, on the decoded name, so that no percent-encoding of
        // `obj.` slips past; every route that names a log extracts Params.
        if let (Some(log), Some(permission)) = (map.get("log"), parts.extensions.get::<Permission>()) {
            refuse_raw_object_log(permission, log)?;
        }
        Ok(Params(map))
    }
}

/// Refuse a principal's token the raw records of an object store's log.
fn refuse_raw_object_log(permission: &Permission, log: &str) -> Result<(), ApiError> {
    if permission.may_touch_raw(log) {
        return Ok(());
    }
    Err(ApiError::Forbidden(format!(
        "log {log:?} belongs to an object store, and this token acts as principal {:?}: read and write versioned objects through /v1/namespaces/NS/objects/STORE/… (see docs/http.md, Versioned objects), where the owners' grants apply",
        permission.principal.as_deref().unwrap_or_default()
    )))
}

impl Params {
    /// The namespace named in the path.
    pub fn ns(&self) -> &str {
        self.0.get("ns").map_or("", String::as_str)
    }

    /// The log named in the path, checked against the naming rules.
    pub fn log(&self) -> Result<&str, ApiError> {
        let log = self.0.get("log").map_or("", String::as_str);
        varve_log::validate_name(log, true)?;
        Ok(log)
    }

    /// A path parameter that must be there (the route names it).
    pub fn named(&self, name: &str) -> &str {
        self.0.get(name).map_or("", String::as_str)
    }

    fn seq(&self) -> Result<Seq, ApiError> {
        let text = self.0.get("seq").map_or("", String::as_str);
        parse_seq("seq", text)
    }
}

/// A seq from the path or the query: a whole number 0..2^64.
pub fn parse_seq(what: &str, text: &str) -> Result<Seq, ApiError> {
    text.parse::<Seq>()
        .map_err(|_| ApiError::invalid(format!("{what} {text:?} is not a seq: write a whole number (seqs start at 1)")))
}

/// The query's parameters; an unknown one is refused, so a typo is not silently ignored.
pub fn query(raw: Option<&str>, known: &[&str]) -> Result<HashMap<String, String>, ApiError> {
    let mut found = HashMap::new();
    for (key, value) in form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
        if key == "access_token" {
            continue; // read by the token check
        }
        if !known.contains(&key.as_ref()) {
            return Err(ApiError::invalid(format!(
                "unknown query parameter {key:?}: this resource takes {}",
                if known.is_empty() { "none".to_owned() } else { known.join(", ") }
            )));
        }
        found.insert(key.into_owned(), value.into_owned());
    }
    Ok(found)
}

/// Run a journal write on a blocking thread.
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work).await.unwrap_or_else(|join| {
        Err(ApiError::Log(LogError::Io {
            context: "running a write".into(),
            source: std::io::Error::other(join.to_string()),
        }))
    })
}

/// Read a body of at most `limit` bytes; a larger one is `too_large`.
pub async fn read_body(body: Body, headers: &HeaderMap, what: &'static str, limit: u64) -> Result<Bytes, ApiError> {
    let too_large = |size| ApiError::Log(LogError::TooLarge { what, size, limit });
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if let Some(size) = declared.filter(|&size| size > limit) {
        return Err(too_large(size));
    }
    let cap = usize::try_from(limit).unwrap_or(usize::MAX);
    match Limited::new(body, cap).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.downcast_ref::<LengthLimitError>().is_some() => Err(too_large(limit + 1)),
        Err(error) => Err(ApiError::invalid(format!("the request body could not be read: {error}"))),
    }
}

/// The request id of an append, if it carries one.
/// The cause an append carries (`Varve-Cause: HOST:NAMESPACE:SEQ` with
/// `Varve-Trace: HEX`, both or neither): a handler on another host appending
/// here, so its effect joins its trace.
fn cause(headers: &HeaderMap) -> Result<Option<CauseIds>, ApiError> {
    let text = |name: &str| -> Result<Option<&str>, ApiError> {
        headers
            .get(name)
            .map(|v| v.to_str().map_err(|_| ApiError::invalid(format!("{name} must be ASCII"))))
            .transpose()
    };
    match (text(CAUSE_HEADER)?, text(TRACE_HEADER)?) {
        (None, None) => Ok(None),
        (Some(event), Some(trace)) => Ok(Some((EventId::parse(event)?, parse_trace(trace)?))),
        _ => Err(ApiError::invalid(format!("{CAUSE_HEADER} and {TRACE_HEADER} go together: send both or neither"))),
    }
}

fn request_id(headers: &HeaderMap) -> Result<Option<RequestId>, ApiError> {
    let Some(value) = headers.get(REQUEST_ID_HEADER) else { return Ok(None) };
    let text = value.to_str().map_err(|_| ApiError::invalid("Varve-Request-Id must be ASCII"))?;
    Ok(Some(RequestId::parse(text)?))
}

/// A body that must be JSON (or empty, when `empty_ok`).
pub fn require_json(headers: &HeaderMap, empty: bool) -> Result<(), ApiError> {
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let essence = content_type.split(';').next().unwrap_or("").trim();
    if essence.eq_ignore_ascii_case("application/json") || (empty && content_type.is_empty()) {
        return Ok(());
    }
    Err(ApiError::UnsupportedMediaType(format!(
        "this request takes a JSON body: send `Content-Type: application/json` (got {content_type:?})"
    )))
}

/// Parse a JSON body; a body that does not parse is `invalid_argument`.
pub fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::invalid(format!("the JSON body does not parse: {e}")))
}

/// `GET /v1/limits`: the largest record and batch this server takes, so a
/// client can refuse what would be refused before sending it.
pub async fn limits(State(state): State<Shared>) -> Response {
    let limits = state.limits;
    Json(json!({
        "record_bytes_max": limits.record_bytes_max,
        "batch_bytes_max": limits.batch_bytes_max,
        "batch_records_max": limits.batch_records_max,
    }))
    .into_response()
}

/// `GET /v1/namespaces`: the namespaces the token reaches.
pub async fn list_namespaces(
    State(state): State<Shared>,
    Extension(permission): Extension<Permission>,
) -> Result<Response, ApiError> {
    let mut names = state.namespaces.list()?;
    names.retain(|name| permission.reaches(name));
    Ok(Json(json!({ "namespaces": names })).into_response())
}

/// `GET /v1/namespaces/NS/logs`: every log with its bounds (for a
/// principal's token, without the object stores' logs, which it may not read).
pub async fn list_logs(
    State(state): State<Shared>,
    Extension(permission): Extension<Permission>,
    params: Params,
) -> Result<Response, ApiError> {
    let served = state.namespaces.for_read(params.ns())?;
    let logs: Vec<LogInfoJson> = served
        .ns()
        .list_logs()?
        .into_iter()
        .filter(|info| permission.may_touch_raw(&info.name))
        .map(LogInfoJson::from)
        .collect();
    Ok(Json(json!({ "logs": logs })).into_response())
}

/// `GET …/logs/LOG`: one log's configuration and bounds.
pub async fn log_info(State(state): State<Shared>, params: Params) -> Result<Response, ApiError> {
    let log = params.log()?;
    let served = state.namespaces.for_log(params.ns(), log)?;
    Ok(Json(LogInfoJson::from(served.ns().log_info(log)?)).into_response())
}

/// `PUT …/logs/LOG`: create a log (201), or confirm one with that configuration (200).
pub async fn create_log(State(state): State<Shared>, params: Params, request: Request) -> Result<Response, ApiError> {
    let log = params.log()?.to_owned();
    let (parts, body) = request.into_parts();
    let body = read_body(body, &parts.headers, "create body", JSON_OVERHEAD_BYTES).await?;
    let config = if body.is_empty() {
        CreateJson::default()
    } else {
        require_json(&parts.headers, false)?;
        parse_json::<CreateJson>(&body)?
    }
    .config()?;
    let served = state.namespaces.for_write(params.ns())?;
    let created = blocking(move || Ok(served.writer.create_log(&log, config)?)).await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(json!({ "created": created }))).into_response())
}

/// `DELETE …/logs/LOG`: delete a log and its records.
pub async fn delete_log(State(state): State<Shared>, params: Params) -> Result<Response, ApiError> {
    let log = params.log()?.to_owned();
    let served = state.namespaces.for_log(params.ns(), &log)?;
    blocking(move || Ok(served.writer.delete_log(&log)?)).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST …/logs/LOG/trim`: remove the log's records below a seq (body:
/// TRIM, `{"before": N}`), answered with `{"earliest": N}`. A principal's
/// token may not trim an object store's raw logs, as it may not write them.
pub async fn trim(
    State(state): State<Shared>,
    Extension(permission): Extension<Permission>,
    params: Params,
    request: Request,
) -> Result<Response, ApiError> {
    let log = params.log()?.to_owned();
    refuse_raw_object_log(&permission, &log)?;
    let (parts, body) = request.into_parts();
    require_json(&parts.headers, false)?;
    let body = read_body(body, &parts.headers, "trim body", JSON_OVERHEAD_BYTES).await?;
    let before = parse_json::<TrimJson>(&body)?.before;
    let served = state.namespaces.for_log(params.ns(), &log)?;
    let earliest = blocking(move || Ok(served.writer.trim(&log, before)?)).await?;
    Ok(Json(json!({ "earliest": earliest })).into_response())
}

/// `POST /v1/namespaces/NS/rename`: rename logs, all at once or none (body:
/// RENAMES, see docs/http.md). A principal's token may not rename an
/// object store's raw logs, as it may not write them.
pub async fn rename_logs(
    State(state): State<Shared>,
    Extension(permission): Extension<Permission>,
    params: Params,
    request: Request,
) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    require_json(&parts.headers, false)?;
    let body = read_body(body, &parts.headers, "rename body", RENAME_BODY_BYTES_MAX).await?;
    let renames = parse_json::<RenameJson>(&body)?.renames;
    for pair in &renames {
        refuse_raw_object_log(&permission, &pair.from)?;
        refuse_raw_object_log(&permission, &pair.to)?;
    }
    let pairs: Vec<(&str, &str)> = renames.iter().map(|pair| (pair.from.as_str(), pair.to.as_str())).collect();
    // Checked before the namespace is looked for, as in a namespace written.
    varve_log::rules::check_rename_arguments(&pairs)?;
    let Some(&(first, _)) = pairs.first() else { return Ok(StatusCode::NO_CONTENT.into_response()) };
    let served = state.namespaces.for_log(params.ns(), first)?;
    blocking(move || {
        let pairs: Vec<(&str, &str)> = renames.iter().map(|pair| (pair.from.as_str(), pair.to.as_str())).collect();
        Ok(served.writer.rename_logs(&pairs)?)
    })
    .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST …/logs/LOG/records[?if_latest=N]`: append the body as one record.
pub async fn append(
    State(state): State<Shared>,
    params: Params,
    RawQuery(raw): RawQuery,
    request: Request,
) -> Result<Response, ApiError> {
    let log = params.log()?.to_owned();
    let query = query(raw.as_deref(), &["if_latest"])?;
    let expected = query.get("if_latest").map(|text| parse_seq("if_latest", text)).transpose()?;
    let (parts, body) = request.into_parts();
    let id = request_id(&parts.headers)?;
    let cause = cause(&parts.headers)?;
    let value = read_body(body, &parts.headers, "record", state.limits.record_bytes_max).await?;
    let served = state.namespaces.for_log(params.ns(), &log)?;
    let len = value.len() as u64;
    let Appended { seqs, repeated } = blocking(move || {
        Ok(match expected {
            Some(expected) => served.writer.append_if(&log, expected, &value, id.as_ref(), cause)?,
            None => served.writer.append(&[(log.as_str(), &value[..])], id.as_ref(), cause)?,
        })
    })
    .await?;
    if !repeated {
        state.metrics.appended_records.inc();
        state.metrics.appended_bytes.inc_by(len);
    }
    Ok((StatusCode::CREATED, Json(AppendedJson { seq: seqs[0], repeated })).into_response())
}

/// `POST /v1/namespaces/NS/batch`: append records to several logs, all or
/// nothing; with `expected`, only while each named log ends at its seq.
pub async fn append_batch(
    State(state): State<Shared>,
    Extension(permission): Extension<Permission>,
    params: Params,
    request: Request,
) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    require_json(&parts.headers, false)?;
    let id = request_id(&parts.headers)?;
    let cause = cause(&parts.headers)?;
    let limit = state.limits.batch_bytes_max.saturating_mul(4) / 3 + JSON_OVERHEAD_BYTES;
    let body = read_body(body, &parts.headers, "batch", limit).await?;
    let (records, expected) = parse_json::<BatchJson>(&body)?.decode()?;
    for (log, _) in &records {
        varve_log::validate_name(log, true)?;
        refuse_raw_object_log(&permission, log)?;
    }
    // Checked before the namespace is looked for, so that a bad batch to a
    // namespace never written is refused for what is wrong with it.
    let first_log = {
        let batch = borrowed(&records);
        varve_log::rules::check_batch(&state.limits, &batch)?;
        varve_log::rules::check_expected_logs(&batch, &borrowed_expected(&expected))?;
        batch[0].0.to_owned()
    };
    let served = state.namespaces.for_log(params.ns(), &first_log)?;
    let (count, bytes) = (records.len() as u64, records.iter().map(|(_, v)| v.len() as u64).sum::<u64>());
    let Appended { seqs, repeated } = blocking(move || {
        let (batch, expected) = (borrowed(&records), borrowed_expected(&expected));
        Ok(if expected.is_empty() {
            served.writer.append(&batch, id.as_ref(), cause)?
        } else {
            served.writer.append_batch_if(&batch, &expected, id.as_ref(), cause)?
        })
    })
    .await?;
    if !repeated {
        state.metrics.appended_records.inc_by(count);
        state.metrics.appended_bytes.inc_by(bytes);
    }
    Ok((StatusCode::CREATED, Json(BatchAppendedJson { seqs, repeated })).into_response())
}

fn borrowed(records: &[(String, Vec<u8>)]) -> Vec<(&str, &[u8])> {
    records.iter().map(|(log, value)| (log.as_str(), value.as_slice())).collect()
}

fn borrowed_expected(expected: &[(String, Seq)]) -> Vec<(&str, Seq)> {
    expected.iter().map(|(log, seq)| (log.as_str(), *seq)).collect()
}

/// `GET …/logs/LOG/records/SEQ`: one record's bytes.
pub async fn get_record(State(state): State<Shared>, params: Params) -> Result<Response, ApiError> {
    let log = params.log()?;
    let seq = params.seq()?;
    let served: Arc<Served> = state.namespaces.for_log(params.ns(), log)?;
    let value = served.ns().get(log, seq)?;
    let mut response = Body::from(value).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    headers.insert("varve-seq", HeaderValue::from(seq));
    Ok(response)
}

/// `POST /v1/namespaces/NS/sync`: make every acknowledged append durable now.
pub async fn sync(State(state): State<Shared>, params: Params, request: Request) -> Result<Response, ApiError> {
    // Read the (empty) body, so a client that sent it chunked keeps its connection.
    let (parts, body) = request.into_parts();
    read_body(body, &parts.headers, "sync body", JSON_OVERHEAD_BYTES).await?;
    let served = state.namespaces.for_read(params.ns())?;
    blocking(move || Ok(served.ns().sync()?)).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
