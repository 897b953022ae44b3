//! `varve repair plan`: the dry run of a repair (Sans-Souci) — the repair
//! graph of a corrected record or a replaced handler, from the event logs
//! of every namespace in `--data`, printed (or drawn with `--dot`) without
//! changing anything. `varve repair run`: the repair itself, replaying the
//! manifest's external-command handlers (each with a socket of its own that
//! serves its reads pinned to what the original run saw) — offline, or,
//! when `varve run` serves the namespace, by that process while the
//! application runs (the `repair` operation it adds to its socket:
//! [`online_op`]).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context as _};
use serde::{Deserialize, Serialize};
use varve_log::Namespace;
use varve_repair::{Correction, Inputs, NotReplayable, Online, RepairError, RepairPlan, Resumed, Since};
use varve_runtime::command_context::{command_via_context, CommandSetup};
use varve_runtime::socket::{self, CallError, Request, SocketOp};
use varve_runtime::trace::RecordRef;
use varve_runtime::{Builtins, HandlerFn, HandlerRun, Manifest, RuntimeHandle, StoredEvent};

use super::runtime::data_namespaces;
use super::{write, Context};

/// What `varve repair plan` corrects.
pub enum Target<'a> {
    /// `--record LOG:SEQ` (in `--ns`).
    Record(&'a str),
    /// `--handler NAME [--since-seq N]`.
    Handler { name: &'a str, since_seq: Option<u64> },
}

fn parse_record(ctx: &Context<'_>, text: &str) -> anyhow::Result<RecordRef> {
    parse_record_in(&ctx.namespace, text)
}

fn parse_record_in(namespace: &str, text: &str) -> anyhow::Result<RecordRef> {
    let (log, seq) =
        text.rsplit_once(':').with_context(|| format!("--record {text:?}: expected LOG:SEQ, e.g. readings:12"))?;
    let seq: u64 = seq.parse().with_context(|| format!("--record {text:?}: {seq:?} is not a seq (a number from 1)"))?;
    if seq == 0 {
        bail!("--record {text:?}: seqs start at 1");
    }
    varve_log::validate_name(log, false).with_context(|| format!("--record {text:?}"))?;
    Ok(RecordRef { namespace: namespace.to_owned(), log: log.to_owned(), seq })
}

fn correction(ctx: &Context<'_>, target: &Target<'_>) -> anyhow::Result<Correction> {
    Ok(match target {
        Target::Record(text) => Correction::Record(parse_record(ctx, text)?),
        Target::Handler { name, since_seq } => {
            Correction::Handler { handler: (*name).to_owned(), since: since_seq.map_or(Since::Start, Since::Seq) }
        }
    })
}

/// The events of every namespace in the data directory that a repair of
/// `correction` needs (read-only; see `varve_repair::events_needed`).
fn needed_events(ctx: &Context<'_>, correction: &Correction) -> anyhow::Result<Vec<StoredEvent>> {
    Ok(varve_repair::events_needed(std::slice::from_ref(correction), &data_namespaces(ctx)?)?)
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
    let events = needed_events(ctx, &correction)?;
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
    if ctx.nats.is_none() && write::runtime_serves(ctx) {
        return run_online(ctx, target, value, choice);
    }
    let ns = ctx.writer("a repair rewrites the namespace's logs: stop `varve run` first, then repair")?;
    let resumed = resume_interrupted(ctx, &ns)?;
    let mut values = HashMap::new();
    if let Correction::Record(record) = &correction {
        ns.get(&record.log, record.seq)
            .with_context(|| format!("the record to correct, {}:{}", record.log, record.seq))?;
        let value = value.context("give the corrected value with --value TEXT or --value-file FILE")?;
        values.insert(record.clone(), value);
    } else if value.is_some() {
        bail!("--value and --value-file go with --record; --handler replays the handler's new code");
    }
    if let Some(same) =
        resumed.iter().find(|r| !r.finished.is_empty() && r.is_request(std::slice::from_ref(&correction), &values))
    {
        // Asked again after a crash: finishing it was the repair.
        let answer = Resumes { resumed: resumed.clone() };
        ctx.out
            .answer(&answer, || format!("{}\nthat was this repair, interrupted: nothing more to do", describe(same)))?;
        return Ok(());
    }
    let events = needed_events(ctx, &correction)?;
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
    print_outcome(ctx, &resumed, &outcome)
}

/// `varve repair run`'s answer, after the interrupted repairs it finished first.
fn print_outcome(ctx: &Context<'_>, resumed: &[Resumed], outcome: &varve_repair::RepairOutcome) -> anyhow::Result<()> {
    let answer = RunAnswer { resumed, outcome };
    ctx.out.answer(&answer, || {
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
        for r in resumed {
            text = format!("{}\n{text}", describe(r));
        }
        text
    })?;
    Ok(())
}

/// `varve repair run`'s answer: the repair, after the interrupted ones it finished first.
#[derive(Serialize)]
struct RunAnswer<'a> {
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    resumed: &'a [Resumed],
    #[serde(flatten)]
    outcome: &'a varve_repair::RepairOutcome,
}

/// `varve repair resume`'s answer.
#[derive(Serialize)]
struct Resumes {
    resumed: Vec<Resumed>,
}

/// Finish every repair interrupted in `ns` (`varve_repair::resume`; a
/// crash after its intent), opening from the same data directory the other
/// namespaces such a repair spans.
pub fn resume_interrupted(ctx: &Context<'_>, ns: &Arc<dyn Namespace>) -> anyhow::Result<Vec<Resumed>> {
    let mut namespaces = HashMap::from([(ns.name().to_owned(), Arc::clone(ns))]);
    loop {
        match varve_repair::resume(&namespaces) {
            Ok(done) => return Ok(done),
            Err(RepairError::MissingNamespace { namespace })
                if !namespaces.contains_key(&namespace) && ctx.remote.is_none() && ctx.nats.is_none() =>
            {
                let other = ctx.embedded_namespace(&namespace);
                let why = format!(
                    "an interrupted repair of namespace {} spans namespace {namespace} too, and finishing it \
                     renames logs there: stop `varve run` of {namespace}, then retry",
                    ns.name()
                );
                namespaces.insert(namespace, other.writer(&why)?);
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// One line per namespace of a resumed repair.
pub fn describe(resumed: &Resumed) -> String {
    let mut lines = Vec::new();
    for (namespace, logs) in &resumed.finished {
        let how = if resumed.swapped_now.contains(namespace) { "swapped now" } else { "swapped before the crash" };
        let logs: Vec<String> = logs.iter().map(|(log, generation)| format!("{log} (old: {generation})")).collect();
        lines.push(format!(
            "finished the interrupted repair {} in {namespace} ({how}): {}",
            resumed.id,
            logs.join(", ")
        ));
    }
    for (namespace, why) in &resumed.called_off {
        lines.push(format!("called off the interrupted repair {} in {namespace}: {why}", resumed.id));
    }
    lines.join("\n")
}

/// `varve repair resume`: finish the repairs a crash interrupted after their
/// intent (the next `varve repair run` or `varve run` does it too).
pub fn resume(ctx: &Context<'_>) -> anyhow::Result<()> {
    if ctx.remote.is_some() || ctx.nats.is_some() {
        bail!("varve repair resume works on the embedded journal (--data), where repairs run");
    }
    if write::runtime_serves(ctx) {
        bail!(
            "`varve run` serves namespace {}: it finished any interrupted repair when it started, so there is \
             nothing to resume",
            ctx.namespace
        );
    }
    let ns = ctx.writer("finishing an interrupted repair renames logs: stop `varve run` first")?;
    let resumed = resume_interrupted(ctx, &ns)?;
    let namespace = ctx.namespace.clone();
    let answer = Resumes { resumed };
    ctx.out.answer(&answer, || {
        if answer.resumed.is_empty() {
            format!("no interrupted repair in {namespace}")
        } else {
            answer.resumed.iter().map(describe).collect::<Vec<_>>().join("\n")
        }
    })?;
    Ok(())
}

/// The arguments of the `repair` operation `varve run` adds to its socket.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct OnlineArgs {
    /// `LOG:SEQ` of the record to correct.
    #[serde(default)]
    record: Option<String>,
    /// Its corrected value, base64.
    #[serde(default)]
    value: Option<String>,
    /// The handler whose new code re-runs.
    #[serde(default)]
    handler: Option<String>,
    /// With `handler`: its runs on inputs from this seq on.
    #[serde(default)]
    since_seq: Option<u64>,
    /// `refuse`, `run` or `skip`.
    not_replayable: String,
}

fn choice_name(choice: NotReplayable) -> &'static str {
    match choice {
        NotReplayable::Refuse => "refuse",
        NotReplayable::Run => "run",
        NotReplayable::Skip => "skip",
    }
}

/// `varve repair run` while `varve run` serves the namespace: the runtime's
/// process repairs, with the handlers of the manifest it runs, while the
/// application keeps running (`varve_repair::repair_online`).
fn run_online(
    ctx: &Context<'_>,
    target: &Target<'_>,
    value: Option<Vec<u8>>,
    choice: NotReplayable,
) -> anyhow::Result<()> {
    let args = match target {
        Target::Record(text) => {
            parse_record(ctx, text)?;
            let value = value.context("give the corrected value with --value TEXT or --value-file FILE")?;
            OnlineArgs {
                record: Some((*text).to_owned()),
                value: Some(socket::encode_bytes(&value)),
                handler: None,
                since_seq: None,
                not_replayable: choice_name(choice).to_owned(),
            }
        }
        Target::Handler { name, since_seq } => {
            if value.is_some() {
                bail!("--value and --value-file go with --record; --handler replays the handler's new code");
            }
            OnlineArgs {
                record: None,
                value: None,
                handler: Some((*name).to_owned()),
                since_seq: *since_seq,
                not_replayable: choice_name(choice).to_owned(),
            }
        }
    };
    let request = Request::Call { name: "repair".to_owned(), args: serde_json::to_value(&args)? };
    let path = write::socket_path(ctx);
    let answer = match socket::call_checked(&path, &request) {
        Ok(response) => response.answer.context("`varve run` answered the repair without an outcome")?,
        Err(CallError::Refused { error, .. }) => {
            bail!("the repair by `varve run` (socket {}) failed: {error}", path.display())
        }
        Err(CallError::NotServing(why)) => {
            bail!("`varve run` stopped serving {} before the repair: {why}; run it again", ctx.namespace)
        }
        Err(CallError::Broken(why)) => bail!(
            "the connection to `varve run` broke during the repair ({why}): whether the repair was made is unknown; \
             `varve trace causes` of a repaired record, or a `_gen.LOG.N` log, show it if it was"
        ),
    };
    ctx.out.answer(&answer, || {
        let field = |name: &str| answer.get(name).cloned().unwrap_or_default();
        let mut text = format!(
            "repaired while `varve run` serves {}: {} handler run(s) replayed, {} record(s) written to shadows, {} \
             changed\nswapped atomically: {}\nappends were held for {:.3} ms; no new run started for {:.3} ms (the \
             runs in flight finishing, then the last of them replayed); {} round(s) before appends were held",
            ctx.namespace,
            field("replayed"),
            field("written"),
            field("changed"),
            field("swapped").as_str().unwrap_or_default(),
            field("appends_held_ms").as_f64().unwrap_or_default(),
            field("paused_ms").as_f64().unwrap_or_default(),
            field("rounds"),
        );
        if let Some(error) = answer.get("event_error").and_then(serde_json::Value::as_str) {
            text = format!("{text}\nwarning: the repair is done, but its REPAIR event was not written: {error}");
        }
        text
    })?;
    Ok(())
}

/// The `repair` operation `varve run` adds to its socket: the repair of a
/// `varve repair run` made while the application runs, with the handlers
/// of the manifest it runs (external commands through their own sockets,
/// builtins as they are).
pub fn online_op(runtime: RuntimeHandle, manifest: &Manifest, builtins: &Builtins, data_dir: &Path) -> SocketOp {
    let namespace = manifest.namespace.clone();
    let mut handlers: HashMap<String, HandlerFn> = HashMap::new();
    for h in &manifest.handlers {
        let code = match &h.run {
            HandlerRun::Command(argv) => command_via_context(CommandSetup {
                argv: argv.clone(),
                timeout: h.retry.timeout,
                namespace: namespace.clone(),
                data_dir: Some(data_dir.to_owned()),
                socket_dir: std::env::temp_dir(),
            }),
            HandlerRun::Builtin(builtin) => match builtins.get(builtin) {
                Some(code) => Arc::clone(code),
                None => continue,
            },
        };
        handlers.insert(h.name.clone(), code);
    }
    let marked: HashSet<String> = manifest.handlers.iter().filter(|h| !h.replayable).map(|h| h.name.clone()).collect();
    Arc::new(move |args| online_repair(&runtime, &namespace, &handlers, &marked, args).map_err(|e| format!("{e:#}")))
}

fn online_repair(
    runtime: &RuntimeHandle,
    namespace: &str,
    handlers: &HashMap<String, HandlerFn>,
    marked: &HashSet<String>,
    args: serde_json::Value,
) -> anyhow::Result<serde_json::Value> {
    let args: OnlineArgs = serde_json::from_value(args).context("the repair's arguments")?;
    let choice = match args.not_replayable.as_str() {
        "refuse" => NotReplayable::Refuse,
        "run" => NotReplayable::Run,
        "skip" => NotReplayable::Skip,
        other => bail!("not_replayable {other:?}: expected refuse, run or skip"),
    };
    let mut values = HashMap::new();
    let correction = match (&args.record, &args.handler) {
        (Some(text), None) => {
            let record = parse_record_in(namespace, text)?;
            runtime
                .namespace()
                .get(&record.log, record.seq)
                .with_context(|| format!("the record to correct, {}:{}", record.log, record.seq))?;
            let value = args.value.as_deref().context("a corrected record needs its value")?;
            values.insert(record.clone(), socket::decode_bytes(value)?);
            Correction::Record(record)
        }
        (None, Some(handler)) => {
            Correction::Handler { handler: handler.clone(), since: args.since_seq.map_or(Since::Start, Since::Seq) }
        }
        _ => bail!("give a record or a handler to repair, one of them"),
    };
    let corrections = [correction];
    let mut online = Online::new(&corrections, &values, handlers, marked);
    online.not_replayable = choice;
    let done = varve_repair::repair_online(runtime, &online)?;
    let outcome = &done.outcome;
    let swapped: Vec<String> = outcome
        .swapped
        .iter()
        .flat_map(|(ns, logs)| logs.iter().map(move |(log, generation)| format!("{ns}/{log} (old: {generation})")))
        .collect();
    Ok(serde_json::json!({
        "replayed": outcome.replayed,
        "written": outcome.written,
        "changed": outcome.changed,
        "swapped": if swapped.is_empty() { "nothing".to_owned() } else { swapped.join(", ") },
        "changed_records": outcome.changed_records,
        "repair_events": outcome.repair_events,
        "event_error": outcome.event_error,
        "rounds": done.rounds,
        "events_per_round": done.events_per_round,
        "paused_ms": done.paused.as_secs_f64() * 1e3,
        "appends_held_ms": done.appends_held.as_secs_f64() * 1e3,
    }))
}
