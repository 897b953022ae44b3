//! # varve — the command-line tool
//!
//! A thin user of the library crates (see `ARCHITECTURE.md`, "Surfaces"):
//! this file holds the clap definitions, dispatch and error printing;
//! [`commands`] does the work and [`output`] prints it, human-readable by
//! default and as JSON with `--json`.
//!
//! ```text
//! varve log create temperature --keep 1000 --on-full overwrite
//! varve log append temperature 21.5
//! varve log scan temperature --json
//! varve fsck --repair
//! varve run app.toml                 # handlers on append (see varve-runtime)
//! varve --ns app trace causes out 1  # what caused a record
//! varve --ns app events tail         # the causal event log, followed
//! varve nats up --nodes 3            # a local JetStream cluster; prints nats://…
//! ```
//!
//! Every operation works on the embedded journal in `--data DIR` (default
//! `./varve-data`), namespace `--ns NAME` (default `default`). Reads open the
//! namespace read-only, so they need no lock and run beside a writer.
//!
//! Exit codes: 0 success; 1 an error (one line on stderr, `error: …`);
//! 2 a usage error (from clap) or, for `fsck`, damage found and not repaired.

#![allow(
    clippy::doc_markdown,
    reason = "doc comments here are --help text, shown as written; backticks would show too"
)]

mod commands;
mod output;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};

use crate::output::Output;

/// mimalloc rather than glibc's malloc: at a million `PEDaLS` nodes glibc's
/// allocator took 43 % of an insert's time (`_int_malloc` walking bins of
/// a fragmented heap, `malloc_consolidate`), most of it in small `Vec`
/// growths that cost nothing on a young heap (docs/benchmarks.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(name = "varve", version, about = "Varve: versioned, append-only data", propagate_version = true)]
struct Cli {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

/// Options accepted before or after any subcommand.
#[derive(Debug, Args)]
struct GlobalArgs {
    /// The data directory (holds one directory per namespace). Inside a
    /// runtime handler, VARVE_DATA is the default.
    #[arg(long, global = true, value_name = "DIR", default_value = "./varve-data", env = "VARVE_DATA")]
    data: PathBuf,
    /// The store to work on: a directory or file:DIR (the embedded journal,
    /// as --data), varve://HOST:PORT (a `varve serve`), or varves://HOST:PORT
    /// (one started with --tls-cert). The log, map, set and object commands
    /// work on every store; the others need an embedded one.
    #[arg(long, global = true, value_name = "URI", env = "VARVE_STORE")]
    store: Option<String>,
    /// The bearer token for a `varve serve` started with --token-file.
    #[arg(long, global = true, value_name = "TOKEN", env = "VARVE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// A PEM file of CA certificates to trust for a varves:// store, besides
    /// the usual public roots: the private CA that signed the server's
    /// certificate, or that certificate itself if it is self-signed.
    #[arg(long, global = true, value_name = "FILE", env = "VARVE_TLS_CA")]
    tls_ca: Option<PathBuf>,
    /// The namespace to work in. Inside a runtime handler, VARVE_NAMESPACE is the default.
    #[arg(long, global = true, value_name = "NAME", default_value = "default", env = "VARVE_NAMESPACE")]
    ns: String,
    /// Print JSON for scripts: one object per answer, one per line for record streams.
    #[arg(long, global = true)]
    json: bool,
    /// A journal segment rolls once it would grow past this (e.g. 4MiB;
    /// 4KiB to 2GiB). Segments reserve disk as they fill, so a small store
    /// takes little disk whatever this is.
    #[arg(long, global = true, value_name = "SIZE", value_parser = parse_size, default_value = "64MiB")]
    segment_bytes_max: u64,
    /// The largest record an append accepts (e.g. 16MiB).
    #[arg(long, global = true, value_name = "SIZE", value_parser = parse_size, default_value = "16MiB")]
    record_bytes_max: u64,
    /// The largest batch (its records plus 20 bytes each) an append accepts.
    #[arg(long, global = true, value_name = "SIZE", value_parser = parse_size, default_value = "64MiB")]
    batch_bytes_max: u64,
}

impl GlobalArgs {
    /// The journal options the size flags ask for.
    fn journal_options(&self) -> varve_log::JournalOptions {
        varve_log::JournalOptions {
            segment_bytes_max: self.segment_bytes_max,
            limits: varve_log::Limits {
                record_bytes_max: self.record_bytes_max,
                batch_bytes_max: self.batch_bytes_max,
                ..varve_log::Limits::default()
            },
            ..varve_log::JournalOptions::default()
        }
    }
}

/// A size in bytes: a number with an optional unit (`B`, `KiB`, `MiB`,
/// `GiB`; `K`, `M`, `G` mean the same).
fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let number: u64 = digits.parse().map_err(|_| format!("{text:?} is not a size: write e.g. 65536, 64KiB or 4MiB"))?;
    let shift = match unit.trim() {
        "" | "B" => 0,
        "K" | "KiB" | "k" | "kib" | "KB" => 10,
        "M" | "MiB" | "m" | "mib" | "MB" => 20,
        "G" | "GiB" | "g" | "gib" | "GB" => 30,
        other => return Err(format!("unknown size unit {other:?}: use B, KiB, MiB or GiB")),
    };
    number.checked_mul(1 << shift).ok_or_else(|| format!("{text:?} is too large"))
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Work with the logs of a namespace.
    Log {
        #[command(subcommand)]
        command: LogCommand,
    },
    /// Check every frame of a namespace's journal and report damage.
    Fsck(FsckArgs),
    /// A versioned sorted map of text keys and values (PEDaLS): every put
    /// or rm commits a version, every version stays readable (--at V).
    /// Works on --store varve://… too, where several processes may update one map.
    Map {
        #[command(subcommand)]
        command: MapCommand,
    },
    /// The sorted map handlers build on an op log (ctx.sorted_map), through
    /// the runtime that builds it: inside an external handler (recorded,
    /// and replayed by a repair) or while `varve run` serves the namespace.
    #[command(name = "sorted-map")]
    SortedMap {
        #[command(subcommand)]
        command: SortedMapCommand,
    },
    /// A versioned sorted set of text keys (PEDaLS), with `varve map`'s
    /// conventions: every add or rm commits a version, --at V reads an old
    /// one, --store varve://… shares it.
    Set {
        #[command(subcommand)]
        command: SetCommand,
    },
    /// PART's durable map of UTF-8 text keys and values: an in-memory radix
    /// tree kept on logs by a batch log and incremental checkpoints. One
    /// version (the latest); a put or rm is one atomic batch. Embedded store only.
    Part {
        #[command(subcommand)]
        command: PartCommand,
    },
    /// Versioned objects (UStore): each key of a store owns a DAG of
    /// immutable versions with verifiable ids; put, merge (with built-in
    /// three-way merge functions), history, refs, read grants, ancestry
    /// proofs. A version is named by a ref, a unique id prefix (4+ hex
    /// characters) or a full id. Works on --store varve://… too.
    Object(ObjectArgs),
    /// Record types of the namespace's logs: numbered fields and versions
    /// in the _schema log; old records are upgraded lazily on read
    /// (automatic), rewritten into a new generation by a migration
    /// (manual), or left behind by a reset. `varve log get` and `scan`
    /// print typed records as JSON. See docs/schema.md.
    Schema {
        #[command(subcommand)]
        command: SchemaCommand,
    },
    /// Versioned list and BST on logs (PEDaLS): workloads and the paper's example.
    Pds {
        #[command(subcommand)]
        command: PdsCommand,
    },
    /// Run the handlers of an app manifest (APP.toml): triggers on append,
    /// topics, the causal event log. Serves DIR/<namespace>/runtime.sock so
    /// the `varve log` write commands keep working while it holds the
    /// namespace. SIGTERM or Ctrl-C stops it cleanly (see --stop-grace-ms).
    Run(RunArgs),
    /// Handlers of the namespace's runtime.
    Handler {
        #[command(subcommand)]
        command: HandlerCommand,
    },
    /// Causal queries over the event logs of every namespace in --data.
    Trace {
        #[command(subcommand)]
        command: TraceCommand,
    },
    /// Repair and replay (Sans-Souci): what a correction of the past would change.
    Repair {
        #[command(subcommand)]
        command: RepairCommand,
    },
    /// The namespace's causal event log (_events).
    Events {
        #[command(subcommand)]
        command: EventsCommand,
    },
    /// Serve the namespaces of --data over HTTP (docs/http.md): every Log
    /// operation, watches as Server-Sent Events, tokens, /metrics. Clients
    /// reach it as --store varve://HOST:PORT, or varves://HOST:PORT with
    /// --tls-cert. SIGTERM or Ctrl-C stops it gracefully.
    Serve(ServeArgs),
    /// Measure performance against the machine's own baselines.
    Bench {
        #[command(subcommand)]
        command: BenchCommand,
    },
    /// A local NATS JetStream cluster on loopback, to try the distributed
    /// backend: nats-server processes (`make nats-server` installs one)
    /// that keep running until `varve nats down`.
    Nats {
        #[command(subcommand)]
        command: NatsCommand,
    },
    /// Print a shell completion script: e.g. `varve completions bash >
    /// ~/.local/share/bash-completion/completions/varve`, `varve completions
    /// zsh > ~/.zfunc/_varve`, `varve completions fish >
    /// ~/.config/fish/completions/varve.fish`.
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, Subcommand)]
enum NatsCommand {
    /// Start the cluster and print its URL (nats://127.0.0.1:PORT,…) as the
    /// last line of stdout. Every write is fsynced (sync_interval: always);
    /// node I is tagged az:I. Each node's config, log and store are in
    /// DIR/nodeI/. If DIR already holds a running cluster, prints its URL.
    Up(NatsUpArgs),
    /// Stop the cluster `varve nats up` started in DIR (SIGTERM, then
    /// SIGKILL after 30 s). The stores stay: `up` on DIR finds them again.
    Down(NatsDownArgs),
}

#[derive(Debug, Args)]
struct NatsUpArgs {
    /// How many servers: 1 is a single server, 2 or more a cluster.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = nodes_in_range)]
    nodes: usize,
    /// The cluster's directory.
    #[arg(long, value_name = "DIR", default_value = "./varve-nats")]
    dir: PathBuf,
    /// The nats-server binary. Default: $VARVE_NATS_SERVER, else
    /// .tools/bin/nats-server in this directory or an ancestor, else
    /// nats-server on PATH.
    #[arg(long, value_name = "PATH")]
    server: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct NatsDownArgs {
    /// The cluster's directory.
    #[arg(long, value_name = "DIR", default_value = "./varve-nats")]
    dir: PathBuf,
}

/// `--nodes`: 1 to `varve_nats::cluster::NODES_MAX`.
fn nodes_in_range(text: &str) -> Result<usize, String> {
    let max = varve_nats::cluster::NODES_MAX;
    match text.parse::<usize>() {
        Ok(nodes) if (1..=max).contains(&nodes) => Ok(nodes),
        _ => Err(format!("{text:?}: give a number of servers from 1 to {max}")),
    }
}

#[derive(Debug, Args)]
struct RunArgs {
    /// The app manifest: [runtime], [[log]], [[topic]], [[handler]] (see varve-runtime's manifest docs).
    manifest: PathBuf,
    /// Stop once no trigger is ready, running or waiting for a retry (for scripts and tests).
    #[arg(long)]
    until_idle: bool,
    /// On SIGTERM or SIGINT, how long running handlers may go on before the
    /// external commands among them are killed (their triggers run again at
    /// the next start).
    #[arg(long, value_name = "MS", env = "VARVE_STOP_GRACE_MS", default_value_t = commands::runtime::STOP_GRACE_MS)]
    stop_grace_ms: u64,
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// The address to listen on (port 0: any free port; the URI printed says which).
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:7070")]
    listen: std::net::SocketAddr,
    /// Require bearer tokens: lines of `TOKEN read-only|read-write [NS,...] [as=PRINCIPAL]`.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Allow listening on a non-loopback address without --token-file.
    #[arg(long)]
    insecure: bool,
    /// Serve HTTPS (HTTP/1.1 and HTTP/2) with this PEM certificate chain,
    /// leaf first; needs --tls-key. Clients then use varves://HOST:PORT.
    #[arg(long, value_name = "CERT.pem", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "KEY.pem", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// When an append is acknowledged: `always` (fsynced; concurrent appends
    /// share an fsync), `group` (fsynced within 5 ms), `never` (by the OS).
    #[arg(long, value_enum, default_value = "always")]
    sync: SyncArg,
    /// Most client connections open at once.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    connections_max: usize,
    /// Host this app's runtime (as `varve run APP.toml` would): appends to its
    /// namespace, over the network too, fire its handlers here. Repeatable,
    /// one namespace each.
    #[arg(long, value_name = "APP.toml")]
    manifest: Vec<PathBuf>,
}

impl ServeArgs {
    /// The TLS files, when both flags are given (clap requires one with the other).
    fn tls(&self) -> Option<varve_server::TlsFiles> {
        let (cert, key) = self.tls_cert.clone().zip(self.tls_key.clone())?;
        Some(varve_server::TlsFiles { cert, key })
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum SyncArg {
    Always,
    Group,
    Never,
}

#[derive(Debug, Subcommand)]
enum HandlerCommand {
    /// Each handler: the logs it is subscribed to and its triggers, DONE,
    /// FAILED, dead letters and pending triggers.
    Ls,
}

#[derive(Debug, Subcommand)]
enum RepairCommand {
    /// The repair graph of a correction, without changing anything: which
    /// handler runs would be replayed, in causal order, and which records of
    /// which logs would change (or may, where a run saw a tail that may move).
    Plan {
        /// The record to correct, LOG:SEQ in --ns.
        #[arg(long, value_name = "LOG:SEQ", conflicts_with = "handler", required_unless_present = "handler")]
        record: Option<String>,
        /// A handler to give new code: its past runs are replayed, and everything downstream.
        #[arg(long, value_name = "NAME")]
        handler: Option<String>,
        /// With --handler: only its runs on input records with this seq or later.
        #[arg(long, value_name = "SEQ", requires = "handler")]
        since_seq: Option<u64>,
        /// The application's manifest: handlers marked `replayable = false` are reported.
        #[arg(long, value_name = "FILE")]
        manifest: Option<PathBuf>,
        /// Also write the repair graph as Graphviz DOT to this file.
        #[arg(long, value_name = "FILE")]
        dot: Option<PathBuf>,
    },
    /// Repair: correct a record (or replay a handler's new code), replay
    /// every run that depended on it with its reads pinned, and swap the
    /// repaired logs in atomically; each old history stays readable as
    /// `_gen.LOG.N`. Offline: stop `varve run` first. Replays the manifest's
    /// `command` handlers (a Rust builtin is replayed by its hosting program).
    Run {
        /// The record to correct, LOG:SEQ in --ns.
        #[arg(long, value_name = "LOG:SEQ", conflicts_with = "handler", required_unless_present = "handler")]
        record: Option<String>,
        /// With --record: the corrected value.
        #[arg(long, value_name = "TEXT", conflicts_with = "value_file")]
        value: Option<String>,
        /// With --record: the corrected value, read from this file.
        #[arg(long, value_name = "FILE")]
        value_file: Option<PathBuf>,
        /// A handler whose code changed (edit the manifest or its script first): its past runs are replayed
        /// with the new code, and everything downstream.
        #[arg(long, value_name = "NAME")]
        handler: Option<String>,
        /// With --handler: only its runs on input records with this seq or later.
        #[arg(long, value_name = "SEQ", requires = "handler")]
        since_seq: Option<u64>,
        /// The application's manifest: the handlers' code, and which are `replayable = false`.
        #[arg(long, value_name = "FILE")]
        manifest: PathBuf,
        /// What to do with runs of handlers marked `replayable = false`: refuse the repair, run them again, or
        /// skip them (their outputs stay as they were).
        #[arg(long, value_enum, default_value = "refuse")]
        not_replayable: NotReplayableArg,
    },
    /// Finish a repair that a crash interrupted after it began to commit:
    /// swap what is not swapped yet and write its REPAIR event — or call it
    /// off where the application appended since (nothing is lost either
    /// way). `varve repair run` and `varve run` do this on their own first.
    Resume,
}

/// `--not-replayable`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum NotReplayableArg {
    Refuse,
    Run,
    Skip,
}

#[derive(Debug, Subcommand)]
enum TraceCommand {
    /// What caused a record: every event and record it transitively depends on.
    Causes {
        /// The log (in --ns).
        log: String,
        /// The record's seq.
        seq: u64,
    },
    /// What depends on a record, transitively.
    Effects {
        /// The log (in --ns).
        log: String,
        /// The record's seq.
        seq: u64,
    },
    /// Every event of one trace, in causal order.
    Show {
        /// The trace id: 32 hex digits, or a unique prefix such as the 12
        /// digits `varve events tail` prints.
        trace_id: String,
        /// Also write the causal graph as Graphviz DOT to this file.
        #[arg(long, value_name = "FILE")]
        dot: Option<PathBuf>,
        /// Also write OpenTelemetry JSON spans to this file.
        #[arg(long, value_name = "FILE")]
        otel: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
enum EventsCommand {
    /// Print the last events, then follow new ones until interrupted.
    Tail {
        /// First event seq to print (default: the last 20).
        #[arg(long, value_name = "SEQ")]
        from: Option<u64>,
        /// Print what is there and exit instead of following.
        #[arg(long)]
        no_follow: bool,
    },
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Append throughput, get latency and open time of the embedded journal,
    /// each beside a plain-file baseline; prints a Markdown table.
    Log(BenchLogArgs),
    /// The PEDaLS evaluation (Figures 4-6): bytes and time per update, time
    /// per access, beside an ephemeral structure and node copying in memory.
    Pds(BenchPdsArgs),
    /// The runtime: trigger latency (in-process and external command),
    /// events recorded per second, event-recording overhead and topic
    /// publish throughput, each beside a baseline measured in the same run.
    Runtime(BenchRuntimeArgs),
    /// `varve serve` on loopback: appends/s with 1, 16 and 64 clients, get
    /// p50/p99, watch fan-out to 100 watchers, beside the embedded journal
    /// and (with --nats-server) a JetStream server, all in the same run.
    Serve(BenchServeArgs),
    /// The Log on NATS JetStream (R=1 and a 3-node R=3 cluster started
    /// here): appends/s and latency beside raw JetStream publishes, batches,
    /// get beside a raw direct get, failover after the leader's SIGKILL.
    Nats(BenchNatsArgs),
    /// Versioned objects on the embedded journal: put and get (Complete
    /// beside Delta storage), history(m) beside m single steps, the paper's
    /// Git experiment beside a real `git` in the same run, and verify.
    Object(BenchObjectArgs),
    /// Schema evolution (the retention models of seeds/003): map kernels
    /// (hash, PART radix, PEDaLS sorted) and a TPC-C-style mix on typed
    /// records; a layout change (key 32 → 64 bit, or a new field); the
    /// Manual overhead T(retain)/T(manual) and the Automatic (lazy) overhead
    /// (T(auto) − T(manual))/T(manual), bytes written, first-access cost.
    Schema(BenchSchemaArgs),
    /// Repair-graph construction (`varve repair plan`) over a temperature
    /// application's event log of 100,000 and 1,000,000 events: reading
    /// `_events`, the causal merge and the plan, per 100,000 events.
    Repair(BenchRepairArgs),
}

#[derive(Debug, Args)]
struct BenchSchemaArgs {
    /// Directory for the journals of the persistent kernels, on the disk to measure (deleted after).
    #[arg(long, default_value = "target/bench")]
    dir: PathBuf,
    /// Small counts: a smoke run of seconds, not figures to publish.
    #[arg(long)]
    quick: bool,
    /// The seed of the inputs (printed in the report).
    #[arg(long, default_value_t = 3)]
    seed: u64,
}

#[derive(Debug, Args)]
struct BenchRepairArgs {
    /// Directory for the application's journal, on the disk to measure.
    #[arg(long, default_value = "target/bench")]
    dir: PathBuf,
    /// 10,000 events: a smoke run of seconds, not figures to publish.
    #[arg(long)]
    quick: bool,
}

#[derive(Debug, Args)]
struct BenchObjectArgs {
    /// Directory for the journal and the git repository, on the disk to measure (deleted after).
    #[arg(long, default_value = "target/bench")]
    dir: PathBuf,
    /// Small counts: a smoke run of seconds, not figures to publish.
    #[arg(long)]
    quick: bool,
    /// Run only one part: put and get, history, or the Git experiment with verify.
    #[arg(long, value_parser = ["put", "history", "git"])]
    only: Option<String>,
}

#[derive(Debug, Args)]
struct BenchNatsArgs {
    /// Directory for the servers' data (deleted after).
    #[arg(long, default_value = "target/bench")]
    dir: PathBuf,
    /// Small counts: a smoke run, not figures to publish.
    #[arg(long)]
    quick: bool,
    /// The nats-server binary (default: .tools/bin/nats-server, from `make nats-server`, or PATH).
    #[arg(long, value_name = "PATH")]
    nats_server: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct BenchServeArgs {
    /// Directory for the servers' scratch data, on the disk to measure (deleted after).
    #[arg(long, default_value = "target/bench")]
    dir: PathBuf,
    /// Short runs, one trial: a smoke run, not figures to publish.
    #[arg(long)]
    quick: bool,
    /// A nats-server binary (`make nats-server` installs one in
    /// .tools/bin): measure JetStream beside Varve. Without it the JetStream
    /// figures are skipped, and the report says so.
    #[arg(long, value_name = "PATH")]
    nats_server: Option<PathBuf>,
    /// Run only one part (append-single, append-batch: one shape of appends;
    /// map: inserts into a versioned sorted map).
    #[arg(long, value_parser = ["append", "append-single", "append-batch", "get", "watch", "map"])]
    only: Option<String>,
}

#[derive(Debug, Args)]
struct BenchRuntimeArgs {
    /// Directory for scratch stores, on the disk to measure (deleted after).
    #[arg(long, default_value = "target/bench")]
    dir: PathBuf,
    /// Small sizes, one trial: a smoke run, not figures to publish.
    #[arg(long)]
    quick: bool,
    /// Run only one part.
    #[arg(long, value_parser = ["latency", "command", "workload", "retention", "publish", "map"])]
    only: Option<String>,
}

#[derive(Debug, Args)]
struct BenchPdsArgs {
    /// Generated workloads per variant (the paper: 100).
    #[arg(long, default_value_t = 100)]
    workloads: usize,
    /// Operations per workload (the paper: 1,000).
    #[arg(long, default_value_t = 1000)]
    ops: usize,
    /// Directory for the journal (a temporary one by default).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Also write the rows as CSV to this file.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Also write the space/time curves (a point every 50 operations of each
    /// variant's first workload) as CSV to this file, for `scripts/plot_pds.py`.
    #[arg(long)]
    series_csv: Option<PathBuf>,
    /// Instead of the paper's evaluation: grow one red-black sorted map to
    /// --scale-max distinct keys on the journal (group commit) and in
    /// memory, timing inserts at 10k, 40k, 100k, 400k and 1M keys.
    #[arg(long)]
    scale: bool,
    /// With --scale: the largest size measured (sizes above it are skipped).
    #[arg(long, value_name = "KEYS", default_value_t = 1_000_000, requires = "scale")]
    scale_max: u64,
    /// With --scale: node copies the map keeps decoded in memory (the bound
    /// on its own memory; fewer means more log reads per insert).
    #[arg(long, value_name = "ENTRIES", default_value_t = varve_pds::NODE_CACHE_ENTRIES_DEFAULT, requires = "scale")]
    node_cache: usize,
    /// With --scale: the journal saves an index checkpoint after writing
    /// this many bytes, or as many as the last checkpoint took if more
    /// (e.g. 1024GiB to save one only at the close, as before 2026-11-27).
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "16MiB", requires = "scale")]
    checkpoint_bytes_min: u64,
    /// With --scale: keep the journal's packed logs on the heap, as before
    /// 2026-11-28, instead of in a mapped scratch file.
    #[arg(long, requires = "scale")]
    packed_on_heap: bool,
    /// With --scale: 1,000 and 4,000 keys, a smoke run (seconds).
    #[arg(long, requires = "scale")]
    quick: bool,
}

#[derive(Debug, Subcommand)]
enum MapCommand {
    /// Set keys: one version per KEY=VALUE, in order.
    Put {
        /// The map's name.
        name: String,
        /// KEY=VALUE pairs (the value may contain `=`).
        #[arg(required = true, value_name = "KEY=VALUE")]
        pairs: Vec<String>,
    },
    /// Remove keys: one version per key (an absent key changes nothing).
    Rm {
        /// The map's name.
        name: String,
        /// The keys.
        #[arg(required = true)]
        keys: Vec<String>,
    },
    /// One key's value, at the latest version or --at V.
    Get {
        /// The map's name.
        name: String,
        /// The key.
        key: String,
        /// The version to read (1 = after the first update).
        #[arg(long, value_name = "V")]
        at: Option<u64>,
    },
    /// Keys and values in key order, at the latest version or --at V: every
    /// one, or a range (--from, --to, --prefix, --limit).
    Ls(LsArgs),
    /// The versions: the latest, and the update that made each (the last
    /// --limit of them).
    Versions(VersionsArgs),
    /// Keys added, removed and changed from version V1 to version V2.
    Diff(DiffArgs),
}

#[derive(Debug, Subcommand)]
enum SortedMapCommand {
    /// Set keys: one op (and version) per KEY=VALUE, in order.
    Put {
        /// The map's op log.
        log: String,
        /// KEY=VALUE pairs (the value may contain `=`).
        #[arg(required = true, value_name = "KEY=VALUE")]
        pairs: Vec<String>,
    },
    /// Remove keys: one op per key (also for an absent key).
    Rm {
        /// The map's op log.
        log: String,
        /// The keys.
        #[arg(required = true)]
        keys: Vec<String>,
    },
    /// One key's value now.
    Get {
        /// The map's op log.
        log: String,
        /// The key.
        key: String,
    },
    /// Keys and values now, in key order (from --from, inclusive, to --to, exclusive).
    Ls {
        /// The map's op log.
        log: String,
        /// The first key.
        #[arg(long, value_name = "KEY")]
        from: Option<String>,
        /// The key after the last.
        #[arg(long, value_name = "KEY")]
        to: Option<String>,
    },
}

/// `varve map|set ls`.
#[derive(Debug, Args)]
struct LsArgs {
    /// The map's or set's name.
    name: String,
    #[command(flatten)]
    select: SelectArgs,
}

/// `varve map|set versions`.
#[derive(Debug, Args)]
struct VersionsArgs {
    /// The map's or set's name.
    name: String,
    /// List at most the last N versions.
    #[arg(long, value_name = "N", default_value_t = commands::sorted::VERSIONS_SHOWN_DEFAULT)]
    limit: u64,
}

/// `varve map|set diff`.
#[derive(Debug, Args)]
struct DiffArgs {
    /// The map's or set's name.
    name: String,
    /// The version to compare from.
    v1: u64,
    /// The version to compare to.
    v2: u64,
}

/// Which entries of one version `ls` prints.
#[derive(Debug, Args)]
struct SelectArgs {
    /// The version to read (1 = after the first update; default: the latest).
    #[arg(long, value_name = "V")]
    at: Option<u64>,
    /// Keys from K on (inclusive).
    #[arg(long, value_name = "K")]
    from: Option<String>,
    /// Keys up to K (inclusive).
    #[arg(long, value_name = "K")]
    to: Option<String>,
    /// Only keys that start with P.
    #[arg(long, value_name = "P")]
    prefix: Option<String>,
    /// At most N keys.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
}

impl SelectArgs {
    fn selection(&self) -> commands::sorted::Selection<'_> {
        commands::sorted::Selection {
            at: self.at,
            from: self.from.as_deref(),
            to: self.to.as_deref(),
            prefix: self.prefix.as_deref(),
            limit: self.limit,
        }
    }
}

#[derive(Debug, Subcommand)]
enum SetCommand {
    /// Add keys: one version per key added, in order (a key already there changes nothing).
    Add {
        /// The set's name.
        name: String,
        /// The keys (text).
        #[arg(required = true)]
        keys: Vec<String>,
    },
    /// Remove keys: one version per key (an absent key changes nothing).
    Rm {
        /// The set's name.
        name: String,
        /// The keys.
        #[arg(required = true)]
        keys: Vec<String>,
    },
    /// Whether the set holds KEY, at the latest version or --at V: prints true or false.
    Has {
        /// The set's name.
        name: String,
        /// The key.
        key: String,
        /// The version to read.
        #[arg(long, value_name = "V")]
        at: Option<u64>,
    },
    /// Keys in order, at the latest version or --at V: every one, or a range
    /// (--from, --to, --prefix, --limit).
    Ls(LsArgs),
    /// The versions: the latest, and the update that made each (the last --limit of them).
    Versions(VersionsArgs),
    /// Keys added and removed from version V1 to version V2.
    Diff(DiffArgs),
}

#[derive(Debug, Subcommand)]
enum PartCommand {
    /// Set keys in one batch: every KEY=VALUE lands, or none does.
    Put {
        /// The map's name (creates it if new).
        name: String,
        /// KEY=VALUE pairs, UTF-8 text, split at the first `=`.
        #[arg(required = true, value_name = "KEY=VALUE")]
        pairs: Vec<String>,
    },
    /// Remove keys in one batch (absent keys change nothing).
    Rm {
        /// The map's name.
        name: String,
        /// The keys.
        #[arg(required = true)]
        keys: Vec<String>,
    },
    /// One key's value.
    Get {
        /// The map's name.
        name: String,
        /// The key.
        key: String,
    },
    /// Entries in key (byte) order, one per line: every one, or a range.
    Scan {
        /// The map's name.
        name: String,
        /// Only keys that start with P.
        #[arg(long, value_name = "P")]
        prefix: Option<String>,
        /// Keys from K on (inclusive).
        #[arg(long, value_name = "K")]
        from: Option<String>,
        /// Keys up to K (inclusive).
        #[arg(long, value_name = "K")]
        to: Option<String>,
        /// At most N entries.
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
    },
    /// Write a checkpoint (incremental unless a full one is due) and print
    /// what it wrote; later opens replay only the batches after it.
    Checkpoint {
        /// The map's name.
        name: String,
        /// A full checkpoint: starts a new generation, deletes older ones.
        #[arg(long)]
        full: bool,
    },
    /// Entries, the batch log in use, where the next open's replay starts,
    /// and the checkpoint records the manifest log keeps (the last is in force).
    Info {
        /// The map's name.
        name: String,
    },
}

#[derive(Debug, Args)]
struct ObjectArgs {
    /// Read and write as this principal: restricted keys need the owner's
    /// grant, new keys are owned by it (default: the administrator, who reads everything).
    #[arg(long = "as", global = true, value_name = "PRINCIPAL")]
    acting_as: Option<String>,
    #[command(subcommand)]
    command: ObjectCommand,
}

/// Where a put or merge gets its value: VALUE (text, or `-` for stdin) or --file.
#[derive(Debug, Args)]
struct ObjectValueArgs {
    /// The value as text, or `-` to read it from stdin (use `--` before a value that starts with `-`).
    value: Option<String>,
    /// Read the value from a file (any bytes).
    #[arg(long, value_name = "F", conflicts_with = "value")]
    file: Option<PathBuf>,
}

impl ObjectValueArgs {
    fn source(&self) -> Option<commands::log::ValueSource<'_>> {
        use commands::log::ValueSource;
        match (&self.value, &self.file) {
            (_, Some(path)) => Some(ValueSource::File(path)),
            (Some(value), None) if value == "-" => Some(ValueSource::Stdin),
            (Some(value), None) => Some(ValueSource::Text(value)),
            (None, None) => None,
        }
    }
}

#[derive(Debug, Subcommand)]
enum ObjectCommand {
    /// Store a new version of KEY derived from --base (a new root without
    /// it); prints its id. The same put twice stores nothing the second time.
    #[command(group(ArgGroup::new("source").required(true).args(["value", "file"])))]
    Put {
        /// The object store's name.
        name: String,
        /// The key.
        key: String,
        /// The version the new one derives from.
        #[arg(long, value_name = "V")]
        base: Option<String>,
        #[command(flatten)]
        value: ObjectValueArgs,
    },
    /// Print a version's value, as it is (with --json: as text or base64).
    Get {
        /// The object store's name.
        name: String,
        /// The key.
        key: String,
        /// The version.
        #[arg(value_name = "VERSION")]
        v: String,
    },
    /// What is stored about a version: parents, author, seq, encoding.
    Info {
        /// The object store's name.
        name: String,
        /// The key.
        key: String,
        /// The version.
        #[arg(value_name = "VERSION")]
        v: String,
    },
    /// Store the merge of two versions: a value given (VALUE, - or --file),
    /// or one a built-in three-way merge function computes (--with).
    #[command(group(ArgGroup::new("source").required(true).args(["value", "file", "with"])))]
    Merge {
        /// The object store's name.
        name: String,
        /// The key.
        key: String,
        /// The first version (the merge's first parent).
        left: String,
        /// The second version.
        right: String,
        #[command(flatten)]
        value: ObjectValueArgs,
        /// Merge with a built-in function: lww (deeper side wins), counter
        /// (decimal integers), set (JSON arrays), map (JSON objects, field
        /// by field), lines (text, as git merge).
        #[arg(long = "with", value_enum, value_name = "FUNCTION", conflicts_with_all = ["value", "file"])]
        with: Option<MergeArg>,
    },
    /// The versions of KEY nothing derives from yet.
    Heads {
        /// The object store's name.
        name: String,
        /// The key.
        key: String,
    },
    /// Up to -m predecessors of a version, nearest first, in one call:
    /// stops early at a root or after a merge (see `previous` there).
    History {
        /// The object store's name.
        name: String,
        /// The key.
        key: String,
        /// The version to start from (not listed itself).
        #[arg(value_name = "VERSION")]
        v: String,
        /// At most this many versions.
        #[arg(short = 'm', long = "max", value_name = "N", default_value_t = 32)]
        m: usize,
        /// Print each version's value too.
        #[arg(long)]
        values: bool,
    },
    /// The parents of a version (none for a root, two for a merge).
    Previous {
        /// The object store's name.
        name: String,
        /// The key.
        key: String,
        /// The version.
        #[arg(value_name = "VERSION")]
        v: String,
    },
    /// The keys with at least one version, in the order first written.
    Keys {
        /// The object store's name.
        name: String,
    },
    /// Every version of KEY, in the order written.
    Versions {
        /// The object store's name.
        name: String,
        /// The key.
        key: String,
    },
    /// Named refs of a key: branches (moved by compare-and-set) and tags (set once).
    Ref {
        #[command(subcommand)]
        command: ObjectRefCommand,
    },
    /// Fields added (+), removed (-) and changed (~) from V1's value to V2's (JSON objects).
    Diff {
        /// The object store's name.
        name: String,
        /// The key.
        key: String,
        /// The version to compare from.
        v1: String,
        /// The version to compare to.
        v2: String,
    },
    /// Recompute a version (default: every head of KEY) and all its
    /// ancestors from the stored bytes: values, parents and ids.
    Verify {
        /// The object store's name.
        name: String,
        /// The key.
        key: String,
        /// The version (default: every head).
        #[arg(value_name = "VERSION")]
        v: Option<String>,
    },
    /// Print a proof (JSON) that ANCESTOR is an ancestor of HEAD, checkable
    /// by `check-proof` with only the two ids.
    Prove {
        /// The object store's name.
        name: String,
        /// The key.
        key: String,
        /// The ancestor.
        ancestor: String,
        /// The head.
        head: String,
    },
    /// Check a proof `prove` printed against full ids you trust; opens no
    /// store. Exits 1 if the proof does not check.
    CheckProof {
        /// The proof file, or `-` for stdin.
        #[arg(default_value = "-")]
        file: PathBuf,
        /// The key the proof must be for.
        #[arg(long)]
        key: String,
        /// The head's full id (64 hex characters).
        #[arg(long, value_name = "ID")]
        head: String,
        /// The ancestor's full id.
        #[arg(long, value_name = "ID")]
        ancestor: String,
    },
    /// Make KEY private: from now on only its owner and the principals it
    /// grants read it. Only the owner (or the administrator) may.
    Restrict {
        /// The object store's name.
        name: String,
        /// The key.
        key: String,
    },
    /// Let PRINCIPAL read versions of a restricted KEY (permanently). Only
    /// the owner (or the administrator) may.
    Grant {
        /// The object store's name.
        name: String,
        /// The key.
        key: String,
        /// Who may read.
        principal: String,
        /// The versions.
        #[arg(required = true)]
        versions: Vec<String>,
        /// Their ancestors too.
        #[arg(long)]
        with_ancestors: bool,
    },
    /// KEY's owner, and its restrictions and grants in the order issued.
    Grants {
        /// The object store's name.
        name: String,
        /// The key.
        key: String,
    },
    /// Print new versions as they are stored, one per line, until
    /// interrupted (or --count printed).
    Watch {
        /// The object store's name.
        name: String,
        /// Only keys starting with P.
        #[arg(long, value_name = "P", default_value = "")]
        prefix: String,
        /// The versions-log seq to start at (1: every version ever stored).
        #[arg(long, value_name = "SEQ", default_value_t = 1)]
        from: u64,
        /// Stop after N versions.
        #[arg(long, value_name = "N")]
        count: Option<u64>,
    },
}

#[derive(Debug, Subcommand)]
enum ObjectRefCommand {
    /// Point branch REF at a version: only if it is at --expect now
    /// (`none`: only if it does not exist); without --expect, wherever it is.
    SetBranch {
        /// The object store's name.
        name: String,
        /// The key.
        key: String,
        /// The branch's name.
        #[arg(value_name = "REF")]
        ref_name: String,
        /// The version.
        #[arg(value_name = "VERSION")]
        v: String,
        /// Where the branch must be now, or `none`.
        #[arg(long, value_name = "V")]
        expect: Option<String>,
    },
    /// Create tag REF at a version; tags never move.
    Tag {
        /// The object store's name.
        name: String,
        /// The key.
        key: String,
        /// The tag's name.
        #[arg(value_name = "REF")]
        ref_name: String,
        /// The version.
        #[arg(value_name = "VERSION")]
        v: String,
    },
    /// Delete REF: only if it is at --expect (without it, wherever it is).
    Delete {
        /// The object store's name.
        name: String,
        /// The key.
        key: String,
        /// The ref's name.
        #[arg(value_name = "REF")]
        ref_name: String,
        /// Where the ref must be now.
        #[arg(long, value_name = "V")]
        expect: Option<String>,
    },
    /// The refs of KEY: name, kind, version.
    List {
        /// The object store's name.
        name: String,
        /// The key.
        key: String,
    },
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum MergeArg {
    Lww,
    Counter,
    Set,
    Map,
    Lines,
}

#[derive(Debug, Subcommand)]
enum PdsCommand {
    /// Print a workload in the paper's format: a count, then `op value` lines
    /// (1 insert, 0 delete), values 1..=100 drawn uniformly (§V-A).
    Gen {
        /// Number of operations.
        #[arg(long)]
        ops: usize,
        /// Seed of the generator: the same seed gives the same workload.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Run a workload file on a new structure in the namespace.
    Run(PdsRunArgs),
    /// The paper's example: insert 7, 2, 5, delete 2 with one extra pointer,
    /// with every version and the DataLog, LinkLogs and APLog as tables.
    Demo,
}

#[derive(Debug, Args)]
struct PdsRunArgs {
    /// The workload file (`varve pds gen` writes one).
    file: PathBuf,
    /// `bst` (the paper's), `balanced` (red-black) or `list`.
    #[arg(long, default_value = "bst")]
    structure: String,
    /// Extra pointers per node (the paper: 1, 5 or 10).
    #[arg(long, default_value_t = 1)]
    extra: u32,
    /// Structure name (default `workload.<structure>.e<extra>`); must be new.
    #[arg(long)]
    name: Option<String>,
    /// Check every version's full contents against a model of all versions.
    #[arg(long)]
    verify: bool,
    /// Print every version's contents (with --json: one object per version).
    #[arg(long)]
    dump: bool,
}

#[derive(Debug, Args)]
struct BenchLogArgs {
    /// Directory for scratch files, on the disk to measure (deleted after).
    #[arg(long, default_value = "target/bench")]
    dir: PathBuf,
    /// One short trial per figure: a smoke run, not figures to publish.
    #[arg(long)]
    quick: bool,
    /// Size of the journal whose open (recovery) time is measured, in MiB.
    #[arg(long, default_value_t = 1024)]
    open_mib: u64,
    /// Run only one part (long: one log grown to 16M records across about
    /// 1,000 segments; appends/s at its end against its start, and the
    /// longest append while it saves index checkpoints; many: the longest
    /// append in a namespace of 400k logs, where rolls and checkpoint saves
    /// are linear in the logs).
    #[arg(long, value_parser = ["append", "get", "open", "long", "many"])]
    only: Option<String>,
}

#[derive(Debug, Subcommand)]
enum SchemaCommand {
    /// List the subjects (typed logs) with their version and generation.
    Ls,
    /// Show a subject's versions (fields, model, INIT or migration) and generations.
    Show {
        /// The subject: the log its records are in.
        subject: String,
    },
    /// Register a version from a JSON spec (a file, or - for stdin):
    /// {"fields": [{"number": 1, "name": "celsius", "type": "i32", "default": 0}],
    /// "model": "automatic|manual|reset", "init": NAME, "migration": NAME,
    /// "compat": "BACKWARD|FORWARD|FULL|…_TRANSITIVE|NONE"}. A spec equal to a
    /// registered version changes nothing.
    Register {
        /// The subject: the log its records are in (created if missing).
        subject: String,
        /// The spec file, or - for stdin.
        spec: String,
    },
    /// Check a spec against the registered versions without registering it
    /// (exit 1 and the field and rule it breaks when incompatible).
    Check {
        /// The subject.
        subject: String,
        /// The spec file, or - for stdin.
        spec: String,
    },
    /// Append a typed record, given as a JSON object of fields, with the
    /// subject's current version.
    Append {
        /// The subject.
        subject: String,
        /// The record, e.g. '{"sensor": "s1", "celsius": 21}'.
        record: String,
    },
    /// Run (or resume) the subject's pending manual migration into its next
    /// generation, with a progress bar; writers switch when it has caught up.
    Upgrade {
        /// The subject.
        subject: String,
        /// Materialise every lazily upgraded record: register a manual
        /// version with the same fields and migrate with the INIT chain.
        #[arg(long)]
        eager: bool,
        /// An external migration program (run by sh -c): one JSON record per
        /// line on its stdin, one JSON object of the new fields per line back.
        #[arg(long, value_name = "CMD")]
        command: Option<String>,
        /// Records per appended batch (the progress a crash can lose).
        #[arg(long, default_value_t = 512)]
        batch: u64,
    },
}

#[derive(Debug, Subcommand)]
enum LogCommand {
    /// Create a log (idempotent for an identical configuration).
    Create(CreateArgs),
    /// Append one record; prints its seq once it is durable.
    Append(AppendArgs),
    /// Append records to several logs in one atomic batch: all land or none.
    Batch(BatchArgs),
    /// Print the record at a seq.
    Get {
        /// The log.
        name: String,
        /// The record's seq (the first record is 1).
        seq: u64,
    },
    /// Print the latest and earliest seqs of a log.
    Latest {
        /// The log.
        name: String,
    },
    /// Print a range of records.
    Scan(ScanArgs),
    /// Print the last records, then follow new ones until interrupted (Ctrl-C).
    Tail(TailArgs),
    /// List the logs of the namespace.
    Ls,
    /// Delete a log and all its records.
    Rm {
        /// The log.
        name: String,
    },
    /// Remove a log's records below a seq, for good (the newest record always
    /// stays; seqs are never reused). System logs (`_…`) are refused: the
    /// runtime trims its own `_events` (manifest `events_keep`, `events_keep_for`).
    Trim {
        /// The log.
        name: String,
        /// The first seq kept: records below it go.
        #[arg(long, value_name = "SEQ")]
        before: u64,
    },
    /// Print a log's configuration and bounds.
    Info {
        /// The log.
        name: String,
    },
}

#[derive(Debug, Args)]
struct CreateArgs {
    /// The new log's name: A-Z a-z 0-9 _ . - (not beginning with `_`), at most 200 bytes.
    name: String,
    /// Keep at most K records (default: keep every record).
    #[arg(long, value_name = "K")]
    keep: Option<u64>,
    /// What an append does once K records exist (needs --keep) [default: refuse].
    #[arg(long, value_enum, requires = "keep")]
    on_full: Option<OnFullArg>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum OnFullArg {
    /// Appends fail once the log is full; reads go on.
    Refuse,
    /// The oldest records are trimmed.
    Overwrite,
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("source").required(true).args(["value", "file"])))]
struct AppendArgs {
    /// The log.
    name: String,
    /// The record as text, or `-` to read it from stdin (use `--` before a value that starts with `-`).
    value: Option<String>,
    /// Read the record from a file (any bytes).
    #[arg(long, value_name = "F")]
    file: Option<PathBuf>,
    /// Append once under this id (1-128 of A-Z a-z 0-9 . _ : -): re-running
    /// with the same id appends nothing and prints the first append's seq.
    /// Default: a random id, the same on every automatic retry.
    #[arg(long, value_name = "ID")]
    request_id: Option<String>,
}

#[derive(Debug, Args)]
struct BatchArgs {
    /// Records as LOG=VALUE (split at the first `=`).
    #[arg(value_name = "LOG=VALUE", required = true)]
    entries: Vec<String>,
    /// Append once under this id (see `log append --request-id`).
    #[arg(long, value_name = "ID")]
    request_id: Option<String>,
}

#[derive(Debug, Args)]
struct ScanArgs {
    /// The log.
    name: String,
    /// First seq (default: the earliest kept).
    #[arg(long, value_name = "A")]
    from: Option<u64>,
    /// Last seq, inclusive (default: the latest).
    #[arg(long, value_name = "B")]
    to: Option<u64>,
}

#[derive(Debug, Args)]
struct TailArgs {
    /// The log.
    name: String,
    /// First seq to print (default: the last 10 records).
    #[arg(long, value_name = "A")]
    from: Option<u64>,
}

#[derive(Debug, Args)]
struct FsckArgs {
    /// Salvage every intact record out of damaged segments (copies of those
    /// go to `quarantine/`) and record every lost record in `_losses`.
    #[arg(long)]
    repair: bool,
    /// Check every namespace in the data directory, not just --ns.
    #[arg(long)]
    all: bool,
}

fn main() -> ExitCode {
    // First, before parsing anything: `varve __bench-stamp FILE` is the
    // process `varve bench runtime` times the start of (see varve_bench::runtime).
    let entered = std::time::SystemTime::now();
    if let Some(code) = varve_bench::runtime::stamp_if_asked(entered) {
        return code;
    }
    let cli = Cli::parse();
    let out = Output::new(cli.global.json);
    match run(&cli, &out) {
        Ok(code) => code,
        Err(error) if output::is_broken_pipe(&error) => ExitCode::SUCCESS, // e.g. `varve log tail x | head`
        Err(error) => {
            output::error(&error);
            ExitCode::FAILURE
        }
    }
}

/// Where `--store` points: the data directory, or a connected store elsewhere.
struct Resolved {
    data: PathBuf,
    remote: Option<varve_remote::RemoteStore>,
    nats: Option<varve_nats::NatsStore>,
}

/// The data directory and, for `--store varve://…` or `nats://…`, the connected store.
fn resolve_store(global: &GlobalArgs) -> anyhow::Result<Resolved> {
    let embedded = |data: PathBuf| Resolved { data, remote: None, nats: None };
    Ok(match global.store.as_deref().map(varve::StoreUri::parse).transpose()? {
        None => embedded(global.data.clone()),
        Some(varve::StoreUri::Embedded(dir)) => embedded(dir),
        Some(varve::StoreUri::Remote(uri)) => {
            let options = varve_remote::RemoteOptions {
                tls_ca: global.tls_ca.clone(),
                ..varve_remote::RemoteOptions::from_uri(&uri, global.token.clone())?
            };
            Resolved { remote: Some(varve_remote::RemoteStore::connect(options)?), ..embedded(global.data.clone()) }
        }
        Some(varve::StoreUri::Nats(options)) => {
            Resolved { nats: Some(varve_nats::NatsStore::connect(options)?), ..embedded(global.data.clone()) }
        }
    })
}

fn run_serve(ctx: &commands::Context<'_>, args: &ServeArgs) -> anyhow::Result<()> {
    let sync = match args.sync {
        SyncArg::Always => varve_log::SyncPolicy::Always,
        SyncArg::Group => varve_log::SyncPolicy::Group(std::time::Duration::from_millis(5)),
        SyncArg::Never => varve_log::SyncPolicy::Never,
    };
    commands::serve::serve(
        ctx,
        &commands::serve::ServeRequest {
            listen: args.listen,
            token_file: args.token_file.clone(),
            insecure: args.insecure,
            tls: args.tls(),
            sync,
            connections_max: args.connections_max,
            manifests: args.manifest.clone(),
        },
    )
}

/// `map`, `set`, `part` and `object`: the structures' commands.
fn run_structure(ctx: &commands::Context<'_>, command: &Command) -> anyhow::Result<()> {
    match command {
        Command::Map { command } => run_map(ctx, command),
        Command::SortedMap { command } => {
            use commands::sorted_map;
            match command {
                SortedMapCommand::Put { log, pairs } => sorted_map::put(ctx, log, pairs),
                SortedMapCommand::Rm { log, keys } => sorted_map::rm(ctx, log, keys),
                SortedMapCommand::Get { log, key } => sorted_map::get(ctx, log, key),
                SortedMapCommand::Ls { log, from, to } => sorted_map::ls(ctx, log, from.as_deref(), to.as_deref()),
            }
        }
        Command::Set { command } => run_set(ctx, command),
        Command::Part { command } => run_part(ctx, command),
        Command::Object(args) => run_object(ctx, args),
        _ => unreachable!("run_structure is only called for map, set, part and object"),
    }
}

fn run_map(ctx: &commands::Context<'_>, command: &MapCommand) -> anyhow::Result<()> {
    use commands::{map, sorted};
    match command {
        MapCommand::Put { name, pairs } => map::put(ctx, name, pairs),
        MapCommand::Rm { name, keys } => map::rm(ctx, name, keys),
        MapCommand::Get { name, key, at } => map::get(ctx, name, key, *at),
        MapCommand::Ls(args) => sorted::ls::<String>(ctx, &args.name, &args.select.selection()),
        MapCommand::Versions(args) => sorted::versions::<String>(ctx, &args.name, args.limit),
        MapCommand::Diff(args) => sorted::diff::<String>(ctx, &args.name, args.v1, args.v2),
    }
}

fn run_set(ctx: &commands::Context<'_>, command: &SetCommand) -> anyhow::Result<()> {
    use commands::{set, sorted};
    match command {
        SetCommand::Add { name, keys } => set::add(ctx, name, keys),
        SetCommand::Rm { name, keys } => set::rm(ctx, name, keys),
        SetCommand::Has { name, key, at } => set::has(ctx, name, key, *at),
        SetCommand::Ls(args) => sorted::ls::<()>(ctx, &args.name, &args.select.selection()),
        SetCommand::Versions(args) => sorted::versions::<()>(ctx, &args.name, args.limit),
        SetCommand::Diff(args) => sorted::diff::<()>(ctx, &args.name, args.v1, args.v2),
    }
}

fn run_part(ctx: &commands::Context<'_>, command: &PartCommand) -> anyhow::Result<()> {
    use commands::part;
    match command {
        PartCommand::Put { name, pairs } => part::put(ctx, name, pairs),
        PartCommand::Rm { name, keys } => part::rm(ctx, name, keys),
        PartCommand::Get { name, key } => part::get(ctx, name, key),
        PartCommand::Scan { name, prefix, from, to, limit } => part::scan(
            ctx,
            name,
            &part::ScanRequest { prefix: prefix.as_deref(), from: from.as_deref(), to: to.as_deref(), limit: *limit },
        ),
        PartCommand::Checkpoint { name, full } => part::checkpoint(ctx, name, *full),
        PartCommand::Info { name } => part::info(ctx, name),
    }
}

/// `object …`.
fn run_object(ctx: &commands::Context<'_>, args: &ObjectArgs) -> anyhow::Result<()> {
    use commands::object::{self, MergeValue, RefAction, Target};
    let principal = args.acting_as.as_deref();
    let target = |name| Target { name, principal };
    match &args.command {
        ObjectCommand::Put { name, key, base, value } => {
            let source = value.source().expect("clap requires VALUE or --file");
            object::put(ctx, &target(name), key, base.as_deref(), &source)
        }
        ObjectCommand::Get { name, key, v } => object::get(ctx, &target(name), key, v),
        ObjectCommand::Info { name, key, v } => object::info(ctx, &target(name), key, v),
        ObjectCommand::Merge { name, key, left, right, value, with } => {
            let value = match (with, value.source()) {
                (Some(function), _) => MergeValue::With(match function {
                    MergeArg::Lww => object::BuiltinMerge::Lww,
                    MergeArg::Counter => object::BuiltinMerge::Counter,
                    MergeArg::Set => object::BuiltinMerge::Set,
                    MergeArg::Map => object::BuiltinMerge::Map,
                    MergeArg::Lines => object::BuiltinMerge::Lines,
                }),
                (None, Some(source)) => MergeValue::Given(source),
                (None, None) => unreachable!("clap requires VALUE, --file or --with"),
            };
            object::merge(ctx, &target(name), key, left, right, &value)
        }
        ObjectCommand::Heads { name, key } => object::heads(ctx, &target(name), key),
        ObjectCommand::History { name, key, v, m, values } => object::history(ctx, &target(name), key, v, *m, *values),
        ObjectCommand::Previous { name, key, v } => object::previous(ctx, &target(name), key, v),
        ObjectCommand::Keys { name } => object::keys(ctx, &target(name)),
        ObjectCommand::Versions { name, key } => object::versions(ctx, &target(name), key),
        ObjectCommand::Ref { command } => match command {
            ObjectRefCommand::SetBranch { name, key, ref_name, v, expect } => object::refs(
                ctx,
                &target(name),
                key,
                &RefAction::SetBranch { name: ref_name, to: v, expect: expect.as_deref() },
            ),
            ObjectRefCommand::Tag { name, key, ref_name, v } => {
                object::refs(ctx, &target(name), key, &RefAction::Tag { name: ref_name, to: v })
            }
            ObjectRefCommand::Delete { name, key, ref_name, expect } => {
                object::refs(ctx, &target(name), key, &RefAction::Delete { name: ref_name, expect: expect.as_deref() })
            }
            ObjectRefCommand::List { name, key } => object::refs(ctx, &target(name), key, &RefAction::List),
        },
        ObjectCommand::Diff { name, key, v1, v2 } => object::diff(ctx, &target(name), key, v1, v2),
        ObjectCommand::Verify { name, key, v } => object::verify(ctx, &target(name), key, v.as_deref()),
        ObjectCommand::Prove { name, key, ancestor, head } => object::prove(ctx, &target(name), key, ancestor, head),
        ObjectCommand::CheckProof { file, key, head, ancestor } => object::check_proof(ctx, file, key, head, ancestor),
        ObjectCommand::Restrict { name, key } => object::restrict(ctx, &target(name), key),
        ObjectCommand::Grant { name, key, principal, versions, with_ancestors } => {
            object::grant(ctx, &target(name), key, principal, versions, *with_ancestors)
        }
        ObjectCommand::Grants { name, key } => object::grants(ctx, &target(name), key),
        ObjectCommand::Watch { name, prefix, from, count } => object::watch(ctx, &target(name), prefix, *from, *count),
    }
}

fn print_completions(shell: clap_complete::Shell) -> anyhow::Result<()> {
    // Into a buffer first: clap_complete panics on a write error, and
    // `| head` is a closed pipe we stop at quietly.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut <Cli as clap::CommandFactory>::command(), "varve", &mut script);
    std::io::Write::write_all(&mut std::io::stdout().lock(), &script)?;
    Ok(())
}

/// Before connecting to a `--store` that is not embedded: a command that
/// cannot work there says so, whether or not the store is up.
fn refuse_shared_store(cli: &Cli) -> anyhow::Result<()> {
    let Some(store) = cli.global.store.as_deref() else { return Ok(()) };
    let shared = !matches!(varve::StoreUri::parse(store)?, varve::StoreUri::Embedded(_));
    if shared && matches!(cli.command, Command::Part { .. }) {
        anyhow::bail!(
            "`varve part` works on an embedded store (--data DIR) only: a PART map has one writer, which the \
             journal's lock guarantees and a shared server does not; run it on the server's host against its data \
             directory, or use `varve map` (several writers through --store)"
        );
    }
    Ok(())
}

/// The commands that work on a shared store (`--store varve://…` or `nats://…`) as on an embedded one.
fn works_on_any_store(command: &Command) -> bool {
    matches!(
        command,
        Command::Log { .. } | Command::Map { .. } | Command::Set { .. } | Command::Object(_) | Command::Schema { .. }
    )
}

#[expect(clippy::too_many_lines, reason = "one arm per top-level command; each arm only dispatches")]
fn run(cli: &Cli, out: &Output) -> anyhow::Result<ExitCode> {
    // `varve nats` runs servers and `varve completions` prints a script:
    // neither opens a store, so --store and --data do not apply.
    match &cli.command {
        Command::Nats { command } => {
            run_nats(command, out)?;
            return Ok(ExitCode::SUCCESS);
        }
        Command::Completions { shell } => {
            print_completions(*shell)?;
            return Ok(ExitCode::SUCCESS);
        }
        _ => {}
    }
    let journal = cli.global.journal_options();
    refuse_shared_store(cli)?;
    let Resolved { data, remote, nats } = resolve_store(&cli.global)?;
    let elsewhere = remote.is_some() || nats.is_some();
    if remote.is_some() && matches!(cli.command, Command::Run(_)) {
        anyhow::bail!(
            "handlers run where their namespace is written, so `varve run` takes an embedded store: on the server's \
             host, start it with `varve serve --manifest APP.toml` (network appends then fire the handlers), or run \
             `varve --data DIR run APP.toml` there"
        );
    }
    let shared_ok = works_on_any_store(&cli.command) || (nats.is_some() && matches!(cli.command, Command::Run(_)));
    if elsewhere && !shared_ok {
        anyhow::bail!(
            "this command works on an embedded store (--data DIR) only; with --store varve://… or nats://… use `varve log …`, `varve map …`, `varve set …` or `varve object …`, \
             or run it on the server's host against its data directory"
        );
    }
    let ctx = commands::Context { data, namespace: cli.global.ns.clone(), out, journal, remote, nats };
    match &cli.command {
        Command::Log { command } => {
            use commands::log;
            match command {
                LogCommand::Create(args) => {
                    let on_full = args.on_full.map(|o| match o {
                        OnFullArg::Refuse => varve_log::OnFull::Refuse,
                        OnFullArg::Overwrite => varve_log::OnFull::Overwrite,
                    });
                    log::create(&ctx, &args.name, args.keep, on_full)?;
                }
                LogCommand::Append(args) => {
                    let source = match (&args.value, &args.file) {
                        (_, Some(path)) => log::ValueSource::File(path),
                        (Some(value), None) if value == "-" => log::ValueSource::Stdin,
                        (Some(value), None) => log::ValueSource::Text(value),
                        (None, None) => unreachable!("clap requires VALUE or --file"),
                    };
                    log::append(&ctx, &args.name, &source, args.request_id.as_deref())?;
                }
                LogCommand::Batch(args) => log::batch(&ctx, &args.entries, args.request_id.as_deref())?,
                LogCommand::Get { name, seq } => log::get(&ctx, name, *seq)?,
                LogCommand::Latest { name } => log::latest(&ctx, name)?,
                LogCommand::Scan(args) => log::scan(&ctx, &args.name, args.from, args.to)?,
                LogCommand::Tail(args) => log::tail(&ctx, &args.name, args.from)?,
                LogCommand::Ls => log::ls(&ctx)?,
                LogCommand::Rm { name } => log::rm(&ctx, name)?,
                LogCommand::Trim { name, before } => log::trim(&ctx, name, *before)?,
                LogCommand::Info { name } => log::info(&ctx, name)?,
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Schema { command } => {
            use commands::schema;
            match command {
                SchemaCommand::Ls => schema::ls(&ctx)?,
                SchemaCommand::Show { subject } => schema::show(&ctx, subject)?,
                SchemaCommand::Register { subject, spec } => schema::register(&ctx, subject, spec)?,
                SchemaCommand::Check { subject, spec } => schema::check(&ctx, subject, spec)?,
                SchemaCommand::Append { subject, record } => schema::append(&ctx, subject, record)?,
                SchemaCommand::Upgrade { subject, eager, command, batch } => {
                    schema::upgrade(&ctx, subject, *eager, command.as_deref(), *batch)?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Run(_)
        | Command::Handler { .. }
        | Command::Trace { .. }
        | Command::Events { .. }
        | Command::Repair { .. } => {
            run_runtime_command(&ctx, &cli.command)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Fsck(args) => commands::fsck::run(&ctx, args.repair, args.all),
        Command::Map { .. }
        | Command::SortedMap { .. }
        | Command::Set { .. }
        | Command::Part { .. }
        | Command::Object(_) => {
            run_structure(&ctx, &cli.command)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Pds { command } => {
            use commands::pds;
            match command {
                PdsCommand::Gen { ops, seed } => pds::gen(*ops, *seed)?,
                PdsCommand::Run(args) => pds::run(
                    &ctx,
                    &args.file,
                    &args.structure,
                    args.extra,
                    args.name.as_deref(),
                    args.verify,
                    args.dump,
                )?,
                PdsCommand::Demo => pds::demo(&ctx)?,
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve(args) => {
            run_serve(&ctx, args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench { command } => {
            run_bench(command, cli.global.json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Nats { .. } | Command::Completions { .. } => {
            unreachable!("`varve nats` and `varve completions` are dispatched before the store is opened")
        }
    }
}

/// `nats up|down`.
fn run_nats(command: &NatsCommand, out: &Output) -> anyhow::Result<()> {
    use commands::nats;
    match command {
        NatsCommand::Up(args) => {
            nats::up(out, &nats::UpRequest { nodes: args.nodes, dir: args.dir.clone(), server: args.server.clone() })
        }
        NatsCommand::Down(args) => nats::down(out, &args.dir),
    }
}

/// `bench log|pds|runtime|serve|nats|object`.
fn run_bench(command: &BenchCommand, json: bool) -> anyhow::Result<()> {
    use commands::bench;
    match command {
        BenchCommand::Log(args) => bench::log(&args.dir, args.quick, args.open_mib, args.only.as_deref()),
        BenchCommand::Pds(args) if args.scale => bench::pds_scale(
            args.dir.as_deref(),
            args.scale_max,
            args.node_cache,
            args.checkpoint_bytes_min,
            args.packed_on_heap,
            args.quick,
        ),
        BenchCommand::Pds(args) => {
            bench::pds(args.workloads, args.ops, args.dir.as_deref(), args.csv.as_deref(), args.series_csv.as_deref())
        }
        BenchCommand::Runtime(args) => bench::runtime(&args.dir, args.quick, args.only.as_deref(), json),
        BenchCommand::Serve(args) => {
            bench::serve(&args.dir, args.quick, args.nats_server.as_deref(), args.only.as_deref(), json)
        }
        BenchCommand::Nats(args) => bench::nats(&args.dir, args.quick, args.nats_server.as_deref()),
        BenchCommand::Object(args) => bench::object(&args.dir, args.quick, args.only.as_deref()),
        BenchCommand::Schema(args) => bench::schema(&args.dir, args.quick, args.seed),
        BenchCommand::Repair(args) => bench::repair(&args.dir, args.quick),
    }
}

/// `run`, `handler`, `trace`, `events` and `repair`: the runtime's commands.
fn run_runtime_command(ctx: &commands::Context<'_>, command: &Command) -> anyhow::Result<()> {
    use commands::runtime;
    match command {
        Command::Run(args) => {
            runtime::run(ctx, &args.manifest, args.until_idle, std::time::Duration::from_millis(args.stop_grace_ms))?;
        }
        Command::Handler { command: HandlerCommand::Ls } => {
            runtime::handler_ls(ctx)?;
        }
        Command::Trace { command } => match command {
            TraceCommand::Causes { log, seq } => runtime::trace_related(ctx, log, *seq, false)?,
            TraceCommand::Effects { log, seq } => runtime::trace_related(ctx, log, *seq, true)?,
            TraceCommand::Show { trace_id, dot, otel } => {
                runtime::trace_show(ctx, trace_id, dot.as_deref(), otel.as_deref())?;
            }
        },
        Command::Events { command: EventsCommand::Tail { from, no_follow } } => {
            runtime::events_tail(ctx, *from, !no_follow)?;
        }
        Command::Repair { command: RepairCommand::Plan { record, handler, since_seq, manifest, dot } } => {
            use commands::repair;
            let target = match (record, handler) {
                (Some(record), _) => repair::Target::Record(record),
                (None, Some(name)) => repair::Target::Handler { name, since_seq: *since_seq },
                (None, None) => anyhow::bail!("give --record LOG:SEQ or --handler NAME"),
            };
            repair::plan(ctx, &target, manifest.as_deref(), dot.as_deref())?;
        }
        Command::Repair {
            command: RepairCommand::Run { record, value, value_file, handler, since_seq, manifest, not_replayable },
        } => {
            use commands::repair;
            let target = match (record, handler) {
                (Some(record), _) => repair::Target::Record(record),
                (None, Some(name)) => repair::Target::Handler { name, since_seq: *since_seq },
                (None, None) => anyhow::bail!("give --record LOG:SEQ or --handler NAME"),
            };
            let value = match (value, value_file) {
                (Some(text), _) => Some(text.clone().into_bytes()),
                (None, Some(path)) => Some(anyhow::Context::with_context(std::fs::read(path), || {
                    format!("reading --value-file {}", path.display())
                })?),
                (None, None) => None,
            };
            let choice = match not_replayable {
                NotReplayableArg::Refuse => varve_repair::NotReplayable::Refuse,
                NotReplayableArg::Run => varve_repair::NotReplayable::Run,
                NotReplayableArg::Skip => varve_repair::NotReplayable::Skip,
            };
            repair::run(ctx, &target, value, manifest, choice)?;
        }
        Command::Repair { command: RepairCommand::Resume } => commands::repair::resume(ctx)?,
        _ => unreachable!("run_runtime_command is only called for runtime commands"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn clap_definitions_are_consistent() {
        super::Cli::command().debug_assert();
    }

    #[test]
    fn sizes_parse_with_binary_units() {
        use super::parse_size;
        assert_eq!(parse_size("65536"), Ok(65536));
        assert_eq!(parse_size("64KiB"), Ok(64 << 10));
        assert_eq!(parse_size("4MiB"), Ok(4 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert!(parse_size("4 parsecs").is_err());
        assert!(parse_size("MiB").is_err());
        assert!(parse_size("99999999999999999999G").is_err());
    }
}
