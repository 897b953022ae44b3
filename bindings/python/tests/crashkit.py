"""What the crash tests share: run a child writer that prints each
acknowledgement (an integer per line), read them, then SIGKILL it."""

import os
import signal
import subprocess
import sys
from pathlib import Path
import time


def kill_after_acks(writer: Path, data_dir: Path, wanted: int, timeout_s: float) -> list[int]:
    """Run `writer DATA_DIR`, read up to `wanted` acknowledgements (or until
    `timeout_s` passes or it exits), SIGKILL it and return everything it
    acknowledged (what it printed before the kill, read or not)."""
    child = subprocess.Popen([sys.executable, str(writer), str(data_dir)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    deadline = time.monotonic() + timeout_s
    acks: list[int] = []
    while len(acks) < wanted and time.monotonic() < deadline:
        line = child.stdout.readline()
        if not line:
            break
        acks.append(int(line))
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    # Acknowledgements the writer printed before it died but the pipe still
    # held: they count too (a loaded machine lets it run well ahead of us).
    # A line cut short by the kill was not printed whole: not an ack.
    for line in child.stdout.read().splitlines(keepends=True):
        if line.endswith("\n"):
            acks.append(int(line))
    assert acks, "the writer acknowledged nothing"
    return acks
