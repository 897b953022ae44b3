"""The runtime from Python: Python handlers on the runtime's workers, their
context API recorded in ``_events``, failures, retries and dead letters,
concurrency without deadlock, stop, topics, commands, causal queries."""

import json
import signal
import subprocess
import sys
import threading
import time

import pytest

import varve
from test_errors_threads import BAD_SECONDS

WAIT = 20  # seconds: generous, the suite runs on a loaded 2-core machine


@pytest.fixture
def rt(ns):
    runtime = varve.Runtime(ns, concurrency=2)
    yield runtime
    runtime.stop()


def kinds(events, kind):
    return [e for e in events if e.kind == kind]


def by_id(events):
    return {e.id: e for e in events}


def test_handler_fires_exactly_once_per_append(rt):
    seen, guard = [], threading.Lock()
    rt.create_log("celsius")
    rt.create_log("fahrenheit")

    @rt.handler(log="celsius")
    def convert(ctx):
        with guard:
            seen.append(ctx.seq)
        ctx.append("fahrenheit", str(float(ctx.record) * 9 / 5 + 32).encode())

    with rt:
        seqs = [rt.append("celsius", str(c).encode()) for c in range(50)]
        assert rt.wait_idle(timeout=WAIT)
        assert sorted(seen) == seqs == list(range(1, 51))
        assert rt.get("fahrenheit", rt.latest_index("fahrenheit")) in {str(c * 9 / 5 + 32).encode() for c in range(50)}
        events = rt.events()
    for kind in ("TRIGGER", "FIRING", "DONE"):
        assert sorted(e.seq for e in kinds(events, kind) if e.handler == "convert") == seqs, kind
    assert rt.state == "stopped"


def test_a_chain_of_python_handlers_carries_trace_and_parent(rt):
    for log in ("a", "b", "c"):
        rt.create_log(log)
    contexts = {}

    @rt.handler(log="a")
    def first(ctx):
        contexts["first"] = (ctx.event_id, ctx.trace_id, ctx.attempt, ctx.handler, ctx.log)
        ctx.append("b", ctx.record + b">first")

    @rt.handler(log="b")
    def second(ctx):
        contexts["second"] = (ctx.event_id, ctx.trace_id, ctx.attempt, ctx.handler, ctx.log)
        ctx.append("c", ctx.record + b">second")

    with rt:
        rt.append("a", b"x")
        assert rt.wait_idle(timeout=WAIT)
        assert rt.get("c", 1) == b"x>first>second"
        events = rt.events()
    ids = by_id(events)
    append_a = next(e for e in kinds(events, "APPEND") if e.log == "a")
    append_c = next(e for e in kinds(events, "APPEND") if e.log == "c")
    assert append_a.parent is None  # an outside append starts a trace
    # c:1 <- FIRING second <- TRIGGER <- APPEND b:1 <- FIRING first <- TRIGGER <- APPEND a:1
    chain = [append_c]
    while chain[-1].parent is not None:
        chain.append(ids[chain[-1].parent])
    assert [(e.kind, e.log, e.handler) for e in chain] == [
        ("APPEND", "c", ""),
        ("FIRING", "b", "second"),
        ("TRIGGER", "b", "second"),
        ("APPEND", "b", ""),
        ("FIRING", "a", "first"),
        ("TRIGGER", "a", "first"),
        ("APPEND", "a", ""),
    ]
    assert {e.trace_id for e in chain} == {append_a.trace_id}
    # The context names the FIRING and the trace it runs in.
    assert contexts["second"] == (chain[1].id, append_a.trace_id, 1, "second", "b")
    assert contexts["first"] == (chain[4].id, append_a.trace_id, 1, "first", "a")
    # Causal queries see the same chain.
    assert {e.id for e in chain} <= {e.id for e in rt.causes("c", 1)}
    assert append_c.id in {e.id for e in rt.effects("a", 1)}
    assert {e.id for e in rt.trace(append_a.trace_id)} >= {e.id for e in chain}
    dot = varve.to_dot(rt.trace(append_a.trace_id))
    assert dot.startswith("digraph") and "FIRING" in dot
    spans = json.loads(varve.to_otel(rt.trace(append_a.trace_id)))["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert {s["traceId"] for s in spans} == {append_a.trace_id}
    assert chain[0].to_dict()["parent"] == chain[1].id


def test_an_exception_is_failed_with_its_reason_retried_then_dead_lettered(rt):
    rt.create_log("in")
    rt.create_log("out")
    runs = []

    @rt.handler(log="in", attempts=3, backoff=0.01, backoff_max=0.02)
    def parse(ctx):
        runs.append((ctx.seq, ctx.attempt))
        if ctx.record == b"bad":
            raise ValueError(f"cannot parse {ctx.record!r}")
        ctx.append("out", b"ok " + ctx.record)

    with rt:
        rt.append("in", b"1")
        rt.append("in", b"bad")
        for i in range(2, 20):  # other records keep flowing while seq 2 fails
            rt.append("in", str(i).encode())
        assert rt.wait_idle(timeout=WAIT)
        assert rt.latest_index("out") == 19
        events = rt.events()
    failed = [e for e in kinds(events, "FAILED") if e.seq == 2]
    assert [e.attempt for e in failed] == [1, 2, 3]
    for e in failed:
        assert e.reason.startswith("ValueError: cannot parse b'bad'")
        assert "Traceback" in e.reason and "in parse" in e.reason
    assert sorted(a for s, a in runs if s == 2) == [1, 2, 3]
    dead = kinds(events, "DEAD_LETTER")
    assert [(e.log, e.seq, e.handler, e.attempt) for e in dead] == [("in", 2, "parse", 3)]
    [letter] = rt.dead_letters()
    assert letter["seq"] == 2 and letter["attempts"] == 3 and letter["reason"].startswith("ValueError")
    assert len([e for e in kinds(events, "DONE")]) == 19


def test_base_exceptions_in_handlers_do_not_escape(rt):
    rt.create_log("in")

    @rt.handler(log="in", attempts=1)
    def leave(ctx):
        if ctx.record == b"exit":
            sys.exit(3)
        raise KeyboardInterrupt

    with rt:
        rt.append("in", b"exit")
        rt.append("in", b"interrupt")
        assert rt.wait_idle(timeout=WAIT)
        reasons = sorted(e.reason.split("\n")[0] for e in kinds(rt.events(), "FAILED"))
    assert reasons == ["KeyboardInterrupt", "SystemExit: 3"]


def test_context_reads_are_recorded_with_their_cause(ns):
    rt = varve.Runtime(ns, concurrency=1)
    for log in ("in", "table", "out"):
        rt.create_log(log)
    results = {}

    @rt.handler(log="in")
    def lookup(ctx):
        latest = ctx.latest("table")
        results["latest"] = latest
        results["get"] = ctx.get("table", 1)
        results["scan"] = ctx.scan("table", 2)
        results["empty"] = ctx.scan("table", 5, 5)
        ctx.append("out", b"looked up")

    with rt:
        rt.append_batch([("table", b"t1"), ("table", b"t2"), ("table", b"t3")])
        rt.append("in", b"go")
        assert rt.wait_idle(timeout=WAIT)
        events = rt.events()
    assert results == {"latest": 3, "get": b"t1", "scan": [(2, b"t2"), (3, b"t3")], "empty": []}
    firing = next(e for e in kinds(events, "FIRING") if e.handler == "lookup")
    caused = [(e.kind, e.log, e.seq, e.seq_last, e.reads) for e in events if e.parent == firing.id]
    # The reads ride on the write that followed them (event format version 2).
    assert caused == [
        ("APPEND", "out", 1, 1, [("LATEST", "table", 3, 3), ("READ", "table", 1, 1), ("READ", "table", 2, 3)]),
        ("DONE", "in", 1, 1, []),
    ]
    # What the handler read is among the causes of what it appended.
    causes = {(e.kind, e.log, e.seq) for e in rt.causes("out", 1)}
    assert {("APPEND", "table", 1), ("APPEND", "table", 2), ("APPEND", "table", 3), ("APPEND", "in", 1)} <= causes


def test_causes_by_index_agree_with_effects_walked_forward(ns):
    # causes() walks back by the index beside _events; effects() walks the
    # events after the record forward: two different searches of one causal
    # graph (each checked against the whole graph in the Rust tests,
    # crates/varve-runtime/tests/causes.rs). For every pair of records X, Y of an app with
    # fan-out, fan-in, latest and fixed-seq reads, and batches past the
    # index's stride (128 events): X is among Y's causes exactly when Y is
    # among X's effects.
    rt = ns.runtime(concurrency=2)
    for log in ("readings", "table", "doubled", "merged", "summary"):
        rt.create_log(log)

    @rt.handler(log="readings")
    def double(ctx):
        ctx.append("doubled", ctx.record * 2)

    @rt.handler(log="readings")
    def merge(ctx):
        row = ctx.get("table", ctx.latest("table")) if ctx.latest("table") else b"-"
        ctx.append("merged", ctx.record + b"+" + row)

    @rt.handler(log="doubled")
    def summarize(ctx):
        if ctx.seq % 5 == 0:
            ctx.append("summary", b"%d" % len(ctx.scan("merged", 1)))

    with rt:
        for i in range(40):
            if i % 7 == 0:
                rt.append("table", b"t%d" % i)
            rt.append_batch([("readings", b"r%d.%d" % (i, j)) for j in range(3)])
        assert rt.wait_idle(timeout=WAIT)
        records = [
            (log, seq)
            for log in ("readings", "table", "doubled", "merged", "summary")
            for seq in range(1, ns.log(log).latest + 1)
        ]
        appends = {(e.log, e.seq): e.id for e in rt.events() if e.kind == "APPEND"}
        effects = {r: {e.id for e in rt.effects(*r)} for r in records}
        last_merges = [seq for seq, value in ns.log("merged").scan() if value.startswith(b"r39.")]
        causes = {r: {e.id for e in rt.causes(*r)} for r in records}
    assert len(appends) == len(records) and len(records) > 200
    pairs = 0
    for x in records:
        for y in records:
            in_causes = appends[x] in causes[y]
            assert in_causes == (appends[y] in effects[x]), (x, y)
            pairs += in_causes
    # Not vacuous: every summary depends on the merges it scanned, and more.
    assert pairs > 3 * len(records)
    assert len(last_merges) == 3
    assert all(appends[("table", 6)] in causes[("merged", seq)] for seq in last_merges)


def test_reads_are_not_recorded_when_record_reads_is_off(ns):
    rt = ns.runtime(concurrency=1, record_reads=False)
    rt.create_log("in")

    @rt.handler(log="in")
    def peek(ctx):
        ctx.latest("in")
        ctx.get("in", ctx.seq)

    with rt:
        rt.append("in", b"x")
        assert rt.wait_idle(timeout=WAIT)
        events = rt.events()
        assert not [e for e in events if e.kind in ("READ", "LATEST") or e.reads]


def test_two_workers_run_python_handlers_at_once_without_deadlock(rt):
    rt.create_log("in")
    rt.create_log("out")
    both_running = threading.Barrier(2, timeout=WAIT)
    met = []

    @rt.handler(log="in")
    def work(ctx):
        if ctx.seq <= 2:
            # Both workers must be inside a Python handler at once to pass.
            both_running.wait()
            met.append(ctx.seq)
        # Append from another thread while this one waits for it (the GIL is
        # released by ctx calls and by the runtime's waits).
        results = []
        helper = threading.Thread(target=lambda: results.append(ctx.append("out", ctx.record)))
        helper.start()
        helper.join(WAIT)
        assert results, "the helper thread's append did not finish"
        ctx.append("out", ctx.record + b"!")
        # Runtime calls from a handler while other threads use the runtime.
        assert rt.state == "running" and "in" in rt.subscriptions()
        rt.create_topic("topic-%d" % (ctx.seq % 3))

    with rt:
        # Records 1 and 2 first, alone: with more queued, one worker may
        # claim both in one batch (a fair share of a long queue), and the
        # barrier would then wait for a handler that runs after it.
        assert [rt.append("in", b"first"), rt.append("in", b"second")] == [1, 2]
        deadline = time.monotonic() + WAIT
        while len(met) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        appended = []

        def main_appends():
            for i in range(98):
                appended.append(rt.append("in", str(i).encode()))

        feeder = threading.Thread(target=main_appends)
        feeder.start()
        for i in range(50):  # the main thread appends too, concurrently
            rt.append("in", b"main %d" % i)
            rt.topics()
        feeder.join(WAIT)
        assert rt.wait_idle(timeout=WAIT)
        assert sorted(met) == [1, 2]
        assert rt.latest_index("out") == 300
        events = rt.events()
    assert len(kinds(events, "DONE")) == 150 and not kinds(events, "FAILED")


def test_stop_with_a_blocked_handler_returns_and_the_next_runtime_reruns_it(ns):
    rt = varve.Runtime(ns, concurrency=1)
    rt.create_log("in")
    rt.create_log("out")
    started, release, outcome = threading.Event(), threading.Event(), []

    @rt.handler(log="in")
    def slow(ctx):
        started.set()
        release.wait(WAIT)
        try:
            ctx.append("out", b"late")
        except varve.Stopped as e:
            outcome.append(e)

    rt.start()
    rt.append("in", b"x")
    assert started.wait(WAIT)
    began = time.monotonic()
    rt.stop(timeout=0.2)
    assert time.monotonic() - began < 5
    assert rt.state == "stopped"
    release.set()
    deadline = time.monotonic() + WAIT
    while not outcome and time.monotonic() < deadline:
        time.sleep(0.01)
    assert outcome and isinstance(outcome[0], varve.RuntimeStateError)
    with pytest.raises(varve.Stopped):
        rt.append("in", b"y")
    with pytest.raises(varve.Stopped):
        rt.start()

    # A new runtime over the namespace runs the unfinished trigger again.
    again = []
    rt2 = varve.Runtime(ns, concurrency=1)
    rt2.add_handler("slow", lambda ctx: again.append(ctx.attempt))
    with rt2:
        assert rt2.wait_idle(timeout=WAIT)
    assert again == [2]
    firings = [e.attempt for e in kinds(rt2.events(), "FIRING")]
    assert firings == [1, 2]


def test_topics(rt):
    got, guard = [], threading.Lock()

    def collect(ctx):
        with guard:
            got.append((ctx.log, ctx.seq, ctx.record))

    rt.add_handler("collect", collect)
    rt.create_topic("alerts")
    rt.subscribe("alerts", "collect")
    assert rt.topics() == ["alerts"] and rt.subscriptions() == {"alerts": ["collect"]}
    with rt:
        assert rt.publish("alerts", b"fire") == 1
        assert rt.publish("alerts", bytearray(b"flood")) == 2
        assert rt.wait_idle(timeout=WAIT)
        assert rt.latest_index("alerts") == 2 and rt.get("alerts", 2) == b"flood"
        rt.create_topic("news")
        rt.subscribe("news", "collect")
        rt.unsubscribe("alerts", "collect")
        rt.publish("alerts", b"unheard")
        rt.publish("news", b"heard")
        assert rt.wait_idle(timeout=WAIT)
        assert sorted(rt.topics()) == ["alerts", "news"]
        assert rt.subscriptions() == {"news": ["collect"]}
    assert sorted(got) == [("alerts", 1, b"fire"), ("alerts", 2, b"flood"), ("news", 1, b"heard")]


def test_a_python_handler_next_to_an_external_command(rt, tmp_path):
    out = tmp_path / "from-command.txt"
    rt.create_log("in")
    rt.add_command(
        "copy",
        [sys.executable, "-c", "import os, sys; open(sys.argv[1], 'ab').write(os.environ['VARVE_SEQ'].encode() + b'=' + sys.stdin.buffer.read() + b'\\n')", str(out)],
        log="in",
        timeout=WAIT,
    )
    seen = []
    rt.add_handler("py", lambda ctx: seen.append(ctx.record), log="in")
    with rt:
        rt.append("in", b"one")
        rt.append("in", b"two")
        assert rt.wait_idle(timeout=WAIT)
        done = sorted((e.handler, e.seq) for e in kinds(rt.events(), "DONE"))
    assert done == [("copy", 1), ("copy", 2), ("py", 1), ("py", 2)]
    assert sorted(out.read_bytes().splitlines()) == [b"1=one", b"2=two"]
    assert sorted(seen) == [b"one", b"two"]


def test_a_context_used_after_its_handler_returned_raises(rt):
    rt.create_log("in")
    kept = []
    rt.add_handler("keep", kept.append, log="in")
    with rt:
        rt.append("in", b"x")
        assert rt.wait_idle(timeout=WAIT)
        [ctx] = kept
        assert ctx.record == b"x" and ctx.seq == 1 and "keep" in repr(ctx)
        with pytest.raises(varve.RuntimeStateError) as e:
            ctx.append("in", b"again")
        assert e.value.state == "finished"


def test_lifecycle_and_argument_errors(rt, ns):
    rt.create_log("in")
    with pytest.raises(varve.RuntimeStateError) as e:
        rt.append("in", b"x")
    assert e.value.state == "not started" and "start()" in str(e.value)
    with pytest.raises(varve.NotFound):
        rt.subscribe("in", "nobody")
    with pytest.raises(TypeError):
        rt.add_handler("h", "not callable")
    with pytest.raises(varve.InvalidName):
        rt.add_handler("_hidden", lambda ctx: None)
    with pytest.raises(ValueError):
        rt.add_handler("h", lambda ctx: None, backoff=-1)
    rt.add_handler("h", lambda ctx: None, log="in")
    with pytest.raises(varve.AlreadyExists):
        rt.add_handler("h", lambda ctx: None)
    rt.start()
    rt.start()  # a no-op once running
    assert rt.handlers == ["h"] and rt.state == "running"
    with pytest.raises(varve.RuntimeStateError) as e:
        rt.add_handler("late", lambda ctx: None)
    assert "before start()" in str(e.value)
    with pytest.raises(varve.NotFound) as e:
        rt.append("missing", b"x")
    assert e.value.log == "missing"
    with pytest.raises(varve.InvalidArgument):
        rt.append("_events", b"x")
    with pytest.raises(TypeError):
        rt.append("in", "text")
    with pytest.raises(TypeError):
        rt.append_batch(["not a pair"])
    assert rt.append_batch([("in", b"1"), ("in", b"2")]) == [1, 2]
    with pytest.raises(varve.InvalidArgument):
        rt.trace("not hex")
    rt.stop()
    rt.stop()  # harmless
    with pytest.raises(varve.Stopped):
        rt.append("in", b"x")
    assert len(rt.events()) > 0  # queries work after stop


def test_closing_the_store_stops_its_runtimes(tmp_path):
    store = varve.open(tmp_path / "d", sync="never")
    rt = store.namespace("n").runtime(concurrency=1)
    rt.create_log("in")
    rt.add_handler("h", lambda ctx: None, log="in")
    rt.start()
    rt.append("in", b"x")
    store.close()
    assert rt.state == "stopped"
    with pytest.raises(varve.Stopped):
        rt.append("in", b"y")
    with pytest.raises(varve.Closed):
        rt.events()
    # The namespace is free again.
    with varve.open(tmp_path / "d", sync="never") as again:
        with again.namespace("n").runtime(concurrency=1) as rt2:
            assert rt2.wait_idle(timeout=WAIT)


def test_ctrl_c_interrupts_wait_idle(tmp_path):
    code = (
        "import sys, threading, varve\n"
        "ns = varve.open(sys.argv[1]).namespace('n')\n"
        "rt = varve.Runtime(ns, concurrency=1)\n"
        "rt.create_log('in')\n"
        "release = threading.Event()\n"
        "rt.add_handler('block', lambda ctx: release.wait(30), log='in')\n"
        "rt.start()\n"
        "rt.append('in', b'x')\n"
        "print('waiting', flush=True)\n"
        "try:\n"
        "    rt.wait_idle()\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
        "release.set()\n"
        "rt.stop()\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "waiting"
    time.sleep(0.3)
    child.send_signal(signal.SIGINT)
    out, _ = child.communicate(timeout=WAIT)
    assert out.strip() == "interrupted" and child.returncode == 0


def test_the_interpreter_exits_with_a_runtime_left_running(tmp_path):
    code = (
        "import sys, varve\n"
        "ns = varve.open(sys.argv[1]).namespace('n')\n"
        "rt = varve.Runtime(ns, concurrency=2)\n"
        "rt.create_log('in')\n"
        "rt.add_handler('h', lambda ctx: None, log='in')\n"
        "rt.start()\n"
        "for i in range(100):\n"
        "    rt.append('in', b'x')\n"
        "print('bye', flush=True)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=WAIT)
    assert out.returncode == 0 and out.stdout.strip() == "bye", out.stderr


def test_decorator_forms_and_namespace_runtime(ns, tmp_path):
    rt = ns.runtime(concurrency=1, socket=tmp_path / "runtime.sock")
    rt.create_log("in")
    calls = []

    @rt.handler
    def bare(ctx):
        calls.append(("bare", ctx.seq))

    @rt.handler("named", log=["in"], attempts=1)
    def whatever(ctx):
        calls.append(("named", ctx.seq))

    assert whatever.__name__ == "whatever"  # returned unchanged
    assert rt.handlers == ["bare", "named"]
    with rt:
        assert (tmp_path / "runtime.sock").exists()
        rt.subscribe("in", "bare")
        rt.append("in", b"x")
        assert rt.wait_idle(timeout=WAIT)
        assert "varve.Runtime" in repr(rt) and "running" in repr(rt)
    assert sorted(calls) == [("bare", 1), ("named", 1)]


def test_a_runtime_dropped_without_stop_does_not_hang(ns):
    import gc

    rt = varve.Runtime(ns, concurrency=2)
    rt.create_log("in")
    rt.add_handler("h", lambda ctx: None, log="in")
    rt.start()
    for _ in range(20):
        rt.append("in", b"x")
    began = time.monotonic()
    del rt
    gc.collect()
    assert time.monotonic() - began < 1  # stopping happens on a thread of its own
    # It stops on that thread (no new runs); a new runtime runs what it left.
    time.sleep(0.5)
    rt2 = varve.Runtime(ns, concurrency=1)
    rt2.add_handler("h", lambda ctx: None)
    with rt2:
        assert rt2.wait_idle(timeout=WAIT)
        events = rt2.events()
    done = {e.trigger for e in events if e.kind == "DONE"}
    triggers = {e.event_seq for e in events if e.kind == "TRIGGER"}
    assert len(triggers) == 20 and triggers <= done


def test_concurrent_starts_build_one_runtime(rt):
    rt.create_log("in")
    runs, guard = [], threading.Lock()

    def count(ctx):
        with guard:
            runs.append(ctx.seq)

    rt.add_handler("count", count, log="in")
    starters = [threading.Thread(target=rt.start) for _ in range(4)]
    for t in starters:
        t.start()
    for t in starters:
        t.join(WAIT)
    assert rt.state == "running"
    for _ in range(10):
        rt.append("in", b"x")
    assert rt.wait_idle(timeout=WAIT)
    assert sorted(runs) == list(range(1, 11))
    assert len([e for e in rt.events() if e.kind == "SUBSCRIBE"]) == 1


def test_arguments_are_checked_where_they_are_passed(ns):
    for concurrency in (0, 1025):
        with pytest.raises(varve.InvalidArgument) as e:
            varve.Runtime(ns, concurrency=concurrency)
        assert "concurrency" in str(e.value) and "between 1 and 1024" in str(e.value), str(e.value)
        with pytest.raises(varve.InvalidArgument):
            ns.runtime(concurrency=concurrency)
    rt = varve.Runtime(ns, concurrency=1)
    for attempts in (0, 1001):
        registrations = [
            lambda: rt.add_handler("h", lambda ctx: None, attempts=attempts),
            lambda: rt.add_command("c", ["true"], attempts=attempts),
            lambda: rt.handler(attempts=attempts)(lambda ctx: None),
        ]
        for register in registrations:
            with pytest.raises(varve.InvalidArgument) as e:
                register()
            assert "attempts" in str(e.value) and "between 1 and 1000" in str(e.value), str(e.value)
    assert rt.handlers == []
    for bad, words in BAD_SECONDS:
        calls = [
            ("backoff", lambda: rt.add_handler("h", lambda ctx: None, backoff=bad)),
            ("backoff_max", lambda: rt.add_handler("h", lambda ctx: None, backoff_max=bad)),
            ("timeout", lambda: rt.add_command("c", ["true"], timeout=bad)),
            ("timeout", lambda: rt.wait_idle(timeout=bad)),
            ("timeout", lambda: rt.stop(timeout=bad)),
        ]
        for name, call in calls:
            with pytest.raises(varve.InvalidArgument) as e:
                call()
            assert name in str(e.value) and words in str(e.value), str(e.value)
    assert rt.handlers == [] and rt.state == "not started"
    rt.add_handler("h", lambda ctx: None, attempts=1000, backoff=0, backoff_max=1e9)
    with rt:
        assert rt.wait_idle(timeout=1e9)


def test_log_append_goes_through_the_runtime_and_records_triggers_without_one(ns):
    """`Log.append` takes the route every surface takes: through a running
    runtime of this process (its handlers fire), else through the
    namespace's writer, which records TRIGGERs for the next runtime."""
    seen = []
    first = varve.Runtime(ns, concurrency=1)
    first.create_log("in")

    @first.handler(log="in")
    def note(ctx):
        seen.append(bytes(ctx.record))

    with first:
        assert ns.log("in").append(b"while running") == 1
        assert first.wait_idle(timeout=WAIT)
        assert seen == [b"while running"], "Log.append fired the running runtime's handler"
    # No runtime now: the namespace has subscriptions, so the append's TRIGGER is recorded.
    assert ns.log("in").append(b"while stopped") == 2
    assert ns.log("in").append_if(2, b"and another") == 3
    second = varve.Runtime(ns, concurrency=1)
    second.handler(log="in")(note)
    with second:
        assert second.wait_idle(timeout=WAIT)
        triggers = [e for e in second.events() if e.kind == "TRIGGER" and e.log == "in"]
    assert sorted(e.seq for e in triggers) == [1, 2, 3]
    assert seen == [b"while running", b"while stopped", b"and another"], "the next runtime fired what was recorded"


def test_an_append_with_no_room_in_the_backlog_raises_backlogged_and_writes_nothing(ns):
    # The handler waits at a gate: one run held, one queued is the whole backlog.
    gate = threading.Event()
    rt = varve.Runtime(ns, concurrency=1, backlog_max=2, backlog_wait=0.05)
    rt.create_log("in")

    @rt.handler(log="in")
    def gated(ctx):
        assert gate.wait(WAIT)

    with rt:
        rt.append("in", b"1")
        rt.append("in", b"2")
        with pytest.raises(varve.Backlogged) as refused:
            rt.append("in", b"3")
        assert (refused.value.backlog, refused.value.max) == (2, 2)
        assert refused.value.waited >= 0.05
        assert "was not made" in str(refused.value)
        assert rt.latest_index("in") == 2, "nothing was written"
        gate.set()
        assert rt.wait_idle(timeout=WAIT)
        assert rt.append("in", b"3") == 3
        assert rt.wait_idle(timeout=WAIT)
    with pytest.raises(varve.InvalidArgument, match="backlog_wait"):
        varve.Runtime(ns, backlog_wait=-1.0)


def test_events_keep_for_trims_events_older_than_the_age_and_keeps_younger_ones(ns):
    with pytest.raises(varve.InvalidArgument, match="events_keep_for is in seconds, at least 0"):
        varve.Runtime(ns, events_keep_for=-1.0)
    with pytest.raises(varve.InvalidArgument, match="events_keep_for must be longer than 0"):
        varve.Runtime(ns, events_keep_for=0.0).start()
    rt = varve.Runtime(ns, concurrency=1, events_keep_for=0.5)
    rt.create_log("in")
    rt.add_handler("noop", lambda ctx: None, log="in")
    with rt:
        for i in range(20):
            rt.append("in", b"%d" % i)
        assert rt.wait_idle(timeout=WAIT)
        first = rt.events()
        old_last = first[-1].event_seq
        # Older than 0.5 s + an eighth + the second's margin: then trimmed at the next append.
        deadline = time.monotonic() + 60
        while rt.event_retention["earliest"] <= old_last:
            assert time.monotonic() < deadline, rt.event_retention
            time.sleep(0.05)
            rt.append("in", b"later")
            assert rt.wait_idle(timeout=WAIT)
        retention = rt.event_retention
        assert retention["keep_for"] == 0.5 and retention["keep"] is None and retention["trims"] >= 1
        now_ns = time.time_ns()
        # Every event trimmed was older than the age when it went.
        assert all(now_ns - e.timestamp_ns > 500_000_000 for e in first if e.event_seq < retention["earliest"])
        # A worker may trim again after wait_idle returned: never below what was read.
        assert rt.events()[0].event_seq >= retention["earliest"]
