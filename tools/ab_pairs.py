#!/usr/bin/env python3
"""Paired timing of builds on a noisy machine (not a test).

Runs every build in turn, ROUNDS times, and reports for each build the
median over rounds of each measure divided by the first build's in the same
round. Pairing within a round cancels the slow drifts of a shared host
(other tenants taking bandwidth for minutes), which is what makes separate
medians of a few runs unable to tell 3% apart.

Default: `BUILD/bench_backend MODEL` (talker step, code-predictor frame,
total ms; each build directory needs bench_backend: make BUILD=DIR
DIR/bench_backend). --bench: whole `BUILD/qwen3-tts bench --runs 1 --json`
calls (x floor of the talker, the code predictor and both, talker + CP
ms, the codec's ms per frame and the RTF), so the streamed codec decodes
between the frames, the real prompt and each call's own bandwidth probes
are in it; --prompt and --kv do not apply. The RTF paired is that of
bench's timed runs, the codec decoded between frames (since 24fc112 bench
also runs each request with the codec beside generation, JSON
serial_codec.rtf against rtf), so that builds on both sides of that change
compare alike.

  tools/ab_pairs.py --model models/full-cv06-int4 build-base build
  tools/ab_pairs.py --model DIR --rounds 15 --frames 40 -- buildA buildB buildC
  tools/ab_pairs.py --model DIR --prompt 1000 --kv bf16 build-base build
  tools/ab_pairs.py --model DIR --bench --rounds 10 --frames 100 build-base build
  tools/ab_pairs.py --model DIR --placement apart --rounds 20 build-base build

Each round's line also gives where the two threads sat in each run, from the
threads' round trip the runs print (bench_backend from 2026-12-07 on, bench's
JSON machine.thread_round_trip_ns): T together (every round trip under
150 ns: one core complex), A apart (all 150 ns or more), M moved during the
run, ? not printed. --placement together|apart pairs only the rounds whose
runs all sat that way: on the EPYC VM the two placements differ by up to 30%,
more than most changes measured.
"""
import argparse
import json
import re
import statistics
import subprocess
import sys

LINE = re.compile(r"talker step ([0-9.]+) ms, code predictor ([0-9.]+) ms, total ([0-9.]+) ms")
RT_LINE = re.compile(r"threads' round trip: ([0-9.]+) ns before the frames, ([0-9.]+) ns after")
APART_NS = 150  # a cache-line round trip at or above this: the threads on two core complexes


def placement(rts):
    """T, A, M or ? from a run's round trips (ns; empty: not measured)."""
    if not rts:
        return "?"
    apart = [v >= APART_NS for v in rts]
    return "A" if all(apart) else "T" if not any(apart) else "M"


def run_command(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"ab_pairs: {' '.join(cmd)} failed (exit {out.returncode}):\n{out.stderr[-2000:]}")
    return out.stdout


def run_backend(build, args):
    cmd = [f"{build}/bench_backend", args.model, "--prompt", str(args.prompt), "--frames",
           str(args.frames), "--threads", str(args.threads), "--window", "1", "--kv", args.kv]
    out = run_command(cmd)
    m = LINE.search(out)
    if not m:
        sys.exit(f"ab_pairs: {' '.join(cmd)} printed no frame line")
    rt = RT_LINE.search(out)
    return [float(v) for v in m.groups()], placement([float(v) for v in rt.groups()] if rt else [])


def run_bench(build, args):
    cmd = [f"{build}/qwen3-tts", "bench", "-m", args.model, "-j", str(args.threads), "--frames",
           str(args.frames), "--runs", "1", "--json", "-q"]
    d = json.loads(run_command(cmd))
    s = d["stages"]
    rt = d["machine"].get("thread_round_trip_ns")
    return ([s["talker"]["x_floor"], s["code_predictor"]["x_floor"], s["talker_cp"]["x_floor"],
             s["talker_cp"]["ms_per_frame"], s["codec"]["ms_per_frame"],
             d.get("serial_codec", {}).get("rtf", d["rtf"])],
            placement([rt["min"], rt["max"]] if rt else []))


# per mode: the runner, its measures' names, and the measure whose plain median is shown
MODES = {
    "backend": (run_backend, ["talker", "CP", "total"], 2, "median total ms"),
    "bench": (run_bench, ["x talker", "x CP", "x t+CP", "ms", "codec", "RTF"], 2, "median x t+CP"),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="model directory")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--frames", type=int, default=40)
    ap.add_argument("--prompt", type=int, default=23, help="prefill rows")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--kv", choices=["f32", "bf16"], default="f32",
                    help="the talker's KV cache (bench_backend --kv; builds from 2026-12-04 on)")
    ap.add_argument("--bench", action="store_true", help="whole qwen3-tts bench calls")
    ap.add_argument("--placement", choices=["together", "apart"],
                    help="pair only the rounds whose runs all had the threads so")
    ap.add_argument("builds", nargs="+", help="build directories; the first is the baseline")
    args = ap.parse_args()
    if args.rounds < 1 or args.frames < 2:
        sys.exit("ab_pairs: --rounds must be >= 1 and --frames >= 2")
    run, names, shown, shown_name = MODES["bench" if args.bench else "backend"]
    vals = {b: [] for b in args.builds}
    want = {"together": "T", "apart": "A"}.get(args.placement)
    kept = 0
    for r in range(args.rounds):
        got = {b: run(b, args) for b in args.builds}
        where = "".join(got[b][1] for b in args.builds)
        keep = want is None or where == want * len(args.builds)
        if keep:
            kept += 1
            for b in args.builds:
                vals[b].append(got[b][0])
        print(f"round {r + 1}/{args.rounds} [{where}{'' if keep else ', left out'}]: " +
              "  ".join(f"{b} {got[b][0][shown]:.3f}" for b in args.builds), file=sys.stderr)
    if not kept:
        sys.exit(f"ab_pairs: no round had every run {args.placement}")
    base = vals[args.builds[0]]
    print(f"{'build':<20} " + " ".join(f"{n:>8}" for n in names) +
          f"   {shown_name}  (ratios: medians over {kept} rounds of build / "
          f"{args.builds[0]}{', ' + args.placement if want else ''})")
    for b in args.builds:
        ratios = [[t[k] / s[k] for k in range(len(names))] for t, s in zip(vals[b], base)]
        med = [statistics.median(col) for col in zip(*ratios)]
        print(f"{b:<20} " + " ".join(f"{m:8.3f}" for m in med) +
              f"   {statistics.median(t[shown] for t in vals[b]):8.3f}")


if __name__ == "__main__":
    main()
