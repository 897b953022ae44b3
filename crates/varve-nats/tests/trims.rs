//! Trims on NATS, on a real 3-node cluster (R=3): the floor every client
//! sees (also one whose cached state predates the trim), the purge that
//! removes the messages below it from the stream, floors that only rise
//! when clients trim at once, and the runtime's event retention, which
//! needs trims.

mod support;

use std::sync::Arc;
use std::time::Duration;

use varve_log::{LogConfig, LogError, Namespace as _, SeqRange};
use varve_nats::{NatsNamespace, NatsStore};
use varve_runtime::{RetryPolicy, RuntimeBuilder, EVENTS_LOG};

fn value(seq: u64) -> Vec<u8> {
    format!("record {seq}").into_bytes()
}

/// Two clients (two connections, two caches) of one fresh namespace.
fn two_clients(prefix: &str) -> (NatsNamespace, NatsNamespace) {
    let servers = support::cluster3();
    let name = support::fresh_name(prefix);
    let open = || {
        let store = NatsStore::open(&support::uri(servers, "replicas=3")).expect("connect");
        store.nats_namespace(&name).expect("a namespace")
    };
    (open(), open())
}

/// How many messages the stream holds on `subject` (`STREAM.INFO` with a
/// subjects filter), asked with a connection of the test's own.
fn messages_on(stream: &str, subject: &str) -> u64 {
    // `nats://a,b,c`: the first server answers for the cluster.
    let url = support::cluster3().url.split(',').next().expect("an address").to_owned();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    runtime.block_on(async {
        let client = async_nats::connect(url).await.expect("connect");
        let body = serde_json::json!({ "subjects_filter": subject }).to_string();
        let answer = client.request(format!("$JS.API.STREAM.INFO.{stream}"), body.into()).await.expect("stream info");
        let info: serde_json::Value = serde_json::from_slice(&answer.payload).expect("json");
        info["state"]["subjects"][subject].as_u64().unwrap_or(0)
    })
}

#[test]
fn a_trim_hides_the_records_below_it_from_every_client_and_purges_them() {
    let (a, b) = two_clients("trim");
    a.create_log("t", LogConfig::unbounded()).expect("create");
    for seq in 1..=20 {
        assert_eq!(a.append("t", &value(seq)).expect("append"), seq);
    }
    // `b` reads before the trim: its cache knows the log and where seq 3 is.
    assert_eq!(b.get("t", 3).expect("get").to_vec(), value(3));
    assert_eq!(b.earliest("t").expect("earliest"), 1);

    assert_eq!(a.trim("t", 15).expect("trim"), 15);
    let err = b.get("t", 3).expect_err("trimmed, seen from a cache older than the trim");
    assert!(matches!(err, LogError::Trimmed { seq: 3, earliest: 15, .. }), "{err}");
    assert_eq!(b.log_info("t").expect("info").earliest, 15);
    assert!(matches!(b.scan("t", SeqRange::from(1..)), Err(LogError::Trimmed { earliest: 15, .. })));
    let seqs: Vec<u64> = b.scan("t", SeqRange::from(15..)).expect("scan").map(|r| r.expect("record").seq).collect();
    assert_eq!(seqs, (15..=20).collect::<Vec<_>>());
    // Gone from the stream, not only hidden.
    let data = format!("varve.{}.d.t", a.name());
    assert_eq!(messages_on(a.stream_name(), &data), 6, "the messages of seqs 15..=20 are left");

    // Floors only rise: a trim below is a no-op, one above moves it for both.
    assert_eq!(b.trim("t", 10).expect("below the floor"), 15);
    assert_eq!(b.trim("t", 18).expect("trim"), 18);
    assert_eq!(a.earliest("t").expect("earliest"), 18);
    assert_eq!(a.append("t", &value(21)).expect("seqs go on"), 21);
    assert_eq!(messages_on(a.stream_name(), &data), 4);

    // Deleted and created again: the old log's floor is not the new one's.
    a.delete_log("t").expect("delete");
    a.create_log("t", LogConfig::unbounded()).expect("create again");
    assert_eq!(a.append("t", b"new").expect("append"), 1);
    assert_eq!((b.earliest("t").expect("earliest"), b.latest("t").expect("latest")), (1, 1));
    assert_eq!(b.get("t", 1).expect("get").to_vec(), b"new");
    assert_eq!(messages_on(a.stream_name(), &format!("varve.{}.t.t", a.name())), 0, "the delete purged the floor");
}

#[test]
fn trims_racing_from_two_clients_leave_the_highest_floor() {
    let (a, b) = two_clients("trimrace");
    a.create_log("t", LogConfig::unbounded()).expect("create");
    for seq in 1..=60 {
        a.append("t", &value(seq)).expect("append");
    }
    let (a, b) = (Arc::new(a), Arc::new(b));
    let trims = |ns: Arc<NatsNamespace>, befores: Vec<u64>| {
        std::thread::spawn(move || {
            for before in befores {
                let earliest = ns.trim("t", before).unwrap_or_else(|e| panic!("trim before {before}: {e}"));
                assert!(earliest >= before, "trim before {before} answered earliest {earliest}");
            }
        })
    };
    let one = trims(Arc::clone(&a), (2..=50).step_by(4).collect());
    let two = trims(Arc::clone(&b), (3..=51u64).rev().step_by(4).collect());
    one.join().expect("first trimmer");
    two.join().expect("second trimmer");
    for ns in [&a, &b] {
        assert_eq!(ns.earliest("t").expect("earliest"), 51, "the highest trim wins");
        let err = ns.get("t", 50).expect_err("below the floor");
        assert!(matches!(err, LogError::Trimmed { earliest: 51, .. }), "{err}");
    }
    assert_eq!(messages_on(a.stream_name(), &format!("varve.{}.d.t", a.name())), 10);
}

#[test]
fn event_retention_bounds_the_event_log_on_nats() {
    const KEEP: u64 = 100;
    const INPUTS: u64 = 120;
    let (ns, _) = two_clients("retain");
    let ns = Arc::new(ns);
    let runtime = RuntimeBuilder::new(ns.clone())
        .events_keep(KEEP)
        .log("in", LogConfig::unbounded())
        .log("out", LogConfig::unbounded())
        .handler("copy", RetryPolicy::default(), |ctx| {
            let record = ctx.record().to_vec();
            ctx.append("out", &record)?;
            Ok(())
        })
        .subscribe("in", "copy")
        .start()
        .expect("a runtime with event retention on NATS");
    for i in 0..INPUTS {
        runtime.append("in", &i.to_le_bytes()).expect("append");
    }
    assert!(runtime.wait_idle(Duration::from_secs(120)), "idle");
    let retention = runtime.event_retention().expect("retention");
    runtime.stop(Duration::from_secs(10));
    println!("event retention on NATS: {retention:?}");
    assert!(retention.trims > 0 && retention.last_error.is_none(), "{retention:?}");
    let info = ns.log_info(EVENTS_LOG).expect("events");
    assert!(info.latest > 4 * INPUTS, "{info:?}");
    assert!(info.len() < 3 * KEEP, "the event log holds {} events, keep {KEEP}", info.len());
    let out: Vec<u64> = ns
        .scan("out", SeqRange::ALL)
        .expect("scan")
        .map(|r| u64::from_le_bytes(r.expect("record").value[..].try_into().expect("8 bytes")))
        .collect();
    let mut sorted = out;
    sorted.sort_unstable();
    assert_eq!(sorted, (0..INPUTS).collect::<Vec<_>>(), "every input copied once");
}
