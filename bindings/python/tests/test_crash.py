"""Reopen after the process ends: a child writes with sync="always" and is
SIGKILLed; the parent finds every acknowledged record, in order, and the
batches whole."""

from pathlib import Path

from crashkit import kill_after_acks

import varve

WRITER = Path(__file__).with_name("crash_writer.py")


def test_sigkilled_writer_leaves_a_prefix(tmp_path):
    acknowledged = 0
    for round_ in range(3):
        acknowledged = max([acknowledged, *kill_after_acks(WRITER, tmp_path, 50 + 20 * round_, 30)])
        with varve.open(tmp_path) as store:
            ns = store.namespace("crash")
            a, b = ns.log("a"), ns.log("b")
            assert a.latest >= acknowledged, "every acknowledged append survives"
            records = [int(r) for _, r in a.scan()]
            assert records == list(range(1, a.latest + 1)), "a prefix, in order, seqs dense"
            # Every third record went in a batch with one in b: both or neither.
            assert [int(r) for _, r in b.scan()] == [i for i in records if i % 3 == 0]
