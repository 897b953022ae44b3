//! Real nats-server processes for the tests, started once per test binary
//! and shared (each test uses its own namespace), through the project's
//! own launcher ([`varve_nats::cluster::LocalCluster`], as `varve nats up`).

#![allow(dead_code, reason = "each test binary uses part of this")]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use varve_log::conformance::Fixture;
use varve_nats::cluster::{ClusterOptions, LocalCluster};
use varve_nats::NatsStore;

/// A running cluster and the directory that holds its nodes.
pub struct Servers {
    pub cluster: Mutex<LocalCluster>,
    pub url: String,
    _dir: tempfile::TempDir,
}

/// Start `nodes` servers (`sync_interval: always`) under a new temporary directory.
pub fn start(nodes: usize, name: &str) -> Servers {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let options = ClusterOptions {
        name: name.to_owned(),
        node_tags: (1..=nodes).map(|i| vec![format!("az:{i}")]).collect(),
        ..ClusterOptions::new(dir.path(), nodes)
    };
    let cluster = LocalCluster::start(options).unwrap_or_else(|e| panic!("starting {nodes} nats-server(s): {e}"));
    let url = cluster.url();
    Servers { cluster: Mutex::new(cluster), url, _dir: dir }
}

/// One server for the whole test binary.
pub fn single() -> &'static Servers {
    static SERVERS: OnceLock<Servers> = OnceLock::new();
    SERVERS.get_or_init(|| start(1, "single"))
}

/// One 3-node cluster for the whole test binary.
pub fn cluster3() -> &'static Servers {
    static SERVERS: OnceLock<Servers> = OnceLock::new();
    SERVERS.get_or_init(|| start(3, "trio"))
}

/// Each request's timeout in the tests: the default 5 s is what a user gets,
/// but a stream created at R=3 by a loaded 2-core CI machine (every test
/// binary in parallel with fsync-always servers) has taken longer, failing
/// a test for the machine's load, not for Varve.
pub const REQUEST_TIMEOUT_MS: u64 = 30_000;

/// `servers`' URI with the tests' request timeout and then `query` (e.g. `replicas=3`).
pub fn uri(servers: &Servers, query: &str) -> String {
    let sep = if query.is_empty() { "" } else { "&" };
    format!("{}?timeout_ms={REQUEST_TIMEOUT_MS}{sep}{query}", servers.url)
}

/// A namespace name no other test of this run uses.
pub fn fresh_name(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{prefix}{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// A fresh namespace on `servers`, with `query` appended to the URI
/// (e.g. `replicas=3`).
pub fn fixture(servers: &Servers, query: &str) -> Fixture {
    // The contract's batches go up to 65,536 records; the servers allow it.
    let uri = uri(servers, &format!("batch_max=65536{}{query}", if query.is_empty() { "" } else { "&" }));
    let store = Arc::new(NatsStore::open(&uri).unwrap_or_else(|e| panic!("connecting to {uri}: {e}")));
    let namespace = Arc::new(store.nats_namespace(&fresh_name("t")).expect("a namespace"));
    Fixture { namespace, keep_alive: Box::new(store) }
}
