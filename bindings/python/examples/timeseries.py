"""Historical-snapshot queries over sensor readings, after the PART paper's
§5.2 and §5.4 (seeds/002): readings are keyed ``sensor/timestamp`` in a
varve.PersistentMap, one snapshot is kept per time window, late corrections
overwrite past readings, and readings older than the retention are deleted.
The snapshots answer "what was the value of key k as of window s?" and
"which readings of sensor x did window s hold between t0 and t1?" (a range
scan of one sensor at a past snapshot), though the map has moved on.

    python timeseries.py [SEED]

Run by tests/test_part_examples.py, which checks the answers against
per-window copies of a dict.
"""

from __future__ import annotations

import random
import sys
from typing import Dict, List, Optional, Tuple

import varve

SENSORS = ["boiler", "cellar", "roof", "yard"]
WINDOW_SECONDS = 60
WINDOWS = 12
RETENTION_WINDOWS = 6  # readings older than this many windows are deleted
CORRECTIONS_PER_WINDOW = 5  # late readings that overwrite a past value


def key(sensor: str, t: int) -> str:
    """Zero-padded, so byte order is time order within a sensor."""
    return f"{sensor}/{t:08d}"


Update = Tuple[str, Optional[float]]  # None deletes


def window_updates(rng: random.Random, window: int) -> List[Update]:
    """The updates arriving during `window`: one reading per sensor per
    second, some corrections of earlier seconds, and the expiry of the
    readings that fell out of the retention."""
    start = window * WINDOW_SECONDS
    updates: List[Update] = []
    for t in range(start, start + WINDOW_SECONDS):
        for sensor in SENSORS:
            updates.append((key(sensor, t), round(rng.gauss(20.0, 5.0), 2)))
    for _ in range(CORRECTIONS_PER_WINDOW if window else 0):
        t = rng.randrange(max(0, start - RETENTION_WINDOWS * WINDOW_SECONDS), start)
        updates.append((key(rng.choice(SENSORS), t), round(rng.gauss(20.0, 5.0), 2)))
    expired = window - RETENTION_WINDOWS
    if expired >= 0:
        for t in range(expired * WINDOW_SECONDS, (expired + 1) * WINDOW_SECONDS):
            for sensor in SENSORS:
                updates.append((key(sensor, t), None))
    return updates


def record(seed: int) -> List[varve.PersistentMap[str]]:
    """Apply every window's updates as one batch; a snapshot after each window."""
    rng = random.Random(seed)
    readings = varve.PersistentMap(key_type=str)
    snapshots: List[varve.PersistentMap[str]] = []
    for window in range(WINDOWS):
        readings.update([(k, varve.DELETE if v is None else v) for k, v in window_updates(rng, window)])
        snapshots.append(readings.snapshot())
    return snapshots


def value_as_of(snapshots: List[varve.PersistentMap[str]], k: str, window: int) -> Optional[float]:
    """The value of key `k` as of the end of `window`, or None if absent then."""
    value: Optional[float] = snapshots[window].get(k)
    return value


def sensor_range(
    snapshots: List[varve.PersistentMap[str]], sensor: str, window: int, t0: int, t1: int
) -> List[Tuple[int, float]]:
    """``(t, value)`` readings of `sensor` with ``t0 <= t < t1`` as of `window`."""
    return [(int(k.split("/")[1]), v) for k, v in snapshots[window].range(key(sensor, t0), key(sensor, t1))]


def main(argv: Optional[List[str]] = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    seed = int(args[0]) if args else 7
    snapshots = record(seed)
    print(f"seed {seed}: {WINDOWS} windows of {WINDOW_SECONDS} s, {len(SENSORS)} sensors")
    for s, snapshot in enumerate(snapshots):
        first, last = snapshot.first(), snapshot.last()
        assert first is not None and last is not None
        print(f"window {s}: {len(snapshot)} readings, {first[0]} .. {last[0]}")
    k = key("roof", 30)
    history: Dict[int, Optional[float]] = {s: value_as_of(snapshots, k, s) for s in range(WINDOWS)}
    print(f"{k} as of each window: {history}")
    print(f"cellar, t in [100, 105), as of window 2: {sensor_range(snapshots, 'cellar', 2, 100, 105)}")
    print(f"cellar, t in [100, 105), as of window {WINDOWS - 1}: {sensor_range(snapshots, 'cellar', WINDOWS - 1, 100, 105)}")


if __name__ == "__main__":
    main()
