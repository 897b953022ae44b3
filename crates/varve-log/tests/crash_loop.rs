//! Crash loop: a child process appends batches with `SyncPolicy::Always` and
//! prints each acknowledgement; we SIGKILL it (most kills while it appends,
//! one in three aimed at its recovery: see `varve_testkit::crash`), reopen,
//! and check the crash guarantees:
//! every acknowledged record is present and intact, no batch is partly
//! visible, every log is a dense prefix, nothing appears that was never
//! appended.
//!
//! `VARVE_CRASH_KILLS=N` runs a longer soak (`make soak`: 1,000); `VARVE_SEED=S`
//! replays a run.

mod support;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::Command;

use support::contents;
use varve_log::journal::CHECKPOINT_FILE;
use varve_log::{CheckpointUse, JournalNamespace, JournalOptions, Namespace, SeqRange};
use varve_testkit::crash::CrashLoop;

const UNBOUNDED: [&str; 3] = ["u0", "u1", "u2"];
const OVERWRITE: &str = "ow";

struct Parsed {
    batch: u64,
    count: usize,
    index: usize,
    logs: Vec<String>,
}

fn parse(value: &[u8]) -> Parsed {
    let text = String::from_utf8_lossy(&value[..value.len().min(200)]);
    let mut fields = HashMap::new();
    for part in text.split(';').take(4) {
        let (k, v) = part.split_once('=').unwrap_or_else(|| panic!("malformed record {text:?}"));
        fields.insert(k.to_owned(), v.to_owned());
    }
    let number = |k: &str| fields[k].parse::<u64>().expect("number");
    Parsed {
        batch: number("b"),
        count: usize::try_from(number("n")).expect("small"),
        index: usize::try_from(number("i")).expect("small"),
        logs: fields["logs"].split(',').map(str::to_owned).collect(),
    }
}

fn expected_filler_ok(value: &[u8]) -> bool {
    let header_end = value.iter().enumerate().filter(|(_, &b)| b == b';').nth(3).map(|(i, _)| i + 1).expect("header");
    value[header_end..].iter().enumerate().all(|(j, &b)| usize::from(b) == j % 251)
}

/// Open a copy of the namespace in `dir` without its index checkpoint,
/// so that every frame is replayed: what the open that may load it must equal.
fn replayed_in_full(dir: &Path, copy: &Path) -> JournalNamespace {
    std::fs::create_dir_all(copy).expect("mkdir");
    for entry in std::fs::read_dir(dir).expect("list") {
        let entry = entry.expect("entry");
        if entry.file_type().expect("type").is_file() && entry.file_name() != CHECKPOINT_FILE {
            std::fs::copy(entry.path(), copy.join(entry.file_name())).expect("copy");
        }
    }
    JournalNamespace::open(copy, "crash", JournalOptions::default()).expect("open the copy")
}

/// Check the journal in `dir` against everything acknowledged so far, and
/// against a replay of every frame; returns whether the open loaded an
/// index checkpoint and replayed frames after it.
fn verify(dir: &Path, acked: &BTreeMap<u64, Vec<(String, u64)>>, seed: u64, kill: usize) -> bool {
    let context = format!("seed {seed}, after kill {kill}");
    let copy = tempfile::tempdir().expect("tempdir");
    let full = replayed_in_full(&dir.join("crash"), copy.path());
    let ns = JournalNamespace::open(&dir.join("crash"), "crash", JournalOptions::default())
        .unwrap_or_else(|e| panic!("{context}: reopen failed: {e}"));
    let report = ns.recovery_report();
    let resumed = report.checkpoint == CheckpointUse::Loaded && report.frames > 0;
    assert!(!report.needs_attention(), "{context}: {report:?}");
    assert!(
        contents(&ns) == contents(&full),
        "{context}: the open ({:?}) differs from a full replay",
        report.checkpoint
    );
    drop(full);
    let mut where_is: HashMap<(u64, usize), (String, u64)> = HashMap::new();
    let mut batches_in_unbounded = std::collections::BTreeSet::new();
    let mut ow_first_batch = None;
    for log in UNBOUNDED.iter().copied().chain([OVERWRITE]) {
        let info = match ns.log_info(log) {
            Ok(info) => info,
            // Killed before it created its logs; then nothing can be acked.
            Err(varve_log::LogError::LogNotFound { .. }) => continue,
            Err(e) => panic!("{context}: {e}"),
        };
        let mut previous_batch = None;
        let mut count = 0;
        for record in ns.scan(log, SeqRange::from(info.earliest.max(1)..)).unwrap_or_else(|e| panic!("{context}: {e}"))
        {
            let record = record.unwrap_or_else(|e| panic!("{context}: {log}: {e}"));
            count += 1;
            let parsed = parse(&record.value);
            assert!(expected_filler_ok(&record.value), "{context}: {log}:{} damaged", record.seq);
            assert_eq!(parsed.logs[parsed.index], log, "{context}: record in the wrong log");
            assert!(previous_batch <= Some(parsed.batch), "{context}: {log} out of order");
            previous_batch = Some(parsed.batch);
            if log == OVERWRITE {
                ow_first_batch.get_or_insert(parsed.batch);
            } else {
                batches_in_unbounded.insert(parsed.batch);
            }
            let earlier = where_is.insert((parsed.batch, parsed.index), (log.to_owned(), record.seq));
            assert!(earlier.is_none(), "{context}: batch {} entry {} twice", parsed.batch, parsed.index);
            assert_eq!(parsed.logs.len(), parsed.count, "{context}: malformed batch header");
        }
        assert_eq!(count, info.len(), "{context}: {log} is dense from earliest to latest");
    }
    // Batch ids form a dense prefix: nothing lost in the middle, nothing invented.
    let max_batch = batches_in_unbounded.iter().next_back().copied();
    if let Some(max) = max_batch {
        assert_eq!(batches_in_unbounded.len() as u64, max + 1, "{context}: batch ids are not dense");
    }
    for &batch in &batches_in_unbounded {
        let some_entry = (0..4).find_map(|i| where_is.get(&(batch, i)).map(|_| i)).expect("an entry");
        let (log, seq) = &where_is[&(batch, some_entry)];
        let parsed = parse(&ns.get(log, *seq).expect("get"));
        for (i, sibling_log) in parsed.logs.iter().enumerate() {
            let trimmed_ok = sibling_log == OVERWRITE && ow_first_batch.is_none_or(|first| batch <= first);
            assert!(
                where_is.contains_key(&(batch, i)) || trimmed_ok,
                "{context}: batch {batch} is partly visible: entry {i} ({sibling_log}) missing"
            );
        }
    }
    // Every acknowledged record is there, at the seq the ack named.
    for (batch, entries) in acked {
        for (i, (log, seq)) in entries.iter().enumerate() {
            match where_is.get(&(*batch, i)) {
                Some((found_log, found_seq)) => {
                    assert_eq!((found_log, found_seq), (log, seq), "{context}: batch {batch} entry {i} moved");
                }
                None => assert!(
                    log == OVERWRITE && ow_first_batch.is_none_or(|first| *batch <= first),
                    "{context}: acknowledged batch {batch} entry {i} ({log}:{seq}) lost"
                ),
            }
        }
        assert!(max_batch.is_some_and(|max| *batch <= max), "{context}: acked batch {batch} beyond what is stored");
    }
    ns.close().expect("close");
    resumed
}

#[test]
fn acknowledged_appends_survive_sigkill() {
    let mut crashes = CrashLoop::new("crash loop", 50, 2..60);
    let seed = crashes.seed();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut acked: BTreeMap<u64, Vec<(String, u64)>> = BTreeMap::new();
    let mut resumed = 0;
    for kill in 0..crashes.kills() {
        let run = crashes.kill_next(
            Command::new(env!("CARGO_BIN_EXE_varve-log-crash-writer"))
                .arg(dir.path())
                .arg((seed ^ kill as u64).to_string()),
        );
        for line in run.lines {
            let mut parts = line.split(' ');
            assert_eq!(parts.next(), Some("ack"), "{}: {line:?}", run.context);
            let batch: u64 = parts.next().expect("batch").parse().expect("number");
            let entries = parts
                .map(|p| {
                    let (log, seq) = p.split_once(':').expect("log:seq");
                    (log.to_owned(), seq.parse().expect("seq"))
                })
                .collect();
            acked.insert(batch, entries);
        }
        resumed += usize::from(verify(dir.path(), &acked, seed, kill));
    }
    println!("crash loop: {} batches acknowledged, {resumed} opens resumed from an index checkpoint", acked.len());
    assert!(resumed > 0, "seed {seed}: no open after a kill loaded a checkpoint the writer saved as it wrote");
    crashes.finish();
}
