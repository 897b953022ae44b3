//! Rename crash-loop child (`tests/crash_rename.rs`): opens a journal
//! namespace with `SyncPolicy::Always` (recovering from the last kill),
//! prints `ready`, then does random appends, creates, deletes, renames
//! (single, swap, and the repair's shift `x → _gen.x.N`, `_shadow.x → x`)
//! and trims until it is killed. Usage: `rename_writer DIR SEED`.
//!
//! Lines (the protocol of `varve_testkit::crash`, one flushed line each):
//! - `adopt NAME IDENT`: an empty log found on open gets a fresh identity
//!   (its records would have named it; it has none);
//! - `try OP` before each operation, `ack` once it is acknowledged, where OP
//!   is `append NAME:IDENT:SEQ…`, `create NAME IDENT`, `delete NAME`,
//!   `rename FROM>TO…` or `trim NAME BEFORE`.
//!
//! Every record is `IDENT;SEQ;` and filler: the identity of the log it was
//! appended to (kept across renames), so the test can tell which log holds
//! which records whatever their names are now.

#![allow(
    clippy::cast_possible_truncation,
    clippy::too_many_lines,
    reason = "a test child: one loop over the operations it mixes"
)]

use std::collections::BTreeMap;
use std::io::Write;

use rand::{Rng, SeedableRng};
use varve_log::{JournalOptions, JournalStore, LogConfig, Namespace, SyncPolicy};

/// The plain names logs take; `_shadow.X` and `_gen.X.N` are built from them.
const PLAIN: [&str; 4] = ["a", "b", "c", "d"];

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").expect("stdout");
    out.flush().expect("stdout");
}

fn record(ident: &str, seq: u64, rng: &mut impl Rng) -> Vec<u8> {
    let mut value = format!("{ident};{seq};").into_bytes();
    let filler: usize = rng.gen_range(0..600);
    value.extend((0..filler).map(|j| (j % 251) as u8));
    value
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, seed] = args.as_slice() else {
        eprintln!("usage: rename_writer DIR SEED");
        std::process::exit(2);
    };
    let seed: u64 = seed.parse().expect("seed is a number");
    let options = JournalOptions { segment_bytes_max: 16 << 10, sync: SyncPolicy::Always, ..JournalOptions::default() };
    let ns = JournalStore::open(dir, options).expect("open store").journal_namespace("crash").expect("open namespace");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut next_ident = 0u64;
    let mut fresh_ident = || {
        next_ident += 1;
        format!("s{seed}n{next_ident}")
    };
    // name -> (identity, latest)
    let mut logs: BTreeMap<String, (String, u64)> = BTreeMap::new();
    let mut adopted = Vec::new();
    for info in ns.list_logs().expect("list") {
        let ident = if info.latest == 0 {
            let ident = fresh_ident();
            adopted.push(format!("adopt {} {ident}", info.name));
            ident
        } else {
            let first = ns.get(&info.name, info.earliest).expect("the earliest record");
            String::from_utf8_lossy(&first).split(';').next().expect("identity").to_owned()
        };
        logs.insert(info.name, (ident, info.latest));
    }
    say("ready");
    for line in adopted {
        say(&line);
    }
    loop {
        let roll = rng.gen_range(0..100);
        let plain_free: Vec<&str> = PLAIN.iter().copied().filter(|n| !logs.contains_key(*n)).collect();
        if logs.is_empty() || (roll < 10 && !plain_free.is_empty()) {
            let name = if plain_free.is_empty() { "a" } else { plain_free[rng.gen_range(0..plain_free.len())] };
            if logs.contains_key(name) {
                continue;
            }
            let ident = fresh_ident();
            say(&format!("try create {name} {ident}"));
            ns.create_log(name, LogConfig::unbounded()).expect("create");
            say("ack");
            logs.insert(name.to_owned(), (ident, 0));
        } else if roll < 15 && logs.len() > 5 {
            let names: Vec<String> = logs.keys().filter(|n| n.starts_with("_gen.")).cloned().collect();
            let Some(name) = names.first().cloned() else { continue };
            say(&format!("try delete {name}"));
            ns.delete_log(&name).expect("delete");
            say("ack");
            logs.remove(&name);
        } else if roll < 30 {
            let renames = plan_rename(&logs, &mut rng);
            if renames.is_empty() {
                // The shift needs a shadow log: create it.
                let plain: Vec<&str> = PLAIN.iter().copied().filter(|n| logs.contains_key(*n)).collect();
                let Some(x) = plain.first() else { continue };
                let shadow = format!("_shadow.{x}");
                if logs.contains_key(&shadow) {
                    continue;
                }
                let ident = fresh_ident();
                say(&format!("try create {shadow} {ident}"));
                ns.create_log(&shadow, LogConfig::unbounded().system()).expect("create shadow");
                say("ack");
                logs.insert(shadow, (ident, 0));
                continue;
            }
            let shown: Vec<String> = renames.iter().map(|(from, to)| format!("{from}>{to}")).collect();
            say(&format!("try rename {}", shown.join(" ")));
            let pairs: Vec<(&str, &str)> = renames.iter().map(|(f, t)| (f.as_str(), t.as_str())).collect();
            ns.rename_logs(&pairs).expect("rename");
            say("ack");
            let moved: Vec<(String, (String, u64))> =
                renames.iter().map(|(from, to)| (to.clone(), logs.remove(from).expect("exists"))).collect();
            logs.extend(moved);
        } else if roll < 36 {
            // Trim a log with at least two records, keeping at least its newest.
            let trimmable: Vec<String> =
                logs.iter().filter(|(_, (_, latest))| *latest >= 2).map(|(n, _)| n.clone()).collect();
            let Some(name) = trimmable.get(rng.gen_range(0..trimmable.len().max(1))).cloned() else { continue };
            let latest = logs[&name].1;
            let before = rng.gen_range(2..=latest);
            say(&format!("try trim {name} {before}"));
            let earliest = ns.trim(&name, before).expect("trim");
            say("ack");
            assert!(earliest >= before, "trim returns the new earliest");
        } else {
            let names: Vec<String> = logs.keys().cloned().collect();
            let count = rng.gen_range(1..=2.min(names.len()));
            let mut chosen: Vec<String> = Vec::new();
            while chosen.len() < count {
                let name = names[rng.gen_range(0..names.len())].clone();
                if !chosen.contains(&name) {
                    chosen.push(name);
                }
            }
            let values: Vec<(String, Vec<u8>, String)> = chosen
                .iter()
                .map(|name| {
                    let (ident, latest) = &logs[name];
                    (name.clone(), record(ident, latest + 1, &mut rng), format!("{name}:{ident}:{}", latest + 1))
                })
                .collect();
            let shown: Vec<&str> = values.iter().map(|(_, _, shown)| shown.as_str()).collect();
            say(&format!("try append {}", shown.join(" ")));
            let batch: Vec<(&str, &[u8])> =
                values.iter().map(|(name, value, _)| (name.as_str(), value.as_slice())).collect();
            let seqs = ns.append_batch(&batch).expect("append");
            say("ack");
            for (name, seq) in chosen.iter().zip(seqs) {
                let entry = logs.get_mut(name).expect("exists");
                assert_eq!(seq, entry.1 + 1, "the only writer predicts its seqs");
                entry.1 = seq;
            }
        }
    }
}

/// A random rename of the current logs: a move to a free name, a swap, or
/// the repair's shift; empty when a shift lacks its shadow log.
fn plan_rename(logs: &BTreeMap<String, (String, u64)>, rng: &mut impl Rng) -> Vec<(String, String)> {
    let names: Vec<&String> = logs.keys().collect();
    match rng.gen_range(0..3) {
        0 => {
            let from = names[rng.gen_range(0..names.len())].clone();
            let free: Vec<&str> = PLAIN.iter().copied().filter(|n| !logs.contains_key(*n)).collect();
            match free.first() {
                Some(to) => vec![(from, (*to).to_owned())],
                None => Vec::new(),
            }
        }
        1 if names.len() >= 2 => {
            let a = names[rng.gen_range(0..names.len())].clone();
            let b = names[rng.gen_range(0..names.len())].clone();
            if a == b {
                return vec![(a.clone(), a)];
            }
            vec![(a.clone(), b.clone()), (b, a)]
        }
        _ => {
            let Some(x) = PLAIN.iter().find(|x| logs.contains_key(**x) && logs.contains_key(&format!("_shadow.{x}")))
            else {
                return Vec::new();
            };
            // Of the first len + 1 generations one is free (pigeonhole).
            let generation =
                (1..=logs.len() + 1).find(|n| !logs.contains_key(&format!("_gen.{x}.{n}"))).expect("a free generation");
            vec![((*x).to_owned(), format!("_gen.{x}.{generation}")), (format!("_shadow.{x}"), (*x).to_owned())]
        }
    }
}
