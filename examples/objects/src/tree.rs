//! Trees: a map from names to versions of other keys (a commit's files, a
//! table version's rows), stored as the value of one version, and their
//! three-way merge.
//!
//! A tree's version id hashes the ids it names, and each of those hashes its
//! value and its past, so one id verifies a whole tree and its history.
//! A tree is stored as a JSON object `{"NAME": "64-hex version id", …}`
//! written in name order, so the same tree is always the same bytes and
//! gets the same version id.
//!
//! The merge is split so that the decision is free of I/O:
//! [`resolve_names`] says per name what the merge takes, [`merge_trees`]
//! reads and writes the store for the names both sides changed.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use varve_object::{MergeFn, MergeInput, ObjectError, ObjectStore, Version, VersionId};

/// Names and the versions they are at.
pub type Tree = BTreeMap<String, VersionId>;

/// A tree's stored form.
#[must_use]
pub fn tree_to_json(tree: &Tree) -> Value {
    Value::Object(tree.iter().map(|(name, id)| (name.clone(), Value::String(id.to_hex()))).collect::<Map<_, _>>())
}

/// Read a tree's stored form; `Err` says what is wrong with it.
pub fn tree_from_json(value: &Value) -> Result<Tree, String> {
    let Value::Object(map) = value else { return Err("a tree is a JSON object".to_owned()) };
    map.iter()
        .map(|(name, id)| {
            let hex = id.as_str().ok_or_else(|| format!("{name:?} names no version id"))?;
            let id = hex.parse::<VersionId>().map_err(|e| format!("{name:?}: {e}"))?;
            Ok((name.clone(), id))
        })
        .collect()
}

/// What a three-way merge of trees does with one name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// Take this version (`None`: the name is absent from the merge).
    Take(Option<VersionId>),
    /// Both sides changed it: merge the two versions' values against `base`'s.
    Combine {
        /// The version in the merge base, if the name was there.
        base: Option<VersionId>,
        /// Ours.
        left: VersionId,
        /// Theirs.
        right: VersionId,
    },
    /// One side deleted it and the other changed it: a conflict.
    DeletedAndChanged,
}

/// Per name of any of the three trees, what the merge takes: a side's
/// version if only that side changed it (as `git merge` does per file).
#[must_use]
pub fn resolve_names(base: &Tree, left: &Tree, right: &Tree) -> BTreeMap<String, Resolution> {
    let names = base.keys().chain(left.keys()).chain(right.keys());
    names
        .map(|name| {
            let (b, l, r) = (base.get(name).copied(), left.get(name).copied(), right.get(name).copied());
            let resolution = if l == r || r == b {
                Resolution::Take(l)
            } else if l == b {
                Resolution::Take(r)
            } else if let (Some(left), Some(right)) = (l, r) {
                Resolution::Combine { base: b, left, right }
            } else {
                Resolution::DeletedAndChanged
            };
            (name.clone(), resolution)
        })
        .collect()
}

/// How two versions of a tree key relate, which says what merging `theirs`
/// into `ours` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// `theirs` is `ours` or one of its ancestors: nothing to do.
    UpToDate,
    /// `ours` is an ancestor of `theirs`: move to `theirs`.
    FastForward,
    /// The two diverged: a three-way merge against `base` (none if they
    /// share no history).
    Merge {
        /// The closest common ancestor (the deepest if several).
        base: Option<Version>,
    },
}

/// What merging `theirs` into `ours` (two versions of `key`) takes.
pub fn decide(
    objects: &ObjectStore,
    key: &str,
    ours: &VersionId,
    theirs: &VersionId,
) -> varve_object::Result<Decision> {
    if ours == theirs {
        return Ok(Decision::UpToDate);
    }
    let base = objects.merge_bases(key, ours, theirs)?.into_iter().next();
    Ok(match base {
        Some(b) if b.id == *theirs => Decision::UpToDate,
        Some(b) if b.id == *ours => Decision::FastForward,
        base => Decision::Merge { base },
    })
}

/// Merge two trees whose names are keys `prefix + name`: take what
/// [`resolve_names`] says, and for a name both sides changed, store the
/// merge `f` computes from the base tree's version and both sides' (two
/// parents). `Ok(Err(conflicts))` lists every name that could not be merged,
/// each with why; nothing is written then.
pub fn merge_trees(
    objects: &ObjectStore,
    prefix: &str,
    (base, left, right): (&Tree, &Tree, &Tree),
    f: &dyn MergeFn,
) -> varve_object::Result<Result<Tree, Vec<String>>> {
    let mut merged = Tree::new();
    let mut combined = Vec::new();
    let mut conflicts = Vec::new();
    // First every value, so that a conflict anywhere writes nothing.
    for (name, resolution) in resolve_names(base, left, right) {
        match resolution {
            Resolution::Take(Some(id)) => {
                merged.insert(name, id);
            }
            Resolution::Take(None) => {}
            Resolution::DeletedAndChanged => {
                conflicts.push(format!("{name} (deleted on one side, changed on the other)"));
            }
            Resolution::Combine { base, left, right } => {
                let key = format!("{prefix}{name}");
                match combine(objects, &key, base.as_ref(), &left, &right, f) {
                    Ok(value) => combined.push((name, key, left, right, value)),
                    Err(ObjectError::MergeConflict { fields }) => {
                        conflicts.push(format!("{name} ({})", fields.join(", ")));
                    }
                    Err(ObjectError::ValueType { expected, .. }) => {
                        conflicts.push(format!("{name} (not {expected}: cannot merge)"));
                    }
                    Err(other) => return Err(other),
                }
            }
        }
    }
    if !conflicts.is_empty() {
        return Ok(Err(conflicts));
    }
    for (name, key, left, right, value) in combined {
        merged.insert(name, objects.merge(&key, &left, &right, &value)?.id);
    }
    Ok(Ok(merged))
}

/// The value `f` merges from `left` and `right` of `key` against `base`.
fn combine(
    objects: &ObjectStore,
    key: &str,
    base: Option<&VersionId>,
    left: &VersionId,
    right: &VersionId,
    f: &dyn MergeFn,
) -> varve_object::Result<Vec<u8>> {
    let ancestor = match base {
        Some(id) => Some((objects.info(key, id)?.version, objects.get(key, id)?)),
        None => None,
    };
    let (lv, rv) = (objects.info(key, left)?.version, objects.info(key, right)?.version);
    let (l, r) = (objects.get(key, left)?, objects.get(key, right)?);
    f.merge(&MergeInput {
        key,
        ancestor: ancestor.as_ref().map(|(v, bytes)| (*v, bytes.as_slice())),
        left: (lv, &l),
        right: (rv, &r),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use varve_object::{value_digest, version_of};

    fn id(text: &str) -> VersionId {
        version_of("k", &[], &value_digest(text.as_bytes())).id
    }

    fn tree(entries: &[(&str, &str)]) -> Tree {
        entries.iter().map(|(name, value)| ((*name).to_owned(), id(value))).collect()
    }

    #[test]
    fn each_name_takes_the_side_that_changed_it() {
        let base = tree(&[("same", "s"), ("ours", "o"), ("theirs", "t"), ("both", "b"), ("del", "d"), ("gone", "g")]);
        let left = tree(&[("same", "s"), ("ours", "o2"), ("theirs", "t"), ("both", "b1"), ("del", "d2"), ("new", "n")]);
        let right = tree(&[("same", "s"), ("ours", "o"), ("theirs", "t2"), ("both", "b2"), ("gone", "g")]);
        let plan = resolve_names(&base, &left, &right);
        assert_eq!(plan["same"], Resolution::Take(Some(id("s"))));
        assert_eq!(plan["ours"], Resolution::Take(Some(id("o2"))));
        assert_eq!(plan["theirs"], Resolution::Take(Some(id("t2"))));
        assert_eq!(plan["both"], Resolution::Combine { base: Some(id("b")), left: id("b1"), right: id("b2") });
        assert_eq!(plan["del"], Resolution::DeletedAndChanged);
        assert_eq!(plan["gone"], Resolution::Take(None));
        assert_eq!(plan["new"], Resolution::Take(Some(id("n"))));
    }

    #[test]
    fn a_tree_round_trips_through_json_and_bad_forms_are_refused() {
        let t = tree(&[("b", "2"), ("a", "1")]);
        assert_eq!(tree_from_json(&tree_to_json(&t)).unwrap(), t);
        assert!(tree_from_json(&Value::from(3)).is_err());
        assert!(tree_from_json(&serde_json::json!({"a": 1})).is_err());
        assert!(tree_from_json(&serde_json::json!({"a": "abc"})).is_err());
    }
}
