#!/usr/bin/env python3
"""Config torture: every number and boolean of a model directory's three config files, changed
one at a time, then a short synthesis with the (sanitizer) build.

    python3 tests/python/config_torture.py --bin build-asan/qwen3-tts \\
        -m tests/fixtures/models/cv06 [--values short|full] [--jobs 2] -- SYNTH ARGS...

For each leaf of config.json, generation_config.json and speech_tokenizer/config.json it writes
a copy of the model directory (weights symlinked) with that one value replaced, runs
`qwen3-tts synth ... --max-frames 4`, and requires what the reliability goals ask of a hostile
model file: either a clean run or a one-line `qwen3-tts: ...` error with exit status 1; never a
signal, a sanitizer report, another exit status or a hang. Values tried per integer: 0, -1, one
more, 2^20 (short) plus 1, 2, 3, 7, one less, half, double, 65535 and 2^31-1 (full); floats and
booleans get their own sets. The values that keep a config consistent with the weights reach the
model code: ids, sampling parameters, norms' epsilons, RoPE settings, window sizes.

Not a unit test (a minute or two per model); CI runs the short set under ASan+UBSan on the
CustomVoice fixture and on the Base fixture with in-context cloning. Prints each failure with the changed value, exits 1 if there was one.
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile

FILES = ["config.json", "generation_config.json", "speech_tokenizer/config.json"]


def leaves(o, path=()):
    if isinstance(o, dict):
        for k, v in o.items():
            yield from leaves(v, path + (k,))
    elif isinstance(o, list):
        for i, v in enumerate(o):
            yield from leaves(v, path + (i,))
    elif isinstance(o, (bool, int, float)):
        yield path, o


def replaced(doc, path, value):
    doc = json.loads(json.dumps(doc))
    o = doc
    for k in path[:-1]:
        o = o[k]
    o[path[-1]] = value
    return doc


def values(v, full):
    if isinstance(v, bool):
        return [not v]
    if isinstance(v, int):
        vs = {0, -1, v + 1, 1 << 20}
        if full:
            vs |= {1, 2, 3, 7, v - 1, v // 2, 2 * v, 65535, 2**31 - 1}
        return sorted(vs - {v})
    vs = [0.0, 1e-30, 1e30, -v] + ([2 * v, 1.0, 1e-7] if full else [])
    return [x for x in vs if x != v]


def link_tree(src, dst):
    """dst mirrors src with every file but the configs symlinked."""
    os.makedirs(os.path.join(dst, "speech_tokenizer"))
    for sub in ("", "speech_tokenizer"):
        for n in os.listdir(os.path.join(src, sub)):
            rel = os.path.join(sub, n) if sub else n
            if rel in FILES or rel == "speech_tokenizer":
                continue
            os.symlink(os.path.realpath(os.path.join(src, rel)), os.path.join(dst, rel))


def run_case(args, base, work, f, path, old, new):
    d = tempfile.mkdtemp(dir=work)
    try:
        link_tree(args.model, d)
        for g in FILES:
            with open(os.path.join(d, g), "w") as fh:
                json.dump(replaced(base[g], path, new) if g == f else base[g], fh)
        cmd = [args.bin, "synth", "-m", d, "-o", os.path.join(d, "out.wav"), "--max-frames", "4",
               "-q"] + args.synth
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            return "hang (over %d s)" % args.timeout
        except OSError as e:
            return "cannot run %s: %s" % (args.bin, e)
        err = r.stderr
        if r.returncode < 0:
            return "signal %d: %s" % (-r.returncode, err[-400:])
        if "Sanitizer" in err or "runtime error:" in err:
            return "sanitizer: " + err[:800]
        if r.returncode not in (0, 1):
            return "exit %d: %s" % (r.returncode, err[-400:])
        if r.returncode == 1 and not err.startswith("qwen3-tts"):
            return "exit 1 without a qwen3-tts message: %r" % err[:400]
        return None
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--values", choices=["short", "full"], default="short")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("synth", nargs="*", help="synth arguments (after --)")
    args = ap.parse_args()
    base = {}
    for f in FILES:
        with open(os.path.join(args.model, f)) as fh:
            base[f] = json.load(fh)
    cases = [(f, p, v, nv) for f in FILES for p, v in leaves(base[f])
             for nv in values(v, args.values == "full")]
    work = tempfile.mkdtemp(prefix="qtts_torture_")
    failures = 0
    try:
        with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as ex:
            futs = {ex.submit(run_case, args, base, work, *c): c for c in cases}
            for fut in concurrent.futures.as_completed(futs):
                why = fut.result()
                if why:
                    failures += 1
                    f, p, v, nv = futs[fut]
                    print("FAIL %s %s: %r -> %r: %s" % (f, "/".join(map(str, p)), v, nv, why),
                          flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("config torture: %s, %d cases, %d failures" % (args.model, len(cases), failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
