//! Trims on NATS, on a real 3-node cluster (R=3): the floor every client
//! sees (also one whose cached state predates the trim), the purge that
//! removes the messages below it from the stream, floors that only rise
//! when clients trim at once, a floor that stays with its own log (a trim
//! racing a delete and re-create, a delete cut short), a watch overtaken by
//! a trim, a purge the stream refuses, and the runtime's event retention,
//! which needs trims.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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

/// A `JetStream` API request with a connection of the test's own.
fn api(subject: &str, body: &serde_json::Value) -> serde_json::Value {
    // `nats://a,b,c`: the first server answers for the cluster.
    let url = support::cluster3().url.split(',').next().expect("an address").to_owned();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    runtime.block_on(async {
        let client = async_nats::connect(url).await.expect("connect");
        let answer = client.request(subject.to_owned(), body.to_string().into()).await.expect("request");
        serde_json::from_slice(&answer.payload).expect("json")
    })
}

/// Wait until stream `stream` (created through the raw API) has a leader:
/// its replicas elect one after the create is answered, and on a loaded
/// 2-core machine (two CI runs, each with its clusters) the first write
/// once outwaited its 30 s request timeout while they did.
fn wait_for_a_leader_of(stream: &str) {
    const DEADLINE: Duration = Duration::from_secs(120);
    let started = Instant::now();
    loop {
        let leader = support::cluster3().cluster.lock().expect("the cluster").stream_leader(stream);
        match leader {
            Ok(Some(_)) => return,
            _ if started.elapsed() > DEADLINE => panic!("stream {stream} has no leader after {DEADLINE:?}: {leader:?}"),
            _ => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// How many messages the stream holds on `subject` (`STREAM.INFO` with a subjects filter).
fn messages_on(stream: &str, subject: &str) -> u64 {
    let info = api(&format!("$JS.API.STREAM.INFO.{stream}"), &serde_json::json!({ "subjects_filter": subject }));
    info["state"]["subjects"][subject].as_u64().unwrap_or(0)
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

/// A delete cut short after its first step (the configuration purged, the
/// records and the floor not yet): the log is gone for every reader, and a
/// log created again under the name starts afresh, the old messages and
/// the old floor ignored.
#[test]
fn a_delete_cut_after_its_first_step_leaves_a_log_gone_and_a_fresh_one_possible() {
    let (a, b) = two_clients("delcut");
    a.create_log("t", LogConfig::unbounded()).expect("create");
    for seq in 1..=20 {
        a.append("t", &value(seq)).expect("append");
    }
    assert_eq!(a.trim("t", 15).expect("trim"), 15);
    // The first step of delete_log, and nothing after it (a crash).
    let purged = api(
        &format!("$JS.API.STREAM.PURGE.{}", a.stream_name()),
        &serde_json::json!({ "filter": format!("varve.{}.c.t", a.name()) }),
    );
    assert_eq!(purged["success"], true, "{purged}");
    assert!(matches!(b.log_info("t"), Err(LogError::LogNotFound { .. })), "gone for a reader");
    b.create_log("t", LogConfig::unbounded()).expect("create again");
    assert_eq!(b.append("t", b"new").expect("append"), 1);
    assert_eq!((a.earliest("t").expect("earliest"), a.latest("t").expect("latest")), (1, 1));
    assert_eq!(a.get("t", 1).expect("get").to_vec(), b"new");
}

/// A trim racing deletes and re-creates of its log never floors a new log
/// (each floor names the configuration it was published for). A race, so
/// not deterministic; bounded to `VARVE_STRESS_SECONDS` (default 5).
#[test]
fn a_trim_racing_a_re_create_never_floors_the_new_log() {
    let seconds = std::env::var("VARVE_STRESS_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(5);
    let (writer, trimmer) = two_clients("trimrecreate");
    writer.create_log("t", LogConfig::unbounded()).expect("create");
    for _ in 0..5 {
        writer.append("t", b"x").expect("append");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let trims = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut count = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let _ = trimmer.trim("t", 3);
                count += 1;
            }
            count
        })
    };
    let started = Instant::now();
    let (mut cycles, mut bad) = (0u64, None);
    while started.elapsed() < Duration::from_secs(seconds) && bad.is_none() {
        cycles += 1;
        writer.delete_log("t").expect("delete");
        writer.create_log("t", LogConfig::unbounded()).expect("create");
        writer.append("t", b"x").expect("append");
        let info = writer.log_info("t").expect("info");
        if info.earliest != 1 {
            bad = Some(info);
        }
        for _ in 0..4 {
            writer.append("t", b"x").expect("append");
        }
    }
    stop.store(true, Ordering::Relaxed);
    let trims = trims.join().expect("trimmer");
    println!("{cycles} re-creates beside {trims} trims");
    assert!(bad.is_none(), "after {cycles} re-creates and {trims} trims, a new log with one record: {bad:?}");
}

/// A watch that has read up to seq 3, then records 4..=10 and a trim before
/// 8: the watch is told `Trimmed` (it fell behind), as on every backend.
#[test]
fn a_watch_overtaken_by_a_trim_is_told_trimmed() {
    let (a, _) = two_clients("watchtrim");
    a.create_log("t", LogConfig::unbounded()).expect("create");
    for seq in 1..=3 {
        a.append("t", &value(seq)).expect("append");
    }
    let mut watch = a.watch("t", 1).expect("watch");
    for seq in 1..=3 {
        let record = watch.next_timeout(Duration::from_secs(10)).expect("read").expect("a record");
        assert_eq!(record.seq, seq);
    }
    for seq in 4..=10 {
        a.append("t", &value(seq)).expect("append");
    }
    assert_eq!(a.trim("t", 8).expect("trim"), 8);
    let next = watch.next_timeout(Duration::from_secs(10));
    assert!(
        matches!(next, Err(LogError::Trimmed { seq: 4, earliest: 8, .. })),
        "a watch waiting for seq 4 after a trim before 8 got {next:?}"
    );
}

/// A stream that refuses purges (`deny_purge`, set by its operator): the
/// trim reports the failed purge, saying that the floor holds, and every
/// client that reads the log's state finds nothing below it.
#[test]
fn a_purge_the_stream_refuses_is_reported_and_the_floor_holds() {
    let name = support::fresh_name("nopurge");
    let created = api(
        &format!("$JS.API.STREAM.CREATE.VARVE_{name}"),
        &serde_json::json!({
            "name": format!("VARVE_{name}"),
            "subjects": [format!("varve.{name}.>")],
            "storage": "file",
            "num_replicas": 3,
            "allow_direct": true,
            "allow_atomic": true,
            "deny_purge": true,
        }),
    );
    assert!(created["error"].is_null(), "{created}");
    wait_for_a_leader_of(&format!("VARVE_{name}"));
    let open = || {
        let store = NatsStore::open(&support::uri(support::cluster3(), "replicas=3")).expect("connect");
        store.nats_namespace(&name).expect("a namespace")
    };
    let (a, b) = (open(), open());
    a.create_log("t", LogConfig::unbounded()).expect("create");
    for seq in 1..=20 {
        a.append("t", &value(seq)).expect("append");
    }
    let err = a.trim("t", 15).expect_err("the purge is refused");
    assert!(err.to_string().contains("trim floor holds"), "{err}");
    assert!(matches!(a.get("t", 3), Err(LogError::Trimmed { earliest: 15, .. })), "the trimming client");
    assert_eq!(b.log_info("t").expect("info").earliest, 15, "another client reading the log's state");
    assert!(matches!(b.get("t", 3), Err(LogError::Trimmed { earliest: 15, .. })));
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
