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

// Every check: conditional batches (`expected` in a `POST …/batch`), renames
// (`POST …/rename`) and trims (`POST …/logs/LOG/trim`) are served.
varve_log::conformance_suite!(fresh);
