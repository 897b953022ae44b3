//! A run is replayed at its first write the repair changes, after the walk
//! passed the writes it leaves as they were: the replay must still see the
//! history the run saw at its first write (a scan reads no further), not
//! the walk's later position. Each case is checked against what a run from
//! scratch with the correction computes.

use std::sync::Arc;
use std::time::Duration;

mod common;
mod overlap;

use common::{hash, value};
use overlap::{by_name, every_event, rec, records, repair, start, Gate, Subscribed, WAIT};
use varve_log::{MemoryStore, SeqRange, Store};
use varve_runtime::{HandlerContext, HandlerFn};

/// A handler on `start` that scans the whole of `in`, appends `out` from
/// the scan (a write the repair leaves: it read nothing that changes), is
/// held while `in:2` lands, reads `read` and appends `out` again from the
/// scan's sum and what it read.
fn scan_then_read(gate: &Gate, read: (&'static str, u64)) -> Subscribed {
    let gate = gate.clone();
    let f: HandlerFn = Arc::new(move |ctx: &mut HandlerContext<'_>| {
        let sum: u64 = ctx.scan("in", SeqRange::ALL)?.iter().map(|r| value(&r.value)).sum();
        ctx.append("out", &hash(&[1, value(ctx.record()), sum]).to_le_bytes())?;
        gate.hold(ctx)?;
        let got = ctx.get(read.0, read.1)?;
        ctx.append("out", &hash(&[2, value(ctx.record()), sum, value(&got)]).to_le_bytes())?;
        Ok(())
    });
    ("run", "start", f)
}

/// Runs the app (`cfg:1` = 5, `in:1` = 10, `start:1` = 7, then `in:2` = 20
/// while the run is held), corrects `record` to `value` from every event,
/// and returns `out`.
fn repaired_out(read: (&'static str, u64), record: (&str, u64), value: u64) -> (Vec<u64>, Vec<u64>) {
    let ns = MemoryStore::new().namespace("app").expect("ns");
    let gate = Gate::default();
    let handlers = [scan_then_read(&gate, read)];
    let runtime = start(&ns, 1, &["start", "in", "cfg", "out"], &handlers);
    runtime.append("cfg", &5u64.to_le_bytes()).expect("cfg:1");
    runtime.append("in", &10u64.to_le_bytes()).expect("in:1");
    runtime.append("start", &7u64.to_le_bytes()).expect("start:1");
    gate.until_held();
    runtime.append("in", &20u64.to_le_bytes()).expect("in:2");
    gate.release();
    assert!(runtime.wait_idle(WAIT), "idle");
    runtime.stop(Duration::from_secs(5));
    let before = records(&ns, "out");
    let events = every_event(&[&ns]);
    repair(&events, &[(rec("app", record.0, record.1), value)], &[&ns], &by_name(&handlers)).expect("repair");
    (before, records(&ns, "out"))
}

/// The replay happens at out:2, where the walk has passed in:2 (the
/// corrected record, which the run reads by seq): its scan must still
/// return in:1 alone, as it did when the run first appended.
#[test]
fn a_scan_before_a_kept_append_sees_only_what_the_run_saw() {
    let (before, after) = repaired_out(("in", 2), ("in", 2), 21);
    assert_eq!(before, [hash(&[1, 7, 10]), hash(&[2, 7, 10, 20])], "the original run");
    assert_eq!(
        after,
        [hash(&[1, 7, 10]), hash(&[2, 7, 10, 21])],
        "out:2 follows the correction, from the history the run saw (not {})",
        hash(&[2, 7, 31, 21])
    );
}

/// Replayed at out:2, after in:2's APPEND (unrelated to the correction of
/// `cfg:1`): the replayed scan must return in:1 alone, as it did when the
/// run first appended.
#[test]
fn a_run_replayed_late_does_not_read_a_later_tail() {
    let (before, after) = repaired_out(("cfg", 1), ("cfg", 1), 6);
    assert_eq!(before, [hash(&[1, 7, 10]), hash(&[2, 7, 10, 5])], "the original run");
    assert_eq!(
        after,
        [hash(&[1, 7, 10]), hash(&[2, 7, 10, 6])],
        "out:2 from the tail the run saw and the corrected cfg:1 (not {})",
        hash(&[2, 7, 30, 6])
    );
}
