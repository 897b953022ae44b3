//! The contract's rules as plain functions, shared by every backend so that
//! they decide alike (the conformance suite checks that they do).

use std::collections::HashSet;

use crate::contract::{validate_name, Limits, LogConfig, OnFull, Retention, Seq, RENAMES_PER_CALL_MAX};
use crate::error::{LogError, Result};

/// Bytes of per-record overhead counted against `Limits::batch_bytes_max`
/// (the journal's entry header; other backends count the same so that a batch
/// accepted by one is accepted by all).
pub const RECORD_OVERHEAD_BYTES: u64 = 20;

/// Reject empty, oversized or malformed batches before anything is written.
pub fn check_batch(limits: &Limits, batch: &[(&str, &[u8])]) -> Result<()> {
    if batch.is_empty() {
        return Err(LogError::InvalidArgument { reason: "a batch must hold at least one record".into() });
    }
    if batch.len() > limits.batch_records_max {
        return Err(LogError::TooLarge {
            what: "batch (in records)",
            size: batch.len() as u64,
            limit: limits.batch_records_max as u64,
        });
    }
    let mut total: u64 = 0;
    for (_, value) in batch {
        let len = value.len() as u64;
        if len > limits.record_bytes_max {
            return Err(LogError::TooLarge { what: "record", size: len, limit: limits.record_bytes_max });
        }
        total += len + RECORD_OVERHEAD_BYTES;
    }
    if total > limits.batch_bytes_max {
        return Err(LogError::TooLarge { what: "batch", size: total, limit: limits.batch_bytes_max });
    }
    Ok(())
}

/// The check of an `append_batch_if` that needs no state: every log it
/// expects is one the batch appends to.
pub fn check_expected_logs(batch: &[(&str, &[u8])], expected: &[(&str, Seq)]) -> Result<()> {
    match expected.iter().find(|(name, _)| !batch.iter().any(|(log, _)| log == name)) {
        Some((name, _)) => Err(LogError::InvalidArgument {
            reason: format!("append_batch_if expects log {name:?}, which the batch does not append to: a batch can only expect the logs it writes"),
        }),
        None => Ok(()),
    }
}

/// What a backend knows of a log a batch appends to.
#[derive(Clone, Copy, Debug)]
pub struct LogBounds {
    /// Its latest seq (0 when empty).
    pub latest: Seq,
    /// Its retention.
    pub retention: Retention,
}

/// What an append expects of the logs it writes to before it may land.
#[derive(Clone, Copy, Debug, Default)]
pub enum Expect<'a> {
    /// Nothing: a plain append.
    #[default]
    Nothing,
    /// Every log of the batch ends at this seq (`append_if`).
    Latest(Seq),
    /// Each named log ends at its seq (`append_batch_if`); every log named
    /// must be one the batch appends to.
    Each(&'a [(&'a str, Seq)]),
}

/// The seq each record of `batch` gets, in batch order, keyed by the
/// backend's handle of its log (`lookup` finds it, or fails for an unknown
/// log). Nothing is written here; every check comes first, in the order all
/// backends use, so a refused batch changes nothing and every backend refuses
/// it with the same error: an expectation about a log the batch does not
/// write, unknown logs (in batch order), then a conflict with what `expect`
/// asks (in its order), then room (`Full`), each in batch order.
pub fn assign_seqs<'b, K: Copy + PartialEq>(
    batch: &[(&'b str, &[u8])],
    expect: Expect<'_>,
    mut lookup: impl FnMut(&'b str) -> Result<(K, LogBounds)>,
) -> Result<Vec<(K, Seq)>> {
    if let Expect::Each(expected) = expect {
        check_expected_logs(batch, expected)?;
    }
    let mut logs: Vec<(K, &str, LogBounds, u64)> = Vec::new();
    let mut seqs = Vec::with_capacity(batch.len());
    for (name, _) in batch {
        let (key, bounds) = lookup(name)?;
        let index = logs.iter().position(|(other, ..)| *other == key).unwrap_or_else(|| {
            logs.push((key, name, bounds, 0));
            logs.len() - 1
        });
        let (_, _, bounds, count) = &mut logs[index];
        *count += 1;
        seqs.push((key, bounds.latest + *count));
    }
    match expect {
        Expect::Nothing => {}
        Expect::Latest(expected) => {
            if let Some((_, name, bounds, _)) = logs.iter().find(|(_, _, bounds, _)| bounds.latest != expected) {
                return Err(LogError::Conflict { log: (*name).to_owned(), expected, actual: bounds.latest });
            }
        }
        Expect::Each(expected) => {
            for (name, expected) in expected {
                let actual = logs.iter().find(|(_, log, ..)| log == name).map_or(0, |(_, _, bounds, _)| bounds.latest);
                if actual != *expected {
                    return Err(LogError::Conflict { log: (*name).to_owned(), expected: *expected, actual });
                }
            }
        }
    }
    for (_, name, bounds, count) in &logs {
        check_room(name, bounds.retention, bounds.latest, *count)?;
    }
    Ok(seqs)
}

/// The checks of a `rename_logs` call that need no state: the number of
/// pairs, the names (`_` names allowed on both sides), and no name twice as
/// `from` or twice as `to`. A client of a remote store checks here too, so
/// it never sends what would be refused.
pub fn check_rename_arguments(renames: &[(&str, &str)]) -> Result<()> {
    if renames.len() > RENAMES_PER_CALL_MAX {
        return Err(LogError::InvalidArgument {
            reason: format!(
                "a rename of {} logs is more than the {RENAMES_PER_CALL_MAX} one call takes: split it into several calls",
                renames.len()
            ),
        });
    }
    for (from, to) in renames {
        validate_name(from, true)?;
        validate_name(to, true)?;
    }
    named_once("`from`", renames.iter().map(|(from, _)| *from))?;
    named_once("`to`", renames.iter().map(|(_, to)| *to))
}

/// `InvalidArgument` for the first name `names` holds twice.
fn named_once<'a>(side: &str, mut names: impl Iterator<Item = &'a str>) -> Result<()> {
    let mut seen = HashSet::new();
    match names.find(|name| !seen.insert(*name)) {
        Some(name) => Err(LogError::InvalidArgument {
            reason: format!(
                "log {name:?} is named twice as {side} in one rename: each log is renamed at most once per call, and each name given to one log"
            ),
        }),
        None => Ok(()),
    }
}

/// Check a `rename_logs` call against the contract, in the order every
/// backend reports its errors: first [`check_rename_arguments`], then each
/// `from` must exist (`LogNotFound`, in call order), then each `to` must be
/// free or renamed away by the same call (`RenameTargetExists`, in call
/// order). `exists(name)` says whether a log of that name exists now.
pub fn check_renames(namespace: &str, renames: &[(&str, &str)], mut exists: impl FnMut(&str) -> bool) -> Result<()> {
    check_rename_arguments(renames)?;
    if let Some((from, _)) = renames.iter().find(|(from, _)| !exists(from)) {
        return Err(LogError::LogNotFound { namespace: namespace.to_owned(), log: (*from).to_owned() });
    }
    let froms: HashSet<&str> = renames.iter().map(|(from, _)| *from).collect();
    if let Some((from, to)) = renames.iter().find(|(_, to)| !froms.contains(to) && exists(to)) {
        return Err(LogError::RenameTargetExists {
            namespace: namespace.to_owned(),
            from: (*from).to_owned(),
            to: (*to).to_owned(),
        });
    }
    Ok(())
}

/// The configuration a log has after a rename to `to`: its own, with
/// `system` following the name (see [`crate::Namespace::rename_logs`]).
#[must_use]
pub fn config_renamed(config: LogConfig, to: &str) -> LogConfig {
    LogConfig { system: to.starts_with('_'), ..config }
}

/// Validate a `create_log` request's name and config.
pub fn check_create(log: &str, config: &LogConfig) -> Result<()> {
    validate_name(log, config.system)?;
    config.validate()
}

/// An existing log with `existing` config asked to be created with `requested`.
pub fn check_recreate(log: &str, existing: &LogConfig, requested: &LogConfig) -> Result<()> {
    if existing == requested {
        Ok(())
    } else {
        Err(LogError::AlreadyExists {
            log: log.to_owned(),
            existing: existing.retention.to_string(),
            requested: requested.retention.to_string(),
        })
    }
}

/// Can `incoming` more records be appended to a log whose latest seq is
/// `latest`? `Refuse` logs never trim, so they hold exactly `latest` records.
pub fn check_room(log: &str, retention: Retention, latest: Seq, incoming: u64) -> Result<()> {
    if latest.saturating_add(incoming) > crate::contract::SEQ_MAX {
        return Err(LogError::InvalidArgument {
            reason: format!(
                "log {log:?} is at seq {latest}: {incoming} more would pass seq {}, the last a log can have; append to a new log",
                crate::contract::SEQ_MAX
            ),
        });
    }
    match retention {
        Retention::Keep { k, on_full: OnFull::Refuse } if latest + incoming > k => {
            Err(LogError::Full { log: log.to_owned(), keep: k })
        }
        _ => Ok(()),
    }
}

/// The oldest seq a log with this retention keeps once its latest is `latest`.
#[must_use]
pub fn earliest_kept(retention: Retention, latest: Seq) -> Seq {
    match retention {
        _ if latest == 0 => 0,
        Retention::Keep { k, on_full: OnFull::Overwrite } => latest.saturating_sub(k - 1).max(1),
        _ => 1,
    }
}

/// The oldest seq a log keeps: what its retention keeps once its latest
/// is `latest`, and nothing below `trimmed_before` (its explicit trims).
#[must_use]
pub fn earliest_after_trims(retention: Retention, latest: Seq, trimmed_before: Seq) -> Seq {
    if latest == 0 {
        0
    } else {
        earliest_kept(retention, latest).max(trimmed_before)
    }
}

/// Check `trim(log, before)` against the log's bounds (see
/// [`crate::Namespace::trim`]): `Some(before)` to trim to, `None` when there
/// is nothing to trim. Every backend decides with this.
pub fn check_trim(log: &str, retention: Retention, before: Seq, earliest: Seq, latest: Seq) -> Result<Option<Seq>> {
    if let Retention::Keep { k, on_full: OnFull::Refuse } = retention {
        return Err(LogError::InvalidArgument {
            reason: format!(
                "log {log:?} keeps its first {k} records by design (retention keep {k}, refuse): it cannot be \
                 trimmed; trim logs with unbounded or overwrite retention"
            ),
        });
    }
    if before > latest {
        return Err(LogError::InvalidArgument {
            reason: format!(
                "trim of log {log:?} before seq {before}, past its latest seq {latest}: the newest record always \
                 stays, so trim before at most {latest}"
            ),
        });
    }
    Ok((before > earliest).then_some(before))
}

/// Is `seq` readable in a log with these bounds? The error says why not.
pub fn check_readable(log: &str, seq: Seq, earliest: Seq, latest: Seq) -> Result<()> {
    if seq == 0 || seq > latest {
        Err(LogError::SeqNotFound { log: log.to_owned(), seq, latest })
    } else if seq < earliest {
        Err(LogError::Trimmed { log: log.to_owned(), seq, earliest })
    } else {
        Ok(())
    }
}

/// Clip a scan range to `[earliest, latest]`; a start below `earliest` (on a
/// log that has trimmed) is `Trimmed`. Returns `None` for an empty result.
pub fn clip_scan(log: &str, first: Seq, last: Seq, earliest: Seq, latest: Seq) -> Result<Option<(Seq, Seq)>> {
    if first > last {
        return Err(LogError::InvalidArgument {
            reason: format!("scan range starts at {first}, after its end {last}"),
        });
    }
    if latest == 0 || first > latest {
        return Ok(None);
    }
    if first < earliest && earliest > 1 {
        return Err(LogError::Trimmed { log: log.to_owned(), seq: first, earliest });
    }
    Ok(Some((first.max(earliest), last.min(latest))))
}
