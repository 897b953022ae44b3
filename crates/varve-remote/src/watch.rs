//! Watches: the Server-Sent Events stream of `GET …/watch?from=N`, read on a
//! background thread that sends each event into a bounded channel, so that
//! `wait_for` can honour its timeout with `recv_timeout`.
//!
//! **Reconnection.** When the stream breaks (the server restarts, the
//! connection drops, nothing arrives for [`SILENCE_MAX`]), the thread
//! connects again with `Last-Event-ID` set to the last seq it passed on, so
//! the server resumes right after it: no gap, no duplicate (a record at or
//! below that seq is dropped all the same). While the server cannot be
//! reached it retries with a backoff from [`RECONNECT_BACKOFF_FIRST`] up to
//! [`RECONNECT_BACKOFF_MAX`], and the watch just has no new record: `wait_for`
//! times out with `Ok(None)`, or without a timeout waits on. An error the
//! server answers a reconnection with (the log was deleted, the token was
//! revoked) is passed on as an error, then retried the same way, as the
//! embedded backends go on trying after an error.
//!
//! **Stopping.** Dropping the watch sets a stop flag, shuts down the watch's
//! own HTTP agent (which closes its connection, so a read blocked on it
//! returns at once), wakes the thread from a backoff sleep, and drops the
//! channel's receiver (so a send blocked on a full channel returns at once).
//! The thread then ends without being joined. A TCP connect in progress is
//! not interrupted: the thread ends when it fails or succeeds, within the
//! connect timeout.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use serde_json::Value;
use ureq::{Agent, BodyReader};
use varve_log::{LogError, Record, Result, Seq, WatchSource};

use crate::client::{backoff, Call, Client, Failure};
use crate::errors::error_from_json;
use crate::lines::{read_line, Line, LINE_BYTES_MAX};
use crate::sse::{SseEvent, SseParser};
use crate::wire::{decode_value, parse_seq};

/// How often the server sends a `: keep-alive` comment on a silent watch (`docs/http.md`).
const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(15);

/// Longest silence after which a watch's connection is taken for dead and
/// replaced: three keep-alives missed.
pub(crate) const SILENCE_MAX: Duration = Duration::from_secs(45);
const _: () = assert!(
    SILENCE_MAX.as_secs() >= 2 * KEEP_ALIVE_INTERVAL.as_secs(),
    "one late keep-alive is no reason to reconnect"
);

/// The first wait before connecting again; it doubles with each failure in a row.
const RECONNECT_BACKOFF_FIRST: Duration = Duration::from_millis(50);

/// The longest wait between two connection attempts.
const RECONNECT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Events read ahead of the consumer. When it is full the reader stops
/// reading, and TCP makes the server wait: a slow consumer costs this much
/// memory, not more.
const QUEUE_EVENTS_MAX: usize = 64;

/// What the reader thread passes on.
#[derive(Debug)]
enum Event {
    Record(Record),
    Error(LogError),
}

/// The [`WatchSource`] of a remote watch: the consumer's end of the channel.
pub(crate) struct RemoteWatch {
    events: Receiver<Event>,
    /// A record ahead of the seq asked for (a server that skipped seqs).
    pending: Option<Record>,
    stop: Arc<AtomicBool>,
    agent: Agent,
    reader: Thread,
    target: String,
    log: String,
}

impl RemoteWatch {
    /// Watch `log` from `from` (at least 1) at `path` (`/v1/namespaces/NS/logs/LOG/watch`).
    ///
    /// The first connection is made here, resent like a read, so that an
    /// unknown log, a refused token or an unreachable server is this call's
    /// error; later ones are the reader thread's.
    pub(crate) fn open(client: &Arc<Client>, path: String, log: &str, from: Seq) -> Result<RemoteWatch> {
        debug_assert!(from >= 1, "seqs start at 1");
        let agent = client.watch_agent(SILENCE_MAX);
        let body = client.open_watch_stream(&agent, &resume_call(&path, from))?;
        let (sender, events) = mpsc::sync_channel(QUEUE_EVENTS_MAX);
        let stop = Arc::new(AtomicBool::new(false));
        let reader = Reader {
            client: Arc::clone(client),
            agent: agent.clone(),
            path,
            stream: EventStream::new(client.target(), from),
            sender,
            stop: Arc::clone(&stop),
        };
        let handle = thread::Builder::new()
            .name("varve-watch".into())
            .spawn(move || reader.run(body))
            .map_err(|source| LogError::Io { context: format!("starting a thread to watch log {log:?}"), source })?;
        Ok(RemoteWatch {
            events,
            pending: None,
            stop,
            agent,
            reader: handle.thread().clone(),
            target: client.target().to_owned(),
            log: log.to_owned(),
        })
    }

    fn next_event(&mut self, deadline: Option<Instant>) -> Result<Option<Event>> {
        if let Some(record) = self.pending.take() {
            return Ok(Some(Event::Record(record)));
        }
        let received = match deadline {
            None => self.events.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(deadline) => self.events.recv_timeout(deadline.saturating_duration_since(Instant::now())),
        };
        match received {
            Ok(event) => Ok(Some(event)),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            // The thread ends only when this watch is dropped, or if it panicked.
            Err(RecvTimeoutError::Disconnected) => Err(LogError::Io {
                context: format!("watching log {:?} at {}", self.log, self.target),
                source: std::io::Error::other("the watch's reader thread stopped"),
            }),
        }
    }
}

impl WatchSource for RemoteWatch {
    fn wait_for(&mut self, seq: Seq, timeout: Option<Duration>) -> Result<Option<Record>> {
        let deadline = timeout.map(|timeout| Instant::now() + timeout);
        loop {
            match self.next_event(deadline)? {
                None => return Ok(None),
                Some(Event::Error(error)) => return Err(error),
                Some(Event::Record(record)) if record.seq < seq => {}
                Some(Event::Record(record)) if record.seq == seq => return Ok(Some(record)),
                Some(Event::Record(record)) => {
                    // The server skipped seqs without saying why: not the contract.
                    // Keep the record and say so, rather than hand out a gap.
                    let reason = format!("the watch of log {:?} went from seq {seq} to seq {}", self.log, record.seq);
                    self.pending = Some(record);
                    return Err(LogError::Protocol { target: self.target.clone(), reason });
                }
            }
        }
    }
}

impl Drop for RemoteWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.agent.clone().shutdown();
        self.reader.unpark();
        // `events` drops after this, which fails a send blocked on a full channel.
    }
}

/// `GET path?from=next_seq`, and `Last-Event-ID` once past seq 1 (the
/// header wins over `from` on the server; both say the same).
fn resume_call(path: &str, next_seq: Seq) -> Call<'static> {
    let call = Call::get(format!("{path}?from={next_seq}"));
    if next_seq > 1 {
        call.header("Last-Event-ID", (next_seq - 1).to_string())
    } else {
        call
    }
}

/// The reader thread: reads the stream, passes events on, reconnects.
struct Reader {
    client: Arc<Client>,
    agent: Agent,
    path: String,
    stream: EventStream,
    sender: SyncSender<Event>,
    stop: Arc<AtomicBool>,
}

/// Why reading a stream ended.
enum Ended {
    /// The watch was dropped.
    Stopped,
    /// The stream broke, ended, or could not be opened: connect again after a pause.
    Broke,
}

impl Reader {
    fn run(mut self, first: BodyReader<'static>) {
        let mut body = Some(first);
        let mut failures: u32 = 0;
        while !self.stopped() {
            let stream = match body.take() {
                Some(stream) => Ok(stream),
                None => self.client.open_stream_once(&self.agent, &resume_call(&self.path, self.stream.next_seq), None),
            };
            let ended = match stream {
                Ok(stream) => self.read(std::io::BufReader::new(stream), &mut failures),
                Err(failure) => self.failed(failure),
            };
            if matches!(ended, Ended::Stopped) {
                return;
            }
            self.pause(&mut failures);
        }
    }

    /// After a failed connection: an error the server answered is passed
    /// on, except `unavailable` (a stopping server is unreachable for a
    /// while, no more); a connection that failed is waited out in silence.
    fn failed(&self, failure: Failure) -> Ended {
        match failure {
            Failure::Refused(error) if !matches!(error, LogError::Unavailable { .. }) => {
                if self.send(Event::Error(error)) {
                    Ended::Broke
                } else {
                    Ended::Stopped
                }
            }
            _ => Ended::Broke,
        }
    }

    /// Read one connection's stream until it ends; any line read resets
    /// `failures`, so a stream that worked reconnects after the shortest pause.
    fn read(&mut self, mut body: impl std::io::BufRead, failures: &mut u32) -> Ended {
        let mut line = Vec::new();
        self.stream.parser = SseParser::default();
        loop {
            match read_line(&mut body, &mut line, LINE_BYTES_MAX) {
                Ok(Line::Complete) => {
                    *failures = 0;
                    if let Some(event) = self.stream.line(&line) {
                        if !self.send(event) {
                            return Ended::Stopped;
                        }
                    }
                }
                Ok(Line::TooLong) => {
                    let reason = format!("a watch event line is longer than {LINE_BYTES_MAX} bytes");
                    let error = LogError::Protocol { target: self.stream.target.clone(), reason };
                    return if self.send(Event::Error(error)) { Ended::Broke } else { Ended::Stopped };
                }
                Ok(Line::End) | Err(_) => return if self.stopped() { Ended::Stopped } else { Ended::Broke },
            }
        }
    }

    /// Pass an event on; `false` once the watch is dropped.
    fn send(&self, event: Event) -> bool {
        !self.stopped() && self.sender.send(event).is_ok()
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Wait before the next connection attempt; the watch's drop wakes it.
    fn pause(&self, failures: &mut u32) {
        let deadline = Instant::now() + backoff(RECONNECT_BACKOFF_FIRST, *failures, RECONNECT_BACKOFF_MAX);
        *failures = failures.saturating_add(1);
        while !self.stopped() {
            match deadline.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => thread::park_timeout(left),
                _ => return,
            }
        }
    }
}

/// The watch's events from its lines, without I/O: the SSE parser plus
/// what `event: record` and `event: error` mean, and the seq to resume at.
struct EventStream {
    target: String,
    parser: SseParser,
    /// The seq the stream should bring next: one past the last record (or
    /// run of lost records) passed on.
    next_seq: Seq,
}

impl EventStream {
    fn new(target: &str, from: Seq) -> EventStream {
        EventStream { target: target.to_owned(), parser: SseParser::default(), next_seq: from }
    }

    /// The event a line completes, if any. Records below `next_seq` (seen
    /// already) and events of unknown types are dropped.
    fn line(&mut self, line: &[u8]) -> Option<Event> {
        let Ok(line) = std::str::from_utf8(line) else {
            return Some(Event::Error(self.protocol("a watch event line is not UTF-8".into())));
        };
        let event = self.parser.line(line)?;
        match event.event.as_str() {
            "record" => match self.record(&event) {
                Ok(record) if record.seq < self.next_seq => None,
                Ok(record) => {
                    self.next_seq = record.seq + 1;
                    Some(Event::Record(record))
                }
                Err(error) => Some(Event::Error(error)),
            },
            "error" => {
                let error = match serde_json::from_str::<Value>(&event.data) {
                    Ok(json) => error_from_json(&self.target, None, &json),
                    Err(e) => self.protocol(format!("a watch error event is not JSON: {e}")),
                };
                if let LogError::Lost { last, .. } = &error {
                    self.next_seq = self.next_seq.max(last + 1);
                }
                Some(Event::Error(error))
            }
            _ => None,
        }
    }

    fn record(&self, event: &SseEvent) -> Result<Record> {
        let Some(id) = &event.id else {
            return Err(self.protocol("a watch record event has no id (its seq)".into()));
        };
        let seq = parse_seq(&self.target, "a watch record event", id)?;
        Ok(Record { seq, value: decode_value(&self.target, "a watch record event", &event.data)? })
    }

    fn protocol(&self, reason: String) -> LogError {
        LogError::Protocol { target: self.target.clone(), reason }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(stream: &mut EventStream, bytes: &[u8]) -> Vec<Event> {
        let mut reader = std::io::BufReader::with_capacity(5, bytes);
        let mut line = Vec::new();
        let mut events = Vec::new();
        while read_line(&mut reader, &mut line, 1000).unwrap() == Line::Complete {
            events.extend(stream.line(&line));
        }
        events
    }

    fn seqs(events: &[Event]) -> Vec<Result<Seq, String>> {
        events
            .iter()
            .map(|event| match event {
                Event::Record(record) => Ok(record.seq),
                Event::Error(error) => Err(error.to_string()),
            })
            .collect()
    }

    #[test]
    fn records_arrive_with_their_seq_and_bytes() {
        let mut stream = EventStream::new("varve://h:1", 8);
        let got = events(
            &mut stream,
            b": keep-alive\n\nid: 8\nevent: record\ndata: MjEuOQ==\n\nid: 9\r\nevent: record\r\ndata:\r\n\r\n",
        );
        assert_eq!(seqs(&got), [Ok(8), Ok(9)]);
        let Event::Record(record) = &got[0] else { panic!() };
        assert_eq!(&record.value[..], b"21.9");
        assert_eq!(stream.next_seq, 10);
    }

    #[test]
    fn seen_records_are_dropped_and_lost_runs_move_the_resume_point() {
        let mut stream = EventStream::new("varve://h:1", 5);
        let lost =
            br#"{"error":"lost","message":"m","log":"t","first":6,"last":8,"segment":"s","offset":null,"reason":"r"}"#;
        let mut bytes =
            b"id: 4\nevent: record\ndata: \n\nid: 5\nevent: record\ndata: \n\nevent: error\ndata: ".to_vec();
        bytes.extend_from_slice(lost);
        bytes.extend_from_slice(b"\n\nevent: other\ndata: x\n\nid: 9\nevent: record\ndata: \n\n");
        let got = events(&mut stream, &bytes);
        assert_eq!(got.len(), 3);
        assert!(matches!(got[0], Event::Record(Record { seq: 5, .. })));
        assert!(matches!(got[1], Event::Error(LogError::Lost { first: 6, last: 8, .. })));
        assert!(matches!(got[2], Event::Record(Record { seq: 9, .. })));
        assert_eq!(stream.next_seq, 10);
    }

    #[test]
    fn malformed_events_are_protocol_errors() {
        let mut stream = EventStream::new("varve://h:1", 1);
        let got = events(
            &mut stream,
            b"event: record\ndata: \n\nid: x\nevent: record\ndata: \n\nid: 1\nevent: record\ndata: %%\n\nevent: error\ndata: {\n\n",
        );
        assert_eq!(got.len(), 4);
        assert!(got.iter().all(|event| matches!(event, Event::Error(LogError::Protocol { .. }))));
        assert_eq!(stream.next_seq, 1);
    }

    #[test]
    fn reconnections_resume_after_the_last_seq() {
        let call = resume_call("/v1/namespaces/n/logs/t/watch", 1);
        assert_eq!(call.path, "/v1/namespaces/n/logs/t/watch?from=1");
        assert!(call.headers.is_empty());
        let call = resume_call("/w", 9);
        assert_eq!(call.path, "/w?from=9");
        assert_eq!(call.headers, [("Last-Event-ID", "8".to_owned())]);
    }
}
