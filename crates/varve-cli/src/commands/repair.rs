//! `varve repair plan`: the dry run of a repair (Sans-Souci) — the repair
//! graph of a corrected record or a replaced handler, from the event logs
//! of every namespace in `--data`, printed (or drawn with `--dot`) without
//! changing anything.

use std::collections::HashSet;
use std::path::Path;

use anyhow::{bail, Context as _};
use varve_repair::{Correction, RepairPlan, Since};
use varve_runtime::trace::RecordRef;
use varve_runtime::Manifest;

use super::runtime::all_events;
use super::Context;

/// What `varve repair plan` corrects.
pub enum Target<'a> {
    /// `--record LOG:SEQ` (in `--ns`).
    Record(&'a str),
    /// `--handler NAME [--since-seq N]`.
    Handler { name: &'a str, since_seq: Option<u64> },
}

fn parse_record(ctx: &Context<'_>, text: &str) -> anyhow::Result<RecordRef> {
    let (log, seq) =
        text.rsplit_once(':').with_context(|| format!("--record {text:?}: expected LOG:SEQ, e.g. readings:12"))?;
    let seq: u64 = seq.parse().with_context(|| format!("--record {text:?}: {seq:?} is not a seq (a number from 1)"))?;
    if seq == 0 {
        bail!("--record {text:?}: seqs start at 1");
    }
    varve_log::validate_name(log, false).with_context(|| format!("--record {text:?}"))?;
    Ok(RecordRef { namespace: ctx.namespace.clone(), log: log.to_owned(), seq })
}

/// `varve repair plan (--record LOG:SEQ | --handler NAME [--since-seq N]) [--manifest FILE] [--dot FILE]`.
pub fn plan(ctx: &Context<'_>, target: &Target<'_>, manifest: Option<&Path>, dot: Option<&Path>) -> anyhow::Result<()> {
    let correction = match target {
        Target::Record(text) => Correction::Record(parse_record(ctx, text)?),
        Target::Handler { name, since_seq } => {
            Correction::Handler { handler: (*name).to_owned(), since: since_seq.map_or(Since::Start, Since::Seq) }
        }
    };
    let not_replayable: HashSet<String> = match manifest {
        Some(path) => Manifest::load(path)?.handlers.into_iter().filter(|h| !h.replayable).map(|h| h.name).collect(),
        None => HashSet::new(),
    };
    let events = all_events(ctx)?;
    if events.is_empty() {
        bail!(
            "no events in {}: a repair follows what the runtime recorded, so run the application with `varve run` first",
            ctx.data.display()
        );
    }
    let plan = RepairPlan::build(&events, &[correction], &not_replayable);
    if let Some(path) = dot {
        std::fs::write(path, plan.to_dot()).with_context(|| format!("writing {}", path.display()))?;
    }
    ctx.out.answer(&plan, || plan.to_text().trim_end().to_owned())?;
    Ok(())
}
