#!/usr/bin/env python3
"""Sum an ncu CSV log of gpu__time_duration.sum by kernel (tools/gpu_check.sh's profile step).

    ncu --metrics gpu__time_duration.sum --csv --print-units base --log-file LOG PROGRAM...
    python3 tools/ncu_sum.py LOG [--top N]

Prints the number of kernels and their summed time, then the kernels (name without arguments,
block size) by total time: launches, total ms, mean us and the last launch's grid.
"""
import argparse
import collections
import csv
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("log")
    ap.add_argument("--top", type=int, default=30)
    a = ap.parse_args()
    with open(a.log, errors="replace") as f:
        lines = f.read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        sys.exit(f"ncu_sum: no CSV table in {a.log}")
    tot = collections.defaultdict(float)
    cnt = collections.Counter()
    grid = {}
    for r in csv.DictReader(lines[start:]):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = r["Kernel Name"]
        if name.startswith("void "):
            name = name[5:]
        name = name.split("(")[0]
        key = (name, r.get("Block Size", "?"))
        tot[key] += float(r["Metric Value"].replace(",", ""))
        cnt[key] += 1
        grid[key] = r.get("Grid Size", "?")
    print(f"{sum(cnt.values())} kernels, {sum(tot.values()) / 1e6:.3f} ms of kernel time")
    print(f"{'kernel':56s} {'block':>14s} {'count':>6s} {'total ms':>9s} {'mean us':>8s}  last grid")
    for key, ns in sorted(tot.items(), key=lambda kv: -kv[1])[:a.top]:
        print(f"{key[0][:56]:56s} {key[1]:>14s} {cnt[key]:6d} {ns / 1e6:9.3f} {ns / cnt[key] / 1e3:8.1f}  {grid[key]}")


if __name__ == "__main__":
    main()
