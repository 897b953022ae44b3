//! Rename and trim crash loop: a child process (`tests/bin/rename_writer.rs`)
//! does renames — moves, swaps, the repair's shift — and trims, interleaved
//! with appends, creates and deletes, all with `SyncPolicy::Always`; we
//! SIGKILL it at random moments (see `varve_testkit::crash`), reopen, and
//! check that
//! - the logs are exactly the state before or after the operation that was
//!   in flight: a rename frame lands whole or not at all, never some of its
//!   renames; a trim has moved `earliest` to its seq or not at all;
//! - every record is intact and sits in the log it was appended to (each
//!   record names its log's identity, which a rename keeps), dense from
//!   `earliest`, and no trimmed record comes back;
//! - every acknowledged operation and record survived.
//!
//! `VARVE_CRASH_KILLS=N` runs longer; `VARVE_SEED=S` replays a run.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use varve_log::{JournalNamespace, JournalOptions, Namespace, SeqRange};
use varve_testkit::crash::CrashLoop;

/// Names → identity of the log under each name.
type Names = BTreeMap<String, String>;

/// What the test knows: the logs by name, and per identity the latest seq
/// acknowledged (or seen on disk since) and the earliest (1 until trimmed).
#[derive(Default)]
struct Model {
    names: Names,
    latest: BTreeMap<String, u64>,
    earliest: BTreeMap<String, u64>,
}

/// An operation the child announced with `try` and may not have finished.
#[derive(Clone, Debug)]
enum Op {
    Append(Vec<(String, String, u64)>),
    Create(String, String),
    Delete(String),
    Rename(Vec<(String, String)>),
    Trim(String, u64),
}

fn parse(line: &str) -> Op {
    let mut words = line.split(' ');
    assert_eq!(words.next(), Some("try"), "{line:?}");
    let kind = words.next().expect("kind");
    let rest: Vec<&str> = words.collect();
    match kind {
        "append" => Op::Append(
            rest.iter()
                .map(|entry| {
                    let mut parts = entry.split(':');
                    let name = parts.next().expect("name").to_owned();
                    let ident = parts.next().expect("ident").to_owned();
                    (name, ident, parts.next().expect("seq").parse().expect("seq"))
                })
                .collect(),
        ),
        "create" => Op::Create(rest[0].to_owned(), rest[1].to_owned()),
        "delete" => Op::Delete(rest[0].to_owned()),
        "rename" => Op::Rename(
            rest.iter()
                .map(|pair| {
                    let (from, to) = pair.split_once('>').expect("from>to");
                    (from.to_owned(), to.to_owned())
                })
                .collect(),
        ),
        "trim" => Op::Trim(rest[0].to_owned(), rest[1].parse().expect("seq")),
        other => panic!("unknown operation {other:?} in {line:?}"),
    }
}

/// The names after `op` (appends and trims change no name).
fn names_after(names: &Names, op: &Op) -> Names {
    let mut after = names.clone();
    match op {
        Op::Append(_) | Op::Trim(..) => {}
        Op::Create(name, ident) => {
            after.insert(name.clone(), ident.clone());
        }
        Op::Delete(name) => {
            after.remove(name);
        }
        Op::Rename(pairs) => {
            let moved: Vec<(String, String)> =
                pairs.iter().map(|(from, to)| (to.clone(), after.remove(from).expect("renamed log exists"))).collect();
            after.extend(moved);
        }
    }
    after
}

fn acknowledge(model: &mut Model, op: &Op) {
    if let Op::Append(entries) = op {
        for (_, ident, seq) in entries {
            let latest = model.latest.entry(ident.clone()).or_default();
            *latest = (*latest).max(*seq);
        }
    }
    if let Op::Trim(name, before) = op {
        let ident = model.names.get(name).expect("a trimmed log exists").clone();
        let earliest = model.earliest.entry(ident).or_insert(1);
        *earliest = (*earliest).max(*before);
    }
    model.names = names_after(&model.names, op);
}

fn filler_ok(value: &[u8]) -> bool {
    let header_end = value.iter().enumerate().filter(|(_, &b)| b == b';').nth(1).map(|(i, _)| i + 1).expect("header");
    value[header_end..].iter().enumerate().all(|(j, &b)| usize::from(b) == j % 251)
}

/// Reopen, check against the model (the state before `pending` or after
/// it), and make the model what is on disk.
fn verify(dir: &Path, model: &mut Model, pending: Option<&Op>, context: &str) {
    let ns = JournalNamespace::open(&dir.join("crash"), "crash", JournalOptions::default())
        .unwrap_or_else(|e| panic!("{context}: reopen failed: {e}"));
    assert!(!ns.recovery_report().needs_attention(), "{context}: {:?}", ns.recovery_report());
    // Each log: its identity from its records (None when empty), and its latest seq.
    let mut found: BTreeMap<String, (Option<String>, u64, u64)> = BTreeMap::new();
    for info in ns.list_logs().unwrap_or_else(|e| panic!("{context}: {e}")) {
        let mut ident: Option<String> = None;
        let mut count = 0;
        let range = SeqRange::from(info.earliest.max(1)..);
        for record in ns.scan(&info.name, range).unwrap_or_else(|e| panic!("{context}: {e}")) {
            let record = record.unwrap_or_else(|e| panic!("{context}: {}: {e}", info.name));
            count += 1;
            let text = String::from_utf8_lossy(&record.value[..record.value.len().min(80)]).into_owned();
            let mut fields = text.split(';');
            let (Some(id), Some(seq)) = (fields.next(), fields.next()) else { panic!("{context}: malformed {text:?}") };
            assert_eq!(seq.parse::<u64>().ok(), Some(record.seq), "{context}: {} record at the wrong seq", info.name);
            assert!(filler_ok(&record.value), "{context}: {}:{} damaged", info.name, record.seq);
            match &ident {
                Some(known) => assert_eq!(known, id, "{context}: {} mixes records of two logs", info.name),
                None => ident = Some(id.to_owned()),
            }
        }
        assert_eq!(count, info.len(), "{context}: {} is dense from its earliest", info.name);
        found.insert(info.name, (ident, info.earliest, info.latest));
    }
    let before = model.names.clone();
    let after = pending.map(|op| names_after(&model.names, op));
    // The earliest a log may show: as acknowledged, or the trim in flight.
    let earliest_fits = |name: &str, ident: &str, earliest: u64, latest: u64| {
        let acknowledged = model.earliest.get(ident).copied().unwrap_or(1);
        let shown = if latest == 0 { 1 } else { earliest };
        shown == acknowledged || matches!(pending, Some(Op::Trim(n, before)) if n == name && shown == *before)
    };
    let fits = |names: &Names| {
        names.len() == found.len()
            && names.iter().all(|(name, ident)| {
                found.get(name).is_some_and(|(found_ident, earliest, latest)| {
                    found_ident.as_ref().is_none_or(|f| f == ident)
                        && *latest >= model.latest.get(ident).copied().unwrap_or(0)
                        && earliest_fits(name, ident, *earliest, *latest)
                })
            })
    };
    let state = if fits(&before) {
        before
    } else if let Some(after) = after.filter(|after| fits(after)) {
        after
    } else {
        panic!(
            "{context}: the logs on disk {found:?} are neither the state before {pending:?} ({:?}) nor after it (acknowledged latest seqs {:?}, earliest {:?})",
            model.names, model.latest, model.earliest
        );
    };
    for (name, ident) in &state {
        let (_, earliest, latest) = found[name];
        model.latest.insert(ident.clone(), latest);
        model.earliest.insert(ident.clone(), earliest.max(1));
    }
    model.names = state;
    ns.close().expect("close");
}

#[test]
fn renames_and_trims_are_all_or_nothing_across_sigkill() {
    let mut crashes = CrashLoop::new("rename crash loop", 60, 2..60);
    let seed = crashes.seed();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut model = Model::default();
    let (mut renames_acknowledged, mut trims_acknowledged) = (0, 0);
    for kill in 0..crashes.kills() {
        let run = crashes.kill_next(
            Command::new(env!("CARGO_BIN_EXE_varve-log-rename-writer"))
                .arg(dir.path())
                .arg((seed ^ kill as u64).to_string()),
        );
        let mut pending: Option<Op> = None;
        for line in &run.lines {
            if let Some(rest) = line.strip_prefix("adopt ") {
                let (name, ident) = rest.split_once(' ').expect("adopt NAME IDENT");
                let old = model.names.insert(name.to_owned(), ident.to_owned());
                let old_latest = old.and_then(|old| model.latest.get(&old).copied()).unwrap_or(0);
                assert_eq!(old_latest, 0, "{}: adopted log {name} had records", run.context);
            } else if line == "ack" {
                let op = pending.take().unwrap_or_else(|| panic!("{}: ack without try", run.context));
                renames_acknowledged += usize::from(matches!(op, Op::Rename(_)));
                trims_acknowledged += usize::from(matches!(op, Op::Trim(..)));
                acknowledge(&mut model, &op);
            } else {
                assert!(pending.is_none(), "{}: two operations in flight", run.context);
                pending = Some(parse(line));
            }
        }
        verify(dir.path(), &mut model, pending.as_ref(), &run.context);
    }
    println!(
        "rename crash loop: {renames_acknowledged} renames and {trims_acknowledged} trims acknowledged, {} logs at the end",
        model.names.len()
    );
    assert!(trims_acknowledged > 0, "seed {seed}: the loop trimmed");
    crashes.finish();
}
