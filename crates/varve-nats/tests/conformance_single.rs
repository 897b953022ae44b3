//! The Log conformance suite on one real nats-server.

mod support;

// A NATS namespace cannot rename logs (docs/nats.md): the suite checks that it
// refuses with `Unsupported` and changes nothing.
varve_log::conformance_suite!(without_renames: || support::fixture(support::single(), ""));
