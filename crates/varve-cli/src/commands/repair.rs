//! `varve repair plan`: the dry run of a repair (Sans-Souci) — the repair
//! graph of a corrected record or a replaced handler, from the event logs
//! of every namespace in `--data`, printed (or drawn with `--dot`) without
//! changing anything. `varve repair run`: the repair itself, replaying the
//! manifest's external-command handlers (each with a socket of its own that
//! serves its reads pinned to what the original run saw).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context as _};
use varve_repair::{Correction, Inputs, NotReplayable, RepairPlan, Since};
use varve_runtime::command_context::{command_via_context, CommandSetup};
use varve_runtime::trace::RecordRef;
use varve_runtime::{HandlerFn, HandlerRun, Manifest};

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

fn correction(ctx: &Context<'_>, target: &Target<'_>) -> anyhow::Result<Correction> {
    Ok(match target {
        Target::Record(text) => Correction::Record(parse_record(ctx, text)?),
        Target::Handler { name, since_seq } => {
            Correction::Handler { handler: (*name).to_owned(), since: since_seq.map_or(Since::Start, Since::Seq) }
        }
    })
}

fn no_events(ctx: &Context<'_>) -> anyhow::Error {
    anyhow::anyhow!(
        "no events in {}: a repair follows what the runtime recorded, so run the application with `varve run` first",
        ctx.data.display()
    )
}

/// `varve repair plan (--record LOG:SEQ | --handler NAME [--since-seq N]) [--manifest FILE] [--dot FILE]`.
pub fn plan(ctx: &Context<'_>, target: &Target<'_>, manifest: Option<&Path>, dot: Option<&Path>) -> anyhow::Result<()> {
    let correction = correction(ctx, target)?;
    let not_replayable: HashSet<String> = match manifest {
        Some(path) => Manifest::load(path)?.handlers.into_iter().filter(|h| !h.replayable).map(|h| h.name).collect(),
        None => HashSet::new(),
    };
    let events = all_events(ctx)?;
    if events.is_empty() {
        return Err(no_events(ctx));
    }
    let plan = RepairPlan::build(&events, &[correction], &not_replayable);
    if let Some(path) = dot {
        std::fs::write(path, plan.to_dot()).with_context(|| format!("writing {}", path.display()))?;
    }
    ctx.out.answer(&plan, || plan.to_text().trim_end().to_owned())?;
    Ok(())
}

/// `varve repair run (--record LOG:SEQ (--value TEXT | --value-file FILE) | --handler NAME [--since-seq N])
/// --manifest FILE [--not-replayable refuse|run|skip]`: the repair, offline (no `varve run` may serve the
/// namespace: the writer lock is taken first).
pub fn run(
    ctx: &Context<'_>,
    target: &Target<'_>,
    value: Option<Vec<u8>>,
    manifest_path: &Path,
    choice: NotReplayable,
) -> anyhow::Result<()> {
    if ctx.remote.is_some() || ctx.nats.is_some() {
        bail!("varve repair run works on the embedded journal (--data); a repair renames logs, which --store does not offer here");
    }
    let correction = correction(ctx, target)?;
    let manifest = Manifest::load(manifest_path)?;
    if manifest.namespace != ctx.namespace {
        bail!(
            "{} runs namespace {:?}, not {:?}: pass --ns {}",
            manifest_path.display(),
            manifest.namespace,
            ctx.namespace,
            manifest.namespace
        );
    }
    let ns = ctx.writer("a repair rewrites the namespace's logs: stop `varve run` first, then repair")?;
    let mut values = HashMap::new();
    if let Correction::Record(record) = &correction {
        ns.get(&record.log, record.seq)
            .with_context(|| format!("the record to correct, {}:{}", record.log, record.seq))?;
        let value = value.context("give the corrected value with --value TEXT or --value-file FILE")?;
        values.insert(record.clone(), value);
    } else if value.is_some() {
        bail!("--value and --value-file go with --record; --handler replays the handler's new code");
    }
    let events = all_events(ctx)?;
    if events.is_empty() {
        return Err(no_events(ctx));
    }
    let not_replayable: HashSet<String> =
        manifest.handlers.iter().filter(|h| !h.replayable).map(|h| h.name.clone()).collect();
    let plan = RepairPlan::build(&events, &[correction], &not_replayable);
    let data_dir = std::path::absolute(&ctx.data).unwrap_or_else(|_| ctx.data.clone());
    let mut handlers: HashMap<String, HandlerFn> = HashMap::new();
    for h in &manifest.handlers {
        match &h.run {
            HandlerRun::Command(argv) => {
                let setup = CommandSetup {
                    argv: argv.clone(),
                    timeout: h.retry.timeout,
                    namespace: ctx.namespace.clone(),
                    data_dir: Some(data_dir.clone()),
                    socket_dir: std::env::temp_dir(),
                };
                handlers.insert(h.name.clone(), command_via_context(setup));
            }
            HandlerRun::Builtin(builtin) => {
                if plan.reruns.iter().any(|r| r.handler == h.name) {
                    bail!(
                        "the repair replays handler {:?}, a Rust builtin ({builtin:?}) of the program that hosts the \
                         app: repair from that program (varve_repair::execute) or from Python; the CLI replays \
                         `command` handlers",
                        h.name
                    );
                }
            }
        }
    }
    let namespaces = HashMap::from([(ctx.namespace.clone(), Arc::clone(&ns))]);
    let inputs = Inputs {
        events: &events,
        namespaces: &namespaces,
        handlers: &handlers,
        values: &values,
        not_replayable: choice,
    };
    let outcome = varve_repair::execute(&plan, &inputs)?;
    ctx.out.answer(&outcome, || {
        let swapped: Vec<String> = outcome
            .swapped
            .iter()
            .flat_map(|(ns, logs)| logs.iter().map(move |(log, generation)| format!("{ns}/{log} (old: {generation})")))
            .collect();
        let mut text = format!(
            "repaired: {} handler run(s) replayed, {} record(s) written to shadows, {} changed\nswapped atomically: {}",
            outcome.replayed,
            outcome.written,
            outcome.changed,
            if swapped.is_empty() { "nothing".to_owned() } else { swapped.join(", ") }
        );
        if let Some(error) = &outcome.event_error {
            text = format!("{text}\nwarning: the repair is done, but its REPAIR event was not written: {error}");
        }
        text
    })?;
    Ok(())
}
