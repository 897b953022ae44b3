//! `DIR/cluster.json`: what a detached cluster leaves behind for a later
//! process (`varve nats down`) to find and stop its servers — their pids,
//! ports and config files — and the stopping itself.
//!
//! A pid is signalled only while `/proc/PID/cmdline` still names that
//! node's config file: a record that outlived its servers (a reboot) must
//! not make `down` kill whatever process now has the pid.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::process::{self, Sig, State};
use super::ClusterError;

/// The version of the record's fields; a record of another version is
/// refused (`BadRecord`) rather than half read.
pub(super) const RECORD_FORMAT: u32 = 1;

/// How often a wait for processes to exit looks again.
const EXIT_POLL: Duration = Duration::from_millis(20);

/// Longest wait for processes to vanish after SIGKILL, which they cannot
/// ignore (the kernel tears them down; a stopped one too).
const KILL_WAIT: Duration = Duration::from_secs(10);

/// What [`LocalCluster::detach`](super::LocalCluster::detach) writes to
/// `DIR/cluster.json`: the cluster's URL and each node's process and ports.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterRecord {
    /// The record's format (1).
    pub format: u32,
    /// The cluster's name (and server-name prefix).
    pub name: String,
    /// The client URL, `nats://127.0.0.1:P1,127.0.0.1:P2,…`.
    pub url: String,
    /// One entry per node, in node order.
    pub nodes: Vec<NodeRecord>,
}

/// One node of a [`ClusterRecord`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRecord {
    /// Its `server_name`.
    pub server_name: String,
    /// Its process id; `None` when it was not running when detached.
    pub pid: Option<u32>,
    /// The client port.
    pub client_port: u16,
    /// The route port, in a cluster of 2 nodes or more.
    pub cluster_port: Option<u16>,
    /// The monitoring (HTTP) port.
    pub http_port: u16,
    /// The leaf-node port, when the cluster accepts leaf nodes.
    pub leaf_port: Option<u16>,
    /// Its config file (absolute): the argument that identifies its process.
    pub config: PathBuf,
    /// Its log file.
    pub log: PathBuf,
}

impl ClusterRecord {
    /// The record's file name in the cluster's directory.
    pub const FILE_NAME: &'static str = "cluster.json";

    /// The record in `dir`, or `None` when there is none.
    pub fn read(dir: &Path) -> Result<Option<ClusterRecord>, ClusterError> {
        let path = dir.join(Self::FILE_NAME);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(ClusterError::io(format!("reading {}", path.display()), e)),
        };
        let record: ClusterRecord = serde_json::from_str(&text)
            .map_err(|e| ClusterError::BadRecord { path: path.clone(), reason: e.to_string() })?;
        if record.format != RECORD_FORMAT {
            return Err(ClusterError::BadRecord {
                path,
                reason: format!("format {} (this build reads format {RECORD_FORMAT})", record.format),
            });
        }
        Ok(Some(record))
    }

    /// Write the record to `dir` (through a temporary file and a rename, so
    /// that a reader never sees half of it).
    pub(super) fn write(&self, dir: &Path) -> Result<(), ClusterError> {
        let path = dir.join(Self::FILE_NAME);
        let temporary = dir.join(format!("{}.tmp", Self::FILE_NAME));
        let mut text = serde_json::to_string_pretty(self)
            .map_err(|e| ClusterError::io(format!("encoding {}", path.display()), e.into()))?;
        text.push('\n');
        std::fs::write(&temporary, text)
            .map_err(|e| ClusterError::io(format!("writing {}", temporary.display()), e))?;
        std::fs::rename(&temporary, &path).map_err(|e| ClusterError::io(format!("writing {}", path.display()), e))
    }

    /// `(node, pid)` of every recorded node whose process still runs (or is
    /// stopped) and is still that node's nats-server.
    #[must_use]
    pub fn running(&self) -> Vec<(usize, u32)> {
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(node, record)| record.pid.map(|pid| (node, pid, &record.config)))
            .filter(|(_, pid, config)| process::state(*pid) != State::Gone && process::runs_config(*pid, config))
            .map(|(node, pid, _)| (node, pid))
            .collect()
    }
}

/// Stop the servers recorded in `dir/cluster.json`: SIGTERM (and SIGCONT,
/// for a paused one) to each still running, up to `timeout` for them to
/// exit, then SIGKILL to the rest. Removes the record; returns how many
/// servers were running. See [`LocalCluster::stop_dir`](super::LocalCluster::stop_dir).
pub(super) fn stop_dir(dir: &Path, timeout: Duration) -> Result<usize, ClusterError> {
    let Some(record) = ClusterRecord::read(dir)? else {
        return Err(ClusterError::NoCluster { dir: dir.to_owned() });
    };
    let running = record.running();
    for &(node, pid) in &running {
        for sig in [Sig::Term, Sig::Cont] {
            process::send(pid, sig).map_err(|e| ClusterError::Signal {
                node,
                pid,
                signal: sig.name(),
                reason: e.to_string(),
            })?;
        }
    }
    let left = wait_gone(&running, timeout);
    for &(node, pid) in &left {
        process::send(pid, Sig::Kill).map_err(|e| ClusterError::Signal {
            node,
            pid,
            signal: Sig::Kill.name(),
            reason: e.to_string(),
        })?;
    }
    if let Some(&(node, pid)) = wait_gone(&left, KILL_WAIT).first() {
        return Err(ClusterError::Signal {
            node,
            pid,
            signal: Sig::Kill.name(),
            reason: format!("the process still exists {} s after SIGKILL", KILL_WAIT.as_secs()),
        });
    }
    let path = dir.join(ClusterRecord::FILE_NAME);
    std::fs::remove_file(&path).map_err(|e| ClusterError::io(format!("removing {}", path.display()), e))?;
    Ok(running.len())
}

/// Wait up to `timeout` for the processes to be gone; returns those that are not.
fn wait_gone(processes: &[(usize, u32)], timeout: Duration) -> Vec<(usize, u32)> {
    let deadline = Instant::now() + timeout;
    loop {
        let left: Vec<(usize, u32)> =
            processes.iter().copied().filter(|&(_, pid)| process::state(pid) != State::Gone).collect();
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(EXIT_POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(pid: Option<u32>, config: &Path) -> ClusterRecord {
        ClusterRecord {
            format: RECORD_FORMAT,
            name: "varve".into(),
            url: "nats://127.0.0.1:4222".into(),
            nodes: vec![NodeRecord {
                server_name: "varve-0".into(),
                pid,
                client_port: 4222,
                cluster_port: None,
                http_port: 8222,
                leaf_port: None,
                config: config.to_owned(),
                log: PathBuf::from("/tmp/nats.log"),
            }],
        }
    }

    #[test]
    fn records_round_trip_and_other_formats_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(ClusterRecord::read(dir.path()).expect("read"), None);
        let written = record(Some(1), Path::new("/x/node0/nats.conf"));
        written.write(dir.path()).expect("write");
        assert_eq!(ClusterRecord::read(dir.path()).expect("read"), Some(written.clone()));
        let other = ClusterRecord { format: 99, ..written };
        other.write(dir.path()).expect("write");
        assert!(matches!(ClusterRecord::read(dir.path()), Err(ClusterError::BadRecord { .. })));
        std::fs::write(dir.path().join(ClusterRecord::FILE_NAME), "{").expect("write");
        assert!(matches!(ClusterRecord::read(dir.path()), Err(ClusterError::BadRecord { .. })));
    }

    #[test]
    fn a_pid_running_something_else_is_left_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        // This test process is alive, and is not a nats-server of that config.
        record(Some(std::process::id()), &dir.path().join("node0/nats.conf")).write(dir.path()).expect("write");
        assert_eq!(ClusterRecord::read(dir.path()).expect("read").expect("record").running(), vec![]);
        assert_eq!(stop_dir(dir.path(), Duration::from_secs(1)).expect("stop"), 0);
        assert!(matches!(stop_dir(dir.path(), Duration::from_secs(1)), Err(ClusterError::NoCluster { .. })));
    }

    #[test]
    fn stop_dir_terminates_the_recorded_process() {
        let dir = tempfile::tempdir().expect("tempdir");
        let marker = dir.path().join("node0/nats.conf");
        // A shell with the config path among its arguments stands in for a
        // node; on SIGTERM it stops its sleep and exits.
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg("trap 'kill $! 2>/dev/null; exit 0' TERM; sleep 60 & wait")
            .arg(&marker)
            .spawn()
            .expect("sh");
        // stop_dir knows a node by its command line: wait until the child has
        // exec'd `sh` (before that it still runs this test binary's).
        let cmdline = format!("/proc/{}/cmdline", child.id());
        let started = std::time::Instant::now();
        while !std::fs::read(&cmdline).is_ok_and(|c| c.windows(b"nats.conf".len()).any(|w| w == b"nats.conf")) {
            assert!(started.elapsed() < Duration::from_secs(30), "sh did not start");
            std::thread::sleep(Duration::from_millis(5));
        }
        record(Some(child.id()), &marker).write(dir.path()).expect("write");
        // The child is ours, so it stays a zombie until waited for: `Gone` counts that.
        assert_eq!(stop_dir(dir.path(), Duration::from_secs(30)).expect("stop"), 1);
        // Exited, by its trap or (a SIGTERM before the trap was set) by the signal.
        child.wait().expect("wait");
        assert!(!dir.path().join(ClusterRecord::FILE_NAME).exists());
    }
}
