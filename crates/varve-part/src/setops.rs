//! Union, intersection and difference by structure (§3.4): both trees are
//! walked together; subtrees that are the same shared node are reused (or,
//! for difference, dropped) without descending, and subtrees whose prefixes
//! diverge are kept or dropped whole. Results are new trees sharing every
//! untouched subtree with the inputs; their counts are computed on the way
//! back up, so `len` of a result stays O(1).
//!
//! Recursion depth is the depth of the trees (one frame per inner node on a
//! path), not the number of entries.

use crate::map::{get_in, insert_in, remove_in, ArtMap};
use crate::node::{common_prefix_len, Child, Header, NodeView};

type MergeFn<'f, V> = &'f mut dyn FnMut(&[u8], &V, &V) -> V;

impl<V: Clone> ArtMap<V> {
    /// Entries of both maps; for a key in both, `merge(key, ours, theirs)`.
    ///
    /// Shared subtrees are reused as they are, without calling `merge`: the
    /// function must return the value itself when both sides hold the same
    /// value (`merge(k, v, v) == v`), as any sensible merge does.
    #[must_use]
    pub fn union_with<F: FnMut(&[u8], &V, &V) -> V>(&self, other: &ArtMap<V>, mut merge: F) -> ArtMap<V> {
        let root = match (&self.root, &other.root) {
            (None, r) | (r, None) => r.clone(),
            (Some(a), Some(b)) => Some(union(a, b, &mut Vec::new(), &mut merge)),
        };
        ArtMap { root }
    }

    /// Entries of both maps; ours win where both have a key.
    #[must_use]
    pub fn union(&self, other: &ArtMap<V>) -> ArtMap<V> {
        self.union_with(other, |_, ours, _| ours.clone())
    }

    /// Keys in both maps, valued `merge(key, ours, theirs)` (not called for
    /// shared subtrees; see [`ArtMap::union_with`]).
    #[must_use]
    pub fn intersection_with<F: FnMut(&[u8], &V, &V) -> V>(&self, other: &ArtMap<V>, mut merge: F) -> ArtMap<V> {
        let root = match (&self.root, &other.root) {
            (Some(a), Some(b)) => intersection(a, b, &mut Vec::new(), &mut merge),
            _ => None,
        };
        ArtMap { root }
    }

    /// Our entries whose keys are also in `other`.
    #[must_use]
    pub fn intersection(&self, other: &ArtMap<V>) -> ArtMap<V> {
        self.intersection_with(other, |_, ours, _| ours.clone())
    }

    /// Our entries whose keys are not in `other`.
    #[must_use]
    pub fn difference(&self, other: &ArtMap<V>) -> ArtMap<V> {
        let root = match (&self.root, &other.root) {
            (Some(a), Some(b)) => difference(a, b),
            (a, None) => a.clone(),
            (None, _) => None,
        };
        ArtMap { root }
    }
}

/// A node built from parts, normalized so that the tree invariants hold:
/// nothing → `None`, value only → leaf, one child and no value → the child
/// with the path prepended.
fn make_node<V: Clone>(prefix: &[u8], value: Option<V>, entries: Vec<(u8, Child<V>)>) -> Option<Child<V>> {
    match (entries.len(), value) {
        (0, None) => None,
        (0, Some(value)) => Some(Child::leaf(prefix, value)),
        (1, None) => {
            let (byte, child) = entries.into_iter().next().expect("one entry");
            let mut head = prefix.to_vec();
            head.push(byte);
            Some(child.prepend(&head))
        }
        (_, value) => {
            let count = entries.iter().map(|(_, c)| c.count()).sum::<usize>() + usize::from(value.is_some());
            let mut header = Header::new(prefix);
            header.value = value;
            header.count = count;
            Some(Child::node_from_entries(header, entries, 0))
        }
    }
}

/// A leaf valued `merge(path ‖ suffix, ours, theirs)`; the key is built in
/// the shared path buffer, not allocated.
fn merged_leaf<V>(path: &mut Vec<u8>, suffix: &[u8], ours: &V, theirs: &V, merge: MergeFn<'_, V>) -> Child<V> {
    let base = path.len();
    path.extend_from_slice(suffix);
    let value = merge(path, ours, theirs);
    path.truncate(base);
    Child::leaf(suffix, value)
}

/// Merge the sorted children of two nodes with `both` for common bytes.
fn merge_children<V: Clone>(
    a: NodeView<'_, V>,
    b: NodeView<'_, V>,
    keep_ours_only: bool,
    keep_theirs_only: bool,
    mut both: impl FnMut(u8, &Child<V>, &Child<V>) -> Option<Child<V>>,
) -> Vec<(u8, Child<V>)> {
    let mut out = Vec::with_capacity(a.len().max(b.len()));
    let (mut ours, mut theirs) = (a.iter().peekable(), b.iter().peekable());
    loop {
        match (ours.peek(), theirs.peek()) {
            (None, None) => return out,
            (Some(&(ka, ca)), Some(&(kb, cb))) if ka == kb => {
                if let Some(child) = both(ka, ca, cb) {
                    out.push((ka, child));
                }
                ours.next();
                theirs.next();
            }
            (Some(&(ka, ca)), Some(&(kb, _))) if ka < kb => {
                if keep_ours_only {
                    out.push((ka, ca.clone()));
                }
                ours.next();
            }
            (Some(&(ka, ca)), None) => {
                if keep_ours_only {
                    out.push((ka, ca.clone()));
                }
                ours.next();
            }
            (_, Some(&(kb, cb))) => {
                if keep_theirs_only {
                    out.push((kb, cb.clone()));
                }
                theirs.next();
            }
        }
    }
}

/// `leaf` (key `path ‖ suffix`) merged into `tree`.
fn union_leaf<V: Clone>(
    tree: &Child<V>,
    suffix: &[u8],
    value: &V,
    leaf_is_ours: bool,
    path: &mut Vec<u8>,
    merge: MergeFn<'_, V>,
) -> Child<V> {
    let merged = match get_in(tree, suffix) {
        Some(existing) => {
            let base = path.len();
            path.extend_from_slice(suffix);
            let merged = if leaf_is_ours { merge(path, value, existing) } else { merge(path, existing, value) };
            path.truncate(base);
            if let Some((tree_suffix, _)) = tree.as_leaf() {
                // Same key on both sides (the common case under a copied
                // node): the merged leaf, without building a tree.
                debug_assert_eq!(tree_suffix, suffix);
                return Child::leaf(suffix, merged);
            }
            merged
        }
        None => value.clone(),
    };
    let mut out = tree.clone();
    insert_in(&mut out, suffix, merged);
    out
}

fn union<V: Clone>(a: &Child<V>, b: &Child<V>, path: &mut Vec<u8>, merge: MergeFn<'_, V>) -> Child<V> {
    if a.ptr_eq(b) {
        return a.clone();
    }
    let (na, nb) = match (a, b) {
        (Child::N2(_) | Child::N4(_) | Child::N16(_) | Child::N48(_) | Child::N256(_), _) if b.is_node() => {
            (a.node().expect("a node"), b.node().expect("a node"))
        }
        (Child::N2(_) | Child::N4(_) | Child::N16(_) | Child::N48(_) | Child::N256(_), leaf) => {
            let (suffix, value) = leaf.as_leaf().expect("leaf");
            return union_leaf(a, suffix, value, false, path, merge);
        }
        (leaf, _) => {
            let (suffix, value) = leaf.as_leaf().expect("leaf");
            return union_leaf(b, suffix, value, true, path, merge);
        }
    };
    let (pa, pb) = (&na.prefix, &nb.prefix);
    let common = common_prefix_len(pa, pb);
    let base = path.len();
    let out = if common == pa.len() && common == pb.len() {
        path.extend_from_slice(pa);
        let value = match (&na.value, &nb.value) {
            (Some(x), Some(y)) => Some(merge(path, x, y)),
            (x, y) => x.clone().or_else(|| y.clone()),
        };
        let entries = merge_children(na, nb, true, true, |byte, ca, cb| {
            path.push(byte);
            let child = union(ca, cb, path, merge);
            path.pop();
            Some(child)
        });
        make_node(pa, value, entries).expect("union is not empty")
    } else if common == pa.len() {
        // b hangs below a, under byte pb[common].
        let byte = pb[common];
        let b_rest = b.strip_front(common + 1);
        path.extend_from_slice(pa);
        path.push(byte);
        let child = match na.get(byte) {
            Some(ca) => union(ca, &b_rest, path, merge),
            None => b_rest,
        };
        replace_child(na, byte, Some(child))
    } else if common == pb.len() {
        let byte = pa[common];
        let a_rest = a.strip_front(common + 1);
        path.extend_from_slice(pb);
        path.push(byte);
        let child = match nb.get(byte) {
            Some(cb) => union(&a_rest, cb, path, merge),
            None => a_rest,
        };
        replace_child(nb, byte, Some(child))
    } else {
        let entries = {
            let mut e = vec![(pa[common], a.strip_front(common + 1)), (pb[common], b.strip_front(common + 1))];
            e.sort_by_key(|(byte, _)| *byte);
            e
        };
        make_node(&pa[..common], None, entries).expect("two entries")
    };
    path.truncate(base);
    out
}

/// A copy of `node` with the child for `byte` replaced (or removed for
/// `None`), normalized.
fn replace_child<V: Clone>(node: NodeView<'_, V>, byte: u8, child: Option<Child<V>>) -> Child<V> {
    let mut entries: Vec<(u8, Child<V>)> =
        node.iter().filter(|(b, _)| *b != byte).map(|(b, c)| (b, c.clone())).collect();
    if let Some(child) = child {
        let at = entries.partition_point(|(b, _)| *b < byte);
        entries.insert(at, (byte, child));
    }
    make_node(&node.prefix, node.value.clone(), entries).expect("a node keeps >= 1 entry")
}

fn intersection<V: Clone>(a: &Child<V>, b: &Child<V>, path: &mut Vec<u8>, merge: MergeFn<'_, V>) -> Option<Child<V>> {
    if a.ptr_eq(b) {
        return Some(a.clone());
    }
    let (na, nb) = match (a, b) {
        (Child::N2(_) | Child::N4(_) | Child::N16(_) | Child::N48(_) | Child::N256(_), _) if b.is_node() => {
            (a.node().expect("a node"), b.node().expect("a node"))
        }
        (Child::N2(_) | Child::N4(_) | Child::N16(_) | Child::N48(_) | Child::N256(_), leaf) => {
            let (suffix, theirs) = leaf.as_leaf().expect("leaf");
            let ours = get_in(a, suffix)?;
            return Some(merged_leaf(path, suffix, ours, theirs, merge));
        }
        (leaf, _) => {
            let (suffix, ours) = leaf.as_leaf().expect("leaf");
            let theirs = get_in(b, suffix)?;
            return Some(merged_leaf(path, suffix, ours, theirs, merge));
        }
    };
    let (pa, pb) = (&na.prefix, &nb.prefix);
    let common = common_prefix_len(pa, pb);
    let base = path.len();
    let out = if common == pa.len() && common == pb.len() {
        path.extend_from_slice(pa);
        let value = match (&na.value, &nb.value) {
            (Some(x), Some(y)) => Some(merge(path, x, y)),
            _ => None,
        };
        let entries = merge_children(na, nb, false, false, |byte, ca, cb| {
            path.push(byte);
            let child = intersection(ca, cb, path, merge);
            path.pop();
            child
        });
        make_node(pa, value, entries)
    } else if common == pa.len() {
        let byte = pb[common];
        path.extend_from_slice(pa);
        path.push(byte);
        let out = na.get(byte).and_then(|ca| intersection(ca, &b.strip_front(common + 1), path, merge));
        out.map(|c| c.prepend(&pb[..=common]))
    } else if common == pb.len() {
        let byte = pa[common];
        path.extend_from_slice(pb);
        path.push(byte);
        let out = nb.get(byte).and_then(|cb| intersection(&a.strip_front(common + 1), cb, path, merge));
        out.map(|c| c.prepend(&pa[..=common]))
    } else {
        None
    };
    path.truncate(base);
    out
}

fn difference<V: Clone>(a: &Child<V>, b: &Child<V>) -> Option<Child<V>> {
    if a.ptr_eq(b) {
        return None;
    }
    let (na, nb) = match (a, b) {
        (Child::N2(_) | Child::N4(_) | Child::N16(_) | Child::N48(_) | Child::N256(_), _) if b.is_node() => {
            (a.node().expect("a node"), b.node().expect("a node"))
        }
        (Child::N2(_) | Child::N4(_) | Child::N16(_) | Child::N48(_) | Child::N256(_), leaf) => {
            let (suffix, _) = leaf.as_leaf().expect("leaf");
            let mut out = Some(a.clone());
            remove_in(&mut out, suffix);
            return out;
        }
        (leaf, _) => {
            let (suffix, _) = leaf.as_leaf().expect("leaf");
            return if get_in(b, suffix).is_some() { None } else { Some(a.clone()) };
        }
    };
    let (pa, pb) = (&na.prefix, &nb.prefix);
    let common = common_prefix_len(pa, pb);
    if common == pa.len() && common == pb.len() {
        let value = if nb.value.is_some() { None } else { na.value.clone() };
        let entries = merge_children(na, nb, true, false, |_, ca, cb| difference(ca, cb));
        make_node(pa, value, entries)
    } else if common == pa.len() {
        let byte = pb[common];
        match na.get(byte) {
            Some(ca) => {
                let child = difference(ca, &b.strip_front(common + 1));
                Some(replace_child_or_collapse(na, byte, child))
            }
            None => Some(a.clone()),
        }
    } else if common == pb.len() {
        let byte = pa[common];
        match nb.get(byte) {
            Some(cb) => difference(&a.strip_front(common + 1), cb).map(|c| c.prepend(&pa[..=common])),
            None => Some(a.clone()),
        }
    } else {
        Some(a.clone())
    }
}

fn replace_child_or_collapse<V: Clone>(node: NodeView<'_, V>, byte: u8, child: Option<Child<V>>) -> Child<V> {
    replace_child(node, byte, child)
}
