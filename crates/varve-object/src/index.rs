//! The in-memory index of an object store's versions log: every version by
//! id, its parents, its key, where its record is, and each key's heads.
//!
//! Built by folding the log's records in order on open and caught up from
//! the log whenever a lookup misses, so versions written by other processes
//! (on a shared backend) become visible. A version's record always follows
//! its parents' records in the log (a put needs its parents first), so a
//! fold sees parents before children.
//!
//! Memory: about 100 bytes per version plus each key once. The log, not the
//! index, is the truth: the index holds nothing a fold cannot rebuild.

use std::collections::hash_map::Entry;
use std::collections::BinaryHeap;

/// Hash maps with foldhash: the keys are ids and names of this store, not
/// an attacker's choice of collisions (ids are BLAKE3 outputs).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

use crate::record::{Encoding, VersionRecord};
use crate::version::{Version, VersionId};

/// A slot in [`Index::nodes`].
pub type NodeIx = u32;

/// One version as the index knows it.
#[derive(Clone, Debug)]
pub struct Node {
    /// Its id and depth.
    pub version: Version,
    /// Its key's slot in [`Index::keys`].
    pub key: u32,
    /// Its parents (0, 1 or 2).
    pub parents: Vec<NodeIx>,
    /// The seq of its record.
    pub seq: u64,
    /// How many deltas a read decodes to reach its value (0 if stored whole).
    pub chain: u32,
    /// Its place on its first-parent line: 1 for a root, one more than its
    /// first parent's otherwise (what skip-deltas pick bases by).
    pub line: u64,
}

/// One key as the index knows it.
#[derive(Clone, Debug)]
pub struct KeyState {
    /// The key.
    pub name: String,
    /// Who wrote its first version: its owner.
    pub owner: String,
    /// Its versions in log order.
    pub versions: Vec<NodeIx>,
    /// Its versions that no version names as a parent, in log order.
    pub heads: Vec<NodeIx>,
}

/// Why a record could not be folded.
#[derive(Debug)]
pub enum FoldError {
    /// A parent the record names is not in the index.
    MissingParent(VersionId),
    /// The record names the same version under another key.
    KeyMismatch,
    /// A parent the record names is a version of another key.
    ParentOfAnotherKey(VersionId),
}

/// The index. See the module docs.
#[derive(Default, Debug)]
pub struct Index {
    /// Every version, in the order folded.
    pub nodes: Vec<Node>,
    by_id: HashMap<VersionId, NodeIx>,
    /// Every key, in the order first seen.
    pub keys: Vec<KeyState>,
    key_ids: HashMap<String, u32>,
    /// The seq of the last record folded: the next catch-up scans after it.
    pub folded_upto: u64,
}

impl Index {
    /// The node of a version id.
    pub fn node(&self, id: &VersionId) -> Option<NodeIx> {
        self.by_id.get(id).copied()
    }

    /// The slot of a key.
    pub fn key(&self, key: &str) -> Option<u32> {
        self.key_ids.get(key).copied()
    }

    /// The node at a slot.
    pub fn at(&self, ix: NodeIx) -> &Node {
        &self.nodes[ix as usize]
    }

    /// Add the version a record describes (stored at `seq`). A version
    /// already indexed is left as it was (a concurrent writer stored the same
    /// put twice): `Ok(false)`.
    pub fn fold(&mut self, record: &VersionRecord<'_>, seq: u64) -> Result<bool, FoldError> {
        if let Some(&existing) = self.by_id.get(&record.version.id) {
            let key = self.at(existing).key;
            return if self.keys[key as usize].name == record.key { Ok(false) } else { Err(FoldError::KeyMismatch) };
        }
        let known_key = self.key_ids.get(record.key).copied();
        let mut parents = Vec::with_capacity(record.parents.len());
        for link in &record.parents {
            let ix = self.by_id.get(&link.version.id).copied().ok_or(FoldError::MissingParent(link.version.id))?;
            if Some(self.at(ix).key) != known_key {
                return Err(FoldError::ParentOfAnotherKey(link.version.id));
            }
            parents.push(ix);
        }
        let key = match self.key_ids.entry(record.key.to_owned()) {
            Entry::Occupied(slot) => *slot.get(),
            Entry::Vacant(slot) => {
                let ix = u32::try_from(self.keys.len()).expect("fewer than 2^32 keys");
                self.keys.push(KeyState {
                    name: record.key.to_owned(),
                    owner: record.author.to_owned(),
                    versions: Vec::new(),
                    heads: Vec::new(),
                });
                *slot.insert(ix)
            }
        };
        // Parents are versions of the same key (a put checks it), so they
        // leave this key's heads.
        self.keys[key as usize].heads.retain(|h| !parents.contains(h));
        let chain = match record.encoding {
            Encoding::Delta { chain, .. } => chain,
            Encoding::Raw | Encoding::Compressed { .. } => 0,
        };
        let ix = NodeIx::try_from(self.nodes.len()).expect("fewer than 2^32 versions");
        let line = parents.first().map_or(1, |&p| self.at(p).line + 1);
        self.nodes.push(Node { version: record.version, key, parents, seq, chain, line });
        self.by_id.insert(record.version.id, ix);
        self.keys[key as usize].versions.push(ix);
        self.keys[key as usize].heads.push(ix);
        Ok(true)
    }

    /// The delta base of a new version whose first parent is `parent`: a
    /// skip-delta, as Subversion's. The new version's line `l` takes as base
    /// its first-parent ancestor at line `l − lowbit(l)` (the root when that
    /// is 0), so a chain of bases has at most log2(l) + 1 links, while a
    /// base is on average about log2(l) / 2 versions back — deltas stay
    /// small and reads decode few of them, however long the history.
    pub fn skip_delta_base(&self, parent: NodeIx) -> NodeIx {
        let line = self.at(parent).line + 1;
        let target = (line - (line & line.wrapping_neg())).max(1);
        let mut at = parent;
        while self.at(at).line > target {
            match self.at(at).parents.first() {
                Some(&p) => at = p,
                None => break,
            }
        }
        at
    }

    /// The versions of a key that no version names as a parent, in log order.
    pub fn heads(&self, key: u32) -> &[NodeIx] {
        &self.keys[key as usize].heads
    }

    /// Whether `ancestor` is `of` or one of its ancestors. Walks down from
    /// `of` and never below `ancestor`'s depth.
    pub fn is_ancestor(&self, ancestor: NodeIx, of: NodeIx) -> bool {
        let floor = self.at(ancestor).version.depth;
        let mut stack = vec![of];
        let mut seen = HashSet::default();
        while let Some(ix) = stack.pop() {
            if ix == ancestor {
                return true;
            }
            for &parent in &self.at(ix).parents {
                if self.at(parent).version.depth >= floor && seen.insert(parent) {
                    stack.push(parent);
                }
            }
        }
        false
    }

    /// The closest common ancestors of `a` and `b`: common ancestors none of
    /// which is an ancestor of another, deepest first (ties by id). Empty when
    /// the two share no history (two roots).
    ///
    /// Depth-guided, as git's merge-base with generation numbers: a
    /// max-heap by depth walks down from both sides at once, painting each
    /// version with the sides that reach it; a version both sides reach is a
    /// candidate and marks everything below it stale, and the walk stops when
    /// only stale versions are queued, so history below the fork is not read.
    pub fn merge_bases(&self, a: NodeIx, b: NodeIx) -> Vec<NodeIx> {
        const LEFT: u8 = 1;
        const RIGHT: u8 = 2;
        const STALE: u8 = 4;
        if a == b {
            return vec![a];
        }
        let mut flags: HashMap<NodeIx, u8> = HashMap::default();
        let mut queue = BinaryHeap::new();
        flags.insert(a, LEFT);
        flags.insert(b, RIGHT);
        queue.push((self.at(a).version.depth, a));
        queue.push((self.at(b).version.depth, b));
        let mut candidates = Vec::new();
        // The queue is as wide as the DAG between the two sides and the
        // fork, so checking it whole each round stays cheap.
        while queue.iter().any(|(_, ix)| flags[ix] & STALE == 0) {
            let Some((_, ix)) = queue.pop() else { break };
            let mut f = flags[&ix];
            if f & (LEFT | RIGHT) == LEFT | RIGHT && f & STALE == 0 {
                candidates.push(ix);
                f |= STALE;
                flags.insert(ix, f);
            }
            for &parent in &self.at(ix).parents {
                let pf = flags.entry(parent).or_insert(0);
                if *pf & f == f {
                    continue;
                }
                *pf |= f;
                queue.push((self.at(parent).version.depth, parent));
            }
        }
        candidates.sort_unstable();
        candidates.dedup();
        let mut bases: Vec<NodeIx> = candidates
            .iter()
            .copied()
            .filter(|&c| !candidates.iter().any(|&d| d != c && self.is_ancestor(c, d)))
            .collect();
        bases.sort_by(|&x, &y| {
            let (nx, ny) = (self.at(x), self.at(y));
            ny.version.depth.cmp(&nx.version.depth).then(nx.version.id.cmp(&ny.version.id))
        });
        bases
    }

    /// A path of parent steps from `head` down to `ancestor`, inclusive of
    /// both, or `None` if `ancestor` is not an ancestor of `head`.
    pub fn path(&self, head: NodeIx, ancestor: NodeIx) -> Option<Vec<NodeIx>> {
        let floor = self.at(ancestor).version.depth;
        let mut came_from: HashMap<NodeIx, NodeIx> = HashMap::default();
        let mut stack = vec![head];
        while let Some(ix) = stack.pop() {
            if ix == ancestor {
                let mut path = vec![ix];
                let mut at = ix;
                while let Some(&prev) = came_from.get(&at) {
                    path.push(prev);
                    at = prev;
                }
                path.reverse();
                return Some(path);
            }
            for &parent in &self.at(ix).parents {
                if self.at(parent).version.depth >= floor && parent != head && !came_from.contains_key(&parent) {
                    came_from.insert(parent, ix);
                    stack.push(parent);
                }
            }
        }
        None
    }
}
