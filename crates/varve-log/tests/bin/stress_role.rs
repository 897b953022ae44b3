//! The processes of the multi-process stress test (`tests/readers_and_writer.rs`):
//!
//! - `stress_role writer DIR SEED SYNC SECONDS`: appends records of mixed
//!   sizes (0 B to 1 MiB) to log `t`, alone or in a batch with log `u`,
//!   under the given sync policy (`never`, `group`, `always`), for SECONDS.
//!   Prints `ready` once the logs exist, and `done N` at the end.
//! - `stress_role reader MODE DIR SEED SECONDS` with MODE `tail` (a watch
//!   from seq 1), `latest` (a fresh read-only open per look, then `latest`
//!   and `get`, as `varve log latest` does) or `scan` (scans up to the
//!   latest, again and again). Checks every record it reads against what the
//!   writer must have written; prints `ok N` (records checked), or the
//!   error and exits 1.
//!
//! Record `seq` of `t` is a pure function of the seed and the seq, so a
//! reader can check it without talking to the writer.

#![allow(clippy::cast_possible_truncation, reason = "a test child")]

use std::time::{Duration, Instant};

use varve_log::{JournalNamespace, JournalOptions, LogConfig, Namespace, SeqRange, SyncPolicy};

/// Stops the writer well before the disk notices: a CI machine's disk may
/// have only a few hundred MiB free, and 64 MiB still rolls eight segments.
const WRITTEN_BYTES_MAX: u64 = 64 << 20;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        [_, "writer", dir, seed, sync, seconds] => writer(dir, number(seed), sync, number(seconds)),
        [_, "reader", mode, dir, seed, seconds] => reader(mode, dir, number(seed), number(seconds)),
        _ => Err("usage: stress_role writer DIR SEED SYNC SECONDS | reader MODE DIR SEED SECONDS".into()),
    };
    if let Err(error) = result {
        println!("error: {error}");
        std::process::exit(1);
    }
}

fn number(text: &str) -> u64 {
    text.parse().expect("a number")
}

/// A 64-bit mix (splitmix64), so sizes and bytes look random but are fixed.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Record `seq` of log `t`: most small, many 10–100 KiB (written with
/// `pwrite`), a few up to 1 MiB.
fn value(seed: u64, seq: u64) -> Vec<u8> {
    let r = mix(seed ^ seq.wrapping_mul(0x1000_0000_01b3));
    let len = match r % 100 {
        0..=29 => r >> 8 & 0x7f,                                 // 0..128 B
        30..=59 => 128 + (r >> 8) % (16 << 10),                  // to 16 KiB
        60..=94 => (10 << 10) + (r >> 8) % (90 << 10),           // 10..100 KiB
        _ => (100 << 10) + (r >> 8) % ((1 << 20) - (100 << 10)), // to 1 MiB
    } as usize;
    let fill = (r >> 40) as u8;
    let mut bytes: Vec<u8> = (0..len).map(|i| fill.wrapping_add((i % 251) as u8)).collect();
    let tag = seq.to_le_bytes();
    let n = tag.len().min(len);
    bytes[..n].copy_from_slice(&tag[..n]);
    bytes
}

fn check(seed: u64, seq: u64, got: &[u8]) -> Result<(), String> {
    if got == value(seed, seq) {
        Ok(())
    } else {
        Err(format!("t seq {seq}: {} bytes read do not match the {} written", got.len(), value(seed, seq).len()))
    }
}

fn writer(dir: &str, seed: u64, sync: &str, seconds: u64) -> Result<(), String> {
    let sync = match sync {
        "never" => SyncPolicy::Never,
        "group" => SyncPolicy::Group(Duration::from_millis(5)),
        "always" => SyncPolicy::Always,
        other => return Err(format!("unknown sync policy {other}")),
    };
    // Index checkpoints every MiB or so: the readers' fresh opens load them
    // and read on from there, while the writer appends.
    let options =
        JournalOptions { sync, segment_bytes_max: 8 << 20, checkpoint_bytes_min: 1 << 20, ..JournalOptions::default() };
    let ns = JournalNamespace::open(dir.as_ref(), "stress", options).map_err(|e| e.to_string())?;
    ns.create_log("t", LogConfig::unbounded()).map_err(|e| e.to_string())?;
    ns.create_log("u", LogConfig::unbounded()).map_err(|e| e.to_string())?;
    println!("ready");
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut written = 0u64;
    let mut seq = 0;
    while Instant::now() < deadline && written < WRITTEN_BYTES_MAX {
        seq += 1;
        let record = value(seed, seq);
        written += record.len() as u64;
        let landed = if mix(seq).is_multiple_of(4) {
            ns.append_batch(&[("t", &record), ("u", b"beside")]).map_err(|e| e.to_string())?[0]
        } else {
            ns.append("t", &record).map_err(|e| e.to_string())?
        };
        if landed != seq {
            return Err(format!("appended seq {landed}, expected {seq}"));
        }
    }
    println!("done {seq}");
    Ok(())
}

fn reader(mode: &str, dir: &str, seed: u64, seconds: u64) -> Result<(), String> {
    let options =
        JournalOptions { read_only: true, read_only_poll: Duration::from_millis(2), ..JournalOptions::default() };
    let open = || JournalNamespace::open(dir.as_ref(), "stress", options).map_err(|e| format!("open: {e}"));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut checked = 0u64;
    // Opens that loaded the index checkpoint the writer saved as it wrote.
    let mut loaded = 0u64;
    match mode {
        "tail" => {
            let ns = open()?;
            let mut watch = ns.watch("t", 1).map_err(|e| e.to_string())?;
            while Instant::now() < deadline {
                let Some(record) = watch.next_timeout(Duration::from_millis(50)).map_err(|e| format!("watch: {e}"))?
                else {
                    continue;
                };
                check(seed, record.seq, &record.value)?;
                checked += 1;
            }
        }
        "latest" => {
            while Instant::now() < deadline {
                let ns = open()?;
                loaded += u64::from(ns.recovery_report().checkpoint == varve_log::CheckpointUse::Loaded);
                let latest = ns.latest("t").map_err(|e| format!("latest: {e}"))?;
                if latest > 0 {
                    check(seed, latest, &ns.get("t", latest).map_err(|e| format!("get {latest}: {e}"))?)?;
                    checked += 1;
                }
            }
        }
        "scan" => {
            let ns = open()?;
            let mut from = 1;
            while Instant::now() < deadline {
                let latest = ns.latest("t").map_err(|e| format!("latest: {e}"))?;
                if from > latest {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
                for record in ns.scan("t", SeqRange::from(from..=latest)).map_err(|e| e.to_string())? {
                    let record = record.map_err(|e| format!("scan: {e}"))?;
                    check(seed, record.seq, &record.value)?;
                    checked += 1;
                }
                // Mostly the new records, sometimes all again.
                from = if mix(checked).is_multiple_of(8) { 1 } else { latest + 1 };
            }
        }
        other => return Err(format!("unknown reader mode {other}")),
    }
    println!("ok {checked} {loaded}");
    Ok(())
}
