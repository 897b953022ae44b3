//! The Log conformance suite on one real nats-server.

mod support;

varve_log::conformance_suite!(|| support::fixture(support::single(), ""));
