//! The check's at-least-once rule, exercised in-process: a `smooth` that
//! publishes and then fails (once, for one reading) is retried by the runtime
//! and publishes again — a duplicate made by one trigger with two FIRINGs,
//! which `check` must accept and count, while every other property holds.

use std::time::Duration;

use varve_example_temperature::app::{self, Params};
use varve_example_temperature::check;
use varve_example_temperature::data::Reading;
use varve_runtime::Builtins;

/// Run a day of two devices with `smooth` for `cpu_raw.0:40` replaced by
/// `faulty` (given the smoothed reading to publish); returns the check.
fn run_with_faulty_smooth(
    faulty: fn(&mut varve_runtime::HandlerContext<'_>, &[u8]) -> varve_runtime::HandlerResult,
) -> check::CheckReport {
    let dir = tempfile::tempdir().expect("temp dir");
    let params = Params { seed: 5, devices: 2, days: 1, faults: varve_example_temperature::fault::Faults::default() };
    params.store_or_match(dir.path()).expect("params");
    let devices = params.devices;
    let builtins = Builtins::new()
        .with("smooth", move |ctx| {
            if ctx.log() != "cpu_raw.0" || ctx.seq() != 40 {
                return app::handle_smooth(ctx);
            }
            let reading = Reading::from_json(ctx.record())?;
            let smoothed = app::smoothed_for(ctx, &reading)?.to_json();
            faulty(ctx, &smoothed)
        })
        .with("train", move |ctx| app::handle_train(ctx, devices))
        .with("predict", move |ctx| app::handle_predict(ctx, devices));
    let runtime = app::start_with(dir.path(), devices, &builtins).expect("start");
    app::publish_missing(&runtime, &params.generate()).expect("publish");
    assert!(runtime.wait_idle(Duration::from_secs(60)));
    runtime.stop(Duration::from_secs(5));

    let report = check::check(dir.path()).expect("check");
    println!("{report}");
    report
}

#[test]
fn a_duplicate_made_by_a_retried_trigger_is_accepted_and_counted() {
    // No guard: each attempt publishes; the first then fails.
    let report = run_with_faulty_smooth(|ctx, smoothed| {
        ctx.publish("cpu_smooth.0", smoothed)?;
        if ctx.attempt() == 1 {
            return Err("injected: fails after publishing".into());
        }
        Ok(())
    });
    assert!(report.is_consistent(), "{report}");
    assert_eq!(report.failures, 1, "{report}");
    assert_eq!(report.reruns, 1, "{report}");
    assert_eq!(report.duplicates, 1, "{report}");
}

#[test]
fn a_duplicate_without_a_rerun_is_reported() {
    // One run, two publishes: not at-least-once delivery, a bug.
    let report = run_with_faulty_smooth(|ctx, smoothed| {
        ctx.publish("cpu_smooth.0", smoothed)?;
        ctx.publish("cpu_smooth.0", smoothed)?;
        Ok(())
    });
    assert!(!report.is_consistent(), "{report}");
    assert_eq!(report.reruns, 0);
    assert!(report.problems.iter().any(|p| p.contains("not explained by one re-run trigger")), "{report}");
}
