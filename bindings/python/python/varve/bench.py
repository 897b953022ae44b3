"""``python -m varve.bench``: what calling Varve from Python costs.

For ``append``, ``get`` and ``sorted_set.insert`` it times n calls from a
Python loop and the same n operations looped in Rust (``varve._bench_rust``)
in the same process, on the same kind of store (journal, ``sync="group"``),
and reports the difference per call: the binding's overhead, including the
Python loop itself. For ``append_batch`` it compares throughput. Medians of
several runs; ratios measured in the same run, as STYLE.md asks.

The PART section times ``varve.PersistentMap`` beside ``dict`` and
``pyrsistent.pmap`` on the same shuffled 8-byte keys: inserts, lookups, a
full scan in key order (the dict and the pmap sort their items), and an
insert followed by a snapshot kept after every insert (``dict.copy()`` at a
small size only: it is O(n) per snapshot).
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

import varve
from varve._varve import _bench_rust

RECORD = b"x" * 16


def _python_append(path: Path, n: int) -> float:
    with varve.open(path, sync="group") as store:
        log = store.namespace("bench").log("py")
        append = log.append
        started = time.perf_counter()
        for _ in range(n):
            append(RECORD)
        return time.perf_counter() - started


def _python_get(path: Path, n: int) -> float:
    with varve.open(path, sync="group") as store:
        ns = store.namespace("bench")
        log = ns.log("py")
        for start in range(0, n, 10_000):
            ns.append_batch({"py": [RECORD] * min(10_000, n - start)})
        get = log.get
        started = time.perf_counter()
        for seq in range(1, n + 1):
            get(seq)
        return time.perf_counter() - started


def _python_insert(path: Path, n: int) -> float:
    with varve.open(path, sync="group") as store:
        s = store.namespace("bench").sorted_set("py")
        insert = s.insert
        started = time.perf_counter()
        for key in range(n):
            insert(key)
        return time.perf_counter() - started


def _python_batch(path: Path, n: int, batch: int) -> float:
    with varve.open(path, sync="group") as store:
        ns = store.namespace("bench")
        ns.log("py")
        records = [RECORD] * batch
        started = time.perf_counter()
        left = n
        while left > 0:
            ns.append_batch({"py": records[: min(left, batch)]})
            left -= batch
        return time.perf_counter() - started


# ------------------------------------------------------------------- PART


def _part_keys(n: int) -> List[bytes]:
    keys = [b"%08d" % i for i in range(n)]
    random.Random(42).shuffle(keys)
    return keys


def _timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def _part_figures(kind: str, keys: List[bytes], dict_copies: bool) -> Dict[str, float]:
    """Seconds for each operation on `keys` with one kind of map; the dict's
    "insert+snapshot" (a dict.copy() kept per insert, quadratic in time and
    memory) only if `dict_copies`."""
    import pyrsistent

    out: Dict[str, float] = {}
    if kind == "PersistentMap":
        m = varve.PersistentMap()

        def insert() -> None:
            for i, k in enumerate(keys):
                m[k] = i

        out["insert"] = _timed(insert)
        out["lookup"] = _timed(lambda: [m[k] for k in keys])
        out["scan"] = _timed(lambda: sum(1 for _ in m.items()))

        def insert_snapshot() -> None:
            s = varve.PersistentMap()
            history = []
            for i, k in enumerate(keys):
                s[k] = i
                history.append(s.snapshot())

        out["insert+snapshot"] = _timed(insert_snapshot)
    elif kind == "dict":
        d: Dict[bytes, int] = {}

        def insert_d() -> None:
            for i, k in enumerate(keys):
                d[k] = i

        out["insert"] = _timed(insert_d)
        out["lookup"] = _timed(lambda: [d[k] for k in keys])
        out["scan"] = _timed(lambda: sum(1 for _ in sorted(d.items())))

        def insert_copy() -> None:
            c: Dict[bytes, int] = {}
            history = []
            for i, k in enumerate(keys):
                c[k] = i
                history.append(c.copy())

        if dict_copies:
            out["insert+snapshot"] = _timed(insert_copy)
    else:
        p: "pyrsistent.PMap[bytes, int]" = pyrsistent.pmap()

        def insert_p() -> None:
            nonlocal p
            for i, k in enumerate(keys):
                p = p.set(k, i)

        out["insert"] = _timed(insert_p)
        out["lookup"] = _timed(lambda: [p[k] for k in keys])
        out["scan"] = _timed(lambda: sum(1 for _ in sorted(p.items())))

        def insert_versions() -> None:
            v: "pyrsistent.PMap[bytes, int]" = pyrsistent.pmap()
            history = []
            for i, k in enumerate(keys):
                v = v.set(k, i)
                history.append(v)  # every version is a snapshot already

        out["insert+snapshot"] = _timed(insert_versions)
    return out


def _part(n: int, n_small: int, runs: int) -> None:
    kinds = ["PersistentMap", "dict", "pmap"]
    print()
    print(f"PART: varve.PersistentMap vs dict vs pyrsistent.pmap, shuffled 8-byte keys, median of {runs} runs "
          f"(µs per key; ratios = other / PersistentMap)")
    print(f"{'operation':<18} {'n':>8} {'PersistentMap':>14} {'dict':>9} {'pmap':>9} {'dict/PM':>8} {'pmap/PM':>8}")
    for size in (n_small, n):
        keys = _part_keys(size)
        trials: Dict[str, List[Dict[str, float]]] = {kind: [] for kind in kinds}
        for _ in range(runs):
            for kind in kinds:  # interleaved, so drifts in machine load hit every kind alike
                trials[kind].append(_part_figures(kind, keys, dict_copies=size == n_small))
        for op in ["insert", "lookup", "scan", "insert+snapshot"]:
            us = {kind: statistics.median(t[op] for t in trials[kind]) / size * 1e6 for kind in kinds
                  if op in trials[kind][0]}
            pmap_ratio = us["pmap"] / us["PersistentMap"]
            if op == "insert+snapshot" and size != n_small:
                # dict.copy() per insert is quadratic: timed at the small size only.
                print(f"{op:<18} {size:>8} {us['PersistentMap']:>14.3f} {'-':>9} {us['pmap']:>9.3f} {'-':>8} "
                      f"{pmap_ratio:>8.2f}")
                continue
            note = "   (dict: a dict.copy() per insert)" if op == "insert+snapshot" else ""
            print(f"{op:<18} {size:>8} {us['PersistentMap']:>14.3f} {us['dict']:>9.3f} {us['pmap']:>9.3f} "
                  f"{us['dict'] / us['PersistentMap']:>8.2f} {pmap_ratio:>8.2f}{note}")


def _median(runs: int, fn: Callable[[Path], float]) -> float:
    times: List[float] = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="varve-bench-") as d:
            times.append(fn(Path(d)))
    return statistics.median(times)


def main(argv: "List[str] | None" = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m varve.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200_000, help="calls per run for append and get")
    parser.add_argument("--n-insert", type=int, default=5_000, help="calls per run for sorted_set.insert")
    parser.add_argument("--batch", type=int, default=1_000, help="records per append_batch")
    parser.add_argument("--runs", type=int, default=5, help="runs per figure (the median is reported)")
    parser.add_argument("--part-n", type=int, default=20_000, help="keys per run in the PART section")
    parser.add_argument("--part-n-small", type=int, default=2_000,
                        help="keys per run at the small PART size (where dict.copy() per insert is timed too)")
    parser.add_argument("--only", choices=["binding", "part"], help="run one section only")
    args = parser.parse_args(argv)

    if args.only != "part":
        _binding(args)
    if args.only != "binding":
        _part(args.part_n, args.part_n_small, args.runs)


def _binding(args: argparse.Namespace) -> None:

    print(f"varve Python binding benchmark: median of {args.runs} runs, 16-byte records, sync=\"group\"")
    print(f"{'operation':<20} {'n':>8} {'Python µs/call':>15} {'Rust µs/call':>13} {'overhead µs':>12}  goal ≤ 1 µs")
    per_call = [
        ("append", args.n, _python_append),
        ("get", args.n, _python_get),
        ("sorted_set.insert", args.n_insert, _python_insert),
    ]
    for name, n, python_fn in per_call:
        op = {"append": "append", "get": "get", "sorted_set.insert": "sorted_set_insert"}[name]
        py = _median(args.runs, lambda p: python_fn(p, n)) / n * 1e6
        rust = _median(args.runs, lambda p: _bench_rust(op, n, str(p))) / n * 1e6
        overhead = py - rust
        verdict = "met" if overhead <= 1.0 else "MISSED"
        print(f"{name:<20} {n:>8} {py:>15.3f} {rust:>13.3f} {overhead:>12.3f}  {verdict}")

    n = args.n * 5
    py = _median(args.runs, lambda p: _python_batch(p, n, args.batch))
    rust = _median(args.runs, lambda p: _bench_rust("append_batch", n, str(p), 16, args.batch))
    ratio = rust / py
    verdict = "met" if ratio >= 0.5 else "MISSED"
    print()
    print(f"append_batch ({args.batch} records of 16 bytes per batch, {n} records)")
    print(f"  Python {n / py / 1e6:.2f} M records/s   Rust {n / rust / 1e6:.2f} M records/s   "
          f"Python/Rust {ratio:.0%}  goal ≥ 50%: {verdict}")


if __name__ == "__main__":
    main()
