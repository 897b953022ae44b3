//! The kill loop (issue 6, "Correctness under faults"): run `temperature run`
//! as a real process, SIGKILL it at random moments, restart it, at least
//! [`KILLS_MIN`] times; then let it finish and check that no input was lost,
//! every trigger reached DONE, every output equals its recomputation, and
//! the event log shows the re-runs the kills caused.
//!
//! The journal runs with the manifest's `SyncPolicy::Group` (5 ms): a SIGKILL
//! is a process crash, the page cache survives it, so acknowledged appends
//! must all be there — exactly what this test asserts. (A power cut could
//! lose the last 5 ms; the log crate's own crash tests cover `Always`.)
//!
//! Seeded: the seed is printed; `VARVE_SEED=<seed>` replays the same kill
//! times. `VARVE_TEMPERATURE_KILLS=<n>` kills more.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use varve_example_temperature::check;

/// Kills per test run (issue 6 asks for at least 20).
const KILLS_MIN: usize = 20;
/// If no kill landed between a FIRING and its DONE after this many, give up.
const KILLS_MAX: usize = 400;
/// A kill lands at most this long after the start, at first (the run's
/// handlers take a few hundred milliseconds in the test profile, startup a few) …
const KILL_DELAY_MS_MIN: u64 = 30;
/// Kills in a row that found no new event before the delay bound doubles.
const STALLED_KILLS_MAX: usize = 3;
/// … and at most this long however slow the machine.
const KILL_DELAY_MS_MAX: u64 = 2000;

fn spawn(dir: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_temperature"))
        .args(["run", "--days", "3", "--devices", "3", "--seed", "7", "--data"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the temperature binary")
}

/// (events so far, re-runs so far) of the data directory.
fn progress(dir: &Path) -> (usize, usize) {
    // Read-only: no writer runs between a kill and the next start.
    match check::Outputs::read(dir) {
        Ok(outputs) => (outputs.events.len(), check::check_outputs(&outputs).reruns),
        Err(_) => (0, 0), // killed before the first start created everything
    }
}

#[test]
fn sigkill_loop_loses_nothing_and_reruns_are_visible() {
    let seed = varve_testkit::seed::from_env_or_clock();
    let kills_min: usize =
        std::env::var("VARVE_TEMPERATURE_KILLS").ok().and_then(|s| s.parse().ok()).unwrap_or(KILLS_MIN);
    println!("kill loop seed {seed} ({})", varve_testkit::seed::replay_hint(seed));
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let started = Instant::now();
    let mut dir = tempfile::tempdir().expect("temp dir");
    let (mut kills, mut rounds, mut reruns_done_rounds) = (0, 1, 0);
    // Kills land up to `delay_max` after a start. On a loaded machine a start
    // takes longer, so the bound doubles while kills land before any
    // progress; if a run finishes the whole data set before its kill, that
    // round is checked and a new one starts on a fresh directory with
    // shorter delays (kills after the end would only hit startup).
    let mut delay_max = KILL_DELAY_MS_MIN;
    let (mut events_before, mut stalled, mut kills_this_round) = (0, 0, 0);
    while kills < kills_min || (kills < KILLS_MAX && progress(dir.path()).1 == 0) {
        let mut child = spawn(dir.path());
        std::thread::sleep(Duration::from_millis(rng.gen_range(1..=delay_max)));
        if child.try_wait().expect("poll the child").is_some() {
            let output = child.wait_with_output().expect("collect the child");
            assert!(output.status.success(), "seed {seed}: a run failed: {}", String::from_utf8_lossy(&output.stderr));
            let report = check::check(dir.path()).expect("read the data directory");
            assert!(report.is_consistent(), "seed {seed}, round {rounds}: {report}");
            reruns_done_rounds += report.reruns;
            dir = tempfile::tempdir().expect("temp dir");
            rounds += 1;
            delay_max = (delay_max / 2).max(KILL_DELAY_MS_MIN / 4);
            (events_before, stalled, kills_this_round) = (0, 0, 0);
            continue;
        }
        child.kill().expect("SIGKILL the child");
        child.wait().expect("reap the child");
        kills += 1;
        kills_this_round += 1;
        let (events, _) = progress(dir.path());
        stalled = if events == events_before { stalled + 1 } else { 0 };
        if stalled >= STALLED_KILLS_MAX {
            delay_max = (delay_max * 2).min(KILL_DELAY_MS_MAX);
            stalled = 0;
        }
        events_before = events;
    }
    let output = spawn(dir.path()).wait_with_output().expect("final run");
    assert!(output.status.success(), "seed {seed}: the final run failed: {}", String::from_utf8_lossy(&output.stderr));
    let report = check::check(dir.path()).expect("read the data directory");
    println!(
        "{kills} kills over {rounds} round(s), {kills_this_round} in the last (kill delays up to {delay_max} ms at the end), {:.1} s\n{report}",
        started.elapsed().as_secs_f64()
    );
    assert!(report.is_consistent(), "seed {seed}: {report}");
    assert_eq!(report.raw_readings, 3 * 288 * 4, "seed {seed}: every input is there once");
    assert!(report.reruns + reruns_done_rounds >= 1, "seed {seed}: {kills} kills and no re-run in the event log");
    assert!(kills >= kills_min);
}
