//! # varve-nats — the Log on NATS JetStream
//!
//! The distributed backend (`nats://HOST:PORT[,HOST:PORT…]`): every
//! namespace is one JetStream stream, replicated by NATS's own Raft. How the
//! contract maps onto streams and subjects, and the durability settings a
//! user must choose, are in `docs/nats.md`.

pub mod cluster;
