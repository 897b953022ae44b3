//! `varve schema …`: record types of a namespace's logs (`varve_schema`):
//! list and show them, register a version from a JSON spec, check one
//! without registering, append typed records, and run a manual migration
//! (`upgrade`; `--eager` materialises every lazily upgraded record into a
//! new generation; `--command` runs an external migration program).
//!
//! The CLI defines no INIT functions of its own: a version whose added
//! fields have constant defaults reads fully here; one whose INIT a program
//! defines is shown as written, with a note (the program reads it).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use serde_json::{json, Value as Json};
use varve_log::{LogError, Namespace, Seq};
use varve_schema::{Model, SchemaError, Schemas, Spec, Subject, Value};

use super::Context;
use crate::output::{self, Unit};

/// The largest spec file `register` and `check` read.
const SPEC_BYTES_MAX: u64 = 1 << 20;

fn open_read(ctx: &Context<'_>) -> anyhow::Result<Arc<Schemas>> {
    let ns = match ctx.reader() {
        Ok(ns) => ns,
        Err(LogError::NamespaceNotFound { .. }) => {
            anyhow::bail!(
                "namespace {} does not exist yet: register a type first (`varve schema register`)",
                ctx.namespace
            )
        }
        Err(e) => return Err(e.into()),
    };
    Ok(Schemas::open(ns)?)
}

fn open_write(ctx: &Context<'_>) -> anyhow::Result<Arc<Schemas>> {
    let ns = ctx.writer("record types are registered by the namespace's one writer")?;
    Ok(Schemas::open(ns)?)
}

fn read_spec(source: &str) -> anyhow::Result<Spec> {
    let mut text = String::new();
    if source == "-" {
        std::io::stdin().take(SPEC_BYTES_MAX).read_to_string(&mut text).context("reading the spec from stdin")?;
    } else {
        std::fs::File::open(Path::new(source))
            .with_context(|| format!("opening spec file {source}"))?
            .take(SPEC_BYTES_MAX)
            .read_to_string(&mut text)
            .with_context(|| format!("reading spec file {source}"))?;
    }
    serde_json::from_str(&text).with_context(|| {
        format!(
            "{source} is not a schema spec: expected JSON like {{\"fields\": [{{\"number\": 1, \"name\": \"celsius\", \"type\": \"i32\"}}], \"model\": \"automatic\"}} (docs/schema.md)"
        )
    })
}

fn fields_line(version: &varve_schema::SchemaVersion) -> String {
    version
        .fields
        .iter()
        .map(|f| match &f.default {
            Some(d) => format!("{}:{}#{}={d}", f.name, f.ty, f.number),
            None => format!("{}:{}#{}", f.name, f.ty, f.number),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn ls(ctx: &Context<'_>) -> anyhow::Result<()> {
    let schemas = open_read(ctx)?;
    let mut rows = Vec::new();
    for name in schemas.subjects() {
        let subject = schemas.subject(&name)?;
        rows.push(json!({
            "subject": name,
            "version": subject.write_version().version,
            "versions": subject.versions.len(),
            "generation": subject.current().generation,
            "log": subject.current().log,
            "pending": subject.pending().map(|p| p.version),
        }));
    }
    ctx.out.answer(&json!({ "subjects": rows }), || {
        if rows.is_empty() {
            return "no record types registered (`varve schema register SUBJECT SPEC.json`)".to_owned();
        }
        rows.iter()
            .map(|r| {
                let pending =
                    r["pending"].as_u64().map(|p| format!(", v{p} waiting for its migration")).unwrap_or_default();
                format!(
                    "{}  v{} (of {}), generation {} in log {}{pending}",
                    r["subject"].as_str().unwrap_or(""),
                    r["version"],
                    r["versions"],
                    r["generation"],
                    r["log"].as_str().unwrap_or("")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    })?;
    Ok(())
}

pub fn show(ctx: &Context<'_>, subject: &str) -> anyhow::Result<()> {
    let schemas = open_read(ctx)?;
    let found = schemas.subject(subject)?;
    let versions: Vec<Json> = found.versions.iter().map(|v| v.to_json()).collect();
    let generations = serde_json::to_value(&found.generations)?;
    ctx.out.answer(&json!({ "subject": subject, "versions": versions, "generations": generations }), || {
        let mut lines = Vec::new();
        for v in &found.versions {
            let how = match (v.model, &v.init, &v.migration) {
                (Model::Automatic, Some(init), _) => format!("automatic, INIT {init}"),
                (Model::Manual, _, Some(m)) => format!("manual, migration {m}"),
                (model, _, _) => model.name().to_owned(),
            };
            lines.push(format!(
                "v{} (id {}, generation {}, {how}, {}): {}",
                v.version,
                v.id,
                v.generation,
                v.compat.name(),
                fields_line(v)
            ));
        }
        for g in &found.generations {
            lines.push(format!("generation {} in log {} from v{}", g.generation, g.log, g.version));
        }
        if let Some(p) = found.pending() {
            lines.push(format!("v{} waits for its migration: `varve schema upgrade {subject}`", p.version));
        }
        lines.join("\n")
    })?;
    Ok(())
}

pub fn register(ctx: &Context<'_>, subject: &str, source: &str) -> anyhow::Result<()> {
    let spec = read_spec(source)?;
    let schemas = open_write(ctx)?;
    let registered = schemas.register(subject, &spec)?;
    for warning in &registered.warnings {
        output::warn(warning);
    }
    if let Some(init) = &registered.version.init {
        output::warn(&format!(
            "v{} computes its added fields with INIT '{init}': the programs that read old records define it (the CLI shows such records as written)",
            registered.version.version
        ));
    }
    let v = &registered.version;
    ctx.out.answer(&json!({ "subject": subject, "version": v.to_json(), "created": registered.created, "warnings": registered.warnings }), || {
        if registered.created {
            format!("registered {subject} v{} (id {}, {}): {}", v.version, v.id, v.model.name(), fields_line(v))
        } else {
            format!("{subject} v{} is already registered with this spec: nothing changed", v.version)
        }
    })?;
    Ok(())
}

pub fn check(ctx: &Context<'_>, subject: &str, source: &str) -> anyhow::Result<()> {
    let spec = read_spec(source)?;
    let schemas = open_read(ctx)?;
    let version = schemas.check(subject, &spec)?;
    ctx.out.answer(
        &json!({ "subject": subject, "compatible": true, "version": version.version, "compat": version.compat.name() }),
        || {
            format!(
                "{subject} v{} is {} compatible: `varve schema register` would accept it",
                version.version,
                version.compat.name()
            )
        },
    )?;
    Ok(())
}

pub fn append(ctx: &Context<'_>, subject: &str, record: &str) -> anyhow::Result<()> {
    let json: Json =
        serde_json::from_str(record).with_context(|| format!("{record:?} is not a JSON object of fields"))?;
    let schemas = open_write(ctx)?;
    let log = schemas.log(subject)?;
    let seq = log.append_json(&json)?;
    let target = log.current_log()?;
    ctx.out.answer(&json!({ "log": target, "seq": seq }), || format!("appended {target} seq {seq}"))?;
    Ok(())
}

/// An external migration program: one JSON object (the old record) per
/// line on its stdin, one JSON object (the new record's fields) per line
/// back on its stdout, in order.
struct External {
    child: Child,
    io: Mutex<(ChildStdin, BufReader<ChildStdout>)>,
}

impl External {
    fn start(command: &str) -> anyhow::Result<External> {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting migration command {command:?}"))?;
        let stdin = child.stdin.take().context("the command's stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("the command's stdout")?);
        Ok(External { child, io: Mutex::new((stdin, stdout)) })
    }

    fn call(&self, record: &varve_schema::Record) -> Result<varve_schema::Fields, String> {
        let mut io = self.io.lock().map_err(|_| "the migration command's pipe is poisoned".to_owned())?;
        let (stdin, stdout) = &mut *io;
        let mut line = record.to_json().to_string();
        line.push('\n');
        stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("writing to the command: {e}"))?;
        let mut answer = String::new();
        let read = stdout.read_line(&mut answer).map_err(|e| format!("reading from the command: {e}"))?;
        if read == 0 {
            return Err("the command exited (or closed its stdout) before answering: it must print one JSON object per input line, flushing each".into());
        }
        let object: serde_json::Map<String, Json> = serde_json::from_str(answer.trim())
            .map_err(|e| format!("the command answered {:?}, not a JSON object: {e}", answer.trim()))?;
        Ok(object
            .into_iter()
            .filter(|(_, v)| !v.is_null())
            .filter_map(|(k, v)| json_value(&v).map(|v| (k.into(), v)))
            .collect())
    }
}

impl Drop for External {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn json_value(json: &Json) -> Option<Value> {
    Some(match json {
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => n
            .as_u64()
            .map(Value::UInt)
            .or_else(|| n.as_i64().map(Value::Int))
            .or_else(|| n.as_f64().map(Value::Float))?,
        Json::String(s) => Value::Text(s.clone()),
        _ => return None,
    })
}

pub fn upgrade(ctx: &Context<'_>, subject: &str, eager: bool, command: Option<&str>, batch: u64) -> anyhow::Result<()> {
    let schemas = open_write(ctx)?;
    if eager {
        let registered = schemas.upgrade_eager(subject)?;
        if registered.created {
            output::warn(&format!(
                "eager: v{} rewrites every record of {subject}, upgraded, into generation {}",
                registered.version.version, registered.version.generation
            ));
        }
    }
    let found = schemas.subject(subject)?;
    let Some(pending) = found.pending().cloned() else {
        anyhow::bail!(
            "no migration is pending for {subject} (v{}, generation {}): register a manual version first, or pass --eager to materialise lazily upgraded records",
            found.write_version().version,
            found.current().generation
        );
    };
    let migration = pending.migration.clone().unwrap_or_default();
    let _external = match command {
        Some(command) => {
            let external = Arc::new(External::start(command)?);
            let callee = external.clone();
            schemas.define_migration(&migration, move |old| callee.call(old));
            Some(external)
        }
        None if migration == varve_schema::EAGER_MIGRATION => None,
        None => anyhow::bail!(
            "{subject} v{} migrates with '{migration}', a function of a program: run that program, or give the CLI an external one with --command 'CMD' (one JSON record per line in, one out)",
            pending.version
        ),
    };
    let source = Subject::log_of(subject, found.current().generation);
    let total = schemas.namespace().log_info(&source).map_or(0, |i| i.len());
    let bar = output::progress_bar(total, Unit::Records, &format!("migrating {subject}"), false);
    let report = schemas.migrate_in_batches(subject, batch, &mut |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    });
    bar.finish_and_clear();
    let report = report?;
    ctx.out.answer(
        &json!({
            "subject": subject,
            "migrated": report.migrated,
            "resumed_from": report.resumed_from,
            "from_generation": report.from_generation,
            "to_generation": report.to_generation,
            "log": Subject::log_of(subject, report.to_generation),
            "source_through": report.source_through,
        }),
        || {
            let resumed = if report.resumed_from > 0 { format!(" (resumed after {})", report.resumed_from) } else { String::new() };
            format!(
                "migrated {} records of {subject} into generation {} (log {}){resumed}; writers use v{} now; generation {} stays readable in log {}",
                report.migrated,
                report.to_generation,
                Subject::log_of(subject, report.to_generation),
                pending.version,
                report.from_generation,
                Subject::log_of(subject, report.from_generation)
            )
        },
    )?;
    Ok(())
}

/// If `log` holds a subject's typed records, `value` decoded as JSON: the
/// record upgraded to its newest shape, or as written when an INIT only a
/// program defines would be needed (with the reason). `None` for untyped logs.
pub fn typed_json(ns: &Arc<dyn Namespace>, log: &str, seq: Seq, value: &[u8]) -> Option<(Json, Option<String>)> {
    let schemas = Schemas::open(ns.clone()).ok()?;
    typed_json_with(&schemas, log, seq, value)
}

/// [`typed_json`] with a registry already open (scans).
pub fn typed_json_with(schemas: &Schemas, log: &str, seq: Seq, value: &[u8]) -> Option<(Json, Option<String>)> {
    subject_of(schemas, log)?;
    let location = format!("{log}@{seq}");
    Some(match schemas.decode(value, location) {
        Ok(stored) => match stored.to_json() {
            Ok(json) => (json, None),
            Err(e @ (SchemaError::MissingInit { .. } | SchemaError::InitFailed { .. })) => (
                stored.original().to_json(),
                Some(format!("shown as written (v{}): {e}", stored.original().version().version)),
            ),
            Err(e) => (Json::Null, Some(e.to_string())),
        },
        Err(e) => (Json::Null, Some(e.to_string())),
    })
}

/// The subject whose records (of some generation) are in `log`.
pub fn subject_of(schemas: &Schemas, log: &str) -> Option<String> {
    schemas.subjects().into_iter().find(|s| {
        schemas.subject(s).is_ok_and(|found| found.versions.iter().any(|v| Subject::log_of(s, v.generation) == log))
    })
}
