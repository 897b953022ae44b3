//! Reading records: where a seq lives, and reading it back with its checksum
//! checked. Read-only handles catch up with the writer when asked for
//! something they have not seen yet.

use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use crate::contract::{LogInfo, Seq};
use crate::error::{IoContext, LogError, LossCause, Result};
use crate::journal::format;
use crate::journal::format::ENTRY_HEADER_BYTES;
use crate::journal::mapped::ReadMap;
use crate::journal::scan::segment_path;
use crate::journal::state::{Position, State};
use crate::journal::Shared;
use crate::rules;

/// Where to read a located record from.
pub(super) struct Located {
    log_id: u32,
    position: Position,
    file: Arc<File>,
    read_map: Option<Arc<ReadMap>>,
}

impl Located {
    fn read(&self, dir: &Path, log: &str, seq: Seq) -> Result<Bytes> {
        let path = || segment_path(dir, self.position.segment);
        match self
            .read_map
            .as_ref()
            .and_then(|map| map.bytes(u64::from(self.position.offset), self.position.entry_bytes()))
        {
            Some(bytes) => {
                let payload = check_record(bytes, path, log, self.log_id, seq, self.position)?;
                Ok(Bytes::copy_from_slice(&bytes[payload]))
            }
            None => read_record(&self.file, path, log, self.log_id, seq, self.position),
        }
    }
}

/// Most records a scan locates under one hold of the state lock.
const SCAN_LOCATE_BATCH: usize = 256;

/// A log as a read names it: by its name now, or by its id, as scans and
/// watches do once opened, so that they follow the log across renames.
#[derive(Clone, Copy, Debug)]
pub(super) enum LogRef<'a> {
    Name(&'a str),
    /// The log's id, and the name it was opened by (for `LogNotFound` once deleted).
    Id(u32, &'a str),
}

impl<'a> LogRef<'a> {
    fn find(self, state: &State) -> Option<crate::journal::catalog::LogView<'_>> {
        match self {
            LogRef::Name(name) => state.log_by_name(name),
            LogRef::Id(id, _) => state.logs.get(id),
        }
    }

    /// The name the caller knows the log by.
    fn name(self) -> &'a str {
        match self {
            LogRef::Name(name) | LogRef::Id(_, name) => name,
        }
    }
}

impl Shared {
    /// Where `seq` of `log` is, with the file to read it from; `Lost` for a
    /// record that no intact frame holds.
    pub(super) fn locate(&self, log: LogRef<'_>, seq: Seq) -> Result<Located> {
        let state = self.read_state();
        let log_state = log.find(&state).ok_or_else(|| self.not_found(log.name()))?;
        let name = &log_state.descriptor.name;
        rules::check_readable(name, seq, log_state.earliest(), log_state.latest())?;
        let position = log_state.position(seq).expect("readable seqs have positions");
        if position.lost_cause().is_some() {
            let run = log_state.lost_run_around(seq).expect("the position is lost");
            let cause = &state.loss_causes[run.cause];
            return Err(LogError::Lost {
                log: name.clone(),
                first: run.first.max(log_state.earliest()),
                last: run.last,
                cause: Box::new(cause.clone()),
            });
        }
        located(&state, log_state.descriptor.id, position)
            .ok_or_else(|| segment_gone(&self.dir, name, seq, position.segment))
    }

    /// Where seqs `first..=last` of `log` are, up to [`SCAN_LOCATE_BATCH`]
    /// of them, under one hold of the state lock: the run of intact,
    /// readable records from `first` on. Empty when `first` itself is not
    /// readable (the caller's `get` then reports why).
    pub(super) fn locate_run(&self, log: LogRef<'_>, first: Seq, last: Seq) -> Vec<Located> {
        let state = self.read_state();
        let Some(log_state) = log.find(&state) else { return Vec::new() };
        if first < log_state.earliest() {
            return Vec::new();
        }
        let last = last.min(log_state.latest()).min(first.saturating_add(SCAN_LOCATE_BATCH as u64 - 1));
        (first..=last)
            .map_while(|seq| log_state.position(seq).filter(|p| p.lost_cause().is_none()))
            .map_while(|position| located(&state, log_state.descriptor.id, position))
            .collect()
    }

    pub(super) fn get(&self, log: LogRef<'_>, seq: Seq) -> Result<Bytes> {
        let located = match self.locate(log, seq) {
            // A read-only handle that has not seen the log or seq yet, or
            // whose state names a segment it has not opened, catches up.
            // Or a record the writer moved out of a segment it then deleted,
            // if the last refresh stopped (`FOLLOW_ROUNDS_MAX`) before the
            // frames that moved it: `Lost` until it reads them.
            Err(
                LogError::LogNotFound { .. }
                | LogError::SeqNotFound { .. }
                | LogError::Io { .. }
                | LogError::Lost { .. },
            ) if self.writer.is_none() => {
                self.refresh()?;
                self.locate(log, seq)?
            }
            other => other?,
        };
        located.read(&self.dir, log.name(), seq)
    }

    /// The id of the log named `log` now (read-only handles first catch up).
    pub(super) fn log_id(&self, log: &str) -> Result<u32> {
        if self.writer.is_none() {
            self.refresh()?;
        }
        Ok(self.read_state().log_by_name(log).ok_or_else(|| self.not_found(log))?.descriptor.id)
    }

    /// Read a record [`Shared::locate_run`] found.
    pub(super) fn read_located(&self, located: &Located, log: &str, seq: Seq) -> Result<Bytes> {
        located.read(&self.dir, log, seq)
    }

    pub(super) fn log_info(&self, log: &str) -> Result<LogInfo> {
        if self.writer.is_none() {
            self.refresh()?;
        }
        Ok(self.read_state().log_by_name(log).ok_or_else(|| self.not_found(log))?.info())
    }

    /// `(earliest, latest)` of a log, without building a `LogInfo`.
    pub(super) fn bounds(&self, log: LogRef<'_>) -> Result<(Seq, Seq)> {
        if self.writer.is_none() {
            self.refresh()?;
        }
        let state = self.read_state();
        let log_state = log.find(&state).ok_or_else(|| self.not_found(log.name()))?;
        Ok((log_state.earliest(), log_state.latest()))
    }
}

/// Read `len` bytes at `offset`, or fewer if the file ends first.
pub(crate) fn read_up_to(file: &File, offset: u64, len: u64) -> std::io::Result<Vec<u8>> {
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
/// Bytes that no longer check make the record `Lost`, naming where.
pub(crate) fn read_record(
    file: &File,
    path: impl Fn() -> PathBuf,
    log: &str,
    log_id: u32,
    seq: Seq,
    position: Position,
) -> Result<Bytes> {
    let mut buf = vec![0; ENTRY_HEADER_BYTES + position.len as usize];
    file.read_exact_at(&mut buf, u64::from(position.offset)).context(|| format!("reading {}", path().display()))?;
    let payload = check_record(&buf, path, log, log_id, seq, position)?;
    Ok(Bytes::from(buf).slice(payload))
}

/// Check one record's bytes (entry header and payload); returns where the
/// payload is. Bytes that no longer check make the record `Lost`, naming where.
fn check_record(
    bytes: &[u8],
    path: impl Fn() -> PathBuf,
    log: &str,
    log_id: u32,
    seq: Seq,
    position: Position,
) -> Result<Range<usize>> {
    format::check_entry(bytes, log_id, seq).map_err(|reason| LogError::Lost {
        log: log.to_owned(),
        first: seq,
        last: seq,
        cause: Box::new(LossCause {
            segment: path(),
            offset: Some(u64::from(position.offset)),
            reason: format!("its bytes no longer check: {reason}"),
        }),
    })
}

/// Where to read `position` from; `None` if its segment is not among the
/// state's. That breaks an invariant (live positions point at kept
/// segments: the writer publishes a segment's `Relocate` frames before it
/// deletes it, and a follower lists segments before it loads the end it
/// reads to), so it is reported, not trusted.
fn located(state: &State, log_id: u32, position: Position) -> Option<Located> {
    let segment = state.segments.get(&position.segment)?;
    Some(Located { log_id, position, file: segment.file.clone(), read_map: segment.read_map.clone() })
}

/// The error for a position whose segment [`located`] did not find.
fn segment_gone(dir: &Path, log: &str, seq: Seq, segment: u32) -> LogError {
    LogError::Io {
        context: format!(
            "reading seq {seq} of log {log:?}: its segment {} is not open; the index is out of step with the \
             files (reopen the namespace, and run `varve fsck` if this repeats)",
            segment_path(dir, segment).display()
        ),
        source: std::io::Error::from(std::io::ErrorKind::NotFound),
    }
}
