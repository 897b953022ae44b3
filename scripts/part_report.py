"""The PART comparison (crates/varve-part/benches/part.rs) as tables of
ratios and PNG charts.

Reads criterion's medians (CRITERION_DIR/part-*/**/new/{benchmark,estimates}.json)
and the bench binary's part_memory.json and part_meta.json (same directory);
writes OUT_MD (markdown: ratio tables, absolute medians, the goals; when
OUT_MD has the BEGIN/END markers below, only the text between them),
OUT_DIR/part_bench.csv (every median) and OUT_DIR/part_*.png.

Usage: python scripts/part_report.py CRITERION_DIR OUT_MD OUT_DIR [--no-charts]
(`make bench-part` runs it in .venv, where matplotlib is installed.)
"""

import csv
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

PART = "PART"
# PART's read workloads again after `compact()` (§3.4), as the map would be
# after idle-time compaction.
COMPACTED = "PART (compacted)"
STRUCTURES = [
    "PART",
    COMPACTED,
    "HashMap",
    "BTreeMap",
    "imbl::OrdMap",
    "imbl::HashMap",
    "rpds::RedBlackTreeMap",
    "rpds::HashTrieMap",
    "rart::Versioned",
    "vart::Tree",
    "blart::TreeMap",
]
BASELINES = STRUCTURES[2:]
PERSISTENT = {"imbl::OrdMap", "imbl::HashMap", "rpds::RedBlackTreeMap", "rpds::HashTrieMap", "rart::Versioned", "vart::Tree"}
SHORT = {
    COMPACTED: "PART compacted",
    "HashMap": "HashMap",
    "BTreeMap": "BTreeMap",
    "imbl::OrdMap": "imbl Ord",
    "imbl::HashMap": "imbl Hash",
    "rpds::RedBlackTreeMap": "rpds RB",
    "rpds::HashTrieMap": "rpds HAMT",
    "rart::Versioned": "rart",
    "vart::Tree": "vart",
    "blart::TreeMap": "blart",
}
OPS = [
    ("lookup_hit", "lookup, hit", "ns/op"),
    ("lookup_miss", "lookup, miss", "ns/op"),
    ("scan", "full scan", "ms/scan"),
    ("range100", "range scan of 100", "ns/op"),
    ("insert_snap1", "insert, snapshot every 1", "ns/op"),
    ("insert_snap1000", "insert, snapshot every 1,000", "ns/op"),
    ("insert_never", "insert, no snapshot", "ns/op"),
]
UNION_OPS = [
    ("union_slice", "union, 10% of key space updated (90% shared)"),
    ("union_random", "union, 10% of keys updated at random"),
]


def load(crit: Path):
    """{op: {config: {structure: median_ns}}}"""
    med = defaultdict(lambda: defaultdict(dict))
    for bench in crit.glob("part-*/**/new/benchmark.json"):
        b = json.loads(bench.read_text())
        est = json.loads((bench.parent / "estimates.json").read_text())
        op = b["group_id"].removeprefix("part-")
        med[op][b["value_str"]][b["function_id"]] = est["median"]["point_estimate"]
    return med


def fmt_time(ns: float, unit: str) -> str:
    if unit == "ms/scan":
        return f"{ns / 1e6:.1f} ms"
    if ns >= 1e6:
        return f"{ns / 1e6:.1f} ms"
    if ns >= 1e4:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns:.0f} ns"


def ratio(a, b) -> str:
    if a is None or b is None:
        return "—"
    r = a / b
    return f"{r:.2f}" if r < 10 else f"{r:.0f}"


def config_order(configs):
    def key(c):
        size, _, value = c.partition("-")
        mult = {"k": 1e3, "M": 1e6}.get(size[-1], 1)
        n = float(size[:-1]) * mult if size[-1] in "kM" else float(size)
        return (value != "4B", n)

    return sorted(configs, key=key)


def main(crit_dir: str, out_md: str, out_dir: str, charts: bool) -> None:
    crit = Path(crit_dir)
    out = Path(out_dir)
    med = load(crit)
    memory = json.loads((crit / "part_memory.json").read_text())
    meta = json.loads((crit / "part_meta.json").read_text())
    configs = meta["configs"]
    lines = []
    w = lines.append
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(meta["started_unix"]))
    w(f"Run {started}, scale `{meta['scale']}`, {meta['seconds'] / 60:.0f} min; "
      f"load average (1/5/15 min) {meta['loadavg_start']} at the start, {meta['loadavg_end']} at the end "
      "(2 vCPUs, shared with other builds). Times are criterion medians (10 samples).")
    w("")

    # -- ratio table ------------------------------------------------------
    w("#### PART time ÷ baseline time (below 1: PART is faster)")
    w("")
    w("| operation | size-value | PART | " + " | ".join(SHORT[b] for b in BASELINES) + " |")
    w("|---|---|---:|" + "---:|" * len(BASELINES))
    rows_csv = []
    for op, label, unit in OPS:
        for cfg in configs:
            cell = med.get(op, {}).get(cfg, {})
            p = cell.get(PART)
            if p is None:
                continue
            w(f"| {label} | {cfg} | {fmt_time(p, unit)} | "
              + " | ".join(ratio(p, cell.get(b)) for b in BASELINES) + " |")
            if COMPACTED in cell:
                pc = cell[COMPACTED]
                w(f"| {label}, compacted | {cfg} | {fmt_time(pc, unit)} | "
                  + " | ".join(ratio(pc, cell.get(b)) for b in BASELINES) + " |")
            for s in STRUCTURES:
                if s in cell:
                    rows_csv.append((op, cfg, s, cell[s]))
    for op, label in UNION_OPS:
        for cfg, cell in med.get(op, {}).items():
            p = cell.get(PART)
            w(f"| {label} | {cfg} | {fmt_time(p, 'ns/op')} | "
              + " | ".join(ratio(p, cell.get(b)) for b in BASELINES) + " |")
            for s, v in cell.items():
                rows_csv.append((op, cfg, s, v))
    for cfg, cell in med.get("wordcount", {}).items():
        for s, v in cell.items():
            rows_csv.append(("wordcount", cfg, s, v))
    w("")
    w("— : the baseline has no such operation (no ordered range scan in hash maps; mutable maps "
      "have no O(1) snapshot, so they only run \"insert, no snapshot\"). Union: imbl's `union`, "
      "rpds by inserting every entry of one map into the other (it has no union). "
      "\"compacted\": the same PART map after `compact()` (§3.4: its nodes rebuilt in traversal order, "
      "as idle-time compaction leaves them), measured after its insert workloads.")
    w("")

    # -- absolute medians -------------------------------------------------
    w("#### Medians (per operation; full scan: per scan)")
    w("")
    w("| operation | size-value | " + " | ".join(SHORT.get(s, s) for s in STRUCTURES) + " |")
    w("|---|---|" + "---:|" * len(STRUCTURES))
    for op, label, unit in OPS:
        for cfg in configs:
            cell = med.get(op, {}).get(cfg, {})
            if not cell:
                continue
            w(f"| {label} | {cfg} | " + " | ".join(fmt_time(cell[s], unit) if s in cell else "—" for s in STRUCTURES) + " |")
    w("")

    # -- memory -----------------------------------------------------------
    mem = defaultdict(dict)
    for r in memory:
        mem[r["config"]][r["structure"]] = r
    w("#### Heap bytes per entry (counting allocator; raw key + value: 8 B for 4-byte values, 1028 B for 1 KiB)")
    w("")
    w("| size-value | " + " | ".join(SHORT.get(s, s) for s in STRUCTURES) + " | PART ÷ raw |")
    w("|---|" + "---:|" * (len(STRUCTURES) + 1))
    for cfg in configs:
        cell = mem.get(cfg, {})
        if PART not in cell:
            continue
        part = cell[PART]
        w(f"| {cfg} | " + " | ".join(f"{cell[s]['bytes_per_entry']:.1f}" if s in cell else "—" for s in STRUCTURES)
          + f" | {part['bytes_per_entry'] / part['raw_bytes_per_entry']:.2f}× |")
        for s in STRUCTURES:
            if s in cell:
                rows_csv.append(("memory_bytes_per_entry", cfg, s, cell[s]["bytes_per_entry"]))
    w("")
    took = [f"{cfg}: {mem[cfg][COMPACTED]['compact_seconds']:.2f} s" for cfg in configs
            if mem.get(cfg, {}).get(COMPACTED, {}).get("compact_seconds") is not None]
    if took:
        w(f"`compact()` took {'; '.join(took)} (one call, the map not shared with any snapshot).")
        w("")

    # -- union and word count ---------------------------------------------
    w("#### Union of two maps (per union)")
    w("")
    w("| workload | entries | PART | imbl::OrdMap | imbl::HashMap | rpds::RedBlackTreeMap (insert loop) | PART ÷ imbl::OrdMap |")
    w("|---|---|---:|---:|---:|---:|---:|")
    for op, label in UNION_OPS:
        for cfg, cell in med.get(op, {}).items():
            f = lambda s: fmt_time(cell[s], "ns/op") if s in cell else "—"  # noqa: E731
            w(f"| {label} | {cfg} | {f(PART)} | {f('imbl::OrdMap')} | {f('imbl::HashMap')} | {f('rpds::RedBlackTreeMap')} | "
              f"{ratio(cell.get(PART), cell.get('imbl::OrdMap'))} |")
    w("")
    wc = meta["wordcount"]
    w(f"#### Streaming word count (§5.1): {wc['batches']} batches of {wc['tuples_per_batch']:,} "
      f"Zipf (s = {wc['zipf_exponent']}) words of {wc['word_bytes']} bytes over a {wc['vocabulary']:,}-word vocabulary")
    w("")
    w("| structure | tuples/s | time ÷ PART's |")
    w("|---|---:|---:|")
    for cfg, cell in med.get("wordcount", {}).items():
        p = cell.get(PART)
        for s in ["PART", "PART (get_mut)", "HashMap", "imbl::HashMap", "imbl::OrdMap", "rpds::HashTrieMap", "rpds::RedBlackTreeMap"]:
            if s in cell:
                tps = wc["tuples_per_batch"] / (cell[s] / 1e9)
                w(f"| {s} | {tps / 1e6:.2f} M | {cell[s] / p:.2f} |")
    w("")

    # -- goals ------------------------------------------------------------
    w("#### Against the goals of issue 5")
    w("")
    w("| goal | measured | |")
    w("|---|---|---|")

    def verdict(ok):
        """ok: a bool, or a list of bools (one per configuration)."""
        if isinstance(ok, bool):
            return "met" if ok else "**missed**"
        if all(ok):
            return "met"
        if not any(ok):
            return "**missed**"
        return f"**missed** in {ok.count(False)} of {len(ok)} sizes"

    def time_ratio_goal(goal, op, subject, baseline, limit):
        """A goal row: subject's time ÷ baseline's at most `limit` at every size."""
        parts, oks = [], []
        for cfg in configs:
            cell = med.get(op, {}).get(cfg, {})
            if subject in cell and baseline in cell:
                r = cell[subject] / cell[baseline]
                oks.append(r <= limit)
                parts.append(f"{cfg}: {r:.2f}×" + ("" if r <= limit else f" (missed by {r / limit:.1f}×)"))
        if parts:
            w(f"| {goal} | {'; '.join(parts)} | {verdict(oks)} |")

    for subject, how in [(PART, ""), (COMPACTED, ", after `compact()`")]:
        for op, name in [("lookup_hit", "hits"), ("lookup_miss", "misses")]:
            time_ratio_goal(f"lookups ({name}{how}) ≤ 1.3× `HashMap`", op, subject, "HashMap", 1.3)
        time_ratio_goal(f"full scan{how} ≤ 2× `BTreeMap`", "scan", subject, "BTreeMap", 2)
    parts, oks = [], []
    for cfg in configs:
        cell = med.get("insert_snap1", {}).get(cfg, {})
        pers = {s: v for s, v in cell.items() if s in PERSISTENT}
        if PART in cell and pers:
            best = min(pers, key=pers.get)
            speedup = pers[best] / cell[PART]
            oks.append(speedup >= 2)
            parts.append(f"{cfg}: {speedup:.2f}× the speed of {best}" + ("" if speedup >= 2 else f" (missed by {2 / speedup:.1f}×)"))
    w(f"| insert + snapshot every 1 ≥ 2× faster than the fastest persistent crate | {'; '.join(parts)} | {verdict(oks)} |")
    for subject, how in [(PART, ""), (COMPACTED, ", after `compact()`")]:
        parts, oks = [], []
        for cfg in configs:
            if not cfg.endswith("-4B"):
                continue
            r = mem.get(cfg, {}).get(subject)
            if r:
                x = r["bytes_per_entry"] / r["raw_bytes_per_entry"]
                oks.append(x <= 2)
                parts.append(f"{cfg}: {r['bytes_per_entry']:.1f} B/entry = {x:.2f}× raw" + ("" if x <= 2 else f" (missed by {x / 2:.1f}×)"))
        if parts:
            w(f"| memory{how} ≤ 2× raw key+value (4-byte keys and values) | {'; '.join(parts)} | {verdict(oks)} |")
    cell = next(iter(med.get("union_slice", {}).values()), {})
    if PART in cell and "imbl::OrdMap" in cell:
        speedup = cell["imbl::OrdMap"] / cell[PART]
        w(f"| union of two {meta['union_entries']:,}-entry maps sharing 90% ≥ 10× faster than imbl | "
          f"{speedup:.0f}× faster than `imbl::OrdMap` ({fmt_time(cell[PART], 'ns/op')} vs {fmt_time(cell['imbl::OrdMap'], 'ns/op')}) | {verdict(speedup >= 10)} |")
    w("")

    write_report(Path(out_md), "\n".join(lines) + "\n")
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "part_bench.csv", "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["operation", "config", "structure", "median_ns_or_bytes"])
        for row in rows_csv:
            wr.writerow([row[0], row[1], row[2], f"{row[3]:.2f}"])
    print(out / "part_bench.csv")
    if charts:
        plot(med, mem, meta, out)


def plot(med, mem, meta, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    configs = meta["configs"]
    colors = {s: plt.cm.tab10(i) for i, s in enumerate(STRUCTURES)}
    colors["PART (get_mut)"] = "lightsteelblue"

    def bars(ax, data, title, ylabel, log=True, scale=1.0):
        """data: {config: {structure: value}}"""
        cfgs = [c for c in configs if c in data] or list(data)
        present = [s for s in STRUCTURES + ["PART (get_mut)"] if any(s in data[c] for c in cfgs)]
        width = 0.8 / max(len(present), 1)
        smallest = min((data[c][s] * scale for c in cfgs for s in present if s in data[c]), default=1)
        for i, s in enumerate(present):
            xs = [j + i * width for j, c in enumerate(cfgs) if s in data[c]]
            ys = [data[c][s] * scale for c in cfgs if s in data[c]]
            ax.bar(xs, ys, width, label=s, color=colors.get(s, "grey"),
                   edgecolor="black" if s == PART else None, linewidth=1.2 if s == PART else 0)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(cfgs))])
        ax.set_xticklabels(cfgs)
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        if log:
            ax.set_yscale("log")
            ax.set_ylim(bottom=smallest / 2)
        ax.grid(axis="y", alpha=0.3)

    def save(fig, name):
        handles, labels = fig.axes[0].get_legend_handles_labels()
        for ax in fig.axes[1:]:
            for h, l in zip(*ax.get_legend_handles_labels()):
                if l not in labels:
                    handles.append(h)
                    labels.append(l)
        fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=8)
        fig.tight_layout(rect=(0, 0.08, 1, 1))
        fig.savefig(out / name, dpi=100)
        plt.close(fig)
        print(out / name)

    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    bars(axes[0], med["lookup_hit"], "Random lookup, hits (cf. Fig. 9a/10a)", "ns per lookup (log)")
    bars(axes[1], med["lookup_miss"], "Random lookup, misses", "ns per lookup (log)")
    save(fig, "part_lookup.png")

    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    per_entry = {c: {s: v / int_size(c) for s, v in cell.items()} for c, cell in med["scan"].items()}
    bars(axes[0], per_entry, "Full scan (cf. Fig. 9b/10b)", "ns per entry (log)")
    bars(axes[1], med["range100"], "Range scan of 100 from a random key", "ns per range (log)")
    save(fig, "part_scan.png")

    fig, axes = plt.subplots(1, 3, figsize=(16, 5))
    bars(axes[0], med["insert_snap1"], "Insert, snapshot every insert", "ns per insert (log)")
    bars(axes[1], med["insert_snap1000"], "Insert, snapshot every 1,000", "ns per insert (log)")
    bars(axes[2], med["insert_never"], "Insert, no snapshot", "ns per insert (log)")
    save(fig, "part_insert.png")

    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    mem4 = {c: {s: r["bytes_per_entry"] for s, r in cell.items()} for c, cell in mem.items() if c.endswith("-4B")}
    memk = {c: {s: r["bytes_per_entry"] for s, r in cell.items()} for c, cell in mem.items() if not c.endswith("-4B")}
    bars(axes[0], mem4, "Heap per entry, 4-byte values (raw = 8 B) (cf. Fig. 9d)", "bytes per entry", log=False)
    axes[0].axhline(8, color="black", linestyle="--", linewidth=1)
    axes[0].axhline(16, color="red", linestyle=":", linewidth=1)
    if memk:
        bars(axes[1], memk, "Heap per entry, 1 KiB values (raw = 1028 B) (cf. Fig. 10d)", "bytes per entry", log=False)
        axes[1].axhline(1028, color="black", linestyle="--", linewidth=1)
    save(fig, "part_memory.png")

    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    un = {}
    for op, label in UNION_OPS:
        for cfg, cell in med.get(op, {}).items():
            un[f"{op.removeprefix('union_')} ({cfg})"] = cell
    bars(axes[0], un, "Union of two maps, 10% updated", "ms per union (log)", scale=1e-6)
    wc = meta["wordcount"]
    tput = {c: {s: wc["tuples_per_batch"] / (v / 1e9) / 1e6 for s, v in cell.items()} for c, cell in med["wordcount"].items()}
    bars(axes[1], tput, "Streaming word count, batch + snapshot (§5.1)", "million tuples/s", log=False)
    save(fig, "part_union_wordcount.png")


BEGIN = "<!-- part_report.py: begin (generated by make bench-part; edits below are overwritten) -->"
END = "<!-- part_report.py: end -->"


def write_report(path: Path, report: str) -> None:
    """Replaces the text between the BEGIN and END markers when the file has
    them (docs/benchmarks.md), otherwise writes the whole file."""
    text = path.read_text() if path.exists() else ""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        path.write_text(f"{head}{BEGIN}\n\n{report}\n{END}{tail}")
    else:
        path.write_text(report)
    print(f"wrote {path}")


def int_size(cfg: str) -> int:
    size = cfg.split("-")[0]
    return int(float(size[:-1]) * {"k": 1e3, "M": 1e6}[size[-1]]) if size[-1] in "kM" else int(size)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 3:
        sys.exit("usage: part_report.py CRITERION_DIR OUT_MD OUT_DIR [--no-charts]")
    main(args[0], args[1], args[2], "--no-charts" not in sys.argv)
