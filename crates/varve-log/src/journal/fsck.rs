//! `fsck`: check every frame of a namespace's journal and report damage and
//! lost records precisely; with `repair`, salvage what is intact and record
//! what is lost.
//!
//! **What a repair does.** It opens the namespace as its writer (so a torn
//! tail is cut, as on every writer open), then for each damaged segment:
//! copies it whole to `quarantine/`, copies its intact live records to the
//! head of the journal (`Relocate` frames, as the compactor does), and
//! deletes it. Every run of lost records — in damaged bytes, or in a segment
//! that is missing — is then recorded in the `_losses` log, one record per
//! run, so later checks know the loss and that nothing is left to salvage.
//! Lost seqs are never reused: reading one is [`LogError::Lost`]. The
//! namespace then opens cleanly and takes appends.
//!
//! `_losses` records are text: `log_id TAB first TAB last TAB log TAB why`.

use std::fs;
use std::path::{Path, PathBuf};

use crate::contract::{LogConfig, LogInfo, Seq};
use crate::error::{IoContext, LogError, Result};
use crate::journal::published::PublishedEnd;
use crate::journal::read::read_record;
use crate::journal::recovery::recover_as_reader;
use crate::journal::state::{LossCause, State};
use crate::journal::{Damage, JournalNamespace, JournalOptions, Loss, Shared, TornTail};

/// The system log where repairs record lost records.
pub const LOSSES_LOG: &str = "_losses";

/// What [`fsck`] checked and found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FsckReport {
    /// Segment files read.
    pub segments: u64,
    /// Intact frames read (damaged ones are in `damage`).
    pub frames: u64,
    /// Record entries applied from the frames read, appends and relocated copies alike (not distinct records).
    pub records: u64,
    /// Segment bytes scanned: each segment up to the end of its last frame, intact or damaged.
    pub bytes: u64,
    /// Every damaged byte range, in journal order (before any repair).
    pub damage: Vec<Damage>,
    /// Every run of lost records; after a repair, all are `acknowledged`.
    pub losses: Vec<Loss>,
    /// The logs as recovered.
    pub logs: Vec<LogInfo>,
    /// With `repair`: a torn tail the repair's writer open cut off.
    pub torn_tail: Option<TornTail>,
    /// With `repair`: the copies of damaged segments, before they were removed.
    pub quarantined: Vec<PathBuf>,
    /// With `repair`: intact records copied out of damaged segments.
    pub salvaged_records: u64,
    /// With `repair`: the namespace checked clean afterwards (or before: then
    /// there was nothing to repair, and no lock was needed).
    pub repaired: bool,
}

impl FsckReport {
    /// No damage, and no loss that a repair has not recorded.
    #[must_use]
    pub fn is_clean(&self) -> bool {
        self.damage.is_empty() && self.losses.iter().all(|loss| loss.acknowledged)
    }
}

/// Check the namespace journal in `dir`. `progress(done_bytes, total_bytes)`
/// is called as segments are checked.
///
/// Without `repair` this only reads, and needs no lock: it checks what a
/// running writer has published. With `repair`, if the check found anything,
/// it takes the writer lock (`Locked` while the namespace's writer runs:
/// stop it first) and repairs as the module docs say.
pub fn fsck(dir: &Path, repair: bool, progress: &mut dyn FnMut(u64, u64)) -> Result<FsckReport> {
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if dir.exists() && !dir.is_dir() {
        return Err(LogError::InvalidArgument {
            reason: format!("{} is a file, not a namespace directory", dir.display()),
        });
    }
    if !dir.is_dir() {
        return Err(LogError::NamespaceNotFound { namespace: name });
    }
    let mut report = check(dir, progress)?;
    if repair && report.is_clean() {
        report.repaired = true;
    } else if repair {
        // The repair needs the damage a replay finds, not a checkpoint's
        // state. Only without a writer: a running one keeps its checkpoint
        // (the open below would fail on its lock anyway).
        let lock = super::lock::acquire_lock(dir)?;
        super::checkpoint::discard(dir, &super::io::FileSystem)?;
        drop(lock);
        let ns = JournalNamespace::open(dir, &name, JournalOptions::default())?;
        let outcome = ns.shared.repair()?;
        report.torn_tail.clone_from(&ns.recovery_report().torn_tail);
        report.quarantined = outcome.quarantined;
        report.salvaged_records = outcome.salvaged_records;
        ns.close()?;
        let after = check(dir, &mut |_, _| {})?;
        report.repaired = after.is_clean();
        report.losses = after.losses;
        report.logs = after.logs;
    }
    Ok(report)
}

/// Read the namespace as a reader would, and report.
fn check(dir: &Path, progress: &mut dyn FnMut(u64, u64)) -> Result<FsckReport> {
    let end = PublishedEnd::for_reader(dir)?;
    let (state, recovery, _) = recover_as_reader(dir, end.as_ref(), progress)?;
    Ok(FsckReport {
        segments: recovery.segments,
        frames: recovery.frames,
        records: recovery.records,
        bytes: recovery.bytes,
        damage: recovery.damage,
        losses: losses_of(&state),
        logs: state.infos(),
        ..FsckReport::default()
    })
}

/// What a repair did.
struct Repaired {
    quarantined: Vec<PathBuf>,
    salvaged_records: u64,
}

impl Shared {
    /// Every run of lost records, each marked whether `_losses` records it.
    pub(super) fn losses(&self) -> Vec<Loss> {
        losses_of(&self.read_state())
    }

    /// Salvage the damaged segments and record every loss (see the module docs).
    fn repair(&self) -> Result<Repaired> {
        let mut writer = self.writer("repair")?;
        let damaged: Vec<u32> =
            self.read_state().segments.iter().filter(|(_, s)| s.damaged).map(|(&id, _)| id).collect();
        if damaged.contains(&writer.active_id) {
            self.roll(&mut writer)?;
        }
        let quarantine = self.dir.join("quarantine");
        let mut repaired = Repaired { quarantined: Vec::new(), salvaged_records: 0 };
        for id in damaged {
            let path = crate::journal::scan::segment_path(&self.dir, id);
            fs::create_dir_all(&quarantine).context(|| format!("creating {}", quarantine.display()))?;
            let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let saved_to = quarantine.join(format!("{file_name}.damaged"));
            fs::copy(&path, &saved_to).context(|| format!("copying {} to {}", path.display(), saved_to.display()))?;
            repaired.quarantined.push(saved_to);
            let live_before = self.read_state().segments.get(&id).map_or(0, |s| s.live_records);
            self.relocate_live_records(&mut writer, id)?;
            let mut state = self.write_state();
            // Records still here did not check when copied: they are lost too.
            let cause = LossCause {
                segment: path.clone(),
                offset: None,
                reason: "its bytes no longer check (found by the repair)".into(),
            };
            let left = lose_records_in(&mut state, id, cause);
            repaired.salvaged_records += live_before - left;
            drop(state);
            self.delete_segment(&mut writer, id)?;
        }
        drop(writer);
        self.record_losses()?;
        self.sync_all()?;
        Ok(repaired)
    }

    /// Append every loss `_losses` does not record yet.
    fn record_losses(&self) -> Result<()> {
        let unrecorded: Vec<(u32, Loss)> = {
            let state = self.read_state();
            let recorded = recorded_losses(&state);
            state
                .lost_runs()
                .into_iter()
                .filter(|run| !covers(&recorded, run.log_id, run.first, run.last))
                .map(|run| (run.log_id, loss_of(&state, &run)))
                .collect()
        };
        if unrecorded.is_empty() {
            return Ok(());
        }
        self.create_log(LOSSES_LOG, LogConfig::unbounded().system())?;
        let lines: Vec<String> = unrecorded
            .iter()
            .map(|(log_id, loss)| {
                let place = match loss.offset {
                    Some(offset) => format!("{} at byte offset {offset}", loss.segment.display()),
                    None => loss.segment.display().to_string(),
                };
                format!("{log_id}\t{}\t{}\t{}\t{}; {place}", loss.first, loss.last, loss.log, loss.reason)
            })
            .collect();
        let batch: Vec<(&str, &[u8])> = lines.iter().map(|line| (LOSSES_LOG, line.as_bytes())).collect();
        for chunk in batch.chunks(self.options.limits.batch_records_max.max(1)) {
            self.append(chunk, crate::rules::Expect::Nothing)?;
        }
        Ok(())
    }
}

/// Make every live record in segment `id` lost (for `cause`); returns how many.
fn lose_records_in(state: &mut State, id: u32, cause: LossCause) -> u64 {
    let live = state.segments.get(&id).map_or(0, |s| s.live_records);
    if live == 0 {
        return 0;
    }
    let cause = state.add_loss_cause(cause);
    let targets: Vec<(u32, Seq)> = state
        .logs
        .values()
        .flat_map(|log| {
            let log_id = log.descriptor.id;
            let seqs: Vec<Seq> = log.entries().filter(|(_, p)| p.segment == id).map(|(seq, _)| seq).collect();
            seqs.into_iter().map(move |seq| (log_id, seq))
        })
        .collect();
    for (log_id, seq) in &targets {
        state
            .apply_relocate(*log_id, *seq, crate::journal::state::Position::lost(cause))
            .expect("the seq was just found live");
    }
    targets.len() as u64
}

/// Every run of lost records in `state`, marked against `_losses`.
fn losses_of(state: &State) -> Vec<Loss> {
    let recorded = recorded_losses(state);
    state
        .lost_runs()
        .into_iter()
        .map(|run| Loss { acknowledged: covers(&recorded, run.log_id, run.first, run.last), ..loss_of(state, &run) })
        .collect()
}

fn loss_of(state: &State, run: &crate::journal::state::LostRun) -> Loss {
    let log = state.logs.get(run.log_id).expect("a lost run's log exists");
    let cause = &state.loss_causes[run.cause];
    Loss {
        log: log.descriptor.name.clone(),
        first: run.first.max(log.earliest()),
        last: run.last,
        segment: cause.segment.clone(),
        offset: cause.offset,
        reason: cause.reason.clone(),
        acknowledged: false,
    }
}

fn covers(recorded: &[(u32, Seq, Seq)], log_id: u32, first: Seq, last: Seq) -> bool {
    recorded.iter().any(|&(id, from, to)| id == log_id && from <= first && last <= to)
}

/// The `(log id, first, last)` of every loss `_losses` records. Records of
/// `_losses` that are themselves lost or malformed are skipped.
fn recorded_losses(state: &State) -> Vec<(u32, Seq, Seq)> {
    let Some(log) = state.log_by_name(LOSSES_LOG) else { return Vec::new() };
    let mut recorded = Vec::new();
    // By its positions, not its seqs: a hole may span any number of seqs.
    for (seq, position) in log.entries().filter(|&(seq, _)| seq >= log.earliest()) {
        let Some(segment) = state.segments.get(&position.segment) else { continue };
        let Ok(value) =
            read_record(&segment.file, || segment.path.clone(), LOSSES_LOG, log.descriptor.id, seq, position)
        else {
            continue;
        };
        let text = String::from_utf8_lossy(&value);
        let mut fields = text.split('\t');
        let mut number = || fields.next().and_then(|f| f.parse::<u64>().ok());
        if let (Some(id), Some(first), Some(last)) = (number(), number(), number()) {
            if let Ok(id) = u32::try_from(id) {
                recorded.push((id, first, last));
            }
        }
    }
    recorded
}
