//! `varve serve` on loopback (`varve bench serve`, `make bench-serve`),
//! beside the embedded journal and a JetStream server, all in the same run
//! on the same machine. Progress lines go to stderr as each figure is
//! measured.
//!
//! What runs: a real `varve serve` process (the `varve` binary,
//! [`ServeBenchOptions::varve_program`], with `--listen 127.0.0.1:0 --data
//! SCRATCH --sync POLICY`), reached through the remote backend
//! (`varve_remote`, blocking HTTP/1.1 with keep-alive); the embedded journal
//! (`JournalNamespace`) in this process; and, when
//! [`ServeBenchOptions::nats_server`] names one, a real `nats-server` with
//! JetStream (file storage, one stream, R=1) reached through `async-nats`.
//!
//! | figure | Varve (served) | embedded journal | JetStream |
//! |---|---|---|---|
//! | appends/s, 1, 16 and 64 clients, one record per request | `append`, each client a thread with its own connection | `append` by as many threads on one namespace | `publish`, then await its ack |
//! | the same, 100 records per request | `append_batch` of 100 | `append_batch` of 100 | 100 `publish`es, then await their 100 acks |
//! | `get` p50/p99 | one client, random seqs of a 100,000-record log | the same, in process | — |
//! | watch delivery p50/p99 | 100 remote watches of one log, one appender | 100 in-process watches | — |
//! | sorted-map insert p50/p99 | `varve_pds::SortedMap` on a served namespace, one client | the same map in process | — |
//!
//! Durability is compared pairwise: `--sync group` (acknowledged once
//! written, fsynced within 5 ms) beside JetStream's default (acknowledged
//! once stored, fsynced every 2 minutes) and the embedded journal's
//! `Group(5 ms)`; `--sync always` (acknowledged once fsynced; concurrent
//! appends share an fsync) beside `sync_interval: always` and `Always`.
//! Records are 100 bytes. Every append figure starts from an empty log
//! (a new log in the server's and in the embedded namespace, each of
//! which grows through the run; a purged stream).
//!
//! A figure is the median of the trials; within a trial the three systems
//! run one after another, in an order that rotates from trial to trial, so
//! drift on a shared machine hits each alike.

mod jetstream;
mod measure;
mod processes;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use varve_log::{JournalNamespace, JournalOptions, LogConfig, Namespace, Store, SyncPolicy};
use varve_remote::{RemoteOptions, RemoteStore};

use self::jetstream::JetStream;
use self::measure::{append_rate, fill, get_latency, payload, threaded_rate, watch_latency, FanOut, BATCH_RECORDS};
use self::processes::{nats_server_version, NatsServer, VarveServer};
use crate::stats::{load_average, median, median_each, process_cpu};
use crate::table::{ratio_cell, Align, Table};
use crate::{fresh_dir, BenchError, IoContext, Result};

/// The namespace every figure uses, on every system.
const NAMESPACE: &str = "bench";
/// Concurrent clients of the append figures.
const CLIENTS: [usize; 3] = [1, 16, 64];
/// Group commit delay of `varve serve --sync group`, and of the embedded baseline.
const GROUP_DELAY: Duration = Duration::from_millis(5);

/// What to run.
pub struct ServeBenchOptions {
    /// Directory for the scratch data of every server (deleted after).
    pub dir: PathBuf,
    /// The `varve` binary, run as `varve serve` (the benchmark's own executable).
    pub varve_program: PathBuf,
    /// A `nats-server` binary; without one the JetStream figures are
    /// skipped, and the report says so.
    pub nats_server: Option<PathBuf>,
    /// Short runs and one trial: a smoke run of seconds, not figures to publish.
    pub quick: bool,
    /// Run only one part: `append` (both shapes), `append-single`,
    /// `append-batch`, `get`, `watch` or `map`.
    pub only: Option<String>,
}

struct Sizes {
    trials: usize,
    append_budget: Duration,
    get_records: u64,
    get_samples: usize,
    get_warmup: usize,
    fan_out: FanOut,
    map_inserts: usize,
}

impl Sizes {
    fn new(quick: bool) -> Sizes {
        if quick {
            Sizes {
                trials: 1,
                append_budget: Duration::from_millis(200),
                get_records: 5_000,
                get_samples: 1_000,
                get_warmup: 100,
                fan_out: FanOut { subscribers: 100, records: 30, interval: Duration::from_millis(5), warmup: 5 },
                map_inserts: 200,
            }
        } else {
            Sizes {
                trials: 3,
                append_budget: Duration::from_secs(2),
                get_records: 100_000,
                get_samples: 20_000,
                get_warmup: 1_000,
                fan_out: FanOut { subscribers: 100, records: 400, interval: Duration::from_millis(5), warmup: 20 },
                map_inserts: 2_000,
            }
        }
    }
}

/// The durability pairs compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Durability {
    /// `--sync group`, JetStream's default `sync_interval`, `Group(5 ms)`.
    Group,
    /// `--sync always`, `sync_interval: always`, `Always`.
    Always,
}

impl Durability {
    fn flag(self) -> &'static str {
        match self {
            Durability::Group => "group",
            Durability::Always => "always",
        }
    }

    fn policy(self) -> SyncPolicy {
        match self {
            Durability::Group => SyncPolicy::Group(GROUP_DELAY),
            Durability::Always => SyncPolicy::Always,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Durability::Group => "--sync group / JetStream default sync / embedded Group(5 ms)",
            Durability::Always => "--sync always / JetStream sync_interval: always / embedded Always",
        }
    }
}

/// A goal a figure is held to.
#[derive(Clone, Debug, Serialize)]
pub struct Goal {
    /// The goal, as text (`p50 ≤ 100 µs`).
    pub text: String,
    /// Whether the figure meets it.
    pub met: bool,
}

/// One line of the table.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Stable key for scripts.
    pub key: String,
    /// What was measured, for people.
    pub what: String,
    /// The unit of every figure of the row: `rec/s` or `µs`.
    pub unit: &'static str,
    /// The figure through `varve serve` (the median of the trials).
    pub serve: f64,
    /// The embedded journal's figure for the same work, same run; `None` where there is none.
    pub embedded: Option<f64>,
    /// JetStream's figure at the same durability, same run; `None` where
    /// there is none or no `nats-server` was given.
    pub jetstream: Option<f64>,
    /// CPU time of the `varve serve` process per record (µs; user +
    /// system, all threads), the median of the trials: how much of the
    /// machine the server itself needs, which a busy machine disturbs less
    /// than wall time. `None` where not measured.
    pub serve_cpu_us: Option<f64>,
    /// The same for the `nats-server` process.
    pub jetstream_cpu_us: Option<f64>,
    /// For rates higher is better; for latencies lower is better.
    pub higher_is_better: bool,
    /// The goals this figure is held to (none for reference figures).
    pub goals: Vec<Goal>,
}

impl Row {
    fn new(key: String, what: String, unit: &'static str, serve: f64, higher_is_better: bool) -> Row {
        Row {
            key,
            what,
            unit,
            serve,
            embedded: None,
            jetstream: None,
            serve_cpu_us: None,
            jetstream_cpu_us: None,
            higher_is_better,
            goals: Vec::new(),
        }
    }

    fn goal(mut self, text: &str, met: bool) -> Row {
        self.goals.push(Goal { text: text.to_owned(), met });
        self
    }
}

/// Every figure measured, in run order, with what ran and the machine's load around the run.
#[derive(Clone, Debug, Serialize)]
pub struct ServeReport {
    /// The command that produced the report (`varve bench serve`).
    pub command: &'static str,
    /// Whether this was a quick smoke run, not figures to publish.
    pub quick: bool,
    /// Trials per figure (the figure is their median).
    pub trials: usize,
    /// `nats-server --version`, when JetStream was measured.
    pub nats_server: Option<String>,
    /// Why the JetStream figures are missing, when they are.
    pub jetstream_skipped: Option<String>,
    /// `/proc/loadavg` (1, 5, 15 min) before the run; `None` where it cannot be read.
    pub load_before: Option<[f64; 3]>,
    /// `/proc/loadavg` (1, 5, 15 min) after the run; `None` where it cannot be read.
    pub load_after: Option<[f64; 3]>,
    /// One row per figure.
    pub rows: Vec<Row>,
}

/// The systems an append figure runs on.
#[derive(Clone, Copy, Debug)]
enum System {
    Served,
    Embedded,
    JetStream,
}

/// What the append figures of one durability run on. Every measurement
/// starts from an empty store that is deleted after it — a new `varve
/// serve` with an empty data directory, a new embedded namespace, a purged
/// stream — so each starts alike, and the scratch disk holds one
/// measurement's records at a time (a 2 s run of 64 embedded clients
/// writes about a gigabyte).
struct Systems<'a> {
    program: &'a Path,
    base: &'a Path,
    durability: Durability,
    jetstream: Option<JetStream<'a>>,
    /// The server `jetstream` publishes to.
    nats: Option<NatsServer>,
}

/// CPU time a process takes during `work`; `None` without a process or when
/// `/proc` cannot be read.
fn with_cpu<T>(pid: Option<u32>, work: impl FnOnce() -> Result<T>) -> Result<(T, Option<Duration>)> {
    let before = pid.and_then(process_cpu);
    let done = work()?;
    let cpu = before.zip(pid.and_then(process_cpu)).map(|(before, after)| after.saturating_sub(before));
    Ok((done, cpu))
}

impl Systems<'_> {
    /// Appends/s of `clients` clients, `batch` records per request, on
    /// `system`, and the CPU time its server process took per record (µs)
    /// where there is one.
    fn append_rate(
        &mut self,
        system: System,
        clients: usize,
        batch: usize,
        budget: Duration,
    ) -> Result<(f64, Option<f64>)> {
        let (done, cpu) = match system {
            System::Served => {
                let dir = fresh_dir(self.base, "served")?;
                let served = VarveServer::start(self.program, &dir, self.durability.flag())?;
                let uri = &served.uri;
                let store = RemoteStore::connect(RemoteOptions::from_uri(uri, None)?)?;
                store.namespace(NAMESPACE)?.create_log("a", LogConfig::unbounded())?;
                let measured = with_cpu(Some(served.pid()), || {
                    append_rate(clients, batch, budget, "a", &|_| {
                        Ok(RemoteStore::connect(RemoteOptions::from_uri(uri, None)?)?.namespace(NAMESPACE)?)
                    })
                })?;
                drop(served);
                std::fs::remove_dir_all(&dir).ok();
                measured
            }
            System::Embedded => {
                let dir = fresh_dir(self.base, "embedded")?;
                let options = JournalOptions { sync: self.durability.policy(), ..JournalOptions::default() };
                let ns: Arc<dyn Namespace> = Arc::new(JournalNamespace::open(&dir, NAMESPACE, options)?);
                ns.create_log("a", LogConfig::unbounded())?;
                let done = append_rate(clients, batch, budget, "a", &|_| Ok(Arc::clone(&ns)))?;
                drop(ns);
                std::fs::remove_dir_all(&dir).ok();
                (done, None)
            }
            System::JetStream => match &self.jetstream {
                Some(jetstream) => with_cpu(self.nats.as_ref().map(NatsServer::pid), || {
                    jetstream.publish_rate(clients, batch, budget)
                })?,
                None => return Err(BenchError::Check("JetStream measured without a nats-server".into())),
            },
        };
        #[expect(clippy::cast_precision_loss, reason = "counts to rates")]
        let cpu_us = cpu.map(|cpu| cpu.as_secs_f64() * 1e6 / done.records.max(1) as f64);
        Ok((done.rate(), cpu_us))
    }
}

/// Run the benchmark (the parts `options.only` selects).
pub fn run(options: &ServeBenchOptions) -> Result<ServeReport> {
    std::fs::create_dir_all(&options.dir).with_context(|| format!("creating {}", options.dir.display()))?;
    let base = options.dir.join("serve");
    let sizes = Sizes::new(options.quick);
    let load_before = load_average();
    eprintln!(
        "varve bench serve: scratch in {}, {} trial(s) per figure, load average before {:?}",
        base.display(),
        sizes.trials,
        load_before.unwrap_or_default()
    );
    let (nats_server, jetstream_skipped) = match &options.nats_server {
        Some(program) => (Some(nats_server_version(program)?), None),
        None => (
            None,
            Some("no --nats-server given (`make bench-serve` installs one): the JetStream figures are skipped".into()),
        ),
    };
    match (&nats_server, &jetstream_skipped) {
        (Some(version), _) => eprintln!("  JetStream: nats-server {version}"),
        (None, Some(reason)) => eprintln!("  JetStream: {reason}"),
        (None, None) => {}
    }
    let runtime = match options.nats_server {
        Some(_) => Some(
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .thread_name("bench-nats-client")
                .build()
                .with_context(|| "starting the JetStream client's runtime".into())?,
        ),
        None => None,
    };
    let wanted = |part: &str| options.only.as_deref().is_none_or(|only| only == part);
    let shapes: Vec<usize> = match options.only.as_deref() {
        None | Some("append") => vec![1, BATCH_RECORDS],
        Some("append-single") => vec![1],
        Some("append-batch") => vec![BATCH_RECORDS],
        Some(_) => Vec::new(),
    };
    let mut rows = Vec::new();
    let measured = (|| -> Result<()> {
        if !shapes.is_empty() {
            for durability in [Durability::Group, Durability::Always] {
                let nats = options.nats_server.as_deref().zip(runtime.as_ref());
                append_rows(options, &base, &sizes, durability, nats, &shapes, &mut rows)?;
            }
        }
        if wanted("get") {
            get_rows(options, &base, &sizes, &mut rows)?;
        }
        if wanted("watch") {
            watch_rows(options, &base, &sizes, &mut rows)?;
        }
        if wanted("map") {
            map_rows(options, &base, &sizes, &mut rows)?;
        }
        Ok(())
    })();
    // The scratch data goes, whether the run finished or not: it can be gigabytes.
    std::fs::remove_dir_all(&base).ok();
    measured?;
    Ok(ServeReport {
        command: "varve bench serve",
        quick: options.quick,
        trials: sizes.trials,
        nats_server,
        jetstream_skipped,
        load_before,
        load_after: load_average(),
        rows,
    })
}

fn start_served(options: &ServeBenchOptions, base: &Path, durability: Durability) -> Result<VarveServer> {
    let data = fresh_dir(base, &format!("served-{}", durability.flag()))?;
    let served = VarveServer::start(&options.varve_program, &data, durability.flag())?;
    eprintln!("  varve serve --sync {} at {} (pid {})", durability.flag(), served.uri, served.pid());
    Ok(served)
}

fn append_rows<'a>(
    options: &ServeBenchOptions,
    base: &'a Path,
    sizes: &Sizes,
    durability: Durability,
    nats: Option<(&Path, &'a tokio::runtime::Runtime)>,
    shapes: &[usize],
    rows: &mut Vec<Row>,
) -> Result<()> {
    let (nats_process, jetstream) = match nats {
        Some((program, runtime)) => {
            let dir = fresh_dir(base, &format!("nats-{}", durability.flag()))?;
            let process = NatsServer::start(program, &dir, durability == Durability::Always)?;
            let jetstream = JetStream::create(runtime, &process.addr)?;
            eprintln!("  nats-server -js at {} ({})", process.addr, durability_nats(durability));
            (Some(process), Some(jetstream))
        }
        None => (None, None),
    };
    eprintln!("  a new varve serve --sync {} and embedded namespace for each measurement", durability.flag());
    let mut systems = Systems { program: &options.varve_program, base, durability, jetstream, nats: nats_process };
    let systems_measured: Vec<System> = if systems.jetstream.is_some() {
        vec![System::Served, System::Embedded, System::JetStream]
    } else {
        vec![System::Served, System::Embedded]
    };
    for &batch in shapes {
        for clients in CLIENTS {
            let mut figures: [Vec<f64>; 3] = Default::default();
            let mut cpu: [Vec<f64>; 3] = Default::default();
            for trial in 0..sizes.trials {
                // Rotate which system goes first, so none always runs on a warmer (or busier) machine.
                for k in 0..systems_measured.len() {
                    let system = systems_measured[(trial + k) % systems_measured.len()];
                    let (rate, cpu_us) = systems.append_rate(system, clients, batch, sizes.append_budget)?;
                    figures[system as usize].push(rate);
                    cpu[system as usize].extend(cpu_us);
                }
            }
            let [served, embedded, jetstream] = figures.map(median);
            let cpu_of = |system: System| {
                let samples = &cpu[system as usize];
                (!samples.is_empty()).then(|| median(samples.clone()))
            };
            let shape = if batch == 1 { "1 record/request".to_owned() } else { format!("{batch} records/request") };
            eprintln!(
                "  append, {clients:>2} client(s), {shape:<19} --sync {:<6}: served {served:>9.0}/s  embedded {embedded:>9.0}/s  JetStream {}",
                durability.flag(),
                if systems.jetstream.is_some() { format!("{jetstream:>9.0}/s") } else { "—".into() }
            );
            let mut row = Row::new(
                format!("append_{}_c{clients}_b{batch}", durability.flag()),
                format!("appends/s, {clients} client(s), {shape}, {}", durability.label()),
                "rec/s",
                served,
                true,
            );
            row.embedded = Some(embedded);
            row.serve_cpu_us = cpu_of(System::Served);
            if systems.jetstream.is_some() {
                row.jetstream = Some(jetstream);
                row.jetstream_cpu_us = cpu_of(System::JetStream);
                row = row.goal("≥ 1.5× JetStream", served >= 1.5 * jetstream);
            }
            if clients == 16 && batch > 1 && durability == Durability::Group {
                row = row.goal("≥ 200,000/s", served >= 200_000.0);
            }
            rows.push(row);
        }
    }
    if durability == Durability::Group && shapes.contains(&1) {
        rows.push(identified_row(options, base, sizes)?);
    }
    Ok(())
}

fn durability_nats(durability: Durability) -> &'static str {
    match durability {
        Durability::Group => "default sync_interval (2 min)",
        Durability::Always => "sync_interval: always",
    }
}

/// Appends with a request id (`Varve-Request-Id`), which the server runs
/// one at a time per namespace: 16 clients, one record per request.
fn identified_row(options: &ServeBenchOptions, base: &Path, sizes: &Sizes) -> Result<Row> {
    const CLIENTS: usize = 16;
    let served = start_served(options, base, Durability::Group)?;
    let log = "a";
    RemoteStore::connect(RemoteOptions::from_uri(&served.uri, None)?)?
        .namespace(NAMESPACE)?
        .create_log(log, LogConfig::unbounded())?;
    let value = payload(0);
    let uri = &served.uri;
    let mut rates = Vec::new();
    for trial in 0..sizes.trials {
        let done = threaded_rate(
            CLIENTS,
            sizes.append_budget,
            &|index| {
                Ok((index, RemoteStore::connect(RemoteOptions::from_uri(uri, None)?)?.remote_namespace(NAMESPACE)?))
            },
            &|(index, ns), call| {
                let id = format!("t{trial}-c{index}-{call}");
                ns.append_batch_once(&[(log, &value[..])], &id)?;
                Ok(1)
            },
        )?;
        rates.push(done.rate());
    }
    let rate = median(rates);
    eprintln!("  identified append (Varve-Request-Id), {CLIENTS} clients, 1 record/request, --sync group: {rate:.0}/s");
    Ok(Row::new(
        "append_identified_group_c16_b1".into(),
        format!("appends/s with a request id (Varve-Request-Id), {CLIENTS} clients, 1 record/request, --sync group"),
        "rec/s",
        rate,
        true,
    ))
}

fn get_rows(options: &ServeBenchOptions, base: &Path, sizes: &Sizes, rows: &mut Vec<Row>) -> Result<()> {
    let served = start_served(options, base, Durability::Group)?;
    let remote = RemoteStore::connect(RemoteOptions::from_uri(&served.uri, None)?)?.namespace(NAMESPACE)?;
    let dir = fresh_dir(base, "embedded-get")?;
    let options = JournalOptions { sync: Durability::Group.policy(), ..JournalOptions::default() };
    let embedded = JournalNamespace::open(&dir, NAMESPACE, options)?;
    for ns in [remote.as_ref(), &embedded as &dyn Namespace] {
        ns.create_log("g", LogConfig::unbounded())?;
        fill(ns, "g", sizes.get_records)?;
    }
    let (mut ours, mut theirs, mut cpu) = (Vec::new(), Vec::new(), Vec::new());
    for trial in 0..sizes.trials {
        let seed = trial as u64;
        let cpu_before = process_cpu(served.pid());
        ours.push(get_latency(remote.as_ref(), "g", sizes.get_records, sizes.get_samples, sizes.get_warmup, seed)?);
        if let (Some(before), Some(after)) = (cpu_before, process_cpu(served.pid())) {
            #[expect(clippy::cast_precision_loss, reason = "counts to rates")]
            cpu.push(after.saturating_sub(before).as_secs_f64() * 1e6 / (sizes.get_samples + sizes.get_warmup) as f64);
        }
        theirs.push(get_latency(&embedded, "g", sizes.get_records, sizes.get_samples, sizes.get_warmup, seed)?);
    }
    let (ours, theirs) = (median_each(&ours), median_each(&theirs));
    eprintln!(
        "  get, random seqs of {} records: served p50 {:.1} µs p99 {:.1} µs; embedded p50 {:.2} µs p99 {:.2} µs",
        sizes.get_records,
        ours[0] / 1e3,
        ours[1] / 1e3,
        theirs[0] / 1e3,
        theirs[1] / 1e3
    );
    for (index, label) in [(0, "p50"), (1, "p99")] {
        let mut row = Row::new(
            format!("get_{label}_us"),
            format!(
                "get {label}, 1 client, keep-alive, random seqs of {} records of 100 B (page cache)",
                sizes.get_records
            ),
            "µs",
            ours[index] / 1e3,
            false,
        );
        row.embedded = Some(theirs[index] / 1e3);
        row.serve_cpu_us = (!cpu.is_empty()).then(|| median(cpu.clone()));
        if index == 0 {
            row = row.goal("p50 ≤ 100 µs", ours[0] <= 100e3);
        }
        rows.push(row);
    }
    drop(embedded);
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}

fn watch_rows(options: &ServeBenchOptions, base: &Path, sizes: &Sizes, rows: &mut Vec<Row>) -> Result<()> {
    let served = start_served(options, base, Durability::Group)?;
    let store = RemoteStore::connect(RemoteOptions::from_uri(&served.uri, None)?)?;
    let remote = store.namespace(NAMESPACE)?;
    let dir = fresh_dir(base, "embedded-watch")?;
    let journal_options = JournalOptions { sync: Durability::Group.policy(), ..JournalOptions::default() };
    let embedded: Arc<dyn Namespace> = Arc::new(JournalNamespace::open(&dir, NAMESPACE, journal_options)?);
    let fan_out = &sizes.fan_out;
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for trial in 0..sizes.trials {
        let log = format!("w{trial}");
        remote.create_log(&log, LogConfig::unbounded())?;
        embedded.create_log(&log, LogConfig::unbounded())?;
        // Each watcher has a store (a connection pool) of its own, as separate clients would.
        ours.push(watch_latency(remote.as_ref(), &log, fan_out, &|| {
            Ok(RemoteStore::connect(RemoteOptions::from_uri(&served.uri, None)?)?.namespace(NAMESPACE)?)
        })?);
        theirs.push(watch_latency(embedded.as_ref(), &log, fan_out, &|| Ok(Arc::clone(&embedded)))?);
    }
    let (ours, theirs) = (median_each(&ours), median_each(&theirs));
    eprintln!(
        "  watch fan-out to {} watchers: served p50 {:.0} µs p99 {:.0} µs; embedded p50 {:.0} µs p99 {:.0} µs",
        fan_out.subscribers,
        ours[0] / 1e3,
        ours[1] / 1e3,
        theirs[0] / 1e3,
        theirs[1] / 1e3
    );
    let rate = 1.0 / fan_out.interval.as_secs_f64();
    for (index, label) in [(0, "p50"), (1, "p99")] {
        let mut row = Row::new(
            format!("watch_delivery_{label}_us"),
            format!(
                "watch delivery {label}, append start → each of {} watchers (remote watch: a reader thread each), 1 appender at {rate:.0}/s, {} records × {} watchers per trial, --sync group",
                fan_out.subscribers,
                fan_out.records - fan_out.warmup,
                fan_out.subscribers
            ),
            "µs",
            ours[index] / 1e3,
            false,
        );
        row.embedded = Some(theirs[index] / 1e3);
        if index == 0 {
            row = row.goal("p50 ≤ 1 ms", ours[0] <= 1e6);
        }
        rows.push(row);
    }
    drop(served);
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// A versioned structure over the network: `map_inserts` distinct keys
/// into a new red-black `SortedMap<u64, u64>` (`extra` 5) per trial, each
/// insert timed, through a served namespace and in process.
fn map_rows(options: &ServeBenchOptions, base: &Path, sizes: &Sizes, rows: &mut Vec<Row>) -> Result<()> {
    let served = start_served(options, base, Durability::Group)?;
    let remote = RemoteStore::connect(RemoteOptions::from_uri(&served.uri, None)?)?.namespace(NAMESPACE)?;
    let dir = fresh_dir(base, "embedded-map")?;
    let journal_options = JournalOptions { sync: Durability::Group.policy(), ..JournalOptions::default() };
    let embedded: Arc<dyn Namespace> = Arc::new(JournalNamespace::open(&dir, NAMESPACE, journal_options)?);
    let (mut inserts, mut gets) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
    for trial in 0..sizes.trials {
        let name = format!("m{trial}");
        for (index, ns) in [&remote, &embedded].into_iter().enumerate() {
            inserts[index].push(map_insert_latency(Arc::clone(ns), &name, sizes.map_inserts)?);
            gets[index].push(map_cold_get_latency(Arc::clone(ns), &name, sizes.map_inserts, trial as u64)?);
        }
    }
    let figures = [("insert", inserts), ("cold_get", gets)].map(|(what, [ours, theirs])| {
        let (ours, theirs) = (median_each(&ours), median_each(&theirs));
        eprintln!(
            "  sorted-map {what}, {} keys: served p50 {:.0} µs p99 {:.0} µs; embedded p50 {:.1} µs p99 {:.1} µs",
            sizes.map_inserts,
            ours[0] / 1e3,
            ours[1] / 1e3,
            theirs[0] / 1e3,
            theirs[1] / 1e3
        );
        (what, ours, theirs)
    });
    for (what, ours, theirs) in figures {
        for (index, label) in [(0, "p50"), (1, "p99")] {
            let text = match what {
                "insert" => format!(
                    "sorted-map insert {label} (PEDaLS red-black map, extra 5), 1 client, {} distinct keys into a new map, --sync group",
                    sizes.map_inserts
                ),
                _ => format!(
                    "sorted-map get {label}, a handle caching {MAP_COLD_CACHE} node copies (every node read from the logs), random keys of that map"
                ),
            };
            let mut row = Row::new(format!("map_{what}_{label}_us"), text, "µs", ours[index] / 1e3, false);
            row.embedded = Some(theirs[index] / 1e3);
            rows.push(row);
        }
    }
    drop(served);
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// Node copies cached by the handle of the cold-get figure: too few to
/// hold a path, so each get reads every node it visits from the logs (as a
/// map much larger than its cache does, or a new handle).
const MAP_COLD_CACHE: usize = 2;

/// p50 and p99 in nanoseconds of `count` inserts into a new map `name`.
fn map_insert_latency(ns: Arc<dyn Namespace>, name: &str, count: usize) -> Result<[f64; 2]> {
    let mut map = varve_pds::SortedMap::<u64, u64>::open(ns, name, varve_pds::Options::default())?;
    let mut took = Vec::with_capacity(count);
    for i in 0..count as u64 {
        let key = i * 7919 % 1_000_003;
        let start = std::time::Instant::now();
        map.insert(&key, &i)?;
        took.push(crate::stats::nanos(start.elapsed()));
    }
    Ok(crate::stats::p50_p99(took, 0))
}

/// p50 and p99 in nanoseconds of gets of random keys of map `name` (filled
/// by [`map_insert_latency`]) through a handle of [`MAP_COLD_CACHE`] copies.
fn map_cold_get_latency(ns: Arc<dyn Namespace>, name: &str, count: usize, seed: u64) -> Result<[f64; 2]> {
    use rand::{Rng, SeedableRng};
    let options = varve_pds::Options { node_cache_entries: MAP_COLD_CACHE, ..varve_pds::Options::default() };
    let map = varve_pds::SortedMap::<u64, u64>::open(ns, name, options)?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let samples = (count / 4).max(50);
    let mut took = Vec::with_capacity(samples);
    for _ in 0..samples {
        let i = rng.gen_range(0..count as u64);
        let start = std::time::Instant::now();
        let value = map.get(&(i * 7919 % 1_000_003), None)?;
        took.push(crate::stats::nanos(start.elapsed()));
        if value != Some(i) {
            return Err(BenchError::Check(format!("map {name:?}: the key of insert {i} reads {value:?}")));
        }
    }
    Ok(crate::stats::p50_p99(took, 0))
}

impl ServeReport {
    /// The figures as a Markdown table (`docs/benchmarks.md`, "varve
    /// serve"), then what ran and the load average before and after.
    #[must_use]
    pub fn to_markdown(&self) -> String {
        let number = |v: f64, unit: &str| -> String {
            match unit {
                "µs" => format!("{v:.1} µs"),
                _ => format!("{v:.0} {unit}"),
            }
        };
        let mut table = Table::new(&[
            ("figure", Align::Left),
            ("varve serve", Align::Right),
            ("embedded journal", Align::Right),
            ("served / embedded", Align::Right),
            ("JetStream", Align::Right),
            ("served / JetStream", Align::Right),
            ("server CPU per record: varve / nats", Align::Right),
            ("goals", Align::Left),
        ]);
        for row in &self.rows {
            let cells = |other: Option<f64>| match other {
                Some(value) if value.is_finite() => {
                    (number(value, row.unit), ratio_cell(row.serve / value, row.higher_is_better))
                }
                _ => ("—".to_owned(), "—".to_owned()),
            };
            let (embedded, embedded_ratio) = cells(row.embedded);
            let (jetstream, jetstream_ratio) = cells(row.jetstream);
            let goals: Vec<String> = row
                .goals
                .iter()
                .map(|goal| format!("{}: {}", goal.text, if goal.met { "met" } else { "**missed**" }))
                .collect();
            let cpu = |us: Option<f64>| us.map_or_else(|| "—".to_owned(), |us| format!("{us:.2} µs"));
            let cpu = match (row.serve_cpu_us, row.jetstream_cpu_us) {
                (None, None) => "—".to_owned(),
                (ours, theirs) => format!("{} / {}", cpu(ours), cpu(theirs)),
            };
            table.row(vec![
                row.what.clone(),
                number(row.serve, row.unit),
                embedded,
                embedded_ratio,
                jetstream,
                jetstream_ratio,
                cpu,
                goals.join("; "),
            ]);
        }
        let load =
            |l: Option<[f64; 3]>| l.map_or_else(|| "unknown".into(), |[a, b, c]| format!("{a:.2} {b:.2} {c:.2}"));
        let jetstream = match (&self.nats_server, &self.jetstream_skipped) {
            (Some(version), _) => format!("JetStream: nats-server {version}"),
            (None, Some(reason)) => format!("JetStream: {reason}"),
            (None, None) => "JetStream: not measured".into(),
        };
        format!(
            "{}\n{} trial(s) per figure; {jetstream}\nload average before: {}, after: {}\n",
            table.to_markdown(),
            self.trials,
            load(self.load_before),
            load(self.load_after)
        )
    }

    /// The report as one JSON object (`varve --json bench serve`).
    ///
    /// # Panics
    ///
    /// Never: the report is numbers and strings (a NaN becomes `null`).
    #[must_use]
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a report of numbers and strings serializes")
    }
}
