//! `varve log …`: create, append to, read, follow, list and delete logs.
//!
//! Each function opens the namespace the way its operation needs (read-only
//! for reads, for writing otherwise; see [`super::Context`]), does one thing,
//! and prints one answer or a stream of records.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context as _};
use serde::Serialize;
use varve_log::{validate_name, Limits, LogConfig, LogInfo, OnFull, Record, Retention, Seq, SeqRange, Watch};

use super::Context;
use crate::output::{self, human_value, JsonRecord, Unit};

/// `tail` without `--from` starts this many records before the end, like `tail -f`.
const TAIL_START_RECORDS: u64 = 10;
/// Scans longer than this show a progress bar (when stderr is a terminal).
const SCAN_PROGRESS_RECORDS_MIN: u64 = 10_000;

/// Where `append` gets its record.
pub enum ValueSource<'a> {
    Text(&'a str),
    File(&'a Path),
    Stdin,
}

pub fn create(ctx: &Context<'_>, name: &str, keep: Option<u64>, on_full: Option<OnFull>) -> anyhow::Result<()> {
    let config = match keep {
        Some(k) => LogConfig::keep(k, on_full.unwrap_or(OnFull::Refuse)),
        None => LogConfig::unbounded(),
    };
    let created = super::write::create_log(ctx, name, config)?;
    let existed = !created;
    let answer = CreateAnswer { log: name, created, retention: RetentionJson::from(config.retention) };
    ctx.out.answer(&answer, || {
        if existed {
            format!("log {name} already exists ({})", config.retention)
        } else {
            format!("created log {name} ({})", config.retention)
        }
    })?;
    Ok(())
}

/// Append one record. Safe to retry under the same `request_id` (see
/// [`super::write`]): a repeat appends nothing and answers the first seq.
pub fn append(ctx: &Context<'_>, name: &str, source: &ValueSource<'_>, request_id: Option<&str>) -> anyhow::Result<()> {
    validate_name(name, true)?;
    let value = read_value(source)?;
    let answer = super::write::append(ctx, &[(name, &value)], request_id)?;
    let seq = answer.seqs[0];
    let repeated = answer.repeated;
    ctx.out.answer(&Appended { log: name, seq, repeated }, || {
        format!("appended {name} seq {seq}{}", repeat_note(repeated, request_id))
    })?;
    Ok(())
}

/// Said after an append whose request id had landed before.
fn repeat_note(repeated: bool, request_id: Option<&str>) -> String {
    match (repeated, request_id) {
        (false, _) => String::new(),
        (true, Some(id)) => format!(" (request {id} had landed before: nothing appended now)"),
        (true, None) => " (an attempt whose answer was lost had landed: appended once)".to_owned(),
    }
}

pub fn batch(ctx: &Context<'_>, entries: &[String], request_id: Option<&str>) -> anyhow::Result<()> {
    let mut batch: Vec<(&str, &[u8])> = Vec::with_capacity(entries.len());
    for entry in entries {
        let Some((log, value)) = entry.split_once('=') else {
            bail!("batch entry {entry:?} is not LOG=VALUE (the log name, `=`, then the record)");
        };
        validate_name(log, true)?;
        batch.push((log, value.as_bytes()));
    }
    let answer = super::write::append(ctx, &batch, request_id)?;
    let repeated = answer.repeated;
    let appended: Vec<Appended<'_>> =
        batch.iter().zip(&answer.seqs).map(|((log, _), &seq)| Appended { log, seq, repeated }).collect();
    ctx.out.answer(&BatchAnswer { appended: &appended }, || {
        let mut lines: Vec<String> = appended.iter().map(|a| format!("appended {} seq {}", a.log, a.seq)).collect();
        if let Some(last) = lines.last_mut() {
            last.push_str(&repeat_note(repeated, request_id));
        }
        lines.join("\n")
    })?;
    Ok(())
}

pub fn get(ctx: &Context<'_>, name: &str, seq: Seq) -> anyhow::Result<()> {
    validate_name(name, true)?;
    let value = match super::runtime::handler_socket(ctx) {
        // Inside an external handler: read through the runtime, which records the READ.
        Some((path, cause)) => super::runtime::get_via_socket(&path, &cause, name, seq)?.into(),
        None => ctx.reader()?.get(name, seq)?,
    };
    // A typed log's record prints as JSON, in its newest shape.
    if let Some((typed, note)) = ctx.reader().ok().and_then(|ns| super::schema::typed_json(&ns, name, seq, &value)) {
        if let Some(note) = &note {
            crate::output::warn(note);
        }
        ctx.out.answer(&serde_json::json!({ "seq": seq, "record": typed }), || typed.to_string())?;
        return Ok(());
    }
    ctx.out.answer(&JsonRecord::new(seq, &value), || human_value(&value).into_owned())?;
    Ok(())
}

pub fn latest(ctx: &Context<'_>, name: &str) -> anyhow::Result<()> {
    validate_name(name, true)?;
    if let Some((path, cause)) = super::runtime::handler_socket(ctx) {
        // Inside an external handler: ask the runtime, which records the LATEST.
        let latest = super::runtime::latest_via_socket(&path, &cause, name)?;
        ctx.out.answer(&LatestOnly { log: name, latest }, || format!("latest: {latest}"))?;
        return Ok(());
    }
    let ns = ctx.reader()?;
    let info = ns.log_info(name)?;
    let answer = LatestAnswer { log: name, latest: info.latest, earliest: info.earliest };
    ctx.out.answer(&answer, || format!("latest: {}\nearliest: {}", info.latest, info.earliest))?;
    Ok(())
}

pub fn info(ctx: &Context<'_>, name: &str) -> anyhow::Result<()> {
    validate_name(name, true)?;
    let ns = ctx.reader()?;
    let mut info = ns.log_info(name)?;
    if let Some((path, cause)) = super::runtime::handler_socket(ctx) {
        // Inside an external handler: the latest seq is a read the runtime
        // records (a LATEST), and a repair's replay answers it as the
        // original run saw it; the rest describes the log, not its history.
        info.latest = super::runtime::latest_via_socket(&path, &cause, name)?;
    }
    let answer = InfoAnswer { namespace: &ctx.namespace, log: LogJson::from(&info) };
    ctx.out.answer(&answer, || {
        format!(
            "log:        {}\nnamespace:  {}\nretention:  {}\nearliest:   {}\nlatest:     {}\nrecords:    {}",
            info.name,
            ctx.namespace,
            info.config.retention,
            info.earliest,
            info.latest,
            info.len(),
        )
    })?;
    Ok(())
}

pub fn ls(ctx: &Context<'_>) -> anyhow::Result<()> {
    let ns = ctx.reader()?;
    let logs = ns.list_logs()?;
    let answer = ListAnswer { namespace: &ctx.namespace, logs: logs.iter().map(LogJson::from).collect() };
    ctx.out.answer(&answer, || table(&ctx.namespace, &logs))?;
    Ok(())
}

pub fn rm(ctx: &Context<'_>, name: &str) -> anyhow::Result<()> {
    validate_name(name, true)?;
    super::write::delete_log(ctx, name)?;
    ctx.out.answer(&DeleteAnswer { log: name, deleted: true }, || format!("deleted log {name}"))?;
    Ok(())
}

pub fn trim(ctx: &Context<'_>, name: &str, before: Seq) -> anyhow::Result<()> {
    validate_name(name, true)?;
    if varve_runtime::is_runtime_log(name) {
        bail!(
            "{name} is the runtime's own log: it is not trimmed by hand; set `events_keep` or `events_keep_for` in the \
             app's manifest and the runtime trims its event log itself"
        );
    }
    if name.starts_with('_') {
        // `_repairs` (an open repair's intent), `_schema`, `_gen.*`: what
        // reads them needs them whole.
        bail!(
            "{name} is a system log (names beginning with `_` are Varve's own): it is not trimmed by hand; an old \
             repair generation `_gen.LOG.N` can be deleted whole with `varve log rm`"
        );
    }
    let earliest = super::write::trim_log(ctx, name, before)?;
    ctx.out.answer(&TrimAnswer { log: name, earliest }, || format!("log {name}: earliest seq now {earliest}"))?;
    Ok(())
}

pub fn scan(ctx: &Context<'_>, name: &str, from: Option<Seq>, to: Option<Seq>) -> anyhow::Result<()> {
    validate_name(name, true)?;
    let ns = ctx.reader()?;
    let info = ns.log_info(name)?;
    // Without --from, start at what retention still keeps (seq 1 may be trimmed).
    let range = SeqRange::from_bounds(from.unwrap_or(info.earliest)..=to.unwrap_or(Seq::MAX));
    let expected = range.last.min(info.latest).saturating_add(1).saturating_sub(range.first);
    let bar = if expected > SCAN_PROGRESS_RECORDS_MIN {
        output::progress_bar(expected, Unit::Records, &format!("scanning {name}"), true)
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut writer = ctx.out.records();
    let mut lost = 0;
    // A typed log's records print as JSON, in their newest shape.
    let schemas = varve_schema::Schemas::open(ns.clone()).ok().filter(|s| super::schema::subject_of(s, name).is_some());
    let mut lines = crate::output::LineWriter::stdout();
    let records: Box<dyn Iterator<Item = varve_log::Result<varve_log::Record>>> =
        match super::runtime::handler_socket(ctx) {
            // Inside an external handler: read through the runtime, which
            // records the READ (and, in a repair's replay, serves the history
            // the original run saw).
            Some((path, cause)) => {
                Box::new(super::runtime::scan_via_socket(&path, &cause, name, range)?.into_iter().map(Ok))
            }
            None => Box::new(ns.scan(name, range)?),
        };
    for record in records {
        match record {
            Ok(record) if schemas.is_some() => {
                let schemas = schemas.as_ref().unwrap_or_else(|| unreachable!("checked by the guard"));
                let (json, note) = super::schema::typed_json_with(schemas, name, record.seq, &record.value)
                    .unwrap_or((serde_json::Value::Null, None));
                if let Some(note) = note {
                    crate::output::warn(&note);
                }
                let line = if ctx.out.json() {
                    serde_json::json!({ "seq": record.seq, "record": json }).to_string()
                } else {
                    format!("{}\t{json}", record.seq)
                };
                lines.line(&line)?;
                bar.inc(1);
            }
            Ok(record) => {
                writer.write(record.seq, &record.value)?;
                bar.inc(1);
            }
            // A run of lost records: say so and go on with the intact ones.
            Err(error @ varve_log::LogError::Lost { first, last, .. }) => {
                writer.flush()?;
                output::warn(&error.to_string());
                lost += last - first + 1;
                bar.inc(last - first + 1);
            }
            Err(error) => return Err(error.into()),
        }
    }
    writer.flush()?;
    lines.flush()?;
    bar.finish_and_clear();
    if lost > 0 {
        bail!("{lost} record(s) of log {name} are lost (see the warnings above); every other record was printed");
    }
    Ok(())
}

/// Print the last records (or from `from`), then each new one as another
/// process appends it. Runs until killed: Ctrl-C (SIGINT) or SIGTERM end the
/// process with the default action, which is all a read-only follower needs —
/// it holds no lock and has nothing buffered while it waits (output is flushed
/// before each wait).
pub fn tail(ctx: &Context<'_>, name: &str, from: Option<Seq>) -> anyhow::Result<()> {
    validate_name(name, true)?;
    if super::runtime::handler_socket(ctx).is_some() {
        // A handler must end; a tail follows until it is killed (the run
        // would hang to its timeout), and its reads would escape the runtime.
        bail!(
            "`varve log tail` follows {name} until interrupted, and a handler's run must end: read with `varve log \
             latest {name}` and `varve log scan {name} --from SEQ` instead (the runtime records those reads)"
        );
    }
    let ns = ctx.reader()?;
    let info = ns.log_info(name)?;
    let from = from.unwrap_or_else(|| info.latest.saturating_sub(TAIL_START_RECORDS - 1).max(info.earliest).max(1));
    let mut watch = ns.watch(name, from)?;
    let mut writer = ctx.out.records();
    let mut block = false;
    loop {
        // Print whatever is there without flushing per record; flush only
        // before blocking, so a follower reading our stdout sees every record.
        // (A failed step leaves the watch where it was, so retrying is safe.)
        let step = match follow_step(&mut watch, block) {
            // A run of lost records: say so; the watch goes on after it.
            Err(error @ varve_log::LogError::Lost { .. }) => {
                writer.flush()?;
                output::warn(&error.to_string());
                continue;
            }
            other => other?,
        };
        match step {
            FollowStep::Record(record) => {
                writer.write(record.seq, &record.value)?;
                block = false;
            }
            FollowStep::Idle => {
                writer.flush()?;
                block = true;
            }
            FollowStep::Ended => return Ok(()),
        }
    }
}

/// What one step of following a log found.
enum FollowStep {
    Record(Record),
    /// Nothing new yet.
    Idle,
    /// The watch ended (a blocking watch never does; if it did, so do we).
    Ended,
}

/// The next record if it is there; with `block`, wait until one lands.
fn follow_step(watch: &mut Watch, block: bool) -> varve_log::Result<FollowStep> {
    if block {
        watch.next().map_or(Ok(FollowStep::Ended), |record| record.map(FollowStep::Record))
    } else {
        Ok(watch.next_timeout(Duration::ZERO)?.map_or(FollowStep::Idle, FollowStep::Record))
    }
}

// ------------------------------------------------------------ JSON answers

/// `create`: `{"log":…,"created":true|false,"retention":…}` (false: it already existed).
#[derive(Serialize)]
struct CreateAnswer<'a> {
    log: &'a str,
    created: bool,
    #[serde(flatten)]
    retention: RetentionJson,
}

/// `trim`: `{"log":…,"earliest":N}`.
#[derive(Serialize)]
struct TrimAnswer<'a> {
    log: &'a str,
    earliest: Seq,
}

/// `batch`: `{"appended":[{"log":…,"seq":N},…]}`, in input order.
#[derive(Serialize)]
struct BatchAnswer<'a> {
    appended: &'a [Appended<'a>],
}

/// `latest` inside an external handler (through the runtime: no earliest).
#[derive(Serialize)]
struct LatestOnly<'a> {
    log: &'a str,
    latest: Seq,
}

/// `latest`.
#[derive(Serialize)]
struct LatestAnswer<'a> {
    log: &'a str,
    latest: Seq,
    earliest: Seq,
}

/// `info`: the namespace and the log's [`LogJson`] fields.
#[derive(Serialize)]
struct InfoAnswer<'a> {
    namespace: &'a str,
    #[serde(flatten)]
    log: LogJson<'a>,
}

/// `ls`: `{"namespace":…,"logs":[…]}`, logs in name order.
#[derive(Serialize)]
struct ListAnswer<'a> {
    namespace: &'a str,
    logs: Vec<LogJson<'a>>,
}

/// `rm`.
#[derive(Serialize)]
struct DeleteAnswer<'a> {
    log: &'a str,
    deleted: bool,
}

/// The answer to `append`, and each entry of the answer to `batch`.
#[derive(Serialize)]
struct Appended<'a> {
    log: &'a str,
    seq: Seq,
    /// Present (true) when the request id had landed before and nothing was appended now.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    repeated: bool,
}

/// A log's configuration and bounds, as `info` and `ls` print it.
#[derive(Serialize)]
struct LogJson<'a> {
    log: &'a str,
    #[serde(flatten)]
    retention: RetentionJson,
    earliest: Seq,
    latest: Seq,
    len: u64,
}

impl<'a> From<&'a LogInfo> for LogJson<'a> {
    fn from(info: &'a LogInfo) -> Self {
        LogJson {
            log: &info.name,
            retention: RetentionJson::from(info.config.retention),
            earliest: info.earliest,
            latest: info.latest,
            len: info.len(),
        }
    }
}

/// `"retention": "unbounded"`, or `"retention": "keep", "keep": K, "on_full": "refuse"|"overwrite"`.
#[derive(Serialize)]
struct RetentionJson {
    retention: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    keep: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    on_full: Option<&'static str>,
}

impl From<Retention> for RetentionJson {
    fn from(retention: Retention) -> Self {
        match retention {
            Retention::Unbounded => RetentionJson { retention: "unbounded", keep: None, on_full: None },
            Retention::Keep { k, on_full } => RetentionJson {
                retention: "keep",
                keep: Some(k),
                on_full: Some(match on_full {
                    OnFull::Refuse => "refuse",
                    OnFull::Overwrite => "overwrite",
                }),
            },
        }
    }
}

/// `ls` for people: one row per log, columns aligned.
fn table(namespace: &str, logs: &[LogInfo]) -> String {
    if logs.is_empty() {
        return format!("no logs in namespace {namespace}");
    }
    let header = ["LOG", "EARLIEST", "LATEST", "RECORDS", "RETENTION"];
    let rows: Vec<[String; 5]> = logs
        .iter()
        .map(|info| {
            [
                info.name.clone(),
                info.earliest.to_string(),
                info.latest.to_string(),
                info.len().to_string(),
                info.config.retention.to_string(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    let line = |cells: [&str; 5]| {
        let [name, earliest, latest, len, retention] = cells;
        format!(
            "{name:<w0$}  {earliest:>w1$}  {latest:>w2$}  {len:>w3$}  {retention}",
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3],
        )
    };
    let mut lines = vec![line(header)];
    lines.extend(rows.iter().map(|row| line(row.each_ref().map(String::as_str))));
    lines.join("\n")
}

/// The record to append, read whole. Reading stops just past the record size
/// limit, so a huge file or endless stdin is refused without filling memory.
pub fn read_value(source: &ValueSource<'_>) -> anyhow::Result<Vec<u8>> {
    let limit = Limits::default().record_bytes_max;
    let (reader, what): (Box<dyn Read>, String) = match source {
        ValueSource::Text(text) => return Ok(text.as_bytes().to_vec()),
        ValueSource::File(path) => (
            Box::new(File::open(path).with_context(|| format!("opening {}", path.display()))?),
            path.display().to_string(),
        ),
        ValueSource::Stdin => (Box::new(io::stdin().lock()), "stdin".to_owned()),
    };
    let mut value = Vec::new();
    reader.take(limit + 1).read_to_end(&mut value).with_context(|| format!("reading the record from {what}"))?;
    if value.len() as u64 > limit {
        bail!("the record from {what} is over the limit of {limit} bytes: split it into several records");
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_columns() {
        let info = |name: &str, latest| LogInfo {
            name: name.into(),
            config: LogConfig::keep(5, OnFull::Overwrite),
            earliest: 1,
            latest,
        };
        let text = table("default", &[info("a", 3), info("longer-name", 12_345)]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("LOG          EARLIEST"), "{text}");
        assert!(lines[2].starts_with("longer-name"), "{text}");
        assert!(lines[2].ends_with("keep 5, overwrite when full"), "{text}");
        assert_eq!(table("x", &[]), "no logs in namespace x");
    }
}
