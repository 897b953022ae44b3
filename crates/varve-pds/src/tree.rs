//! Versioned sorted maps and sets: the paper's unbalanced BST (`PEDaLS` §IV-C,
//! Algorithm 1) and a red-black tree by node copying (Driscoll et al. 1986),
//! the default. Both live on the logs of [`crate::engine`]; the red-black tree
//! keeps its colour as a versioned LinkLog field (type 3), so a recolouring is
//! one extra pointer, not a copy of the node.
//!
//! A node's DataLog `val` is `key_len u32 LE · key · value`, where key and
//! value use the order-preserving [`crate::key`] encoding; the tree compares
//! encoded keys as bytes.
//!
//! ```
//! use std::sync::Arc;
//! use varve_log::{Limits, MemoryNamespace};
//! use varve_pds::{Options, SortedMap};
//!
//! let ns = Arc::new(MemoryNamespace::new("doc", Limits::default()));
//! let mut map: SortedMap<String, u64> = SortedMap::open(ns, "scores", Options::default())?;
//! let v1 = map.insert(&"ada".to_string(), &3)?;
//! let v2 = map.insert(&"bob".to_string(), &5)?;
//! map.delete(&"ada".to_string())?;
//! assert_eq!(map.get(&"ada".to_string(), Some(v1))?, Some(3));
//! assert_eq!(map.get(&"ada".to_string(), None)?, None);
//! assert_eq!(map.len(Some(v2))?, 2);
//! # Ok::<(), varve_pds::PdsError>(())
//! ```
//!
//! Costs (n keys in the version read, h its height: `log n` for the
//! red-black tree, up to n for the paper's BST; p = o + extra entries per
//! node visit): `get`/`contains`/`first`/`last` O(h·p) log reads; `iter`,
//! `len` O(n·p); `range` O((h + k)·p) for k results; an update O(h·p) reads
//! and O(1) amortized appends.

use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds, RangeInclusive};
use std::sync::Arc;

use bytes::Bytes;
use varve_log::codec::{ByteReader, ByteWriter};
use varve_log::Namespace;

use crate::codec::OpEntry;
use crate::engine::{Engine, NodeId, NodeView, Ref, Txn};
use crate::error::{PdsError, Result};
use crate::key::{encode, Key};
use crate::{Options, Structure, Version};

const LEFT: usize = 0;
const RIGHT: usize = 1;
const COLOR: usize = 2;
const RED: u64 = 0;
const BLACK: u64 = 1;

const OP_INSERT: u8 = 1;
const OP_DELETE: u8 = 2;

pub(crate) fn node_val(key: &[u8], value: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(4 + key.len() + value.len());
    out.put_u32(u32::try_from(key.len()).expect("keys are below 4 GiB"));
    out.put_bytes(key);
    out.put_bytes(value);
    Bytes::from(out)
}

/// Split a node's `val` into encoded key and value.
pub(crate) fn split_val(val: &[u8]) -> Result<(&[u8], &[u8])> {
    let mut reader = ByteReader::new(val);
    let key = reader.bytes_u32().map_err(|e| PdsError::Decode {
        ty: "tree node",
        reason: format!("node value shorter than its key length: {e}"),
    })?;
    Ok((key, reader.rest()))
}

fn key_of(val: &[u8]) -> &[u8] {
    split_val(val).map_or(&[][..], |(k, _)| k)
}

/// Where a node hangs: under a parent's field, or at the root.
fn attach(txn: &mut Txn<'_>, parent: Option<(NodeId, usize)>, node: Option<NodeId>) {
    match parent {
        None => txn.set_root(node),
        Some((p, field)) => txn.set_child(p, field, node),
    }
}

fn replace_child(txn: &mut Txn<'_>, parent: Option<NodeId>, old: NodeId, new: Option<NodeId>) {
    match parent {
        None => txn.set_root(new),
        Some(p) => {
            let field = if txn.slot_is(p, LEFT, old) { LEFT } else { RIGHT };
            debug_assert!(txn.slot_is(p, field, old), "old is a child of parent");
            txn.set_child(p, field, new);
        }
    }
}

/// Descend to `key`; returns the path of ancestors (root first) with the
/// side taken at each, and the node holding `key` if present.
type Path = Vec<(NodeId, usize)>;

fn descend(txn: &mut Txn<'_>, key: &[u8]) -> Result<(Path, Option<NodeId>)> {
    let mut path = Vec::new();
    let mut cur = txn.root()?;
    while let Some(n) = cur {
        let side = match key.cmp(key_of(txn.val(n))) {
            std::cmp::Ordering::Equal => return Ok((path, Some(n))),
            std::cmp::Ordering::Less => LEFT,
            std::cmp::Ordering::Greater => RIGHT,
        };
        path.push((n, side));
        cur = txn.child(n, side)?;
    }
    Ok((path, None))
}

/// The value of an existing key changed: a new node (contents are constant
/// in node copying) takes the old one's fields and place.
fn replace_value(txn: &mut Txn<'_>, path: &[(NodeId, usize)], n: NodeId, val: Bytes) -> bool {
    if txn.val(n)[..] == val[..] {
        return false;
    }
    let new = txn.new_node(val);
    txn.copy_fields(n, new);
    attach(txn, path.last().copied(), Some(new));
    true
}

pub(crate) fn apply_bst(txn: &mut Txn<'_>, op: &OpEntry) -> Result<bool> {
    let (path, found) = descend(txn, &op.a)?;
    match (op.op, found) {
        (OP_INSERT, Some(n)) => Ok(replace_value(txn, &path, n, node_val(&op.a, &op.b))),
        (OP_INSERT, None) => {
            let new = txn.new_node(node_val(&op.a, &op.b));
            attach(txn, path.last().copied(), Some(new));
            Ok(true)
        }
        (OP_DELETE, None) => Ok(false),
        (OP_DELETE, Some(z)) => {
            let parent = path.last().copied();
            let (l, r) = (txn.child(z, LEFT)?, txn.child(z, RIGHT)?);
            match (l, r) {
                (None, only) | (only, None) => attach(txn, parent, only),
                (Some(l), Some(r)) => {
                    // The successor y takes z's place (pointers move; contents stay).
                    let (mut y_parent, mut y) = (None, r);
                    while let Some(next) = txn.child(y, LEFT)? {
                        (y_parent, y) = (Some(y), next);
                    }
                    if let Some(yp) = y_parent {
                        let y_right = txn.child(y, RIGHT)?;
                        txn.set_child(yp, LEFT, y_right);
                        txn.set_child(y, RIGHT, Some(r));
                    }
                    txn.set_child(y, LEFT, Some(l));
                    attach(txn, parent, Some(y));
                }
            }
            Ok(true)
        }
        _ => Err(unknown_op(op)),
    }
}

fn unknown_op(op: &OpEntry) -> PdsError {
    PdsError::Decode { ty: "tree op", reason: format!("unknown op code {}", op.op) }
}

fn color(txn: &Txn<'_>, n: Option<NodeId>) -> u64 {
    n.map_or(BLACK, |n| txn.scalar(n, COLOR))
}

/// Rotate `x` down towards `dir` (LEFT: a left rotation); its child on the
/// other side takes its place under `parent`.
fn rotate(txn: &mut Txn<'_>, x: NodeId, dir: usize, parent: Option<NodeId>) -> Result<NodeId> {
    let other = 1 - dir;
    let y = txn.child(x, other)?.expect("a rotation needs a child on the other side");
    let inner = txn.child(y, dir)?;
    txn.set_child(x, other, inner);
    txn.set_child(y, dir, Some(x));
    replace_child(txn, parent, x, Some(y));
    Ok(y)
}

pub(crate) fn apply_red_black(txn: &mut Txn<'_>, op: &OpEntry) -> Result<bool> {
    let (path, found) = descend(txn, &op.a)?;
    match (op.op, found) {
        (OP_INSERT, Some(n)) => Ok(replace_value(txn, &path, n, node_val(&op.a, &op.b))),
        (OP_INSERT, None) => {
            let z = txn.new_node(node_val(&op.a, &op.b));
            txn.set_scalar(z, COLOR, RED);
            attach(txn, path.last().copied(), Some(z));
            rb_insert_fixup(txn, path.into_iter().map(|(n, _)| n).collect(), z)?;
            Ok(true)
        }
        (OP_DELETE, None) => Ok(false),
        (OP_DELETE, Some(z)) => {
            rb_delete(txn, path.into_iter().map(|(n, _)| n).collect(), z)?;
            Ok(true)
        }
        _ => Err(unknown_op(op)),
    }
}

/// CLRS RB-INSERT-FIXUP with an ancestor stack instead of parent pointers.
fn rb_insert_fixup(txn: &mut Txn<'_>, mut path: Vec<NodeId>, mut z: NodeId) -> Result<()> {
    while let Some(&p) = path.last() {
        if color(txn, Some(p)) == BLACK {
            break;
        }
        let g = path[path.len() - 2]; // p is red, so it is not the root
        let great = path.len().checked_sub(3).map(|i| path[i]);
        let side = if txn.slot_is(g, LEFT, p) { LEFT } else { RIGHT };
        let uncle = txn.child(g, 1 - side)?;
        if color(txn, uncle) == RED {
            txn.set_scalar(p, COLOR, BLACK);
            txn.set_scalar(uncle.expect("red"), COLOR, BLACK);
            txn.set_scalar(g, COLOR, RED);
            z = g;
            path.truncate(path.len() - 2);
            continue;
        }
        let mut p = p;
        if txn.slot_is(p, 1 - side, z) {
            rotate(txn, p, side, Some(g))?;
            std::mem::swap(&mut z, &mut p);
        }
        txn.set_scalar(p, COLOR, BLACK);
        txn.set_scalar(g, COLOR, RED);
        rotate(txn, g, 1 - side, great)?;
        break;
    }
    if let Some(root) = txn.root()? {
        txn.set_scalar(root, COLOR, BLACK);
    }
    Ok(())
}

/// CLRS RB-DELETE: the successor is relinked into z's place (contents are
/// constant, so nodes move rather than values).
fn rb_delete(txn: &mut Txn<'_>, path: Vec<NodeId>, z: NodeId) -> Result<()> {
    let zp = path.last().copied();
    let (zl, zr) = (txn.child(z, LEFT)?, txn.child(z, RIGHT)?);
    let (x, stack, removed_color) = match (zl, zr) {
        (None, only) | (only, None) => {
            replace_child(txn, zp, z, only);
            (only, path, color(txn, Some(z)))
        }
        (Some(zl), Some(zr)) => {
            let mut below = Vec::new();
            let mut y = zr;
            while let Some(next) = txn.child(y, LEFT)? {
                below.push(y);
                y = next;
            }
            let y_color = color(txn, Some(y));
            let x = txn.child(y, RIGHT)?;
            if let Some(&yp) = below.last() {
                txn.set_child(yp, LEFT, x);
                txn.set_child(y, RIGHT, Some(zr));
            }
            replace_child(txn, zp, z, Some(y));
            txn.set_child(y, LEFT, Some(zl));
            txn.set_scalar(y, COLOR, color(txn, Some(z)));
            let mut stack = path;
            stack.push(y);
            stack.extend(below);
            (x, stack, y_color)
        }
    };
    if removed_color == BLACK {
        rb_delete_fixup(txn, stack, x)?;
    }
    Ok(())
}

/// CLRS RB-DELETE-FIXUP; `stack` holds x's ancestors, root first (x may be null).
fn rb_delete_fixup(txn: &mut Txn<'_>, mut stack: Vec<NodeId>, mut x: Option<NodeId>) -> Result<()> {
    while let Some(&xp) = stack.last() {
        if color(txn, x) == RED {
            break;
        }
        let side = match x {
            Some(x) => {
                if txn.slot_is(xp, LEFT, x) {
                    LEFT
                } else {
                    RIGHT
                }
            }
            None => {
                if txn.child(xp, LEFT)?.is_none() {
                    LEFT
                } else {
                    RIGHT
                }
            }
        };
        let other = 1 - side;
        let grand = |stack: &Vec<NodeId>| stack.len().checked_sub(2).map(|i| stack[i]);
        let mut w = txn.child(xp, other)?.expect("a doubly black node has a sibling");
        if color(txn, Some(w)) == RED {
            txn.set_scalar(w, COLOR, BLACK);
            txn.set_scalar(xp, COLOR, RED);
            rotate(txn, xp, side, grand(&stack))?;
            let at = stack.len() - 1;
            stack.insert(at, w);
            w = txn.child(xp, other)?.expect("sibling after rotation");
        }
        let near = txn.child(w, side)?;
        let far = txn.child(w, other)?;
        if color(txn, near) == BLACK && color(txn, far) == BLACK {
            txn.set_scalar(w, COLOR, RED);
            x = Some(xp);
            stack.pop();
            continue;
        }
        if color(txn, far) == BLACK {
            txn.set_scalar(near.expect("red"), COLOR, BLACK);
            txn.set_scalar(w, COLOR, RED);
            w = rotate(txn, w, other, Some(xp))?;
        }
        txn.set_scalar(w, COLOR, color(txn, Some(xp)));
        txn.set_scalar(xp, COLOR, BLACK);
        let far = txn.child(w, other)?.expect("red far child");
        txn.set_scalar(far, COLOR, BLACK);
        rotate(txn, xp, side, grand(&stack))?;
        x = None;
        break;
    }
    if let Some(x) = x {
        txn.set_scalar(x, COLOR, BLACK);
    }
    if let Some(root) = txn.root()? {
        txn.set_scalar(root, COLOR, BLACK);
    }
    Ok(())
}

/// What changed between two versions of a map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapDiff<K, V> {
    /// Keys in the second version and not the first.
    pub added: Vec<(K, V)>,
    /// Keys in the first version and not the second.
    pub removed: Vec<(K, V)>,
    /// Keys in both whose value differs: (key, old, new).
    pub changed: Vec<(K, V, V)>,
}

/// A versioned sorted map over the node-copy logs. See the module docs.
pub struct SortedMap<K, V = ()> {
    engine: Engine,
    _types: PhantomData<fn() -> (K, V)>,
}

impl<K: Key, V: Key> SortedMap<K, V> {
    /// Open (creating if needed) the balanced (red-black) map `name` in `ns`.
    /// Completes an update interrupted by a crash (see [`crate::engine`]).
    pub fn open(ns: Arc<dyn Namespace>, name: &str, options: Options) -> Result<Self> {
        Self::open_as(ns, name, Structure::Balanced, options)
    }

    /// Open a map with an explicit tree: [`Structure::Balanced`] or the
    /// paper's unbalanced [`Structure::Bst`].
    pub fn open_as(ns: Arc<dyn Namespace>, name: &str, tree: Structure, options: Options) -> Result<Self> {
        let apply = match tree {
            Structure::Bst => apply_bst,
            Structure::Balanced => apply_red_black,
            Structure::List => {
                return Err(PdsError::InvalidArgument { reason: "a sorted map is a bst or a balanced tree".into() })
            }
        };
        let engine = Engine::open(ns, name, tree, options, apply)?;
        Ok(SortedMap { engine, _types: PhantomData })
    }

    fn apply(&self) -> crate::engine::ApplyFn {
        if self.engine.structure == Structure::Bst {
            apply_bst
        } else {
            apply_red_black
        }
    }

    /// Which tree this is.
    #[must_use]
    pub fn structure(&self) -> Structure {
        self.engine.structure
    }

    /// Insert or replace `key`. Returns the new version; inserting a key
    /// with the value it already has is a no-op returning the current version.
    pub fn insert(&mut self, key: &K, value: &V) -> Result<Version> {
        let apply = self.apply();
        self.engine.update(OP_INSERT, encode(key), encode(value), apply)
    }

    /// Delete `key`. Deleting an absent key is a no-op returning the current version.
    pub fn delete(&mut self, key: &K) -> Result<Version> {
        let apply = self.apply();
        self.engine.update(OP_DELETE, encode(key), Vec::new(), apply)
    }

    /// The latest committed version (0 before the first update).
    pub fn latest(&self) -> Result<Version> {
        self.engine.latest()
    }

    /// Every readable version.
    pub fn versions(&self) -> Result<RangeInclusive<Version>> {
        Ok(1..=self.engine.latest()?)
    }

    fn decode(view: &NodeView) -> Result<(K, V)> {
        let (k, v) = split_val(&view.val)?;
        Ok((K::decode_all(k)?, V::decode_all(v)?))
    }

    fn find(&self, key: &[u8], at: Version) -> Result<Option<NodeView>> {
        let mut cur = self.engine.root(at)?;
        while !cur.is_null() {
            let view = self.engine.load(cur, at)?;
            cur = match key.cmp(key_of(&view.val)) {
                std::cmp::Ordering::Equal => return Ok(Some(view)),
                std::cmp::Ordering::Less => view.fields[LEFT],
                std::cmp::Ordering::Greater => view.fields[RIGHT],
            };
        }
        Ok(None)
    }

    /// The value of `key` in version `at` (`None`: the latest).
    pub fn get(&self, key: &K, at: Option<Version>) -> Result<Option<V>> {
        let at = self.engine.resolve(at)?;
        self.find(&encode(key), at)?.map(|view| Ok(Self::decode(&view)?.1)).transpose()
    }

    /// Whether `key` is in version `at`.
    pub fn contains(&self, key: &K, at: Option<Version>) -> Result<bool> {
        let at = self.engine.resolve(at)?;
        Ok(self.find(&encode(key), at)?.is_some())
    }

    /// In-order views within encoded bounds, at most `limit`.
    fn scan(&self, at: Version, lo: Bound<&[u8]>, hi: Bound<&[u8]>, limit: usize) -> Result<Vec<NodeView>> {
        let above_lo = |k: &[u8]| match lo {
            Bound::Included(b) => k >= b,
            Bound::Excluded(b) => k > b,
            Bound::Unbounded => true,
        };
        let below_hi = |k: &[u8]| match hi {
            Bound::Included(b) => k <= b,
            Bound::Excluded(b) => k < b,
            Bound::Unbounded => true,
        };
        let mut out = Vec::new();
        let mut stack: Vec<NodeView> = Vec::new();
        let mut cur = self.engine.root(at)?;
        while out.len() < limit {
            while !cur.is_null() {
                let view = self.engine.load(cur, at)?;
                if above_lo(key_of(&view.val)) {
                    cur = view.fields[LEFT];
                    stack.push(view);
                } else {
                    cur = view.fields[RIGHT];
                }
            }
            let Some(view) = stack.pop() else { break };
            if !below_hi(key_of(&view.val)) {
                break;
            }
            cur = view.fields[RIGHT];
            out.push(view);
        }
        Ok(out)
    }

    /// Every entry of version `at`, in key order.
    #[expect(clippy::iter_not_returning_iterator, reason = "reads can fail, so the iterator comes in a Result")]
    pub fn iter(&self, at: Option<Version>) -> Result<std::vec::IntoIter<(K, V)>> {
        self.range(.., at)
    }

    /// Entries of version `at` with keys in `range`, in key order.
    pub fn range(&self, range: impl RangeBounds<K>, at: Option<Version>) -> Result<std::vec::IntoIter<(K, V)>> {
        let at = self.engine.resolve(at)?;
        let enc = |b: Bound<&K>| match b {
            Bound::Included(k) => Bound::Included(encode(k)),
            Bound::Excluded(k) => Bound::Excluded(encode(k)),
            Bound::Unbounded => Bound::Unbounded,
        };
        let (lo, hi) = (enc(range.start_bound()), enc(range.end_bound()));
        let views = self.scan(at, lo.as_ref().map(Vec::as_slice), hi.as_ref().map(Vec::as_slice), usize::MAX)?;
        let items = views.iter().map(Self::decode).collect::<Result<Vec<_>>>()?;
        Ok(items.into_iter())
    }

    /// The smallest entry of version `at`.
    pub fn first(&self, at: Option<Version>) -> Result<Option<(K, V)>> {
        self.edge(at, LEFT)
    }

    /// The largest entry of version `at` (the paper's "maximum of the BST").
    pub fn last(&self, at: Option<Version>) -> Result<Option<(K, V)>> {
        self.edge(at, RIGHT)
    }

    fn edge(&self, at: Option<Version>, side: usize) -> Result<Option<(K, V)>> {
        let at = self.engine.resolve(at)?;
        let mut cur = self.engine.root(at)?;
        let mut found = None;
        while !cur.is_null() {
            let view = self.engine.load(cur, at)?;
            cur = view.fields[side];
            found = Some(view);
        }
        found.as_ref().map(Self::decode).transpose()
    }

    /// How many entries version `at` holds (walks the version: O(n)).
    pub fn len(&self, at: Option<Version>) -> Result<usize> {
        let at = self.engine.resolve(at)?;
        Ok(self.scan(at, Bound::Unbounded, Bound::Unbounded, usize::MAX)?.len())
    }

    /// Whether version `at` is empty.
    pub fn is_empty(&self, at: Option<Version>) -> Result<bool> {
        let at = self.engine.resolve(at)?;
        Ok(self.engine.root(at)?.is_null())
    }

    /// Keys of version `at` in preorder (the order Figure 1 draws a tree in).
    pub fn preorder(&self, at: Option<Version>) -> Result<Vec<K>> {
        let at = self.engine.resolve(at)?;
        let mut out = Vec::new();
        let mut stack = vec![self.engine.root(at)?];
        while let Some(r) = stack.pop() {
            if r.is_null() {
                continue;
            }
            let view = self.engine.load(r, at)?;
            out.push(Self::decode(&view)?.0);
            stack.push(view.fields[RIGHT]);
            stack.push(view.fields[LEFT]);
        }
        Ok(out)
    }

    /// What changed from version `from` to version `to`.
    ///
    /// # Panics
    ///
    /// Never: it only takes items it has just peeked.
    pub fn diff(&self, from: Version, to: Version) -> Result<MapDiff<K, V>>
    where
        V: PartialEq,
    {
        let a: Vec<(Vec<u8>, (K, V))> = self.encoded_entries(from)?;
        let b: Vec<(Vec<u8>, (K, V))> = self.encoded_entries(to)?;
        let mut diff = MapDiff { added: Vec::new(), removed: Vec::new(), changed: Vec::new() };
        let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
        loop {
            match (a.peek(), b.peek()) {
                (None, None) => break,
                (Some(_), None) => diff.removed.push(a.next().expect("peeked").1),
                (None, Some(_)) => diff.added.push(b.next().expect("peeked").1),
                (Some((ka, _)), Some((kb, _))) => match ka.cmp(kb) {
                    std::cmp::Ordering::Less => diff.removed.push(a.next().expect("peeked").1),
                    std::cmp::Ordering::Greater => diff.added.push(b.next().expect("peeked").1),
                    std::cmp::Ordering::Equal => {
                        let (old, new) = (a.next().expect("peeked").1, b.next().expect("peeked").1);
                        if old.1 != new.1 {
                            diff.changed.push((new.0, old.1, new.1));
                        }
                    }
                },
            }
        }
        Ok(diff)
    }

    #[expect(clippy::type_complexity, reason = "a private helper: (encoded key, decoded entry)")]
    fn encoded_entries(&self, at: Version) -> Result<Vec<(Vec<u8>, (K, V))>> {
        let at = self.engine.resolve(Some(at))?;
        let views = self.scan(at, Bound::Unbounded, Bound::Unbounded, usize::MAX)?;
        views.iter().map(|view| Ok((key_of(&view.val).to_vec(), Self::decode(view)?))).collect()
    }

    /// For the balanced tree: a description of the first red-black or
    /// search-order violation in version `at`, `None` if it has none.
    pub fn balance_violation(&self, at: Option<Version>) -> Result<Option<String>> {
        type Pending = (Ref, Option<Vec<u8>>, Option<Vec<u8>>, u32, bool);
        let at = self.engine.resolve(at)?;
        let root = self.engine.root(at)?;
        if root.is_null() {
            return Ok(None);
        }
        if self.engine.structure != Structure::Balanced {
            return Ok(Some(format!("{} is not a balanced tree", self.engine.structure)));
        }
        // Pending: (node, lower key, upper key, black height so far, parent red)
        let mut black_height = None;
        let mut stack: Vec<Pending> = vec![(root, None, None, 0, false)];
        let root_view = self.engine.load(root, at)?;
        if root_view.fields[COLOR].dseq != BLACK {
            return Ok(Some(format!("version {at}: the root is red")));
        }
        while let Some((r, lo, hi, blacks, parent_red)) = stack.pop() {
            if r.is_null() {
                match black_height {
                    None => black_height = Some(blacks),
                    Some(h) if h != blacks => {
                        return Ok(Some(format!("version {at}: black heights {h} and {blacks} differ")))
                    }
                    Some(_) => {}
                }
                continue;
            }
            let view = self.engine.load(r, at)?;
            let key = key_of(&view.val).to_vec();
            if lo.as_ref().is_some_and(|lo| key <= *lo) || hi.as_ref().is_some_and(|hi| key >= *hi) {
                return Ok(Some(format!("version {at}: key {key:?} out of search order")));
            }
            let red = view.fields[COLOR].dseq == RED;
            if red && parent_red {
                return Ok(Some(format!("version {at}: red node {key:?} has a red parent")));
            }
            let blacks = blacks + u32::from(!red);
            stack.push((view.fields[LEFT], lo, Some(key.clone()), blacks, red));
            stack.push((view.fields[RIGHT], Some(key), hi, blacks, red));
        }
        Ok(None)
    }
}

/// A versioned sorted set: a [`SortedMap`] whose values are `()`.
pub struct SortedSet<K> {
    map: SortedMap<K, ()>,
}

impl<K: Key> SortedSet<K> {
    /// Open (creating if needed) the balanced set `name`.
    pub fn open(ns: Arc<dyn Namespace>, name: &str, options: Options) -> Result<Self> {
        Ok(SortedSet { map: SortedMap::open(ns, name, options)? })
    }

    /// Open with an explicit tree ([`Structure::Bst`] is the paper's).
    pub fn open_as(ns: Arc<dyn Namespace>, name: &str, tree: Structure, options: Options) -> Result<Self> {
        Ok(SortedSet { map: SortedMap::open_as(ns, name, tree, options)? })
    }

    /// Insert `key`; a key already present is a no-op returning the current version.
    pub fn insert(&mut self, key: &K) -> Result<Version> {
        self.map.insert(key, &())
    }

    /// Delete `key`; an absent key is a no-op returning the current version.
    pub fn delete(&mut self, key: &K) -> Result<Version> {
        self.map.delete(key)
    }

    /// Whether `key` is in version `at` (`None`: the latest).
    pub fn contains(&self, key: &K, at: Option<Version>) -> Result<bool> {
        self.map.contains(key, at)
    }

    /// Every key of version `at`, in order (the version is read whole before the first key).
    #[expect(clippy::iter_not_returning_iterator, reason = "reads can fail, so the iterator comes in a Result")]
    pub fn iter(&self, at: Option<Version>) -> Result<impl Iterator<Item = K>> {
        Ok(self.map.iter(at)?.map(|(k, ())| k))
    }

    /// Keys of version `at` in `range`, in order (read whole before the first key).
    pub fn range(&self, range: impl RangeBounds<K>, at: Option<Version>) -> Result<impl Iterator<Item = K>> {
        Ok(self.map.range(range, at)?.map(|(k, ())| k))
    }

    /// The smallest key of version `at`.
    pub fn first(&self, at: Option<Version>) -> Result<Option<K>> {
        Ok(self.map.first(at)?.map(|(k, ())| k))
    }

    /// The largest key of version `at` (the paper's "maximum of the BST").
    pub fn last(&self, at: Option<Version>) -> Result<Option<K>> {
        Ok(self.map.last(at)?.map(|(k, ())| k))
    }

    /// How many keys version `at` holds (walks the version: O(n)).
    pub fn len(&self, at: Option<Version>) -> Result<usize> {
        self.map.len(at)
    }

    /// Whether version `at` is empty (reads only its root).
    pub fn is_empty(&self, at: Option<Version>) -> Result<bool> {
        self.map.is_empty(at)
    }

    /// The latest committed version (0 before the first update).
    pub fn latest(&self) -> Result<Version> {
        self.map.latest()
    }

    /// Every readable version: `1..=latest`, empty before the first update.
    pub fn versions(&self) -> Result<RangeInclusive<Version>> {
        self.map.versions()
    }

    /// Keys of version `at` in preorder (the order Figure 1 draws a tree in).
    pub fn preorder(&self, at: Option<Version>) -> Result<Vec<K>> {
        self.map.preorder(at)
    }

    /// Keys added and removed from version `from` to `to`.
    pub fn diff(&self, from: Version, to: Version) -> Result<(Vec<K>, Vec<K>)> {
        let diff = self.map.diff(from, to)?;
        Ok((diff.added.into_iter().map(|(k, ())| k).collect(), diff.removed.into_iter().map(|(k, ())| k).collect()))
    }

    /// For the balanced tree: a description of the first red-black or
    /// search-order violation in version `at`, `None` if it has none.
    pub fn balance_violation(&self, at: Option<Version>) -> Result<Option<String>> {
        self.map.balance_violation(at)
    }

    /// The underlying map.
    #[must_use]
    pub fn as_map(&self) -> &SortedMap<K, ()> {
        &self.map
    }
}
