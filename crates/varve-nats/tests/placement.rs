//! Replication and placement of a namespace (Canal's replicated topics):
//! the URI's `replicas` and `tags` choose how many servers hold the
//! namespace's stream and which ones; a name is all a client needs to find it.

mod support;

use std::time::{Duration, Instant};

use varve_log::{LogConfig, Namespace as _};
use varve_nats::NatsStore;

/// Which node leads `stream` once it has a leader (elections take a moment).
fn leader(servers: &support::Servers, stream: &str) -> usize {
    let started = Instant::now();
    loop {
        let found = servers.cluster.lock().expect("cluster").stream_leader(stream).expect("monitoring answers");
        if let Some(node) = found {
            return node;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "stream {stream} has no leader after 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn tags_place_a_namespace_on_the_servers_that_carry_them() {
    let servers = support::cluster3();
    // Node i carries tag az:{i+1}; a single replica tagged az:2 must live on node 1.
    let store = NatsStore::open(&support::uri(servers, "replicas=1&tags=az:2")).expect("connect");
    let ns = store.nats_namespace(&support::fresh_name("placed")).expect("namespace");
    ns.create_log("t", LogConfig::unbounded()).expect("create");
    assert_eq!(ns.append("t", b"x").expect("append"), 1);
    assert_eq!(leader(servers, ns.stream_name()), 1, "the stream runs on the server tagged az:2");

    // Any client finds it by name alone, through any server of the cluster.
    let elsewhere = NatsStore::open(&support::uri(servers, "")).expect("connect");
    let same = elsewhere.nats_namespace(ns.name()).expect("namespace");
    assert_eq!(same.get("t", 1).expect("read by name"), &b"x"[..]);
}

#[test]
fn an_unsatisfiable_placement_is_a_clear_error() {
    let servers = support::cluster3();
    let store = NatsStore::open(&support::uri(servers, "replicas=1&tags=az:9")).expect("connect");
    let ns = store.nats_namespace(&support::fresh_name("nowhere")).expect("namespace");
    let error = ns.create_log("t", LogConfig::unbounded()).expect_err("no server is tagged az:9");
    let message = error.to_string();
    assert!(message.contains("placement") || message.contains("peers"), "{message}");
}
