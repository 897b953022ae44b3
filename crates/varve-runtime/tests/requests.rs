//! Request ids: an append repeated under the same id lands once — through
//! a runtime, across its restart on the same journal, through a
//! writer-only runtime, and in a namespace no runtime serves.

#![expect(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod common;

use std::sync::Arc;

use common::{of_kind, unbounded, IDLE};
use varve_log::{JournalOptions, JournalStore, Namespace, Store, SyncPolicy};
use varve_runtime::requests::{append_batch_once, REQUESTS_LOG};
use varve_runtime::{EventKind, RequestId, RetryPolicy, RuntimeBuilder};

fn journal(dir: &std::path::Path) -> Arc<dyn Namespace> {
    let options = JournalOptions { sync: SyncPolicy::Never, ..JournalOptions::default() };
    JournalStore::open(dir, options).unwrap().namespace("app").unwrap()
}

#[test]
fn a_repeated_request_returns_the_first_seqs_even_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let id = RequestId::parse("order-1").unwrap();
    {
        let rt = RuntimeBuilder::new(journal(dir.path()))
            .log("in", unbounded())
            .log("out", unbounded())
            .handler("h", RetryPolicy::default(), |_| Ok(()))
            .subscribe("in", "h")
            .start()
            .unwrap();
        rt.append("in", b"before").unwrap();
        let first = rt.append_once(&id, &[("in", b"x"), ("out", b"y")], None).unwrap();
        assert_eq!((first.seqs.clone(), first.repeated), (vec![2, 1], false));
        let again = rt.append_once(&id, &[("in", b"x"), ("out", b"y")], None).unwrap();
        assert_eq!((again.seqs, again.repeated), (vec![2, 1], true));
        let other_logs = rt.append_once(&id, &[("out", b"y")], None).unwrap_err();
        assert!(other_logs.to_string().contains("use a new id"), "{other_logs}");
        assert!(rt.wait_idle(IDLE));
        assert_eq!(of_kind(&rt.events().unwrap(), EventKind::Trigger).len(), 2, "the repeat fired nothing");
        rt.stop(IDLE);
    }
    // The memory is rebuilt from the store: a full runtime and a writer-only one.
    for concurrency in [1, 0] {
        let rt = RuntimeBuilder::new(journal(dir.path())).concurrency(concurrency).start().unwrap();
        let again = rt.append_once(&id, &[("in", b"x"), ("out", b"y")], None).unwrap();
        assert_eq!((again.seqs, again.repeated), (vec![2, 1], true), "concurrency {concurrency}");
        let fresh = rt.append_once(&RequestId::random(), &[("in", b"z")], None).unwrap();
        assert!(!fresh.repeated);
        rt.stop(IDLE);
    }
    let ns = journal(dir.path());
    assert_eq!(ns.latest("in").unwrap(), 4);
    assert_eq!(ns.latest("out").unwrap(), 1);
    assert_eq!(ns.latest(REQUESTS_LOG).unwrap(), 3, "one record per identified append that landed");
}

#[test]
fn a_namespace_no_runtime_serves_honours_request_ids_too() {
    let dir = tempfile::tempdir().unwrap();
    let ns = journal(dir.path());
    ns.create_log("in", unbounded()).unwrap();
    let id = RequestId::parse("plain").unwrap();
    let first = append_batch_once(ns.as_ref(), &id, &[("in", b"a"), ("in", b"b")]).unwrap();
    assert_eq!((first.seqs.clone(), first.repeated), (vec![1, 2], false));
    let again = append_batch_once(ns.as_ref(), &id, &[("in", b"a"), ("in", b"b")]).unwrap();
    assert_eq!((again.seqs, again.repeated), (vec![1, 2], true));
    assert_eq!(ns.latest("in").unwrap(), 2);
    // A runtime started later remembers it as well.
    drop(ns);
    let rt = RuntimeBuilder::new(journal(dir.path())).concurrency(0).start().unwrap();
    assert!(rt.append_once(&id, &[("in", b"a"), ("in", b"b")], None).unwrap().repeated);
}
