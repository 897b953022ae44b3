//! A versioned singly linked list on the node-copy logs (`PEDaLS` §IV; the
//! list of Figure 2 and the workloads of §V-A). One original pointer per node
//! (`next`, LinkLog type 2); the APLog holds the head of each version.
//! Node copying propagates towards the head: an update at position i may
//! append to the LinkLogs of nodes i-1, i-2, … but amortized O(1) of them.
//!
//! ```
//! use std::sync::Arc;
//! use varve_log::{Limits, MemoryNamespace};
//! use varve_pds::{Options, VersionedList};
//!
//! let ns = Arc::new(MemoryNamespace::new("doc", Limits::default()));
//! let mut list: VersionedList<u64> = VersionedList::open(ns, "readings", Options::default())?;
//! list.push_back(&10)?;
//! let v2 = list.push_back(&30)?;
//! list.insert_after(0, &20)?;
//! list.remove(&10)?;
//! assert_eq!(list.iter(None)?.collect::<Vec<_>>(), vec![20, 30]);
//! assert_eq!(list.iter(Some(v2))?.collect::<Vec<_>>(), vec![10, 30]);
//! assert_eq!(list.find(&30, None)?, Some(1));
//! # Ok::<(), varve_pds::PdsError>(())
//! ```
//!
//! Costs (n items in the version, p = 1 + extra): every read and update
//! walks from the head, O(n·p) log reads; an update appends O(1) amortized
//! entries.

use std::marker::PhantomData;
use std::ops::RangeInclusive;
use std::sync::Arc;

use bytes::Bytes;
use varve_log::codec::{ByteReader, ByteWriter};
use varve_log::Namespace;

use crate::codec::OpEntry;
use crate::engine::{Engine, NodeId, NodeView, Txn};
use crate::error::{PdsError, Result};
use crate::key::{encode, Key};
use crate::{Options, Structure, Version};

const NEXT: usize = 0;

const OP_PUSH_BACK: u8 = 3;
const OP_PUSH_FRONT: u8 = 4;
const OP_INSERT_AFTER: u8 = 5;
const OP_REMOVE_VALUE: u8 = 6;
const OP_REMOVE_AT: u8 = 7;

/// An op's position argument: a `u64`, nothing else.
fn position_of(bytes: &[u8]) -> Result<usize> {
    let bad = |reason: String| PdsError::Decode { ty: "list position", reason };
    let mut reader = ByteReader::new(bytes);
    let position = reader.u64().and_then(|position| reader.finish().map(|()| position));
    let position = position.map_err(|_| bad(format!("{} bytes, not 8", bytes.len())))?;
    usize::try_from(position).map_err(|e| bad(e.to_string()))
}

/// Walk the working list; returns (predecessor, node) at `index`, or the
/// length when the list is shorter.
fn walk_to(txn: &mut Txn<'_>, index: usize) -> Result<std::result::Result<(Option<NodeId>, NodeId), usize>> {
    let (mut prev, mut cur, mut i) = (None, txn.root()?, 0);
    while let Some(n) = cur {
        if i == index {
            return Ok(Ok((prev, n)));
        }
        prev = Some(n);
        cur = txn.child(n, NEXT)?;
        i += 1;
    }
    Ok(Err(i))
}

fn link_after(txn: &mut Txn<'_>, prev: Option<NodeId>, node: Option<NodeId>) {
    match prev {
        None => txn.set_root(node),
        Some(p) => txn.set_child(p, NEXT, node),
    }
}

pub(crate) fn apply_list(txn: &mut Txn<'_>, op: &OpEntry) -> Result<bool> {
    match op.op {
        OP_PUSH_BACK => {
            let (mut last, mut cur) = (None, txn.root()?);
            while let Some(n) = cur {
                last = Some(n);
                cur = txn.child(n, NEXT)?;
            }
            let new = txn.new_node(Bytes::copy_from_slice(&op.b));
            link_after(txn, last, Some(new));
        }
        OP_PUSH_FRONT => {
            let head = txn.root()?;
            let new = txn.new_node(Bytes::copy_from_slice(&op.b));
            txn.set_child(new, NEXT, head);
            txn.set_root(Some(new));
        }
        OP_INSERT_AFTER => {
            let position = position_of(&op.a)?;
            let (_, n) = walk_to(txn, position)?.map_err(|len| PdsError::PositionOutOfRange { position, len })?;
            let after = txn.child(n, NEXT)?;
            let new = txn.new_node(Bytes::copy_from_slice(&op.b));
            txn.set_child(new, NEXT, after);
            txn.set_child(n, NEXT, Some(new));
        }
        OP_REMOVE_VALUE => {
            let (mut prev, mut cur) = (None, txn.root()?);
            while let Some(n) = cur {
                if txn.val(n)[..] == op.b[..] {
                    let next = txn.child(n, NEXT)?;
                    link_after(txn, prev, next);
                    return Ok(true);
                }
                prev = Some(n);
                cur = txn.child(n, NEXT)?;
            }
            return Ok(false);
        }
        OP_REMOVE_AT => {
            let position = position_of(&op.a)?;
            let (prev, n) = walk_to(txn, position)?.map_err(|len| PdsError::PositionOutOfRange { position, len })?;
            let next = txn.child(n, NEXT)?;
            link_after(txn, prev, next);
        }
        other => return Err(PdsError::Decode { ty: "list op", reason: format!("unknown op code {other}") }),
    }
    Ok(true)
}

/// A versioned list of `T` over the node-copy logs. See the module docs.
pub struct VersionedList<T> {
    engine: Engine,
    _types: PhantomData<fn() -> T>,
}

impl<T: Key> VersionedList<T> {
    /// Open (creating if needed) the list `name` in `ns`, completing an
    /// update interrupted by a crash.
    pub fn open(ns: Arc<dyn Namespace>, name: &str, options: Options) -> Result<Self> {
        let engine = Engine::open(ns, name, Structure::List, options, apply_list)?;
        Ok(VersionedList { engine, _types: PhantomData })
    }

    fn update(&mut self, op: u8, position: Option<usize>, value: Option<&T>) -> Result<Version> {
        let mut a = Vec::new();
        if let Some(position) = position {
            a.put_u64(position as u64);
        }
        let b = value.map(encode).unwrap_or_default();
        self.engine.update(op, a, b, apply_list)
    }

    /// Append `value` at the end (the paper's list insert).
    pub fn push_back(&mut self, value: &T) -> Result<Version> {
        self.update(OP_PUSH_BACK, None, Some(value))
    }

    /// Insert `value` at the head.
    pub fn push_front(&mut self, value: &T) -> Result<Version> {
        self.update(OP_PUSH_FRONT, None, Some(value))
    }

    /// Insert `value` after the item at `position` (0 is the head).
    /// `PositionOutOfRange` if there is no such item; nothing is written then.
    pub fn insert_after(&mut self, position: usize, value: &T) -> Result<Version> {
        self.update(OP_INSERT_AFTER, Some(position), Some(value))
    }

    /// Remove the first item equal to `value`; an absent value is a no-op
    /// returning the current version.
    pub fn remove(&mut self, value: &T) -> Result<Version> {
        self.update(OP_REMOVE_VALUE, None, Some(value))
    }

    /// Remove the item at `position`; `PositionOutOfRange` if there is none.
    pub fn remove_at(&mut self, position: usize) -> Result<Version> {
        self.update(OP_REMOVE_AT, Some(position), None)
    }

    /// The latest committed version (0 before the first update).
    pub fn latest(&self) -> Result<Version> {
        self.engine.latest()
    }

    /// Every readable version.
    pub fn versions(&self) -> Result<RangeInclusive<Version>> {
        Ok(1..=self.engine.latest()?)
    }

    /// Visit the nodes of version `at` in order until `visit` returns false.
    fn walk(&self, at: Option<Version>, mut visit: impl FnMut(&NodeView) -> bool) -> Result<()> {
        let at = self.engine.resolve(at)?;
        let mut cur = self.engine.root(at)?;
        while !cur.is_null() {
            let view = self.engine.load(cur, at)?;
            if !visit(&view) {
                break;
            }
            cur = view.fields[NEXT];
        }
        Ok(())
    }

    fn raw_items(&self, at: Option<Version>) -> Result<Vec<Bytes>> {
        let mut out = Vec::new();
        self.walk(at, |view| {
            out.push(view.val.clone());
            true
        })?;
        Ok(out)
    }

    /// The items of version `at`, head first.
    #[expect(clippy::iter_not_returning_iterator, reason = "reads can fail, so the iterator comes in a Result")]
    pub fn iter(&self, at: Option<Version>) -> Result<std::vec::IntoIter<T>> {
        let items = self.raw_items(at)?.iter().map(|b| T::decode_all(b)).collect::<Result<Vec<_>>>()?;
        Ok(items.into_iter())
    }

    /// The position of the first item equal to `value` in version `at`.
    pub fn find(&self, value: &T, at: Option<Version>) -> Result<Option<usize>> {
        let wanted = encode(value);
        let (mut index, mut found) = (0, None);
        self.walk(at, |view| {
            if view.val[..] == wanted[..] {
                found = Some(index);
                return false;
            }
            index += 1;
            true
        })?;
        Ok(found)
    }

    /// The item at `position` in version `at`.
    pub fn get(&self, position: usize, at: Option<Version>) -> Result<Option<T>> {
        let (mut index, mut found) = (0, None);
        self.walk(at, |view| {
            if index == position {
                found = Some(view.val.clone());
                return false;
            }
            index += 1;
            true
        })?;
        found.map(|b| T::decode_all(&b)).transpose()
    }

    /// The last item of version `at` (the paper's list access benchmark).
    pub fn last(&self, at: Option<Version>) -> Result<Option<T>> {
        let mut last = None;
        self.walk(at, |view| {
            last = Some(view.val.clone());
            true
        })?;
        last.map(|b| T::decode_all(&b)).transpose()
    }

    /// How many items version `at` holds.
    pub fn len(&self, at: Option<Version>) -> Result<usize> {
        let mut n = 0;
        self.walk(at, |_| {
            n += 1;
            true
        })?;
        Ok(n)
    }

    /// Whether version `at` holds no item (walks the version, as [`len`](Self::len) does).
    pub fn is_empty(&self, at: Option<Version>) -> Result<bool> {
        Ok(self.len(at)? == 0)
    }

    /// Items added and removed from version `from` to `to` (as multisets).
    pub fn diff(&self, from: Version, to: Version) -> Result<(Vec<T>, Vec<T>)> {
        let mut old = self.raw_items(Some(from))?;
        let mut new = self.raw_items(Some(to))?;
        old.sort();
        new.sort();
        let (mut added, mut removed) = (Vec::new(), Vec::new());
        let (mut i, mut j) = (0, 0);
        while i < old.len() || j < new.len() {
            match (old.get(i), new.get(j)) {
                (Some(before), Some(after)) if before == after => (i, j) = (i + 1, j + 1),
                (Some(before), Some(after)) if before < after => {
                    removed.push(T::decode_all(before)?);
                    i += 1;
                }
                (_, Some(after)) => {
                    added.push(T::decode_all(after)?);
                    j += 1;
                }
                (Some(before), None) => {
                    removed.push(T::decode_all(before)?);
                    i += 1;
                }
                (None, None) => unreachable!("loop condition"),
            }
        }
        Ok((added, removed))
    }
}
