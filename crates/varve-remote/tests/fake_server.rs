//! The client against a scripted stand-in for `varve serve` on a loopback
//! port: what goes on the wire, and what the client makes of answers that
//! are lost or streams that break. The conformance suite against the real
//! server lives with the CLI's tests; these need no server.

#![expect(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use varve_log::{LogError, Store};
use varve_remote::{RemoteOptions, RemoteStore};

/// One request as the stand-in read it.
#[derive(Debug)]
struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }
}

fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut words = line.split_whitespace();
    let (method, path) = (words.next()?.to_owned(), words.next()?.to_owned());
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line).ok()?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (key, value) = line.split_once(':')?;
        headers.push((key.trim().to_owned(), value.trim().to_owned()));
    }
    let mut request = Request { method, path, headers, body: Vec::new() };
    let length: usize = request.header("content-length").map_or(0, |v| v.parse().unwrap_or(0));
    request.body = vec![0; length];
    reader.read_exact(&mut request.body).ok()?;
    Some(request)
}

/// A whole answer, after which the connection is closed.
fn answer(stream: &mut TcpStream, status: u16, content_type: &str, body: &[u8]) {
    let head = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body);
}

/// The start of an event stream; events follow with `write_all`.
fn start_events(stream: &mut TcpStream) {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
    stream.write_all(head.as_bytes()).unwrap();
}

fn record_event(seq: u64, base64: &str) -> String {
    format!("id: {seq}\nevent: record\ndata: {base64}\n\n")
}

/// Serve the next `connections` connections with `handle`, one request each
/// (`/healthz` is answered `ok` without counting). Sends each request's
/// method, path and headers to the returned channel.
fn serve(
    listener: TcpListener,
    connections: usize,
    mut handle: impl FnMut(usize, &Request, TcpStream) + Send + 'static,
) -> (mpsc::Receiver<Request>, JoinHandle<()>) {
    let (seen, requests) = mpsc::channel();
    let server = thread::spawn(move || {
        let mut served = 0;
        while served < connections {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let Some(request) = read_request(&mut reader) else { continue };
            let mut stream = stream;
            if request.path == "/healthz" {
                answer(&mut stream, 200, "text/plain", b"ok");
                continue;
            }
            handle(served, &request, stream);
            let _ = seen.send(request);
            served += 1;
        }
    });
    (requests, server)
}

fn listener() -> (TcpListener, String) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    (listener, address)
}

fn store(address: &str, token: Option<&str>) -> RemoteStore {
    let options = RemoteOptions {
        token: token.map(str::to_owned),
        timeout: Duration::from_secs(5),
        ..RemoteOptions::new(format!("http://{address}"))
    };
    RemoteStore::connect(options).unwrap()
}

#[test]
fn a_store_that_cannot_be_reached_is_unavailable() {
    let (listener, address) = listener();
    drop(listener);
    let err = RemoteStore::connect(RemoteStore::parse_uri(&format!("varve://{address}")).unwrap()).unwrap_err();
    assert!(matches!(&err, LogError::Unavailable { target, .. } if *target == format!("varve://{address}")), "{err}");
}

#[test]
fn requests_carry_the_token_and_errors_come_back_typed() {
    let (listener, address) = listener();
    let (requests, server) = serve(listener, 2, |i, _, mut stream| {
        let error: &[u8] = if i == 0 {
            br#"{"error":"log_not_found","message":"no log","namespace":"sensors","log":"t"}"#
        } else {
            br#"{"error":"forbidden","message":"a read-only token"}"#
        };
        answer(&mut stream, if i == 0 { 404 } else { 403 }, "application/json", error);
    });
    let store = store(&address, Some("s3cr3t"));
    let ns = store.namespace("sensors").unwrap();
    let err = ns.latest("t").unwrap_err();
    assert!(matches!(&err, LogError::LogNotFound { namespace, log } if namespace == "sensors" && log == "t"), "{err}");
    let err = ns.append("t", b"21.5").unwrap_err();
    assert!(matches!(&err, LogError::Denied { reason, .. } if reason == "a read-only token"), "{err}");
    server.join().unwrap();
    let info = requests.recv().unwrap();
    assert_eq!((info.method.as_str(), info.path.as_str()), ("GET", "/v1/namespaces/sensors/logs/t"));
    assert_eq!(info.header("authorization"), Some("Bearer s3cr3t"));
    let append = requests.recv().unwrap();
    assert_eq!((append.method.as_str(), append.path.as_str()), ("POST", "/v1/namespaces/sensors/logs/t/records"));
    assert_eq!(append.header("content-type"), Some("application/octet-stream"));
    assert_eq!(append.body, b"21.5");
}

#[test]
fn an_append_whose_answer_is_lost_is_not_sent_again() {
    let (listener, address) = listener();
    // Read the append and close without answering.
    let (requests, server) = serve(listener, 1, |_, _, stream| drop(stream));
    let store = store(&address, None);
    let err = store.namespace("sensors").unwrap().append("t", b"x").unwrap_err();
    assert!(matches!(&err, LogError::OutcomeUnknown { operation, .. } if operation == "append to log \"t\""), "{err}");
    server.join().unwrap();
    assert_eq!(requests.iter().count(), 1);
}

#[test]
fn an_identified_batch_is_sent_again_with_its_id() {
    let (listener, address) = listener();
    let (requests, server) = serve(listener, 2, |i, _, mut stream| {
        if i == 1 {
            answer(&mut stream, 201, "application/json", br#"{"seqs":[7,3],"repeated":true}"#);
        }
    });
    let ns = store(&address, None).remote_namespace("sensors").unwrap();
    let (seqs, repeated) = ns.append_batch_once(&[("a", b"1"), ("b", b"2")], "sensor-7:1042").unwrap();
    assert_eq!((seqs, repeated), (vec![7, 3], true));
    server.join().unwrap();
    let sent: Vec<Request> = requests.iter().collect();
    assert_eq!(sent.len(), 2);
    for request in &sent {
        assert_eq!(request.path, "/v1/namespaces/sensors/batch");
        assert_eq!(request.header("varve-request-id"), Some("sensor-7:1042"));
        assert_eq!(request.body, sent[0].body);
    }
    assert_eq!(
        String::from_utf8_lossy(&sent[0].body),
        r#"{"records":[{"log":"a","value":"MQ=="},{"log":"b","value":"Mg=="}]}"#
    );
}

#[test]
fn a_scan_streams_its_lines() {
    let (listener, address) = listener();
    let (requests, server) = serve(listener, 1, |_, _, mut stream| {
        let body = b"{\"seq\":5,\"value\":\"MjEuNQ==\"}\n{\"seq\":6,\"value\":\"\"}\n{\"end\":true,\"records\":2}\n";
        answer(&mut stream, 200, "application/x-ndjson", body);
    });
    let ns = store(&address, None).namespace("sensors").unwrap();
    let records: Vec<_> = ns.scan("t", (5..).into()).unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(records.iter().map(|r| r.seq).collect::<Vec<_>>(), [5, 6]);
    assert_eq!(&records[0].value[..], b"21.5");
    server.join().unwrap();
    assert_eq!(requests.recv().unwrap().path, "/v1/namespaces/sensors/logs/t/records?from=5");
}

#[test]
fn a_watch_resumes_after_its_last_record_and_stops_when_dropped() {
    let (listener, address) = listener();
    let (closed, closed_rx) = mpsc::channel();
    let (requests, server) = serve(listener, 2, move |i, _, mut stream| {
        start_events(&mut stream);
        if i == 0 {
            // Two records, then the stream breaks.
            let events = format!(": keep-alive\n\n{}{}", record_event(1, "YQ=="), record_event(2, "Yg=="));
            stream.write_all(events.as_bytes()).unwrap();
        } else {
            stream.write_all(record_event(3, "Yw==").as_bytes()).unwrap();
            // Hold the stream open until the client closes it.
            let closed = closed.clone();
            thread::spawn(move || {
                let mut rest = Vec::new();
                let _ = stream.read_to_end(&mut rest);
                let _ = closed.send(Instant::now());
            });
        }
    });
    let ns = store(&address, None).namespace("sensors").unwrap();
    let mut watch = ns.watch("t", 0).unwrap();
    for (seq, value) in [(1, b"a"), (2, b"b"), (3, b"c")] {
        let record = watch.next_timeout(Duration::from_secs(5)).unwrap().expect("a record");
        assert_eq!((record.seq, &record.value[..]), (seq, &value[..]));
    }
    assert!(watch.next_timeout(Duration::from_millis(50)).unwrap().is_none());
    let dropped = Instant::now();
    drop(watch);
    // Promptly: well before the client's 5 s timeout or the watch's 45 s
    // silence limit would end it (a margin for a loaded machine).
    let closed = closed_rx.recv_timeout(Duration::from_secs(10)).expect("the watch's connection closes");
    let took = closed.duration_since(dropped);
    assert!(took < Duration::from_secs(4), "the connection closed {took:?} after the drop");
    server.join().unwrap();
    let first = requests.recv().unwrap();
    assert_eq!(first.path, "/v1/namespaces/sensors/logs/t/watch?from=1");
    assert_eq!(first.header("last-event-id"), None);
    let second = requests.recv().unwrap();
    assert_eq!(second.path, "/v1/namespaces/sensors/logs/t/watch?from=3");
    assert_eq!(second.header("last-event-id"), Some("2"));
}

#[test]
fn a_watch_waits_out_a_server_that_is_gone() {
    let (listener, address) = listener();
    let (_, server) = serve(listener, 1, |_, _, mut stream| {
        start_events(&mut stream);
        stream.write_all(record_event(1, "YQ==").as_bytes()).unwrap();
    });
    let ns = store(&address, None).namespace("sensors").unwrap();
    let mut watch = ns.watch("t", 1).unwrap();
    assert_eq!(watch.next_timeout(Duration::from_secs(5)).unwrap().expect("a record").seq, 1);
    server.join().unwrap(); // the listener is closed: every reconnection is refused
    let started = Instant::now();
    assert!(watch.next_timeout(Duration::from_millis(300)).unwrap().is_none());
    // Its own timeout, not the client's 5 s (a margin for a loaded machine).
    assert!(started.elapsed() < Duration::from_secs(4), "returned after {:?}", started.elapsed());

    // The server comes back on the same port: the watch picks up after seq 1.
    let listener = TcpListener::bind(&address).unwrap();
    let (requests, server) = serve(listener, 1, |_, _, mut stream| {
        start_events(&mut stream);
        stream.write_all(record_event(2, "Yg==").as_bytes()).unwrap();
        thread::sleep(Duration::from_millis(200));
    });
    assert_eq!(watch.next_timeout(Duration::from_secs(5)).unwrap().expect("a record").seq, 2);
    server.join().unwrap();
    assert_eq!(requests.recv().unwrap().header("last-event-id"), Some("1"));
}

#[test]
fn a_watch_passes_on_what_the_server_refuses_a_reconnection_with() {
    let (listener, address) = listener();
    let (_, server) = serve(listener, 2, |i, _, mut stream| {
        if i == 0 {
            start_events(&mut stream);
            stream.write_all(record_event(1, "YQ==").as_bytes()).unwrap();
        } else {
            let error = br#"{"error":"log_not_found","message":"deleted","namespace":"sensors","log":"t"}"#;
            answer(&mut stream, 404, "application/json", error);
        }
    });
    let ns = store(&address, None).namespace("sensors").unwrap();
    let mut watch = ns.watch("t", 1).unwrap();
    assert_eq!(watch.next_timeout(Duration::from_secs(5)).unwrap().expect("a record").seq, 1);
    let err = watch.next_timeout(Duration::from_secs(5)).unwrap_err();
    assert!(matches!(err, LogError::LogNotFound { .. }), "{err}");
    assert_eq!(watch.next_seq(), 2);
    server.join().unwrap();
}
