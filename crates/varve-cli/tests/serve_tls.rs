//! `varve serve --tls-cert --tls-key` and `varves://` stores, against a real
//! server with a certificate made by the test (a private CA, as rcgen makes
//! it): the remote backend and the CLI trust it with `--tls-ca`, curl
//! negotiates HTTP/2 by ALPN; an untrusted certificate, a plain client on
//! the TLS port and a TLS client on a plain port each fail at once with a
//! message that says what to do; bad certificate files stop the server
//! with an error that names them.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Env, Served, WAIT};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose};
use varve_log::{LogConfig, LogError, SeqRange, Store};
use varve_remote::{RemoteOptions, RemoteStore};

/// A failure that has to come at once, not after waiting out a timeout:
/// well under the clients' timeouts (30 s), with room for a loaded machine.
const PROMPT: Duration = Duration::from_secs(20);

/// The PEM files of a test CA and of a server certificate it signed for
/// `localhost` and `127.0.0.1`.
struct Certificates {
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    /// A CA that signed nothing here: trusting it trusts no server.
    other_ca: PathBuf,
}

fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    CertifiedIssuer::self_signed(params, KeyPair::generate().expect("CA key")).expect("CA certificate")
}

fn certificates(env: &Env) -> Certificates {
    let authority = ca("varve test CA");
    let key = KeyPair::generate().expect("server key");
    let mut params = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).expect("params");
    params.distinguished_name.push(DnType::CommonName, "varve test server");
    let cert = params.signed_by(&key, &authority).expect("server certificate");
    let dir = env.temp.path();
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write PEM");
        path
    };
    Certificates {
        ca: write("ca.pem", &authority.pem()),
        cert: write("cert.pem", &cert.pem()),
        key: write("key.pem", &key.serialize_pem()),
        other_ca: write("other-ca.pem", &ca("another CA").pem()),
    }
}

fn path(path: &std::path::Path) -> &str {
    path.to_str().expect("utf-8 path")
}

fn serve_tls(env: &Env, certs: &Certificates) -> Served {
    let served = env.serve(&["--sync", "never", "--tls-cert", path(&certs.cert), "--tls-key", path(&certs.key)]);
    assert!(served.uri.starts_with("varves://127.0.0.1:"), "{}", served.uri);
    served
}

fn connect(uri: &str, tls_ca: Option<&std::path::Path>) -> varve_log::Result<RemoteStore> {
    RemoteStore::connect(RemoteOptions { tls_ca: tls_ca.map(PathBuf::from), ..RemoteOptions::from_uri(uri, None)? })
}

fn curl(args: &[&str]) -> (String, String) {
    let output = Command::new("curl").args(["-sS", "--max-time", "20"]).args(args).output().expect("run curl");
    (String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned())
}

#[test]
fn the_remote_backend_the_cli_and_curl_work_over_tls() {
    let env = Env::new();
    let certs = certificates(&env);
    let served = serve_tls(&env, &certs);

    // varve::open with the CA, by the IP address and by the name.
    for uri in [served.uri.clone(), format!("varves://localhost:{}", served.port())] {
        let options = varve::OpenOptions { tls_ca: Some(certs.ca.clone()), ..varve::OpenOptions::default() };
        let store = varve::open(&uri, &options).unwrap_or_else(|e| panic!("{uri}: {e}"));
        let ns = store.namespace("app").expect("namespace");
        ns.create_log("t", LogConfig::unbounded()).expect("create");
        ns.append("t", uri.as_bytes()).expect("append");
    }

    let store = connect(&served.uri, Some(&certs.ca)).expect("connect with the CA");
    let ns = store.namespace("app").expect("namespace");
    let mut watch = ns.watch("t", 1).expect("watch");
    let remote = store.remote_namespace("app").expect("namespace");
    let (seqs, repeated) = remote.append_batch_once(&[("t", b"three"), ("t", b"four")], "tls-1").expect("batch");
    assert_eq!((seqs, repeated), (vec![3, 4], false));
    assert!(remote.append_batch_once(&[("t", b"three"), ("t", b"four")], "tls-1").expect("again").1, "a repeat");
    assert_eq!(ns.latest("t").expect("latest"), 4);
    assert_eq!(&ns.get("t", 3).expect("get")[..], b"three");
    let scanned: Vec<_> = ns.scan("t", SeqRange::ALL).expect("scan").map(|r| r.expect("record").seq).collect();
    assert_eq!(scanned, [1, 2, 3, 4]);
    ns.append("t", b"five").expect("append");
    let watched: Vec<_> = (1..=5)
        .map(|seq| {
            let record = watch.next_timeout(WAIT).expect("watch").expect("a record within the wait");
            assert_eq!(record.seq, seq);
            record.value
        })
        .collect();
    assert_eq!(&watched[4][..], b"five");

    // The CLI, with --tls-ca and with VARVE_TLS_CA.
    let out = env.run(&["--store", &served.uri, "--tls-ca", path(&certs.ca), "--ns", "app", "log", "get", "t", "5"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "five");
    let out = env
        .command(&["--store", &served.uri, "--ns", "app", "--json", "log", "append", "t", "six"])
        .env("VARVE_TLS_CA", &certs.ca)
        .output()
        .expect("run varve");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // curl: HTTP/1.1 and, by ALPN, HTTP/2.
    let ca = path(&certs.ca);
    let healthz = format!("{}/healthz", served.http());
    assert_eq!(curl(&["--cacert", ca, &healthz]).0.trim(), "ok");
    assert_eq!(curl(&["--cacert", ca, "--http1.1", "-o", "/dev/null", "-w", "%{http_version}", &healthz]).0, "1.1");
    assert_eq!(curl(&["--cacert", ca, "--http2", "-o", "/dev/null", "-w", "%{http_version}", &healthz]).0, "2");
    let (body, _) =
        curl(&["--cacert", ca, "--http2", &format!("{}/v1/namespaces/app/logs/t/records/6", served.http())]);
    assert_eq!(body, "six");
}

#[test]
fn an_untrusted_certificate_is_a_clear_error_and_disturbs_no_other_client() {
    let env = Env::new();
    let certs = certificates(&env);
    let served = serve_tls(&env, &certs);
    let trusted = connect(&served.uri, Some(&certs.ca)).expect("connect with the CA");
    let ns = trusted.namespace("app").expect("namespace");
    ns.create_log("t", LogConfig::unbounded()).expect("create");
    let mut watch = ns.watch("t", 1).expect("watch");

    // Mozilla's roots only, and a CA that signed something else.
    for ca in [None, Some(certs.other_ca.as_path())] {
        let started = Instant::now();
        let Err(error) = connect(&served.uri, ca) else { panic!("connected without trusting the certificate") };
        assert!(started.elapsed() < PROMPT, "took {:?}", started.elapsed());
        let LogError::Unavailable { target, reason } = &error else { panic!("{error:?}") };
        assert_eq!(target, &served.uri);
        assert!(reason.contains("not trusted") && reason.contains("--tls-ca"), "{reason}");
    }
    // An append from the CLI: nothing was sent, and the message says what to do.
    let out = env.run(&["--store", &served.uri, "--ns", "app", "log", "append", "t", "never"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not trusted") && stderr.contains("--tls-ca") && stderr.contains("nothing was done"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    // curl without the CA fails the same way.
    let (_, curl_error) = curl(&[&format!("{}/healthz", served.http())]);
    assert!(curl_error.contains("certificate"), "{curl_error}");

    // The server logged the failed handshakes and serves the trusted client on.
    common::wait_until("the server logs a failed handshake", || served.logged("TLS handshake failed"));
    ns.append("t", b"after").expect("append");
    let record = watch.next_timeout(WAIT).expect("watch").expect("the record within the wait");
    assert_eq!((record.seq, &record.value[..]), (1, &b"after"[..]));
    assert_eq!(ns.latest("t").expect("latest"), 1, "the refused append did not land");
}

#[test]
fn mismatched_schemes_are_clear_errors_in_bounded_time() {
    let env = Env::new();
    let certs = certificates(&env);
    let tls = serve_tls(&env, &certs);
    let plain_env = Env::new();
    let plain = plain_env.serve(&["--sync", "never"]);

    // varve:// to the TLS port: the server answers plain HTTP with tls_required.
    let plain_to_tls = format!("varve://{}", tls.authority());
    let started = Instant::now();
    let Err(error) = connect(&plain_to_tls, None) else { panic!("a plain client connected to the TLS port") };
    assert!(started.elapsed() < PROMPT, "took {:?}", started.elapsed());
    assert!(
        matches!(&error, LogError::Protocol { reason, .. } if reason.contains("serves TLS") && reason.contains("varves://")),
        "{error:?}"
    );
    let out = env.run(&["--store", &plain_to_tls, "log", "append", "t", "x"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("varves://HOST:PORT"), "{stderr}");
    let (body, _) = curl(&[&format!("http://{}/healthz", tls.authority())]);
    assert!(body.contains(r#""error":"tls_required""#), "{body}");

    // varves:// to a plain port: the client sees an answer that is not TLS.
    let tls_to_plain = format!("varves://{}", plain.authority());
    let started = Instant::now();
    let Err(error) = connect(&tls_to_plain, Some(&certs.ca)) else { panic!("a TLS client connected to a plain port") };
    assert!(started.elapsed() < PROMPT, "took {:?}", started.elapsed());
    assert!(
        matches!(&error, LogError::Unavailable { reason, .. } if reason.contains("does not speak TLS") && reason.contains("varve://")),
        "{error:?}"
    );
    let out = env.run(&["--store", &tls_to_plain, "log", "append", "t", "x"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("does not speak TLS"), "{stderr}");

    // Both servers serve their right clients on.
    connect(&tls.uri, Some(&certs.ca)).expect("the TLS server still serves");
    connect(&plain.uri, None).expect("the plain server still serves");
}

#[test]
fn bad_tls_flags_and_files_stop_the_server_with_a_clear_error() {
    let env = Env::new();
    let certs = certificates(&env);
    let garbage = env.temp.path().join("garbage.pem");
    std::fs::write(&garbage, "-----BEGIN CERTIFICATE-----\n%%%%\n-----END CERTIFICATE-----\n").expect("write");
    let empty = env.temp.path().join("empty.pem");
    std::fs::write(&empty, "nothing here\n").expect("write");
    let missing = env.temp.path().join("missing.pem");
    let other_key = env.temp.path().join("other-key.pem");
    std::fs::write(&other_key, KeyPair::generate().expect("key").serialize_pem()).expect("write");
    let (cert, key) = (path(&certs.cert), path(&certs.key));
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--tls-cert", cert], "--tls-key"),
        (vec!["--tls-key", key], "--tls-cert"),
        (vec!["--tls-cert", path(&missing), "--tls-key", key], "missing.pem"),
        (vec!["--tls-cert", cert, "--tls-key", path(&missing)], "missing.pem"),
        (vec!["--tls-cert", path(&garbage), "--tls-key", key], "garbage.pem"),
        (vec!["--tls-cert", path(&empty), "--tls-key", key], "empty.pem"),
        (vec!["--tls-cert", cert, "--tls-key", path(&empty)], "empty.pem"),
        (vec!["--tls-cert", cert, "--tls-key", path(&other_key)], "other-key.pem"),
        // TLS is no token: beyond loopback the rule stays.
        (vec!["--listen", "0.0.0.0:0", "--tls-cert", cert, "--tls-key", key], "--token-file"),
    ];
    for (extra, named) in cases {
        let mut args = vec!["serve"];
        args.extend_from_slice(&extra);
        if !extra.contains(&"--listen") {
            args.extend(["--listen", "127.0.0.1:0"]);
        }
        let out = env.command(&args).stdin(std::process::Stdio::null()).output().expect("run varve serve");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{extra:?} started");
        assert!(stderr.contains(named), "{extra:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{extra:?}: {stderr}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("listening"), "{extra:?}");
    }
}
