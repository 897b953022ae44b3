//! Retry decisions: what happens after a handler fails. Pure functions of
//! the policy and the failure count, so they are tested alone; the worker
//! (`worker.rs`) and start-up recovery (`recovery.rs`) act on the answers.

use std::time::Duration;

/// Most attempts a retry policy may ask for.
pub const ATTEMPTS_MAX: u32 = 1000;

/// Retries and limits of one handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Failed runs before the record goes to the dead-letter log (≥ 1).
    pub attempts: u32,
    /// Pause before the second attempt; doubles each attempt after.
    pub backoff: Duration,
    /// Longest pause between attempts.
    pub backoff_max: Duration,
    /// External commands are killed after this long (`None`: never). Rust
    /// handlers cannot be interrupted safely; for them the timeout is not enforced.
    pub timeout: Option<Duration>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 3,
            backoff: Duration::from_millis(100),
            backoff_max: Duration::from_secs(10),
            timeout: Some(Duration::from_secs(30)),
        }
    }
}

/// What to do with a trigger after its handler failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterFailure {
    /// Run it again after this pause.
    RetryAfter(Duration),
    /// The budget is spent: write the dead letter.
    DeadLetter,
}

impl RetryPolicy {
    /// The pause after `failures` failed attempts (exponential, capped).
    #[must_use]
    pub fn backoff_after(&self, failures: u32) -> Duration {
        let factor = 1u32.checked_shl(failures.saturating_sub(1)).unwrap_or(u32::MAX);
        self.backoff.saturating_mul(factor).min(self.backoff_max)
    }

    /// Whether `failures` FAILED runs use up the budget. Runs cut short by a
    /// stop or a crash are not failures and are not counted.
    #[must_use]
    pub fn is_exhausted(&self, failures: u32) -> bool {
        failures >= self.attempts
    }

    /// The decision after the `failures`-th failure of a trigger.
    #[must_use]
    pub fn after_failure(&self, failures: u32) -> AfterFailure {
        if self.is_exhausted(failures) {
            AfterFailure::DeadLetter
        } else {
            AfterFailure::RetryAfter(self.backoff_after(failures))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(attempts: u32) -> RetryPolicy {
        RetryPolicy {
            attempts,
            backoff: Duration::from_millis(100),
            backoff_max: Duration::from_secs(1),
            timeout: None,
        }
    }

    #[test]
    fn backoff_doubles_from_the_first_failure_and_is_capped() {
        let p = policy(10);
        let pauses: Vec<u128> = (1..=6).map(|f| p.backoff_after(f).as_millis()).collect();
        assert_eq!(pauses, vec![100, 200, 400, 800, 1000, 1000]);
        // 0 failures (never asked by the runtime) is the base pause, not a panic.
        assert_eq!(p.backoff_after(0), Duration::from_millis(100));
        // Shifts past 31 saturate instead of overflowing.
        assert_eq!(p.backoff_after(u32::MAX), Duration::from_secs(1));
    }

    #[test]
    fn the_last_allowed_failure_dead_letters() {
        let p = policy(3);
        assert_eq!(p.after_failure(1), AfterFailure::RetryAfter(Duration::from_millis(100)));
        assert_eq!(p.after_failure(2), AfterFailure::RetryAfter(Duration::from_millis(200)));
        assert_eq!(p.after_failure(3), AfterFailure::DeadLetter);
        assert_eq!(p.after_failure(4), AfterFailure::DeadLetter, "recovery may find more failures than the budget");
        assert!(!p.is_exhausted(2));
        assert!(p.is_exhausted(3));
        // One attempt: the first failure is the last.
        assert_eq!(policy(1).after_failure(1), AfterFailure::DeadLetter);
    }

    #[test]
    fn a_huge_base_pause_saturates() {
        let p = RetryPolicy { backoff: Duration::MAX, backoff_max: Duration::MAX, ..policy(5) };
        assert_eq!(p.backoff_after(4), Duration::MAX);
    }
}
