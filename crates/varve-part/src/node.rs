//! Nodes of the adaptive radix tree (§3.1 of `seeds/002_…`).
//!
//! A tree is a [`Child`]: either a leaf stored inline in its parent's slot
//! (the key bytes not implied by the path, plus the value) or an
//! `Arc`-counted inner node. Inner nodes hold a compressed
//! path (`prefix`, stored whole), an optional value for the key that ends
//! exactly after the prefix (so any key may be a prefix of another), the
//! number of entries below them, a checkpoint reference slot for the durable
//! layer, and a body of 2, 4, 16, 48 or 256 children (the paper's four
//! kinds and a Node2, below).
//!
//! One allocation per node: each kind is its own type (`Node<V, Sorted<V,
//! 4>>`, …) with its own [`Child`] variant, so a Node2, 4 or 16 keeps its
//! keys and child slots inline, next to its header (one allocation and one
//! cache miss per level on a lookup), and a Node256 keeps its 16 chunk
//! pointers inline. [`NodeView`] reads any kind, [`NodeMut`] writes one.
//!
//! Invariants (checked by `check` in tests):
//! - an inner node holds at least two entries (`count >= 2`): a node with one
//!   child and no value is collapsed into its child, a node with no children
//!   becomes a leaf;
//! - `count` is the number of entries in the subtree;
//! - children are keyed by distinct bytes; sorted bodies keep keys ascending;
//! - a body holds at most its kind's capacity (2, 4, 16, 48, 256) children.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// Leaves whose remaining key is at most this long keep it inline in the
/// parent's child slot. 10 bytes keeps `Child<u32>` at 16 bytes
/// (tag + length + 10 bytes + `u32`); longer suffixes go to the heap.
pub(crate) const INLINE_SUFFIX_BYTES_MAX: usize = 10;

/// One slot of a node (or the root of a tree).
#[derive(Clone)]
pub(crate) enum Child<V> {
    /// A leaf whose key suffix fits inline.
    Short {
        len: u8,
        bytes: [u8; INLINE_SUFFIX_BYTES_MAX],
        value: V,
    },
    /// A leaf with a long key suffix, shared (not copied) when path copying
    /// clones the slot: a deep copy cost two allocations per long leaf of
    /// every copied node. The inner box keeps the slot thin.
    Long {
        suffix: Arc<Box<[u8]>>,
        value: V,
    },
    /// Inner nodes, one variant per kind (the kind is the slot's tag: a
    /// separate enum of the five `Arc`s would not share it and make every
    /// slot 8 bytes larger), shared between versions by reference counting.
    N2(Arc<Node2<V>>),
    N4(Arc<Node4<V>>),
    N16(Arc<Node16<V>>),
    N48(Arc<Node48<V>>),
    N256(Arc<Node256<V>>),
}

// The slot size is what memory per entry is made of (leaves live in their
// parent's slots).
const _: () = assert!(std::mem::size_of::<Child<u32>>() == 16);

impl<V> Child<V> {
    pub(crate) fn leaf(suffix: &[u8], value: V) -> Self {
        if suffix.len() <= INLINE_SUFFIX_BYTES_MAX {
            let mut bytes = [0u8; INLINE_SUFFIX_BYTES_MAX];
            bytes[..suffix.len()].copy_from_slice(suffix);
            #[expect(clippy::cast_possible_truncation, reason = "len <= INLINE_SUFFIX_BYTES_MAX")]
            let len = suffix.len() as u8;
            Child::Short { len, bytes, value }
        } else {
            Child::Long { suffix: Arc::new(suffix.into()), value }
        }
    }

    /// Entries in this subtree.
    #[inline]
    pub(crate) fn count(&self) -> usize {
        self.node().map_or(1, |node| node.header().count)
    }

    /// The inner node in this slot, if it holds one.
    #[inline]
    pub(crate) fn node(&self) -> Option<NodeView<'_, V>> {
        match self {
            Child::Short { .. } | Child::Long { .. } => None,
            Child::N2(a) => Some(NodeView::N2(a)),
            Child::N4(a) => Some(NodeView::N4(a)),
            Child::N16(a) => Some(NodeView::N16(a)),
            Child::N48(a) => Some(NodeView::N48(a)),
            Child::N256(a) => Some(NodeView::N256(a)),
        }
    }

    #[inline]
    pub(crate) fn is_node(&self) -> bool {
        !matches!(self, Child::Short { .. } | Child::Long { .. })
    }

    #[inline]
    pub(crate) fn as_leaf(&self) -> Option<(&[u8], &V)> {
        match self {
            Child::Short { len, bytes, value } => Some((&bytes[..usize::from(*len)], value)),
            Child::Long { suffix, value } => Some((suffix, value)),
            _ => None,
        }
    }

    pub(crate) fn leaf_value_mut(&mut self) -> Option<&mut V> {
        match self {
            Child::Short { value, .. } | Child::Long { value, .. } => Some(value),
            _ => None,
        }
    }

    pub(crate) fn into_leaf_value(self) -> Option<V> {
        match self {
            Child::Short { value, .. } | Child::Long { value, .. } => Some(value),
            _ => None,
        }
    }

    /// Both are the same shared node: the subtrees are equal without looking.
    #[inline]
    pub(crate) fn ptr_eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Child::N2(a), Child::N2(b)) => Arc::ptr_eq(a, b),
            (Child::N4(a), Child::N4(b)) => Arc::ptr_eq(a, b),
            (Child::N16(a), Child::N16(b)) => Arc::ptr_eq(a, b),
            (Child::N48(a), Child::N48(b)) => Arc::ptr_eq(a, b),
            (Child::N256(a), Child::N256(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl<V: Clone> Child<V> {
    /// This subtree moved `head.len()` bytes further up: prepend `head` to
    /// its compressed path (copying the node if it is shared).
    pub(crate) fn prepend(self, head: &[u8]) -> Self {
        if head.is_empty() {
            return self;
        }
        match self {
            mut tree @ (Child::N2(_) | Child::N4(_) | Child::N16(_) | Child::N48(_) | Child::N256(_)) => {
                let mut node = node_mut(&mut tree);
                let mut prefix = Vec::with_capacity(head.len() + node.prefix.len());
                prefix.extend_from_slice(head);
                prefix.extend_from_slice(&node.prefix);
                node.prefix = prefix.into_boxed_slice();
                tree
            }
            leaf => {
                let (suffix, _) = leaf.as_leaf().expect("not a node");
                let mut key = Vec::with_capacity(head.len() + suffix.len());
                key.extend_from_slice(head);
                key.extend_from_slice(suffix);
                let value = leaf.into_leaf_value().expect("not a node");
                Child::leaf(&key, value)
            }
        }
    }

    /// This subtree moved `n` bytes further down: drop the first `n` bytes of
    /// its compressed path. `n` must not exceed the prefix/suffix length.
    pub(crate) fn strip_front(&self, n: usize) -> Self {
        if n == 0 {
            return self.clone();
        }
        match self {
            Child::N2(_) | Child::N4(_) | Child::N16(_) | Child::N48(_) | Child::N256(_) => {
                let mut tree = self.clone();
                let mut node = node_mut(&mut tree);
                node.prefix = node.prefix[n..].into();
                tree
            }
            leaf => {
                let (suffix, value) = leaf.as_leaf().expect("not a node");
                Child::leaf(&suffix[n..], value.clone())
            }
        }
    }
}

/// A child slot of a Node2/4/16 or of a Node256 chunk; `None` = empty.
pub(crate) type Slot<V> = Option<Child<V>>;

/// What every inner node holds besides its children.
pub(crate) struct Header<V> {
    pub(crate) prefix: Box<[u8]>,
    pub(crate) value: Option<V>,
    pub(crate) count: usize,
    /// See [`crate::raw`]: 0 = not (known to be) in any checkpoint.
    pub(crate) checkpoint_ref: AtomicU64,
}

impl<V: Clone> Clone for Header<V> {
    /// A copy is a new node: no checkpoint holds it yet.
    fn clone(&self) -> Self {
        Header {
            prefix: self.prefix.clone(),
            value: self.value.clone(),
            count: self.count,
            checkpoint_ref: AtomicU64::new(0),
        }
    }
}

impl<V> Header<V> {
    pub(crate) fn new(prefix: &[u8]) -> Self {
        Header { prefix: prefix.into(), value: None, count: 0, checkpoint_ref: AtomicU64::new(0) }
    }
}

/// An inner node of one kind: the header and the body (`B` is one of
/// [`Sorted`], [`Indexed`], [`Direct`]) in one allocation.
#[derive(Clone)]
pub(crate) struct Node<V, B> {
    pub(crate) header: Header<V>,
    pub(crate) body: B,
}

pub(crate) type Node2<V> = Node<V, Sorted<V, 2>>;
pub(crate) type Node4<V> = Node<V, Sorted<V, 4>>;
pub(crate) type Node16<V> = Node<V, Sorted<V, 16>>;
pub(crate) type Node48<V> = Node<V, Indexed<V>>;
pub(crate) type Node256<V> = Node<V, Direct<V>>;

/// A borrowed inner node of any kind (what a [`Child`] slot holding a
/// node points to).
pub(crate) enum NodeView<'a, V> {
    N2(&'a Arc<Node2<V>>),
    N4(&'a Arc<Node4<V>>),
    N16(&'a Arc<Node16<V>>),
    N48(&'a Arc<Node48<V>>),
    N256(&'a Arc<Node256<V>>),
}

impl<V> Clone for NodeView<'_, V> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<V> Copy for NodeView<'_, V> {}

/// Run `$body` with `$n` bound to the payload of whichever variant of
/// `$enum` (`NodeView` or `NodeMut`) `$node` is.
macro_rules! each_kind {
    ($enum:ident, $node:expr, $n:ident => $body:expr) => {
        match $node {
            $enum::N2($n) => $body,
            $enum::N4($n) => $body,
            $enum::N16($n) => $body,
            $enum::N48($n) => $body,
            $enum::N256($n) => $body,
        }
    };
}

impl<V> Deref for NodeView<'_, V> {
    type Target = Header<V>;
    #[inline]
    fn deref(&self) -> &Header<V> {
        self.header()
    }
}

/// A node made writable by [`node_mut`]: header fields through `Deref`, and
/// the child slots. Adding or removing a child may change the node's kind,
/// which replaces the allocation: that is [`Child::add_child`] and
/// [`Child::remove_child`], on the slot.
pub(crate) enum NodeMut<'a, V> {
    N2(&'a mut Node2<V>),
    N4(&'a mut Node4<V>),
    N16(&'a mut Node16<V>),
    N48(&'a mut Node48<V>),
    N256(&'a mut Node256<V>),
}

impl<V> Deref for NodeMut<'_, V> {
    type Target = Header<V>;
    #[inline]
    fn deref(&self) -> &Header<V> {
        each_kind!(NodeMut, self, n => &n.header)
    }
}

impl<V> DerefMut for NodeMut<'_, V> {
    #[inline]
    fn deref_mut(&mut self) -> &mut Header<V> {
        each_kind!(NodeMut, self, n => &mut n.header)
    }
}

impl<'a, V: Clone> NodeMut<'a, V> {
    /// The slot of the child for `byte`, if any (a position for
    /// [`NodeMut::into_child_mut`]).
    #[inline]
    pub(crate) fn find(&self, byte: u8) -> Option<usize> {
        each_kind!(NodeMut, self, n => n.body.find(byte))
    }

    /// The child in `slot` (from [`NodeMut::find`]), for the rest of the
    /// node's borrow.
    #[inline]
    pub(crate) fn into_child_mut(self, slot: usize) -> &'a mut Child<V> {
        each_kind!(NodeMut, self, n => n.body.child_mut(slot))
    }

    /// The header, for the rest of the node's borrow.
    #[inline]
    pub(crate) fn into_header_mut(self) -> &'a mut Header<V> {
        each_kind!(NodeMut, self, n => &mut n.header)
    }

    /// The child in `slot` (from [`NodeMut::find`]).
    #[inline]
    pub(crate) fn child_mut(&mut self, slot: usize) -> &mut Child<V> {
        each_kind!(NodeMut, self, n => n.body.child_mut(slot))
    }

    /// Move the header and every child out (in byte order), leaving an
    /// empty node behind: for a change of kind.
    fn take_all(self) -> (Header<V>, Vec<(u8, Child<V>)>) {
        each_kind!(NodeMut, self, n => (std::mem::replace(&mut n.header, Header::new(b"")), n.body.take_entries()))
    }
}

/// Mutable access to a node for an update: in place when nobody else holds
/// it, otherwise a copy of just this node (path copying, §3.2). Either way
/// the node is now different from anything a checkpoint wrote, so its
/// checkpoint reference is cleared. `slot` must hold a node.
#[inline]
pub(crate) fn node_mut<V: Clone>(slot: &mut Child<V>) -> NodeMut<'_, V> {
    let mut node = match slot {
        Child::N2(a) => NodeMut::N2(Arc::make_mut(a)),
        Child::N4(a) => NodeMut::N4(Arc::make_mut(a)),
        Child::N16(a) => NodeMut::N16(Arc::make_mut(a)),
        Child::N48(a) => NodeMut::N48(Arc::make_mut(a)),
        Child::N256(a) => NodeMut::N256(Arc::make_mut(a)),
        Child::Short { .. } | Child::Long { .. } => unreachable!("node_mut of a leaf"),
    };
    *node.checkpoint_ref.get_mut() = 0;
    node
}

/// What each body kind provides. Cursor positions (`next_from`, `seek`) are
/// opaque to callers: start at 0 or at `seek`, continue at `at + 1`.
pub(crate) trait Kind<V>: Sized {
    /// Children this kind holds at most.
    const CAPACITY: usize;
    fn len(&self) -> usize;
    /// The slot of the child for `byte`, if any.
    fn find(&self, byte: u8) -> Option<usize>;
    /// The child for `byte` (the lookup hot path: `find` and the slot in one).
    fn get(&self, byte: u8) -> Option<&Child<V>>;
    /// The first child at cursor position `>= pos`: (its position, byte, child).
    fn next_from(&self, pos: usize) -> Option<(usize, u8, &Child<V>)>;
    /// The cursor position of the first child whose byte is `>= byte`.
    fn seek(&self, byte: u8) -> usize;
    fn max_child(&self) -> Option<(u8, &Child<V>)>;
    /// Built from `entries` (sorted, distinct bytes, at most `CAPACITY`).
    fn from_entries(entries: impl ExactSizeIterator<Item = (u8, Child<V>)>) -> Self;
    /// Move every inner-node child onto `stack` (leaves are dropped here).
    fn drain_nodes(&mut self, stack: &mut Vec<Child<V>>);
    /// The child in `slot` (from `find`).
    fn child_mut(&mut self, slot: usize) -> &mut Child<V>
    where
        V: Clone;
    /// Add a child for a byte that has none; the body has room.
    fn insert(&mut self, byte: u8, child: Child<V>)
    where
        V: Clone;
    /// Remove the child in `slot` (from `find(byte)`).
    fn remove(&mut self, slot: usize, byte: u8) -> Child<V>
    where
        V: Clone;
    /// Move all children out, in byte order, leaving the body empty.
    fn take_entries(&mut self) -> Vec<(u8, Child<V>)>
    where
        V: Clone;
}

/// Drop a body without recursing once per tree level: a deep tree (long
/// keys that are prefixes of each other) or a huge one would overflow the
/// stack. Nodes we own alone are emptied onto a heap stack; shared ones just
/// lose a reference. Every body kind's `Drop` calls this.
fn drop_body<V, K: Kind<V>>(body: &mut K) {
    let mut stack: Vec<Child<V>> = Vec::new();
    body.drain_nodes(&mut stack);
    while let Some(child) = stack.pop() {
        // `into_inner` hands the node to exactly one of its holders; it
        // drops here with an empty body: no recursion.
        match child {
            Child::Short { .. } | Child::Long { .. } => {}
            Child::N2(a) => drop(Arc::into_inner(a).map(|mut n| n.body.drain_nodes(&mut stack))),
            Child::N4(a) => drop(Arc::into_inner(a).map(|mut n| n.body.drain_nodes(&mut stack))),
            Child::N16(a) => drop(Arc::into_inner(a).map(|mut n| n.body.drain_nodes(&mut stack))),
            Child::N48(a) => drop(Arc::into_inner(a).map(|mut n| n.body.drain_nodes(&mut stack))),
            Child::N256(a) => drop(Arc::into_inner(a).map(|mut n| n.body.drain_nodes(&mut stack))),
        }
    }
}

/// Node2, Node4 and Node16: keys sorted ascending, children in the same
/// order, both inline. Slots `len..N` are `None`.
///
/// Why a Node2 (not in the paper): the bottom inner nodes of a large map of
/// random keys mostly hold two keys (at 10M 4-byte keys, 81% of 2.0M), and
/// a Node2 is 96 bytes where a Node4 is 128: 5 bytes less per entry.
#[derive(Clone)]
pub(crate) struct Sorted<V, const N: usize> {
    len: u8,
    pub(crate) keys: [u8; N],
    pub(crate) children: [Slot<V>; N],
}

impl<V, const N: usize> Drop for Sorted<V, N> {
    fn drop(&mut self) {
        drop_body(self);
    }
}

impl<V, const N: usize> Sorted<V, N> {
    fn new() -> Self {
        Sorted { len: 0, keys: [0; N], children: std::array::from_fn(|_| None) }
    }

    #[inline]
    fn lower_bound(&self, byte: u8) -> usize {
        self.keys[..usize::from(self.len)].partition_point(|&k| k < byte)
    }
}

impl<V, const N: usize> Kind<V> for Sorted<V, N> {
    const CAPACITY: usize = N;

    #[inline]
    fn len(&self) -> usize {
        usize::from(self.len)
    }

    #[inline]
    fn find(&self, byte: u8) -> Option<usize> {
        let len = usize::from(self.len);
        #[cfg(target_arch = "x86_64")]
        if let Ok(keys) = <&[u8; 16]>::try_from(&self.keys[..]) {
            return find16_simd(keys, len, byte);
        }
        self.keys[..len].iter().position(|&k| k == byte)
    }

    #[inline]
    fn get(&self, byte: u8) -> Option<&Child<V>> {
        self.children[self.find(byte)?].as_ref()
    }

    #[inline]
    fn next_from(&self, pos: usize) -> Option<(usize, u8, &Child<V>)> {
        if pos < usize::from(self.len) {
            self.children[pos].as_ref().map(|c| (pos, self.keys[pos], c))
        } else {
            None
        }
    }

    #[inline]
    fn seek(&self, byte: u8) -> usize {
        self.lower_bound(byte)
    }

    fn max_child(&self) -> Option<(u8, &Child<V>)> {
        let last = usize::from(self.len).checked_sub(1)?;
        self.children[last].as_ref().map(|c| (self.keys[last], c))
    }

    fn from_entries(entries: impl ExactSizeIterator<Item = (u8, Child<V>)>) -> Self {
        debug_assert!(entries.len() <= N);
        let mut s = Sorted::new();
        s.len = u8::try_from(entries.len()).expect("at most N <= 16 entries");
        for (i, (byte, child)) in entries.enumerate() {
            s.keys[i] = byte;
            s.children[i] = Some(child);
        }
        s
    }

    fn drain_nodes(&mut self, stack: &mut Vec<Child<V>>) {
        for slot in &mut self.children[..usize::from(self.len)] {
            if let Some(child) = slot.take().filter(Child::is_node) {
                stack.push(child);
            }
        }
        self.len = 0;
    }

    #[inline]
    fn child_mut(&mut self, slot: usize) -> &mut Child<V> {
        self.children[slot].as_mut().expect("slot from find")
    }

    fn insert(&mut self, byte: u8, child: Child<V>) {
        let len = usize::from(self.len);
        debug_assert!(len < N);
        let at = self.lower_bound(byte);
        self.keys.copy_within(at..len, at + 1);
        self.keys[at] = byte;
        // Slot `len` is `None`: rotating it to `at` opens the gap.
        self.children[at..=len].rotate_right(1);
        self.children[at] = Some(child);
        self.len += 1;
    }

    fn remove(&mut self, slot: usize, _byte: u8) -> Child<V> {
        let len = usize::from(self.len);
        let removed = self.children[slot].take().expect("present child");
        self.children[slot..len].rotate_left(1);
        self.keys.copy_within(slot + 1..len, slot);
        self.len -= 1;
        removed
    }

    fn take_entries(&mut self) -> Vec<(u8, Child<V>)> {
        let len = usize::from(self.len);
        self.len = 0;
        (0..len).map(|i| (self.keys[i], self.children[i].take().expect("slot below len"))).collect()
    }
}

/// Node48: a 256-bit presence bitmap and the children sorted by byte; the
/// child for byte `b` is at `rank(b)` (the number of present bytes below
/// `b`).
///
/// Why not the paper's 256-byte index: 256 bytes per node; with random
/// 4-byte keys a third of the bottom nodes are Node48s, and the index cost
/// ~5 bytes per entry. The bitmap is 32 bytes inline, rank is four masked
/// popcounts, and sorted children make ordered iteration a slice walk.
///
/// Why the children are a separate vector (unlike Node4/16): a Node48
/// holds 17 to 48 children, and 48 inline slots (768 bytes for `u32`
/// values) would leave most of a typical Node48 empty; the vector grows by
/// small steps instead.
#[derive(Clone)]
pub(crate) struct Indexed<V> {
    pub(crate) present: [u64; 4],
    pub(crate) children: Vec<Child<V>>,
}

impl<V> Drop for Indexed<V> {
    fn drop(&mut self) {
        drop_body(self);
    }
}

impl<V> Indexed<V> {
    #[inline]
    fn has(&self, byte: usize) -> bool {
        self.present[byte / 64] & (1 << (byte % 64)) != 0
    }

    /// Number of present bytes below `byte` (`byte` may be 256).
    #[inline]
    fn rank(&self, byte: usize) -> usize {
        let word = byte / 64;
        let below = (1u64 << (byte % 64)) - 1;
        let mut rank = 0;
        for (i, &bits) in self.present.iter().enumerate() {
            let mask = match i.cmp(&word) {
                std::cmp::Ordering::Less => u64::MAX,
                std::cmp::Ordering::Equal => below,
                std::cmp::Ordering::Greater => 0,
            };
            rank += (bits & mask).count_ones() as usize;
        }
        rank
    }

    /// The first present byte `>= from`, if any.
    #[inline]
    fn next_present(&self, from: usize) -> Option<usize> {
        next_present_in(&self.present, from)
    }

    /// The largest present byte, if any.
    fn last_present(&self) -> Option<usize> {
        (0..4).rev().find(|&w| self.present[w] != 0).map(|w| w * 64 + 63 - self.present[w].leading_zeros() as usize)
    }
}

/// Node48 cursor positions: the low bits hold a byte cursor (0..=256), the
/// high bits the index of the child at that byte (see `next_from`).
const N48_CURSOR_BYTE_BITS: usize = 9;
const N48_CURSOR_BYTE_MASK: usize = (1 << N48_CURSOR_BYTE_BITS) - 1;

impl<V> Kind<V> for Indexed<V> {
    const CAPACITY: usize = 48;

    #[inline]
    fn len(&self) -> usize {
        self.children.len()
    }

    #[inline]
    fn find(&self, byte: u8) -> Option<usize> {
        let byte = usize::from(byte);
        self.has(byte).then(|| self.rank(byte))
    }

    #[inline]
    fn get(&self, byte: u8) -> Option<&Child<V>> {
        let byte = usize::from(byte);
        if self.has(byte) {
            self.children.get(self.rank(byte))
        } else {
            None
        }
    }

    #[inline]
    fn next_from(&self, pos: usize) -> Option<(usize, u8, &Child<V>)> {
        // pos = (index << N48_CURSOR_BYTE_BITS) | byte: the index is
        // rank(byte) (kept by the cursor, not recomputed per child), and
        // `at + 1` advances both fields at once.
        let index = pos >> N48_CURSOR_BYTE_BITS;
        let b = self.next_present(pos & N48_CURSOR_BYTE_MASK)?;
        debug_assert_eq!(index, self.rank(b));
        let child = self.children.get(index)?;
        #[expect(clippy::cast_possible_truncation, reason = "b < 256")]
        Some(((index + 1) << N48_CURSOR_BYTE_BITS | b, b as u8, child))
    }

    #[inline]
    fn seek(&self, byte: u8) -> usize {
        let byte = usize::from(byte);
        self.rank(byte) << N48_CURSOR_BYTE_BITS | byte
    }

    fn max_child(&self) -> Option<(u8, &Child<V>)> {
        #[expect(clippy::cast_possible_truncation, reason = "b < 256")]
        self.last_present().map(|b| (b as u8, self.children.last().expect("a present byte")))
    }

    fn from_entries(entries: impl ExactSizeIterator<Item = (u8, Child<V>)>) -> Self {
        debug_assert!(entries.len() <= 48);
        let mut n = Indexed { present: [0; 4], children: Vec::with_capacity(entries.len()) };
        for (byte, child) in entries {
            n.children.push(child);
            n.present[usize::from(byte) / 64] |= 1 << (byte % 64);
        }
        n
    }

    fn drain_nodes(&mut self, stack: &mut Vec<Child<V>>) {
        self.present = [0; 4];
        stack.extend(self.children.drain(..).filter(Child::is_node));
    }

    #[inline]
    fn child_mut(&mut self, slot: usize) -> &mut Child<V> {
        &mut self.children[slot]
    }

    fn insert(&mut self, byte: u8, child: Child<V>) {
        grow_exact(&mut self.children, 48);
        let at = self.rank(usize::from(byte));
        self.children.insert(at, child);
        self.present[usize::from(byte) / 64] |= 1 << (byte % 64);
    }

    fn remove(&mut self, slot: usize, byte: u8) -> Child<V> {
        self.present[usize::from(byte) / 64] &= !(1 << (byte % 64));
        self.children.remove(slot)
    }

    fn take_entries(&mut self) -> Vec<(u8, Child<V>)> {
        let mut out = Vec::with_capacity(self.children.len());
        let mut byte = 0;
        for child in std::mem::take(&mut self.children) {
            byte = self.next_present(byte).expect("one present byte per child");
            #[expect(clippy::cast_possible_truncation, reason = "byte < 256")]
            out.push((byte as u8, child));
            byte += 1;
        }
        self.present = [0; 4];
        out
    }
}

/// The first byte `>= from` whose bit is set in a Node48's `present`.
#[inline]
fn next_present_in(present: &[u64; 4], from: usize) -> Option<usize> {
    let mut word = from / 64;
    if word >= 4 {
        return None;
    }
    let mut bits = present[word] & (u64::MAX << (from % 64));
    loop {
        if bits != 0 {
            return Some(word * 64 + bits.trailing_zeros() as usize);
        }
        word += 1;
        if word == 4 {
            return None;
        }
        bits = present[word];
    }
}

/// Node256: one slot per byte, in 16 shared chunks of 16 slots; the chunk
/// pointers are inline in the node.
///
/// Why chunks: copying a node for path copying must bump the reference count
/// of every child it shares, and the children of a wide node are cold in
/// cache. A flat 256-slot copy costs up to 256 such misses per level (it
/// dominated "insert + snapshot" and the drop of old versions); with chunks a
/// copy bumps 16 chunk counts and then copies only the one chunk it changes.
#[derive(Clone)]
pub(crate) struct Direct<V> {
    /// `None` = 16 empty slots.
    pub(crate) chunks: [Option<Arc<Chunk<V>>>; CHUNKS],
    pub(crate) len: usize,
}

impl<V> Drop for Direct<V> {
    fn drop(&mut self) {
        drop_body(self);
    }
}

pub(crate) const CHUNK_SLOTS: usize = 16;
const CHUNKS: usize = 256 / CHUNK_SLOTS;

#[derive(Clone)]
pub(crate) struct Chunk<V> {
    pub(crate) slots: [Slot<V>; CHUNK_SLOTS],
}

impl<V> Chunk<V> {
    fn empty() -> Self {
        Chunk { slots: std::array::from_fn(|_| None) }
    }
}

impl<V> Direct<V> {
    #[inline]
    fn slot(&self, byte: usize) -> Option<&Child<V>> {
        self.chunks[byte / CHUNK_SLOTS].as_ref()?.slots[byte % CHUNK_SLOTS].as_ref()
    }
}

impl<V: Clone> Direct<V> {
    /// The slot for `byte`, copying its chunk if shared.
    fn slot_mut(&mut self, byte: usize) -> &mut Slot<V> {
        let chunk = self.chunks[byte / CHUNK_SLOTS].get_or_insert_with(|| Arc::new(Chunk::empty()));
        &mut Arc::make_mut(chunk).slots[byte % CHUNK_SLOTS]
    }
}

impl<V> Kind<V> for Direct<V> {
    const CAPACITY: usize = 256;

    #[inline]
    fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn find(&self, byte: u8) -> Option<usize> {
        self.slot(usize::from(byte)).map(|_| usize::from(byte))
    }

    #[inline]
    fn get(&self, byte: u8) -> Option<&Child<V>> {
        self.slot(usize::from(byte))
    }

    #[inline]
    fn next_from(&self, pos: usize) -> Option<(usize, u8, &Child<V>)> {
        let mut b = pos;
        while b < 256 {
            match &self.chunks[b / CHUNK_SLOTS] {
                None => b = (b / CHUNK_SLOTS + 1) * CHUNK_SLOTS,
                Some(chunk) => {
                    if let Some(c) = &chunk.slots[b % CHUNK_SLOTS] {
                        #[expect(clippy::cast_possible_truncation, reason = "b < 256")]
                        return Some((b, b as u8, c));
                    }
                    b += 1;
                }
            }
        }
        None
    }

    #[inline]
    fn seek(&self, byte: u8) -> usize {
        usize::from(byte)
    }

    fn max_child(&self) -> Option<(u8, &Child<V>)> {
        #[expect(clippy::cast_possible_truncation, reason = "b < 256")]
        (0..256usize).rev().find_map(|b| self.slot(b).map(|c| (b as u8, c)))
    }

    fn from_entries(entries: impl ExactSizeIterator<Item = (u8, Child<V>)>) -> Self {
        let mut chunks: [Option<Chunk<V>>; CHUNKS] = std::array::from_fn(|_| None);
        let len = entries.len();
        for (byte, child) in entries {
            let byte = usize::from(byte);
            chunks[byte / CHUNK_SLOTS].get_or_insert_with(Chunk::empty).slots[byte % CHUNK_SLOTS] = Some(child);
        }
        Direct { chunks: chunks.map(|c| c.map(Arc::new)), len }
    }

    fn drain_nodes(&mut self, stack: &mut Vec<Child<V>>) {
        for chunk in &mut self.chunks {
            // `into_inner` hands the chunk to exactly one of its holders, so
            // it is never freed by recursive drop glue.
            if let Some(chunk) = chunk.take().and_then(Arc::into_inner) {
                stack.extend(chunk.slots.into_iter().flatten().filter(Child::is_node));
            }
        }
        self.len = 0;
    }

    #[inline]
    fn child_mut(&mut self, slot: usize) -> &mut Child<V>
    where
        V: Clone,
    {
        self.slot_mut(slot).as_mut().expect("slot from find")
    }

    fn insert(&mut self, byte: u8, child: Child<V>)
    where
        V: Clone,
    {
        *self.slot_mut(usize::from(byte)) = Some(child);
        self.len += 1;
    }

    fn remove(&mut self, slot: usize, _byte: u8) -> Child<V>
    where
        V: Clone,
    {
        self.len -= 1;
        self.slot_mut(slot).take().expect("present child")
    }

    fn take_entries(&mut self) -> Vec<(u8, Child<V>)>
    where
        V: Clone,
    {
        let mut out = Vec::with_capacity(self.len);
        for (i, chunk) in self.chunks.iter_mut().enumerate() {
            let Some(chunk) = chunk.take() else { continue };
            let chunk = Arc::try_unwrap(chunk).unwrap_or_else(|shared| (*shared).clone());
            for (j, slot) in chunk.slots.into_iter().enumerate() {
                if let Some(child) = slot {
                    #[expect(clippy::cast_possible_truncation, reason = "byte < 256")]
                    out.push(((i * CHUNK_SLOTS + j) as u8, child));
                }
            }
        }
        self.len = 0;
        out
    }
}

/// Shrink thresholds are below the grow points so that alternating
/// insert/remove at a boundary does not convert a node every time.
const N16_SHRINK_BELOW: usize = 3;
const N48_SHRINK_BELOW: usize = 13;
const N256_SHRINK_BELOW: usize = 40;
const _: () = assert!(N16_SHRINK_BELOW <= 4 && N48_SHRINK_BELOW <= 16 && N256_SHRINK_BELOW <= 48);

/// SIMD search of a Node16 (SSE2 is part of the `x86_64` baseline).
#[cfg(target_arch = "x86_64")]
#[inline]
#[must_use]
#[expect(unsafe_code, reason = "SSE2 intrinsics are unsafe functions")]
pub fn find16_simd(keys: &[u8; 16], len: usize, byte: u8) -> Option<usize> {
    use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8};
    debug_assert!(len <= 16);
    // SAFETY: SSE2 is enabled on every x86_64 target, so the intrinsics are
    // available; `keys` is a valid, initialized 16-byte array for the whole
    // call and `_mm_loadu_si128` has no alignment requirement.
    let bits = unsafe {
        let haystack = _mm_loadu_si128(keys.as_ptr().cast());
        #[expect(clippy::cast_possible_wrap, reason = "SSE compares bit patterns")]
        let needle = _mm_set1_epi8(byte as i8);
        _mm_movemask_epi8(_mm_cmpeq_epi8(haystack, needle))
    };
    #[expect(clippy::cast_sign_loss, reason = "movemask sets only the low 16 bits")]
    let mask = (bits as u32) & ((1u32 << len) - 1);
    if mask == 0 {
        None
    } else {
        Some(mask.trailing_zeros() as usize)
    }
}

/// Scalar search of a Node16 (other targets; also the test oracle).
#[inline]
#[must_use]
pub fn find16_scalar(keys: &[u8; 16], len: usize, byte: u8) -> Option<usize> {
    keys[..len].iter().position(|&k| k == byte)
}

impl<V> Child<V> {
    /// A node holding `entries` (sorted by byte, distinct bytes) with room
    /// for `room` more children, of the smallest kind that fits.
    pub(crate) fn node_from_entries(header: Header<V>, entries: Vec<(u8, Child<V>)>, room: usize) -> Self {
        debug_assert!(entries.windows(2).all(|w| w[0].0 < w[1].0));
        Child::node_from_iter(header, entries.into_iter(), room)
    }

    /// As [`Child::node_from_entries`], from an iterator (sorted by byte,
    /// distinct bytes): compaction builds nodes without a vector each.
    pub(crate) fn node_from_iter(
        header: Header<V>,
        entries: impl ExactSizeIterator<Item = (u8, Child<V>)>,
        room: usize,
    ) -> Self {
        let need = entries.len() + room;
        debug_assert!(need <= 256);
        if need <= Sorted::<V, 2>::CAPACITY {
            Child::N2(Arc::new(Node { header, body: Sorted::from_entries(entries) }))
        } else if need <= Sorted::<V, 4>::CAPACITY {
            Child::N4(Arc::new(Node { header, body: Sorted::from_entries(entries) }))
        } else if need <= Sorted::<V, 16>::CAPACITY {
            Child::N16(Arc::new(Node { header, body: Sorted::from_entries(entries) }))
        } else if need <= Indexed::<V>::CAPACITY {
            let mut body = Indexed::from_entries(entries);
            body.children.reserve_exact(room);
            Child::N48(Arc::new(Node { header, body }))
        } else {
            Child::N256(Arc::new(Node { header, body: Direct::from_entries(entries) }))
        }
    }
}

impl<'a, V> NodeView<'a, V> {
    /// The header, for the whole borrow of the tree.
    #[inline]
    pub(crate) fn header(self) -> &'a Header<V> {
        each_kind!(NodeView, self, n => &n.header)
    }

    /// The node's address: its identity while anyone holds it.
    pub(crate) fn addr(self) -> usize {
        each_kind!(NodeView, self, a => Arc::as_ptr(a).cast::<u8>() as usize)
    }

    #[inline]
    pub(crate) fn len(self) -> usize {
        each_kind!(NodeView, self, n => n.body.len())
    }

    pub(crate) fn kind_capacity(self) -> usize {
        match self {
            NodeView::N2(_) => Sorted::<V, 2>::CAPACITY,
            NodeView::N4(_) => Sorted::<V, 4>::CAPACITY,
            NodeView::N16(_) => Sorted::<V, 16>::CAPACITY,
            NodeView::N48(_) => Indexed::<V>::CAPACITY,
            NodeView::N256(_) => Direct::<V>::CAPACITY,
        }
    }

    /// The slot of the child for `byte`, if any.
    #[inline]
    pub(crate) fn find(self, byte: u8) -> Option<usize> {
        each_kind!(NodeView, self, n => n.body.find(byte))
    }

    /// The child for `byte`.
    #[inline]
    pub(crate) fn get(self, byte: u8) -> Option<&'a Child<V>> {
        each_kind!(NodeView, self, n => n.body.get(byte))
    }

    /// Ordered cursor: returns the first child at position `>= pos` (see
    /// [`Kind`]).
    #[inline]
    pub(crate) fn next_from(self, pos: usize) -> Option<(usize, u8, &'a Child<V>)> {
        each_kind!(NodeView, self, n => n.body.next_from(pos))
    }

    /// The cursor position of the first child whose byte is `>= byte`.
    #[inline]
    pub(crate) fn seek(self, byte: u8) -> usize {
        each_kind!(NodeView, self, n => n.body.seek(byte))
    }

    pub(crate) fn max_child(self) -> Option<(u8, &'a Child<V>)> {
        each_kind!(NodeView, self, n => n.body.max_child())
    }

    /// Keys and children of a Node2/4/16 (whose cursor positions are indexes
    /// into both), for the scan fast path.
    #[inline]
    pub(crate) fn sorted_parts(self) -> Option<(&'a [u8], &'a [Slot<V>])> {
        match self {
            NodeView::N2(n) => Some((&n.body.keys, &n.body.children[..n.body.len()])),
            NodeView::N4(n) => Some((&n.body.keys, &n.body.children[..n.body.len()])),
            NodeView::N16(n) => Some((&n.body.keys, &n.body.children[..n.body.len()])),
            NodeView::N48(_) | NodeView::N256(_) => None,
        }
    }

    /// Children in byte order.
    pub(crate) fn iter(self) -> impl Iterator<Item = (u8, &'a Child<V>)> + 'a {
        let mut pos = 0;
        std::iter::from_fn(move || {
            let (at, byte, child) = self.next_from(pos)?;
            pos = at + 1;
            Some((byte, child))
        })
    }

    /// Hint the CPU to load cache lines `lines` (64 bytes each, counted
    /// from the node's start) of this node, those that it has.
    #[inline]
    pub(crate) fn prefetch(self, lines: std::ops::Range<usize>) {
        fn of<T>(arc: &Arc<T>, lines: std::ops::Range<usize>) {
            let start: *const u8 = Arc::as_ptr(arc).cast();
            for line in lines.take_while(|l| l * 64 < std::mem::size_of::<T>()) {
                prefetch_ptr(start.wrapping_add(line * 64));
            }
        }
        each_kind!(NodeView, self, a => of(a, lines));
    }
}

impl<V: Clone> Child<V> {
    /// Add a child for a byte that has none to the node in this slot,
    /// moving the node to the next kind if it is full (copying it first if
    /// it is shared).
    pub(crate) fn add_child(&mut self, byte: u8, child: Child<V>) {
        let node = self.node().expect("add_child to a node");
        debug_assert!(node.find(byte).is_none());
        if node.len() == node.kind_capacity() {
            let (header, entries) = node_mut(self).take_all();
            *self = Child::node_from_entries(header, entries, 1);
        }
        each_kind!(NodeMut, node_mut(self), n => n.body.insert(byte, child));
    }

    /// Remove the child for `byte` (which must exist) from the node in this
    /// slot, moving the node to a smaller kind when it becomes sparse.
    pub(crate) fn remove_child(&mut self, byte: u8) -> Child<V> {
        let removed = each_kind!(NodeMut, node_mut(self), n => {
            let slot = n.body.find(byte).expect("remove of a present child");
            n.body.remove(slot, byte)
        });
        let shrink = match self.node().expect("a node") {
            // A Node4 of two children stays: alternating inserts and
            // removals at the boundary would convert it every time.
            NodeView::N2(_) | NodeView::N4(_) => false,
            NodeView::N16(n) => n.body.len() < N16_SHRINK_BELOW,
            NodeView::N48(n) => n.body.len() < N48_SHRINK_BELOW,
            NodeView::N256(n) => n.body.len() < N256_SHRINK_BELOW,
        };
        if shrink {
            let (header, entries) = node_mut(self).take_all();
            *self = Child::node_from_entries(header, entries, 0);
        }
        removed
    }

    /// Move all children of the node in this slot out, in byte order,
    /// leaving the node without children (its header stays).
    pub(crate) fn take_children(&mut self) -> Vec<(u8, Child<V>)> {
        each_kind!(NodeMut, node_mut(self), n => n.body.take_entries())
    }
}

/// Children vectors grow by small steps up to the node kind's capacity
/// instead of doubling: doubling left up to half of every node's slots
/// empty (and a Node48 vector at 68 slots). Memory per entry is a goal
/// (§3.1, "within a factor of 2 of optimal"); the extra reallocations are
/// bounded by the kind's capacity.
fn grow_exact<T>(children: &mut Vec<T>, kind_capacity: usize) {
    const GROW_STEP: usize = 4;
    if children.len() == children.capacity() {
        let room = GROW_STEP.min(kind_capacity - children.len()).max(1);
        children.reserve_exact(room);
    }
}

/// Hint the CPU to load the cache line at `ptr` (any address is fine: a
/// prefetch never faults).
#[inline]
#[expect(unsafe_code, reason = "the prefetch intrinsic is an unsafe function")]
fn prefetch_ptr(ptr: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and never changes memory, whatever
    // the address. SSE is in the x86_64 baseline.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(ptr.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ptr;
}

/// Length of the common prefix of two byte strings.
#[inline]
pub(crate) fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Check the invariants listed in the module docs; returns the subtree's
/// entry count. Iterative. Panics on a violation (test use).
pub(crate) fn check<V>(root: &Child<V>) -> usize {
    let mut total = 0;
    let mut stack = vec![root];
    while let Some(child) = stack.pop() {
        let Some(node) = child.node() else {
            total += 1;
            continue;
        };
        let below: usize = node.iter().map(|(_, c)| c.count()).sum();
        assert_eq!(node.count, below + usize::from(node.value.is_some()), "count of a node");
        assert!(node.count >= 2, "an inner node holds >= 2 entries");
        assert!(node.len() >= 2 || node.value.is_some(), "a lone child is collapsed");
        assert!(node.len() <= node.kind_capacity());
        let bytes: Vec<u8> = node.iter().map(|(b, _)| b).collect();
        assert!(bytes.windows(2).all(|w| w[0] < w[1]), "children in byte order");
        assert_eq!(bytes.len(), node.len());
        for &b in &bytes {
            assert!(node.get(b).is_some(), "find agrees with iteration");
        }
        if let Some((keys, children)) = node.sorted_parts() {
            assert_eq!(&keys[..children.len()], &bytes[..], "sorted keys match the cursor order");
        }
        total += usize::from(node.value.is_some());
        stack.extend(node.iter().map(|(_, c)| c));
    }
    total
}

/// Node256 chunks shared with another node, by position (see
/// [`Child::move_out_if_alone`]).
pub(crate) type SharedChunks<V> = [Option<Arc<Chunk<V>>>; CHUNKS];

/// What [`Child::move_out_if_alone`] moved out of a node besides its children.
pub(crate) type MovedOut<V> = (Header<V>, Option<Box<SharedChunks<V>>>);

impl<V> Child<V> {
    /// For compaction: if nobody else holds the node in this slot, move its
    /// header and children out (the children appended to `out` in byte
    /// order), leaving every allocation of the node in place, emptied, for
    /// the caller to free later. Node256 chunks shared with another node
    /// are not unpacked, which would copy them: they come back whole.
    pub(crate) fn move_out_if_alone(&mut self, out: &mut Vec<(u8, Child<V>)>) -> Option<MovedOut<V>> {
        fn header<V>(header: &mut Header<V>) -> Header<V> {
            std::mem::replace(header, Header::new(b""))
        }
        fn sorted<V, const N: usize>(node: &mut Node<V, Sorted<V, N>>, out: &mut Vec<(u8, Child<V>)>) -> MovedOut<V> {
            let body = &mut node.body;
            for i in 0..usize::from(body.len) {
                out.push((body.keys[i], body.children[i].take().expect("slot below len")));
            }
            body.len = 0;
            (header(&mut node.header), None)
        }
        match self {
            Child::Short { .. } | Child::Long { .. } => None,
            Child::N2(a) => Arc::get_mut(a).map(|node| sorted(node, out)),
            Child::N4(a) => Arc::get_mut(a).map(|node| sorted(node, out)),
            Child::N16(a) => Arc::get_mut(a).map(|node| sorted(node, out)),
            Child::N48(a) => {
                let node = Arc::get_mut(a)?;
                let body = &mut node.body;
                let mut byte = 0;
                // `drain` keeps the vector's allocation in the emptied node.
                for child in body.children.drain(..) {
                    byte = next_present_in(&body.present, byte).expect("one present byte per child");
                    #[expect(clippy::cast_possible_truncation, reason = "byte < 256")]
                    out.push((byte as u8, child));
                    byte += 1;
                }
                body.present = [0; 4];
                Some((header(&mut node.header), None))
            }
            Child::N256(a) => {
                let node = Arc::get_mut(a)?;
                let mut shared: Option<Box<SharedChunks<V>>> = None;
                for (i, slot) in node.body.chunks.iter_mut().enumerate() {
                    let Some(chunk) = slot else { continue };
                    if let Some(chunk) = Arc::get_mut(chunk) {
                        for (j, child) in chunk.slots.iter_mut().enumerate() {
                            if let Some(child) = child.take() {
                                #[expect(clippy::cast_possible_truncation, reason = "byte < 256")]
                                out.push(((i * CHUNK_SLOTS + j) as u8, child));
                            }
                        }
                    } else {
                        shared.get_or_insert_with(|| Box::new(std::array::from_fn(|_| None)))[i] = slot.take();
                    }
                }
                node.body.len = 0;
                Some((header(&mut node.header), shared))
            }
        }
    }

    /// For compaction: the node `move_out_if_alone` emptied, rebuilt from
    /// its header, its children (compacted, in byte order) and the chunks
    /// it shared. A node with shared chunks stays a Node256 and keeps
    /// sharing them; any other takes the smallest kind that fits.
    pub(crate) fn rebuilt(
        (header, shared): MovedOut<V>,
        children: impl ExactSizeIterator<Item = (u8, Child<V>)>,
    ) -> Self {
        let Some(shared) = shared else { return Child::node_from_iter(header, children, 0) };
        let mut body = Direct::from_entries(children);
        for (slot, chunk) in body.chunks.iter_mut().zip(*shared) {
            if let Some(chunk) = chunk {
                debug_assert!(slot.is_none(), "a shared chunk's children were not moved out");
                body.len += chunk.slots.iter().flatten().count();
                *slot = Some(chunk);
            }
        }
        Child::N256(Arc::new(Node { header, body }))
    }
}
