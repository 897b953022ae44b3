//! The statistics every benchmark here reports: medians across trials,
//! percentiles of latency samples, rates, and the load the machine was under.

use std::time::Duration;

/// The median of `values` (the upper one of an even count); 0 for none.
#[must_use]
pub fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The `p`-quantile (0 to 1) of `sorted_ns`, sorted ascending: the sample
/// at the nearest rank.
///
/// # Panics
///
/// On no samples (a benchmark bug: every figure takes some).
#[must_use]
pub fn percentile(sorted_ns: &[u64], p: f64) -> f64 {
    assert!(!sorted_ns.is_empty(), "a percentile of no samples");
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "index of a percentile"
    )]
    let index = ((sorted_ns.len() - 1) as f64 * p).round() as usize;
    #[expect(clippy::cast_precision_loss, reason = "nanoseconds to f64")]
    let value = sorted_ns[index] as f64;
    value
}

/// p50 and p99 (ns) of `samples` after dropping the first `warmup`.
#[must_use]
pub fn p50_p99(mut samples: Vec<u64>, warmup: usize) -> [f64; 2] {
    samples.drain(..warmup.min(samples.len()));
    samples.sort_unstable();
    [percentile(&samples, 0.5), percentile(&samples, 0.99)]
}

/// The median across trials of each of a pair of figures (such as p50 and p99).
#[must_use]
pub fn median_each(trials: &[[f64; 2]]) -> [f64; 2] {
    [median(trials.iter().map(|t| t[0]).collect()), median(trials.iter().map(|t| t[1]).collect())]
}

/// `count` per second of `elapsed`.
#[must_use]
#[expect(clippy::cast_precision_loss, reason = "counts to rates")]
pub fn rate(count: u64, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64()
}

/// `d` in whole nanoseconds, saturating.
#[must_use]
pub fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The machine's load average over 1, 5 and 15 minutes (`/proc/loadavg`),
/// reported beside figures taken on a shared machine; `None` where it
/// cannot be read.
#[must_use]
pub fn load_average() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = text.split_whitespace().map(|v| v.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// CPU time (user + system) process `pid` has used so far, all its
/// threads, those that ended included, from `/proc/PID/stat`; `None` where
/// it cannot be read. Its resolution is a clock tick, 10 ms (Linux's
/// `USER_HZ` is 100 on every architecture it reports to user space in).
#[must_use]
pub fn process_cpu(pid: u32) -> Option<Duration> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "PID (comm) S ppid …": the command may hold spaces and parentheses, so
    // fields are counted after the last ')'; utime and stime are fields 14
    // and 15 of the line, 12th and 13th after it.
    let (_, rest) = text.rsplit_once(')')?;
    let mut fields = rest.split_whitespace().skip(11);
    let ticks = fields.next()?.parse::<u64>().ok()? + fields.next()?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_percentiles() {
        assert!((median(vec![3.0, 1.0, 2.0]) - 2.0).abs() < f64::EPSILON);
        assert!((median(vec![4.0, 1.0, 3.0, 2.0]) - 3.0).abs() < f64::EPSILON);
        assert!(median(Vec::new()).abs() < f64::EPSILON);
        let sorted: Vec<u64> = (1..=100).collect();
        assert!((percentile(&sorted, 0.5) - 51.0).abs() < f64::EPSILON);
        assert!((percentile(&sorted, 0.99) - 99.0).abs() < f64::EPSILON);
        let [p50, p99] = p50_p99((1..=110).rev().collect(), 10);
        assert!((p50 - 51.0).abs() < f64::EPSILON && (p99 - 99.0).abs() < f64::EPSILON);
        let [a, b] = median_each(&[[1.0, 10.0], [3.0, 30.0], [2.0, 20.0]]);
        assert!((a - 2.0).abs() < f64::EPSILON && (b - 20.0).abs() < f64::EPSILON);
    }

    #[test]
    fn this_process_has_used_some_cpu() {
        // Spin until the kernel has counted a tick of CPU time for this
        // process: on a loaded machine 30 ms of wall time may bring none
        // (a tick is 10 ms), so the wait is for the condition, with a
        // deadline far beyond any scheduling delay.
        let spin = std::time::Instant::now();
        let mut used = None;
        while spin.elapsed() < Duration::from_secs(20) {
            for _ in 0..100_000 {
                std::hint::black_box(0);
            }
            used = process_cpu(std::process::id());
            if used.is_some_and(|cpu| cpu > Duration::ZERO) {
                break;
            }
        }
        assert!(used.is_some_and(|cpu| cpu > Duration::ZERO), "no CPU time counted after 20 s of spinning: {used:?}");
        assert!(process_cpu(u32::MAX).is_none());
    }
}
