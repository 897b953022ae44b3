"""The Log contract from Python: the cases of crates/varve-log/src/conformance.rs."""

import inspect
import threading

import pytest

import varve


def value(log, seq):
    return f"{log}#{seq}".encode()


def test_empty_log_has_no_records(ns):
    a = ns.log("a")
    assert (a.latest, a.earliest, len(a)) == (0, 0, 0)
    with pytest.raises(varve.NotFound) as e:
        a.get(1)
    assert (e.value.log, e.value.seq, e.value.latest) == ("a", 1, 0)
    with pytest.raises(varve.NotFound):
        a.get(0)
    assert list(a.scan()) == []


def test_seqs_are_dense_from_one(ns):
    a = ns.log("a")
    for seq in range(1, 101):
        assert a.append(value("a", seq)) == seq
    for seq in range(1, 101):
        assert a.get(seq) == value("a", seq)
    assert (a.earliest, a.latest, len(a)) == (1, 100, 100)
    with pytest.raises(varve.NotFound) as e:
        a.get(101)
    assert (e.value.seq, e.value.latest) == (101, 100)


def test_create_is_idempotent_for_same_config(ns):
    a = ns.log("a", keep=5, on_full="overwrite")
    a.append(b"x")
    ns.log("a", keep=5, on_full="overwrite")
    assert ns.log("a").get(1) == b"x", "keep=None opens the existing log"
    with pytest.raises(varve.AlreadyExists) as e:
        ns.log("a", keep=6)
    assert "already exists" in str(e.value) and e.value.name == "a"
    assert isinstance(e.value, ValueError)
    assert (a.keep, a.on_full) == (5, "overwrite")
    with pytest.raises(varve.InvalidArgument):
        ns.log("z", keep=0)
    with pytest.raises(ValueError):
        ns.log("z", keep=1, on_full="sometimes")


@pytest.mark.parametrize("bad", ["", "a/b", "a b", "é", ".", "..", "x" * 201, "_events", "tab\t"])
def test_names_are_validated(ns, bad):
    with pytest.raises(varve.InvalidName) as e:
        ns.log(bad)
    assert e.value.name == bad and e.value.reason
    assert isinstance(e.value, ValueError)


def test_valid_names(ns):
    ns.log("y" * 200)
    ns.log("A-z_0.9")


def test_unknown_logs_are_not_found(ns):
    ns.log("nope")
    ns.delete_log("nope")
    # A Log object for a deleted log: every operation is NotFound.
    log = ns.log("gone")
    ns.delete_log("gone")
    for call in [
        lambda: log.append(b"x"),
        lambda: log.get(1),
        lambda: log.latest,
        lambda: log.earliest,
        lambda: log.scan(),
        lambda: log.watch(1),
        lambda: log.append_if(0, b"x"),
        lambda: len(log),
        lambda: ns.delete_log("gone"),
    ]:
        with pytest.raises(varve.NotFound) as e:
            call()
        assert e.value.log == "gone" and e.value.namespace == "test"


def test_batches_are_atomic_across_logs(ns):
    a, b, full = ns.log("a"), ns.log("b"), ns.log("full", keep=1)
    assert ns.append_batch([("a", b"a1"), ("b", b"b1"), ("a", b"a2")]) == [1, 1, 2]
    assert a.get(2) == b"a2"
    assert ns.append_batch({"a": [b"a3", b"a4"], "b": [b"b2"]}) == {"a": [3, 4], "b": [2]}
    with pytest.raises(varve.NotFound):
        ns.append_batch([("a", b"a5"), ("missing", b"m")])
    full.append(b"f1")
    with pytest.raises(varve.Full) as e:
        ns.append_batch({"a": [b"a5"], "b": [b"b3"], "full": [b"f2"]})
    assert (e.value.log, e.value.keep) == ("full", 1)
    assert (a.latest, b.latest, full.latest) == (4, 2, 1)


def test_a_batch_with_expected_lands_only_where_each_log_ends_as_expected(ns):
    a, b = ns.log("a"), ns.log("b")
    a.append(b"a1")
    assert ns.append_batch([("a", b"a2"), ("b", b"b1")], expected={"a": 1, "b": 0}) == [2, 1]
    with pytest.raises(varve.Conflict) as e:
        ns.append_batch({"a": [b"x"], "b": [b"y"]}, expected={"a": 2, "b": 0})
    assert (e.value.log, e.value.expected, e.value.actual) == ("b", 0, 1)
    with pytest.raises(varve.InvalidArgument):
        ns.append_batch([("a", b"x")], expected={"b": 1})
    assert (a.latest, b.latest) == (2, 1), "a refused batch lands nothing"
    assert ns.append_batch({"a": [b"a3"], "b": [b"b2"]}, expected={"a": 2}) == {"a": [3], "b": [2]}


def test_bad_batches_are_refused(ns):
    a = ns.log("a")
    with pytest.raises(varve.InvalidArgument):
        ns.append_batch([])
    with pytest.raises(varve.TooLarge) as e:
        a.append(bytes((16 << 20) + 1))
    assert e.value.limit == 16 << 20 and e.value.size == (16 << 20) + 1
    with pytest.raises(varve.TooLarge):
        ns.append_batch({"a": [b"x"] * 65_537})
    with pytest.raises(TypeError):
        ns.append_batch({"a": ["not bytes"]})
    assert a.latest == 0, "refused batches change nothing"


def test_append_if_detects_conflicts(ns):
    a = ns.log("a")
    assert a.append_if(0, b"first") == 1
    with pytest.raises(varve.Conflict) as e:
        a.append_if(0, b"stale")
    assert (e.value.log, e.value.expected, e.value.actual) == ("a", 0, 1)
    assert a.append_if(1, b"second") == 2
    assert a.get(2) == b"second"


def test_refuse_retention_fills_then_refuses(ns):
    r = ns.log("r", keep=3)
    for seq in range(1, 4):
        assert r.append(value("r", seq)) == seq
    with pytest.raises(varve.Full) as e:
        r.append(b"4")
    assert e.value.keep == 3 and "full" in str(e.value)
    with pytest.raises(varve.Full):
        ns.append_batch([("r", b"4")])
    assert [r.get(s) for s in (1, 2, 3)] == [value("r", s) for s in (1, 2, 3)]


def test_overwrite_retention_trims_oldest(ns):
    o = ns.log("o", keep=3, on_full="overwrite")
    for seq in range(1, 11):
        assert o.append(value("o", seq)) == seq
    assert (o.earliest, o.latest, len(o)) == (8, 10, 3)
    with pytest.raises(varve.Trimmed) as e:
        o.get(7)
    assert (e.value.seq, e.value.earliest) == (7, 8)
    with pytest.raises(varve.Trimmed):
        o.scan(1)
    assert [s for s, _ in o.scan(8)] == [8, 9, 10]
    assert [s for s, _ in o.scan()] == [8, 9, 10], "scan() starts at the earliest kept"
    assert ns.append_batch({"o": [b"x"] * 5}) == {"o": [11, 12, 13, 14, 15]}
    assert o.earliest == 13


def test_trim_removes_records_below_a_seq(ns):
    t = ns.log("t")
    for seq in range(1, 11):
        t.append(value("t", seq))
    assert t.trim(4) == 4
    assert (t.earliest, t.latest, len(t)) == (4, 10, 7)
    with pytest.raises(varve.Trimmed) as e:
        t.get(3)
    assert (e.value.seq, e.value.earliest) == (3, 4)
    assert [s for s, _ in t.scan()] == list(range(4, 11))
    assert t.trim(2) == 4, "below the earliest: nothing changes"
    assert ns.trim("t", 10) == 10, "up to the newest record, which stays"
    assert t.get(10) == value("t", 10)
    assert t.append(b"next") == 11
    with pytest.raises(varve.InvalidArgument, match="newest record always stays"):
        t.trim(99)
    with pytest.raises(varve.InvalidArgument, match="keeps its first 3 records"):
        ns.log("r", keep=3).trim(1)
    with pytest.raises(varve.InvalidArgument, match="runtime's own log"):
        ns.trim("_events", 2)
    with pytest.raises(varve.InvalidArgument, match="is a system log"):
        ns.trim("_repairs", 2)
    with pytest.raises(varve.NotFound):
        ns.trim("missing", 2)


def test_scans_are_half_open_and_clip(ns):
    a = ns.log("a")
    for seq in range(1, 11):
        a.append(value("a", seq))
    seqs = lambda *r: [s for s, _ in a.scan(*r)]  # noqa: E731
    assert seqs(3, 6) == [3, 4, 5]
    assert seqs(3, 5) == [3, 4]
    assert seqs(8) == [8, 9, 10]
    assert seqs(9, 1000) == [9, 10]
    assert seqs(11) == []
    assert seqs(5, 4) == []
    assert len(seqs()) == 10
    for seq, record in a.scan():
        assert record == value("a", seq)
    # Later appends are not part of a running scan.
    scan = a.scan()
    a.append(b"late")
    assert len(list(scan)) == 10


def test_long_scans_cross_batches(ns):
    a = ns.log("a")
    ns.append_batch({"a": [value("a", s) for s in range(1, 1001)]})
    assert [s for s, _ in a.scan(2, 1000)] == list(range(2, 1000))


def test_watch_yields_existing_then_new(ns):
    w = ns.log("w")
    for seq in range(1, 4):
        w.append(value("w", seq))
    watch = w.watch(2)
    assert next(watch)[0] == 2
    assert next(watch)[0] == 3
    assert watch.next(timeout=0.02) is None, "nothing new yet"

    def later():
        import time

        time.sleep(0.03)
        w.append(value("w", 4))
        w.append(value("w", 5))

    t = threading.Thread(target=later)
    t.start()
    assert [next(watch) for _ in range(2)] == [(4, value("w", 4)), (5, value("w", 5))]
    t.join()


def test_delete_log_removes_it_and_frees_the_name(ns):
    d, other = ns.log("d"), ns.log("other")
    d.append(b"old")
    other.append(b"kept")
    ns.delete_log("d")
    with pytest.raises(varve.NotFound):
        d.get(1)
    assert "d" not in [info.name for info in ns.logs()]
    d = ns.log("d", keep=2)
    assert d.latest == 0 and d.append(b"new") == 1 and d.get(1) == b"new"
    assert other.get(1) == b"kept"


def test_logs_report_bounds(ns):
    b = ns.log("b", keep=2, on_full="overwrite")
    ns.log("a")
    for _ in range(5):
        b.append(b"x")
    infos = ns.logs()
    assert [i.name for i in infos] == ["a", "b"]
    assert (infos[0].earliest, infos[0].latest, infos[0].len, infos[0].keep) == (0, 0, 0, None)
    assert (infos[1].earliest, infos[1].latest, infos[1].len, infos[1].keep, infos[1].on_full) == (4, 5, 2, 2, "overwrite")
    assert "LogInfo(name=" in repr(infos[0])


def test_empty_records_are_records(ns):
    e = ns.log("e")
    assert e.append(b"") == 1 and e.append(bytearray(b"x")) == 2
    assert e.get(1) == b""


def test_large_records_round_trip(ns):
    big = bytes(i * 7 % 251 for i in range(4 << 20))
    log = ns.log("big")
    assert log.get(log.append(big)) == big
    assert len(log.get(log.append(bytes(16 << 20)))) == 16 << 20


def test_values_round_trip_exactly(ns):
    v = ns.log("v")
    values = [bytes([0, 255, 0]), bytes(range(256)), b"\n\r\0", b"\xff" * 1000]
    for x in values:
        v.append(x)
    assert [r for _, r in v.scan()] == values


def test_reopen_keeps_everything(tmp_path):
    with varve.open(tmp_path, sync="always") as store:
        log = store.namespace("n").log("a", keep=10, on_full="overwrite")
        for i in range(20):
            log.append(b"%d" % i)
    with varve.open(tmp_path) as store:
        assert store.namespaces() == ["n"]
        log = store.namespace("n").log("a")
        assert (log.earliest, log.latest, log.keep) == (11, 20, 10)
        assert log.get(20) == b"19"


def test_read_only_store_reads_and_refuses_writes(tmp_path):
    with varve.open(tmp_path) as store:
        store.namespace("n").log("a").append(b"x")
    with varve.open(tmp_path, read_only=True) as store:
        log = store.namespace("n").log("a")
        assert log.get(1) == b"x"
        with pytest.raises(varve.ReadOnly):
            log.append(b"y")
        with pytest.raises(varve.NotFound):
            store.namespace("n").log("missing")


def test_overwrite_without_keep_is_refused(ns):
    # A log without keep keeps every record: it is never full, so there is nothing to overwrite.
    rt = ns.runtime(concurrency=1)
    for create in (lambda: ns.log("x", on_full="overwrite"), lambda: rt.create_log("x", on_full="overwrite")):
        with pytest.raises(varve.InvalidArgument) as e:
            create()
        assert isinstance(e.value, ValueError)
        assert "on_full" in str(e.value) and "keep" in str(e.value), str(e.value)
    assert "x" not in [info.name for info in ns.logs()]
    assert ns.log("x", on_full="refuse").keep is None  # the default, harmless


def test_open_limits_are_parameters(tmp_path):
    path = tmp_path / "data"
    defaults = inspect.signature(varve.open).parameters
    assert [defaults[p].default for p in ("record_bytes_max", "batch_bytes_max", "batch_records_max",
                                           "segment_bytes_max")] == [16 << 20, 64 << 20, 65_536, 64 << 20]
    with varve.open(path, sync="never", record_bytes_max=1024, batch_bytes_max=3000, batch_records_max=3) as store:
        ns = store.namespace("n")
        log = ns.log("a")
        assert log.append(b"x" * 1024) == 1
        with pytest.raises(varve.TooLarge) as e:
            log.append(b"x" * 1025)
        assert (e.value.what, e.value.size, e.value.limit) == ("record", 1025, 1024)
        assert "record_bytes_max" in str(e.value), str(e.value)
        with pytest.raises(varve.TooLarge) as e:
            ns.append_batch({"a": [b"x"] * 4})
        assert (e.value.size, e.value.limit) == (4, 3) and "4 records" in str(e.value), str(e.value)
        assert "batch_records_max" in str(e.value)
        with pytest.raises(varve.TooLarge) as e:
            ns.append_batch({"a": [b"x" * 1024] * 3})  # 3 x (1024 + 20) bytes
        assert (e.value.what, e.value.size, e.value.limit) == ("batch", 3132, 3000)
        assert "batch_bytes_max" in str(e.value), str(e.value)
        assert ns.append_batch({"a": [b"x" * 1024] * 2}) == {"a": [2, 3]}
    # Limits belong to the open, not to the store: a higher one accepts the record.
    with varve.open(path, sync="never", record_bytes_max=2048) as store:
        log = store.namespace("n").log("a")
        assert log.append(b"x" * 2048) == 4
    big = b"y" * ((16 << 20) + 1)
    with varve.open(path, sync="never") as store:
        log = store.namespace("n").log("a")
        with pytest.raises(varve.TooLarge):
            log.append(big)
        assert log.get(4) == b"x" * 2048
    with varve.open(path, sync="never", record_bytes_max=32 << 20) as store:
        log = store.namespace("n").log("a")
        assert log.get(log.append(big)) == big
    with varve.open(path, sync="never") as store:
        assert store.namespace("n").log("a").get(5) == big, "records over this open's limit are still read"


@pytest.mark.parametrize("arguments, words", [
    ({"record_bytes_max": 0}, "record_bytes_max"),
    ({"batch_records_max": 0}, "batch_records_max"),
    ({"record_bytes_max": 4096, "batch_bytes_max": 4096}, "batch_bytes_max"),
    ({"batch_bytes_max": 2 << 30}, "batch_bytes_max"),
    ({"segment_bytes_max": 1000}, "segment_bytes_max"),
    ({"segment_bytes_max": 4 << 30}, "segment_bytes_max"),
])
def test_open_limits_are_validated(tmp_path, arguments, words):
    with pytest.raises(varve.InvalidArgument) as e:
        varve.open(tmp_path, **arguments)
    assert words in str(e.value), str(e.value)
    with pytest.raises(OverflowError):
        varve.open(tmp_path, record_bytes_max=-1)


def test_a_small_segment_size_rolls_segments(tmp_path):
    with varve.open(tmp_path, sync="never", segment_bytes_max=64 << 10) as store:
        log = store.namespace("n").log("a")
        for i in range(400):
            log.append(bytes([i % 256]) * 1000)
        assert log.get(1) == b"\0" * 1000 and log.get(400) == bytes([399 % 256]) * 1000
    segments = sorted((tmp_path / "n").glob("*.seg"))
    assert len(segments) >= 5, segments
    assert all(s.stat().st_size <= (64 << 10) + 2048 for s in segments[:-1]), [s.stat().st_size for s in segments]
    with varve.open(tmp_path, read_only=True) as store:
        log = store.namespace("n").log("a")
        assert [seq for seq, _ in log.scan()] == list(range(1, 401))
