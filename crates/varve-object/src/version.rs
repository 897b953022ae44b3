//! Version ids: what a version is called, and how its name is computed.
//!
//! A version is `(h, depth)` (`UStore` §3.2.2, Eq. 1):
//!
//! ```text
//! h = BLAKE3( "varve.object.v1" ‖ u64 len(key) ‖ key
//!             ‖ u8 count(parents) ‖ for each parent: parent.h ‖ u64 parent.depth
//!             ‖ BLAKE3(value) )
//! depth = 1 for a root, max(parents' depth) + 1 otherwise
//! ```
//!
//! Integers are little-endian. The value enters through its own BLAKE3
//! digest rather than its bytes, so that an ancestry proof ([`crate::proof`])
//! carries 32 bytes per step instead of whole values; the digest is itself a
//! cryptographic commitment to the value, so `h` still verifies the content.
//!
//! The paper's third field, the random placement nonce `n`, routes a version
//! to a storage node of a partitioned cluster. Here the namespace (a journal,
//! a server's namespace, a `JetStream` stream) is the unit of placement, so
//! there is nothing for `n` to choose; it is left out rather than kept empty.

use std::fmt;
use std::str::FromStr;

use crate::error::{ObjectError, Result};

/// The domain separator hashed first, so these ids never collide with other
/// BLAKE3 uses; its `v1` names this preimage layout.
const DOMAIN: &[u8] = b"varve.object.v1";

/// The 32-byte hash `h` of a version.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct VersionId(pub [u8; 32]);

impl std::hash::Hash for VersionId {
    /// An id is a BLAKE3 output, already uniform: hashing its first eight
    /// bytes is enough for a hash table, and cheaper than all 32.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let mut head = [0u8; 8];
        head.copy_from_slice(&self.0[..8]);
        state.write_u64(u64::from_le_bytes(head));
    }
}

impl VersionId {
    /// The id's lowercase hex form (64 characters).
    #[must_use]
    pub fn to_hex(&self) -> String {
        let mut out = String::with_capacity(64);
        for byte in self.0 {
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 15)]));
        }
        out
    }

    /// The first `chars` hex characters: how ids are shown to people.
    #[must_use]
    pub fn short(&self, chars: usize) -> String {
        let mut hex = self.to_hex();
        hex.truncate(chars);
        hex
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

impl fmt::Display for VersionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for VersionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VersionId({})", self.short(12))
    }
}

impl FromStr for VersionId {
    type Err = ObjectError;

    /// Reads the full 64-character hex form (see [`crate::ObjectStore::resolve`]
    /// for unique prefixes).
    fn from_str(text: &str) -> Result<VersionId> {
        let bad = |why: &str| ObjectError::InvalidArgument { reason: format!("version id {text:?}: {why}") };
        if text.len() != 64 {
            return Err(bad("a version id is 64 hex characters"));
        }
        let mut id = [0u8; 32];
        for (i, pair) in text.as_bytes().chunks(2).enumerate() {
            let hi = hex_digit(pair[0]).ok_or_else(|| bad("not hex"))?;
            let lo = hex_digit(pair[1]).ok_or_else(|| bad("not hex"))?;
            id[i] = hi << 4 | lo;
        }
        Ok(VersionId(id))
    }
}

pub(crate) fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// A version: its id and its depth in the key's DAG (a root has depth 1).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Version {
    /// The hash `h`.
    pub id: VersionId,
    /// The depth `l`: 1 for a root, one more than the deepest parent otherwise.
    pub depth: u64,
}

impl Version {
    /// `{"id": HEX, "depth": N}`: how the CLI, the server and proofs show a version.
    #[must_use]
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({"id": self.id.to_hex(), "depth": self.depth})
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.id)
    }
}

/// The BLAKE3 digest of a value, as hashed into its version's id.
#[must_use]
pub fn value_digest(value: &[u8]) -> [u8; 32] {
    *blake3::hash(value).as_bytes()
}

/// The version a value gets under `key` with `parents` (in order: a merge of
/// `a` and `b` is not the merge of `b` and `a`).
#[must_use]
pub fn version_of(key: &str, parents: &[Version], digest: &[u8; 32]) -> Version {
    let mut hasher = blake3::Hasher::new();
    hasher.update(DOMAIN);
    hasher.update(&(key.len() as u64).to_le_bytes());
    hasher.update(key.as_bytes());
    #[allow(clippy::cast_possible_truncation)] // at most two parents
    hasher.update(&[parents.len() as u8]);
    for parent in parents {
        hasher.update(&parent.id.0);
        hasher.update(&parent.depth.to_le_bytes());
    }
    hasher.update(digest);
    let depth = parents.iter().map(|p| p.depth).max().map_or(1, |d| d + 1);
    Version { id: VersionId(*hasher.finalize().as_bytes()), depth }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_depend_on_key_parents_their_order_and_value() {
        let d = value_digest(b"x");
        let root = version_of("k", &[], &d);
        assert_eq!(root.depth, 1);
        assert_ne!(root.id, version_of("k2", &[], &d).id);
        assert_ne!(root.id, version_of("k", &[], &value_digest(b"y")).id);
        let a = version_of("k", &[root], &value_digest(b"a"));
        let b = version_of("k", &[root], &value_digest(b"b"));
        assert_eq!(a.depth, 2);
        let ab = version_of("k", &[a, b], &d);
        assert_ne!(ab.id, version_of("k", &[b, a], &d).id);
        assert_eq!(ab.depth, 3);
        // The same inputs give the same id: puts are idempotent.
        assert_eq!(ab, version_of("k", &[a, b], &d));
    }

    #[test]
    fn hex_round_trips_and_bad_text_is_refused() {
        let id = version_of("k", &[], &value_digest(b"x")).id;
        assert_eq!(id.to_hex().parse::<VersionId>().unwrap(), id);
        assert_eq!(id.to_hex().to_uppercase().parse::<VersionId>().unwrap(), id);
        assert!("abc".parse::<VersionId>().is_err());
        assert!("z".repeat(64).parse::<VersionId>().is_err());
    }
}
