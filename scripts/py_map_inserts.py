"""Time inserts into a versioned sorted map from Python as it grows.

    make python && .venv/bin/python scripts/py_map_inserts.py 200000 [DIR]

Inserts N distinct keys ``i * 7919 mod 1000003`` (the order of
``varve bench pds --scale``) into ``ns.sorted_map`` on a journal store with
``sync="group"`` in DIR (default: a temporary directory), and prints the
mean time per insert over each quarter of the run, then the total.
"""

from __future__ import annotations

import sys
import tempfile
import time

import varve


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    with tempfile.TemporaryDirectory() as scratch:
        store = varve.open(sys.argv[2] if len(sys.argv) > 2 else scratch, sync="group")
        sorted_map = store.namespace("m").sorted_map("m")
        quarter = max(n // 4, 1)
        started = last = time.perf_counter()
        for i in range(1, n + 1):
            sorted_map.insert((i * 7919) % 1_000_003, i)
            if i % quarter == 0:
                now = time.perf_counter()
                print(f"{i} keys: {(now - last) / quarter * 1e6:.1f} µs per insert over the last {quarter}")
                last = now
        print(f"all {n} inserts: {time.perf_counter() - started:.1f} s")
        store.close()


if __name__ == "__main__":
    main()
