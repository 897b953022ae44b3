//! Helpers shared by the process-level runtime tests: a temporary data
//! directory, the real `varve` binary run on it, `varve run` processes that
//! are killed when the test ends, and waiting for conditions (never bare
//! sleeps as synchronisation).

#![allow(dead_code, reason = "each test file uses a different part")]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long a test waits for a condition before failing: generous, for a
/// loaded two-core machine.
pub const WAIT: Duration = Duration::from_secs(60);
/// Pause between two checks of a condition.
const POLL: Duration = Duration::from_millis(20);

pub struct Env {
    pub temp: tempfile::TempDir,
    pub data: PathBuf,
}

/// A `varve run` process, killed (SIGKILL) when dropped, however the test ends.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Env {
    pub fn new() -> Env {
        let temp = tempfile::tempdir().expect("temp dir");
        let data = temp.path().join("data");
        Env { temp, data }
    }

    /// `varve --data DIR ARGS…`, outside any handler's environment.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_varve"));
        command
            .arg("--data")
            .arg(&self.data)
            .args(args)
            .current_dir(self.temp.path())
            .env_remove("VARVE_DATA")
            .env_remove("VARVE_NAMESPACE")
            .env_remove("VARVE_RUNTIME_SOCKET")
            .env_remove("VARVE_EVENT_ID")
            .env_remove("VARVE_TRACE_ID");
        command
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run varve")
    }

    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(out.status.success(), "varve {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).expect("utf-8 stdout")
    }

    pub fn json(&self, args: &[&str]) -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        serde_json::from_str(&self.ok(&all)).expect("one JSON answer")
    }

    /// Write a manifest file named `name` in the temporary directory.
    pub fn manifest_named(&self, name: &str, text: &str) -> PathBuf {
        let path = self.temp.path().join(name);
        std::fs::write(&path, text).expect("write manifest");
        path
    }

    pub fn manifest(&self, text: &str) -> PathBuf {
        self.manifest_named("app.toml", text)
    }

    /// The socket `varve run` serves for `namespace`.
    pub fn socket(&self, namespace: &str) -> PathBuf {
        self.data.join(namespace).join("runtime.sock")
    }

    /// Start `varve run MANIFEST` (stderr piped when `capture_stderr`, else
    /// inherited); do not wait for anything.
    pub fn spawn_run(&self, manifest: &Path, capture_stderr: bool) -> Running {
        let child = self
            .command(&["run", manifest.to_str().expect("utf-8 path")])
            .stdout(Stdio::null())
            .stderr(if capture_stderr { Stdio::piped() } else { Stdio::inherit() })
            .spawn()
            .expect("spawn varve run");
        Running(child)
    }

    /// Start `varve run` for namespace `app` and wait until its socket answers.
    pub fn start(&self, manifest: &Path) -> Running {
        self.start_in(manifest, "app")
    }

    /// Start `varve run` for `namespace` and wait until its socket answers.
    pub fn start_in(&self, manifest: &Path, namespace: &str) -> Running {
        let running = self.spawn_run(manifest, false);
        let socket = self.socket(namespace);
        wait_until("the runtime's socket answers", || std::os::unix::net::UnixStream::connect(&socket).is_ok());
        running
    }
}

/// Wait until `done` holds, checking every few milliseconds; fail after [`WAIT`].
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < WAIT, "timed out after {WAIT:?} waiting until {what}");
        std::thread::sleep(POLL);
    }
}

/// The decoded events of a namespace (`events tail --no-follow`).
pub fn events_of(env: &Env, namespace: &str) -> Vec<Value> {
    let out = env.ok(&["--ns", namespace, "--json", "events", "tail", "--from", "1", "--no-follow"]);
    out.lines().map(|l| serde_json::from_str(l).expect("event JSON")).collect()
}

/// The seed of a randomized test: `VARVE_SEED` when set (to replay a
/// failure), else fresh from the clock. Callers print it.
pub fn seed_from_env() -> u64 {
    std::env::var("VARVE_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
        u64::from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").subsec_nanos())
    })
}

/// Whether process `pid` is gone: no such process, or a zombie nobody has
/// reaped yet (it runs nothing any more).
pub fn process_is_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state follows the command name in parentheses: "PID (comm) S …".
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
    }
}

/// A `varve serve` process, killed (SIGKILL) when dropped; `uri` is the
/// `varve://HOST:PORT` (or, with TLS, `varves://HOST:PORT`) it printed.
pub struct Served {
    pub child: Child,
    pub uri: String,
    /// What it wrote on stderr so far (its logs; echoed to the test's stderr too).
    pub log: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    /// `http://HOST:PORT`, or `https://HOST:PORT` with TLS, for curl.
    pub fn http(&self) -> String {
        match self.uri.strip_prefix("varves://") {
            Some(authority) => format!("https://{authority}"),
            None => self.uri.replacen("varve://", "http://", 1),
        }
    }

    /// `HOST:PORT`.
    pub fn authority(&self) -> &str {
        self.uri.split_once("://").map_or(self.uri.as_str(), |(_, authority)| authority)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.authority().rsplit_once(':').and_then(|(_, port)| port.parse().ok()).expect("a port in the URI")
    }

    /// Whether its stderr has shown `text` so far.
    pub fn logged(&self, text: &str) -> bool {
        self.log.lock().expect("log lock").contains(text)
    }
}

impl Env {
    /// Start `varve --data DIR serve --listen 127.0.0.1:0 EXTRA…` and wait
    /// for the line that says where it listens.
    pub fn serve(&self, extra: &[&str]) -> Served {
        self.try_serve_at("127.0.0.1:0", extra).unwrap_or_else(|log| panic!("varve serve did not start: {log}"))
    }

    /// Start `varve --data DIR serve --listen LISTEN EXTRA…` and wait for the
    /// line that says where it listens; `Err` with its stderr if it exits
    /// first (the port is taken, a flag is wrong).
    pub fn try_serve_at(&self, listen: &str, extra: &[&str]) -> Result<Served, String> {
        use std::io::BufRead as _;
        let mut args = vec!["serve", "--listen", listen];
        args.extend_from_slice(extra);
        let mut child = self
            .command(&args)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start varve serve");
        let stdout = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take().expect("stderr");
        let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let (log_for_thread, (done_tx, done_rx)) = (std::sync::Arc::clone(&log), std::sync::mpsc::channel());
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                eprintln!("varve serve: {line}");
                let mut log = log_for_thread.lock().expect("log lock");
                log.push_str(&line);
                log.push('\n');
            }
            let _ = done_tx.send(());
        });
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = std::io::BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(WAIT).expect("varve serve printed where it listens, or exited");
        let Some(uri) =
            line.split_whitespace().find(|word| word.starts_with("varve://") || word.starts_with("varves://"))
        else {
            let _ = child.kill();
            let _ = child.wait();
            // Its stderr ends with it: wait for the last of it.
            let _ = done_rx.recv_timeout(WAIT);
            let log = log.lock().expect("log lock").clone();
            return Err(format!("no URI in {line:?}; stderr: {log}"));
        };
        Ok(Served { child, uri: uri.to_owned(), log })
    }
}

/// The body of `GET path` from a plain `varve serve` at `authority`
/// (`HOST:PORT`), if it answers 200 within a few seconds.
pub fn http_get(authority: &str, path: &str) -> Option<String> {
    use std::io::{Read as _, Write as _};
    let addr = authority.parse::<std::net::SocketAddr>().ok()?;
    let mut stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8(answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_owned())
}

/// Whether a plain `varve serve` at `authority` (`HOST:PORT`) answers
/// `GET /healthz` with 200 within a second or two.
pub fn healthz_ok(authority: &str) -> bool {
    use std::io::{Read as _, Write as _};
    let Ok(addr) = authority.parse::<std::net::SocketAddr>() else { return false };
    let Ok(mut stream) = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET /healthz HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    answer.starts_with(b"HTTP/1.1 200")
}

/// A loopback port to listen on again and again across restarts: below the
/// range the kernel hands out to outgoing connections, so that no client
/// socket takes it while the server is down (nor connects to itself on it,
/// which TCP allows when source and destination port are equal), and free
/// when chosen. Randomized apart from any test seed, so that concurrent runs
/// do not collide.
pub fn fixed_loopback_port() -> u16 {
    let ephemeral_first: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768);
    let (low, high) = (10_000_u16, ephemeral_first.max(10_001));
    let mut state = u64::from(std::process::id())
        ^ u64::from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").subsec_nanos());
    for _ in 0..1000 {
        // xorshift: enough to spread the tries.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let port = low + u16::try_from(state % u64::from(high - low)).expect("in range");
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {low}..{high}")
}

/// Every record of each of `logs` in `ns`, checked to be dense from seq 1.
pub fn scan_logs(
    ns: &dyn varve_log::Namespace,
    logs: &[&str],
) -> std::collections::HashMap<String, Vec<varve_log::Record>> {
    let mut stored = std::collections::HashMap::new();
    for log in logs {
        let records: Vec<varve_log::Record> =
            ns.scan(log, varve_log::SeqRange::ALL).expect("scan").map(|r| r.expect("a record")).collect();
        let dense = records.iter().zip(1..).all(|(record, seq)| record.seq == seq);
        assert!(dense, "log {log} is not dense from seq 1");
        stored.insert((*log).to_owned(), records);
    }
    stored
}

/// Check what is stored against what clients were acknowledged, as
/// `(log, seq, payload)`, payloads being unique: each acknowledged record
/// is stored at its seq, no payload is stored twice, and nothing is stored
/// that no client was told of.
pub fn check_acknowledged<'a>(
    stored: &std::collections::HashMap<String, Vec<varve_log::Record>>,
    acknowledged: impl IntoIterator<Item = (&'a str, u64, &'a [u8])>,
) -> Result<(), String> {
    let mut place_of: std::collections::HashMap<&[u8], (&str, u64)> = std::collections::HashMap::new();
    for (log, records) in stored {
        for record in records {
            if let Some(first) = place_of.insert(&record.value, (log, record.seq)) {
                return Err(format!("{:?} is stored twice: {first:?} and ({log}, {})", record.value, record.seq));
            }
        }
    }
    let mut count = 0;
    for (log, seq, payload) in acknowledged {
        count += 1;
        let found = place_of.get(payload);
        if found != Some(&(log, seq)) {
            let payload = String::from_utf8_lossy(payload);
            return Err(format!("{payload:?} was acknowledged at ({log}, {seq}) and is stored at {found:?}"));
        }
    }
    if place_of.len() == count {
        Ok(())
    } else {
        Err(format!("{} records are stored, {count} were acknowledged", place_of.len()))
    }
}

/// Check that a watch of `log` passed on exactly its stored records, in order.
pub fn check_watched(
    log: &str,
    watched: &[varve_log::Record],
    stored: &std::collections::HashMap<String, Vec<varve_log::Record>>,
) -> Result<(), String> {
    let expected = &stored[log];
    let seqs = |records: &[varve_log::Record]| records.iter().map(|r| r.seq).collect::<Vec<_>>();
    if watched.len() != expected.len() || watched.iter().zip(expected).any(|(got, want)| got != want) {
        return Err(format!(
            "the watch of {log} passed on seqs {:?}, the log holds {:?}",
            seqs(watched),
            seqs(expected)
        ));
    }
    Ok(())
}
