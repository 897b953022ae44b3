//! Nodes of the adaptive radix tree (§3.1 of `seeds/002_…`).
//!
//! A tree is a [`Child`]: either a leaf stored inline in its parent's slot
//! (the key bytes not implied by the path, plus the value) or an
//! `Arc`-counted inner [`Node`]. Inner nodes hold a compressed path
//! (`prefix`, stored whole), an optional value for the key that ends exactly
//! after the prefix (so any key may be a prefix of another), the number of
//! entries below them, a checkpoint reference slot for the durable layer, and
//! a body of 4, 16, 48 or 256 children.
//!
//! Invariants (checked by `check` in tests):
//! - an inner node holds at least two entries (`count >= 2`): a node with one
//!   child and no value is collapsed into its child, a node with no children
//!   becomes a leaf;
//! - `count` is the number of entries in the subtree;
//! - children are keyed by distinct bytes; sorted bodies keep keys ascending.

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
    Short { len: u8, bytes: [u8; INLINE_SUFFIX_BYTES_MAX], value: V },
    /// A leaf with a long key suffix, shared (not copied) when path copying
    /// clones the slot: a deep copy cost two allocations per long leaf of
    /// every copied node. The inner box keeps the slot thin.
    Long { suffix: Arc<Box<[u8]>>, value: V },
    /// An inner node, shared between versions by reference counting.
    Node(Arc<Node<V>>),
}

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
        match self {
            Child::Node(node) => node.count,
            _ => 1,
        }
    }

    #[inline]
    pub(crate) fn as_leaf(&self) -> Option<(&[u8], &V)> {
        match self {
            Child::Short { len, bytes, value } => Some((&bytes[..usize::from(*len)], value)),
            Child::Long { suffix, value } => Some((suffix, value)),
            Child::Node(_) => None,
        }
    }

    pub(crate) fn leaf_value_mut(&mut self) -> Option<&mut V> {
        match self {
            Child::Short { value, .. } | Child::Long { value, .. } => Some(value),
            Child::Node(_) => None,
        }
    }

    pub(crate) fn into_leaf_value(self) -> Option<V> {
        match self {
            Child::Short { value, .. } | Child::Long { value, .. } => Some(value),
            Child::Node(_) => None,
        }
    }

    /// Both are the same shared node: the subtrees are equal without looking.
    #[inline]
    pub(crate) fn ptr_eq(&self, other: &Self) -> bool {
        matches!((self, other), (Child::Node(a), Child::Node(b)) if Arc::ptr_eq(a, b))
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
            Child::Node(mut arc) => {
                let node = node_mut(&mut arc);
                let mut prefix = Vec::with_capacity(head.len() + node.prefix.len());
                prefix.extend_from_slice(head);
                prefix.extend_from_slice(&node.prefix);
                node.prefix = prefix.into_boxed_slice();
                Child::Node(arc)
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
            Child::Node(arc) => {
                let mut arc = Arc::clone(arc);
                let node = node_mut(&mut arc);
                node.prefix = node.prefix[n..].into();
                Child::Node(arc)
            }
            leaf => {
                let (suffix, value) = leaf.as_leaf().expect("not a node");
                Child::leaf(&suffix[n..], value.clone())
            }
        }
    }
}

/// Mutable access to a node for an update: in place when nobody else holds
/// it, otherwise a copy of just this node (path copying, §3.2). Either way
/// the node is now different from anything a checkpoint wrote, so its
/// checkpoint reference is cleared.
#[inline]
pub(crate) fn node_mut<V: Clone>(arc: &mut Arc<Node<V>>) -> &mut Node<V> {
    let node = Arc::make_mut(arc);
    *node.checkpoint_ref.get_mut() = 0;
    node
}

/// An inner node.
pub struct Node<V> {
    pub(crate) prefix: Box<[u8]>,
    pub(crate) value: Option<V>,
    pub(crate) count: usize,
    /// See [`crate::raw`]: 0 = not (known to be) in any checkpoint.
    pub(crate) checkpoint_ref: AtomicU64,
    pub(crate) body: Body<V>,
}

impl<V: Clone> Clone for Node<V> {
    fn clone(&self) -> Self {
        Node {
            prefix: self.prefix.clone(),
            value: self.value.clone(),
            count: self.count,
            checkpoint_ref: AtomicU64::new(0),
            body: self.body.clone(),
        }
    }
}

impl<V> Node<V> {
    pub(crate) fn new(prefix: &[u8]) -> Self {
        Node {
            prefix: prefix.into(),
            value: None,
            count: 0,
            checkpoint_ref: AtomicU64::new(0),
            body: Body::N4(Sorted::new()),
        }
    }
}

impl<V> Drop for Node<V> {
    /// Iterative: a deep tree (long keys that are prefixes of each other) or
    /// a huge one must not recurse once per level. Nodes we own alone are
    /// emptied onto a heap stack; shared ones just lose a reference.
    fn drop(&mut self) {
        let mut stack: Vec<Arc<Node<V>>> = Vec::new();
        self.body.drain_nodes(&mut stack);
        while let Some(arc) = stack.pop() {
            if let Some(mut node) = Arc::into_inner(arc) {
                node.body.drain_nodes(&mut stack);
                // `node` drops here with an empty body: no recursion.
            }
        }
    }
}

/// Node4 and Node16: keys sorted ascending, children in the same order.
#[derive(Clone)]
pub(crate) struct Sorted<V, const N: usize> {
    pub(crate) keys: [u8; N],
    pub(crate) children: Vec<Child<V>>,
}

impl<V, const N: usize> Sorted<V, N> {
    fn new() -> Self {
        Sorted { keys: [0; N], children: Vec::new() }
    }

    #[inline]
    fn lower_bound(&self, byte: u8) -> usize {
        self.keys[..self.children.len()].partition_point(|&k| k < byte)
    }

    fn insert(&mut self, byte: u8, child: Child<V>) {
        let len = self.children.len();
        debug_assert!(len < N);
        grow_exact(&mut self.children, N);
        let at = self.lower_bound(byte);
        self.keys.copy_within(at..len, at + 1);
        self.keys[at] = byte;
        self.children.insert(at, child);
    }

    fn remove_at(&mut self, at: usize) -> Child<V> {
        let len = self.children.len();
        self.keys.copy_within(at + 1..len, at);
        self.children.remove(at)
    }
}

/// Node48: a 256-bit presence bitmap and the children sorted by byte; the
/// child for byte `b` is at `rank(b)` (the number of present bytes below
/// `b`).
///
/// Why not the paper's 256-byte index: the index was a separate allocation
/// (one more cache miss per lookup) and 256 bytes per node; with random
/// 4-byte keys a third of the bottom nodes are Node48s, and the index cost
/// ~5 bytes per entry. The bitmap is 32 bytes inline, rank is four masked
/// popcounts, and sorted children make ordered iteration a slice walk.
#[derive(Clone)]
pub(crate) struct Indexed<V> {
    pub(crate) present: [u64; 4],
    pub(crate) children: Vec<Child<V>>,
}

impl<V> Indexed<V> {
    fn empty(capacity: usize) -> Self {
        Indexed { present: [0; 4], children: Vec::with_capacity(capacity) }
    }

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
        let mut word = from / 64;
        if word >= 4 {
            return None;
        }
        let mut bits = self.present[word] & (u64::MAX << (from % 64));
        loop {
            if bits != 0 {
                return Some(word * 64 + bits.trailing_zeros() as usize);
            }
            word += 1;
            if word == 4 {
                return None;
            }
            bits = self.present[word];
        }
    }

    fn present_next_or_panic(&self, from: usize) -> usize {
        self.next_present(from).expect("one present byte per child")
    }

    /// The largest present byte, if any.
    fn last_present(&self) -> Option<usize> {
        (0..4).rev().find(|&w| self.present[w] != 0).map(|w| w * 64 + 63 - self.present[w].leading_zeros() as usize)
    }
}

/// Node256: one slot per byte, in 16 shared chunks of 16 slots.
///
/// Why chunks: copying a node for path copying must bump the reference count
/// of every child it shares, and the children of a wide node are cold in
/// cache. A flat 256-slot copy costs up to 256 such misses per level (it
/// dominated "insert + snapshot" and the drop of old versions); with chunks a
/// copy bumps 16 chunk counts and then copies only the one chunk it changes.
#[derive(Clone)]
pub(crate) struct Direct<V> {
    /// `CHUNKS` entries; `None` = 16 empty slots.
    pub(crate) chunks: Box<[Option<Arc<Chunk<V>>>]>,
    pub(crate) len: usize,
}

pub(crate) const CHUNK_SLOTS: usize = 16;
const CHUNKS: usize = 256 / CHUNK_SLOTS;

#[derive(Clone)]
pub(crate) struct Chunk<V> {
    pub(crate) slots: [Option<Child<V>>; CHUNK_SLOTS],
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
    fn slot_mut(&mut self, byte: usize) -> &mut Option<Child<V>> {
        let chunk = self.chunks[byte / CHUNK_SLOTS].get_or_insert_with(|| Arc::new(Chunk::empty()));
        &mut Arc::make_mut(chunk).slots[byte % CHUNK_SLOTS]
    }
}

#[derive(Clone)]
pub(crate) enum Body<V> {
    N4(Sorted<V, 4>),
    N16(Sorted<V, 16>),
    N48(Indexed<V>),
    N256(Direct<V>),
}

/// Node48 cursor positions: the low bits hold a byte cursor (0..=256), the
/// high bits the index of the child at that byte (see `Body::next_from`).
const N48_CURSOR_BYTE_BITS: usize = 9;
const N48_CURSOR_BYTE_MASK: usize = (1 << N48_CURSOR_BYTE_BITS) - 1;

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

impl<V> Body<V> {
    #[inline]
    pub(crate) fn len(&self) -> usize {
        match self {
            Body::N4(s) => s.children.len(),
            Body::N16(s) => s.children.len(),
            Body::N48(n) => n.children.len(),
            Body::N256(n) => n.len,
        }
    }

    /// The slot of the child for `byte`, if any.
    #[inline]
    pub(crate) fn find(&self, byte: u8) -> Option<usize> {
        match self {
            Body::N4(s) => s.keys[..s.children.len()].iter().position(|&k| k == byte),
            Body::N16(s) => {
                #[cfg(target_arch = "x86_64")]
                {
                    find16_simd(&s.keys, s.children.len(), byte)
                }
                #[cfg(not(target_arch = "x86_64"))]
                {
                    find16_scalar(&s.keys, s.children.len(), byte)
                }
            }
            Body::N48(n) => {
                let byte = usize::from(byte);
                n.has(byte).then(|| n.rank(byte))
            }
            Body::N256(n) => n.slot(usize::from(byte)).map(|_| usize::from(byte)),
        }
    }

    /// The child for `byte`: `find` and `child` in one dispatch (the
    /// lookup hot path; Node256 looks its slot up once, not twice).
    #[inline]
    pub(crate) fn get(&self, byte: u8) -> Option<&Child<V>> {
        match self {
            Body::N4(s) => {
                let len = s.children.len();
                let at = s.keys[..len].iter().position(|&k| k == byte)?;
                s.children.get(at)
            }
            Body::N16(s) => {
                #[cfg(target_arch = "x86_64")]
                let at = find16_simd(&s.keys, s.children.len(), byte)?;
                #[cfg(not(target_arch = "x86_64"))]
                let at = find16_scalar(&s.keys, s.children.len(), byte)?;
                s.children.get(at)
            }
            Body::N48(n) => {
                let byte = usize::from(byte);
                if n.has(byte) {
                    n.children.get(n.rank(byte))
                } else {
                    None
                }
            }
            Body::N256(n) => n.slot(usize::from(byte)),
        }
    }

    /// Ordered cursor: positions are indexes for Node4/16, bytes for
    /// Node256, and for Node48 `(child index << 9) | byte` (opaque to
    /// callers: start at 0 or at `seek`, continue at `at + 1`). Returns the first child at position `>= pos`.
    #[inline]
    pub(crate) fn next_from(&self, pos: usize) -> Option<(usize, u8, &Child<V>)> {
        #[expect(clippy::cast_possible_truncation, reason = "positions of 48/256 are bytes")]
        match self {
            Body::N4(s) => s.children.get(pos).map(|c| (pos, s.keys[pos], c)),
            Body::N16(s) => s.children.get(pos).map(|c| (pos, s.keys[pos], c)),
            Body::N48(n) => {
                // pos = (index << N48_CURSOR_BYTE_BITS) | byte: the index is
                // rank(byte) (kept by the cursor, not recomputed per child),
                // and `at + 1` advances both fields at once.
                let index = pos >> N48_CURSOR_BYTE_BITS;
                let b = n.next_present(pos & N48_CURSOR_BYTE_MASK)?;
                debug_assert_eq!(index, n.rank(b));
                let child = n.children.get(index)?;
                Some(((index + 1) << N48_CURSOR_BYTE_BITS | b, b as u8, child))
            }
            Body::N256(n) => {
                let mut b = pos;
                while b < 256 {
                    match &n.chunks[b / CHUNK_SLOTS] {
                        None => b = (b / CHUNK_SLOTS + 1) * CHUNK_SLOTS,
                        Some(chunk) => {
                            if let Some(c) = &chunk.slots[b % CHUNK_SLOTS] {
                                return Some((b, b as u8, c));
                            }
                            b += 1;
                        }
                    }
                }
                None
            }
        }
    }

    /// Keys and children of a Node4/16 (whose cursor positions are
    /// indexes into both), for the scan fast path.
    #[inline]
    pub(crate) fn sorted_parts(&self) -> Option<(&[u8], &[Child<V>])> {
        match self {
            Body::N4(s) => Some((&s.keys, &s.children)),
            Body::N16(s) => Some((&s.keys, &s.children)),
            Body::N48(_) | Body::N256(_) => None,
        }
    }

    /// The cursor position of the first child whose byte is `>= byte`.
    #[inline]
    pub(crate) fn seek(&self, byte: u8) -> usize {
        match self {
            Body::N4(s) => s.lower_bound(byte),
            Body::N16(s) => s.lower_bound(byte),
            Body::N48(n) => {
                let byte = usize::from(byte);
                n.rank(byte) << N48_CURSOR_BYTE_BITS | byte
            }
            Body::N256(_) => usize::from(byte),
        }
    }

    pub(crate) fn max_child(&self) -> Option<(u8, &Child<V>)> {
        match self {
            Body::N4(s) => s.children.last().map(|c| (s.keys[s.children.len() - 1], c)),
            Body::N16(s) => s.children.last().map(|c| (s.keys[s.children.len() - 1], c)),
            Body::N48(n) =>
            {
                #[expect(clippy::cast_possible_truncation, reason = "b < 256")]
                n.last_present().map(|b| (b as u8, n.children.last().expect("a present byte")))
            }
            Body::N256(_) =>
            {
                #[expect(clippy::cast_possible_truncation, reason = "b < 256")]
                (0..256usize).rev().find_map(|b| self.get(b as u8).map(|c| (b as u8, c)))
            }
        }
    }

    /// Children in byte order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u8, &Child<V>)> {
        let mut pos = 0;
        std::iter::from_fn(move || {
            let (at, byte, child) = self.next_from(pos)?;
            pos = at + 1;
            Some((byte, child))
        })
    }

    pub(crate) fn kind_capacity(&self) -> usize {
        match self {
            Body::N4(_) => 4,
            Body::N16(_) => 16,
            Body::N48(_) => 48,
            Body::N256(_) => 256,
        }
    }

    /// The smallest kind that holds `entries` plus `room` more children.
    /// `entries` must be sorted by byte with distinct bytes.
    pub(crate) fn from_entries_with_room(entries: Vec<(u8, Child<V>)>, room: usize) -> Self {
        let need = entries.len() + room;
        debug_assert!(need <= 256);
        debug_assert!(entries.windows(2).all(|w| w[0].0 < w[1].0));
        if need <= 4 {
            let mut s = Sorted::<V, 4>::new();
            for (i, (byte, child)) in entries.into_iter().enumerate() {
                s.keys[i] = byte;
                s.children.push(child);
            }
            Body::N4(s)
        } else if need <= 16 {
            let mut s = Sorted::<V, 16>::new();
            s.children.reserve_exact(need);
            for (i, (byte, child)) in entries.into_iter().enumerate() {
                s.keys[i] = byte;
                s.children.push(child);
            }
            Body::N16(s)
        } else if need <= 48 {
            let mut n = Indexed::empty(need);
            for (byte, child) in entries {
                n.children.push(child);
                n.present[usize::from(byte) / 64] |= 1 << (byte % 64);
            }
            Body::N48(n)
        } else {
            let mut chunks: Vec<Option<Chunk<V>>> = (0..CHUNKS).map(|_| None).collect();
            let len = entries.len();
            for (byte, child) in entries {
                let byte = usize::from(byte);
                chunks[byte / CHUNK_SLOTS].get_or_insert_with(Chunk::empty).slots[byte % CHUNK_SLOTS] = Some(child);
            }
            let chunks = chunks.into_iter().map(|c| c.map(Arc::new)).collect();
            Body::N256(Direct { chunks, len })
        }
    }

    /// Move every inner-node child onto `stack` (leaves are dropped here).
    fn drain_nodes(&mut self, stack: &mut Vec<Arc<Node<V>>>) {
        let take = |child: Child<V>, stack: &mut Vec<Arc<Node<V>>>| {
            if let Child::Node(arc) = child {
                stack.push(arc);
            }
        };
        match self {
            Body::N4(s) => s.children.drain(..).for_each(|c| take(c, stack)),
            Body::N16(s) => s.children.drain(..).for_each(|c| take(c, stack)),
            Body::N48(n) => n.children.drain(..).for_each(|c| take(c, stack)),
            Body::N256(n) => {
                for chunk in &mut *n.chunks {
                    // `into_inner` hands the chunk to exactly one of its
                    // holders, so it is never freed by recursive drop glue.
                    if let Some(chunk) = chunk.take().and_then(Arc::into_inner) {
                        for c in chunk.slots.into_iter().flatten() {
                            take(c, stack);
                        }
                    }
                }
                n.len = 0;
            }
        }
    }
}

impl<V: Clone> Body<V> {
    #[inline]
    pub(crate) fn child_mut(&mut self, slot: usize) -> &mut Child<V> {
        match self {
            Body::N4(s) => &mut s.children[slot],
            Body::N16(s) => &mut s.children[slot],
            Body::N48(n) => &mut n.children[slot],
            Body::N256(n) => n.slot_mut(slot).as_mut().expect("slot from find"),
        }
    }

    /// Add a child for a byte that has none, growing the node if full.
    pub(crate) fn add(&mut self, byte: u8, child: Child<V>) {
        debug_assert!(self.find(byte).is_none());
        if self.len() == self.kind_capacity() {
            let entries = self.take_entries();
            *self = Body::from_entries_with_room(entries, 1);
        }
        match self {
            Body::N4(s) => s.insert(byte, child),
            Body::N16(s) => s.insert(byte, child),
            Body::N48(n) => {
                grow_exact(&mut n.children, 48);
                let at = n.rank(usize::from(byte));
                n.children.insert(at, child);
                n.present[usize::from(byte) / 64] |= 1 << (byte % 64);
            }
            Body::N256(n) => {
                *n.slot_mut(usize::from(byte)) = Some(child);
                n.len += 1;
            }
        }
    }

    /// Remove the child for `byte` (which must exist), shrinking the node
    /// when it becomes sparse.
    pub(crate) fn remove(&mut self, byte: u8) -> Child<V> {
        let slot = self.find(byte).expect("remove of a present child");
        let removed = match self {
            Body::N4(s) => s.remove_at(slot),
            Body::N16(s) => s.remove_at(slot),
            Body::N48(n) => {
                n.present[usize::from(byte) / 64] &= !(1 << (byte % 64));
                n.children.remove(slot)
            }
            Body::N256(n) => {
                n.len -= 1;
                n.slot_mut(slot).take().expect("present child")
            }
        };
        let shrink = match self {
            Body::N4(_) => false,
            Body::N16(_) => self.len() < N16_SHRINK_BELOW,
            Body::N48(_) => self.len() < N48_SHRINK_BELOW,
            Body::N256(_) => self.len() < N256_SHRINK_BELOW,
        };
        if shrink {
            let entries = self.take_entries();
            *self = Body::from_entries_with_room(entries, 0);
        }
        removed
    }

    /// Move all children out, in byte order, leaving the body empty.
    pub(crate) fn take_entries(&mut self) -> Vec<(u8, Child<V>)> {
        let mut out = Vec::with_capacity(self.len());
        match self {
            Body::N4(s) => out.extend(s.keys.iter().copied().zip(s.children.drain(..))),
            Body::N16(s) => out.extend(s.keys.iter().copied().zip(s.children.drain(..))),
            Body::N48(n) => {
                let present = Indexed::<V> { present: std::mem::take(&mut n.present), children: Vec::new() };
                let mut byte = 0;
                for child in n.children.drain(..) {
                    byte = present.present_next_or_panic(byte);
                    #[expect(clippy::cast_possible_truncation, reason = "byte < 256")]
                    out.push((byte as u8, child));
                    byte += 1;
                }
            }
            Body::N256(n) => {
                for (i, chunk) in n.chunks.iter_mut().enumerate() {
                    let Some(chunk) = chunk.take() else { continue };
                    let chunk = Arc::try_unwrap(chunk).unwrap_or_else(|shared| (*shared).clone());
                    for (j, slot) in chunk.slots.into_iter().enumerate() {
                        if let Some(child) = slot {
                            #[expect(clippy::cast_possible_truncation, reason = "byte < 256")]
                            out.push(((i * CHUNK_SLOTS + j) as u8, child));
                        }
                    }
                }
                n.len = 0;
            }
        }
        out
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

/// Hint the CPU to load `value`'s cache line.
#[inline]
pub(crate) fn prefetch<T>(value: &T) {
    prefetch_ptr(std::ptr::from_ref(value).cast());
}

impl<V> Body<V> {
    /// Hint the CPU to load the first children of this body.
    #[inline]
    pub(crate) fn prefetch_children(&self) {
        match self {
            Body::N4(s) => prefetch_ptr(s.children.as_ptr().cast()),
            Body::N16(s) => prefetch_ptr(s.children.as_ptr().cast()),
            Body::N48(n) => prefetch_ptr(n.children.as_ptr().cast()),
            Body::N256(_) => {}
        }
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
        let Child::Node(node) = child else {
            total += 1;
            continue;
        };
        let below: usize = node.body.iter().map(|(_, c)| c.count()).sum();
        assert_eq!(node.count, below + usize::from(node.value.is_some()), "count of a node");
        assert!(node.count >= 2, "an inner node holds >= 2 entries");
        assert!(node.body.len() >= 2 || node.value.is_some(), "a lone child is collapsed");
        assert!(node.body.len() <= node.body.kind_capacity());
        let bytes: Vec<u8> = node.body.iter().map(|(b, _)| b).collect();
        assert!(bytes.windows(2).all(|w| w[0] < w[1]), "children in byte order");
        assert_eq!(bytes.len(), node.body.len());
        for &b in &bytes {
            assert!(node.body.get(b).is_some(), "find agrees with iteration");
        }
        total += usize::from(node.value.is_some());
        stack.extend(node.body.iter().map(|(_, c)| c));
    }
    total
}
