//! Node-level access for the durable layer (checkpoints, §4.1). Not for
//! applications: everything here exposes the tree's shape.
//!
//! ## Checkpoint references
//!
//! Every inner node carries a `u64` checkpoint reference (the paper's file
//! identifier). It is **0 on every node created or copied** and **cleared
//! whenever a node is mutated in place**; every update reaches its entry
//! through the path from the root, so all ancestors of a changed entry are
//! cleared too. Hence: *a node whose reference is non-zero is the root of a
//! subtree that has not changed since the checkpoint that set it*, and a
//! checkpointer can write that reference instead of descending.
//!
//! A checkpointer works on a [`Snapshot`](crate::Snapshot): walk it from [`root`], write
//! nodes bottom-up, and call [`NodeRef::set_checkpoint_ref`] on each node
//! once it is durable. Setting a reference through a snapshot is safe while
//! the map keeps being updated: the map cannot mutate a node in place while
//! the snapshot holds it (it copies instead, and the copy starts at 0).
//! Subtrees reused by set operations keep their references (they are the
//! same nodes).
//!
//! To reopen, rebuild the tree bottom-up with [`leaf`] and [`node`], then
//! [`into_map`].

use std::sync::atomic::Ordering;

use crate::map::ArtMap;
use crate::node::{Child, Header, NodeView};

/// Node kinds (§3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// Up to 2 children, their key bytes kept sorted.
    Node2,
    /// Up to 4 children, their key bytes kept sorted.
    Node4,
    /// Up to 16 children, their key bytes kept sorted (searched with SSE2 on `x86_64`).
    Node16,
    /// Up to 48 children, found through a 256-bit presence bitmap.
    Node48,
    /// A slot for every byte value, in 16 shared chunks of 16 slots.
    Node256,
}

/// A slot of the tree: a leaf (key suffix and value, stored inline in its
/// parent) or an inner node.
pub enum ChildRef<'a, V> {
    /// A leaf, stored inline in its parent's slot.
    Leaf {
        /// The key bytes its path does not imply (may be empty).
        suffix: &'a [u8],
        /// The leaf's value.
        value: &'a V,
    },
    /// An inner node.
    Node(NodeRef<'a, V>),
}

/// A borrowed inner node.
pub struct NodeRef<'a, V>(NodeView<'a, V>);

impl<V> Clone for NodeRef<'_, V> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<V> Copy for NodeRef<'_, V> {}

fn child_ref<V>(child: &Child<V>) -> ChildRef<'_, V> {
    if let Some(node) = child.node() {
        ChildRef::Node(NodeRef(node))
    } else {
        let (suffix, value) = child.as_leaf().expect("leaf");
        ChildRef::Leaf { suffix, value }
    }
}

/// The root of a map (or snapshot), if not empty.
#[must_use]
pub fn root<V>(map: &ArtMap<V>) -> Option<ChildRef<'_, V>> {
    map.root.as_ref().map(child_ref)
}

impl<'a, V> NodeRef<'a, V> {
    /// Identity of the node (its address), stable while anyone holds it.
    #[must_use]
    pub fn id(&self) -> usize {
        self.0.addr()
    }

    /// Which of the four layouts (§3.1) holds the children.
    #[must_use]
    pub fn kind(&self) -> NodeKind {
        match self.0 {
            NodeView::N2(_) => NodeKind::Node2,
            NodeView::N4(_) => NodeKind::Node4,
            NodeView::N16(_) => NodeKind::Node16,
            NodeView::N48(_) => NodeKind::Node48,
            NodeView::N256(_) => NodeKind::Node256,
        }
    }

    /// The compressed path, stored whole.
    #[must_use]
    pub fn prefix(&self) -> &'a [u8] {
        &self.0.header().prefix
    }

    /// The value of the key that ends right after the prefix.
    #[must_use]
    pub fn value(&self) -> Option<&'a V> {
        self.0.header().value.as_ref()
    }

    /// Entries in this subtree.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.count
    }

    /// Always false: an inner node holds at least two entries.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Children in byte order.
    pub fn children(&self) -> impl Iterator<Item = (u8, ChildRef<'a, V>)> + 'a {
        self.0.iter().map(|(byte, child)| (byte, child_ref(child)))
    }

    /// 0 unless a checkpoint set it and the subtree has not changed since.
    #[must_use]
    pub fn checkpoint_ref(&self) -> u64 {
        self.0.checkpoint_ref.load(Ordering::Acquire)
    }

    /// Record that this subtree is durable under `reference` (non-zero).
    pub fn set_checkpoint_ref(&self, reference: u64) {
        self.0.checkpoint_ref.store(reference, Ordering::Release);
    }
}

/// An owned subtree, for rebuilding a map bottom-up.
pub struct OwnedChild<V>(Child<V>);

/// Why [`node`] refused its parts.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// The children's bytes are not strictly ascending.
    #[error("children bytes must be strictly ascending (byte {byte:#04x} out of order)")]
    Unsorted {
        /// The first child byte not greater than the one before it.
        byte: u8,
    },
    /// The node would hold fewer than two entries, or one child and no value
    /// (path compression never leaves such a node).
    #[error("an inner node needs at least two entries, got {entries}")]
    TooFewEntries {
        /// Entries below the node: its children's plus its own value.
        entries: usize,
    },
}

/// A leaf with the given key suffix (relative to its parent's slot).
pub fn leaf<V>(suffix: &[u8], value: V) -> OwnedChild<V> {
    OwnedChild(Child::leaf(suffix, value))
}

/// An inner node with its checkpoint reference set to `checkpoint_ref`.
pub fn node<V>(
    prefix: &[u8],
    value: Option<V>,
    children: Vec<(u8, OwnedChild<V>)>,
    checkpoint_ref: u64,
) -> Result<OwnedChild<V>, BuildError> {
    if let Some(w) = children.windows(2).find(|w| w[0].0 >= w[1].0) {
        return Err(BuildError::Unsorted { byte: w[1].0 });
    }
    let entries: Vec<(u8, Child<V>)> = children.into_iter().map(|(b, c)| (b, c.0)).collect();
    let count = entries.iter().map(|(_, c)| c.count()).sum::<usize>() + usize::from(value.is_some());
    if count < 2 || (entries.len() == 1 && value.is_none()) {
        return Err(BuildError::TooFewEntries { entries: count });
    }
    let mut header = Header::new(prefix);
    header.value = value;
    header.count = count;
    *header.checkpoint_ref.get_mut() = checkpoint_ref;
    Ok(OwnedChild(Child::node_from_entries(header, entries, 0)))
}

/// A map whose tree is `root`.
pub fn into_map<V>(root: Option<OwnedChild<V>>) -> ArtMap<V> {
    ArtMap { root: root.map(|c| c.0) }
}
