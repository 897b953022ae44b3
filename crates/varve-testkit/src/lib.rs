//! # varve-testkit
//!
//! Test support shared by Varve's crates; a dev-dependency only, never
//! published. Two things every randomized or crash test needs alike:
//!
//! - [`seed`]: the seed of a randomized test, taken from `VARVE_SEED` when
//!   set, so a failure printed with its seed can be replayed.
//! - [`crash`]: the SIGKILL crash loop (STYLE.md, "Test crashes with real
//!   faults"): spawn a child writer, wait for its `ready` line, kill it with
//!   SIGKILL after a random delay (one kill in three aimed at its open
//!   instead), hand the test the lines the child printed — its
//!   acknowledgements — and account for where the kills landed. Each test
//!   keeps its own verification of what survived.
//!
//! ```
//! use std::process::Command;
//! use varve_testkit::crash::CrashLoop;
//!
//! // A child that opens (says `ready`) and then acknowledges work forever.
//! let mut child = Command::new("sh");
//! child.args(["-c", "echo ready; i=0; while :; do i=$((i+1)); echo \"ack $i\"; sleep 0.001; done"]);
//! let mut crashes = CrashLoop::new("doc example", 3, 5..20);
//! for _ in 0..crashes.kills() {
//!     let run = crashes.kill_next(&mut child);
//!     // Here a test reopens the store and checks every acknowledged write.
//!     assert!(run.lines.iter().all(|line| line.starts_with("ack ")), "{}", run.context);
//! }
//! crashes.finish();
//! ```

#![allow(clippy::missing_panics_doc, reason = "test support: a panic is how it reports a failed test")]

pub mod crash;
pub mod seed;
