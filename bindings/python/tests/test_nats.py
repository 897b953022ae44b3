"""A NATS JetStream store: ``varve.open("nats://…")`` against a real
3-node nats-server cluster on loopback, started and stopped with the
project's own ``varve nats up`` / ``varve nats down``.

Needs ``.tools/bin/nats-server`` (``make nats-server``, which ``make test``
runs first); the ``varve`` binary comes from the ``varve_bin`` fixture.
"""

from __future__ import annotations

import subprocess

import pytest

import varve

# `nats up` waits for JetStream's leader; generous for a loaded machine.
UP_SECONDS = 120


@pytest.fixture(scope="module")
def nats_url(varve_bin, tmp_path_factory):
    cluster = tmp_path_factory.mktemp("nats")
    up = subprocess.run(
        [varve_bin, "nats", "up", "--nodes", "3", "--dir", str(cluster)],
        capture_output=True,
        text=True,
        timeout=UP_SECONDS,
    )
    assert up.returncode == 0, f"varve nats up failed:\n{up.stdout}\n{up.stderr}"
    url = up.stdout.strip().splitlines()[-1]
    assert url.startswith("nats://"), up.stdout
    try:
        # A 30 s request timeout: the default 5 s lost a stream create at
        # R=3 on a loaded 2-core CI machine (as in crates/varve-nats/tests).
        yield url + "?replicas=3&timeout_ms=30000"
    finally:
        subprocess.run([varve_bin, "nats", "down", "--dir", str(cluster)], capture_output=True, timeout=60)


def test_logs_on_nats_read_and_write_as_embedded(nats_url):
    with varve.open(nats_url) as store:
        ns = store.namespace("py")
        temperature = ns.log("temperature", keep=3, on_full="overwrite")
        assert [temperature.append(v) for v in (b"21.5", b"21.7", b"22.0", b"22.4")] == [1, 2, 3, 4]
        assert (temperature.latest, temperature.earliest, len(temperature)) == (4, 2, 3)
        assert list(temperature.scan()) == [(2, b"21.7"), (3, b"22.0"), (4, b"22.4")]
        with pytest.raises(varve.Trimmed):
            temperature.get(1)
        alerts = ns.log("alerts")
        assert ns.append_batch({"alerts": [b"hot", b"hotter"], "temperature": [b"30.1"]}) == {
            "alerts": [1, 2],
            "temperature": [5],
        }
        with pytest.raises(varve.Conflict):
            alerts.append_if(1, b"stale")
        assert [i.name for i in ns.logs()] == ["alerts", "temperature"]
        assert "py" in store.namespaces()


def test_two_clients_share_a_log_on_nats(nats_url):
    with varve.open(nats_url) as one, varve.open(nats_url) as two:
        a = one.namespace("shared").log("t")
        b = two.namespace("shared").log("t")
        watch = b.watch()
        seqs = [a.append(b"from one"), b.append(b"from two"), a.append(b"one again")]
        assert seqs == [1, 2, 3], "both clients append to one dense log"
        seen = [watch.next(timeout=10) for _ in range(3)]
        assert seen == [(1, b"from one"), (2, b"from two"), (3, b"one again")]


def test_an_unreachable_nats_is_unavailable():
    with pytest.raises(varve.Unavailable):
        varve.open("nats://127.0.0.1:9")
