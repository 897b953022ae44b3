//! The `BTreeMap` oracle shared by the property tests, the seeded CI run and
//! the fuzz target (`fuzz/fuzz_targets/oracle.rs` includes this file).
//!
//! Keys come from a small alphabet and are mostly 0..=6 bytes long, so keys
//! that are prefixes of each other are common; a few raw bytes make wide
//! nodes, and a few keys of 11..=26 bytes take the long-suffix leaf path.

#![allow(dead_code, clippy::unwrap_used, clippy::missing_panics_doc)]

use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};

use varve_part::raw::{self, ChildRef};
use varve_part::{ArtMap, BatchOp};

pub type Model = BTreeMap<Vec<u8>, u32>;

#[derive(Clone, Debug)]
pub enum Op {
    Insert(Vec<u8>, u32),
    Remove(Vec<u8>),
    Batch(Vec<(Vec<u8>, Option<u32>)>),
    Snapshot,
    /// Drop the oldest snapshot.
    Forget,
    Range(Vec<u8>, Vec<u8>, bool, bool),
    Prefix(Vec<u8>),
    /// Union/intersection/difference of the current map and a snapshot.
    SetOps(usize),
    /// Rebuild the nodes the map holds alone (`ArtMap::compact`).
    Compact,
}

const ALPHABET: [u8; 4] = [0x00, b'a', b'b', 0xff];

fn key_byte(b: u8) -> u8 {
    if b < 224 {
        ALPHABET[usize::from(b % 4)]
    } else {
        b.wrapping_mul(37)
    }
}

/// Decode fuzz bytes into ops (never fails; stops at the end of input).
pub fn decode(data: &[u8]) -> Vec<Op> {
    let mut bytes = data.iter().copied();
    let mut next = move || bytes.next();
    let key = |next: &mut dyn FnMut() -> Option<u8>| -> Option<Vec<u8>> {
        // Mostly 0..=6 bytes; one in 16 is 11..=26 bytes, longer than a
        // leaf slot's inline suffix, so heap suffixes get split, shortened
        // and lengthened too.
        let len_byte = next()?;
        let len = if len_byte >= 240 { 11 + len_byte % 16 } else { len_byte % 7 };
        (0..len).map(|_| next().map(key_byte)).collect()
    };
    let mut ops = Vec::new();
    while let Some(tag) = next() {
        let op = match tag % 16 {
            0..=6 => {
                let Some(k) = key(&mut next) else { break };
                Op::Insert(k, u32::from(next().unwrap_or(0)))
            }
            7..=8 => match key(&mut next) {
                Some(k) => Op::Remove(k),
                None => break,
            },
            9 => {
                let n = next().unwrap_or(0) % 16;
                let mut batch = Vec::new();
                for _ in 0..n {
                    let Some(k) = key(&mut next) else { break };
                    let v = next().unwrap_or(0);
                    batch.push((k, (v % 4 != 0).then_some(u32::from(v))));
                }
                Op::Batch(batch)
            }
            10 => Op::Snapshot,
            11 => Op::Forget,
            12 => {
                let (Some(a), Some(b)) = (key(&mut next), key(&mut next)) else {
                    break;
                };
                let flags = next().unwrap_or(0);
                Op::Range(a, b, flags & 1 != 0, flags & 2 != 0)
            }
            13 => match key(&mut next) {
                Some(k) => Op::Prefix(k),
                None => break,
            },
            14 => Op::SetOps(usize::from(next().unwrap_or(0))),
            _ => Op::Compact,
        };
        ops.push(op);
    }
    ops
}

/// Compact `map`: with no snapshot it holds every node alone, so every
/// node moves (the entries are checked after every op).
fn compact(map: &mut ArtMap<u32>, no_snapshots: bool) {
    let done = map.compact();
    let inner = count_inner_nodes(map);
    assert!(done.nodes_moved <= inner, "moved {} of {inner} inner nodes", done.nodes_moved);
    if no_snapshots {
        assert_eq!(done.nodes_moved, inner, "with no snapshot every inner node is the map's alone");
        assert_eq!(done.nodes_shared, 0);
    }
}

fn count_inner_nodes(map: &ArtMap<u32>) -> usize {
    let mut stack: Vec<ChildRef<'_, u32>> = raw::root(map).into_iter().collect();
    let mut nodes = 0;
    while let Some(child) = stack.pop() {
        if let ChildRef::Node(node) = child {
            nodes += 1;
            stack.extend(node.children().map(|(_, c)| c));
        }
    }
    nodes
}

fn entries(map: &ArtMap<u32>) -> Vec<(Vec<u8>, u32)> {
    map.iter().map(|(k, v)| (k, *v)).collect()
}

fn model_entries<'a>(it: impl Iterator<Item = (&'a Vec<u8>, &'a u32)>) -> Vec<(Vec<u8>, u32)> {
    it.map(|(k, v)| (k.clone(), *v)).collect()
}

pub fn assert_same(map: &ArtMap<u32>, model: &Model, what: &str) {
    varve_part::testing::check_invariants(map);
    assert_eq!(map.len(), model.len(), "{what}: len");
    assert_eq!(map.is_empty(), model.is_empty(), "{what}: is_empty");
    assert_eq!(entries(map), model_entries(model.iter()), "{what}: iter");
    let values: Vec<u32> = map.values().copied().collect();
    assert_eq!(values, model.values().copied().collect::<Vec<_>>(), "{what}: values");
    // `fold` (what `sum` and `for_each` call) walks its own loop.
    let mut folded = Vec::with_capacity(values.len());
    map.values().for_each(|v| folded.push(*v));
    assert_eq!(folded, values, "{what}: values().for_each");
    assert_eq!(
        map.first().map(|(k, v)| (k, *v)),
        model.first_key_value().map(|(k, v)| (k.clone(), *v)),
        "{what}: first"
    );
    assert_eq!(map.last().map(|(k, v)| (k, *v)), model.last_key_value().map(|(k, v)| (k.clone(), *v)), "{what}: last");
    for (k, v) in model {
        assert_eq!(map.get(k), Some(v), "{what}: get {k:?}");
    }
}

/// Run `ops` against an `ArtMap` and the model, checking after every step.
pub fn run(ops: &[Op]) {
    let mut map: ArtMap<u32> = ArtMap::new();
    let mut model = Model::new();
    let mut snapshots = Vec::new();
    for op in ops {
        match op {
            Op::Insert(k, v) => {
                assert_eq!(map.insert(k, *v), model.insert(k.clone(), *v), "insert {k:?}");
            }
            Op::Remove(k) => {
                assert_eq!(map.remove(k), model.remove(k), "remove {k:?}");
            }
            Op::Batch(batch) => {
                map.apply(batch.iter().map(|(k, v)| match v {
                    Some(v) => BatchOp::Put(k.clone(), *v),
                    None => BatchOp::Delete(k.clone()),
                }));
                for (k, v) in batch {
                    match v {
                        Some(v) => model.insert(k.clone(), *v),
                        None => model.remove(k),
                    };
                }
            }
            Op::Snapshot => snapshots.push((map.snapshot(), model.clone())),
            Op::Forget => {
                if !snapshots.is_empty() {
                    snapshots.remove(0);
                }
            }
            Op::Range(a, b, a_excl, b_incl) => {
                let lo = if *a_excl { Bound::Excluded(a.as_slice()) } else { Bound::Included(a.as_slice()) };
                let hi = if *b_incl { Bound::Included(b.as_slice()) } else { Bound::Excluded(b.as_slice()) };
                let got: Vec<(Vec<u8>, u32)> = map.range((lo, hi)).map(|(k, v)| (k, *v)).collect();
                let valid = a < b || (a == b && !*a_excl && *b_incl);
                let want = if valid {
                    model_entries(model.range::<[u8], _>((lo, hi)))
                } else {
                    model
                        .iter()
                        .filter(|(k, _)| RangeBounds::<&[u8]>::contains(&(lo, hi), &k.as_slice()))
                        .map(|(k, v)| (k.clone(), *v))
                        .collect()
                };
                assert_eq!(got, want, "range {lo:?}..{hi:?}");
                let unbounded_hi: Vec<(Vec<u8>, u32)> =
                    map.range((lo, Bound::Unbounded)).map(|(k, v)| (k, *v)).collect();
                let want: Vec<(Vec<u8>, u32)> = model
                    .iter()
                    .filter(|(k, _)| RangeBounds::<&[u8]>::contains(&(lo, Bound::Unbounded), &k.as_slice()))
                    .map(|(k, v)| (k.clone(), *v))
                    .collect();
                assert_eq!(unbounded_hi, want, "range {lo:?}..");
            }
            Op::Prefix(p) => {
                let got: Vec<(Vec<u8>, u32)> = map.prefix(p).map(|(k, v)| (k, *v)).collect();
                let want: Vec<(Vec<u8>, u32)> =
                    model.iter().filter(|(k, _)| k.starts_with(p)).map(|(k, v)| (k.clone(), *v)).collect();
                assert_eq!(got, want, "prefix {p:?}");
            }
            Op::SetOps(i) => {
                let (other, other_model) = match snapshots.len() {
                    0 => (map.snapshot(), model.clone()),
                    n => snapshots[i % n].clone(),
                };
                // Shared subtrees are reused without calling the merge, so
                // it must be idempotent (merge(v, v) == v): max is.
                let union = map.union_with(&other, |_, a, b| *a.max(b));
                let mut want = other_model.clone();
                for (k, v) in &model {
                    let merged = other_model.get(k).map_or(*v, |b| *v.max(b));
                    want.insert(k.clone(), merged);
                }
                assert_same(&union, &want, "union_with");
                let plain = map.union(&other);
                let mut want_plain = other_model.clone();
                want_plain.extend(model.iter().map(|(k, v)| (k.clone(), *v)));
                assert_same(&plain, &want_plain, "union");
                let inter = map.intersection(&other);
                let want_inter: Model =
                    model.iter().filter(|(k, _)| other_model.contains_key(*k)).map(|(k, v)| (k.clone(), *v)).collect();
                assert_same(&inter, &want_inter, "intersection");
                let diff = map.difference(&other);
                let want_diff: Model =
                    model.iter().filter(|(k, _)| !other_model.contains_key(*k)).map(|(k, v)| (k.clone(), *v)).collect();
                assert_same(&diff, &want_diff, "difference");
                let reverse = other.difference(&map);
                let want_reverse: Model =
                    other_model.iter().filter(|(k, _)| !model.contains_key(*k)).map(|(k, v)| (k.clone(), *v)).collect();
                assert_same(&reverse, &want_reverse, "reverse difference");
            }
            Op::Compact => compact(&mut map, snapshots.is_empty()),
        }
        assert_same(&map, &model, "current map");
        for (i, (snap, snap_model)) in snapshots.iter().enumerate() {
            assert_same(snap, snap_model, &format!("snapshot {i}"));
        }
    }
}
