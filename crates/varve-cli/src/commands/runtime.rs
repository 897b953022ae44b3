//! `varve run`, `varve handler ls`, `varve trace …`, `varve events tail`:
//! the runtime (`varve-runtime`) from the command line.
//!
//! `run` hosts a runtime for an app manifest and holds the namespace's writer
//! lock while it runs; it serves `DIR/<namespace>/runtime.sock`, through
//! which the write commands reach the namespace meanwhile (see
//! [`super::write`]), and stops cleanly on SIGTERM or SIGINT. The read
//! commands open namespaces read-only and work beside a running runtime.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _};
use serde::Serialize;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use varve_log::{JournalOptions, JournalStore, LogError, Namespace, Seq, SeqRange};
use varve_runtime::append_index::EventIndex;
use varve_runtime::causes::Causes;
use varve_runtime::effects::Effects;
use varve_runtime::event::{parse_trace, trace_hex, EventJson, TraceId};
use varve_runtime::pending::{HandlerCounts, TriggerFold};
use varve_runtime::socket::{self, Request};
use varve_runtime::trace::{self, CausalGraph, RecordRef};
use varve_runtime::{Builtins, EventId, Interruption, Manifest, RuntimeError, StopReport, StoredEvent, EVENTS_LOG};

use super::{namespace_dir, write, Context};
use std::io::Write as _;

/// `events tail` without `--from` starts this many events before the end.
const TAIL_START_EVENTS: u64 = 20;

/// The builtins `varve run` and `varve serve --manifest` offer to manifests.
pub fn builtins() -> Builtins {
    Builtins::new()
        .with("noop", |_| Ok(()))
        .with("echo", |ctx| {
            println!("{}:{}\t{}", ctx.log(), ctx.seq(), String::from_utf8_lossy(ctx.record()));
            Ok(())
        })
        .with("fail", |ctx| Err(format!("builtin `fail` fails on purpose ({}:{})", ctx.log(), ctx.seq()).into()))
}

#[derive(Serialize)]
struct Started<'a> {
    namespace: &'a str,
    host: String,
    handlers: Vec<&'a str>,
    socket: String,
}

/// How long `varve run` gives running handlers to finish when it is stopped
/// (SIGTERM, SIGINT) before it kills the external commands still running;
/// `--stop-grace-ms` sets another.
pub const STOP_GRACE_MS: u64 = 10_000;
/// How long `varve run --until-idle` gives running handlers once idle (none run then).
const UNTIL_IDLE_GRACE: Duration = Duration::from_secs(30);
/// With `--until-idle`, how often signals are looked at while waiting to be idle.
const UNTIL_IDLE_POLL: Duration = Duration::from_millis(100);
/// Interrupted runs a stop names on stderr; more are counted.
const STOP_NAMES_MAX: usize = 5;

/// The claim lease of a runtime sharing its namespace: the default, or
/// longer than the longest handler timeout, so a live claim is never taken.
fn shared_lease(manifest: &Manifest) -> Duration {
    let longest = manifest.handlers.iter().filter_map(|h| h.retry.timeout).max().unwrap_or_default();
    varve_runtime::SHARED_LEASE_DEFAULT.max(longest + Duration::from_secs(10))
}

/// `varve run APP.toml`: validate everything, start, serve until SIGTERM or
/// SIGINT (or until idle with `until_idle`), then stop cleanly: no new
/// claims, `grace` for running handlers, external commands still running
/// killed with their process groups, the socket removed; what was cut short
/// runs again at the next start, and stderr says so.
pub fn run(ctx: &Context<'_>, manifest_path: &Path, until_idle: bool, grace: Duration) -> anyhow::Result<()> {
    let manifest = Manifest::load(manifest_path)?;
    let builtins = builtins();
    manifest.check_builtins(&builtins)?;
    // From here on a SIGTERM or SIGINT asks for the stop below instead of
    // ending the process where it stands.
    let mut signals = Signals::new([SIGTERM, SIGINT]).context("installing the SIGTERM/SIGINT handlers")?;
    let ns_ctx = Context {
        data: ctx.data.clone(),
        namespace: manifest.namespace.clone(),
        out: ctx.out,
        journal: ctx.journal,
        remote: None,
        nats: ctx.nats.clone(),
    };
    if write::runtime_serves(&ns_ctx) {
        bail!(
            "a runtime already serves namespace {} (socket {}): one runtime per namespace",
            ns_ctx.namespace,
            write::socket_path(&ns_ctx).display()
        );
    }
    // Before the lock: a write that finds the namespace locked while we
    // start (or stop) waits for our socket instead of failing.
    let _pid_file = write::RuntimePidFile::write(&ns_ctx)?;
    // On NATS the namespace lives in the cluster; this data directory holds
    // the runtime's socket, pid file and host id.
    let ns: Arc<dyn Namespace> = if let Some(nats) = &ctx.nats {
        varve_log::Store::namespace(nats, &manifest.namespace)?
    } else {
        let options = JournalOptions { sync: manifest.sync, ..ctx.journal };
        let store = JournalStore::open(&ctx.data, options)?;
        // A CLI write may hold the lock for a moment; another runtime is refused.
        Arc::new(write::open_for_runtime(&ns_ctx, || store.journal_namespace(&manifest.namespace))?)
    };
    if ctx.nats.is_none() {
        // A repair a crash interrupted is finished before the application
        // appends again (an append would make it impossible to finish).
        for resumed in super::repair::resume_interrupted(&ns_ctx, &ns)? {
            crate::output::warn(&super::repair::describe(&resumed));
        }
    }
    let host = match manifest.host {
        Some(host) => host,
        None => varve_runtime::host_id_for_dir(&ctx.data)?,
    };
    // Absolute, so an external handler that changes directory still finds it.
    let data_dir = std::path::absolute(&ctx.data).unwrap_or_else(|_| ctx.data.clone());
    let socket_path = namespace_dir(&data_dir, &manifest.namespace).join(write::SOCKET_FILE);
    let options = varve_runtime::RuntimeOptions {
        host,
        socket: Some(socket_path.clone()),
        data_dir: Some(data_dir),
        // On NATS other runtimes (other hosts) may serve the namespace too.
        shared: ctx.nats.is_some().then(|| shared_lease(&manifest)),
        ..manifest.options()
    };
    let runtime = manifest.builder(ns, &builtins)?.options(options).start()?;
    if ctx.nats.is_none() {
        // `varve repair run` while we serve: we repair, the application running.
        let data_dir = std::path::absolute(&ctx.data).unwrap_or_else(|_| ctx.data.clone());
        runtime.add_socket_op("repair", super::repair::online_op(runtime.handle(), &manifest, &builtins, &data_dir));
    }
    let started = Started {
        namespace: &manifest.namespace,
        host: format!("{host:016x}"),
        handlers: manifest.handlers.iter().map(|h| h.name.as_str()).collect(),
        socket: socket_path.display().to_string(),
    };
    ctx.out.answer(&started, || {
        format!(
            "runtime started: namespace {}, host {}, {} handler(s) [{}], socket {}",
            started.namespace,
            started.host,
            started.handlers.len(),
            started.handlers.join(", "),
            started.socket
        )
    })?;
    let signal = if until_idle {
        loop {
            if runtime.wait_idle(UNTIL_IDLE_POLL) {
                break None;
            }
            if let Some(signal) = signals.pending().next() {
                break Some(signal);
            }
        }
    } else {
        signals.forever().next()
    };
    let Some(signal) = signal else {
        runtime.stop(UNTIL_IDLE_GRACE);
        return Ok(());
    };
    let report = runtime.stop_report(grace);
    let name = if signal == SIGINT { "SIGINT" } else { "SIGTERM" };
    let mut err = std::io::stderr().lock();
    // Not `eprintln!`, which panics when stderr is gone.
    let _ = writeln!(err, "{}", stop_summary(name, &report));
    let _ = writeln!(
        err,
        "socket {} removed; {} trigger(s) left for the next start",
        socket_path.display(),
        report.pending
    );
    Ok(())
}

/// The first line `varve run` prints when stopped: what it cut short.
fn stop_summary(signal: &str, report: &StopReport) -> String {
    let grace = report.grace.as_millis();
    if report.interrupted.is_empty() {
        return format!("stopped on {signal}: no handler run was cut short (grace {grace} ms)");
    }
    let mut names: Vec<String> = report
        .interrupted
        .iter()
        .take(STOP_NAMES_MAX)
        .map(|run| {
            let how = match run.how {
                Interruption::Killed => "killed",
                Interruption::Abandoned => "abandoned",
                Interruption::NotStarted => "not started",
            };
            format!("{} {}:{} (attempt {}, {how})", run.handler, run.log, run.seq, run.attempt)
        })
        .collect();
    if report.interrupted.len() > STOP_NAMES_MAX {
        names.push(format!("and {} more", report.interrupted.len() - STOP_NAMES_MAX));
    }
    format!(
        "stopped on {signal}: {} handler run(s) cut short after a {grace} ms grace: {}; they run again at the next start (next attempt)",
        report.interrupted.len(),
        names.join(", ")
    )
}

/// Inside an external handler (`VARVE_EVENT_ID`, `VARVE_TRACE_ID` set): the
/// socket of the runtime serving `ctx`'s namespace — the handler's own, or
/// another namespace's if a runtime answers there — and the cause, so a read
/// through it is recorded (READ/LATEST with the FIRING as parent).
pub fn handler_socket(ctx: &Context<'_>) -> Option<(PathBuf, (String, String))> {
    let cause = write::Cause::from_env()?;
    let own = std::env::var_os(varve_runtime::command::ENV_RUNTIME_SOCKET).is_some()
        && std::env::var(varve_runtime::command::ENV_NAMESPACE).is_ok_and(|ns| ns == ctx.namespace);
    if !own && !write::runtime_serves(ctx) {
        return None;
    }
    Some((write::socket_path(ctx), (cause.event, cause.trace)))
}

/// `get` through the runtime (records a READ caused by the handler's FIRING).
pub fn get_via_socket(path: &Path, cause: &(String, String), log: &str, seq: Seq) -> anyhow::Result<Vec<u8>> {
    let request = Request::Get { log: log.to_owned(), seq, cause: Some(cause.0.clone()), trace: Some(cause.1.clone()) };
    let data = socket::call(path, &request)?.data.context("the runtime answered without data")?;
    Ok(socket::decode_bytes(&data)?)
}

/// Records a scan through the runtime asks for at a time (each page is one
/// READ event).
const SOCKET_SCAN_PAGE: u64 = 10_000;

/// `scan` through the runtime, in pages up to the log's newest record (each
/// recorded as a READ caused by the handler's FIRING).
pub fn scan_via_socket(
    path: &Path,
    cause: &(String, String),
    log: &str,
    range: SeqRange,
) -> anyhow::Result<Vec<varve_log::Record>> {
    let mut out = Vec::new();
    let mut first = range.first.max(1);
    while first <= range.last {
        let last = range.last.min(first.saturating_add(SOCKET_SCAN_PAGE - 1));
        let request = Request::Scan {
            log: log.to_owned(),
            first,
            last,
            cause: Some(cause.0.clone()),
            trace: Some(cause.1.clone()),
        };
        let records = socket::call(path, &request)?.records.context("the runtime answered without records")?;
        let full = records.len() as u64 == last - first + 1;
        for record in records {
            out.push(varve_log::Record { seq: record.seq, value: socket::decode_bytes(&record.data)?.into() });
        }
        if !full || last == Seq::MAX {
            break; // the log ends here
        }
        first = last + 1;
    }
    Ok(out)
}

/// `latest` through the runtime (records a LATEST with the seq returned).
pub fn latest_via_socket(path: &Path, cause: &(String, String), log: &str) -> anyhow::Result<Seq> {
    let request = Request::Latest { log: log.to_owned(), cause: Some(cause.0.clone()), trace: Some(cause.1.clone()) };
    socket::call(path, &request)?.seq.context("the runtime answered without a seq")
}

/// Every namespace in the data directory, read-only.
pub(crate) fn data_namespaces(ctx: &Context<'_>) -> anyhow::Result<Vec<Arc<dyn Namespace>>> {
    let store = JournalStore::open(&ctx.data, JournalOptions { read_only: true, ..JournalOptions::default() })?;
    let mut namespaces: Vec<Arc<dyn Namespace>> = Vec::new();
    for name in varve_log::Store::list_namespaces(&store)? {
        namespaces.push(Arc::new(store.journal_namespace(&name)?));
    }
    Ok(namespaces)
}

/// Every namespace's events in the data directory (read-only; namespaces
/// without `_events` are skipped).
pub(crate) fn all_events(ctx: &Context<'_>) -> anyhow::Result<Vec<StoredEvent>> {
    let mut per_namespace = Vec::new();
    for ns in data_namespaces(ctx)? {
        match varve_runtime::namespace_events(ns.as_ref(), SeqRange::ALL) {
            Ok(events) => per_namespace.push(events),
            Err(RuntimeError::Log(LogError::LogNotFound { .. })) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(trace::merge_owned(per_namespace))
}

/// `handler ls --json`: `{"namespace":…,"handlers":[{handler, logs, triggers, done, failed, dead_letters, pending}]}`.
#[derive(Serialize)]
struct HandlersAnswer<'a> {
    namespace: &'a str,
    handlers: &'a [HandlerRow],
}

#[derive(Serialize)]
struct HandlerRow {
    handler: String,
    logs: Vec<String>,
    #[serde(flatten)]
    counts: HandlerCounts,
}

/// `varve handler ls`: subscriptions and delivery counts from the store:
/// the runtime's own folds over `_runtime.subscriptions` and `_events`.
pub fn handler_ls(ctx: &Context<'_>) -> anyhow::Result<()> {
    let ns = ctx.open_read()?;
    let mut logs = varve_runtime::subscriptions::read_subscriptions(&ns)?.logs_by_handler();
    let mut fold = TriggerFold::new();
    if ns.log_info(EVENTS_LOG).is_ok() {
        for e in varve_runtime::namespace_events(&ns, SeqRange::ALL)? {
            fold.apply(e.id.seq, &e.event);
        }
    }
    let mut rows: BTreeMap<String, HandlerRow> = BTreeMap::new();
    for (handler, counts) in fold.counts() {
        let logs = logs.remove(handler).unwrap_or_default();
        rows.insert(handler.clone(), HandlerRow { handler: handler.clone(), logs, counts: *counts });
    }
    for (handler, logs) in logs {
        rows.insert(handler.clone(), HandlerRow { handler, logs, counts: HandlerCounts::default() });
    }
    let rows: Vec<HandlerRow> = rows.into_values().collect();
    ctx.out.answer(&HandlersAnswer { namespace: &ctx.namespace, handlers: &rows }, || {
        if rows.is_empty() {
            return format!("namespace {} has no handlers", ctx.namespace);
        }
        let mut lines = vec![format!(
            "{:<24} {:<24} {:>9} {:>9} {:>7} {:>5} {:>8}",
            "HANDLER", "LOGS", "TRIGGERS", "DONE", "FAILED", "DEAD", "PENDING"
        )];
        for r in &rows {
            let logs = if r.logs.is_empty() { "-".to_owned() } else { r.logs.join(",") };
            lines.push(format!(
                "{:<24} {:<24} {:>9} {:>9} {:>7} {:>5} {:>8}",
                r.handler,
                logs,
                r.counts.triggers,
                r.counts.done,
                r.counts.failed,
                r.counts.dead_letters,
                r.counts.pending
            ));
        }
        lines.join("\n")
    })?;
    Ok(())
}

#[derive(Serialize)]
struct RecordJson {
    namespace: String,
    log: String,
    seq: Seq,
}

impl From<&RecordRef> for RecordJson {
    fn from(r: &RecordRef) -> Self {
        RecordJson { namespace: r.namespace.clone(), log: r.log.clone(), seq: r.seq }
    }
}

#[derive(Serialize)]
struct TraceAnswer<'a> {
    records: Vec<RecordJson>,
    events: Vec<EventJson<'a>>,
}

fn print_events(ctx: &Context<'_>, records: &[RecordRef], events: &[&StoredEvent], title: &str) -> anyhow::Result<()> {
    let answer = TraceAnswer {
        records: records.iter().map(RecordJson::from).collect(),
        events: events.iter().map(|e| e.to_json()).collect(),
    };
    ctx.out.answer(&answer, || {
        let mut lines = vec![format!("{title}: {} record(s)", records.len())];
        for r in records {
            lines.push(format!("  {}/{}:{}", r.namespace, r.log, r.seq));
        }
        lines.push(format!("events ({}):", events.len()));
        for e in events {
            lines.push(format!("  {}  [{}]", e.to_line(), e.id.namespace));
        }
        lines.join("\n")
    })?;
    Ok(())
}

/// `varve trace causes|effects LOG SEQ`. Causes are found by the event
/// logs' index, reading the answer's events (`varve_runtime::causes`);
/// effects by a walk over the events after the record
/// (`varve_runtime::effects`). Namespaces are opened read-only.
pub fn trace_related(ctx: &Context<'_>, log: &str, seq: Seq, effects: bool) -> anyhow::Result<()> {
    let store = JournalStore::open(&ctx.data, JournalOptions { read_only: true, ..JournalOptions::default() })?;
    let names: BTreeSet<String> = varve_log::Store::list_namespaces(&store)?.into_iter().collect();
    let open = |name: &str| -> varve_runtime::Result<Option<Arc<dyn Namespace>>> {
        if !names.contains(name) {
            return Ok(None);
        }
        Ok(Some(Arc::new(store.journal_namespace(name)?)))
    };
    let mut causes = Causes::new(&open);
    let (found, title) = if effects {
        let names: Vec<String> = names.iter().cloned().collect();
        (Effects::new(&open, &names).descendants(&ctx.namespace, log, seq)?, format!("what depends on {log}:{seq}"))
    } else {
        (causes.ancestors(&ctx.namespace, log, seq)?, format!("what caused {log}:{seq}"))
    };
    if found.is_empty() {
        let earliest = causes.index(&ctx.namespace)?.map(EventIndex::earliest);
        bail!(no_append(ctx, log, seq, earliest));
    }
    let found: Vec<&StoredEvent> = found.iter().collect();
    let records = CausalGraph::records(&found);
    print_events(ctx, &records, &found, &title)
}

/// Why a record has no APPEND event to trace from (`earliest`: the namespace's earliest event kept).
fn no_append(ctx: &Context<'_>, log: &str, seq: Seq, earliest: Option<Seq>) -> String {
    if let Some(earliest) = earliest.filter(|&e| e > 1) {
        return format!(
            "no APPEND event for {log}:{seq} in namespace {}: the runtime's event retention (`events_keep`, `events_keep_for`) trimmed _events before seq {earliest}, and records appended before then are no longer traced (nor appended outside a runtime)",
            ctx.namespace
        );
    }
    format!(
        "no APPEND event for {log}:{seq} in namespace {}: only records appended after a runtime (`varve run`) first served the namespace are traced",
        ctx.namespace
    )
}

/// `varve trace show TRACE_ID [--dot FILE] [--otel FILE]`.
pub fn trace_show(ctx: &Context<'_>, trace_id: &str, dot: Option<&Path>, otel: Option<&Path>) -> anyhow::Result<()> {
    let events = all_events(ctx)?;
    let trace = resolve_trace(&events, trace_id, &ctx.data)?;
    let found = trace::trace_events(&events, trace);
    if let Some(path) = dot {
        std::fs::write(path, trace::to_dot(&found)).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = otel {
        let text = serde_json::to_string_pretty(&trace::to_otel_json(&found))?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    let records = CausalGraph::records(&found);
    print_events(ctx, &records, &found, &format!("trace {}", trace_hex(trace)))
}

/// A trace id given in full (32 hex digits) or as a prefix of one, such as
/// the 12 digits the text output of `events tail` and `trace` shows.
fn resolve_trace(events: &[StoredEvent], text: &str, data: &Path) -> anyhow::Result<TraceId> {
    parse_trace(text)?; // hex, at most 32 digits
    let prefix = text.to_ascii_lowercase();
    let matching: BTreeSet<TraceId> =
        events.iter().map(|e| e.event.trace).filter(|&t| trace_hex(t).starts_with(&prefix)).collect();
    match (matching.first(), matching.len()) {
        (None, _) => bail!("no events with a trace id starting {prefix} in {}", data.display()),
        (Some(&trace), 1) => Ok(trace),
        (_, n) => bail!("{n} traces start with {prefix}: give more digits of the trace id (`varve --json events tail` prints them in full)"),
    }
}

/// `varve events tail [--from N] [--no-follow]`: decoded `_events`.
pub fn events_tail(ctx: &Context<'_>, from: Option<Seq>, follow: bool) -> anyhow::Result<()> {
    let ns = ctx.open_read()?;
    let host = varve_runtime::namespace_host(&ns)?.unwrap_or(0);
    let info = match ns.log_info(EVENTS_LOG) {
        Err(LogError::LogNotFound { .. }) => bail!(
            "namespace {} has no event log: no runtime has served it yet (start one with `varve run APP.toml`)",
            ctx.namespace
        ),
        other => other?,
    };
    let from = from.unwrap_or_else(|| info.latest.saturating_sub(TAIL_START_EVENTS - 1).max(info.earliest).max(1));
    let mut watch = ns.watch(EVENTS_LOG, from)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    loop {
        let record = match watch.next_timeout(Duration::ZERO)? {
            Some(record) => record,
            None if !follow => break,
            None => {
                out.flush()?;
                match watch.next() {
                    Some(record) => record?,
                    None => break,
                }
            }
        };
        let event = varve_runtime::Event::decode(&record.value, record.seq)?;
        let stored = StoredEvent { id: EventId { host, namespace: ctx.namespace.clone(), seq: record.seq }, event };
        if ctx.out.json() {
            serde_json::to_writer(&mut out, &stored.to_json())?;
            writeln!(out)?;
        } else {
            writeln!(out, "{}", stored.to_line())?;
        }
    }
    out.flush()?;
    Ok(())
}
