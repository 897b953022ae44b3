//! Faults a run can inject into what it publishes, so the repair half of the
//! example (Sans-Souci §7.4.1, §7.2.1) has something real to repair:
//!
//! - **a device reporting °F for a day** (a firmware update that changed the
//!   unit): every reading of that device during that day is published as
//!   `v × 9/5 + 32`. The models trained on those days and every prediction
//!   made with them are wrong;
//! - **a reference-sensor outage** (the CIMIS case): for some hours the
//!   reference station's link is down and the gateway publishes an estimate —
//!   the last reading it had, held — until the link returns. The station's
//!   logger kept the real readings; they arrive late, and replace the
//!   estimates by repair.
//!
//! The generator's data set is the truth; [`Faults::apply`] turns it into
//! what was published. `temperature repair` corrects every published record
//! that differs from the truth.

use serde::{Deserialize, Serialize};

use crate::data::{DataSet, Reading, INTERVAL_SECS};

/// Five-minute steps in an hour.
#[expect(clippy::cast_possible_truncation, reason = "a constant 12")]
const STEPS_PER_HOUR: usize = (3_600 / INTERVAL_SECS) as usize;
/// Five-minute steps in a day.
const STEPS_PER_DAY: usize = 24 * STEPS_PER_HOUR;

/// Device `device` reported °F during day `day` (0-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FahrenheitDay {
    /// The device, below the run's device count.
    pub device: usize,
    /// The day, below the run's day count.
    pub day: u32,
}

/// The reference sensor was unreachable for `hours` hours from `start_hour`
/// (hours since the data set's start); the gateway held its last reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outage {
    /// First hour without a real reading (0 is the data set's first hour; the
    /// first reading itself is never lost, so an outage at hour 0 starts at
    /// the second reading).
    pub start_hour: u32,
    /// How many hours it lasted.
    pub hours: u32,
}

/// The faults of one run; none by default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Faults {
    /// A device that reported °F for a day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fahrenheit: Option<FahrenheitDay>,
    /// A reference-sensor outage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outage: Option<Outage>,
}

impl Faults {
    /// No fault at all.
    #[must_use]
    pub fn is_none(&self) -> bool {
        self.fahrenheit.is_none() && self.outage.is_none()
    }

    /// The command-line flags that inject these faults (` --fahrenheit 1:1 --outage 30:6`), empty for none.
    #[must_use]
    pub fn flags(&self) -> String {
        let fahrenheit = self.fahrenheit.map(|f| format!(" --fahrenheit {}:{}", f.device, f.day));
        let outage = self.outage.map(|o| format!(" --outage {}:{}", o.start_hour, o.hours));
        fahrenheit.unwrap_or_default() + &outage.unwrap_or_default()
    }

    /// Refuse faults outside a data set of `devices` devices over `days` days.
    pub fn validate(&self, devices: usize, days: u32) -> anyhow::Result<()> {
        if let Some(f) = self.fahrenheit {
            if f.device >= devices || f.day >= days {
                anyhow::bail!(
                    "--fahrenheit {}:{}: the data set has devices 0..{} and days 0..{}",
                    f.device,
                    f.day,
                    devices.saturating_sub(1),
                    days.saturating_sub(1)
                );
            }
        }
        if let Some(o) = self.outage {
            if o.hours == 0 || o.start_hour.saturating_add(o.hours) > days.saturating_mul(24) {
                anyhow::bail!(
                    "--outage {}:{}: an outage lasts at least an hour and ends within the data set's {} hours",
                    o.start_hour,
                    o.hours,
                    days.saturating_mul(24)
                );
            }
        }
        Ok(())
    }

    /// What was published, given the truth.
    #[must_use]
    pub fn apply(&self, truth: &DataSet) -> DataSet {
        let mut published = truth.clone();
        if let Some(f) = self.fahrenheit {
            let day = f.day as usize * STEPS_PER_DAY..(f.day as usize + 1) * STEPS_PER_DAY;
            if let Some(series) = published.devices.get_mut(f.device) {
                for reading in series.iter_mut().take(day.end).skip(day.start) {
                    reading.value = round2(reading.value * 9.0 / 5.0 + 32.0);
                }
            }
        }
        if let Some(o) = self.outage {
            let first = (o.start_hour as usize * STEPS_PER_HOUR).max(1);
            let end = (o.start_hour + o.hours) as usize * STEPS_PER_HOUR;
            let env = &mut published.environment;
            if let Some(&Reading { value: held, .. }) = env.get(first - 1) {
                for reading in env.iter_mut().take(end).skip(first) {
                    reading.value = held;
                }
            }
        }
        published
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Parse `DEVICE:DAY` (`--fahrenheit 1:1`).
pub fn parse_fahrenheit(text: &str) -> Result<FahrenheitDay, String> {
    let (device, day) = pair(text, "DEVICE:DAY, e.g. 1:1")?;
    Ok(FahrenheitDay { device: device as usize, day })
}

/// Parse `START_HOUR:HOURS` (`--outage 30:6`).
pub fn parse_outage(text: &str) -> Result<Outage, String> {
    let (start_hour, hours) = pair(text, "START_HOUR:HOURS, e.g. 30:6")?;
    Ok(Outage { start_hour, hours })
}

fn pair(text: &str, expected: &str) -> Result<(u32, u32), String> {
    let parsed = text.split_once(':').and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)));
    parsed.ok_or_else(|| format!("{text:?} is not {expected}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Generator;

    #[test]
    fn faults_change_exactly_their_readings() {
        let truth = Generator::new(7).devices(2).days(2).generate();
        let faults = Faults {
            fahrenheit: Some(FahrenheitDay { device: 1, day: 1 }),
            outage: Some(Outage { start_hour: 3, hours: 2 }),
        };
        let published = faults.apply(&truth);
        let changed = |a: &[Reading], b: &[Reading]| {
            a.iter().zip(b).enumerate().filter(|(_, (x, y))| x != y).map(|(i, _)| i).collect::<Vec<_>>()
        };
        assert!(changed(&truth.devices[0], &published.devices[0]).is_empty());
        assert_eq!(changed(&truth.devices[1], &published.devices[1]), (288..576).collect::<Vec<_>>());
        assert_eq!(
            published.devices[1][300].value.to_bits(),
            round2(truth.devices[1][300].value * 1.8 + 32.0).to_bits()
        );
        // Held: the reading before the outage, repeated; a held value equal to the truth is not a change.
        let env_changed = changed(&truth.environment, &published.environment);
        assert!(env_changed.iter().all(|i| (36..60).contains(i)), "{env_changed:?}");
        assert!(env_changed.len() > 20, "{env_changed:?}");
        assert!(published.environment[36..60]
            .iter()
            .all(|r| r.value.to_bits() == truth.environment[35].value.to_bits()));
        assert!(Faults::default().apply(&truth).environment == truth.environment);
    }

    #[test]
    fn bad_faults_are_refused_with_the_reason() {
        let f = Faults { fahrenheit: Some(FahrenheitDay { device: 2, day: 0 }), outage: None };
        assert!(f.validate(2, 3).unwrap_err().to_string().contains("devices 0..1"));
        let o = Faults { fahrenheit: None, outage: Some(Outage { start_hour: 70, hours: 6 }) };
        assert!(o.validate(2, 3).unwrap_err().to_string().contains("72 hours"));
        assert!(parse_fahrenheit("1:x").unwrap_err().contains("DEVICE:DAY"));
        assert_eq!(parse_outage("30:6"), Ok(Outage { start_hour: 30, hours: 6 }));
    }
}
