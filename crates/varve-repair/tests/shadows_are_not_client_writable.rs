//! A client writing through the runtime cannot append to a repair's shadow
//! `_shadow.LOG` while an online repair builds it: the walk takes the
//! shadow's latest seq as "copied so far", so a stray record there would
//! take an original record's place in the repaired log. (A runtime that
//! refused only its own logs let it through, with no error anywhere.)

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use varve_log::{LogConfig, MemoryStore, Namespace, SeqRange, Store};
use varve_repair::{repair_online, Correction, Online, SHADOW_PREFIX};
use varve_runtime::trace::RecordRef;
use varve_runtime::{HandlerContext, HandlerFn, HandlerKind, HandlerSpec, RetryPolicy, RuntimeBuilder};

const IDLE: Duration = Duration::from_secs(60);

fn contents(ns: &dyn Namespace, log: &str) -> Vec<Vec<u8>> {
    ns.scan(log, SeqRange::ALL).expect("scan").map(|r| r.expect("record").value.to_vec()).collect()
}

#[test]
fn a_client_append_to_a_shadow_through_the_runtime_does_not_corrupt_an_online_repair() {
    let ns: Arc<dyn Namespace> = MemoryStore::new().namespace("app").expect("namespace");
    let copy: HandlerFn = Arc::new(|ctx: &mut HandlerContext<'_>| {
        let record = ctx.record().to_vec();
        ctx.append("out", &record)?;
        Ok(())
    });
    let code = HashMap::from([("copy".to_owned(), Arc::clone(&copy))]);
    let spec = HandlerSpec { name: "copy".into(), kind: HandlerKind::Rust(copy), retry: RetryPolicy::default() };
    let runtime = RuntimeBuilder::new(Arc::clone(&ns))
        .host(1)
        .concurrency(1)
        .log("in", LogConfig::unbounded())
        .log("out", LogConfig::unbounded())
        .register(spec)
        .subscribe("in", "copy")
        .start()
        .expect("runtime");
    let mut expected: Vec<Vec<u8>> = Vec::new();
    for i in 0..20u64 {
        let v = format!("v{i}").into_bytes();
        runtime.append("in", &v).expect("append");
        expected.push(v);
    }
    assert!(runtime.wait_idle(IDLE), "idle before the repair");

    let record = RecordRef { namespace: "app".into(), log: "in".into(), seq: 5 };
    let corrections = [Correction::Record(record.clone())];
    let values = HashMap::from([(record, b"fixed".to_vec())]);
    expected[4] = b"fixed".to_vec();
    let none = HashSet::new();
    let handle = runtime.handle();
    let stray: Mutex<Option<String>> = Mutex::new(None);
    let on_round = |round: usize, _events: usize| {
        if round == 1 {
            // A client (HTTP, the CLI's socket, Python) writing through the runtime.
            let shadow = format!("{SHADOW_PREFIX}in");
            let answer = handle.append(&shadow, b"stray");
            *stray.lock().expect("lock") = Some(format!("{answer:?}"));
        }
    };
    let mut online = Online::new(&corrections, &values, &code, &none);
    online.pause_under = Duration::ZERO;
    online.on_round = Some(&on_round);
    let outcome = repair_online(&runtime.handle(), &online);
    let stray = stray.into_inner().expect("lock");
    println!("the append to the shadow through the runtime answered: {stray:?}");
    assert!(stray.as_deref().is_some_and(|a| a.contains("InvalidArgument")), "refused: {stray:?}");
    outcome.expect("the online repair");
    assert!(runtime.wait_idle(IDLE), "idle after the repair");
    let held = contents(&*ns, "in");
    let show =
        |records: &[Vec<u8>]| records.iter().map(|r| String::from_utf8_lossy(r).into_owned()).collect::<Vec<_>>();
    assert_eq!(
        show(&held),
        show(&expected),
        "the repaired `in` is the acknowledged appends with the correction (append to the shadow answered {stray:?})"
    );
    runtime.stop(Duration::from_secs(5));
}
