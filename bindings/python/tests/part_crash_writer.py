"""Child process of test_part.py: puts numbered keys into a durable map with
sync="always", checkpointing every 25 puts, and prints each acknowledged
number, until it is killed."""

import sys

import varve

store = varve.open(sys.argv[1], sync="always")
m = store.namespace("crash").durable_map("counter")
i = len(m)
while True:
    m[b"%08d" % i] = b"v%d" % i
    print(i, flush=True)
    if i % 25 == 0:
        m.checkpoint()
    i += 1
