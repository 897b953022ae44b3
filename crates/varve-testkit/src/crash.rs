//! The SIGKILL crash loop: a child process writes and prints what it has
//! acknowledged; the test kills it with SIGKILL, reopens the store and checks
//! that everything acknowledged survived. This module owns the loop's
//! mechanics — the kill count, spawning, the readiness line, the kill delay,
//! the kill, the acknowledgement lines and the accounting of where the kills
//! landed — and leaves the verification to each test.
//!
//! ## The child's side
//!
//! The child is a binary of the crate under test (it cannot use this crate,
//! a dev-dependency only). It must:
//! 1. open its store — recovering from the previous kill — then print
//!    [`READY_LINE`] on its own line and flush;
//! 2. print one line per acknowledged unit of work (and any other progress
//!    lines the test wants), flushing each, *after* the acknowledgement;
//! 3. go on until it is killed: exiting on its own fails the test.
//!
//! ## Where the kills land
//!
//! Opening gets slower as the store grows (recovery reads more), so a delay
//! drawn from the spawn lands more and more kills in the open and fewer in
//! the work as a long loop goes on. So most kills are *aimed at the work*:
//! the harness waits for [`READY_LINE`], then sleeps a random delay from the
//! test's range. One kill in [`OPENING_KILLS_ONE_IN`] is *aimed at the open*
//! instead: a random moment between the spawn and [`OPENING_SPAN_PERCENT`]%
//! of the last measured open time, so recovery is interrupted too however
//! long the loop runs. [`CrashLoop::finish`] asserts that most kills aimed
//! at the work landed after the child had acknowledged some.

use std::io::{BufRead, BufReader, Read};
use std::ops::Range;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::seed;

/// The line a child prints once its store is open.
pub const READY_LINE: &str = "ready";

/// The variable that sets the number of kills (`make soak` sets 1000).
pub const KILLS_VAR: &str = "VARVE_CRASH_KILLS";

/// Longest wait for a child's [`READY_LINE`]; reaching it means the open hung.
pub const READY_WAIT_MAX: Duration = Duration::from_secs(300);

/// One kill in this many is aimed at the open rather than the work.
pub const OPENING_KILLS_ONE_IN: u32 = 3;

/// A kill aimed at the open lands up to this percentage of the last
/// measured open time after the spawn: mostly inside the open, sometimes
/// just after it.
pub const OPENING_SPAN_PERCENT: u32 = 125;

/// The signal a killed child must have died of.
const SIGKILL: i32 = 9;

/// One crash loop: its seed, its kill count, and where its kills landed.
pub struct CrashLoop {
    label: String,
    seed: u64,
    kills: usize,
    work_delay_ms: Range<u64>,
    rng: StdRng,
    /// Kills done so far.
    done: usize,
    /// Spawn to [`READY_LINE`], as last measured and at most.
    open_last: Option<Duration>,
    open_max: Duration,
    aimed_at_open: usize,
    /// Kills that landed before the child said it was ready.
    before_ready: usize,
    /// Kills that landed after the child had acknowledged work.
    after_work: usize,
    /// Of those, the kills aimed at the work (not at the open).
    work_aimed_after_work: usize,
}

/// What one killed child left behind.
pub struct Run {
    /// Which kill this was, from 0.
    pub kill: usize,
    /// The lines the child printed after [`READY_LINE`], in order: what it
    /// acknowledged before the kill.
    pub lines: Vec<String>,
    /// Whether the child had said it was ready before it was killed.
    pub ready: bool,
    /// Whether this kill was aimed at the open.
    pub aimed_at_open: bool,
    /// `<label>: seed <seed>, kill <kill>`, to start failure messages with.
    pub context: String,
}

impl CrashLoop {
    /// A loop of [`KILLS_VAR`] kills (`kills_default` when unset), seeded
    /// from [`seed::SEED_VAR`]; kills aimed at the work land
    /// `work_delay_ms` after the child's [`READY_LINE`]. Prints the kill
    /// count and the seed (shown with a failing test's output).
    #[must_use]
    pub fn new(label: &str, kills_default: usize, work_delay_ms: Range<u64>) -> CrashLoop {
        assert!(!work_delay_ms.is_empty(), "{label}: empty kill delay range {work_delay_ms:?}");
        let kills = match std::env::var(KILLS_VAR) {
            Ok(value) => value.trim().parse().unwrap_or_else(|_| panic!("{KILLS_VAR}={value:?} is not a count")),
            Err(_) => kills_default,
        };
        let seed = seed::from_env_or_clock();
        println!("{label}: {kills} kills, seed {seed} ({})", seed::replay_hint(seed));
        CrashLoop {
            label: label.to_owned(),
            seed,
            kills,
            work_delay_ms,
            rng: StdRng::seed_from_u64(seed),
            done: 0,
            open_last: None,
            open_max: Duration::ZERO,
            aimed_at_open: 0,
            before_ready: 0,
            after_work: 0,
            work_aimed_after_work: 0,
        }
    }

    /// The loop's seed: from [`seed::SEED_VAR`] when set, else from the clock; replays with
    /// `VARVE_SEED=<seed>`.
    #[must_use]
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// How many kills the loop is to make.
    #[must_use]
    pub fn kills(&self) -> usize {
        self.kills
    }

    /// The loop's seeded generator, for a test's own random choices (it
    /// also draws the kill delays, so a replay draws the same sequence).
    pub fn rng(&mut self) -> &mut StdRng {
        &mut self.rng
    }

    /// Spawn `command` (its stdin, stdout and stderr are set here), kill it
    /// with SIGKILL, and return what it printed. Panics, naming the seed, if
    /// the child exits on its own, prints anything before [`READY_LINE`], or
    /// is not ready within [`READY_WAIT_MAX`].
    pub fn kill_next(&mut self, command: &mut Command) -> Run {
        let kill = self.done;
        self.done += 1;
        let context = format!("{}: seed {}, kill {kill}", self.label, self.seed);
        // Both draws happen whatever the timing, so the sequence replays.
        let aimed_at_open = self.open_last.is_some() && self.rng.gen_ratio(1, OPENING_KILLS_ONE_IN);
        let delay = match self.open_last.filter(|_| aimed_at_open) {
            Some(open) => {
                let span_us = open.as_micros() * u128::from(OPENING_SPAN_PERCENT) / 100;
                Duration::from_micros(self.rng.gen_range(0..=u64::try_from(span_us).unwrap_or(u64::MAX)))
            }
            None => Duration::from_millis(self.rng.gen_range(self.work_delay_ms.clone())),
        };

        let spawned = Instant::now();
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{context}: spawning the child: {e}"));
        let stdout = child.stdout.take().expect("stdout is piped");
        let (line_tx, line_rx) = mpsc::channel();
        let stdout_reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line_tx.send(line).is_err() {
                    break;
                }
            }
        });
        // Read stderr as it comes, so a chatty child never blocks on a full pipe.
        let mut stderr = child.stderr.take().expect("stderr is piped");
        let stderr_reader = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });

        let mut ready = false;
        if !aimed_at_open {
            match line_rx.recv_timeout(READY_WAIT_MAX) {
                Ok(line) if line == READY_LINE => {
                    ready = true;
                    let open = spawned.elapsed();
                    self.open_last = Some(open);
                    self.open_max = self.open_max.max(open);
                }
                Ok(line) => {
                    let _ = child.kill();
                    panic!("{context}: the child printed {line:?} before {READY_LINE:?}");
                }
                Err(RecvTimeoutError::Timeout) => {
                    let _ = child.kill();
                    panic!("{context}: the child was not {READY_LINE} within {READY_WAIT_MAX:?}");
                }
                // It closed its stdout, so it has exited: reported below.
                Err(RecvTimeoutError::Disconnected) => {}
            }
        }
        std::thread::sleep(delay);
        child.kill().unwrap_or_else(|e| panic!("{context}: SIGKILL: {e}"));
        let status = child.wait().unwrap_or_else(|e| panic!("{context}: waiting for the child: {e}"));
        stdout_reader.join().expect("the stdout reader does not panic");
        let stderr = stderr_reader.join().expect("the stderr reader does not panic");
        assert!(
            status.signal() == Some(SIGKILL),
            "{context}: the child ended on its own ({status}) instead of being killed; its stderr:\n{stderr}"
        );

        let mut lines: Vec<String> = line_rx.try_iter().collect();
        if !ready && lines.first().is_some_and(|line| line == READY_LINE) {
            lines.remove(0);
            ready = true;
        }
        if let Some(line) = lines.iter().find(|line| !ready || *line == READY_LINE) {
            panic!("{context}: the child printed {line:?} out of place (first {READY_LINE:?}, then its work)");
        }
        self.aimed_at_open += usize::from(aimed_at_open);
        self.before_ready += usize::from(!ready);
        self.after_work += usize::from(ready && !lines.is_empty());
        self.work_aimed_after_work += usize::from(!aimed_at_open && ready && !lines.is_empty());
        Run { kill, lines, ready, aimed_at_open, context }
    }

    /// Print where the kills landed and assert that most kills aimed at the
    /// work landed after the child had acknowledged some (else the loop
    /// tested little but opening). Kills aimed at the open are left out:
    /// how many there are is a random draw, and a loop of 16 kills can draw
    /// more than half of them.
    pub fn finish(self) {
        let kills = self.done;
        println!(
            "{}: {kills} kills, seed {}: {} after the child acknowledged work ({} of {} aimed at the work), \
             {} before it was ready ({} aimed at the open, which took up to {} ms)",
            self.label,
            self.seed,
            self.after_work,
            self.work_aimed_after_work,
            kills - self.aimed_at_open,
            self.before_ready,
            self.aimed_at_open,
            self.open_max.as_millis()
        );
        let aimed_at_work = kills - self.aimed_at_open;
        assert!(
            self.work_aimed_after_work * 2 >= aimed_at_work,
            "{}: seed {}: most kills aimed at the work should land while the child is working, but {} of \
             {aimed_at_work} did",
            self.label,
            self.seed,
            self.work_aimed_after_work
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut command = Command::new("sh");
        command.args(["-c", script]);
        command
    }

    #[test]
    fn returns_the_lines_after_ready() {
        let mut crashes = CrashLoop::new("lines", 4, 20..30);
        for _ in 0..crashes.kills() {
            let run = crashes.kill_next(&mut sh("echo ready; echo ack 1; echo ack 2; exec sleep 60"));
            let acks = ["ack 1", "ack 2"];
            if run.aimed_at_open {
                assert!(
                    run.lines.len() <= 2 && run.lines.iter().zip(acks).all(|(l, a)| l == a),
                    "{}: {:?}",
                    run.context,
                    run.lines
                );
            } else {
                assert_eq!(run.lines, acks, "{}", run.context);
            }
        }
        crashes.finish();
    }

    #[test]
    #[should_panic(expected = "ended on its own")]
    fn a_child_that_exits_fails_the_test() {
        CrashLoop::new("exits", 1, 1..2).kill_next(&mut sh("echo ready; exit 3"));
    }

    #[test]
    #[should_panic(expected = "before \"ready\"")]
    fn work_before_ready_fails_the_test() {
        CrashLoop::new("early", 1, 1..2).kill_next(&mut sh("echo ack 1; echo ready; exec sleep 60"));
    }

    #[test]
    #[should_panic(expected = "most kills aimed at the work should land while the child is working")]
    fn kills_that_never_see_work_fail_the_loop() {
        let mut crashes = CrashLoop::new("idle", 2, 1..2);
        crashes.kill_next(&mut sh("echo ready; exec sleep 60"));
        crashes.kill_next(&mut sh("echo ready; exec sleep 60"));
        crashes.finish();
    }
}
