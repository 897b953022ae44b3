"""Charts of `varve bench pds` in the layout of the PEDaLS paper's Figures 4-6:
space, update time and access time against operations, one line per variant.

Usage: python scripts/plot_pds.py SERIES_CSV OUT_DIR
(`make bench-pds` runs it in a virtual environment with matplotlib.)
"""

import csv
import sys
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

FIGURES = [
    ("bytes", "storage (KiB)", 1 / 1024, "pds_space.png", "Space: bytes stored (cf. paper Fig. 4)"),
    ("update_us", "cumulative update time (ms)", 1 / 1000, "pds_update_time.png", "Update time (cf. paper Fig. 5)"),
    ("access_us", "access time (µs)", 1, "pds_access_time.png", "Access: last node / maximum (cf. paper Fig. 6)"),
]


def main(series_csv: str, out_dir: str) -> None:
    curves = defaultdict(list)
    with open(series_csv, newline="") as f:
        for row in csv.DictReader(f):
            curves[row["variant"]].append(row)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for field, label, scale, name, title in FIGURES:
        fig, axes = plt.subplots(1, 2, figsize=(13, 5), sharex=True)
        for ax, backend in zip(axes, ["journal", "memory"]):
            for variant, rows in sorted(curves.items()):
                if f" {backend} " not in variant or "sorted" in variant:
                    continue
                xs = [int(r["ops"]) for r in rows]
                ys = [float(r[field]) * scale for r in rows]
                ax.plot(xs, ys, label=variant.replace(f" {backend}", ""), linewidth=1.4)
            ax.set_title(f"{title}\n{backend} backend, first workload")
            ax.set_xlabel("operations")
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        print(out / name)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: plot_pds.py SERIES_CSV OUT_DIR")
    main(sys.argv[1], sys.argv[2])
