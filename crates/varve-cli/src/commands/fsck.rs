//! `varve fsck [--repair] [--all]`: check every frame of a namespace's journal
//! (see `varve_log::journal::fsck`), report each damage and every run of
//! lost records precisely, and with `--repair` salvage what is intact.
//!
//! Exit code 2 when damage or unrecorded losses were found and not repaired,
//! so scripts and monitoring can tell "damaged" from "could not check" (1).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::Serialize;
use varve_log::journal::{FsckReport, LOSSES_LOG};
use varve_log::{validate_name, JournalOptions, JournalStore, Store};

use super::{namespace_dir, Context};
use crate::output::{self, Unit};

/// Exit code for "damage found and left in place".
const EXIT_DAMAGED: u8 = 2;

pub fn run(ctx: &Context<'_>, repair: bool, all: bool) -> anyhow::Result<ExitCode> {
    // Opening the store read-only checks the data directory (a file is refused).
    let store = JournalStore::open(&ctx.data, JournalOptions { read_only: true, ..JournalOptions::default() })?;
    let namespaces = if all {
        store.list_namespaces()?
    } else {
        validate_name(&ctx.namespace, true)?;
        vec![ctx.namespace.clone()]
    };
    if namespaces.is_empty() {
        output::warn(&format!("no namespaces in {}: nothing to check", ctx.data.display()));
    }
    let mut damaged = false;
    for namespace in &namespaces {
        let dir = namespace_dir(&ctx.data, namespace);
        let bar = output::progress_bar(0, Unit::Bytes, &format!("checking {namespace}"), false);
        let report = varve_log::journal::fsck(&dir, repair, &mut |done, total| {
            bar.set_length(total);
            bar.set_position(done);
        })
        .map_err(|e| {
            let ns_ctx = ctx.embedded_namespace(namespace);
            super::write::explain_locked(
                &ns_ctx,
                e,
                "`fsck --repair` needs the namespace to itself (`fsck` without --repair runs beside it)",
            )
        })?;
        bar.finish_and_clear();
        damaged |= !report.is_clean() && !report.repaired;
        print(ctx, namespace, &dir, &report, repair)?;
    }
    Ok(if damaged { ExitCode::from(EXIT_DAMAGED) } else { ExitCode::SUCCESS })
}

fn print(ctx: &Context<'_>, namespace: &str, dir: &Path, report: &FsckReport, repair: bool) -> std::io::Result<()> {
    #[derive(Serialize)]
    struct DamageJson<'a> {
        segment: &'a Path,
        offset: u64,
        len: u64,
        reason: &'a str,
        /// An unfinished write at the end of the newest segment.
        at_tail: bool,
    }
    #[derive(Serialize)]
    struct LossJson<'a> {
        log: &'a str,
        first: u64,
        last: u64,
        segment: &'a Path,
        offset: Option<u64>,
        reason: &'a str,
        /// Recorded in `_losses` by a repair.
        recorded: bool,
    }
    #[derive(Serialize)]
    struct Report<'a> {
        namespace: &'a str,
        dir: &'a Path,
        segments: u64,
        frames: u64,
        records: u64,
        bytes: u64,
        logs: usize,
        clean: bool,
        damage: Vec<DamageJson<'a>>,
        losses: Vec<LossJson<'a>>,
        repaired: bool,
        quarantined: &'a [PathBuf],
        salvaged_records: u64,
    }
    let answer = Report {
        namespace,
        dir,
        segments: report.segments,
        frames: report.frames,
        records: report.records,
        bytes: report.bytes,
        logs: report.logs.len(),
        clean: report.is_clean(),
        damage: report
            .damage
            .iter()
            .map(|d| DamageJson {
                segment: &d.segment,
                offset: d.offset,
                len: d.len,
                reason: &d.reason,
                at_tail: d.at_tail,
            })
            .collect(),
        losses: report
            .losses
            .iter()
            .map(|l| LossJson {
                log: &l.log,
                first: l.first,
                last: l.last,
                segment: &l.segment,
                offset: l.offset,
                reason: &l.reason,
                recorded: l.acknowledged,
            })
            .collect(),
        repaired: report.repaired,
        quarantined: &report.quarantined,
        salvaged_records: report.salvaged_records,
    };
    ctx.out.answer(&answer, || human(namespace, dir, report, repair))
}

fn human(namespace: &str, dir: &Path, report: &FsckReport, repair: bool) -> String {
    let mut lines = vec![format!(
        "namespace {namespace} ({}): {}, {}, {}, {}, {}",
        dir.display(),
        count(report.segments, "segment"),
        count(report.frames, "frame"),
        count(report.records, "record"),
        count(report.bytes, "byte"),
        count(report.logs.len() as u64, "log"),
    )];
    for damage in &report.damage {
        let kind = if damage.at_tail { "unfinished write at the end" } else { "damaged" };
        lines.push(format!(
            "{kind}: {} bytes {}..{}: {}",
            damage.segment.display(),
            damage.offset,
            damage.offset + damage.len,
            damage.reason
        ));
    }
    for loss in &report.losses {
        let seqs = if loss.first == loss.last {
            format!("seq {}", loss.first)
        } else {
            format!("seqs {}..={}", loss.first, loss.last)
        };
        let place = match loss.offset {
            Some(offset) => format!("{} at byte offset {offset}", loss.segment.display()),
            None => loss.segment.display().to_string(),
        };
        let recorded = if loss.acknowledged { format!(" [recorded in {LOSSES_LOG}]") } else { String::new() };
        lines.push(format!("lost: log {} {seqs} ({}; {place}){recorded}", loss.log, loss.reason));
    }
    if !repair {
        if report.is_clean() {
            let known = if report.losses.is_empty() {
                String::new()
            } else {
                " (the losses above were recorded by a repair; nothing is left to salvage)".to_owned()
            };
            lines.push(format!("clean: every frame checks out{known}"));
        } else {
            let lost: u64 = report.losses.iter().filter(|l| !l.acknowledged).map(|l| l.last - l.first + 1).sum();
            let mut found = Vec::new();
            if !report.damage.is_empty() {
                found.push(count(report.damage.len() as u64, "damaged region"));
            }
            if lost > 0 {
                found.push(format!("{} lost", count(lost, "record")));
            }
            lines.push(format!(
                "damaged: {}; the other records read as usual. `varve fsck --repair` \
                 (with the namespace's writer stopped) salvages every intact record and records the losses",
                found.join(", "),
            ));
        }
    } else if report.repaired {
        if let Some(torn) = &report.torn_tail {
            lines.push(format!(
                "cut an unfinished write off {} at byte offset {} ({} bytes saved to {})",
                torn.segment.display(),
                torn.offset,
                torn.dropped_bytes,
                torn.saved_to.display()
            ));
        }
        if !report.quarantined.is_empty() {
            lines.push(format!(
                "salvaged {} out of {}; copies of them are kept in quarantine:",
                count(report.salvaged_records, "intact record"),
                count(report.quarantined.len() as u64, "damaged segment"),
            ));
            lines.extend(report.quarantined.iter().map(|path| format!("  {}", path.display())));
        }
        if !report.losses.is_empty() {
            let losses = if report.losses.len() == 1 { "loss" } else { "losses" };
            lines.push(format!("recorded the {losses} above in {LOSSES_LOG}; their seqs stay unused and read as lost"));
        }
        let nothing_done = report.torn_tail.is_none() && report.quarantined.is_empty() && report.losses.is_empty();
        lines.push(
            if nothing_done { "clean: nothing to repair" } else { "repaired: the namespace checks clean" }.to_owned(),
        );
    } else {
        lines.push("not repaired: the namespace still does not check clean after the repair; run `varve fsck` for what remains".to_owned());
    }
    lines.join("\n")
}

/// `1 frame`, `2 frames`.
fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}
