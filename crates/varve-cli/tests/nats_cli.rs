//! `varve nats up` and `varve nats down` as a user runs them, with real
//! `nats-server` processes (`make nats-server` installs one): `up` prints
//! the URL last and leaves the servers running after it exits, a second
//! `up` reports the running cluster, `down` stops every server, and a
//! `down` with nothing to stop is a clear error.

use std::io::{BufRead as _, BufReader};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use tempfile::TempDir;
use varve_nats::cluster::ClusterRecord;

/// Longest wait for a server's first bytes: generous, for a loaded two-core machine.
const WAIT: Duration = Duration::from_secs(60);

/// `varve ARGS…`, outside any store or handler environment.
fn varve(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_varve"))
        .args(args)
        .arg("--dir")
        .arg(dir)
        .env_remove("VARVE_STORE")
        .env_remove("VARVE_DATA")
        .output()
        .expect("run varve")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `varve nats down` on the directory when dropped, so that a failed
/// assertion leaves no server running.
struct DownOnDrop<'a>(&'a Path);

impl Drop for DownOnDrop<'_> {
    fn drop(&mut self) {
        let _ = varve(&["nats", "down"], self.0);
    }
}

/// Whether `pid` is gone: no such process, or a zombie (it runs nothing;
/// whoever adopted it has not reaped it yet).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => true,
    }
}

#[test]
fn up_prints_the_url_and_down_stops_every_server() {
    let temp = TempDir::new().expect("tempdir");
    let dir = temp.path().join("cluster");
    let _down = DownOnDrop(&dir);

    let up = varve(&["nats", "up", "--nodes", "3"], &dir);
    assert!(up.status.success(), "nats up failed: {}", text(&up.stderr));
    let stdout = text(&up.stdout);
    let url = stdout.lines().last().expect("a URL line").to_owned();
    let addrs: Vec<&str> = url.strip_prefix("nats://").expect("nats://…").split(',').collect();
    assert_eq!(addrs.len(), 3, "{url}");
    for addr in &addrs {
        assert!(addr.starts_with("127.0.0.1:"), "{url}");
        // The server is there after `up` exited: it greets a client with INFO.
        let stream = TcpStream::connect(addr).expect("connect to a server");
        stream.set_read_timeout(Some(WAIT)).expect("read timeout");
        let mut greeting = String::new();
        BufReader::new(stream).read_line(&mut greeting).expect("read INFO");
        assert!(greeting.starts_with("INFO {"), "{addr} said {greeting:?}");
    }
    let record = ClusterRecord::read(&dir).expect("read the record").expect("a record");
    assert_eq!(record.url, url);
    let pids: Vec<u32> = record.nodes.iter().map(|node| node.pid.expect("a pid")).collect();
    assert_eq!(record.running().len(), 3);
    let config = std::fs::read_to_string(dir.join("node2/nats.conf")).expect("node 2's config");
    assert!(config.contains("server_tags: [\"az:3\"]") && config.contains("sync_interval: always"), "{config}");

    // A second `up` starts nothing and prints the same URL.
    let again = varve(&["nats", "up"], &dir);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_eq!(text(&again.stdout).lines().last(), Some(url.as_str()));
    assert!(text(&again.stderr).contains("already runs"), "{}", text(&again.stderr));

    let down = varve(&["nats", "down"], &dir);
    assert!(down.status.success(), "nats down failed: {}", text(&down.stderr));
    assert!(text(&down.stdout).contains("stopped 3 nats-server(s)"), "{}", text(&down.stdout));
    for pid in pids {
        assert!(gone(pid), "nats-server {pid} still runs after `nats down`");
    }
    assert!(ClusterRecord::read(&dir).expect("read").is_none());

    let second = varve(&["nats", "down"], &dir);
    assert_eq!(second.status.code(), Some(1), "a second down: {}", text(&second.stderr));
    let message = text(&second.stderr);
    assert!(message.starts_with("error: no cluster in "), "{message}");
    assert!(message.contains("varve nats up --dir"), "{message}");
}
