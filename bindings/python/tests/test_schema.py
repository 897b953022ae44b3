"""Typed records from Python (``ns.schemas()``): versions registered with
varve.Field or dicts, records as dicts, Python INITs and migrations, the
three retention models, the errors, and what survives a reopen."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

import varve
from varve import Field

REPO = Path(__file__).resolve().parents[3]

V1 = [Field(1, "sensor", "string"), Field(2, "celsius", "i32")]
V2 = V1 + [Field(3, "fahrenheit", "f64")]


def c_to_f(old):
    return {"fahrenheit": old["celsius"] * 1.8 + 32}


def raw(ns, log, seq):
    return ns.log(log).get(seq)


def test_an_init_upgrades_old_records_on_read_and_rewrites_nothing(ns):
    schemas = ns.schemas()
    v1 = schemas.register("readings", V1)
    assert (v1["version"], v1["model"], v1["created"], v1["warnings"]) == (1, "initial", True, [])
    assert v1["fields"][1] == {"number": 2, "name": "celsius", "type": "i32"}
    log = schemas.log("readings")
    assert [log.append({"sensor": f"s{i}", "celsius": c}) for i, c in enumerate([20, -5, 100])] == [1, 2, 3]
    before = [raw(ns, "readings", seq) for seq in (1, 2, 3)]
    assert log.get(2) == {"sensor": "s1", "celsius": -5}

    calls = []

    def init(old):
        calls.append(old)
        return c_to_f(old)

    schemas.define_init("c_to_f", init)
    v2 = schemas.register("readings", V2, init="c_to_f")
    assert (v2["version"], v2["model"], v2["init"]) == (2, "automatic", "c_to_f")
    assert log.get(1) == {"sensor": "s0", "celsius": 20, "fahrenheit": 68.0}
    assert calls == [{"sensor": "s0", "celsius": 20}], "the INIT sees the record in v1's shape"
    assert [r["fahrenheit"] for _, r in log.scan()] == [68.0, 23.0, 212.0]
    # Read as written: v1, no INIT, and the stored bytes are the same.
    assert log.original(1) == (1, {"sensor": "s0", "celsius": 20})
    assert [raw(ns, "readings", seq) for seq in (1, 2, 3)] == before
    assert log.latest == 3 and len(ns.log("readings")) == 3

    # New records are written with v2: the INIT'd field is the writer's to set.
    with pytest.raises(varve.SchemaError, match="'fahrenheit' is not set"):
        log.append({"sensor": "n", "celsius": 1})
    seq = log.append({"sensor": "n", "celsius": 1, "fahrenheit": 33.8})
    assert log.original(seq)[0] == 2
    # Registering the same spec again is that version: a program registers on every start.
    again = schemas.register("readings", V2, init="c_to_f")
    assert (again["version"], again["created"]) == (2, False)
    assert schemas.subjects() == ["readings"]


def test_a_default_field_reads_in_old_records(ns):
    schemas = ns.schemas()
    schemas.register("r", V1)
    log = schemas.log("r")
    log.append({"sensor": "a", "celsius": 1})
    site = Field(4, "site", "string", default="roof")
    blob = {"number": 5, "name": "blob", "type": "bytes", "default": b"\x00\x01"}
    schemas.register("r", V1 + [site, blob])
    assert log.get(1) == {"sensor": "a", "celsius": 1, "site": "roof", "blob": b"\x00\x01"}
    assert log.original(1) == (1, {"sensor": "a", "celsius": 1})
    seq = log.append({"sensor": "b", "celsius": 2, "site": "cellar"})
    assert log.get(seq)["site"] == "cellar" and log.get(seq)["blob"] == b"\x00\x01"


def test_values_round_trip_and_bad_ones_are_refused(ns):
    schemas = ns.schemas()
    fields = [
        Field(1, "flag", "bool"),
        Field(2, "small", "i32"),
        Field(3, "big", "u64"),
        Field(4, "neg", "i64"),
        Field(5, "ratio", "f32"),
        Field(6, "text", "string"),
        Field(7, "blob", "bytes"),
        {"number": 8, "name": "maybe", "type": "f64", "default": 0.5},
    ]
    schemas.register("v", fields)
    log = schemas.log("v")
    record = {"flag": True, "small": 7, "big": 2**64 - 1, "neg": -(2**63), "ratio": 1.5, "text": "é", "blob": b"\xff"}
    seq = log.append({**record, "maybe": None})  # None: not set, the default applies
    assert log.get(seq) == {**record, "maybe": 0.5}
    assert type(log.get(seq)["flag"]) is bool
    assert log.append({**record, "blob": bytearray(b"x"), "text": b"utf-8 bytes"}) == seq + 1
    assert log.get(seq + 1)["text"] == "utf-8 bytes" and log.get(seq + 1)["blob"] == b"x"

    with pytest.raises(varve.SchemaError, match="field 'small'") as caught:
        log.append({**record, "small": 2**31})
    assert caught.value.subject == "v" and caught.value.version == 1
    with pytest.raises(varve.SchemaError, match="no field 'nope'"):
        log.append({**record, "nope": 1})
    with pytest.raises(TypeError, match="field 'text'"):
        log.append({**record, "text": ["a list"]})
    with pytest.raises(OverflowError):
        log.append({**record, "big": 2**64})
    with pytest.raises(TypeError):
        log.append([("flag", True)])

    with pytest.raises(varve.InvalidArgument, match="not one of bool, i32"):
        schemas.register("w", [Field(1, "x", "int")])  # type: ignore[arg-type]
    with pytest.raises(varve.InvalidArgument, match='not "colour"'):
        schemas.register("w", [{"number": 1, "name": "x", "type": "i32", "colour": "red"}])
    with pytest.raises(TypeError, match='no "type"'):
        schemas.register("w", [{"number": 1, "name": "x"}])
    with pytest.raises(varve.SchemaError, match="the default of field 'x' is not a i32"):
        schemas.register("w", [Field(1, "x", "i32", default="seven")])
    with pytest.raises(varve.InvalidArgument, match="model="):
        schemas.register("w", [Field(1, "x", "i32")], model="lazy")  # type: ignore[arg-type]
    with pytest.raises(varve.InvalidArgument, match="compat="):
        schemas.register("w", [Field(1, "x", "i32")], compat="SIDEWAYS")  # type: ignore[arg-type]
    with pytest.raises(varve.SchemaError, match="no schema is registered for 'w'") as unknown:
        schemas.log("w")
    assert unknown.value.subject == "w"
    assert schemas.subjects() == ["v"]


def test_an_incompatible_version_names_the_field_and_rule(ns):
    schemas = ns.schemas()
    schemas.register("r", V1)
    unset = V1 + [Field(3, "name", "string")]
    for call in (schemas.check, schemas.register):
        with pytest.raises(varve.IncompatibleSchema) as caught:
            call("r", unset)
        e = caught.value
        assert (e.field, e.rule, e.subject, e.version, e.against) == ("name", "BACKWARD", "r", 2, 1)
        assert "is added without a default or an INIT" in str(e) and e.reason in str(e)
        assert isinstance(e, varve.SchemaError) and isinstance(e, varve.VarveError)
    with pytest.raises(varve.IncompatibleSchema) as caught:
        schemas.check("r", [Field(1, "sensor", "string"), Field(2, "celsius", "string")])
    assert (caught.value.field, caught.value.rule) == ("celsius", "FIELD_NUMBER")
    with pytest.raises(varve.IncompatibleSchema) as caught:
        schemas.check("r", [Field(1, "sensor", "string")], compat="FORWARD")
    assert (caught.value.field, caught.value.rule) == ("celsius", "FORWARD")
    assert [v["version"] for v in schemas.show("r")["versions"]] == [1], "nothing was registered"
    # check() returns the version it would register.
    ok = schemas.check("r", V1 + [Field(3, "site", "string", default="x")])
    assert (ok["version"], ok["id"], ok["model"]) == (2, 0, "automatic")


def test_a_failing_init_names_the_record_and_changes_nothing(ns):
    schemas = ns.schemas()
    schemas.register("r", V1)
    log = schemas.log("r")
    for c in (1, 13, 2):
        log.append({"sensor": "s", "celsius": c})
    before = [raw(ns, "r", seq) for seq in (1, 2, 3)]

    def picky(old):
        if old["celsius"] == 13:
            raise ValueError("unlucky reading")
        if old["celsius"] == 2:
            return {"fahrenheit": "warm"}  # not an f64
        return c_to_f(old)

    schemas.define_init("picky", picky)
    schemas.register("r", V2, init="picky")
    assert log.get(1)["fahrenheit"] == pytest.approx(33.8)
    with pytest.raises(varve.InitFailed) as caught:
        log.get(2)
    e = caught.value
    assert e.location == "r@2" and e.init == "picky" and (e.subject, e.version) == ("r", 2)
    assert e.reason == "ValueError: unlucky reading" and "r@2" in str(e)
    assert "nothing stored was changed" in str(e)
    assert isinstance(e.__cause__, ValueError), "the INIT's own exception is the cause"
    with pytest.raises(varve.InitFailed, match="r@3") as caught:
        log.get(3)
    assert caught.value.__cause__ is None and "is not a f64" in caught.value.reason
    # A scan raises once for the failing record and goes on after it.
    scan = log.scan()
    assert next(scan)[0] == 1
    with pytest.raises(varve.InitFailed, match="r@2"):
        next(scan)
    with pytest.raises(varve.InitFailed, match="r@3"):
        next(scan)
    assert list(scan) == []
    # What was written still reads, and nothing stored changed.
    assert log.original(2) == (1, {"sensor": "s", "celsius": 13})
    assert [raw(ns, "r", seq) for seq in (1, 2, 3)] == before
    # Redefined, the INIT is used from then on.
    schemas.define_init("picky", lambda old: {"fahrenheit": 0.0})
    assert log.get(2)["fahrenheit"] == 0.0

    schemas.define_init("picky", lambda old: [("fahrenheit", 1.0)])
    with pytest.raises(varve.InitFailed, match="TypeError: what an INIT returns is a dict") as caught:
        log.get(3)
    assert isinstance(caught.value.__cause__, TypeError)

    def interrupted(old):
        raise KeyboardInterrupt

    schemas.define_init("picky", interrupted)
    with pytest.raises(KeyboardInterrupt):
        log.get(3)
    with pytest.raises(TypeError, match="is a function"):
        schemas.define_init("x", "not callable")  # type: ignore[arg-type]


def test_a_manual_migration_writes_a_new_generation(ns):
    schemas = ns.schemas()
    schemas.register("orders", [Field(1, "id", "u32"), Field(2, "cents", "i64")])
    log = schemas.log("orders")
    for i in range(1, 1201):
        log.append({"id": i, "cents": i * 100})

    def to_decimal(old):
        if old["id"] == 700 and not ready:
            raise ArithmeticError("not yet")
        return {"order": f"o-{old['id']}", "amount": old["cents"] / 100}

    ready = False
    schemas.define_migration("to_decimal", to_decimal)
    new_fields = [Field(3, "order", "string"), Field(4, "amount", "f64")]
    with pytest.warns(varve.SchemaWarning, match="migration of 1200 records"):
        registered = schemas.register("orders", new_fields, migration="to_decimal")
    assert (registered["model"], registered["generation"]) == ("manual", 2)
    shown = schemas.show("orders")
    assert (shown["pending"], shown["write_version"], shown["generation"]) == (2, 1, 1)
    # Writers keep v1 until the migration is done.
    assert log.append({"id": 1201, "cents": 5}) == 1201

    calls = []
    with pytest.raises(varve.MigrationFailed) as caught:
        schemas.migrate("orders", lambda done, total: calls.append((done, total)), batch=500)
    assert caught.value.location == "orders@700" and caught.value.migration == "to_decimal"
    assert isinstance(caught.value.__cause__, ArithmeticError)
    assert calls == [(500, 1201)], "the first batch stays migrated"

    ready = True
    report = schemas.migrate("orders", lambda done, total: calls.append((done, total)), batch=500)
    assert report == {
        "subject": "orders",
        "from_generation": 1,
        "to_generation": 2,
        "migrated": 1201,
        "resumed_from": 500,
        "source_through": 1201,
    }
    assert calls[1:] == [(1000, 1201), (1201, 1201), (1201, 1201)]
    assert log.current_log == "orders.gen2" and log.generation == 2
    assert log.get(1201) == {"order": "o-1201", "amount": 0.05}
    assert log.get(1201, generation=1) == {"id": 1201, "cents": 5}
    assert list(log.scan(1199, 1201, generation=1)) == [(1199, {"id": 1199, "cents": 119900}), (1200, {"id": 1200, "cents": 120000})]
    assert log.append({"order": "o-x", "amount": 1.25}) == 1202
    shown = schemas.show("orders")
    assert [g["log"] for g in shown["generations"]] == ["orders", "orders.gen2"] and shown["pending"] is None
    with pytest.raises(varve.SchemaError, match="no migration is pending"):
        schemas.migrate("orders")


def test_a_progress_callback_that_raises_stops_the_migration(ns):
    schemas = ns.schemas()
    schemas.register("m", [Field(1, "x", "i64")])
    log = schemas.log("m")
    for i in range(10):
        log.append({"x": i})
    schemas.define_migration("double", lambda old: {"y": old["x"] * 2})
    with pytest.warns(varve.SchemaWarning):
        schemas.register("m", [Field(2, "y", "i64")], model="manual", migration="double")

    def stop(done, total):
        raise RuntimeError(f"stop at {done}/{total}")

    with pytest.raises(RuntimeError, match="stop at 4/10"):
        schemas.migrate("m", stop, batch=4)
    assert ns.log("m.gen2").latest == 4 and log.generation == 1
    assert schemas.migrate("m")["resumed_from"] == 4
    assert [r["y"] for _, r in log.scan()] == [2 * i for i in range(10)]
    with pytest.raises(varve.InvalidArgument):
        schemas.migrate("m", batch=0)


def test_reset_starts_an_empty_generation(ns):
    schemas = ns.schemas()
    schemas.register("r", V1)
    log = schemas.log("r")
    log.append({"sensor": "a", "celsius": 1})
    with pytest.warns(varve.SchemaWarning, match="starts over empty in generation 2") as warned:
        registered = schemas.register("r", [Field(5, "kelvin", "f64")], model="reset")
    assert registered["warnings"] == [str(w.message) for w in warned]
    assert log.latest == 0 and log.current_log == "r.gen2" and list(log.scan()) == []
    assert log.append({"kelvin": 3.5}) == 1
    assert log.get(1) == {"kelvin": 3.5}
    assert log.get(1, generation=1) == {"sensor": "a", "celsius": 1}
    assert log.original(1, generation=1) == (1, {"sensor": "a", "celsius": 1})


def test_upgrade_eager_materialises_every_record(ns):
    schemas = ns.schemas()
    schemas.register("r", V1)
    log = schemas.log("r")
    log.append({"sensor": "a", "celsius": 0})
    schemas.define_init("c_to_f", c_to_f)
    schemas.register("r", V2, init="c_to_f")
    with pytest.warns(varve.SchemaWarning):
        eager = schemas.upgrade_eager("r")
    assert (eager["model"], eager["migration"], eager["version"]) == ("manual", "varve.eager", 3)
    assert schemas.migrate("r")["migrated"] == 1
    assert log.original(1) == (3, {"sensor": "a", "celsius": 0, "fahrenheit": 32.0}), "written upgraded"
    assert log.original(1, generation=1)[0] == 1


def test_reopening_sees_the_registered_versions(tmp_path):
    path = tmp_path / "data"
    with varve.open(path) as store:
        schemas = store.namespace("app").schemas()
        schemas.register("r", V1)
        schemas.log("r").append({"sensor": "a", "celsius": 10})
        schemas.define_init("c_to_f", c_to_f)
        schemas.register("r", V2 + [Field(4, "site", "string", default="roof")], init="c_to_f")
        log = schemas.log("r")
    with pytest.raises(varve.Closed):
        schemas.subjects()
    with pytest.raises(varve.Closed):
        log.get(1)
    with varve.open(path) as store:
        schemas = store.namespace("app").schemas()
        assert schemas.subjects() == ["r"]
        shown = schemas.show("r")
        assert [v["version"] for v in shown["versions"]] == [1, 2] and shown["write_version"] == 2
        log = schemas.log("r")
        assert log.original(1) == (1, {"sensor": "a", "celsius": 10})
        # This program has not defined the INIT yet.
        with pytest.raises(varve.SchemaError, match="'c_to_f'") as caught:
            log.get(1)
        assert caught.value.init == "c_to_f"
        schemas.define_init("c_to_f", c_to_f)
        assert log.get(1) == {"sensor": "a", "celsius": 10, "fahrenheit": 50.0, "site": "roof"}


def test_the_guide_example_runs(tmp_path):
    guide = (REPO / "docs" / "python.md").read_text()
    section = guide.split("## Typed records and schema evolution", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert blocks, "docs/python.md shows the typed records example"
    for block in blocks:
        out = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        # What a `print(...)  # output` line says it prints, it prints (in order).
        expected = re.findall(r"^\s*print\(.*\)  # (.*)$", block, flags=re.M)
        printed = iter(out.stdout.splitlines())
        for line in expected:
            assert any(p == line for p in printed), f"the guide says {line!r}; it printed:\n{out.stdout}"
