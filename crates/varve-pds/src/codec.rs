//! Byte formats of the entries `PEDaLS` writes (Table I of the paper, plus the
//! op log and the meta record). Every integer is **little-endian**; every entry
//! starts with a format byte (`1`) so a future format is a conscious change.
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

use bytes::Bytes;
use varve_log::Seq;

use crate::error::{PdsError, Result};
use crate::Version;

const FORMAT: u8 = 1;

/// Which pointer (or versioned scalar) a LinkLog entry sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldKind {
    Left = 0,
    Right = 1,
    Next = 2,
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
    pub vs: Version,
    pub val: Bytes,
    pub link: String,
}

/// A LinkLog entry: one pointer of one node copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkEntry {
    pub vs: Version,
    pub dseq: Seq,
    pub lseq: Seq,
    pub rem: u32,
    pub kind: FieldKind,
}

/// An APLog entry: the root of one version. Its append commits the version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApEntry {
    pub vs: Version,
    pub dseq: Seq,
    pub lseq: Seq,
}

/// An op-log entry: an update requested at version `vs`, logged before it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpEntry {
    pub vs: Version,
    pub op: u8,
    pub a: Vec<u8>,
    pub b: Vec<u8>,
}

/// The structure's configuration, the first record of its meta log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetaEntry {
    pub kind: u8,
    pub extra: u32,
    pub keep: u64,
}

struct Reader<'a> {
    bytes: &'a [u8],
    log: &'a str,
    seq: Seq,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8], log: &'a str, seq: Seq) -> Result<Self> {
        let mut r = Reader { bytes, log, seq };
        let format = r.take(1)?[0];
        if format != FORMAT {
            return Err(r.corrupt(format!("unknown entry format {format}")));
        }
        Ok(r)
    }
    fn corrupt(&self, reason: String) -> PdsError {
        PdsError::Corrupt { log: self.log.to_owned(), seq: self.seq, reason }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.bytes.len() < n {
            return Err(self.corrupt(format!("entry truncated: needs {n} more bytes, {} left", self.bytes.len())));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().expect("2 bytes")))
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }
    fn blob32(&mut self) -> Result<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn finish(self) -> Result<()> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(self.corrupt(format!("{} trailing bytes", self.bytes.len())))
        }
    }
}

fn len_u32(n: usize) -> [u8; 4] {
    u32::try_from(n).expect("entries are far below 4 GiB (the log's record limit is 16 MiB)").to_le_bytes()
}

impl DataEntry {
    /// # Panics
    ///
    /// If `val` is 4 GiB or more (the log's record limit is far lower).
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(15 + self.val.len() + self.link.len());
        out.push(FORMAT);
        out.extend_from_slice(&self.vs.to_le_bytes());
        out.extend_from_slice(&len_u32(self.val.len()));
        out.extend_from_slice(&self.val);
        out.extend_from_slice(&u16::try_from(self.link.len()).expect("log names are <= 200 bytes").to_le_bytes());
        out.extend_from_slice(self.link.as_bytes());
        out
    }

    /// # Panics
    ///
    /// Never: every slice is length-checked first.
    pub fn decode(bytes: &Bytes, log: &str, seq: Seq) -> Result<DataEntry> {
        let mut r = Reader::new(bytes, log, seq)?;
        let vs = r.u64()?;
        let val_len = r.u32()? as usize;
        let start = 13;
        r.take(val_len)?;
        let val = bytes.slice(start..start + val_len);
        let link_len = usize::from(r.u16()?);
        let link = std::str::from_utf8(r.take(link_len)?).map_err(|e| r.corrupt(format!("link name: {e}")))?.to_owned();
        r.finish()?;
        Ok(DataEntry { vs, val, link })
    }
}

impl LinkEntry {
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(30);
        out.push(FORMAT);
        out.extend_from_slice(&self.vs.to_le_bytes());
        out.extend_from_slice(&self.dseq.to_le_bytes());
        out.extend_from_slice(&self.lseq.to_le_bytes());
        out.extend_from_slice(&self.rem.to_le_bytes());
        out.push(self.kind as u8);
        out
    }

    pub fn decode(bytes: &[u8], log: &str, seq: Seq) -> Result<LinkEntry> {
        let mut r = Reader::new(bytes, log, seq)?;
        let (vs, dseq, lseq, rem) = (r.u64()?, r.u64()?, r.u64()?, r.u32()?);
        let kind_byte = r.u8()?;
        let kind = FieldKind::from_u8(kind_byte).ok_or_else(|| r.corrupt(format!("unknown link type {kind_byte}")))?;
        r.finish()?;
        Ok(LinkEntry { vs, dseq, lseq, rem, kind })
    }
}

impl ApEntry {
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(25);
        out.push(FORMAT);
        out.extend_from_slice(&self.vs.to_le_bytes());
        out.extend_from_slice(&self.dseq.to_le_bytes());
        out.extend_from_slice(&self.lseq.to_le_bytes());
        out
    }

    pub fn decode(bytes: &[u8], log: &str, seq: Seq) -> Result<ApEntry> {
        let mut r = Reader::new(bytes, log, seq)?;
        let entry = ApEntry { vs: r.u64()?, dseq: r.u64()?, lseq: r.u64()? };
        r.finish()?;
        Ok(entry)
    }
}

impl OpEntry {
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(18 + self.a.len() + self.b.len());
        out.push(FORMAT);
        out.extend_from_slice(&self.vs.to_le_bytes());
        out.push(self.op);
        out.extend_from_slice(&len_u32(self.a.len()));
        out.extend_from_slice(&self.a);
        out.extend_from_slice(&len_u32(self.b.len()));
        out.extend_from_slice(&self.b);
        out
    }

    pub fn decode(bytes: &[u8], log: &str, seq: Seq) -> Result<OpEntry> {
        let mut r = Reader::new(bytes, log, seq)?;
        let vs = r.u64()?;
        let op = r.u8()?;
        let a = r.blob32()?.to_vec();
        let b = r.blob32()?.to_vec();
        r.finish()?;
        Ok(OpEntry { vs, op, a, b })
    }
}

impl MetaEntry {
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(14);
        out.push(FORMAT);
        out.push(self.kind);
        out.extend_from_slice(&self.extra.to_le_bytes());
        out.extend_from_slice(&self.keep.to_le_bytes());
        out
    }

    pub fn decode(bytes: &[u8], log: &str, seq: Seq) -> Result<MetaEntry> {
        let mut r = Reader::new(bytes, log, seq)?;
        let entry = MetaEntry { kind: r.u8()?, extra: r.u32()?, keep: r.u64()? };
        r.finish()?;
        Ok(entry)
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
    }
}
