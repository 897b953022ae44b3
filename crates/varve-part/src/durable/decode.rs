//! Decoding: batch, blob and manifest records back into batches and a
//! tree. Every read is bounds-checked ([`varve_log::codec`]); bad bytes are
//! errors, not panics.

use std::collections::HashMap;

use bytes::Bytes;
use varve_log::codec::{ByteReader, ReadError};
use varve_log::{Namespace, Seq};

use super::format::{
    pack_ref, unzigzag, Committed, RefState, CHILD_LEAF, CHILD_NODE, CHILD_REF, CHILD_REMOVED, NODE_DELTA,
    NODE_FULL_256, NODE_HAS_VALUE, OP_DELETE, OP_PUT, TOP_EMPTY, TOP_LEAF, TOP_NODE,
};
use super::{
    blobs_log, manifest_log, Codec, DurableError, Result, BLOBS_PER_RECORD_MAX, BLOB_SEQ_MAX, FORMAT_VERSION,
    TREE_DEPTH_MAX,
};
use crate::map::{ArtMap, BatchOp};
use crate::raw::{self, OwnedChild};

/// A decode failure before it is placed in a log.
#[derive(Debug)]
pub(crate) enum DecodeError {
    Corrupt { offset: usize, reason: String },
    Version { found: u8 },
}

impl DecodeError {
    pub(super) fn at(self, log: &str, seq: Seq) -> DurableError {
        match self {
            DecodeError::Corrupt { offset, reason } => {
                DurableError::Corrupt { log: log.to_owned(), seq, offset, reason }
            }
            DecodeError::Version { found } => {
                DurableError::Version { log: log.to_owned(), seq, found, expected: FORMAT_VERSION }
            }
        }
    }
}

/// A [`ByteReader`] over a record, or over one blob of a blob record, whose
/// errors carry their offset in the record.
struct Reader<'a> {
    bytes: ByteReader<'a>,
    /// Offset of the reader's first byte in its record (a blob's start).
    base: usize,
}

impl<'a> Reader<'a> {
    /// A reader of the bytes at offset `base` of their record.
    fn new(bytes: &'a [u8], base: usize) -> Self {
        Reader { bytes: ByteReader::new(bytes), base }
    }
    fn corrupt(&self, reason: impl Into<String>) -> DecodeError {
        DecodeError::Corrupt { offset: self.base + self.bytes.position(), reason: reason.into() }
    }
    /// The one place a [`ReadError`] becomes a [`DecodeError`]: its offset
    /// moved from the reader's bytes to the record.
    #[cold]
    fn read_failed(base: usize, error: ReadError) -> DecodeError {
        DecodeError::Corrupt { offset: base + error.offset, reason: error.kind.to_string() }
    }
    fn byte(&mut self) -> Result<u8, DecodeError> {
        let base = self.base;
        self.bytes.u8().map_err(|e| Self::read_failed(base, e))
    }
    fn varint(&mut self) -> Result<u64, DecodeError> {
        let base = self.base;
        self.bytes.varint().map_err(|e| Self::read_failed(base, e))
    }
    /// A varint length or count of things still to come, each at least a
    /// byte: bounded by the bytes left, so it can size an allocation.
    fn len(&mut self) -> Result<usize, DecodeError> {
        let v = self.varint()?;
        usize::try_from(v)
            .ok()
            .filter(|&n| n <= self.bytes.remaining())
            .ok_or_else(|| self.corrupt(format!("length {v} past the end")))
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let base = self.base;
        self.bytes.take(n).map_err(|e| Self::read_failed(base, e))
    }
    fn value<V: Codec>(&mut self) -> Result<V, DecodeError> {
        let mut rest = self.bytes.rest();
        let v = V::decode(&mut rest).ok_or_else(|| self.corrupt("value does not decode"))?;
        // `Codec::decode` advances `rest` past the value it read.
        let used = self
            .bytes
            .remaining()
            .checked_sub(rest.len())
            .ok_or_else(|| self.corrupt("value decoder grew its input"))?;
        self.take(used)?;
        Ok(v)
    }
    fn done(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// Check version and CRC32C; a reader of the body (between version byte
/// and CRC), past the version byte.
fn open_record(bytes: &[u8]) -> Result<Reader<'_>, DecodeError> {
    let too_short =
        || DecodeError::Corrupt { offset: 0, reason: format!("record of {} bytes is too short", bytes.len()) };
    let mut record = ByteReader::new(bytes);
    let body = record.take(bytes.len().saturating_sub(4)).ok().filter(|body| !body.is_empty()).ok_or_else(too_short)?;
    let stored = record.u32().map_err(|_| too_short())?;
    if crc32c::crc32c(body) != stored {
        return Err(DecodeError::Corrupt { offset: body.len(), reason: "CRC32C mismatch".into() });
    }
    let mut r = Reader::new(body, 0);
    let version = r.byte()?;
    if version != FORMAT_VERSION {
        return Err(DecodeError::Version { found: version });
    }
    Ok(r)
}

pub(crate) fn decode_batch<V: Codec>(bytes: &[u8]) -> Result<Vec<BatchOp<V>>, DecodeError> {
    let mut r = open_record(bytes)?;
    let count = r.len()?;
    let mut ops = Vec::with_capacity(count);
    for _ in 0..count {
        let tag = r.byte()?;
        let key_len = r.len()?;
        let key = r.take(key_len)?.to_vec();
        ops.push(match tag {
            OP_PUT => BatchOp::Put(key, r.value()?),
            OP_DELETE => BatchOp::Delete(key),
            other => return Err(r.corrupt(format!("unknown batch op {other}"))),
        });
    }
    if !r.done() {
        return Err(r.corrupt("trailing bytes after the batch"));
    }
    Ok(ops)
}

/// Blob records read so far: seq → (record bytes, offset of each blob).
struct BlobCache<'a> {
    ns: &'a dyn Namespace,
    log: String,
    generation: u64,
    records: HashMap<Seq, (Bytes, Vec<(usize, usize)>)>,
}

impl BlobCache<'_> {
    fn blob(&mut self, seq: Seq, index: u64) -> Result<(Bytes, usize)> {
        if !self.records.contains_key(&seq) {
            let bytes = self.ns.get(&self.log, seq)?;
            let offsets = blob_offsets(&bytes).map_err(|e| e.at(&self.log, seq))?;
            self.records.insert(seq, (bytes, offsets));
        }
        let (bytes, offsets) = &self.records[&seq];
        let &(start, end) =
            usize::try_from(index).ok().and_then(|i| offsets.get(i)).ok_or_else(|| DurableError::Corrupt {
                log: self.log.clone(),
                seq,
                offset: 0,
                reason: format!("reference to blob {index} of a record holding {}", offsets.len()),
            })?;
        Ok((bytes.slice(start..end), start))
    }
}

impl BlobCache<'_> {
    /// Decode blob (`seq`, `index`), a node at `depth`, into its parts.
    fn blob_parts<V: Codec + Clone>(&mut self, seq: Seq, index: u64, depth: usize) -> Result<Parts<V>> {
        let (blob, offset) = self.blob(seq, index)?;
        let log = self.log.clone();
        let mut reader = Reader::new(&blob, offset);
        let mut refs = RefState::default();
        let parts = decode_parts(&mut reader, &mut refs, self, depth, true, (&log, seq))?;
        if !reader.done() {
            return Err(reader.corrupt("trailing bytes after the blob's node").at(&log, seq));
        }
        Ok(parts)
    }
}

/// The (start, end) byte range of each blob of a blob record.
pub(crate) fn blob_offsets(bytes: &[u8]) -> Result<Vec<(usize, usize)>, DecodeError> {
    let mut r = open_record(bytes)?;
    let count = r.len()?;
    let mut offsets = Vec::with_capacity(count);
    for _ in 0..count {
        let len = r.len()?;
        let start = r.bytes.position();
        r.take(len)?;
        offsets.push((start, start + len));
    }
    if !r.done() {
        return Err(r.corrupt("trailing bytes after the last blob"));
    }
    Ok(offsets)
}

pub(super) fn load_checkpoint<V: Codec + Clone>(
    ns: &dyn Namespace,
    name: &str,
    bytes: &[u8],
    seq: Seq,
) -> Result<(Committed, ArtMap<V>)> {
    let log = manifest_log(name);
    let mut r = open_record(bytes).map_err(|e| e.at(&log, seq))?;
    let committed = read_header(&mut r).map_err(|e| e.at(&log, seq))?;
    let generation = committed.generation;
    let mut cache = BlobCache { ns, log: blobs_log(name, generation), generation, records: HashMap::new() };
    let tag = r.byte().map_err(|e| e.at(&log, seq))?;
    let root = match tag {
        TOP_EMPTY => None,
        TOP_LEAF => {
            let decode = |r: &mut Reader<'_>| -> Result<OwnedChild<V>, DecodeError> {
                let n = r.len()?;
                let suffix = r.take(n)?;
                Ok(raw::leaf(suffix, r.value()?))
            };
            Some(decode(&mut r).map_err(|e| e.at(&log, seq))?)
        }
        TOP_NODE => {
            let mut refs = RefState::default();
            Some(decode_node(&mut r, &mut refs, &mut cache, 0, 0, (&log, seq))?)
        }
        other => return Err(r.corrupt(format!("unknown top tag {other}")).at(&log, seq)),
    };
    if !r.done() {
        return Err(r.corrupt("trailing bytes after the top").at(&log, seq));
    }
    Ok((committed, raw::into_map(root)))
}

/// The manifest header: seven varints (`docs/design.md`, "PART checkpoints").
fn read_header(r: &mut Reader<'_>) -> Result<Committed, DecodeError> {
    let mut fields = [0u64; 7];
    for f in &mut fields {
        *f = r.varint()?;
    }
    let [number, generation, batch_generation, batch_seq, checkpoints_in_generation, generation_full_bytes, generation_bytes] =
        fields;
    Ok(Committed {
        number,
        generation,
        batch_generation,
        batch_seq,
        checkpoints_in_generation,
        generation_full_bytes,
        generation_bytes,
    })
}

/// The header of manifest record `seq` of map `name`, without loading its
/// tree (the checksum of the whole record is still checked).
pub(super) fn manifest_header(name: &str, bytes: &[u8], seq: Seq) -> Result<Committed> {
    let log = manifest_log(name);
    let mut r = open_record(bytes).map_err(|e| e.at(&log, seq))?;
    read_header(&mut r).map_err(|e| e.at(&log, seq))
}

/// A decoded node before it is built: prefix, value and child slots.
struct Parts<V> {
    prefix: Vec<u8>,
    value: Option<V>,
    children: Vec<(u8, OwnedChild<V>)>,
}

fn decode_node<V: Codec + Clone>(
    r: &mut Reader<'_>,
    refs: &mut RefState,
    cache: &mut BlobCache<'_>,
    depth: usize,
    reference: u64,
    at: (&str, Seq),
) -> Result<OwnedChild<V>> {
    let parts = decode_parts(r, refs, cache, depth, false, at)?;
    raw::node(&parts.prefix, parts.value, parts.children, reference)
        .map_err(|e| r.corrupt(format!("node does not build: {e}")).at(at.0, at.1))
}

/// Decode one node's parts; `blob_root` allows a delta node (whose base
/// blob is decoded and patched).
fn decode_parts<V: Codec + Clone>(
    r: &mut Reader<'_>,
    refs: &mut RefState,
    cache: &mut BlobCache<'_>,
    depth: usize,
    blob_root: bool,
    at: (&str, Seq),
) -> Result<Parts<V>> {
    let fail = |e: DecodeError| e.at(at.0, at.1);
    if depth >= TREE_DEPTH_MAX {
        return Err(r.corrupt("tree deeper than TREE_DEPTH_MAX (a reference cycle?)").at(at.0, at.1));
    }
    let prefix_len = r.len().map_err(fail)?;
    let prefix = r.take(prefix_len).map_err(fail)?.to_vec();
    let flags = r.byte().map_err(fail)?;
    let known = NODE_HAS_VALUE | NODE_FULL_256 | if blob_root { NODE_DELTA } else { 0 };
    if flags & !known != 0 || flags & (NODE_FULL_256 | NODE_DELTA) == NODE_FULL_256 | NODE_DELTA {
        return Err(r.corrupt(format!("unknown node flags {flags:#x}")).at(at.0, at.1));
    }
    let value = if flags & NODE_HAS_VALUE != 0 { Some(r.value().map_err(fail)?) } else { None };
    if flags & NODE_DELTA != 0 {
        let head = r.varint().map_err(fail)?;
        if head & 3 != 0 {
            return Err(r.corrupt("delta base is not a reference").at(at.0, at.1));
        }
        let (seq, index) = read_ref(r, refs, head).map_err(fail)?;
        let base: Parts<V> = cache.blob_parts(seq, index, depth + 1)?;
        let count = r.len().map_err(fail)?;
        let mut changes = Vec::with_capacity(count.min(256));
        for _ in 0..count {
            let byte = r.byte().map_err(fail)?;
            if changes.last().is_some_and(|&(last, _)| last >= byte) {
                return Err(r.corrupt("delta changes out of order").at(at.0, at.1));
            }
            let head = r.varint().map_err(fail)?;
            let child =
                if head & 3 == CHILD_REMOVED { None } else { Some(decode_child(r, refs, cache, depth, head, at)?) };
            changes.push((byte, child));
        }
        // Merge the changes (sorted by byte) into the base's slots.
        let mut children = Vec::with_capacity(base.children.len() + changes.len());
        let mut changes = changes.into_iter().peekable();
        for (byte, child) in base.children {
            while let Some((b, change)) = changes.next_if(|(b, _)| *b < byte) {
                if let Some(c) = change {
                    children.push((b, c));
                }
            }
            match changes.next_if(|(b, _)| *b == byte) {
                Some((_, Some(c))) => children.push((byte, c)),
                Some((_, None)) => {}
                None => children.push((byte, child)),
            }
        }
        children.extend(changes.filter_map(|(b, c)| c.map(|c| (b, c))));
        return Ok(Parts { prefix, value, children });
    }
    let full = flags & NODE_FULL_256 != 0;
    let count = if full { 256 } else { r.len().map_err(fail)? };
    if count > 256 {
        return Err(r.corrupt(format!("{count} children")).at(at.0, at.1));
    }
    let mut children = Vec::with_capacity(count);
    for i in 0..count {
        let byte = if full {
            u8::try_from(i).map_err(|_| r.corrupt("child index over 255").at(at.0, at.1))?
        } else {
            r.byte().map_err(fail)?
        };
        let head = r.varint().map_err(fail)?;
        children.push((byte, decode_child(r, refs, cache, depth, head, at)?));
    }
    Ok(Parts { prefix, value, children })
}

/// Read a reference whose head varint is `head` (see [`put_ref`]).
fn read_ref(r: &mut Reader<'_>, refs: &mut RefState, head: u64) -> Result<(Seq, u64), DecodeError> {
    let delta = unzigzag(head >> 2);
    let seq = refs
        .seq
        .checked_add_signed(delta)
        .filter(|&s| (1..=BLOB_SEQ_MAX).contains(&s))
        .ok_or_else(|| r.corrupt("reference seq out of range"))?;
    let index_field = r.varint()?;
    let index = if seq == refs.seq { refs.index.checked_add_signed(unzigzag(index_field)) } else { Some(index_field) };
    let index =
        index.filter(|&i| i < BLOBS_PER_RECORD_MAX as u64).ok_or_else(|| r.corrupt("reference index out of range"))?;
    refs.seq = seq;
    refs.index = index;
    Ok((seq, index))
}

/// One child slot whose head varint is `head`, of a node at `depth`.
fn decode_child<V: Codec + Clone>(
    r: &mut Reader<'_>,
    refs: &mut RefState,
    cache: &mut BlobCache<'_>,
    depth: usize,
    head: u64,
    at: (&str, Seq),
) -> Result<OwnedChild<V>> {
    let fail = |e: DecodeError| e.at(at.0, at.1);
    match head & 3 {
        CHILD_LEAF => {
            let n = usize::try_from(head >> 2)
                .ok()
                .filter(|&n| n <= r.bytes.remaining())
                .ok_or_else(|| r.corrupt("leaf suffix past the end").at(at.0, at.1))?;
            let suffix = r.take(n).map_err(fail)?;
            Ok(raw::leaf(suffix, r.value().map_err(fail)?))
        }
        CHILD_NODE => decode_node(r, refs, cache, depth + 1, 0, at),
        CHILD_REF => {
            let (seq, index) = read_ref(r, refs, head).map_err(fail)?;
            let parts = cache.blob_parts(seq, index, depth + 1)?;
            let packed = pack_ref(cache.generation, seq, index);
            raw::node(&parts.prefix, parts.value, parts.children, packed).map_err(|e| DurableError::Corrupt {
                log: cache.log.clone(),
                seq,
                offset: 0,
                reason: format!("blob {index} does not build a node: {e}"),
            })
        }
        _ => Err(r.corrupt(format!("child tag {} where a child is expected", head & 3)).at(at.0, at.1)),
    }
}

#[cfg(test)]
mod tests {
    use super::super::format::seal;
    use super::*;

    fn corrupt(error: DecodeError) -> (usize, String) {
        match error {
            DecodeError::Corrupt { offset, reason } => (offset, reason),
            DecodeError::Version { found } => panic!("expected Corrupt, got Version {found}"),
        }
    }

    #[test]
    fn read_errors_carry_their_offset_in_the_record() {
        let mut body = vec![FORMAT_VERSION];
        body.extend_from_slice(&[0xFF; 9]);
        body.push(0x7F);
        let err = decode_batch::<Vec<u8>>(&seal(body)).expect_err("overlong count");
        assert_eq!(corrupt(err), (1, "varint longer than 10 bytes or past 64 bits".into()));

        // A blob at offset 40 of its record.
        let mut blob = Reader::new(&[7, 5, 2], 40);
        assert_eq!(blob.byte().expect("a byte"), 7);
        let err = blob.take(3).expect_err("short");
        assert_eq!(corrupt(err), (41, "3 bytes needed, only 2 left".into()));
        let err = blob.len().map(|_| ()).expect_err("length past the end");
        assert_eq!(corrupt(err), (42, "length 5 past the end".into()));
    }
}
