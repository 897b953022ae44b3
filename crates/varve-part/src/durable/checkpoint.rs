//! A checkpoint off the map's thread: [`CheckpointJob`] (a snapshot and
//! the batch position it covers) writes the blobs of every changed subtree
//! and syncs them, giving a [`WrittenCheckpoint`] for
//! [`DurableMap::commit_checkpoint`](super::DurableMap::commit_checkpoint);
//! after the commit, [`mark_written`] records each written blob root's
//! reference in the tree so the next checkpoint can reuse it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use varve_log::codec::ByteWriter;
use varve_log::Namespace;

use super::encode::Writer;
use super::format::{generation_tag, Committed, RefState, TOP_EMPTY, TOP_LEAF, TOP_NODE};
use super::{blobs_log, with_deep_stack, CheckpointStats, Codec, Result};
use crate::map::Snapshot;
use crate::raw::{self, ChildRef, NodeRef};

/// Clears the map's in-flight flag when the job (or its written form) drops.
pub(super) struct InFlight(pub(super) Arc<AtomicBool>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// A checkpoint in progress: a snapshot and the batch position it covers.
/// `Send`: [`CheckpointJob::write`] may run on any thread while the map
/// goes on applying batches.
pub struct CheckpointJob<V> {
    pub(super) ns: Arc<dyn Namespace>,
    pub(super) name: String,
    pub(super) snapshot: Snapshot<V>,
    pub(super) base: Option<Snapshot<V>>,
    pub(super) header: Committed,
    pub(super) full: bool,
    pub(super) depth_threshold: usize,
    pub(super) in_flight: InFlight,
}

/// A checkpoint whose blobs are durable, ready for
/// [`DurableMap::commit_checkpoint`](super::DurableMap::commit_checkpoint).
pub struct WrittenCheckpoint<V> {
    pub(super) job: CheckpointJob<V>,
    pub(super) top: Vec<u8>,
    pub(super) stats: CheckpointStats,
    /// Blob roots written: node id → packed reference.
    pub(super) written: HashMap<usize, u64>,
}

impl<V> WrittenCheckpoint<V> {
    /// What the blobs cost (the manifest is counted at commit).
    #[must_use]
    pub fn stats(&self) -> CheckpointStats {
        self.stats
    }
}

impl<V: Codec + Clone + Send + Sync> CheckpointJob<V> {
    /// Tag a reference must carry to be reused; `None` for full checkpoints.
    pub(super) fn clean_tag(&self) -> u64 {
        generation_tag(self.header.generation)
    }

    /// Write the blobs of every subtree changed since the previous
    /// checkpoint of this generation (all of them for a full one) and make
    /// them durable (`sync`). Nothing is in force until
    /// [`DurableMap::commit_checkpoint`](super::DurableMap::commit_checkpoint).
    pub fn write(self) -> Result<WrittenCheckpoint<V>> {
        let log = blobs_log(&self.name, self.header.generation);
        let next_seq = self.ns.latest(&log)? + 1;
        let mut writer = Writer {
            ns: self.ns.as_ref(),
            log,
            generation: self.header.generation,
            reuse_tag: if self.full { None } else { Some(self.clean_tag()) },
            depth_threshold: self.depth_threshold,
            next_seq,
            record: Vec::new(),
            blobs_in_record: 0,
            stats: CheckpointStats {
                full: self.full,
                generation: self.header.generation,
                ..CheckpointStats::default()
            },
            written: HashMap::new(),
        };
        let mut top = Vec::new();
        with_deep_stack(|| self.encode_top(&mut writer, &mut top))?;
        writer.flush()?;
        self.ns.sync()?;
        let (stats, written) = (writer.stats, writer.written);
        Ok(WrittenCheckpoint { job: self, top, stats, written })
    }

    /// Encode the top into `top`, writing blobs through `writer`.
    fn encode_top(&self, writer: &mut Writer<'_>, top: &mut Vec<u8>) -> Result<()> {
        match raw::root(&self.snapshot) {
            None => top.push(TOP_EMPTY),
            Some(ChildRef::Leaf { suffix, value }) => {
                top.push(TOP_LEAF);
                top.put_varint(suffix.len() as u64);
                top.extend_from_slice(suffix);
                value.encode(top);
            }
            Some(ChildRef::Node(node)) => {
                top.push(TOP_NODE);
                let mut refs = RefState::default();
                let base = match self.base.as_ref().and_then(|b| raw::root(b)) {
                    Some(ChildRef::Node(base)) => Some(base),
                    _ => None,
                };
                writer.encode_node(node, base, 0, 0, top, &mut refs)?;
            }
        }
        Ok(())
    }
}

/// After commit: set the reference of every blob root the job wrote. Only
/// descends into subtrees that were not reused (those hold no written node).
pub(super) fn mark_written<V>(node: NodeRef<'_, V>, written: &HashMap<usize, u64>, tag: u64) {
    if let Some(&reference) = written.get(&node.id()) {
        node.set_checkpoint_ref(reference);
    }
    for (_, child) in node.children() {
        if let ChildRef::Node(child) = child {
            let r = child.checkpoint_ref();
            if r != 0 && r >> 48 == tag && !written.contains_key(&child.id()) {
                continue; // reused subtree
            }
            mark_written(child, written, tag);
        }
    }
}
