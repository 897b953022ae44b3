//! Crash-loop child: opens a journal namespace (recovering from the last
//! kill), prints `ready`, then appends random batches with
//! `SyncPolicy::Always` and prints `ack <batch> <log>:<seq>…` after each one
//! is acknowledged, until it is killed (the protocol of
//! `varve_testkit::crash`). Usage: `crash_writer DIR SEED`.
//!
//! Every record says which batch it belongs to and what that batch held
//! (`b=<id>;n=<count>;i=<index>;logs=<l0,l1,…>;` then filler), so the test can
//! check atomicity and density from the data alone.

#![allow(clippy::format_push_string, clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "a test child")]

use std::io::Write;

use rand::{Rng, SeedableRng};
use varve_log::{JournalOptions, JournalStore, LogConfig, Namespace, OnFull};

/// The unbounded logs; every batch appends to at least one, so batch ids
/// stay checkable. `tests/crash_loop.rs` names the same logs.
pub const UNBOUNDED: [&str; 3] = ["u0", "u1", "u2"];
/// A `keep 40, Overwrite` log some batches append to, so trimming runs
/// across kills. `tests/crash_loop.rs` names the same log.
pub const OVERWRITE: &str = "ow";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, seed] = args.as_slice() else {
        eprintln!("usage: crash_writer DIR SEED");
        std::process::exit(2);
    };
    let seed: u64 = seed.parse().expect("seed is a number");
    // Small segments and frequent index checkpoints: kills land in rolls,
    // checkpoint saves, and opens that load a checkpoint and replay after it.
    let options =
        JournalOptions { segment_bytes_max: 32 << 10, checkpoint_bytes_min: 8 << 10, ..JournalOptions::default() };
    let ns = JournalStore::open(dir, options).expect("open store").journal_namespace("crash").expect("open namespace");
    for log in UNBOUNDED {
        ns.create_log(log, LogConfig::unbounded()).expect("create");
    }
    ns.create_log(OVERWRITE, LogConfig::keep(40, OnFull::Overwrite)).expect("create");
    let mut next_batch = 0;
    for log in UNBOUNDED {
        let latest = ns.latest(log).expect("latest");
        if latest > 0 {
            let value = ns.get(log, latest).expect("get");
            let text = String::from_utf8_lossy(&value);
            let batch: u64 =
                text.strip_prefix("b=").and_then(|t| t.split(';').next()).expect("batch id").parse().expect("number");
            next_batch = next_batch.max(batch + 1);
        }
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let stdout = std::io::stdout();
    {
        let mut out = stdout.lock();
        writeln!(out, "ready").expect("stdout");
        out.flush().expect("stdout");
    }
    loop {
        let count = rng.gen_range(1..=4);
        // Every batch touches an unbounded log, so batch ids stay checkable.
        let mut logs = vec![UNBOUNDED[rng.gen_range(0..3)]];
        for _ in 1..count {
            logs.push(if rng.gen_bool(0.3) { OVERWRITE } else { UNBOUNDED[rng.gen_range(0..3)] });
        }
        let names = logs.join(",");
        let values: Vec<Vec<u8>> = (0..count)
            .map(|i| {
                let mut value = format!("b={next_batch};n={count};i={i};logs={names};").into_bytes();
                let filler = rng.gen_range(0..1500);
                value.extend((0..filler).map(|j| (j % 251) as u8));
                value
            })
            .collect();
        let batch: Vec<(&str, &[u8])> = logs.iter().zip(&values).map(|(l, v)| (*l, v.as_slice())).collect();
        let seqs = ns.append_batch(&batch).expect("append");
        let mut line = format!("ack {next_batch}");
        for (log, seq) in logs.iter().zip(seqs) {
            line.push_str(&format!(" {log}:{seq}"));
        }
        let mut out = stdout.lock();
        writeln!(out, "{line}").expect("stdout");
        out.flush().expect("stdout");
        next_batch += 1;
    }
}
