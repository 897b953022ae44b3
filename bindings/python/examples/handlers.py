"""Handlers in Python: convert readings as they land, raise alerts on a
topic, and ask the event log what caused an alert (docs/python.md shows this
file; tests/test_docs.py runs it)."""

import sys
import tempfile

import varve

data_dir = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp()

with varve.open(data_dir) as store:
    # One worker, so the records are handled in order and the output below is fixed.
    rt = varve.Runtime(store.namespace("home"), concurrency=1)
    rt.create_log("celsius")
    rt.create_log("fahrenheit")
    rt.create_topic("alerts")

    # Runs on a worker thread for every record appended to "celsius".
    @rt.handler(log="celsius", attempts=2, backoff=0.01)
    def convert(ctx: varve.HandlerContext) -> None:
        celsius = float(ctx.record)  # b"oops" raises ValueError: FAILED, retried, dead-lettered
        seq = ctx.append("fahrenheit", b"%.1f" % (celsius * 9 / 5 + 32))
        if celsius > 30:
            ctx.publish("alerts", b"hot: fahrenheit #%d" % seq)

    alerts: list[str] = []
    rt.add_handler("notify", lambda ctx: alerts.append(ctx.record.decode()), log="alerts")

    with rt:  # starts the workers; stops them at the end of the block
        for reading in [b"21.5", b"35.0", b"oops"]:
            rt.append("celsius", reading)
        rt.wait_idle(timeout=10)

        print("fahrenheit:", [rt.get("fahrenheit", s) for s in range(1, rt.latest_index("fahrenheit") + 1)])
        print("alerts:", alerts)
        print("dead letters:", [(d["log"], d["seq"], d["reason"].splitlines()[0]) for d in rt.dead_letters()])
        # What caused alert #1: causes() lists the alert's APPEND, then its ancestors.
        chain = [(e.kind, e.log, e.seq) for e in rt.causes("alerts", 1)[1:] if e.kind in ("APPEND", "FIRING")]
        print("alert caused by:", chain)
