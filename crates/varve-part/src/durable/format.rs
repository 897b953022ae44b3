//! What the encoder and decoder share, so the two sides of the byte format
//! agree by construction: the record and slot tags, zigzag (integers and
//! LEB128 varints are [`varve_log::codec`]'s), the CRC32C seal, packed blob references and the running reference state
//! of a blob, and the manifest header. The normative layout is
//! `docs/design.md` ("PART checkpoints"); `tests/durable_format.rs` freezes it.

use varve_log::codec::ByteWriter;
use varve_log::Seq;

use super::{BLOBS_PER_RECORD_MAX, BLOB_SEQ_MAX};

/// The committed checkpoint in force (decoded manifest header).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Committed {
    pub(super) number: u64,
    pub(super) generation: u64,
    pub(super) batch_generation: u64,
    pub(super) batch_seq: Seq,
    pub(super) checkpoints_in_generation: u64,
    pub(super) generation_full_bytes: u64,
    pub(super) generation_bytes: u64,
}

/// The 16 low bits of a generation, stored in packed references.
///
/// Why 16 bits are enough: a reference is only trusted when its tag equals
/// the current generation's, and every committed full checkpoint rewrites
/// every node and re-tags it, so any node of the live map carries a tag of
/// the generation of the last committed full checkpoint or later — never
/// one 2^16 generations old.
pub(super) fn generation_tag(generation: u64) -> u64 {
    generation & 0xFFFF
}

pub(super) fn pack_ref(generation: u64, seq: Seq, index: u64) -> u64 {
    debug_assert!((1..=BLOB_SEQ_MAX).contains(&seq) && index <= BLOBS_PER_RECORD_MAX as u64);
    (generation_tag(generation) << 48) | (seq << 16) | index
}

pub(super) fn unpack_ref(reference: u64) -> (u64, Seq, u64) {
    (reference >> 48, (reference >> 16) & BLOB_SEQ_MAX, reference & 0xFFFF)
}

pub(super) const TOP_EMPTY: u8 = 0;
pub(super) const TOP_LEAF: u8 = 1;
pub(super) const TOP_NODE: u8 = 2;
pub(super) const CHILD_LEAF: u64 = 0;
pub(super) const CHILD_NODE: u64 = 1;
pub(super) const CHILD_REF: u64 = 2;
pub(super) const NODE_HAS_VALUE: u8 = 1;
pub(super) const NODE_FULL_256: u8 = 2;
pub(super) const NODE_DELTA: u8 = 4;
pub(super) const CHILD_REMOVED: u64 = 3;
/// A blob holds at most this many levels of inline nodes below its root;
/// deeper nodes are blobs of their own (bounds decoder recursion per blob).
pub(super) const INLINE_DEPTH_MAX: usize = 32;
pub(super) const OP_PUT: u8 = 0;
pub(super) const OP_DELETE: u8 = 1;

pub(super) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)).cast_unsigned()
}

pub(super) fn unzigzag(v: u64) -> i64 {
    (v >> 1).cast_signed() ^ -(v & 1).cast_signed()
}

pub(super) fn seal(mut record: Vec<u8>) -> Vec<u8> {
    let crc = crc32c::crc32c(&record);
    record.put_u32(crc);
    record
}

/// The previous reference written in the current blob (deltas are taken
/// from it): the encoder and decoder visit children in the same order.
#[derive(Default)]
pub(super) struct RefState {
    pub(super) seq: Seq,
    pub(super) index: u64,
}
