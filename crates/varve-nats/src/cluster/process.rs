//! The `nats-server` processes: finding the binary, spawning a node with
//! its log, signals, and reading a process's state and command line (so a
//! record that outlives the process that wrote it signals only its own
//! servers, never a process that reused a pid).

use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use rustix::process::{Pid, Signal};

use super::ClusterError;

/// The environment variable naming the `nats-server` binary to use.
pub const SERVER_ENV: &str = "VARVE_NATS_SERVER";

/// Where `make nats-server` installs the binary, relative to the workspace (see the Makefile).
const TOOLS_SERVER_PATH: &str = ".tools/bin/nats-server";

/// The `nats-server` binary to run:
///
/// 1. `$VARVE_NATS_SERVER`, when set (an error if it names no executable);
/// 2. `.tools/bin/nats-server` in the current directory or any ancestor
///    (tests run with a crate's directory as the current one, and find the
///    workspace's);
/// 3. the same under the ancestors of this crate's source directory (as it
///    was at build time);
/// 4. `nats-server` on `PATH`.
///
/// The error says to run `make nats-server`, which installs v2.15.2.
pub fn find_server_binary() -> Result<PathBuf, ClusterError> {
    if let Some(path) = std::env::var_os(SERVER_ENV) {
        let path = PathBuf::from(path);
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(ClusterError::ServerNotFound { searched: format!("${SERVER_ENV} = {}", path.display()) })
        };
    }
    let mut searched = Vec::new();
    let mut starts: Vec<PathBuf> = std::env::current_dir().into_iter().collect();
    let built_in = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    // Its ancestors are searched already when the current directory is under it.
    if !starts.iter().any(|start| start.starts_with(&built_in)) {
        starts.push(built_in);
    }
    for start in starts {
        if let Some(found) = start.ancestors().map(|dir| dir.join(TOOLS_SERVER_PATH)).find(|path| is_executable(path)) {
            return Ok(found);
        }
        searched.push(format!("{TOOLS_SERVER_PATH} in {} and its ancestors", start.display()));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    if let Some(found) = std::env::split_paths(&path).map(|dir| dir.join("nats-server")).find(|p| is_executable(p)) {
        return Ok(found);
    }
    searched.push("nats-server on PATH".to_owned());
    Err(ClusterError::ServerNotFound { searched: searched.join(", ") })
}

fn is_executable(path: &Path) -> bool {
    path.metadata().is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// Stops a server when the process that started it is gone: `sh` starts
/// a watcher, then becomes the server (`exec`, same pid). The watcher polls
/// the starter every second; once it is gone, it kills the server if that
/// pid still runs this node's config. So a server held by a `static` (never
/// dropped) or by a test process that crashed does not outlive it.
const STOP_WITH_STARTER: &str = "starter=$1; config=$4; \
    (while kill -0 \"$starter\" 2>/dev/null; do sleep 1; done; \
     grep -qF -- \"$config\" /proc/$$/cmdline 2>/dev/null && kill -9 $$) </dev/null >/dev/null 2>&1 & \
    shift; exec \"$@\"";

/// Start `program -c CONFIG` in `dir` (the node's directory; its config
/// names the store relative to it), stdin closed, stdout and stderr appended
/// to `log`. In a process group of its own when `own_group` (`varve nats
/// up`), so that a Ctrl-C at the terminal (SIGINT to the foreground group)
/// does not reach it; otherwise it is stopped when this process ends
/// ([`STOP_WITH_STARTER`]), even one that never drops its cluster.
pub(super) fn spawn(program: &Path, dir: &Path, config: &Path, log: &Path, own_group: bool) -> io::Result<Child> {
    let log_file = OpenOptions::new().create(true).append(true).open(log)?;
    let mut command = if own_group {
        let mut command = Command::new(program);
        command.process_group(0);
        command
    } else {
        // `sh` would start and then fail to exec: say so here, as a direct spawn would.
        if program.components().count() > 1 && !program.exists() {
            return Err(io::Error::new(io::ErrorKind::NotFound, format!("{} does not exist", program.display())));
        }
        let mut command = Command::new("sh");
        command.arg("-c").arg(STOP_WITH_STARTER).arg("sh").arg(std::process::id().to_string()).arg(program);
        command
    };
    command.arg("-c").arg(config).current_dir(dir).stdin(Stdio::null()).stdout(log_file.try_clone()?).stderr(log_file);
    command.spawn()
}

/// The signals sent here, with the names messages use.
#[derive(Clone, Copy, Debug)]
pub(super) enum Sig {
    Kill,
    Term,
    Stop,
    Cont,
}

impl Sig {
    pub(super) fn name(self) -> &'static str {
        match self {
            Sig::Kill => "SIGKILL",
            Sig::Term => "SIGTERM",
            Sig::Stop => "SIGSTOP",
            Sig::Cont => "SIGCONT",
        }
    }

    fn signal(self) -> Signal {
        match self {
            Sig::Kill => Signal::KILL,
            Sig::Term => Signal::TERM,
            Sig::Stop => Signal::STOP,
            Sig::Cont => Signal::CONT,
        }
    }
}

/// Send `sig` to `pid`. A process that is already gone is not an error.
pub(super) fn send(pid: u32, sig: Sig) -> io::Result<()> {
    let pid = i32::try_from(pid).ok().and_then(Pid::from_raw).ok_or_else(|| io::Error::other("not a process id"))?;
    match rustix::process::kill_process(pid, sig.signal()) {
        Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
        Err(errno) => Err(errno.into()),
    }
}

/// What became of a process, as far as signals and waiting are concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum State {
    /// Exited (a zombie counts: it runs nothing and holds no port).
    Gone,
    /// Stopped by a signal (SIGSTOP).
    Stopped,
    /// Anything else: running or sleeping.
    Alive,
}

/// The state of `pid`, from `/proc/PID/stat` where there is a `/proc`,
/// else from `kill(pid, 0)` (which cannot tell a stopped process or a zombie).
pub(super) fn state(pid: u32) -> State {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // "PID (COMM) S …": COMM may hold spaces and parentheses, the state follows the last ')'.
        Ok(stat) => match stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next()) {
            Some('Z' | 'X' | 'x') => State::Gone,
            Some('T' | 't') => State::Stopped,
            _ => State::Alive,
        },
        Err(_) if Path::new("/proc/self/stat").exists() => State::Gone,
        Err(_) => {
            let exists = i32::try_from(pid)
                .ok()
                .and_then(Pid::from_raw)
                .is_some_and(|pid| !matches!(rustix::process::test_kill_process(pid), Err(rustix::io::Errno::SRCH)));
            if exists {
                State::Alive
            } else {
                State::Gone
            }
        }
    }
}

/// Whether `pid` is a process whose arguments include `config`: a node of
/// ours, not another program that reused the pid. From `/proc/PID/cmdline`,
/// or `ps` where there is no `/proc`.
pub(super) fn runs_config(pid: u32, config: &Path) -> bool {
    let config = config.as_os_str().as_encoded_bytes();
    match std::fs::read(format!("/proc/{pid}/cmdline")) {
        Ok(cmdline) => cmdline.split(|byte| *byte == 0).any(|arg| arg == config),
        Err(_) if Path::new("/proc/self/cmdline").exists() => false,
        Err(_) => Command::new("ps")
            .args(["-o", "args=", "-p", &pid.to_string()])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .is_ok_and(|out| out.stdout.split(u8::is_ascii_whitespace).any(|arg| arg == config)),
    }
}

/// The last `lines` lines of a log file from byte `from` on, for an error
/// message (on one line, ` | ` between lines); "(empty)" when there are none.
pub(super) fn log_tail(log: &Path, from: u64, lines: usize) -> String {
    let text = std::fs::read(log).unwrap_or_default();
    let start = usize::try_from(from).unwrap_or(usize::MAX).min(text.len());
    let text = String::from_utf8_lossy(&text[start..]);
    let mut tail: Vec<&str> = text.lines().rev().filter(|line| !line.trim().is_empty()).take(lines).collect();
    tail.reverse();
    if tail.is_empty() {
        "(empty)".to_owned()
    } else {
        tail.join(" | ")
    }
}

/// The length of a log file now: where the next start's lines begin.
pub(super) fn log_len(log: &Path) -> u64 {
    log.metadata().map_or(0, |meta| meta.len())
}

/// Whether the log's text from byte `from` on says a listener's port was
/// taken (nats-server: "Error listening on port: …: bind: address already
/// in use", and the same for the route, monitor and leaf-node ports).
pub(super) fn log_says_port_taken(log: &Path, from: u64) -> bool {
    let text = std::fs::read(log).unwrap_or_default();
    let start = usize::try_from(from).unwrap_or(usize::MAX).min(text.len());
    String::from_utf8_lossy(&text[start..]).contains("address already in use")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_runs_its_own_arguments() {
        let pid = std::process::id();
        assert_eq!(state(pid), State::Alive);
        let exe = std::env::args_os().next().expect("argv[0]");
        assert!(runs_config(pid, Path::new(&exe)));
        assert!(!runs_config(pid, Path::new("/no/such/nats.conf")));
    }

    #[test]
    fn a_reaped_child_is_gone_and_a_stopped_one_is_stopped() {
        let mut child = Command::new("sleep").arg("60").spawn().expect("sleep");
        send(child.id(), Sig::Stop).expect("SIGSTOP");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while state(child.id()) != State::Stopped {
            assert!(std::time::Instant::now() < deadline, "sleep did not stop");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        send(child.id(), Sig::Kill).expect("SIGKILL");
        let pid = child.id();
        child.wait().expect("wait");
        assert_eq!(state(pid), State::Gone);
        send(pid, Sig::Term).expect("a signal to a gone process is not an error");
    }

    #[test]
    fn log_tails_are_one_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("nats.log");
        assert_eq!(log_tail(&log, 0, 3), "(empty)");
        std::fs::write(&log, "old\n[1] a\n\n[1] b: bind: address already in use\n").expect("write");
        assert_eq!(log_tail(&log, 0, 2), "[1] a | [1] b: bind: address already in use");
        assert!(log_says_port_taken(&log, 0));
        assert!(!log_says_port_taken(&log, log_len(&log)));
    }
}
