import json
import os
import subprocess
from pathlib import Path

import pytest

import varve

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def store(tmp_path):
    with varve.open(tmp_path / "data", sync="never") as s:
        yield s


@pytest.fixture
def ns(store):
    return store.namespace("test")


@pytest.fixture(scope="session")
def varve_bin():
    given = os.environ.get("VARVE_BIN")
    if given:
        path = Path(given)
        assert path.is_file() and os.access(path, os.X_OK), f"VARVE_BIN={given} is not an executable file"
        return path
    # Build it (a no-op when it is up to date) and take the path cargo reports.
    out = subprocess.run(
        ["cargo", "build", "--locked", "-p", "varve-cli", "--message-format=json-render-diagnostics"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, "cargo build -p varve-cli failed (or set VARVE_BIN):\n" + out.stderr
    for line in out.stdout.splitlines():
        message = json.loads(line)
        if message.get("reason") == "compiler-artifact" and message.get("executable") and message["target"]["name"] == "varve":
            return Path(message["executable"])
    pytest.fail("cargo build -p varve-cli reported no `varve` executable")
