//! Crash-loop child of `tests/durable_crash.rs`: opens the durable map
//! `crash` in the journal namespace `DIR/crash` and prints `ready`, then
//! applies batch after batch (see `durable_crash_ops.rs`), printing
//! `ack <id>` once each is acknowledged, and checkpoints every 10 batches —
//! every other time on a background thread while 5 more batches are applied
//! — printing `checkpoint begin` / `checkpoint commit`, until it is killed
//! (the protocol of `varve_testkit::crash`).
//! Usage: `durable_crash_writer DIR SEED`.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use varve_log::{JournalOptions, JournalStore, Namespace, SyncPolicy};
use varve_part::durable::{DurableMap, DurableOptions};

#[path = "durable_crash_ops.rs"]
mod ops;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, seed] = args.as_slice() else {
        eprintln!("usage: durable_crash_writer DIR SEED");
        std::process::exit(2);
    };
    let seed: u64 = seed.parse().expect("seed is a number");
    let options = JournalOptions { sync: SyncPolicy::Group(Duration::from_millis(5)), ..JournalOptions::default() };
    let store = JournalStore::open(dir, options).expect("open store");
    let ns: Arc<dyn Namespace> = Arc::new(store.journal_namespace("crash").expect("namespace"));
    let mut map =
        DurableMap::<Vec<u8>>::open(ns, "crash", DurableOptions { depth_threshold: 2, full_every: 3 }).expect("open");
    let mut next = map.get(ops::LAST_BATCH_KEY).map_or(0, |v| u64::from_le_bytes(v[..8].try_into().expect("id"))) + 1;
    let stdout = std::io::stdout();
    let say = |line: &str| {
        let mut out = stdout.lock();
        writeln!(out, "{line}").expect("stdout");
        out.flush().expect("stdout");
    };
    say("ready");
    let apply = |map: &mut DurableMap<Vec<u8>>, next: &mut u64| {
        map.apply(ops::batch_for(seed, *next)).expect("apply");
        say(&format!("ack {next}"));
        *next += 1;
    };
    loop {
        for _ in 0..10 {
            apply(&mut map, &mut next);
        }
        let job = map.begin_checkpoint().expect("begin checkpoint");
        say("checkpoint begin");
        let written = if next % 20 < 10 {
            let writer = std::thread::spawn(move || job.write());
            for _ in 0..5 {
                apply(&mut map, &mut next);
            }
            writer.join().expect("writer thread")
        } else {
            job.write()
        }
        .expect("write checkpoint");
        map.commit_checkpoint(written).expect("commit checkpoint");
        say("checkpoint commit");
    }
}
