//! `LocalCluster` against real `nats-server` processes (found by
//! `find_server_binary`: `make nats-server` installs one): a single node; a
//! 3-node cluster whose R3 stream fails over when its leader is killed, and
//! again when it is paused; a store that opens and reads while the leaders
//! answering it are replaced; a leaf node joined to a hub; a detached
//! cluster stopped from its record; and the errors a caller can meet.
//!
//! Every wait polls a condition up to [`DEADLINE`]: generous, because the
//! machines that run these tests have two busy cores. Each cluster is killed
//! when its value drops, so a failed assertion leaves no server behind.

use std::path::Path;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, message::PublishMessage, publish::PublishAck, stream};
use async_nats::ServerAddr;
use bytes::Bytes;
use tempfile::TempDir;
use varve_log::{LogConfig, Namespace as _, SeqRange, Store as _};
use varve_nats::cluster::{ClusterError, ClusterOptions, ClusterRecord, LocalCluster};
use varve_nats::NatsStore;

/// Longest wait for anything a test waits for.
const DEADLINE: Duration = Duration::from_secs(60);

/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(100);

fn options(dir: &Path, nodes: usize) -> ClusterOptions {
    ClusterOptions { start_timeout: DEADLINE, ..ClusterOptions::new(dir, nodes) }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio runtime")
}

/// Poll `condition` until it gives a value, failing the test after [`DEADLINE`].
fn wait_for<T>(what: &str, mut condition: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(value) = condition() {
            return value;
        }
        assert!(started.elapsed() < DEADLINE, "waited {DEADLINE:?} for {what}");
        std::thread::sleep(POLL);
    }
}

/// A client of every node of `cluster` (it moves to another when its node dies).
async fn connect(cluster: &LocalCluster) -> async_nats::Client {
    connect_to(cluster, &(0..cluster.nodes()).collect::<Vec<_>>()).await
}

/// A client of these nodes of `cluster`.
async fn connect_to(cluster: &LocalCluster, nodes: &[usize]) -> async_nats::Client {
    let addrs: Vec<ServerAddr> =
        nodes.iter().map(|&node| cluster.client_addr(node).parse().expect("a server address")).collect();
    async_nats::ConnectOptions::new().connection_timeout(Duration::from_secs(10)).connect(addrs).await.expect("connect")
}

/// A file stream `name` on `name.>` with `replicas` replicas. Just after a
/// cluster starts its meta leader may not have heard from every peer and
/// refuse the placement ("peer offline"): that is retried for up to 60 s.
async fn create_stream(js: &jetstream::Context, name: &str, replicas: usize) {
    let config = stream::Config {
        name: name.to_owned(),
        subjects: vec![format!("{name}.>")],
        num_replicas: replicas,
        storage: stream::StorageType::File,
        ..stream::Config::default()
    };
    let started = Instant::now();
    loop {
        match js.create_stream(config.clone()).await {
            Ok(_) => return,
            Err(e) if e.to_string().contains("peer offline") && started.elapsed() < Duration::from_secs(60) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("create the stream: {e}"),
        }
    }
}

/// Publish `payload` under message id `id` until the stream acknowledges
/// it: while a leader is elected, attempts fail or time out; the id makes a
/// retry of an attempt that did land a duplicate the stream drops.
async fn publish(js: &jetstream::Context, subject: &str, payload: &'static [u8], id: &str) -> PublishAck {
    let started = Instant::now();
    loop {
        let attempt = async {
            let message = PublishMessage::build().payload(Bytes::from_static(payload)).message_id(id);
            js.send_publish(subject.to_owned(), message).await?.await
        };
        match attempt.await {
            Ok(ack) => return ack,
            Err(error) => {
                assert!(started.elapsed() < DEADLINE, "publishing {id} failed for {DEADLINE:?}: {error}");
                tokio::time::sleep(POLL).await;
            }
        }
    }
}

async fn messages_in(js: &jetstream::Context, stream: &str) -> u64 {
    js.get_stream(stream).await.expect("the stream").get_info().await.expect("stream info").state.messages
}

#[test]
fn a_single_node_serves_jetstream() {
    let dir = TempDir::new().expect("tempdir");
    let mut cluster = LocalCluster::start(options(dir.path(), 1)).expect("start");
    assert_eq!(cluster.nodes(), 1);
    assert_eq!(cluster.url(), format!("nats://{}", cluster.client_addr(0)));
    assert_eq!(cluster.server_name(0), "varve-0");
    assert_eq!(cluster.leaf_url(), None);
    assert!(cluster.is_running(0));
    let config = std::fs::read_to_string(dir.path().join("node0/nats.conf")).expect("config");
    assert!(!config.contains("cluster {"), "{config}");
    assert!(config.contains("sync_interval: always"), "{config}");

    let runtime = runtime();
    runtime.block_on(async {
        let js = jetstream::new(connect(&cluster).await);
        create_stream(&js, "single", 1).await;
        assert_eq!(publish(&js, "single.a", b"one", "one").await.sequence, 1);
    });
    assert_eq!(cluster.stream_leader("single").expect("leader"), Some(0));
    assert_eq!(cluster.stream_leader("no-such-stream").expect("leader"), None);

    // Misuse is an error, not a panic.
    assert!(matches!(cluster.kill(1), Err(ClusterError::NoSuchNode { node: 1, nodes: 1 })));
    assert!(matches!(cluster.restart(0), Err(ClusterError::AlreadyRunning { node: 0 })));
    assert!(!cluster.is_running(7));

    // The store survives a kill: the stream and its message are there after the restart.
    cluster.kill(0).expect("kill");
    assert!(!cluster.is_running(0));
    assert!(matches!(cluster.kill(0), Err(ClusterError::NotRunning { node: 0 })));
    assert!(matches!(cluster.stream_leader("single"), Err(ClusterError::NoneAnswering { .. })));

    // Another process takes the client port while the node is down: the
    // restart says so, naming the log, and works once the port is free.
    let squatter = std::net::TcpListener::bind(cluster.client_addr(0)).expect("take the node's port");
    let error = cluster.restart(0).expect_err("a restart on a taken port");
    assert!(matches!(error, ClusterError::PortsTaken { node: 0, .. }), "{error}");
    assert!(error.to_string().contains("nats.log"), "{error}");
    assert!(!cluster.is_running(0));
    drop(squatter);
    cluster.restart(0).expect("restart");
    cluster.wait_healthy(DEADLINE).expect("healthy");
    runtime.block_on(async {
        let js = jetstream::new(connect(&cluster).await);
        assert_eq!(messages_in(&js, "single").await, 1);
    });
}

#[test]
fn a_stream_fails_over_when_its_leader_is_killed() {
    let dir = TempDir::new().expect("tempdir");
    let mut cluster = LocalCluster::start(options(dir.path(), 3)).expect("start");
    assert_eq!(cluster.url().matches(',').count(), 2, "{}", cluster.url());
    let runtime = runtime();
    let js = runtime.block_on(async {
        let js = jetstream::new(connect(&cluster).await);
        create_stream(&js, "orders", 3).await;
        assert_eq!(publish(&js, "orders.1", b"one", "one").await.sequence, 1);
        js
    });

    let leader = wait_for("a leader of orders", || cluster.stream_leader("orders").expect("stream_leader"));
    cluster.kill(leader).expect("kill the leader");
    assert!(!cluster.is_running(leader));
    let successor = wait_for("another node to lead orders", || {
        cluster.stream_leader("orders").expect("stream_leader").filter(|&node| node != leader)
    });
    assert_ne!(successor, leader);
    runtime.block_on(async {
        let ack = publish(&js, "orders.2", b"two", "two").await;
        assert_eq!((ack.sequence, ack.duplicate), (2, false));
    });

    cluster.restart(leader).expect("restart");
    assert!(cluster.is_running(leader));
    cluster.wait_healthy(DEADLINE).expect("healthy after the restart");
    runtime.block_on(async {
        assert_eq!(messages_in(&js, "orders").await, 2);
        assert_eq!(publish(&js, "orders.3", b"three", "three").await.sequence, 3);
    });
}

#[test]
fn a_paused_leader_is_replaced_and_resumes_as_a_follower() {
    let dir = TempDir::new().expect("tempdir");
    let mut cluster = LocalCluster::start(options(dir.path(), 3)).expect("start");
    let runtime = runtime();
    let js = runtime.block_on(async {
        let js = jetstream::new(connect(&cluster).await);
        create_stream(&js, "paused", 3).await;
        publish(&js, "paused.1", b"one", "one").await;
        js
    });
    let leader = wait_for("a leader of paused", || cluster.stream_leader("paused").expect("stream_leader"));

    cluster.pause(leader).expect("pause");
    assert!(cluster.is_paused(leader));
    assert!(cluster.is_running(leader), "a paused node still exists");
    assert!(matches!(cluster.wait_healthy(DEADLINE), Err(ClusterError::Paused { node }) if node == leader));
    assert!(matches!(cluster.pause(leader), Err(ClusterError::Paused { .. })));
    wait_for("another node to lead paused", || {
        cluster.stream_leader("paused").expect("stream_leader").filter(|&node| node != leader)
    });
    // A client of the paused node would hang with it (until its pings go
    // unanswered, minutes later): write through the others.
    let others: Vec<usize> = (0..cluster.nodes()).filter(|&node| node != leader).collect();
    runtime.block_on(async {
        let js = jetstream::new(connect_to(&cluster, &others).await);
        assert_eq!(publish(&js, "paused.2", b"two", "two").await.sequence, 2);
    });

    cluster.resume(leader).expect("resume");
    assert!(!cluster.is_paused(leader));
    cluster.wait_healthy(DEADLINE).expect("healthy after resuming");
    wait_for("one leader of paused", || cluster.stream_leader("paused").expect("stream_leader"));
    runtime.block_on(async {
        // The first client's node answers again.
        assert_eq!(messages_in(&js, "paused").await, 2);
    });
}

/// Some requests only a leader answers; the other servers drop them in
/// silence. `NatsStore::open` sends `$JS.API.INFO` (the meta leader's), and
/// listing a namespace's logs `STREAM.INFO` (its stream's leader). Sent
/// while that leader is paused and before the others notice (seconds:
/// their election timeout), each is lost: the store asks again until the
/// newly elected leader answers. Gets and scans (direct gets, answered by
/// any replica, the paused one too) are asked again in the same way.
#[test]
fn a_store_opens_and_reads_while_leaders_are_replaced() {
    let dir = TempDir::new().expect("tempdir");
    let mut cluster = LocalCluster::start(options(dir.path(), 3)).expect("start");
    let uri_without = |cluster: &LocalCluster, paused: usize| {
        let others: Vec<String> =
            (0..cluster.nodes()).filter(|&node| node != paused).map(|node| cluster.client_addr(node)).collect();
        format!("nats://{}?timeout_ms=30000&replicas=3", others.join(","))
    };

    let leader = wait_for("a meta leader", || cluster.meta_leader().expect("meta_leader"));
    cluster.pause(leader).expect("pause");
    let uri = uri_without(&cluster, leader);
    let store = NatsStore::open(&uri).unwrap_or_else(|e| panic!("open {uri} while the meta leader is replaced: {e}"));
    wait_for("another meta leader", || cluster.meta_leader().expect("meta_leader").filter(|&node| node != leader));
    assert_eq!(store.list_namespaces().expect("list the namespaces"), Vec::<String>::new());
    cluster.resume(leader).expect("resume");
    cluster.wait_healthy(DEADLINE).expect("healthy after resuming");

    let namespace = store.nats_namespace("readers").expect("a namespace");
    namespace.create_log("l", LogConfig::unbounded()).expect("create a log");
    assert_eq!(namespace.append("l", b"one").expect("append"), 1);
    let stream = namespace.stream_name().to_owned();
    let leader = wait_for("a leader of the stream", || cluster.stream_leader(&stream).expect("stream_leader"));
    cluster.pause(leader).expect("pause");
    let uri = uri_without(&cluster, leader);
    let reader = NatsStore::open(&uri).unwrap_or_else(|e| panic!("open {uri}: {e}"));
    let readers = reader.nats_namespace("readers").expect("a namespace");
    let logs = readers.list_logs().expect("list the logs");
    assert_eq!(logs.iter().map(|log| (log.name.as_str(), log.latest)).collect::<Vec<_>>(), [("l", 1)]);
    // Direct gets go to any replica, the paused one too (about one in two
    // here): those are asked again. Ten all missing it would be rare (1 in 1,000).
    for _ in 0..5 {
        assert_eq!(readers.get("l", 1).expect("get").as_ref(), b"one");
        let scanned: Vec<u64> =
            readers.scan("l", SeqRange::from(1..)).expect("scan").map(|r| r.expect("a record").seq).collect();
        assert_eq!(scanned, [1]);
    }
    wait_for("another leader of the stream", || {
        cluster.stream_leader(&stream).expect("stream_leader").filter(|&node| node != leader)
    });
    cluster.resume(leader).expect("resume");
    cluster.wait_healthy(DEADLINE).expect("healthy after resuming");
}

#[test]
fn a_leaf_node_reaches_its_hub() {
    let dir = TempDir::new().expect("tempdir");
    let hub = LocalCluster::start(ClusterOptions {
        name: "hub".to_owned(),
        domain: Some("hub".to_owned()),
        leaf_listen: true,
        ..options(&dir.path().join("hub"), 1)
    })
    .expect("start the hub");
    let leaf_url = hub.leaf_url().expect("the hub listens for leaf nodes");
    assert!(leaf_url.starts_with("nats-leaf://127.0.0.1:"), "{leaf_url}");
    let leaf = LocalCluster::start(ClusterOptions {
        name: "leaf".to_owned(),
        domain: Some("leaf".to_owned()),
        leaf_remote: Some(leaf_url),
        ..options(&dir.path().join("leaf"), 1)
    })
    .expect("start the leaf");

    // A message published on the hub reaches a subscriber on the leaf, once
    // the leaf connection has carried the subscription over.
    runtime().block_on(async {
        use futures_util::StreamExt as _;
        let on_leaf = connect(&leaf).await;
        let on_hub = connect(&hub).await;
        let mut subscriber = on_leaf.subscribe("greetings").await.expect("subscribe");
        on_leaf.flush().await.expect("flush");
        let started = Instant::now();
        loop {
            on_hub.publish("greetings", Bytes::from_static(b"hello")).await.expect("publish");
            on_hub.flush().await.expect("flush");
            if let Ok(Some(message)) = tokio::time::timeout(POLL, subscriber.next()).await {
                assert_eq!(message.payload, Bytes::from_static(b"hello"));
                break;
            }
            assert!(started.elapsed() < DEADLINE, "nothing crossed the leaf connection in {DEADLINE:?}");
        }
    });
}

/// Stops the detached cluster in its directory when dropped, so that a
/// failed assertion leaves no server behind.
struct StopOnDrop<'a>(&'a Path);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        let _ = LocalCluster::stop_dir(self.0, DEADLINE);
    }
}

#[test]
fn a_detached_cluster_runs_until_stopped_from_its_record() {
    let dir = TempDir::new().expect("tempdir");
    let cluster =
        LocalCluster::start(ClusterOptions { own_process_group: true, ..options(dir.path(), 1) }).expect("start");
    let url = cluster.url();
    cluster.detach().expect("detach");
    let _stop = StopOnDrop(dir.path());

    let record = ClusterRecord::read(dir.path()).expect("read").expect("a record");
    assert_eq!(record.url, url);
    let running = record.running();
    assert_eq!(running.len(), 1, "{record:?}");
    let addr = url.strip_prefix("nats://").expect("nats://");
    std::net::TcpStream::connect(addr).expect("the detached server accepts clients");
    assert!(
        matches!(LocalCluster::start(options(dir.path(), 1)), Err(ClusterError::InvalidOptions { .. })),
        "a second cluster on the same directory"
    );

    assert_eq!(LocalCluster::stop_dir(dir.path(), DEADLINE).expect("stop"), 1);
    assert_eq!(record.running(), vec![]);
    assert!(ClusterRecord::read(dir.path()).expect("read").is_none());
    assert!(matches!(LocalCluster::stop_dir(dir.path(), DEADLINE), Err(ClusterError::NoCluster { .. })));
}

#[test]
fn a_server_that_cannot_start_is_a_clear_error() {
    let dir = TempDir::new().expect("tempdir");
    let missing = dir.path().join("no-such-nats-server");
    let error = LocalCluster::start(ClusterOptions { server_bin: Some(missing), ..options(dir.path(), 1) })
        .err()
        .expect("no such binary");
    assert!(matches!(error, ClusterError::Spawn { node: 0, .. }), "{error}");

    // `false` exits at once, as a server with a bad config would.
    let error = LocalCluster::start(ClusterOptions { server_bin: Some("false".into()), ..options(dir.path(), 2) })
        .err()
        .expect("a server that exits");
    assert!(matches!(error, ClusterError::Exited { .. }), "{error}");
    assert!(error.to_string().contains("nats.log"), "{error}");

    let error = LocalCluster::start(options(dir.path(), 0)).err().expect("no nodes");
    assert!(matches!(error, ClusterError::InvalidOptions { .. }), "{error}");
}
