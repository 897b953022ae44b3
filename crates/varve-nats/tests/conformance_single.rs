//! The Log conformance suite on one real nats-server (temporary launcher).
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use varve_log::conformance::Fixture;
use varve_nats::NatsStore;

struct Server {
    _child: Child,
    _dir: tempfile::TempDir,
    url: String,
}

fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        let config = format!(
            "listen: 127.0.0.1:{port}\nmax_payload: 20MB\njetstream {{\n store_dir: \"{}\"\n sync_interval: always\n limits {{ batch {{ max_msgs: 65536 }} }}\n}}\n",
            dir.path().join("store").display()
        );
        std::fs::write(dir.path().join("nats.conf"), config).expect("config");
        let child = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../.tools/bin/nats-server"))
            .arg("-c")
            .arg(dir.path().join("nats.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn nats-server");
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(started.elapsed() < Duration::from_secs(30), "nats-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Server { _child: child, _dir: dir, url: format!("nats://127.0.0.1:{port}?batch_max=65536") }
    })
}

fn fresh() -> Fixture {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let store = Arc::new(NatsStore::open(&server().url).expect("connect"));
    let name = format!("t{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
    let namespace = Arc::new(store.nats_namespace(&name).expect("ns"));
    Fixture { namespace, keep_alive: Box::new(store) }
}

varve_log::conformance_suite!(fresh);
