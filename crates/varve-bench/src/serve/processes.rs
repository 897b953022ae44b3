//! The server processes `varve bench serve` measures: a real `varve serve`
//! and a real `nats-server -js`, each started on a free loopback port with
//! its data in the scratch directory and killed (SIGKILL) when dropped, so a
//! failed or interrupted benchmark leaves no server behind.

use std::io::{BufRead as _, BufReader};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::{BenchError, IoContext, Result};

/// Longest wait for a server to say where it listens, or to accept a connection.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause between two connection attempts while a server starts.
const START_POLL: Duration = Duration::from_millis(20);

fn external(what: impl Into<String>) -> BenchError {
    BenchError::External(what.into())
}

/// A `varve serve` process (`PROGRAM --data DIR serve --listen 127.0.0.1:0
/// --sync SYNC`), killed when dropped.
pub(super) struct VarveServer {
    child: Child,
    /// The store URI it printed, `varve://127.0.0.1:PORT`.
    pub(super) uri: String,
}

impl VarveServer {
    /// Start `program` (the `varve` binary) serving `data` with `--sync
    /// sync` (`group` or `always`) and wait for its `listening on varve://…`
    /// line. Its warnings go to this process's stderr.
    pub(super) fn start(program: &Path, data: &Path, sync: &str) -> Result<VarveServer> {
        let mut child = Command::new(program)
            .arg("--data")
            .arg(data)
            .args(["serve", "--listen", "127.0.0.1:0", "--sync", sync])
            // The global flags read these; a bench run inside a handler or
            // a shell that set them must not point the server elsewhere.
            .env_remove("VARVE_STORE")
            .env_remove("VARVE_DATA")
            .env_remove("VARVE_NAMESPACE")
            .env_remove("VARVE_TOKEN")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting {} serve", program.display()))?;
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            return Err(external("varve serve started without a stdout pipe"));
        };
        // Read the first line on a thread, so that a server that never
        // prints it is a timeout here rather than a hang.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(START_TIMEOUT).unwrap_or_default();
        let Some(uri) = line.split_whitespace().find(|word| word.starts_with("varve://")) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(external(format!("varve serve did not say where it listens (first line: {line:?})")));
        };
        Ok(VarveServer { uri: uri.to_owned(), child })
    }

    /// The server's process id (for `perf record -p`).
    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for VarveServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `nats-server` with JetStream on (`-c CONFIG`), killed when dropped.
pub(super) struct NatsServer {
    child: Child,
    /// `127.0.0.1:PORT`, where clients connect.
    pub(super) addr: String,
}

impl NatsServer {
    /// Start `program` with a config file written into `dir`: client port
    /// on loopback, JetStream's store in `dir/store`, and
    /// `sync_interval: always` when `sync_always` (else the server's
    /// default, an fsync every 2 minutes). Its log goes to `dir/nats.log`.
    /// Returns once the client port accepts connections.
    pub(super) fn start(program: &Path, dir: &Path, sync_always: bool) -> Result<NatsServer> {
        let port = free_port()?;
        let store = dir.join("store");
        let sync = if sync_always { "  sync_interval: always\n" } else { "" };
        let config = format!(
            "server_name: varve_bench\nlisten: 127.0.0.1:{port}\njetstream {{\n  store_dir: \"{}\"\n{sync}}}\n",
            store.display()
        );
        let config_path = dir.join("nats.conf");
        std::fs::write(&config_path, config).with_context(|| format!("writing {}", config_path.display()))?;
        let log_path = dir.join("nats.log");
        let log = std::fs::File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
        let log_err = log.try_clone().with_context(|| format!("opening {}", log_path.display()))?;
        let mut child = Command::new(program)
            .arg("-c")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .with_context(|| format!("starting {}", program.display()))?;
        let addr = format!("127.0.0.1:{port}");
        let started = Instant::now();
        loop {
            if TcpStream::connect(&addr).is_ok() {
                return Ok(NatsServer { child, addr });
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(external(format!("nats-server exited ({status}); its log: {}", log_path.display())));
            }
            if started.elapsed() > START_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                return Err(external(format!("nats-server did not listen on {addr}; its log: {}", log_path.display())));
            }
            std::thread::sleep(START_POLL);
        }
    }
}

impl NatsServer {
    /// The server's process id.
    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The version `program --version` reports (`v2.15.2`), checking that it is a nats-server.
pub(super) fn nats_server_version(program: &Path) -> Result<String> {
    let output = Command::new(program)
        .arg("--version")
        .output()
        .with_context(|| format!("running {} --version", program.display()))?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    // "nats-server: v2.15.2"
    match text.trim().strip_prefix("nats-server: ") {
        Some(version) if output.status.success() => Ok(version.to_owned()),
        _ => Err(external(format!("{} --version said {text:?}: not a nats-server", program.display()))),
    }
}

/// A loopback port nothing listens on now (bound, then closed: another
/// process could take it before the server does, which fails its start).
fn free_port() -> Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).with_context(|| "finding a free port".into())?;
    Ok(listener.local_addr().with_context(|| "finding a free port".into())?.port())
}
