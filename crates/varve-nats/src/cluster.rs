#![allow(clippy::doc_markdown, reason = "JetStream and nats-server's own terms in prose")]

//! A local `nats-server` cluster on loopback: real server processes, for
//! the JetStream backend's tests and for trying it (`varve nats up`).
//!
//! [`LocalCluster::start`] writes each node's config, starts the servers on
//! free 127.0.0.1 ports and returns once every node is healthy and JetStream
//! has a meta leader. A test can then kill (SIGKILL), restart, pause
//! (SIGSTOP) and resume nodes, and ask which node leads a stream. Dropping
//! the cluster kills its servers; [`LocalCluster::detach`] leaves them
//! running instead, recorded for [`LocalCluster::stop_dir`].
//!
//! ```no_run
//! use std::time::Duration;
//! use varve_nats::cluster::{ClusterOptions, LocalCluster};
//!
//! let dir = std::env::temp_dir().join("varve-cluster-example");
//! let mut cluster = LocalCluster::start(ClusterOptions::new(&dir, 3))?;
//! println!("clients connect to {}", cluster.url()); // nats://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3
//! // … a client creates an R3 stream "orders", then:
//! if let Some(leader) = cluster.stream_leader("orders")? {
//!     cluster.kill(leader)?; // another node takes over
//!     cluster.restart(leader)?; // same ports, config and store
//!     cluster.wait_healthy(Duration::from_secs(60))?;
//! }
//! # Ok::<(), varve_nats::cluster::ClusterError>(())
//! ```
//!
//! ## Files
//!
//! Under the cluster's directory `DIR`, node `I` (numbered from 0) has
//! `DIR/nodeI/nats.conf`, its log `DIR/nodeI/nats.log` (stdout and stderr,
//! appended across starts) and its JetStream store `DIR/nodeI/store/`; a
//! detached cluster adds `DIR/cluster.json` ([`ClusterRecord`]). The store
//! outlives the processes: a cluster started again on the same directory
//! (with new ports) finds its streams.
//!
//! ## Readiness
//!
//! "Healthy" is nats-server's own `/healthz` on the node's monitoring port:
//! the server accepts clients, JetStream runs, and in a cluster the node is
//! current with the meta leader and every stream replica it holds; `/jsz`
//! then confirms a meta leader. A restarted node is waited for only until
//! JetStream runs on it (`/healthz?js-enabled-only=true`): catching up may
//! take longer, and [`LocalCluster::wait_healthy`] waits for that.
//!
//! The config text is in `cluster/config.rs`, the monitoring client in
//! `cluster/monitor.rs`, processes and signals in `cluster/process.rs`, and
//! the record of a detached cluster in `cluster/record.rs`.

mod config;
mod error;
mod monitor;
mod process;
mod record;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use self::config::NodePorts;
use self::monitor::{Jsz, Monitor};
use self::process::{Sig, State};

pub use self::error::ClusterError;
pub use self::process::{find_server_binary, SERVER_ENV};
pub use self::record::{ClusterRecord, NodeRecord};

/// Most nodes in one cluster: more than any test needs (JetStream streams
/// have at most 5 replicas), few enough for one machine's loopback.
pub const NODES_MAX: usize = 16;

/// How long [`LocalCluster::start`] and [`LocalCluster::restart`] wait for
/// nodes by default ([`ClusterOptions::start_timeout`]).
pub const START_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);

/// Starts of the whole cluster (each with new ports), or of a restarted
/// node (on its own ports), before a port that another process took in the
/// meantime is an error.
const START_ATTEMPTS_MAX: usize = 3;
/// How long [`LocalCluster::restart`] waits before it tries a taken port again.
const RESTART_RETRY_DELAY: Duration = Duration::from_millis(500);

/// How often a wait for nodes asks their monitoring endpoints again.
const HEALTH_POLL: Duration = Duration::from_millis(50);

/// Longest wait for a process to show that it stopped (SIGSTOP) or went on
/// (SIGCONT): the kernel does this at once, the bound is for a busy machine.
const SIGNAL_WAIT: Duration = Duration::from_secs(10);

/// How often a wait for a process's state looks again.
const SIGNAL_POLL: Duration = Duration::from_millis(5);

/// Lines of a node's log quoted in an error.
const LOG_TAIL_LINES: usize = 5;

/// What cluster to start.
#[derive(Clone, Debug)]
#[expect(clippy::struct_excessive_bools, reason = "independent switches, each one line of nats.conf or of the spawn")]
pub struct ClusterOptions {
    /// How many servers: 1 is a single server (no `cluster` block); 2 or
    /// more form a cluster with routes between every pair. At most [`NODES_MAX`].
    pub nodes: usize,
    /// The cluster's directory: node `I`'s config, log and store are under `DIR/nodeI/`.
    pub dir: PathBuf,
    /// `jetstream { sync_interval: always }`: every write is fsynced before
    /// it is acknowledged. Else the server's default (an fsync every 2
    /// minutes: acknowledged writes can be lost when every node loses power).
    pub sync_always: bool,
    /// The cluster's name, and the prefix of its server names (`NAME-I`):
    /// 1 to 64 of `A-Z a-z 0-9 - _`.
    pub name: String,
    /// `jetstream { domain }`: needed to tell apart a hub's and its leaf
    /// nodes' JetStream (give each side its own).
    pub domain: Option<String>,
    /// Each node's `server_tags` (e.g. `az:1`), for placement (a stream's
    /// `placement.tags`; `unique_tag`). Node `I` gets `node_tags[I]`; a
    /// shorter list leaves the other nodes untagged.
    pub node_tags: Vec<Vec<String>>,
    /// Accept leaf-node connections: `leafnodes { listen: 127.0.0.1:PORT }`
    /// on every node ([`LocalCluster::leaf_url`]).
    pub leaf_listen: bool,
    /// With `leaf_listen`, tell connected leaf nodes every node's leaf-node
    /// port, so that they can move to another node when theirs fails (the
    /// server's default). `false` writes `leafnodes { no_advertise: true }`:
    /// a leaf node then connects only where its `remotes` say, e.g. through
    /// a proxy that a test cuts.
    pub leaf_advertise: bool,
    /// Make every node a leaf node of that hub:
    /// `leafnodes { remotes: [{ url: "nats-leaf://127.0.0.1:PORT" }] }`.
    pub leaf_remote: Option<String>,
    /// With `leaf_remote`, subjects this leaf node takes nothing on from
    /// its hub (`remotes: [{ deny_imports }]`): e.g. `varve.>`, so that a
    /// write sent to the hub never reaches this node's streams.
    pub leaf_deny_imports: Vec<String>,
    /// The `nats-server` binary; `None`: [`find_server_binary`].
    pub server_bin: Option<PathBuf>,
    /// Start every node in a process group of its own, so that a Ctrl-C at
    /// the terminal (SIGINT to its foreground process group) does not stop
    /// it: what a cluster that will be [detached](LocalCluster::detach)
    /// needs. Otherwise an interrupted test run takes its servers with it.
    pub own_process_group: bool,
    /// How long to wait for the nodes to be healthy after a start, or for
    /// JetStream to run after a restart.
    pub start_timeout: Duration,
}

impl ClusterOptions {
    /// `nodes` servers named `varve-I` under `dir`, fsyncing every write,
    /// untagged, no domain or leaf nodes, the server from
    /// [`find_server_binary`], waited for up to [`START_TIMEOUT_DEFAULT`].
    #[must_use]
    pub fn new(dir: impl Into<PathBuf>, nodes: usize) -> ClusterOptions {
        ClusterOptions {
            nodes,
            dir: dir.into(),
            sync_always: true,
            name: "varve".to_owned(),
            domain: None,
            node_tags: Vec::new(),
            leaf_listen: false,
            leaf_advertise: true,
            leaf_remote: None,
            leaf_deny_imports: Vec::new(),
            server_bin: None,
            own_process_group: false,
            start_timeout: START_TIMEOUT_DEFAULT,
        }
    }
}

/// Running `nats-server` processes on loopback, killed when dropped (unless
/// [detached](LocalCluster::detach)). Nodes are numbered from 0; a method
/// given a node beyond the cluster returns [`ClusterError::NoSuchNode`]
/// (the accessors that return no `Result` panic instead).
pub struct LocalCluster {
    /// The options started with, `dir` made absolute.
    options: ClusterOptions,
    program: PathBuf,
    nodes: Vec<Node>,
    monitor: Monitor,
    /// Set by `detach`: the processes outlive this value.
    detached: bool,
}

/// One server: where its files are, its ports, and its process while it runs.
struct Node {
    name: String,
    dir: PathBuf,
    config: PathBuf,
    log: PathBuf,
    ports: NodePorts,
    /// `None` once killed (or found exited).
    child: Option<Child>,
    /// Stopped by SIGSTOP.
    paused: bool,
    /// The log's length when the process was spawned: its own lines start there.
    log_from: u64,
}

/// What a wait for nodes asks of each.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Readiness {
    /// `/healthz?js-enabled-only=true`: the server accepts clients and JetStream runs.
    JetStreamEnabled,
    /// `/healthz` (current with the meta leader and every replica held) and a meta leader in `/jsz`.
    Healthy,
}

/// Why a wait for nodes failed: a port taken under a starting node is told
/// apart, because `start` then tries again with new ports.
enum WaitFailure {
    PortTaken { node: usize },
    Error(ClusterError),
}

impl From<ClusterError> for WaitFailure {
    fn from(error: ClusterError) -> WaitFailure {
        WaitFailure::Error(error)
    }
}

impl LocalCluster {
    /// Write the configs, start every node, and return once each answers
    /// 200 on `/healthz` and JetStream has a meta leader (up to
    /// `options.start_timeout`). A node that could not listen because
    /// another process took its port meanwhile makes the whole start begin
    /// again with new ports (at most 3 starts).
    ///
    /// Errors: `InvalidOptions` (also when `dir` holds a running detached
    /// cluster), `ServerNotFound`, `Io`, `Spawn`, `Exited` (the log says
    /// why), `PortsTaken`, `NotHealthy`. Nodes already started are killed.
    pub fn start(options: ClusterOptions) -> Result<LocalCluster, ClusterError> {
        config::validate(&options)?;
        let program = match &options.server_bin {
            Some(program) => program.clone(),
            None => find_server_binary()?,
        };
        let dir = std::path::absolute(&options.dir)
            .map_err(|e| ClusterError::io(format!("resolving {}", options.dir.display()), e))?;
        if let Some(record) = ClusterRecord::read(&dir)? {
            let running = record.running();
            if !running.is_empty() {
                return Err(ClusterError::InvalidOptions {
                    reason: format!(
                        "{} holds a running cluster ({} server(s), {}): stop it first (`varve nats down --dir {}`) \
                         or use another directory",
                        dir.display(),
                        running.len(),
                        record.url,
                        dir.display()
                    ),
                });
            }
        }
        let options = ClusterOptions { dir, ..options };
        let mut attempt = 1;
        loop {
            let mut cluster = LocalCluster::configure(&options, &program)?;
            match cluster.spawn_all_and_wait() {
                Ok(()) => return Ok(cluster),
                Err(WaitFailure::Error(error)) => return Err(error),
                Err(WaitFailure::PortTaken { node }) => {
                    if attempt == START_ATTEMPTS_MAX {
                        let log = cluster.nodes[node].log.clone();
                        return Err(ClusterError::PortsTaken { node, attempts: attempt, log });
                    }
                    attempt += 1;
                    // Dropping `cluster` kills the nodes that did start.
                }
            }
        }
    }

    /// A cluster value with new free ports and every node's directory and
    /// config written, no process started.
    fn configure(options: &ClusterOptions, program: &Path) -> Result<LocalCluster, ClusterError> {
        let ports = config::free_ports(options.nodes, options.leaf_listen)?;
        let mut nodes = Vec::with_capacity(options.nodes);
        for (index, own_ports) in ports.iter().enumerate() {
            let dir = options.dir.join(format!("node{index}"));
            std::fs::create_dir_all(&dir).map_err(|e| ClusterError::io(format!("creating {}", dir.display()), e))?;
            let config_path = dir.join("nats.conf");
            std::fs::write(&config_path, config::render(options, index, &ports))
                .map_err(|e| ClusterError::io(format!("writing {}", config_path.display()), e))?;
            nodes.push(Node {
                name: config::server_name(&options.name, index),
                log: dir.join("nats.log"),
                config: config_path,
                dir,
                ports: *own_ports,
                child: None,
                paused: false,
                log_from: 0,
            });
        }
        Ok(LocalCluster {
            options: options.clone(),
            program: program.to_owned(),
            nodes,
            monitor: Monitor::new(),
            detached: false,
        })
    }

    fn spawn_all_and_wait(&mut self) -> Result<(), WaitFailure> {
        for node in 0..self.nodes.len() {
            self.spawn(node)?;
        }
        let all: Vec<usize> = (0..self.nodes.len()).collect();
        self.wait_ready(&all, Readiness::Healthy, self.options.start_timeout)
    }

    /// Start node `node`'s process.
    fn spawn(&mut self, node: usize) -> Result<(), ClusterError> {
        let own_group = self.options.own_process_group;
        let entry = &mut self.nodes[node];
        entry.log_from = process::log_len(&entry.log);
        let child = process::spawn(&self.program, &entry.dir, &entry.config, &entry.log, own_group)
            .map_err(|source| ClusterError::Spawn { node, program: self.program.clone(), source })?;
        entry.child = Some(child);
        entry.paused = false;
        Ok(())
    }

    /// Wait until every node of `which` is ready, up to `timeout`. A node
    /// that exits meanwhile is `Exited`, or `PortTaken` when its log says
    /// it could not listen; a paused one is `Paused` at once.
    fn wait_ready(&mut self, which: &[usize], readiness: Readiness, timeout: Duration) -> Result<(), WaitFailure> {
        let started = Instant::now();
        let mut pending: Vec<usize> = which.to_vec();
        let mut last = vec![String::from("no answer yet"); self.nodes.len()];
        loop {
            for &node in &pending {
                self.check_alive(node)?;
            }
            pending.retain(|&node| match self.ready(node, readiness) {
                Ok(()) => false,
                Err(reason) => {
                    last[node] = reason;
                    true
                }
            });
            let Some(&node) = pending.first() else {
                return Ok(());
            };
            if started.elapsed() >= timeout {
                return Err(ClusterError::NotHealthy {
                    node,
                    waited: started.elapsed(),
                    last: last[node].clone(),
                    log: self.nodes[node].log.clone(),
                }
                .into());
            }
            std::thread::sleep(HEALTH_POLL);
        }
    }

    /// `Ok` while node `node`'s process runs unpaused; else why it cannot answer.
    fn check_alive(&mut self, node: usize) -> Result<(), WaitFailure> {
        let entry = &mut self.nodes[node];
        if entry.paused {
            return Err(ClusterError::Paused { node }.into());
        }
        let Some(child) = entry.child.as_mut() else {
            return Err(ClusterError::NotRunning { node }.into());
        };
        let status = match child.try_wait() {
            Ok(None) => return Ok(()),
            Ok(Some(status)) => status.to_string(),
            Err(e) => format!("its status could not be read: {e}"),
        };
        entry.child = None;
        if process::log_says_port_taken(&entry.log, entry.log_from) {
            return Err(WaitFailure::PortTaken { node });
        }
        Err(ClusterError::Exited {
            node,
            status,
            log: entry.log.clone(),
            log_tail: process::log_tail(&entry.log, entry.log_from, LOG_TAIL_LINES),
        }
        .into())
    }

    /// `Ok` when node `node` is ready; else what its monitoring endpoint said.
    fn ready(&self, node: usize, readiness: Readiness) -> Result<(), String> {
        let port = self.nodes[node].ports.http;
        match readiness {
            Readiness::JetStreamEnabled => self.monitor.healthz(port, "js-enabled-only=true"),
            Readiness::Healthy => {
                self.monitor.healthz(port, "")?;
                self.monitor.jsz(port, "")?.meta_ready()
            }
        }
    }

    /// The client URL: `nats://127.0.0.1:P1,127.0.0.1:P2,…`, every node in
    /// order (the form of a Varve store URI; a NATS client takes the
    /// addresses one by one).
    #[must_use]
    pub fn url(&self) -> String {
        let addrs: Vec<String> = (0..self.nodes.len()).map(|node| self.client_addr(node)).collect();
        format!("nats://{}", addrs.join(","))
    }

    /// Node `node`'s client address, `127.0.0.1:PORT`.
    ///
    /// # Panics
    ///
    /// If there is no such node.
    #[must_use]
    pub fn client_addr(&self, node: usize) -> String {
        format!("127.0.0.1:{}", self.nodes[node].ports.client)
    }

    /// Where leaf nodes connect, `nats-leaf://127.0.0.1:PORT` (node 0's
    /// leaf-node port), when the cluster was started with `leaf_listen`.
    #[must_use]
    pub fn leaf_url(&self) -> Option<String> {
        self.nodes.first()?.ports.leaf.map(|port| format!("nats-leaf://127.0.0.1:{port}"))
    }

    /// How many nodes the cluster has, running or not.
    #[must_use]
    pub fn nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Node `node`'s `server_name`, `NAME-NODE` (as the monitoring
    /// endpoints and JetStream's cluster info name it).
    ///
    /// # Panics
    ///
    /// If there is no such node.
    #[must_use]
    pub fn server_name(&self, node: usize) -> String {
        self.nodes[node].name.clone()
    }

    /// The cluster's directory (absolute).
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.options.dir
    }

    /// Node `node`'s log file, `DIR/nodeI/nats.log`.
    ///
    /// # Panics
    ///
    /// If there is no such node.
    #[must_use]
    pub fn log_path(&self, node: usize) -> &Path {
        &self.nodes[node].log
    }

    fn node(&self, node: usize) -> Result<&Node, ClusterError> {
        self.nodes.get(node).ok_or(ClusterError::NoSuchNode { node, nodes: self.nodes.len() })
    }

    /// The pid of node `node`'s process, checking it runs.
    fn running_pid(&self, node: usize) -> Result<u32, ClusterError> {
        self.node(node)?.child.as_ref().map(Child::id).ok_or(ClusterError::NotRunning { node })
    }

    /// Kill node `node` with SIGKILL (a paused one too) and wait for it to
    /// exit. Its store stays for [`restart`](LocalCluster::restart).
    pub fn kill(&mut self, node: usize) -> Result<(), ClusterError> {
        let pid = self.running_pid(node)?;
        let entry = &mut self.nodes[node];
        let signal_error = |reason: std::io::Error| ClusterError::Signal {
            node,
            pid,
            signal: Sig::Kill.name(),
            reason: reason.to_string(),
        };
        if let Some(mut child) = entry.child.take() {
            entry.paused = false;
            child.kill().map_err(signal_error)?;
            child.wait().map_err(signal_error)?;
        }
        Ok(())
    }

    /// Start a killed node again: the same config, ports and store. Returns
    /// once JetStream runs on it (`/healthz?js-enabled-only=true`); it may
    /// still be catching up: [`wait_healthy`](LocalCluster::wait_healthy)
    /// waits for that.
    ///
    /// Errors: `AlreadyRunning`; `Spawn`; `Exited`; `PortsTaken` (another
    /// process took one of its ports while it was down, and kept it over
    /// [`START_ATTEMPTS_MAX`] tries); `NotHealthy`.
    pub fn restart(&mut self, node: usize) -> Result<(), ClusterError> {
        if self.node(node)?.child.is_some() {
            return Err(ClusterError::AlreadyRunning { node });
        }
        let mut attempt = 1;
        loop {
            self.spawn(node)?;
            match self.wait_ready(&[node], Readiness::JetStreamEnabled, self.options.start_timeout) {
                Ok(()) => return Ok(()),
                Err(WaitFailure::Error(error)) => return Err(error),
                Err(WaitFailure::PortTaken { node }) if attempt == START_ATTEMPTS_MAX => {
                    return Err(ClusterError::PortsTaken {
                        node,
                        attempts: attempt,
                        log: self.nodes[node].log.clone(),
                    });
                }
                // The node's ports are in the ephemeral range, so an
                // outgoing connection (another node reconnecting to it, a
                // health check) can hold one for a moment: try again.
                Err(WaitFailure::PortTaken { .. }) => {
                    attempt += 1;
                    std::thread::sleep(RESTART_RETRY_DELAY);
                }
            }
        }
    }

    /// Stop node `node` with SIGSTOP: it keeps its connections and answers
    /// nothing (as a node that hangs). Returns once the process is stopped.
    pub fn pause(&mut self, node: usize) -> Result<(), ClusterError> {
        let pid = self.running_pid(node)?;
        if self.nodes[node].paused {
            return Err(ClusterError::Paused { node });
        }
        self.signal_and_wait(node, pid, Sig::Stop, |state| state == State::Stopped)?;
        self.nodes[node].paused = true;
        Ok(())
    }

    /// Let a paused node go on (SIGCONT). Returns once the process runs;
    /// nothing happens to a node that is not paused.
    pub fn resume(&mut self, node: usize) -> Result<(), ClusterError> {
        let pid = self.running_pid(node)?;
        self.signal_and_wait(node, pid, Sig::Cont, |state| state != State::Stopped)?;
        self.nodes[node].paused = false;
        Ok(())
    }

    /// Send `sig` to the node's process and wait until its state satisfies `done`.
    fn signal_and_wait(&self, node: usize, pid: u32, sig: Sig, done: fn(State) -> bool) -> Result<(), ClusterError> {
        let error = |reason: String| ClusterError::Signal { node, pid, signal: sig.name(), reason };
        process::send(pid, sig).map_err(|e| error(e.to_string()))?;
        let deadline = Instant::now() + SIGNAL_WAIT;
        loop {
            match process::state(pid) {
                State::Gone => {
                    return Err(error(format!("the process exited; see its log {}", self.nodes[node].log.display())))
                }
                state if done(state) => return Ok(()),
                _ if Instant::now() >= deadline => {
                    return Err(error(format!("the process did not react within {} s", SIGNAL_WAIT.as_secs())))
                }
                _ => std::thread::sleep(SIGNAL_POLL),
            }
        }
    }

    /// Whether node `node`'s process exists (paused or not): false once
    /// killed, once it exited by itself, or for a node beyond the cluster.
    #[must_use]
    pub fn is_running(&self, node: usize) -> bool {
        self.nodes
            .get(node)
            .and_then(|entry| entry.child.as_ref())
            .is_some_and(|child| process::state(child.id()) != State::Gone)
    }

    /// Whether node `node` is paused (SIGSTOP, not yet resumed).
    #[must_use]
    pub fn is_paused(&self, node: usize) -> bool {
        self.nodes.get(node).is_some_and(|entry| entry.paused)
    }

    /// Which node leads stream `stream` (in any account) now, from the
    /// `/jsz?streams=true` of every running, unpaused node; `None` when
    /// there is no leader (an election is under way, or the stream has no
    /// replica on an answering node).
    ///
    /// A node counts as the leader only when it says so itself: a follower
    /// goes on naming a leader that was just killed until it sees an
    /// election. When two claim it (a resumed node that has not heard it
    /// was deposed), the one the other nodes name wins.
    ///
    /// Errors: `NoneAnswering` when every node is killed or paused;
    /// `Monitor` when no node's endpoint answered.
    pub fn stream_leader(&self, stream: &str) -> Result<Option<usize>, ClusterError> {
        self.leader_of(&format!("stream {stream:?}"), "streams=true", |jsz| jsz.stream_leader(stream))
    }

    /// Which node leads the `JetStream` meta group (it answers the API
    /// requests about streams and the account), `None` while there is none
    /// (an election is under way), by the same rules as
    /// [`stream_leader`](LocalCluster::stream_leader).
    ///
    /// Errors: as `stream_leader`'s.
    pub fn meta_leader(&self) -> Result<Option<usize>, ClusterError> {
        self.leader_of("the meta group", "", Jsz::meta_leader)
    }

    /// The leader of `what` from what the answering nodes' `/jsz?query`
    /// say, `leader_named` reading the leader one node names.
    fn leader_of(
        &self,
        what: &str,
        query: &str,
        leader_named: impl Fn(&Jsz) -> Option<String>,
    ) -> Result<Option<usize>, ClusterError> {
        let mut views = Vec::new();
        let mut answered = 0;
        let mut failure = None;
        for (node, entry) in self.nodes.iter().enumerate() {
            if entry.paused || !self.is_running(node) {
                continue;
            }
            match self.monitor.jsz(entry.ports.http, query) {
                Ok(jsz) => {
                    answered += 1;
                    if let Some(leader) = leader_named(&jsz) {
                        views.push((node, leader));
                    }
                }
                Err(reason) => {
                    failure = Some(ClusterError::Monitor {
                        node,
                        url: Monitor::url(entry.ports.http, &format!("/jsz?{query}")),
                        reason,
                        log: entry.log.clone(),
                    });
                }
            }
        }
        if answered == 0 {
            return Err(
                failure.unwrap_or_else(|| ClusterError::NoneAnswering { what: format!("which node leads {what}") })
            );
        }
        let names: Vec<String> = self.nodes.iter().map(|entry| entry.name.clone()).collect();
        Ok(monitor::leader_from_views(&views, &names))
    }

    /// Wait up to `timeout` until every running node is healthy (its
    /// `/healthz` answers 200: current with the meta leader and with every
    /// stream replica it holds) and knows a meta leader. Killed nodes are
    /// not waited for.
    ///
    /// Errors: `Paused` at once for a paused node (it cannot answer);
    /// `NoneAnswering` when no node runs; `Exited` for a node that exited
    /// by itself; `NotHealthy`.
    pub fn wait_healthy(&self, timeout: Duration) -> Result<(), ClusterError> {
        let running: Vec<usize> = (0..self.nodes.len()).filter(|&node| self.is_running(node)).collect();
        if running.is_empty() {
            return Err(ClusterError::NoneAnswering { what: "whether the cluster is healthy".to_owned() });
        }
        if let Some(&node) = running.iter().find(|&&node| self.nodes[node].paused) {
            return Err(ClusterError::Paused { node });
        }
        let started = Instant::now();
        let mut last = vec![String::from("no answer yet"); self.nodes.len()];
        let mut pending = running;
        loop {
            pending.retain(|&node| match self.ready(node, Readiness::Healthy) {
                Ok(()) => false,
                Err(reason) => {
                    last[node] = reason;
                    true
                }
            });
            let Some(&node) = pending.first() else {
                return Ok(());
            };
            let entry = &self.nodes[node];
            if !self.is_running(node) {
                return Err(ClusterError::Exited {
                    node,
                    // Read by `kill` or the drop, which wait for the process (this takes `&self`).
                    status: "exit status not read yet".to_owned(),
                    log: entry.log.clone(),
                    log_tail: process::log_tail(&entry.log, entry.log_from, LOG_TAIL_LINES),
                });
            }
            if started.elapsed() >= timeout {
                return Err(ClusterError::NotHealthy {
                    node,
                    waited: started.elapsed(),
                    last: last[node].clone(),
                    log: entry.log.clone(),
                });
            }
            std::thread::sleep(HEALTH_POLL);
        }
    }

    /// Leave the servers running after this value is gone (for `varve nats
    /// up`), recorded in `DIR/cluster.json` ([`ClusterRecord`]) for
    /// [`stop_dir`](LocalCluster::stop_dir). Start the cluster with
    /// `own_process_group` so that a Ctrl-C at the terminal does not reach
    /// them. The servers are not waited for: a process that detaches and
    /// lives on leaves a zombie for each one that exits.
    ///
    /// Errors: `Io` writing the record; the servers are then killed.
    pub fn detach(mut self) -> Result<(), ClusterError> {
        let record = ClusterRecord {
            format: record::RECORD_FORMAT,
            name: self.options.name.clone(),
            url: self.url(),
            nodes: self
                .nodes
                .iter()
                .map(|entry| NodeRecord {
                    server_name: entry.name.clone(),
                    pid: entry.child.as_ref().map(Child::id),
                    client_port: entry.ports.client,
                    cluster_port: entry.ports.cluster,
                    http_port: entry.ports.http,
                    leaf_port: entry.ports.leaf,
                    config: entry.config.clone(),
                    log: entry.log.clone(),
                })
                .collect(),
        };
        record.write(&self.options.dir)?;
        self.detached = true;
        Ok(())
    }

    /// Stop the detached cluster recorded in `dir` (for `varve nats down`):
    /// SIGTERM to each recorded server still running (a pid that now runs
    /// anything else is left alone), up to `timeout` for them to exit, then
    /// SIGKILL; removes `dir/cluster.json`. Returns how many servers were
    /// running. The stores stay.
    ///
    /// Errors: `NoCluster` when `dir` has no record; `BadRecord`; `Signal`; `Io`.
    pub fn stop_dir(dir: &Path, timeout: Duration) -> Result<usize, ClusterError> {
        record::stop_dir(dir, timeout)
    }
}

impl Drop for LocalCluster {
    /// SIGKILL every node still running and wait for it, unless detached.
    fn drop(&mut self) {
        if self.detached {
            return;
        }
        for entry in &mut self.nodes {
            if let Some(mut child) = entry.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}
