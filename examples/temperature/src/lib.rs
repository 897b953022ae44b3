//! The temperature application of the dissertation (`seeds/004_…`, Canal
//! §4.3.5 and Sans-Souci §7.4.1): devices publish their CPU temperature, a
//! reference sensor publishes the environment temperature, and three
//! functions turn those into a "virtual thermometer":
//!
//! - `smooth` averages a device's readings of the last hour and publishes the
//!   mean at the reading's timestamp aligned to the 5-minute mark;
//! - `train` fits a linear regression of the environment temperature on the
//!   CPU temperatures when the latest model is older than the retrain period;
//! - `predict` publishes a prediction once every device has a smoothed
//!   reading for a timestamp.
//!
//! [`data`] and [`model`] hold the domain logic only — the data generator,
//! the record formats and the numerics — free of I/O, so they are tested on
//! their own and the handlers that call them stay thin. [`app`] holds the
//! handlers and the manifest (`app.toml`), [`check`] the consistency check
//! (recompute every output from the inputs; delivery from the event log),
//! [`graph`] the causal graph of one prediction, [`fault`] and [`repair`]
//! the repair half (faults injected into what is published, then corrected
//! by replay). The `temperature` binary runs it all: `temperature run --data
//! DIR`, `check`, `graph`, `repair`, `bench-repair`.
//!
//! ```
//! use varve_example_temperature::{data::Generator, model::Regression};
//! let readings = Generator::new(7).devices(2).days(1).generate();
//! assert_eq!(readings.environment.len(), 288);
//! let rows: Vec<(Vec<f64>, f64)> = (0..288)
//!     .map(|i| (readings.devices.iter().map(|d| d[i].value).collect(), readings.environment[i].value))
//!     .collect();
//! let model = Regression::fit(&rows).expect("enough samples");
//! assert!((model.predict(&rows[0].0) - rows[0].1).abs() < 3.0);
//! ```

pub mod app;
pub mod check;
pub mod data;
pub mod fault;
pub mod graph;
pub mod model;
pub mod repair;

/// Print one line to stdout. A closed stdout (`… | head`) ends the program
/// quietly, as Unix tools do, instead of panicking as `println!` does; any
/// other failure to write is reported on stderr and ends it with status 1.
pub fn say(line: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{line}").and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        let _ = writeln!(std::io::stderr(), "error: writing to stdout: {e}");
        std::process::exit(1);
    }
}

/// `println!` through [`say`].
#[macro_export]
macro_rules! say {
    () => {
        $crate::say(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::say(format_args!($($arg)*))
    };
}
