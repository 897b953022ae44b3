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
//! relocate, 6 append of one record, 7 rename logs, 8 trim a log — see
//! `docs/design.md`.)
//!
//! `header_crc` is CRC32C of the header's first 12 bytes, so a damaged length
//! is never trusted. `body_crc` is CRC32C of the body — except that for
//! `Append`, `AppendOne` and `Relocate` frames the record payloads are left out of it,
//! because each record carries its own CRC32C (checked on every `get`), and
//! the frame CRC covers those. Every byte is thus checked exactly once.

use crate::codec::{ByteReader, ByteWriter, ReadError};
use crate::contract::{LogConfig, OnFull, Retention, Seq};

pub(crate) const MAGIC: u16 = 0x5656; // "VV"
/// Version 2 added `AppendOne`, version 3 `RenameLogs`, version 4
/// `TrimLog` and a descriptor's trim floor. Segments of versions 1 to 3 are
/// still read. (A build that reads only up to 3 refuses a version 4 segment
/// as `UnsupportedFormat`, rather than taking its trim frames for damage.)
pub(crate) const FORMAT_VERSION: u16 = 4;
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
    /// Several logs take new names at once (format 3): `rename_logs`.
    RenameLogs = 7,
    /// A log's records below a seq are gone (format 4): `trim`.
    TrimLog = 8,
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
            7 => FrameKind::RenameLogs,
            8 => FrameKind::TrimLog,
            _ => return None,
        })
    }

    fn has_payloads(self) -> bool {
        matches!(self, FrameKind::Append | FrameKind::Relocate | FrameKind::AppendOne)
    }

    /// Bytes before the first entry: the record count, except in `AppendOne`.
    fn entries_offset(self) -> usize {
        if self == FrameKind::AppendOne {
            0
        } else {
            4
        }
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
    /// Records below this seq were trimmed (`trim`); 0 if never trimmed.
    /// Restated by every segment header, so a trim outlives the segment
    /// that holds its `TrimLog` frame.
    pub(crate) trimmed_before: Seq,
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
    /// CRC32C of `payload` as stored (not yet compared).
    pub(crate) crc: u32,
}

/// The fields of a frame header (`FRAME_HEADER_BYTES`), as stored.
struct FrameHeader {
    magic: u16,
    kind: u8,
    reserved: u8,
    body_len: u32,
    body_crc: u32,
    header_crc: u32,
}

const _: () = assert!(FRAME_HEADER_BYTES == 2 + 1 + 1 + 4 + 4 + 4);

impl FrameHeader {
    /// Bytes at the front of the header that `header_crc` covers: all but `header_crc`.
    const CHECKED_BYTES: usize = FRAME_HEADER_BYTES - 4;

    #[inline]
    fn read(reader: &mut ByteReader<'_>) -> Result<FrameHeader, ReadError> {
        Ok(FrameHeader {
            magic: reader.u16()?,
            kind: reader.u8()?,
            reserved: reader.u8()?,
            body_len: reader.u32()?,
            body_crc: reader.u32()?,
            header_crc: reader.u32()?,
        })
    }
}

/// The fields of a record's header (`ENTRY_HEADER_BYTES`) in an `Append`,
/// `AppendOne` or `Relocate` body, as stored; the payload follows.
struct EntryHeader {
    log_id: u32,
    seq: Seq,
    len: u32,
    crc: u32,
}

const _: () = assert!(ENTRY_HEADER_BYTES == 4 + 8 + 4 + 4);

impl EntryHeader {
    #[inline]
    fn read(reader: &mut ByteReader<'_>) -> Result<EntryHeader, ReadError> {
        Ok(EntryHeader { log_id: reader.u32()?, seq: reader.u64()?, len: reader.u32()?, crc: reader.u32()? })
    }
}

#[derive(Debug)]
pub(crate) enum FrameBody<'a> {
    SegmentHeader(SegmentHeader),
    CreateLog(LogDescriptor),
    DeleteLog(u32),
    Append(Vec<Entry<'a>>),
    Relocate(Vec<Entry<'a>>),
    /// `(log id, new name)` pairs, applied all at once.
    RenameLogs(Vec<(u32, String)>),
    /// `(log id, before)`: the log's records below `before` are gone.
    TrimLog(u32, Seq),
}

/// Bytes a rename takes at least in a `RenameLogs` body: log id and name
/// length (names are at least one byte). Bounds the count a damaged body claims.
const RENAME_BYTES_MIN: usize = 4 + 2 + 1;

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

    pub(crate) fn descriptor(&mut self, d: &LogDescriptor) {
        put_descriptor(self, d);
    }

    /// Add a record; returns the entry's offset from the frame start.
    pub(crate) fn entry(&mut self, log_id: u32, seq: Seq, payload: &[u8]) -> usize {
        debug_assert!(self.kind.has_payloads());
        let offset = self.buf.len() - self.start;
        self.put_u32(log_id);
        self.put_u64(seq);
        self.put_u32(u32::try_from(payload.len()).expect("records are bounded by Limits"));
        self.put_u32(crc32c::crc32c(payload));
        self.put_bytes(payload);
        offset
    }

    /// Fill in the header. Returns the frame's total length.
    pub(crate) fn finish(self) -> usize {
        let body = &self.buf[self.start + FRAME_HEADER_BYTES..];
        let body_len = u32::try_from(body.len()).expect("frames are bounded by Limits");
        let body_crc = body_crc(self.kind, body).expect("a frame we just encoded parses");
        let header = &mut self.buf[self.start..self.start + FRAME_HEADER_BYTES];
        let (checked, header_crc) = header.split_at_mut(FrameHeader::CHECKED_BYTES);
        let mut fields: &mut [u8] = checked;
        fields.put_u16(MAGIC);
        fields.put_u8(self.kind as u8);
        fields.put_u8(0);
        fields.put_u32(body_len);
        fields.put_u32(body_crc);
        debug_assert!(fields.is_empty());
        let mut header_crc: &mut [u8] = header_crc;
        header_crc.put_u32(crc32c::crc32c(checked));
        self.buf.len() - self.start
    }
}

/// Body fields go straight into the frame's buffer.
impl ByteWriter for FrameEncoder<'_> {
    #[inline]
    fn put_bytes(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    #[inline]
    fn put_u8(&mut self, value: u8) {
        self.buf.push(value);
    }
}

/// A descriptor's retention tag has this bit when a trim floor
/// (`trimmed_before`, u64) follows the `system` byte (format 4).
const TAG_TRIMMED: u8 = 0x80;

/// A descriptor as segment headers and `CreateLog` frames hold it (and
/// index checkpoints, `checkpoint.rs`):
/// `id u32 | latest u64 | tag u8 | k u64 | system u8 | [trimmed_before u64] | name_len u16 | name`.
pub(crate) fn put_descriptor(out: &mut impl ByteWriter, d: &LogDescriptor) {
    let (tag, k) = match d.config.retention {
        Retention::Unbounded => (0, 0),
        Retention::Keep { k, on_full: OnFull::Refuse } => (1, k),
        Retention::Keep { k, on_full: OnFull::Overwrite } => (2, k),
    };
    let trimmed = d.trimmed_before > 0;
    out.put_u32(d.id);
    out.put_u64(d.latest);
    out.put_u8(if trimmed { tag | TAG_TRIMMED } else { tag });
    out.put_u64(k);
    out.put_u8(u8::from(d.config.system));
    if trimmed {
        out.put_u64(d.trimmed_before);
    }
    let name_len = u16::try_from(d.name.len()).expect("names are at most 200 bytes");
    out.put_u16(name_len);
    out.put_bytes(d.name.as_bytes());
}

/// `log_id u32 | before u64`.
pub(crate) fn encode_trim(buf: &mut Vec<u8>, log_id: u32, before: Seq) -> usize {
    let mut frame = FrameEncoder::begin(buf, FrameKind::TrimLog);
    frame.put_u32(log_id);
    frame.put_u64(before);
    frame.finish()
}

/// Encode a whole segment header frame.
/// A segment header (the fields of a [`SegmentHeader`]), its logs lent
/// rather than owned: a writer rolling a segment in a namespace of 400k
/// logs spent 44 ms copying their descriptors for the header.
/// `logs` yields exactly `count` descriptors.
pub(crate) fn encode_segment_header(
    buf: &mut Vec<u8>,
    format_version: u16,
    segment_id: u32,
    next_log_id: u32,
    logs: impl Iterator<Item = impl std::borrow::Borrow<LogDescriptor>>,
    count: usize,
) -> usize {
    let mut frame = FrameEncoder::begin(buf, FrameKind::SegmentHeader);
    frame.put_u16(format_version);
    frame.put_u32(segment_id);
    frame.put_u32(next_log_id);
    frame.put_u32(u32::try_from(count).expect("log count fits u32"));
    let mut written = 0;
    for log in logs {
        frame.descriptor(log.borrow());
        written += 1;
    }
    assert_eq!(written, count, "a segment header lists as many logs as it says");
    frame.finish()
}

pub(crate) fn encode_create(buf: &mut Vec<u8>, descriptor: &LogDescriptor) -> usize {
    let mut frame = FrameEncoder::begin(buf, FrameKind::CreateLog);
    frame.descriptor(descriptor);
    frame.finish()
}

pub(crate) fn encode_delete(buf: &mut Vec<u8>, log_id: u32) -> usize {
    let mut frame = FrameEncoder::begin(buf, FrameKind::DeleteLog);
    frame.put_u32(log_id);
    frame.finish()
}

/// `count:u32` then `log_id:u32 name_len:u16 name` per rename.
pub(crate) fn encode_rename(buf: &mut Vec<u8>, renames: &[(u32, &str)]) -> usize {
    let mut frame = FrameEncoder::begin(buf, FrameKind::RenameLogs);
    frame.put_u32(u32::try_from(renames.len()).expect("bounded by RENAMES_PER_CALL_MAX"));
    for (id, name) in renames {
        frame.put_u32(*id);
        frame.put_u16(u16::try_from(name.len()).expect("names are at most 200 bytes"));
        frame.put_bytes(name.as_bytes());
    }
    frame.finish()
}

// ---------------------------------------------------------------- decoding

/// CRC of a body as the header stores it (payloads skipped where they carry
/// their own CRC). `None` if an entry's length runs past the body.
fn body_crc(kind: FrameKind, body: &[u8]) -> Option<u32> {
    if !kind.has_payloads() {
        return Some(crc32c::crc32c(body));
    }
    let mut reader = ByteReader::new(body);
    let mut crc = crc32c::crc32c(reader.take(kind.entries_offset()).ok()?);
    while !reader.is_empty() {
        let start = reader.position();
        let EntryHeader { len, .. } = EntryHeader::read(&mut reader).ok()?;
        crc = crc32c::crc32c_append(crc, &body[start..reader.position()]);
        reader.take(len as usize).ok()?;
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
    let mut reader = ByteReader::new(bytes);
    let Ok(header) = FrameHeader::read(&mut reader) else { return Err(FrameError::Incomplete { len: None }) };
    if crc32c::crc32c(&bytes[..FrameHeader::CHECKED_BYTES]) != header.header_crc {
        return Err(FrameError::BadHeader("frame header checksum mismatch".into()));
    }
    if header.magic != MAGIC {
        return Err(FrameError::BadHeader(format!("bad frame magic {:#06x}", header.magic)));
    }
    let Some(kind) = FrameKind::from_u8(header.kind) else {
        return Err(FrameError::BadHeader(format!("unknown frame kind {}", header.kind)));
    };
    if header.reserved != 0 {
        return Err(FrameError::BadHeader(format!("reserved header byte is {}, not 0", header.reserved)));
    }
    let body_len = header.body_len as usize;
    if body_len > FRAME_BODY_BYTES_MAX {
        return Err(FrameError::BadHeader(format!("frame body length {body_len} exceeds the maximum")));
    }
    let len = FRAME_HEADER_BYTES + body_len;
    let Ok(body) = reader.take(body_len) else { return Err(FrameError::Incomplete { len: Some(len) }) };
    let bad_body = |reason: &str| FrameError::BadBody { len, reason: reason.to_owned() };
    match body_crc(kind, body) {
        Some(crc) if crc == header.body_crc => {}
        Some(_) => return Err(bad_body("frame body checksum mismatch")),
        None => return Err(bad_body("record lengths overrun the frame body")),
    }
    let frame = RawFrame { kind, body, len };
    if verify_payloads && kind.has_payloads() {
        let entries = parse_entries(kind, body).map_err(|e| bad_body(&e.reason()))?;
        let intact = |entry: &Entry<'_>| crc32c::crc32c(entry.payload) == entry.crc;
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

/// Check a record read back by `get`: `bytes` is the entry header followed by
/// the payload. Returns the payload range on success.
pub(crate) fn check_entry(bytes: &[u8], log_id: u32, seq: Seq) -> Result<std::ops::Range<usize>, String> {
    let mut reader = ByteReader::new(bytes);
    let Ok(header) = EntryHeader::read(&mut reader) else { return Err("record header cut short".into()) };
    let EntryHeader { log_id: stored_id, seq: stored_seq, len, crc } = header;
    if stored_id != log_id || stored_seq != seq {
        return Err(format!("index points at log id {stored_id} seq {stored_seq}, expected log id {log_id} seq {seq}"));
    }
    if reader.remaining() != len as usize {
        return Err(format!("record length {len} disagrees with the index"));
    }
    if crc32c::crc32c(reader.rest()) != crc {
        return Err(format!("record checksum mismatch (seq {seq})"));
    }
    Ok(ENTRY_HEADER_BYTES..bytes.len())
}

/// A body that parses badly; its length is unknown here (the caller has it).
fn damaged(reason: &str) -> FrameError {
    FrameError::BadBody { len: 0, reason: reason.to_owned() }
}

/// A body shorter than its fields or with bytes after them. The reader's
/// offsets count from the body; the report counts from the frame's start,
/// which is where the damage report places the frame.
impl From<ReadError> for FrameError {
    #[cold]
    fn from(error: ReadError) -> FrameError {
        damaged(&format!("frame body at frame byte {}: {}", FRAME_HEADER_BYTES + error.offset, error.kind))
    }
}

pub(crate) fn read_descriptor(reader: &mut ByteReader<'_>) -> Result<LogDescriptor, FrameError> {
    let id = reader.u32()?;
    let latest = reader.u64()?;
    let tag = reader.u8()?;
    let k = reader.u64()?;
    let system = reader.u8()?;
    let trimmed_before = if tag & TAG_TRIMMED == 0 { 0 } else { reader.u64()? };
    let retention = match tag & !TAG_TRIMMED {
        0 => Retention::Unbounded,
        1 => Retention::Keep { k, on_full: OnFull::Refuse },
        2 => Retention::Keep { k, on_full: OnFull::Overwrite },
        other => return Err(damaged(&format!("unknown retention tag {other}"))),
    };
    let name = std::str::from_utf8(reader.bytes_u16()?).map_err(|_| damaged("log name is not UTF-8"))?.to_owned();
    let config = LogConfig { retention, system: system != 0 };
    checked_descriptor(LogDescriptor { id, name, config, latest, trimmed_before })
}

/// `descriptor`, if what was stored keeps the rules a log is created by
/// and its trim floor is not past its latest seq.
pub(crate) fn checked_descriptor(descriptor: LogDescriptor) -> Result<LogDescriptor, FrameError> {
    let LogDescriptor { name, config, latest, trimmed_before, .. } = &descriptor;
    if crate::rules::check_create(name, config).is_err() {
        return Err(damaged(&format!("stored log {name:?} breaks the naming or config rules")));
    }
    if trimmed_before > latest {
        return Err(damaged(&format!(
            "stored log {name:?} is trimmed before seq {trimmed_before}, past its latest {latest}"
        )));
    }
    Ok(descriptor)
}

fn parse_entries(kind: FrameKind, body: &[u8]) -> Result<Vec<Entry<'_>>, FrameError> {
    let mut reader = ByteReader::new(body);
    let count = if kind == FrameKind::AppendOne { 1 } else { reader.u32()? as usize };
    // Each entry takes at least its header: bounds the allocation.
    if count > body.len() / ENTRY_HEADER_BYTES {
        return Err(damaged(&format!("record count {count} cannot fit the frame")));
    }
    let mut entries = Vec::with_capacity(count);
    for _ in 0..count {
        let offset_in_frame = FRAME_HEADER_BYTES + reader.position();
        let EntryHeader { log_id, seq, len, crc } = EntryHeader::read(&mut reader)?;
        let payload = reader.take(len as usize)?;
        if seq == 0 {
            return Err(damaged("record with seq 0"));
        }
        entries.push(Entry { log_id, seq, offset_in_frame, payload, crc });
    }
    reader.finish()?;
    Ok(entries)
}

/// Parse a checked frame's body.
pub(crate) fn parse_body(frame: RawFrame<'_>) -> Result<FrameBody<'_>, FrameError> {
    let mut reader = ByteReader::new(frame.body);
    let body = match frame.kind {
        FrameKind::SegmentHeader => {
            let format_version = reader.u16()?;
            if !(FORMAT_VERSION_READ_MIN..=FORMAT_VERSION).contains(&format_version) {
                return Err(FrameError::Unsupported(format!(
                    "segment format version {format_version}; this build reads versions {FORMAT_VERSION_READ_MIN} to {FORMAT_VERSION}: open it with a newer varve"
                )));
            }
            let segment_id = reader.u32()?;
            let next_log_id = reader.u32()?;
            let count = reader.u32()? as usize;
            if count > frame.body.len() / 24 {
                return Err(damaged(&format!("log count {count} cannot fit the frame")));
            }
            let logs = (0..count).map(|_| read_descriptor(&mut reader)).collect::<Result<_, _>>()?;
            FrameBody::SegmentHeader(SegmentHeader { format_version, segment_id, next_log_id, logs })
        }
        FrameKind::CreateLog => FrameBody::CreateLog(read_descriptor(&mut reader)?),
        FrameKind::DeleteLog => FrameBody::DeleteLog(reader.u32()?),
        FrameKind::Append | FrameKind::AppendOne => {
            return Ok(FrameBody::Append(parse_entries(frame.kind, frame.body)?))
        }
        FrameKind::Relocate => return Ok(FrameBody::Relocate(parse_entries(frame.kind, frame.body)?)),
        FrameKind::RenameLogs => {
            let count = reader.u32()? as usize;
            if count > frame.body.len() / RENAME_BYTES_MIN {
                return Err(damaged(&format!("rename count {count} cannot fit the frame")));
            }
            let mut renames = Vec::with_capacity(count);
            for _ in 0..count {
                let id = reader.u32()?;
                let name = std::str::from_utf8(reader.bytes_u16()?).map_err(|_| damaged("log name is not UTF-8"))?;
                if crate::contract::validate_name(name, true).is_err() {
                    return Err(damaged(&format!("renamed log {name:?} breaks the naming rules")));
                }
                renames.push((id, name.to_owned()));
            }
            FrameBody::RenameLogs(renames)
        }
        FrameKind::TrimLog => FrameBody::TrimLog(reader.u32()?, reader.u64()?),
    };
    reader.finish()?;
    Ok(body)
}

/// The length a damaged frame's header claims, if it is at most the limit
/// (the header's checksum failed, so this is only a guess to be confirmed).
pub(crate) fn claimed_frame_len(bytes: &[u8]) -> Option<usize> {
    // Only the magic, kind and reserved byte come before the length.
    let mut reader = ByteReader::new(bytes);
    reader.take(4).ok()?;
    let body_len = reader.u32().ok()? as usize;
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
        let mut reader = ByteReader::new(body);
        let count = if kind == FrameKind::AppendOne { Ok(1) } else { reader.u32().map(|c| c as usize) };
        let Ok(count) = count else { continue };
        let mut entries = Vec::new();
        for _ in 0..count.min(body.len() / ENTRY_HEADER_BYTES) {
            // Field by field, not `EntryHeader::read`: an entry whose CRC
            // or payload is cut off still names its seq.
            let (Ok(log_id), Ok(seq), Ok(len)) = (reader.u32(), reader.u64(), reader.u32()) else { break };
            entries.push((log_id, seq));
            if reader.take(4).and_then(|_| reader.take(len as usize)).is_err() {
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
