//! A fixed workload for counting instructions (`valgrind --tool=callgrind`),
//! which, unlike wall time, is repeatable on a busy machine: `N` appends of
//! `SIZE`-byte records to one log with `SyncPolicy::Never`, then, with
//! `open` as the fourth argument, only a reopen of that journal (recovery).
//!
//! ```text
//! cargo build --release -p varve-log --example append_then_open
//! valgrind --tool=callgrind target/release/examples/append_then_open 40000 64 /tmp/j
//! valgrind --tool=callgrind target/release/examples/append_then_open 0 64 /tmp/j open
//! ```
//! (docs/benchmarks.md, "Instruction counts".)

use std::path::PathBuf;

use varve_log::{JournalNamespace, JournalOptions, LogConfig, Namespace, SyncPolicy};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, count, size, dir, rest @ ..] = args.as_slice() else {
        return Err("usage: append_then_open N SIZE DIR [open]".into());
    };
    let (count, size, dir): (u64, usize, PathBuf) = (count.parse()?, size.parse()?, dir.into());
    let options = JournalOptions { sync: SyncPolicy::Never, ..JournalOptions::default() };
    if rest.first().map(String::as_str) == Some("open") {
        let ns = JournalNamespace::open(&dir, "bench", options)?;
        eprintln!("opened: {} records", ns.latest("a")?);
        return Ok(());
    }
    let _ = std::fs::remove_dir_all(&dir);
    let ns = JournalNamespace::open(&dir, "bench", options)?;
    ns.create_log("a", LogConfig::unbounded())?;
    let value = vec![7u8; size];
    for _ in 0..count {
        ns.append("a", &value)?;
    }
    eprintln!("appended {count} records of {size} bytes");
    Ok(())
}
