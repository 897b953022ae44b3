#![allow(clippy::doc_markdown, reason = "the paper's terms and file names in prose")]
//! Crash-loop child: opens structure `STRUCTURE` (bst, balanced, list) in
//! the journal namespace `DIR/crash` — completing any update a previous child
//! was killed in — then applies the deterministic op of each next version
//! (`value_for` in `crash_ops.rs`). Prints `ready` once the structure is
//! open, then `ack <version>` after each update commits, until killed (the
//! protocol of `varve_testkit::crash`). Usage: `crash_writer DIR SEED STRUCTURE`.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use varve_log::{JournalOptions, JournalStore, Namespace, SyncPolicy};
use varve_pds::{Options, SortedSet, Structure, VersionedList};

#[path = "crash_ops.rs"]
mod ops;
use ops::value_for;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, seed, structure] = args.as_slice() else {
        eprintln!("usage: crash_writer DIR SEED STRUCTURE");
        std::process::exit(2);
    };
    let seed: u64 = seed.parse().expect("seed is a number");
    let structure: Structure = structure.parse().expect("structure");
    let options = JournalOptions { sync: SyncPolicy::Group(Duration::from_millis(5)), ..JournalOptions::default() };
    let store = JournalStore::open(dir, options).expect("open store");
    let ns: Arc<dyn Namespace> = Arc::new(store.journal_namespace("crash").expect("namespace"));
    let name = format!("crash-{structure}");
    let opts = Options { extra: 2, keep: None, ..Options::default() };
    let stdout = std::io::stdout();
    let say = |line: &str| {
        let mut out = stdout.lock();
        writeln!(out, "{line}").expect("stdout");
        out.flush().expect("stdout");
    };
    let ack = |v: u64| say(&format!("ack {v}"));
    if structure == Structure::List {
        let mut list = VersionedList::<u64>::open(ns, &name, opts).expect("open list");
        let mut items: Vec<u64> = list.iter(None).expect("iter").collect();
        say("ready");
        loop {
            let value = value_for(seed, list.latest().expect("latest") + 1);
            let v = if let Some(at) = items.iter().position(|&x| x == value) {
                items.remove(at);
                list.remove(&value)
            } else {
                items.push(value);
                list.push_back(&value)
            }
            .expect("update");
            ack(v);
        }
    } else {
        let mut set = SortedSet::<u64>::open_as(ns, &name, structure, opts).expect("open set");
        say("ready");
        loop {
            let value = value_for(seed, set.latest().expect("latest") + 1);
            let v = if set.contains(&value, None).expect("contains") { set.delete(&value) } else { set.insert(&value) }
                .expect("update");
            ack(v);
        }
    }
}
