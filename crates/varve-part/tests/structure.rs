//! Node kinds, SIMD search, drop safety, thread safety, hashing, the raw
//! checkpoint API.

use std::sync::Arc;

use varve_part::raw::{self, ChildRef, NodeKind};
use varve_part::testing::check_invariants;
use varve_part::{key_hash_v1, ArtMap, HashedMap, Snapshot};

fn root_kind(map: &ArtMap<u32>) -> Option<NodeKind> {
    match raw::root(map)? {
        ChildRef::Node(node) => Some(node.kind()),
        ChildRef::Leaf { .. } => None,
    }
}

#[test]
fn nodes_grow_and_shrink_through_every_kind() {
    let mut map = ArtMap::new();
    let mut kinds = Vec::new();
    for b in 0..=255u8 {
        map.insert(&[b], u32::from(b));
        check_invariants(&map);
        kinds.push(root_kind(&map));
    }
    for kind in [NodeKind::Node2, NodeKind::Node4, NodeKind::Node16, NodeKind::Node48, NodeKind::Node256] {
        assert!(kinds.contains(&Some(kind)), "grew through {kind:?}");
    }
    assert_eq!(root_kind(&map), Some(NodeKind::Node256));
    let snapshot = map.snapshot();
    let mut shrunk = Vec::new();
    for b in (1..=255u8).rev() {
        assert_eq!(map.remove(&[b]), Some(u32::from(b)));
        check_invariants(&map);
        shrunk.push(root_kind(&map));
        for c in 0..b {
            assert_eq!(map.get(&[c]), Some(&u32::from(c)));
        }
    }
    // A Node16 of two children becomes a Node2 (a Node4 never shrinks).
    for kind in [NodeKind::Node48, NodeKind::Node16, NodeKind::Node2] {
        assert!(shrunk.contains(&Some(kind)), "shrank through {kind:?}");
    }
    assert_eq!(root_kind(&map), None, "one key left: a leaf");
    assert_eq!(map.len(), 1);
    assert_eq!(snapshot.len(), 256, "snapshot untouched");
    check_invariants(&snapshot);
}

#[test]
fn simd_and_scalar_node16_search_agree() {
    let mut keys = [0u8; 16];
    let mut state = 0x1234_5678_u32;
    for round in 0..20_000u32 {
        for k in &mut keys {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            *k = (state >> 24) as u8;
        }
        let len = (round % 17) as usize;
        for byte in 0..=255u8 {
            let scalar = varve_part::testing::find16_scalar(&keys, len, byte);
            #[cfg(target_arch = "x86_64")]
            assert_eq!(
                varve_part::testing::find16_simd(&keys, len, byte),
                scalar,
                "keys {keys:?} len {len} byte {byte}"
            );
            if let Some(i) = scalar {
                assert!(i < len && keys[i] == byte);
            }
        }
    }
}

#[test]
fn snapshots_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Snapshot<u32>>();
    assert_send_sync::<Snapshot<Vec<u8>>>();
    assert_send_sync::<ArtMap<String>>();
    let mut map = ArtMap::new();
    for i in 0..10_000u32 {
        map.insert(&i.to_be_bytes(), i);
    }
    let snapshot = Arc::new(map.snapshot());
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let snapshot = Arc::clone(&snapshot);
            std::thread::spawn(move || snapshot.values().map(|v| u64::from(*v)).sum::<u64>())
        })
        .collect();
    for i in 0..10_000u32 {
        map.insert(&i.to_be_bytes(), 0); // writer goes on, copying shared paths
    }
    for reader in readers {
        assert_eq!(reader.join().expect("reader"), (0..10_000u64).sum());
    }
}

/// Keys counted per drop test: 10M in release (`--release`), 2M otherwise
/// (the test profile is opt-level 1).
const DROP_KEYS: u32 = if cfg!(debug_assertions) { 2_000_000 } else { 10_000_000 };

#[test]
fn dropping_a_big_map_with_versions_does_not_overflow() {
    let mut map = ArtMap::new();
    let mut x = 0x9e37_79b9_u32;
    let mut versions = Vec::new();
    for i in 0..DROP_KEYS {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        map.insert(&x.to_be_bytes(), i);
        if i % (DROP_KEYS / 8) == 0 {
            versions.push(map.snapshot());
        }
    }
    // Run the drop on a small stack: recursion per level would show.
    std::thread::Builder::new()
        .stack_size(64 * 1024)
        .spawn(move || {
            drop(versions);
            drop(map);
        })
        .expect("spawn")
        .join()
        .expect("drop on a small stack");
}

#[test]
fn deep_trees_of_long_keys_drop_and_iterate_without_recursion() {
    // Keys "a", "aa", "aaa", … each a prefix of the next, plus 100 KB keys
    // sharing prefixes: a chain of inner nodes thousands deep.
    let depth = 20_000;
    let mut map = ArtMap::new();
    let long = vec![b'a'; depth];
    for len in 1..=depth {
        map.insert(&long[..len], len);
    }
    let mut big = vec![b'x'; 100 * 1024];
    for i in 0..50u8 {
        big[i as usize * 1000] = b'y';
        map.insert(&big, usize::from(i));
    }
    assert_eq!(map.len(), depth + 50);
    assert_eq!(map.get(&long[..777]), Some(&777));
    let snapshot = map.snapshot();
    map.remove(&long[..500]);
    assert_eq!(snapshot.values().count(), depth + 50);
    assert_eq!(map.values().count(), depth + 49);
    // A batch over the deep chain (recursion is capped, then iterative).
    map.apply((1000..3000).map(|len| {
        if len % 2 == 0 {
            varve_part::BatchOp::Delete(long[..len].to_vec())
        } else {
            varve_part::BatchOp::Put(long[..len].to_vec(), 0)
        }
    }));
    assert_eq!(map.len(), depth + 49 - 1000);
    assert_eq!(map.get(&long[..1001]), Some(&0));
    check_invariants(&map);
    std::thread::Builder::new()
        .stack_size(64 * 1024)
        .spawn(move || {
            drop(snapshot);
            drop(map);
        })
        .expect("spawn")
        .join()
        .expect("drop on a small stack");
}

#[test]
fn updates_between_snapshots_happen_in_place() {
    let mut map = ArtMap::new();
    for i in 0..1000u32 {
        map.insert(&i.to_be_bytes(), i);
    }
    let id = |m: &ArtMap<u32>| match raw::root(m) {
        Some(ChildRef::Node(n)) => n.id(),
        _ => 0,
    };
    let before = id(&map);
    map.insert(&5u32.to_be_bytes(), 50);
    assert_eq!(id(&map), before, "no snapshot: root mutated in place");
    let snapshot = map.snapshot();
    map.insert(&6u32.to_be_bytes(), 60);
    assert_ne!(id(&map), before, "shared with a snapshot: root copied");
    assert_eq!(id(&snapshot), before);
    assert_eq!(snapshot.get(&6u32.to_be_bytes()), Some(&6));
}

#[test]
fn checkpoint_refs_survive_only_on_unchanged_subtrees() {
    let mut map = ArtMap::new();
    for i in 0..5000u32 {
        map.insert(&(i * 7919).to_be_bytes(), i);
    }
    // A "checkpointer" marks every node of a snapshot.
    let snapshot = map.snapshot();
    let mut stack: Vec<ChildRef<'_, u32>> = raw::root(&snapshot).into_iter().collect();
    let mut marked = 0;
    while let Some(child) = stack.pop() {
        if let ChildRef::Node(node) = child {
            node.set_checkpoint_ref(1);
            marked += 1;
            stack.extend(node.children().map(|(_, c)| c));
        }
    }
    drop(stack);
    drop(snapshot);
    // Now the map owns every node alone: an update is in place and must clear
    // the refs on its path, and only there.
    let key = (42u32 * 7919).to_be_bytes();
    map.insert(&key, 0);
    let (mut cleared, mut kept) = (0, 0);
    let mut stack: Vec<(ChildRef<'_, u32>, bool)> = raw::root(&map).into_iter().map(|c| (c, true)).collect();
    let mut depth_prefix = Vec::new();
    while let Some((child, on_path)) = stack.pop() {
        if let ChildRef::Node(node) = child {
            if on_path {
                assert_eq!(node.checkpoint_ref(), 0, "node on the updated path");
                cleared += 1;
            } else {
                assert_eq!(node.checkpoint_ref(), 1, "untouched node keeps its ref");
                kept += 1;
            }
            depth_prefix.extend_from_slice(node.prefix());
            let next = key.get(depth_prefix.len()).copied();
            for (byte, c) in node.children() {
                let child_on_path = on_path && Some(byte) == next;
                stack.push((c, child_on_path));
            }
            if on_path {
                if let Some(b) = next {
                    depth_prefix.push(b);
                }
            }
        }
    }
    assert!(cleared >= 1 && kept > 0 && cleared + kept == marked, "cleared {cleared}, kept {kept}, marked {marked}");
}

fn rebuild(child: &ChildRef<'_, u32>) -> raw::OwnedChild<u32> {
    match child {
        ChildRef::Leaf { suffix, value } => raw::leaf(suffix, **value),
        ChildRef::Node(node) => {
            let children = node.children().map(|(b, c)| (b, rebuild(&c))).collect();
            raw::node(node.prefix(), node.value().copied(), children, 9).expect("valid node")
        }
    }
}

#[test]
fn raw_rebuild_round_trips() {
    let mut map = ArtMap::new();
    for i in 0..3000u32 {
        map.insert(format!("k{}", i % 700).repeat(1 + (i as usize % 3)).as_bytes(), i);
    }
    let copy = raw::into_map(raw::root(&map).as_ref().map(rebuild));
    check_invariants(&copy);
    assert_eq!(copy.len(), map.len());
    assert!(copy.iter().eq(map.iter()));
    assert!(matches!(
        raw::node::<u32>(b"", None, vec![(1, raw::leaf(b"", 1))], 0),
        Err(raw::BuildError::TooFewEntries { .. })
    ));
}

#[test]
fn hashed_keys_are_stable_and_spread() {
    // Frozen values: the hash decides where keys live in checkpoints.
    // Computed independently (FNV-1a 64, then fmix64) in Python.
    assert_eq!(key_hash_v1(b""), 0xefd0_1f60_ba99_2926);
    assert_eq!(key_hash_v1(b"varve"), 0xed05_4532_1584_0e51);
    let mut map = HashedMap::new();
    let base = "https://example.com/some/very/long/path/".repeat(20);
    for i in 0..2000u32 {
        map.insert(format!("{base}{i}").as_bytes(), i);
    }
    assert_eq!(map.len(), 2000);
    assert_eq!(map.get(format!("{base}1234").as_bytes()), Some(&1234));
    assert_eq!(map.remove(format!("{base}7").as_bytes()), Some(7));
    assert!(!map.contains_key(format!("{base}7").as_bytes()));
    let mut keys: Vec<Vec<u8>> = map.iter_hash_order().map(|(k, _)| k).collect();
    assert_eq!(keys.len(), 1999);
    assert!(keys.windows(2).any(|w| w[0] > w[1]), "hash order is not key order");
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 1999);
    // The root branches on hash bytes right away: no long shared prefix.
    match raw::root(map.as_inner()) {
        Some(ChildRef::Node(node)) => {
            assert!(node.prefix().is_empty() && node.kind() == NodeKind::Node256);
        }
        _ => panic!("expected a node"),
    }
}

#[test]
fn set_operations_reuse_shared_subtrees() {
    let mut a = ArtMap::new();
    for i in 0..100_000u32 {
        a.insert(&i.wrapping_mul(2_654_435_761).to_be_bytes(), i);
    }
    let mut b = a.clone();
    for i in 0..1000u32 {
        b.insert(&i.wrapping_mul(2_654_435_761).to_be_bytes(), i + 1);
        b.insert(&(i.wrapping_mul(2_654_435_761) ^ 1).to_be_bytes(), i);
    }
    let union = a.union_with(&b, |_, x, y| *x.max(y));
    check_invariants(&union);
    assert_eq!(union.len(), b.len());
    let inter = a.intersection(&b);
    assert_eq!(inter.len(), a.len());
    let diff = b.difference(&a);
    check_invariants(&diff);
    assert_eq!(diff.len(), b.len() - a.len());
    assert!(a.difference(&a).is_empty());
}

/// Every inner node of `map` in depth-first key order: (address id,
/// checkpoint reference).
fn inner_nodes(map: &ArtMap<u32>) -> Vec<(usize, u64)> {
    let mut stack: Vec<ChildRef<'_, u32>> = raw::root(map).into_iter().collect();
    let mut nodes = Vec::new();
    while let Some(child) = stack.pop() {
        if let ChildRef::Node(node) = child {
            nodes.push((node.id(), node.checkpoint_ref()));
            let children: Vec<_> = node.children().map(|(_, c)| c).collect();
            stack.extend(children.into_iter().rev());
        }
    }
    nodes
}

#[test]
fn compaction_moves_every_node_the_map_holds_alone_and_keeps_checkpoint_refs() {
    let mut map = ArtMap::new();
    let mut model = std::collections::BTreeMap::new();
    for i in 0..20_000u32 {
        let key = i.wrapping_mul(2_654_435_761).to_be_bytes();
        map.insert(&key, i);
        model.insert(key, i);
    }
    for i in (0..20_000u32).step_by(3) {
        let key = i.wrapping_mul(2_654_435_761).to_be_bytes();
        map.remove(&key);
        model.remove(&key);
    }
    // A checkpointer's marks, a different one on each node.
    let mut stack: Vec<ChildRef<'_, u32>> = raw::root(&map).into_iter().collect();
    let mut mark = 0;
    while let Some(child) = stack.pop() {
        if let ChildRef::Node(node) = child {
            mark += 1;
            node.set_checkpoint_ref(mark);
            stack.extend(node.children().map(|(_, c)| c));
        }
    }
    drop(stack);
    let before = inner_nodes(&map);

    let done = map.compact();

    let after = inner_nodes(&map);
    assert_eq!(done.nodes_moved, before.len(), "every inner node moved");
    assert_eq!(done.nodes_shared, 0);
    assert_eq!(after.len(), before.len(), "same nodes");
    let refs = |nodes: &[(usize, u64)]| nodes.iter().map(|&(_, r)| r).collect::<Vec<_>>();
    assert_eq!(refs(&after), refs(&before), "checkpoint refs kept, node for node");
    let old: std::collections::HashSet<usize> = before.iter().map(|&(id, _)| id).collect();
    assert!(after.iter().all(|(id, _)| !old.contains(id)), "no node left at its old address");
    check_invariants(&map);
    let entries: Vec<([u8; 4], u32)> = map.iter().map(|(k, v)| (k.try_into().expect("4 bytes"), *v)).collect();
    assert_eq!(entries, model.into_iter().collect::<Vec<_>>());
}

#[test]
fn compaction_leaves_nodes_shared_with_a_snapshot_where_they_are() {
    let mut map = ArtMap::new();
    for i in 0..5_000u32 {
        map.insert(&(i * 7919).to_be_bytes(), i);
    }
    let snapshot = map.snapshot();
    let snapshot_nodes = inner_nodes(&snapshot);
    // Shared from the root down: nothing is the map's alone.
    let done = map.compact();
    assert_eq!((done.nodes_moved, done.nodes_shared), (0, 1), "the shared root is left, and all below it");

    // One update copies the nodes on its path; only those are the map's.
    let key = (42u32 * 7919).to_be_bytes();
    map.insert(&key, 0);
    let path_len = inner_nodes(&map).iter().filter(|(id, _)| !snapshot_nodes.iter().any(|(s, _)| s == id)).count();
    let done = map.compact();
    assert_eq!(done.nodes_moved, path_len, "the copied path moved");
    assert!(done.nodes_shared > 0, "its siblings stayed shared");
    assert_eq!(inner_nodes(&snapshot), snapshot_nodes, "the snapshot's nodes are untouched");
    assert_eq!(snapshot.get(&key), Some(&42));
    assert_eq!(map.get(&key), Some(&0));
    check_invariants(&map);

    drop(snapshot);
    let nodes = inner_nodes(&map).len();
    assert_eq!(map.compact().nodes_moved, nodes, "with the snapshot gone, every node is the map's");
}

#[test]
fn compaction_of_a_deep_tree_does_not_recurse() {
    let depth = 20_000;
    let long = vec![b'a'; depth];
    let mut map = ArtMap::new();
    for len in 1..=depth {
        map.insert(&long[..len], len);
    }
    std::thread::Builder::new()
        .stack_size(64 * 1024)
        .spawn(move || {
            let done = map.compact();
            assert!(done.nodes_moved >= depth - 1, "moved {}", done.nodes_moved);
            assert_eq!(map.len(), depth);
            assert_eq!(map.get(&long[..777]), Some(&777));
            drop(map);
        })
        .expect("spawn")
        .join()
        .expect("compaction on a small stack");
}
