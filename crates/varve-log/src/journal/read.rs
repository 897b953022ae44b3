//! Reading records: where a seq lives, and reading it back with its checksum
//! checked. Read-only handles catch up with the writer when asked for
//! something they have not seen yet.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;

use crate::contract::{LogInfo, Seq};
use crate::error::{IoContext, LogError, LossCause, Result};
use crate::journal::format;
use crate::journal::format::ENTRY_HEADER_BYTES;
use crate::journal::scan::segment_path;
use crate::journal::state::Position;
use crate::journal::Shared;
use crate::rules;

impl Shared {
    /// Where `seq` of `log` is, with the file to read it from; `Lost` for a
    /// record that no intact frame holds.
    pub(super) fn locate(&self, log: &str, seq: Seq) -> Result<(u32, Position, Arc<File>)> {
        let state = self.read_state();
        let log_state = state.log_by_name(log).ok_or_else(|| self.not_found(log))?;
        rules::check_readable(log, seq, log_state.earliest(), log_state.latest())?;
        let position = log_state.position(seq).expect("readable seqs have positions");
        if position.lost_cause().is_some() {
            let run = log_state.lost_run_around(seq).expect("the position is lost");
            let cause = &state.loss_causes[run.cause];
            return Err(LogError::Lost {
                log: log.to_owned(),
                first: run.first.max(log_state.earliest()),
                last: run.last,
                cause: Box::new(cause.clone()),
            });
        }
        let segment = state.segments.get(&position.segment).expect("live positions point at kept segments");
        Ok((log_state.descriptor.id, position, segment.file.clone()))
    }

    pub(super) fn get(&self, log: &str, seq: Seq) -> Result<Bytes> {
        let located = match self.locate(log, seq) {
            Err(LogError::LogNotFound { .. } | LogError::SeqNotFound { .. }) if self.writer.is_none() => {
                self.refresh()?;
                self.locate(log, seq)?
            }
            other => other?,
        };
        let (log_id, position, file) = located;
        read_record(&file, || segment_path(&self.dir, position.segment), log, log_id, seq, position)
    }

    pub(super) fn log_info(&self, log: &str) -> Result<LogInfo> {
        if self.writer.is_none() {
            self.refresh()?;
        }
        Ok(self.read_state().log_by_name(log).ok_or_else(|| self.not_found(log))?.info())
    }

    /// `(earliest, latest)` of a log, without building a `LogInfo`.
    pub(super) fn bounds(&self, log: &str) -> Result<(Seq, Seq)> {
        if self.writer.is_none() {
            self.refresh()?;
        }
        let state = self.read_state();
        let log_state = state.log_by_name(log).ok_or_else(|| self.not_found(log))?;
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
    let payload = format::check_entry(&buf, log_id, seq).map_err(|reason| LogError::Lost {
        log: log.to_owned(),
        first: seq,
        last: seq,
        cause: Box::new(LossCause {
            segment: path(),
            offset: Some(u64::from(position.offset)),
            reason: format!("its bytes no longer check: {reason}"),
        }),
    })?;
    Ok(Bytes::from(buf).slice(payload))
}
