#![allow(clippy::doc_markdown, reason = "the paper's terms and file names in prose")]
//! Every version of every structure against a plain model holding all
//! versions (`Vec<BTreeSet>` / `Vec<Vec>`): random insert/delete mixes for
//! extra ∈ {1, 2, 5, 10}, adversarial orders, and reopening from the
//! embedded journal mid-sequence.

use std::collections::BTreeSet;
use std::sync::Arc;

use proptest::prelude::*;
use varve_log::{JournalOptions, JournalStore, Limits, MemoryNamespace, Namespace};
use varve_pds::{Options, PdsError, SortedSet, Structure, Version, VersionedList};

#[derive(Clone, Copy, Debug)]
enum Op {
    Insert(u64),
    Delete(u64),
}

fn memory() -> Arc<dyn Namespace> {
    Arc::new(MemoryNamespace::new("model", Limits::default()))
}

/// A structure under test: a set (either tree) or a list used as in §V-A.
enum Subject {
    Set(SortedSet<u64>),
    List(VersionedList<u64>),
}

impl Subject {
    fn open(ns: Arc<dyn Namespace>, structure: Structure, extra: u32) -> Subject {
        let options = Options { extra, keep: None, ..Options::default() };
        match structure {
            Structure::List => Subject::List(VersionedList::open(ns, "s", options).expect("open")),
            tree => Subject::Set(SortedSet::open_as(ns, "s", tree, options).expect("open")),
        }
    }

    fn apply(&mut self, op: Op) -> Version {
        match (self, op) {
            (Subject::Set(s), Op::Insert(k)) => s.insert(&k),
            (Subject::Set(s), Op::Delete(k)) => s.delete(&k),
            // Like the workloads of §V-A, the list holds distinct values:
            // inserting one already present is skipped, as the model does.
            (Subject::List(l), Op::Insert(k)) if l.find(&k, None).expect("find").is_some() => l.latest(),
            (Subject::List(l), Op::Insert(k)) => l.push_back(&k),
            (Subject::List(l), Op::Delete(k)) => l.remove(&k),
        }
        .expect("update")
    }

    fn items(&self, v: Version) -> Vec<u64> {
        match self {
            Subject::Set(s) => s.iter(Some(v)).expect("iter").collect(),
            Subject::List(l) => l.iter(Some(v)).expect("iter").collect(),
        }
    }

    fn contains(&self, k: u64, v: Version) -> bool {
        match self {
            Subject::Set(s) => s.contains(&k, Some(v)).expect("contains"),
            Subject::List(l) => l.find(&k, Some(v)).expect("find").is_some(),
        }
    }

    fn latest(&self) -> Version {
        match self {
            Subject::Set(s) => s.latest(),
            Subject::List(l) => l.latest(),
        }
        .expect("latest")
    }
}

/// The model: `versions[v]` is the content of version v (`versions[0]` empty).
/// A list is a set whose inserts append (values are distinct, as in §V-A).
struct Model {
    list: bool,
    versions: Vec<Vec<u64>>,
}

impl Model {
    fn apply(&mut self, op: Op) -> bool {
        let mut next = self.versions.last().expect("version 0").clone();
        match op {
            Op::Insert(k) if next.contains(&k) => return false,
            Op::Insert(k) => {
                next.push(k);
                if !self.list {
                    next.sort_unstable();
                }
            }
            Op::Delete(k) => match next.iter().position(|&x| x == k) {
                None => return false,
                Some(i) => {
                    next.remove(i);
                }
            },
        }
        self.versions.push(next);
        true
    }
}

fn run_and_check(subject: &mut Subject, model: &mut Model, ops: &[Op], structure: Structure) {
    for &op in ops {
        let before = subject.latest();
        let changed = model.apply(op);
        let v = subject.apply(op);
        let expected = model.versions.len() as u64 - 1;
        assert_eq!(v, expected, "{op:?}: version (changed: {changed})");
        if !changed {
            assert_eq!(v, before, "a no-op writes no version");
        }
    }
    check_all(subject, model, structure);
}

fn check_all(subject: &Subject, model: &Model, structure: Structure) {
    assert_eq!(subject.latest(), model.versions.len() as u64 - 1);
    let keys: BTreeSet<u64> = model.versions.iter().flatten().copied().chain([0, 1000]).collect();
    for (v, expected) in model.versions.iter().enumerate().skip(1) {
        let v = v as u64;
        assert_eq!(&subject.items(v), expected, "iter of version {v}");
        for &k in &keys {
            assert_eq!(subject.contains(k, v), expected.contains(&k), "contains({k}, {v})");
        }
        if structure == Structure::Balanced {
            if let Subject::Set(s) = subject {
                assert_eq!(s.balance_violation(Some(v)).expect("check"), None, "red-black invariant at {v}");
            }
        }
    }
}

fn check_ops(structure: Structure, extra: u32, ops: &[Op]) {
    let mut subject = Subject::open(memory(), structure, extra);
    let mut model = Model { list: structure == Structure::List, versions: vec![Vec::new()] };
    run_and_check(&mut subject, &mut model, ops, structure);
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![3 => (1u64..40).prop_map(Op::Insert), 2 => (1u64..40).prop_map(Op::Delete)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn paper_bst_matches_model(extra in prop::sample::select(vec![1u32, 2, 5, 10]), ops in prop::collection::vec(op_strategy(), 1..80)) {
        check_ops(Structure::Bst, extra, &ops);
    }

    #[test]
    fn balanced_tree_matches_model(extra in prop::sample::select(vec![1u32, 2, 5, 10]), ops in prop::collection::vec(op_strategy(), 1..80)) {
        check_ops(Structure::Balanced, extra, &ops);
    }

    #[test]
    fn list_matches_model(extra in prop::sample::select(vec![1u32, 2, 5, 10]), ops in prop::collection::vec(op_strategy(), 1..60)) {
        check_ops(Structure::List, extra, &ops);
    }
}

/// Sorted inserts (the paper's BST degenerates into a list), then deleting
/// the root again and again, then nodes with two children.
fn adversarial() -> Vec<Op> {
    let mut ops: Vec<Op> = (1..=30).map(Op::Insert).collect();
    ops.extend((1..=10).map(Op::Delete)); // the root of the sorted BST each time
    ops.extend((31..=60).rev().map(Op::Insert));
    // A balanced-ish shape, then delete inner nodes (two children).
    for k in [80, 70, 90, 65, 75, 85, 95, 72, 78] {
        ops.push(Op::Insert(k));
    }
    for k in [70, 80, 75, 90, 20, 45] {
        ops.push(Op::Delete(k));
    }
    ops.extend((11..=29).map(Op::Delete));
    ops.push(Op::Delete(1234)); // absent: no version
    ops.push(Op::Insert(65)); // present: no version
    ops
}

#[test]
fn adversarial_orders_for_every_structure_and_extra() {
    for structure in [Structure::Bst, Structure::Balanced, Structure::List] {
        for extra in [1, 2, 5, 10] {
            check_ops(structure, extra, &adversarial());
        }
    }
}

#[test]
fn reopen_from_the_journal_mid_sequence_and_continue() {
    let ops = adversarial();
    for structure in [Structure::Bst, Structure::Balanced, Structure::List] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut model = Model { list: structure == Structure::List, versions: vec![Vec::new()] };
        for chunk in ops.chunks(23) {
            let store = JournalStore::open(dir.path(), JournalOptions::default()).expect("store");
            let ns: Arc<dyn Namespace> = Arc::new(store.journal_namespace("ns").expect("ns"));
            let mut subject = Subject::open(ns, structure, 2);
            check_all(&subject, &model, structure); // everything committed reads as before
            run_and_check(&mut subject, &mut model, chunk, structure);
        }
    }
}

#[test]
fn bad_versions_are_typed_errors() {
    let mut set = SortedSet::<u64>::open(memory(), "s", Options::default()).expect("open");
    assert_eq!(set.iter(None).expect("empty latest").count(), 0);
    set.insert(&1).expect("insert");
    for v in [0, 2, 99] {
        let err = set.contains(&1, Some(v)).expect_err("no such version");
        assert!(matches!(err, PdsError::NoSuchVersion { version, latest: 1, .. } if version == v), "{err}");
    }
    assert_eq!(set.delete(&5).expect("absent"), 1, "deleting an absent key is a no-op");
    assert_eq!(set.insert(&1).expect("dup"), 1, "a duplicate insert is a no-op");
    assert_eq!(set.latest().expect("latest"), 1);
}
