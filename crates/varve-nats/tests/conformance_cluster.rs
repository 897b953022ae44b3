//! The Log conformance suite on a real 3-node nats-server cluster on
//! loopback, every namespace's stream replicated three times (R=3).

mod support;

// Renames are refused with `Unsupported` (docs/nats.md); trims are checked like every backend's.
varve_log::conformance_suite!(without_renames: || support::fixture(support::cluster3(), "replicas=3"));
