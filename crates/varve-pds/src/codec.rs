//! Byte formats of the entries `PEDaLS` writes (Table I of the paper, plus the
//! op log and the meta record). Every integer is **little-endian**
//! ([`varve_log::codec`] reads and writes them); every entry starts with a
//! format byte (`1`) so a future format is a conscious change.
//!
//! | log | layout (bytes) |
//! |---|---|
//! | DataLog `pds.<s>.data` | `1` · vs u64 · val_len u32 · val · link_len u16 · link (UTF-8 log name) |
//! | LinkLog `pds.<s>.link.<dseq>` | `1` · vs u64 · dseq u64 · lseq u64 · rem u32 · type u8 (30 bytes) |
//! | APLog `pds.<s>.ap` | `1` · vs u64 · dseq u64 · lseq u64 (25 bytes) |
//! | op log `pds.<s>.ops` | `1` · vs u64 · op u8 · a_len u32 · a · b_len u32 · b |
//! | meta `pds.<s>.meta` | `1` · kind u8 · extra u32 · keep u64 (0 = unbounded) |
//!
//! LinkLog `type`: 0 = left, 1 = right, 2 = next (list), 3 = color (red-black
//! tree; the colour travels in `dseq`: 0 red, 1 black, and `lseq` is 0).
//! Seq 0 in `dseq`/`lseq` is the null node, as in the paper.

use std::fmt;

use bytes::Bytes;
use varve_log::codec::{ByteReader, ByteWriter, ReadError};
use varve_log::Seq;

use crate::error::{PdsError, Result};
use crate::Version;

const FORMAT: u8 = 1;

/// Which pointer (or versioned scalar) a LinkLog entry sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldKind {
    /// A tree node's left child (`L`).
    Left = 0,
    /// A tree node's right child (`R`).
    Right = 1,
    /// A list node's successor (`N`).
    Next = 2,
    /// A red-black node's colour (`C`), a versioned scalar: `dseq` 0 is red, 1
    /// black; `lseq` is 0.
    Color = 3,
}

impl FieldKind {
    fn from_u8(b: u8) -> Option<FieldKind> {
        Some(match b {
            0 => FieldKind::Left,
            1 => FieldKind::Right,
            2 => FieldKind::Next,
            3 => FieldKind::Color,
            _ => return None,
        })
    }

    /// The paper's letter for the type column.
    #[must_use]
    pub fn letter(self) -> &'static str {
        match self {
            FieldKind::Left => "L",
            FieldKind::Right => "R",
            FieldKind::Next => "N",
            FieldKind::Color => "C",
        }
    }
}

/// A DataLog entry: a node's constant contents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataEntry {
    /// The version whose update created the node.
    pub vs: Version,
    /// The node's constant contents: `key_len u32 · key · value` in a tree
    /// (key and value encoded by [`crate::key`]), the encoded item in a list.
    pub val: Bytes,
    /// The name of the node's LinkLog, `pds.<s>.link.<dseq>`.
    pub link: String,
}

/// A LinkLog entry: one pointer of one node copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkEntry {
    /// The version that wrote the entry; a reader of an earlier version stops
    /// before it.
    pub vs: Version,
    /// DataLog seq of the node pointed to (0: null); for `Color`, the colour.
    pub dseq: Seq,
    /// First LinkLog seq of the pointed-to node's copy in use (0: null, and
    /// always 0 for `Color`).
    pub lseq: Seq,
    /// Update entries the copy has room for after this one: `extra` on the
    /// copy's original entries, counting down to 0, which ends the copy.
    pub rem: u32,
    /// Which field the entry sets.
    pub kind: FieldKind,
}

/// An APLog entry: the root of one version. Its append commits the version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApEntry {
    /// The version this entry commits; also its seq in the APLog.
    pub vs: Version,
    /// DataLog seq of the version's root node (0: the version is empty).
    pub dseq: Seq,
    /// First LinkLog seq of the root's copy in use (0: the version is empty).
    pub lseq: Seq,
}

/// An op-log entry: an update requested at version `vs`, logged before it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpEntry {
    /// The version the update commits as: the latest committed version plus 1.
    pub vs: Version,
    /// Which update: 1 insert, 2 delete (trees); 3 push back, 4 push front,
    /// 5 insert after, 6 remove value, 7 remove at (list).
    pub op: u8,
    /// First argument: the encoded key (trees), or the list position as a
    /// little-endian `u64` (insert after, remove at); empty when unused.
    pub a: Vec<u8>,
    /// Second argument: the encoded value or list item; empty when unused.
    pub b: Vec<u8>,
}

/// The structure's configuration, the first record of its meta log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetaEntry {
    /// The structure: 1 BST, 2 list, 3 balanced (red-black) tree.
    pub kind: u8,
    /// Extra pointers per node, the paper's `e` (1..=[`EXTRA_MAX`](crate::EXTRA_MAX)).
    pub extra: u32,
    /// Versions kept before updates are refused; 0 means unbounded.
    pub keep: u64,
}

/// Why an entry's bytes are not an entry of its kind; [`decode_entry`]
/// turns it into [`PdsError::Corrupt`] naming the log and seq.
enum Malformed {
    /// Too short, or bytes after the last field.
    Bytes(ReadError),
    /// The fields read but break a rule (unknown format byte or type, bad UTF-8).
    Field(String),
}

impl From<ReadError> for Malformed {
    #[cold]
    fn from(error: ReadError) -> Malformed {
        Malformed::Bytes(error)
    }
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Malformed::Bytes(error) => error.fmt(f),
            Malformed::Field(reason) => f.write_str(reason),
        }
    }
}

/// Decode the entry `bytes` (of `log` at `seq`): its format byte, the fields
/// `fields` reads, and nothing after them.
#[inline]
fn decode_entry<'a, T>(
    bytes: &'a [u8],
    log: &str,
    seq: Seq,
    fields: impl FnOnce(&mut ByteReader<'a>) -> Result<T, Malformed>,
) -> Result<T> {
    read_entry(ByteReader::new(bytes), fields).map_err(|malformed| PdsError::Corrupt {
        log: log.to_owned(),
        seq,
        reason: malformed.to_string(),
    })
}

#[inline]
fn read_entry<'a, T>(
    mut reader: ByteReader<'a>,
    fields: impl FnOnce(&mut ByteReader<'a>) -> Result<T, Malformed>,
) -> Result<T, Malformed> {
    let format = reader.u8()?;
    if format != FORMAT {
        return Err(Malformed::Field(format!("unknown entry format {format}")));
    }
    let entry = fields(&mut reader)?;
    reader.finish()?;
    Ok(entry)
}

fn len_u32(n: usize) -> u32 {
    u32::try_from(n).expect("entries are far below 4 GiB (the log's record limit is 16 MiB)")
}

impl DataEntry {
    /// # Panics
    ///
    /// If `val` is 4 GiB or more (the log's record limit is far lower).
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(15 + self.val.len() + self.link.len());
        out.put_u8(FORMAT);
        out.put_u64(self.vs);
        out.put_u32(len_u32(self.val.len()));
        out.put_bytes(&self.val);
        out.put_u16(u16::try_from(self.link.len()).expect("log names are <= 200 bytes"));
        out.put_bytes(self.link.as_bytes());
        out
    }

    /// The entry in `bytes`; its `val` shares `bytes` (no copy).
    pub fn decode(bytes: &Bytes, log: &str, seq: Seq) -> Result<DataEntry> {
        decode_entry(bytes, log, seq, |r| {
            let vs = r.u64()?;
            let val = r.bytes_u32()?;
            let val = bytes.slice_ref(val);
            let link = std::str::from_utf8(r.bytes_u16()?).map_err(|e| Malformed::Field(format!("link name: {e}")))?;
            Ok(DataEntry { vs, val, link: link.to_owned() })
        })
    }
}

impl LinkEntry {
    /// The entry's bytes: always 30.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(30);
        out.put_u8(FORMAT);
        out.put_u64(self.vs);
        out.put_u64(self.dseq);
        out.put_u64(self.lseq);
        out.put_u32(self.rem);
        out.put_u8(self.kind as u8);
        out
    }

    /// The entry in `bytes`, read from `log` at `seq`; [`PdsError::Corrupt`]
    /// naming them if the bytes are not a LinkLog entry.
    pub fn decode(bytes: &[u8], log: &str, seq: Seq) -> Result<LinkEntry> {
        decode_entry(bytes, log, seq, |r| {
            let (vs, dseq, lseq, rem) = (r.u64()?, r.u64()?, r.u64()?, r.u32()?);
            let kind_byte = r.u8()?;
            let kind = FieldKind::from_u8(kind_byte)
                .ok_or_else(|| Malformed::Field(format!("unknown link type {kind_byte}")))?;
            Ok(LinkEntry { vs, dseq, lseq, rem, kind })
        })
    }
}

impl ApEntry {
    /// The entry's bytes: always 25.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(25);
        out.put_u8(FORMAT);
        out.put_u64(self.vs);
        out.put_u64(self.dseq);
        out.put_u64(self.lseq);
        out
    }

    /// The entry in `bytes`, read from `log` at `seq`; [`PdsError::Corrupt`]
    /// naming them if the bytes are not an APLog entry.
    pub fn decode(bytes: &[u8], log: &str, seq: Seq) -> Result<ApEntry> {
        decode_entry(bytes, log, seq, |r| Ok(ApEntry { vs: r.u64()?, dseq: r.u64()?, lseq: r.u64()? }))
    }
}

impl OpEntry {
    /// The entry's bytes: 18 plus the lengths of `a` and `b`.
    ///
    /// # Panics
    ///
    /// If `a` or `b` is 4 GiB or more (the log's record limit is far lower).
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(18 + self.a.len() + self.b.len());
        out.put_u8(FORMAT);
        out.put_u64(self.vs);
        out.put_u8(self.op);
        out.put_u32(len_u32(self.a.len()));
        out.put_bytes(&self.a);
        out.put_u32(len_u32(self.b.len()));
        out.put_bytes(&self.b);
        out
    }

    /// The entry in `bytes`, read from `log` at `seq`; [`PdsError::Corrupt`]
    /// naming them if the bytes are not an op-log entry.
    pub fn decode(bytes: &[u8], log: &str, seq: Seq) -> Result<OpEntry> {
        decode_entry(bytes, log, seq, |r| {
            let vs = r.u64()?;
            let op = r.u8()?;
            let a = r.bytes_u32()?;
            let b = r.bytes_u32()?;
            Ok(OpEntry { vs, op, a: a.to_vec(), b: b.to_vec() })
        })
    }
}

impl MetaEntry {
    /// The entry's bytes: always 14.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(14);
        out.put_u8(FORMAT);
        out.put_u8(self.kind);
        out.put_u32(self.extra);
        out.put_u64(self.keep);
        out
    }

    /// The entry in `bytes`, read from `log` at `seq`; [`PdsError::Corrupt`]
    /// naming them if the bytes are not a meta entry.
    pub fn decode(bytes: &[u8], log: &str, seq: Seq) -> Result<MetaEntry> {
        decode_entry(bytes, log, seq, |r| Ok(MetaEntry { kind: r.u8()?, extra: r.u32()?, keep: r.u64()? }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_are_little_endian() {
        let link = LinkEntry { vs: 4, dseq: 3, lseq: 1, rem: 1, kind: FieldKind::Left };
        let bytes = link.encode();
        assert_eq!(bytes.len(), 30);
        assert_eq!(&bytes[..9], &[1, 4, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(LinkEntry::decode(&bytes, "l", 1).expect("decode"), link);
        let ap = ApEntry { vs: 4, dseq: 1, lseq: 4 };
        assert_eq!(ApEntry::decode(&ap.encode(), "ap", 4).expect("decode"), ap);
        let data = DataEntry { vs: 1, val: Bytes::from_static(b"\x07"), link: "pds.demo.link.1".into() };
        assert_eq!(DataEntry::decode(&Bytes::from(data.encode()), "d", 1).expect("decode"), data);
        let op = OpEntry { vs: 9, op: 2, a: vec![1, 2], b: vec![] };
        assert_eq!(OpEntry::decode(&op.encode(), "o", 1).expect("decode"), op);
    }

    #[test]
    fn damage_is_a_typed_error_naming_log_and_seq() {
        let mut bytes = LinkEntry { vs: 1, dseq: 0, lseq: 0, rem: 1, kind: FieldKind::Right }.encode();
        bytes[29] = 9;
        let err = LinkEntry::decode(&bytes, "pds.x.link.1", 7).expect_err("bad type");
        assert!(matches!(&err, PdsError::Corrupt { log, seq: 7, .. } if log == "pds.x.link.1"), "{err}");
        let err = ApEntry::decode(&bytes[..10], "pds.x.ap", 3).expect_err("truncated");
        assert!(matches!(err, PdsError::Corrupt { seq: 3, .. }));
        assert_eq!(
            err.to_string(),
            "corrupt entry in log \"pds.x.ap\" at seq 3: 8 bytes needed at byte offset 9, only 1 left"
        );
        let err = ApEntry::decode(&[2], "pds.x.ap", 4).expect_err("format");
        assert!(err.to_string().ends_with("unknown entry format 2"), "{err}");
    }
}
