//! [`ClusterError`]: what can go wrong starting, signalling, watching and
//! stopping the nodes of a [`LocalCluster`](super::LocalCluster). Each
//! message says what failed and what to do, and names the node's log file
//! where there is one (`DIR/nodeI/nats.log`).

use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// An operating error of [`LocalCluster`](super::LocalCluster) or of the
/// record a detached cluster leaves (`DIR/cluster.json`). Nodes are numbered
/// from 0.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// No `nats-server` binary was found where
    /// [`find_server_binary`](super::find_server_binary) looks.
    #[error(
        "nats-server not found (looked at {searched}): run `make nats-server` in the Varve workspace (it installs \
         v2.15.2 into .tools/bin), or set VARVE_NATS_SERVER to a nats-server binary"
    )]
    ServerNotFound {
        /// Where it looked.
        searched: String,
    },

    /// The options ask for something this harness cannot configure.
    #[error("invalid cluster options: {reason}")]
    InvalidOptions {
        /// What is wrong, and what is allowed.
        reason: String,
    },

    /// Reading or writing a file of the cluster's directory failed.
    #[error("I/O error while {context}: {source}")]
    Io {
        /// What was being done, naming the path.
        context: String,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },

    /// The `nats-server` process could not be spawned.
    #[error("starting node {node} with {} failed: {source}; check that it is an executable nats-server", program.display())]
    Spawn {
        /// The node.
        node: usize,
        /// The binary.
        program: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },

    /// A node exited by itself, while starting (a bad configuration, a
    /// store another server holds, …) or while it was waited for: its log says why.
    #[error("node {node} exited by itself ({status}); its log {} ends with: {log_tail}", log.display())]
    Exited {
        /// The node.
        node: usize,
        /// How it exited.
        status: String,
        /// Its log file.
        log: PathBuf,
        /// The last lines of its log.
        log_tail: String,
    },

    /// A node could not listen because another process took one of its
    /// ports between the moment it was picked free and the node's start,
    /// on every attempt (`start` picks new ports each time; `restart` keeps them).
    #[error(
        "node {node} could not listen: another process took a port picked for it ({attempts} attempt(s)); see its log \
         {}; retry, or stop what takes loopback ports",
        log.display()
    )]
    PortsTaken {
        /// The node.
        node: usize,
        /// How many starts were tried.
        attempts: usize,
        /// Its log file.
        log: PathBuf,
    },

    /// A node did not become healthy (monitoring endpoint, JetStream, meta
    /// leader) in time.
    #[error(
        "node {node} was not healthy after {} s: {last}; see its log {}; on a busy machine, allow more time \
         (ClusterOptions::start_timeout)",
        waited.as_secs(),
        log.display()
    )]
    NotHealthy {
        /// The node.
        node: usize,
        /// How long it was waited for.
        waited: Duration,
        /// The last answer or failure of its monitoring endpoint.
        last: String,
        /// Its log file.
        log: PathBuf,
    },

    /// A node index beyond the cluster.
    #[error("node {node} does not exist: the cluster has {nodes} node(s), numbered from 0")]
    NoSuchNode {
        /// The index asked for.
        node: usize,
        /// How many nodes the cluster has.
        nodes: usize,
    },

    /// The node was killed and not restarted.
    #[error("node {node} is not running (it was killed): restart it first")]
    NotRunning {
        /// The node.
        node: usize,
    },

    /// `restart` of a node that runs.
    #[error("node {node} is already running: kill it before restarting it")]
    AlreadyRunning {
        /// The node.
        node: usize,
    },

    /// The node is stopped by SIGSTOP: it answers nothing until resumed.
    #[error("node {node} is paused (SIGSTOP): resume it first")]
    Paused {
        /// The node.
        node: usize,
    },

    /// A signal could not be sent, or the process did not react to it in time.
    #[error("sending {signal} to node {node} (pid {pid}) failed: {reason}")]
    Signal {
        /// The node.
        node: usize,
        /// The process.
        pid: u32,
        /// `SIGKILL`, `SIGSTOP`, …
        signal: &'static str,
        /// What went wrong.
        reason: String,
    },

    /// A node's monitoring endpoint failed or answered something unexpected.
    #[error("the monitoring endpoint {url} of node {node} failed: {reason}; see its log {}", log.display())]
    Monitor {
        /// The node.
        node: usize,
        /// The URL asked.
        url: String,
        /// What went wrong.
        reason: String,
        /// Its log file.
        log: PathBuf,
    },

    /// Every node is killed or paused: none can answer.
    #[error("no node is running and unpaused to ask {what}: restart or resume one first")]
    NoneAnswering {
        /// What was to be asked.
        what: String,
    },

    /// `stop_dir` found no record of a detached cluster.
    #[error(
        "no cluster in {}: there is no {}; start one with `varve nats up --dir {}`",
        dir.display(),
        dir.join(super::ClusterRecord::FILE_NAME).display(),
        dir.display()
    )]
    NoCluster {
        /// The directory searched.
        dir: PathBuf,
    },

    /// `DIR/cluster.json` is not a record this crate wrote.
    #[error(
        "{} is not a cluster record written by varve-nats: {reason}; if no nats-server of that directory runs, \
         remove the file",
        path.display()
    )]
    BadRecord {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

impl ClusterError {
    /// An [`ClusterError::Io`] saying what was being done.
    pub(super) fn io(context: impl Into<String>, source: io::Error) -> ClusterError {
        ClusterError::Io { context: context.into(), source }
    }
}
