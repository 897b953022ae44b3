"""Versioned structures against a pure-Python model that keeps every version.

Hypothesis runs derandomized (same examples every run; a failure prints the
failing sequence of operations, which replays exactly).
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import varve

SETTINGS = settings(
    max_examples=25,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

ints = st.integers(min_value=varve.KEY_INT_MIN, max_value=varve.KEY_INT_MAX)
small_ints = st.integers(min_value=-20, max_value=20)
texts = st.text(alphabet="ab\x00é", max_size=4)
blobs = st.binary(max_size=4)
tuples = st.tuples(texts, small_ints)
values = st.one_of(ints, texts, blobs, st.none(), st.booleans(), st.floats(allow_nan=False), st.tuples(small_ints, texts))

_counter = [0]


def fresh_name(prefix):
    _counter[0] += 1
    return f"{prefix}{_counter[0]}"


@pytest.mark.parametrize("keys", [ints, small_ints, texts, blobs, tuples], ids=["int", "small-int", "str", "bytes", "tuple"])
@pytest.mark.parametrize("tree", ["balanced", "bst"])
def test_sorted_set_matches_model(ns, keys, tree):
    @SETTINGS
    @given(st.lists(st.tuples(st.booleans(), keys), max_size=30))
    def check(ops):
        s = ns.sorted_set(fresh_name("set"), extra=2, tree=tree)
        model, versions = set(), [None]  # versions[v] is the set at version v
        for insert, key in ops:
            v = s.insert(key) if insert else s.delete(key)
            before = set(model)
            (model.add if insert else model.discard)(key)
            if model != before:
                versions.append(frozenset(model))
            assert v == len(versions) - 1
        assert s.latest == len(versions) - 1
        assert list(s.versions()) == list(range(1, len(versions)))
        for v in range(1, len(versions)):
            assert s.to_list(at=v) == sorted(versions[v]), f"version {v}"
            assert s.len(at=v) == len(versions[v])
            assert s.first(at=v) == min(versions[v], default=None)
            assert s.last(at=v) == max(versions[v], default=None)
        assert list(s) == sorted(model) and len(s) == len(model)
        for key in list(model)[:5]:
            assert key in s and s.contains(key, at=len(versions) - 1)
        if len(versions) > 2:
            a, b = 1, len(versions) - 1
            added, removed = s.diff(a, b)
            assert added == sorted(versions[b] - versions[a])
            assert removed == sorted(versions[a] - versions[b])
        if len(model) >= 2:
            lo, hi = sorted(model)[0], sorted(model)[-1]
            assert s.range(lo, hi) == [k for k in sorted(model) if lo <= k < hi]
            assert s.range(start=hi) == [hi]
            assert s.range(stop=lo) == []

    check()


def test_sorted_map_matches_model(ns):
    @SETTINGS
    @given(st.lists(st.tuples(st.booleans(), small_ints, values), max_size=30))
    def check(ops):
        m = ns.sorted_map(fresh_name("map"))
        model, versions = {}, [None]
        for insert, key, value in ops:
            v = m.insert(key, value) if insert else m.delete(key)
            before = dict(model)
            if insert:
                model[key] = value
            else:
                model.pop(key, None)
            if repr(sorted(model.items())) != repr(sorted(before.items())):
                versions.append(dict(model))
            assert v == len(versions) - 1
        for v in range(1, len(versions)):
            expected = sorted(versions[v].items())
            assert repr(m.items(at=v)) == repr(expected)
            assert m.keys(at=v) == [k for k, _ in expected]
            for k, val in expected[:3]:
                assert repr(m.get(k, at=v)) == repr(val)
        for k, val in model.items():
            assert repr(m[k]) == repr(val)
        if len(versions) > 2:
            a, b = versions[1], versions[-1]
            added, removed, changed = m.diff(1, len(versions) - 1)
            assert [k for k, _ in added] == sorted(set(b) - set(a))
            assert [k for k, _ in removed] == sorted(set(a) - set(b))
            assert [k for k, _, _ in changed] == sorted(k for k in set(a) & set(b) if repr(a[k]) != repr(b[k]))

    check()


list_ops = st.one_of(
    st.tuples(st.just("push_back"), small_ints),
    st.tuples(st.just("push_front"), small_ints),
    st.tuples(st.just("insert_after"), st.integers(0, 12), small_ints),
    st.tuples(st.just("remove"), small_ints),
    st.tuples(st.just("remove_at"), st.integers(0, 12)),
)


def test_list_matches_model(ns):
    @SETTINGS
    @given(st.lists(list_ops, max_size=30))
    def check(ops):
        lst = ns.list(fresh_name("list"), extra=1)
        model, versions = [], [None]
        for op, *args in ops:
            before = list(model)
            if op == "push_back":
                lst.push_back(args[0])
                model.append(args[0])
            elif op == "push_front":
                lst.push_front(args[0])
                model.insert(0, args[0])
            elif op == "insert_after":
                if args[0] >= len(model):
                    with pytest.raises(varve.PositionOutOfRange):
                        lst.insert_after(*args)
                    continue
                lst.insert_after(*args)
                model.insert(args[0] + 1, args[1])
            elif op == "remove":
                lst.remove(args[0])
                if args[0] in model:
                    model.remove(args[0])
            else:
                if args[0] >= len(model):
                    with pytest.raises(IndexError):
                        lst.remove_at(args[0])
                    continue
                lst.remove_at(args[0])
                del model[args[0]]
            if model != before or op in ("push_back", "push_front", "insert_after"):
                versions.append(list(model))
            assert lst.latest == len(versions) - 1
        for v in range(1, len(versions)):
            assert lst.to_list(at=v) == versions[v]
            assert lst.len(at=v) == len(versions[v])
            assert lst.last(at=v) == (versions[v][-1] if versions[v] else None)
            for i, item in enumerate(versions[v][:3]):
                assert lst.get(i, at=v) == item
                assert lst.find(item, at=v) == versions[v].index(item)
        assert list(lst) == model
        if model:
            assert lst[-1] == model[-1] and lst[0] == model[0]

    check()


def test_key_order_agrees_with_python(ns):
    keys = [-(2**63), -(2**40), -1, 0, 1, 2**40, 2**63, 2**64 - 1]
    s = ns.sorted_set("ints")
    for k in reversed(keys):
        s.insert(k)
    assert s.to_list() == keys
    t = ns.sorted_set("tuples")
    tk = [("a", 2), ("a", 10), ("ab", 1), ("b", -5), ("\x00", 3)]
    for k in tk:
        t.insert(k)
    assert t.to_list() == sorted(tk)
    b = ns.sorted_set("bytes")
    bk = [b"", b"\x00", b"\x00\x00", b"\x00\xff", b"\x01", b"\xff"]
    for k in reversed(bk):
        b.insert(k)
    assert b.to_list() == sorted(bk)


def test_mixed_key_types_are_refused(ns):
    s = ns.sorted_set("mixed")
    s.insert(1)
    for bad in ["a", b"a", (1, 2), (1,)]:
        with pytest.raises(TypeError, match="one type"):
            s.insert(bad)
    assert "a" not in s  # membership of another type is simply False
    with pytest.raises(TypeError):
        s.range("a", "b")
    s.delete(1)
    s.insert("now strings")  # the latest version was empty: any one type again
    assert s.to_list() == ["now strings"] and s.to_list(at=1) == [1]
    t = ns.sorted_set("tuples")
    t.insert((1, "a"))
    with pytest.raises(TypeError):
        t.insert(("a", 1))


def test_unsupported_keys_and_values(ns):
    s = ns.sorted_set("s")
    for bad in [1.5, True, None, [1], {"a": 1}, object()]:
        with pytest.raises(TypeError):
            s.insert(bad)
    for huge in [2**64, -(2**63) - 1, 10**100]:
        with pytest.raises(OverflowError, match="supported range"):
            s.insert(huge)
    m = ns.sorted_map("m")
    with pytest.raises(TypeError):
        m.insert(1, [1, 2])
    with pytest.raises(TypeError):
        deep = 1
        for _ in range(40):
            deep = (deep,)
        s.insert(deep)
    assert s.latest == 0


def test_versions_and_errors(ns):
    s = ns.sorted_set("v", keep_versions=2)
    assert s.to_list() == [] and s.first() is None and len(s) == 0
    with pytest.raises(varve.NoSuchVersion) as e:
        s.to_list(at=1)
    assert (e.value.structure, e.value.version, e.value.latest) == ("v", 1, 0)
    assert isinstance(e.value, varve.NotFound)
    s.insert(1)
    s.insert(2)
    with pytest.raises(varve.Full) as e:
        s.insert(3)
    assert (e.value.structure, e.value.keep) == ("v", 2)
    assert s.to_list(at=1) == [1] and s.to_list() == [1, 2], "reads go on"
    with pytest.raises(varve.NoSuchVersion):
        s.contains(1, at=0)


def test_structure_reopen_and_config(tmp_path):
    with varve.open(tmp_path) as store:
        ns = store.namespace("n")
        m = ns.sorted_map("readings")
        m.insert("t", 21.5)
        m.insert("t", 22.0)
        assert ns.sorted_map("readings") is not m  # a new handle on the same structure
        with pytest.raises(varve.AlreadyExists):
            ns.sorted_map("readings", extra=3)
        with pytest.raises(varve.AlreadyExists):
            ns.sorted_set("readings")
        with pytest.raises(varve.InvalidName):
            ns.sorted_set("bad name")
    with varve.open(tmp_path) as store:
        m = store.namespace("n").sorted_map("readings")
        assert m["t"] == 22.0 and m.get("t", at=1) == 21.5 and m.latest == 2
        assert m.first() == ("t", 22.0) and m.get("missing", default=0) == 0
        with pytest.raises(KeyError):
            m["missing"]
