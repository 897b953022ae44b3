//! Prometheus metrics at `/metrics`: requests and their latency per
//! operation and status, records and bytes appended, open watches; and per
//! namespace with a runtime, read at each scrape: its backlog and its event
//! log (events held, trims by event retention, whether the last trim failed);
//! and per open namespace, counted at each scrape, what its journal holds
//! in memory by part and how many logs it has.
//! (An append's latency under `--sync always` is the fsync's, which the
//! journal shares between concurrent appends.)

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// The labels of a request: its operation and status code.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// The operation (`append`, `get`, `scan`, …).
    pub op: &'static str,
    /// The HTTP status answered.
    pub status: u16,
}

/// The labels of a latency: the operation.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OpLabels {
    /// The operation.
    pub op: &'static str,
}

/// The labels of a runtime's metrics: its namespace.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NamespaceLabels {
    /// The namespace the runtime serves.
    pub namespace: String,
}

/// The labels of a part of a journal's memory.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MemoryLabels {
    /// The namespace.
    pub namespace: String,
    /// `log_states`, `names`, `indexes`, `lookup_tables`, `packed_logs`,
    /// `checkpoint_buffer` or `packed_mapped` (the page cache's, not the
    /// heap's; see `varve_log::journal::JournalMemory`).
    pub part: &'static str,
}

/// A runtime's metrics, set at each scrape from its state.
struct RuntimeMetrics {
    backlog: Family<NamespaceLabels, Gauge>,
    events: Family<NamespaceLabels, Gauge>,
    trims: Family<NamespaceLabels, Counter>,
    trim_failing: Family<NamespaceLabels, Gauge>,
    /// Held while a scrape sets them (see [`Metrics::observe_runtimes`]).
    observing: std::sync::Mutex<()>,
}

/// Every metric the server keeps.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<OpLabels, Histogram>,
    /// Records appended (each record of a batch counts).
    pub appended_records: Counter,
    /// Bytes of records appended.
    pub appended_bytes: Counter,
    /// Watches streaming now.
    pub open_watches: Gauge<i64, std::sync::atomic::AtomicI64>,
    /// Logs watched now: one reader each, shared by their watches (set at each scrape).
    pub watched_logs: Gauge<i64, std::sync::atomic::AtomicI64>,
    /// Times a watch fell so far behind its log's reader that it read from the journal instead.
    pub watch_lags: Counter,
    /// Connections open now.
    pub open_connections: Gauge<i64, std::sync::atomic::AtomicI64>,
    runtimes: RuntimeMetrics,
    journal_memory: Family<MemoryLabels, Gauge>,
    journal_logs: Family<NamespaceLabels, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// A fresh registry with every metric registered.
    #[must_use]
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("varve");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register("http_requests", "HTTP requests answered, by operation and status", requests.clone());
        // 25 µs to ~0.8 s.
        let latency =
            Family::<OpLabels, Histogram>::new_with_constructor(|| Histogram::new(exponential_buckets(25e-6, 2.0, 16)));
        registry.register(
            "http_request_duration_seconds",
            "Time from request to response head, by operation",
            latency.clone(),
        );
        let appended_records: Counter<u64, AtomicU64> = Counter::default();
        registry.register("appended_records", "Records appended", appended_records.clone());
        let appended_bytes: Counter<u64, AtomicU64> = Counter::default();
        registry.register("appended_bytes", "Bytes of records appended", appended_bytes.clone());
        let open_watches = Gauge::default();
        registry.register("open_watches", "Watches (SSE streams) open now", open_watches.clone());
        let watched_logs = Gauge::default();
        registry.register("watched_logs", "Logs watched now, each read once for all its watches", watched_logs.clone());
        let watch_lags: Counter<u64, AtomicU64> = Counter::default();
        registry.register(
            "watch_lags",
            "Times a watch fell behind its log's shared reader and caught up from the journal",
            watch_lags.clone(),
        );
        let open_connections = Gauge::default();
        registry.register("open_connections", "Client connections open now", open_connections.clone());
        let runtimes = RuntimeMetrics {
            backlog: Family::default(),
            events: Family::default(),
            trims: Family::default(),
            trim_failing: Family::default(),
            observing: std::sync::Mutex::default(),
        };
        registry.register(
            "runtime_backlog",
            "Triggers a namespace's runtime has not finished (queued, waiting for a retry, or running)",
            runtimes.backlog.clone(),
        );
        registry.register("runtime_events", "Events the runtime's _events log holds now", runtimes.events.clone());
        registry.register(
            "runtime_event_trims",
            "Trims of _events by event retention (events_keep, events_keep_for) since the runtime started",
            runtimes.trims.clone(),
        );
        registry.register(
            "runtime_event_trim_failing",
            "1 when the runtime's last trim of _events failed (the server log has no more; the next check retries)",
            runtimes.trim_failing.clone(),
        );
        let journal_memory = Family::<MemoryLabels, Gauge>::default();
        registry.register(
            "journal_memory_bytes",
            "Bytes an open namespace's journal holds in memory, by part, counted at each scrape (a walk over its logs)",
            journal_memory.clone(),
        );
        let journal_logs = Family::<NamespaceLabels, Gauge>::default();
        registry.register("journal_logs", "Logs in an open namespace", journal_logs.clone());
        Metrics {
            registry,
            requests,
            latency,
            appended_records,
            appended_bytes,
            open_watches,
            watched_logs,
            watch_lags,
            open_connections,
            runtimes,
            journal_memory,
            journal_logs,
        }
    }

    /// Set the runtimes' metrics from their state now (a runtime whose
    /// state cannot be read keeps its last values). One scrape at a time:
    /// the trims counter is moved up by what the runtime counted since.
    pub fn observe_runtimes(&self, runtimes: &[(String, varve_runtime::RuntimeHandle)]) {
        let _one_at_a_time = self.runtimes.observing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for (namespace, runtime) in runtimes {
            self.observe_runtime(namespace, runtime);
        }
    }

    fn observe_runtime(&self, namespace: &str, runtime: &varve_runtime::RuntimeHandle) {
        let labels = NamespaceLabels { namespace: namespace.to_owned() };
        let m = &self.runtimes;
        m.backlog.get_or_create(&labels).set(i64::try_from(runtime.backlog()).unwrap_or(i64::MAX));
        let Ok(retention) = runtime.event_retention() else { return };
        let held = if retention.latest >= retention.earliest { retention.latest - retention.earliest + 1 } else { 0 };
        m.events.get_or_create(&labels).set(i64::try_from(held).unwrap_or(i64::MAX));
        // A namespace's runtime lives as long as the server holds it open,
        // so its count only grows.
        let trims = m.trims.get_or_create(&labels);
        trims.inc_by(retention.trims.saturating_sub(trims.get()));
        m.trim_failing.get_or_create(&labels).set(i64::from(retention.last_error.is_some()));
    }

    /// Set the journals' memory metrics from what each holds now.
    pub fn observe_journals(&self, journals: &[(String, varve_log::JournalNamespace)]) {
        for (namespace, journal) in journals {
            let memory = journal.memory();
            let parts = [
                ("log_states", memory.log_states),
                ("names", memory.names),
                ("indexes", memory.indexes),
                ("lookup_tables", memory.lookup_tables),
                ("packed_logs", memory.packed_logs),
                ("checkpoint_buffer", memory.checkpoint_buffer),
                ("packed_mapped", memory.packed_mapped),
            ];
            for (part, bytes) in parts {
                let labels = MemoryLabels { namespace: namespace.clone(), part };
                self.journal_memory.get_or_create(&labels).set(i64::try_from(bytes).unwrap_or(i64::MAX));
            }
            let labels = NamespaceLabels { namespace: namespace.clone() };
            self.journal_logs.get_or_create(&labels).set(i64::try_from(memory.logs).unwrap_or(i64::MAX));
        }
    }

    /// Count one answered request.
    pub fn observe(&self, op: &'static str, status: u16, elapsed: Duration) {
        self.requests.get_or_create(&RequestLabels { op, status }).inc();
        self.latency.get_or_create(&OpLabels { op }).observe(elapsed.as_secs_f64());
    }

    /// The text exposition format.
    #[must_use]
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}
