//! Events of the causal event log `_events`: kinds, ids and the binary
//! encoding (version 2 written; version 1 still read).
//!
//! An event's id is **implicit**: `(host, namespace, seq)` where `seq` is the
//! event's position in its namespace's `_events` log. It is never stored in
//! the event itself, so an event costs no id bytes and ids are dense.
//!
//! # Encoding, version 2 (written since 2026-11-26)
//!
//! Integers are little-endian (`u8`…`u128`) or LEB128 varints (`var`), by
//! [`varve_log::codec`]; a string is its byte length as a varint, then its
//! UTF-8 bytes ("" for none).
//!
//! ```text
//! u8    version            = 2
//! u8    kind               (EventKind as u8)
//! u64   timestamp          nanoseconds since the Unix epoch
//! [16]  trace id           u128 little-endian
//! u8    has_parent         0 or 1; if 1:
//!   u64   parent host
//!   str   parent namespace
//!   var   parent seq       (in that namespace's `_events`)
//! str   log                the log concerned
//! var   seq                the record concerned (0: none)
//! var   seq_last - seq     > 0 only for a ranged READ (a scan)
//! str   handler
//! var   attempt            1 for the first FIRING of a trigger
//! var   trigger            seq in this `_events` of the TRIGGER handled (0: none)
//! str   reason             FAILED, DEAD_LETTER
//! var   reads              count of folded reads, then each:
//!   u8    kind             4 (READ) or 5 (LATEST)
//!   str   log
//!   var   seq              the record read; for LATEST the seq returned
//!   var   seq_last - seq   > 0 only for a ranged READ
//! ```
//!
//! **Folded reads.** A Rust handler's reads (`get`, `scan`, `latest`) are
//! not events of their own in version 2: they ride on the event its next
//! write produces — the first APPEND of its next append, else its DONE or
//! FAILED — in the order they happened. A READ or LATEST event of its own is
//! still written for a read made through the runtime socket (an external
//! command's), where no later write of the same run is known to come.
//! Separate READ/LATEST events were the whole recording overhead of
//! version 1 (17 % of a latest + get + append handler's time,
//! `docs/benchmarks.md`): two more records, 80 bytes each, per run.
//!
//! # Encoding, version 1 (read, no longer written)
//!
//! ```text
//! u8    version            = 1
//! u8    kind               (EventKind as u8)
//! u64   timestamp          nanoseconds since the Unix epoch
//! [16]  trace id           u128 little-endian
//! u8    has_parent         0 or 1; if 1:
//!   u64   parent host
//!   u16   parent namespace length, then its UTF-8 bytes
//!   u64   parent seq       (in that namespace's `_events`)
//! u16   log name length, then its UTF-8 bytes (empty: no log)
//! u64   seq                the record concerned (0: none)
//! u64   seq_last           last seq of a range read (scan); = seq otherwise
//! u16   handler length, then its UTF-8 bytes (empty: none)
//! u32   attempt            1 for the first FIRING of a trigger
//! u64   trigger            seq in this `_events` of the TRIGGER handled (0: none)
//! u32   reason length, then its UTF-8 bytes (FAILED, DEAD_LETTER)
//! ```
//!
//! Version 1 has no folded reads: every read is a READ or LATEST event.
//!
//! Decoders reject any other version with [`RuntimeError::BadEvent`]; a new
//! field means a new version, and the old ones stay readable (fixtures
//! `tests/fixtures/events_v1.bin` and `events_v2.bin` freeze them).

use std::fmt;
use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use varve_log::codec::{ByteReader, ByteWriter, ReadError};
use varve_log::Seq;

use crate::error::RuntimeError;

/// The encoding version this build writes.
pub const EVENT_FORMAT_VERSION: u8 = 2;
/// The oldest encoding version this build reads.
pub const EVENT_FORMAT_OLDEST: u8 = 1;
/// Longest FAILED reason kept in an event; longer reasons are cut (at a char boundary).
pub const REASON_BYTES_MAX: usize = 4096;

/// A 128-bit trace id shared by everything one outside append caused.
pub type TraceId = u128;
/// A host id (Lowgo's "Host"): names the runtime instance that wrote an event.
pub type HostId = u64;

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[repr(u8)]
pub enum EventKind {
    /// A record was appended to `log` at `seq` (Sans-Souci's APPEND).
    Append = 1,
    /// `handler` must run for the record `log`/`seq`; written in the same
    /// batch as the record. Parent: the APPEND.
    Trigger = 2,
    /// A worker claimed the trigger `trigger` (attempt `attempt`). Parent: the TRIGGER.
    Firing = 3,
    /// A handler read `log` at `seq..=seq_last`. Parent: the FIRING. Since
    /// version 2 only a read through the runtime socket is an event of its
    /// own; a Rust handler's reads are folded ([`Event::reads`]).
    Read = 4,
    /// A handler asked for the latest seq of `log` and got `seq`. Parent: the
    /// FIRING. Folded like READ since version 2.
    Latest = 5,
    /// The handler finished. Parent: the FIRING.
    Done = 6,
    /// The handler failed with `reason`. Parent: the FIRING.
    Failed = 7,
    /// The trigger gave up after its last attempt; the record reference went
    /// to `_dead_letters`. Parent: the last FIRING.
    DeadLetter = 8,
    /// `handler` was subscribed to `log`.
    Subscribe = 9,
    /// `handler` was unsubscribed from `log`.
    Unsubscribe = 10,
    /// A repair (`varve-repair`) replaced records of this namespace after
    /// the fact: [`Event::reads`] holds the ranges of records whose values it
    /// changed (READ entries, one per run of consecutive seqs), `reason` what
    /// was corrected and where the old histories are kept, `handler` the
    /// replaced handler (if one was). Parent: the APPEND of the (first)
    /// corrected record, when there is one. Written after the swap.
    Repair = 11,
}

impl EventKind {
    fn from_u8(byte: u8) -> Option<EventKind> {
        Some(match byte {
            1 => EventKind::Append,
            2 => EventKind::Trigger,
            3 => EventKind::Firing,
            4 => EventKind::Read,
            5 => EventKind::Latest,
            6 => EventKind::Done,
            7 => EventKind::Failed,
            8 => EventKind::DeadLetter,
            9 => EventKind::Subscribe,
            10 => EventKind::Unsubscribe,
            11 => EventKind::Repair,
            _ => return None,
        })
    }

    /// The upper-case name used in CLI output and exports.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Append => "APPEND",
            EventKind::Trigger => "TRIGGER",
            EventKind::Firing => "FIRING",
            EventKind::Read => "READ",
            EventKind::Latest => "LATEST",
            EventKind::Done => "DONE",
            EventKind::Failed => "FAILED",
            EventKind::DeadLetter => "DEAD_LETTER",
            EventKind::Subscribe => "SUBSCRIBE",
            EventKind::Unsubscribe => "UNSUBSCRIBE",
            EventKind::Repair => "REPAIR",
        }
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An event's id: where it sits, `(host, namespace, seq in _events)`.
///
/// Text form (environment variables, socket, CLI): `HOST:NAMESPACE:SEQ` with
/// the host as 16 hex digits. Namespace names never contain `:`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventId {
    /// The runtime instance that wrote the event (16 hex digits in text form).
    pub host: HostId,
    /// The namespace whose `_events` holds the event.
    pub namespace: String,
    /// The event's seq in that namespace's `_events`.
    pub seq: Seq,
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}:{}:{}", self.host, self.namespace, self.seq)
    }
}

impl EventId {
    /// Parse the text form `HOST:NAMESPACE:SEQ`.
    pub fn parse(text: &str) -> Result<EventId, RuntimeError> {
        let bad = || RuntimeError::BadEventId { text: text.to_owned() };
        let (host, rest) = text.split_once(':').ok_or_else(bad)?;
        let (namespace, seq) = rest.rsplit_once(':').ok_or_else(bad)?;
        let host = u64::from_str_radix(host, 16).map_err(|_| bad())?;
        let seq = seq.parse().map_err(|_| bad())?;
        if namespace.is_empty() {
            return Err(bad());
        }
        Ok(EventId { host, namespace: namespace.to_owned(), seq })
    }
}

/// Format a trace id as 32 lower-case hex digits (OpenTelemetry's form).
#[must_use]
pub fn trace_hex(trace: TraceId) -> String {
    format!("{trace:032x}")
}

/// Parse 32 (or fewer) hex digits as a trace id.
pub fn parse_trace(text: &str) -> Result<TraceId, RuntimeError> {
    if text.is_empty() || text.len() > 32 {
        return Err(RuntimeError::BadTraceId { text: text.to_owned() });
    }
    u128::from_str_radix(text, 16).map_err(|_| RuntimeError::BadTraceId { text: text.to_owned() })
}

/// One event, without its (implicit) id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// What happened; it says which of the other fields are set.
    pub kind: EventKind,
    /// Nanoseconds since the Unix epoch, from the writer's clock.
    pub timestamp_ns: u64,
    /// The trace id of the outside append that started this event's chain.
    pub trace: TraceId,
    /// The cause; `None` for an APPEND from outside any handler and for
    /// SUBSCRIBE/UNSUBSCRIBE.
    pub parent: Option<EventId>,
    /// The log concerned ("" for none).
    pub log: String,
    /// The seq in `log` of the record concerned (0 for none); the first seq of a ranged READ.
    pub seq: Seq,
    /// The last seq of a ranged READ (a scan); equal to `seq` otherwise.
    pub seq_last: Seq,
    /// The handler concerned ("" for none).
    pub handler: String,
    /// FIRING, DONE, FAILED: the attempt, from 1 for a trigger's first FIRING; `DEAD_LETTER`: the
    /// failures counted; 0 for the other kinds.
    pub attempt: u32,
    /// For FIRING, DONE, FAILED and `DEAD_LETTER`: the seq of the TRIGGER in this
    /// namespace's `_events`.
    pub trigger: Seq,
    /// FAILED and `DEAD_LETTER`: why the handler (last) failed, cut to [`REASON_BYTES_MAX`] bytes when
    /// encoded; "" for the other kinds.
    pub reason: String,
    /// The reads the same FIRING made since its previous write, in order,
    /// folded into this event (an APPEND, DONE or FAILED; see the module
    /// docs). Empty for version 1 events and for every other kind.
    pub reads: Vec<ReadDep>,
}

/// A read a handler made, as recorded: READ of `log` at `seq..=seq_last`, or
/// LATEST of `log` that returned `seq` (then `seq_last == seq`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReadDep {
    /// [`EventKind::Read`] or [`EventKind::Latest`].
    pub kind: EventKind,
    /// The log read.
    pub log: String,
    /// The (first) seq read, or the seq LATEST returned.
    pub seq: Seq,
    /// The last seq of a ranged read; `seq` otherwise.
    pub seq_last: Seq,
}

/// A read as [`Event::read_views`] gives it, whether an event of its own or folded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadView<'a> {
    /// [`EventKind::Read`] or [`EventKind::Latest`].
    pub kind: EventKind,
    /// The log read.
    pub log: &'a str,
    /// The (first) seq read, or the seq LATEST returned.
    pub seq: Seq,
    /// The last seq read; `seq` for one record and for LATEST.
    pub seq_last: Seq,
}

impl ReadDep {
    /// A read of one record, or of `seq..=seq_last`.
    #[must_use]
    pub fn read(log: &str, seq: Seq, seq_last: Seq) -> ReadDep {
        ReadDep { kind: EventKind::Read, log: log.to_owned(), seq, seq_last: seq_last.max(seq) }
    }

    /// A LATEST that returned `seq`.
    #[must_use]
    pub fn latest(log: &str, seq: Seq) -> ReadDep {
        ReadDep { kind: EventKind::Latest, log: log.to_owned(), seq, seq_last: seq }
    }
}

impl Event {
    /// A blank event of `kind` stamped now.
    #[must_use]
    pub fn new(kind: EventKind, trace: TraceId, parent: Option<EventId>) -> Event {
        Event {
            kind,
            timestamp_ns: now_ns(),
            trace,
            parent,
            log: String::new(),
            seq: 0,
            seq_last: 0,
            handler: String::new(),
            attempt: 0,
            trigger: 0,
            reason: String::new(),
            reads: Vec::new(),
        }
    }

    /// Set the record concerned.
    #[must_use]
    pub fn at(mut self, log: &str, seq: Seq) -> Event {
        log.clone_into(&mut self.log);
        self.seq = seq;
        self.seq_last = seq;
        self
    }

    /// Set the handler concerned.
    #[must_use]
    pub fn for_handler(mut self, handler: &str) -> Event {
        handler.clone_into(&mut self.handler);
        self
    }

    /// Every read this event records, in order: the event itself for a READ
    /// or LATEST event (version 1, or a read through the socket), its folded
    /// [`Event::reads`] otherwise. None for a REPAIR (its entries are the
    /// records it replaced: [`Event::replaced`]).
    pub fn read_views(&self) -> impl Iterator<Item = ReadView<'_>> {
        let own = matches!(self.kind, EventKind::Read | EventKind::Latest).then(|| ReadView {
            kind: self.kind,
            log: &self.log,
            seq: self.seq,
            seq_last: self.seq_last.max(self.seq),
        });
        let folded: &[ReadDep] = if self.kind == EventKind::Repair { &[] } else { &self.reads };
        own.into_iter().chain(folded.iter().map(|r| ReadView {
            kind: r.kind,
            log: &r.log,
            seq: r.seq,
            seq_last: r.seq_last.max(r.seq),
        }))
    }

    /// A REPAIR's records whose values it changed, as `(log, first, last)`
    /// ranges of this namespace; none for the other kinds.
    pub fn replaced(&self) -> impl Iterator<Item = (&str, Seq, Seq)> {
        let ranges: &[ReadDep] = if self.kind == EventKind::Repair { &self.reads } else { &[] };
        ranges.iter().map(|r| (r.log.as_str(), r.seq, r.seq_last.max(r.seq)))
    }

    /// The binary form, version [`EVENT_FORMAT_VERSION`] (see the module docs).
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let reads_len: usize = self.reads.iter().map(|r| 12 + r.log.len()).sum();
        let mut out = Vec::with_capacity(48 + self.log.len() + self.handler.len() + self.reason.len() + reads_len);
        out.put_u8(EVENT_FORMAT_VERSION);
        out.put_u8(self.kind as u8);
        out.put_u64(self.timestamp_ns);
        out.put_u128(self.trace);
        match &self.parent {
            None => out.put_u8(0),
            Some(parent) => {
                out.put_u8(1);
                out.put_u64(parent.host);
                put_str(&mut out, &parent.namespace);
                out.put_varint(parent.seq);
            }
        }
        put_str(&mut out, &self.log);
        out.put_varint(self.seq);
        out.put_varint(self.seq_last.saturating_sub(self.seq));
        put_str(&mut out, &self.handler);
        out.put_varint(u64::from(self.attempt));
        out.put_varint(self.trigger);
        put_str(&mut out, cut_at_char(&self.reason, REASON_BYTES_MAX));
        out.put_varint(self.reads.len() as u64);
        for read in &self.reads {
            out.put_u8(read.kind as u8);
            put_str(&mut out, &read.log);
            out.put_varint(read.seq);
            out.put_varint(read.seq_last.saturating_sub(read.seq));
        }
        out
    }

    /// Decode the binary form; `seq` (the event's position) is only used in errors.
    pub fn decode(bytes: &[u8], seq: Seq) -> Result<Event, RuntimeError> {
        let reason = match read_event(ByteReader::new(bytes)) {
            Ok(event) => return Ok(event),
            Err(Malformed::Bytes(error)) => error.to_string(),
            Err(Malformed::Field { reason, offset }) => format!("{reason} (at byte {offset})"),
        };
        Err(RuntimeError::BadEvent { seq, reason })
    }
}

/// A parent as [`peek_header`] reads it: the namespace's bytes and the seq.
pub type ParentRef<'a> = (&'a [u8], Seq);

/// What a scan needs of an event before deciding to decode it: its kind and
/// its parent's `(namespace, seq)`. `None` for bytes that do not read as an
/// event header ([`Event::decode`] then says what is wrong).
#[must_use]
pub fn peek_header(bytes: &[u8]) -> Option<(u8, Option<ParentRef<'_>>)> {
    let mut r = ByteReader::new(bytes);
    let version = r.u8().ok()?;
    let kind = r.u8().ok()?;
    r.u64().ok()?; // timestamp
    r.u128().ok()?; // trace
    let parent = match r.u8().ok()? {
        0 => None,
        1 => {
            r.u64().ok()?; // host
            match version {
                1 => Some((r.bytes_u16().ok()?, r.u64().ok()?)),
                2 => Some((r.bytes_varint().ok()?, r.varint().ok()?)),
                _ => return None,
            }
        }
        _ => return None,
    };
    Some((kind, parent))
}

/// Why bytes are not an event; [`Event::decode`] turns it into
/// [`RuntimeError::BadEvent`] naming the event's seq.
enum Malformed {
    /// Too short, or bytes after the last field.
    Bytes(ReadError),
    /// A field that reads but breaks a rule, and the offset where it ends.
    Field { reason: String, offset: usize },
}

impl From<ReadError> for Malformed {
    #[cold]
    fn from(error: ReadError) -> Malformed {
        Malformed::Bytes(error)
    }
}

fn read_event(mut r: ByteReader<'_>) -> Result<Event, Malformed> {
    let version = r.u8()?;
    match version {
        1 => read_v1(r),
        2 => read_v2(r),
        _ => Err(Malformed::Field {
            reason: format!(
                "unknown event format version {version} (this build reads versions {EVENT_FORMAT_OLDEST} to \
                 {EVENT_FORMAT_VERSION}; a newer varve wrote it)"
            ),
            offset: r.position(),
        }),
    }
}

fn bad(r: &ByteReader<'_>, reason: String) -> Malformed {
    Malformed::Field { reason, offset: r.position() }
}

fn read_kind(r: &mut ByteReader<'_>) -> Result<EventKind, Malformed> {
    let kind_byte = r.u8()?;
    EventKind::from_u8(kind_byte).ok_or_else(|| bad(r, format!("unknown event kind {kind_byte}")))
}

fn read_v1(mut r: ByteReader<'_>) -> Result<Event, Malformed> {
    let kind = read_kind(&mut r)?;
    let timestamp_ns = r.u64()?;
    let trace = r.u128()?;
    let parent = match r.u8()? {
        0 => None,
        1 => {
            let host = r.u64()?;
            let namespace = utf8(r.bytes_u16()?, &r, "a name")?;
            let seq = r.u64()?;
            Some(EventId { host, namespace, seq })
        }
        other => return Err(bad(&r, format!("parent flag {other} is neither 0 nor 1"))),
    };
    let log = utf8(r.bytes_u16()?, &r, "a name")?;
    let rseq = r.u64()?;
    let seq_last = r.u64()?;
    let handler = utf8(r.bytes_u16()?, &r, "a name")?;
    let attempt = r.u32()?;
    let trigger = r.u64()?;
    let reason = utf8(r.bytes_u32()?, &r, "reason")?;
    r.finish()?;
    Ok(Event {
        kind,
        timestamp_ns,
        trace,
        parent,
        log,
        seq: rseq,
        seq_last,
        handler,
        attempt,
        trigger,
        reason,
        reads: Vec::new(),
    })
}

fn read_v2(mut r: ByteReader<'_>) -> Result<Event, Malformed> {
    let kind = read_kind(&mut r)?;
    let timestamp_ns = r.u64()?;
    let trace = r.u128()?;
    let parent = match r.u8()? {
        0 => None,
        1 => {
            let host = r.u64()?;
            let namespace = utf8(r.bytes_varint()?, &r, "a name")?;
            let seq = r.varint()?;
            Some(EventId { host, namespace, seq })
        }
        other => return Err(bad(&r, format!("parent flag {other} is neither 0 nor 1"))),
    };
    let log = utf8(r.bytes_varint()?, &r, "a name")?;
    let (seq, seq_last) = seq_range(&mut r)?;
    let handler = utf8(r.bytes_varint()?, &r, "a name")?;
    let attempt = u32::try_from(r.varint()?).map_err(|_| bad(&r, "attempt is past u32".to_owned()))?;
    let trigger = r.varint()?;
    let reason = utf8(r.bytes_varint()?, &r, "reason")?;
    let count = r.varint()?;
    // Each read takes at least 4 bytes: a count past that is damage, not a reason to allocate.
    if count > (r.remaining() / 4) as u64 {
        return Err(bad(&r, format!("{count} reads cannot fit in the {} bytes left", r.remaining())));
    }
    let mut reads = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
    for _ in 0..count {
        let kind = read_kind(&mut r)?;
        if !matches!(kind, EventKind::Read | EventKind::Latest) {
            return Err(bad(&r, format!("a folded read of kind {kind}, not READ or LATEST")));
        }
        let log = utf8(r.bytes_varint()?, &r, "a name")?;
        let (seq, seq_last) = seq_range(&mut r)?;
        reads.push(ReadDep { kind, log, seq, seq_last });
    }
    r.finish()?;
    Ok(Event { kind, timestamp_ns, trace, parent, log, seq, seq_last, handler, attempt, trigger, reason, reads })
}

/// A seq and the length of its range after it: `(seq, seq_last)`.
fn seq_range(r: &mut ByteReader<'_>) -> Result<(Seq, Seq), Malformed> {
    let seq = r.varint()?;
    let extra = r.varint()?;
    let last = seq.checked_add(extra).ok_or_else(|| bad(r, format!("range {seq} + {extra} is past u64")))?;
    Ok((seq, last))
}

/// `bytes`, just read by `r`, as a string (`what` names it in the error).
fn utf8(bytes: &[u8], r: &ByteReader<'_>, what: &str) -> Result<String, Malformed> {
    let text = std::str::from_utf8(bytes)
        .map_err(|_| Malformed::Field { reason: format!("{what} is not UTF-8"), offset: r.position() })?;
    Ok(text.to_owned())
}

/// An event with its id, as read back from `_events`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredEvent {
    /// Where the event sits: host, namespace and seq in `_events`.
    pub id: EventId,
    /// The decoded event.
    pub event: Event,
}

/// The JSON form of an event (CLI output and exports only). Empty strings
/// and zero numbers (the fields' "none") are left out of the JSON.
#[derive(Serialize)]
pub struct EventJson<'a> {
    /// [`StoredEvent::id`] in text form, `HOST:NAMESPACE:SEQ`.
    pub id: String,
    /// [`Event::kind`], as its upper-case name (`"FIRING"`).
    pub kind: EventKind,
    /// [`Event::timestamp_ns`]: nanoseconds since the Unix epoch.
    pub timestamp_ns: u64,
    /// [`Event::trace`] as 32 lower-case hex digits.
    pub trace: String,
    /// [`Event::parent`] in text form, `HOST:NAMESPACE:SEQ`; `null` when the event has no cause.
    pub parent: Option<String>,
    /// [`Event::log`].
    #[serde(skip_serializing_if = "str::is_empty")]
    pub log: &'a str,
    /// [`Event::seq`].
    #[serde(skip_serializing_if = "is_zero")]
    pub seq: Seq,
    /// [`Event::seq_last`], only when it differs from `seq` (a ranged READ); 0 otherwise.
    #[serde(skip_serializing_if = "is_zero")]
    pub seq_last: Seq,
    /// [`Event::handler`].
    #[serde(skip_serializing_if = "str::is_empty")]
    pub handler: &'a str,
    /// [`Event::attempt`].
    #[serde(skip_serializing_if = "is_zero32")]
    pub attempt: u32,
    /// [`Event::trigger`]: the seq of the TRIGGER in this namespace's `_events`.
    #[serde(skip_serializing_if = "is_zero")]
    pub trigger: Seq,
    /// [`Event::reason`].
    #[serde(skip_serializing_if = "str::is_empty")]
    pub reason: &'a str,
    /// [`Event::reads`]: the reads folded into this event.
    #[serde(skip_serializing_if = "<[ReadDep]>::is_empty")]
    pub reads: &'a [ReadDep],
}

#[expect(clippy::trivially_copy_pass_by_ref, reason = "serde's skip_serializing_if passes a reference")]
fn is_zero(value: &u64) -> bool {
    *value == 0
}

#[expect(clippy::trivially_copy_pass_by_ref, reason = "serde's skip_serializing_if passes a reference")]
fn is_zero32(value: &u32) -> bool {
    *value == 0
}

impl StoredEvent {
    /// The JSON view of this event.
    #[must_use]
    pub fn to_json(&self) -> EventJson<'_> {
        let e = &self.event;
        EventJson {
            id: self.id.to_string(),
            kind: e.kind,
            timestamp_ns: e.timestamp_ns,
            trace: trace_hex(e.trace),
            parent: e.parent.as_ref().map(ToString::to_string),
            log: &e.log,
            seq: e.seq,
            seq_last: if e.seq_last == e.seq { 0 } else { e.seq_last },
            handler: &e.handler,
            attempt: e.attempt,
            trigger: e.trigger,
            reason: &e.reason,
            reads: &e.reads,
        }
    }

    /// One human-readable line.
    #[must_use]
    pub fn to_line(&self) -> String {
        let e = &self.event;
        let mut line = format!("{:>6} {:<11} trace {}", self.id.seq, e.kind.name(), &trace_hex(e.trace)[..12]);
        if !e.log.is_empty() {
            if e.seq_last > e.seq {
                let _ = write!(line, " {}:{}..={}", e.log, e.seq, e.seq_last);
            } else {
                let _ = write!(line, " {}:{}", e.log, e.seq);
            }
        }
        if !e.handler.is_empty() {
            let _ = write!(line, " handler {}", e.handler);
        }
        if e.attempt > 0 {
            let _ = write!(line, " attempt {}", e.attempt);
        }
        if let Some(parent) = &e.parent {
            if parent.namespace == self.id.namespace && parent.host == self.id.host {
                let _ = write!(line, " <- {}", parent.seq);
            } else {
                let _ = write!(line, " <- {parent}");
            }
        }
        // A REPAIR's entries are the records it replaced, not reads.
        let verb = if e.kind == EventKind::Repair { "replaced" } else { "read" };
        for read in &e.reads {
            let _ = match (read.kind, read.seq_last > read.seq) {
                (EventKind::Latest, _) => write!(line, " [latest {}={}]", read.log, read.seq),
                (_, true) => write!(line, " [{verb} {}:{}..={}]", read.log, read.seq, read.seq_last),
                (_, false) => write!(line, " [{verb} {}:{}]", read.log, read.seq),
            };
        }
        if !e.reason.is_empty() {
            let _ = write!(line, ": {}", e.reason.lines().next().unwrap_or(""));
        }
        line
    }
}

/// Nanoseconds since the Unix epoch (0 if the clock is before 1970).
#[must_use]
pub fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn put_str(out: &mut Vec<u8>, text: &str) {
    out.put_varint(text.len() as u64);
    out.put_bytes(text.as_bytes());
}

fn cut_at_char(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason_for(bytes: &[u8]) -> String {
        match Event::decode(bytes, 7) {
            Err(RuntimeError::BadEvent { seq: 7, reason }) => reason,
            other => panic!("expected BadEvent for seq 7, got {other:?}"),
        }
    }

    #[test]
    fn damage_names_the_seq_the_offset_and_what_is_wrong() {
        let mut event = Event::new(EventKind::Failed, 1, None).at("l", 3).for_handler("h");
        event.reason = "boom".into();
        event.reads = vec![ReadDep::latest("m", 5)];
        let bytes = event.encode();
        assert_eq!(Event::decode(&bytes, 7).expect("decode"), event);
        // ... "boom", 1 read: kind, "m", seq 5, range 0 — the last 6 bytes.
        let reads_at = bytes.len() - 6;
        assert_eq!(bytes[reads_at], 1);

        let cut = bytes.len() - 1;
        assert_eq!(reason_for(&bytes[..cut]), format!("1 byte needed at byte offset {cut}, only 0 left"));
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(reason_for(&longer), format!("1 trailing byte at byte offset {}", bytes.len()));
        let mut bad_kind = bytes.clone();
        bad_kind[1] = 99;
        assert_eq!(reason_for(&bad_kind), "unknown event kind 99 (at byte 2)");
        let mut bad_utf8 = bytes.clone();
        bad_utf8[reads_at - 1] = 0xFF;
        assert_eq!(reason_for(&bad_utf8), format!("reason is not UTF-8 (at byte {reads_at})"));
        let mut bad_read_kind = bytes.clone();
        bad_read_kind[reads_at + 1] = EventKind::Done as u8;
        assert_eq!(
            reason_for(&bad_read_kind),
            format!("a folded read of kind DONE, not READ or LATEST (at byte {})", reads_at + 2)
        );
        let mut huge_count = bytes[..reads_at].to_vec();
        huge_count.extend_from_slice(&[0xff, 0xff, 0x03]);
        assert_eq!(
            reason_for(&huge_count),
            format!("65535 reads cannot fit in the 0 bytes left (at byte {})", reads_at + 3)
        );
        let mut future = bytes.clone();
        future[0] = 3;
        assert_eq!(
            reason_for(&future),
            "unknown event format version 3 (this build reads versions 1 to 2; a newer varve wrote it) (at byte 1)"
        );
    }
}
