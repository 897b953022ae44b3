import tempfile

import varve

with varve.open(tempfile.mkdtemp(), sync="group") as store:
    ns = store.namespace("sensors")
    temperature = ns.log("temperature", keep=1000, on_full="overwrite")
    seq = temperature.append(b"21.5")                 # the new record's seq: 1
    ns.log("humidity")
    ns.append_batch({"temperature": [b"21.7"], "humidity": [b"40"]})  # all or nothing
    print(temperature.get(seq), temperature.latest)   # b'21.5' 2
    for seq, reading in temperature.scan():
        print(seq, float(reading))

    rooms = ns.sorted_set("rooms")
    v1 = rooms.insert("kitchen")
    rooms.insert("attic")
    rooms.delete("kitchen")
    print(rooms.to_list(), rooms.to_list(at=v1))      # ['attic'] ['kitchen']
