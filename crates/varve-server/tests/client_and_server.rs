//! The server and the remote client together on a loopback port, for the
//! failure behaviour `docs/http.md` promises: refusals that reach the
//! client as refusals (not as lost answers), connections that must send a
//! request in time, restarts under a client's pooled connection and watch,
//! refused writes that leave nothing behind.

#![expect(clippy::unwrap_used, reason = "tests")]

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use varve_log::{JournalOptions, Limits, LogConfig, LogError, Store, SyncPolicy};
use varve_remote::{RemoteOptions, RemoteStore};
use varve_server::{ServeOptions, Server, Tokens};

/// A server on its own threads; stopped (gracefully) on drop.
struct Running {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    fn stop(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop_now();
    }
}

fn start_at(listen: SocketAddr, data: &Path, limits: Limits, tokens: Option<&str>) -> Running {
    start_with(listen, data, limits, tokens, Duration::from_secs(10))
}

fn start_with(
    listen: SocketAddr,
    data: &Path,
    limits: Limits,
    tokens: Option<&str>,
    header_timeout: Duration,
) -> Running {
    let mut options = ServeOptions::new(listen, data.to_owned());
    options.header_timeout = header_timeout;
    options.journal = JournalOptions { sync: SyncPolicy::Never, limits, ..JournalOptions::default() };
    if let Some(text) = tokens {
        options.tokens = Tokens::parse(text).unwrap();
    }
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async move {
            let server = Server::bind(options).await.unwrap();
            addr_tx.send(server.local_addr().unwrap()).unwrap();
            server
                .run(async {
                    let _ = stop_rx.await;
                })
                .await
                .unwrap();
        });
    });
    let addr = addr_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    Running { addr, stop: Some(stop_tx), thread: Some(thread) }
}

fn start(data: &Path, limits: Limits, tokens: Option<&str>) -> Running {
    start_at("127.0.0.1:0".parse().unwrap(), data, limits, tokens)
}

fn client(addr: SocketAddr, token: Option<&str>) -> RemoteStore {
    let options = RemoteOptions {
        token: token.map(str::to_owned),
        timeout: Duration::from_secs(10),
        ..RemoteOptions::new(format!("http://{addr}"))
    };
    RemoteStore::connect(options).unwrap()
}

/// A raw GET with `Connection: close`; the whole answer as text.
fn get_text(addr: SocketAddr, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").unwrap();
    let mut bytes = Vec::new();
    let _ = stream.read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes).into_owned()
}

/// `varve_http_requests_total` of `op`, summed over statuses.
fn requests_of(addr: SocketAddr, op: &str) -> u64 {
    let prefix = format!("varve_http_requests_total{{op=\"{op}\",");
    get_text(addr, "/metrics")
        .lines()
        .filter(|line| line.starts_with(&prefix))
        .filter_map(|line| line.rsplit(' ').next()?.trim().parse::<u64>().ok())
        .sum()
}

fn open_watches(addr: SocketAddr) -> Option<i64> {
    gauge(addr, "varve_open_watches ")
}

/// A gauge of `/metrics` whose line starts with `prefix` (its name and labels).
fn gauge(addr: SocketAddr, prefix: &str) -> Option<i64> {
    get_text(addr, "/metrics").lines().find_map(|line| line.strip_prefix(prefix)?.trim().parse().ok())
}

const SMALL: Limits = Limits { record_bytes_max: 1024, batch_bytes_max: 4096, batch_records_max: 16 };

/// A record over the server's record limit, but below the client's
/// `Expect: 100-continue` threshold (1 MiB), surely did not land: the server
/// refuses it by its declared length. The client must report `too_large`,
/// not `OutcomeUnknown` (which tells the user to go and check the log).
#[test]
fn a_record_over_the_servers_limit_is_too_large_not_outcome_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), SMALL, None);
    let store = client(server.addr, None);
    let ns = store.namespace("app").unwrap();
    ns.create_log("t", LogConfig::unbounded()).unwrap();
    let value = vec![b'x'; 768 << 10];
    let mut outcomes = Vec::new();
    for _ in 0..5 {
        match ns.append("t", &value) {
            Err(LogError::TooLarge { .. }) => outcomes.push("too_large".to_owned()),
            other => outcomes.push(format!("{other:?}")),
        }
    }
    assert!(outcomes.iter().all(|o| o == "too_large"), "{outcomes:#?}");
    assert_eq!(ns.latest("t").unwrap(), 0);
}

/// The same with a read-only token: the refusal (`Denied`) must come back,
/// not `OutcomeUnknown`.
#[test]
fn a_read_only_tokens_append_is_denied_not_outcome_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = "writer-0123456 read-write\nreader-0123456 read-only\n";
    let server = start(dir.path(), Limits::default(), Some(tokens));
    client(server.addr, Some("writer-0123456"))
        .namespace("app")
        .unwrap()
        .create_log("t", LogConfig::unbounded())
        .unwrap();
    let ns = client(server.addr, Some("reader-0123456")).namespace("app").unwrap();
    let value = vec![b'x'; 768 << 10];
    let mut outcomes = Vec::new();
    for _ in 0..5 {
        match ns.append("t", &value) {
            Err(LogError::Denied { .. }) => outcomes.push("denied".to_owned()),
            other => outcomes.push(format!("{other:?}")),
        }
    }
    assert!(outcomes.iter().all(|o| o == "denied"), "{outcomes:#?}");
}

/// A client that holds a pooled connection across a server restart: its
/// next append must land (the old connection is gone, nothing was sent on
/// it), not fail as `OutcomeUnknown`.
#[test]
fn an_append_after_a_server_restart_lands() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), Limits::default(), None);
    let addr = server.addr;
    let store = client(addr, None);
    let ns = store.namespace("app").unwrap();
    ns.create_log("t", LogConfig::unbounded()).unwrap();
    assert_eq!(ns.append("t", b"one").unwrap(), 1);
    server.stop();
    let _server = start_at(addr, dir.path(), Limits::default(), None);
    let result = ns.append("t", b"two");
    assert!(matches!(result, Ok(2)), "{result:?}");
}

/// A watch whose client went away must end on the server (its thread and
/// the `open_watches` gauge), well before the next keep-alive (15 s).
#[test]
fn a_watch_whose_client_vanished_ends_on_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), Limits::default(), None);
    let addr = server.addr;
    let ns = client(addr, None).namespace("app").unwrap();
    ns.create_log("t", LogConfig::unbounded()).unwrap();
    let mut watch = TcpStream::connect(addr).unwrap();
    watch.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(watch, "GET /v1/namespaces/app/logs/t/watch HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut head = [0u8; 12];
    watch.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    let deadline = Instant::now() + Duration::from_secs(5);
    while open_watches(addr) != Some(1) {
        assert!(Instant::now() < deadline, "the watch never counted as open");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(watch);
    let closed = Instant::now();
    let deadline = closed + Duration::from_secs(5);
    loop {
        let open = open_watches(addr);
        if open == Some(0) {
            break;
        }
        assert!(Instant::now() < deadline, "5 s after the client left, open_watches is {open:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A remote watch across a server restart resumes with no gap and no duplicate.
#[test]
fn a_remote_watch_resumes_across_a_server_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), Limits::default(), None);
    let addr = server.addr;
    let ns = client(addr, None).namespace("app").unwrap();
    ns.create_log("t", LogConfig::unbounded()).unwrap();
    ns.append("t", b"1").unwrap();
    let mut watch = ns.watch("t", 1).unwrap();
    let first = watch.next_timeout(Duration::from_secs(10)).unwrap().unwrap();
    assert_eq!(first.seq, 1);
    server.stop();
    let _server = start_at(addr, dir.path(), Limits::default(), None);
    let writer = client(addr, None).namespace("app").unwrap();
    writer.append("t", b"2").unwrap();
    writer.append("t", b"3").unwrap();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while seen.len() < 2 && Instant::now() < deadline {
        match watch.next_timeout(Duration::from_secs(1)) {
            Ok(Some(record)) => seen.push(record.seq),
            Ok(None) => {}
            Err(e) => panic!("watch error: {e}"),
        }
    }
    assert_eq!(seen, [2, 3]);
}

/// docs/http.md: a rename body of up to 4,096 pairs is accepted (names are
/// up to 200 bytes). The server must not refuse such a body as too large.
#[test]
fn a_rename_of_4096_pairs_with_long_names_is_not_too_large() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), Limits::default(), None);
    let mut body = String::from("{\"renames\":[");
    for i in 0..4096 {
        if i > 0 {
            body.push(',');
        }
        let from = format!("{i:0>200}");
        let to = format!("{i:z>200}");
        let _ = write!(body, "{{\"from\":\"{from}\",\"to\":\"{to}\"}}");
    }
    body.push_str("]}");
    let mut stream = TcpStream::connect(server.addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        stream,
        "POST /v1/namespaces/app/rename HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    let _ = stream.write_all(body.as_bytes());
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    // The logs do not exist: `log_not_found` (or `namespace_not_found`) is
    // the right refusal; `too_large` is not.
    assert!(!answer.contains("too_large"), "body of {} bytes: {answer}", body.len());
}

/// A raw request with `Connection: close`: (status, body).
fn send(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut head =
        format!("{method} {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    for (name, value) in headers {
        let _ = write!(head, "{name}: {value}\r\n");
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    let _ = stream.write_all(body);
    let mut bytes = Vec::new();
    let _ = stream.read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or(String::new(), |(_, b)| b.to_owned());
    (status, body)
}

/// A write refused for a log that does not exist must not create the
/// namespace it named (a typo in a namespace leaves no trace behind).
#[test]
fn a_refused_write_to_an_unknown_namespace_does_not_create_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), Limits::default(), None);
    let addr = server.addr;
    let (status, _) = send(addr, "POST", "/v1/namespaces/typo/logs/t/records", &[], b"x");
    assert_eq!(status, 404);
    let (status, _) = send(
        addr,
        "POST",
        "/v1/namespaces/typo2/logs/t/trim",
        &[("Content-Type", "application/json")],
        b"{\"before\":1}",
    );
    assert_eq!(status, 404);
    let (_, listed) = send(addr, "GET", "/v1/namespaces", &[], b"");
    assert!(!listed.contains("typo"), "refused writes created namespaces: {listed}");
}

/// `append_if` conflicts carry the actual latest, on every write path:
/// plain, with a request id, and through a (writer-only) runtime.
#[test]
fn append_if_conflicts_carry_the_actual_latest_on_every_path() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), Limits::default(), None);
    let addr = server.addr;
    assert_eq!(send(addr, "PUT", "/v1/namespaces/app/logs/t", &[], b"").0, 201);
    for _ in 0..3 {
        assert_eq!(send(addr, "POST", "/v1/namespaces/app/logs/t/records", &[], b"x").0, 201);
    }
    let conflict = |headers: &[(&str, &str)]| {
        let (status, body) = send(addr, "POST", "/v1/namespaces/app/logs/t/records?if_latest=1", headers, b"y");
        let json: serde_json::Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        (status, json)
    };
    let (status, json) = conflict(&[]);
    assert_eq!((status, &json["error"], &json["actual"]), (409, &"conflict".into(), &3.into()), "{json}");
    let (status, json) = conflict(&[("Varve-Request-Id", "r-1")]);
    assert_eq!((status, &json["error"], &json["actual"]), (409, &"conflict".into(), &3.into()), "{json}");
    // A caused append starts a writer-only runtime; later writes go through it.
    let cause = [("Varve-Cause", "00000000000000ab:other:7"), ("Varve-Trace", "abc")];
    let (status, body) = send(addr, "POST", "/v1/namespaces/app/logs/t/records", &cause, b"z");
    assert_eq!(status, 201, "{body}");
    let (status, json) = conflict(&[]);
    assert_eq!((status, &json["error"], &json["actual"]), (409, &"conflict".into(), &4.into()), "{json}");
    let (status, json) = conflict(&[("Varve-Request-Id", "r-2")]);
    assert_eq!((status, &json["error"], &json["actual"]), (409, &"conflict".into(), &4.into()), "{json}");
    // A batch with a missing log lands nothing, on the runtime path too.
    let batch = br#"{"records":[{"log":"t","value":"YQ=="},{"log":"missing","value":"YQ=="}]}"#;
    let json_type = ("Content-Type", "application/json");
    let (status, body) = send(addr, "POST", "/v1/namespaces/app/batch", &[json_type], batch);
    assert_eq!(status, 404, "{body}");
    let (status, body) =
        send(addr, "POST", "/v1/namespaces/app/batch", &[json_type, ("Varve-Request-Id", "b-1")], batch);
    assert_eq!(status, 404, "{body}");
    let (_, info) = send(addr, "GET", "/v1/namespaces/app/logs/t", &[], b"");
    assert!(info.contains("\"latest\":4"), "{info}");
}

/// docs/http.md, Connections: "a client has 10 s to send a request's head";
/// a connection that sends nothing at all must be closed after the header
/// timeout too (else idle connections pile up to `--connections-max`).
#[test]
fn a_connection_that_sends_nothing_is_closed_after_the_header_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let server =
        start_with("127.0.0.1:0".parse().unwrap(), dir.path(), Limits::default(), None, Duration::from_secs(1));
    let mut still_open = Vec::new();
    for opening in [&b""[..], b"P", b"GET / HT"] {
        let mut stream = TcpStream::connect(server.addr).unwrap();
        stream.write_all(opening).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(6))).unwrap();
        let mut buf = Vec::new();
        if stream.read_to_end(&mut buf).is_err() {
            still_open.push(String::from_utf8_lossy(opening).into_owned());
        }
    }
    assert!(still_open.is_empty(), "still open 6 s after sending {still_open:?} (header timeout 1 s)");
}

/// A record over the limit and over 1 MiB goes with `Expect: 100-continue`:
/// its refusal comes back as `too_large`.
#[test]
fn a_large_record_over_the_limit_is_too_large() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), SMALL, None);
    let ns = client(server.addr, None).namespace("app").unwrap();
    ns.create_log("t", LogConfig::unbounded()).unwrap();
    let value = vec![b'x'; 2 << 20];
    for _ in 0..3 {
        let result = ns.append("t", &value);
        assert!(matches!(result, Err(LogError::TooLarge { what: "record", .. })), "{result:?}");
    }
}

/// A body declared and then not sent (or stalled part-way) is answered once
/// nothing more arrives for the header timeout, not waited for forever.
#[test]
fn a_body_that_stops_arriving_is_answered_after_the_header_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let server =
        start_with("127.0.0.1:0".parse().unwrap(), dir.path(), Limits::default(), None, Duration::from_secs(1));
    for sent in [&b""[..], b"half of it"] {
        let mut stream = TcpStream::connect(server.addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        write!(stream, "POST /v1/namespaces/app/logs/t/records HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n")
            .unwrap();
        stream.write_all(sent).unwrap();
        let started = Instant::now();
        let mut answer = [0u8; 512];
        let read = stream.read(&mut answer).unwrap();
        let answer = String::from_utf8_lossy(&answer[..read]);
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
        assert!(answer.contains("stalled"), "{answer}");
        assert!(started.elapsed() < Duration::from_secs(15), "answered after {:?}", started.elapsed());
    }
}

/// A client without a token that declares a body and sends part of it is
/// refused once the header timeout passes: no patience, and no buffer, for
/// a request that is refused anyway.
#[test]
fn a_request_without_a_token_is_refused_without_waiting_for_its_body() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = "writer-0123456 read-write\n";
    let server =
        start_with("127.0.0.1:0".parse().unwrap(), dir.path(), Limits::default(), Some(tokens), Duration::from_secs(1));
    let mut stream = TcpStream::connect(server.addr).unwrap();
    write!(stream, "POST /v1/namespaces/app/logs/t/records HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n", 1 << 20)
        .unwrap();
    stream.write_all(&[b'x'; 100]).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let started = Instant::now();
    let mut head = [0u8; 12];
    let answer = stream.read_exact(&mut head).map(|()| String::from_utf8_lossy(&head).into_owned());
    assert!(
        matches!(&answer, Ok(text) if text == "HTTP/1.1 401"),
        "no token, body not sent: after {:?} (header timeout 1 s) got {answer:?}",
        started.elapsed()
    );
}

/// A bad rename is refused for what is wrong with it (a name renamed
/// twice), in a namespace never written as in one written.
#[test]
fn a_bad_rename_in_a_namespace_never_written_is_refused_for_what_is_wrong_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), Limits::default(), None);
    let body = br#"{"renames":[{"from":"a","to":"b"},{"from":"a","to":"c"}]}"#;
    let json = [("Content-Type", "application/json")];
    assert_eq!(send(server.addr, "PUT", "/v1/namespaces/written/logs/x", &[], b"").0, 201);
    let (status, written) = send(server.addr, "POST", "/v1/namespaces/written/rename", &json, body);
    assert_eq!(status, 400, "{written}");
    let (status, fresh) = send(server.addr, "POST", "/v1/namespaces/fresh/rename", &json, body);
    assert_eq!(status, 400, "a namespace never written: {fresh}");
}

/// Every operation on a log of a namespace never written is `LogNotFound`
/// through the client, as for any log that does not exist.
#[test]
fn unknown_logs_in_a_namespace_never_written_are_log_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), Limits::default(), None);
    let ns = client(server.addr, None).namespace("never").unwrap();
    let outcomes = [
        ns.append("nope", b"x").map(drop),
        ns.get("nope", 1).map(drop),
        ns.latest("nope").map(drop),
        ns.scan("nope", varve_log::SeqRange::ALL).map(drop),
        ns.trim("nope", 1).map(drop),
        ns.delete_log("nope"),
    ];
    assert!(outcomes.iter().all(|r| matches!(r, Err(LogError::LogNotFound { .. }))), "{outcomes:#?}");
}

/// Conditional batches are served: the schema registry, which registers a
/// version with an `append_batch_if` on `_schema`'s end (so two registrars
/// cannot both register version n), works through a server, and a second
/// client sees what the first registered.
#[test]
fn a_schema_registers_through_the_server() {
    use varve_schema::{Field, FieldType, Schemas, Spec};
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), Limits::default(), None);
    let ns = client(server.addr, None).namespace("app").unwrap();
    let schemas = Schemas::open(ns).unwrap();
    let v1 = vec![Field::new(1, "celsius", FieldType::I64)];
    let mut v2 = v1.clone();
    v2.push(Field::new(2, "site", FieldType::String).with_default(serde_json::json!("roof")));
    let first = schemas.register("readings", &Spec::new(v1)).unwrap();
    let second = schemas.register("readings", &Spec::new(v2)).unwrap();
    assert!(first.created && second.created);
    assert_eq!((first.version.version, second.version.version), (1, 2));
    let other = Schemas::open(client(server.addr, None).namespace("app").unwrap()).unwrap();
    let versions: Vec<u32> = other.subject("readings").unwrap().versions.iter().map(|v| v.version).collect();
    assert_eq!(versions, vec![1, 2]);
}

/// A versioned map's update reaches the server as one conditional batch
/// (its entries in every log it touches), not one conditional append per
/// entry, and a handle's update after its own reads only the op log's end:
/// four requests per insert, counted in the server's metrics.
#[test]
fn a_map_update_through_the_server_is_four_requests() {
    const INSERTS: u64 = 200;
    const OPS: [&str; 6] = ["append", "append_batch", "create_log", "log_info", "get", "scan"];
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), Limits::default(), None);
    let ns = client(server.addr, None).namespace("app").unwrap();
    let mut map = varve_pds::SortedMap::<u64, u64>::open(ns, "m", varve_pds::Options::default()).unwrap();
    // The handle's first update catches up (reads the logs' ends).
    map.insert(&u64::MAX, &0).unwrap();
    let before = OPS.map(|op| requests_of(server.addr, op));
    for i in 0..INSERTS {
        map.insert(&(i * 7919 % 1_000_003), &i).unwrap();
    }
    let after = OPS.map(|op| requests_of(server.addr, op));
    let counts: Vec<(&str, u64)> = OPS.iter().zip(before.iter().zip(&after)).map(|(op, (b, a))| (*op, a - b)).collect();
    assert_eq!(map.len(None).unwrap(), 201);
    // The op log's end, the op, the new node's LinkLog, the batch.
    let expected: Vec<(&str, u64)> = OPS.iter().zip([1, 1, 1, 1, 0, 0]).map(|(op, n)| (*op, n * INSERTS)).collect();
    assert_eq!(counts, expected, "requests for {INSERTS} inserts");
}

/// The `Varve-Cause` headers of an append from another host's handler: such
/// an append starts the namespace's writer-only runtime, and every write
/// after it goes through the runtime.
const CAUSE: [(&str, &str); 2] = [("Varve-Cause", "00000000000000ab:other:7"), ("Varve-Trace", "abc")];

/// The schema registry keeps `_schema`, a log of Varve's own but not the
/// runtime's: it registers through a server whose namespace writes through a
/// runtime (creating `_schema` there, and appending to it conditionally).
#[test]
fn a_schema_registers_through_a_server_whose_namespace_has_a_runtime() {
    use varve_schema::{Field, FieldType, Schemas, Spec};
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), Limits::default(), None);
    let addr = server.addr;
    assert_eq!(send(addr, "PUT", "/v1/namespaces/app/logs/t", &[], b"").0, 201);
    let (status, body) = send(addr, "POST", "/v1/namespaces/app/logs/t/records", &CAUSE, b"z");
    assert_eq!(status, 201, "{body}");
    let schemas = Schemas::open(client(addr, None).namespace("app").unwrap()).unwrap();
    let v1 = vec![Field::new(1, "celsius", FieldType::I64)];
    let mut v2 = v1.clone();
    v2.push(Field::new(2, "site", FieldType::String).with_default(serde_json::json!("roof")));
    assert_eq!(schemas.register("readings", &Spec::new(v1)).unwrap().version.version, 1);
    assert_eq!(schemas.register("readings", &Spec::new(v2)).unwrap().version.version, 2);
    assert!(varve_runtime::CLIENT_SYSTEM_LOGS.contains(&varve_schema::SCHEMA_LOG));
    // Varve's other `_` logs are written only by the part that keeps them:
    // the runtime its own, a repair its shadows.
    let json_type = ("Content-Type", "application/json");
    for log in ["_events", "_shadow.t"] {
        let batch = format!(r#"{{"records":[{{"log":"{log}","value":"YQ=="}}]}}"#);
        let (status, body) = send(addr, "POST", "/v1/namespaces/app/batch", &[json_type], batch.as_bytes());
        assert_eq!(status, 400, "{log}: {body}");
        assert!(body.contains("system log"), "{log}: {body}");
    }
}

/// A conditional batch with a stale expectation and a record for a log that
/// does not exist is answered the same on every write path: straight,
/// straight with a request id, and through a runtime — the unknown log
/// first, as every backend checks (`varve_log::rules::assign_seqs`).
#[test]
fn a_conditional_batch_is_checked_in_the_same_order_on_every_path() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), Limits::default(), None);
    let addr = server.addr;
    assert_eq!(send(addr, "PUT", "/v1/namespaces/app/logs/t", &[], b"").0, 201);
    assert_eq!(send(addr, "POST", "/v1/namespaces/app/logs/t/records", &[], b"x").0, 201);
    let batch =
        br#"{"records":[{"log":"t","value":"YQ=="},{"log":"missing","value":"YQ=="}],"expected":[{"log":"t","latest":0}]}"#;
    let json_type = ("Content-Type", "application/json");
    let mut answers = vec![send(addr, "POST", "/v1/namespaces/app/batch", &[json_type], batch)];
    answers.push(send(addr, "POST", "/v1/namespaces/app/batch", &[json_type, ("Varve-Request-Id", "r-9")], batch));
    assert_eq!(send(addr, "POST", "/v1/namespaces/app/logs/t/records", &CAUSE, b"z").0, 201);
    answers.push(send(addr, "POST", "/v1/namespaces/app/batch", &[json_type], batch));
    for (path, (status, body)) in ["straight", "with a request id", "through a runtime"].iter().zip(&answers) {
        assert_eq!(*status, 404, "{path}: {body}");
        assert!(body.contains(r#""log":"missing""#), "{path}: {body}");
    }
}

/// Each open namespace's journal memory is in `/metrics`, by part, and
/// follows the logs it holds.
#[test]
fn metrics_count_each_open_namespaces_journal_memory() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), Limits::default(), None);
    let ns = client(server.addr, None).namespace("mem").unwrap();
    ns.create_log("first", LogConfig::unbounded()).unwrap();
    let logs_before = gauge(server.addr, "varve_journal_logs{namespace=\"mem\"} ").unwrap();
    let states_before =
        gauge(server.addr, "varve_journal_memory_bytes{namespace=\"mem\",part=\"log_states\"} ").unwrap();
    assert!(logs_before >= 1 && states_before > 0, "{logs_before} logs, {states_before} bytes");
    for i in 0..100 {
        let log = format!("sensor-{i}");
        ns.create_log(&log, LogConfig::unbounded()).unwrap();
        ns.append(&log, b"reading").unwrap();
    }
    let logs = gauge(server.addr, "varve_journal_logs{namespace=\"mem\"} ").unwrap();
    let states = gauge(server.addr, "varve_journal_memory_bytes{namespace=\"mem\",part=\"log_states\"} ").unwrap();
    let indexes = gauge(server.addr, "varve_journal_memory_bytes{namespace=\"mem\",part=\"indexes\"} ").unwrap();
    assert_eq!(logs, logs_before + 100);
    assert_eq!(states, states_before / logs_before * logs, "the same bytes for every log");
    assert!(indexes >= 100 * 12, "a 12-byte position per record at least: {indexes}");
}

/// Poll `/metrics` until the gauge at `prefix` reads `want` (10 s at most).
fn wait_for_gauge(addr: SocketAddr, prefix: &str, want: i64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let value = gauge(addr, prefix);
        if value == Some(want) {
            return;
        }
        assert!(Instant::now() < deadline, "{prefix}is {value:?} after 10 s, not {want}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The value a test appends as `seq`: small, or (every 50th) over the
/// 16 KiB a log's shared reader broadcasts, which each watch then reads
/// from the journal itself.
fn value_of(seq: u64) -> Vec<u8> {
    let len = if seq.is_multiple_of(50) { 100 << 10 } else { 8 };
    let mut value = seq.to_le_bytes().to_vec();
    value.resize(len, u8::try_from(seq % 251).unwrap());
    value
}

/// Read `watch` until it has delivered `last`; the seqs it delivered.
fn read_through(watch: &mut varve_log::Watch, last: u64) -> Vec<u64> {
    let mut seqs = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while seqs.last().is_none_or(|&seq| seq < last) {
        assert!(Instant::now() < deadline, "60 s and the watch is at {:?} of {last}", seqs.last());
        if let Some(record) = watch.next_timeout(Duration::from_secs(1)).unwrap() {
            assert_eq!(record.value, value_of(record.seq), "the value of seq {}", record.seq);
            seqs.push(record.seq);
        }
    }
    seqs
}

/// docs/http.md: the watches of one log share one reader on the server
/// (`varve_watched_logs`); each still gets every record from its own
/// `from` in order, the ones before it joined and the ones too large to
/// broadcast included; the reader ends with the last watch; a deleted log
/// ends every watch with an error.
#[test]
fn watches_of_one_log_share_a_reader_and_each_gets_every_record_from_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), Limits::default(), None);
    let ns = client(server.addr, None).namespace("app").unwrap();
    ns.create_log("t", LogConfig::unbounded()).unwrap();
    for seq in 1..=120 {
        assert_eq!(ns.append("t", &value_of(seq)).unwrap(), seq);
    }
    let starts = [1, 2, 49, 50, 51, 100, 120, 121];
    let stores: Vec<RemoteStore> = starts.iter().map(|_| client(server.addr, None)).collect();
    let mut watches: Vec<varve_log::Watch> = stores
        .iter()
        .zip(starts)
        .map(|(store, from)| store.namespace("app").unwrap().watch("t", from).unwrap())
        .collect();
    wait_for_gauge(server.addr, "varve_open_watches ", 8);
    wait_for_gauge(server.addr, "varve_watched_logs ", 1);
    for seq in 121..=400 {
        assert_eq!(ns.append("t", &value_of(seq)).unwrap(), seq);
    }
    for (watch, from) in watches.iter_mut().zip(starts) {
        assert_eq!(read_through(watch, 400), (from..=400).collect::<Vec<_>>(), "the watch from {from}");
    }
    // One watch more, joining a running reader from the start.
    let late = client(server.addr, None);
    let mut late_watch = late.namespace("app").unwrap().watch("t", 1).unwrap();
    assert_eq!(read_through(&mut late_watch, 400), (1..=400).collect::<Vec<_>>());
    assert_eq!(gauge(server.addr, "varve_watched_logs "), Some(1));

    ns.delete_log("t").unwrap();
    for watch in &mut watches {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match watch.next_timeout(Duration::from_millis(200)) {
                Err(LogError::LogNotFound { .. }) => break,
                Ok(None) => assert!(Instant::now() < deadline, "no error 10 s after the log was deleted"),
                other => panic!("after the delete: {other:?}"),
            }
        }
    }
    drop((watches, late_watch));
    wait_for_gauge(server.addr, "varve_open_watches ", 0);
    wait_for_gauge(server.addr, "varve_watched_logs ", 0);
}

/// A watch whose client stops reading falls behind its log's shared reader
/// (counted in `varve_watch_lags_total`) while the others go on; once it
/// reads again it gets every record, in order, from the journal.
#[test]
fn a_watch_that_falls_behind_the_shared_reader_catches_up_from_the_journal() {
    use std::io::BufRead as _;

    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), Limits::default(), None);
    let ns = client(server.addr, None).namespace("app").unwrap();
    ns.create_log("t", LogConfig::unbounded()).unwrap();
    // The slow watch is a raw HTTP/1.0 stream (close-delimited, no chunks)
    // that reads nothing until the appends are done: its socket's receive
    // buffer stays small, as the kernel grows it only for a reader that reads.
    let mut slow = TcpStream::connect(server.addr).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(slow, "GET /v1/namespaces/app/logs/t/watch?from=1 HTTP/1.0\r\nHost: t\r\n\r\n").unwrap();
    let brisk_store = client(server.addr, None);
    let mut brisk = brisk_store.namespace("app").unwrap().watch("t", 1).unwrap();
    wait_for_gauge(server.addr, "varve_open_watches ", 2);
    // 48 MiB of base64 to the slow watch, far more than its socket holds:
    // its task on the server stops taking the broadcast, which wraps past it.
    let records: u64 = 3_000;
    let record = |seq: u64| {
        let mut value = seq.to_le_bytes().to_vec();
        value.resize(12 << 10, 7);
        value
    };
    for seq in 1..=records {
        assert_eq!(ns.append("t", &record(seq)).unwrap(), seq);
        if seq % 100 == 0 {
            // The brisk watch keeps up as it goes.
            for want in seq - 99..=seq {
                let got = brisk.next_timeout(Duration::from_secs(10)).unwrap().unwrap();
                assert_eq!((got.seq, &got.value[..]), (want, &record(want)[..]));
            }
        }
    }
    let mut lines = std::io::BufReader::new(slow).lines().map(Result::unwrap);
    assert!(lines.next().unwrap().starts_with("HTTP/1.0 200"));
    let mut want = 1;
    let mut id = None;
    while want <= records {
        let line = lines.next().expect("the stream ended early");
        if let Some(seq) = line.strip_prefix("id: ") {
            id = Some(seq.parse::<u64>().unwrap());
        } else if let Some(data) = line.strip_prefix("data: ") {
            assert_eq!(id, Some(want), "the record after {}", want - 1);
            assert_eq!(data, varve_server::wire::encode_value(&record(want)), "the value of seq {want}");
            want += 1;
        } else if line.starts_with("event: ") {
            assert_eq!(line, "event: record");
        }
    }
    // A receiver learns it lagged when it next takes from the broadcast: as
    // the slow watch read again.
    let lags = gauge(server.addr, "varve_watch_lags_total ").unwrap();
    assert!(lags >= 1, "the slow watch never lagged: {lags}");
}

/// A watch follows its log across a rename (contract rule 7), and a watch
/// of the name afterwards follows the new log that holds it: they share no
/// reader, though the name is the same.
#[test]
fn watches_of_a_name_before_and_after_a_rename_follow_their_own_logs() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), Limits::default(), None);
    let ns = client(server.addr, None).namespace("app").unwrap();
    ns.create_log("a", LogConfig::unbounded()).unwrap();
    ns.append("a", b"old 1").unwrap();
    let (first_store, second_store) = (client(server.addr, None), client(server.addr, None));
    let mut first = first_store.namespace("app").unwrap().watch("a", 1).unwrap();
    let got = first.next_timeout(Duration::from_secs(10)).unwrap().unwrap();
    assert_eq!((got.seq, &got.value[..]), (1, &b"old 1"[..]));
    ns.rename_logs(&[("a", "b")]).unwrap();
    ns.create_log("a", LogConfig::unbounded()).unwrap();
    let mut second = second_store.namespace("app").unwrap().watch("a", 1).unwrap();
    wait_for_gauge(server.addr, "varve_watched_logs ", 2);
    ns.append("a", b"new 1").unwrap();
    ns.append("b", b"old 2").unwrap();
    ns.append("a", b"new 2").unwrap();
    let read = |watch: &mut varve_log::Watch| {
        let record = watch.next_timeout(Duration::from_secs(10)).unwrap().unwrap();
        (record.seq, String::from_utf8(record.value.to_vec()).unwrap())
    };
    assert_eq!(read(&mut first), (2, "old 2".to_owned()));
    assert_eq!(read(&mut second), (1, "new 1".to_owned()));
    assert_eq!(read(&mut second), (2, "new 2".to_owned()));
}
