#![allow(clippy::doc_markdown, reason = "the paper's terms and file names in prose")]
//! Retention of K versions, bounded reads per node visit (no log scans,
//! §IV-B C2), and corrupted entries reported with their log and seq.

use std::sync::Arc;

use varve_log::{Limits, LogConfig, MemoryNamespace, Namespace};
use varve_pds::testing::CountingNamespace;
use varve_pds::{Options, PdsError, SortedSet, Structure, VersionedList};

fn memory() -> Arc<dyn Namespace> {
    Arc::new(MemoryNamespace::new("limits", Limits::default()))
}

#[test]
fn a_full_structure_refuses_updates_and_reads_go_on() {
    let ns = memory();
    let mut set = SortedSet::<u64>::open(ns.clone(), "k", Options { extra: 2, keep: Some(3), ..Options::default() })
        .expect("open");
    for k in [1, 2, 3] {
        set.insert(&k).expect("insert");
    }
    let logs_before = ns.list_logs().expect("list");
    let err = set.insert(&4).expect_err("full");
    assert!(matches!(err, PdsError::RetentionFull { keep: 3, .. }), "{err}");
    assert!(err.to_string().contains("keeps 3 versions"), "{err}");
    assert!(matches!(set.delete(&1), Err(PdsError::RetentionFull { .. })));
    assert_eq!(ns.list_logs().expect("list"), logs_before, "nothing written when refused");
    assert_eq!(set.iter(None).expect("read").collect::<Vec<_>>(), vec![1, 2, 3]);
    assert!(set.contains(&2, Some(2)).expect("read"));
    // Reopening with another retention is a clear error.
    let err = SortedSet::<u64>::open(ns, "k", Options { extra: 2, keep: Some(4), ..Options::default() })
        .err()
        .expect("mismatch");
    assert!(matches!(err, PdsError::ConfigMismatch { .. }), "{err}");
}

/// Reads per node visited stay within 1 DataLog get + 1 LinkLog latest +
/// (o + extra) LinkLog gets, however long the logs grow.
#[test]
fn a_find_reads_a_bounded_number_of_entries_per_node() {
    for extra in [1u32, 5, 10] {
        // List: o = 1. 30 items, then lots of churn at the tail to grow logs.
        let counting = CountingNamespace::new(memory());
        let mut list =
            VersionedList::<u64>::open(counting.clone(), "l", Options { extra, keep: None, ..Options::default() })
                .expect("open");
        for k in 0..30 {
            list.push_back(&k).expect("push");
        }
        for round in 0..60 {
            list.push_back(&(100 + round)).expect("push");
            list.remove(&(100 + round)).expect("remove");
        }
        for v in [30, 90, list.latest().expect("latest")] {
            let before = counting.reads();
            assert_eq!(list.last(Some(v)).expect("last"), Some(29));
            let reads = counting.reads() - before;
            let bound = 30 * (2 + 1 + u64::from(extra)) + 2;
            assert!(reads <= bound, "list extra {extra} version {v}: {reads} reads > {bound}");
        }
        // Paper BST with sorted inserts: a chain, so last() visits every node.
        let counting = CountingNamespace::new(memory());
        let mut bst = SortedSet::<u64>::open_as(
            counting.clone(),
            "b",
            Structure::Bst,
            Options { extra, keep: None, ..Options::default() },
        )
        .expect("open");
        for k in 0..25 {
            bst.insert(&k).expect("insert");
        }
        for _ in 0..40 {
            bst.insert(&1000).expect("insert");
            bst.delete(&1000).expect("delete");
        }
        let before = counting.reads();
        assert_eq!(bst.last(None).expect("last"), Some(24));
        let reads = counting.reads() - before;
        let bound = 25 * (2 + 2 + u64::from(extra)) + 2;
        assert!(reads <= bound, "bst extra {extra}: {reads} reads > {bound}");
        // Balanced: a find visits at most 2·log2(n+1) nodes.
        let counting = CountingNamespace::new(memory());
        let mut rb = SortedSet::<u64>::open(counting.clone(), "r", Options { extra, keep: None, ..Options::default() })
            .expect("open");
        for k in 0..255 {
            rb.insert(&k).expect("insert");
        }
        for k in 0..255 {
            let before = counting.reads();
            assert!(rb.contains(&k, None).expect("contains"));
            let reads = counting.reads() - before;
            let bound = 16 * (2 + 3 + u64::from(extra)) + 2;
            assert!(reads <= bound, "balanced extra {extra} key {k}: {reads} reads > {bound}");
        }
        assert_eq!(counting.counts().scans, 0, "structures never scan a log");
    }
}

#[test]
fn corrupted_entries_are_typed_errors_naming_log_and_seq() {
    let ns = memory();
    let mut set = SortedSet::<u64>::open_as(ns.clone(), "c", Structure::Bst, Options::default()).expect("open");
    set.insert(&1).expect("insert");
    // A garbage APLog record: reading that version names the APLog and seq 2.
    ns.append("pds.c.ap", b"garbage").expect("append");
    let err = set.iter(Some(2)).err().expect("corrupt");
    assert!(matches!(&err, PdsError::Corrupt { log, seq: 2, .. } if log == "pds.c.ap"), "{err}");
    // An APLog entry pointing at a garbage DataLog record.
    let ns = memory();
    let mut set = SortedSet::<u64>::open_as(ns.clone(), "d", Structure::Bst, Options::default()).expect("open");
    set.insert(&1).expect("insert");
    ns.append("pds.d.data", b"\x01garbage").expect("append");
    let mut ap = vec![1u8];
    for x in [2u64, 2, 1] {
        ap.extend_from_slice(&x.to_le_bytes());
    }
    ns.append("pds.d.ap", &ap).expect("append");
    let err = set.contains(&1, Some(2)).expect_err("corrupt");
    assert!(matches!(&err, PdsError::Corrupt { log, seq: 2, .. } if log == "pds.d.data"), "{err}");
    // Version 1 still reads.
    assert!(set.contains(&1, Some(1)).expect("read"));
    // A structure name that cannot make valid log names is refused up front.
    ns.create_log("x", LogConfig::unbounded()).expect("create");
    assert!(SortedSet::<u64>::open(ns, "bad name", Options::default()).is_err());
}

#[test]
fn a_structure_name_too_long_says_so_in_the_users_terms() {
    let longest = "n".repeat(varve_pds::STRUCTURE_NAME_BYTES_MAX);
    SortedSet::<u64>::open(memory(), &longest, Options::default()).expect("the longest name works");
    let name = "n".repeat(varve_pds::STRUCTURE_NAME_BYTES_MAX + 1);
    let err = SortedSet::<u64>::open(memory(), &name, Options::default()).err().expect("too long");
    let message = err.to_string();
    assert!(message.contains("structure name") && message.contains("at most 170"), "{message}");
    assert!(!message.contains("18446744073709551615"), "names no internal log: {message}");
    let err = SortedSet::<u64>::open(memory(), "bad name", Options::default()).err().expect("invalid");
    assert!(err.to_string().contains("\"bad name\""), "{err}");
}
