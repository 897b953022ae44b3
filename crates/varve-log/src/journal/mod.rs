//! The embedded journal: the default, crash-safe backend (no server needed).
//!
//! One journal per namespace, in its own directory: segment files of
//! CRC-framed records (see [`format`]). A frame is one append batch, so a
//! multi-log batch is atomic by construction; log creation, deletion and
//! renaming (all the renames of one call in one frame) are frames too, and
//! every segment begins with a header frame restating the whole catalog, so
//! the journal alone is the source of truth. Each log's
//! index (seq → position) is rebuilt on open: loaded from the last index
//! checkpoint (`checkpoint.rs`), which the writer saves as it writes and
//! as it closes, then brought up to date from the frames after it.
//!
//! **Writers and readers.** One process writes a namespace: it holds an
//! exclusive OS lock on `LOCK` (released by the kernel when the process dies,
//! so it is never stale). Any number of threads read through the same handle
//! without blocking the writer; any number of other processes open the
//! namespace read-only ([`JournalOptions::read_only`]) and follow new records
//! as they land.
//!
//! **Retention reclaims disk.** A segment is deleted once it holds no live
//! record; the compactor copies the live records out
//! of segments that are more than half dead (a `Relocate` frame) and deletes
//! them whenever disk use exceeds 2× the live data plus one segment, so it
//! stays within that bound.
//!
//! **Readers never see a frame half written.** The writer publishes how far
//! its frames are complete in the `END` file, after each frame; readers in
//! other processes read only that far (see `published.rs`).
//!
//! **Crash recovery.** On open every frame after the checkpoint is checked
//! (every frame, with none to trust). A torn write at the end
//! of the newest segment is cut off, copied first to `quarantine/`, and
//! reported in [`RecoveryReport::torn_tail`].
//!
//! **Damage stays local.** Damage anywhere else — a flipped byte, a segment
//! cut short, deleted or emptied — does not stop the namespace from opening:
//! intact records stay readable, records in damaged bytes or missing
//! segments read as [`LogError::Lost`] naming the log, seqs, segment and
//! offset (their seqs are never reused), and appends go on. A damaged segment
//! is kept as it is until [`fsck`] with `repair` copies it to `quarantine/`,
//! salvages its intact records and records the loss in the `_losses` log.
//! The rules telling a torn write from damage are in `scan.rs`.
//!
//! **Files.** `format` (the byte format), `state` (what is known in memory),
//! `scan` (walking frames, salvaging around damage), `recovery` (opening),
//! `writer` (the active segment and the writing operations), `durability`
//! (fsyncs, group commit, poisoning), `compaction` (reclaiming disk), `read`
//! (records back), `follower` (read-only handles following the writer),
//! `published` (the `END` file), `io` (the file-system seam for fault
//! injection), `lock`, `mapped` (memory maps) and `fsck` (checks and repair).

pub(crate) mod catalog;
mod checkpoint;
mod compaction;
mod durability;
#[cfg(test)]
mod fault_tests;
mod follower;
mod footprint;
pub(crate) mod format;
mod fsck;
mod holes;
mod io;
mod lock;
mod mapped;
mod packed;
mod published;
mod read;
mod recovery;
mod scan;
mod state;
mod writer;

use std::collections::{HashMap, VecDeque};
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::contract::{
    validate_name, Limits, LogConfig, LogInfo, Namespace, Record, Scan, Seq, SeqRange, Store, SyncPolicy, Watch,
};
use crate::error::{IoContext, LogError, Result};
use crate::notify::{NotifiedWatch, Notifier};
use crate::rules;
use durability::{start_flusher, Durability};
use follower::Follower;
use io::{FileSystem, SegmentIo};
use lock::acquire_lock;
use published::PublishedEnd;
use read::LogRef;
use recovery::{recover_as_reader, recover_as_writer, Tail};
use scan::segment_path;
use state::{SegmentState, State};
use writer::{map_sealed_segments, open_writer, Writer};

pub use catalog::HOT_LOGS_MIN;
pub use checkpoint::FILE_NAME as CHECKPOINT_FILE;
pub use footprint::JournalMemory;
pub use fsck::{fsck, FsckReport, LOSSES_LOG};

/// Largest allowed `segment_bytes_max`: positions are `u32` offsets, and a
/// segment may exceed its target by one frame (at most `FRAME_BODY_BYTES_MAX`).
pub const SEGMENT_BYTES_LIMIT: u64 = 2 << 30;
const _: () = assert!(SEGMENT_BYTES_LIMIT + format::FRAME_BODY_BYTES_MAX as u64 <= u32::MAX as u64);

/// A segment grows to at least this many times its header before it rolls.
/// The header restates the whole catalog, so a namespace of very many logs
/// (a `PEDaLS` structure has one per node) would otherwise spend most of each
/// segment restating it: with 1M logs the header is ~40 MB, more than half
/// of a default 64 MiB segment, and the rolls and compaction it causes kept
/// a 1M-key map from finishing. At 16, headers are at most ~6% of the disk.
const SEGMENT_BYTES_PER_HEADER_BYTE_MIN: u64 = 16;
/// Most segments the compactor reclaims in one call (after an append that
/// left disk use over budget): bounds the pause an append can see.
const COMPACTION_SEGMENTS_PER_CALL_MAX: usize = 4;
/// Frames at least this large are written with `pwrite` rather than copied
/// into the map: for large frames the system call is cheap per byte, and it
/// avoids a page fault per page (measured: see docs/benchmarks.md). Both land
/// in the same page cache, so readers see no difference.
const PWRITE_FRAME_BYTES_MIN: usize = 16 << 10;
/// Relocated records are written in frames of about this size.
const RELOCATE_FRAME_BYTES: usize = 1 << 20;

/// How a journal namespace is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JournalOptions {
    /// Durability of acknowledged appends. Default `Always`: the safe choice;
    /// pick `Group` for throughput when losing the last few milliseconds to a
    /// power cut is acceptable.
    pub sync: SyncPolicy,
    /// A segment rolls once it would grow past this, or past 16 times its
    /// header (which restates the catalog) if that is larger, up to
    /// [`SEGMENT_BYTES_LIMIT`]. Default 64 MiB.
    pub segment_bytes_max: u64,
    /// Size limits on records and batches. Default [`Limits::default`]; must keep
    /// `record_bytes_max <= batch_bytes_max <= 1 GiB - 4`, or opening is `InvalidArgument`.
    pub limits: Limits,
    /// Open without the writer lock: reads only, follows another process's
    /// appends. Never changes the files (a torn tail is left for the writer).
    pub read_only: bool,
    /// How often a read-only watcher looks for another process's appends.
    pub read_only_poll: Duration,
    /// A writer saves an index checkpoint once it has written this many
    /// bytes since the last one, or as many as the last checkpoint's index
    /// took (decompressed) if that is more, so that an open after a crash
    /// replays only what came after it. Default 16 MiB; must be at least 4096.
    pub checkpoint_bytes_min: u64,
    /// Logs whose state the namespace keeps decoded, at least, before it
    /// packs the small ones among those nothing changed lately (about 90
    /// bytes a log where a decoded one takes about 390): it packs once
    /// those outnumber both this and an eighth of the logs already packed.
    /// Default [`HOT_LOGS_MIN`] (65,536); 0 packs at nearly every chance
    /// (tests do, to exercise packed logs).
    pub hot_logs_min: usize,
    /// A set of packed logs at least this large is kept in a scratch file
    /// in the namespace's directory, mapped, instead of on the heap: its
    /// pages are then the page cache's, which the kernel evicts as memory
    /// runs short and reads again when a packed log is next looked up, so
    /// the heap does not grow with the logs packed. The file is unlinked
    /// from the start (nothing of it is left after a crash) and takes about
    /// as much disk as the set (twice while a pack is built). Where no file
    /// can be made or written (a reader without write access, a full disk)
    /// the set goes on the heap. Default 1 MiB; `u64::MAX` keeps every set
    /// on the heap.
    pub packed_in_file_bytes_min: u64,
}

impl Default for JournalOptions {
    fn default() -> Self {
        JournalOptions {
            sync: SyncPolicy::Always,
            segment_bytes_max: 64 << 20,
            limits: Limits::default(),
            read_only: false,
            read_only_poll: Duration::from_millis(20),
            checkpoint_bytes_min: 16 << 20,
            hot_logs_min: HOT_LOGS_MIN,
            packed_in_file_bytes_min: 1 << 20,
        }
    }
}

impl JournalOptions {
    fn validate(&self) -> Result<()> {
        let invalid = |reason: String| Err(LogError::InvalidArgument { reason });
        if self.segment_bytes_max < 4096 || self.segment_bytes_max > SEGMENT_BYTES_LIMIT {
            return invalid(format!("segment_bytes_max must be between 4096 and {SEGMENT_BYTES_LIMIT} bytes"));
        }
        if self.limits.batch_bytes_max > format::FRAME_BODY_BYTES_MAX as u64 - 4
            || self.limits.record_bytes_max > self.limits.batch_bytes_max
        {
            return invalid("limits: record_bytes_max <= batch_bytes_max <= 1 GiB - 4".into());
        }
        if self.checkpoint_bytes_min < 4096 {
            return invalid("checkpoint_bytes_min must be at least 4096 bytes".into());
        }
        Ok(())
    }
}

/// What opening a namespace found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Segment files read.
    pub segments: u64,
    /// Intact frames read (damaged ones are in `damage`).
    pub frames: u64,
    /// Record entries applied from the frames read, appends and relocated copies alike (not distinct records).
    pub records: u64,
    /// Segment bytes scanned: each segment up to the end of its last frame, intact or damaged.
    pub bytes: u64,
    /// Wall-clock time the open took, recovery included.
    pub duration: Duration,
    /// A torn write at the end of the newest segment that was cut off
    /// (writer opens only; readers list it in `damage`, with `at_tail`).
    pub torn_tail: Option<TornTail>,
    /// Damaged bytes found, in journal order. They stay in place until
    /// `fsck --repair`; the records in them are in `losses`.
    pub damage: Vec<Damage>,
    /// Records known to be lost, by log, in runs of seqs.
    pub losses: Vec<Loss>,
    /// Whether the open loaded an index checkpoint instead of replaying
    /// every frame (then `frames`, `records` and `bytes` count only the
    /// frames written after it, which a writer's open replays).
    pub checkpoint: CheckpointUse,
}

/// Whether an open loaded an index checkpoint, instead of replaying every
/// frame (docs/design.md, "Index checkpoints").
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum CheckpointUse {
    /// There was none: a first open, a store written only by a build
    /// without checkpoints, or a namespace with damage.
    #[default]
    Absent,
    /// Loaded; a writer's open replayed the frames written after it (a
    /// crash, or a writer that has it open, wrote them), a reader's follows them.
    Loaded,
    /// There was one, but it did not describe a prefix of the segments on
    /// disk (the compactor deleted one since, say), or it is damaged:
    /// every frame was replayed.
    Ignored {
        /// What did not match.
        reason: String,
    },
}

impl RecoveryReport {
    /// Damage or losses that no repair has recorded in `_losses` yet.
    #[must_use]
    pub fn needs_attention(&self) -> bool {
        self.damage.iter().any(|d| !d.at_tail) || self.losses.iter().any(|loss| !loss.acknowledged)
    }
}

/// Damaged bytes in a segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// The segment file.
    pub segment: PathBuf,
    /// Byte offset in `segment` where the damage starts.
    pub offset: u64,
    /// How many bytes from `offset` on are damaged (skipped).
    pub len: u64,
    /// What does not check there.
    pub reason: String,
    /// An unfinished write at the end of the newest segment, as a reader
    /// saw it: not damage, and cut by the next writer to open the namespace.
    pub at_tail: bool,
}

/// A run of records of one log that no intact frame holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loss {
    /// The log the records belong to.
    pub log: String,
    /// The first lost seq.
    pub first: Seq,
    /// The last lost seq, inclusive.
    pub last: Seq,
    /// The segment that held them (or would have: a missing one).
    pub segment: PathBuf,
    /// Byte offset in `segment` where they were; `None` when no single offset
    /// is known (a missing segment, damage somewhere in it, or records a repair
    /// found no longer check).
    pub offset: Option<u64>,
    /// Why they are lost, as text.
    pub reason: String,
    /// A repair recorded it in the `_losses` log: known, nothing left to salvage.
    pub acknowledged: bool,
}

/// The end of the newest segment that did not hold a whole valid frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornTail {
    /// The newest segment file, which was cut.
    pub segment: PathBuf,
    /// Byte offset of the cut: the segment's length afterwards.
    pub offset: u64,
    /// Bytes cut off and saved to `saved_to` (the zero reserve past the last written byte is not counted).
    pub dropped_bytes: u64,
    /// Why the bytes from `offset` on are not a whole valid frame.
    pub reason: String,
    /// Where the dropped bytes were copied before the cut.
    pub saved_to: PathBuf,
}

// ------------------------------------------------------------------ store

/// A directory of journal namespaces: `DIR/<namespace>/`.
pub struct JournalStore {
    dir: PathBuf,
    options: JournalOptions,
    open: Mutex<HashMap<String, Weak<Shared>>>,
}

impl JournalStore {
    /// Open (creating the directory unless read-only) a store.
    pub fn open(dir: impl AsRef<Path>, options: JournalOptions) -> Result<JournalStore> {
        options.validate()?;
        let dir = dir.as_ref().to_owned();
        if dir.exists() && !dir.is_dir() {
            return Err(LogError::InvalidArgument {
                reason: format!(
                    "the data directory {} is a file, not a directory: point --data at a directory",
                    dir.display()
                ),
            });
        }
        if !options.read_only {
            fs::create_dir_all(&dir).context(|| format!("creating the data directory {}", dir.display()))?;
        }
        Ok(JournalStore { dir, options, open: Mutex::default() })
    }

    /// The data directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Open a namespace as the concrete journal type (for its extras:
    /// recovery report, refresh, close).
    pub fn journal_namespace(&self, name: &str) -> Result<JournalNamespace> {
        validate_name(name, true)?;
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(shared) = open.get(name).and_then(Weak::upgrade) {
            return Ok(JournalNamespace { shared });
        }
        let ns = JournalNamespace::open(&self.dir.join(name), name, self.options)?;
        open.insert(name.to_owned(), Arc::downgrade(&ns.shared));
        Ok(ns)
    }
}

impl Store for JournalStore {
    fn namespace(&self, name: &str) -> Result<Arc<dyn Namespace>> {
        Ok(Arc::new(self.journal_namespace(name)?))
    }

    fn list_namespaces(&self) -> Result<Vec<String>> {
        let mut names = Vec::new();
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(names),
            Err(e) => return Err(LogError::io(format!("listing {}", self.dir.display()), e)),
        };
        for entry in entries {
            let entry = entry.context(|| format!("listing {}", self.dir.display()))?;
            let Ok(name) = entry.file_name().into_string() else { continue };
            if entry.path().is_dir() && validate_name(&name, true).is_ok() {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }
}

// ------------------------------------------------------------- namespace

/// A log's identity in its journal ([`JournalNamespace::log_id`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LogId(u32);

/// One namespace's journal. Cheap to clone; clones share one open journal.
#[derive(Clone)]
pub struct JournalNamespace {
    shared: Arc<Shared>,
}

struct Shared {
    name: String,
    dir: PathBuf,
    options: JournalOptions,
    /// Every write to the file system goes through here (see `io.rs`).
    io: Arc<dyn SegmentIo>,
    /// Shared with the catalog's pack threads (weakly), which swap in the
    /// packs they build.
    state: Arc<RwLock<State>>,
    /// Writer handles only. Lock order: `writer`, then `state`, then `durability`.
    writer: Option<Mutex<Writer>>,
    /// Read-only handles only: where catch-up scanning resumes.
    follower: Option<Mutex<Follower>>,
    durability: Arc<Durability>,
    /// The Group-commit flusher; stopped and joined on drop.
    flusher: Option<std::thread::JoinHandle<()>>,
    notifier: Arc<Notifier>,
    report: RecoveryReport,
    /// Held for the writer's lifetime; the kernel releases it if we die.
    _lock: Option<File>,
}
impl JournalNamespace {
    /// Open the namespace in `dir` (named `name` in errors). Prefer
    /// [`JournalStore::journal_namespace`].
    pub fn open(dir: &Path, name: &str, options: JournalOptions) -> Result<JournalNamespace> {
        Self::open_with_io(dir, name, options, Arc::new(FileSystem))
    }

    /// [`JournalNamespace::open`] with the file-system writes going through `io`.
    ///
    /// # Panics
    ///
    /// Never in practice: it asserts that a handle it just built is not yet shared.
    fn open_with_io(
        dir: &Path,
        name: &str,
        options: JournalOptions,
        io: Arc<dyn SegmentIo>,
    ) -> Result<JournalNamespace> {
        Self::open_trusting(dir, name, options, io, None)
    }

    /// A read-only handle's state: from the checkpoint unless `distrusted`
    /// says why not, or by replaying every frame. Also where it follows the
    /// writer from, and the segments the checkpoint lists that are gone.
    fn load_as_reader(
        dir: &Path,
        io: &dyn SegmentIo,
        distrusted: Option<String>,
        packed_in_files: u64,
    ) -> Result<(State, RecoveryReport, Follower, Vec<u32>)> {
        let end = PublishedEnd::for_reader(dir)?;
        let published = end.as_ref().and_then(PublishedEnd::load);
        let loaded = match distrusted {
            None => checkpoint::load(dir, checkpoint::Opener::Reader { published }, io, packed_in_files)?,
            Some(reason) => checkpoint::Loaded::Replay(CheckpointUse::Ignored { reason }),
        };
        let (state, report, tail, reclaimed) = match loaded {
            checkpoint::Loaded::State { state, report, tail, reclaimed, .. } => (state, report, tail, reclaimed),
            checkpoint::Loaded::Replay(why) => {
                let (state, mut report, tail) = recover_as_reader(dir, end.as_ref(), &mut |_, _| {})?;
                report.checkpoint = why;
                (state, report, tail, Vec::new())
            }
        };
        let (segment, offset) = tail.unwrap_or((0, 0));
        let follower = Follower { segment, offset, end, tally: Some(RecoveryReport::default()) };
        Ok((state, report, follower, reclaimed))
    }

    /// [`JournalNamespace::open_with_io`]; a read-only open given
    /// `distrusted` (why its last attempt distrusted the checkpoint once it
    /// had read on) replays every frame instead of loading it.
    fn open_trusting(
        dir: &Path,
        name: &str,
        options: JournalOptions,
        io: Arc<dyn SegmentIo>,
        mut distrusted: Option<String>,
    ) -> Result<JournalNamespace> {
        options.validate()?;
        let started = Instant::now();
        if options.read_only {
            if !dir.is_dir() {
                return Err(LogError::NamespaceNotFound { namespace: name.to_owned() });
            }
        } else if dir.exists() && !dir.is_dir() {
            return Err(LogError::InvalidArgument {
                reason: format!("{} is a file, not a namespace directory: check the data directory", dir.display()),
            });
        } else {
            fs::create_dir_all(dir).context(|| format!("creating namespace directory {}", dir.display()))?;
        }
        // A reader from a checkpoint: the segments it lists that are gone,
        // and the segment it ends in.
        let (mut reclaimed, mut tail_segment) = (Vec::new(), 0);
        let (mut state, mut report, lock, writer, follower) = if options.read_only {
            let (state, report, follower, gone) =
                Self::load_as_reader(dir, &*io, distrusted.clone(), options.packed_in_file_bytes_min)?;
            (reclaimed, tail_segment) = (gone, follower.segment);
            (state, report, None, None, Some(Mutex::new(follower)))
        } else {
            let lock = acquire_lock(dir)?;
            let end = PublishedEnd::for_writer(dir)?;
            // The checkpoint stays: it describes a prefix of the journal,
            // which the writer only appends to.
            checkpoint::remove_unfinished_save(dir);
            let (mut state, report, tail, index_bytes) =
                match checkpoint::load(dir, checkpoint::Opener::Writer, &*io, options.packed_in_file_bytes_min)? {
                    checkpoint::Loaded::State { state, report, tail, index_bytes, .. } => {
                        (state, report, tail, index_bytes)
                    }
                    checkpoint::Loaded::Replay(why) => {
                        let (state, mut report, tail) = recover_as_writer(dir, &*io)?;
                        report.checkpoint = why;
                        (state, report, tail, 0)
                    }
                };
            // A checkpoint not trusted now never will be; one beside damage
            // or losses would hide them from the next open that trusts it
            // (no new one is saved while the namespace holds them).
            let damaged = state.segments.values().any(|s| s.damaged)
                || (!state.loss_causes.is_empty() && !state.lost_runs().is_empty());
            if damaged || matches!(report.checkpoint, CheckpointUse::Ignored { .. }) {
                checkpoint::discard(dir, &*io)?;
            }
            let mut writer = open_writer(dir, &options, &state, tail, end, &*io)?;
            // What this open replayed counts towards the next checkpoint; a
            // long replay makes the first write save one.
            writer.checkpoint_due =
                checkpoint::save_interval(index_bytes, &options).saturating_sub(report.bytes).max(1);
            map_sealed_segments(&mut state, writer.active_id);
            (state, report, Some(lock), Some(Mutex::new(writer)), None)
        };
        state.logs.set_hot_logs_min(options.hot_logs_min);
        state.logs.set_packed_in_files(dir, options.packed_in_file_bytes_min);
        report.duration = started.elapsed();
        let active = writer.as_ref().map(|w| w.lock().unwrap_or_else(PoisonError::into_inner).active.clone());
        let shared = Arc::new(Shared {
            name: name.to_owned(),
            dir: dir.to_owned(),
            options,
            io: io.clone(),
            state: Arc::new(RwLock::new(state)),
            writer,
            follower,
            durability: Arc::new(Durability::new(active, io)),
            flusher: None,
            notifier: Arc::default(),
            report: RecoveryReport::default(),
            _lock: lock,
        });
        shared.start_packing();
        if let Some(writer) = &shared.writer {
            let mut writer = writer.lock().unwrap_or_else(PoisonError::into_inner);
            shared.install_active_segment(&mut writer);
            shared.housekeep(&mut writer);
        }
        if let Some(follower) = &shared.follower {
            // Read what the writer published after the checkpoint or the
            // replay, and report it as a replay reports what it reads. A
            // replay needs it too: a segment the writer deleted under it had
            // its records moved by frames past the end the replay read to
            // (the refresh reads on until it has them).
            shared.refresh()?;
            let tally = follower.lock().unwrap_or_else(PoisonError::into_inner).tally.take().unwrap_or_default();
            report.frames += tally.frames;
            report.records += tally.records;
            report.bytes += tally.bytes;
            report.damage.extend(tally.damage);
            report.segments = shared.read_state().segments.len() as u64;
            if !reclaimed.is_empty() {
                distrusted = shared.distrusts_reclaimed(follower, &reclaimed, tail_segment)?;
            }
        }
        if distrusted.is_some() && !reclaimed.is_empty() {
            let io = shared.io.clone();
            drop(shared);
            let mut again = Self::open_trusting(dir, name, options, io, distrusted)?;
            // The report's time is the whole open's, both attempts.
            if let Some(shared) = Arc::get_mut(&mut again.shared) {
                shared.report.duration = started.elapsed();
            }
            return Ok(again);
        }
        report.losses = shared.losses();
        let mut shared = shared;
        let handle = Arc::get_mut(&mut shared).expect("not shared yet");
        handle.report = report;
        if let SyncPolicy::Group(delay) = options.sync {
            if !options.read_only {
                handle.flusher = Some(start_flusher(handle.durability.clone(), name.to_owned(), delay)?);
            }
        }
        Ok(JournalNamespace { shared })
    }

    /// What opening found: sizes, time taken, and any torn tail cut off.
    #[must_use]
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.shared.report
    }

    /// Read-only handles: catch up with the writer's appends now. (Reads do
    /// this on their own when they ask for something not yet seen.)
    pub fn refresh(&self) -> Result<()> {
        self.shared.refresh()
    }

    /// Sync and release the namespace. Other clones stay usable until dropped.
    pub fn close(self) -> Result<()> {
        self.shared.sync_all()
    }

    /// Bytes on disk in segment files, and bytes of live records in them.
    #[must_use]
    pub fn disk_usage(&self) -> (u64, u64) {
        let state = self.shared.read_state();
        state.segments.values().fold((0, 0), |(disk, live), s| (disk + s.bytes, live + s.live_bytes))
    }

    /// What the namespace holds in memory, by part (see [`JournalMemory`]).
    ///
    /// Walks every log, holding off appends meanwhile: meant for reports
    /// and diagnosis, not for every operation.
    #[must_use]
    pub fn memory(&self) -> JournalMemory {
        let checkpoint_buffer = self
            .shared
            .writer
            .as_ref()
            .map_or(0, |writer| writer.lock().unwrap_or_else(PoisonError::into_inner).checkpoint_buffer_bytes());
        JournalMemory { checkpoint_buffer, ..self.shared.read_state().memory() }
    }

    /// The id of the log named `log` now: it stays with the log when it
    /// is renamed and is never another log's, so watches of one id follow
    /// one log (`varve serve` shares a reader among them).
    pub fn log_id(&self, log: &str) -> Result<LogId> {
        Ok(LogId(self.shared.log_id(log)?))
    }

    /// The latest seq of the log `id`, as [`Namespace::latest`] gives it
    /// for the log's name; `log` is its name for errors.
    pub fn latest_id(&self, id: LogId, log: &str) -> Result<Seq> {
        Ok(self.shared.bounds(LogRef::Id(id.0, log))?.1)
    }

    /// A watch of the log `id` from `from`, as [`Namespace::watch`] makes
    /// one; `log` is its name for errors (`LogNotFound` once it is deleted).
    pub fn watch_id(&self, id: LogId, log: &str, from: Seq) -> Result<Watch> {
        let LogId(id) = id;
        self.shared.bounds(LogRef::Id(id, log))?;
        let shared = self.shared.clone();
        let log = log.to_owned();
        let fetch = Box::new(move |seq: Seq| {
            let log = LogRef::Id(id, &log);
            let (_, latest) = shared.bounds(log)?;
            if seq > latest {
                return Ok(None);
            }
            Ok(Some(Record { seq, value: shared.get(log, seq)? }))
        });
        let poll = self.shared.options.read_only.then_some(self.shared.options.read_only_poll);
        let source = NotifiedWatch { fetch, notifier: self.shared.notifier.clone(), poll };
        Ok(Watch::new(Box::new(source), from))
    }

    /// The namespace's directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// Every run of lost records now (read-only handles first catch up).
    pub fn losses(&self) -> Result<Vec<Loss>> {
        self.shared.refresh()?;
        Ok(self.shared.losses())
    }
}

impl Shared {
    fn read_state(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_state(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }

    fn writer(&self, operation: &'static str) -> Result<MutexGuard<'_, Writer>> {
        let writer =
            self.writer.as_ref().ok_or_else(|| LogError::ReadOnly { namespace: self.name.clone(), operation })?;
        let writer = writer.lock().unwrap_or_else(PoisonError::into_inner);
        self.durability.poisoned(&self.name)?;
        Ok(writer)
    }

    fn not_found(&self, log: &str) -> LogError {
        LogError::LogNotFound { namespace: self.name.clone(), log: log.to_owned() }
    }

    fn install_active_segment(&self, writer: &mut Writer) {
        let mut state = self.write_state();
        let path = segment_path(&self.dir, writer.active_id);
        let segment =
            state.segments.entry(writer.active_id).or_insert_with(|| SegmentState::new(path, writer.active.clone()));
        segment.bytes = writer.active_len;
        drop(state);
        self.map_for_reading(writer.active_id, &writer.active);
        let mut durability = self.durability.lock();
        durability.file = Some(writer.active.clone());
    }

    /// A read-only handle that loaded a checkpoint listing segments since
    /// reclaimed (ending in segment `tail_segment`), once it has read on:
    /// why it must not trust it, as the writer's open judges it.
    fn distrusts_reclaimed(
        &self,
        follower: &Mutex<Follower>,
        reclaimed: &[u32],
        tail_segment: u32,
    ) -> Result<Option<String>> {
        let at = {
            let follower = follower.lock().unwrap_or_else(PoisonError::into_inner);
            (follower.segment, follower.offset)
        };
        // As for the writer: no tail when no segment from the checkpoint's last one on is left.
        let newest = scan::list_segments(&self.dir)?.last().copied();
        let tail = newest.is_some_and(|newest| newest >= tail_segment).then_some(at);
        Ok(checkpoint::distrust_after_reclaimed(&self.read_state(), tail, reclaimed))
    }

    fn sync_all(&self) -> Result<()> {
        if self.writer.is_none() {
            return Ok(());
        }
        let target = self.durability.lock().written;
        self.durability.wait_durable(&self.name, target)
    }
}

impl Shared {
    /// Have the catalog's pack threads swap in the packs they build, then
    /// begin a pack if one is due (before any other can begin). They hold
    /// the state weakly, and the state only: a pack's thread keeps neither
    /// the namespace open nor its lock file held.
    fn start_packing(&self) {
        let weak_state = Arc::downgrade(&self.state);
        let mut state = self.write_state();
        state.logs.on_pack_built(move || {
            if let Some(state) = weak_state.upgrade() {
                let packed = state.write().unwrap_or_else(PoisonError::into_inner).logs.swap_built_pack();
                drop(packed); // after the lock
            }
        });
        let packed = state.logs.pack_if_due();
        drop(state);
        drop(packed);
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(writer) = &self.writer {
            writer.lock().unwrap_or_else(PoisonError::into_inner).finish_checkpoint_write();
        }
        if let Some(flusher) = self.flusher.take() {
            self.durability.lock().stopping = true;
            self.durability.flusher_wake.notify_all();
            let _ = flusher.join();
        }
        // Best effort: `close()` reports a failure; a plain drop cannot.
        if self.sync_all().is_err() {
            return;
        }
        // Give back the active segment's unused reserve, so an idle
        // namespace takes only the bytes it holds.
        if let Some(writer_lock) = &self.writer {
            let writer = writer_lock.lock().unwrap_or_else(PoisonError::into_inner);
            // A panic may have left the state behind a frame on disk (written,
            // not yet applied): then only a replay knows the truth.
            let consistent = !std::thread::panicking() && !writer_lock.is_poisoned() && !self.state.is_poisoned();
            // The fsync covers frames a crashed writer left in the page
            // cache, which this open's writes (all `sync_all` waits for) may
            // not include: a checkpoint must never describe bytes a power
            // cut could take.
            if writer.active.set_len(writer.active_len).is_ok()
                && self.durability.poisoned(&self.name).is_ok()
                && consistent
                && self.sync_active(&writer).is_ok()
            {
                // Best effort too: without it the next open replays every frame.
                let _ = checkpoint::save(&self.dir, &self.read_state(), (writer.active_id, writer.active_len));
            }
        }
    }
}
// ------------------------------------------------------------- the trait

impl Namespace for JournalNamespace {
    fn name(&self) -> &str {
        &self.shared.name
    }

    fn create_log(&self, log: &str, config: LogConfig) -> Result<()> {
        self.shared.create_log(log, config)
    }

    fn delete_log(&self, log: &str) -> Result<()> {
        self.shared.delete_log(log)
    }

    fn rename_logs(&self, renames: &[(&str, &str)]) -> Result<()> {
        self.shared.rename_logs(renames)
    }

    fn trim(&self, log: &str, before: Seq) -> Result<Seq> {
        self.shared.trim(log, before)
    }

    fn list_logs(&self) -> Result<Vec<LogInfo>> {
        self.shared.refresh()?;
        Ok(self.shared.read_state().infos())
    }

    fn log_info(&self, log: &str) -> Result<LogInfo> {
        self.shared.log_info(log)
    }

    fn latest(&self, log: &str) -> Result<Seq> {
        Ok(self.shared.bounds(LogRef::Name(log))?.1)
    }

    fn earliest(&self, log: &str) -> Result<Seq> {
        Ok(self.shared.bounds(LogRef::Name(log))?.0)
    }

    fn append(&self, log: &str, value: &[u8]) -> Result<Seq> {
        Ok(self.shared.append(&[(log, value)], rules::Expect::Nothing)?[0])
    }

    fn append_batch(&self, batch: &[(&str, &[u8])]) -> Result<Vec<Seq>> {
        self.shared.append(batch, rules::Expect::Nothing)
    }

    fn append_if(&self, log: &str, expected_latest: Seq, value: &[u8]) -> Result<Seq> {
        Ok(self.shared.append(&[(log, value)], rules::Expect::Latest(expected_latest))?[0])
    }

    fn append_batch_if(&self, batch: &[(&str, &[u8])], expected: &[(&str, Seq)]) -> Result<Vec<Seq>> {
        self.shared.append(batch, rules::Expect::Each(expected))
    }

    fn get(&self, log: &str, seq: Seq) -> Result<Bytes> {
        self.shared.get(LogRef::Name(log), seq)
    }

    fn scan(&self, log: &str, range: SeqRange) -> Result<Scan<'_>> {
        let id = self.shared.log_id(log)?;
        let (earliest, latest) = self.shared.bounds(LogRef::Id(id, log))?;
        let Some((first, last)) = rules::clip_scan(log, range.first, range.last, earliest, latest)? else {
            return Ok(Box::new(std::iter::empty()));
        };
        Ok(Box::new(JournalScan {
            shared: &self.shared,
            log: log.to_owned(),
            log_id: id,
            next: first,
            last,
            located: VecDeque::new(),
        }))
    }

    /// Follows the log by its id: across renames (contract rule 7).
    fn watch(&self, log: &str, from: Seq) -> Result<Watch> {
        self.watch_id(self.log_id(log)?, log, from)
    }

    fn sync(&self) -> Result<()> {
        self.shared.sync_all()
    }
}

/// A scan: each record in turn, and one `Lost` error for a run of lost
/// records, after which it goes on. Records are located a run at a time
/// (`Shared::locate_run`, one hold of the state lock per run) and read one
/// by one; a seq the run does not cover goes through `get`, which says why.
struct JournalScan<'a> {
    shared: &'a Shared,
    /// The name the scan was opened by; it reads the log by `log_id`, so a
    /// rename during the scan does not change what it reads.
    log: String,
    log_id: u32,
    next: Seq,
    last: Seq,
    /// Located records for seqs `next..`, in order.
    located: VecDeque<read::Located>,
}

impl Iterator for JournalScan<'_> {
    type Item = Result<Record>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next > self.last {
            return None;
        }
        let seq = self.next;
        let log = LogRef::Id(self.log_id, &self.log);
        if self.located.is_empty() {
            self.located = self.shared.locate_run(log, seq, self.last).into();
        }
        let read = match self.located.pop_front() {
            Some(located) => self.shared.read_located(&located, &self.log, seq),
            None => self.shared.get(log, seq),
        };
        match read {
            Ok(value) => {
                self.next += 1;
                Some(Ok(Record { seq, value }))
            }
            Err(error) => {
                self.next = match &error {
                    LogError::Lost { last, .. } => last.saturating_add(1),
                    _ => seq + 1,
                };
                self.located.clear();
                Some(Err(error))
            }
        }
    }
}
