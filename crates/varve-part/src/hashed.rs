//! Key-space transform (§3.5): store `hash(key) ‖ key` instead of `key`.
//!
//! Long keys that share long prefixes (URLs, paths) make deep, skewed trees;
//! prefixing each key with a hash spreads them evenly over the first eight
//! bytes, so the tree stays shallow and balanced. The price: entries are in
//! **hash order**, so ordered, range and prefix scans are gone —
//! [`HashedMap`] offers only point operations, iteration in hash order, and
//! the set operations.

use crate::map::{ArtMap, Snapshot};

/// The key hash, version 1. Frozen: it decides where keys live in
/// checkpoints written by the durable layer, so it must be the same in every
/// run and process. FNV-1a 64 over the key bytes, then the `MurmurHash3`
/// `fmix64` finalizer for avalanche; stored big-endian in front of the key.
#[must_use]
pub fn key_hash_v1(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in key {
        h ^= u64::from(byte);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// Bytes of hash in front of each stored key.
pub const HASH_BYTES: usize = 8;

/// Keys up to this long are transformed in a stack buffer.
const STACK_KEY_BYTES_MAX: usize = 56;

fn with_hashed<R>(key: &[u8], f: impl FnOnce(&[u8]) -> R) -> R {
    let hash = key_hash_v1(key).to_be_bytes();
    if key.len() <= STACK_KEY_BYTES_MAX {
        let mut buf = [0u8; HASH_BYTES + STACK_KEY_BYTES_MAX];
        buf[..HASH_BYTES].copy_from_slice(&hash);
        buf[HASH_BYTES..HASH_BYTES + key.len()].copy_from_slice(key);
        f(&buf[..HASH_BYTES + key.len()])
    } else {
        let mut buf = Vec::with_capacity(HASH_BYTES + key.len());
        buf.extend_from_slice(&hash);
        buf.extend_from_slice(key);
        f(&buf)
    }
}

/// An [`ArtMap`] over hashed keys. Same complexity as `ArtMap` for point
/// operations; iteration is in hash order (not key order).
pub struct HashedMap<V> {
    inner: ArtMap<V>,
}

impl<V: Clone> Clone for HashedMap<V> {
    fn clone(&self) -> Self {
        HashedMap { inner: self.inner.clone() }
    }
}

impl<V> Default for HashedMap<V> {
    fn default() -> Self {
        HashedMap { inner: ArtMap::new() }
    }
}

impl<V> HashedMap<V> {
    /// An empty map.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of entries, O(1).
    #[must_use]
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// Whether the map holds no entry, O(1).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// The value of `key`, O(k) for a key of k bytes (hashing included).
    #[must_use]
    pub fn get(&self, key: &[u8]) -> Option<&V> {
        with_hashed(key, |k| self.inner.get(k))
    }

    /// Whether `key` has a value, O(k).
    #[must_use]
    pub fn contains_key(&self, key: &[u8]) -> bool {
        self.get(key).is_some()
    }

    /// Entries in **hash order** (original keys, without the hash).
    pub fn iter_hash_order(&self) -> impl Iterator<Item = (Vec<u8>, &V)> {
        self.inner.iter().map(|(mut key, value)| {
            key.drain(..HASH_BYTES);
            (key, value)
        })
    }

    /// The underlying map, keyed by `hash ‖ key` (for the durable layer).
    #[must_use]
    pub fn as_inner(&self) -> &ArtMap<V> {
        &self.inner
    }
}

impl<V: Clone> HashedMap<V> {
    /// Insert or replace; returns the previous value.
    pub fn insert(&mut self, key: &[u8], value: V) -> Option<V> {
        with_hashed(key, |k| self.inner.insert(k, value))
    }

    /// Remove a key; returns its value.
    pub fn remove(&mut self, key: &[u8]) -> Option<V> {
        with_hashed(key, |k| self.inner.remove(k))
    }

    /// O(1) read-only version of the underlying (hash-keyed) map.
    #[must_use]
    pub fn snapshot(&self) -> Snapshot<V> {
        self.inner.snapshot()
    }

    /// Entries of both maps; for a key in both, `merge(key, ours, theirs)` with
    /// the original key. Shared subtrees are reused without calling `merge`
    /// (see [`ArtMap::union_with`]).
    #[must_use]
    pub fn union_with<F: FnMut(&[u8], &V, &V) -> V>(&self, other: &Self, mut merge: F) -> Self {
        HashedMap { inner: self.inner.union_with(&other.inner, |k, a, b| merge(&k[HASH_BYTES..], a, b)) }
    }

    /// Our entries whose keys are also in `other`.
    #[must_use]
    pub fn intersection(&self, other: &Self) -> Self {
        HashedMap { inner: self.inner.intersection(&other.inner) }
    }

    /// Our entries whose keys are not in `other`.
    #[must_use]
    pub fn difference(&self, other: &Self) -> Self {
        HashedMap { inner: self.inner.difference(&other.inner) }
    }
}
