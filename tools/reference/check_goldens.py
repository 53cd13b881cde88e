#!/usr/bin/env python3
"""Regenerate the tiny models and goldens into a temporary directory and compare them with the
committed ones under tests/fixtures.

Reports, per file: byte-identical or not; for safetensors the largest absolute difference per
tensor; for JSON the differing keys; for jsonl the differing lines. Exit status 0 only if every
regenerated file is byte-identical to the committed one (the generators are deterministic).

    tools/reference/.venv/bin/python tools/reference/check_goldens.py [--keep] [--tmp DIR] [--no-regen]
"""
import argparse
import filecmp
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import qwen3_tts_layout as L  # noqa: E402

GENERATED = ("audio", "codec", "models", "golden")


def regenerate(tmp, committed):
    os.makedirs(tmp, exist_ok=True)
    # the real tokenizer files are inputs, not outputs
    shutil.copytree(os.path.join(committed, "tokenizer"), os.path.join(tmp, "tokenizer"), dirs_exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    for script in ("make_tiny.py", "make_goldens.py"):
        cmd = [sys.executable, os.path.join(HERE, script), "--root", tmp]
        print("+", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)


def list_files(root):
    out = {}
    for top in GENERATED:
        base = os.path.join(root, top)
        for dp, dns, fns in os.walk(base):
            for fn in fns:
                p = os.path.join(dp, fn)
                out[os.path.relpath(p, root)] = p
    return out


def cmp_safetensors(a, b):
    from safetensors.numpy import load_file
    import numpy as np

    ta, tb = load_file(a), load_file(b)
    lines = []
    for k in sorted(set(ta) | set(tb)):
        if k not in ta or k not in tb:
            lines.append(f"    {k}: only in {'committed' if k in ta else 'regenerated'}")
            continue
        x, y = ta[k], tb[k]
        if x.dtype != y.dtype or x.shape != y.shape:
            lines.append(f"    {k}: dtype/shape {x.dtype}{list(x.shape)} vs {y.dtype}{list(y.shape)}")
            continue
        if x.dtype.kind in "iu":
            n = int((x != y).sum())
            if n:
                lines.append(f"    {k}: {n} integer elements differ")
            continue
        xf, yf = x.astype(np.float64), y.astype(np.float64)
        same_inf = np.array_equal(np.isinf(xf), np.isinf(yf)) and np.array_equal(xf[np.isinf(xf)], yf[np.isinf(yf)])
        fin = np.isfinite(xf) & np.isfinite(yf)
        d = float(np.abs(xf[fin] - yf[fin]).max()) if fin.any() else 0.0
        if d != 0.0 or not same_inf:
            lines.append(f"    {k}: max |diff| {d:.3e}{'' if same_inf else ' (inf pattern differs)'}")
    return lines


def cmp_json(a, b):
    ja, jb = json.load(open(a, encoding="utf-8")), json.load(open(b, encoding="utf-8"))
    lines = []

    def walk(x, y, path):
        if type(x) is not type(y):
            lines.append(f"    {path}: {x!r} vs {y!r}")
        elif isinstance(x, dict):
            for k in sorted(set(x) | set(y)):
                if k not in x or k not in y:
                    lines.append(f"    {path}/{k}: only in {'committed' if k in x else 'regenerated'}")
                else:
                    walk(x[k], y[k], f"{path}/{k}")
        elif isinstance(x, list) and len(x) == len(y):
            for i, (u, v) in enumerate(zip(x, y)):
                walk(u, v, f"{path}[{i}]")
        elif x != y:
            lines.append(f"    {path}: {str(x)[:80]} vs {str(y)[:80]}")

    walk(ja, jb, "")
    return lines[:20]


def cmp_jsonl(a, b):
    la = open(a, encoding="utf-8").read().splitlines()
    lb = open(b, encoding="utf-8").read().splitlines()
    lines = [f"    line count {len(la)} vs {len(lb)}"] if len(la) != len(lb) else []
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            lines.append(f"    line {i + 1} differs: {x[:60]}")
    return lines[:20]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.path.join(L.REPO, "tests", "fixtures"), help="committed fixtures")
    ap.add_argument("--tmp", default=None, help="regenerate into this dir (default: a new temp dir)")
    ap.add_argument("--no-regen", action="store_true", help="only compare --tmp with --root")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    args = ap.parse_args()
    committed = os.path.abspath(args.root)
    tmp = os.path.abspath(args.tmp) if args.tmp else tempfile.mkdtemp(prefix="qwen3tts-goldens-")
    try:
        if not args.no_regen:
            regenerate(tmp, committed)
        fa, fb = list_files(committed), list_files(tmp)
        n_same = n_diff = 0
        for rel in sorted(set(fa) | set(fb)):
            if rel not in fa or rel not in fb:
                print(f"MISSING {rel}: only in {'committed' if rel in fa else 'regenerated'}")
                n_diff += 1
                continue
            a, b = fa[rel], fb[rel]
            if os.path.islink(a) or os.path.islink(b):
                la = os.readlink(a) if os.path.islink(a) else None
                lb = os.readlink(b) if os.path.islink(b) else None
                if la == lb:
                    n_same += 1
                else:
                    print(f"DIFF {rel}: symlink {la} vs {lb}")
                    n_diff += 1
                continue
            if filecmp.cmp(a, b, shallow=False):
                n_same += 1
                continue
            n_diff += 1
            print(f"DIFF {rel} (not byte-identical)")
            if rel.endswith(".safetensors"):
                for line in cmp_safetensors(a, b) or ["    all tensors equal (header/metadata differs)"]:
                    print(line)
            elif rel.endswith(".jsonl"):
                for line in cmp_jsonl(a, b):
                    print(line)
            elif rel.endswith(".json"):
                for line in cmp_json(a, b):
                    print(line)
        print(f"{n_same} files byte-identical, {n_diff} differ or missing "
              f"(compared {committed} with {tmp})")
        return 0 if n_diff == 0 else 1
    finally:
        if not args.keep and not args.tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
