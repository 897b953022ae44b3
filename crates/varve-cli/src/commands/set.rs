//! `varve set …`: a versioned sorted set of text keys (PEDaLS's balanced
//! tree, `varve_pds::SortedSet<String>`, which is a `SortedMap<String, ()>`),
//! with `varve map`'s conventions: every `add` or `rm` commits a version,
//! `--at V` reads an old one, `--store varve://…` shares it. `ls`,
//! `versions` and `diff` are [`super::sorted`]'s.

use serde_json::json;

use super::sorted;
use super::Context;

/// `varve set add NAME KEY…`: one version per key added (a key already
/// there commits none).
pub fn add(ctx: &Context<'_>, name: &str, keys: &[String]) -> anyhow::Result<()> {
    let updates: Vec<(&str, Option<()>)> = keys.iter().map(|key| (key.as_str(), Some(()))).collect();
    sorted::update::<()>(ctx, name, &updates)
}

/// `varve set rm NAME KEY…`: one version per key removed.
pub fn rm(ctx: &Context<'_>, name: &str, keys: &[String]) -> anyhow::Result<()> {
    let updates: Vec<(&str, Option<()>)> = keys.iter().map(|key| (key.as_str(), None)).collect();
    sorted::update::<()>(ctx, name, &updates)
}

/// `varve set has NAME KEY [--at V]`: prints `true` or `false` (exit 0 either way).
pub fn has(ctx: &Context<'_>, name: &str, key: &str, at: Option<u64>) -> anyhow::Result<()> {
    let opened = sorted::open_read::<()>(ctx, name)?;
    let present = opened.tree.contains(&key.to_owned(), at).map_err(|e| sorted::explain::<()>(e, name))?;
    ctx.out.answer(&json!({ "set": name, "key": key, "present": present }), || present.to_string())?;
    Ok(())
}
