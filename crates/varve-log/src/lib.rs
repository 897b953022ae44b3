//! # varve-log — the Log, Varve's narrow waist
//!
//! Namespaces of named append-only logs, the contract every layer above is
//! written against, and two backends: [`MemoryStore`] and the embedded
//! [`JournalStore`] (the default, crash-safe, no server needed).
//!
//! ```
//! use varve_log::{JournalStore, JournalOptions, LogConfig, Namespace, OnFull, Store};
//!
//! let dir = std::env::temp_dir().join(format!("varve-doc-{}", std::process::id()));
//! let store = JournalStore::open(&dir, JournalOptions::default())?;
//! let ns = store.namespace("sensors")?;
//! ns.create_log("temperature", LogConfig::keep(1000, OnFull::Overwrite))?;
//! let seq = ns.append("temperature", b"21.5")?;
//! assert_eq!(seq, 1);
//! assert_eq!(&ns.get("temperature", seq)?[..], b"21.5");
//! // Two logs, one atomic batch.
//! ns.create_log("humidity", LogConfig::unbounded())?;
//! let seqs = ns.append_batch(&[("temperature", b"21.7"), ("humidity", b"40")])?;
//! assert_eq!(seqs, vec![2, 1]);
//! # drop(ns); drop(store); std::fs::remove_dir_all(&dir).ok();
//! # Ok::<(), varve_log::LogError>(())
//! ```
//!
//! The contract is specified in [`contract`]; the journal's byte format in
//! `docs/design.md`. [`codec`] is the little-endian/LEB128 byte codec that
//! every stored format of Varve (this crate's and the layers' above) is
//! written with. Papers: `PEDaLS` §IV (the log API structures are built
//! on) and `CSPOT` §3.2–3.3 (`WooF`s: append-only, seq-addressed, circular
//! history).

pub mod codec;
pub mod conformance;
pub mod contract;
mod error;
pub mod journal;
mod memory;
mod notify;
pub mod rules;

pub use contract::{
    validate_name, Limits, LogConfig, LogInfo, Namespace, OnFull, Record, Retention, Scan, Seq, SeqRange, Store,
    SyncPolicy, Watch, WatchSource, NAME_BYTES_MAX, RENAMES_PER_CALL_MAX, SEQ_MAX,
};
pub use error::{LogError, LossCause, Result};
pub use journal::{CheckpointUse, JournalNamespace, JournalOptions, JournalStore, LogId, RecoveryReport};
pub use memory::{MemoryNamespace, MemoryStore};
pub use rules::RECORD_OVERHEAD_BYTES;

/// The README's Rust quickstart, compiled and run as a doc test so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeQuickstart;
