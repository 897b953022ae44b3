"""PART from Python: ``varve.PersistentMap`` against a dict oracle (seeded
random operations; the seed is printed, and VARVE_TEST_SEED replays one),
snapshots, set operations, iteration during writes, typed errors, and
``ns.durable_map`` across close, reopen and a SIGKILLed writer."""

import operator
import os
import random
from pathlib import Path

import pytest
from crashkit import kill_after_acks

import varve

DURABLE_WRITER = Path(__file__).with_name("part_crash_writer.py")


def seeded(name):
    seed = int(os.environ.get("VARVE_TEST_SEED", random.randrange(2**63)))
    print(f"{name}: seed {seed} (replay with VARVE_TEST_SEED={seed})")
    return random.Random(seed), seed


def random_key(rng, key_type):
    # Short keys over a small alphabet: many shared prefixes, keys that are
    # prefixes of others, and repeats.
    text = "".join(rng.choice("abc\u00e9") for _ in range(rng.randrange(0, 5)))
    return text if key_type is str else text.encode()


def check_against(m, oracle, key_type):
    expected = sorted(oracle.items())
    assert len(m) == len(oracle)
    assert list(m.items()) == expected
    assert list(m) == [k for k, _ in expected]
    assert list(m.values()) == [v for _, v in expected]
    assert m.first() == (expected[0] if expected else None)
    assert m.last() == (expected[-1] if expected else None)
    for k, _ in expected:
        assert type(k) is key_type


@pytest.mark.parametrize("key_type", [bytes, str])
def test_random_operations_match_a_dict(key_type):
    rng, seed = seeded(f"test_random_operations_match_a_dict[{key_type.__name__}]")
    m = varve.PersistentMap(key_type=key_type)
    oracle = {}
    snapshots = []
    for step in range(3000):
        op = rng.random()
        k = random_key(rng, key_type)
        if op < 0.45:
            v = rng.randrange(100)
            m[k] = v
            oracle[k] = v
        elif op < 0.6:
            if k in oracle:
                del m[k]
                del oracle[k]
            else:
                with pytest.raises(KeyError):
                    del m[k]
        elif op < 0.7:
            batch = [(random_key(rng, key_type), rng.choice([varve.DELETE, rng.randrange(100)])) for _ in range(8)]
            m.update(batch)
            for bk, bv in batch:
                if bv is varve.DELETE:
                    oracle.pop(bk, None)
                else:
                    oracle[bk] = bv
        elif op < 0.8:
            assert m.get(k, "none") == oracle.get(k, "none")
            assert (k in m) == (k in oracle)
        elif op < 0.85:
            lo, hi = sorted([random_key(rng, key_type), random_key(rng, key_type)])
            assert list(m.range(lo, hi)) == sorted((a, b) for a, b in oracle.items() if lo <= a < hi), (seed, step)
            assert list(m.range(start=lo)) == sorted((a, b) for a, b in oracle.items() if lo <= a)
            assert list(m.range(stop=hi)) == sorted((a, b) for a, b in oracle.items() if a < hi)
        elif op < 0.9:
            p = random_key(rng, key_type)[:2]
            assert list(m.prefix(p)) == sorted((a, b) for a, b in oracle.items() if a.startswith(p)), (seed, step)
        elif op < 0.93:
            snapshots.append((m.snapshot(), dict(oracle)))
        if step % 250 == 0:
            check_against(m, oracle, key_type)
    check_against(m, oracle, key_type)
    # Every snapshot still holds what the map held when it was taken.
    for snap, then in snapshots:
        check_against(snap, then, key_type)


def test_snapshot_is_unchanged_by_later_writes_and_read_only():
    m = varve.PersistentMap({b"a": 1, b"b": 2})
    snap = m.snapshot()
    m[b"a"] = 10
    m[b"c"] = 3
    del m[b"b"]
    m.update({b"d": 4, b"a": varve.DELETE})
    assert dict(snap.items()) == {b"a": 1, b"b": 2}
    assert dict(m.items()) == {b"c": 3, b"d": 4}
    assert snap.read_only and not m.read_only
    for write in (lambda: snap.__setitem__(b"x", 1), lambda: snap.__delitem__(b"a"), lambda: snap.update({b"x": 1})):
        with pytest.raises(TypeError, match="snapshot and is read-only"):
            write()
    writable = snap.copy()
    writable[b"x"] = 9
    assert list(snap) == [b"a", b"b"] and list(writable) == [b"a", b"b", b"x"]


def test_iterators_walk_the_map_as_it_was_when_made():
    m = varve.PersistentMap((b"k%04d" % i, i) for i in range(1000))
    seen = []
    for k in m:  # writes during iteration: allowed, not seen
        seen.append(k)
        m[k + b"!"] = 0
        if len(seen) % 3 == 0:
            del m[k]
    assert seen == [b"k%04d" % i for i in range(1000)]
    it = m.items()
    m.update({k: varve.DELETE for k in list(m)})
    assert len(m) == 0
    assert len(list(it)) == 1000 + 1000 - 333


def test_compact_keeps_entries_and_leaves_what_a_snapshot_shares():
    m = varve.PersistentMap({((i * 7919) % 100_003).to_bytes(4, "big"): i for i in range(5000)})
    for i in range(0, 5000, 3):
        del m[((i * 7919) % 100_003).to_bytes(4, "big")]
    expected = list(m.items())
    done = m.compact()
    assert done["nodes_moved"] > 100 and done["nodes_shared"] == 0
    assert list(m.items()) == expected

    snap = m.snapshot()
    assert m.compact() == {"nodes_moved": 0, "nodes_shared": 1}  # the root is shared
    m[b"new!"] = 1
    done = m.compact()
    assert 1 <= done["nodes_moved"] <= 4 and done["nodes_shared"] >= 1  # the copied path only
    assert list(snap.items()) == expected
    assert list(m.items()) == sorted(expected + [(b"new!", 1)])


def test_key_types():
    b = varve.PersistentMap()
    b["é"] = 1  # str keys of a bytes map are stored UTF-8 and returned as bytes
    b[bytearray(b"z")] = 2
    assert list(b.items()) == [(b"z", 2), ("é".encode(), 1)]
    assert b.key_type is bytes and "é" in b and "é".encode() in b
    s = varve.PersistentMap({"b": 1, "a": 2}, key_type=str)
    assert list(s) == ["a", "b"] and s.key_type is str
    with pytest.raises(TypeError, match="key_type=str"):
        s[b"a"] = 1
    assert b"a" not in s and 1 not in s
    # Byte order of UTF-8 is code point order: Python's sorted agrees.
    words = ["z", "é", "\U0001f600", "a", "ab", "", "\u00ff"]
    s2 = varve.PersistentMap({w: None for w in words}, key_type=str)
    assert list(s2) == sorted(words)


def test_typed_errors_for_bad_keys_and_arguments():
    m = varve.PersistentMap()
    for bad in (1, 1.5, None, (b"a",)):
        with pytest.raises(TypeError, match="a key of this map is bytes or str"):
            m[bad] = 1
        with pytest.raises(TypeError):
            m.get(bad)
        assert bad not in m
    with pytest.raises(UnicodeEncodeError):
        m["\ud800"] = 1
    with pytest.raises(KeyError):
        m[b"missing"]
    with pytest.raises(TypeError, match="key_type=bytes"):
        varve.PersistentMap(key_type=int)
    with pytest.raises(TypeError, match="pairs"):
        m.update([b"not a pair"])
    with pytest.raises(TypeError, match="mapping or an iterable"):
        m.update(5)
    with pytest.raises(TypeError, match="same key type"):
        m.union(varve.PersistentMap(key_type=str))
    assert len(m) == 0  # nothing applied by a failed batch
    with pytest.raises(TypeError, match="unhashable"):
        hash(m)


def test_values_are_any_object_and_kept_alive():
    class Box:
        pass

    box = Box()
    m = varve.PersistentMap()
    m[b"box"] = box
    m[b"none"] = None
    m[b"list"] = [1, 2]
    snap = m.snapshot()
    m[b"box"] = "replaced"
    assert snap[b"box"] is box and snap[b"none"] is None and snap.get(b"none", 5) is None
    assert m.get(b"absent") is None and m.get(b"absent", 7) == 7


@pytest.mark.parametrize("key_type", [bytes, str])
def test_set_operations_match_dict_oracles(key_type):
    rng, seed = seeded(f"test_set_operations_match_dict_oracles[{key_type.__name__}]")
    for _ in range(30):
        a = {random_key(rng, key_type): rng.randrange(10) for _ in range(rng.randrange(40))}
        b = {random_key(rng, key_type): rng.randrange(10) for _ in range(rng.randrange(40))}
        ma = varve.PersistentMap(a, key_type=key_type)
        # b shares structure with a part of a: a copy of ma with updates.
        mb = ma.copy() if rng.random() < 0.5 else varve.PersistentMap(key_type=key_type)
        if len(mb):
            b = dict(a)
            for k in list(b)[::2]:
                del b[k], mb[k]
            for k in [random_key(rng, key_type) for _ in range(5)]:
                b[k] = mb[k] = rng.randrange(10)
        else:
            mb.update(b)
        assert dict(ma.union(mb).items()) == {**a, **b}, seed
        added = ma.union(mb, combine=operator.add)
        assert dict(added.items()) == {k: a.get(k, 0) + b.get(k, 0) for k in a.keys() | b.keys()}, seed
        assert dict(ma.intersection(mb).items()) == {k: v for k, v in a.items() if k in b}, seed
        assert dict(ma.difference(mb).items()) == {k: v for k, v in a.items() if k not in b}, seed
        assert set(ma.union(mb)) == a.keys() | b.keys()
        assert list(ma.union(mb)) == sorted(a.keys() | b.keys())


def test_union_combine_sees_shared_keys_and_errors_propagate():
    m = varve.PersistentMap({b"a": 1, b"b": 2})
    # The maps share their whole tree; combine is still called for every key.
    assert dict(m.union(m.snapshot(), combine=operator.add).items()) == {b"a": 2, b"b": 4}

    def boom(x, y):
        raise ValueError("combine failed")

    with pytest.raises(ValueError, match="combine failed"):
        m.union(m, combine=boom)


def test_equality_and_repr():
    a = varve.PersistentMap({b"x": 1, b"y": [2]})
    b = varve.PersistentMap([(b"y", [2]), (b"x", 1)])
    assert a == b and a == b.snapshot() and not (a != b)
    b[b"x"] = 2
    assert a != b
    assert a != {b"x": 1, b"y": [2]}  # not a dict
    assert varve.PersistentMap({"x": 1}, key_type=str) != varve.PersistentMap({b"x": 1})
    assert repr(a) == "PersistentMap({b'x': 1, b'y': [2]})"
    assert repr(varve.PersistentMap({"k": 1}, key_type=str).snapshot()) == "PersistentMap({'k': 1}, key_type=str, read_only=True)"
    big = varve.PersistentMap((b"%03d" % i, i) for i in range(100))
    assert repr(big).endswith(", ... 68 more})")


# ------------------------------------------------------------ durable map


def test_durable_map_basics_and_reopen(tmp_path):
    rng, seed = seeded("test_durable_map_basics_and_reopen")
    oracle = {}
    with varve.open(tmp_path / "data", sync="never") as store:
        m = store.namespace("ns").durable_map("words", key_type=str)
        assert m.key_type is str and len(m) == 0 and m.first() is None
        for step in range(600):
            k = random_key(rng, str)
            if rng.random() < 0.7:
                v = b"%d" % rng.randrange(1000)
                if rng.random() < 0.5:
                    m[k] = v
                else:
                    m.put(k, bytearray(v))
                oracle[k] = v
            elif k in oracle:
                del m[k]
                del oracle[k]
            else:
                with pytest.raises(KeyError):
                    del m[k]
                m.delete(k)  # absent: no error
            if step == 300:
                stats = m.checkpoint()
                assert stats["full"] is True and stats["total_bytes"] == stats["blob_bytes"] + stats["manifest_bytes"]
        m.update([("batch-a", b"1"), ("batch-b", b"2"), ("batch-a", varve.DELETE)])
        oracle["batch-b"] = b"2"
        snap = m.snapshot()
        m["after-snapshot"] = b"x"
        assert dict(snap.items()) == oracle and snap.read_only and snap.key_type is str
        oracle["after-snapshot"] = b"x"
        assert dict(m.items()) == oracle and list(m) == sorted(oracle)
        assert list(m.prefix("ab")) == sorted((k, v) for k, v in oracle.items() if k.startswith("ab"))
        assert list(m.range("b", "c")) == sorted((k, v) for k, v in oracle.items() if "b" <= k < "c")
        m.close()
        assert m.closed
        with pytest.raises(varve.Closed, match="durable_map"):
            len(m)
        again = store.namespace("ns").durable_map("words", key_type=str)
        assert dict(again.items()) == oracle, seed
        assert any(info.name == "part.words.manifest" for info in store.namespace("ns").logs())
    with varve.open(tmp_path / "data") as store:
        m = store.namespace("ns").durable_map("words")  # key_type=bytes: keys come back as bytes
        assert dict(m.items()) == {k.encode(): v for k, v in oracle.items()}
    with pytest.raises(varve.Closed):
        len(m)  # the store's close closed it


def test_durable_map_shared_between_objects_and_typed_errors(ns):
    a = ns.durable_map("m")
    b = ns.durable_map("m")
    a[b"k"] = b"v"
    assert b[b"k"] == b"v" and b.get(b"none") is None and b.get(b"none", b"d") == b"d"
    for bad_value in ("text", 1, None, [b"x"]):
        with pytest.raises(TypeError, match="durable map's value is bytes"):
            a[b"x"] = bad_value
    with pytest.raises(TypeError, match="a key of this map is bytes or str"):
        a[1] = b"x"
    with pytest.raises(TypeError, match="durable map's value is bytes"):
        a.update({b"ok": b"1", b"bad": 2})
    assert b"ok" not in a  # the batch was refused whole
    with pytest.raises(varve.InvalidName):
        ns.durable_map("bad/name")
    a[b"\xff"] = b"not utf-8"
    s = ns.durable_map("m", key_type=str)
    with pytest.raises(ValueError, match="not UTF-8"):
        list(s)
    with a:
        pass
    assert b.closed


def test_sigkilled_durable_writer_keeps_every_acknowledged_put(tmp_path):
    acknowledged = -1
    for round_ in range(3):
        acknowledged = max([acknowledged, *kill_after_acks(DURABLE_WRITER, tmp_path, 40 + 20 * round_, 60)])
        with varve.open(tmp_path) as store:
            m = store.namespace("crash").durable_map("counter")
            present = sorted(int(k) for k in m)
            # Every acknowledged put is there; at most the one in flight too.
            assert present[: acknowledged + 1] == list(range(acknowledged + 1))
            assert len(present) <= acknowledged + 2
            assert all(m[b"%08d" % i] == b"v%d" % i for i in present)


def test_bounded_iterators_cross_refill_chunks():
    # Iterators fetch 256 entries at a time and resume after the last key:
    # ranges and prefixes longer than a chunk, starting and ending inside one.
    keys = [b"%05d" % i for i in range(0, 3000, 3)]
    m = varve.PersistentMap((k, i) for i, k in enumerate(keys))
    assert list(m.range(b"00100", b"02500")) == [(k, i) for i, k in enumerate(keys) if b"00100" <= k < b"02500"]
    assert [k for k, _ in m.prefix(b"01")] == [k for k in keys if k.startswith(b"01")]
    assert list(m.range(b"02000", b"01000")) == [] and list(m.range(b"00003", b"00003")) == []
    assert list(m.prefix(b"")) == list(m.items())
    edge = varve.PersistentMap({b"\xff": 1, b"\xff\xff": 2, b"\xfe": 0})
    assert list(edge.prefix(b"\xff")) == [(b"\xff", 1), (b"\xff\xff", 2)]


def test_durable_empty_update_writes_nothing(ns):
    m = ns.durable_map("empty")
    before = {info.name: info.latest for info in ns.logs()}
    m.update({})
    m.update([])
    assert {info.name: info.latest for info in ns.logs()} == before


def test_a_damaged_batch_record_raises_corrupt_on_reopen(ns):
    m = ns.durable_map("c")
    m[b"k"] = b"v"
    m.close()
    # A record that is not a batch, appended to the map's batch log by hand.
    batches = ns.log("part.c.batches.1")
    seq = batches.append(b"not a batch record")
    with pytest.raises(varve.Corrupt) as caught:
        ns.durable_map("c")
    assert caught.value.log == "part.c.batches.1" and caught.value.seq == seq
