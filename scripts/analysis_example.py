#!/usr/bin/env python3
"""The pandas / matplotlib example of docs/analysis.md: reads the tidy CSVs of
`mobistack run SCENARIO --csv DIR`, prints the p99 of each app's system calls per variant and the
wait reasons behind the gallery's reads, and plots the latency percentiles of one call per variant.

    python3 scripts/analysis_example.py DIR [--app gallery] [--op read] [--out percentiles.png]
"""
import argparse

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt
import pandas as pd

parser = argparse.ArgumentParser()
parser.add_argument("dir")
parser.add_argument("--app", default="gallery")
parser.add_argument("--op", default="read")
parser.add_argument("--out", default="percentiles.png")
args = parser.parse_args()

latency = pd.read_csv(f"{args.dir}/latency.csv")
waits = pd.read_csv(f"{args.dir}/waits.csv")

# p99 in ms of every app's calls, a column per variant (mean over seeds).
p99 = latency[latency.percentile == 99].assign(ms=lambda d: d.latency_ns / 1e6)
print(p99.pivot_table(index=["app", "op"], columns="variant", values="ms").round(3).to_string())

# Where the app's calls waited: blocked ms per wait reason, a column per variant.
mine = waits[(waits.app == args.app) & (waits.op == args.op)]
print()
print(
    mine.assign(ms=lambda d: d.blocked_ns / 1e6)
    .pivot_table(index=["layer", "reason"], columns="variant", values="ms", aggfunc="sum")
    .round(1)
    .to_string()
)

# Latency percentiles of the call, a line per variant, log scale.
fig, ax = plt.subplots(figsize=(6, 4))
calls = latency[(latency.app == args.app) & (latency.op == args.op)]
for variant, rows in calls.groupby("variant", sort=False):
    rows = rows.groupby("percentile").latency_ns.mean()
    ax.plot(rows.index.astype(str), rows.values / 1e6, marker="o", label=variant)
ax.set_yscale("log")
ax.set_xlabel("percentile")
ax.set_ylabel("latency, ms")
ax.set_title(f"{args.app} {args.op}")
ax.legend()
fig.tight_layout()
fig.savefig(args.out)
print(f"\nplot: {args.out}")
