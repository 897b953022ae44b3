//! The conformance suite: the Log contract as executable checks, written once
//! and run against every backend.
//!
//! A backend runs the whole suite with one line in its tests:
//!
//! ```text
//! varve_log::conformance_suite!(|| my_backend_fresh_namespace());
//! ```
//!
//! where the closure returns a [`Fixture`]: a fresh, empty namespace plus
//! whatever must stay alive while it is used (a temporary directory, a server).

#![expect(clippy::missing_panics_doc, reason = "the checks are test assertions: panicking is how they fail")]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crate::contract::{LogConfig, Namespace, OnFull, SeqRange};
use crate::error::LogError;

/// A fresh namespace for one check, and what keeps it alive.
pub struct Fixture {
    /// The namespace under test: fresh, holding no log.
    pub namespace: Arc<dyn Namespace>,
    /// What `namespace` needs alive (a temporary directory, a server). Fields
    /// drop in declaration order, so this outlives `namespace`: keep it last.
    pub keep_alive: Box<dyn std::any::Any>,
}

/// Expand to one `#[test]` per check, each on a fresh fixture from `$make`.
#[macro_export]
macro_rules! conformance_suite {
    ($make:expr) => {
        $crate::conformance_suite!(core: $make);
        $crate::conformance_suite!(@tests $make; conditional_batches_land_only_where_expected);
        $crate::conformance_suite!(renames: $make);
        $crate::conformance_suite!(trims: $make);
    };
    // Every check, but for a backend that cannot rename atomically: it
    // must refuse every rename with `Unsupported` and change nothing.
    (without_renames: $make:expr) => {
        $crate::conformance_suite!(core: $make);
        $crate::conformance_suite!(@tests $make; conditional_batches_land_only_where_expected,
            renames_are_refused_as_unsupported);
        $crate::conformance_suite!(trims: $make);
    };
    // `trim` (contract rule 8).
    (trims: $make:expr) => {
        $crate::conformance_suite!(@tests $make;
            trim_removes_records_below_a_seq_for_good, refused_trims_change_nothing,
            trims_and_overwrite_retention_agree);
    };
    // `rename_logs` (contract rule 7).
    (renames: $make:expr) => {
        $crate::conformance_suite!(@tests $make;
            rename_moves_a_log_with_its_records, rename_swaps_logs_in_one_call,
            rename_shifts_generations_in_one_call, refused_renames_change_nothing,
            watches_and_scans_follow_a_renamed_log);
    };
    // Every check but conditional batches (`append_batch_if`); the other
    // arms add them.
    (core: $make:expr) => {
        $crate::conformance_suite!(@tests $make;
            empty_log_has_no_records, seqs_are_dense_from_one, create_is_idempotent_for_same_config,
            names_are_validated, unknown_logs_are_not_found, batches_are_atomic_across_logs,
            bad_batches_are_refused, append_if_detects_conflicts, refuse_retention_fills_then_refuses,
            overwrite_retention_trims_oldest, scans_clip_to_existing_range, watch_yields_existing_then_new,
            delete_log_removes_it_and_frees_the_name, list_logs_reports_bounds, concurrent_appenders_get_distinct_seqs,
            empty_records_are_records, readers_see_consistent_prefixes, large_records_round_trip,
            values_round_trip_exactly);
    };
    (@tests $make:expr; $($check:ident),* $(,)?) => {
        $(
            #[test]
            fn $check() {
                let fixture: $crate::conformance::Fixture = ($make)();
                $crate::conformance::$check(&*fixture.namespace);
            }
        )*
    };
}

fn value(log: &str, seq: u64) -> Vec<u8> {
    format!("{log}#{seq}").into_bytes()
}

/// Rule 1: a new log is empty: `latest` and `earliest` are 0, `get` of seq 0
/// or 1 is `SeqNotFound`, and a scan yields nothing.
pub fn empty_log_has_no_records(ns: &dyn Namespace) {
    ns.create_log("a", LogConfig::unbounded()).expect("create");
    assert_eq!(ns.latest("a").expect("latest"), 0);
    assert_eq!(ns.earliest("a").expect("earliest"), 0);
    assert!(matches!(ns.get("a", 1), Err(LogError::SeqNotFound { seq: 1, latest: 0, .. })));
    assert!(matches!(ns.get("a", 0), Err(LogError::SeqNotFound { seq: 0, .. })));
    assert_eq!(ns.scan("a", SeqRange::ALL).expect("scan").count(), 0);
}

/// Rule 1: appends take seqs 1, 2, 3, …, each reads back its own value, and
/// `get` past the latest seq is `SeqNotFound`.
pub fn seqs_are_dense_from_one(ns: &dyn Namespace) {
    ns.create_log("a", LogConfig::unbounded()).expect("create");
    for seq in 1..=100 {
        assert_eq!(ns.append("a", &value("a", seq)).expect("append"), seq);
    }
    for seq in 1..=100 {
        assert_eq!(ns.get("a", seq).expect("get"), value("a", seq));
    }
    assert_eq!((ns.earliest("a").expect("e"), ns.latest("a").expect("l")), (1, 100));
    assert!(matches!(ns.get("a", 101), Err(LogError::SeqNotFound { seq: 101, latest: 100, .. })));
}

/// `create_log` again with the same config is a no-op that keeps the records;
/// with another config it is `AlreadyExists`; `keep 0` is `InvalidArgument`.
pub fn create_is_idempotent_for_same_config(ns: &dyn Namespace) {
    let config = LogConfig::keep(5, OnFull::Overwrite);
    ns.create_log("a", config).expect("create");
    ns.append("a", b"x").expect("append");
    ns.create_log("a", config).expect("same config again is fine");
    let err = ns.create_log("a", LogConfig::unbounded()).expect_err("different config");
    assert!(matches!(err, LogError::AlreadyExists { .. }), "{err}");
    assert!(err.to_string().contains("already exists"));
    assert_eq!(ns.get("a", 1).expect("data kept"), &b"x"[..]);
    assert_eq!(ns.log_info("a").expect("info").config, config);
    let err = ns.create_log("z", LogConfig::keep(0, OnFull::Refuse)).expect_err("keep 0");
    assert!(matches!(err, LogError::InvalidArgument { .. }), "{err}");
}

/// Rule 5: empty names, names over 200 bytes, `.`, `..`, characters outside
/// `[A-Za-z0-9_.-]` and a `_` prefix without [`LogConfig::system`] are
/// `InvalidName`; the allowed edge cases are created.
pub fn names_are_validated(ns: &dyn Namespace) {
    let long = "x".repeat(201);
    for bad in ["", "a/b", "a b", "é", ".", "..", long.as_str(), "_events", "tab\t"] {
        let err = ns.create_log(bad, LogConfig::unbounded()).expect_err(bad);
        assert!(matches!(err, LogError::InvalidName { .. }), "{bad:?}: {err}");
    }
    ns.create_log(&"y".repeat(200), LogConfig::unbounded()).expect("200 bytes is allowed");
    ns.create_log("A-z_0.9", LogConfig::unbounded()).expect("all allowed characters");
    ns.create_log("_events", LogConfig::unbounded().system()).expect("system may use _ names");
}

/// Every operation on a log that does not exist is `LogNotFound`.
pub fn unknown_logs_are_not_found(ns: &dyn Namespace) {
    let not_found = |r: Result<(), LogError>| matches!(r, Err(LogError::LogNotFound { .. }));
    assert!(not_found(ns.append("nope", b"x").map(drop)));
    assert!(not_found(ns.get("nope", 1).map(drop)));
    assert!(not_found(ns.latest("nope").map(drop)));
    assert!(not_found(ns.earliest("nope").map(drop)));
    assert!(not_found(ns.scan("nope", SeqRange::ALL).map(drop)));
    assert!(not_found(ns.watch("nope", 1).map(drop)));
    assert!(not_found(ns.delete_log("nope")));
    assert!(not_found(ns.append_if("nope", 0, b"x").map(drop)));
}

/// Rule 2: a batch over several logs gives each log consecutive seqs, and a
/// batch with one bad part (an unknown log, a full log) lands nothing.
pub fn batches_are_atomic_across_logs(ns: &dyn Namespace) {
    ns.create_log("a", LogConfig::unbounded()).expect("create");
    ns.create_log("b", LogConfig::unbounded()).expect("create");
    ns.create_log("full", LogConfig::keep(1, OnFull::Refuse)).expect("create");
    let seqs = ns.append_batch(&[("a", b"a1"), ("b", b"b1"), ("a", b"a2")]).expect("batch");
    assert_eq!(seqs, vec![1, 1, 2]);
    assert_eq!(ns.get("a", 2).expect("get"), &b"a2"[..]);
    // A batch with one bad part lands nothing.
    let err = ns.append_batch(&[("a", b"a3"), ("missing", b"m")]).expect_err("unknown log");
    assert!(matches!(err, LogError::LogNotFound { .. }), "{err}");
    ns.append("full", b"f1").expect("fill");
    let err = ns.append_batch(&[("a", b"a3"), ("b", b"b2"), ("full", b"f2")]).expect_err("full");
    assert!(matches!(err, LogError::Full { keep: 1, .. }), "{err}");
    assert_eq!(ns.latest("a").expect("latest"), 2);
    assert_eq!(ns.latest("b").expect("latest"), 1);
    assert_eq!(ns.latest("full").expect("latest"), 1);
}

/// An empty batch is `InvalidArgument`; a record over 16 MiB or a batch of
/// more than 65,536 records is `TooLarge` (the default [`Limits`](crate::Limits));
/// a refused batch changes nothing.
pub fn bad_batches_are_refused(ns: &dyn Namespace) {
    ns.create_log("a", LogConfig::unbounded()).expect("create");
    let err = ns.append_batch(&[]).expect_err("empty");
    assert!(matches!(err, LogError::InvalidArgument { .. }), "{err}");
    let huge = vec![0u8; (16 << 20) + 1];
    let err = ns.append("a", &huge).expect_err("too large");
    assert!(matches!(err, LogError::TooLarge { limit, .. } if limit == 16 << 20), "{err}");
    let many: Vec<(&str, &[u8])> = vec![("a", b"x"); 65_537];
    let err = ns.append_batch(&many).expect_err("too many");
    assert!(matches!(err, LogError::TooLarge { .. }), "{err}");
    assert_eq!(ns.latest("a").expect("latest"), 0, "refused batches change nothing");
}

/// `append_if` appends only while the latest seq is the expected one, and is
/// `Conflict { expected, actual }` otherwise.
pub fn append_if_detects_conflicts(ns: &dyn Namespace) {
    ns.create_log("a", LogConfig::unbounded()).expect("create");
    assert_eq!(ns.append_if("a", 0, b"first").expect("first"), 1);
    let err = ns.append_if("a", 0, b"stale").expect_err("stale");
    assert!(matches!(err, LogError::Conflict { expected: 0, actual: 1, .. }), "{err}");
    assert_eq!(ns.append_if("a", 1, b"second").expect("second"), 2);
    assert_eq!(ns.latest("a").expect("latest"), 2);
    assert_eq!(ns.get("a", 2).expect("get"), &b"second"[..]);
}

/// `append_batch_if` appends the whole batch while every expected latest
/// holds, and nothing (`Conflict` for the first that does not) otherwise;
/// expecting a log the batch does not write is `InvalidArgument`.
pub fn conditional_batches_land_only_where_expected(ns: &dyn Namespace) {
    ns.create_log("a", LogConfig::unbounded()).expect("create a");
    ns.create_log("b", LogConfig::unbounded()).expect("create b");
    ns.append("a", b"a1").expect("append");
    let seqs = ns.append_batch_if(&[("a", b"a2"), ("b", b"b1"), ("a", b"a3")], &[("a", 1), ("b", 0)]).expect("holds");
    assert_eq!(seqs, vec![2, 1, 3]);
    let err = ns.append_batch_if(&[("a", b"x"), ("b", b"y")], &[("a", 3), ("b", 0)]).expect_err("b moved on");
    assert!(matches!(&err, LogError::Conflict { log, expected: 0, actual: 1 } if log == "b"), "{err}");
    assert_eq!((ns.latest("a").expect("a"), ns.latest("b").expect("b")), (3, 1), "a refused batch appends nothing");
    let err = ns.append_batch_if(&[("a", b"x")], &[("b", 1)]).expect_err("b is not in the batch");
    assert!(matches!(err, LogError::InvalidArgument { .. }), "{err}");
    // Logs the batch writes but does not expect are appended to wherever they end.
    assert_eq!(ns.append_batch_if(&[("a", b"a4"), ("b", b"b2")], &[("a", 3)]).expect("holds"), vec![4, 2]);
    assert_eq!(ns.get("b", 2).expect("get"), &b"b2"[..]);
    let err = ns.append_batch_if(&[("missing", b"x")], &[("missing", 0)]).expect_err("unknown log");
    assert!(matches!(err, LogError::LogNotFound { .. }), "{err}");
}

/// Rule 3: a `Keep { k, Refuse }` log takes k records, then fails appends
/// (single or batched) with `Full` while reads go on.
pub fn refuse_retention_fills_then_refuses(ns: &dyn Namespace) {
    ns.create_log("r", LogConfig::keep(3, OnFull::Refuse)).expect("create");
    for seq in 1..=3 {
        assert_eq!(ns.append("r", &value("r", seq)).expect("append"), seq);
    }
    let err = ns.append("r", b"4").expect_err("full");
    assert!(matches!(err, LogError::Full { keep: 3, .. }), "{err}");
    assert!(err.to_string().contains("full"));
    let err = ns.append_batch(&[("r", b"4")]).expect_err("full via batch");
    assert!(matches!(err, LogError::Full { .. }));
    for seq in 1..=3 {
        assert_eq!(ns.get("r", seq).expect("reads go on"), value("r", seq));
    }
    assert_eq!(ns.latest("r").expect("latest"), 3);
}

/// Rule 3: a `Keep { k, Overwrite }` log keeps its newest k records without
/// reusing seqs, reads a trimmed seq as `Trimmed { earliest }`, and keeps only
/// the last k records of a batch larger than k.
pub fn overwrite_retention_trims_oldest(ns: &dyn Namespace) {
    ns.create_log("o", LogConfig::keep(3, OnFull::Overwrite)).expect("create");
    for seq in 1..=10 {
        assert_eq!(ns.append("o", &value("o", seq)).expect("append"), seq, "seqs never reused");
    }
    assert_eq!((ns.earliest("o").expect("e"), ns.latest("o").expect("l")), (8, 10));
    let err = ns.get("o", 7).expect_err("trimmed");
    assert!(matches!(err, LogError::Trimmed { seq: 7, earliest: 8, .. }), "{err}");
    assert!(matches!(ns.scan("o", SeqRange::from(1..)), Err(LogError::Trimmed { earliest: 8, .. })));
    let seqs: Vec<u64> = ns.scan("o", SeqRange::from(8..)).expect("scan").map(|r| r.expect("record").seq).collect();
    assert_eq!(seqs, vec![8, 9, 10]);
    // A batch larger than k keeps only its last k records.
    let batch: Vec<(&str, &[u8])> = vec![("o", b"x"); 5];
    assert_eq!(ns.append_batch(&batch).expect("batch"), vec![11, 12, 13, 14, 15]);
    assert_eq!(ns.earliest("o").expect("earliest"), 13);
}

/// A scan yields the seqs of its range that exist, in order, whichever kind of
/// Rust range it was built from; a range with `first > last` is `InvalidArgument`.
pub fn scans_clip_to_existing_range(ns: &dyn Namespace) {
    ns.create_log("a", LogConfig::unbounded()).expect("create");
    for seq in 1..=10 {
        ns.append("a", &value("a", seq)).expect("append");
    }
    let seqs =
        |range: SeqRange| -> Vec<u64> { ns.scan("a", range).expect("scan").map(|r| r.expect("record").seq).collect() };
    assert_eq!(seqs(SeqRange::from(3..=5)), vec![3, 4, 5]);
    assert_eq!(seqs(SeqRange::from(3..5)), vec![3, 4]);
    assert_eq!(seqs(SeqRange::from(8..)), vec![8, 9, 10]);
    assert_eq!(seqs(SeqRange::from(9..=1000)), vec![9, 10]);
    assert!(seqs(SeqRange::from(11..)).is_empty());
    assert_eq!(seqs(SeqRange::ALL).len(), 10);
    for record in ns.scan("a", SeqRange::ALL).expect("scan") {
        let record = record.expect("record");
        assert_eq!(record.value, value("a", record.seq));
    }
    assert!(matches!(ns.scan("a", SeqRange { first: 5, last: 4 }), Err(LogError::InvalidArgument { .. })));
}

/// A watch yields the existing records from its start, times out while nothing
/// is new, then yields records appended by another thread as they land.
pub fn watch_yields_existing_then_new(ns: &dyn Namespace) {
    ns.create_log("w", LogConfig::unbounded()).expect("create");
    for seq in 1..=3 {
        ns.append("w", &value("w", seq)).expect("append");
    }
    let mut watch = ns.watch("w", 2).expect("watch");
    assert_eq!(watch.next().expect("some").expect("ok").seq, 2);
    assert_eq!(watch.next().expect("some").expect("ok").seq, 3);
    assert!(watch.next_timeout(Duration::from_millis(20)).expect("ok").is_none(), "nothing new yet");
    std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(30));
            ns.append("w", &value("w", 4)).expect("append");
            ns.append("w", &value("w", 5)).expect("append");
        });
        for seq in 4..=5 {
            let record = watch.next_timeout(Duration::from_secs(10)).expect("ok").expect("arrives");
            assert_eq!((record.seq, record.value.to_vec()), (seq, value("w", seq)));
        }
    });
    assert_eq!(watch.next_seq(), 6);
}

/// `delete_log` removes the log and its records, leaves the other logs alone,
/// and frees the name for a new log (with any config) whose seqs start at 1.
pub fn delete_log_removes_it_and_frees_the_name(ns: &dyn Namespace) {
    ns.create_log("d", LogConfig::unbounded()).expect("create");
    ns.create_log("other", LogConfig::unbounded()).expect("create");
    ns.append("d", b"old").expect("append");
    ns.append("other", b"kept").expect("append");
    ns.delete_log("d").expect("delete");
    assert!(matches!(ns.get("d", 1), Err(LogError::LogNotFound { .. })));
    assert!(!ns.list_logs().expect("list").iter().any(|l| l.name == "d"));
    ns.create_log("d", LogConfig::keep(2, OnFull::Refuse)).expect("recreate with another config");
    assert_eq!(ns.latest("d").expect("latest"), 0);
    assert_eq!(ns.append("d", b"new").expect("append"), 1);
    assert_eq!(ns.get("d", 1).expect("get"), &b"new"[..]);
    assert_eq!(ns.get("other", 1).expect("other log untouched"), &b"kept"[..]);
}

/// `list_logs` returns every log in name order, with its `earliest`, `latest`
/// and length.
pub fn list_logs_reports_bounds(ns: &dyn Namespace) {
    ns.create_log("b", LogConfig::keep(2, OnFull::Overwrite)).expect("create");
    ns.create_log("a", LogConfig::unbounded()).expect("create");
    for _ in 0..5 {
        ns.append("b", b"x").expect("append");
    }
    let logs = ns.list_logs().expect("list");
    let names: Vec<&str> = logs.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!((logs[0].earliest, logs[0].latest, logs[0].len()), (0, 0, 0));
    assert_eq!((logs[1].earliest, logs[1].latest, logs[1].len()), (4, 5, 2));
}

/// Appends from 4 threads at once each land exactly once, on distinct seqs
/// that stay dense.
pub fn concurrent_appenders_get_distinct_seqs(ns: &dyn Namespace) {
    ns.create_log("c", LogConfig::unbounded()).expect("create");
    let threads = 4;
    let per_thread = 100;
    std::thread::scope(|scope| {
        for t in 0..threads {
            scope.spawn(move || {
                for i in 0..per_thread {
                    ns.append("c", format!("{t}-{i}").as_bytes()).expect("append");
                }
            });
        }
    });
    assert_eq!(ns.latest("c").expect("latest"), threads * per_thread);
    let seen: BTreeSet<Vec<u8>> =
        ns.scan("c", SeqRange::ALL).expect("scan").map(|r| r.expect("r").value.to_vec()).collect();
    assert_eq!(seen.len() as u64, threads * per_thread, "every append landed exactly once");
}

/// A zero-byte record takes a seq and reads back empty.
pub fn empty_records_are_records(ns: &dyn Namespace) {
    ns.create_log("e", LogConfig::unbounded()).expect("create");
    assert_eq!(ns.append("e", b"").expect("append"), 1);
    assert_eq!(ns.append("e", b"x").expect("append"), 2);
    assert!(ns.get("e", 1).expect("get").is_empty());
}

/// A reader racing the writer never sees `latest` go back, and can read every
/// seq up to the `latest` it saw.
pub fn readers_see_consistent_prefixes(ns: &dyn Namespace) {
    ns.create_log("p", LogConfig::unbounded()).expect("create");
    let total = 300;
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for seq in 1..=total {
                ns.append("p", &value("p", seq)).expect("append");
            }
        });
        scope.spawn(|| {
            let mut last_seen = 0;
            while last_seen < total {
                let latest = ns.latest("p").expect("latest");
                assert!(latest >= last_seen, "latest never goes back");
                for seq in (last_seen + 1)..=latest {
                    assert_eq!(ns.get("p", seq).expect("visible records are readable"), value("p", seq));
                }
                last_seen = latest;
            }
        });
    });
}

/// A 4 MiB record, and one of exactly the default 16 MiB limit, read back
/// byte for byte.
pub fn large_records_round_trip(ns: &dyn Namespace) {
    ns.create_log("big", LogConfig::unbounded()).expect("create");
    let big: Vec<u8> = (0..(4 << 20)).map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let seq = ns.append("big", &big).expect("append 4 MiB");
    assert_eq!(ns.get("big", seq).expect("get"), big);
    let limit = vec![7u8; 16 << 20];
    let seq = ns.append("big", &limit).expect("exactly the limit is allowed");
    assert_eq!(ns.get("big", seq).expect("get").len(), 16 << 20);
}

/// Values with zero bytes, every byte value and line-ending bytes read back
/// unchanged, in order.
pub fn values_round_trip_exactly(ns: &dyn Namespace) {
    ns.create_log("v", LogConfig::unbounded()).expect("create");
    let values: Vec<Vec<u8>> = vec![vec![0, 255, 0], (0..=255).collect(), b"\n\r\0".to_vec(), vec![0xff; 1000]];
    for v in &values {
        ns.append("v", v).expect("append");
    }
    let got: Vec<Vec<u8>> = ns.scan("v", SeqRange::ALL).expect("scan").map(|r| r.expect("r").value.to_vec()).collect();
    assert_eq!(got, values);
}

/// One log as [`snapshot`] sees it: name, config, earliest, latest, records.
type LogSnapshot = (String, crate::contract::LogConfig, u64, u64, Vec<Vec<u8>>);

/// A refused rename and the check its error must pass.
type Refusal<'a> = (Vec<(&'a str, &'a str)>, fn(&LogError) -> bool);

/// Every log's `(name, config, earliest, latest)` and records: what a
/// refused rename must leave unchanged.
fn snapshot(ns: &dyn Namespace) -> Vec<LogSnapshot> {
    ns.list_logs()
        .expect("list")
        .into_iter()
        .map(|info| {
            let records = ns.scan(&info.name, SeqRange::from(info.earliest.max(1)..)).expect("scan");
            let records = records.map(|r| r.expect("record").value.to_vec()).collect();
            (info.name, info.config, info.earliest, info.latest, records)
        })
        .collect()
}

fn names(ns: &dyn Namespace) -> Vec<String> {
    ns.list_logs().expect("list").into_iter().map(|info| info.name).collect()
}

/// Rule 7: a renamed log keeps its records, seqs and retention under its
/// new name (`get`, `scan`, `latest`, `earliest`, `log_info`, `list_logs`),
/// appends go on from its latest seq, the old name is `LogNotFound` until a
/// log is created under it again (from seq 1), and other logs are untouched.
pub fn rename_moves_a_log_with_its_records(ns: &dyn Namespace) {
    let config = LogConfig::keep(3, OnFull::Overwrite);
    ns.create_log("a", config).expect("create");
    ns.create_log("other", LogConfig::unbounded()).expect("create");
    for seq in 1..=5 {
        ns.append("a", &value("a", seq)).expect("append");
    }
    ns.append("other", b"o").expect("append");
    ns.rename_logs(&[("a", "b")]).expect("rename");
    assert_eq!(names(ns), ["b", "other"]);
    let info = ns.log_info("b").expect("info");
    assert_eq!((info.name.as_str(), info.config, info.earliest, info.latest), ("b", config, 3, 5));
    assert_eq!((ns.earliest("b").expect("e"), ns.latest("b").expect("l")), (3, 5));
    assert_eq!(ns.get("b", 4).expect("get"), value("a", 4));
    assert!(matches!(ns.get("b", 2), Err(LogError::Trimmed { seq: 2, earliest: 3, .. })));
    let scanned: Vec<(u64, Vec<u8>)> = ns
        .scan("b", SeqRange::from(3..))
        .expect("scan")
        .map(|r| r.expect("r"))
        .map(|r| (r.seq, r.value.to_vec()))
        .collect();
    assert_eq!(scanned, (3..=5).map(|seq| (seq, value("a", seq))).collect::<Vec<_>>());
    for result in [ns.get("a", 4).map(drop), ns.latest("a").map(drop), ns.append("a", b"x").map(drop)] {
        assert!(matches!(result, Err(LogError::LogNotFound { .. })), "{result:?}");
    }
    assert_eq!(ns.append("b", &value("b", 6)).expect("append after the rename"), 6, "seqs go on");
    assert_eq!(ns.append_batch(&[("b", b"7"), ("other", b"o2")]).expect("batch"), vec![7, 2]);
    assert_eq!((ns.earliest("b").expect("e"), ns.latest("b").expect("l")), (5, 7), "retention goes on");
    ns.create_log("a", LogConfig::unbounded()).expect("the old name is free");
    assert_eq!(ns.latest("a").expect("latest"), 0);
    assert_eq!(ns.append("a", b"new a").expect("append"), 1, "a new log under the old name starts at 1");
    assert_eq!(ns.get("b", 5).expect("get"), value("a", 5), "the renamed log is untouched");
    assert_eq!(ns.get("other", 1).expect("other log untouched"), &b"o"[..]);
    ns.create_log("b", config).expect("create under the new name with its config is idempotent");
    ns.rename_logs(&[]).expect("an empty rename is a no-op");
    ns.rename_logs(&[("b", "b")]).expect("renaming a log to its own name is a no-op");
    assert_eq!(names(ns), ["a", "b", "other"]);
    assert_eq!(ns.latest("b").expect("latest"), 7);
}

/// Rule 7: `[(a, b), (b, a)]` swaps two logs in one call, and a three-way
/// rotation is one call too; each keeps its records and config.
pub fn rename_swaps_logs_in_one_call(ns: &dyn Namespace) {
    ns.create_log("a", LogConfig::unbounded()).expect("create");
    ns.create_log("b", LogConfig::keep(10, OnFull::Refuse)).expect("create");
    ns.append_batch(&[("a", b"a1"), ("a", b"a2"), ("b", b"b1")]).expect("batch");
    ns.rename_logs(&[("a", "b"), ("b", "a")]).expect("swap");
    assert_eq!(ns.log_info("a").expect("a").config, LogConfig::keep(10, OnFull::Refuse));
    assert_eq!(ns.log_info("b").expect("b").config, LogConfig::unbounded());
    assert_eq!((ns.latest("a").expect("a"), ns.latest("b").expect("b")), (1, 2));
    assert_eq!(ns.get("a", 1).expect("get"), &b"b1"[..]);
    assert_eq!(ns.get("b", 2).expect("get"), &b"a2"[..]);
    assert_eq!(ns.append("b", b"a3").expect("append"), 3);
    ns.create_log("c", LogConfig::unbounded()).expect("create");
    ns.append("c", b"c1").expect("append");
    ns.rename_logs(&[("a", "b"), ("b", "c"), ("c", "a")]).expect("rotate");
    assert_eq!(names(ns), ["a", "b", "c"]);
    assert_eq!(ns.get("a", 1).expect("get"), &b"c1"[..]);
    assert_eq!(ns.get("b", 1).expect("get"), &b"b1"[..]);
    assert_eq!(ns.get("c", 3).expect("get"), &b"a3"[..]);
}

/// Rule 7, the repair's swap: `readings` → `_gen.readings.1` (kept, as a
/// system log) and `_shadow.readings` → `readings` (now a plain log), in one
/// call; the `system` flag follows each name, so `readings` is created again
/// idempotently with a plain config.
pub fn rename_shifts_generations_in_one_call(ns: &dyn Namespace) {
    ns.create_log("readings", LogConfig::unbounded()).expect("create");
    ns.create_log("_shadow.readings", LogConfig::unbounded().system()).expect("create");
    for seq in 1..=3 {
        ns.append("readings", &value("old", seq)).expect("append");
    }
    for seq in 1..=2 {
        ns.append("_shadow.readings", &value("new", seq)).expect("append");
    }
    ns.rename_logs(&[("readings", "_gen.readings.1"), ("_shadow.readings", "readings")]).expect("shift");
    assert_eq!(names(ns), ["_gen.readings.1", "readings"]);
    let old = ns.log_info("_gen.readings.1").expect("old generation");
    assert_eq!((old.latest, old.config), (3, LogConfig::unbounded().system()));
    assert_eq!(ns.get("_gen.readings.1", 3).expect("get"), value("old", 3));
    let new = ns.log_info("readings").expect("readings");
    assert_eq!((new.latest, new.config), (2, LogConfig::unbounded()));
    assert_eq!(ns.get("readings", 1).expect("get"), value("new", 1));
    ns.create_log("readings", LogConfig::unbounded()).expect("a plain create of readings still matches");
    assert_eq!(ns.append("readings", &value("new", 3)).expect("append"), 3);
    assert!(matches!(ns.log_info("_shadow.readings"), Err(LogError::LogNotFound { .. })));
    // A second generation: the shift goes on by one.
    ns.create_log("_shadow.readings", LogConfig::unbounded().system()).expect("create");
    ns.rename_logs(&[("readings", "_gen.readings.2"), ("_shadow.readings", "readings")]).expect("shift again");
    assert_eq!(names(ns), ["_gen.readings.1", "_gen.readings.2", "readings"]);
    assert_eq!(ns.latest("_gen.readings.2").expect("latest"), 3);
    assert_eq!(ns.latest("readings").expect("latest"), 0);
}

/// Rule 7: every refused rename names what was wrong, with the error the
/// contract lists, and changes nothing: not the refused pairs, not the
/// valid pairs of the same call.
pub fn refused_renames_change_nothing(ns: &dyn Namespace) {
    ns.create_log("a", LogConfig::unbounded()).expect("create");
    ns.create_log("b", LogConfig::keep(4, OnFull::Overwrite)).expect("create");
    ns.create_log("c", LogConfig::unbounded()).expect("create");
    ns.append_batch(&[("a", b"a1"), ("b", b"b1"), ("c", b"c1")]).expect("batch");
    let before = snapshot(ns);
    let long = "x".repeat(201);
    let too_many: Vec<(String, String)> =
        (0..=crate::RENAMES_PER_CALL_MAX).map(|i| (format!("n{i}"), format!("m{i}"))).collect();
    let too_many: Vec<(&str, &str)> = too_many.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let refusals: Vec<Refusal<'_>> = vec![
        (vec![("a", "z"), ("missing", "y")], |e| matches!(e, LogError::LogNotFound { log, .. } if log == "missing")),
        (
            vec![("a", "z"), ("b", "c")],
            |e| matches!(e, LogError::RenameTargetExists { from, to, .. } if from == "b" && to == "c"),
        ),
        (vec![("a", "b")], |e| matches!(e, LogError::RenameTargetExists { .. })),
        (vec![("a", "x"), ("a", "y")], |e| matches!(e, LogError::InvalidArgument { .. })),
        (vec![("a", "x"), ("b", "x")], |e| matches!(e, LogError::InvalidArgument { .. })),
        (vec![("a", "z"), ("b", "a/b")], |e| matches!(e, LogError::InvalidName { .. })),
        (vec![("a", "")], |e| matches!(e, LogError::InvalidName { .. })),
        (vec![("a", "..")], |e| matches!(e, LogError::InvalidName { .. })),
        (vec![("a", long.as_str())], |e| matches!(e, LogError::InvalidName { .. })),
        (vec![("a b", "z")], |e| matches!(e, LogError::InvalidName { .. })),
        (too_many, |e| matches!(e, LogError::InvalidArgument { .. })),
    ];
    for (renames, expected) in refusals {
        let shown: Vec<_> = renames.iter().take(3).collect();
        let err = ns.rename_logs(&renames).expect_err(&format!("{shown:?} is refused"));
        assert!(expected(&err), "{shown:?}: {err}");
        assert!(!err.to_string().is_empty());
        assert_eq!(snapshot(ns), before, "{shown:?}: a refused rename changes nothing");
    }
    let err = ns.rename_logs(&[("a", "c")]).expect_err("c exists");
    let message = err.to_string();
    assert!(message.contains("\"c\"") && message.contains("same call"), "says what to do: {message}");
    // The valid part of a refused call can still be done on its own.
    ns.rename_logs(&[("a", "z")]).expect("rename");
    assert_eq!(names(ns), ["b", "c", "z"]);
}

/// Rule 7: a watch opened before a rename follows the log it opened (now
/// under the new name), never the log renamed into its old name; a scan
/// opened before goes on reading the log it opened.
pub fn watches_and_scans_follow_a_renamed_log(ns: &dyn Namespace) {
    ns.create_log("w", LogConfig::unbounded()).expect("create");
    ns.create_log("_shadow.w", LogConfig::unbounded().system()).expect("create");
    for seq in 1..=3 {
        ns.append("w", &value("w", seq)).expect("append");
    }
    ns.append("_shadow.w", b"shadow").expect("append");
    let mut watch = ns.watch("w", 2).expect("watch");
    assert_eq!(watch.next_timeout(Duration::from_secs(10)).expect("ok").expect("record").seq, 2);
    let mut scan = ns.scan("w", SeqRange::from(1..=3)).expect("scan");
    assert_eq!(scan.next().expect("some").expect("record").value, value("w", 1));
    ns.rename_logs(&[("w", "_gen.w.1"), ("_shadow.w", "w")]).expect("shift");
    assert_eq!(scan.next().expect("some").expect("record").value, value("w", 2), "the scan reads the log it opened");
    assert_eq!(scan.next().expect("some").expect("record").value, value("w", 3));
    assert!(scan.next().is_none());
    drop(scan);
    let record = watch.next_timeout(Duration::from_secs(10)).expect("ok").expect("record 3");
    assert_eq!((record.seq, record.value.to_vec()), (3, value("w", 3)));
    // The log now named `w` gets a record 2: the watch must not see it.
    ns.append("w", b"not for the watch").expect("append");
    ns.append("_gen.w.1", &value("w", 4)).expect("append");
    let record = watch.next_timeout(Duration::from_secs(10)).expect("ok").expect("record 4");
    assert_eq!((record.seq, record.value.to_vec()), (4, value("w", 4)), "the watch follows the renamed log");
    assert!(watch.next_timeout(Duration::from_millis(20)).expect("ok").is_none());
}

/// For a backend that cannot rename atomically: every rename is refused with
/// `Unsupported` (saying what to do instead) and changes nothing.
pub fn renames_are_refused_as_unsupported(ns: &dyn Namespace) {
    ns.create_log("a", LogConfig::unbounded()).expect("create");
    ns.append("a", b"a1").expect("append");
    let before = snapshot(ns);
    let err = ns.rename_logs(&[("a", "b")]).expect_err("unsupported");
    assert!(matches!(err, LogError::Unsupported { .. }), "{err}");
    assert!(err.to_string().contains("rename"), "{err}");
    assert_eq!(snapshot(ns), before);
}

/// Rule 8: `trim` removes the records below a seq: `earliest` moves there,
/// reads below it are `Trimmed`, scans start at it, seqs go on; a trim at
/// or below `earliest` is a no-op that returns it; the newest record may
/// be the only one left.
pub fn trim_removes_records_below_a_seq_for_good(ns: &dyn Namespace) {
    ns.create_log("t", LogConfig::unbounded()).expect("create");
    ns.create_log("other", LogConfig::unbounded()).expect("create");
    for seq in 1..=10 {
        ns.append("t", &value("t", seq)).expect("append");
        ns.append("other", &value("other", seq)).expect("append");
    }
    assert_eq!(ns.trim("t", 4).expect("trim"), 4);
    assert_eq!((ns.earliest("t").expect("e"), ns.latest("t").expect("l")), (4, 10));
    let err = ns.get("t", 3).expect_err("trimmed");
    assert!(matches!(err, LogError::Trimmed { seq: 3, earliest: 4, .. }), "{err}");
    assert!(matches!(ns.scan("t", SeqRange::from(1..)), Err(LogError::Trimmed { earliest: 4, .. })));
    let seqs: Vec<u64> = ns.scan("t", SeqRange::from(4..)).expect("scan").map(|r| r.expect("record").seq).collect();
    assert_eq!(seqs, (4..=10).collect::<Vec<_>>());
    assert_eq!(ns.get("t", 4).expect("get").to_vec(), value("t", 4));
    // Repeated, or below: nothing changes.
    assert_eq!(ns.trim("t", 4).expect("again"), 4);
    assert_eq!(ns.trim("t", 2).expect("below"), 4);
    // Other logs are untouched; seqs go on after a trim.
    assert_eq!((ns.earliest("other").expect("e"), ns.latest("other").expect("l")), (1, 10));
    assert_eq!(ns.append("t", &value("t", 11)).expect("append"), 11);
    // Up to the newest record, which stays.
    assert_eq!(ns.trim("t", 11).expect("trim to the newest"), 11);
    let info = ns.log_info("t").expect("info");
    assert_eq!((info.earliest, info.latest, info.len()), (11, 11, 1));
    assert_eq!(ns.get("t", 11).expect("the newest stays").to_vec(), value("t", 11));
    let listed = ns.list_logs().expect("list").into_iter().find(|l| l.name == "t").expect("listed");
    assert_eq!((listed.earliest, listed.latest), (11, 11));
    // A watch from below `earliest` is refused like a scan; from it, it yields.
    let mut watch = ns.watch("t", 11).expect("watch");
    assert_eq!(watch.next_timeout(Duration::from_secs(10)).expect("ok").expect("record").seq, 11);
}

/// Rule 8: a refused trim changes nothing — an unknown log, `before` past
/// the newest record, a log with `Keep { Refuse }` retention.
pub fn refused_trims_change_nothing(ns: &dyn Namespace) {
    ns.create_log("t", LogConfig::unbounded()).expect("create");
    ns.create_log("r", LogConfig::keep(5, OnFull::Refuse)).expect("create");
    for seq in 1..=3 {
        ns.append("t", &value("t", seq)).expect("append");
        ns.append("r", &value("r", seq)).expect("append");
    }
    let before = snapshot(ns);
    let err = ns.trim("missing", 2).expect_err("unknown log");
    assert!(matches!(err, LogError::LogNotFound { .. }), "{err}");
    let err = ns.trim("t", 4).expect_err("past the newest");
    assert!(matches!(err, LogError::InvalidArgument { .. }), "{err}");
    assert!(err.to_string().contains("newest record always stays"), "{err}");
    let err = ns.trim("r", 2).expect_err("refuse retention");
    assert!(matches!(err, LogError::InvalidArgument { .. }), "{err}");
    assert!(err.to_string().contains("keeps its first 5 records"), "{err}");
    ns.create_log("empty", LogConfig::unbounded()).expect("create");
    let err = ns.trim("empty", 1).expect_err("nothing to trim");
    assert!(matches!(err, LogError::InvalidArgument { .. }), "{err}");
    ns.delete_log("empty").expect("delete");
    assert_eq!(snapshot(ns), before);
}

/// Rule 8 with rule 3: on an overwrite log, `earliest` is the higher of
/// what retention keeps and the trim; a trim below what retention already
/// dropped is a no-op.
pub fn trims_and_overwrite_retention_agree(ns: &dyn Namespace) {
    ns.create_log("o", LogConfig::keep(5, OnFull::Overwrite)).expect("create");
    for seq in 1..=8 {
        ns.append("o", &value("o", seq)).expect("append");
    }
    assert_eq!(ns.earliest("o").expect("earliest"), 4);
    assert_eq!(ns.trim("o", 3).expect("below retention"), 4);
    assert_eq!(ns.trim("o", 6).expect("trim"), 6);
    ns.append("o", &value("o", 9)).expect("append");
    assert_eq!(ns.earliest("o").expect("the trim holds"), 6);
    for seq in 10..=12 {
        ns.append("o", &value("o", seq)).expect("append");
    }
    assert_eq!(ns.earliest("o").expect("retention passes the trim"), 8);
    let seqs: Vec<u64> = ns.scan("o", SeqRange::from(8..)).expect("scan").map(|r| r.expect("record").seq).collect();
    assert_eq!(seqs, (8..=12).collect::<Vec<_>>());
}
