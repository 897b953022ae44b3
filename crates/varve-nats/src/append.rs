//! Appends: dense per-log seqs by compare-and-set, batches by ADR-50
//! atomic batch publish, and retries that never append twice.
//!
//! Every record is published with `Varve-Seq` (its seq) and `Varve-Append`
//! (an id for this call, the same on every retry), and the first record of
//! each log in the call with `Nats-Expected-Last-Subject-Sequence` = the
//! stream sequence of that log's latest record. So:
//! - two writers (processes, hosts) that both saw latest = n cannot both
//!   write n+1: one commits, the other gets "wrong last sequence", re-reads
//!   and tries again at the new end;
//! - an attempt whose answer was lost either landed — then its first record
//!   sits right after the stream sequence it expected, with this call's id,
//!   and the retry finds it and returns its seqs — or did not, and then at
//!   most one of it and the retry can commit (both expect the same last
//!   sequence).

use std::time::Instant;

use async_nats::header::HeaderMap;
use rand::Rng as _;
use varve_log::rules::{self, Expect, LogBounds};
use varve_log::{LogError, OnFull, Result, Retention, Seq};

use crate::conn::{backoff, err_code, parse_answer, ApiError, Failure};
use crate::namespace::{Inner, LogState};
use crate::stored::{PubAck, APPEND_ID_HEADER, SEQ_HEADER};

/// An attempt whose answer was lost: where its first record would be.
struct Lost {
    log: String,
    config_sseq: u64,
    /// The stream sequence the attempt expected as the log's last.
    after_sseq: u64,
    seqs: Vec<Seq>,
}

/// Append `batch` (all or nothing), only if the logs end where `expected`
/// says (`append_if`, `append_batch_if`).
pub(crate) fn append(inner: &Inner, batch: &[(&str, &[u8])], expected: Expect<'_>) -> Result<Vec<Seq>> {
    rules::check_batch(&inner.limits, batch)?;
    let append_id = format!("{:032x}", rand::thread_rng().gen::<u128>());
    let operation = format!("append {} record(s) to namespace {:?}", batch.len(), inner.name);
    let deadline = inner.conn.options.append_deadline;
    let started = Instant::now();
    let mut lost: Vec<Lost> = Vec::new();
    let mut last_reason = String::new();
    let mut fresh = false;
    for attempt in 1u32.. {
        if attempt > 1 && started.elapsed() > deadline {
            break;
        }
        match try_once(inner, batch, expected, &append_id, attempt, fresh, &mut lost) {
            Ok(seqs) => return Ok(seqs),
            Err(Retry::Now) => fresh = true,
            Err(Retry::Later(reason)) => {
                last_reason = reason;
                fresh = true;
                std::thread::sleep(backoff(attempt));
            }
            Err(Retry::Stop(error)) => return Err(error),
        }
    }
    let target = inner.target().to_owned();
    Err(if lost.is_empty() {
        LogError::Unavailable { target, reason: format!("{last_reason}; gave up after {deadline:?}") }
    } else {
        LogError::OutcomeUnknown { target, operation, reason: format!("{last_reason}; gave up after {deadline:?}") }
    })
}

enum Retry {
    /// Read the logs' state again and retry at once (a conflict).
    Now,
    /// The servers are unavailable: wait a little, then retry.
    Later(String),
    Stop(LogError),
}

fn try_once(
    inner: &Inner,
    batch: &[(&str, &[u8])],
    expected: Expect<'_>,
    append_id: &str,
    attempt: u32,
    fresh: bool,
    lost: &mut Vec<Lost>,
) -> Result<Vec<Seq>, Retry> {
    let mut states: Vec<(&str, LogState)> = Vec::new();
    for (log, _) in batch {
        if states.iter().any(|(name, _)| name == log) {
            continue;
        }
        let state = if fresh { inner.refresh(log) } else { inner.state(log) };
        match state {
            Ok(state) => states.push((log, state)),
            Err(LogError::Unavailable { reason, .. }) => return Err(Retry::Later(reason)),
            Err(error) => return Err(Retry::Stop(error)),
        }
    }
    for earlier in lost.iter() {
        if landed(inner, earlier, append_id)? {
            return Ok(earlier.seqs.clone());
        }
    }
    let assigned = rules::assign_seqs(batch, expected, |log| {
        let index = states.iter().position(|(name, _)| *name == log).unwrap_or(0);
        let state = &states[index].1;
        Ok((index, LogBounds { latest: state.latest, retention: state.config.retention }))
    });
    let seqs: Vec<Seq> = match assigned {
        Ok(assigned) => assigned.into_iter().map(|(_, seq)| seq).collect(),
        // The cache may be behind: decide on what the servers hold.
        Err(LogError::Conflict { .. } | LogError::Full { .. }) if !fresh => return Err(Retry::Now),
        Err(error) => return Err(Retry::Stop(error)),
    };
    match inner.conn.block_on(publish(inner, batch, &states, &seqs, append_id, attempt)) {
        Ok(ack) => {
            after_commit(inner, batch, &states, &seqs, ack.seq);
            Ok(seqs)
        }
        Err(Failure::Api(error)) => match error.err_code {
            err_code::WRONG_LAST_SEQUENCE => {
                for (log, _) in &states {
                    inner.forget(log);
                }
                Err(Retry::Now)
            }
            // Another write to one of the logs is in flight.
            err_code::WRONG_LAST_SEQUENCE_CONSTANT => Err(Retry::Later(error.description)),
            err_code::MESSAGE_TOO_LARGE | 10199 => Err(Retry::Stop(too_large(inner, &error, batch))),
            // No leader, stream offline, incomplete batch, too many in flight.
            10008 | 10009 | 10023 | 10118 | 10176 | 10194 | 10210 => Err(Retry::Later(error.description)),
            _ if error.code == 503 => Err(Retry::Later(error.description)),
            _ => Err(Retry::Stop(error.into_log_error(inner.target(), "append"))),
        },
        Err(Failure::NotSent(reason)) => match inner.refusal_of_no_responders() {
            Some(error) => Err(Retry::Stop(error)),
            None => Err(Retry::Later(reason)),
        },
        Err(Failure::Lost(reason)) => {
            let (log, state) = &states[0];
            lost.push(Lost {
                log: (*log).to_owned(),
                config_sseq: state.config_sseq,
                after_sseq: state.latest_sseq,
                seqs,
            });
            Err(Retry::Later(format!("the answer was lost ({reason})")))
        }
    }
}

/// Did the lost attempt `earlier` commit? Its first record would be the
/// first message of its log after the stream sequence it expected.
fn landed(inner: &Inner, earlier: &Lost, append_id: &str) -> Result<bool, Retry> {
    let subject = inner.layout.data(&earlier.log);
    match inner.conn.block_on(inner.direct_next(&subject, earlier.after_sseq + 1)) {
        Ok(Some(found)) => {
            let ours = found.append_id.as_deref() == Some(append_id) && found.seq == earlier.seqs[0];
            if ours {
                inner.learn(&earlier.log, earlier.config_sseq, found.seq, found.sseq);
            }
            Ok(ours)
        }
        Ok(None) => Ok(false),
        Err(Failure::NotSent(reason) | Failure::Lost(reason)) => Err(Retry::Later(reason)),
        Err(Failure::Api(error)) => Err(Retry::Stop(error.into_log_error(inner.target(), "read back an append"))),
    }
}

fn record_headers(seq: Seq, append_id: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(SEQ_HEADER, seq.to_string().as_str());
    headers.insert(APPEND_ID_HEADER, append_id);
    headers
}

/// Publish the records: one message, or an atomic batch.
async fn publish(
    inner: &Inner,
    batch: &[(&str, &[u8])],
    states: &[(&str, LogState)],
    seqs: &[Seq],
    append_id: &str,
    attempt: u32,
) -> Result<PubAck, Failure> {
    let conn = &inner.conn;
    let mut checked: Vec<&str> = Vec::new();
    let batch_id = format!("{append_id}-{attempt}");
    let last = batch.len() - 1;
    for (index, ((log, value), seq)) in batch.iter().zip(seqs).enumerate() {
        let mut headers = record_headers(*seq, append_id);
        if !checked.contains(log) {
            checked.push(log);
            let state = &states.iter().find(|(name, _)| name == log).map_or(0, |(_, s)| s.latest_sseq);
            headers.insert("Nats-Expected-Last-Subject-Sequence", state.to_string().as_str());
        }
        if last > 0 {
            headers.insert("Nats-Batch-Id", batch_id.as_str());
            headers.insert("Nats-Batch-Sequence", (index + 1).to_string().as_str());
        }
        let payload = bytes::Bytes::copy_from_slice(value);
        if index < last {
            conn.client
                .publish_with_headers(inner.layout.data(log), headers, payload)
                .await
                .map_err(|e| Failure::NotSent(format!("cannot send: {e}")))?;
        } else {
            if last > 0 {
                headers.insert("Nats-Batch-Commit", "1");
            }
            let message = conn.request(inner.layout.data(log), Some(headers), payload).await?;
            return parse_answer::<PubAck>(&message.payload);
        }
    }
    Err(Failure::NotSent("an empty batch".into()))
}

/// Learn where the records landed, and trim overwrite logs now and then.
fn after_commit(inner: &Inner, batch: &[(&str, &[u8])], states: &[(&str, LogState)], seqs: &[Seq], last_sseq: u64) {
    // An atomic batch commits as consecutive stream sequences; these are
    // hints only, checked when used.
    let count = batch.len() as u64;
    for (index, ((log, _), seq)) in batch.iter().zip(seqs).enumerate() {
        if let Some((_, state)) = states.iter().find(|(name, _)| name == log) {
            let sseq = last_sseq - (count - 1 - index as u64);
            inner.learn(log, state.config_sseq, *seq, sseq);
        }
    }
    for (log, state) in states {
        let Retention::Keep { k, on_full: OnFull::Overwrite } = state.config.retention else { continue };
        let Some(&new_latest) = batch.iter().zip(seqs).filter(|((name, _), _)| name == log).map(|(_, s)| s).next_back()
        else {
            continue;
        };
        // Purge once per quarter of k records (at least every record for
        // small k); records past retention are invisible meanwhile.
        let step = (k / 4).max(1);
        if new_latest > k && new_latest / step != state.latest / step {
            // Best effort: a failed purge leaves invisible records for the next one.
            let _ = inner.purge_overwritten(log, k);
        }
    }
}

fn too_large(inner: &Inner, error: &ApiError, batch: &[(&str, &[u8])]) -> LogError {
    let size = batch.iter().map(|(_, v)| v.len() as u64).max().unwrap_or(0);
    let limit = inner.conn.client.server_info().max_payload as u64;
    LogError::TooLarge {
        what: if error.err_code == 10199 {
            "batch (in records), for the servers' batch max_msgs"
        } else {
            "record, for the servers' max_payload"
        },
        size: if error.err_code == 10199 { batch.len() as u64 } else { size },
        limit: if error.err_code == 10199 { inner.limits.batch_records_max as u64 } else { limit },
    }
}
