//! The Log conformance suite on a real 3-node nats-server cluster on
//! loopback, every namespace's stream replicated three times (R=3).

mod support;

varve_log::conformance_suite!(|| support::fixture(support::cluster3(), "replicas=3"));
