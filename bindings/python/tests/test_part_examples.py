"""examples/wordcount.py and examples/timeseries.py run, and their answers
equal a straightforward computation with per-chunk (per-window) dict copies."""

import importlib.util
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_wordcount_runs():
    out = subprocess.run([sys.executable, str(EXAMPLES / "wordcount.py"), "20", "5"], capture_output=True, text=True, check=True)
    assert "4 chunks of 5" in out.stdout and "count of 'self' after each chunk" in out.stdout


def test_wordcount_answers_match_dict_copies():
    wc = load("wordcount")
    paths = wc.corpus(40)
    assert paths == sorted(paths) and len(paths) == 40
    chunks = list(wc.chunks(paths, 8))
    snapshots = wc.count(iter(chunks))
    # The oracle: a Counter, copied after each chunk.
    counter, copies = Counter(), []
    for words in chunks:
        counter.update(words)
        copies.append(dict(counter))
    assert len(snapshots) == len(copies) == 5
    rng = random.Random(5)
    for s, copy in enumerate(copies):
        assert dict(snapshots[s].items()) == copy
        for word in rng.sample(sorted(copy), 50) + ["self", "no-such-word"]:
            assert wc.count_as_of(snapshots, word, s) == copy.get(word, 0)
        expected_top = sorted(copy.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
        assert wc.top_k(snapshots[s], 10) == expected_top


def test_timeseries_runs():
    out = subprocess.run([sys.executable, str(EXAMPLES / "timeseries.py"), "3"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("seed 3: 12 windows")


def test_timeseries_answers_match_dict_copies():
    ts = load("timeseries")
    seed = random.randrange(2**32)
    print(f"timeseries seed {seed}")
    snapshots = ts.record(seed)
    rng = random.Random(seed)
    current, copies = {}, []
    for window in range(ts.WINDOWS):
        for k, v in ts.window_updates(rng, window):
            if v is None:
                current.pop(k, None)
            else:
                current[k] = v
        copies.append(dict(current))
    for s, copy in enumerate(copies):
        assert dict(snapshots[s].items()) == copy, seed
        for sensor in ts.SENSORS:
            for t in (0, 30, 59, 100, 400, 700):
                k = ts.key(sensor, t)
                assert ts.value_as_of(snapshots, k, s) == copy.get(k)
            t0, t1 = 90, 150
            expected = sorted((t, copy[ts.key(sensor, t)]) for t in range(t0, t1) if ts.key(sensor, t) in copy)
            assert ts.sensor_range(snapshots, sensor, s, t0, t1) == expected, seed
    # The early readings expired from the current map but not from the early snapshots.
    assert ts.value_as_of(snapshots, ts.key("roof", 30), 0) is not None
    assert ts.value_as_of(snapshots, ts.key("roof", 30), ts.WINDOWS - 1) is None


def test_python_guide_part_example_runs():
    guide = Path(__file__).resolve().parents[3] / "docs" / "python.md"
    section = guide.read_text().split("## PART: persistent maps with snapshots", 1)[1].split("\n## ", 1)[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("PART example done,")
