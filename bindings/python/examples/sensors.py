"""docs/python.md's example: record sensor readings, read them back by seq,
and query an earlier version of a sorted set. Run by tests/test_docs.py."""

import struct
import sys
import time

import varve

data_dir = sys.argv[1] if len(sys.argv) > 1 else "sensor-data"

with varve.open(data_dir, sync="group") as store:
    ns = store.namespace("greenhouse")

    # One log per sensor; each record is (unix time, value) packed as two doubles.
    readings = ns.log("readings", keep=100_000, on_full="overwrite")
    alerts = ns.log("alerts")
    seqs = []
    for value in [21.5, 21.9, 35.2, 22.1]:
        record = struct.pack("<dd", time.time(), value)
        if value > 30:
            # The reading and its alert land together or not at all.
            batch = ns.append_batch({"readings": [record], "alerts": [b"too hot: %.1f" % value]})
            seqs.append(batch["readings"][0])
        else:
            seqs.append(readings.append(record))

    # Read back by seq.
    when, value = struct.unpack("<dd", readings.get(seqs[2]))
    print(f"reading #{seqs[2]}: {value} (alert: {alerts.get(1).decode()})")

    # Which sensors are online, version by version.
    online = ns.sorted_set("online")
    v_morning = online.insert("north")
    online.insert("south")
    v_noon = online.insert("east")
    online.delete("north")  # north goes offline
    print("online now:", online.to_list())
    print("online at noon:", online.to_list(at=v_noon))
    print("online in the morning:", online.to_list(at=v_morning))
    added, removed = online.diff(v_noon, online.latest)
    print("since noon: added", added, "removed", removed)
