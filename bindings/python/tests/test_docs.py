"""The README's Python quickstart and docs/python.md's examples are these
files, verbatim, and they run."""

import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
EXAMPLES = HERE.parent / "examples"


def python_blocks(markdown: Path):
    return re.findall(r"```python\n(.*?)```", markdown.read_text(), flags=re.S)


def test_readme_quickstart_is_the_example_and_runs():
    code = (EXAMPLES / "quickstart.py").read_text()
    assert code in python_blocks(REPO / "README.md"), "README.md's Python quickstart must equal examples/quickstart.py"
    out = subprocess.run([sys.executable, str(EXAMPLES / "quickstart.py")], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-1] == "['attic'] ['kitchen']"


def test_python_guide_example_is_the_example_and_runs(tmp_path):
    code = (EXAMPLES / "sensors.py").read_text()
    body = code.split('"""', 2)[2].lstrip("\n")  # the file without its docstring
    assert any(body in block for block in python_blocks(REPO / "docs" / "python.md")), (
        "docs/python.md must show examples/sensors.py"
    )
    out = subprocess.run([sys.executable, str(EXAMPLES / "sensors.py"), str(tmp_path)], capture_output=True, text=True, check=True)
    assert "online in the morning: ['north']" in out.stdout


def test_python_guide_handlers_example_is_the_example_and_runs(tmp_path):
    code = (EXAMPLES / "handlers.py").read_text()
    body = code.split('"""', 2)[2].lstrip("\n")
    guide = REPO / "docs" / "python.md"
    assert any(body in block for block in python_blocks(guide)), "docs/python.md must show examples/handlers.py"
    out = subprocess.run([sys.executable, str(EXAMPLES / "handlers.py"), str(tmp_path)], capture_output=True, text=True, check=True)
    expected = guide.read_text().split("## Handlers in Python", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    assert out.stdout == expected


def test_python_guide_repair_example_is_the_example_and_runs(tmp_path):
    code = (EXAMPLES / "repair.py").read_text()
    body = code.split('"""', 2)[2].lstrip("\n")
    guide = REPO / "docs" / "python.md"
    assert any(body in block for block in python_blocks(guide)), "docs/python.md must show examples/repair.py"
    out = subprocess.run([sys.executable, str(EXAMPLES / "repair.py"), str(tmp_path)], capture_output=True, text=True, check=True)
    expected = guide.read_text().split("## Repair and replay", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    assert out.stdout == expected
