//! The embedded journal: the default, crash-safe backend (no server needed).
//!
//! One journal per namespace, in its own directory: segment files of
//! CRC-framed records (see [`format`]). A frame is one append batch, so a
//! multi-log batch is atomic by construction; log creation and deletion are
//! frames too, and every segment begins with a header frame restating the
//! whole catalog, so the journal alone is the source of truth. Each log's
//! index (seq → position) is rebuilt on open.
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
//! **Crash recovery.** On open every frame is checked. A torn or damaged tail
//! of the newest segment (nothing valid after it) is cut off, copied first to
//! `quarantine/`, and reported in [`RecoveryReport`]; damage anywhere else is
//! [`LogError::Corrupt`] with the segment and offset.

pub(crate) mod format;
mod fsck;
mod mapped;
mod scan;
mod state;

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::contract::{
    validate_name, Limits, LogConfig, LogInfo, Namespace, Record, Scan, Seq, SeqRange, Store, SyncPolicy, Watch,
};
use crate::error::{IoContext, LogError, Result};
use crate::notify::{NotifiedWatch, Notifier};
use crate::rules;
use format::{FrameEncoder, FrameKind, LogDescriptor, ENTRY_HEADER_BYTES};
use mapped::{SegmentBytes, SegmentMap};
use scan::{corrupt, list_segments, scan_segment, segment_path, Stop};
use state::{Position, SegmentState, State};

pub use fsck::{fsck, Damage, FsckReport};

/// Largest allowed `segment_bytes_max`: positions are `u32` offsets, and a
/// segment may exceed its target by one frame (at most `FRAME_BODY_BYTES_MAX`).
pub const SEGMENT_BYTES_LIMIT: u64 = 2 << 30;
const _: () = assert!(SEGMENT_BYTES_LIMIT + format::FRAME_BODY_BYTES_MAX as u64 <= u32::MAX as u64);

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
    /// A segment rolls once it would grow past this. Default 64 MiB.
    pub segment_bytes_max: u64,
    pub limits: Limits,
    /// Open without the writer lock: reads only, follows another process's
    /// appends. Never changes the files (a torn tail is left for the writer).
    pub read_only: bool,
    /// How often a read-only watcher looks for another process's appends.
    pub read_only_poll: Duration,
}

impl Default for JournalOptions {
    fn default() -> Self {
        JournalOptions {
            sync: SyncPolicy::Always,
            segment_bytes_max: 64 << 20,
            limits: Limits::default(),
            read_only: false,
            read_only_poll: Duration::from_millis(20),
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
        Ok(())
    }
}

/// What opening a namespace found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    pub segments: u64,
    pub frames: u64,
    pub records: u64,
    pub bytes: u64,
    pub duration: Duration,
    /// A torn or damaged tail that was cut off (writer opens only).
    pub torn_tail: Option<TornTail>,
}

/// The end of the newest segment that did not hold a whole valid frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornTail {
    pub segment: PathBuf,
    pub offset: u64,
    pub dropped_bytes: u64,
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

/// One namespace's journal. Cheap to clone; clones share one open journal.
#[derive(Clone)]
pub struct JournalNamespace {
    shared: Arc<Shared>,
}

struct Shared {
    name: String,
    dir: PathBuf,
    options: JournalOptions,
    state: RwLock<State>,
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

struct Writer {
    active_id: u32,
    active: Arc<File>,
    /// The active segment's map; frames are copied in here.
    map: SegmentMap,
    /// Valid bytes in the active segment; the next frame goes here. The
    /// file and map are longer (preallocated), zero past this point.
    active_len: u64,
    /// Frames after the header in the active segment (unknown, so 1, for a
    /// segment found non-empty on open).
    frames_in_active: u64,
    /// Total bytes written since open, across segments (for durability waits).
    written_total: u64,
    /// Bytes in all segment files (what `compact` keeps within bounds).
    disk_bytes: u64,
    frame: Vec<u8>,
    scratch: Vec<u8>,
}

struct Follower {
    segment: u32,
    offset: u64,
}

/// How far a read-only handle got in one segment.
struct Followed {
    offset: u64,
    complete: bool,
}

/// Read-only handles read segments in chunks of this size (larger if one
/// frame is larger), so following an active segment does not read its zero
/// reserve.
const FOLLOW_CHUNK_BYTES: u64 = 1 << 20;

impl JournalNamespace {
    /// Open the namespace in `dir` (named `name` in errors). Prefer
    /// [`JournalStore::journal_namespace`].
    ///
    /// # Panics
    ///
    /// Never in practice: it asserts that a handle it just built is not yet shared.
    pub fn open(dir: &Path, name: &str, options: JournalOptions) -> Result<JournalNamespace> {
        options.validate()?;
        let started = Instant::now();
        let lock = if options.read_only {
            if !dir.is_dir() {
                return Err(LogError::NamespaceNotFound { namespace: name.to_owned() });
            }
            None
        } else {
            fs::create_dir_all(dir).context(|| format!("creating namespace directory {}", dir.display()))?;
            Some(acquire_lock(dir)?)
        };
        let (state, mut report, tail) = recover(dir, !options.read_only)?;
        report.duration = started.elapsed();

        let (writer, follower) = if options.read_only {
            let (segment, offset) = tail.map_or((0, 0), |(id, end)| (id, end));
            (None, Some(Mutex::new(Follower { segment, offset })))
        } else {
            (Some(Mutex::new(open_writer(dir, &options, &state, tail)?)), None)
        };
        let active = writer.as_ref().map(|w| w.lock().unwrap_or_else(PoisonError::into_inner).active.clone());
        let shared = Arc::new(Shared {
            name: name.to_owned(),
            dir: dir.to_owned(),
            options,
            state: RwLock::new(state),
            writer,
            follower,
            durability: Arc::new(Durability::new(active)),
            flusher: None,
            notifier: Arc::default(),
            report,
            _lock: lock,
        });
        if let Some(writer) = &shared.writer {
            let mut writer = writer.lock().unwrap_or_else(PoisonError::into_inner);
            shared.install_active_segment(&mut writer);
            shared.delete_dead_segments(&mut writer)?;
        }
        let mut shared = shared;
        if let SyncPolicy::Group(delay) = options.sync {
            if !options.read_only {
                let flusher = start_flusher(shared.durability.clone(), name.to_owned(), delay)?;
                Arc::get_mut(&mut shared).expect("not shared yet").flusher = Some(flusher);
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

    /// The namespace's directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }
}

fn acquire_lock(dir: &Path) -> Result<File> {
    let path = dir.join("LOCK");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .context(|| format!("opening {}", path.display()))?;
    // A lock that is released is not always free at once: a child that a
    // multi-threaded process forked holds a copy of the locked descriptor
    // until it calls exec, and a writer process that just exited may still be
    // tearing down. So a busy lock is retried for a moment before the second
    // writer is told; a live writer holds it far longer than this.
    let deadline = Instant::now() + LOCK_WAIT_MAX;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(LOCK_RETRY_INTERVAL);
            }
            Err(std::fs::TryLockError::WouldBlock) => return Err(LogError::Locked { path: dir.to_owned() }),
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(LogError::io(format!("locking {}", path.display()), e));
            }
        }
    }
}

/// How long opening a writer waits for a busy lock before `Locked`.
const LOCK_WAIT_MAX: Duration = Duration::from_millis(200);
const LOCK_RETRY_INTERVAL: Duration = Duration::from_millis(5);

/// The newest segment's id and the end of its valid frames.
type Tail = Option<(u32, u64)>;

/// Rebuild the state from every segment. A writer (`repair_tail`) cuts a
/// torn tail off the newest segment; a reader stops before it. Returns the
/// newest segment and the offset where its valid frames end.
fn recover(dir: &Path, repair_tail: bool) -> Result<(State, RecoveryReport, Tail)> {
    let ids = list_segments(dir)?;
    let mut state = State::default();
    let mut report = RecoveryReport::default();
    // A read-only open races the writer: a segment listed here may be
    // deleted (it held no live record) before we read it. Skip it.
    let gone = |e: &std::io::Error| !repair_tail && e.kind() == std::io::ErrorKind::NotFound;
    let mut disk_bytes = 0;
    for &id in &ids {
        let path = segment_path(dir, id);
        match fs::metadata(&path) {
            Ok(metadata) => disk_bytes += metadata.len(),
            Err(e) if gone(&e) => {}
            Err(e) => return Err(LogError::io(format!("reading {}", path.display()), e)),
        }
    }
    state.gap_records_max = disk_bytes / ENTRY_HEADER_BYTES as u64 + 1;
    let mut tail = None;
    for (i, &id) in ids.iter().enumerate() {
        let last = i + 1 == ids.len();
        let path = segment_path(dir, id);
        let opened = OpenOptions::new().read(true).write(repair_tail && last).open(&path);
        let file = match opened {
            Ok(file) => file,
            Err(e) if gone(&e) => continue,
            Err(e) => return Err(LogError::io(format!("opening {}", path.display()), e)),
        };
        // Read through the handle: it stays valid if the file is deleted now.
        let bytes = SegmentBytes::load(&file, &path, repair_tail)?;
        state.segments.insert(id, segment_state(path.clone(), Arc::new(file)));
        let scan = scan_segment(&mut state, id, &bytes, 0);
        report.segments += 1;
        report.frames += scan.frames;
        report.records += scan.records;
        report.bytes += scan.valid_end;
        if let Some(stop) = scan.stop {
            if !(last && stop.at_tail) {
                return Err(corrupt(&path, &stop));
            }
            if repair_tail {
                report.torn_tail = Some(cut_tail(dir, &path, &bytes, &stop)?);
            }
        } else if repair_tail && !last && (bytes.len() as u64) > scan.valid_end {
            // A roll that crashed before cutting the sealed segment's zero
            // reserve: finish the cut (the scan has just seen it is all zero).
            drop(bytes);
            let sealed = OpenOptions::new().write(true).open(&path).context(|| format!("opening {}", path.display()))?;
            sealed.set_len(scan.valid_end).context(|| format!("sealing {}", path.display()))?;
        }
        tail = Some((id, scan.valid_end));
    }
    state.check_complete().map_err(|reason| LogError::Corrupt { segment: dir.to_owned(), offset: 0, reason })?;
    Ok((state, report, tail))
}

fn segment_state(path: PathBuf, file: Arc<File>) -> SegmentState {
    SegmentState { path, file, bytes: 0, live_records: 0, live_bytes: 0 }
}

/// Copy a segment's bytes from `stop.offset` on into `quarantine/`, then cut them off.
fn cut_tail(dir: &Path, path: &Path, bytes: &[u8], stop: &Stop) -> Result<TornTail> {
    let quarantine = dir.join("quarantine");
    fs::create_dir_all(&quarantine).context(|| format!("creating {}", quarantine.display()))?;
    let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("segment");
    let saved_to = quarantine.join(format!("{file_name}.{}.tail", stop.offset));
    let offset = usize::try_from(stop.offset).expect("segment offsets fit usize");
    // Past the last non-zero byte is only the active segment's zero reserve.
    let written_end = bytes.iter().rposition(|&b| b != 0).map_or(offset, |last| (last + 1).max(offset));
    let dropped = &bytes[offset..written_end];
    fs::write(&saved_to, dropped).context(|| format!("saving the torn tail to {}", saved_to.display()))?;
    let file = OpenOptions::new().write(true).open(path).context(|| format!("opening {}", path.display()))?;
    file.set_len(stop.offset).context(|| format!("truncating {}", path.display()))?;
    file.sync_all().context(|| format!("syncing {}", path.display()))?;
    Ok(TornTail {
        segment: path.to_owned(),
        offset: stop.offset,
        dropped_bytes: dropped.len() as u64,
        reason: stop.reason.clone(),
        saved_to,
    })
}

/// Set up the writer on the newest segment, starting a segment if there is
/// none (or rewriting the header of one that lost it to a torn write; the
/// file is reused, so read-only followers keep reading the same file).
fn open_writer(dir: &Path, options: &JournalOptions, state: &State, tail: Tail) -> Result<Writer> {
    let (active_id, active_len) = tail.unwrap_or((1, 0));
    let path = segment_path(dir, active_id);
    let active = match state.segments.get(&active_id) {
        Some(segment) => segment.file.clone(),
        None => Arc::new(
            OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
                .context(|| format!("creating {}", path.display()))?,
        ),
    };
    let map = SegmentMap::new(&active, &path, options.segment_bytes_max.max(active_len))?;
    let frames_in_active = u64::from(active_len > 0);
    let mut writer = Writer {
        active_id,
        active,
        map,
        active_len,
        frames_in_active,
        written_total: 0,
        disk_bytes: state.segments.values().map(|s| s.bytes).sum::<u64>()
            + if state.segments.contains_key(&active_id) { 0 } else { active_len },
        frame: Vec::new(),
        scratch: Vec::new(),
    };
    if active_len == 0 {
        let len = format::encode_segment_header(&mut writer.scratch, &state.catalog(active_id));
        writer.map.write(0, &writer.scratch[..len]);
        writer.active.sync_all().context(|| format!("syncing {}", path.display()))?;
        sync_dir(dir)?;
        writer.active_len = len as u64;
        writer.disk_bytes += len as u64;
        writer.scratch.clear();
    }
    Ok(writer)
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .context(|| format!("syncing directory {}", dir.display()))
}

// ------------------------------------------------------------- durability

/// Tracks which written bytes are durable, and lets appenders share fsyncs.
///
/// Invariant: every byte written before `written` was counted is in `file`
/// or in an earlier segment that was fsynced when the writer rolled past it,
/// so one `sync_data` of the current `file` makes everything up to the
/// `written` read before it durable.
struct Durability {
    state: Mutex<DurabilityState>,
    synced_changed: Condvar,
    /// Wakes the Group-commit flusher early, to stop.
    flusher_wake: Condvar,
}

struct DurabilityState {
    written: u64,
    synced: u64,
    syncing: bool,
    file: Option<Arc<File>>,
    failure: Option<String>,
    stopping: bool,
}

impl Durability {
    fn new(file: Option<Arc<File>>) -> Durability {
        let state = DurabilityState { written: 0, synced: 0, syncing: false, file, failure: None, stopping: false };
        Durability { state: Mutex::new(state), synced_changed: Condvar::new(), flusher_wake: Condvar::new() }
    }

    fn lock(&self) -> MutexGuard<'_, DurabilityState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Block until bytes up to `target` are durable. The first waiter runs
    /// the fsync; those arriving meanwhile wait for the next one, which then
    /// covers all of them (group commit).
    fn wait_durable(&self, namespace: &str, target: u64) -> Result<()> {
        let mut state = self.lock();
        loop {
            if let Some(cause) = &state.failure {
                return Err(LogError::Poisoned { namespace: namespace.to_owned(), cause: cause.clone() });
            }
            if state.synced >= target {
                return Ok(());
            }
            if state.syncing {
                state = self.synced_changed.wait(state).unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            let Some(file) = state.file.clone() else { return Ok(()) };
            state.syncing = true;
            let upto = state.written;
            drop(state);
            let result = file.sync_data();
            state = self.lock();
            state.syncing = false;
            match result {
                Ok(()) => state.synced = state.synced.max(upto),
                // Never retry a failed fsync: the kernel may have dropped the
                // dirty pages, so a later success would lie.
                Err(e) => state.failure = Some(format!("fsync failed: {e}")),
            }
            self.synced_changed.notify_all();
        }
    }

    fn poisoned(&self, namespace: &str) -> Result<()> {
        match &self.lock().failure {
            Some(cause) => Err(LogError::Poisoned { namespace: namespace.to_owned(), cause: cause.clone() }),
            None => Ok(()),
        }
    }

    fn poison(&self, cause: String) {
        self.lock().failure.get_or_insert(cause);
        self.synced_changed.notify_all();
    }
}

/// Sync every `delay` until the namespace is dropped. The thread holds only
/// the durability tracker, never the namespace, so dropping the namespace
/// (and releasing its lock) is never delayed by it.
fn start_flusher(durability: Arc<Durability>, namespace: String, delay: Duration) -> Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("varve-group-commit".into())
        .spawn(move || loop {
            let target = {
                let state = durability.lock();
                let (state, _) = durability
                    .flusher_wake
                    .wait_timeout_while(state, delay, |s| !s.stopping)
                    .unwrap_or_else(PoisonError::into_inner);
                if state.stopping {
                    return;
                }
                state.written
            };
            // A failure poisons the namespace; appenders and `sync` report it.
            let _ = durability.wait_durable(&namespace, target);
        })
        .map_err(|e| LogError::io("starting the group-commit thread", e))
}

// ------------------------------------------------------------ operations

impl Shared {
    fn read_state(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_state(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }

    fn writer(&self, operation: &'static str) -> Result<MutexGuard<'_, Writer>> {
        let writer = self
            .writer
            .as_ref()
            .ok_or_else(|| LogError::ReadOnly { namespace: self.name.clone(), operation })?;
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
        let segment = state.segments.entry(writer.active_id).or_insert_with(|| segment_state(path, writer.active.clone()));
        segment.bytes = writer.active_len;
        drop(state);
        let mut durability = self.durability.lock();
        durability.file = Some(writer.active.clone());
    }

    /// Write the frame in `writer.frame` at the end of the journal, rolling
    /// to a new segment first if it would overflow this one. Returns the
    /// segment and offset it was written at.
    fn write_frame(&self, writer: &mut Writer) -> Result<(u32, u64)> {
        let len = writer.frame.len() as u64;
        // A frame larger than a whole segment goes alone into a fresh one.
        if writer.active_len + len > self.options.segment_bytes_max && writer.frames_in_active > 0 {
            self.roll(writer)?;
        }
        let at = writer.active_len;
        if at + len > writer.map.capacity() {
            // Only a frame larger than a segment gets here: grow the file.
            let path = segment_path(&self.dir, writer.active_id);
            writer.map = SegmentMap::new(&writer.active, &path, at + len)?;
        }
        if writer.frame.len() < PWRITE_FRAME_BYTES_MIN {
            writer.map.write(at, &writer.frame);
        } else if let Err(e) = writer.active.write_all_at(&writer.frame, at) {
            // Nothing is published yet; a partial write leaves bytes past
            // `active_len` that the next frame overwrites, and recovery never
            // trusts a frame whose checksums fail.
            let path = segment_path(&self.dir, writer.active_id);
            return Err(LogError::io(format!("appending to {}", path.display()), e));
        }
        writer.active_len += len;
        writer.written_total += len;
        writer.disk_bytes += len;
        writer.frames_in_active += 1;
        self.durability.lock().written = writer.written_total;
        Ok((writer.active_id, at))
    }

    /// Seal the active segment and start the next, headed by the catalog.
    ///
    /// Rolls sync under every policy, `Never` included: a sealed segment is
    /// durable, and so is the new one's directory entry. That is what lets
    /// `delete_segment` make everything durable with one fsync of the active
    /// segment. (One or two fsyncs per segment of data cost nothing measurable.)
    fn roll(&self, writer: &mut Writer) -> Result<()> {
        self.sync_active(writer)?;
        let id = writer.active_id.checked_add(1).ok_or_else(|| LogError::InvalidArgument {
            reason: "namespace has used every segment id; copy its logs to a new namespace".into(),
        })?;
        let path = segment_path(&self.dir, id);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .context(|| format!("creating {}", path.display()))?;
        let mut map = SegmentMap::new(&file, &path, self.options.segment_bytes_max)?;
        writer.scratch.clear();
        let len = format::encode_segment_header(&mut writer.scratch, &self.read_state().catalog(id));
        map.write(0, &writer.scratch[..len]);
        file.sync_data().context(|| format!("syncing {}", path.display()))?;
        sync_dir(&self.dir)?;
        let sealed = writer.active_id;
        let sealed_file = std::mem::replace(&mut writer.active, Arc::new(file));
        // Cut the sealed segment's zero reserve: sealed files end at their last frame.
        drop(std::mem::replace(&mut writer.map, map));
        let sealed_path = segment_path(&self.dir, sealed);
        sealed_file.set_len(writer.active_len).context(|| format!("sealing {}", sealed_path.display()))?;
        writer.active_id = id;
        writer.active_len = len as u64;
        writer.frames_in_active = 0;
        writer.written_total += len as u64;
        writer.disk_bytes += len as u64;
        self.install_active_segment(writer);
        self.durability.lock().written = writer.written_total;
        let sealed_is_dead = self.read_state().segments.get(&sealed).is_some_and(|s| s.live_records == 0);
        if sealed_is_dead {
            self.delete_segment(writer, sealed)?;
        }
        Ok(())
    }

    /// fsync the active segment (everything before it is durable already:
    /// see `roll`). A failure poisons the namespace.
    fn sync_active(&self, writer: &Writer) -> Result<()> {
        if let Err(e) = writer.active.sync_data() {
            self.durability.poison(format!("fsync failed: {e}"));
            return self.durability.poisoned(&self.name);
        }
        let mut durability = self.durability.lock();
        durability.synced = durability.synced.max(writer.written_total);
        Ok(())
    }

    /// Delete a sealed segment that holds no live record.
    ///
    /// The frames that made its records dead (newer appends that trimmed
    /// them, a `DeleteLog`, `Relocate` copies) are made durable first, under
    /// every sync policy: if the deletion reached the disk and they did not,
    /// a power cut would leave a journal whose live records are gone.
    fn delete_segment(&self, writer: &mut Writer, id: u32) -> Result<()> {
        debug_assert_ne!(id, writer.active_id);
        if !self.read_state().segments.contains_key(&id) {
            return Ok(());
        }
        self.sync_active(writer)?;
        let removed = self.write_state().segments.remove(&id);
        if let Some(segment) = removed {
            debug_assert_eq!(segment.live_records, 0);
            writer.disk_bytes -= segment.bytes;
            fs::remove_file(&segment.path).context(|| format!("deleting {}", segment.path.display()))?;
        }
        Ok(())
    }

    /// Delete sealed segments that no longer hold a live record.
    fn delete_dead_segments(&self, writer: &mut Writer) -> Result<()> {
        let dead: Vec<u32> = self
            .read_state()
            .segments
            .iter()
            .filter(|(&id, s)| id != writer.active_id && s.live_records == 0)
            .map(|(&id, _)| id)
            .collect();
        dead.into_iter().try_for_each(|id| self.delete_segment(writer, id))
    }

    /// Is disk use above twice the live data plus the active segment?
    ///
    /// Invariant this keeps: if every sealed segment is at least half live,
    /// sealed bytes are at most twice live bytes, so over budget implies a
    /// victim exists for `compact` (barring one oversized frame).
    fn over_disk_budget(&self, writer: &Writer) -> bool {
        writer.disk_bytes > 2 * self.read_state().live_bytes_total + self.options.segment_bytes_max
    }

    /// Reclaim mostly-dead segments while disk use is over budget.
    fn compact(&self, writer: &mut Writer) -> Result<()> {
        debug_assert_eq!(writer.disk_bytes, self.read_state().segments.values().map(|s| s.bytes).sum::<u64>());
        debug_assert_eq!(
            self.read_state().live_bytes_total,
            self.read_state().segments.values().map(|s| s.live_bytes).sum::<u64>()
        );
        for _ in 0..COMPACTION_SEGMENTS_PER_CALL_MAX {
            if !self.over_disk_budget(writer) {
                return Ok(());
            }
            let victim = {
                let state = self.read_state();
                state
                    .segments
                    .iter()
                    .filter(|(&id, s)| id != writer.active_id && s.live_bytes * 2 < s.bytes)
                    .min_by(|(_, a), (_, b)| {
                        (u128::from(a.live_bytes) * u128::from(b.bytes))
                            .cmp(&(u128::from(b.live_bytes) * u128::from(a.bytes)))
                    })
                    .map(|(&id, _)| id)
            };
            let Some(victim) = victim else { return Ok(()) };
            self.relocate_segment(writer, victim)?;
        }
        Ok(())
    }

    /// Copy the live records of segment `id` to the head, then delete it.
    fn relocate_segment(&self, writer: &mut Writer, id: u32) -> Result<()> {
        let path = segment_path(&self.dir, id);
        let bytes = fs::read(&path).context(|| format!("reading {} for compaction", path.display()))?;
        let mut live: Vec<(u32, Seq, std::ops::Range<usize>)> = Vec::new();
        {
            let state = self.read_state();
            let mut at = 0;
            while at < bytes.len() {
                let frame = format::check_frame(&bytes[at..], false)
                    .map_err(|e| corrupt(&path, &Stop { offset: at as u64, reason: format!("{e:?}"), at_tail: false, incomplete: false }))?;
                if let Ok(format::FrameBody::Append(entries) | format::FrameBody::Relocate(entries)) =
                    format::parse_body(frame)
                {
                    for entry in entries {
                        let offset = at + entry.offset_in_frame;
                        let here = state.logs.get(&entry.log_id).and_then(|log| log.position(entry.seq));
                        if here.is_some_and(|p| p.segment == id && p.offset as usize == offset) {
                            let start = offset + ENTRY_HEADER_BYTES;
                            live.push((entry.log_id, entry.seq, start..start + entry.payload.len()));
                        }
                    }
                }
                at += frame.len;
            }
        }
        let mut pending = live.as_slice();
        while !pending.is_empty() {
            writer.frame.clear();
            let mut frame = FrameEncoder::begin(&mut writer.frame, FrameKind::Relocate);
            let count = pending
                .iter()
                .scan(0usize, |size, (_, _, range)| {
                    *size += ENTRY_HEADER_BYTES + range.len();
                    Some(*size)
                })
                .take_while(|&size| size <= RELOCATE_FRAME_BYTES)
                .count()
                .max(1);
            let (chunk, rest) = pending.split_at(count);
            frame.u32(u32::try_from(chunk.len()).expect("bounded by RELOCATE_FRAME_BYTES"));
            let offsets: Vec<usize> =
                chunk.iter().map(|(log_id, seq, range)| frame.entry(*log_id, *seq, &bytes[range.clone()])).collect();
            frame.finish();
            let (segment, at) = self.write_frame(writer)?;
            let mut state = self.write_state();
            for ((log_id, seq, range), offset) in chunk.iter().zip(offsets) {
                let position = position(segment, at, offset, range.len());
                state.apply_relocate(*log_id, *seq, position).map_err(|reason| self.poison_inconsistent(&reason))?;
            }
            if let Some(s) = state.segments.get_mut(&segment) {
                s.bytes = writer.active_len;
            }
            pending = rest;
        }
        self.delete_segment(writer, id)
    }

    /// A state update that validation should have made impossible failed:
    /// stop writing rather than let memory and disk disagree.
    fn poison_inconsistent(&self, reason: &str) -> LogError {
        let cause = format!("internal inconsistency: {reason}");
        self.durability.poison(cause.clone());
        LogError::Poisoned { namespace: self.name.clone(), cause }
    }

    fn append(&self, batch: &[(&str, &[u8])], expected_latest: Option<Seq>) -> Result<Vec<Seq>> {
        rules::check_batch(&self.options.limits, batch)?;
        let mut writer = self.writer("append")?;
        let mut ids_and_seqs: Vec<(u32, Seq)> = Vec::with_capacity(batch.len());
        {
            let state = self.read_state();
            let mut next: Vec<(u32, Seq)> = Vec::new();
            for (name, _) in batch {
                let log = state.log_by_name(name).ok_or_else(|| self.not_found(name))?;
                let id = log.descriptor.id;
                let seq = if let Some((_, seq)) = next.iter_mut().find(|(other, _)| *other == id) {
                    *seq += 1;
                    *seq
                } else {
                    if let Some(expected) = expected_latest {
                        if log.latest() != expected {
                            return Err(LogError::Conflict { log: (*name).to_owned(), expected, actual: log.latest() });
                        }
                    }
                    let seq = log.latest() + 1;
                    next.push((id, seq));
                    seq
                };
                ids_and_seqs.push((id, seq));
            }
            for (id, last_seq) in &next {
                let log = &state.logs[id];
                rules::check_room(&log.descriptor.name, log.descriptor.config.retention, log.latest(), last_seq - log.latest())?;
            }
        }
        writer.frame.clear();
        let mut frame = if batch.len() == 1 {
            FrameEncoder::begin(&mut writer.frame, FrameKind::AppendOne)
        } else {
            let mut frame = FrameEncoder::begin(&mut writer.frame, FrameKind::Append);
            frame.u32(u32::try_from(batch.len()).expect("bounded by Limits"));
            frame
        };
        let offsets: Vec<usize> =
            batch.iter().zip(&ids_and_seqs).map(|((_, value), (id, seq))| frame.entry(*id, *seq, value)).collect();
        frame.finish();
        let (segment, at) = self.write_frame(&mut writer)?;
        {
            let mut state = self.write_state();
            for (((_, value), (id, seq)), offset) in batch.iter().zip(&ids_and_seqs).zip(offsets) {
                state
                    .apply_append(*id, *seq, position(segment, at, offset, value.len()))
                    .map_err(|reason| self.poison_inconsistent(&reason))?;
            }
            if let Some(s) = state.segments.get_mut(&segment) {
                s.bytes = writer.active_len;
            }
        }
        self.delete_dead_segments(&mut writer)?;
        if self.over_disk_budget(&writer) {
            self.compact(&mut writer)?;
        }
        let written = writer.written_total;
        drop(writer);
        self.notifier.notify();
        self.acknowledge(written)?;
        Ok(ids_and_seqs.into_iter().map(|(_, seq)| seq).collect())
    }

    /// Return once a change that ended at byte `written` is as durable as
    /// the sync policy promises. Catalog changes follow the policy too: a
    /// `CreateLog` frame precedes every append to its log in the same
    /// journal, so it can never be lost while a later append survives.
    fn acknowledge(&self, written: u64) -> Result<()> {
        match self.options.sync {
            SyncPolicy::Always => self.durability.wait_durable(&self.name, written),
            SyncPolicy::Group(_) | SyncPolicy::Never => Ok(()),
        }
    }

    fn write_catalog_frame(&self, writer: &mut Writer) -> Result<()> {
        self.write_frame(writer)?;
        let mut state = self.write_state();
        if let Some(s) = state.segments.get_mut(&writer.active_id) {
            s.bytes = writer.active_len;
        }
        Ok(())
    }

    fn create_log(&self, log: &str, config: LogConfig) -> Result<()> {
        rules::check_create(log, &config)?;
        if self.writer.is_none() {
            self.refresh()?;
            return match self.read_state().log_by_name(log) {
                Some(existing) => rules::check_recreate(log, &existing.descriptor.config, &config),
                None => Err(LogError::ReadOnly { namespace: self.name.clone(), operation: "create a log" }),
            };
        }
        let mut writer = self.writer("create a log")?;
        let descriptor = {
            let state = self.read_state();
            if let Some(existing) = state.log_by_name(log) {
                return rules::check_recreate(log, &existing.descriptor.config, &config);
            }
            LogDescriptor { id: state.next_log_id, name: log.to_owned(), config, latest: 0 }
        };
        writer.frame.clear();
        format::encode_create(&mut writer.frame, &descriptor);
        self.write_catalog_frame(&mut writer)?;
        self.write_state().apply_create(descriptor).map_err(|reason| self.poison_inconsistent(&reason))?;
        let written = writer.written_total;
        drop(writer);
        self.acknowledge(written)
    }

    fn delete_log(&self, log: &str) -> Result<()> {
        let mut writer = self.writer("delete a log")?;
        let id = self.read_state().log_by_name(log).ok_or_else(|| self.not_found(log))?.descriptor.id;
        writer.frame.clear();
        format::encode_delete(&mut writer.frame, id);
        self.write_catalog_frame(&mut writer)?;
        self.write_state().apply_delete(id).map_err(|reason| self.poison_inconsistent(&reason))?;
        self.delete_dead_segments(&mut writer)?;
        let written = writer.written_total;
        drop(writer);
        self.notifier.notify();
        self.acknowledge(written)
    }

    /// Where `seq` of `log` is, with the file to read it from.
    fn locate(&self, log: &str, seq: Seq) -> Result<(u32, Position, Arc<File>)> {
        let state = self.read_state();
        let log_state = state.log_by_name(log).ok_or_else(|| self.not_found(log))?;
        rules::check_readable(log, seq, log_state.earliest(), log_state.latest())?;
        let position = log_state.position(seq).expect("readable seqs have positions (check_complete)");
        let segment = state.segments.get(&position.segment).expect("live positions point at kept segments");
        Ok((log_state.descriptor.id, position, segment.file.clone()))
    }

    fn get(&self, log: &str, seq: Seq) -> Result<Bytes> {
        let located = match self.locate(log, seq) {
            Err(LogError::LogNotFound { .. } | LogError::SeqNotFound { .. }) if self.writer.is_none() => {
                self.refresh()?;
                self.locate(log, seq)?
            }
            other => other?,
        };
        let (log_id, position, file) = located;
        read_record(&file, || segment_path(&self.dir, position.segment), log_id, seq, position)
    }

    fn log_info(&self, log: &str) -> Result<LogInfo> {
        if self.writer.is_none() {
            self.refresh()?;
        }
        Ok(self.read_state().log_by_name(log).ok_or_else(|| self.not_found(log))?.info())
    }

    /// `(earliest, latest)` of a log, without building a `LogInfo`.
    fn bounds(&self, log: &str) -> Result<(Seq, Seq)> {
        if self.writer.is_none() {
            self.refresh()?;
        }
        let state = self.read_state();
        let log_state = state.log_by_name(log).ok_or_else(|| self.not_found(log))?;
        Ok((log_state.earliest(), log_state.latest()))
    }

    /// Follow the writer (read-only handles): pick up frames appended since
    /// the last look, and forget segments the writer has deleted.
    fn refresh(&self) -> Result<()> {
        let Some(follower) = &self.follower else { return Ok(()) };
        let mut follower = follower.lock().unwrap_or_else(PoisonError::into_inner);
        let on_disk = list_segments(&self.dir)?;
        let mut changed = false;
        let resume_segment = follower.segment;
        for id in on_disk.iter().copied().filter(|&id| id >= resume_segment) {
            let path = segment_path(&self.dir, id);
            let file = match File::open(&path) {
                Ok(file) => Arc::new(file),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue, // deleted since listing
                Err(e) => return Err(LogError::io(format!("opening {}", path.display()), e)),
            };
            let from = if id == follower.segment { follower.offset } else { 0 };
            let progress = self.follow_segment(id, &file, &path, from)?;
            changed |= progress.offset > from;
            follower.segment = id;
            follower.offset = progress.offset;
            if !progress.complete {
                break; // the writer is mid-frame here: look again later
            }
        }
        let mut state = self.write_state();
        state.segments.retain(|id, _| on_disk.binary_search(id).is_ok() || *id >= follower.segment);
        drop(state);
        if changed {
            self.notifier.notify();
        }
        Ok(())
    }

    /// Apply the frames of segment `id` from `from` on, reading in chunks and
    /// stopping at the zero reserve of an active segment. `complete` is false
    /// when a partial frame ends what is there.
    fn follow_segment(&self, id: u32, file: &Arc<File>, path: &Path, mut from: u64) -> Result<Followed> {
        let len = file.metadata().context(|| format!("reading {}", path.display()))?.len();
        let mut chunk = FOLLOW_CHUNK_BYTES;
        while from < len {
            let wanted = chunk.min(len - from);
            let bytes = read_up_to(file, from, wanted).context(|| format!("reading {}", path.display()))?;
            // The writer cuts an active segment's zero reserve when it seals
            // it or closes: the file may have shrunk since `len` was read.
            let n = bytes.len() as u64;
            if n == 0 {
                break;
            }
            let mut state = self.write_state();
            state.gap_records_max += n / ENTRY_HEADER_BYTES as u64;
            state.segments.entry(id).or_insert_with(|| segment_state(path.to_owned(), file.clone()));
            let scan = scan_segment(&mut state, id, &bytes, from);
            drop(state);
            let chunk_start = from;
            from = scan.valid_end;
            match scan.stop {
                // Clean to the end of the chunk: read on.
                None if from == chunk_start + n => chunk = FOLLOW_CHUNK_BYTES,
                // Clean before it: the zero reserve, nothing more written yet.
                None => return Ok(Followed { offset: from, complete: true }),
                // A frame runs past the chunk (not past the file): read more.
                Some(stop) if stop.incomplete && chunk_start + n < len => {
                    chunk = if from > chunk_start { FOLLOW_CHUNK_BYTES } else { chunk * 2 };
                }
                Some(stop) if !stop.at_tail => return Err(corrupt(path, &stop)),
                Some(_) => return Ok(Followed { offset: from, complete: false }),
            }
        }
        Ok(Followed { offset: from, complete: true })
    }

    fn sync_all(&self) -> Result<()> {
        if self.writer.is_none() {
            return Ok(());
        }
        let target = self.durability.lock().written;
        self.durability.wait_durable(&self.name, target)
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
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
        if let Some(writer) = &self.writer {
            let writer = writer.lock().unwrap_or_else(PoisonError::into_inner);
            let _ = writer.active.set_len(writer.active_len);
        }
    }
}

fn position(segment: u32, frame_at: u64, offset_in_frame: usize, len: usize) -> Position {
    Position {
        segment,
        offset: u32::try_from(frame_at + offset_in_frame as u64).expect("segments are under 4 GiB"),
        len: u32::try_from(len).expect("records are bounded by Limits"),
    }
}

/// Read `len` bytes at `offset`, or fewer if the file ends first.
fn read_up_to(file: &File, offset: u64, len: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = vec![0; usize::try_from(len).expect("reads fit memory")];
    let mut filled = 0;
    while filled < bytes.len() {
        match file.read_at(&mut bytes[filled..], offset + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    bytes.truncate(filled);
    Ok(bytes)
}

/// Read and check one record. `path` names the file, only for errors.
fn read_record(file: &File, path: impl Fn() -> PathBuf, log_id: u32, seq: Seq, position: Position) -> Result<Bytes> {
    let mut buf = vec![0; ENTRY_HEADER_BYTES + position.len as usize];
    file.read_exact_at(&mut buf, u64::from(position.offset)).context(|| format!("reading {}", path().display()))?;
    let payload = format::check_entry(&buf, log_id, seq)
        .map_err(|reason| LogError::Corrupt { segment: path(), offset: u64::from(position.offset), reason })?;
    Ok(Bytes::from(buf).slice(payload))
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

    fn list_logs(&self) -> Result<Vec<LogInfo>> {
        self.shared.refresh()?;
        Ok(self.shared.read_state().infos())
    }

    fn log_info(&self, log: &str) -> Result<LogInfo> {
        self.shared.log_info(log)
    }

    fn latest(&self, log: &str) -> Result<Seq> {
        Ok(self.shared.bounds(log)?.1)
    }

    fn earliest(&self, log: &str) -> Result<Seq> {
        Ok(self.shared.bounds(log)?.0)
    }

    fn append(&self, log: &str, value: &[u8]) -> Result<Seq> {
        Ok(self.shared.append(&[(log, value)], None)?[0])
    }

    fn append_batch(&self, batch: &[(&str, &[u8])]) -> Result<Vec<Seq>> {
        self.shared.append(batch, None)
    }

    fn append_if(&self, log: &str, expected_latest: Seq, value: &[u8]) -> Result<Seq> {
        Ok(self.shared.append(&[(log, value)], Some(expected_latest))?[0])
    }

    fn get(&self, log: &str, seq: Seq) -> Result<Bytes> {
        self.shared.get(log, seq)
    }

    fn scan(&self, log: &str, range: SeqRange) -> Result<Scan<'_>> {
        let (earliest, latest) = self.shared.bounds(log)?;
        let Some((first, last)) = rules::clip_scan(log, range.first, range.last, earliest, latest)? else {
            return Ok(Box::new(std::iter::empty()));
        };
        let log = log.to_owned();
        Ok(Box::new((first..=last).map(move |seq| Ok(Record { seq, value: self.shared.get(&log, seq)? }))))
    }

    fn watch(&self, log: &str, from: Seq) -> Result<Watch> {
        self.shared.bounds(log)?;
        let shared = self.shared.clone();
        let log = log.to_owned();
        let fetch = Box::new(move |seq: Seq| {
            let (_, latest) = shared.bounds(&log)?;
            if seq > latest {
                return Ok(None);
            }
            Ok(Some(Record { seq, value: shared.get(&log, seq)? }))
        });
        let poll = self.shared.options.read_only.then_some(self.shared.options.read_only_poll);
        let source = NotifiedWatch { fetch, notifier: self.shared.notifier.clone(), poll };
        Ok(Watch::new(Box::new(source), from))
    }

    fn sync(&self) -> Result<()> {
        self.shared.sync_all()
    }
}
