"""Type checking: the stubs (``varve/_varve.pyi``) agree with the extension
(stubtest), the package and the examples pass mypy's strict mode with the
settings in ``pyproject.toml``, and code that uses Varve type-checks without
errors from Varve's own files."""

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("mypy", reason="mypy (requirements-dev.txt) needs Python 3.10 or later")

import varve  # noqa: E402  (after the skip: only when the checks run)

HERE = Path(__file__).resolve().parent
PACKAGE_ROOT = HERE.parent  # bindings/python
CONFIG = PACKAGE_ROOT / "pyproject.toml"
ALLOWLIST = PACKAGE_ROOT / "stubtest-allowlist.txt"


def run(args, cwd, env=None):
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True)


def test_package_and_examples_pass_mypy_strict(tmp_path):
    out = run(
        ["mypy", "--config-file", str(CONFIG), "--cache-dir", str(tmp_path / "cache"),
         str(PACKAGE_ROOT / "python" / "varve"), str(PACKAGE_ROOT / "examples")],
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def stubtest(cwd, env=None):
    return run(
        ["mypy.stubtest", "varve", "--allowlist", str(ALLOWLIST), "--mypy-config-file", str(CONFIG)], cwd=cwd, env=env
    )


def test_stubs_match_the_extension(tmp_path):
    out = stubtest(tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr


def test_stubtest_fails_on_a_wrong_stub(tmp_path):
    # A copy of the package (with the built extension) whose stub is wrong in
    # two ways, found first on the path: stubtest must report both.
    copy = tmp_path / "varve"
    shutil.copytree(Path(varve.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    stub = copy / "_varve.pyi"
    text = stub.read_text()
    append_if = "def append_if(self, expected: int, record: _Data) -> int: ..."
    sync = "    def sync(self) -> None: ...\n"
    assert text.count(append_if) == 1 and text.count(sync) == 1, "the stub changed: update this test"
    wrong = text.replace(append_if, append_if.replace("record: _Data", "record: _Data, flag: int"))
    wrong = wrong.replace(sync, "")
    stub.write_text(wrong)
    env = {"PYTHONPATH": str(tmp_path), "PATH": ""}
    check = subprocess.run([sys.executable, "-c", "import varve; print(varve.__file__)"], cwd=tmp_path, env=env,
                           capture_output=True, text=True)
    assert check.stdout.strip() == str(copy / "__init__.py"), check.stdout + check.stderr
    out = stubtest(tmp_path, env)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "varve._varve.Log.append_if is inconsistent" in out.stdout, out.stdout
    assert "varve._varve.Namespace.sync is not present in stub" in out.stdout, out.stdout


USER_CODE = '''
    import asyncio
    from typing import List, Optional

    import varve


    def latest_reading(path: str) -> bytes:
        with varve.open(path, sync="always") as store:
            log = store.namespace("sensors").log("temperature", keep=10, on_full="overwrite")
            return log.get(log.latest)


    def versions_with(path: str, key: str) -> List[int]:
        with varve.open(path) as store:
            rooms = store.namespace("home").sorted_set("rooms")
            span: range = rooms.versions()
            return [v for v in span if rooms.contains(key, at=v)] + list(rooms.range("a", "m"))


    class Audited(varve.Runtime):
        pass


    def handle(ctx: varve.HandlerContext) -> None:
        ctx.append("out", ctx.record)


    def serve(ns: varve.Namespace) -> Optional[int]:
        with Audited(ns, concurrency=1) as rt:
            rt.add_handler("copy", handle, log="in")
            return rt.append("in", b"x")


    def remote_latest(uri: str, token: Optional[str]) -> int:
        try:
            with varve.open(uri, token=token, read_only=True) as store:
                where: str = store.uri if store.path is None else str(store.path / "sensors")
                print(where)
                return store.namespace("sensors").log("temperature").latest
        except (varve.Unavailable, varve.Denied, varve.ProtocolError) as e:
            print(e.target, e.reason)
        except varve.OutcomeUnknown as e:
            print(e.operation)
        return 0


    async def follow(log: varve.Log) -> int:
        async for seq, _record in log.watch():
            return seq
        return 0


    def typed(ns: varve.Namespace) -> float:
        schemas = ns.schemas()
        fields: List[varve.Field] = [varve.Field(1, "x", "f64"), varve.Field(2, "tag", "string", default="none")]
        try:
            schemas.register("r", [*fields, {"number": 3, "name": "y", "type": "i32"}], compat="FULL")
        except varve.IncompatibleSchema as e:
            print(e.field, e.rule, e.against)
        schemas.define_init("y_from_x", lambda old: {"y": int(old["x"])})
        log = schemas.log("r")
        seq: int = log.append({"x": 1.5, "tag": None})
        for s, record in log.scan(generation=1):
            print(s, record["x"], log.original(s)[0])
        try:
            schemas.migrate("r", progress=lambda done, total: print(done, total))
        except (varve.InitFailed, varve.MigrationFailed) as e:
            print(e.location, e.reason, e.__cause__)
        return float(log.get(seq)["x"]) + log.latest


    try:
        asyncio.run(follow(varve.open(".").namespace("n").log("a")))
    except varve.NotFound as e:
        print(e.log)
'''


def test_code_using_varve_type_checks(tmp_path):
    # As a user runs it: from their own directory, varve found installed (py.typed).
    (tmp_path / "user.py").write_text(textwrap.dedent(USER_CODE))
    out = run(["mypy", "--strict", "--cache-dir", str(tmp_path / "cache"), "user.py"], cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
