#!/usr/bin/env python3
"""Server throughput and time to first audio, single stream vs C concurrent streams (loopback).

    python3 tools/bench_server.py --bin build/qwen3-tts -m MODEL_DIR [--clients 4] [--batch 4]
        [--frames 100] [--rounds 3] [--stagger S] [--codec fp32|bf16] [--stream-chunk N] [--backend cuda]
        [--speaker NAME] [--instruct TEXT] [--repeat N] [--json]

Starts `qwen3-tts serve` on a free loopback port (batch B = --batch), then
  1. single stream: one client sends --rounds streamed requests one after another;
  2. concurrent: --clients clients each send --rounds streamed requests one after another, all
     starting at once, or client i after i * --stagger seconds (then requests arrive at any
     phase of a running batch, as from independent users; the first and last --stagger
     windows run fewer clients, so compare TTFA there, throughput without it).
Every request is a native /v1/tts greedy request for exactly --frames frames (max_frames set by
the client, so the model's EOS never shortens a run of random weights; a request that ends early
is reported), streamed as raw PCM, a different sentence per client. Reported:
  - audio seconds produced per wall second, each phase, and their ratio (what batching buys:
    the weights are read once per step for every running request);
  - time to first audio (request sent -> first PCM byte), median per phase, and their ratio;
    and the concurrent phase's TTFAs round by round (the first round of clients that start
    together arrives at one instant, later rounds as earlier requests finish).
Numbers from a shared 2-core machine are noisy: --repeat N alternates the two phases N times in one
server and adds the medians of the per-pair ratios.
Benchmarks live here, apart from the tests; nothing leaves 127.0.0.1.
"""
import argparse
import http.client
import json
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
from serverproc import ServerProcess  # noqa: E402

SAMPLE_RATE = 24000
TEXTS = [
    "The quick brown fox jumps over the lazy dog by the river.",
    "A small team builds a fast speech engine in plain C.",
    "Every request streams its own audio while the batch runs.",
    "Four voices speak at once and each one is heard in time.",
    "The weights are read once for all the rows of a step.",
    "Nothing here needs a network or a graphics card to run.",
    "Long sentences take longer, short ones finish early.",
    "Time to first audio is what a listener notices first.",
]


def one_request(port, text, frames, speaker, instruct=None):
    req = {"text": text, "greedy": True, "max_frames": frames, "stream": True,
           "response_format": "pcm"}
    if speaker:
        req["speaker"] = speaker
    if instruct:
        req["instruct"] = instruct
    body = json.dumps(req)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.monotonic()
    conn.request("POST", "/v1/tts", body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError("status %d: %s" % (resp.status, resp.read()[:200]))
    first = None
    n = 0
    while True:
        chunk = resp.read1(65536)
        if not chunk:
            break
        if first is None:
            first = time.monotonic() - t0
        n += len(chunk)
    wall = time.monotonic() - t0
    conn.close()
    return {"ttfa_s": first if first is not None else wall, "wall_s": wall,
            "audio_s": n / 2 / SAMPLE_RATE}


def phase(port, clients, rounds, frames, speaker, stagger=0.0, instruct=None):
    results = [[] for _ in range(clients)]
    errors = []

    def client(i):
        time.sleep(i * stagger)
        try:
            for r in range(rounds):
                results[i].append(one_request(port, TEXTS[(i + r * clients) % len(TEXTS)], frames, speaker,
                                              instruct))
        except Exception as e:  # reported, not hidden
            errors.append("client %d: %s" % (i, e))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    if errors:
        raise RuntimeError("; ".join(errors))
    flat = [x for rs in results for x in rs]
    audio = sum(x["audio_s"] for x in flat)
    return {"clients": clients, "requests": len(flat), "wall_s": wall, "audio_s": audio,
            "audio_per_wall_s": audio / wall,
            "ttfa_median_s": statistics.median(x["ttfa_s"] for x in flat),
            "ttfa_max_s": max(x["ttfa_s"] for x in flat),
            "ttfa_by_round_s": [sorted(rs[r]["ttfa_s"] for rs in results if r < len(rs))
                                for r in range(rounds)],
            "short_requests": sum(1 for x in flat if x["audio_s"] < frames * 0.08 - 1e-6)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/qwen3-tts")
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--frames", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--speaker", default="vivian", help="preset speaker ('' for none: VoiceDesign)")
    ap.add_argument("--instruct", default=None,
                    help="instruction sent with every request (1.7B CustomVoice; VoiceDesign's voice)")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--stagger", type=float, default=0.0, help="seconds between client starts")
    ap.add_argument("--codec", default=None, help="serve --codec (fp32 or bf16)")
    ap.add_argument("--backend", default=None, help="serve --backend (cpu or cuda)")
    ap.add_argument("--stream-chunk", type=int, default=None, help="serve --stream-chunk N")
    ap.add_argument("--repeat", type=int, default=1,
                    help="alternate the two phases this many times; report each pair and the medians")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.repeat < 1:
        ap.error("--repeat must be at least 1")
    args = ["-b", str(a.batch), "--queue", str(max(16, a.clients))]
    if a.threads:
        args += ["-j", str(a.threads)]
    if a.codec:
        args += ["--codec", a.codec]
    if a.backend:
        args += ["--backend", a.backend]
    if a.stream_chunk is not None:
        args += ["--stream-chunk", str(a.stream_chunk)]
    pairs = []
    with ServerProcess(a.bin, a.model, args, ready_timeout=300) as srv:
        one_request(srv.port, TEXTS[0], 8, a.speaker, a.instruct)  # warm-up
        for _ in range(a.repeat):  # alternated, so that a slow spell of the host hits both phases
            single = phase(srv.port, 1, a.rounds, a.frames, a.speaker, instruct=a.instruct)
            multi = phase(srv.port, a.clients, a.rounds, a.frames, a.speaker, a.stagger, a.instruct)
            pairs.append({"single": single, "concurrent": multi,
                          "throughput_ratio": multi["audio_per_wall_s"] / single["audio_per_wall_s"],
                          "ttfa_ratio": multi["ttfa_median_s"] / single["ttfa_median_s"]})
    out = {"model": a.model, "codec": a.codec or "fp32", "batch": a.batch, "frames": a.frames, "rounds": a.rounds, "stagger_s": a.stagger,
           "stream_chunk": a.stream_chunk,
           "repeats": pairs,
           "throughput_ratio_median": statistics.median(p["throughput_ratio"] for p in pairs),
           "ttfa_ratio_median": statistics.median(p["ttfa_ratio"] for p in pairs)}
    if a.repeat == 1:  # the single-run shape of earlier versions
        out.update(pairs[0])
    if a.json:
        print(json.dumps(out, indent=1))
        return
    print("server bench: %s, codec %s, B=%d, %d frames per request, %d rounds%s%s" % (
        a.model, out["codec"], a.batch, a.frames, a.rounds,
        (", clients %.1f s apart" % a.stagger) if a.stagger else "",
        (", %d alternations" % a.repeat) if a.repeat > 1 else ""))
    for pr in pairs:
        for name, p in (("single stream", pr["single"]), ("%d clients" % a.clients, pr["concurrent"])):
            print("  %-14s %2d requests  %6.2f s of audio in %6.2f s: %5.2f audio s / wall s;  TTFA median %.3f s, max %.3f s%s"
                  % (name, p["requests"], p["audio_s"], p["wall_s"], p["audio_per_wall_s"], p["ttfa_median_s"],
                     p["ttfa_max_s"], ("  (%d ended early)" % p["short_requests"]) if p["short_requests"] else ""))
        print("  %d clients' TTFA by round (s): %s" % (a.clients, "; ".join(
            " ".join("%.2f" % x for x in r) for r in pr["concurrent"]["ttfa_by_round_s"])))
        print("  aggregate throughput: %.2fx the single stream;  TTFA under load: %.2fx idle"
              % (pr["throughput_ratio"], pr["ttfa_ratio"]))
    if a.repeat > 1:
        print("  medians of %d alternations: aggregate throughput %.2fx, TTFA under load %.2fx idle"
              % (a.repeat, out["throughput_ratio_median"], out["ttfa_ratio_median"]))


if __name__ == "__main__":
    main()
