#![allow(dead_code, reason = "each test file uses a different part")]

use std::sync::Arc;
use std::time::Duration;

use varve_log::{LogConfig, MemoryStore, Namespace, Store};
use varve_runtime::{EventKind, RetryPolicy, Runtime, StoredEvent};

pub const IDLE: Duration = Duration::from_secs(20);

pub fn memory_ns(name: &str) -> Arc<dyn Namespace> {
    MemoryStore::new().namespace(name).expect("memory namespace")
}

pub fn fast_retry(attempts: u32) -> RetryPolicy {
    RetryPolicy {
        attempts,
        backoff: Duration::from_millis(5),
        backoff_max: Duration::from_millis(20),
        timeout: Some(Duration::from_secs(10)),
    }
}

pub fn unbounded() -> LogConfig {
    LogConfig::unbounded()
}

pub fn events(rt: &Runtime) -> Vec<StoredEvent> {
    rt.events().expect("read events")
}

pub fn of_kind(events: &[StoredEvent], kind: EventKind) -> Vec<&StoredEvent> {
    events.iter().filter(|e| e.event.kind == kind).collect()
}
