//! The journal's byte format: frames in segment files. Specified in
//! `docs/design.md` and frozen by the fixture test (`tests/fixtures/`);
//! change it only with a new `FORMAT_VERSION` and a fixture to match.
//!
//! Every integer is little-endian. A segment file is a sequence of frames:
//!
//! ```text
//! frame   = header(16) body(body_len)
//! header  = magic u16 | kind u8 | reserved u8 (0) | body_len u32 | body_crc u32 | header_crc u32
//! ```
//!
//! (Kinds: 1 segment header, 2 create log, 3 delete log, 4 append, 5
//! relocate, 6 append of one record — see `docs/design.md`.)
//!
//! `header_crc` is CRC32C of the header's first 12 bytes, so a damaged length
//! is never trusted. `body_crc` is CRC32C of the body — except that for
//! `Append`, `AppendOne` and `Relocate` frames the record payloads are left out of it,
//! because each record carries its own CRC32C (checked on every `get`), and
//! the frame CRC covers those. Every byte is thus checked exactly once.

use crate::contract::{LogConfig, OnFull, Retention, Seq};

pub(crate) const MAGIC: u16 = 0x5656; // "VV"
/// Version 2 added `AppendOne`. Segments of version 1 are still read.
pub(crate) const FORMAT_VERSION: u16 = 2;
/// The oldest segment format this build reads.
pub(crate) const FORMAT_VERSION_READ_MIN: u16 = 1;
pub(crate) const FRAME_HEADER_BYTES: usize = 16;
/// Per-record header inside `Append`/`Relocate` bodies: log id, seq, len, crc.
pub(crate) const ENTRY_HEADER_BYTES: usize = 20;
/// No frame body is larger: bounds what a damaged or hostile length can make
/// the reader allocate. Larger than the largest batch `Limits` may allow.
pub(crate) const FRAME_BODY_BYTES_MAX: usize = 1 << 30;

const _: () = assert!(ENTRY_HEADER_BYTES as u64 == crate::rules::RECORD_OVERHEAD_BYTES);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum FrameKind {
    /// First frame of every segment: the whole catalog at that point.
    SegmentHeader = 1,
    CreateLog = 2,
    DeleteLog = 3,
    Append = 4,
    /// Live records copied out of a segment the compactor is reclaiming.
    Relocate = 5,
    /// One record: an `Append` without the record count (format 2), since
    /// most appends are single records and 4 bytes is 4% of a 64 B record.
    AppendOne = 6,
}

impl FrameKind {
    fn from_u8(byte: u8) -> Option<FrameKind> {
        Some(match byte {
            1 => FrameKind::SegmentHeader,
            2 => FrameKind::CreateLog,
            3 => FrameKind::DeleteLog,
            4 => FrameKind::Append,
            5 => FrameKind::Relocate,
            6 => FrameKind::AppendOne,
            _ => return None,
        })
    }

    fn has_payloads(self) -> bool {
        matches!(self, FrameKind::Append | FrameKind::Relocate | FrameKind::AppendOne)
    }

    /// Bytes before the first entry: the record count, except in `AppendOne`.
    fn entries_offset(self) -> usize {
        if self == FrameKind::AppendOne { 0 } else { 4 }
    }
}

/// A log as the catalog describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LogDescriptor {
    pub(crate) id: u32,
    pub(crate) name: String,
    pub(crate) config: LogConfig,
    /// Latest seq when the descriptor was written (0 in `CreateLog`).
    pub(crate) latest: Seq,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SegmentHeader {
    pub(crate) format_version: u16,
    pub(crate) segment_id: u32,
    pub(crate) next_log_id: u32,
    pub(crate) logs: Vec<LogDescriptor>,
}

/// One record inside an `Append` or `Relocate` frame.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry<'a> {
    pub(crate) log_id: u32,
    pub(crate) seq: Seq,
    /// Offset of the entry header from the start of the frame.
    pub(crate) offset_in_frame: usize,
    pub(crate) payload: &'a [u8],
}

#[derive(Debug)]
pub(crate) enum FrameBody<'a> {
    SegmentHeader(SegmentHeader),
    CreateLog(LogDescriptor),
    DeleteLog(u32),
    Append(Vec<Entry<'a>>),
    Relocate(Vec<Entry<'a>>),
}

/// Why bytes at some offset are not a valid frame. The variants say how much
/// of the frame can still be trusted, which is what salvaging needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FrameError {
    /// Fewer bytes than the frame needs (its header may be intact, giving
    /// `len`): a torn write, one still in flight, or a file cut short.
    Incomplete { len: Option<usize> },
    /// The header is damaged, so the frame's length cannot be trusted.
    BadHeader(String),
    /// The header checks, so the frame is `len` bytes long, but its body does not.
    BadBody { len: usize, reason: String },
    /// Header and body check, but the payloads of some records do not (the
    /// indexes of those entries in the body): the other records are intact.
    BadRecords { len: usize, bad: Vec<usize> },
    /// A segment header of a format this build does not read (a newer Varve wrote it).
    Unsupported(String),
}

impl FrameError {
    /// What was wrong, for reports.
    pub(crate) fn reason(&self) -> String {
        match self {
            FrameError::Incomplete { .. } => "frame cut short (torn or unfinished write, or a file cut short)".into(),
            FrameError::BadHeader(reason) | FrameError::BadBody { reason, .. } | FrameError::Unsupported(reason) => {
                reason.clone()
            }
            FrameError::BadRecords { bad, .. } => {
                format!("record checksum mismatch ({} record{})", bad.len(), if bad.len() == 1 { "" } else { "s" })
            }
        }
    }
}

// ---------------------------------------------------------------- encoding

/// Builds one frame in a reusable buffer.
pub(crate) struct FrameEncoder<'a> {
    buf: &'a mut Vec<u8>,
    start: usize,
    kind: FrameKind,
}

impl<'a> FrameEncoder<'a> {
    pub(crate) fn begin(buf: &'a mut Vec<u8>, kind: FrameKind) -> Self {
        let start = buf.len();
        buf.extend_from_slice(&[0; FRAME_HEADER_BYTES]);
        FrameEncoder { buf, start, kind }
    }

    pub(crate) fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub(crate) fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn descriptor(&mut self, d: &LogDescriptor) {
        let (tag, k) = match d.config.retention {
            Retention::Unbounded => (0, 0),
            Retention::Keep { k, on_full: OnFull::Refuse } => (1, k),
            Retention::Keep { k, on_full: OnFull::Overwrite } => (2, k),
        };
        self.u32(d.id);
        self.u64(d.latest);
        self.u8(tag);
        self.u64(k);
        self.u8(u8::from(d.config.system));
        let name_len = u16::try_from(d.name.len()).expect("names are at most 200 bytes");
        self.u16(name_len);
        self.buf.extend_from_slice(d.name.as_bytes());
    }

    /// Add a record; returns the entry's offset from the frame start.
    pub(crate) fn entry(&mut self, log_id: u32, seq: Seq, payload: &[u8]) -> usize {
        debug_assert!(self.kind.has_payloads());
        let offset = self.buf.len() - self.start;
        self.u32(log_id);
        self.u64(seq);
        self.u32(u32::try_from(payload.len()).expect("records are bounded by Limits"));
        self.u32(crc32c::crc32c(payload));
        self.buf.extend_from_slice(payload);
        offset
    }

    /// Fill in the header. Returns the frame's total length.
    pub(crate) fn finish(self) -> usize {
        let body = &self.buf[self.start + FRAME_HEADER_BYTES..];
        let body_len = u32::try_from(body.len()).expect("frames are bounded by Limits");
        let body_crc = body_crc(self.kind, body).expect("a frame we just encoded parses");
        let header = &mut self.buf[self.start..self.start + FRAME_HEADER_BYTES];
        header[0..2].copy_from_slice(&MAGIC.to_le_bytes());
        header[2] = self.kind as u8;
        header[3] = 0;
        header[4..8].copy_from_slice(&body_len.to_le_bytes());
        header[8..12].copy_from_slice(&body_crc.to_le_bytes());
        let header_crc = crc32c::crc32c(&header[0..12]);
        header[12..16].copy_from_slice(&header_crc.to_le_bytes());
        self.buf.len() - self.start
    }
}

/// Encode a whole segment header frame.
pub(crate) fn encode_segment_header(buf: &mut Vec<u8>, header: &SegmentHeader) -> usize {
    let mut frame = FrameEncoder::begin(buf, FrameKind::SegmentHeader);
    frame.u16(header.format_version);
    frame.u32(header.segment_id);
    frame.u32(header.next_log_id);
    frame.u32(u32::try_from(header.logs.len()).expect("log count fits u32"));
    for log in &header.logs {
        frame.descriptor(log);
    }
    frame.finish()
}

pub(crate) fn encode_create(buf: &mut Vec<u8>, descriptor: &LogDescriptor) -> usize {
    let mut frame = FrameEncoder::begin(buf, FrameKind::CreateLog);
    frame.descriptor(descriptor);
    frame.finish()
}

pub(crate) fn encode_delete(buf: &mut Vec<u8>, log_id: u32) -> usize {
    let mut frame = FrameEncoder::begin(buf, FrameKind::DeleteLog);
    frame.u32(log_id);
    frame.finish()
}

// ---------------------------------------------------------------- decoding

/// CRC of a body as the header stores it (payloads skipped where they carry
/// their own CRC). `None` if an entry's length runs past the body.
fn body_crc(kind: FrameKind, body: &[u8]) -> Option<u32> {
    if !kind.has_payloads() {
        return Some(crc32c::crc32c(body));
    }
    let mut at = kind.entries_offset();
    let mut crc = crc32c::crc32c(body.get(0..at)?);
    while at < body.len() {
        let header = body.get(at..at + ENTRY_HEADER_BYTES)?;
        crc = crc32c::crc32c_append(crc, header);
        let len = u32::from_le_bytes(header[12..16].try_into().ok()?) as usize;
        at = at.checked_add(ENTRY_HEADER_BYTES + len)?;
        if at > body.len() {
            return None;
        }
    }
    Some(crc)
}

/// A frame whose header and checksums are valid; body not yet parsed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawFrame<'a> {
    pub(crate) kind: FrameKind,
    pub(crate) body: &'a [u8],
    pub(crate) len: usize,
}

/// Check the frame that starts at `bytes[0]`: header CRC, body CRC, and (if
/// `verify_payloads`) every record's CRC.
pub(crate) fn check_frame(bytes: &[u8], verify_payloads: bool) -> Result<RawFrame<'_>, FrameError> {
    let Some(header) = bytes.get(..FRAME_HEADER_BYTES) else { return Err(FrameError::Incomplete { len: None }) };
    let word = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("4 bytes"));
    if crc32c::crc32c(&header[..12]) != word(12) {
        return Err(FrameError::BadHeader("frame header checksum mismatch".into()));
    }
    let magic = u16::from_le_bytes([header[0], header[1]]);
    if magic != MAGIC {
        return Err(FrameError::BadHeader(format!("bad frame magic {magic:#06x}")));
    }
    let Some(kind) = FrameKind::from_u8(header[2]) else {
        return Err(FrameError::BadHeader(format!("unknown frame kind {}", header[2])));
    };
    if header[3] != 0 {
        return Err(FrameError::BadHeader(format!("reserved header byte is {}, not 0", header[3])));
    }
    let body_len = word(4) as usize;
    if body_len > FRAME_BODY_BYTES_MAX {
        return Err(FrameError::BadHeader(format!("frame body length {body_len} exceeds the maximum")));
    }
    let len = FRAME_HEADER_BYTES + body_len;
    let Some(body) = bytes.get(FRAME_HEADER_BYTES..len) else { return Err(FrameError::Incomplete { len: Some(len) }) };
    let bad_body = |reason: &str| FrameError::BadBody { len, reason: reason.to_owned() };
    match body_crc(kind, body) {
        Some(crc) if crc == word(8) => {}
        Some(_) => return Err(bad_body("frame body checksum mismatch")),
        None => return Err(bad_body("record lengths overrun the frame body")),
    }
    let frame = RawFrame { kind, body, len };
    if verify_payloads && kind.has_payloads() {
        let entries = parse_entries(kind, body).map_err(|e| bad_body(&e.reason()))?;
        let intact = |entry: &Entry<'_>| payload_crc_matches(entry.payload, body, entry.offset_in_frame - FRAME_HEADER_BYTES);
        if !entries.iter().all(intact) {
            let bad = entries.iter().enumerate().filter(|(_, entry)| !intact(entry)).map(|(index, _)| index).collect();
            return Err(FrameError::BadRecords { len, bad });
        }
    }
    Ok(frame)
}

/// A frame whose records may not all check: its kind and body, trusted
/// because the header and body CRCs matched (see [`FrameError::BadRecords`]).
pub(crate) fn frame_with_bad_records(bytes: &[u8], len: usize) -> RawFrame<'_> {
    let kind = FrameKind::from_u8(bytes[2]).expect("checked by check_frame");
    RawFrame { kind, body: &bytes[FRAME_HEADER_BYTES..len], len }
}

fn payload_crc_matches(payload: &[u8], body: &[u8], entry_at: usize) -> bool {
    let stored = u32::from_le_bytes(body[entry_at + 16..entry_at + 20].try_into().expect("4 bytes"));
    crc32c::crc32c(payload) == stored
}

/// Check a record read back by `get`: `bytes` is the entry header followed by
/// the payload. Returns the payload range on success.
pub(crate) fn check_entry(bytes: &[u8], log_id: u32, seq: Seq) -> Result<std::ops::Range<usize>, String> {
    if bytes.len() < ENTRY_HEADER_BYTES {
        return Err("record header cut short".into());
    }
    let stored_id = u32::from_le_bytes(bytes[0..4].try_into().expect("4 bytes"));
    let stored_seq = u64::from_le_bytes(bytes[4..12].try_into().expect("8 bytes"));
    let len = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes")) as usize;
    if stored_id != log_id || stored_seq != seq {
        return Err(format!("index points at log id {stored_id} seq {stored_seq}, expected log id {log_id} seq {seq}"));
    }
    if bytes.len() != ENTRY_HEADER_BYTES + len {
        return Err(format!("record length {len} disagrees with the index"));
    }
    if !payload_crc_matches(&bytes[ENTRY_HEADER_BYTES..], bytes, 0) {
        return Err(format!("record checksum mismatch (seq {seq})"));
    }
    Ok(ENTRY_HEADER_BYTES..bytes.len())
}

/// A body that parses badly; its length is unknown here (the caller has it).
fn damaged(reason: &str) -> FrameError {
    FrameError::BadBody { len: 0, reason: reason.to_owned() }
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], FrameError> {
        let end = self.at.checked_add(n).filter(|&end| end <= self.bytes.len());
        let end = end.ok_or_else(|| damaged("frame body ends early"))?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }
    fn u8(&mut self) -> Result<u8, FrameError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, FrameError> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().expect("2 bytes")))
    }
    fn u32(&mut self) -> Result<u32, FrameError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }
    fn u64(&mut self) -> Result<u64, FrameError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }
    fn done(&self) -> Result<(), FrameError> {
        if self.at == self.bytes.len() {
            Ok(())
        } else {
            Err(damaged("trailing bytes after frame body"))
        }
    }

    fn descriptor(&mut self) -> Result<LogDescriptor, FrameError> {
        let id = self.u32()?;
        let latest = self.u64()?;
        let tag = self.u8()?;
        let k = self.u64()?;
        let system = self.u8()?;
        let retention = match tag {
            0 => Retention::Unbounded,
            1 => Retention::Keep { k, on_full: OnFull::Refuse },
            2 => Retention::Keep { k, on_full: OnFull::Overwrite },
            other => return Err(damaged(&format!("unknown retention tag {other}"))),
        };
        let name_len = self.u16()? as usize;
        let name = std::str::from_utf8(self.take(name_len)?)
            .map_err(|_| damaged("log name is not UTF-8"))?
            .to_owned();
        let config = LogConfig { retention, system: system != 0 };
        if crate::rules::check_create(&name, &config).is_err() {
            return Err(damaged(&format!("stored log {name:?} breaks the naming or config rules")));
        }
        Ok(LogDescriptor { id, name, config, latest })
    }
}

fn parse_entries(kind: FrameKind, body: &[u8]) -> Result<Vec<Entry<'_>>, FrameError> {
    let mut cursor = Cursor { bytes: body, at: 0 };
    let count = if kind == FrameKind::AppendOne { 1 } else { cursor.u32()? as usize };
    // Each entry takes at least its header: bounds the allocation.
    if count > body.len() / ENTRY_HEADER_BYTES {
        return Err(damaged(&format!("record count {count} cannot fit the frame")));
    }
    let mut entries = Vec::with_capacity(count);
    for _ in 0..count {
        let offset_in_frame = FRAME_HEADER_BYTES + cursor.at;
        let log_id = cursor.u32()?;
        let seq = cursor.u64()?;
        let len = cursor.u32()? as usize;
        let _crc = cursor.u32()?;
        let payload = cursor.take(len)?;
        if seq == 0 {
            return Err(damaged("record with seq 0"));
        }
        entries.push(Entry { log_id, seq, offset_in_frame, payload });
    }
    cursor.done()?;
    Ok(entries)
}

/// Parse a checked frame's body.
pub(crate) fn parse_body(frame: RawFrame<'_>) -> Result<FrameBody<'_>, FrameError> {
    let mut cursor = Cursor { bytes: frame.body, at: 0 };
    let body = match frame.kind {
        FrameKind::SegmentHeader => {
            let format_version = cursor.u16()?;
            if !(FORMAT_VERSION_READ_MIN..=FORMAT_VERSION).contains(&format_version) {
                return Err(FrameError::Unsupported(format!(
                    "segment format version {format_version}; this build reads versions {FORMAT_VERSION_READ_MIN} to {FORMAT_VERSION}: open it with a newer varve"
                )));
            }
            let segment_id = cursor.u32()?;
            let next_log_id = cursor.u32()?;
            let count = cursor.u32()? as usize;
            if count > frame.body.len() / 24 {
                return Err(damaged(&format!("log count {count} cannot fit the frame")));
            }
            let logs = (0..count).map(|_| cursor.descriptor()).collect::<Result<_, _>>()?;
            FrameBody::SegmentHeader(SegmentHeader { format_version, segment_id, next_log_id, logs })
        }
        FrameKind::CreateLog => FrameBody::CreateLog(cursor.descriptor()?),
        FrameKind::DeleteLog => FrameBody::DeleteLog(cursor.u32()?),
        FrameKind::Append | FrameKind::AppendOne => return Ok(FrameBody::Append(parse_entries(frame.kind, frame.body)?)),
        FrameKind::Relocate => return Ok(FrameBody::Relocate(parse_entries(frame.kind, frame.body)?)),
    };
    cursor.done()?;
    Ok(body)
}

/// The length a damaged frame's header claims, if it is at most the limit
/// (the header's checksum failed, so this is only a guess to be confirmed).
pub(crate) fn claimed_frame_len(bytes: &[u8]) -> Option<usize> {
    let body_len = u32::from_le_bytes(bytes.get(4..8)?.try_into().expect("4 bytes")) as usize;
    (body_len <= FRAME_BODY_BYTES_MAX).then_some(FRAME_HEADER_BYTES + body_len)
}

/// The `(log id, seq)` of the records a damaged append frame seems to hold,
/// read without trusting its checksums (nor its kind, if that is damaged
/// too). Best effort, only to name which seqs the damage took: the caller
/// accepts an entry only if its seq is the one its log expects next.
pub(crate) fn entries_in_damaged_frame(frame: &[u8]) -> Vec<(u32, Seq)> {
    let Some(body) = frame.get(FRAME_HEADER_BYTES..) else { return Vec::new() };
    let kinds = match FrameKind::from_u8(frame[2]) {
        Some(kind @ (FrameKind::Append | FrameKind::AppendOne)) => vec![kind],
        Some(_) => Vec::new(),
        None => vec![FrameKind::AppendOne, FrameKind::Append],
    };
    for kind in kinds {
        let mut cursor = Cursor { bytes: body, at: 0 };
        let count = if kind == FrameKind::AppendOne { Ok(1) } else { cursor.u32().map(|c| c as usize) };
        let Ok(count) = count else { continue };
        let mut entries = Vec::new();
        for _ in 0..count.min(body.len() / ENTRY_HEADER_BYTES) {
            let (Ok(log_id), Ok(seq), Ok(len)) = (cursor.u32(), cursor.u64(), cursor.u32()) else { break };
            entries.push((log_id, seq));
            if cursor.take(4 + len as usize).is_err() {
                break;
            }
        }
        if !entries.is_empty() {
            return entries;
        }
    }
    Vec::new()
}

/// Where the next frame that can be trusted starts after `from` in `bytes`:
/// its header and body check (some of its records may still be damaged).
/// Salvaging resumes there after damage whose length is unknown.
pub(crate) fn next_frame_after(bytes: &[u8], from: usize) -> Option<usize> {
    let magic = MAGIC.to_le_bytes();
    (from + 1..bytes.len().saturating_sub(FRAME_HEADER_BYTES - 1))
        .filter(|&at| bytes[at] == magic[0] && bytes[at + 1] == magic[1])
        .find(|&at| matches!(check_frame(&bytes[at..], true), Ok(_) | Err(FrameError::BadRecords { .. })))
}
