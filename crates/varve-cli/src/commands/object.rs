//! `varve object …`: versioned objects (`varve_object::ObjectStore`, the
//! `UStore` design): each key of a named store owns a DAG of immutable
//! versions, named by BLAKE3 ids that verify their content and history.
//!
//! Wherever a command takes a version it accepts a ref name of the key, a
//! unique id prefix of 4 or more hex characters, or a full id
//! ([`ObjectStore::resolve`]). People see 12-character ids; `--json` prints
//! full ones. `--as PRINCIPAL` reads and writes as that principal (grants
//! apply); without it the command acts as the administrator.
//!
//! Works on every store: reads open the namespace read-only, writes open it
//! for writing (the journal's writer lock) or go to `--store varve://…`.

use std::io::{self, Read, Write};
use std::path::Path;

use anyhow::Context as _;
use base64::Engine as _;
use serde_json::{json, Map, Value};
use varve_log::LogError;
use varve_object::record::GrantKind;
use varve_object::{
    AncestryProof, Counter, Encoding, LastWriterWins, LineMerge, MapMerge, MergeFn, ObjectError, ObjectStore, SetUnion,
    Version, VersionId,
};

use super::log::ValueSource;
use super::Context;
use crate::output::{human_value, LineWriter};

/// Characters of an id shown to people (git's default abbreviation is 7–12).
const ID_SHOWN_CHARS: usize = 12;

/// The largest proof file `check-proof` reads: a proof carries about 200
/// bytes of JSON per version on the path, so this is tens of thousands of steps.
const PROOF_BYTES_MAX: u64 = 16 << 20;

/// Which store a command works on, and as whom.
pub struct Target<'a> {
    /// The object store's name.
    pub name: &'a str,
    /// `--as`: the principal acting; `None` for the administrator.
    pub principal: Option<&'a str>,
}

/// The built-in merge functions `merge --with` names.
#[derive(Clone, Copy, Debug)]
pub enum BuiltinMerge {
    Lww,
    Counter,
    Set,
    Map,
    Lines,
}

impl BuiltinMerge {
    fn function(self) -> &'static dyn MergeFn {
        match self {
            BuiltinMerge::Lww => &LastWriterWins,
            BuiltinMerge::Counter => &Counter,
            BuiltinMerge::Set => &SetUnion,
            BuiltinMerge::Map => &MapMerge,
            BuiltinMerge::Lines => &LineMerge,
        }
    }
}

/// What a merge stores: a value the caller gives, or one a function computes.
pub enum MergeValue<'a> {
    Given(ValueSource<'a>),
    With(BuiltinMerge),
}

/// What `ref` does.
pub enum RefAction<'a> {
    /// Move (or create) a branch; `expect` is where it must be now (`None`: anywhere).
    SetBranch { name: &'a str, to: &'a str, expect: Option<&'a str> },
    /// Create a tag.
    Tag { name: &'a str, to: &'a str },
    /// Delete a ref; `expect` is where it must be now (`None`: wherever it is).
    Delete { name: &'a str, expect: Option<&'a str> },
    /// List the refs.
    List,
}

// ------------------------------------------------------------ opening

fn open_read(ctx: &Context<'_>, target: &Target<'_>) -> anyhow::Result<ObjectStore> {
    let missing = || {
        anyhow::anyhow!(
            "no object store {name:?} in namespace {ns}: create it with `varve object put {name} KEY VALUE`, or check the name (`varve log ls` lists obj.<name>.* logs) and --ns/--data",
            name = target.name,
            ns = ctx.namespace,
        )
    };
    let ns = match ctx.reader() {
        Ok(ns) => ns,
        Err(LogError::NamespaceNotFound { .. }) => return Err(missing()),
        Err(e) => return Err(e.into()),
    };
    // The versions log is the first log `ObjectStore::open` creates.
    super::require_log(ns.as_ref(), &format!("obj.{}.versions", target.name), missing)?;
    as_principal(ObjectStore::open(ns, target.name)?, target)
}

fn open_write(ctx: &Context<'_>, target: &Target<'_>) -> anyhow::Result<ObjectStore> {
    let ns = ctx.writer(
        "an object store is written by one process at a time here; serve the data directory (`varve serve`) and write through --store varve://… to share it",
    )?;
    as_principal(ObjectStore::open(ns, target.name)?, target)
}

/// A version named by a ref, a unique id prefix or a full id. A full id the
/// principal may not read is [`ObjectError::Forbidden`] (`resolve` only
/// matches among the versions the principal may read, so it would say "not
/// found" and hide why).
fn resolve(store: &ObjectStore, key: &str, text: &str) -> anyhow::Result<Version> {
    match store.resolve(key, text) {
        Err(ObjectError::VersionNotFound { .. }) if text.len() == 64 => {
            let id: VersionId = text.parse()?;
            Ok(store.info(key, &id)?.version)
        }
        other => Ok(other?),
    }
}

fn as_principal(store: ObjectStore, target: &Target<'_>) -> anyhow::Result<ObjectStore> {
    Ok(match target.principal {
        Some(principal) => store.as_principal(principal)?,
        None => store,
    })
}

// ------------------------------------------------------------ writes

/// `varve object put NAME KEY (VALUE | - | --file F) [--base V]`.
pub fn put(
    ctx: &Context<'_>,
    target: &Target<'_>,
    key: &str,
    base: Option<&str>,
    source: &ValueSource<'_>,
) -> anyhow::Result<()> {
    let value = super::log::read_value(source)?;
    let store = open_write(ctx, target)?;
    let base = base.map(|text| resolve(&store, key, text)).transpose()?;
    let version = store.put(key, base.as_ref().map(|b| &b.id), &value)?;
    answer_written(ctx, "put", key, &version)
}

/// `varve object merge NAME KEY V1 V2 (VALUE | - | --file F | --with FUNCTION)`.
pub fn merge(
    ctx: &Context<'_>,
    target: &Target<'_>,
    key: &str,
    left: &str,
    right: &str,
    value: &MergeValue<'_>,
) -> anyhow::Result<()> {
    let given = match value {
        MergeValue::Given(source) => Some(super::log::read_value(source)?),
        MergeValue::With(_) => None,
    };
    let store = open_write(ctx, target)?;
    let (left, right) = (resolve(&store, key, left)?, resolve(&store, key, right)?);
    let version = match (value, given) {
        (_, Some(bytes)) => store.merge(key, &left.id, &right.id, &bytes)?,
        (MergeValue::With(function), None) => store.merge_with(key, &left.id, &right.id, function.function())?,
        (MergeValue::Given(_), None) => unreachable!("a given value was read above"),
    };
    answer_written(ctx, "merged", key, &version)
}

fn answer_written(ctx: &Context<'_>, verb: &str, key: &str, version: &Version) -> anyhow::Result<()> {
    let answer = json!({"key": key, "version": version.to_json()});
    ctx.out.answer(&answer, || format!("{verb} {key} {} (depth {})", short(&version.id), version.depth))?;
    Ok(())
}

/// `varve object ref …`.
pub fn refs(ctx: &Context<'_>, target: &Target<'_>, key: &str, action: &RefAction<'_>) -> anyhow::Result<()> {
    if let RefAction::List = action {
        let store = open_read(ctx, target)?;
        let refs = store.refs(key)?;
        let list: Vec<Value> = refs
            .iter()
            .map(|(name, t)| json!({"name": name, "kind": ref_kind(t.tag), "version": t.version.to_json()}))
            .collect();
        ctx.out.answer(&json!({"key": key, "refs": list}), || {
            let lines: Vec<String> =
                refs.iter().map(|(name, t)| format!("{name}\t{}\t{}", ref_kind(t.tag), short(&t.version.id))).collect();
            lines.join("\n")
        })?;
        return Ok(());
    }
    let store = open_write(ctx, target)?;
    let (name, kind, to) = match *action {
        RefAction::SetBranch { name, to, expect } => {
            let to = resolve(&store, key, to)?;
            let expected = match expect {
                // "none": the branch must not exist yet.
                Some("none") => None,
                Some(text) => Some(resolve(&store, key, text)?.id),
                None => store.refs(key)?.get(name).map(|t| t.version.id),
            };
            store.set_branch(key, name, expected.as_ref(), &to.id)?;
            (name, "branch", Some(to))
        }
        RefAction::Tag { name, to } => {
            let to = resolve(&store, key, to)?;
            store.set_tag(key, name, &to.id)?;
            (name, "tag", Some(to))
        }
        RefAction::Delete { name, expect } => {
            let expected = if let Some(text) = expect {
                resolve(&store, key, text)?.id
            } else {
                let Some(target) = store.refs(key)?.get(name).copied() else {
                    anyhow::bail!("key {key:?} has no ref {name:?} (`varve object ref list` lists them)");
                };
                target.version.id
            };
            store.delete_ref(key, name, &expected)?;
            (name, "deleted", None)
        }
        RefAction::List => unreachable!("listed above"),
    };
    let answer = json!({"key": key, "ref": name, "kind": kind, "version": to.as_ref().map(Version::to_json)});
    ctx.out.answer(&answer, || match to {
        Some(version) => format!("{kind} {name} of {key} -> {}", short(&version.id)),
        None => format!("deleted ref {name} of {key}"),
    })?;
    Ok(())
}

fn ref_kind(tag: bool) -> &'static str {
    if tag {
        "tag"
    } else {
        "branch"
    }
}

/// `varve object restrict NAME KEY`.
pub fn restrict(ctx: &Context<'_>, target: &Target<'_>, key: &str) -> anyhow::Result<()> {
    let store = open_write(ctx, target)?;
    store.restrict(key)?;
    ctx.out.answer(&json!({"key": key, "restricted": true}), || {
        format!("restricted {key}: only its owner and the principals it grants read it")
    })?;
    Ok(())
}

/// `varve object grant NAME KEY PRINCIPAL V… [--with-ancestors]`.
pub fn grant(
    ctx: &Context<'_>,
    target: &Target<'_>,
    key: &str,
    principal: &str,
    versions: &[String],
    with_ancestors: bool,
) -> anyhow::Result<()> {
    let store = open_write(ctx, target)?;
    let ids: Vec<VersionId> =
        versions.iter().map(|text| resolve(&store, key, text).map(|v| v.id)).collect::<Result<_, _>>()?;
    store.grant(key, principal, &ids, with_ancestors)?;
    let answer = json!({
        "key": key,
        "principal": principal,
        "versions": ids.iter().map(VersionId::to_hex).collect::<Vec<_>>(),
        "with_ancestors": with_ancestors,
    });
    ctx.out.answer(&answer, || {
        let shown: Vec<String> = ids.iter().map(short).collect();
        let ancestors = if with_ancestors { " and their ancestors" } else { "" };
        format!("granted {principal} {key} {}{ancestors}", shown.join(" "))
    })?;
    Ok(())
}

// ------------------------------------------------------------ reads

/// `varve object get NAME KEY V`: the value, raw, on stdout.
pub fn get(ctx: &Context<'_>, target: &Target<'_>, key: &str, version: &str) -> anyhow::Result<()> {
    let store = open_read(ctx, target)?;
    let version = resolve(&store, key, version)?;
    let value = store.get(key, &version.id)?;
    if ctx.out.json() {
        let mut answer = json!({"key": key, "version": version.to_json()});
        insert_value(&mut answer, &value);
        ctx.out.answer(&answer, String::new)?;
    } else {
        let mut stdout = io::stdout().lock();
        stdout.write_all(&value)?;
        stdout.flush()?;
    }
    Ok(())
}

/// `varve object info NAME KEY V`.
pub fn info(ctx: &Context<'_>, target: &Target<'_>, key: &str, version: &str) -> anyhow::Result<()> {
    let store = open_read(ctx, target)?;
    let version = resolve(&store, key, version)?;
    let info = store.info(key, &version.id)?;
    let answer = info.to_json();
    ctx.out.answer(&answer, || {
        let parents: Vec<String> = info.parents.iter().map(|p| short(&p.id)).collect();
        let author = if info.author.is_empty() { "(administrator)" } else { info.author.as_str() };
        let stored = match info.encoding {
            Encoding::Delta { base, chain, .. } => format!("delta against {} (chain {chain})", short(&base)),
            Encoding::Raw => "raw".to_owned(),
            Encoding::Compressed { .. } => "compressed".to_owned(),
        };
        [
            format!("version {} depth {}", short(&info.version.id), info.version.depth),
            format!("parents {}", if parents.is_empty() { "(none: a root)".to_owned() } else { parents.join(" ") }),
            format!("author  {author}"),
            format!("seq     {}", info.seq),
            format!("value   {} bytes, stored as {stored} in {} bytes", info.value_len, info.stored_bytes),
        ]
        .join("\n")
    })?;
    Ok(())
}

/// `varve object heads NAME KEY`.
pub fn heads(ctx: &Context<'_>, target: &Target<'_>, key: &str) -> anyhow::Result<()> {
    let store = open_read(ctx, target)?;
    answer_versions(ctx, key, &store.heads(key)?)
}

/// `varve object versions NAME KEY`: every version, in the order written.
pub fn versions(ctx: &Context<'_>, target: &Target<'_>, key: &str) -> anyhow::Result<()> {
    let store = open_read(ctx, target)?;
    answer_versions(ctx, key, &store.versions(key)?)
}

/// `varve object previous NAME KEY V`: its parents.
pub fn previous(ctx: &Context<'_>, target: &Target<'_>, key: &str, version: &str) -> anyhow::Result<()> {
    let store = open_read(ctx, target)?;
    let version = resolve(&store, key, version)?;
    answer_versions(ctx, key, &store.previous(key, &version.id)?)
}

/// `varve object history NAME KEY V [-m N] [--values]`: up to `m`
/// predecessors, nearest first, in one call.
pub fn history(
    ctx: &Context<'_>,
    target: &Target<'_>,
    key: &str,
    version: &str,
    m: usize,
    values: bool,
) -> anyhow::Result<()> {
    let store = open_read(ctx, target)?;
    let version = resolve(&store, key, version)?;
    if !values {
        return answer_versions(ctx, key, &store.history(key, &version.id, m)?);
    }
    let history = store.history_values(key, &version.id, m)?;
    let list: Vec<Value> = history
        .iter()
        .map(|(v, value)| {
            let mut entry = v.to_json();
            insert_value(&mut entry, value);
            entry
        })
        .collect();
    ctx.out.answer(&json!({"key": key, "versions": list}), || {
        let lines: Vec<String> =
            history.iter().map(|(v, value)| format!("{}\t{}", short(&v.id), human_value(value))).collect();
        lines.join("\n")
    })?;
    Ok(())
}

fn answer_versions(ctx: &Context<'_>, key: &str, versions: &[Version]) -> anyhow::Result<()> {
    let list: Vec<Value> = versions.iter().map(Version::to_json).collect();
    ctx.out.answer(&json!({"key": key, "versions": list}), || {
        let lines: Vec<String> = versions.iter().map(|v| format!("{}\tdepth {}", short(&v.id), v.depth)).collect();
        lines.join("\n")
    })?;
    Ok(())
}

/// `varve object keys NAME`.
pub fn keys(ctx: &Context<'_>, target: &Target<'_>) -> anyhow::Result<()> {
    let store = open_read(ctx, target)?;
    let keys = store.keys()?;
    ctx.out.answer(&json!({"keys": keys}), || keys.join("\n"))?;
    Ok(())
}

/// `varve object diff NAME KEY V1 V2`: how the JSON-object value of V2
/// differs from V1's.
pub fn diff(ctx: &Context<'_>, target: &Target<'_>, key: &str, first: &str, second: &str) -> anyhow::Result<()> {
    let store = open_read(ctx, target)?;
    let (first, second) = (resolve(&store, key, first)?, resolve(&store, key, second)?);
    let diff = store.diff(key, &first.id, &second.id)?;
    let changed: Map<String, Value> =
        diff.changed.iter().map(|(field, (a, b))| (field.clone(), json!([a, b]))).collect();
    let answer = json!({"key": key, "added": diff.added, "removed": diff.removed, "changed": changed});
    ctx.out.answer(&answer, || {
        let mut lines = Vec::new();
        lines.extend(diff.added.iter().map(|(field, value)| format!("+ {field}: {value}")));
        lines.extend(diff.removed.iter().map(|(field, value)| format!("- {field}: {value}")));
        lines.extend(diff.changed.iter().map(|(field, (a, b))| format!("~ {field}: {a} -> {b}")));
        if lines.is_empty() {
            lines.push("(no difference)".to_owned());
        }
        lines.join("\n")
    })?;
    Ok(())
}

// ------------------------------------------------------------ integrity

/// `varve object verify NAME KEY [V]`: recompute V (default: every head)
/// and all its ancestors from the stored bytes.
pub fn verify(ctx: &Context<'_>, target: &Target<'_>, key: &str, version: Option<&str>) -> anyhow::Result<()> {
    let store = open_read(ctx, target)?;
    let starts = match version {
        Some(text) => vec![resolve(&store, key, text)?],
        None => store.heads(key)?,
    };
    if starts.is_empty() {
        anyhow::bail!("key {key:?} of object store {:?} has no versions to verify", target.name);
    }
    let mut checked = Vec::with_capacity(starts.len());
    for start in &starts {
        checked.push((start, store.verify(key, &start.id)?.versions));
    }
    let list: Vec<Value> =
        checked.iter().map(|(v, count)| json!({"version": v.to_json(), "versions_checked": count})).collect();
    ctx.out.answer(&json!({"key": key, "verified": list}), || {
        let lines: Vec<String> = checked
            .iter()
            .map(|(v, count)| format!("verified {key} {}: {count} versions checked", short(&v.id)))
            .collect();
        lines.join("\n")
    })?;
    Ok(())
}

/// `varve object prove NAME KEY ANCESTOR HEAD`: the proof, as JSON, on stdout.
pub fn prove(ctx: &Context<'_>, target: &Target<'_>, key: &str, ancestor: &str, head: &str) -> anyhow::Result<()> {
    let store = open_read(ctx, target)?;
    let (ancestor, head) = (resolve(&store, key, ancestor)?, resolve(&store, key, head)?);
    let proof = store.prove(key, &ancestor.id, &head.id)?;
    // The same JSON in both modes: it is a file format, read by `check-proof`.
    let proof = proof.to_json();
    ctx.out.answer(&proof, || proof.to_string())?;
    Ok(())
}

/// `varve object check-proof [FILE|-] --key K --head ID --ancestor ID`:
/// checks a proof against ids the caller trusts; opens no store.
pub fn check_proof(ctx: &Context<'_>, file: &Path, key: &str, head: &str, ancestor: &str) -> anyhow::Result<()> {
    let (head, ancestor): (VersionId, VersionId) = (head.parse()?, ancestor.parse()?);
    let mut text = Vec::new();
    let what = file.display().to_string();
    if what == "-" {
        io::stdin().lock().take(PROOF_BYTES_MAX + 1).read_to_end(&mut text)
    } else {
        std::fs::File::open(file)
            .with_context(|| format!("opening {what}"))?
            .take(PROOF_BYTES_MAX + 1)
            .read_to_end(&mut text)
    }
    .with_context(|| format!("reading the proof from {what}"))?;
    if text.len() as u64 > PROOF_BYTES_MAX {
        anyhow::bail!("the proof in {what} is over {PROOF_BYTES_MAX} bytes: not one `varve object prove` wrote");
    }
    let json: Value = serde_json::from_slice(&text).with_context(|| format!("the proof in {what} is not JSON"))?;
    let ancestor = AncestryProof::from_json(&json)?.check(key, &head, &ancestor)?;
    let answer = json!({"valid": true, "key": key, "head": head.to_hex(), "ancestor": ancestor.to_json()});
    ctx.out.answer(&answer, || {
        format!(
            "the proof checks: {} (depth {}) is an ancestor of {}",
            short(&ancestor.id),
            ancestor.depth,
            short(&head)
        )
    })?;
    Ok(())
}

// ------------------------------------------------------------ grants

/// `varve object grants NAME KEY`: the owner, and every restriction and
/// grant in the order issued.
pub fn grants(ctx: &Context<'_>, target: &Target<'_>, key: &str) -> anyhow::Result<()> {
    let store = open_read(ctx, target)?;
    let owner = store.owner(key)?;
    let entries = store.grants(key)?;
    let list: Vec<Value> = entries
        .iter()
        .map(|e| {
            let r = &e.record;
            json!({
                "seq": e.seq,
                "kind": grant_kind(r.kind),
                "principal": r.principal,
                "versions": r.versions.iter().map(VersionId::to_hex).collect::<Vec<_>>(),
                "with_ancestors": r.with_ancestors,
                "author": r.author,
                "unix_ms": r.unix_ms,
            })
        })
        .collect();
    ctx.out.answer(&json!({"key": key, "owner": owner, "grants": list}), || {
        let mut lines = vec![format!("owner {}", if owner.is_empty() { "(administrator)" } else { owner.as_str() })];
        for e in &entries {
            let r = &e.record;
            lines.push(match r.kind {
                GrantKind::Restrict => format!("{}\trestrict", e.seq),
                GrantKind::Grant => {
                    let shown: Vec<String> = r.versions.iter().map(short).collect();
                    let ancestors = if r.with_ancestors { " (with ancestors)" } else { "" };
                    format!("{}\tgrant {} {}{ancestors}", e.seq, r.principal, shown.join(" "))
                }
            });
        }
        lines.join("\n")
    })?;
    Ok(())
}

fn grant_kind(kind: GrantKind) -> &'static str {
    match kind {
        GrantKind::Restrict => "restrict",
        GrantKind::Grant => "grant",
    }
}

// ------------------------------------------------------------ watch

/// `varve object watch NAME [--prefix P] [--from SEQ] [--count N]`: one
/// line per new version, following until interrupted or `count` printed.
pub fn watch(
    ctx: &Context<'_>,
    target: &Target<'_>,
    prefix: &str,
    from: u64,
    count: Option<u64>,
) -> anyhow::Result<()> {
    let store = open_read(ctx, target)?;
    let mut lines = LineWriter::stdout();
    let limit = count.map_or(usize::MAX, |c| usize::try_from(c).unwrap_or(usize::MAX));
    for notification in store.watch(prefix, from)?.take(limit) {
        let n = notification?;
        let line = if ctx.out.json() {
            json!({
                "seq": n.seq,
                "key": n.key,
                "version": n.version.to_json(),
                "parents": n.parents.iter().map(Version::to_json).collect::<Vec<_>>(),
                "author": n.author,
            })
            .to_string()
        } else {
            format!("{}\t{}\t{}\tdepth {}", n.seq, n.key, short(&n.version.id), n.version.depth)
        };
        lines.line(&line)?;
        lines.flush()?;
    }
    Ok(())
}

// ------------------------------------------------------------ shapes

fn short(id: &VersionId) -> String {
    id.short(ID_SHOWN_CHARS)
}

/// Add `"value"` (UTF-8 text) or `"value_base64"` to a JSON object, as log records do.
fn insert_value(object: &mut Value, value: &[u8]) {
    let (field, text) = match std::str::from_utf8(value) {
        Ok(text) => ("value", text.to_owned()),
        Err(_) => ("value_base64", base64::engine::general_purpose::STANDARD.encode(value)),
    };
    if let Value::Object(map) = object {
        map.insert(field.to_owned(), Value::String(text));
    }
}
