//! What `varve map` and `varve set` share: both are a PEDaLS
//! `SortedMap<String, V>` (a set is one whose values are `()`), opened the
//! same way and read the same way — a range of one version, the list of
//! versions with what each changed, the diff of two versions. [`Entries`]
//! says how the two differ: their names and how a value prints.
//!
//! Every update commits a version; every version stays readable (`--at V`).
//! Writes go to the server with `--store varve://…` (several processes may
//! update one structure there), else to the embedded journal, whose writer
//! lock admits one process at a time.

use std::fmt::Write as _;
use std::ops::Bound;
use std::sync::Arc;

use serde_json::{json, Value};
use varve_log::{LogError, Namespace, SeqRange};
use varve_pds::codec::OpEntry;
use varve_pds::key::Key;
use varve_pds::{Options, PdsError, SortedMap, Version};

use super::Context;

/// The op codes of a tree's op log `pds.<s>.ops` (`varve_pds::codec`'s
/// `OpEntry` docs: 1 insert, 2 delete).
const OP_INSERT: u8 = 1;
const OP_DELETE: u8 = 2;

/// Versions `versions` lists when no `--limit` is given (the latest ones):
/// each is one read of the op log.
pub const VERSIONS_SHOWN_DEFAULT: u64 = 100;

/// The values of a map (`String`) or a set (`()`), and the words each uses.
pub trait Entries: Key + PartialEq + Clone {
    /// The command, and the noun in messages: `map` or `set`.
    const KIND: &'static str;
    /// What an insert is called: `put` or `add`.
    const INSERT: &'static str;
    /// The value as text; `None` for a set.
    fn text(&self) -> Option<&str>;
    /// An entry in JSON: `[key, value]` in a map, the key in a set.
    fn json_entry(key: &str, value: &Self) -> Value {
        match value.text() {
            Some(value) => json!([key, value]),
            None => json!(key),
        }
    }
}

impl Entries for String {
    const KIND: &'static str = "map";
    const INSERT: &'static str = "put";
    fn text(&self) -> Option<&str> {
        Some(self)
    }
}

impl Entries for () {
    const KIND: &'static str = "set";
    const INSERT: &'static str = "add";
    fn text(&self) -> Option<&str> {
        None
    }
}

/// An open map or set, with the namespace it lives in (its op log is read
/// for `versions`).
pub struct Opened<V> {
    pub tree: SortedMap<String, V>,
    ns: Arc<dyn Namespace>,
    name: String,
}

/// Open `name` for updates: the server's namespace through `--store`, else
/// the journal opened here for writing (creating the structure if needed).
pub fn open_write<V: Entries>(ctx: &Context<'_>, name: &str) -> anyhow::Result<Opened<V>> {
    let ns: Arc<dyn Namespace> = match (&ctx.remote, &ctx.nats) {
        (Some(remote), _) => varve_log::Store::namespace(remote, &ctx.namespace)?,
        (None, Some(nats)) => varve_log::Store::namespace(nats, &ctx.namespace)?,
        (None, None) => Arc::new(ctx.open_write().map_err(|e| {
            super::write::explain_locked(
                ctx,
                e,
                "a map or set is written by one process at a time here; serve the data directory (`varve serve`) and write through --store varve://… to share it",
            )
        })?),
    };
    let tree = SortedMap::open(ns.clone(), name, Options::default()).map_err(|e| explain::<V>(e, name))?;
    Ok(Opened { tree, ns, name: name.to_owned() })
}

/// Open an existing `name` for reading; a clear error if there is none.
pub fn open_read<V: Entries>(ctx: &Context<'_>, name: &str) -> anyhow::Result<Opened<V>> {
    let missing = || missing::<V>(ctx, name);
    let ns = match ctx.reader() {
        Ok(ns) => ns,
        Err(LogError::NamespaceNotFound { .. }) => return Err(missing()),
        Err(e) => return Err(e.into()),
    };
    // The meta log is the first thing an update creates (see varve_pds's
    // log names): without it there is no structure to read.
    super::require_log(ns.as_ref(), &format!("pds.{name}.meta"), missing)?;
    let tree = SortedMap::open(ns.clone(), name, Options::default()).map_err(|e| explain::<V>(e, name))?;
    Ok(Opened { tree, ns, name: name.to_owned() })
}

fn missing<V: Entries>(ctx: &Context<'_>, name: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "no {kind} {name:?} in namespace {ns}: create it with `varve {kind} {insert} {name} …`, or check the name (`varve log ls` lists pds.<name>.* logs) and --ns/--data",
        kind = V::KIND,
        insert = V::INSERT,
        ns = ctx.namespace,
    )
}

/// A library error, with a hint where the CLI knows better: a structure
/// whose entries do not decode as this kind is most likely the other kind.
pub fn explain<V: Entries>(error: PdsError, name: &str) -> anyhow::Error {
    match error {
        PdsError::Decode { .. } => {
            let other = if V::KIND == "map" { "set" } else { "map" };
            anyhow::anyhow!(
                "{name:?} is not a {kind} of text ({error}); is it a {other}? try `varve {other} ls {name}`",
                kind = V::KIND
            )
        }
        PdsError::NoSuchVersion { version, latest: 0, .. } => {
            anyhow::anyhow!("{kind} {name:?} has no version {version}: it has none yet", kind = V::KIND)
        }
        PdsError::NoSuchVersion { version, latest, .. } => anyhow::anyhow!(
            "{kind} {name:?} has no version {version}: its versions are 1..={latest} (`varve {kind} versions {name}` lists them)",
            kind = V::KIND
        ),
        other => other.into(),
    }
}

/// Which part of one version `ls` prints.
#[derive(Clone, Debug, Default)]
pub struct Selection<'a> {
    pub at: Option<Version>,
    /// Keys from this one, inclusive.
    pub from: Option<&'a str>,
    /// Keys up to this one, inclusive.
    pub to: Option<&'a str>,
    /// Keys starting with this.
    pub prefix: Option<&'a str>,
    /// At most this many entries.
    pub limit: Option<usize>,
}

/// The entries `selection` names, in key order, and the version they are of.
///
/// Cost: the tree reads every entry from the lower bound to the upper bound
/// (or to the end, with only a prefix) before the limit applies.
pub fn select<V: Entries>(
    opened: &Opened<V>,
    selection: &Selection<'_>,
) -> anyhow::Result<(Version, Vec<(String, V)>)> {
    let name = &opened.name;
    let version = match selection.at {
        Some(v) => v,
        None => opened.tree.latest().map_err(|e| explain::<V>(e, name))?,
    };
    if selection.at.is_none() && version == 0 {
        return Ok((0, Vec::new())); // created, never updated: the empty structure
    }
    let lower = match (selection.from, selection.prefix) {
        (Some(from), Some(prefix)) => Some(from.max(prefix)),
        (from, prefix) => from.or(prefix),
    };
    let range = (
        lower.map_or(Bound::Unbounded, |k| Bound::Included(k.to_owned())),
        selection.to.map_or(Bound::Unbounded, |k| Bound::Included(k.to_owned())),
    );
    let prefix = selection.prefix.unwrap_or("");
    let entries = opened
        .tree
        .range(range, Some(version))
        .map_err(|e| explain::<V>(e, name))?
        .take_while(|(key, _)| key.starts_with(prefix))
        .take(selection.limit.unwrap_or(usize::MAX))
        .collect();
    Ok((version, entries))
}

/// A JSON answer about structure `name`: `{"map": name, …}` or `{"set": name, …}`.
fn answer_for<V: Entries>(name: &str, fields: Value) -> Value {
    let mut object = serde_json::Map::new();
    object.insert(V::KIND.to_owned(), json!(name));
    if let Value::Object(fields) = fields {
        object.extend(fields);
    }
    Value::Object(object)
}

/// `varve map|set ls NAME …`: one version's entries, in key order.
pub fn ls<V: Entries>(ctx: &Context<'_>, name: &str, selection: &Selection<'_>) -> anyhow::Result<()> {
    let opened = open_read::<V>(ctx, name)?;
    let (version, entries) = select(&opened, selection)?;
    let listed: Vec<Value> = entries.iter().map(|(key, value)| V::json_entry(key, value)).collect();
    ctx.out.answer(&answer_for::<V>(name, json!({ "version": version, "entries": listed })), || {
        let mut text = format!("{} {name} at version {version}: {} key(s)", V::KIND, entries.len());
        for (key, value) in &entries {
            let _ = match value.text() {
                Some(value) => write!(text, "\n{key}\t{value}"),
                None => write!(text, "\n{key}"),
            };
        }
        text
    })?;
    Ok(())
}

/// `varve map|set versions NAME [--limit N]`: the latest versions, each with
/// the update that made it, read from the structure's op log (one entry per
/// committed version; updates that changed nothing wrote no version).
pub fn versions<V: Entries>(ctx: &Context<'_>, name: &str, limit: u64) -> anyhow::Result<()> {
    let opened = open_read::<V>(ctx, name)?;
    let latest = opened.tree.latest().map_err(|e| explain::<V>(e, name))?;
    let first = latest.saturating_sub(limit) + 1;
    let ops_log = format!("pds.{name}.ops");
    let mut changes: Vec<Value> = Vec::new();
    if latest >= first {
        // An op's seq in the op log is at least its version (each version
        // logs one op), so scanning from `first` misses none.
        for record in opened.ns.scan(&ops_log, SeqRange::from_bounds(first..))? {
            let record = record?;
            let op = OpEntry::decode(&record.value, &ops_log, record.seq)?;
            if op.vs > latest {
                break; // logged, not committed yet (another writer's, in flight)
            }
            if op.vs < first {
                continue;
            }
            let key = String::decode_all(&op.a).map_err(|e| explain::<V>(e, name))?;
            let (verb, value) = match op.op {
                OP_INSERT => {
                    let value = V::decode_all(&op.b).map_err(|e| explain::<V>(e, name))?;
                    (V::INSERT, value.text().map(str::to_owned))
                }
                OP_DELETE => ("rm", None),
                other => anyhow::bail!("{ops_log} seq {}: op {other} is not a tree update", record.seq),
            };
            let mut change = json!({ "version": op.vs, "op": verb, "key": key });
            if let Some(value) = value {
                change["value"] = json!(value);
            }
            changes.push(change);
        }
    }
    let answer = answer_for::<V>(name, json!({ "latest": latest, "versions": changes }));
    ctx.out.answer(&answer, || {
        let oldest = changes.first().and_then(|c| c["version"].as_u64());
        let mut text = match (latest, oldest) {
            (0, _) => format!("{} {name}: no version yet", V::KIND),
            (_, Some(oldest)) if oldest > 1 => {
                format!("{} {name}: versions 1..={latest}, the last {} shown", V::KIND, changes.len())
            }
            _ => format!("{} {name}: versions 1..={latest}", V::KIND),
        };
        for change in &changes {
            let value = change["value"].as_str().map(|v| format!("={v}")).unwrap_or_default();
            let (op, key) = (change["op"].as_str().unwrap_or_default(), change["key"].as_str().unwrap_or_default());
            let _ = write!(text, "\n{}\t{op} {key}{value}", change["version"]);
        }
        text
    })?;
    Ok(())
}

/// `varve map|set diff NAME V1 V2`: keys added, removed and (maps) changed
/// from version V1 to V2 (V2 may be the older: then it reads backwards).
pub fn diff<V: Entries>(ctx: &Context<'_>, name: &str, from: Version, to: Version) -> anyhow::Result<()> {
    let opened = open_read::<V>(ctx, name)?;
    let diff = opened.tree.diff(from, to).map_err(|e| explain::<V>(e, name))?;
    let entries = |list: &'_ [(String, V)]| -> Vec<(String, Option<String>)> {
        list.iter().map(|(k, v)| (k.clone(), v.text().map(str::to_owned))).collect()
    };
    let (added, removed) = (entries(&diff.added), entries(&diff.removed));
    let changed: Vec<(String, String, String)> = diff
        .changed
        .iter()
        .filter_map(|(k, old, new)| Some((k.clone(), old.text()?.to_owned(), new.text()?.to_owned())))
        .collect();
    let as_json = |list: &[(String, V)]| list.iter().map(|(key, value)| V::json_entry(key, value)).collect::<Vec<_>>();
    let mut fields =
        json!({ "from": from, "to": to, "added": as_json(&diff.added), "removed": as_json(&diff.removed) });
    if V::KIND == "map" {
        fields["changed"] =
            changed.iter().map(|(key, old, new)| json!({ "key": key, "old": old, "new": new })).collect();
    }
    let answer = answer_for::<V>(name, fields);
    ctx.out.answer(&answer, || {
        let mut text =
            format!("{} {name} from version {from} to {to}: {} added, {} removed", V::KIND, added.len(), removed.len());
        if V::KIND == "map" {
            let _ = write!(text, ", {} changed", changed.len());
        }
        let show = |key: &str, value: &Option<String>| match value {
            Some(value) => format!("{key}={value}"),
            None => key.to_owned(),
        };
        for (key, value) in &added {
            let _ = write!(text, "\n+ {}", show(key, value));
        }
        for (key, value) in &removed {
            let _ = write!(text, "\n- {}", show(key, value));
        }
        for (key, old, new) in &changed {
            let _ = write!(text, "\n~ {key}: {old} -> {new}");
        }
        text
    })?;
    Ok(())
}

/// Apply `updates` in order, one version each (an update that changes
/// nothing commits none and reports the current version), printing each.
pub fn update<V: Entries>(ctx: &Context<'_>, name: &str, updates: &[(&str, Option<V>)]) -> anyhow::Result<()> {
    let mut opened = open_write::<V>(ctx, name)?;
    for (key, value) in updates {
        let owned = (*key).to_owned();
        let (op, version) = match value {
            Some(value) => (V::INSERT, opened.tree.insert(&owned, value)),
            None => ("rm", opened.tree.delete(&owned)),
        };
        let version = version.map_err(|e| explain::<V>(e, name))?;
        let done = if op == "rm" {
            "removed"
        } else if V::KIND == "map" {
            "set"
        } else {
            "added"
        };
        ctx.out.answer(&answer_for::<V>(name, json!({ "op": op, "key": key, "version": version })), || {
            format!("{name}: {key} {done}, version {version}")
        })?;
    }
    Ok(())
}
