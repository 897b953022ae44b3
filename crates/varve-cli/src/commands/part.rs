//! `varve part …`: PART's durable map (`varve_part::durable::DurableMap`),
//! an in-memory adaptive radix tree made durable by a batch log and
//! incremental checkpoints. Keys and values are UTF-8 text here (the map
//! holds bytes; a value some other program stored as non-UTF-8 prints as
//! base64 in `--json`, as a notice otherwise).
//!
//! Every invocation opens the map: loads the checkpoint in force and
//! replays the batches logged after it, so a checkpoint shortens the next
//! open. Unlike `varve map`, the map has one version: the latest (the
//! manifest log keeps the last `MANIFESTS_KEPT` checkpoints' records, which
//! `info` lists, but only the one in force can be loaded).
//!
//! Embedded store only: a `DurableMap` has one writer per map (its
//! generations and checkpoints assume it), which the journal's writer lock
//! guarantees and a shared server does not.

use std::fmt::Write as _;
use std::sync::Arc;

use base64::Engine as _;
use serde_json::{json, Value};
use varve_log::{LogError, Namespace};
use varve_part::durable::{CheckpointStats, DurableMap, DurableOptions};
use varve_part::BatchOp;

use super::Context;

type TextMap = DurableMap<Vec<u8>>;

/// The manifest log of map `name` (see `varve_part::durable`'s log names):
/// created by the first open, so its absence means there is no map.
fn manifest_log(name: &str) -> String {
    format!("{name}.manifest")
}

fn missing(ctx: &Context<'_>, name: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "no PART map {name:?} in namespace {}: create it with `varve part put {name} KEY=VALUE`, or check the name and --ns/--data",
        ctx.namespace
    )
}

/// Open `name` for updates (takes the namespace's writer lock); `create`:
/// make it if there is none, else that is an error.
fn open_write(ctx: &Context<'_>, name: &str, create: bool) -> anyhow::Result<TextMap> {
    varve_log::validate_name(&manifest_log(name), false)?;
    let ns: Arc<dyn Namespace> = Arc::new(
        ctx.open_write()
            .map_err(|e| super::write::explain_locked(ctx, e, "a PART map is written by one process at a time"))?,
    );
    if !create {
        super::require_log(ns.as_ref(), &manifest_log(name), || missing(ctx, name))?;
    }
    Ok(DurableMap::open(ns, name, DurableOptions::default())?)
}

/// Open an existing `name` read-only (no lock: it runs beside a writer).
fn open_read(ctx: &Context<'_>, name: &str) -> anyhow::Result<(TextMap, Arc<dyn Namespace>)> {
    varve_log::validate_name(&manifest_log(name), false)?;
    let ns: Arc<dyn Namespace> = match ctx.open_read() {
        Ok(ns) => Arc::new(ns),
        Err(LogError::NamespaceNotFound { .. }) => return Err(missing(ctx, name)),
        Err(e) => return Err(e.into()),
    };
    super::require_log(ns.as_ref(), &manifest_log(name), || missing(ctx, name))?;
    Ok((DurableMap::open(ns.clone(), name, DurableOptions::default())?, ns))
}

/// Bytes as JSON: `{"<field>": text}` when UTF-8, else `{"<field>_base64": …}`.
fn put_bytes(object: &mut Value, field: &str, bytes: &[u8]) {
    if let Ok(text) = std::str::from_utf8(bytes) {
        object[field] = json!(text);
    } else {
        object[format!("{field}_base64")] = json!(base64::engine::general_purpose::STANDARD.encode(bytes));
    }
}

/// `varve part put NAME KEY=VALUE…`: one batch, all pairs or none.
pub fn put(ctx: &Context<'_>, name: &str, pairs: &[String]) -> anyhow::Result<()> {
    let ops: Vec<BatchOp<Vec<u8>>> = pairs
        .iter()
        .map(|pair| {
            super::map::parse_pair(pair).map(|(k, v)| BatchOp::Put(k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        })
        .collect::<anyhow::Result<_>>()?;
    apply(ctx, name, ops, true, "set")
}

/// `varve part rm NAME KEY…`: one batch removing every key (absent keys change nothing).
pub fn rm(ctx: &Context<'_>, name: &str, keys: &[String]) -> anyhow::Result<()> {
    let ops = keys.iter().map(|key| BatchOp::Delete(key.as_bytes().to_vec())).collect();
    apply(ctx, name, ops, false, "removed")
}

/// Apply `ops` as one batch and print its seq in the batch log (a full
/// checkpoint starts a new batch log, whose seqs start again from 1).
fn apply(ctx: &Context<'_>, name: &str, ops: Vec<BatchOp<Vec<u8>>>, create: bool, done: &str) -> anyhow::Result<()> {
    let keys = ops.len();
    let mut map = open_write(ctx, name, create)?;
    let batch = map.apply(ops)?;
    let (entries, log) = (map.len(), format!("{name}.batches.{}", map.batch_generation()));
    let answer = json!({ "part": name, "batch": batch, "batch_log": log, "keys": keys, "entries": entries });
    ctx.out.answer(&answer, || format!("{name}: {keys} key(s) {done} in batch {batch} of {log}; {entries} entries"))?;
    Ok(())
}

/// `varve part get NAME KEY`.
pub fn get(ctx: &Context<'_>, name: &str, key: &str) -> anyhow::Result<()> {
    let (map, _) = open_read(ctx, name)?;
    let Some(value) = map.get(key.as_bytes()) else {
        anyhow::bail!("PART map {name} has no key {key:?} (`varve part scan {name}` lists its keys)");
    };
    let mut answer = json!({ "key": key });
    put_bytes(&mut answer, "value", value);
    ctx.out.answer(&answer, || crate::output::human_value(value).into_owned())?;
    Ok(())
}

/// Which entries `scan` prints.
pub struct ScanRequest<'a> {
    pub prefix: Option<&'a str>,
    /// Keys from this one, inclusive.
    pub from: Option<&'a str>,
    /// Keys up to this one, inclusive.
    pub to: Option<&'a str>,
    pub limit: Option<usize>,
}

/// `varve part scan NAME …`: entries in key (byte) order, one per line.
pub fn scan(ctx: &Context<'_>, name: &str, request: &ScanRequest<'_>) -> anyhow::Result<()> {
    use std::ops::Bound;
    let (map, _) = open_read(ctx, name)?;
    let lower = match (request.from, request.prefix) {
        (Some(from), Some(prefix)) => Some(from.max(prefix)),
        (from, prefix) => from.or(prefix),
    };
    let range: (Bound<&[u8]>, Bound<&[u8]>) = (
        lower.map_or(Bound::Unbounded, |k| Bound::Included(k.as_bytes())),
        request.to.map_or(Bound::Unbounded, |k| Bound::Included(k.as_bytes())),
    );
    let prefix = request.prefix.unwrap_or("").as_bytes();
    let mut out = crate::output::LineWriter::stdout();
    let entries = map.range(range).take_while(|(key, _)| key.starts_with(prefix));
    for (key, value) in entries.take(request.limit.unwrap_or(usize::MAX)) {
        let line = if ctx.out.json() {
            let mut object = json!({});
            put_bytes(&mut object, "key", &key);
            put_bytes(&mut object, "value", value);
            object.to_string()
        } else {
            format!("{}\t{}", crate::output::human_value(&key), crate::output::human_value(value))
        };
        out.line(&line)?;
    }
    Ok(())
}

fn stats_json(name: &str, stats: &CheckpointStats) -> Value {
    json!({
        "part": name,
        "full": stats.full,
        "generation": stats.generation,
        "blobs": stats.blobs,
        "records": stats.records,
        "blob_bytes": stats.blob_bytes,
        "manifest_bytes": stats.manifest_bytes,
        "reused": stats.reused,
        "deltas": stats.deltas,
    })
}

/// `varve part checkpoint NAME [--full]`: write a checkpoint and print what it wrote.
pub fn checkpoint(ctx: &Context<'_>, name: &str, full: bool) -> anyhow::Result<()> {
    let mut map = open_write(ctx, name, false)?;
    let stats = if full { map.checkpoint_full()? } else { map.checkpoint()? };
    ctx.out.answer(&stats_json(name, &stats), || {
        format!(
            "{name}: {} checkpoint, generation {}: {} blob(s) in {} record(s), {} blob bytes, manifest {} bytes; {} subtree(s) reused, {} delta(s)",
            if stats.full { "full" } else { "incremental" },
            stats.generation,
            stats.blobs,
            stats.records,
            stats.blob_bytes,
            stats.manifest_bytes,
            stats.reused,
            stats.deltas
        )
    })?;
    Ok(())
}

/// `varve part info NAME`: entries, the batch log in use, where the next
/// open's replay starts, and the checkpoint records the manifest log keeps.
pub fn info(ctx: &Context<'_>, name: &str) -> anyhow::Result<()> {
    let (map, ns) = open_read(ctx, name)?;
    let checkpoints = map.checkpoints()?;
    let generation = map.batch_generation();
    let batch_log = format!("{name}.batches.{generation}");
    let batch_latest = ns.latest(&batch_log)?;
    // Replay starts after the checkpoint in force (the last record), or at
    // the first batch when there is none.
    let (replay_log, replay_from) = match checkpoints.last() {
        Some(c) => (format!("{name}.batches.{}", c.batch_generation), c.batch_seq + 1),
        None => (batch_log.clone(), 1),
    };
    let replay_batches = if replay_log == batch_log { (batch_latest + 1).saturating_sub(replay_from) } else { 0 };
    let records: Vec<Value> = checkpoints
        .iter()
        .map(|c| {
            json!({
                "manifest_seq": c.manifest_seq,
                "number": c.number,
                "full": c.full,
                "generation": c.generation,
                "batch_generation": c.batch_generation,
                "batch_seq": c.batch_seq,
            })
        })
        .collect();
    let answer = json!({
        "part": name,
        "entries": map.len(),
        "batch_generation": generation,
        "batch_log": batch_log,
        "batches_logged": batch_latest,
        "replay": { "log": replay_log, "from_seq": replay_from, "batches": replay_batches },
        "checkpoints_kept": records,
    });
    ctx.out.answer(&answer, || {
        let mut text = format!(
            "PART map {name}: {} entries\nbatch log: {batch_log} ({batch_latest} batch(es))\nreplay on open: {replay_log} from seq {replay_from} ({replay_batches} batch(es))",
            map.len()
        );
        if checkpoints.is_empty() {
            text.push_str("\ncheckpoints kept: none (every open replays every batch)");
        } else {
            let _ = write!(
                text,
                "\ncheckpoints kept (the manifest log's last {} records; the last is in force):",
                varve_part::durable::MANIFESTS_KEPT
            );
            for c in &checkpoints {
                let _ = write!(
                    text,
                    "\n  manifest seq {}: checkpoint {}, {}, generation {}, covers {}.batches.{} to seq {}",
                    c.manifest_seq,
                    c.number,
                    if c.full { "full" } else { "incremental" },
                    c.generation,
                    name,
                    c.batch_generation,
                    c.batch_seq
                );
            }
        }
        text
    })?;
    Ok(())
}
