//! Persistent adaptive radix tree (PART, `seeds/002_…` §3.1–3.5): an
//! in-memory, immutable, versioned ordered map over byte-string keys.
//!
//! - **Adaptive radix tree** (§3.1): inner nodes of 4, 16, 48 or 256
//!   children, path compression (the whole compressed prefix is stored),
//!   lazy expansion (a lone key is a leaf stored inline in its parent's
//!   slot, holding only the key bytes the path does not imply). Any key may
//!   be a prefix of another: inner nodes hold the value of the key ending
//!   there.
//! - **Persistence by path copying** (§3.2–3.3): nodes are `Arc`-counted;
//!   [`ArtMap::snapshot`] is O(1); an update mutates a node in place when
//!   nobody else holds it and copies it otherwise, so updates between
//!   snapshots are in place. [`ArtMap::apply`] applies a batch in key order.
//! - **Compaction** (§3.4): [`ArtMap::compact`] rebuilds the nodes a map
//!   holds alone in traversal order, for scans.
//! - **Set operations by structure** (§3.4): [`ArtMap::union_with`],
//!   [`ArtMap::intersection`], [`ArtMap::difference`] reuse shared subtrees.
//! - **Key-space transform** (§3.5): [`HashedMap`].
//! - **Checkpoint support** for the durable layer (§4.1): [`raw`].
//!
//! ```
//! use varve_part::ArtMap;
//!
//! let mut map = ArtMap::new();
//! map.insert(b"apple", 1);
//! map.insert(b"app", 2);
//! let before = map.snapshot();
//! map.insert(b"apricot", 3);
//! assert_eq!(before.len(), 2);
//! assert_eq!(map.get(b"app"), Some(&2));
//! let keys: Vec<Vec<u8>> = map.prefix(b"ap").map(|(k, _)| k).collect();
//! assert_eq!(keys, [b"app".to_vec(), b"apple".to_vec(), b"apricot".to_vec()]);
//! ```

//! # Design
//!
//! - **Leaves live in their parent's slot.** A slot (`node::Child`) is 16
//!   bytes for 4-byte values: a leaf keeps up to 10 bytes of key suffix (the
//!   bytes its path does not imply) and the value inline; longer suffixes go
//!   to one heap box. Only inner nodes are `Arc`-allocated.
//! - **One allocation per inner node.** Each node kind is its own type, so
//!   a Node2, 4 or 16 keeps its key bytes and child slots inline after its
//!   header, and a Node256 its 16 chunk pointers: a lookup costs one cache
//!   miss per Node2/4/16 level (two per Node48/256 level: the child vector or
//!   the chunk).
//! - **Counts.** Every inner node keeps the number of entries below it, so
//!   `len()` is O(1) on any map, including the results of set operations,
//!   which reuse whole subtrees without walking them.
//! - **Node256 is 16 shared chunks of 16 slots.** Path copying must bump the
//!   reference count of every child of a copied node, and those children are
//!   cold in cache; chunks cut that from 256 to 32 per copied Node256 (5×
//!   faster "insert + snapshot"). Node2/4/16 keep sorted keys (Node16 searched
//!   with SSE2 on `x86_64`), Node48 a 256-bit presence bitmap.
//! - **Iterative where depth is unbounded.** Insert, remove, lookup,
//!   iteration and `Drop` use no recursion per tree level (a tree of long
//!   keys that are prefixes of each other can be as deep as its key count).
//!   The batch descent recurses at most `BATCH_RECURSION_DEPTH_MAX` (64)
//!   levels, then goes on one update at a time. Set operations recurse once
//!   per level of the *trees* (bounded by key length); keep them to trees of
//!   reasonable depth.
//! - **Checkpoint references** ([`raw`]): a per-node `AtomicU64`, 0 on any
//!   new or copied node, cleared on every in-place mutation, so a non-zero
//!   reference proves the subtree unchanged since the checkpoint that set it.
//!
//! Limits: values are `Clone` for updates (copies of shared nodes clone
//! their inline leaves); one writer per map (`&mut self`), any number of
//! readers on snapshots.

mod compact;
pub mod durable;
mod hashed;
mod iter;
mod map;
mod node;
pub mod raw;
mod setops;

pub use compact::Compaction;
pub use hashed::{key_hash_v1, HashedMap, HASH_BYTES};
pub use iter::{Iter, Values};
pub use map::{ArtMap, BatchOp, Snapshot};

/// Test hooks (not part of the API): node search implementations, so tests
/// can check that SIMD and scalar agree.
#[doc(hidden)]
pub mod testing {
    pub use crate::node::find16_scalar;
    #[cfg(target_arch = "x86_64")]
    pub use crate::node::find16_simd;

    /// Bytes of one child slot for values of type `V`.
    #[must_use]
    pub fn child_slot_bytes<V>() -> usize {
        std::mem::size_of::<crate::node::Child<V>>()
    }

    /// Bytes of one Node4 (header and its four inline slots, without its
    /// `Arc` counts and heap parts).
    #[must_use]
    pub fn node_bytes<V>() -> usize {
        std::mem::size_of::<crate::node::Node4<V>>()
    }

    /// Check the tree invariants; panics with a description on violation.
    pub fn check_invariants<V>(map: &crate::ArtMap<V>) {
        if let Some(root) = &map.root {
            crate::node::check(root);
        }
    }
}
