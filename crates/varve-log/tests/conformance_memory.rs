//! The Log contract on the memory backend.

use std::sync::Arc;

use varve_log::conformance::Fixture;
use varve_log::{Limits, MemoryNamespace};

fn fresh() -> Fixture {
    Fixture { namespace: Arc::new(MemoryNamespace::new("test", Limits::default())), keep_alive: Box::new(()) }
}

varve_log::conformance_suite!(fresh);
