//! `fsck`: check every frame of a namespace's journal and report damage
//! precisely; with `repair`, cut the journal at the first damage (keeping a
//! copy of what is cut in `quarantine/`).

use std::fs;
use std::path::{Path, PathBuf};

use crate::contract::LogInfo;
use crate::error::{IoContext, LogError, Result};
use crate::journal::scan::{list_segments, scan_segment, segment_path};
use crate::journal::state::State;
use crate::journal::{acquire_lock, JournalNamespace, JournalOptions};

/// Damage found by [`fsck`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    pub segment: PathBuf,
    pub offset: u64,
    pub reason: String,
    /// Nothing valid follows in this segment: a torn or damaged tail.
    pub at_tail: bool,
}

/// What [`fsck`] checked and found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FsckReport {
    pub segments: u64,
    pub frames: u64,
    pub records: u64,
    pub bytes: u64,
    /// Every problem, in journal order. Empty means the journal is sound.
    pub damage: Vec<Damage>,
    /// The logs as recovered from the frames before the first damage.
    pub logs: Vec<LogInfo>,
    /// With `repair`: the files the cut bytes were copied to.
    pub quarantined: Vec<PathBuf>,
    /// With `repair`: the journal was cut at the first damage and reopened
    /// cleanly. `damage` still lists what was found before the cut.
    pub repaired: bool,
}

impl FsckReport {
    /// No damage was found (see `repaired` for whether found damage was cut).
    #[must_use]
    pub fn is_clean(&self) -> bool {
        self.damage.is_empty()
    }
}

/// Check the namespace journal in `dir`. `progress(done_bytes, total_bytes)`
/// is called as segments are checked.
///
/// Without `repair` this only reads (no lock; a running writer's in-flight
/// frame may show as a tail). With `repair` it takes the writer lock, and if
/// there is damage, copies everything from the first damaged byte to the end
/// of the journal into `quarantine/`, cuts it off, and re-opens to confirm.
pub fn fsck(dir: &Path, repair: bool, progress: &mut dyn FnMut(u64, u64)) -> Result<FsckReport> {
    if !dir.is_dir() {
        let namespace = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        return Err(LogError::NamespaceNotFound { namespace });
    }
    let lock = if repair { Some(acquire_lock(dir)?) } else { None };
    let ids = list_segments(dir)?;
    let mut total = 0;
    for &id in &ids {
        total += fs::metadata(segment_path(dir, id)).context(|| format!("reading {}", dir.display()))?.len();
    }
    let mut report = FsckReport::default();
    let mut state = State { gap_records_max: total / 20 + 1, ..State::default() };
    let mut done = 0;
    let mut first_cut: Option<(usize, u64)> = None;
    for (i, &id) in ids.iter().enumerate() {
        let path = segment_path(dir, id);
        let bytes = fs::read(&path).context(|| format!("reading {}", path.display()))?;
        let file = fs::File::open(&path).context(|| format!("opening {}", path.display()))?;
        state.segments.insert(
            id,
            crate::journal::recovery::segment_state(path.clone(), std::sync::Arc::new(file)),
        );
        let scan = scan_segment(&mut state, id, &bytes, 0);
        report.segments += 1;
        report.frames += scan.frames;
        report.records += scan.records;
        report.bytes += bytes.len() as u64;
        if let Some(stop) = scan.stop {
            report.damage.push(Damage { segment: path.clone(), offset: stop.offset, reason: stop.reason, at_tail: stop.at_tail });
            first_cut.get_or_insert((i, stop.offset));
        }
        done += bytes.len() as u64;
        progress(done, total);
    }
    if let Err(reason) = state.check_complete() {
        report.damage.push(Damage { segment: dir.to_owned(), offset: 0, reason, at_tail: false });
    }
    report.logs = state.infos();
    drop(state);
    if let (Some(lock), Some((index, offset))) = (lock, first_cut) {
        report.quarantined = cut_from(dir, &ids[index..], offset)?;
        drop(lock);
        // Confirm the cut journal opens cleanly.
        let ns = JournalNamespace::open(dir, "fsck", JournalOptions::default())?;
        ns.close()?;
        report.repaired = true;
    }
    Ok(report)
}

/// Move everything from `offset` in segment `ids[0]` on, including all later
/// segments, into `quarantine/`.
fn cut_from(dir: &Path, ids: &[u32], offset: u64) -> Result<Vec<PathBuf>> {
    let quarantine = dir.join("quarantine");
    fs::create_dir_all(&quarantine).context(|| format!("creating {}", quarantine.display()))?;
    let mut saved = Vec::new();
    for (i, &id) in ids.iter().enumerate() {
        let path = segment_path(dir, id);
        let bytes = fs::read(&path).context(|| format!("reading {}", path.display()))?;
        let from = if i == 0 { usize::try_from(offset).expect("offset fits usize").min(bytes.len()) } else { 0 };
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("segment").to_owned();
        let target = quarantine.join(format!("{name}.{from}.cut"));
        fs::write(&target, &bytes[from..]).context(|| format!("writing {}", target.display()))?;
        saved.push(target);
        if i == 0 && from > 0 {
            let file = fs::OpenOptions::new().write(true).open(&path).context(|| format!("opening {}", path.display()))?;
            file.set_len(from as u64).context(|| format!("truncating {}", path.display()))?;
            file.sync_all().context(|| format!("syncing {}", path.display()))?;
        } else {
            fs::remove_file(&path).context(|| format!("removing {}", path.display()))?;
        }
    }
    Ok(saved)
}
