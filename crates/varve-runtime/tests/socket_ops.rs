//! Operations the hosting program adds to the runtime's socket
//! (`Runtime::add_socket_op`): a `call` request runs them and answers with
//! what they return; an unknown one, or one that fails, is refused with a
//! message that names it.

use std::sync::Arc;

use serde_json::json;
use varve_log::{MemoryStore, Store};
use varve_runtime::socket::{self, CallError, Request};
use varve_runtime::RuntimeBuilder;

#[test]
fn a_call_runs_the_added_operation_and_unknown_or_failing_ones_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("runtime.sock");
    let ns = MemoryStore::new().namespace("app").expect("namespace");
    let runtime = RuntimeBuilder::new(ns).socket(&path).start().expect("runtime");
    runtime.add_socket_op(
        "echo",
        Arc::new(|args| match args.get("fail") {
            Some(_) => Err("asked to fail".to_owned()),
            None => Ok(json!({ "echo": args })),
        }),
    );
    let call = |name: &str, args| socket::call_checked(&path, &Request::Call { name: name.to_owned(), args });
    let answer = call("echo", json!({"n": 1})).expect("echo").answer;
    assert_eq!(answer, Some(json!({"echo": {"n": 1}})));
    match call("nope", json!({})) {
        Err(CallError::Refused { error, .. }) => assert!(error.contains("no operation \"nope\""), "{error}"),
        other => panic!("an unknown operation is refused, not {other:?}"),
    }
    match call("echo", json!({"fail": true})) {
        Err(CallError::Refused { error, .. }) => assert!(error.contains("asked to fail"), "{error}"),
        other => panic!("a failing operation is refused, not {other:?}"),
    }
    runtime.stop(std::time::Duration::from_secs(5));
}
