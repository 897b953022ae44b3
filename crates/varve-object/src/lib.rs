//! # varve-object — versioned objects (`UStore`) on Varve logs
//!
//! A key owns a DAG of immutable versions (`UStore`, `seeds/001_…` §3.2–3.4):
//! a version can be extended many times (branches) and two versions can be
//! merged. Every version's id is a BLAKE3 hash of its key, its parents and
//! its value ([`version_of`]), so ids verify both content and history;
//! [`ObjectStore::verify`] recomputes them from the stored bytes and
//! [`ObjectStore::prove`] gives a client that trusts only a head's id a
//! proof that a version is its ancestor.
//!
//! ```
//! use varve_log::{MemoryStore, Store};
//! use varve_object::{MapMerge, ObjectStore};
//!
//! let ns = MemoryStore::new().namespace("app")?;
//! let objects = ObjectStore::open(ns, "config")?;
//! let v1 = objects.put("svc", None, br#"{"port":80,"tls":false}"#)?;
//! let left = objects.put("svc", Some(&v1.id), br#"{"port":8080,"tls":false}"#)?;
//! let right = objects.put("svc", Some(&v1.id), br#"{"port":80,"tls":true}"#)?;
//! assert_eq!(objects.heads("svc")?.len(), 2);
//! let merged = objects.merge_with("svc", &left.id, &right.id, &MapMerge)?;
//! assert_eq!(objects.get("svc", &merged.id)?, br#"{"port":8080,"tls":true}"#);
//! assert_eq!(objects.history("svc", &left.id, 8)?, vec![v1]);
//! objects.verify("svc", &merged.id)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The store lives on three logs of one namespace (see [`store`]), so it
//! runs on every backend; values are stored whole or as zstd deltas against
//! their parent ([`codec`]); reads by a principal respect the owner's grants;
//! [`ObjectStore::watch`] yields new versions, and a runtime handler
//! subscribed to [`ObjectStore::versions_log`] can merge concurrent heads as
//! they appear ([`ObjectStore::merge_heads`]). See `docs/objects.md`.

pub mod codec;
pub mod error;
mod index;
pub mod merge;
pub mod proof;
pub mod record;
pub mod store;
pub mod version;

pub use codec::{Codec, ZstdCodec};
pub use error::{ObjectError, Result};
pub use merge::{
    builtin, map_diff, Counter, LastWriterWins, LineMerge, MapDiff, MapMerge, MergeFn, MergeInput, SetUnion,
    BUILTIN_MERGES,
};
pub use proof::{AncestryProof, ProofStep};
pub use record::Encoding;
pub use store::{
    Appender, GrantEntry, Notification, ObjectOptions, ObjectStore, ObjectWatch, RefTarget, Storage, VerifyReport,
    VersionInfo,
};
pub use version::{value_digest, version_of, Version, VersionId};
