#!/usr/bin/env python3
"""Paired timing of builds on a noisy machine (not a test).

Runs `BUILD/bench_backend MODEL` for every build in turn, ROUNDS times, and
reports for each build the median over rounds of its time divided by the
first build's time in the same round (talker step, code-predictor frame,
total). Pairing within a round cancels the slow drifts of a shared host
(other tenants taking bandwidth for minutes), which is what makes
separate medians of a few runs unable to tell 3% apart.

  tools/ab_pairs.py --model models/full-cv06-int4 build-base build
  tools/ab_pairs.py --model DIR --rounds 15 --frames 40 -- buildA buildB buildC
  tools/ab_pairs.py --model DIR --prompt 1000 --kv bf16 build-base build

Each build directory needs bench_backend (make BUILD=DIR DIR/bench_backend).
"""
import argparse
import re
import statistics
import subprocess
import sys

LINE = re.compile(r"talker step ([0-9.]+) ms, code predictor ([0-9.]+) ms, total ([0-9.]+) ms")


def run(build, args):
    cmd = [f"{build}/bench_backend", args.model, "--prompt", str(args.prompt), "--frames",
           str(args.frames), "--threads", str(args.threads), "--window", "1", "--kv", args.kv]
    out = subprocess.run(cmd, capture_output=True, text=True)
    m = LINE.search(out.stdout)
    if out.returncode != 0 or not m:
        sys.exit(f"ab_pairs: {' '.join(cmd)} failed (exit {out.returncode}):\n{out.stderr[-2000:]}")
    return [float(v) for v in m.groups()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="model directory")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--frames", type=int, default=40)
    ap.add_argument("--prompt", type=int, default=23, help="prefill rows")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--kv", choices=["f32", "bf16"], default="f32",
                    help="the talker's KV cache (bench_backend --kv; builds from 2026-12-04 on)")
    ap.add_argument("builds", nargs="+", help="build directories; the first is the baseline")
    args = ap.parse_args()
    if args.rounds < 1 or args.frames < 2:
        sys.exit("ab_pairs: --rounds must be >= 1 and --frames >= 2")
    times = {b: [] for b in args.builds}
    for r in range(args.rounds):
        for b in args.builds:
            times[b].append(run(b, args))
        print(f"round {r + 1}/{args.rounds}: " +
              "  ".join(f"{b} {times[b][-1][2]:.2f} ms" for b in args.builds), file=sys.stderr)
    base = times[args.builds[0]]
    print(f"{'build':<20} {'talker':>7} {'CP':>7} {'total':>7}   median total ms  (ratios: medians "
          f"over {args.rounds} rounds of build / {args.builds[0]})")
    for b in args.builds:
        ratios = [[t[k] / s[k] for k in range(3)] for t, s in zip(times[b], base)]
        med = [statistics.median(col) for col in zip(*ratios)]
        total = statistics.median(t[2] for t in times[b])
        print(f"{b:<20} {med[0]:7.3f} {med[1]:7.3f} {med[2]:7.3f}   {total:8.2f}")


if __name__ == "__main__":
    main()
