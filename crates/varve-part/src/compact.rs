//! Compaction (§3.4 of `seeds/002_…`): the nodes a map holds alone are
//! rebuilt in traversal order, so a scan walks memory laid out the way it
//! reads it.
//!
//! Why: nodes are allocated in update order, so after random inserts the
//! nodes a scan visits one after another sit far apart, and a full scan of
//! a large map pays a cache miss per node (the paper's Figure 6). Rebuilt
//! depth-first, one after another from memory the allocator hands out in
//! sequence, siblings are neighbours.
//!
//! What it keeps and what it changes:
//! - entries, counts and checkpoint references are unchanged (a node keeps
//!   the same entries, so a checkpoint that holds it still describes it);
//! - each rebuilt node is of the smallest kind its children fit (a node
//!   that lost children to removals shrinks);
//! - nodes shared with a snapshot, and everything below them, are left
//!   where they are: moving them would copy them, and the snapshot would
//!   keep the old ones;
//! - Node256 chunks shared with a snapshot stay shared (the rebuilt node
//!   stays a Node256 and points to them);
//! - the old nodes, their chunks and child vectors are freed only after
//!   every new one is allocated, so the new ones do not land in the holes
//!   the old ones leave (`tests/compaction.rs` checks the addresses). The
//!   peak is the map's inner nodes twice over (values are moved, not
//!   copied).
//!
//! Iterative: a tree of long keys can be as deep as its key count.

use crate::node::{Child, MovedOut};

/// What a compaction did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Compaction {
    /// Inner nodes rebuilt in traversal order.
    pub nodes_moved: usize,
    /// Inner nodes left in place because a snapshot shares them (their
    /// subtrees are left too and not counted).
    pub nodes_shared: usize,
}

/// The work vectors are sized up front: a vector that grows frees its old
/// buffer, a hole the next node would fill. Beyond this (a tree over ~4
/// levels of full Node256s deep) they grow.
const WORK: usize = 4 * 256;

enum Task<V> {
    /// Move this subtree: leaves and shared nodes as they are, nodes held
    /// alone rebuilt below.
    Visit(Child<V>),
    /// Every child of a node has been moved (they are the last `children`
    /// results, their bytes the last `children` of `bytes`): allocate it.
    Build { node: MovedOut<V>, children: usize },
}

/// Rebuild the nodes of `root` held alone, children before their parent.
pub(crate) fn compact<V: Clone>(root: Child<V>) -> (Child<V>, Compaction) {
    let mut stats = Compaction::default();
    // The emptied old nodes, with their chunks and child vectors, freed at
    // the end (see the module docs). A tree has fewer inner nodes than
    // entries; pages of the vector not pushed to are never touched.
    let mut retired: Vec<Child<V>> = Vec::with_capacity(root.count());
    let mut tasks = Vec::with_capacity(WORK);
    tasks.push(Task::Visit(root));
    let mut moved: Vec<Child<V>> = Vec::with_capacity(WORK);
    let mut bytes: Vec<u8> = Vec::with_capacity(WORK);
    // One node's children at a time, on their way to `tasks`.
    let mut children: Vec<(u8, Child<V>)> = Vec::with_capacity(256);
    while let Some(task) = tasks.pop() {
        match task {
            Task::Visit(mut child) => {
                if !child.is_node() {
                    moved.push(child);
                    continue;
                }
                let Some(node) = child.move_out_if_alone(&mut children) else {
                    stats.nodes_shared += 1;
                    moved.push(child);
                    continue;
                };
                retired.push(child);
                tasks.push(Task::Build { node, children: children.len() });
                bytes.extend(children.iter().map(|&(byte, _)| byte));
                // Popped in byte order, so their results land in byte order.
                tasks.extend(children.drain(..).rev().map(|(_, child)| Task::Visit(child)));
            }
            Task::Build { node, children } => {
                let entries = bytes.drain(bytes.len() - children..).zip(moved.drain(moved.len() - children..));
                let rebuilt = Child::rebuilt(node, entries);
                moved.push(rebuilt);
                stats.nodes_moved += 1;
            }
        }
    }
    drop(retired);
    let root = moved.pop().expect("one result for the root");
    debug_assert!(moved.is_empty() && bytes.is_empty());
    (root, stats)
}
