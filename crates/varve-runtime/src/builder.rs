//! Building a runtime: its options, the handlers, logs, topics and
//! subscriptions it starts with, and `start` — validate, create the system
//! logs, check the host id, replay subscriptions, recover unfinished
//! triggers, then start the workers and the socket.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use varve_log::{LogConfig, Namespace, OnFull};

use crate::context::HandlerContext;
use crate::error::{Result, RuntimeError};
use crate::event::HostId;
use crate::handler::{HandlerKind, HandlerResult, HandlerSpec};
use crate::inner::{Inner, WriterState};
use crate::requests::{read_requests, requests_log_config, REQUESTS_LOG};
use crate::retry::{RetryPolicy, ATTEMPTS_MAX};
use crate::runtime::Runtime;
use crate::system_logs::{
    namespace_host, DEAD_LETTERS_LOG, EVENTS_LOG, HOST_LOG, PROGRESS_LOG, PROGRESS_MARKS_KEPT, SUBSCRIPTIONS_LOG,
};
use crate::worker::{WorkState, CONCURRENCY_MAX};

/// Options of a runtime.
#[derive(Clone, Debug)]
pub struct RuntimeOptions {
    /// Names the runtime instance in event ids (Lowgo's host).
    pub host: HostId,
    /// Worker threads (CSPOT's throttle): at most this many handlers run at
    /// once. 0 makes a **writer-only** runtime: appends get their APPEND and
    /// TRIGGER events (so nothing is lost while no runtime runs handlers —
    /// `varve log append` uses this), but no handler runs here; the triggers
    /// wait for the next runtime with workers.
    pub concurrency: usize,
    /// Record READ and LATEST events for handler reads. TRIGGER, FIRING,
    /// DONE, FAILED and APPEND are always recorded: delivery depends on them.
    pub record_reads: bool,
    /// Serve the Unix socket here (external handlers and `varve` CLI appends).
    pub socket: Option<PathBuf>,
    /// The store's data directory, passed to external commands as `VARVE_DATA`.
    pub data_dir: Option<PathBuf>,
    /// Share the namespace with other runtimes (other processes, other
    /// hosts — a NATS `JetStream` store), with this claim lease: see the
    /// `shared` module docs. `None`: this runtime is the namespace's only
    /// writer. Shared runtimes take the namespace's host id (the first
    /// runtime's) instead of refusing another.
    pub shared: Option<Duration>,
    /// How far handlers may fall behind before appends from outside wait.
    pub backlog: Backlog,
    /// Event retention: keep at least the last this many events of
    /// `_events` and trim older ones (never one recovery still needs; see
    /// [`crate::EventRetention`]). `None`: no count rule.
    pub events_keep: Option<u64>,
    /// Event retention by age: keep at least the events of this last
    /// while and trim older ones (with `events_keep` too, an event goes
    /// only when both rules let it). `None`: no age rule; with neither
    /// rule every event is kept.
    pub events_keep_for: Option<Duration>,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            host: 0,
            concurrency: 4,
            record_reads: true,
            socket: None,
            data_dir: None,
            shared: None,
            backlog: Backlog::default(),
            events_keep: None,
            events_keep_for: None,
        }
    }
}

/// Backpressure: when handlers fall behind, appends from outside the
/// handlers wait for room instead of queueing triggers without bound (each
/// queued trigger holds memory until it runs). Appends by handlers never
/// wait (a handler waiting for its own runtime's backlog could wait for
/// ever). A runtime without workers (`concurrency` 0) has no backlog here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backlog {
    /// Most triggers queued or running before an outside append waits; 0:
    /// no limit. Appenders racing past the check may exceed it by their
    /// batches.
    pub max: usize,
    /// How long an outside append waits for room before it is refused with
    /// [`RuntimeError::Backlogged`] (nothing written).
    pub wait: Duration,
}

impl Default for Backlog {
    fn default() -> Self {
        Backlog { max: 100_000, wait: Duration::from_secs(60) }
    }
}

/// Builds a [`Runtime`]: register handlers, logs, topics and subscriptions,
/// then [`start`](RuntimeBuilder::start).
pub struct RuntimeBuilder {
    ns: Arc<dyn Namespace>,
    options: RuntimeOptions,
    handlers: BTreeMap<String, HandlerSpec>,
    logs: Vec<(String, LogConfig)>,
    topics: Vec<String>,
    subscriptions: Vec<(String, String)>,
    error: Option<RuntimeError>,
}

impl RuntimeBuilder {
    /// A runtime over `ns`. The runtime must be the namespace's only writer.
    #[must_use]
    pub fn new(ns: Arc<dyn Namespace>) -> RuntimeBuilder {
        RuntimeBuilder {
            ns,
            options: RuntimeOptions::default(),
            handlers: BTreeMap::new(),
            logs: Vec::new(),
            topics: Vec::new(),
            subscriptions: Vec::new(),
            error: None,
        }
    }

    /// Replace all options.
    #[must_use]
    pub fn options(mut self, options: RuntimeOptions) -> Self {
        self.options = options;
        self
    }

    /// Set [`RuntimeOptions::host`]: the host id in this runtime's event ids. A namespace keeps the
    /// host id it was first served with ([`RuntimeError::HostChanged`] at start otherwise).
    #[must_use]
    pub fn host(mut self, host: HostId) -> Self {
        self.options.host = host;
        self
    }

    /// Set [`RuntimeOptions::concurrency`]: the number of worker threads, 0 (writer-only) to
    /// [`CONCURRENCY_MAX`].
    #[must_use]
    pub fn concurrency(mut self, workers: usize) -> Self {
        self.options.concurrency = workers;
        self
    }

    /// Set [`RuntimeOptions::backlog`]: how far handlers may fall behind before outside appends wait.
    #[must_use]
    pub fn backlog(mut self, backlog: Backlog) -> Self {
        self.options.backlog = backlog;
        self
    }

    /// Set [`RuntimeOptions::events_keep`]: keep at least the last `keep`
    /// events and trim older ones.
    #[must_use]
    pub fn events_keep(mut self, keep: u64) -> Self {
        self.options.events_keep = Some(keep);
        self
    }

    /// Set [`RuntimeOptions::events_keep_for`]: keep at least the events
    /// of the last `age` and trim older ones.
    #[must_use]
    pub fn events_keep_for(mut self, age: Duration) -> Self {
        self.options.events_keep_for = Some(age);
        self
    }

    /// Set [`RuntimeOptions::record_reads`]: whether handler reads are recorded as READ and LATEST events.
    #[must_use]
    pub fn record_reads(mut self, on: bool) -> Self {
        self.options.record_reads = on;
        self
    }

    /// Set [`RuntimeOptions::socket`]: serve the Unix socket at `path` ([`crate::socket`]).
    #[must_use]
    pub fn socket(mut self, path: impl Into<PathBuf>) -> Self {
        self.options.socket = Some(path.into());
        self
    }

    /// Set [`RuntimeOptions::shared`]: share the namespace with other
    /// runtimes; another runtime's claim is left to it for `lease`.
    #[must_use]
    pub fn shared(mut self, lease: Duration) -> Self {
        self.options.shared = Some(lease);
        self
    }

    /// Register a Rust handler by name (not yet subscribed to anything).
    #[must_use]
    pub fn handler<F>(self, name: &str, retry: RetryPolicy, f: F) -> Self
    where
        F: Fn(&mut HandlerContext<'_>) -> HandlerResult + Send + Sync + 'static,
    {
        self.register(HandlerSpec { name: name.to_owned(), kind: HandlerKind::Rust(Arc::new(f)), retry })
    }

    /// Register any handler.
    #[must_use]
    pub fn register(mut self, spec: HandlerSpec) -> Self {
        if self.handlers.contains_key(&spec.name) {
            self.error.get_or_insert(RuntimeError::DuplicateHandler { name: spec.name.clone() });
        }
        self.handlers.insert(spec.name.clone(), spec);
        self
    }

    /// Create this log on start (idempotent for the same config).
    #[must_use]
    pub fn log(mut self, name: &str, config: LogConfig) -> Self {
        self.logs.push((name.to_owned(), config));
        self
    }

    /// Create this topic on start.
    #[must_use]
    pub fn topic(mut self, name: &str) -> Self {
        self.topics.push(name.to_owned());
        self
    }

    /// Subscribe `handler` to `log` on start, unless it already is.
    #[must_use]
    pub fn subscribe(mut self, log: &str, handler: &str) -> Self {
        self.subscriptions.push((log.to_owned(), handler.to_owned()));
        self
    }

    /// Validate, recover unfinished triggers from `_events`, start the
    /// workers (and the socket, if asked) and return the running runtime.
    pub fn start(self) -> Result<Runtime> {
        if let Some(error) = self.error {
            return Err(error);
        }
        let mut options = self.options;
        if options.concurrency > CONCURRENCY_MAX {
            return Err(RuntimeError::InvalidArgument {
                reason: format!("concurrency must be at most {CONCURRENCY_MAX} (0: a writer-only runtime)"),
            });
        }
        for spec in self.handlers.values() {
            varve_log::validate_name(&spec.name, false)?;
            if spec.retry.attempts == 0 || spec.retry.attempts > ATTEMPTS_MAX {
                return Err(RuntimeError::InvalidArgument {
                    reason: format!("handler {:?}: attempts must be between 1 and {ATTEMPTS_MAX}", spec.name),
                });
            }
        }
        let ns = self.ns;
        ns.create_log(EVENTS_LOG, LogConfig::unbounded().system())?;
        ns.create_log(SUBSCRIPTIONS_LOG, LogConfig::unbounded().system())?;
        ns.create_log(PROGRESS_LOG, LogConfig::keep(PROGRESS_MARKS_KEPT, OnFull::Overwrite).system())?;
        ns.create_log(DEAD_LETTERS_LOG, LogConfig::unbounded().system())?;
        ns.create_log(HOST_LOG, LogConfig::unbounded().system())?;
        ns.create_log(REQUESTS_LOG, requests_log_config())?;
        crate::append_index::mark_index_start(ns.as_ref())?;
        if options.shared.is_some() {
            options.host = Inner::adopt_host(ns.as_ref(), options.host)?;
        }
        crate::retention::check_options(ns.as_ref(), &options)?;
        match namespace_host(ns.as_ref())? {
            None => {
                ns.append(HOST_LOG, &options.host.to_le_bytes())?;
            }
            Some(stored) if stored != options.host => {
                return Err(RuntimeError::HostChanged {
                    namespace: ns.name().to_owned(),
                    stored,
                    requested: options.host,
                });
            }
            Some(_) => {}
        }
        create_logs(ns.as_ref(), &self.logs)?;
        let inner = Arc::new(Inner {
            namespace: ns.name().to_owned(),
            ns,
            options,
            handlers: self.handlers.into_iter().map(|(k, v)| (k, Arc::new(v))).collect(),
            writer: Mutex::new(WriterState::default()),
            work: Mutex::new(WorkState::default()),
            work_cv: Condvar::new(),
            idle_cv: Condvar::new(),
            room_cv: Condvar::new(),
            stopping: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            paused: AtomicBool::new(false),
            socket_ops: Mutex::new(std::collections::HashMap::new()),
            kill_commands: AtomicBool::new(false),
            finished_total: AtomicU64::new(0),
            retention: Mutex::default(),
            trimming: Mutex::new(()),
            maps: crate::sorted_map::Maps::default(),
        });
        inner.replay_subscriptions()?;
        inner.lock_writer().requests = read_requests(inner.ns.as_ref())?;
        for topic in &self.topics {
            inner.create_topic(topic)?;
        }
        for (log, handler) in &self.subscriptions {
            if !inner.lock_writer().subscriptions.is_subscribed(log, handler) {
                inner.subscribe(log, handler)?;
            }
        }
        inner.recover()?;
        let mut threads = Vec::new();
        if inner.is_shared() {
            let follower = Arc::clone(&inner);
            let thread = std::thread::Builder::new()
                .name("varve-follower".to_owned())
                .spawn(move || follower.follow())
                .map_err(|e| RuntimeError::io("starting the follower thread", e))?;
            threads.push(thread);
        }
        for i in 0..inner.options.concurrency {
            let worker = Arc::clone(&inner);
            let thread = std::thread::Builder::new()
                .name(format!("varve-worker-{i}"))
                .spawn(move || worker.work_loop())
                .map_err(|e| RuntimeError::io("starting a worker thread", e))?;
            threads.push(thread);
        }
        let socket = match &inner.options.socket {
            Some(path) => Some(crate::socket::serve(Arc::clone(&inner), path)?),
            None => None,
        };
        Ok(Runtime::new(inner, threads, socket))
    }
}

/// The builder's logs, created if absent. As `Runtime::create_log`, a log
/// new here has no sorted map yet: an index an earlier log of its name
/// left (deleted without the runtime) is removed.
fn create_logs(ns: &dyn varve_log::Namespace, logs: &[(String, LogConfig)]) -> Result<()> {
    for (name, config) in logs {
        if ns.log_info(name).is_err() {
            crate::sorted_map::forget_map(ns, name)?;
        }
        ns.create_log(name, *config)?;
    }
    Ok(())
}
