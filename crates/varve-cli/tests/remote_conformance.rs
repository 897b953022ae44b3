//! The Log contract on the remote backend: the same conformance suite as
//! every backend, against a real `varve serve` process on a loopback port
//! (one server per check, so checks run in parallel without sharing state).

mod common;

use varve_log::conformance::Fixture;
use varve_log::Store;
use varve_remote::{RemoteOptions, RemoteStore};

fn fresh() -> Fixture {
    let env = common::Env::new();
    // Group commit: the suite checks behaviour, not power-loss durability.
    let served = env.serve(&["--sync", "never"]);
    let store = RemoteStore::connect(RemoteOptions::from_uri(&served.uri, None).expect("uri")).expect("connect");
    Fixture { namespace: store.namespace("test").expect("namespace"), keep_alive: Box::new((served, env)) }
}

// `varve serve` has no conditional-batch route; the remote backend refuses
// `append_batch_if` with `InvalidArgument` (checked in remote_errors).
varve_log::conformance_suite!(core: fresh);
// `POST /v1/namespaces/NS/rename`: renames are served.
varve_log::conformance_suite!(renames: fresh);
// `POST /v1/namespaces/NS/logs/LOG/trim`: trims are served.
varve_log::conformance_suite!(trims: fresh);

#[test]
fn conditional_batches_are_refused_before_anything_is_sent() {
    let fixture = fresh();
    let ns = &fixture.namespace;
    ns.create_log("a", varve_log::LogConfig::unbounded()).expect("create");
    let err = ns.append_batch_if(&[("a", b"x")], &[("a", 0)]).expect_err("not served");
    assert!(matches!(err, varve_log::LogError::InvalidArgument { .. }), "{err}");
    assert!(err.to_string().contains("append_if"), "says what to do instead: {err}");
    assert_eq!(ns.latest("a").expect("latest"), 0, "nothing appended");
}
