//! `varve sorted-map …`: the sorted map handlers build on an op log
//! (`HandlerContext::sorted_map`, docs/runtime.md "Sorted maps built by
//! handlers"), through the runtime that builds it — from inside an external
//! handler (the calls are recorded with its FIRING as cause, and replayed
//! by a repair like `varve log get`), or while `varve run` serves the
//! namespace. Keys and values are text here.

use std::path::PathBuf;

use anyhow::Context as _;
use serde::Serialize;
use varve_runtime::socket::{self, Request, Response};

use super::map::parse_pair;
use super::{runtime, write, Context};

/// The runtime's socket, and the handler's cause when inside one.
fn through(ctx: &Context<'_>) -> anyhow::Result<(PathBuf, Option<(String, String)>)> {
    if let Some((path, cause)) = runtime::handler_socket(ctx) {
        return Ok((path, Some(cause)));
    }
    if write::runtime_serves(ctx) {
        return Ok((write::socket_path(ctx), None));
    }
    anyhow::bail!(
        "the sorted map of an op log is built by the runtime serving namespace {:?}, and none does: run this inside a \
         handler, or while `varve run` serves the namespace (without it, `varve map ls map.LOG.sK` reads the map's \
         structure as it was last built, K named in record 1 of `map.LOG.at`, with the structure's own version numbers)",
        ctx.namespace
    )
}

fn call(ctx: &Context<'_>, make: impl FnOnce(Option<String>, Option<String>) -> Request) -> anyhow::Result<Response> {
    let (path, cause) = through(ctx)?;
    let (cause, trace) = cause.map_or((None, None), |(c, t)| (Some(c), Some(t)));
    Ok(socket::call(&path, &make(cause, trace))?)
}

fn text(b64: &str) -> anyhow::Result<String> {
    Ok(String::from_utf8_lossy(&socket::decode_bytes(b64)?).into_owned())
}

#[derive(Serialize)]
struct Written<'a> {
    log: &'a str,
    key: &'a str,
    seq: u64,
}

/// `varve sorted-map put LOG KEY=VALUE…`: one op (and version) per pair.
pub fn put(ctx: &Context<'_>, log: &str, pairs: &[String]) -> anyhow::Result<()> {
    for pair in pairs {
        let (key, value) = parse_pair(pair)?;
        let value = socket::encode_bytes(value.as_bytes());
        write(ctx, log, key, |key, cause, trace| Request::MapPut {
            log: log.to_owned(),
            key,
            value,
            cause,
            trace,
            request_id: None,
        })?;
    }
    Ok(())
}

/// `varve sorted-map rm LOG KEY…`: one op per key (also for an absent key).
pub fn rm(ctx: &Context<'_>, log: &str, keys: &[String]) -> anyhow::Result<()> {
    for key in keys {
        write(ctx, log, key, |key, cause, trace| Request::MapDelete {
            log: log.to_owned(),
            key,
            cause,
            trace,
            request_id: None,
        })?;
    }
    Ok(())
}

/// One op through the runtime; prints `LOG:SEQ` (or its JSON).
fn write(
    ctx: &Context<'_>,
    log: &str,
    key: &str,
    make: impl FnOnce(String, Option<String>, Option<String>) -> Request,
) -> anyhow::Result<()> {
    let encoded = socket::encode_bytes(key.as_bytes());
    let answer = call(ctx, |cause, trace| make(encoded, cause, trace))?;
    let seq = *answer.seqs.as_deref().and_then(<[u64]>::first).context("the runtime answered without a seq")?;
    ctx.out.answer(&Written { log, key, seq }, || format!("{log}:{seq}"))?;
    Ok(())
}

#[derive(Serialize)]
struct KeyValue {
    key: String,
    value: String,
}

/// `varve sorted-map get LOG KEY`: the value now; an error when absent.
pub fn get(ctx: &Context<'_>, log: &str, key: &str) -> anyhow::Result<()> {
    let answer = call(ctx, |cause, trace| Request::MapGet {
        log: log.to_owned(),
        key: socket::encode_bytes(key.as_bytes()),
        cause,
        trace,
    })?;
    match (answer.found, answer.data) {
        (Some(true), Some(data)) => {
            let value = text(&data)?;
            ctx.out.answer(&KeyValue { key: key.to_owned(), value: value.clone() }, || value)?;
            Ok(())
        }
        (Some(false), _) => {
            anyhow::bail!("the sorted map of {log} has no key {key:?} (`varve sorted-map ls {log}` lists its keys)")
        }
        _ => anyhow::bail!("the runtime answered without a value"),
    }
}

/// `varve sorted-map ls LOG [--from K] [--to K]`: entries now, in key order.
pub fn ls(ctx: &Context<'_>, log: &str, from: Option<&str>, to: Option<&str>) -> anyhow::Result<()> {
    let answer = call(ctx, |cause, trace| Request::MapRange {
        log: log.to_owned(),
        from: from.map(|k| socket::encode_bytes(k.as_bytes())),
        to: to.map(|k| socket::encode_bytes(k.as_bytes())),
        cause,
        trace,
    })?;
    let entries = answer.entries.context("the runtime answered without entries")?;
    for entry in entries {
        let row = KeyValue { key: text(&entry.key)?, value: text(&entry.data)? };
        ctx.out.answer(&row, || format!("{}\t{}", row.key, row.value))?;
    }
    Ok(())
}
