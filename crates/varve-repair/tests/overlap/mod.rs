//! What the tests of overlapping runs share (`tests/needed*.rs`): a gate
//! that holds a handler mid-run while the test appends, a runtime of named
//! handlers on a memory namespace, and a repair planned and carried out
//! from the events given.

#![allow(dead_code, reason = "each test binary uses part of this")]

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use varve_log::{LogConfig, Namespace, SeqRange};
use varve_repair::{Correction, Inputs, NotReplayable, RepairError, RepairOutcome, RepairPlan};
use varve_runtime::trace::{merge_owned, RecordRef};
use varve_runtime::{
    namespace_events, HandlerContext, HandlerFn, HandlerKind, HandlerResult, HandlerSpec, RetryPolicy, Runtime,
    RuntimeBuilder, StoredEvent,
};

use crate::common::value;

/// How long a test waits for a runtime or a held handler.
pub const WAIT: Duration = Duration::from_secs(30);

/// A handler held mid-run: 0 not begun, 1 held (the handler set it), 2 let
/// go (the test set it).
#[derive(Clone, Default)]
pub struct Gate(Arc<(Mutex<u8>, Condvar)>);

impl Gate {
    /// In the handler: say it is held, then wait until the test lets it go.
    /// Not in a replay: the repair places every record, nothing to wait for.
    pub fn hold(&self, ctx: &HandlerContext<'_>) -> HandlerResult {
        if ctx.is_replay() {
            return Ok(());
        }
        let (state, changed) = &*self.0;
        let mut guard = state.lock().expect("gate");
        *guard = (*guard).max(1);
        changed.notify_all();
        let (guard, _) = changed.wait_timeout_while(guard, WAIT, |state| *state < 2).expect("gate");
        if *guard < 2 {
            return Err("the test never let the held handler go".into());
        }
        Ok(())
    }

    /// In the test: wait until the handler is held.
    pub fn until_held(&self) {
        let (state, changed) = &*self.0;
        let guard = changed.wait_timeout_while(state.lock().expect("gate"), WAIT, |s| *s < 1).expect("gate").0;
        assert!(*guard >= 1, "the handler was not held within {WAIT:?}");
    }

    /// In the test: let the held handler go.
    pub fn release(&self) {
        let (state, changed) = &*self.0;
        *state.lock().expect("gate") = 2;
        changed.notify_all();
    }
}

/// A handler for [`start`]: its name, the log it is subscribed to, its code.
pub type Subscribed = (&'static str, &'static str, HandlerFn);

/// A runtime on `ns` (labelled `host`, one worker) with `logs` and `handlers`.
pub fn start(ns: &Arc<dyn Namespace>, host: u64, logs: &[&str], handlers: &[Subscribed]) -> Runtime {
    let mut builder = RuntimeBuilder::new(Arc::clone(ns)).host(host).concurrency(1);
    for log in logs {
        builder = builder.log(log, LogConfig::unbounded());
    }
    for (name, log, f) in handlers {
        builder = builder
            .register(HandlerSpec {
                name: (*name).to_owned(),
                kind: HandlerKind::Rust(Arc::clone(f)),
                retry: RetryPolicy::default(),
            })
            .subscribe(log, name);
    }
    builder.start().expect("runtime")
}

/// The handlers of `handlers` by name, for a repair.
pub fn by_name(handlers: &[Subscribed]) -> HashMap<String, HandlerFn> {
    handlers.iter().map(|(name, _, f)| ((*name).to_owned(), Arc::clone(f))).collect()
}

/// The records of `log`, as `u64`s.
pub fn records(ns: &Arc<dyn Namespace>, log: &str) -> Vec<u64> {
    ns.scan(log, SeqRange::ALL).expect("scan").map(|r| value(&r.expect("record").value)).collect()
}

/// Every event of `namespaces`, merged.
pub fn every_event(namespaces: &[&Arc<dyn Namespace>]) -> Vec<StoredEvent> {
    merge_owned(namespaces.iter().map(|ns| namespace_events(ns.as_ref(), SeqRange::ALL).expect("events")).collect())
}

/// A record reference.
pub fn rec(namespace: &str, log: &str, seq: u64) -> RecordRef {
    RecordRef { namespace: namespace.into(), log: log.into(), seq }
}

/// The two plans are equal but for the events they read.
pub fn same_plan(needed: &RepairPlan, every: &RepairPlan) {
    assert_eq!(
        RepairPlan { events_scanned: 0, ..needed.clone() },
        RepairPlan { events_scanned: 0, ..every.clone() },
        "plan of the events needed:\n{}\nplan of every event:\n{}",
        needed.to_text(),
        every.to_text()
    );
}

/// Plan the correction of each record to its value from `events` and carry
/// it out with `handlers` in `namespaces`.
pub fn repair(
    events: &[StoredEvent],
    values: &[(RecordRef, u64)],
    namespaces: &[&Arc<dyn Namespace>],
    handlers: &HashMap<String, HandlerFn>,
) -> Result<RepairOutcome, RepairError> {
    let correct: Vec<Correction> = values.iter().map(|(r, _)| Correction::Record(r.clone())).collect();
    let plan = RepairPlan::build(events, &correct, &HashSet::new());
    let namespaces = namespaces.iter().map(|ns| (ns.name().to_owned(), Arc::clone(ns))).collect();
    let values = values.iter().map(|(r, v)| (r.clone(), v.to_le_bytes().to_vec())).collect();
    varve_repair::execute(
        &plan,
        &Inputs { events, namespaces: &namespaces, handlers, values: &values, not_replayable: NotReplayable::Refuse },
    )
}
