#![allow(clippy::doc_markdown, reason = "the paper's terms and file names in prose")]
//! The paper's failures (§IV-A C3/C4) injected with `FaultyNamespace` at
//! every write of a workload: Type 1 (append fails before it is written),
//! Type 2 (written, acknowledgement lost) and a stop between two appends
//! followed by a reopen. Every run must end with logs byte-identical to a
//! fault-free run: committed versions unchanged, the interrupted op applied
//! exactly once (or, if it never reached the op log, not at all and then
//! run again), no duplicate entries.

use std::sync::Arc;

use varve_log::{Limits, MemoryNamespace, Namespace, SeqRange};
use varve_pds::testing::FaultyNamespace;
use varve_pds::{Options, SortedSet, Structure, Version, VersionedList};

#[derive(Clone, Copy, Debug)]
enum Op {
    Insert(u64),
    Delete(u64),
}

fn ops() -> Vec<Op> {
    let mut ops: Vec<Op> = [50, 20, 80, 10, 30, 70, 90, 25, 35, 5].into_iter().map(Op::Insert).collect();
    ops.extend([20, 50, 10].into_iter().map(Op::Delete));
    ops.extend([60, 65, 62, 1, 2, 3].into_iter().map(Op::Insert));
    ops.extend([30, 80, 62].into_iter().map(Op::Delete));
    ops
}

enum Subject {
    Set(SortedSet<u64>),
    List(VersionedList<u64>),
}

fn open(ns: Arc<dyn Namespace>, structure: Structure) -> varve_pds::Result<Subject> {
    let options = Options { extra: 1, keep: None, ..Options::default() };
    Ok(match structure {
        Structure::List => Subject::List(VersionedList::open(ns, "f", options)?),
        tree => Subject::Set(SortedSet::open_as(ns, "f", tree, options)?),
    })
}

impl Subject {
    fn apply(&mut self, op: Op) -> varve_pds::Result<Version> {
        match (self, op) {
            (Subject::Set(s), Op::Insert(k)) => s.insert(&k),
            (Subject::Set(s), Op::Delete(k)) => s.delete(&k),
            (Subject::List(l), Op::Insert(k)) => l.push_back(&k),
            (Subject::List(l), Op::Delete(k)) => l.remove(&k),
        }
    }
    fn latest(&self) -> Version {
        match self {
            Subject::Set(s) => s.latest(),
            Subject::List(l) => l.latest(),
        }
        .expect("latest")
    }
    fn items(&self, v: Version) -> Vec<u64> {
        match self {
            Subject::Set(s) => s.iter(Some(v)).expect("iter").collect(),
            Subject::List(l) => l.iter(Some(v)).expect("iter").collect(),
        }
    }
}

fn memory() -> Arc<dyn Namespace> {
    Arc::new(MemoryNamespace::new("faults", Limits::default()))
}

/// Every log and every record in it.
fn contents(ns: &dyn Namespace) -> Vec<(String, Vec<Vec<u8>>)> {
    ns.list_logs()
        .expect("list")
        .into_iter()
        .map(|info| {
            let records =
                ns.scan(&info.name, SeqRange::ALL).expect("scan").map(|r| r.expect("record").value.to_vec()).collect();
            (info.name, records)
        })
        .collect()
}

/// The fault-free run: its logs, each version's items, and the writes it made.
type Logs = Vec<(String, Vec<Vec<u8>>)>;

fn reference(structure: Structure) -> (Logs, Vec<Vec<u64>>, u64) {
    let inner = memory();
    let faulty = FaultyNamespace::new(inner.clone());
    let mut subject = open(faulty.clone(), structure).expect("open");
    let opened = faulty.writes();
    for op in ops() {
        subject.apply(op).expect("apply");
    }
    let versions = (0..=subject.latest()).map(|v| if v == 0 { Vec::new() } else { subject.items(v) }).collect();
    (contents(inner.as_ref()), versions, faulty.writes() - opened)
}

fn for_each_structure(test: impl Fn(Structure)) {
    for structure in [Structure::Bst, Structure::Balanced, Structure::List] {
        test(structure);
    }
}

#[test]
fn type_1_and_type_2_failures_at_every_write_are_retried_without_duplicates() {
    for_each_structure(|structure| {
        let (expected, _, writes) = reference(structure);
        for index in 0..writes {
            for lose_ack in [false, true] {
                let inner = memory();
                let faulty = FaultyNamespace::new(inner.clone());
                let mut subject = open(faulty.clone(), structure).expect("open");
                let at = faulty.writes() + index;
                if lose_ack {
                    faulty.lose_ack(at);
                } else {
                    faulty.fail_before(at);
                }
                for op in ops() {
                    subject.apply(op).unwrap_or_else(|e| panic!("{structure} write {index} lose_ack {lose_ack}: {e}"));
                }
                assert_eq!(faulty.injected(), 1);
                assert!(
                    contents(inner.as_ref()) == expected,
                    "{structure}: fault at write {index} (lose_ack {lose_ack}) changed the logs"
                );
            }
        }
    });
}

#[test]
fn a_stop_between_any_two_appends_is_completed_or_abandoned_on_reopen() {
    for_each_structure(|structure| {
        let (expected, versions, writes) = reference(structure);
        let all = ops();
        for index in 0..writes {
            let inner = memory();
            let faulty = FaultyNamespace::new(inner.clone());
            let mut subject = open(faulty.clone(), structure).expect("open");
            faulty.stop_at(faulty.writes() + index);
            let mut done: u64 = 0;
            for op in &all {
                match subject.apply(*op) {
                    Ok(_) => done += 1,
                    Err(_) => break,
                }
            }
            assert!(faulty.stopped(), "{structure}: write {index} is inside the workload");
            drop(subject);
            // "Restart": reopen on the same logs without faults.
            let mut subject = open(inner.clone(), structure).expect("reopen");
            let latest = subject.latest();
            // Each op of this workload makes exactly one version (no no-ops).
            assert_eq!(versions.len() - 1, all.len());
            let committed_before: u64 = done;
            assert!(
                latest == committed_before || latest == committed_before + 1,
                "{structure} stop at {index}: latest {latest}, {committed_before} committed before the stop"
            );
            for v in 1..=latest {
                assert_eq!(
                    subject.items(v),
                    versions[usize::try_from(v).expect("small")],
                    "{structure} stop at {index}: version {v}"
                );
            }
            // The interrupted op was applied once (completed) or not at all: run the rest.
            let resume = usize::try_from(latest).expect("small");
            for op in &all[resume..] {
                subject.apply(*op).expect("later ops work");
            }
            assert!(
                contents(inner.as_ref()) == expected,
                "{structure}: stop at write {index}: logs differ from a clean run"
            );
        }
    });
}

#[test]
fn a_stop_during_recovery_is_recovered_by_the_next_open() {
    for_each_structure(|structure| {
        let (expected, _, writes) = reference(structure);
        let all = ops();
        for index in (0..writes).step_by(3) {
            let inner = memory();
            let faulty = FaultyNamespace::new(inner.clone());
            let mut subject = open(faulty.clone(), structure).expect("open");
            faulty.stop_at(faulty.writes() + index);
            for op in &all {
                if subject.apply(*op).is_err() {
                    break;
                }
            }
            drop(subject);
            // Reopen, but stop again during recovery's first write.
            let again = FaultyNamespace::new(inner.clone());
            again.stop_at(0);
            let _ = open(again, structure);
            let mut subject = open(inner.clone(), structure).expect("reopen");
            let resume = usize::try_from(subject.latest()).expect("small");
            for op in &all[resume..] {
                subject.apply(*op).expect("later ops work");
            }
            assert!(contents(inner.as_ref()) == expected, "{structure}: double stop at write {index}");
        }
    });
}

#[test]
fn an_update_that_gives_up_is_completed_by_the_next_update() {
    let inner = memory();
    let faulty = FaultyNamespace::new(inner.clone());
    let mut set = SortedSet::<u64>::open_as(
        faulty.clone(),
        "g",
        Structure::Bst,
        Options { extra: 1, keep: None, ..Options::default() },
    )
    .expect("open");
    set.insert(&5).expect("insert");
    // From the 3rd write of the next update (after its op and its new
    // node's LinkLog), fail its batch and then every attempt of the first
    // entry written one by one (retries exhausted).
    let base = faulty.writes() + 2;
    for i in 0..=varve_pds::APPEND_ATTEMPTS_MAX {
        faulty.fail_before(base + u64::from(i));
    }
    let err = set.insert(&3).expect_err("gives up");
    assert!(matches!(err, varve_pds::PdsError::RetriesExhausted { .. }), "{err}");
    assert_eq!(set.latest().expect("latest"), 1, "nothing committed");
    // The op is in the op log: the next update completes it first.
    assert_eq!(set.insert(&8).expect("insert"), 3);
    assert_eq!(set.iter(Some(2)).expect("iter").collect::<Vec<_>>(), vec![3, 5]);
    assert_eq!(set.iter(None).expect("iter").collect::<Vec<_>>(), vec![3, 5, 8]);
}
