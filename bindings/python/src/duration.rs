//! Durations that Python passes in seconds (`float`): the one accepted
//! range, and messages that say what is wrong with a value outside it.
//!
//! Every timeout and backoff of the package (`Watch.next`, `Runtime.wait_idle`,
//! `Runtime.stop`, a handler's `backoff`, `backoff_max` and command `timeout`)
//! goes through here; `group_delay` of `varve.open` has its own, narrower
//! range (`log.rs`). docs/python.md states the range.

use std::time::Duration;

use crate::error::{invalid_argument, Error};

/// The longest duration accepted, in seconds (about 31.7 years). Longer
/// waits mean "forever", which callers say with None where a call allows it.
/// The bound keeps what is computed from a duration far from overflow: a
/// deadline `now + d`, a backoff doubled, a count of nanoseconds in a `u64`
/// (at most about 1.8e19).
pub(crate) const SECONDS_MAX: f64 = 1e9;
const _: () = assert!(SECONDS_MAX * 2.0 * 1e9 < 1.8e19, "twice SECONDS_MAX in nanoseconds fits in a u64");

/// `value` seconds as a [`Duration`]: finite, at least 0, at most
/// [`SECONDS_MAX`]; `name` is the Python parameter, for the message.
pub(crate) fn seconds(name: &str, value: f64) -> Result<Duration, Error> {
    checked(name, value, "")
}

/// As [`seconds`], for a parameter where None means no limit (the message
/// for a value too large says so).
pub(crate) fn seconds_or_none(name: &str, value: Option<f64>) -> Result<Option<Duration>, Error> {
    value.map(|v| checked(name, v, "; pass None for no limit")).transpose()
}

fn checked(name: &str, value: f64, none_hint: &str) -> Result<Duration, Error> {
    if value.is_nan() {
        return Err(invalid_argument(format!("{name} is a number of seconds, not NaN")));
    }
    if value < 0.0 {
        return Err(invalid_argument(format!("{name} is in seconds, at least 0, not {value:?}")));
    }
    if value > SECONDS_MAX {
        return Err(invalid_argument(format!(
            "{name} is at most {SECONDS_MAX} seconds (about 31 years), not {value:?}{none_hint}"
        )));
    }
    Ok(Duration::from_secs_f64(value))
}
