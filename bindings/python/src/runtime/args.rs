//! Python arguments of the runtime's methods turned into Rust values:
//! `log=` names, retry policies, append batches (durations: `duration.rs`).

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyString;
use varve_runtime::{RetryPolicy, ATTEMPTS_MAX};

use crate::duration::{seconds, seconds_or_none};
use crate::error::{invalid_argument, Result};
use crate::log::{data, Data};

/// Log names from `log=`: None, one name, or a sequence of names.
pub(super) fn log_names(log: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<String>> {
    match log {
        None => Ok(Vec::new()),
        Some(one) if one.is_instance_of::<PyString>() => Ok(vec![one.extract()?]),
        Some(many) => many.try_iter()?.map(|name| name?.extract::<String>()).collect(),
    }
}

/// Handler `name`'s retry policy; `attempts` is checked here, where it is
/// passed, and not only when the runtime starts.
pub(super) fn retry_policy(
    name: &str,
    attempts: u32,
    backoff: f64,
    backoff_max: f64,
    timeout: Option<f64>,
) -> Result<RetryPolicy> {
    if !(1..=ATTEMPTS_MAX).contains(&attempts) {
        return Err(invalid_argument(format!(
            "handler {name:?}: attempts (how many runs a record gets before it goes to _dead_letters) is between 1 \
             and {ATTEMPTS_MAX}, not {attempts}"
        )));
    }
    Ok(RetryPolicy {
        attempts,
        backoff: seconds("backoff", backoff)?,
        backoff_max: seconds("backoff_max", backoff_max)?,
        timeout: seconds_or_none("timeout", timeout)?,
    })
}

/// Records of an append batch: a list of ``(log, data)`` pairs.
fn batch_pairs<'py>(batch: &Bound<'py, PyAny>) -> PyResult<(Vec<String>, Vec<Bound<'py, PyAny>>)> {
    let mut names = Vec::new();
    let mut records = Vec::new();
    for pair in batch.try_iter()? {
        let (log, record): (String, Bound<'py, PyAny>) = pair?.extract().map_err(|_| {
            PyTypeError::new_err(
                "an append batch is a list of (log, record) pairs, e.g. [(\"a\", b\"1\"), (\"b\", b\"2\")]",
            )
        })?;
        names.push(log);
        records.push(record);
    }
    Ok((names, records))
}

pub(super) fn with_batch<R>(batch: &Bound<'_, PyAny>, f: impl FnOnce(&[(&str, &[u8])]) -> PyResult<R>) -> PyResult<R> {
    let (names, records) = batch_pairs(batch)?;
    let datas = records.iter().map(|r| data(r)).collect::<PyResult<Vec<Data<'_>>>>()?;
    let entries: Vec<(&str, &[u8])> = names.iter().map(String::as_str).zip(datas.iter().map(Data::as_slice)).collect();
    f(&entries)
}
