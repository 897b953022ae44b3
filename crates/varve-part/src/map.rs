//! [`ArtMap`]: the persistent map, and its read-only [`Snapshot`].

use std::ops::{Bound, Deref, RangeBounds};

use crate::compact::{compact, Compaction};
use crate::iter::{Iter, Values};
use crate::node::{common_prefix_len, node_mut, Child, Header};

/// A persistent, ordered map from byte strings to `V`, stored as an
/// adaptive radix tree (PART, §3 of `seeds/002_…`).
///
/// | operation                          | cost                                   |
/// |------------------------------------|----------------------------------------|
/// | `get`, `contains_key`              | O(k), k = key length                   |
/// | `insert`, `remove`                 | O(k); copies only nodes shared with a snapshot |
/// | `len`, `is_empty`, `snapshot`      | O(1)                                   |
/// | `iter`, `values`, `range`, `prefix`| lazy, O(k) to start, amortized O(1)·k per entry |
/// | `union_with`, `intersection`, `difference` | proportional to the parts that differ |
///
/// Updates between snapshots happen in place (a node nobody else holds is
/// mutated); after [`ArtMap::snapshot`] the first update to each path copies
/// the nodes on it (§3.2–3.3). Updates take `&mut self`: one writer per map.
pub struct ArtMap<V> {
    pub(crate) root: Option<Child<V>>,
}

/// A read-only version of an [`ArtMap`], taken in O(1) by
/// [`ArtMap::snapshot`]. It never changes, whatever happens to the map, and
/// can be shared across threads (`Send + Sync` when `V` is). Every read
/// method of [`ArtMap`] is available through `Deref`.
pub struct Snapshot<V> {
    map: ArtMap<V>,
}

impl<V: Clone> Clone for Snapshot<V> {
    fn clone(&self) -> Self {
        Snapshot { map: self.map.clone() }
    }
}

impl<V> Deref for Snapshot<V> {
    type Target = ArtMap<V>;
    fn deref(&self) -> &ArtMap<V> {
        &self.map
    }
}

impl<V: Clone> Snapshot<V> {
    /// A new writable map starting from this version (O(1)).
    #[must_use]
    pub fn to_map(&self) -> ArtMap<V> {
        self.map.clone()
    }
}

/// One update of a batch: see [`ArtMap::apply`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchOp<V> {
    /// Insert or replace the key with the value.
    Put(Vec<u8>, V),
    /// Remove the key, if present.
    Delete(Vec<u8>),
}

impl<V: Clone> Clone for ArtMap<V> {
    /// O(1): the clone shares every node until one of the two is updated.
    fn clone(&self) -> Self {
        ArtMap { root: self.root.clone() }
    }
}

impl<V> Default for ArtMap<V> {
    fn default() -> Self {
        ArtMap { root: None }
    }
}

impl<V: std::fmt::Debug> std::fmt::Debug for ArtMap<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut iter = self.iter();
        let mut map = f.debug_map();
        while let Some((key, value)) = iter.next_entry() {
            map.entry(&key, value);
        }
        map.finish()
    }
}

impl<V> ArtMap<V> {
    /// An empty map, O(1); allocates nothing.
    #[must_use]
    pub fn new() -> Self {
        ArtMap { root: None }
    }

    /// Number of entries, O(1) (every inner node keeps its subtree's count).
    #[must_use]
    pub fn len(&self) -> usize {
        self.root.as_ref().map_or(0, Child::count)
    }

    /// Whether the map holds no entry, O(1).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.root.is_none()
    }

    /// The value of `key`, O(k) for a key of k bytes.
    #[must_use]
    pub fn get(&self, key: &[u8]) -> Option<&V> {
        get_in(self.root.as_ref()?, key)
    }

    /// Whether `key` has a value, O(k).
    #[must_use]
    pub fn contains_key(&self, key: &[u8]) -> bool {
        self.get(key).is_some()
    }

    /// Entries in key order. See [`Iter::next_entry`] for a loop that does
    /// not allocate a key per entry.
    #[must_use]
    pub fn iter(&self) -> Iter<'_, V> {
        Iter::new(self.root.as_ref(), true)
    }

    /// Values in key order, without building keys.
    #[must_use]
    pub fn values(&self) -> Values<'_, V> {
        Values(Iter::new(self.root.as_ref(), false))
    }

    /// Entries whose key lies in `range`, in key order.
    pub fn range<'r, R: RangeBounds<&'r [u8]>>(&self, range: R) -> Iter<'_, V> {
        let upper = match range.end_bound() {
            Bound::Included(b) => Bound::Included(b.to_vec()),
            Bound::Excluded(b) => Bound::Excluded(b.to_vec()),
            Bound::Unbounded => Bound::Unbounded,
        };
        match range.start_bound() {
            Bound::Unbounded => Iter::new(self.root.as_ref(), true).with_upper(upper),
            Bound::Included(lo) => Iter::seek(self.root.as_ref(), lo, false).with_upper(upper),
            Bound::Excluded(lo) => Iter::seek(self.root.as_ref(), lo, true).with_upper(upper),
        }
    }

    /// Entries whose key starts with `prefix`, in key order.
    #[must_use]
    pub fn prefix(&self, prefix: &[u8]) -> Iter<'_, V> {
        match prefix_successor(prefix) {
            Some(end) => self.range::<(Bound<&[u8]>, Bound<&[u8]>)>((Bound::Included(prefix), Bound::Excluded(&end))),
            None => self.range::<(Bound<&[u8]>, Bound<&[u8]>)>((Bound::Included(prefix), Bound::Unbounded)),
        }
    }

    /// The entry with the smallest key.
    #[must_use]
    pub fn first(&self) -> Option<(Vec<u8>, &V)> {
        self.iter().next()
    }

    /// The entry with the largest key (one descent along the largest bytes).
    #[must_use]
    pub fn last(&self) -> Option<(Vec<u8>, &V)> {
        let mut child = self.root.as_ref()?;
        let mut key = Vec::new();
        loop {
            let Some(node) = child.node() else {
                let (suffix, value) = child.as_leaf()?;
                key.extend_from_slice(suffix);
                return Some((key, value));
            };
            key.extend_from_slice(&node.header().prefix);
            match node.max_child() {
                Some((byte, next)) => {
                    key.push(byte);
                    child = next;
                }
                None => return node.header().value.as_ref().map(|v| (key, v)),
            }
        }
    }
}

impl<'a, V> IntoIterator for &'a ArtMap<V> {
    type Item = (Vec<u8>, &'a V);
    type IntoIter = Iter<'a, V>;
    fn into_iter(self) -> Iter<'a, V> {
        self.iter()
    }
}

impl<V: Clone> ArtMap<V> {
    /// An immutable version of the map as it is now, O(1).
    #[must_use]
    pub fn snapshot(&self) -> Snapshot<V> {
        Snapshot { map: self.clone() }
    }

    /// Insert or replace; returns the previous value.
    pub fn insert(&mut self, key: &[u8], value: V) -> Option<V> {
        match self.root.as_mut() {
            None => {
                self.root = Some(Child::leaf(key, value));
                None
            }
            Some(root) => insert_in(root, key, value),
        }
    }

    /// Rebuild the nodes this map holds alone in traversal order, for scans
    /// (§3.4 "Compaction"); entries are unchanged. Run it when the map is
    /// idle after many updates: O(n), and while it runs the map's inner
    /// nodes take twice their memory. Nodes shared with a snapshot stay
    /// where they are; drop snapshots first to compact those too.
    pub fn compact(&mut self) -> Compaction {
        let Some(root) = self.root.take() else { return Compaction::default() };
        let (root, done) = compact(root);
        self.root = Some(root);
        done
    }

    /// Remove a key; returns its value.
    pub fn remove(&mut self, key: &[u8]) -> Option<V> {
        remove_in(&mut self.root, key)
    }

    /// Mutable access to a value (copies the path if it is shared).
    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut V> {
        if !self.contains_key(key) {
            return None; // no path copy for a miss
        }
        let mut slot = self.root.as_mut()?;
        let mut depth = 0;
        loop {
            if !slot.is_node() {
                return slot.leaf_value_mut();
            }
            let node = node_mut(slot);
            depth += node.prefix.len();
            if depth == key.len() {
                return node.into_header_mut().value.as_mut();
            }
            let at = node.find(key[depth])?;
            depth += 1;
            slot = node.into_child_mut(at);
        }
    }

    /// Apply many updates at once, as if one by one in the given order (the
    /// last update of a key wins).
    ///
    /// The batch is sorted and applied in one descent: each node on the way
    /// is made writable once (copied if a snapshot shares it) and every
    /// update below it is applied before moving on, instead of one descent
    /// from the root per update (§3.3 "batched updates").
    pub fn apply<I: IntoIterator<Item = BatchOp<V>>>(&mut self, ops: I) {
        let mut ops: Vec<(Vec<u8>, Option<V>)> = ops
            .into_iter()
            .map(|op| match op {
                BatchOp::Put(key, value) => (key, Some(value)),
                BatchOp::Delete(key) => (key, None),
            })
            .collect();
        if !ops.is_sorted_by(|a, b| a.0 < b.0) {
            ops = sort_batch(ops);
        }
        let placeholder = Child::node_from_entries(Header::new(b""), Vec::new(), 0);
        apply_sorted(&mut self.root, &mut ops, 0, 0, &placeholder);
    }

    /// Insert many entries at once (see [`ArtMap::apply`]).
    pub fn insert_batch<K: AsRef<[u8]>, I: IntoIterator<Item = (K, V)>>(&mut self, entries: I) {
        self.apply(entries.into_iter().map(|(k, v)| BatchOp::Put(k.as_ref().to_vec(), v)));
    }
}

/// Sort a batch by key; for equal keys keep only the last update.
///
/// Keys live in separate heap allocations, so comparing them directly costs
/// cache misses; the sort works on (first 8 key bytes, position) pairs and
/// reads whole keys only on ties.
fn sort_batch<V>(ops: Vec<(Vec<u8>, Option<V>)>) -> Vec<(Vec<u8>, Option<V>)> {
    fn head(key: &[u8]) -> u64 {
        let mut bytes = [0u8; 8];
        let n = key.len().min(8);
        bytes[..n].copy_from_slice(&key[..n]);
        u64::from_be_bytes(bytes)
    }
    let mut order: Vec<(u64, usize)> = ops.iter().enumerate().map(|(i, (k, _))| (head(k), i)).collect();
    order.sort_unstable_by(|a, b| {
        a.0.cmp(&b.0).then_with(|| ops[a.1].0.cmp(&ops[b.1].0)).then(b.1.cmp(&a.1))
        // the later update first…
    });
    order.dedup_by(|later, earlier| later.0 == earlier.0 && ops[later.1].0 == ops[earlier.1].0); // …is kept
    let mut slots: Vec<Option<(Vec<u8>, Option<V>)>> = ops.into_iter().map(Some).collect();
    order.iter().map(|&(_, i)| slots[i].take().expect("each position once")).collect()
}

/// Deeper than this, a batch is applied one update at a time (iteratively):
/// the batch descent recurses once per inner node, and a tree of long keys
/// that are prefixes of each other can be thousands of nodes deep.
const BATCH_RECURSION_DEPTH_MAX: usize = 64;

/// Apply `ops` (sorted by key, distinct keys, all sharing the first `depth`
/// bytes, which are the path to `root`) to the subtree in `root`.
fn apply_sorted<V: Clone>(
    root: &mut Option<Child<V>>,
    ops: &mut [(Vec<u8>, Option<V>)],
    depth: usize,
    level: usize,
    placeholder: &Child<V>,
) {
    let (Some(first), Some(last)) = (ops.first(), ops.last()) else {
        return;
    };
    let descend = match root.as_ref().and_then(Child::node) {
        Some(node) => {
            // Sorted keys: if the first and last start with the prefix, all do.
            let prefix = &*node.header().prefix;
            ops.len() > 1
                && level < BATCH_RECURSION_DEPTH_MAX
                && first.0[depth..].starts_with(prefix)
                && last.0[depth..].starts_with(prefix)
        }
        None => false,
    };
    if !descend {
        for (key, value) in ops.iter_mut() {
            let rest = &key[depth..];
            match (value.take(), root.as_mut()) {
                (Some(value), Some(tree)) => {
                    insert_in(tree, rest, value);
                }
                (Some(value), None) => *root = Some(Child::leaf(rest, value)),
                (None, _) => {
                    remove_in(root, rest);
                }
            }
        }
        return;
    }
    let Some(arc) = root.as_mut() else { unreachable!("checked above") };
    let mut node = node_mut(arc);
    let end = depth + node.prefix.len();
    let mut i = 0;
    if ops[0].0.len() == end {
        // The shortest key ends at this node: its value slot.
        let had = match ops[0].1.take() {
            Some(value) => node.value.replace(value).is_some(),
            None => node.value.take().is_some(),
        };
        let has = node.value.is_some();
        node.count = node.count + usize::from(has) - usize::from(had);
        i = 1;
    }
    while i < ops.len() {
        let byte = ops[i].0[end];
        let run = ops[i..].iter().take_while(|(key, _)| key[end] == byte).count();
        let group = &mut ops[i..i + run];
        i += run;
        // Adding or removing a child may replace the node (a change of
        // kind), so the writable borrow is taken again for each group; the
        // node is not shared any more, so that copies nothing.
        let mut node = node_mut(arc);
        if let Some(slot) = node.find(byte) {
            let child = node.child_mut(slot);
            let before = child.count();
            let mut sub = Some(std::mem::replace(child, placeholder.clone()));
            apply_sorted(&mut sub, group, end + 1, level + 1, placeholder);
            if let Some(tree) = sub {
                let after = tree.count();
                *node.child_mut(slot) = tree;
                node.count = node.count + after - before;
            } else {
                drop(arc.remove_child(byte));
                node_mut(arc).count -= before;
            }
        } else {
            let mut sub = None;
            apply_sorted(&mut sub, group, end + 1, level + 1, placeholder);
            if let Some(tree) = sub {
                node.count += tree.count();
                arc.add_child(byte, tree);
            }
        }
    }
    if arc.count() == 0 {
        *root = None;
    } else if let Some(slot) = root.as_mut() {
        restructure(slot);
    }
}

impl<V: Clone> FromIterator<(Vec<u8>, V)> for ArtMap<V> {
    fn from_iter<I: IntoIterator<Item = (Vec<u8>, V)>>(iter: I) -> Self {
        let mut map = ArtMap::new();
        map.insert_batch(iter);
        map
    }
}

/// The smallest byte string greater than every string starting with
/// `prefix`, or `None` if there is none (`prefix` is all `0xff`).
fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|&b| b != 0xff)?;
    let mut end = prefix[..=last].to_vec();
    end[last] += 1;
    Some(end)
}

/// Lookup of `key` relative to the subtree `child`.
pub(crate) fn get_in<'a, V>(mut child: &'a Child<V>, key: &[u8]) -> Option<&'a V> {
    let mut depth = 0;
    loop {
        let Some(node) = child.node() else {
            let (suffix, value) = child.as_leaf()?;
            return (suffix == &key[depth..]).then_some(value);
        };
        let prefix = &node.header().prefix;
        // Most inner nodes of dense trees have no prefix: skip the
        // comparison call for them.
        if !prefix.is_empty() {
            if key.len() - depth < prefix.len() || key[depth..depth + prefix.len()] != **prefix {
                return None;
            }
            depth += prefix.len();
        }
        if depth == key.len() {
            return node.header().value.as_ref();
        }
        child = node.get(key[depth])?;
        depth += 1;
    }
}

/// Insert relative to the subtree in `slot`; returns the old value.
///
/// Iterative (no recursion per level). Counts are raised on the way down
/// assuming the key is new; a replacement walks the path again to undo that
/// (the path is uniquely owned by then, so the second walk copies nothing).
pub(crate) fn insert_in<V: Clone>(root: &mut Child<V>, key: &[u8], value: V) -> Option<V> {
    let mut slot: &mut Child<V> = &mut *root;
    let mut depth = 0;
    let old = loop {
        let rest = &key[depth..];
        let Some(node) = slot.node() else {
            let (suffix, _) = slot.as_leaf().expect("not a node");
            if suffix == rest {
                break Some(std::mem::replace(slot.leaf_value_mut().expect("leaf"), value));
            }
            split_leaf(slot, rest, value);
            break None;
        };
        let common = common_prefix_len(&node.prefix, rest);
        let split_at = (common < node.prefix.len()).then_some(common);
        if let Some(common) = split_at {
            split_node(slot, common, rest, value);
            break None;
        }
        // Found before the node is made writable: the borrow that goes on
        // down (into `slot`) must not be taken on the path that adds here.
        let arc = slot;
        let view = arc.node().expect("checked above");
        depth += view.prefix.len();
        if depth == key.len() {
            let mut node = node_mut(arc);
            node.count += 1;
            break node.value.replace(value);
        }
        let byte = key[depth];
        if let Some(at) = view.find(byte) {
            let mut node = node_mut(arc);
            node.count += 1;
            depth += 1;
            slot = node.into_child_mut(at);
        } else {
            node_mut(arc).count += 1;
            arc.add_child(byte, Child::leaf(&key[depth + 1..], value));
            break None;
        }
    };
    if old.is_some() {
        undo_count_raise(root, key);
    }
    old
}

fn undo_count_raise<V: Clone>(root: &mut Child<V>, key: &[u8]) {
    let mut slot = root;
    let mut depth = 0;
    while slot.is_node() {
        let mut node = node_mut(slot);
        node.count -= 1;
        depth += node.prefix.len();
        if depth == key.len() {
            return;
        }
        let at = node.find(key[depth]).expect("path of a replaced key");
        depth += 1;
        slot = node.into_child_mut(at);
    }
}

/// `slot` is a leaf with another key: replace it by a node holding both.
fn split_leaf<V: Clone>(slot: &mut Child<V>, rest: &[u8], value: V) {
    let (suffix, _) = slot.as_leaf().expect("leaf");
    let common = common_prefix_len(suffix, rest);
    let mut header = Header::new(&rest[..common]);
    header.count = 2;
    let mut node = Child::node_from_entries(header, Vec::new(), 2);
    add_entry(&mut node, &rest[common..], value);
    match std::mem::replace(slot, node) {
        Child::Short { len, bytes, value } => add_entry(slot, &bytes[common..usize::from(len)], value),
        Child::Long { suffix, value } => add_entry(slot, &suffix[common..], value),
        _ => unreachable!("a leaf"),
    }
}

/// `slot` is a node whose prefix diverges from `rest` after `common` bytes
/// (or `rest` ends inside it): put a new node with the common part above it.
fn split_node<V: Clone>(slot: &mut Child<V>, common: usize, rest: &[u8], value: V) {
    let mut node = node_mut(slot);
    let old_prefix = std::mem::take(&mut node.prefix);
    node.prefix = old_prefix[common + 1..].into();
    let mut header = Header::new(&old_prefix[..common]);
    header.count = node.count + 1;
    let mut parent = Child::node_from_entries(header, Vec::new(), 2);
    add_entry(&mut parent, &rest[common..], value);
    let old = std::mem::replace(slot, parent);
    slot.add_child(old_prefix[common], old);
}

/// Put an entry whose key relative to `node` (after its prefix) is `tail`.
fn add_entry<V: Clone>(node: &mut Child<V>, tail: &[u8], value: V) {
    match tail.split_first() {
        None => node_mut(node).value = Some(value),
        Some((&byte, suffix)) => node.add_child(byte, Child::leaf(suffix, value)),
    }
}

enum RemoveAt {
    Descend,
    Value,
    Leaf(u8),
}

/// Remove `key` from the tree in `root`. Iterative; restructures only the
/// node the entry leaves (an inner node always keeps >= 2 entries, so its
/// ancestors only lose one from their counts).
pub(crate) fn remove_in<V: Clone>(root: &mut Option<Child<V>>, key: &[u8]) -> Option<V> {
    let tree = root.as_ref()?;
    get_in(tree, key)?; // a miss must not copy the path
    if !tree.is_node() {
        return root.take().and_then(Child::into_leaf_value);
    }
    let mut slot = root.as_mut()?;
    let mut depth = 0;
    loop {
        let node = slot.node().expect("leaves are handled by the parent");
        let end = depth + node.prefix.len();
        let at = if end == key.len() {
            RemoveAt::Value
        } else if node.get(key[end]).expect("key is present").is_node() {
            RemoveAt::Descend
        } else {
            RemoveAt::Leaf(key[end])
        };
        match at {
            RemoveAt::Descend => {
                let mut node = node_mut(slot);
                node.count -= 1;
                let at = node.find(key[end]).expect("key is present");
                depth = end + 1;
                slot = node.into_child_mut(at);
            }
            RemoveAt::Value => {
                let mut node = node_mut(slot);
                node.count -= 1;
                let value = node.value.take();
                restructure(slot);
                return value;
            }
            RemoveAt::Leaf(byte) => {
                node_mut(slot).count -= 1;
                let removed = slot.remove_child(byte);
                restructure(slot);
                return removed.into_leaf_value();
            }
        }
    }
}

/// After an entry left the node in `slot`: a node with no children becomes
/// a leaf; one with a single child and no value merges into that child.
fn restructure<V: Clone>(slot: &mut Child<V>) {
    let Some(node) = slot.node() else { return };
    let replacement = match (node.len(), node.value.is_some()) {
        (0, true) => {
            let mut node = node_mut(slot);
            let value = node.value.take().expect("checked");
            Child::leaf(&node.prefix, value)
        }
        (1, false) => {
            let (byte, child) = slot.take_children().pop().expect("one child");
            let mut head = slot.node().expect("a node").prefix.to_vec();
            head.push(byte);
            child.prepend(&head)
        }
        _ => return,
    };
    *slot = replacement;
}
