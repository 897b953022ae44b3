//! The application manifest (`APP.toml`) read by `varve run`.
//!
//! ```toml
//! [runtime]
//! namespace = "app"          # default "default"
//! concurrency = 4            # worker threads (CSPOT's throttle), default 4
//! sync = "group"             # "always" (default) | "group" | "never"
//! group_commit_delay_ms = 5  # with sync = "group", default 5
//! record_reads = true        # READ/LATEST events, default true
//! backlog_max = 100000       # triggers queued or running before outside appends wait; 0: no limit
//! backlog_wait_ms = 60000    # how long such an append waits before it is refused (nothing written)
//! events_keep = 10000000     # keep at least the last N events of `_events`, trim older ones; default: keep all
//! events_keep_for = "7d"     # keep at least the events of the last 7 days ("90s", "12h", "2w"…); default: any age
//! host_id = "00000000000000a1"  # 16 hex digits; default: generated once per data dir
//!
//! [[log]]
//! name = "readings"
//! keep = 1000                # optional; default: keep every record
//! on_full = "overwrite"      # with keep: "refuse" (default) | "overwrite"
//!
//! [[topic]]
//! name = "alerts"
//!
//! [[handler]]
//! name = "smooth"
//! log = "readings"           # or: topic = "alerts"
//! command = ["python3", "smooth.py"]   # or: builtin = "noop"
//! attempts = 3               # failed runs before the dead-letter log
//! backoff_ms = 100           # doubles per attempt …
//! backoff_max_ms = 10000     # … up to this
//! timeout_ms = 30000         # external commands are killed after this; 0 = never
//! replayable = true          # false: it acts on the world; a repair will not simply re-run it
//! ```
//!
//! [`Manifest::parse`] checks everything before anything starts: unknown
//! fields, a handler on an undeclared log or topic, duplicate names, a
//! command that is not an executable on `PATH`; [`Manifest::builder`]
//! checks builtins against what the hosting binary registered. Errors name
//! the file and line.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;
use varve_log::{LogConfig, Namespace, OnFull, SyncPolicy};

use crate::builder::{RuntimeBuilder, RuntimeOptions};
use crate::context::HandlerContext;
use crate::error::{Result, RuntimeError};
use crate::event::HostId;
use crate::handler::{HandlerFn, HandlerKind, HandlerResult, HandlerSpec};
use crate::retry::RetryPolicy;

/// A validated manifest.
#[derive(Clone, Debug)]
pub struct Manifest {
    /// The file it was read from, named in errors; `None` when parsed from text alone.
    pub path: Option<PathBuf>,
    /// `runtime.namespace`: the namespace the app runs in (default `"default"`).
    pub namespace: String,
    /// `runtime.concurrency`: worker threads, 1 to [`crate::CONCURRENCY_MAX`] (default 4).
    pub concurrency: usize,
    /// `runtime.sync` with `group_commit_delay_ms` (ms, default 5): when appends are fsynced (default
    /// [`SyncPolicy::Always`]).
    pub sync: SyncPolicy,
    /// `runtime.record_reads`: whether handler reads are recorded as READ/LATEST events (default `true`).
    pub record_reads: bool,
    /// `runtime.backlog_max` and `backlog_wait_ms`: backpressure on outside appends (default [`crate::Backlog::default`]).
    pub backlog: crate::Backlog,
    /// `runtime.events_keep`: event retention ([`crate::RuntimeOptions::events_keep`]; default: keep every event).
    pub events_keep: Option<u64>,
    /// `runtime.events_keep_for`: event retention by age ([`crate::RuntimeOptions::events_keep_for`]; default:
    /// events of any age are kept).
    pub events_keep_for: Option<Duration>,
    /// `runtime.host_id`: the host id for event ids; `None` to take the data directory's
    /// ([`crate::host_id_for_dir`]).
    pub host: Option<HostId>,
    /// The `[[log]]` entries, in file order: name and retention (`keep`, `on_full`).
    pub logs: Vec<(String, LogConfig)>,
    /// The `[[topic]]` names, in file order.
    pub topics: Vec<String>,
    /// The `[[handler]]` entries, in file order.
    pub handlers: Vec<ManifestHandler>,
}

/// One `[[handler]]`.
#[derive(Clone, Debug)]
pub struct ManifestHandler {
    /// The handler's name, unique in the manifest.
    pub name: String,
    /// The log or topic it subscribes to.
    pub source: String,
    /// What runs: `command` or `builtin`.
    pub run: HandlerRun,
    /// `attempts`, `backoff_ms`, `backoff_max_ms` and `timeout_ms` (0: `None`, no timeout).
    pub retry: RetryPolicy,
    /// `replayable = false`: its runs act on the world (send mail, move a
    /// valve), so a repair plan reports them and a repair must not simply
    /// run them again. Default `true`.
    pub replayable: bool,
    /// Line of the entry's `name`, for later errors.
    line: usize,
}

/// How a manifest handler runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HandlerRun {
    /// `command = [...]`: an external command's argv; argv\[0\] was found executable (on `PATH`
    /// unless it has a `/`) when the manifest was parsed.
    Command(Vec<String>),
    /// `builtin = "name"`: a Rust function the hosting binary offers in its [`Builtins`].
    Builtin(String),
}

/// Rust functions a hosting binary offers to manifests as `builtin = "name"`.
#[derive(Clone, Default)]
pub struct Builtins {
    functions: BTreeMap<String, HandlerFn>,
}

impl std::fmt::Debug for Builtins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.functions.keys()).finish()
    }
}

impl Builtins {
    /// No builtins offered.
    #[must_use]
    pub fn new() -> Builtins {
        Builtins::default()
    }

    /// Offer `f` under `name`.
    #[must_use]
    pub fn with<F>(mut self, name: &str, f: F) -> Builtins
    where
        F: Fn(&mut HandlerContext<'_>) -> HandlerResult + Send + Sync + 'static,
    {
        self.functions.insert(name.to_owned(), Arc::new(f));
        self
    }

    /// The names offered.
    #[must_use]
    pub fn names(&self) -> BTreeSet<String> {
        self.functions.keys().cloned().collect()
    }

    /// The function offered under `name`.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&HandlerFn> {
        self.functions.get(name)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    #[serde(default)]
    runtime: RawRuntime,
    #[serde(default)]
    log: Vec<RawLog>,
    #[serde(default)]
    topic: Vec<RawTopic>,
    #[serde(default)]
    handler: Vec<RawHandler>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawRuntime {
    namespace: Option<Spanned<String>>,
    concurrency: Option<Spanned<i64>>,
    sync: Option<Spanned<String>>,
    group_commit_delay_ms: Option<u64>,
    record_reads: Option<bool>,
    backlog_max: Option<u64>,
    backlog_wait_ms: Option<u64>,
    events_keep: Option<Spanned<i64>>,
    events_keep_for: Option<Spanned<String>>,
    host_id: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLog {
    name: Spanned<String>,
    keep: Option<Spanned<i64>>,
    on_full: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTopic {
    name: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHandler {
    name: Spanned<String>,
    log: Option<Spanned<String>>,
    topic: Option<Spanned<String>>,
    command: Option<Spanned<Vec<String>>>,
    builtin: Option<Spanned<String>>,
    attempts: Option<Spanned<i64>>,
    backoff_ms: Option<u64>,
    backoff_max_ms: Option<u64>,
    timeout_ms: Option<u64>,
    replayable: Option<bool>,
}

struct Source<'a> {
    text: &'a str,
    path: Option<&'a Path>,
}

impl Source<'_> {
    fn line_of(&self, offset: usize) -> usize {
        self.text[..offset.min(self.text.len())].bytes().filter(|&b| b == b'\n').count() + 1
    }

    fn error<T>(&self, span: Option<std::ops::Range<usize>>, message: impl Into<String>) -> Result<T> {
        Err(RuntimeError::Manifest {
            path: self.path.map(Path::to_owned),
            line: span.map(|s| self.line_of(s.start)),
            message: message.into(),
        })
    }
}

impl Manifest {
    /// Read and validate a manifest file.
    pub fn load(path: &Path) -> Result<Manifest> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| RuntimeError::io(format!("reading manifest {}", path.display()), e))?;
        Manifest::parse(&text, Some(path))
    }

    /// Parse and validate manifest text (`path` is only used in errors).
    #[expect(clippy::too_many_lines, reason = "one check after another, in file order")]
    pub fn parse(text: &str, path: Option<&Path>) -> Result<Manifest> {
        let src = Source { text, path };
        let raw: RawManifest = match toml::from_str(text) {
            Ok(raw) => raw,
            Err(e) => return src.error(e.span(), e.message().trim().to_owned()),
        };
        let runtime = raw.runtime;
        let namespace = match runtime.namespace {
            Some(ns) => {
                if let Err(e) = varve_log::validate_name(ns.get_ref(), false) {
                    return src.error(Some(ns.span()), format!("runtime.namespace: {e}"));
                }
                ns.into_inner()
            }
            None => "default".to_owned(),
        };
        let concurrency = match runtime.concurrency {
            Some(c) => match usize::try_from(*c.get_ref()) {
                Ok(n) if (1..=crate::worker::CONCURRENCY_MAX).contains(&n) => n,
                _ => {
                    return src.error(
                        Some(c.span()),
                        format!("runtime.concurrency must be between 1 and {}", crate::worker::CONCURRENCY_MAX),
                    )
                }
            },
            None => 4,
        };
        let defaults = crate::Backlog::default();
        let backlog = crate::Backlog {
            max: runtime.backlog_max.map_or(defaults.max, |n| usize::try_from(n).unwrap_or(usize::MAX)),
            wait: runtime.backlog_wait_ms.map_or(defaults.wait, Duration::from_millis),
        };
        let events_keep = match runtime.events_keep {
            None => None,
            Some(keep) => match u64::try_from(*keep.get_ref()) {
                Ok(n) if n >= 1 => Some(n),
                _ => {
                    return src.error(
                        Some(keep.span()),
                        "runtime.events_keep must be at least 1 (leave it out to keep every event)",
                    )
                }
            },
        };
        let events_keep_for = match runtime.events_keep_for {
            None => None,
            Some(age) => match humantime::parse_duration(age.get_ref()) {
                Ok(d) if !d.is_zero() => Some(d),
                Ok(_) => {
                    return src.error(
                        Some(age.span()),
                        "runtime.events_keep_for must be longer than 0 (leave it out to keep events of any age)",
                    )
                }
                Err(e) => {
                    return src.error(
                        Some(age.span()),
                        format!(
                            "runtime.events_keep_for is {:?}, not a duration ({e}); write one such as \"90s\", \"12h\" or \"7d\"",
                            age.get_ref()
                        ),
                    )
                }
            },
        };
        let delay = Duration::from_millis(runtime.group_commit_delay_ms.unwrap_or(5));
        let sync = match runtime.sync.as_ref().map(|s| (s.get_ref().as_str(), s.span())) {
            None | Some(("always", _)) => SyncPolicy::Always,
            Some(("group", _)) => SyncPolicy::Group(delay),
            Some(("never", _)) => SyncPolicy::Never,
            Some((other, span)) => {
                return src
                    .error(Some(span), format!("runtime.sync is {other:?}: use \"always\", \"group\" or \"never\""))
            }
        };
        let host = match runtime.host_id {
            Some(h) => match u64::from_str_radix(h.get_ref(), 16) {
                Ok(host) => Some(host),
                Err(_) => return src.error(Some(h.span()), "runtime.host_id must be up to 16 hex digits"),
            },
            None => None,
        };
        let mut names: BTreeMap<String, &'static str> = BTreeMap::new();
        let mut logs = Vec::new();
        for log in raw.log {
            if let Err(e) = varve_log::validate_name(log.name.get_ref(), false) {
                return src.error(Some(log.name.span()), format!("log name: {e}"));
            }
            if names.insert(log.name.get_ref().clone(), "log").is_some() {
                return src.error(Some(log.name.span()), format!("log {:?} is declared twice", log.name.get_ref()));
            }
            let on_full = match log.on_full.as_ref().map(|s| (s.get_ref().as_str(), s.span())) {
                None | Some(("refuse", _)) => OnFull::Refuse,
                Some(("overwrite", _)) => OnFull::Overwrite,
                Some((other, span)) => {
                    return src.error(Some(span), format!("on_full is {other:?}: use \"refuse\" or \"overwrite\""))
                }
            };
            let config = match log.keep {
                Some(k) => match u64::try_from(*k.get_ref()) {
                    Ok(k) if k >= 1 => LogConfig::keep(k, on_full),
                    _ => return src.error(Some(k.span()), "keep must be at least 1"),
                },
                None if log.on_full.is_some() => {
                    return src.error(Some(log.name.span()), "on_full needs keep (how many records to keep)")
                }
                None => LogConfig::unbounded(),
            };
            logs.push((log.name.into_inner(), config));
        }
        let mut topics = Vec::new();
        for topic in raw.topic {
            if let Err(e) = varve_log::validate_name(topic.name.get_ref(), false) {
                return src.error(Some(topic.name.span()), format!("topic name: {e}"));
            }
            if let Some(kind) = names.insert(topic.name.get_ref().clone(), "topic") {
                return src.error(
                    Some(topic.name.span()),
                    format!("topic {:?} is already declared as a {kind}", topic.name.get_ref()),
                );
            }
            topics.push(topic.name.into_inner());
        }
        let mut handlers = Vec::new();
        let mut handler_names = BTreeSet::new();
        for h in raw.handler {
            let line = src.line_of(h.name.span().start);
            if let Err(e) = varve_log::validate_name(h.name.get_ref(), false) {
                return src.error(Some(h.name.span()), format!("handler name: {e}"));
            }
            if !handler_names.insert(h.name.get_ref().clone()) {
                return src.error(Some(h.name.span()), format!("handler {:?} is declared twice", h.name.get_ref()));
            }
            let name = h.name.get_ref().clone();
            let source = match (h.log, h.topic) {
                (Some(s), None) | (None, Some(s)) => {
                    if !names.contains_key(s.get_ref()) {
                        return src.error(
                            Some(s.span()),
                            format!(
                                "handler {name:?} subscribes to {:?}, which is not declared: add a [[log]] or [[topic]] with that name",
                                s.get_ref()
                            ),
                        );
                    }
                    s.into_inner()
                }
                (Some(_), Some(t)) => {
                    return src.error(Some(t.span()), format!("handler {name:?} has both log and topic: give one"))
                }
                (None, None) => {
                    return src
                        .error(Some(h.name.span()), format!("handler {name:?} needs log = \"…\" or topic = \"…\""))
                }
            };
            let run = match (h.command, h.builtin) {
                (Some(argv), None) => {
                    let span = argv.span();
                    let argv = argv.into_inner();
                    let Some(program) = argv.first() else {
                        return src.error(Some(span), format!("handler {name:?}: command is empty"));
                    };
                    if crate::command::resolve(program).is_none() {
                        return src.error(
                            Some(span),
                            format!("handler {name:?}: command {program:?} is not an executable file (looked on PATH unless it has a `/`)"),
                        );
                    }
                    HandlerRun::Command(argv)
                }
                (None, Some(b)) => HandlerRun::Builtin(b.into_inner()),
                (Some(_), Some(b)) => {
                    return src
                        .error(Some(b.span()), format!("handler {name:?} has both command and builtin: give one"))
                }
                (None, None) => {
                    return src.error(
                        Some(h.name.span()),
                        format!("handler {name:?} needs command = [\"program\", …] or builtin = \"name\""),
                    )
                }
            };
            let defaults = RetryPolicy::default();
            let attempts = match h.attempts {
                Some(a) => match u32::try_from(*a.get_ref()) {
                    Ok(n) if (1..=crate::retry::ATTEMPTS_MAX).contains(&n) => n,
                    _ => {
                        return src.error(
                            Some(a.span()),
                            format!("attempts must be between 1 and {}", crate::retry::ATTEMPTS_MAX),
                        )
                    }
                },
                None => defaults.attempts,
            };
            let retry = RetryPolicy {
                attempts,
                backoff: h.backoff_ms.map_or(defaults.backoff, Duration::from_millis),
                backoff_max: h.backoff_max_ms.map_or(defaults.backoff_max, Duration::from_millis),
                timeout: match h.timeout_ms {
                    Some(0) => None,
                    Some(ms) => Some(Duration::from_millis(ms)),
                    None => defaults.timeout,
                },
            };
            let replayable = h.replayable.unwrap_or(true);
            handlers.push(ManifestHandler { name, source, run, retry, replayable, line });
        }
        Ok(Manifest {
            path: path.map(Path::to_owned),
            namespace,
            concurrency,
            sync,
            record_reads: runtime.record_reads.unwrap_or(true),
            backlog,
            events_keep,
            events_keep_for,
            host,
            logs,
            topics,
            handlers,
        })
    }

    /// Check every `builtin = "…"` against what `builtins` offers (also done
    /// by [`Manifest::builder`]; call it first to fail before opening a store).
    pub fn check_builtins(&self, builtins: &Builtins) -> Result<()> {
        for h in &self.handlers {
            if let HandlerRun::Builtin(name) = &h.run {
                if !builtins.functions.contains_key(name) {
                    let offered = builtins.names().into_iter().collect::<Vec<_>>().join(", ");
                    return Err(RuntimeError::Manifest {
                        path: self.path.clone(),
                        line: Some(h.line),
                        message: format!(
                            "handler {:?}: builtin {name:?} is not offered by this program (offered: {})",
                            h.name,
                            if offered.is_empty() { "none" } else { &offered }
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    /// The runtime options the manifest sets (`[runtime]`); what it cannot
    /// know — the host id when it names none, the socket, the data
    /// directory, sharing — keeps [`RuntimeOptions::default`]'s value, for
    /// the host to set: `RuntimeOptions { socket, ..manifest.options() }`.
    #[must_use]
    pub fn options(&self) -> RuntimeOptions {
        RuntimeOptions {
            host: self.host.unwrap_or_default(),
            concurrency: self.concurrency,
            record_reads: self.record_reads,
            backlog: self.backlog,
            events_keep: self.events_keep,
            events_keep_for: self.events_keep_for,
            ..RuntimeOptions::default()
        }
    }

    /// A builder over `ns` with everything the manifest declares: its
    /// [`options`](Manifest::options), logs, topics, handlers (builtins
    /// looked up in `builtins`) and their subscriptions. Set host, socket
    /// and data dir on the builder after.
    pub fn builder(&self, ns: Arc<dyn Namespace>, builtins: &Builtins) -> Result<RuntimeBuilder> {
        self.check_builtins(builtins)?;
        let mut builder = RuntimeBuilder::new(ns).options(self.options());
        for (name, config) in &self.logs {
            builder = builder.log(name, *config);
        }
        for topic in &self.topics {
            builder = builder.topic(topic);
        }
        for h in &self.handlers {
            let kind = match &h.run {
                HandlerRun::Command(argv) => HandlerKind::Command(argv.clone()),
                HandlerRun::Builtin(name) => {
                    let Some(f) = builtins.functions.get(name) else {
                        unreachable!("check_builtins passed, so {name:?} is offered")
                    };
                    HandlerKind::Rust(Arc::clone(f))
                }
            };
            builder = builder
                .register(HandlerSpec { name: h.name.clone(), kind, retry: h.retry })
                .subscribe(&h.source, &h.name);
        }
        Ok(builder)
    }
}
