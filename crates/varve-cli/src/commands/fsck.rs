//! `varve fsck [--repair] [--all]`: check every frame of a namespace's journal
//! (see `varve_log::journal::fsck`) and report each damage precisely.
//!
//! Exit code 2 when damage was found and not repaired, so scripts and
//! monitoring can tell "damaged" from "could not check" (1).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::Serialize;
use varve_log::journal::{Damage, FsckReport};
use varve_log::{validate_name, JournalOptions, JournalStore, Store};

use super::{namespace_dir, Context};
use crate::output::{self, Unit};

/// Exit code for "damage found and left in place".
const EXIT_DAMAGED: u8 = 2;

pub fn run(ctx: &Context<'_>, repair: bool, all: bool) -> anyhow::Result<ExitCode> {
    let namespaces = if all {
        let options = JournalOptions { read_only: true, ..JournalOptions::default() };
        JournalStore::open(&ctx.data, options)?.list_namespaces()?
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
            let ns_ctx = Context { data: ctx.data.clone(), namespace: namespace.clone(), out: ctx.out };
            super::write::explain_locked(
                &ns_ctx,
                e,
                "`fsck --repair` needs the namespace to itself (`fsck` without --repair runs beside it)",
            )
        })?;
        bar.finish_and_clear();
        // The library cuts at the first damage, so everything after it goes
        // too, and it re-opens the journal to confirm before returning.
        let repaired = report.repaired;
        damaged |= !report.is_clean() && !repaired;
        print(ctx, namespace, &dir, &report, repaired)?;
    }
    Ok(if damaged { ExitCode::from(EXIT_DAMAGED) } else { ExitCode::SUCCESS })
}

fn print(ctx: &Context<'_>, namespace: &str, dir: &Path, report: &FsckReport, repaired: bool) -> std::io::Result<()> {
    #[derive(Serialize)]
    struct DamageJson<'a> {
        segment: &'a Path,
        offset: u64,
        reason: &'a str,
        at_tail: bool,
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
        repaired: bool,
        quarantined: &'a [PathBuf],
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
            .map(|d| DamageJson { segment: &d.segment, offset: d.offset, reason: &d.reason, at_tail: d.at_tail })
            .collect(),
        repaired,
        quarantined: &report.quarantined,
    };
    ctx.out.answer(&answer, || human(namespace, dir, report, repaired))
}

fn human(namespace: &str, dir: &Path, report: &FsckReport, repaired: bool) -> String {
    let mut lines = vec![format!(
        "namespace {namespace} ({}): {}, {}, {}, {}, {}",
        dir.display(),
        count(report.segments, "segment"),
        count(report.frames, "frame"),
        count(report.records, "record"),
        count(report.bytes, "byte"),
        count(report.logs.len() as u64, "log"),
    )];
    lines.extend(report.damage.iter().map(damage_line));
    if report.is_clean() {
        lines.push("clean: every frame checks out".to_owned());
    } else if repaired {
        lines.push("repaired: the journal was cut at the first damage; the cut bytes were saved to:".to_owned());
        lines.extend(report.quarantined.iter().map(|path| format!("  {}", path.display())));
    } else {
        lines.push(format!(
            "damaged: {} found; `varve fsck --repair` cuts the journal at the first damage (keeping a copy of what it removes)",
            count(report.damage.len() as u64, "problem")
        ));
    }
    lines.join("\n")
}

fn damage_line(damage: &Damage) -> String {
    let place = if damage.at_tail {
        "torn tail: nothing valid follows in this segment"
    } else {
        "not a tail: valid data follows, or the journal is inconsistent"
    };
    format!("damage: {} at byte offset {}: {} [{place}]", damage.segment.display(), damage.offset, damage.reason)
}

/// `1 frame`, `2 frames`.
fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}
