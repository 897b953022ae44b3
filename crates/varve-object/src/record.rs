//! The stored forms of the three logs of an object store. Every record
//! starts with a format byte ([`FORMAT`]); integers follow
//! [`varve_log::codec`]'s rules.
//!
//! **Version record** (`obj.NAME.versions`), one per version:
//!
//! ```text
//! u8 format · bytes key · u8 count(parents)
//! · per parent: [32] id · varint depth · varint seq (where it is stored; not hashed)
//! · varint depth · [32] id (claimed; `verify` recomputes it) · [32] BLAKE3(value)
//! · varint len(value) · u8 encoding (0 raw, 1 compressed, 2 delta)
//! · if 1 or 2: u8 codec id · if 2: varint base seq · [32] base id · varint chain length
//! · bytes author · the payload (the rest)
//! ```
//!
//! **Ref record** (`obj.NAME.refs`): `u8 format · u8 kind (0 branch, 1 tag,
//! 2 delete) · bytes key · bytes name · opt[32] old · opt([32] id · varint
//! depth) new · bytes author · varint unix ms`.
//!
//! **Grant record** (`obj.NAME.grants`): `u8 format · u8 kind (0 restrict,
//! 1 grant) · bytes key · bytes principal · varint count · [32] id… · u8
//! with ancestors · bytes author · varint unix ms`.
//!
//! `bytes` is a varint length and the bytes; `opt` a 0/1 byte and the value.

use varve_log::codec::{ByteReader, ByteWriter, ReadError};

use crate::version::{Version, VersionId};

/// The format byte every record starts with.
pub const FORMAT: u8 = 1;

/// How a version's value is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// The bytes as they are.
    Raw,
    /// Compressed whole by the codec with this id.
    Compressed {
        /// The codec's id.
        codec: u8,
    },
    /// Compressed against the value of an earlier version.
    Delta {
        /// The codec's id.
        codec: u8,
        /// The seq of the base version's record.
        base_seq: u64,
        /// The base version's id.
        base: VersionId,
        /// How many deltas a read decodes to reach this value (1 if the base is whole).
        chain: u32,
    },
}

/// A parent link: the parent version and where its record is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParentLink {
    /// The parent.
    pub version: Version,
    /// The seq of its record in the versions log.
    pub seq: u64,
}

/// A decoded version record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionRecord<'a> {
    /// The key.
    pub key: &'a str,
    /// Its parents, in order (none for a root, two for a merge).
    pub parents: Vec<ParentLink>,
    /// The version this record claims to be.
    pub version: Version,
    /// BLAKE3 of the value.
    pub digest: [u8; 32],
    /// The value's length.
    pub value_len: u64,
    /// How the payload stores it.
    pub encoding: Encoding,
    /// Who wrote it ("" for the store's administrator).
    pub author: &'a str,
    /// The stored value bytes.
    pub payload: &'a [u8],
}

impl VersionRecord<'_> {
    /// The record's bytes.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.payload.len() + 160 + self.key.len());
        out.put_u8(FORMAT);
        put_str(&mut out, self.key);
        #[allow(clippy::cast_possible_truncation)] // at most two parents
        out.put_u8(self.parents.len() as u8);
        for parent in &self.parents {
            out.put_bytes(&parent.version.id.0);
            out.put_varint(parent.version.depth);
            out.put_varint(parent.seq);
        }
        out.put_varint(self.version.depth);
        out.put_bytes(&self.version.id.0);
        out.put_bytes(&self.digest);
        out.put_varint(self.value_len);
        match self.encoding {
            Encoding::Raw => out.put_u8(0),
            Encoding::Compressed { codec } => {
                out.put_u8(1);
                out.put_u8(codec);
            }
            Encoding::Delta { codec, base_seq, base, chain } => {
                out.put_u8(2);
                out.put_u8(codec);
                out.put_varint(base_seq);
                out.put_bytes(&base.0);
                out.put_varint(u64::from(chain));
            }
        }
        put_str(&mut out, self.author);
        out.put_bytes(self.payload);
        out
    }
}

/// Decode a version record.
pub fn decode_version(bytes: &[u8]) -> Result<VersionRecord<'_>, String> {
    fn inner<'a>(r: &mut ByteReader<'a>) -> Result<VersionRecord<'a>, String> {
        let format = r.u8().map_err(text)?;
        if format != FORMAT {
            return Err(format!("format {format} is not {FORMAT}: written by a newer Varve?"));
        }
        let key = get_str(r)?;
        let count = r.u8().map_err(text)?;
        if count > 2 {
            return Err(format!("{count} parents (at most 2)"));
        }
        let mut parents = Vec::with_capacity(usize::from(count));
        for _ in 0..count {
            let id = VersionId(r.array().map_err(text)?);
            let depth = r.varint().map_err(text)?;
            let seq = r.varint().map_err(text)?;
            parents.push(ParentLink { version: Version { id, depth }, seq });
        }
        let depth = r.varint().map_err(text)?;
        let id = VersionId(r.array().map_err(text)?);
        let digest = r.array().map_err(text)?;
        let value_len = r.varint().map_err(text)?;
        let encoding = match r.u8().map_err(text)? {
            0 => Encoding::Raw,
            1 => Encoding::Compressed { codec: r.u8().map_err(text)? },
            2 => {
                let codec = r.u8().map_err(text)?;
                let base_seq = r.varint().map_err(text)?;
                let base = VersionId(r.array().map_err(text)?);
                let chain = u32::try_from(r.varint().map_err(text)?).map_err(|_| "delta chain too long".to_owned())?;
                Encoding::Delta { codec, base_seq, base, chain }
            }
            other => return Err(format!("unknown value encoding {other}")),
        };
        let author = get_str(r)?;
        let payload = r.rest();
        Ok(VersionRecord { key, parents, version: Version { id, depth }, digest, value_len, encoding, author, payload })
    }
    inner(&mut ByteReader::new(bytes))
}

/// What a ref record does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefKind {
    /// Set a branch (movable).
    Branch,
    /// Set a tag (set once).
    Tag,
    /// Remove the ref.
    Delete,
}

/// A decoded ref record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefRecord {
    /// What it does.
    pub kind: RefKind,
    /// The key.
    pub key: String,
    /// The ref's name.
    pub name: String,
    /// Where the writer saw it.
    pub old: Option<VersionId>,
    /// Where it points now (`None` after a delete).
    pub new: Option<Version>,
    /// Who moved it.
    pub author: String,
    /// When, in ms since the Unix epoch.
    pub unix_ms: u64,
}

impl RefRecord {
    /// The record's bytes.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(96 + self.key.len() + self.name.len());
        out.put_u8(FORMAT);
        out.put_u8(match self.kind {
            RefKind::Branch => 0,
            RefKind::Tag => 1,
            RefKind::Delete => 2,
        });
        put_str(&mut out, &self.key);
        put_str(&mut out, &self.name);
        put_opt(&mut out, self.old.map(|id| id.0));
        match self.new {
            Some(v) => {
                out.put_u8(1);
                out.put_bytes(&v.id.0);
                out.put_varint(v.depth);
            }
            None => out.put_u8(0),
        }
        put_str(&mut out, &self.author);
        out.put_varint(self.unix_ms);
        out
    }

    /// Decode a ref record.
    pub fn decode(bytes: &[u8]) -> Result<RefRecord, String> {
        let mut r = ByteReader::new(bytes);
        check_format(&mut r)?;
        let kind = match r.u8().map_err(text)? {
            0 => RefKind::Branch,
            1 => RefKind::Tag,
            2 => RefKind::Delete,
            other => return Err(format!("unknown ref kind {other}")),
        };
        let key = get_str(&mut r)?.to_owned();
        let name = get_str(&mut r)?.to_owned();
        let old = get_opt(&mut r)?.map(VersionId);
        let new = match r.u8().map_err(text)? {
            0 => None,
            1 => {
                let id = VersionId(r.array().map_err(text)?);
                Some(Version { id, depth: r.varint().map_err(text)? })
            }
            other => return Err(format!("bad presence byte {other}")),
        };
        let author = get_str(&mut r)?.to_owned();
        let unix_ms = r.varint().map_err(text)?;
        r.finish().map_err(text)?;
        Ok(RefRecord { kind, key, name, old, new, author, unix_ms })
    }
}

/// What a grant record does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GrantKind {
    /// Make the key private: from now on only its owner and grantees read it.
    Restrict,
    /// Let a principal read listed versions (and maybe their ancestors).
    Grant,
}

/// A decoded grant record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantRecord {
    /// What it does.
    pub kind: GrantKind,
    /// The key.
    pub key: String,
    /// Who is granted ("" for a restrict).
    pub principal: String,
    /// The versions granted.
    pub versions: Vec<VersionId>,
    /// Whether the grant covers the versions' ancestors too.
    pub with_ancestors: bool,
    /// Who issued it.
    pub author: String,
    /// When, in ms since the Unix epoch.
    pub unix_ms: u64,
}

impl GrantRecord {
    /// The record's bytes.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + 32 * self.versions.len());
        out.put_u8(FORMAT);
        out.put_u8(match self.kind {
            GrantKind::Restrict => 0,
            GrantKind::Grant => 1,
        });
        put_str(&mut out, &self.key);
        put_str(&mut out, &self.principal);
        out.put_varint(self.versions.len() as u64);
        for id in &self.versions {
            out.put_bytes(&id.0);
        }
        out.put_u8(u8::from(self.with_ancestors));
        put_str(&mut out, &self.author);
        out.put_varint(self.unix_ms);
        out
    }

    /// Decode a grant record.
    pub fn decode(bytes: &[u8]) -> Result<GrantRecord, String> {
        let mut r = ByteReader::new(bytes);
        check_format(&mut r)?;
        let kind = match r.u8().map_err(text)? {
            0 => GrantKind::Restrict,
            1 => GrantKind::Grant,
            other => return Err(format!("unknown grant kind {other}")),
        };
        let key = get_str(&mut r)?.to_owned();
        let principal = get_str(&mut r)?.to_owned();
        let count = r.varint().map_err(text)?;
        if count > (r.remaining() / 32) as u64 {
            return Err(format!("{count} versions do not fit the record"));
        }
        let mut versions = Vec::new();
        for _ in 0..count {
            versions.push(VersionId(r.array().map_err(text)?));
        }
        let with_ancestors = r.u8().map_err(text)? != 0;
        let author = get_str(&mut r)?.to_owned();
        let unix_ms = r.varint().map_err(text)?;
        r.finish().map_err(text)?;
        Ok(GrantRecord { kind, key, principal, versions, with_ancestors, author, unix_ms })
    }
}

#[allow(clippy::needless_pass_by_value)]
fn text(error: ReadError) -> String {
    error.to_string()
}

fn check_format(r: &mut ByteReader<'_>) -> Result<(), String> {
    let format = r.u8().map_err(text)?;
    if format == FORMAT {
        Ok(())
    } else {
        Err(format!("format {format} is not {FORMAT}: written by a newer Varve?"))
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.put_varint(s.len() as u64);
    out.put_bytes(s.as_bytes());
}

fn get_str<'a>(r: &mut ByteReader<'a>) -> Result<&'a str, String> {
    let bytes = r.bytes_varint().map_err(text)?;
    std::str::from_utf8(bytes).map_err(|_| "a name is not UTF-8".to_owned())
}

fn put_opt(out: &mut Vec<u8>, value: Option<[u8; 32]>) {
    match value {
        Some(bytes) => {
            out.put_u8(1);
            out.put_bytes(&bytes);
        }
        None => out.put_u8(0),
    }
}

fn get_opt(r: &mut ByteReader<'_>) -> Result<Option<[u8; 32]>, String> {
    match r.u8().map_err(text)? {
        0 => Ok(None),
        1 => Ok(Some(r.array().map_err(text)?)),
        other => Err(format!("bad presence byte {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::{value_digest, version_of};
    use proptest::prelude::*;

    #[test]
    fn a_version_record_round_trips() {
        let root = version_of("k", &[], &value_digest(b"a"));
        let record = VersionRecord {
            key: "k",
            parents: vec![ParentLink { version: root, seq: 7 }],
            version: version_of("k", &[root], &value_digest(b"b")),
            digest: value_digest(b"b"),
            value_len: 1,
            encoding: Encoding::Delta { codec: 1, base_seq: 7, base: root.id, chain: 3 },
            author: "ann",
            payload: b"xyz",
        };
        assert_eq!(decode_version(&record.encode()).unwrap(), record);
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = decode_version(&bytes);
            let _ = RefRecord::decode(&bytes);
            let _ = GrantRecord::decode(&bytes);
        }
    }
}
