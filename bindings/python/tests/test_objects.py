"""Versioned objects from Python: put, merges (built-in and a Python
function), history, refs, grants, verify, proofs, watch, and the errors."""

import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import varve

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def objects(tmp_path):
    with varve.open(str(tmp_path)) as store:
        yield store.namespace("app").objects("config")


def test_put_get_history_heads_and_versions(objects):
    v1 = objects.put("svc", b"a")
    v2 = objects.put("svc", b"b", base=v1)
    v3 = objects.put("svc", b"c", base=v2.id[:8])
    assert (v1.depth, v2.depth, v3.depth) == (1, 2, 3)
    assert len(v1.id) == 64 and v1 == objects.resolve("svc", v1.id[:6]) and hash(v1) == hash(objects.resolve("svc", v1.id))
    assert "depth=1" in repr(v1)
    assert objects.put("svc", b"b", base=v1) == v2  # idempotent
    assert objects.get("svc", v3) == b"c"
    assert objects.history("svc", v3) == [v2, v1]
    assert objects.history("svc", v3, m=1) == [v2]
    assert objects.history("svc", v3, values=True) == [(v2, b"b"), (v1, b"a")]
    assert objects.heads("svc") == [v3]
    assert objects.versions("svc") == [v1, v2, v3]
    assert objects.previous("svc", v2) == [v1]
    assert objects.keys() == ["svc"]
    info = objects.info("svc", v3)
    assert info["parents"] == [v2] and info["value_len"] == 1 and info["encoding"] == "raw"
    with pytest.raises(varve.VersionNotFound) as caught:
        objects.get("svc", "ffff")
    assert caught.value.key == "svc" and isinstance(caught.value, varve.NotFound)


def test_merge_with_builtins_a_python_function_and_a_value(objects):
    base = objects.put("n", b"10")
    left = objects.put("n", b"15", base=base)
    right = objects.put("n", b"12", base=base)
    assert objects.get("n", objects.merge("n", left, right, with_="counter")) == b"17"

    calls = []

    def longest(ancestor, a, b):
        calls.append((ancestor, a, b))
        return max(a, b, key=len) + b"!"

    merged = objects.merge("n", left, right, with_=longest)
    assert calls == [(b"10", b"15", b"12")]
    assert objects.get("n", merged) == b"15!"
    assert objects.previous("n", merged) == [left, right]

    def broken(ancestor, a, b):
        raise KeyError("from the merge function")

    with pytest.raises(KeyError, match="from the merge function"):
        objects.merge("n", left, right, with_=broken)
    with pytest.raises(TypeError):
        objects.merge("n", left, right, with_=lambda *_: "not bytes")
    assert objects.get("n", objects.merge("n", left, right, b"99")) == b"99"

    a = objects.put("m", b'{"x":1}')
    l, r = objects.put("m", b'{"x":2}', base=a), objects.put("m", b'{"x":3}', base=a)
    with pytest.raises(varve.MergeConflict) as caught:
        objects.merge("m", l, r, with_="map")
    assert caught.value.fields == ["x"]
    with pytest.raises(varve.InvalidArgument):
        objects.merge("m", l, r, with_="nope")
    with pytest.raises(varve.InvalidArgument):
        objects.merge("m", l, r)
    assert objects.diff("m", l, r) == {"added": {}, "removed": {}, "changed": {"x": (2, 3)}}


def test_refs_compare_and_set(objects):
    a = objects.put("k", b"a")
    b = objects.put("k", b"b", base=a)
    objects.set_branch("k", "main", a)
    objects.set_branch("k", "main", b, expected=a)
    with pytest.raises(varve.RefMoved) as caught:
        objects.set_branch("k", "main", a, expected=a)
    assert caught.value.name == "main" and caught.value.actual == b.id[:12]
    objects.set_tag("k", "v1", a)
    assert objects.refs("k") == {"main": (b, "branch"), "v1": (a, "tag")}
    assert objects.get("k", "main") == b"b"
    objects.delete_ref("k", "main", "main")
    assert list(objects.refs("k")) == ["v1"]


def test_grants_verify_and_proofs(objects):
    alice = objects.as_principal("alice")
    v1 = alice.put("doc", b"one")
    v2 = alice.put("doc", b"two", base=v1)
    alice.restrict("doc")
    bob = objects.as_principal("bob")
    with pytest.raises(varve.Forbidden) as caught:
        bob.get("doc", v1)
    assert caught.value.owner == "alice" and isinstance(caught.value, PermissionError)
    with pytest.raises(varve.Forbidden):
        bob.grant("doc", "bob", [v1])
    alice.grant("doc", "bob", [v1])
    assert bob.get("doc", v1) == b"one"
    assert bob.versions("doc") == [v1]
    assert [g["kind"] for g in objects.grants("doc")] == ["restrict", "grant"]
    assert objects.grants("doc")[1]["versions"] == [v1.id]
    assert objects.owner("doc") == "alice"

    assert objects.verify("doc", v2) == 2
    proof = objects.prove("doc", v1, v2)
    assert varve.check_proof(proof, "doc", v2.id, v1.id) == v1
    forged = json.loads(json.dumps(proof))
    forged["steps"][0]["digest"] = "00" * 32
    with pytest.raises(varve.ProofInvalid):
        varve.check_proof(forged, "doc", v2, v1)
    with pytest.raises(varve.ProofInvalid):
        varve.check_proof(proof, "other", v2, v1)


def test_watch_yields_new_versions(objects):
    first = objects.put("app/a", b"1")
    objects.put("other", b"2")
    watch = objects.watch(prefix="app/")
    assert next(watch)["version"] == first
    assert watch.next(timeout=0.05) is None
    later = threading.Timer(0.05, lambda: objects.put("app/b", b"3"))
    later.start()
    seen = watch.next(timeout=30)
    later.join()
    assert seen is not None and seen["key"] == "app/b" and seen["seq"] == 3 and seen["parents"] == []


def test_the_guide_examples_run(tmp_path):
    guide = (REPO / "docs" / "objects.md").read_text()
    python = guide.split("## Python", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", python, flags=re.S)
    assert blocks, "docs/objects.md shows Python examples"
    for block in blocks:
        subprocess.run([sys.executable, "-c", block], cwd=tmp_path, check=True)
