//! The runtime (handlers on append) on a NATS namespace replicated three
//! times: a topic whose every append fires its handler once, the handler's
//! own appends, and a restart that finds the work already done.

mod support;

use std::sync::Arc;
use std::time::Duration;

use varve_log::{LogConfig, Namespace as _, SeqRange};
use varve_nats::NatsStore;
use varve_runtime::{EventKind, RetryPolicy, RuntimeBuilder};

const IDLE: Duration = Duration::from_secs(60);

#[test]
fn a_replicated_topic_fires_its_handler_once_per_append() {
    let servers = support::cluster3();
    let store = NatsStore::open(&support::uri(servers, "replicas=3")).unwrap();
    let ns = Arc::new(store.nats_namespace(&support::fresh_name("rt")).unwrap());
    let double = |ctx: &mut varve_runtime::HandlerContext<'_>| {
        let value: u64 = std::str::from_utf8(ctx.record()).unwrap_or("0").parse().unwrap_or(0);
        ctx.append("doubled", (value * 2).to_string().as_bytes())?;
        Ok(())
    };
    // The app: topic `readings`, handler `double` appending to `doubled`.
    let start = || {
        RuntimeBuilder::new(ns.clone())
            .topic("readings")
            .log("doubled", LogConfig::unbounded())
            .handler("double", RetryPolicy::default(), double)
            .subscribe("readings", "double")
            .start()
            .unwrap()
    };
    let rt = start();
    for value in 1..=20u64 {
        rt.append("readings", value.to_string().as_bytes()).unwrap();
    }
    rt.append_batch(&[("readings", b"100"), ("readings", b"200")]).unwrap();
    assert!(rt.wait_idle(IDLE), "the handler runs did not finish");
    rt.stop(Duration::from_secs(10));

    let mut doubled: Vec<u64> = ns
        .scan("doubled", SeqRange::ALL)
        .unwrap()
        .map(|r| std::str::from_utf8(&r.unwrap().value).unwrap().parse().unwrap())
        .collect();
    doubled.sort_unstable();
    let mut want: Vec<u64> = (1..=20).map(|v| v * 2).chain([200, 400]).collect();
    want.sort_unstable();
    assert_eq!(doubled, want, "every append fired the handler exactly once");
    assert_eq!(ns.latest("doubled").unwrap(), 22);

    // A new runtime on the same namespace finds nothing left to run.
    let again = start();
    assert!(again.wait_idle(IDLE));
    again.stop(Duration::from_secs(10));
    assert_eq!(ns.latest("doubled").unwrap(), 22, "no trigger ran twice");
    let events = varve_runtime::namespace_events(&*ns, SeqRange::ALL).unwrap();
    let done = events.iter().filter(|e| e.event.kind == EventKind::Done).count();
    assert_eq!(done, 22, "one DONE per trigger");
}
