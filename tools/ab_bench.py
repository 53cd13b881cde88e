#!/usr/bin/env python3
"""Paired `qwen3-tts bench` calls of several builds on a noisy machine (not a test).

Runs `BUILD/qwen3-tts bench -m MODEL -j THREADS --frames N --runs 1 --json -q`
for every build in turn, ROUNDS times, and reports per build the median x floor
(talker, code predictor, talker + CP) and the medians over rounds of its value
divided by the first build's in the same round (x floors, then talker + CP ms).
It is ab_pairs.py for the whole engine: the streamed codec decodes between the
frames, the real prompt, and each call's own bandwidth probes.

  tools/ab_bench.py --model models/full-cv06-int4 build-base build
"""
import argparse
import json
import statistics
import subprocess
import sys


def run(build, args):
    cmd = [f"{build}/qwen3-tts", "bench", "-m", args.model, "-j", str(args.threads), "--frames",
           str(args.frames), "--runs", "1", "--json", "-q"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"ab_bench: {' '.join(cmd)} failed (exit {out.returncode}):\n{out.stderr[-2000:]}")
    s = json.loads(out.stdout)["stages"]
    return [s["talker"]["x_floor"], s["code_predictor"]["x_floor"], s["talker_cp"]["x_floor"],
            s["talker_cp"]["ms_per_frame"]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="model directory")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--frames", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("builds", nargs="+", help="build directories; the first is the baseline")
    args = ap.parse_args()
    if args.rounds < 1 or args.frames < 2:
        sys.exit("ab_bench: --rounds must be >= 1 and --frames >= 2")
    res = {b: [] for b in args.builds}
    for r in range(args.rounds):
        for b in args.builds:
            res[b].append(run(b, args))
        print(f"round {r + 1}/{args.rounds}: " +
              "  ".join(f"{b} x{res[b][-1][2]:.3f}" for b in args.builds), file=sys.stderr)
    base = res[args.builds[0]]
    print(f"{'build':<20} {'x talker':>8} {'x CP':>6} {'x t+CP':>7}   paired ratios over "
          f"{args.rounds} rounds: {'talker':>7} {'CP':>6} {'t+CP':>6} {'ms':>6}")
    for b in args.builds:
        med = [statistics.median(col) for col in zip(*res[b])]
        rat = [statistics.median([x[k] / y[k] for x, y in zip(res[b], base)]) for k in range(4)]
        print(f"{b:<20} {med[0]:8.3f} {med[1]:6.3f} {med[2]:7.3f}   {'':>28}{rat[0]:7.3f} "
              f"{rat[1]:6.3f} {rat[2]:6.3f} {rat[3]:6.3f}")


if __name__ == "__main__":
    main()
