//! Index checkpoints: the writer's in-memory state, saved so that the next
//! writer open loads it and replays only the frames written after it,
//! instead of every frame of every segment (docs/design.md, "Index
//! checkpoints").
//!
//! **When one is saved.** As a writer closes cleanly, and while it writes:
//! once it has written [`JournalOptions::checkpoint_bytes_min`] bytes since
//! the last save, or as many as the last index took (decompressed) if that
//! is more, so the work of saving stays in proportion to the writing and a
//! crash replays at most about that many bytes. The frames are fsynced first,
//! so a checkpoint never describes bytes a power cut could take. While the
//! writer writes, only encoding the index holds its appends; the fsync,
//! compression and file write run on a thread of their own, one save at a
//! time (a save falling due while the last is still being written waits
//! for a later write), and whatever removes the checkpoint waits for that
//! thread first, so a save begun earlier can never bring one back. A namespace
//! with damage or lost records keeps none, since every open must report
//! those and only a replay finds them: none is saved, and the one on disk is
//! removed when the writer finds damage or opens to damage or losses.
//!
//! **When a checkpoint is trusted.** The writer only appends to segments, and
//! deletes whole segments whose records are dead or moved, so a checkpoint
//! stays true of a prefix of the journal: the segments it lists, each as long
//! as it lists, the last one (active when it was saved) possibly longer. The
//! open trusts it when its CRC checks, every listed segment still on disk has
//! exactly that length (the last one at least that), no unlisted segment is
//! older than its last, and every position falls inside its segment; then it
//! replays the frames after the prefix onto it. A listed segment reclaimed
//! since held only records the frames after it moved or dropped: the open
//! checks that none is left there and none is lost, and otherwise replays
//! every frame. So does anything else — a torn or damaged checkpoint, a
//! segment cut or rewritten — and the report says why.
//!
//! **Who loads it.** The writer's open, and a read-only open when the
//! writer's published end (`END`) is at or past the checkpoint's end: the
//! reader then reads the frames after it as it follows the writer's
//! appends. A listed segment the compactor reclaimed since is for a reader
//! what it is for a writer (checked once the open has read on to the
//! writer's end; otherwise it opens again, replaying every frame): a
//! checkpoint written on its own thread reaches the disk a little after
//! the point it describes, and beside a writer that reclaims segments
//! quickly it would otherwise seldom serve a reader.
//!
//! Skipping the frames' CRCs at open checks no less: each record carries
//! its own CRC32C, checked on every read, and `fsck` reads everything.
//!
//! ```text
//! file     = magic u32 ("VVIX") | version u16 | reserved u16 (0) | body_len u64 | body_crc u32 | stored
//! stored   = zstd(body) since version 3, body before     (body_len and body_crc are of `stored`)
//! body     = next_log_id u32
//!            | segment_count u32 | (segment_id u32 | segment_len u64)*      ascending ids
//!            | log_count u32 | log*
//! log      = id varint | latest varint | flags u8 | [k varint] | [trimmed_before varint]
//!            | name_len u8 | name | count varint | position*                since version 4
//!          = descriptor (as in segment headers) | base u64 | count u32 | position*    before
//! flags    = retention (0 unbounded, 1 keep refusing, 2 keep overwriting) in bits 0-1,
//!            bit 2 system, bit 3 trimmed: k is there unless unbounded, trimmed_before if trimmed
//! position = segment_delta zigzag-varint | offset_delta zigzag-varint | len varint
//! ```
//!
//! `count` is `latest + 1 - base`: positions of seqs `base..=latest` (since
//! version 4 `base` is not stored but derived from it). A position's
//! deltas are from the log's previous position (the first from segment 0,
//! offset 0); the offset's from 0 when the segment differs.

use std::collections::{BTreeMap, VecDeque};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::codec::{ByteReader, ByteWriter};
use crate::contract::{LogConfig, OnFull, Retention, Seq};
use crate::error::{IoContext, Result};
use crate::journal::format::{checked_descriptor, read_descriptor, LogDescriptor, ENTRY_HEADER_BYTES};
use crate::journal::io::SegmentIo;
use crate::journal::packed::PackedSnapshot;
use crate::journal::recovery::{recover_as_writer, resume_as_writer, Tail};
use crate::journal::scan::{list_segments, segment_path};
use crate::journal::state::{LogState, Position, SegmentState, State, PACKED_POSITIONS_MAX};
use crate::journal::{CheckpointUse, JournalOptions, RecoveryReport};

/// The checkpoint's file in the namespace directory.
pub const FILE_NAME: &str = "index.checkpoint";
const TEMP_NAME: &str = "index.checkpoint.tmp";
const MAGIC: u32 = u32::from_le_bytes(*b"VVIX");
/// Version 4: a log's fixed fields are varints, and its `base` is derived
/// (about 25 bytes a log instead of 54, with an 18-byte name: a `PEDaLS`
/// map's index, which the writer encodes with appends held and keeps a
/// buffer of, has a log per node). Version 3: the body is compressed
/// (zstd). Version 2: descriptors may carry a trim floor (segment format
/// 4). Versions 1 to 3 are still read.
const VERSION: u16 = 4;
/// The first version whose body is compressed.
const VERSION_COMPRESSED_MIN: u16 = 3;
/// The first version whose logs are laid out compactly (`put_log`).
const VERSION_COMPACT_LOGS_MIN: u16 = 4;
/// zstd's level 1: a `PEDaLS` map's index shrinks about 7× (positions are
/// small varints, names share long prefixes) at a few hundred MB/s, so a
/// save writes a seventh of the bytes for about the time the copy into
/// the page cache took.
const COMPRESSION_LEVEL: i32 = 1;
const VERSION_READ_MIN: u16 = 1;
const HEADER_BYTES: usize = 4 + 2 + 2 + 8 + 4;

/// Save `state` as the checkpoint of a writer whose frames are durable up
/// to `active` (the active segment and the length of its frames), as it
/// closes cleanly. Returns the size of the index saved (before compression:
/// what the next open decodes), or `None` when nothing is saved since the
/// state holds damage or losses.
pub(crate) fn save(dir: &Path, state: &State, active: (u32, u64)) -> io::Result<Option<u64>> {
    let Some(index) = Index::encode(state, active) else { return Ok(None) };
    index.write(dir)?;
    Ok(Some(index.len()))
}

/// An index encoded from the state at one point of the journal, not yet
/// written. Encoding needs the state to hold still (the writer's lock);
/// compressing and writing it do not, so a writer saving as it writes
/// hands those to a thread of their own (`Shared::save_checkpoint`) and
/// holds its appends only while this encodes.
pub(crate) struct Index {
    /// The body but for the packed logs, which follow it.
    body: Vec<u8>,
    /// The packed logs, shared rather than copied: they are in the body's
    /// layout already, and at a million logs copying them held appends
    /// and a buffer of ~70 bytes a log.
    packed: PackedSnapshot,
}

impl Index {
    /// `None` when the state holds damage or losses (see the module docs),
    /// or a log too long to describe.
    pub(crate) fn encode(state: &State, active: (u32, u64)) -> Option<Index> {
        Index::encode_into(Vec::new(), state, active)
    }

    /// As [`Index::encode`], into `body` (cleared first): the buffer of
    /// the previous save, whose pages are already mapped. Into a fresh
    /// buffer, the kernel zeroing its pages took more time than the
    /// encoding itself (a 48 MB index: 55-210 ms, appends held).
    pub(crate) fn encode_into(mut body: Vec<u8>, state: &State, active: (u32, u64)) -> Option<Index> {
        // (A replay may leave loss causes that no position uses any more: a
        // gap that a later `Relocate` frame filled. Only lost positions count.)
        let lost = !state.loss_causes.is_empty() && !state.lost_runs().is_empty();
        if lost || state.segments.values().any(|s| s.damaged) {
            return None;
        }
        body.clear();
        body.put_u32(state.next_log_id);
        body.put_u32(u32::try_from(state.segments.len()).expect("segment ids are u32"));
        for (&id, segment) in &state.segments {
            body.put_u32(id);
            body.put_u64(if id == active.0 { active.1 } else { segment.bytes });
        }
        body.put_u32(u32::try_from(state.logs.len()).expect("log ids are u32"));
        for log in state.logs.hot() {
            put_log(&mut body, log);
        }
        Some(Index { body, packed: state.logs.packed_snapshot() })
    }

    /// The size of the index, before compression.
    pub(crate) fn len(&self) -> u64 {
        (self.body.len() + self.packed.len()) as u64
    }

    /// The size of its buffer (the index but its packed logs).
    pub(crate) fn buffer_len(&self) -> u64 {
        self.body.len() as u64
    }

    /// The encoded index's buffer, for the next [`Index::encode_into`].
    pub(crate) fn into_buffer(self) -> Vec<u8> {
        self.body
    }

    /// Compress and write the index as the namespace's checkpoint,
    /// replacing the one there. Not fsynced: a checkpoint lost or torn by a
    /// power cut fails its checks, and the open replays every frame. The
    /// frames it describes must be durable before it is written.
    pub(crate) fn write(&self, dir: &Path) -> io::Result<()> {
        let mut encoder = zstd::stream::Encoder::new(Vec::new(), COMPRESSION_LEVEL)?;
        encoder.write_all(&self.body)?;
        for entry in self.packed.entries() {
            encoder.write_all(entry)?;
        }
        let compressed = encoder.finish()?;
        let mut file = Vec::with_capacity(HEADER_BYTES);
        file.put_u32(MAGIC);
        file.put_u16(VERSION);
        file.put_u16(0);
        file.put_u64(compressed.len() as u64);
        file.put_u32(crc32c::crc32c(&compressed));
        let temp = dir.join(TEMP_NAME);
        let written = File::create(&temp).and_then(|mut out| {
            out.write_all(&file)?;
            out.write_all(&compressed)
        });
        if let Err(e) = written.and_then(|()| fs::rename(&temp, dir.join(FILE_NAME))) {
            // A full disk, say: leave no half-written file taking space.
            let _ = fs::remove_file(&temp);
            return Err(e);
        }
        Ok(())
    }
}

/// Remove the checkpoint, durably, before the writer's first write (and
/// any temporary file a save cut short left).
pub(crate) fn discard(dir: &Path, io: &dyn SegmentIo) -> Result<()> {
    let _ = fs::remove_file(dir.join(TEMP_NAME));
    let path = dir.join(FILE_NAME);
    match fs::remove_file(&path) {
        Ok(()) => io.sync_dir(dir).context(|| format!("syncing directory {}", dir.display())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).context(|| format!("removing {}: remove it by hand, then open again", path.display())),
    }
}

/// Remove the temporary file of a save that a crash or a full disk cut
/// short (best effort: it is never read).
pub(crate) fn remove_unfinished_save(dir: &Path) {
    let _ = fs::remove_file(dir.join(TEMP_NAME));
}

/// What an open gets from the checkpoint.
#[expect(clippy::large_enum_variant, reason = "one per open, moved once")]
pub(crate) enum Loaded {
    /// The state (with, for a writer, every frame written after the
    /// checkpoint replayed onto it), the report of the open, where the
    /// opener resumes, and the size of the index it held (decompressed).
    /// For a reader, `reclaimed` lists the segments the checkpoint names
    /// that are no longer on disk: once it has read the frames after the
    /// checkpoint, no record may be left in them ([`distrust_after_reclaimed`]).
    State { state: State, report: RecoveryReport, tail: Tail, index_bytes: u64, reclaimed: Vec<u32> },
    /// No checkpoint, or one not to trust; replay (and say why).
    Replay(CheckpointUse),
}

/// Who loads a checkpoint: the writer opens the newest segment for writing.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Opener {
    Writer,
    /// A read-only handle: it also requires the writer's published end to
    /// be at or past the checkpoint's end; it then follows the frames after
    /// the checkpoint as it follows the writer's appends.
    Reader {
        published: Option<(u32, u64)>,
    },
}

/// Load the checkpoint if there is one and it describes a prefix of the
/// segments on disk; a writer then replays the frames after that prefix.
/// Packed logs go in scratch files in `dir` when they take at least
/// `packed_in_files` bytes (`JournalOptions::packed_in_file_bytes_min`).
pub(crate) fn load(dir: &Path, opener: Opener, io: &dyn SegmentIo, packed_in_files: u64) -> Result<Loaded> {
    let path = dir.join(FILE_NAME);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Loaded::Replay(CheckpointUse::Absent)),
        Err(e) => return Ok(ignored(format!("reading {}: {e}", path.display()))),
    };
    let ids = list_segments(dir)?;
    match (decode(dir, &bytes, &ids, opener == Opener::Writer, packed_in_files), opener) {
        (Ok(decoded), Opener::Reader { published }) if published.is_none_or(|end| end < decoded.tail) => {
            Ok(ignored("the writer's published end is before the checkpoint's end".into()))
        }
        (Ok(Decoded { state, tail, index_bytes, missing }), Opener::Reader { .. }) => {
            let report = RecoveryReport {
                segments: state.segments.len() as u64,
                checkpoint: CheckpointUse::Loaded,
                ..RecoveryReport::default()
            };
            Ok(Loaded::State { state, report, tail: Some(tail), index_bytes, reclaimed: missing })
        }
        (Ok(Decoded { state, tail, missing, index_bytes }), Opener::Writer) => {
            let (state, report, tail) = resume_as_writer(dir, io, state, tail)?;
            if let Some(reason) = distrust_after_reclaimed(&state, tail, &missing) {
                // Replay every frame instead. The resume may have cut a torn
                // tail, which that replay no longer finds: keep its report.
                let (state, mut replayed, tail) = recover_as_writer(dir, io)?;
                replayed.torn_tail = replayed.torn_tail.or(report.torn_tail);
                replayed.checkpoint = CheckpointUse::Ignored { reason };
                return Ok(Loaded::State { state, report: replayed, tail, index_bytes: 0, reclaimed: Vec::new() });
            }
            let mut report = report;
            report.checkpoint = CheckpointUse::Loaded;
            Ok(Loaded::State { state, report, tail, index_bytes, reclaimed: Vec::new() })
        }
        (Err(reason), _) => Ok(ignored(reason)),
    }
}

/// Why a state loaded from a checkpoint that lists segments reclaimed
/// since (`missing`) is not to be trusted after the frames after it were
/// replayed, if it is not: they should have moved or dropped every record
/// in those segments and left nothing lost. (A replay of every frame then
/// finds and reports what is wrong.)
pub(crate) fn distrust_after_reclaimed(state: &State, tail: Tail, missing: &[u32]) -> Option<Distrust> {
    if missing.is_empty() {
        return None;
    }
    if tail.is_none() {
        return Some("no segment after the checkpoint's is on disk".into());
    }
    let in_missing = state.logs.values().find_map(|log| {
        let position = log.positions.iter().find(|p| missing.binary_search(&p.segment).is_ok())?;
        Some(format!(
            "log {:?}: a record in segment {}, which is no longer on disk, was not moved after the checkpoint",
            log.descriptor.name, position.segment
        ))
    });
    in_missing.or_else(|| {
        let lost = state.lost_runs();
        lost.first().map(|_| "records would be lost: a segment the checkpoint lists is no longer on disk".to_owned())
    })
}

/// Bytes a writer writes after saving an index of `index_bytes` before it
/// saves the next one: never less than that size, so that the work of
/// saving stays in proportion to the writing (and a crash replays at most
/// about as many bytes of frames as the index has).
pub(crate) fn save_interval(index_bytes: u64, options: &JournalOptions) -> u64 {
    index_bytes.max(options.checkpoint_bytes_min)
}

/// A log as version 4 lays it out (see the module docs; packed logs
/// are kept in memory so too, `packed.rs`).
pub(crate) fn put_log(out: &mut Vec<u8>, log: &LogState) {
    let d = &log.descriptor;
    let (retention, k) = match d.config.retention {
        Retention::Unbounded => (0, None),
        Retention::Keep { k, on_full: OnFull::Refuse } => (1, Some(k)),
        Retention::Keep { k, on_full: OnFull::Overwrite } => (2, Some(k)),
    };
    let trimmed = d.trimmed_before > 0;
    out.put_varint(u64::from(d.id));
    out.put_varint(d.latest);
    out.put_u8(retention | if d.config.system { FLAG_SYSTEM } else { 0 } | if trimmed { FLAG_TRIMMED } else { 0 });
    if let Some(k) = k {
        out.put_varint(k);
    }
    if trimmed {
        out.put_varint(d.trimmed_before);
    }
    out.put_u8(u8::try_from(d.name.len()).expect("names are at most 200 bytes"));
    out.put_bytes(d.name.as_bytes());
    // No index lacks any seq from its base to latest (the checkpoint is
    // not saved with holes), so the count gives the base.
    out.put_varint(log.positions.len() as u64);
    put_positions(out, log);
}

const FLAG_SYSTEM: u8 = 1 << 2;
const FLAG_TRIMMED: u8 = 1 << 3;
const FLAG_RETENTION: u8 = 0b11;

/// A log as version 4 lays it out, up to its positions: its descriptor and
/// base, and how many positions follow.
pub(crate) fn read_log(reader: &mut ByteReader<'_>) -> std::result::Result<(LogDescriptor, Seq, u64), Distrust> {
    let bad = |e: crate::codec::ReadError| format!("checkpoint log: {e}");
    let id = u32::try_from(reader.varint().map_err(bad)?).map_err(|_| "checkpoint log: id past u32")?;
    let latest = reader.varint().map_err(bad)?;
    let flags = reader.u8().map_err(bad)?;
    if flags & !(FLAG_RETENTION | FLAG_SYSTEM | FLAG_TRIMMED) != 0 {
        return Err(format!("checkpoint log {id}: unknown flags {flags:#x}"));
    }
    let retention = match flags & FLAG_RETENTION {
        0 => Retention::Unbounded,
        1 => Retention::Keep { k: reader.varint().map_err(bad)?, on_full: OnFull::Refuse },
        2 => Retention::Keep { k: reader.varint().map_err(bad)?, on_full: OnFull::Overwrite },
        other => return Err(format!("checkpoint log {id}: unknown retention {other}")),
    };
    let trimmed_before = if flags & FLAG_TRIMMED == 0 { 0 } else { reader.varint().map_err(bad)? };
    let name_len = usize::from(reader.u8().map_err(bad)?);
    let name = std::str::from_utf8(reader.take(name_len).map_err(bad)?)
        .map_err(|_| format!("checkpoint log {id}: name is not UTF-8"))?
        .to_owned();
    let config = LogConfig { retention, system: flags & FLAG_SYSTEM != 0 };
    let descriptor = checked_descriptor(LogDescriptor { id, name, config, latest, trimmed_before })
        .map_err(|e| format!("checkpoint descriptor: {}", e.reason()))?;
    let count = reader.varint().map_err(bad)?;
    let base = latest
        .checked_add(1)
        .and_then(|end| end.checked_sub(count))
        .filter(|&base| base > 0)
        .ok_or_else(|| format!("log {:?}: more positions than seqs", descriptor.name))?;
    Ok((descriptor, base, count))
}

/// The name of the log laid out as version 4 lays it out at the start of
/// `bytes`, without decoding the rest or checking it is UTF-8 (`None` if it
/// does not parse).
pub(crate) fn read_log_name(bytes: &[u8]) -> Option<&[u8]> {
    read_log_head(&mut ByteReader::new(bytes))
}

/// How many positions the log laid out at the start of `bytes` has, as
/// [`read_log_name`] reads its name.
pub(crate) fn read_log_count(bytes: &[u8]) -> Option<u64> {
    let mut reader = ByteReader::new(bytes);
    read_log_head(&mut reader)?;
    reader.varint().ok()
}

/// Read a version 4 log up to its name, and the name.
fn read_log_head<'b>(reader: &mut ByteReader<'b>) -> Option<&'b [u8]> {
    reader.varint().ok()?;
    reader.varint().ok()?;
    let flags = reader.u8().ok()?;
    if flags & FLAG_RETENTION != 0 {
        reader.varint().ok()?;
    }
    if flags & FLAG_TRIMMED != 0 {
        reader.varint().ok()?;
    }
    let name_len = usize::from(reader.u8().ok()?);
    reader.take(name_len).ok()
}

fn put_positions(out: &mut Vec<u8>, log: &LogState) {
    let mut previous = Position { segment: 0, offset: 0, len: 0 };
    for &position in &log.positions {
        put_position(out, previous, position);
        previous = position;
    }
}

/// A position as varints, relative to the log's previous one: records of
/// a log mostly sit in the same segment, near each other, so this takes
/// 4–6 bytes where three `u32`s take 12 (at a million logs the checkpoint
/// shrinks by a third, and so does the time to write it at close).
fn put_position(out: &mut Vec<u8>, previous: Position, position: Position) {
    out.put_varint(zigzag(i64::from(position.segment) - i64::from(previous.segment)));
    let base = if position.segment == previous.segment { previous.offset } else { 0 };
    out.put_varint(zigzag(i64::from(position.offset) - i64::from(base)));
    out.put_varint(u64::from(position.len));
}

pub(crate) fn read_position(reader: &mut ByteReader<'_>, previous: Position) -> Option<Position> {
    let segment = u32::try_from(i64::from(previous.segment).checked_add(unzigzag(reader.varint().ok()?)?)?).ok()?;
    let base = if segment == previous.segment { previous.offset } else { 0 };
    let offset = u32::try_from(i64::from(base).checked_add(unzigzag(reader.varint().ok()?)?)?).ok()?;
    let len = u32::try_from(reader.varint().ok()?).ok()?;
    Some(Position { segment, offset, len })
}

fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)).cast_unsigned()
}

/// `None` for a value no position difference can have (damage).
fn unzigzag(value: u64) -> Option<i64> {
    let magnitude = i64::try_from(value >> 1).ok()?;
    Some(if value & 1 == 0 { magnitude } else { -magnitude - 1 })
}

fn ignored(reason: String) -> Loaded {
    Loaded::Replay(CheckpointUse::Ignored { reason })
}

/// Why a checkpoint is not trusted.
type Distrust = String;

/// A checkpoint that describes a prefix of the segments on disk.
struct Decoded {
    state: State,
    /// Where the prefix ends: the segment that was active, and its length then.
    tail: (u32, u64),
    /// Segments it lists that are no longer on disk, ascending: the state holds no
    /// `SegmentState` for them, and may hold positions in them until the
    /// frames after the checkpoint are replayed.
    missing: Vec<u32>,
    /// The size of the index (the body, decompressed).
    index_bytes: u64,
}

fn decode(
    dir: &Path,
    bytes: &[u8],
    ids_on_disk: &[u32],
    writer: bool,
    packed_in_files: u64,
) -> std::result::Result<Decoded, Distrust> {
    let mut header = ByteReader::new(bytes);
    let short = |e| format!("checkpoint cut short: {e}");
    if header.u32().map_err(short)? != MAGIC {
        return Err("not a checkpoint (bad magic)".into());
    }
    let version = header.u16().map_err(short)?;
    if !(VERSION_READ_MIN..=VERSION).contains(&version) {
        return Err(format!("checkpoint version {version}, this build reads {VERSION_READ_MIN} to {VERSION}"));
    }
    header.u16().map_err(short)?;
    let body_len = usize::try_from(header.u64().map_err(short)?).map_err(|_| "checkpoint length overflows")?;
    let body_crc = header.u32().map_err(short)?;
    let body = bytes.get(HEADER_BYTES..).filter(|b| b.len() == body_len).ok_or("checkpoint cut short or too long")?;
    if crc32c::crc32c(body) != body_crc {
        return Err("checkpoint checksum mismatch".into());
    }
    let decompressed;
    let body = if version >= VERSION_COMPRESSED_MIN {
        decompressed =
            zstd::stream::decode_all(body).map_err(|e| format!("checkpoint body does not decompress: {e}"))?;
        &decompressed[..]
    } else {
        body
    };
    let mut reader = ByteReader::new(body);
    let bad = |e: crate::codec::ReadError| format!("checkpoint body: {e}");
    let next_log_id = reader.u32().map_err(bad)?;

    let Listed { segments, tail, missing } = decode_segments(dir, &mut reader, ids_on_disk, writer)?;
    let disk_bytes: u64 = segments.values().map(|s| s.bytes).sum();
    let mut state = State {
        next_log_id,
        segments,
        gap_records_max: disk_bytes / ENTRY_HEADER_BYTES as u64 + 1,
        ..State::default()
    };

    let log_count = reader.u32().map_err(bad)?;
    // Small logs go straight into the packed set, whose layout is this one
    // (version 4 on): their states are never built, only checked.
    let mut packed: Vec<(u32, &[u8])> = Vec::new();
    for _ in 0..log_count {
        let entry_start = reader.position();
        let (descriptor, base, count) = if version >= VERSION_COMPACT_LOGS_MIN {
            read_log(&mut reader)?
        } else {
            let descriptor =
                read_descriptor(&mut reader).map_err(|e| format!("checkpoint descriptor: {}", e.reason()))?;
            let base = reader.u64().map_err(bad)?;
            let count = u64::from(reader.u32().map_err(bad)?);
            if base == 0 || base.checked_add(count) != descriptor.latest.checked_add(1) {
                return Err(format!("log {:?}: positions do not end at its latest seq", descriptor.name));
            }
            (descriptor, base, count)
        };
        if descriptor.id >= next_log_id {
            return Err(format!("log id {} is beyond the next id {next_log_id}", descriptor.id));
        }
        let pack = version >= VERSION_COMPACT_LOGS_MIN && count <= PACKED_POSITIONS_MAX as u64;
        // Bounded by the bytes: a position takes at least 3.
        let capacity = if pack { 0 } else { usize::try_from(count).unwrap_or(usize::MAX).min(body.len() / 3) };
        let mut positions = VecDeque::with_capacity(capacity);
        let mut previous = Position { segment: 0, offset: 0, len: 0 };
        for _ in 0..count {
            let position = read_position(&mut reader, previous)
                .ok_or_else(|| format!("log {:?}: a position does not decode", descriptor.name))?;
            previous = position;
            match state.segments.get_mut(&position.segment) {
                Some(segment) => {
                    if u64::from(position.offset) + position.entry_bytes() > segment.bytes {
                        return Err(format!(
                            "log {:?}: a record past the end of segment {}",
                            descriptor.name, position.segment
                        ));
                    }
                    segment.live_records += 1;
                    segment.live_bytes += position.entry_bytes();
                    state.live.bytes += position.entry_bytes();
                }
                // Not counted, as the state counts nothing in a segment it lacks.
                None if missing.binary_search(&position.segment).is_ok() => {}
                None => {
                    return Err(format!(
                        "log {:?}: a record in segment {}, which is not listed",
                        descriptor.name, position.segment
                    ));
                }
            }
            if !pack {
                positions.push_back(position);
            }
        }
        let log = LogState::new(descriptor, base, positions);
        if log.latest() > 0 && log.base != log.earliest() {
            return Err(format!("log {:?}: its first position is not its earliest kept seq", log.descriptor.name));
        }
        if pack {
            packed.push((log.descriptor.id, &body[entry_start..reader.position()]));
        } else if let Err(log) = state.logs.try_insert(log) {
            return Err(format!("log {:?} (id {}) listed twice", log.descriptor.name, log.descriptor.id));
        }
    }
    reader.finish().map_err(|e| format!("checkpoint body: {e}"))?;
    state.logs.set_packed_in_files(dir, packed_in_files);
    state.logs.adopt_packed(packed)?;
    Ok(Decoded { state, tail, missing, index_bytes: body.len() as u64 })
}

/// The checkpoint's segment list, checked against the segment files on
/// disk (`ids_on_disk`, ascending) and opened: the segments, where the
/// prefix it describes ends, and the listed segments no longer on disk.
fn decode_segments(
    dir: &Path,
    reader: &mut ByteReader<'_>,
    ids_on_disk: &[u32],
    writer: bool,
) -> std::result::Result<Listed, Distrust> {
    let bad = |e: crate::codec::ReadError| format!("checkpoint body: {e}");
    let segment_count = reader.u32().map_err(bad)? as usize;
    if segment_count == 0 {
        return Err("checkpoint lists no segment".into());
    }
    let mut listed = Vec::with_capacity(segment_count.min(reader.remaining() / 12));
    for _ in 0..segment_count {
        listed.push((reader.u32().map_err(bad)?, reader.u64().map_err(bad)?));
    }
    let &(last_listed, _) = listed.last().expect("not empty");
    if !listed.is_sorted_by(|a, b| a.0 < b.0) {
        return Err("checkpoint lists segments out of order".into());
    }
    let newest = ids_on_disk.last().copied();
    let is_listed = |id: u32| listed.binary_search_by_key(&id, |l| l.0).is_ok();
    if let Some(&unlisted) = ids_on_disk.iter().find(|&&id| id <= last_listed && !is_listed(id)) {
        return Err(format!("segment {unlisted} is on disk but not in the checkpoint"));
    }
    let mut segments = BTreeMap::new();
    let mut missing = Vec::new();
    for &(id, len) in &listed {
        if ids_on_disk.binary_search(&id).is_err() {
            // Reclaimed since: the frames after the checkpoint moved or
            // dropped its records, which the caller checks after replaying them.
            missing.push(id);
            continue;
        }
        let path = segment_path(dir, id);
        let file = match OpenOptions::new().read(true).write(writer && Some(id) == newest).open(&path) {
            Ok(file) => file,
            // Reclaimed between the listing and now (a reader beside a
            // writer that compacts): as above.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                missing.push(id);
                continue;
            }
            Err(e) => return Err(format!("opening {}: {e}", path.display())),
        };
        let on_disk = file.metadata().map_err(|e| format!("reading {}: {e}", path.display()))?.len();
        // The segment that was active may have grown since (frames, or the
        // zero reserve of an open writer); every other one was sealed.
        let fits = if id == last_listed { on_disk >= len } else { on_disk == len };
        if !fits {
            return Err(format!("segment {id} is {on_disk} bytes, the checkpoint says {len}: written since"));
        }
        let mut segment = SegmentState::new(PathBuf::from(&path), Arc::new(file));
        segment.bytes = len;
        segments.insert(id, segment);
    }
    let &(last_listed, last_len) = listed.last().expect("not empty");
    Ok(Listed { segments, tail: (last_listed, last_len), missing })
}

/// The segments a checkpoint lists, as [`decode_segments`] found them.
struct Listed {
    segments: BTreeMap<u32, SegmentState>,
    tail: (u32, u64),
    missing: Vec<u32>,
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::contract::{LogConfig, Namespace, OnFull};
    use crate::journal::io::FileSystem;
    use crate::journal::{JournalNamespace, JournalOptions};
    use crate::SyncPolicy;

    /// Everything of a state that reads and writes depend on, in a
    /// comparable order. (Not the loss causes: with no lost position, none
    /// is used, and a replay may keep causes of gaps it filled later.)
    fn summary(state: &State) -> String {
        let mut logs: Vec<_> = state.logs.values().collect();
        logs.sort_by_key(|log| log.descriptor.id);
        let segments: Vec<_> =
            state.segments.iter().map(|(id, s)| (id, s.bytes, s.live_records, s.live_bytes, s.damaged)).collect();
        format!(
            "next {} live {}\nsegments {segments:?}\nlogs {:#?}",
            state.next_log_id,
            state.live.bytes,
            logs.iter().map(|l| (&l.descriptor, l.base, &l.positions)).collect::<Vec<_>>()
        )
    }

    /// A seeded mix of creates, deletes, appends and batches on logs of
    /// every retention, in small segments so that they roll and compact.
    fn churn(ns: &JournalNamespace, rng: &mut StdRng, ops: usize) {
        let configs =
            [LogConfig::unbounded(), LogConfig::keep(5, OnFull::Overwrite), LogConfig::keep(40, OnFull::Refuse)];
        for _ in 0..ops {
            let name = format!("l{}", rng.gen_range(0..12));
            match rng.gen_range(0..20) {
                0 => {
                    let _ = ns.delete_log(&name);
                }
                1..=3 => {
                    let _ = ns.create_log(&name, configs[rng.gen_range(0..configs.len())]);
                }
                4..=6 => {
                    let other = format!("l{}", rng.gen_range(0..12));
                    let value = vec![b'b'; rng.gen_range(0..300)];
                    let _ = ns.append_batch(&[(&name, &value), (&other, &value)]);
                }
                _ => {
                    let _ = ns.append(&name, &vec![b'a'; rng.gen_range(0..300)]);
                }
            }
        }
    }

    proptest::proptest! {
        /// Positions anywhere (segments back and forth, offsets and lengths
        /// to `u32::MAX`) decode to what was encoded.
        #[test]
        fn positions_round_trip(raw in proptest::collection::vec(proptest::prelude::any::<(u32, u32, u32)>(), 0..64)) {
            let positions: Vec<Position> = raw.iter().map(|&(segment, offset, len)| Position { segment, offset, len }).collect();
            let mut bytes = Vec::new();
            let mut previous = Position { segment: 0, offset: 0, len: 0 };
            for &position in &positions {
                put_position(&mut bytes, previous, position);
                previous = position;
            }
            let mut reader = ByteReader::new(&bytes);
            let mut previous = Position { segment: 0, offset: 0, len: 0 };
            for &position in &positions {
                let decoded = read_position(&mut reader, previous);
                proptest::prop_assert_eq!(decoded, Some(position));
                previous = position;
            }
            proptest::prop_assert!(reader.finish().is_ok());
        }
    }

    /// A segment on the listing that is gone when it is opened (the writer
    /// reclaimed it in between) is reclaimed like one missing from the
    /// listing, not a reason to distrust the checkpoint: that race made
    /// readers beside a compacting writer replay every frame.
    #[test]
    fn a_listed_segment_gone_at_its_open_counts_as_reclaimed() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(segment_path(dir.path(), 2), [0u8; 100]).expect("segment");
        let mut body = Vec::new();
        body.put_u32(2);
        for (id, len) in [(1u32, 64u64), (2, 100)] {
            body.put_u32(id);
            body.put_u64(len);
        }
        let listed_before_the_deletion = [1, 2];
        let listed = decode_segments(dir.path(), &mut ByteReader::new(&body), &listed_before_the_deletion, false)
            .expect("segment 1 counts as reclaimed");
        assert_eq!(listed.missing, [1]);
        assert_eq!(listed.segments.keys().copied().collect::<Vec<_>>(), [2]);
        assert_eq!(listed.tail, (2, 100));
    }

    proptest::proptest! {
        /// Whatever a checkpoint with a valid checksum holds after its
        /// segment list, decoding refuses it or accepts it: never a panic.
        #[test]
        fn any_checksummed_body_decodes_or_is_refused(tail in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400)) {
            let dir = tempfile::tempdir().expect("tempdir");
            std::fs::write(segment_path(dir.path(), 1), [0u8; 100]).expect("segment");
            let mut body = Vec::new();
            body.put_u32(1 << 20);
            body.put_u32(1);
            body.put_u32(1);
            body.put_u64(100);
            body.extend_from_slice(&tail);
            // Raw (version 2) and compressed (versions 3 and 4, whose logs
            // are laid out differently), and a compressed version's body
            // that is not zstd at all.
            let compressed = zstd::bulk::compress(&body, COMPRESSION_LEVEL).expect("compress");
            for (version, stored) in [(2, &body), (3, &compressed), (VERSION, &compressed), (VERSION, &body)] {
                let _ = decode(dir.path(), &file_of(version, stored), &[1], false, 0);
            }
        }
    }

    /// A checkpoint file of `version` holding `body` as it is.
    fn file_of(version: u16, body: &[u8]) -> Vec<u8> {
        let mut file = Vec::new();
        file.put_u32(MAGIC);
        file.put_u16(version);
        file.put_u16(0);
        file.put_u64(body.len() as u64);
        file.put_u32(crc32c::crc32c(body));
        file.extend_from_slice(body);
        file
    }

    /// `body` (of version 4) with its logs laid out as versions 1 to 3 had
    /// them, taken from `state` (which holds the same logs).
    fn in_fixed_layout(body: &[u8], state: &State) -> Vec<u8> {
        let segments = u32::from_le_bytes(body[4..8].try_into().expect("4 bytes")) as usize;
        let logs_start = 4 + 4 + segments * 12 + 4;
        let mut out = body[..logs_start].to_vec();
        for log in state.logs.values() {
            crate::journal::format::put_descriptor(&mut out, &log.descriptor);
            out.put_u64(log.base);
            out.put_u32(u32::try_from(log.positions.len()).expect("a short log"));
            put_positions(&mut out, &log);
        }
        out
    }

    #[test]
    fn version_2_and_3_checkpoints_are_still_read_and_version_4_is_compressed_and_compact() {
        let dir = tempfile::tempdir().expect("tempdir");
        let options = JournalOptions { sync: SyncPolicy::Never, segment_bytes_max: 4096, ..JournalOptions::default() };
        let ns = JournalNamespace::open(dir.path(), "ns", options).expect("open");
        churn(&ns, &mut StdRng::seed_from_u64(7), 400);
        drop(ns);
        let path = dir.path().join(FILE_NAME);
        let saved = fs::read(&path).expect("a clean close saves a checkpoint");
        assert_eq!(u16::from_le_bytes([saved[4], saved[5]]), VERSION);
        let raw = zstd::stream::decode_all(&saved[HEADER_BYTES..]).expect("a zstd body");
        assert!(raw.len() > saved.len() - HEADER_BYTES, "compressed: {} of {} bytes", saved.len(), raw.len());
        let (replayed, _, _) = {
            let copy = tempfile::tempdir().expect("tempdir");
            copy_files(dir.path(), copy.path());
            fs::remove_file(copy.path().join(FILE_NAME)).expect("remove");
            recover_as_writer(copy.path(), &FileSystem).expect("replay")
        };
        let Loaded::State { state, report, .. } =
            load(dir.path(), Opener::Writer, &FileSystem, u64::MAX).expect("load")
        else {
            panic!("a version 4 checkpoint was not loaded");
        };
        assert_eq!(report.checkpoint, CheckpointUse::Loaded);
        assert_eq!(summary(&state), summary(&replayed));
        let fixed = in_fixed_layout(&raw, &replayed);
        assert!(raw.len() < fixed.len(), "compact: {} of {} bytes", raw.len(), fixed.len());
        let compressed = zstd::bulk::compress(&fixed, COMPRESSION_LEVEL).expect("compress");
        for (version, stored) in [(2, &fixed), (3, &compressed)] {
            fs::write(&path, file_of(version, stored)).expect("write");
            let Loaded::State { state, report, .. } =
                load(dir.path(), Opener::Writer, &FileSystem, u64::MAX).expect("load")
            else {
                panic!("a version {version} checkpoint was not loaded");
            };
            assert_eq!(report.checkpoint, CheckpointUse::Loaded, "version {version}");
            assert_eq!(summary(&state), summary(&replayed), "version {version}");
        }
    }

    #[test]
    fn a_loaded_checkpoint_equals_a_replay_of_every_frame() {
        let base_seed: u64 =
            std::env::var("VARVE_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
        println!("seed {base_seed} (VARVE_TEST_SEED)");
        for round in 0..8 {
            let mut rng = StdRng::seed_from_u64(base_seed.wrapping_add(round));
            let dir = tempfile::tempdir().expect("tempdir");
            let options =
                JournalOptions { sync: SyncPolicy::Never, segment_bytes_max: 4096, ..JournalOptions::default() };
            // Two sessions, so the second opens from the first's checkpoint.
            for session in 0..2 {
                let ns = JournalNamespace::open(dir.path(), "ns", options).expect("open");
                if session == 1 {
                    assert_eq!(
                        ns.recovery_report().checkpoint,
                        CheckpointUse::Loaded,
                        "seed {base_seed} round {round}"
                    );
                }
                churn(&ns, &mut rng, 400);
                // Live records the churn never deletes, more than a segment
                // holds: however much the compactor reclaims, the journal
                // the checkpoint describes spans several segments.
                ns.create_log("spans", LogConfig::unbounded()).expect("create");
                for _ in 0..3 {
                    ns.append("spans", &[b's'; 1500]).expect("append");
                }
                drop(ns);
            }
            let Loaded::State { state: loaded, tail: loaded_tail, .. } =
                load(dir.path(), Opener::Writer, &FileSystem, 0).expect("load")
            else {
                panic!("seed {base_seed} round {round}: the clean close saved no checkpoint to trust");
            };
            let (replayed, _, replayed_tail) = recover_as_writer(dir.path(), &FileSystem).expect("replay");
            assert!(replayed.lost_runs().is_empty(), "seed {base_seed} round {round}");
            assert_eq!(summary(&loaded), summary(&replayed), "seed {base_seed} round {round}");
            assert_eq!(loaded_tail, replayed_tail, "seed {base_seed} round {round}");
            assert!(loaded.segments.len() > 1, "seed {base_seed} round {round}: segments rolled");
        }
    }

    /// The namespace's files as they are now, into `to`: what a crash of
    /// the process writing them would leave (its frames are in the page
    /// cache, whether mapped or written). A file gone as it is copied was
    /// a checkpoint's temporary file, renamed by the thread writing it.
    fn copy_files(from: &Path, to: &Path) {
        fs::create_dir_all(to).expect("mkdir");
        for entry in fs::read_dir(from).expect("read_dir") {
            let entry = entry.expect("entry");
            if entry.file_type().expect("type").is_file() {
                match fs::copy(entry.path(), to.join(entry.file_name())) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => panic!("copying {}: {e}", entry.path().display()),
                }
            }
        }
    }

    #[test]
    fn after_a_crash_the_last_checkpoint_and_the_frames_after_it_equal_a_replay_of_every_frame() {
        let base_seed: u64 =
            std::env::var("VARVE_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
        println!("seed {base_seed} (VARVE_TEST_SEED)");
        let (mut tails_replayed, mut segments_reclaimed_since) = (0, 0);
        for round in 0..8 {
            let context = format!("seed {base_seed} round {round}");
            let mut rng = StdRng::seed_from_u64(base_seed.wrapping_add(round));
            let dir = tempfile::tempdir().expect("tempdir");
            let crashed = tempfile::tempdir().expect("tempdir");
            let options = JournalOptions {
                sync: SyncPolicy::Never,
                segment_bytes_max: 4096,
                checkpoint_bytes_min: 4096,
                ..JournalOptions::default()
            };
            // The first session closes cleanly; the second, which opens from
            // that checkpoint and saves its own as it writes, "crashes".
            for session in 0..2 {
                let ns = JournalNamespace::open(dir.path(), "ns", options).expect("open");
                churn(&ns, &mut rng, 400);
                ns.create_log(&format!("spans{session}"), LogConfig::unbounded()).expect("create");
                for _ in 0..3 {
                    ns.append(&format!("spans{session}"), &[b's'; 1500]).expect("append");
                }
                let more = rng.gen_range(0..100);
                churn(&ns, &mut rng, more);
                if session == 1 {
                    // Two copies: each open below may cut what the crash left.
                    copy_files(dir.path(), &crashed.path().join("a"));
                    copy_files(dir.path(), &crashed.path().join("b"));
                }
            }
            let (a, b) = (crashed.path().join("a"), crashed.path().join("b"));
            let checkpoint = fs::read(a.join(FILE_NAME)).expect("the writer saved a checkpoint");
            let ids = list_segments(&a).expect("list");
            if decode(&a, &checkpoint, &ids, false, u64::MAX).is_ok_and(|decoded| !decoded.missing.is_empty()) {
                segments_reclaimed_since += 1;
            }
            let (loaded, report, loaded_tail) = match load(&a, Opener::Writer, &FileSystem, u64::MAX).expect("load") {
                Loaded::State { state, report, tail, .. } => (state, report, tail),
                Loaded::Replay(why) => panic!("{context}: {why:?}"),
            };
            tails_replayed += usize::from(report.frames > 0);
            fs::remove_file(b.join(FILE_NAME)).expect("the copy holds a checkpoint");
            let (replayed, _, replayed_tail) = recover_as_writer(&b, &FileSystem).expect("replay");
            assert!(replayed.lost_runs().is_empty(), "{context}");
            assert_eq!(summary(&loaded), summary(&replayed), "{context}");
            assert_eq!(loaded_tail, replayed_tail, "{context}");
        }
        println!("{tails_replayed} opens replayed frames after the checkpoint, {segments_reclaimed_since} had segments reclaimed since");
        assert!(tails_replayed > 0, "seed {base_seed}: no open replayed frames after its checkpoint");
    }
}

/// Segment headers after deletes and renames, and a writer's listing that
/// names a segment gone by its open (from a review of the header encoding
/// and of `decode_segments`' `NotFound` case).
#[cfg(test)]
mod listing_tests {
    use super::*;
    use crate::contract::{LogConfig, Namespace};
    use crate::journal::format::{check_frame, parse_body, FrameBody};
    use crate::journal::io::FileSystem;
    use crate::journal::JournalNamespace;
    use crate::SyncPolicy;

    fn options() -> JournalOptions {
        JournalOptions { sync: SyncPolicy::Never, segment_bytes_max: 4096, ..JournalOptions::default() }
    }

    /// The ids of the logs in each segment's header, in order.
    fn header_ids(dir: &Path) -> Vec<(u32, Vec<u32>)> {
        list_segments(dir)
            .expect("list")
            .into_iter()
            .map(|id| {
                let bytes = fs::read(segment_path(dir, id)).expect("read");
                let frame = check_frame(&bytes, true).expect("header frame");
                let FrameBody::SegmentHeader(header) = parse_body(frame).expect("parse") else {
                    panic!("not a header")
                };
                assert_eq!(header.segment_id, id);
                (id, header.logs.iter().map(|d| d.id).collect())
            })
            .collect()
    }

    /// Headers list every log once, in id order, after deletes (swap-remove
    /// in the catalog) and renames.
    #[test]
    fn headers_list_every_log_once_in_id_order_after_deletes_and_renames() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ns = JournalNamespace::open(dir.path(), "ns", options()).expect("open");
        for i in 0..20 {
            ns.create_log(&format!("l{i}"), LogConfig::unbounded()).expect("create");
        }
        for i in [0, 3, 7, 11] {
            ns.delete_log(&format!("l{i}")).expect("delete");
        }
        ns.rename_logs(&[("l1", "z1"), ("l19", "a19")]).expect("rename");
        ns.create_log("late", LogConfig::unbounded()).expect("create");
        for _ in 0..60 {
            ns.append("late", &[b'x'; 300]).expect("append");
        }
        let live: Vec<u32> = {
            let mut ids: Vec<u32> = ns.shared.read_state().logs.ids().collect();
            ids.sort_unstable();
            ids
        };
        let headers = header_ids(&ns.shared.dir);
        assert!(headers.len() > 1, "rolled");
        let last = headers.last().expect("one").1.clone();
        assert_eq!(last, live);
        for (id, ids) in &headers {
            assert!(ids.is_sorted_by(|a, b| a < b), "segment {id}: {ids:?}");
        }
    }

    /// A writer whose listing names a segment deleted (by hand) before it is
    /// opened, with live records still in it, must not trust the checkpoint.
    #[test]
    fn a_writer_distrusts_a_checkpoint_whose_segment_vanished_after_its_listing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ns_dir = dir.path().join("ns");
        {
            let ns = JournalNamespace::open(&ns_dir, "ns", options()).expect("open");
            ns.create_log("a", LogConfig::unbounded()).expect("create");
            for _ in 0..40 {
                ns.append("a", &[b'x'; 300]).expect("append");
            }
        }
        let bytes = fs::read(ns_dir.join(FILE_NAME)).expect("checkpoint");
        let ids = list_segments(&ns_dir).expect("list");
        assert!(ids.len() >= 3, "{ids:?}");
        // A middle segment with live records vanishes between listing and open.
        let victim = ids[1];
        fs::remove_file(segment_path(&ns_dir, victim)).expect("remove");
        let decoded = decode(&ns_dir, &bytes, &ids, true, u64::MAX).expect("decoded");
        assert_eq!(decoded.missing, [victim]);
        let (state, _, tail) = resume_as_writer(&ns_dir, &FileSystem, decoded.state, decoded.tail).expect("resume");
        assert!(
            distrust_after_reclaimed(&state, tail, &decoded.missing).is_some(),
            "a checkpoint with records in a vanished segment was trusted"
        );
        // And the newest one, the checkpoint's tail.
        let tail_id = *ids.last().expect("one");
        let bytes = fs::read(ns_dir.join(FILE_NAME)).expect("checkpoint");
        let ids = list_segments(&ns_dir).expect("list");
        fs::remove_file(segment_path(&ns_dir, tail_id)).expect("remove");
        let decoded = decode(&ns_dir, &bytes, &ids, true, u64::MAX).expect("decoded");
        let (state, _, tail) = resume_as_writer(&ns_dir, &FileSystem, decoded.state, decoded.tail).expect("resume");
        assert!(distrust_after_reclaimed(&state, tail, &decoded.missing).is_some());
    }
}
