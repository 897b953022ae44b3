//! A deterministic synthetic data set shaped like the dissertation's
//! (Figure 4.12): readings every 5 minutes over a few days, an environment
//! temperature with a daily cycle, weather drift and noise, and per-device CPU
//! temperatures that follow it with their own offset, gain and load noise.
//! Devices report a few seconds apart, as real ones do, so the application has
//! to align timestamps.
//!
//! The generator uses its own `SplitMix64` so a seed gives the same data on
//! every platform and every version of every dependency.

use serde::{Deserialize, Serialize};

/// Seconds between two readings of one device.
pub const INTERVAL_SECS: i64 = 300;
/// 2021-01-01T00:00:00Z, the month the dissertation's data was collected.
pub const START_UNIX_SECS: i64 = 1_609_459_200;
/// How late (at most) a device's reading is after its 5-minute mark.
pub const REPORT_JITTER_SECS_MAX: i64 = 20;

/// One reading as published to `cpu_raw.<i>`, `env_raw` and the smoothed
/// topics: a Unix timestamp in seconds and a temperature in °C. Encoded as
/// compact JSON (`{"t":1609459200,"v":21.5}`) so handlers written in any
/// language can read it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    /// When the reading was taken, in seconds since the Unix epoch (`t` in JSON).
    #[serde(rename = "t")]
    pub unix_secs: i64,
    /// The temperature, in °C (`v` in JSON).
    #[serde(rename = "v")]
    pub value: f64,
}

impl Reading {
    /// The record as published: compact JSON.
    #[must_use]
    pub fn to_json(&self) -> Vec<u8> {
        // A struct of an i64 and an f64 always serializes; a NaN would become
        // `null`, which `from_json` then rejects with a clear error.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Parse a published record; the error says what was expected.
    pub fn from_json(bytes: &[u8]) -> Result<Reading, String> {
        serde_json::from_slice(bytes)
            .map_err(|e| format!("not a reading ({e}); expected JSON like {{\"t\":1609459200,\"v\":21.5}}"))
    }
}

/// The generated data set: one series per device and the environment series,
/// all of the same length (one entry per 5-minute step).
#[derive(Clone, Debug)]
pub struct DataSet {
    /// Per device, its CPU readings in time order (published to `cpu_raw.<i>`), each up to
    /// [`REPORT_JITTER_SECS_MAX`] after its 5-minute mark.
    pub devices: Vec<Vec<Reading>>,
    /// The environment readings in time order (published to `env_raw`), on the 5-minute marks.
    pub environment: Vec<Reading>,
}

/// Builder for a [`DataSet`]. Defaults: 4 devices (as in the dissertation's
/// deployment), 3 days.
#[derive(Clone, Debug)]
pub struct Generator {
    seed: u64,
    devices: usize,
    days: u32,
}

impl Generator {
    /// A generator seeded with `seed`, for 4 devices and 3 days.
    #[must_use]
    pub fn new(seed: u64) -> Generator {
        Generator { seed, devices: 4, days: 3 }
    }

    /// Generate this many device series.
    #[must_use]
    pub fn devices(mut self, devices: usize) -> Generator {
        self.devices = devices;
        self
    }

    /// Generate this many days of readings.
    #[must_use]
    pub fn days(mut self, days: u32) -> Generator {
        self.days = days;
        self
    }

    /// Readings per series: one per [`INTERVAL_SECS`] over the days (288 a day).
    #[must_use]
    pub fn steps(&self) -> usize {
        usize::try_from(i64::from(self.days) * 86_400 / INTERVAL_SECS).unwrap_or(0)
    }

    /// The data set: the same for the same seed, devices and days.
    #[must_use]
    pub fn generate(&self) -> DataSet {
        let mut rng = SplitMix64(self.seed);
        let steps = self.steps();
        // Per-device physics: a CPU sits at an offset above ambient and follows
        // it with a gain below 1 (the case insulates it a little).
        let profiles: Vec<(f64, f64)> =
            (0..self.devices).map(|_| (rng.uniform(18.0, 26.0), rng.uniform(0.6, 0.9))).collect();
        let mut weather_drift = 0.0_f64;
        let mut environment = Vec::with_capacity(steps);
        let mut devices = vec![Vec::with_capacity(steps); self.devices];
        for step in 0..steps {
            let mark = START_UNIX_SECS + i64::try_from(step).unwrap_or(i64::MAX) * INTERVAL_SECS;
            #[expect(clippy::cast_precision_loss, reason = "seconds within a few days are exact in f64")]
            let hours = (mark - START_UNIX_SECS) as f64 / 3600.0;
            // Coldest near 05:00, warmest near 15:00; a slow random walk for
            // the weather, bounded so days stay plausible.
            weather_drift = (weather_drift + rng.normal(0.0, 0.05)).clamp(-4.0, 4.0);
            let ambient = 8.0 + 6.0 * ((hours - 9.0) / 24.0 * std::f64::consts::TAU).sin() + weather_drift;
            environment.push(Reading { unix_secs: mark, value: round2(ambient + rng.normal(0.0, 0.2)) });
            for (series, (offset, gain)) in devices.iter_mut().zip(&profiles) {
                let jitter = rng.below(REPORT_JITTER_SECS_MAX + 1);
                let load_noise = rng.normal(0.0, 0.8);
                series.push(Reading { unix_secs: mark + jitter, value: round2(offset + gain * ambient + load_noise) });
            }
        }
        DataSet { devices, environment }
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Sebastiano Vigna's `SplitMix64`: tiny, fast, and fixed forever.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1) with 53 bits of precision.
    fn unit(&mut self) -> f64 {
        #[expect(clippy::cast_precision_loss, reason = "53-bit value, exact in f64")]
        let mantissa = (self.next_u64() >> 11) as f64;
        mantissa / 9_007_199_254_740_992.0 // 2^53
    }

    fn uniform(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.unit()
    }

    fn below(&mut self, bound: i64) -> i64 {
        i64::try_from(self.next_u64() % bound.unsigned_abs()).unwrap_or(0)
    }

    /// Box–Muller.
    fn normal(&mut self, mean: f64, std_dev: f64) -> f64 {
        let u1 = self.unit().max(f64::MIN_POSITIVE);
        let u2 = self.unit();
        mean + std_dev * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_data_other_seed_other_data() {
        let a = Generator::new(1).days(1).generate();
        let b = Generator::new(1).days(1).generate();
        let c = Generator::new(2).days(1).generate();
        assert_eq!(a.environment, b.environment);
        assert_eq!(a.devices, b.devices);
        assert_ne!(a.environment, c.environment);
    }

    #[test]
    fn shape_daily_cycle_and_jitter() {
        let data = Generator::new(3).devices(4).days(2).generate();
        assert_eq!(data.devices.len(), 4);
        assert_eq!(data.environment.len(), 576);
        for series in &data.devices {
            assert_eq!(series.len(), 576);
            for (step, reading) in series.iter().enumerate() {
                let mark = data.environment[step].unix_secs;
                assert!((0..=REPORT_JITTER_SECS_MAX).contains(&(reading.unix_secs - mark)));
            }
        }
        // Afternoons are warmer than early mornings, every day.
        for day in 0..2 {
            let at = |hour: usize| data.environment[day * 288 + hour * 12].value;
            assert!(at(15) > at(5) + 6.0, "day {day}: 15:00 {} vs 05:00 {}", at(15), at(5));
        }
    }

    #[test]
    fn reading_json_round_trip_and_errors() {
        let r = Reading { unix_secs: START_UNIX_SECS, value: 21.5 };
        assert_eq!(r.to_json(), br#"{"t":1609459200,"v":21.5}"#);
        assert_eq!(Reading::from_json(&r.to_json()), Ok(r));
        let err = Reading::from_json(b"21.5 degrees").expect_err("not JSON");
        assert!(err.contains("not a reading"), "{err}");
    }
}
