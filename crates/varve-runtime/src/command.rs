//! External-command handlers: one process per trigger.
//!
//! The record goes to the command's stdin; its context goes in environment
//! variables ([`ENV_DATA`] …). Exit status 0 is DONE; a non-zero exit, a
//! signal or a timeout (the process group is killed) is FAILED with the
//! reason and the last lines of stderr.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The data directory the runtime's store lives in (when known).
pub const ENV_DATA: &str = "VARVE_DATA";
/// The namespace.
pub const ENV_NAMESPACE: &str = "VARVE_NAMESPACE";
/// The log the triggering record is in.
pub const ENV_LOG: &str = "VARVE_LOG";
/// The triggering record's seq.
pub const ENV_SEQ: &str = "VARVE_SEQ";
/// The FIRING event's id (`HOST:NAMESPACE:SEQ`): the cause of what the handler appends.
pub const ENV_EVENT_ID: &str = "VARVE_EVENT_ID";
/// The trace id (32 hex digits).
pub const ENV_TRACE_ID: &str = "VARVE_TRACE_ID";
/// The runtime's Unix socket; the `varve` CLI appends through it when set.
pub const ENV_RUNTIME_SOCKET: &str = "VARVE_RUNTIME_SOCKET";

/// Lines of stderr kept for a FAILED reason.
pub const STDERR_TAIL_LINES: usize = 10;
/// Bytes of stderr kept (the tail) while the command runs.
const STDERR_TAIL_BYTES: usize = 8192;
/// Longest pause between checks of whether the child has exited.
const WAIT_POLL_MAX: Duration = Duration::from_millis(5);

/// Run `argv` once with `stdin` and `env`; `Err(reason)` unless it exits 0 in time.
pub fn run(argv: &[String], env: &[(&str, String)], stdin: &[u8], timeout: Option<Duration>) -> Result<(), String> {
    run_until(argv, env, stdin, timeout, &AtomicBool::new(false))
}

/// [`run`], and kill the command's process group as soon as `kill` is set
/// (a stopping runtime sets it when the grace is over).
pub fn run_until(
    argv: &[String],
    env: &[(&str, String)],
    stdin: &[u8],
    timeout: Option<Duration>,
    kill: &AtomicBool,
) -> Result<(), String> {
    run_until_to(argv, env, stdin, timeout, kill, Stdio::inherit())
}

/// [`run_until`], with the command's stdout sent to `stdout` (a repair sends
/// it to stderr, keeping its own stdout for its answer).
pub fn run_until_to(
    argv: &[String],
    env: &[(&str, String)],
    stdin: &[u8],
    timeout: Option<Duration>,
    kill: &AtomicBool,
    stdout: Stdio,
) -> Result<(), String> {
    let Some((program, rest)) = argv.split_first() else {
        return Err("empty command".to_owned());
    };
    let mut command = Command::new(program);
    command.args(rest).stdin(Stdio::piped()).stdout(stdout).stderr(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    // Its own process group, so a timeout kills `sh -c` and its children too.
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command.spawn().map_err(|e| format!("cannot start {program:?}: {e}"))?;
    let pid = child.id();
    let mut stdin_pipe = child.stdin.take();
    let record = stdin.to_vec();
    // Write stdin on a thread: a command that does not read it must not block us.
    let writer = std::thread::spawn(move || {
        if let Some(pipe) = stdin_pipe.as_mut() {
            let _ = pipe.write_all(&record); // a command that exits without reading is fine
        }
    });
    let mut stderr_pipe = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut tail = Vec::new();
        if let Some(pipe) = stderr_pipe.as_mut() {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                tail.extend_from_slice(&buf[..n]);
                if tail.len() > 2 * STDERR_TAIL_BYTES {
                    tail.drain(..tail.len() - STDERR_TAIL_BYTES);
                }
            }
        }
        tail
    });
    let started = Instant::now();
    let mut pause = Duration::from_micros(50);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) => {}
            Err(e) => break Err(format!("waiting for {program:?}: {e}")),
        }
        if kill.load(Ordering::SeqCst) {
            kill_group(pid);
            let _ = child.wait();
            break Err("killed with its process group: the runtime stopped".to_owned());
        }
        if timeout.is_some_and(|t| started.elapsed() >= t) {
            kill_group(pid);
            let _ = child.wait();
            break Err(format!("timed out after {} ms and was killed", timeout.map_or(0, |t| t.as_millis())));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(WAIT_POLL_MAX);
    };
    let _ = writer.join();
    let stderr = reader.join().unwrap_or_default();
    let tail = stderr_tail(&stderr);
    let with_tail = |reason: String| if tail.is_empty() { reason } else { format!("{reason}; stderr: {tail}") };
    match status {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => {
            use std::os::unix::process::ExitStatusExt;
            let reason = match (status.code(), status.signal()) {
                (Some(code), _) => format!("exited with status {code}"),
                (None, Some(signal)) => format!("killed by signal {signal}"),
                (None, None) => format!("ended with {status}"),
            };
            Err(with_tail(reason))
        }
        Err(reason) => Err(with_tail(reason)),
    }
}

fn kill_group(pid: u32) {
    if let Some(pid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) {
        // The group may already be gone; nothing to do then.
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

fn stderr_tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let start = lines.len().saturating_sub(STDERR_TAIL_LINES);
    lines[start..].join(" | ")
}

/// Where `program` resolves: itself if it contains a `/`, else the first
/// executable of that name on `PATH`. `None` if there is none.
#[must_use]
pub fn resolve(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        let path = PathBuf::from(program);
        return is_executable(&path).then_some(path);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(program)).find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
