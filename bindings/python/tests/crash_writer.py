"""Child process of test_crash.py: appends numbered records with
sync="always" and prints each acknowledged seq, until it is killed."""

import sys

import varve

store = varve.open(sys.argv[1], sync="always")
ns = store.namespace("crash")
log = ns.log("a")
other = ns.log("b")
i = log.latest
while True:
    i += 1
    if i % 3 == 0:
        seqs = ns.append_batch({"a": [b"%d" % i], "b": [b"%d" % i]})
        seq = seqs["a"][0]
    else:
        seq = log.append(b"%d" % i)
    print(seq, flush=True)
