//! # varve-nats — the Log on NATS `JetStream`
//!
//! The distributed backend (`nats://HOST:PORT[,HOST:PORT…]`): every
//! namespace is one `JetStream` stream, replicated by NATS's own Raft
//! (`?replicas=3`). It passes the same conformance suite as every backend,
//! on one server and on a 3-node cluster. How the contract maps onto
//! streams and subjects, what it costs, and the durability settings a user
//! must choose are in `docs/nats.md`. [`tiers::mirror_namespace`] keeps a
//! cloud copy of a namespace written at an edge server (a leaf node).
//!
//! ```no_run
//! use varve_log::{LogConfig, Namespace as _, Store as _};
//! let store = varve_nats::NatsStore::open("nats://127.0.0.1:4222")?;
//! let ns = store.namespace("sensors")?;
//! ns.create_log("temperature", LogConfig::unbounded())?;
//! ns.append("temperature", b"21.5")?;
//! # Ok::<(), varve_log::LogError>(())
//! ```

mod append;
pub mod cluster;
mod conn;
mod names;
mod namespace;
mod options;
mod scan;
mod store;
mod stored;
pub mod tiers;
mod watch;

pub use names::{STREAM_PREFIX, SUBJECT_ROOT};
pub use namespace::NatsNamespace;
pub use options::NatsOptions;
pub use store::NatsStore;
