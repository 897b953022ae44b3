"""``python -m varve.bench``: what calling Varve from Python costs.

For ``append``, ``get`` and ``sorted_set.insert`` it times n calls from a
Python loop and the same n operations looped in Rust (``varve._bench_rust``)
in the same process, on the same kind of store (journal, ``sync="group"``),
and reports the difference per call: the binding's overhead, including the
Python loop itself. For ``append_batch`` it compares throughput. Medians of
several runs; ratios measured in the same run, as STYLE.md asks.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable, List

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
    args = parser.parse_args(argv)

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
