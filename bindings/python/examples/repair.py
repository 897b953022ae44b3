"""Repair and replay: a reading was wrong; correct it and re-run exactly
what depended on it (docs/python.md shows this file; tests/test_docs.py
runs it)."""

import sys
import tempfile

import varve


def to_fahrenheit(ctx: varve.HandlerContext) -> None:
    ctx.append("fahrenheit", b"%.1f" % (float(ctx.record) * 9 / 5 + 32))


data_dir = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp()

with varve.open(data_dir) as store:
    ns = store.namespace("home")
    rt = ns.runtime(concurrency=1)
    rt.create_log("celsius")
    rt.create_log("fahrenheit")
    rt.add_handler("convert", to_fahrenheit, log="celsius")
    with rt:
        for reading in [b"21.5", b"95.0", b"22.0"]:  # 95.0: the sensor reported Fahrenheit
            rt.append("celsius", reading)
        rt.wait_idle(timeout=10)
    # The repair is offline: the runtime is stopped here.

    plan = ns.repair_plan(record=("celsius", 2))
    print("replays:", [(r["handler"], r["trigger"]["log"], r["trigger"]["seq"]) for r in plan.reruns])
    print("changes:", {c["log"]: c["seqs"] for c in plan.changed})

    outcome = ns.repair(record=("celsius", 2), value=b"35.0", handlers={"convert": to_fahrenheit})
    print("swapped:", outcome["swapped"]["home"])
    print("fahrenheit:", [v for _, v in ns.log("fahrenheit").scan()])
    print("before the repair:", [v for _, v in ns.log("_gen.fahrenheit.1").scan()])
