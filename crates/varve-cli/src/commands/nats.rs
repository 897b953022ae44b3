//! `varve nats up|down`: a local NATS JetStream cluster on loopback, to try
//! the distributed backend (see `varve_nats::cluster`). `up` starts
//! `nats-server` processes that keep running after it exits, recorded in
//! `DIR/cluster.json`, and prints the cluster's URL as the last line of
//! stdout (progress goes to stderr); `down` stops them.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use varve_nats::cluster::{ClusterOptions, ClusterRecord, LocalCluster};

use crate::output::Output;

/// How long `up` waits for every server to be healthy after they started.
const HEALTHY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long `down` lets the servers shut down after SIGTERM before it kills them.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// What `varve nats up` was asked for.
pub struct UpRequest {
    pub nodes: usize,
    pub dir: PathBuf,
    /// The `nats-server` binary (`--server`); else `varve_nats::cluster::find_server_binary`.
    pub server: Option<PathBuf>,
}

/// `up`'s answer with `--json`.
#[derive(Serialize)]
struct UpAnswer<'a> {
    url: &'a str,
    dir: &'a Path,
    /// Servers running in `dir` now.
    servers: usize,
    /// True when a cluster already ran there and none was started.
    already_running: bool,
}

/// `down`'s answer with `--json`.
#[derive(Serialize)]
struct DownAnswer<'a> {
    dir: &'a Path,
    /// Servers that were running and were stopped.
    stopped: usize,
}

/// `varve nats up`: start the cluster, wait until it is healthy, leave it
/// running, print its URL. A cluster already running in the directory is
/// reported (with its URL) instead of starting another.
pub fn up(out: &Output, request: &UpRequest) -> anyhow::Result<()> {
    let dir = &request.dir;
    if let Some(record) = ClusterRecord::read(dir)? {
        let running = record.running().len();
        if running > 0 {
            note(&format!(
                "a cluster already runs in {} ({running} of {} server(s)): not starting another; \
                 `varve nats down --dir {}` stops it",
                dir.display(),
                record.nodes.len(),
                dir.display()
            ));
            let answer = UpAnswer { url: &record.url, dir, servers: running, already_running: true };
            return Ok(out.answer(&answer, || record.url.clone())?);
        }
    }
    note(&format!("starting {} nats-server(s) in {}", request.nodes, dir.display()));
    let options = ClusterOptions {
        // A failure domain per node, as on real machines: placement can ask for distinct ones.
        node_tags: (1..=request.nodes).map(|az| vec![format!("az:{az}")]).collect(),
        server_bin: request.server.clone(),
        // The servers outlive this command: a Ctrl-C at the terminal must not reach them.
        own_process_group: true,
        ..ClusterOptions::new(dir, request.nodes)
    };
    let cluster = LocalCluster::start(options)?;
    cluster.wait_healthy(HEALTHY_TIMEOUT)?;
    let url = cluster.url();
    cluster.detach()?;
    note(&format!(
        "{} server(s) running, every write fsynced; logs in {}/node*/nats.log; `varve nats down --dir {}` stops them",
        request.nodes,
        dir.display(),
        dir.display()
    ));
    let answer = UpAnswer { url: &url, dir, servers: request.nodes, already_running: false };
    Ok(out.answer(&answer, || url.clone())?)
}

/// `varve nats down`: stop the cluster `up` started in `dir`.
pub fn down(out: &Output, dir: &Path) -> anyhow::Result<()> {
    let stopped = LocalCluster::stop_dir(dir, STOP_TIMEOUT)?;
    Ok(out.answer(&DownAnswer { dir, stopped }, || format!("stopped {stopped} nats-server(s) of {}", dir.display()))?)
}

/// A line of progress on stderr (stdout carries the answer only).
fn note(message: &str) {
    let _ = writeln!(std::io::stderr(), "varve nats: {message}");
}
