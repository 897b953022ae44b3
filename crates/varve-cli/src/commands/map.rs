//! `varve map …`: a versioned sorted map of text keys and values (PEDaLS's
//! balanced tree, `varve_pds::SortedMap<String, String>`) on any store,
//! embedded or `--store varve://…`. Every `put` or `rm` commits a version;
//! every version stays readable (`--at V`). Several processes may update one
//! map through a `varve serve`: each update that loses a race completes the
//! winner's and is planned again on the new version. `ls`, `versions` and
//! `diff` are [`super::sorted`]'s, shared with `varve set`.

use serde::Serialize;

use super::sorted;
use super::Context;

#[derive(Serialize)]
struct KeyValue<'a> {
    key: &'a str,
    value: &'a str,
}

/// `KEY=VALUE` split at the first `=`; an error naming the argument if it has none.
pub fn parse_pair(pair: &str) -> anyhow::Result<(&str, &str)> {
    pair.split_once('=').ok_or_else(|| {
        anyhow::anyhow!("{pair:?} is not KEY=VALUE: write the key, `=`, then the value (e.g. city=Lyon)")
    })
}

/// `varve map put NAME KEY=VALUE…`: one version per pair, in order.
pub fn put(ctx: &Context<'_>, name: &str, pairs: &[String]) -> anyhow::Result<()> {
    let updates: Vec<(&str, Option<String>)> = pairs
        .iter()
        .map(|pair| parse_pair(pair).map(|(key, value)| (key, Some(value.to_owned()))))
        .collect::<anyhow::Result<_>>()?;
    sorted::update::<String>(ctx, name, &updates)
}

/// `varve map rm NAME KEY…`: one version per key removed.
pub fn rm(ctx: &Context<'_>, name: &str, keys: &[String]) -> anyhow::Result<()> {
    let updates: Vec<(&str, Option<String>)> = keys.iter().map(|key| (key.as_str(), None)).collect();
    sorted::update::<String>(ctx, name, &updates)
}

/// `varve map get NAME KEY [--at V]`.
pub fn get(ctx: &Context<'_>, name: &str, key: &str, at: Option<u64>) -> anyhow::Result<()> {
    let opened = sorted::open_read::<String>(ctx, name)?;
    let Some(value) = opened.tree.get(&key.to_owned(), at).map_err(|e| sorted::explain::<String>(e, name))? else {
        let version = at.map_or_else(|| "the latest version".to_owned(), |v| format!("version {v}"));
        anyhow::bail!("map {name} has no key {key:?} at {version} (`varve map ls {name}` lists its keys)");
    };
    ctx.out.answer(&KeyValue { key, value: &value }, || value.clone())?;
    Ok(())
}
