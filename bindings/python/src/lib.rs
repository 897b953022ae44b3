//! # varve-python — the `varve` Python package's extension module
//!
//! `varve._varve`, built by maturin (see `bindings/python/pyproject.toml`):
//! the Log contract ([`log`]), the `PEDaLS` versioned structures ([`pds`]),
//! PART's persistent map in memory ([`part`]) and durable ([`durable_map`])
//! versioned objects ([`object`]), typed records with schema versions
//! ([`schema`]), the event-driven runtime with Python handlers
//! ([`runtime`]) and repair and replay with them ([`repair`]), with
//! Pythonic types, Python keys mapped to the order-preserving encoding
//! ([`key`]), and typed errors raised as the exception classes of
//! `varve/errors.py` ([`error`]). The pure-Python half of the package
//! (`python/varve/`) re-exports these and adds the async watch helper, the
//! type stubs and the benchmark.
//!
//! ```python
//! import varve
//! with varve.open("data") as store:
//!     log = store.namespace("sensors").log("temperature")
//!     seq = log.append(b"21.5")
//!     assert log.get(seq) == b"21.5"
//! ```
//!
//! No Rust panic reaches Python as anything but an exception, and none is
//! expected: every operating error is a typed `varve.VarveError`.

#![expect(clippy::needless_pass_by_value, reason = "pyo3 extracts arguments by value")]

mod bench;
mod durable_map;
mod duration;
mod error;
mod key;
mod log;
mod object;
mod part;
mod pds;
mod read_only;
mod records;
mod repair;
mod runtime;
mod schema;

use pyo3::prelude::*;

/// The extension's Rust allocations go to mimalloc rather than glibc's
/// malloc, as in the `varve` binary (docs/architecture.md, "The allocator"):
/// Python's own objects keep Python's allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The extension module; `varve/__init__.py` re-exports its public names.
#[pymodule]
fn _varve(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(log::open, m)?)?;
    log::check_open_defaults(&m.getattr("open")?)?;
    m.add_function(wrap_pyfunction!(bench::bench_rust, m)?)?;
    m.add_class::<log::Store>()?;
    m.add_class::<log::Namespace>()?;
    m.add_class::<log::Log>()?;
    m.add_class::<records::Scan>()?;
    m.add_class::<records::Watch>()?;
    m.add_class::<log::LogInfo>()?;
    m.add_class::<pds::SortedSet>()?;
    m.add_class::<pds::SortedMap>()?;
    m.add_class::<pds::List>()?;
    m.add_class::<part::PersistentMap>()?;
    m.add_class::<part::PartIterator>()?;
    m.add_class::<part::DeleteType>()?;
    m.add("DELETE", part::DeleteType)?;
    m.add_class::<durable_map::DurableMap>()?;
    m.add_class::<object::ObjectStore>()?;
    m.add_class::<object::PyVersion>()?;
    m.add_class::<object::ObjectWatch>()?;
    m.add_function(wrap_pyfunction!(object::check_proof, m)?)?;
    m.add_class::<schema::Schemas>()?;
    m.add_class::<schema::TypedLog>()?;
    m.add_class::<schema::TypedScan>()?;
    m.add_class::<repair::RepairPlan>()?;
    m.add_class::<runtime::Runtime>()?;
    m.add_class::<runtime::HandlerContext>()?;
    m.add_class::<runtime::HandlerMap>()?;
    m.add_class::<runtime::PyMapReader>()?;
    m.add_class::<runtime::Event>()?;
    m.add_function(wrap_pyfunction!(runtime::to_dot, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::to_otel, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::stop_all_runtimes, m)?)?;
    m.add("KEY_INT_MIN", i64::MIN)?;
    m.add("KEY_INT_MAX", u64::MAX)?;
    Ok(())
}
