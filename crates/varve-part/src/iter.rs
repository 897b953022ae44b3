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
                // Scans are bound by cache misses on inner nodes (they are
                // allocated in update order, not key order): ask for the
                // next sibling node while this one is walked.
                if let Some((next_at, _, Some(next))) = frame.node.next_from(at + 1).map(|(a, b, c)| (a, b, c.node())) {
                    // Its first lines were asked for one step ago: now the
                    // rest of its inline slots, and the first lines of the
                    // one after.
                    next.prefetch(2..6);
                    if let Some(after) = frame.node.next_from(next_at + 1).and_then(|(_, _, c)| c.node()) {
                        after.prefetch(0..2);
                    }
                }
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

/// Values in key order, without building keys (see [`crate::ArtMap::values`]).
pub struct Values<'a, V>(pub(crate) Iter<'a, V>);

impl<'a, V> Iterator for Values<'a, V> {
    type Item = &'a V;
    fn next(&mut self) -> Option<&'a V> {
        self.0.advance()
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
}
