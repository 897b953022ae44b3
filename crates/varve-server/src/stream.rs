//! The streaming operations: a scan as NDJSON, a watch as Server-Sent Events.
//!
//! A scan reads the journal on a thread of its own (its iterator blocks)
//! and hands what it reads to the response body through a small bounded
//! channel, so a slow client slows its own reader and nothing is held whole
//! in memory; it stops when its client goes away (the channel closes). A
//! watch is a task that takes its log's records from the log's shared
//! reader ([`crate::feed`]); it ends when its client goes away or the
//! server stops.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use tokio::sync::{mpsc, oneshot};
use varve_log::{LogError, SeqRange};

use crate::app::Shared;
use crate::error::ApiError;
use crate::feed::Subscription;
use crate::routes::{parse_seq, query, Params};
use crate::wire::{encode_value, RecordJson};

/// A scan sends its NDJSON in chunks of about this many bytes.
const SCAN_CHUNK_BYTES: usize = 64 << 10;
/// Chunks buffered between a scan's reader thread and the client.
const STREAM_BUFFER: usize = 16;
/// A comment line is sent after this much silence, so proxies keep the stream open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// `GET …/records?from=A&to=B`: the records of a log as NDJSON lines, then
/// `{"end": true, "records": N}` — so a client tells a whole scan from a cut one.
pub async fn scan(State(state): State<Shared>, params: Params, RawQuery(raw): RawQuery) -> Result<Response, ApiError> {
    let log = params.log()?.to_owned();
    let query = query(raw.as_deref(), &["from", "to"])?;
    let from = query.get("from").map(|t| parse_seq("from", t)).transpose()?;
    let to = query.get("to").map(|t| parse_seq("to", t)).transpose()?.unwrap_or(u64::MAX);
    let served = state.namespaces.for_log(params.ns(), &log)?;
    // Without `from`, start at the oldest record kept (a trimmed log is no error then).
    let first = match from {
        Some(first) => first,
        None => served.ns().earliest(&log)?.max(1),
    };
    let range = SeqRange { first, last: to };
    let (started_tx, started_rx) = oneshot::channel::<Result<(), ApiError>>();
    let (tx, rx) = mpsc::channel::<Bytes>(STREAM_BUFFER);
    std::thread::Builder::new()
        .name("varve-scan".into())
        .spawn(move || {
            let records = match served.ns().scan(&log, range) {
                Ok(records) => {
                    let _ = started_tx.send(Ok(()));
                    records
                }
                Err(error) => {
                    let _ = started_tx.send(Err(error.into()));
                    return;
                }
            };
            stream_scan(records, &tx);
        })
        .map_err(|e| ApiError::Log(LogError::Io { context: "starting a scan".into(), source: e }))?;
    started_rx.await.unwrap_or_else(|_| Err(ApiError::invalid("the scan ended before it began")))?;
    let body = Body::from_stream(stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (Ok::<_, Infallible>(chunk), rx))
    }));
    let mut response = body.into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/x-ndjson"));
    Ok(response)
}

/// Write a scan's records into `tx` as NDJSON chunks; stops when the client is gone.
fn stream_scan(records: varve_log::Scan<'_>, tx: &mpsc::Sender<Bytes>) {
    let mut chunk = Vec::with_capacity(SCAN_CHUNK_BYTES + 1024);
    let mut count: u64 = 0;
    let send = |chunk: &mut Vec<u8>| tx.blocking_send(Bytes::from(std::mem::take(chunk))).is_ok();
    for record in records {
        match record {
            Ok(record) => {
                count += 1;
                let value = encode_value(&record.value);
                line(&mut chunk, &RecordJson { seq: record.seq, value: &value });
            }
            Err(error) => {
                let go_on = matches!(error, LogError::Lost { .. });
                line(&mut chunk, &ApiError::Log(error).to_json());
                if !go_on {
                    let _ = send(&mut chunk);
                    return; // no end line: the client sees the scan was cut
                }
            }
        }
        if chunk.len() >= SCAN_CHUNK_BYTES && !send(&mut chunk) {
            return;
        }
    }
    line(&mut chunk, &serde_json::json!({ "end": true, "records": count }));
    let _ = send(&mut chunk);
}

fn line(chunk: &mut Vec<u8>, value: &impl serde::Serialize) {
    // Serializing plain structs and JSON values into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *chunk, value);
    chunk.push(b'\n');
}

/// `GET …/watch?from=A`: the log's records from `A` (default: only new
/// ones), then each new one, as SSE events whose id is the seq. A
/// `Last-Event-ID` header (a reconnecting `EventSource`) resumes after it.
pub async fn watch(
    State(state): State<Shared>,
    params: Params,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let log = params.log()?.to_owned();
    let query = query(raw.as_deref(), &["from"])?;
    let served = state.namespaces.for_log(params.ns(), &log)?;
    let from = match headers.get("last-event-id") {
        Some(value) => {
            let text = value.to_str().map_err(|_| ApiError::invalid("Last-Event-ID must be a seq"))?;
            parse_seq("Last-Event-ID", text.trim())?.saturating_add(1)
        }
        None => match query.get("from") {
            Some(text) => parse_seq("from", text)?,
            None => served.ns().latest(&log)? + 1,
        },
    };
    let subscription = Subscription::open(&state, served, params.ns(), &log, from)?;
    let events = stream::unfold(subscription, |mut subscription| async move {
        subscription.next_event().await.map(|event| (Ok::<_, Infallible>(event), subscription))
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive")).into_response())
}
