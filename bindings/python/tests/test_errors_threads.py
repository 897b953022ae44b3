"""Exceptions and their fields, use after close, no panics, threads, watch (sync and async)."""

import asyncio
import threading
import time

import pytest

import varve


def test_error_hierarchy():
    for cls in [
        varve.NotFound, varve.Trimmed, varve.Full, varve.Conflict, varve.InvalidName, varve.TooLarge,
        varve.Corrupt, varve.Locked, varve.Closed, varve.VarveIOError, varve.AlreadyExists,
    ]:
        assert issubclass(cls, varve.VarveError)
    assert issubclass(varve.InvalidName, ValueError) and issubclass(varve.NotFound, LookupError)
    assert issubclass(varve.VarveIOError, OSError) and issubclass(varve.PositionOutOfRange, IndexError)
    e = varve.VarveIOError("disk on fire", context="appending", errno=5)
    assert (str(e), e.context, e.errno) == ("disk on fire", "appending", 5)


def test_second_writer_is_locked(tmp_path):
    with varve.open(tmp_path) as first:
        first.namespace("n").log("a").append(b"x")
        with varve.open(tmp_path) as second:
            with pytest.raises(varve.Locked) as e:
                second.namespace("n")
            assert str(tmp_path) in e.value.path and "locked" in str(e.value)
            # A read-only open needs no lock.
        with varve.open(tmp_path, read_only=True) as reader:
            assert reader.namespace("n").log("a").get(1) == b"x"
    # Closing released the lock.
    with varve.open(tmp_path) as again:
        assert again.namespace("n").log("a").latest == 1


def test_objects_after_close_raise_closed(tmp_path):
    store = varve.open(tmp_path)
    ns = store.namespace("n")
    log = ns.log("a")
    log.append(b"x")
    s, m, lst = ns.sorted_set("s"), ns.sorted_map("m"), ns.list("l")
    s.insert(1)
    scan, watch = log.scan(), log.watch()
    store.close()
    store.close()  # twice is harmless
    assert store.closed and "closed" in repr(store)
    calls = [
        lambda: log.append(b"y"), lambda: log.get(1), lambda: log.latest, lambda: len(log),
        lambda: ns.log("b"), lambda: ns.logs(), lambda: store.namespace("n"), lambda: store.namespaces(),
        lambda: s.insert(2), lambda: s.to_list(), lambda: m.insert(1, 2), lambda: lst.push_back(1),
        lambda: watch.next(timeout=0.01), lambda: ns.sorted_set("s"),
    ]
    for call in calls:
        with pytest.raises(varve.Closed) as e:
            call()
        assert "closed" in str(e.value) and e.value.what
    # The lock is free: another store may write now.
    with varve.open(tmp_path) as again:
        assert again.namespace("n").log("a").latest == 1


def test_bad_arguments_raise_python_errors_not_panics(ns):
    log = ns.log("a")
    cases = [
        (lambda: log.append("text"), TypeError),
        (lambda: log.append(123), TypeError),
        (lambda: log.get(-1), OverflowError),
        (lambda: log.get(2**64), OverflowError),
        (lambda: log.get("1"), TypeError),
        (lambda: log.scan(-5), OverflowError),
        (lambda: log.append_if(2**70, b"x"), OverflowError),
        (lambda: log.watch(1).next(timeout=-1), ValueError),
        (lambda: ns.append_batch(42), TypeError),
        (lambda: ns.append_batch([("a",)]), (TypeError, ValueError)),
        (lambda: ns.log("a", keep=-1), OverflowError),
        (lambda: ns.list("l").insert_after(2**64, 1), OverflowError),
        (lambda: ns.list("l").remove_at(5), varve.PositionOutOfRange),
        (lambda: ns.list("l")[3], IndexError),
        (lambda: ns.sorted_set("s", extra=0), varve.InvalidArgument),
        (lambda: ns.sorted_set("t", tree="trie"), varve.InvalidArgument),
        (lambda: varve.open("/proc/forbidden/x"), varve.VarveIOError),
        (lambda: varve.open("/tmp", sync="sometimes"), ValueError),
    ]
    for call, expected in cases:
        with pytest.raises(expected):
            call()
    # No panic for the largest seq either.
    with pytest.raises(varve.NotFound):
        log.get(2**64 - 1)


def test_threads_share_a_store(ns):
    log = ns.log("c")
    s = ns.sorted_set("s")
    threads, per_thread = 4, 200

    def work(t):
        for i in range(per_thread):
            log.append(f"{t}-{i}".encode())
            if i % 20 == 0:
                s.insert(t * 1000 + i)
            log.get(1)

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert log.latest == threads * per_thread
    assert len({r for _, r in log.scan()}) == threads * per_thread, "every append landed exactly once"
    assert len(s) == threads * per_thread // 20


def test_blocking_watch_releases_the_gil(ns):
    log = ns.log("w")
    got = []

    def follow():
        for seq, record in log.watch():
            got.append((seq, record))
            if seq == 50:
                return

    t = threading.Thread(target=follow)
    t.start()
    # If the watcher held the GIL while it waits, these appends could not run.
    for i in range(1, 51):
        log.append(b"%d" % i)
        if i % 10 == 0:
            time.sleep(0.005)
    t.join(timeout=10)
    assert not t.is_alive()
    assert got == [(i, b"%d" % i) for i in range(1, 51)]


def test_close_stops_a_blocked_watch(tmp_path):
    store = varve.open(tmp_path)
    log = store.namespace("n").log("w")
    errors = []

    def follow():
        try:
            for _ in log.watch():
                pass
        except varve.Closed as e:
            errors.append(e)

    t = threading.Thread(target=follow)
    t.start()
    time.sleep(0.05)
    store.close()
    t.join(timeout=5)
    assert not t.is_alive() and len(errors) == 1


async def test_async_watch(ns):
    log = ns.log("aw")
    log.append(b"existing")

    async def produce():
        for i in range(3):
            await asyncio.sleep(0.01)
            log.append(b"new%d" % i)

    producer = asyncio.create_task(produce())
    seen = []
    async for seq, record in log.watch():
        seen.append((seq, record))
        if seq == 4:
            break
    await producer
    assert seen == [(1, b"existing"), (2, b"new0"), (3, b"new1"), (4, b"new2")]


async def test_async_watch_does_not_block_the_loop(ns):
    log = ns.log("aw2")
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    t = asyncio.create_task(ticker())
    watch = log.watch()
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(watch.__anext__(), timeout=0.2)
    t.cancel()
    assert ticks >= 5


def test_ctrl_c_interrupts_a_blocking_watch(tmp_path):
    import signal
    import subprocess
    import sys

    code = (
        "import sys, varve\n"
        "log = varve.open(sys.argv[1]).namespace('n').log('w')\n"
        "print('watching', flush=True)\n"
        "try:\n"
        "    for _ in log.watch(): pass\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "watching"
    time.sleep(0.2)
    child.send_signal(signal.SIGINT)
    out, _ = child.communicate(timeout=10)
    assert out.strip() == "interrupted" and child.returncode == 0


# Durations are seconds from 0 to 1e9 (about 31 years); None, where a call takes it, means no limit.
BAD_SECONDS = [
    (1e300, "at most 1000000000 seconds"),
    (float("inf"), "at most 1000000000 seconds"),
    (1e9 + 1, "at most 1000000000 seconds"),
    (float("nan"), "not NaN"),
    (-1, "at least 0"),
    (float("-inf"), "at least 0"),
]


@pytest.mark.parametrize("bad, words", BAD_SECONDS)
def test_a_watch_timeout_out_of_range_says_what_is_wrong(ns, bad, words):
    log = ns.log("a")
    watch = log.watch(1)
    with pytest.raises(varve.InvalidArgument) as e:
        watch.next(timeout=bad)
    message = str(e.value)
    assert isinstance(e.value, ValueError) and "timeout" in message and words in message, message
    if "at most" in words:
        assert "None" in message, message
    log.append(b"x")
    assert watch.next(timeout=1e9) == (1, b"x"), "the largest timeout is accepted"
    assert watch.next(timeout=0) is None


def test_damage_is_local_and_lost_records_raise_lost(tmp_path):
    with varve.open(tmp_path, sync="never", segment_bytes_max=64 << 10) as store:
        log = store.namespace("n").log("t")
        for i in range(1, 1501):
            log.append(f"t record {i:05} ".encode() * 6)
    segment = tmp_path / "n" / "0000000001.seg"
    data = bytearray(segment.read_bytes())
    data[data.index(b"t record 00040 ") + 3] ^= 0x10
    segment.write_bytes(bytes(data))
    for read_only in (True, False):
        with varve.open(tmp_path, read_only=read_only) as store:
            log = store.namespace("n").log("t")
            assert log.get(39) == b"t record 00039 " * 6 and log.get(41) == b"t record 00041 " * 6
            with pytest.raises(varve.Lost) as e:
                log.get(40)
            assert isinstance(e.value, varve.Corrupt)
            assert (e.value.log, e.value.first, e.value.last) == ("t", 40, 40)
            assert e.value.segment.endswith("0000000001.seg") and e.value.offset > 0
            assert "seq 40 is lost" in str(e.value)
            # A scan raises once for the run and goes on after it.
            scan = iter(log.scan())
            seen = []
            while True:
                try:
                    seen.append(next(scan)[0])
                except varve.Lost:
                    continue
                except StopIteration:
                    break
            assert seen == [s for s in range(1, 1501) if s != 40]
    with varve.open(tmp_path) as store:
        assert store.namespace("n").log("t").append(b"next") == 1501


def test_new_error_classes():
    assert issubclass(varve.Lost, varve.Corrupt) and issubclass(varve.UnsupportedFormat, varve.VarveError)
    e = varve.NoSpace("disk full", path="/x", bytes=10)
    assert isinstance(e, OSError) and (e.path, e.bytes) == ("/x", 10)


def test_the_remote_error_classes_carry_their_fields():
    unavailable = varve.Unavailable("down", target="varve://h:1", reason="refused")
    assert isinstance(unavailable, ConnectionError) and isinstance(unavailable, varve.VarveError)
    assert (unavailable.target, unavailable.reason, unavailable.errno, str(unavailable)) == (
        "varve://h:1", "refused", None, "down")
    outcome = varve.OutcomeUnknown("lost", target="varve://h:1", operation="append to log t", reason="reset")
    assert not isinstance(outcome, OSError), "code that retries connection errors must not resend a write"
    assert (outcome.target, outcome.operation, outcome.reason) == ("varve://h:1", "append to log t", "reset")
    denied = varve.Denied("no", target="varve://h:1", reason="forbidden")
    assert isinstance(denied, PermissionError) and (denied.target, denied.reason) == ("varve://h:1", "forbidden")
    protocol = varve.ProtocolError("what", target="varve://h:1", reason="not json")
    assert (protocol.target, protocol.reason) == ("varve://h:1", "not json")
    for name in ("Unavailable", "OutcomeUnknown", "Denied", "ProtocolError"):
        assert name in varve.__all__ and name in varve.errors.__all__
