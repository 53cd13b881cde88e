#!/usr/bin/env python3
"""The README's server curl examples, run as written (loopback only).

    python3 tests/python/test_readme_curl.py [--bin build/qwen3-tts]

Takes every `curl` command of the README's "## Server" section (with its
continuation lines), serves the tiny CustomVoice model (the cloning commands,
those with `ref_audio`, the tiny Base model with a reference recording as
me.wav), points the commands at its port instead of 8080, runs each with bash
in a scratch directory and checks what it produced. Skips (exit 0) when curl is not installed. Prints
"test_readme_curl: N passed, N failed".
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serverproc import ServerProcess  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "tests", "fixtures", "models", "cv06")
BASE_MODEL = os.path.join(ROOT, "tests", "fixtures", "models", "base06")
REF_WAV = os.path.join(ROOT, "tests", "fixtures", "audio", "ref_24k_mono.wav")


def readme_curls():
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    sec = text[text.index("## Server\n"):]
    sec = sec[:sec.index("\n## ", 1)]
    cmds = []
    for block in re.findall(r"```sh\n(.*?)```", sec, re.S):
        cur = ""
        for line in block.splitlines():
            if cur:
                cur += "\n" + line
            elif line.startswith("curl "):
                cur = line
            else:
                continue
            if not line.rstrip().endswith("\\"):
                cmds.append(cur)
                cur = ""
    return cmds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "qwen3-tts"))
    a = ap.parse_args()
    if not shutil.which("curl"):
        print("test_readme_curl: skipped (curl not installed)")
        return 0
    cmds = readme_curls()
    passed = failed = 0
    with ServerProcess(a.bin, MODEL) as srv, ServerProcess(a.bin, BASE_MODEL) as base, \
            tempfile.TemporaryDirectory() as tmp:
        shutil.copy(REF_WAV, os.path.join(tmp, "me.wav"))
        for cmd in cmds:
            port = base.port if "ref_audio" in cmd else srv.port
            run = cmd.replace("localhost:8080", "127.0.0.1:%d" % port)
            p = subprocess.run(["bash", "-c", run], cwd=tmp, capture_output=True, timeout=300)
            out = p.stdout
            ok = p.returncode == 0
            why = "exit %d" % p.returncode
            m = re.search(r"-o (\S+)", cmd)
            if ok and m:
                data = open(os.path.join(tmp, m.group(1)), "rb").read()
                if m.group(1).endswith(".wav"):
                    ok = data[:4] == b"RIFF" and len(data) > 44
                else:
                    ok = len(data) > 0
                why = "%s: %d bytes%s" % (m.group(1), len(data), "" if ok else ": %r" % data[:200])
            elif ok and "/health" in cmd:
                ok = b'"status":"ok"' in out
                why = out[:80]
            elif ok and "stream_format\":\"sse" in cmd:
                ok = b"speech.audio.done" in out
                why = out[-80:]
            elif ok:
                ok = len(out) > 0 and b'"error"' not in out
                why = out[:80]
            first = cmd.splitlines()[0]
            print("%s %s (%s)" % ("ok" if ok else "not ok", first, why), file=sys.stderr)
            passed += ok
            failed += not ok
        failed += len(cmds) < 8
    print("test_readme_curl: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
