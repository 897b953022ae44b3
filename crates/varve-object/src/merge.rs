//! Three-way merge functions (`UStore` §3.4.2) and the map diff.
//!
//! A merge function gets the closest common ancestor's value (if the two
//! versions share history) and both sides', and returns the merged value or
//! a [`ObjectError::MergeConflict`] naming what it could not combine. The
//! built-ins read values in a stated form:
//!
//! | function | values | rule |
//! |---|---|---|
//! | [`LastWriterWins`] | any | the deeper side wins; at equal depth, the larger id (a total order every replica computes alike) |
//! | [`Counter`] | a decimal `i64` | `left + right − ancestor` (sum of both sides' deltas) |
//! | [`SetUnion`] | a JSON array | an element is kept if both sides keep it or one side added it; removed if one side removed it and the other left it |
//! | [`MapMerge`] | a JSON object | field by field: the side that changed a field wins; both changed it differently → conflict |
//! | [`LineMerge`] | UTF-8 text | line-based, as `git merge` (diff3); overlapping edits → conflict |

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::error::{ObjectError, Result};
use crate::version::Version;

/// What a merge function sees.
#[derive(Clone, Copy, Debug)]
pub struct MergeInput<'a> {
    /// The key.
    pub key: &'a str,
    /// The closest common ancestor and its value; `None` if the two
    /// versions share no history.
    pub ancestor: Option<(Version, &'a [u8])>,
    /// The first version merged and its value.
    pub left: (Version, &'a [u8]),
    /// The second version merged and its value.
    pub right: (Version, &'a [u8]),
}

/// A three-way merge function.
pub trait MergeFn: Send + Sync {
    /// The merged value, or why there is none.
    fn merge(&self, input: &MergeInput<'_>) -> Result<Vec<u8>>;
}

impl<F> MergeFn for F
where
    F: Fn(&MergeInput<'_>) -> Result<Vec<u8>> + Send + Sync,
{
    fn merge(&self, input: &MergeInput<'_>) -> Result<Vec<u8>> {
        self(input)
    }
}

/// The names of the built-in merge functions, as the CLI (`--with`), the
/// server (`?with=`) and Python (`with_=`) take them.
pub const BUILTIN_MERGES: [&str; 5] = ["lww", "counter", "set", "map", "lines"];

/// The built-in merge function named `name` (one of [`BUILTIN_MERGES`]).
#[must_use]
pub fn builtin(name: &str) -> Option<&'static dyn MergeFn> {
    Some(match name {
        "lww" => &LastWriterWins,
        "counter" => &Counter,
        "set" => &SetUnion,
        "map" => &MapMerge,
        "lines" => &LineMerge,
        _ => return None,
    })
}

/// The deeper version's value; at equal depth, the larger id's.
#[derive(Clone, Copy, Debug, Default)]
pub struct LastWriterWins;

impl MergeFn for LastWriterWins {
    fn merge(&self, input: &MergeInput<'_>) -> Result<Vec<u8>> {
        let (l, r) = (input.left, input.right);
        let left_wins = (l.0.depth, l.0.id) >= (r.0.depth, r.0.id);
        Ok(if left_wins { l.1 } else { r.1 }.to_vec())
    }
}

/// Decimal `i64` counters: `left + right − ancestor`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counter;

impl MergeFn for Counter {
    fn merge(&self, input: &MergeInput<'_>) -> Result<Vec<u8>> {
        let parse = |(version, bytes): (Version, &[u8])| -> Result<i64> {
            std::str::from_utf8(bytes).ok().and_then(|s| s.trim().parse().ok()).ok_or_else(|| ObjectError::ValueType {
                version: version.id.short(12),
                expected: "a decimal i64 counter",
                reason: format!("{:?}", String::from_utf8_lossy(&bytes[..bytes.len().min(40)])),
            })
        };
        let base = input.ancestor.map(parse).transpose()?.unwrap_or(0);
        let sum = parse(input.left)?
            .checked_add(parse(input.right)?)
            .and_then(|s| s.checked_sub(base))
            .ok_or_else(|| ObjectError::MergeConflict { fields: vec!["counter overflows i64".to_owned()] })?;
        Ok(sum.to_string().into_bytes())
    }
}

/// JSON arrays as sets, merged three ways (see the module docs). The result
/// is sorted by each element's JSON text, so every replica computes the same
/// bytes.
#[derive(Clone, Copy, Debug, Default)]
pub struct SetUnion;

impl MergeFn for SetUnion {
    fn merge(&self, input: &MergeInput<'_>) -> Result<Vec<u8>> {
        let set = |(version, bytes): (Version, &[u8])| -> Result<BTreeMap<String, Value>> {
            match serde_json::from_slice::<Value>(bytes) {
                Ok(Value::Array(items)) => Ok(items.into_iter().map(|v| (v.to_string(), v)).collect()),
                Ok(_) => Err(value_type(version, "a JSON array", "another JSON value".to_owned())),
                Err(e) => Err(value_type(version, "a JSON array", e.to_string())),
            }
        };
        let base = input.ancestor.map(set).transpose()?.unwrap_or_default();
        let (left, right) = (set(input.left)?, set(input.right)?);
        let mut out = Vec::new();
        for (text, value) in left.iter().chain(right.iter()) {
            let (in_l, in_r, in_a) = (left.contains_key(text), right.contains_key(text), base.contains_key(text));
            if ((in_l && in_r) || ((in_l || in_r) && !in_a)) && !out.iter().any(|(t, _)| t == text) {
                out.push((text.clone(), value.clone()));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(Value::Array(out.into_iter().map(|(_, v)| v).collect()).to_string().into_bytes())
    }
}

/// JSON objects merged field by field (see the module docs); an absent field
/// counts as a value, so a deletion on one side wins over no change on the other.
#[derive(Clone, Copy, Debug, Default)]
pub struct MapMerge;

impl MergeFn for MapMerge {
    fn merge(&self, input: &MergeInput<'_>) -> Result<Vec<u8>> {
        let base = input.ancestor.map(|(v, b)| object(v, b)).transpose()?.unwrap_or_default();
        let left = object(input.left.0, input.left.1)?;
        let right = object(input.right.0, input.right.1)?;
        let mut fields: Vec<&String> = base.keys().chain(left.keys()).chain(right.keys()).collect();
        fields.sort();
        fields.dedup();
        let mut out = Map::new();
        let mut conflicts = Vec::new();
        for field in fields {
            let (a, l, r) = (base.get(field), left.get(field), right.get(field));
            let merged = if l == r || r == a {
                l
            } else if l == a {
                r
            } else {
                conflicts.push(field.clone());
                continue;
            };
            if let Some(value) = merged {
                out.insert(field.clone(), value.clone());
            }
        }
        if conflicts.is_empty() {
            Ok(Value::Object(out).to_string().into_bytes())
        } else {
            Err(ObjectError::MergeConflict { fields: conflicts })
        }
    }
}

/// UTF-8 text merged line by line, as `git merge` does (a diff3 of both
/// sides against the ancestor).
#[derive(Clone, Copy, Debug, Default)]
pub struct LineMerge;

impl MergeFn for LineMerge {
    fn merge(&self, input: &MergeInput<'_>) -> Result<Vec<u8>> {
        fn text((version, bytes): (Version, &[u8])) -> Result<&str> {
            std::str::from_utf8(bytes).map_err(|e| value_type(version, "UTF-8 text", e.to_string()))
        }
        let base = input.ancestor.map(text).transpose()?.unwrap_or("");
        match diffy::merge(base, text(input.left)?, text(input.right)?) {
            Ok(merged) => Ok(merged.into_bytes()),
            Err(with_markers) => {
                let lines = with_markers
                    .lines()
                    .enumerate()
                    .filter(|(_, line)| line.starts_with("<<<<<<<"))
                    .map(|(n, _)| format!("conflict at merged line {}", n + 1))
                    .collect();
                Err(ObjectError::MergeConflict { fields: lines })
            }
        }
    }
}

/// How two map values differ: fields only in the second, only in the first,
/// and in both with different values (first, second).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MapDiff {
    /// Fields the second value adds.
    pub added: BTreeMap<String, Value>,
    /// Fields the second value lacks.
    pub removed: BTreeMap<String, Value>,
    /// Fields whose value changed: (in the first, in the second).
    pub changed: BTreeMap<String, (Value, Value)>,
}

/// The diff of two JSON-object values.
pub fn map_diff(first: (Version, &[u8]), second: (Version, &[u8])) -> Result<MapDiff> {
    let a = object(first.0, first.1)?;
    let b = object(second.0, second.1)?;
    let mut diff = MapDiff::default();
    for (field, value) in &a {
        match b.get(field) {
            None => {
                diff.removed.insert(field.clone(), value.clone());
            }
            Some(other) if other != value => {
                diff.changed.insert(field.clone(), (value.clone(), other.clone()));
            }
            Some(_) => {}
        }
    }
    for (field, value) in &b {
        if !a.contains_key(field) {
            diff.added.insert(field.clone(), value.clone());
        }
    }
    Ok(diff)
}

fn object(version: Version, bytes: &[u8]) -> Result<Map<String, Value>> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(value_type(version, "a JSON object", "another JSON value".to_owned())),
        Err(e) => Err(value_type(version, "a JSON object", e.to_string())),
    }
}

fn value_type(version: Version, expected: &'static str, reason: String) -> ObjectError {
    ObjectError::ValueType { version: version.id.short(12), expected, reason }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::{value_digest, version_of};

    fn v(tag: &[u8], depth: u64) -> Version {
        let mut version = version_of("k", &[], &value_digest(tag));
        version.depth = depth;
        version
    }

    fn run(f: &dyn MergeFn, a: Option<&str>, l: &str, r: &str) -> Result<String> {
        let input = MergeInput {
            key: "k",
            ancestor: a.map(|a| (v(b"a", 1), a.as_bytes())),
            left: (v(b"l", 2), l.as_bytes()),
            right: (v(b"r", 3), r.as_bytes()),
        };
        f.merge(&input).map(|bytes| String::from_utf8(bytes).unwrap())
    }

    #[test]
    fn every_builtin_name_names_a_function() {
        for name in BUILTIN_MERGES {
            assert!(builtin(name).is_some(), "{name}");
        }
        assert!(builtin("union").is_none());
    }

    #[test]
    fn builtins_follow_their_stated_rules() {
        assert_eq!(run(&LastWriterWins, None, "L", "R").unwrap(), "R"); // right is deeper
        assert_eq!(run(&Counter, Some("10"), "13", "8").unwrap(), "11");
        assert_eq!(run(&SetUnion, Some(r#"["a","b"]"#), r#"["a","b","c"]"#, r#"["b"]"#).unwrap(), r#"["b","c"]"#);
        assert_eq!(run(&SetUnion, None, "[1]", "[2]").unwrap(), "[1,2]");
        assert_eq!(
            run(&MapMerge, Some(r#"{"a":1,"b":2,"c":3}"#), r#"{"a":5,"b":2,"c":3}"#, r#"{"a":1,"b":2}"#).unwrap(),
            r#"{"a":5,"b":2}"#
        );
        assert_eq!(run(&LineMerge, Some("a\nb\nc\n"), "A\nb\nc\n", "a\nb\nC\n").unwrap(), "A\nb\nC\n");
    }

    #[test]
    fn conflicts_name_what_both_sides_changed() {
        let err = run(&MapMerge, Some(r#"{"a":1,"b":1,"c":1}"#), r#"{"a":2,"b":2,"c":1}"#, r#"{"a":3,"b":3,"c":1}"#)
            .unwrap_err();
        assert!(matches!(&err, ObjectError::MergeConflict { fields } if fields == &["a", "b"]), "{err}");
        assert!(matches!(run(&LineMerge, Some("a\n"), "b\n", "c\n"), Err(ObjectError::MergeConflict { .. })));
        assert!(matches!(run(&Counter, None, "x", "1"), Err(ObjectError::ValueType { .. })));
        assert!(matches!(run(&MapMerge, None, "[1]", "{}"), Err(ObjectError::ValueType { .. })));
    }

    #[test]
    fn a_map_diff_lists_added_removed_and_changed_fields() {
        let d = map_diff((v(b"1", 1), br#"{"a":1,"b":2}"#), (v(b"2", 2), br#"{"b":3,"c":4}"#)).unwrap();
        assert_eq!(d.added.keys().collect::<Vec<_>>(), ["c"]);
        assert_eq!(d.removed.keys().collect::<Vec<_>>(), ["a"]);
        assert_eq!(d.changed["b"], (Value::from(2), Value::from(3)));
    }
}
