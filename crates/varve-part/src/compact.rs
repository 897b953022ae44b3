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
//! - the old nodes are freed only after every new one is allocated, so the
//!   new ones do not land in the holes the old ones leave. The peak is the
//!   map's inner nodes twice over (values are moved, not copied).
//!
//! Iterative: a tree of long keys can be as deep as its key count.

use std::sync::Arc;

use crate::node::{Child, Header, Kind};

/// What a compaction did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Compaction {
    /// Inner nodes rebuilt in traversal order.
    pub nodes_moved: usize,
    /// Inner nodes left in place because a snapshot shares them (their
    /// subtrees are left too and not counted).
    pub nodes_shared: usize,
}

enum Task<V> {
    /// Move this subtree: leaves and shared nodes as they are, nodes held
    /// alone rebuilt below.
    Visit(Child<V>),
    /// Every child of a node has been moved (they are the last `children`
    /// results, their bytes the last `children` of `bytes`): allocate it.
    Build { header: Header<V>, children: usize },
}

/// Rebuild the nodes of `root` held alone, children before their parent.
pub(crate) fn compact<V: Clone>(root: Child<V>) -> (Child<V>, Compaction) {
    let mut stats = Compaction::default();
    let mut tasks = vec![Task::Visit(root)];
    let mut moved: Vec<Child<V>> = Vec::new();
    let mut bytes: Vec<u8> = Vec::new();
    // The emptied old nodes, freed at the end (see the module docs).
    let mut retired: Vec<Child<V>> = Vec::new();
    while let Some(task) = tasks.pop() {
        match task {
            Task::Visit(mut child) => {
                if !child.is_node() {
                    moved.push(child);
                    continue;
                }
                let Some((header, entries)) = take_if_alone(&mut child) else {
                    stats.nodes_shared += 1;
                    moved.push(child);
                    continue;
                };
                retired.push(child);
                tasks.push(Task::Build { header, children: entries.len() });
                bytes.extend(entries.iter().map(|&(byte, _)| byte));
                // Popped in byte order, so their results land in byte order.
                tasks.extend(entries.into_iter().rev().map(|(_, child)| Task::Visit(child)));
            }
            Task::Build { header, children } => {
                let entries =
                    bytes.drain(bytes.len() - children..).zip(moved.drain(moved.len() - children..)).collect();
                moved.push(Child::node_from_entries(header, entries, 0));
                stats.nodes_moved += 1;
            }
        }
    }
    drop(retired);
    let root = moved.pop().expect("one result for the root");
    debug_assert!(moved.is_empty() && bytes.is_empty());
    (root, stats)
}

/// A node's header and children, moved out of it.
type Contents<V> = (Header<V>, Vec<(u8, Child<V>)>);

/// The contents of the node in `child`, moved out and leaving it empty, if
/// nobody else holds the node.
fn take_if_alone<V: Clone>(child: &mut Child<V>) -> Option<Contents<V>> {
    fn take<V: Clone, B: Kind<V>>(node: &mut crate::node::Node<V, B>) -> Contents<V> {
        (std::mem::replace(&mut node.header, Header::new(b"")), node.body.take_entries())
    }
    match child {
        Child::N4(a) => Arc::get_mut(a).map(take),
        Child::N16(a) => Arc::get_mut(a).map(take),
        Child::N48(a) => Arc::get_mut(a).map(take),
        Child::N256(a) => Arc::get_mut(a).map(take),
        Child::Short { .. } | Child::Long { .. } => None,
    }
}
