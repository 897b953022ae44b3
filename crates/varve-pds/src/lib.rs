//! # varve-pds — versioned linked data structures on logs (`PEDaLS`)
//!
//! Partially persistent structures — every version stays readable, only the
//! latest is updated — stored only as appends to Varve logs, on any backend.
//! This is the system of the `PEDaLS` paper (`seeds/000_…`): the node-copy
//! method of Driscoll et al. (§III) mapped onto a DataLog, one LinkLog per
//! node and an APLog (§IV, Table I, Algorithm 1), with its failure rules (C3,
//! C4) and retention of K versions.
//!
//! - [`SortedMap`] / [`SortedSet`]: ordered, by default a red-black tree
//!   ([`Structure::Balanced`]); the paper's unbalanced BST is
//!   [`Structure::Bst`].
//! - [`VersionedList`]: the paper's linked list.
//! - [`workload`], [`demo`]: the paper's workloads and its worked example
//!   (Figure 3), for the CLI. Its evaluation (§V) is `varve_bench::pds`.
//! - [`testing`]: fault-injecting and counting `Namespace` wrappers.
//!
//! ```
//! use std::sync::Arc;
//! use varve_log::{Limits, MemoryNamespace};
//! use varve_pds::{Options, SortedSet, Structure};
//!
//! let ns = Arc::new(MemoryNamespace::new("doc", Limits::default()));
//! let mut tree = SortedSet::<u64>::open_as(ns, "fig1", Structure::Bst, Options { extra: 1, keep: None, ..Options::default() })?;
//! for k in [7, 2, 5] {
//!     tree.insert(&k)?;
//! }
//! let v4 = tree.delete(&2)?;
//! assert_eq!(v4, 4);
//! assert!(tree.contains(&2, Some(3))?); // find(2, 3) of §III
//! assert!(!tree.contains(&2, Some(4))?);
//! assert_eq!(tree.preorder(None)?, vec![7, 5]);
//! # Ok::<(), varve_pds::PdsError>(())
//! ```
//!
//! Log names: structure `s` uses `pds.s.data`, `pds.s.ap`, `pds.s.ops` (the
//! op log of §IV-B, "we log requested operations"), `pds.s.meta` and
//! `pds.s.link.<dseq>` — one LinkLog per node, named by the node's DataLog
//! seq — so any number of structures share a namespace. Entry formats are in
//! [`codec`].
//!
//! Bad input: reading version 0 or a version not yet committed is
//! [`PdsError::NoSuchVersion`]; deleting an absent key (or list value) and
//! inserting a key with the value it already has are no-ops that return the
//! current version and write nothing; a full structure refuses updates with
//! [`PdsError::RetentionFull`] while reads go on; an entry that does not
//! decode is [`PdsError::Corrupt`] naming its log and seq.

#![expect(
    clippy::doc_markdown,
    reason = "the paper's terms (PEDaLS, DataLog, LinkLog, APLog) are written as the paper writes them"
)]

mod cache;
pub mod codec;
pub mod demo;
pub(crate) mod engine;
mod error;
pub mod key;
mod list;
pub mod testing;
mod tree;
pub mod workload;

use varve_log::contract::Seq;

pub use engine::{
    APPEND_ATTEMPTS_MAX, EXTRA_MAX, NODE_CACHE_ENTRIES_DEFAULT, STRUCTURE_NAME_BYTES_MAX, UPDATE_ATTEMPTS_MAX,
};
pub use error::{PdsError, Result};
pub use key::Key;
pub use list::VersionedList;
pub use tree::{MapDiff, SortedMap, SortedSet};

/// A version stamp (`vs`): version v is the structure after its v-th
/// update; it is also the seq of its APLog entry. 0 is the empty structure
/// before the first update and is not a readable version.
pub type Version = Seq;

/// How a structure is created and opened. `extra` and `keep` are fixed for
/// its life (kept in its meta log); `node_cache_entries` is per open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Extra pointers per node (the paper's `e`, ≥ 1). Few extras copy more
    /// nodes; many make each node visit read more entries (§III).
    pub extra: u32,
    /// Keep this many versions, then refuse updates (`None`: unbounded).
    pub keep: Option<u64>,
    /// Node copies this handle keeps decoded in memory, at most: the bound
    /// on the structure's own memory (about 100–200 bytes a copy, with
    /// `extra` 5). A structure with more nodes than this reads the others
    /// from its logs on each visit, so a larger cache trades memory for log
    /// reads (see docs/benchmarks.md, "At scale"). Values below 2 count as 2.
    /// The cache's two hash tables are sized in powers of two and fill to
    /// 7/8, so a value of 7 × 2^k (the default is 7 × 2^14) uses every
    /// bucket they allocate.
    pub node_cache_entries: usize,
}

impl Default for Options {
    /// `extra` 5 (the paper's knee of the space curve, §V-B), unbounded,
    /// [`NODE_CACHE_ENTRIES_DEFAULT`] cached node copies.
    fn default() -> Self {
        Options { extra: 5, keep: None, node_cache_entries: NODE_CACHE_ENTRIES_DEFAULT }
    }
}

/// The structures of this crate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Structure {
    /// The paper's unbalanced binary search tree.
    Bst,
    /// The paper's singly linked list.
    List,
    /// A red-black tree: the default sorted map/set.
    Balanced,
}

impl Structure {
    pub(crate) fn code(self) -> u8 {
        match self {
            Structure::Bst => 1,
            Structure::List => 2,
            Structure::Balanced => 3,
        }
    }

    pub(crate) fn from_code(code: u8) -> Option<Structure> {
        Some(match code {
            1 => Structure::Bst,
            2 => Structure::List,
            3 => Structure::Balanced,
            _ => return None,
        })
    }

    pub(crate) fn kinds(self) -> &'static [codec::FieldKind] {
        use codec::FieldKind::{Color, Left, Next, Right};
        match self {
            Structure::Bst => &[Left, Right],
            Structure::List => &[Next],
            Structure::Balanced => &[Left, Right, Color],
        }
    }
}

impl std::fmt::Display for Structure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Structure::Bst => "bst",
            Structure::List => "list",
            Structure::Balanced => "balanced",
        })
    }
}

impl std::str::FromStr for Structure {
    type Err = PdsError;

    /// `bst`, `list` or `balanced` (also `rb`, `red-black`).
    fn from_str(s: &str) -> Result<Structure> {
        match s {
            "bst" => Ok(Structure::Bst),
            "list" => Ok(Structure::List),
            "balanced" | "rb" | "red-black" => Ok(Structure::Balanced),
            other => Err(PdsError::InvalidArgument {
                reason: format!("unknown structure {other:?}: use bst, list or balanced"),
            }),
        }
    }
}
