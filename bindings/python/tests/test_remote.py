"""A remote store: ``varve.open("varve://HOST:PORT")`` against a real
``varve serve`` process, with the API of an embedded store.

The ``varve`` binary is ``$VARVE_BIN`` (``make test-python`` builds it and
sets it); without it, the fixture builds it with ``cargo build -p
varve-cli`` and uses the path cargo reports, so running pytest alone on a
fresh clone works too. Every server gets its own data directory and is
stopped (SIGTERM, then SIGKILL) when its test ends.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

import varve

REPO = Path(__file__).resolve().parents[3]

# How long a test waits for something that normally takes milliseconds.
WAIT_SECONDS = 20.0
# How long a stopped server may take to exit after SIGTERM before it is killed.
STOP_SECONDS = 10.0


def wait_for(condition, what, timeout=WAIT_SECONDS, describe=None):
    """Poll `condition` until it returns a true value (returned), failing
    after `timeout` seconds (with `describe()` appended, when given)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            detail = f"; {describe()}" if describe else ""
            pytest.fail(f"timed out after {timeout} s waiting for {what}{detail}")
        time.sleep(0.01)


@dataclass
class Server:
    process: subprocess.Popen
    uri: str
    data: Path

    def stop(self):
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGCONT)  # in case a test stopped it
        self.process.terminate()
        try:
            self.process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=STOP_SECONDS)


def read_listen_line(process, log_path):
    """The `varve serve: listening on varve://ADDR (data DIR)` line, read
    from the server's stdout with a deadline."""
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + WAIT_SECONDS
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or process.poll() is not None:
            pytest.fail(f"varve serve did not say where it listens; its log:\n{log_path.read_text()}")
        if selector.select(timeout=min(left, 0.1)):
            chunk = os.read(process.stdout.fileno(), 4096)
            if not chunk:
                pytest.fail(f"varve serve closed its stdout; its log:\n{log_path.read_text()}")
            line += chunk
    selector.close()
    return line.decode()


@pytest.fixture
def serve(varve_bin, tmp_path, monkeypatch):
    """`serve(*global_args, token_file=None)` starts a `varve serve` on a free
    loopback port with a new data directory; returns its `Server`."""
    # A token in the environment would be sent by every open of these tests.
    monkeypatch.delenv("VARVE_TOKEN", raising=False)
    servers = []

    def start(*global_args, token_file=None, serve_args=()):
        data = tmp_path / f"served-{len(servers)}"
        log_path = tmp_path / f"serve-{len(servers)}.log"
        argv = [str(varve_bin), "--data", str(data), *global_args, "serve", "--listen", "127.0.0.1:0"]
        if token_file is not None:
            argv += ["--token-file", str(token_file)]
        argv += list(serve_args)
        with open(log_path, "wb") as log:
            process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log)
        server = Server(process, "", data)
        servers.append(server)
        line = read_listen_line(process, log_path)
        prefix = "varve serve: listening on "
        assert line.startswith(prefix), line
        server.uri = line[len(prefix):].split(" ", 1)[0]
        assert server.uri.startswith(("varve://127.0.0.1:", "varves://127.0.0.1:")), line
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def server(serve):
    return serve()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------ the Log


def test_logs_on_a_remote_store_read_and_write_as_embedded(server):
    with varve.open(server.uri) as store:
        assert store.uri == server.uri and store.path is None
        assert repr(store) == f"<varve.Store {server.uri}>"
        ns = store.namespace("app")
        temperature = ns.log("temperature", keep=3, on_full="overwrite")
        assert (temperature.latest, temperature.earliest, len(temperature)) == (0, 0, 0)
        assert [temperature.append(v) for v in (b"21.5", bytearray(b"21.7"), b"22.0", b"22.4")] == [1, 2, 3, 4]
        assert temperature.get(4) == b"22.4"
        assert (temperature.latest, temperature.earliest, len(temperature)) == (4, 2, 3)
        assert (temperature.keep, temperature.on_full) == (3, "overwrite")
        assert list(temperature.scan()) == [(2, b"21.7"), (3, b"22.0"), (4, b"22.4")]
        assert list(temperature.scan(3, 4)) == [(3, b"22.0")]
        with pytest.raises(varve.Trimmed) as trimmed:
            temperature.get(1)
        assert (trimmed.value.log, trimmed.value.seq, trimmed.value.earliest) == ("temperature", 1, 2)
        with pytest.raises(varve.NotFound) as missing:
            temperature.get(9)
        assert (missing.value.log, missing.value.seq, missing.value.latest) == ("temperature", 9, 4)

        alerts = ns.log("alerts")
        alerts.append(b"hot")
        assert [(i.name, i.latest, i.keep) for i in ns.logs()] == [("alerts", 1, None), ("temperature", 4, 3)]
        assert store.namespaces() == ["app"]
        ns.sync()  # the server's fsync of the namespace
        ns.delete_log("alerts")
        assert [i.name for i in ns.logs()] == ["temperature"]
        with pytest.raises(varve.NotFound) as gone:
            alerts.get(1)
        assert (gone.value.namespace, gone.value.log) == ("app", "alerts")


def test_a_scan_longer_than_one_batch_reads_every_record(server):
    with varve.open(server.uri) as store:
        log = store.namespace("app").log("t")
        store.namespace("app").append_batch({"t": [b"%d" % i for i in range(1, 601)]})
        records = list(log.scan())
        assert [seq for seq, _ in records] == list(range(1, 601))
        assert all(value == b"%d" % seq for seq, value in records)


def test_a_batch_is_atomic_on_a_remote_store(server):
    with varve.open(server.uri) as store:
        ns = store.namespace("app")
        a, b = ns.log("a"), ns.log("b")
        assert ns.append_batch({"a": [b"a1", b"a2"], "b": [b"b1"]}) == {"a": [1, 2], "b": [1]}
        assert ns.append_batch([("b", b"b2"), ("a", b"a3")]) == [2, 3]
        with pytest.raises(varve.NotFound) as missing:
            ns.append_batch({"a": [b"a4"], "nowhere": [b"x"]})
        assert missing.value.log == "nowhere"
        assert (a.latest, b.latest) == (3, 2), "a failed batch must land nothing"
        assert list(a.scan()) == [(1, b"a1"), (2, b"a2"), (3, b"a3")]


def test_a_batch_with_expected_is_conditional_on_a_remote_store(server):
    with varve.open(server.uri) as store:
        ns = store.namespace("app")
        a, b = ns.log("a"), ns.log("b")
        assert ns.append_batch([("a", b"a1"), ("b", b"b1")], expected={"a": 0, "b": 0}) == [1, 1]
        with pytest.raises(varve.Conflict) as conflict:
            ns.append_batch({"a": [b"x"], "b": [b"y"]}, expected={"a": 0})
        assert (conflict.value.log, conflict.value.expected, conflict.value.actual) == ("a", 0, 1)
        assert (a.latest, b.latest) == (1, 1), "a refused batch lands nothing"


def test_append_if_conflict_carries_its_fields(server):
    with varve.open(server.uri) as store:
        log = store.namespace("app").log("t")
        assert log.append_if(0, b"first") == 1
        log.append(b"second")
        with pytest.raises(varve.Conflict) as conflict:
            log.append_if(1, b"late")
        assert (conflict.value.log, conflict.value.expected, conflict.value.actual) == ("t", 1, 2)
        assert log.latest == 2


def test_a_record_over_the_servers_limit_names_the_servers_option(serve):
    server = serve("--record-bytes-max", "4KiB")
    with varve.open(server.uri) as store:
        log = store.namespace("app").log("t")
        with pytest.raises(varve.TooLarge) as too_large:
            log.append(b"x" * 5000)
        assert (too_large.value.what, too_large.value.size, too_large.value.limit) == ("record", 5000, 4096)
        message = str(too_large.value)
        assert server.uri in message and "--record-bytes-max" in message, message
        assert "varve.open" not in message, message
        assert log.latest == 0


# ---------------------------------------------------------------- watches


def test_a_watch_receives_what_another_client_appends(server):
    with varve.open(server.uri) as reader, varve.open(server.uri) as writer:
        reader.namespace("app").log("t")
        watch = reader.namespace("app").log("t").watch()
        assert watch.next(timeout=0.05) is None
        target = writer.namespace("app").log("t")
        seen = []
        for value in (b"one", b"two", b"three"):
            seq = target.append(value)
            seen.append(wait_for(lambda: watch.next(timeout=0.1), f"record {seq} in the watch"))
        assert seen == [(1, b"one"), (2, b"two"), (3, b"three")]


async def test_an_async_watch_receives_what_the_cli_appends(server, varve_bin):
    with varve.open(server.uri) as store:
        log = store.namespace("app").log("t")
        log.append(b"before")
        received = []

        async def follow():
            async for seq, record in log.watch(start=1):
                received.append((seq, record))
                if len(received) == 3:
                    return

        follower = asyncio.create_task(follow())
        deadline = time.monotonic() + WAIT_SECONDS
        while received != [(1, b"before")]:
            assert time.monotonic() < deadline, f"the async watch saw {received}"
            await asyncio.sleep(0.01)
        # The watch now waits for new records in a worker thread, while the
        # event loop runs the CLI's processes.
        assert not follower.done()
        for value in ("from-cli-1", "from-cli-2"):
            process = await asyncio.create_subprocess_exec(
                str(varve_bin), "--store", server.uri, "--ns", "app", "log", "append", "t", value,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            )
            _, stderr = await process.communicate()
            assert process.returncode == 0, stderr.decode()
        await asyncio.wait_for(follower, timeout=WAIT_SECONDS)
        assert received == [(1, b"before"), (2, b"from-cli-1"), (3, b"from-cli-2")]


# ------------------------------------------------------------- structures


def test_a_sorted_map_written_through_the_server_is_read_by_another_handle(server):
    with varve.open(server.uri) as writer:
        prices = writer.namespace("shop").sorted_map("prices")
        v1 = prices.insert("apple", 3)
        prices.insert("pear", 5)
        v3 = prices.insert("apple", 4)
        prices.delete("pear")
    with varve.open(server.uri) as reader:
        prices = reader.namespace("shop").sorted_map("prices")
        assert prices.latest == 4
        assert prices.items(at=v1) == [("apple", 3)]
        assert prices.items(at=v3) == [("apple", 4), ("pear", 5)]
        assert prices.items() == [("apple", 4)]
        rooms = reader.namespace("shop").sorted_set("rooms")
        rooms.insert("attic")
        assert rooms.to_list() == ["attic"]
        items = reader.namespace("shop").list("items")
        items.push_back("a")
        items.push_front("b")
        assert items.to_list() == ["b", "a"] and items.to_list(at=1) == ["a"]


# ----------------------------------------------------------------- tokens


def test_tokens_are_required_and_read_only_ones_cannot_append(serve, tmp_path, monkeypatch):
    tokens = tmp_path / "tokens"
    tokens.write_text("# TOKEN ACCESS\nwriter-s3cr3t read-write\nreader-s3cr3t read-only\n")
    server = serve(token_file=tokens)

    with varve.open(server.uri) as anonymous:
        with pytest.raises(varve.Denied) as denied:
            anonymous.namespaces()
        assert denied.value.target == server.uri and isinstance(denied.value, PermissionError)
    with varve.open(server.uri, token="wrong-token") as wrong:
        with pytest.raises(varve.Denied):
            wrong.namespace("app").log("t")

    with varve.open(server.uri, token="writer-s3cr3t") as writer:
        assert writer.namespace("app").log("t").append(b"hello") == 1

    with varve.open(server.uri, token="reader-s3cr3t") as reader:
        log = reader.namespace("app").log("t")
        assert log.get(1) == b"hello" and list(log.scan()) == [(1, b"hello")]
        with pytest.raises(varve.Denied) as refused:
            log.append(b"no")
        assert refused.value.target == server.uri and refused.value.reason
        assert log.latest == 1

    # Without token=, VARVE_TOKEN is the token (as for the CLI).
    monkeypatch.setenv("VARVE_TOKEN", "writer-s3cr3t")
    with varve.open(server.uri) as from_env:
        assert from_env.namespace("app").log("t").append(b"again") == 2


def test_read_only_sends_reads_only(server):
    with varve.open(server.uri) as writer:
        writer.namespace("app").log("t").append(b"x")
    with varve.open(server.uri, read_only=True) as reader:
        ns = reader.namespace("app")
        log = ns.log("t")
        assert log.get(1) == b"x"
        with pytest.raises(varve.ReadOnly) as refused:
            log.append(b"y")
        assert (refused.value.namespace, refused.value.operation) == ("app", "append")
        with pytest.raises(varve.ReadOnly):
            ns.append_batch({"t": [b"y"]})
        with pytest.raises(varve.NotFound):
            ns.log("absent")  # opened, not created
        with pytest.raises(varve.ReadOnly):
            ns.sorted_map("prices").insert("a", 1)
        ns.sync()  # nothing to make durable: no error
    with varve.open(server.uri) as check:
        assert check.namespace("app").log("t").latest == 1
        assert [i.name for i in check.namespace("app").logs()] == ["t"]


# ------------------------------------------------------- failures and misuse


def test_a_server_that_is_not_running_is_unavailable_at_once():
    uri = f"varve://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(varve.Unavailable) as unavailable:
        varve.open(uri)
    assert time.monotonic() - started < 5.0
    assert unavailable.value.target == uri and unavailable.value.reason
    assert isinstance(unavailable.value, ConnectionError)


def test_a_stopped_server_makes_calls_unavailable(server):
    with varve.open(server.uri) as store:
        log = store.namespace("app").log("t")
        log.append(b"x")
        server.stop()
        started = time.monotonic()
        with pytest.raises(varve.Unavailable):
            log.get(1)
        with pytest.raises(varve.Unavailable):  # refused before it was sent: nothing was done
            log.append(b"y")
        assert time.monotonic() - started < 10.0


def server_has_unread_request(port):
    """Whether a TCP connection to `port` holds bytes the server has not read
    (the request of a stopped server), from /proc/net/tcp."""
    with open("/proc/net/tcp") as table:
        next(table)
        for row in table:
            fields = row.split()
            local_port = int(fields[1].split(":")[1], 16)
            state = fields[3]
            rx_queue = int(fields[4].split(":")[1], 16)
            if local_port == port and state == "01" and rx_queue > 0:
                return True
    return False


def is_stopped(pid):
    """Whether every thread of process `pid` is stopped (state T in
    /proc/PID/task/*/stat): SIGSTOP is delivered asynchronously."""
    tasks = Path(f"/proc/{pid}/task")
    states = []
    for task in tasks.iterdir():
        try:
            stat = (task / "stat").read_text()
        except FileNotFoundError:  # the thread exited meanwhile
            continue
        states.append(stat.rsplit(")", 1)[1].split()[0])
    return bool(states) and all(state == "T" for state in states)


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads /proc/net/tcp (Linux)")
def test_an_append_whose_answer_is_lost_is_outcome_unknown(server):
    port = int(server.uri.rsplit(":", 1)[1])
    with varve.open(server.uri) as store:
        log = store.namespace("app").log("t")
        server.process.send_signal(signal.SIGSTOP)
        # Append only once the server can no longer read it.
        wait_for(lambda: is_stopped(server.process.pid), "the server to stop")
        outcome = {}

        def append():
            try:
                outcome["seq"] = log.append(b"maybe")
            except varve.VarveError as e:
                outcome["error"] = e

        appender = threading.Thread(target=append)
        appender.start()
        wait_for(
            lambda: server_has_unread_request(port),
            "the append to reach the stopped server",
            # If it never does, say what the append came to.
            describe=lambda: f"the append's outcome so far: {outcome or 'none (still waiting)'}",
        )
        server.process.kill()  # the answer is lost: the connection is reset
        appender.join(WAIT_SECONDS)
        assert not appender.is_alive()
        error = outcome.get("error")
        assert isinstance(error, varve.OutcomeUnknown), outcome
        assert error.target == server.uri and "append" in error.operation and error.reason
        assert not isinstance(error, ConnectionError), "code that retries ConnectionError must not resend it"


def test_another_program_on_the_port_is_a_protocol_error():
    import http.server

    httpd = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        uri = f"varve://127.0.0.1:{httpd.server_address[1]}"
        with pytest.raises(varve.ProtocolError) as protocol:
            varve.open(uri)
        assert protocol.value.target == uri and protocol.value.reason
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_runtime_on_a_remote_namespace_says_where_handlers_run(server):
    with varve.open(server.uri) as store:
        ns = store.namespace("app")
        with pytest.raises(varve.InvalidArgument) as refused:
            varve.Runtime(ns)
        message = str(refused.value)
        assert server.uri in message and "handlers run where the namespace lives" in message, message
        assert "varve serve --manifest" in message, message
        with pytest.raises(varve.InvalidArgument):
            ns.runtime(concurrency=1)
        assert ns.logs() == [], "a refused runtime creates nothing"


def test_malformed_store_uris_are_refused():
    for bad in ("varve://no-port", "varve://127.0.0.1:1/ns", "http://127.0.0.1:1", "nats://no-port", "nats://h:1?x=1"):
        with pytest.raises(varve.InvalidArgument):
            varve.open(bad)


def test_file_uris_open_the_directory(tmp_path):
    with varve.open(f"file:{tmp_path / 'data'}", sync="never") as store:
        assert store.path is not None and Path(store.path) == tmp_path / "data"
        store.namespace("app").log("t").append(b"x")
    with varve.open(tmp_path / "data") as again:
        assert again.namespace("app").log("t").get(1) == b"x"


def test_closing_a_remote_store_closes_its_objects(server):
    store = varve.open(server.uri)
    ns = store.namespace("app")
    log = ns.log("t")
    watch = log.watch()
    prices = ns.sorted_map("prices")
    prices.insert("a", 1)
    store.close()
    assert store.closed
    for call in (lambda: log.append(b"x"), lambda: watch.next(timeout=0), lambda: prices.get("a"), store.namespaces):
        with pytest.raises(varve.Closed):
            call()
    store.close()  # twice is harmless


def test_the_http_guides_python_example_runs(serve, tmp_path):
    guide = (REPO / "docs" / "http.md").read_text().split("## From Python", 1)[1]
    code = re.findall(r"```python\n(.*?)```", guide, flags=re.S)[0]
    tokens = tmp_path / "tokens"
    tokens.write_text("s3cr3t-writer read-write\n")
    server = serve(token_file=tokens)
    assert code.count("varve://127.0.0.1:7070") == 1
    script = tmp_path / "example.py"
    script.write_text(code.replace("varve://127.0.0.1:7070", server.uri))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=WAIT_SECONDS)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "b'22.3'\n1 b'22.3'\n"


def make_certificates(directory):
    """A CA and a server certificate for 127.0.0.1 it signed, with openssl."""
    run = lambda *argv: subprocess.run(argv, cwd=directory, check=True, capture_output=True)  # noqa: E731
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    run("openssl", "req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=varve test CA")
    run("openssl", "req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1")
    (directory / "ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run(
        "openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "server.pem", "-days", "2", "-extfile", "ext",
    )
    return directory / "ca.pem", directory / "server.pem", directory / "server.key"


def test_a_server_with_tls_is_opened_as_varves_with_its_ca(serve, tmp_path, monkeypatch):
    ca, cert, key = make_certificates(tmp_path)
    server = serve(serve_args=("--tls-cert", str(cert), "--tls-key", str(key)))
    assert server.uri.startswith("varves://"), server.uri
    monkeypatch.delenv("VARVE_TLS_CA", raising=False)
    with pytest.raises(varve.Unavailable) as untrusted:
        varve.open(server.uri).namespace("app").log("t").append(b"x")
    assert "not trusted" in str(untrusted.value), untrusted.value
    with varve.open(server.uri, tls_ca=ca) as store:
        log = store.namespace("app").log("t")
        assert log.append(b"over TLS") == 1
    monkeypatch.setenv("VARVE_TLS_CA", str(ca))
    with varve.open(server.uri) as store:
        assert store.namespace("app").log("t").get(1) == b"over TLS"
