//! `varve map …`: a versioned sorted map of text keys and values (PEDaLS's
//! balanced tree, `varve_pds::SortedMap`) on any store, embedded or
//! `--store varve://…`. Every `put` or `rm` commits a version; every
//! version stays readable (`--at V`). Several processes may update one map
//! through a `varve serve`: each update that loses a race completes the
//! winner's and is planned again on the new version.

use std::fmt::Write as _;
use std::sync::Arc;

use serde::Serialize;
use varve_log::Namespace;
use varve_pds::{Options, SortedMap};

use super::Context;

type TextMap = SortedMap<String, String>;

/// The namespace for writing the map: the server's through `--store`, else the journal opened here.
fn open_write(ctx: &Context<'_>, name: &str) -> anyhow::Result<TextMap> {
    let ns: Arc<dyn Namespace> = match (&ctx.remote, &ctx.nats) {
        (Some(remote), _) => varve_log::Store::namespace(remote, &ctx.namespace)?,
        (None, Some(nats)) => varve_log::Store::namespace(nats, &ctx.namespace)?,
        (None, None) => Arc::new(
            ctx.open_write().map_err(|e| super::write::explain_locked(ctx, e, "a map is written by one process at a time here; serve the data directory (`varve serve`) and write through --store varve://… to share it"))?,
        ),
    };
    Ok(SortedMap::open(ns, name, Options::default())?)
}

fn open_read(ctx: &Context<'_>, name: &str) -> anyhow::Result<TextMap> {
    Ok(SortedMap::open(ctx.reader()?, name, Options::default())?)
}

#[derive(Serialize)]
struct KeyValue<'a> {
    key: &'a str,
    value: &'a str,
}

#[derive(Serialize)]
struct Listing<'a> {
    map: &'a str,
    version: u64,
    entries: &'a [(String, String)],
}

#[derive(Serialize)]
struct Committed<'a> {
    map: &'a str,
    key: &'a str,
    version: u64,
}

/// `varve map put NAME KEY=VALUE…`: one version per pair, in order.
pub fn put(ctx: &Context<'_>, name: &str, pairs: &[String]) -> anyhow::Result<()> {
    let parsed: Vec<(&str, &str)> = pairs
        .iter()
        .map(|pair| {
            pair.split_once('=').ok_or_else(|| anyhow::anyhow!("{pair:?} is not KEY=VALUE (write e.g. city=Lyon)"))
        })
        .collect::<anyhow::Result<_>>()?;
    let mut map = open_write(ctx, name)?;
    for (key, value) in parsed {
        let version = map.insert(&key.to_owned(), &value.to_owned())?;
        ctx.out.answer(&Committed { map: name, key, version }, || format!("{name}: {key} set, version {version}"))?;
    }
    Ok(())
}

/// `varve map rm NAME KEY…`: one version per key removed.
pub fn rm(ctx: &Context<'_>, name: &str, keys: &[String]) -> anyhow::Result<()> {
    let mut map = open_write(ctx, name)?;
    for key in keys {
        let version = map.delete(key)?;
        ctx.out
            .answer(&Committed { map: name, key, version }, || format!("{name}: {key} removed, version {version}"))?;
    }
    Ok(())
}

/// `varve map get NAME KEY [--at V]`.
pub fn get(ctx: &Context<'_>, name: &str, key: &str, at: Option<u64>) -> anyhow::Result<()> {
    let map = open_read(ctx, name)?;
    let Some(value) = map.get(&key.to_owned(), at)? else {
        let version = at.map_or_else(|| "the latest version".to_owned(), |v| format!("version {v}"));
        anyhow::bail!("map {name} has no key {key:?} at {version}");
    };
    ctx.out.answer(&KeyValue { key, value: &value }, || value.clone())?;
    Ok(())
}

/// `varve map ls NAME [--at V]`: every key and value, in key order.
pub fn ls(ctx: &Context<'_>, name: &str, at: Option<u64>) -> anyhow::Result<()> {
    let map = open_read(ctx, name)?;
    let version = match at {
        Some(v) => v,
        None => map.latest()?,
    };
    let entries: Vec<(String, String)> = if version == 0 { Vec::new() } else { map.iter(Some(version))?.collect() };
    ctx.out.answer(&Listing { map: name, version, entries: &entries }, || {
        let mut text = format!("{name} at version {version}: {} key(s)", entries.len());
        for (key, value) in &entries {
            let _ = write!(text, "\n{key}\t{value}");
        }
        text
    })?;
    Ok(())
}
