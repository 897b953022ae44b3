//! Lazy, ordered iteration with an explicit stack (no recursion, no
//! collecting). Keys are built incrementally in one buffer.

use std::ops::Bound;

use crate::node::{Child, NodeView};

struct Frame<'a, V> {
    node: NodeView<'a, V>,
    /// Cursor into the node's children (see `Body::next_from`).
    pos: usize,
    /// Length of the key buffer up to and including this node's prefix.
    key_len: usize,
    /// The node's own value (key ending here) is still to be visited.
    value_pending: bool,
}

/// Ordered iterator over a map's entries.
///
/// As an [`Iterator`] it yields owned keys; [`Iter::next_entry`] lends the
/// key from an internal buffer instead, which avoids one allocation per
/// entry in scans.
pub struct Iter<'a, V> {
    stack: Vec<Frame<'a, V>>,
    root_leaf: Option<(&'a [u8], &'a V)>,
    key: Vec<u8>,
    build_keys: bool,
    upper: Bound<Vec<u8>>,
    /// Excluded lower bound: skip an entry equal to it (the seek lands on it).
    skip_equal: Option<Vec<u8>>,
}

impl<'a, V> Iter<'a, V> {
    pub(crate) fn new(root: Option<&'a Child<V>>, build_keys: bool) -> Self {
        let mut iter = Iter {
            stack: Vec::new(),
            root_leaf: None,
            key: Vec::new(),
            build_keys,
            upper: Bound::Unbounded,
            skip_equal: None,
        };
        if let Some(root) = root {
            if let Some(node) = root.node() {
                iter.push_node(node);
            } else {
                iter.root_leaf = root.as_leaf();
            }
        }
        iter
    }

    pub(crate) fn with_upper(mut self, upper: Bound<Vec<u8>>) -> Self {
        self.upper = upper;
        self
    }

    fn push_node(&mut self, node: NodeView<'a, V>) {
        if self.build_keys {
            self.key.extend_from_slice(&node.header().prefix);
        }
        self.stack.push(Frame { node, pos: 0, key_len: self.key.len(), value_pending: true });
    }

    /// Position at the first entry `>= lower` (or `> lower` if `excluded`).
    pub(crate) fn seek(root: Option<&'a Child<V>>, lower: &[u8], excluded: bool) -> Self {
        let mut iter = Iter {
            stack: Vec::new(),
            root_leaf: None,
            key: Vec::new(),
            build_keys: true,
            upper: Bound::Unbounded,
            skip_equal: excluded.then(|| lower.to_vec()),
        };
        let Some(mut child) = root else { return iter };
        let mut depth = 0;
        loop {
            let rest = &lower[depth..];
            let Some(node) = child.node() else {
                // Only reached for a leaf root: deeper leaves are decided below.
                let (suffix, value) = child.as_leaf().expect("leaf");
                if suffix >= rest {
                    iter.root_leaf = Some((suffix, value));
                }
                return iter;
            };
            let prefix = &node.prefix;
            let shared = prefix.len().min(rest.len());
            match prefix[..shared].cmp(&rest[..shared]) {
                std::cmp::Ordering::Less => return iter, // the whole subtree is below
                std::cmp::Ordering::Greater => {
                    iter.push_node(node); // the whole subtree is above
                    return iter;
                }
                std::cmp::Ordering::Equal if rest.len() <= prefix.len() => {
                    iter.push_node(node); // `lower` ends inside or at the prefix
                    return iter;
                }
                std::cmp::Ordering::Equal => {}
            }
            iter.key.extend_from_slice(prefix);
            depth += prefix.len();
            let byte = lower[depth];
            let pos = node.seek(byte);
            let mut frame = Frame {
                node,
                pos,
                key_len: iter.key.len(),
                value_pending: false, // its key is a proper prefix of `lower`
            };
            match node.next_from(pos) {
                Some((at, found, next)) if found == byte => {
                    if next.is_node() {
                        frame.pos = at + 1;
                        iter.stack.push(frame);
                        iter.key.push(byte);
                        child = next;
                        depth += 1;
                    } else {
                        let (suffix, _) = next.as_leaf().expect("leaf");
                        if suffix < &lower[depth + 1..] {
                            frame.pos = at + 1;
                        }
                        iter.stack.push(frame);
                        return iter;
                    }
                }
                _ => {
                    iter.stack.push(frame);
                    return iter;
                }
            }
        }
    }

    /// Next value in order, with its key left in `self.key` (if built).
    fn advance(&mut self) -> Option<&'a V> {
        if let Some((suffix, value)) = self.root_leaf.take() {
            self.key.clear();
            self.key.extend_from_slice(suffix);
            return Some(value);
        }
        loop {
            let frame = self.stack.last_mut()?;
            if frame.value_pending {
                frame.value_pending = false;
                if let Some(value) = &frame.node.header().value {
                    self.key.truncate(frame.key_len);
                    return Some(value);
                }
            }
            // Fast path, most entries of a scan: the next child of a
            // Node2/4/16 (cursor = index) is a leaf.
            if let Some((keys, children)) = frame.node.sorted_parts() {
                let Some(Some(child)) = children.get(frame.pos) else {
                    self.stack.pop();
                    continue;
                };
                if let Some((suffix, value)) = child.as_leaf() {
                    if self.build_keys {
                        self.key.truncate(frame.key_len);
                        self.key.push(keys[frame.pos]);
                        self.key.extend_from_slice(suffix);
                    }
                    frame.pos += 1;
                    return Some(value);
                }
            }
            let Some((at, byte, child)) = frame.node.next_from(frame.pos) else {
                self.stack.pop();
                continue;
            };
            frame.pos = at + 1;
            let key_len = frame.key_len;
            if self.build_keys {
                self.key.truncate(key_len);
                self.key.push(byte);
            }
            if let Some(node) = child.node() {
                prefetch_siblings(frame.node, at);
                self.push_node(node);
            } else {
                let (suffix, value) = child.as_leaf().expect("leaf");
                if self.build_keys {
                    self.key.extend_from_slice(suffix);
                }
                return Some(value);
            }
        }
    }

    /// The next entry, lending the key from the iterator's buffer.
    pub fn next_entry(&mut self) -> Option<(&[u8], &'a V)> {
        loop {
            let value = self.advance()?;
            if let Some(lower) = &self.skip_equal {
                if *lower == self.key {
                    self.skip_equal = None;
                    continue;
                }
                if self.key > *lower {
                    self.skip_equal = None;
                }
            }
            let past_end = match &self.upper {
                Bound::Unbounded => false,
                Bound::Included(end) => self.key > *end,
                Bound::Excluded(end) => self.key >= *end,
            };
            if past_end {
                self.stack.clear();
                return None;
            }
            return Some((&self.key, value));
        }
    }
}

impl<'a, V> Iterator for Iter<'a, V> {
    type Item = (Vec<u8>, &'a V);
    fn next(&mut self) -> Option<Self::Item> {
        self.next_entry().map(|(key, value)| (key.to_vec(), value))
    }
}

/// Scans are bound by cache misses on inner nodes (they are allocated in
/// update order, not key order): while the child at `at` of `parent` is
/// walked, ask for the whole of the sibling node [`SIBLINGS_AHEAD`] further
/// on (the nearer ones were asked for at the steps before).
#[inline]
fn prefetch_siblings<V>(parent: NodeView<'_, V>, at: usize) {
    let mut pos = at + 1;
    for step in 1..=SIBLINGS_AHEAD {
        let Some((found_at, _, child)) = parent.next_from(pos) else { return };
        if step == SIBLINGS_AHEAD {
            if let Some(node) = child.node() {
                node.prefetch(0..6);
            }
        }
        pos = found_at + 1;
    }
}

/// How many sibling nodes ahead a scan prefetches. `fold` reads one node of
/// leaves in less time than a miss to memory takes: on 2026-11-28 a 1M-key
/// scan by `sum` was about 5% faster with 2 ahead than with 1, and no
/// faster with 4 or 8 (alternate runs of `part_timing 1000000 scan`).
const SIBLINGS_AHEAD: usize = 2;

/// Values in key order, without building keys (see [`crate::ArtMap::values`]).
pub struct Values<'a, V>(pub(crate) Iter<'a, V>);

impl<'a, V> Iterator for Values<'a, V> {
    type Item = &'a V;
    fn next(&mut self) -> Option<&'a V> {
        self.0.advance()
    }

    /// The rest of the scan as one loop (what `sum`, `for_each` and `count`
    /// call; a `for` loop calls `next`): a sorted node's leaves are read in
    /// a tight loop over its slots instead of one `next` each, which
    /// re-finds the frame, its kind and its cursor for every entry. Same
    /// order, same entries as `next`.
    fn fold<B, F>(mut self, init: B, mut f: F) -> B
    where
        F: FnMut(B, &'a V) -> B,
    {
        let iter = &mut self.0;
        let mut acc = init;
        if let Some((_, value)) = iter.root_leaf.take() {
            acc = f(acc, value);
        }
        while let Some(frame) = iter.stack.last_mut() {
            if frame.value_pending {
                frame.value_pending = false;
                if let Some(value) = &frame.node.header().value {
                    acc = f(acc, value);
                }
            }
            if let Some((_, children)) = frame.node.sorted_parts() {
                let mut pos = frame.pos;
                // Leaves in a run; stop at the end or at an inner node.
                while let Some(Some(child)) = children.get(pos) {
                    let Some((_, value)) = child.as_leaf() else { break };
                    acc = f(acc, value);
                    pos += 1;
                }
                frame.pos = pos;
            }
            let Some((at, _, child)) = frame.node.next_from(frame.pos) else {
                iter.stack.pop();
                continue;
            };
            frame.pos = at + 1;
            if let Some(node) = child.node() {
                prefetch_siblings(frame.node, at);
                iter.push_node(node);
            } else {
                let (_, value) = child.as_leaf().expect("leaf");
                acc = f(acc, value);
            }
        }
        acc
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::ops::Bound;

    use crate::ArtMap;

    /// Seeks and scans over each node kind (Node48 cursors carry a child
    /// index next to the byte): every lower bound, included and excluded,
    /// against a `BTreeMap`.
    #[test]
    fn range_from_every_bound_for_each_node_kind() {
        for width in [3usize, 12, 30, 100] {
            let mut map = ArtMap::new();
            let mut model = BTreeMap::new();
            for i in 0..width {
                let byte = u8::try_from(i * 255 / width).expect("byte");
                for key in [vec![7, byte], vec![7, byte, 1, 2]] {
                    map.insert(&key, key.len());
                    model.insert(key.clone(), key.len());
                }
            }
            for lower in 0..=255u8 {
                for tail in [&[][..], &[0][..], &[1, 2][..], &[9][..]] {
                    let mut low = vec![7, lower];
                    low.extend_from_slice(tail);
                    for excluded in [false, true] {
                        let bound = if excluded { Bound::Excluded(&low[..]) } else { Bound::Included(&low[..]) };
                        let ours: Vec<(Vec<u8>, usize)> = map
                            .range::<(Bound<&[u8]>, Bound<&[u8]>)>((bound, Bound::Unbounded))
                            .map(|(k, v)| (k, *v))
                            .collect();
                        let model_bound =
                            if excluded { Bound::Excluded(low.clone()) } else { Bound::Included(low.clone()) };
                        let theirs: Vec<(Vec<u8>, usize)> =
                            model.range((model_bound, Bound::Unbounded)).map(|(k, v)| (k.clone(), *v)).collect();
                        assert_eq!(ours, theirs, "width {width}, lower {low:?}, excluded {excluded}");
                    }
                }
            }
            let all: Vec<(Vec<u8>, usize)> = map.iter().map(|(k, v)| (k, *v)).collect();
            let expected: Vec<(Vec<u8>, usize)> = model.into_iter().collect();
            assert_eq!(all, expected, "width {width}");
        }
    }

    /// `values().fold` (what `sum` and `for_each` call) gives what `next`
    /// gives, from any point of the scan: over every node kind, values
    /// that end at inner nodes, long suffixes, a leaf root and no root.
    #[test]
    fn fold_gives_what_next_gives_from_any_point() {
        let mut maps: Vec<ArtMap<usize>> = vec![ArtMap::new()];
        let mut single = ArtMap::new();
        single.insert(b"only", 1);
        maps.push(single);
        for width in [2usize, 3, 12, 30, 100, 256] {
            let mut map = ArtMap::new();
            for i in 0..width {
                let byte = u8::try_from(i * 255 / (width - 1)).expect("byte");
                map.insert(&[7, byte], i);
                map.insert(&[7, byte, 1, 2], 1000 + i);
                map.insert(&[7, byte, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13], 2000 + i);
                map.insert(&[7, byte, 9], 3000 + i);
            }
            map.insert(&[7], 9999);
            maps.push(map);
        }
        for map in &maps {
            let expected: Vec<usize> = map.values().copied().collect();
            assert_eq!(expected.len(), map.len());
            for skip in 0..=expected.len() {
                let mut values = map.values();
                for _ in 0..skip {
                    values.next();
                }
                let rest = values.fold(Vec::new(), |mut acc, v| {
                    acc.push(*v);
                    acc
                });
                assert_eq!(rest, expected[skip..], "{} entries, after {skip}", map.len());
            }
        }
    }
}
