"""Repair and replay from Python (``Namespace.repair_plan``,
``Namespace.repair``): a corrected input and a replaced handler give logs
identical to a run from scratch, the old history stays readable as
``_gen.LOG.N``, not-replayable handlers are refused or skipped, and bad
arguments say what to do."""

import struct
import threading
import time

import pytest

import varve

WAIT = 20  # seconds: generous, the suite runs on a loaded 2-core machine
LOGS = ("in", "mid", "out")
INPUTS = [3, 5, 7, 11, 13]


def enc(n):
    return struct.pack("<q", n)


def dec(b):
    return struct.unpack("<q", b)[0]


def double(ctx):
    ctx.append("mid", enc(2 * dec(ctx.record)))


def add_first(ctx):
    # Every run reads mid seq 1: correcting in:1 changes every output.
    ctx.append("out", enc(dec(ctx.record) + dec(ctx.get("mid", 1))))


def triple(ctx):
    ctx.append("mid", enc(3 * dec(ctx.record)))


HANDLERS = {"double": double, "add": add_first}


def run_app(ns, inputs, handlers=None):
    """The app from scratch on `ns`, one input at a time, each handled in
    full before the next (one worker: a deterministic schedule)."""
    handlers = handlers or HANDLERS
    rt = ns.runtime(concurrency=1)
    for log in LOGS:
        rt.create_log(log)
    rt.add_handler("double", handlers["double"], log="in")
    rt.add_handler("add", handlers["add"], log="mid")
    with rt:
        for n in inputs:
            rt.append("in", enc(n))
            assert rt.wait_idle(timeout=WAIT)
    assert rt.state == "stopped"


def test_after_event_retention_a_recent_record_is_repaired_and_an_old_one_refused(ns):
    rt = ns.runtime(concurrency=1, events_keep=30)
    for log in LOGS:
        rt.create_log(log)
    rt.add_handler("double", double, log="in")
    rt.add_handler("add", add_first, log="mid")
    inputs = list(range(1, 41))
    with rt:
        for n in inputs:
            rt.append("in", enc(n))
            assert rt.wait_idle(timeout=WAIT)
        retention = rt.event_retention
        assert retention["keep"] == 30 and retention["trims"] > 0 and retention["last_error"] is None
        assert rt.events()[0].event_seq == retention["earliest"] > 1, "events() starts at the earliest kept"
    with pytest.raises(varve.RepairError, match="older than the events kept") as refused:
        ns.repair(record=("in", 1), value=enc(100), handlers=HANDLERS)
    assert (refused.value.kind, refused.value.namespace) == ("beyond_retention", "test")
    assert contents(ns, "in") == inputs, "nothing changed"
    # `add` reads mid:1 in every run: a recent input's repair replays its own two runs.
    outcome = ns.repair(record=("in", 40), value=enc(100), handlers=HANDLERS)
    assert outcome["replayed"] == 2
    assert contents(ns, "out")[-1] == 2 * 100 + 2 * 1


def contents(ns, log):
    return [dec(v) for _, v in ns.log(log).scan()]


def all_logs(ns):
    return {log: contents(ns, log) for log in LOGS}


@pytest.fixture
def app(ns):
    run_app(ns, INPUTS)
    return ns


def test_plan_lists_the_reruns_and_the_changed_seqs(app):
    plan = app.repair_plan(record=("in", 2))
    assert isinstance(plan, varve.RepairPlan)
    assert [(r["handler"], r["trigger"]["log"], r["trigger"]["seq"]) for r in plan.reruns] == [
        ("double", "in", 2),
        ("add", "mid", 2),
    ]
    assert {c["log"]: c["seqs"] for c in plan.changed} == {"in": [2], "mid": [2], "out": [2]}
    assert plan.not_replayable == []
    assert plan.events_scanned > 0
    assert "double" in plan.text() and repr(plan).startswith("<varve.RepairPlan ")
    assert plan.text().splitlines()[0] in repr(plan)
    assert plan.dot().startswith("digraph")
    whole = plan.to_dict()
    assert whole["reruns"] == plan.reruns and whole["changed"] == plan.changed
    assert whole["corrections"] == [{"kind": "record", "namespace": "test", "log": "in", "seq": 2}]
    # Nothing changed: a plan is a dry run.
    assert all_logs(app) == {"in": INPUTS, "mid": [2 * n for n in INPUTS], "out": [2 * n + 6 for n in INPUTS]}

    # Every `add` run read mid:1, so correcting in:1 re-runs all of them.
    first = app.repair_plan(record=("in", 1))
    assert sorted(r["trigger"]["seq"] for r in first.reruns if r["handler"] == "add") == [1, 2, 3, 4, 5]
    assert {c["log"]: c["seqs"] for c in first.changed}["out"] == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("seq", [1, 2, 5])
def test_repair_of_a_record_equals_a_run_from_scratch(store, app, seq):
    before = all_logs(app)
    outcome = app.repair(record=("in", seq), value=enc(100), handlers=HANDLERS)
    corrected = list(INPUTS)
    corrected[seq - 1] = 100
    truth = store.namespace("truth")
    run_app(truth, corrected)
    assert all_logs(app) == all_logs(truth)
    assert sorted(outcome) == ["changed", "event_error", "online", "replayed", "resumed", "swapped", "written"]
    assert outcome["resumed"] == []
    assert outcome["online"] is None
    assert outcome["event_error"] is None
    assert sorted(outcome["swapped"]["test"]) == [(log, f"_gen.{log}.1") for log in ("in", "mid", "out")]
    assert outcome["replayed"] == (2 if seq > 1 else 1 + len(INPUTS))
    assert outcome["changed"] == sum(a != b for log in LOGS for a, b in zip(before[log], all_logs(app)[log]))
    # The old history stays readable.
    for log in LOGS:
        assert contents(app, f"_gen.{log}.1") == before[log]


def test_a_replaced_handler_equals_a_run_from_scratch_with_the_new_code(store, app):
    plan = app.repair_plan(handler="double", since_seq=3)
    assert [(r["handler"], r["trigger"]["seq"]) for r in plan.reruns if r["handler"] == "double"] == [
        ("double", 3),
        ("double", 4),
        ("double", 5),
    ]
    app.repair(handler="double", since_seq=3, handlers={"double": triple, "add": add_first})

    def switched(ctx):
        (triple if ctx.seq >= 3 else double)(ctx)

    truth = store.namespace("truth")
    run_app(truth, INPUTS, {"double": switched, "add": add_first})
    assert all_logs(app) == all_logs(truth)
    assert contents(app, "mid") == [6, 10, 21, 33, 39]


def test_a_not_replayable_handler_is_refused_or_skipped(app):
    before = all_logs(app)
    plan = app.repair_plan(record=("in", 2), not_replayable=["add"])
    assert plan.not_replayable == ["add"]
    assert [r["replayable"] for r in plan.reruns] == [True, False]

    with pytest.raises(varve.RepairError, match='"add"') as caught:
        app.repair(record=("in", 2), value=enc(100), handlers=HANDLERS, not_replayable={"add"})
    assert caught.value.kind == "not_replayable" and caught.value.handler == "add"
    assert isinstance(caught.value, varve.VarveError)
    assert all_logs(app) == before  # nothing swapped
    assert "_gen.in.1" not in {info.name for info in app.logs()}

    app.repair(record=("in", 2), value=enc(100), handlers=HANDLERS, not_replayable=("add",), on_not_replayable="skip")
    after = all_logs(app)
    assert after["in"][1] == 100 and after["mid"][1] == 200
    assert after["out"] == before["out"]  # add's outputs kept as they were


def test_run_replays_a_not_replayable_handler(store, app):
    app.repair(record=("in", 2), value=enc(100), handlers=HANDLERS, not_replayable=["add"], on_not_replayable="run")
    truth = store.namespace("truth")
    run_app(truth, [3, 100, 7, 11, 13])
    assert all_logs(app) == all_logs(truth)


def test_bad_arguments_say_what_to_do(app):
    before = all_logs(app)
    with pytest.raises(ValueError, match="not both"):
        app.repair_plan(record=("in", 2), handler="double")
    with pytest.raises(ValueError, match="say what to repair"):
        app.repair_plan()
    with pytest.raises(ValueError, match="since_seq goes with handler"):
        app.repair_plan(record=("in", 2), since_seq=1)
    with pytest.raises(TypeError, match="iterable of handler names"):
        app.repair_plan(record=("in", 2), not_replayable="add")
    with pytest.raises(TypeError, match="needs value="):
        app.repair(record=("in", 2), handlers=HANDLERS)
    with pytest.raises(ValueError, match="value= goes with record"):
        app.repair(handler="double", value=enc(1), handlers=HANDLERS)
    with pytest.raises(ValueError, match='on_not_replayable="maybe"'):
        app.repair(record=("in", 2), value=enc(1), handlers=HANDLERS, on_not_replayable="maybe")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="pass it in handlers="):
        app.repair(handler="double", handlers={"add": add_first})
    with pytest.raises(TypeError, match="mapping of handler name"):
        app.repair(record=("in", 2), value=enc(1), handlers=[double])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be callable"):
        app.repair(record=("in", 2), value=enc(1), handlers={"double": 1, "add": add_first})  # type: ignore[dict-item]
    with pytest.raises(varve.RepairError, match='"add"') as missing:
        app.repair(record=("in", 2), value=enc(1), handlers={"double": double})
    assert missing.value.kind == "missing_handler"
    with pytest.raises(varve.NotFound):
        app.repair(record=("in", 9), value=enc(1), handlers=HANDLERS)
    assert all_logs(app) == before


def test_a_failing_handler_fails_the_repair_and_changes_nothing(app):
    before = all_logs(app)

    def broken(ctx):
        raise RuntimeError("no good")

    with pytest.raises(varve.RepairError, match="no good") as caught:
        app.repair(record=("in", 2), value=enc(1), handlers={"double": broken, "add": add_first})
    assert caught.value.kind == "handler_failed" and caught.value.handler == "double"
    assert all_logs(app) == before


def test_a_repair_while_the_runtime_runs_is_made_online_and_loses_no_append(store, app):
    """With a runtime of this process serving the namespace, the repair runs
    beside it (docs/repair.md, "Repairing while the application runs"):
    inputs appended meanwhile by another thread are all kept and handled,
    and the logs equal a run from scratch on every input, corrected."""
    rt = app.runtime(concurrency=1)
    rt.add_handler("double", double, log="in")
    rt.add_handler("add", add_first, log="mid")
    later = list(range(100, 160))
    with rt:
        started = threading.Event()

        def keep_appending():
            started.set()
            for n in later:
                rt.append("in", enc(n))
                time.sleep(0.002)

        appender = threading.Thread(target=keep_appending)
        appender.start()
        started.wait()
        outcome = app.repair(record=("in", 1), value=enc(1000), handlers=HANDLERS)
        appender.join()
        assert rt.wait_idle(timeout=WAIT)
    assert outcome["online"]["rounds"] >= 1
    assert 0 <= outcome["online"]["appends_held_seconds"] <= outcome["online"]["paused_seconds"]
    assert outcome["event_error"] is None
    truth = store.namespace("truth")
    run_app(truth, [1000] + INPUTS[1:] + later)
    assert all_logs(app) == all_logs(truth)


def test_resume_repairs_finds_nothing_after_whole_repairs_and_waits_for_a_stopped_runtime(app):
    # (Interrupted commits are made and resumed in the Rust tests:
    # crates/varve-repair/tests/commit.rs stops a repair before each write.)
    assert app.resume_repairs() == []
    app.repair(record=("in", 1), value=enc(5), handlers=HANDLERS)
    assert app.resume_repairs() == [], "a whole repair leaves nothing to resume"
    rt = app.runtime(concurrency=1)
    with rt:
        with pytest.raises(varve.RuntimeStateError, match="stop it first"):
            app.resume_repairs()


def index_prices(ctx):
    # A map built by a handler: key k{v % 3} gets 10 v, then the sum of
    # the map's values (a read after its own write) goes to `totals`.
    v = dec(ctx.record)
    prices = ctx.sorted_map("prices")
    prices.put(b"k%d" % (v % 3), enc(10 * v))
    ctx.append("totals", enc(sum(dec(value) for _, value in prices.range())))


def map_app(ns, inputs):
    rt = ns.runtime(concurrency=1)
    for log in ("in", "prices", "totals"):
        rt.create_log(log)
    rt.add_handler("index", index_prices, log="in")
    with rt:
        for n in inputs:
            rt.append("in", enc(n))
            assert rt.wait_idle(timeout=WAIT)


def map_versions(ns, generation=None):
    """The map at every version 0..=latest, read through a running runtime."""
    rt = ns.runtime(concurrency=1)
    rt.add_handler("index", index_prices, log="in")
    with rt:
        reader = rt.sorted_map("prices", generation=generation)
        assert isinstance(reader, varve.MapReader)
        versions = [[(k, dec(v)) for k, v in reader.range(at=at)] for at in range(reader.latest + 1)]
        return reader.log, versions


def test_a_map_built_by_a_handler_is_repaired_and_its_old_history_stays_readable(store, ns):
    inputs = [1, 2, 3, 4, 6]
    map_app(ns, inputs)
    log, before = map_versions(ns)
    assert log == "prices"
    assert before[-1] == [(b"k0", 60), (b"k1", 40), (b"k2", 20)]

    ns.repair(record=("in", 2), value=enc(5), handlers={"index": index_prices})
    truth = store.namespace("truth")
    map_app(truth, [1, 5, 3, 4, 6])
    assert contents(ns, "totals") == contents(truth, "totals")
    log, after = map_versions(ns)
    assert log == "prices"
    assert after == map_versions(truth)[1], "every version as from scratch"
    assert after[:2] == before[:2], "versions before the correction are unchanged"
    assert map_versions(ns, generation=1) == ("_gen.prices.1", before), "the old history's map, every version"
    with pytest.raises(varve.InvalidArgument, match="no old generation 2"):
        map_versions(ns, generation=2)
