"""Streaming word count with historical queries, after the PART paper's
§5.1 (seeds/002, "streaming word count"): words stream into a
varve.PersistentMap of counts, one snapshot is kept per chunk (O(1) each,
sharing every unchanged part of the tree), and questions about the past are
answered from the snapshots: "how often had word w been seen after chunk
s?" and "which were the top-k words after each chunk?".

The corpus is real text found on any machine with Python, without a
download: the standard library's own top-level ``.py`` files, in sorted
order, ``files_per_chunk`` files per chunk.

    python wordcount.py [FILES] [FILES_PER_CHUNK]

Run by tests/test_part_examples.py, which checks the answers against
per-chunk copies of a dict.
"""

from __future__ import annotations

import heapq
import re
import sys
import sysconfig
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import varve

WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def corpus(files: int) -> List[Path]:
    """The first `files` top-level .py files of the standard library, sorted by name."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    return sorted(stdlib.glob("*.py"))[:files]


def chunks(paths: List[Path], files_per_chunk: int) -> Iterator[List[str]]:
    """The words of `files_per_chunk` files at a time, lower-cased."""
    for start in range(0, len(paths), files_per_chunk):
        words: List[str] = []
        for path in paths[start : start + files_per_chunk]:
            words += (w.lower() for w in WORD.findall(path.read_text(encoding="utf-8", errors="replace")))
        yield words


def count(stream: Iterator[List[str]]) -> List[varve.PersistentMap[str]]:
    """Count the words of each chunk into one map; a snapshot after each chunk."""
    counts = varve.PersistentMap(key_type=str)
    snapshots: List[varve.PersistentMap[str]] = []
    for words in stream:
        seen: Dict[str, int] = {}
        for word in words:
            seen[word] = seen.get(word, 0) + 1
        # One batch per chunk: applied in key order in one descent of the tree.
        counts.update({word: counts.get(word, 0) + n for word, n in seen.items()})
        snapshots.append(counts.snapshot())
    return snapshots


def count_as_of(snapshots: List[varve.PersistentMap[str]], word: str, chunk: int) -> int:
    """How often `word` had been seen after chunk `chunk` (0 is the first)."""
    return int(snapshots[chunk].get(word, 0))


def top_k(snapshot: varve.PersistentMap[str], k: int) -> List[Tuple[str, int]]:
    """The k most frequent words of a snapshot (ties: alphabetical)."""
    return heapq.nsmallest(k, snapshot.items(), key=lambda kv: (-kv[1], kv[0]))


def main(argv: Optional[List[str]] = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    files = int(args[0]) if args else 60
    per_chunk = int(args[1]) if len(args) > 1 else 10
    paths = corpus(files)
    snapshots = count(chunks(paths, per_chunk))
    print(f"{len(paths)} files of {paths[0].parent}, {len(snapshots)} chunks of {per_chunk}")
    for s, snapshot in enumerate(snapshots):
        top = ", ".join(f"{w}={n}" for w, n in top_k(snapshot, 5))
        print(f"after chunk {s}: {len(snapshot)} distinct words; top 5: {top}")
    for word in ("self", "import", "yield"):
        history = [count_as_of(snapshots, word, s) for s in range(len(snapshots))]
        print(f"count of {word!r} after each chunk: {history}")


if __name__ == "__main__":
    main()
