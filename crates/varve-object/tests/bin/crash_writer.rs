//! Crash-loop child: opens object store `crash` in the journal namespace
//! `DIR/objects`, prints `ready`, then stores one version per step — step n
//! is the number of versions stored + 1, so a restarted child goes on where
//! the store is — and prints `ack STEP ID` after each put or merge returns,
//! until it is killed. Every 5th step merges two heads if there are two.
//! Usage: `crash_writer DIR SEED`.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use varve_log::{JournalOptions, JournalStore, Namespace, SyncPolicy};
use varve_object::{ObjectOptions, ObjectStore, Storage};

#[path = "workload.rs"]
mod workload;
use workload::{base_choice, value_for};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, seed] = args.as_slice() else {
        eprintln!("usage: crash_writer DIR SEED");
        std::process::exit(2);
    };
    let seed: u64 = seed.parse().expect("seed is a number");
    let options = JournalOptions { sync: SyncPolicy::Group(Duration::from_millis(5)), ..JournalOptions::default() };
    let store = JournalStore::open(dir, options).expect("open store");
    let ns: Arc<dyn Namespace> = Arc::new(store.journal_namespace("objects").expect("namespace"));
    let objects = ObjectStore::open_with(
        ns,
        "crash",
        ObjectOptions { storage: Storage::Delta, chain_max: 4, ..ObjectOptions::default() },
    )
    .expect("open objects");
    let stdout = std::io::stdout();
    let say = |line: &str| {
        let mut out = stdout.lock();
        writeln!(out, "{line}").expect("stdout");
        out.flush().expect("stdout");
    };
    say("ready");
    loop {
        let versions = objects.versions("doc").expect("versions");
        let step = versions.len() as u64 + 1;
        let value = value_for(seed, step);
        let heads = objects.heads("doc").expect("heads");
        let version = if step.is_multiple_of(5) && heads.len() >= 2 {
            objects.merge("doc", &heads[0].id, &heads[1].id, &value).expect("merge")
        } else {
            let base = match base_choice(step, versions.len()) {
                Some(i) => Some(versions[i].id),
                None => versions.last().map(|v| v.id),
            };
            objects.put("doc", base.as_ref(), &value).expect("put")
        };
        say(&format!("ack {step} {}", version.id));
    }
}
