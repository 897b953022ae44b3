//! Encoding: batch and manifest records, and the checkpoint [`Writer`],
//! which walks a snapshot and packs blobs — whole, as a reference to an
//! unchanged blob, or as a delta against the previous checkpoint's — into
//! blob records. See `docs/design.md` "PART checkpoints" for the normative
//! layout.

use std::collections::HashMap;

use varve_log::codec::ByteWriter;
use varve_log::{Namespace, Seq};

use super::format::{
    pack_ref, seal, unpack_ref, zigzag, Committed, RefState, CHILD_LEAF, CHILD_NODE, CHILD_REF, CHILD_REMOVED,
    INLINE_DEPTH_MAX, NODE_DELTA, NODE_FULL_256, NODE_HAS_VALUE, OP_DELETE, OP_PUT,
};
use super::{
    CheckpointStats, Codec, DurableError, Result, BLOBS_PER_RECORD_MAX, BLOB_ENTRIES_MAX, BLOB_SEQ_MAX, FORMAT_VERSION,
    RECORD_BYTES_TARGET, TREE_DEPTH_MAX,
};
use crate::map::BatchOp;
use crate::raw::{ChildRef, NodeRef};

/// The prefix, flags (`extra` added) and value of `node`.
fn encode_header<V: Codec>(node: NodeRef<'_, V>, extra: u8, out: &mut Vec<u8>) {
    let prefix = node.prefix();
    out.put_varint(prefix.len() as u64);
    out.extend_from_slice(prefix);
    let has_value = if node.value().is_some() { NODE_HAS_VALUE } else { 0 };
    out.push(has_value | extra);
    if let Some(value) = node.value() {
        value.encode(out);
    }
}

/// A reference, as a delta from the previous one in the blob: head varint
/// `zigzag(seq delta) << 2 | tag`, then the index (a zigzag delta when the
/// seq is the same, else absolute).
fn put_ref(out: &mut Vec<u8>, refs: &mut RefState, seq: Seq, index: u64, tag: u64) {
    let delta = zigzag(seq.wrapping_sub(refs.seq).cast_signed());
    out.put_varint(delta << 2 | tag);
    if seq == refs.seq {
        out.put_varint(zigzag(index.wrapping_sub(refs.index).cast_signed()));
    } else {
        out.put_varint(index);
    }
    refs.seq = seq;
    refs.index = index;
}

/// The inner node at `byte` among `children` (sorted), if there is one.
fn base_node_at<'a, V>(children: &[(u8, ChildRef<'a, V>)], byte: u8) -> Option<NodeRef<'a, V>> {
    match children.binary_search_by_key(&byte, |(b, _)| *b) {
        Ok(at) => match &children[at].1 {
            ChildRef::Node(node) => Some(*node),
            ChildRef::Leaf { .. } => None,
        },
        Err(_) => None,
    }
}

fn clone_child<'a, V>(child: &ChildRef<'a, V>) -> ChildRef<'a, V> {
    match child {
        ChildRef::Leaf { suffix, value } => ChildRef::Leaf { suffix, value },
        ChildRef::Node(node) => ChildRef::Node(*node),
    }
}

pub(super) struct Writer<'a> {
    pub(super) ns: &'a dyn Namespace,
    pub(super) log: String,
    pub(super) generation: u64,
    pub(super) reuse_tag: Option<u64>,
    pub(super) depth_threshold: usize,
    pub(super) next_seq: Seq,
    pub(super) record: Vec<u8>,
    pub(super) blobs_in_record: usize,
    pub(super) stats: CheckpointStats,
    pub(super) written: HashMap<usize, u64>,
}

impl Writer<'_> {
    /// Encode `node` (at inner-node `depth`, `inline_depth` levels below
    /// its blob's root) into `out`. `base` is the node at the same path in
    /// the previous checkpoint's tree, if any: blob roots below are written
    /// as deltas against it where that is smaller.
    pub(super) fn encode_node<V: Codec>(
        &mut self,
        node: NodeRef<'_, V>,
        base: Option<NodeRef<'_, V>>,
        depth: usize,
        inline_depth: usize,
        out: &mut Vec<u8>,
        refs: &mut RefState,
    ) -> Result<()> {
        if depth >= TREE_DEPTH_MAX {
            return Err(DurableError::TooDeep);
        }
        let children: Vec<(u8, ChildRef<'_, V>)> = node.children().collect();
        let full = children.len() == 256;
        encode_header(node, if full { NODE_FULL_256 } else { 0 }, out);
        if !full {
            out.put_varint(children.len() as u64);
        }
        let base_children: Vec<(u8, ChildRef<'_, V>)> = base.map(|b| b.children().collect()).unwrap_or_default();
        for (byte, child) in children {
            if !full {
                out.push(byte);
            }
            let base_child = base_node_at(&base_children, byte);
            self.encode_child(node, &child, base_child, depth, inline_depth, out, refs)?;
        }
        Ok(())
    }

    /// One child slot's encoding (after its branch byte).
    #[expect(clippy::too_many_arguments, reason = "the walk's state, passed down")]
    fn encode_child<V: Codec>(
        &mut self,
        parent: NodeRef<'_, V>,
        child: &ChildRef<'_, V>,
        base_child: Option<NodeRef<'_, V>>,
        depth: usize,
        inline_depth: usize,
        out: &mut Vec<u8>,
        refs: &mut RefState,
    ) -> Result<()> {
        match child {
            ChildRef::Leaf { suffix, value } => {
                out.put_varint((suffix.len() as u64) << 2 | CHILD_LEAF);
                out.extend_from_slice(suffix);
                value.encode(out);
            }
            &ChildRef::Node(child) => {
                let child_depth = depth + 1;
                let own_blob = child_depth == self.depth_threshold
                    || (child_depth > self.depth_threshold
                        && (parent.len() > BLOB_ENTRIES_MAX || inline_depth >= INLINE_DEPTH_MAX));
                if own_blob {
                    let (seq, index) = self.blob_for(child, base_child, child_depth)?;
                    put_ref(out, refs, seq, index, CHILD_REF);
                } else {
                    out.put_varint(CHILD_NODE);
                    let inline = if child_depth < self.depth_threshold { 0 } else { inline_depth + 1 };
                    self.encode_node(child, base_child, child_depth, inline, out, refs)?;
                }
            }
        }
        Ok(())
    }

    /// The reference of the blob rooted at `node`: its checkpoint reference
    /// if unchanged in this generation, else a newly written blob — a delta
    /// against `base`'s blob when few children changed, else whole.
    fn blob_for<V: Codec>(
        &mut self,
        node: NodeRef<'_, V>,
        base: Option<NodeRef<'_, V>>,
        depth: usize,
    ) -> Result<(Seq, u64)> {
        if let Some((seq, index)) = self.reusable(node) {
            self.stats.reused += 1;
            return Ok((seq, index));
        }
        let mut blob = Vec::new();
        let mut refs = RefState::default();
        let base = base.and_then(|b| self.reusable(b).map(|r| (b, r)));
        let delta = match base {
            Some((b, r)) => self.encode_delta(node, b, r, depth, &mut blob, &mut refs)?,
            None => false,
        };
        if delta {
            self.stats.deltas += 1;
        } else {
            blob.clear();
            refs = RefState::default();
            self.encode_node(node, base.map(|(b, _)| b), depth, 0, &mut blob, &mut refs)?;
        }
        let (seq, index) = self.push(&blob)?;
        let index = index as u64; // under BLOBS_PER_RECORD_MAX
        self.written.insert(node.id(), pack_ref(self.generation, seq, index));
        Ok((seq, index))
    }

    /// `node`'s blob reference if a checkpoint of this generation set it
    /// (so its subtree is what that blob holds).
    fn reusable<V>(&self, node: NodeRef<'_, V>) -> Option<(Seq, u64)> {
        let reference = node.checkpoint_ref();
        if reference != 0 && Some(reference >> 48) == self.reuse_tag {
            let (_, seq, index) = unpack_ref(reference);
            Some((seq, index))
        } else {
            None
        }
    }

    /// Encode `node` as its header, `base`'s blob reference and the child
    /// slots that differ from `base`'s. False (nothing useful in `out`)
    /// when more than a third of the slots changed: a whole blob is then
    /// about as small and needs no base to read.
    fn encode_delta<V: Codec>(
        &mut self,
        node: NodeRef<'_, V>,
        base: NodeRef<'_, V>,
        (base_seq, base_index): (Seq, u64),
        depth: usize,
        out: &mut Vec<u8>,
        refs: &mut RefState,
    ) -> Result<bool> {
        let children: Vec<(u8, ChildRef<'_, V>)> = node.children().collect();
        let base_children: Vec<(u8, ChildRef<'_, V>)> = base.children().collect();
        let mut changes: Vec<(u8, Option<ChildRef<'_, V>>)> = Vec::new();
        let (mut now_slots, mut then_slots) = (children.iter().peekable(), base_children.iter().peekable());
        let (mut value_now, mut value_then) = (Vec::new(), Vec::new());
        let mut inherited = 0;
        loop {
            match (now_slots.peek(), then_slots.peek()) {
                (None, None) => break,
                (Some(&&(byte, _)), Some(&&(gone, _))) if byte > gone => {
                    changes.push((gone, None));
                    then_slots.next();
                }
                (None, Some(&&(gone, _))) => {
                    changes.push((gone, None));
                    then_slots.next();
                }
                (Some(&&(byte, ref now)), then) => {
                    let then = then.filter(|slot| slot.0 == byte).map(|slot| &slot.1);
                    let same = match (now, then) {
                        (ChildRef::Node(node_now), Some(ChildRef::Node(node_then))) => node_now.id() == node_then.id(),
                        (ChildRef::Leaf { suffix, value }, Some(ChildRef::Leaf { suffix: s2, value: v2 })) => {
                            value_now.clear();
                            value_then.clear();
                            value.encode(&mut value_now);
                            v2.encode(&mut value_then);
                            suffix == s2 && value_now == value_then
                        }
                        _ => false,
                    };
                    if !same {
                        changes.push((byte, Some(clone_child(now))));
                    } else if matches!(now, ChildRef::Node(_)) {
                        inherited += 1;
                    }
                    now_slots.next();
                    if then.is_some() {
                        then_slots.next();
                    }
                }
            }
        }
        if changes.len() * 3 > children.len() {
            return Ok(false);
        }
        self.stats.reused += inherited;
        encode_header(node, NODE_DELTA, out);
        put_ref(out, refs, base_seq, base_index, 0);
        out.put_varint(changes.len() as u64);
        for (byte, change) in changes {
            out.push(byte);
            match change {
                None => out.put_varint(CHILD_REMOVED),
                Some(child) => {
                    let base_child = base_node_at(&base_children, byte);
                    self.encode_child(node, &child, base_child, depth, 0, out, refs)?;
                }
            }
        }
        Ok(true)
    }

    fn push(&mut self, blob: &[u8]) -> Result<(Seq, usize)> {
        if self.blobs_in_record > 0
            && (self.record.len() + blob.len() > RECORD_BYTES_TARGET || self.blobs_in_record == BLOBS_PER_RECORD_MAX)
        {
            self.flush()?;
        }
        if self.next_seq > BLOB_SEQ_MAX {
            return Err(DurableError::ReferenceLimit { log: self.log.clone(), seq: self.next_seq });
        }
        self.record.put_varint(blob.len() as u64);
        self.record.extend_from_slice(blob);
        self.blobs_in_record += 1;
        self.stats.blobs += 1;
        Ok((self.next_seq, self.blobs_in_record - 1))
    }

    pub(super) fn flush(&mut self) -> Result<()> {
        if self.blobs_in_record == 0 {
            return Ok(());
        }
        let mut record = vec![FORMAT_VERSION];
        record.put_varint(self.blobs_in_record as u64);
        record.append(&mut self.record);
        let record = seal(record);
        let seq = self.ns.append_if(&self.log, self.next_seq - 1, &record)?;
        debug_assert_eq!(seq, self.next_seq, "append_if lands at the expected seq");
        self.stats.records += 1;
        self.stats.blob_bytes += record.len() as u64;
        self.next_seq += 1;
        self.blobs_in_record = 0;
        Ok(())
    }
}

pub(super) fn encode_batch<V: Codec>(ops: &[BatchOp<V>]) -> Vec<u8> {
    let mut out = vec![FORMAT_VERSION];
    out.put_varint(ops.len() as u64);
    for op in ops {
        match op {
            BatchOp::Put(key, value) => {
                out.push(OP_PUT);
                out.put_varint(key.len() as u64);
                out.extend_from_slice(key);
                value.encode(&mut out);
            }
            BatchOp::Delete(key) => {
                out.push(OP_DELETE);
                out.put_varint(key.len() as u64);
                out.extend_from_slice(key);
            }
        }
    }
    seal(out)
}

pub(super) fn encode_manifest(header: &Committed, top: &[u8]) -> Vec<u8> {
    let mut out = vec![FORMAT_VERSION];
    for v in [
        header.number,
        header.generation,
        header.batch_generation,
        header.batch_seq,
        header.checkpoints_in_generation,
        header.generation_full_bytes,
        header.generation_bytes,
    ] {
        out.put_varint(v);
    }
    out.extend_from_slice(top);
    seal(out)
}
