//! `varve bench nats`: the Log on NATS JetStream (issue 12) beside raw
//! JetStream publishes from the same client library, on servers started
//! here (`LocalCluster`, `sync_interval: always`): appends/s and latency for
//! R=1 (one server) and R=3 (a 3-node cluster), 1 and 8 writers, 64 B and
//! 1 KiB records; batched appends; a per-log `get` beside a raw direct get;
//! and the failover time after the stream leader's SIGKILL.
//!
//! Fair pairing: each Varve writer appends to its own log (its own
//! subject) through its own connection; each raw publisher publishes to its
//! own subject of a stream with the same replicas through its own
//! connection, and waits for each ack, as `append` does.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use async_nats::jetstream::context::CreateStreamErrorKind;
use async_nats::jetstream::{self, stream};
use bytes::Bytes;
use rand::{Rng as _, SeedableRng as _};
use varve_log::{LogConfig, Namespace as _};
use varve_nats::cluster::{ClusterOptions, LocalCluster};
use varve_nats::NatsStore;

use crate::stats::{nanos, p50_p99, rate};
use crate::table::{ratio_cell, Align, Table};
use crate::{BenchError, Result};

/// What to run.
#[derive(Clone, Debug)]
pub struct NatsBenchOptions {
    /// The servers' data goes under DIR/nats (deleted after).
    pub dir: PathBuf,
    /// Small counts: a smoke run.
    pub quick: bool,
    /// The nats-server binary; else `LocalCluster`'s search.
    pub nats_server: Option<PathBuf>,
}

/// One traffic shape, Varve beside raw JetStream.
#[derive(Clone, Debug)]
pub struct AppendRow {
    /// Replicas of the stream.
    pub replicas: usize,
    /// Concurrent writers, each its own connection.
    pub writers: usize,
    /// Record bytes.
    pub size: usize,
    /// Varve appends per second, all writers.
    pub varve_per_s: f64,
    /// Median append latency, µs.
    pub varve_p50_us: f64,
    /// 99th percentile append latency, µs.
    pub varve_p99_us: f64,
    /// Raw publishes per second, all publishers.
    pub raw_per_s: f64,
    /// Median publish-to-ack latency, µs.
    pub raw_p50_us: f64,
    /// 99th percentile publish-to-ack latency, µs.
    pub raw_p99_us: f64,
}

/// Everything one run measured.
#[derive(Clone, Debug, Default)]
pub struct NatsReport {
    /// Each traffic shape.
    pub appends: Vec<AppendRow>,
    /// (replicas, records/s) of `append_batch` of [`BATCH`] records.
    pub batches: Vec<(usize, f64)>,
    /// get p50 µs: Varve cold client, Varve warm client, raw direct get (R=3).
    pub get_us: [f64; 3],
    /// Failover times (R=3): kill of the stream leader to the first acknowledged append.
    pub failovers: Vec<Duration>,
}

/// Records per `append_batch` in the batch measurement.
pub const BATCH: usize = 100;
const RECORD_SIZES: [usize; 2] = [64, 1024];
const WRITER_COUNTS: [usize; 2] = [1, 8];
/// The Canal paper's figures (ch. 4): publishes/s at R=3, and its Raft election time.
const CANAL_PUBLISHES_PER_S: f64 = 260.0;
const CANAL_ELECTION_S: f64 = 1.8;

fn external(what: impl std::fmt::Display) -> BenchError {
    BenchError::External(what.to_string())
}

fn start(options: &NatsBenchOptions, nodes: usize, name: &str) -> Result<LocalCluster> {
    let dir = crate::fresh_dir(&options.dir, &format!("nats-{name}"))?;
    let cluster = ClusterOptions {
        name: name.to_owned(),
        node_tags: (1..=nodes).map(|i| vec![format!("az:{i}")]).collect(),
        server_bin: options.nats_server.clone(),
        start_timeout: Duration::from_secs(60),
        ..ClusterOptions::new(dir, nodes)
    };
    LocalCluster::start(cluster).map_err(|e| external(format!("starting {nodes} nats-server(s): {e}")))
}

/// Run every measurement.
pub fn run(options: &NatsBenchOptions) -> Result<NatsReport> {
    let ops = if options.quick { 50 } else { 1000 };
    let mut report = NatsReport::default();
    for replicas in [1, 3] {
        let cluster = start(options, replicas, &format!("r{replicas}"))?;
        // A 30 s request timeout, not the default 5 s: a stream created at
        // R=3 on a loaded machine has taken longer, and the bench measures
        // appends, not how patient the setup is.
        let url = format!("{}?replicas={replicas}&timeout_ms=30000", cluster.url());
        for writers in WRITER_COUNTS {
            for size in RECORD_SIZES {
                eprintln!("bench nats: R={replicas}, {writers} writer(s), {size} B");
                let (varve_per_s, [varve_p50_us, varve_p99_us]) = varve_appends(&url, writers, size, ops)?;
                let (raw_per_s, [raw_p50_us, raw_p99_us]) = raw_publishes(&cluster, replicas, writers, size, ops)?;
                report.appends.push(AppendRow {
                    replicas,
                    writers,
                    size,
                    varve_per_s,
                    varve_p50_us,
                    varve_p99_us,
                    raw_per_s,
                    raw_p50_us,
                    raw_p99_us,
                });
            }
        }
        report.batches.push((replicas, varve_batches(&url, if options.quick { 10 } else { 100 })?));
        if replicas == 3 {
            report.get_us = gets(&cluster, &url, if options.quick { 500 } else { 10_000 })?;
            drop(cluster);
            let mut cluster = start(options, 3, "failover")?;
            report.failovers = failovers(&mut cluster, if options.quick { 1 } else { 5 })?;
        }
    }
    std::fs::remove_dir_all(options.dir.join("nats-r1")).ok();
    std::fs::remove_dir_all(options.dir.join("nats-r3")).ok();
    std::fs::remove_dir_all(options.dir.join("nats-failover")).ok();
    Ok(report)
}

/// A raw client as patient as the Varve side (`timeout_ms=30000`): the
/// default 5 s request timeout failed a stream creation at R=3 under CI load
/// ("jetstream request timed out").
async fn raw_connect(addrs: Vec<String>) -> Result<async_nats::Client> {
    async_nats::ConnectOptions::new()
        .request_timeout(Some(RAW_REQUEST_TIMEOUT))
        .connection_timeout(RAW_REQUEST_TIMEOUT)
        .connect(addrs)
        .await
        .map_err(external)
}

const RAW_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

fn namespace_name(tag: &str) -> String {
    format!("bench{}{tag}", std::process::id())
}

/// `writers` threads, each its own connection and log, `ops` appends each.
fn varve_appends(url: &str, writers: usize, size: usize, ops: usize) -> Result<(f64, [f64; 2])> {
    let namespace = namespace_name(&format!("w{writers}s{size}"));
    let stores: Vec<NatsStore> = (0..writers).map(|_| NatsStore::open(url)).collect::<varve_log::Result<_>>()?;
    let value = vec![7u8; size];
    for (writer, store) in stores.iter().enumerate() {
        store.nats_namespace(&namespace)?.create_log(&format!("w{writer}"), LogConfig::unbounded())?;
    }
    let started = Instant::now();
    let latencies: Vec<Vec<u64>> = std::thread::scope(|scope| {
        let handles: Vec<_> = stores
            .iter()
            .enumerate()
            .map(|(writer, store)| {
                let (namespace, value) = (&namespace, &value);
                scope.spawn(move || -> Result<Vec<u64>> {
                    let ns = store.nats_namespace(namespace)?;
                    let log = format!("w{writer}");
                    let mut samples = Vec::with_capacity(ops);
                    for _ in 0..ops {
                        let one = Instant::now();
                        ns.append(&log, value)?;
                        samples.push(nanos(one.elapsed()));
                    }
                    Ok(samples)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().map_err(|_| external("a writer panicked"))?).collect::<Result<_>>()
    })?;
    let elapsed = started.elapsed();
    let all: Vec<u64> = latencies.into_iter().flatten().collect();
    let [p50, p99] = p50_p99(all, 0);
    Ok((rate((writers * ops) as u64, elapsed), [p50 / 1e3, p99 / 1e3]))
}

/// The same traffic as raw JetStream publishes: a stream with the same
/// replicas, a subject per publisher, a connection each, each ack awaited.
fn raw_publishes(
    cluster: &LocalCluster,
    replicas: usize,
    writers: usize,
    size: usize,
    ops: usize,
) -> Result<(f64, [f64; 2])> {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().map_err(external)?;
    let addrs: Vec<String> = (0..cluster.nodes()).map(|n| cluster.client_addr(n)).collect();
    let name = format!("RAW{}W{writers}S{size}", std::process::id());
    runtime.block_on(async {
        let clients = {
            let mut clients = Vec::new();
            for _ in 0..writers {
                clients.push(raw_connect(addrs.clone()).await?);
            }
            clients
        };
        let js = jetstream::new(clients[0].clone());
        let config = stream::Config {
            name: name.clone(),
            subjects: vec![format!("{name}.>")],
            num_replicas: replicas,
            storage: stream::StorageType::File,
            allow_direct: true,
            ..stream::Config::default()
        };
        // Just after a cluster starts, its meta leader may not have heard
        // from every peer yet and refuses an R=3 placement ("no suitable
        // peers for placement, peer offline", seen under CI load), or its
        // answer is lost while the meta group elects a leader: retry (a
        // creation with the same config is idempotent), as varve-nats does
        // when it creates a namespace's stream.
        let ready = Instant::now();
        loop {
            match js.create_stream(config.clone()).await {
                Ok(_) => break,
                Err(e)
                    if (e.kind() == CreateStreamErrorKind::TimedOut || e.to_string().contains("peer offline"))
                        && ready.elapsed() < Duration::from_secs(60) =>
                {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => return Err(external(e)),
            }
        }
        // A new R=3 stream may have no leader yet, and the server a client
        // is connected to may not know the stream yet ("no stream found",
        // seen under load): each connection publishes until one is acknowledged.
        for client in &clients {
            warm_up(&jetstream::new(client.clone()), &name).await?;
        }
        let payload = Bytes::from(vec![7u8; size]);
        let started = Instant::now();
        let tasks: Vec<_> = clients
            .into_iter()
            .enumerate()
            .map(|(writer, client)| {
                let (payload, subject) = (payload.clone(), format!("{name}.w{writer}"));
                tokio::spawn(async move {
                    let js = jetstream::new(client);
                    let mut samples = Vec::with_capacity(ops);
                    for _ in 0..ops {
                        let one = Instant::now();
                        js.publish(subject.clone(), payload.clone())
                            .await
                            .map_err(external)?
                            .await
                            .map_err(external)?;
                        samples.push(nanos(one.elapsed()));
                    }
                    Ok::<_, BenchError>(samples)
                })
            })
            .collect();
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.map_err(external)??);
        }
        let elapsed = started.elapsed();
        js.delete_stream(&name).await.map_err(external)?;
        let [p50, p99] = p50_p99(all, 0);
        Ok((rate((writers * ops) as u64, elapsed), [p50 / 1e3, p99 / 1e3]))
    })
}

/// Publish to stream `name` through `js` until a publish is acknowledged
/// (at most 60 s), so the timed publishes start on a stream this
/// connection's server can reach.
async fn warm_up(js: &jetstream::Context, name: &str) -> Result<()> {
    let ready = Instant::now();
    loop {
        let acked = match js.publish(format!("{name}.warm"), Bytes::new()).await {
            Ok(ack) => ack.await.is_ok(),
            Err(_) => false,
        };
        if acked {
            return Ok(());
        }
        if ready.elapsed() > Duration::from_secs(60) {
            return Err(external(format!("stream {name} took no publish within 60 s")));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Records/s of `append_batch` with [`BATCH`] records, one writer.
fn varve_batches(url: &str, batches: usize) -> Result<f64> {
    let store = NatsStore::open(url)?;
    let ns = store.nats_namespace(&namespace_name("batch"))?;
    ns.create_log("b", LogConfig::unbounded())?;
    let value = vec![7u8; 64];
    let batch: Vec<(&str, &[u8])> = vec![("b", value.as_slice()); BATCH];
    let started = Instant::now();
    for _ in 0..batches {
        ns.append_batch(&batch)?;
    }
    Ok(rate((batches * BATCH) as u64, started.elapsed()))
}

/// get p50 (µs) of a log whose records are interleaved in the stream with
/// another log's: a new client (positions unknown), the same client again
/// (positions learned), and a raw direct get by stream sequence.
fn gets(cluster: &LocalCluster, url: &str, records: usize) -> Result<[f64; 3]> {
    let namespace = namespace_name("get");
    let writer = NatsStore::open(url)?.nats_namespace(&namespace)?;
    writer.create_log("a", LogConfig::unbounded())?;
    writer.create_log("b", LogConfig::unbounded())?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let value = vec![7u8; 64];
    let mut written = 0;
    while written < records {
        // A random share of the other log between records of this one.
        let mut batch: Vec<(&str, &[u8])> = Vec::new();
        for _ in 0..BATCH {
            batch.push(if rng.gen_bool(0.5) { ("a", value.as_slice()) } else { ("b", value.as_slice()) });
        }
        written += batch.iter().filter(|(log, _)| *log == "a").count();
        writer.append_batch(&batch)?;
    }
    let latest = writer.latest("a")?;
    let samples = 1000.min(records);
    let seqs: Vec<u64> = (0..samples).map(|_| rng.gen_range(1..=latest)).collect();
    let reader = NatsStore::open(url)?.nats_namespace(&namespace)?;
    let time = |ns: &varve_nats::NatsNamespace| -> Result<f64> {
        let mut all = Vec::with_capacity(samples);
        for seq in &seqs {
            let one = Instant::now();
            ns.get("a", *seq)?;
            all.push(nanos(one.elapsed()));
        }
        Ok(p50_p99(all, 0)[0] / 1e3)
    };
    let cold = time(&reader)?;
    let warm = time(&reader)?;
    let stream_name = reader.stream_name().to_owned();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().map_err(external)?;
    let addrs: Vec<String> = (0..cluster.nodes()).map(|n| cluster.client_addr(n)).collect();
    let raw = runtime.block_on(async {
        let client = raw_connect(addrs).await?;
        let stream = jetstream::new(client).get_stream(&stream_name).await.map_err(external)?;
        let last = stream.get_info().await.map_err(external)?.state.last_sequence;
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
        let mut all = Vec::with_capacity(samples);
        for _ in 0..samples {
            let seq = rng.gen_range(1..=last);
            let one = Instant::now();
            stream.direct_get(seq).await.map_err(external)?;
            all.push(nanos(one.elapsed()));
        }
        Ok::<_, BenchError>(p50_p99(all, 0)[0] / 1e3)
    })?;
    Ok([cold, warm, raw])
}

/// Kill the stream leader, time until an append is acknowledged, restart; `rounds` times.
fn failovers(cluster: &mut LocalCluster, rounds: usize) -> Result<Vec<Duration>> {
    let url = format!("{}?replicas=3&timeout_ms=1000", cluster.url());
    let store = NatsStore::open(&url)?;
    let ns = store.nats_namespace(&namespace_name("failover"))?;
    ns.create_log("f", LogConfig::unbounded())?;
    ns.append("f", b"first")?;
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let deadline = Instant::now() + Duration::from_secs(60);
        let leader = loop {
            if let Ok(Some(node)) = cluster.stream_leader(ns.stream_name()) {
                break node;
            }
            if Instant::now() > deadline {
                return Err(external("the stream has no leader after 60 s"));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        cluster.kill(leader).map_err(external)?;
        let killed = Instant::now();
        // The append on a thread; here, watch for the new leader (monitoring).
        let elected = std::thread::scope(|scope| {
            let append = scope.spawn(|| ns.append("f", b"after the kill"));
            let mut elected = None;
            while elected.is_none() && killed.elapsed() < Duration::from_secs(60) {
                if let Ok(Some(node)) = cluster.stream_leader(ns.stream_name()) {
                    if node != leader {
                        elected = Some(killed.elapsed());
                    }
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let appended = append.join().map_err(|_| external("the append panicked"))?;
            appended.map(|_| elected).map_err(BenchError::from)
        })?;
        times.push(killed.elapsed());
        if let Some(elected) = elected {
            eprintln!("bench nats: new leader seen after {elected:?}");
        }
        cluster.restart(leader).map_err(external)?;
        cluster.wait_healthy(Duration::from_secs(60)).map_err(external)?;
    }
    Ok(times)
}

impl NatsReport {
    /// The report as Markdown tables with the ratios and the goals.
    #[must_use]
    pub fn to_markdown(&self) -> String {
        let mut appends = Table::new(&[
            ("R", Align::Right),
            ("writers", Align::Right),
            ("record", Align::Right),
            ("Varve appends/s", Align::Right),
            ("p50 µs", Align::Right),
            ("p99 µs", Align::Right),
            ("raw publishes/s", Align::Right),
            ("p50 µs", Align::Right),
            ("p99 µs", Align::Right),
            ("Varve / raw", Align::Right),
        ]);
        for row in &self.appends {
            appends.row(vec![
                row.replicas.to_string(),
                row.writers.to_string(),
                format!("{} B", row.size),
                format!("{:.0}", row.varve_per_s),
                format!("{:.0}", row.varve_p50_us),
                format!("{:.0}", row.varve_p99_us),
                format!("{:.0}", row.raw_per_s),
                format!("{:.0}", row.raw_p50_us),
                format!("{:.0}", row.raw_p99_us),
                ratio_cell(row.varve_per_s / row.raw_per_s, true),
            ]);
        }
        let mut out = format!(
            "## Appends: Varve on JetStream beside raw publishes (goal ≥ 0.8× raw at R=3)\n\n{}\n",
            appends.to_markdown()
        );
        for (replicas, per_s) in &self.batches {
            let _ = writeln!(out, "- `append_batch` of {BATCH} × 64 B, 1 writer, R={replicas}: {per_s:.0} records/s");
        }
        let [cold, warm, raw] = self.get_us;
        let _ = writeln!(out,
            "- get p50, R=3, a log interleaved with another: {cold:.0} µs with a new client, {warm:.0} µs once it knows \
             the positions, raw direct get by stream sequence {raw:.0} µs ({:.2}× and {:.2}× raw)",
            cold / raw,
            warm / raw
        );
        let mut sorted = self.failovers.clone();
        sorted.sort();
        if let (Some(p50), Some(max)) = (sorted.get(sorted.len() / 2), sorted.last()) {
            let _ = writeln!(out,
                "- failover, R=3 (SIGKILL of the stream leader to the first acknowledged append, {} kills): p50 {:.2} s, \
                 max {:.2} s (Canal's own Raft election: {CANAL_ELECTION_S} s)",
                sorted.len(),
                p50.as_secs_f64(),
                max.as_secs_f64()
            );
        }
        if let Some(row) = self.appends.iter().find(|r| r.replicas == 3 && r.writers == 1 && r.size == 64) {
            let _ = writeln!(out,
                "- Canal reports {CANAL_PUBLISHES_PER_S} publishes/s at R=3; Varve here, 1 writer, 64 B: {:.0}/s ({:.1}×)",
                row.varve_per_s,
                row.varve_per_s / CANAL_PUBLISHES_PER_S
            );
        }
        out
    }
}
