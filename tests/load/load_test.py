#!/usr/bin/env python3
"""Bounded loopback load test for `qwen3-tts serve` (standard library only).

    python3 tests/load/load_test.py [--bin build/qwen3-tts] [--clients 16] [--duration 20]

Starts the server on the tiny CustomVoice model (127.0.0.1, free port, small
queue so backpressure happens), then runs N client threads for D seconds,
each looping over a weighted mix of:

  valid        greedy /v1/tts and seeded /v1/audio/speech (whole, chunked, SSE)
               -> 200, or 503 queue_full with Retry-After (backpressure)
  invalid      bad JSON, unknown fields, bad voice, wrong types, oversize,
               smuggling heads, unknown paths, wrong methods -> their 4xx/5xx
  disconnect   a long request reset (RST) before or during its stream,
               a half-close, a client that sends half a head and leaves
  probes       /health, /metrics, /v1/models, /v1/audio/voices -> 200

Every response status must be one its case allows ("unexpected" otherwise).
At the end: the server is alive and answers, no request is left in the batch
or the queue, a canary greedy request is byte-identical to the one made
before the load, RSS grew less than the allowed margin after warm-up, and
SIGTERM drains with exit 0. Prints "load_test: N passed, N failed".
"""
import argparse
import collections
import json
import os
import random
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
from serverproc import ServerProcess  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "tests", "fixtures", "models", "cv06")
HOST = "127.0.0.1"

SHORT = [("Hello world.", "vivian"), ("Good morning, everyone.", "ryan"), ("Hello.", "vivian"),
         ("Testing one two three.", "vivian"), ("Good morning, everyone.", "eric")]
OA_TEXT = "The quick brown fox jumps over the lazy dog."   # seed 0: EOS after 69 frames on cv06


# ==== a minimal HTTP/1.1 client on raw sockets ==============================================

class Resp:
    def __init__(self, status, headers, body, complete):
        self.status, self.headers, self.body, self.complete = status, headers, body, complete


def recv_until(sock, buf, marker):
    while marker not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            return buf, False
        buf += chunk
    return buf, True


def read_response(sock):
    buf, ok = recv_until(sock, b"", b"\r\n\r\n")
    if not ok:
        return None
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        headers[k.strip().lower()] = v.strip()
    if "content-length" in headers:
        n = int(headers["content-length"])
        while len(rest) < n:
            chunk = sock.recv(65536)
            if not chunk:
                return Resp(status, headers, rest, False)
            rest += chunk
        return Resp(status, headers, rest[:n], True)
    if headers.get("transfer-encoding") == "chunked":
        body = b""
        while True:
            rest, ok = recv_until(sock, rest, b"\r\n")
            if not ok:
                return Resp(status, headers, body, False)
            line, _, rest = rest.partition(b"\r\n")
            n = int(line, 16)
            while len(rest) < n + 2:
                chunk = sock.recv(65536)
                if not chunk:
                    return Resp(status, headers, body, False)
                rest += chunk
            if n == 0:
                return Resp(status, headers, body, True)
            body += rest[:n]
            rest = rest[n + 2:]
    body = rest
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return Resp(status, headers, body, True)
        body += chunk


def connect(port, timeout=120):
    s = socket.create_connection((HOST, port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def request(port, method, path, body=None, ctype="application/json", extra=b"", raw=None):
    s = connect(port)
    try:
        if raw is None:
            data = body.encode() if isinstance(body, str) else body
            head = "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" % (method, path)
            if data is not None:
                head += "Content-Type: %s\r\nContent-Length: %d\r\n" % (ctype, len(data))
            raw = head.encode() + extra + b"\r\n" + (data or b"")
        s.sendall(raw)
        return read_response(s)
    finally:
        s.close()


def rst(sock):
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def tts(text, speaker, **more):
    d = {"text": text, "speaker": speaker, "greedy": True}
    d.update(more)
    return json.dumps(d)


def metrics(port):
    r = request(port, "GET", "/metrics")
    out = {}
    for line in r.body.decode().splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.rpartition(" ")
            out[k] = float(v)
    return out


# ==== the cases =====================================================================================

BUSY = {503}   # queue full (backpressure) is always a legal answer to a valid request


def case_valid_tts(port, rnd):
    text, spk = rnd.choice(SHORT)
    r = request(port, "POST", "/v1/tts", tts(text, spk))
    return "valid_tts", r, {200} | BUSY


def case_valid_openai(port, rnd):
    fmt = rnd.choice(["wav", "pcm"])
    body = {"model": "tts-1", "input": OA_TEXT, "voice": "vivian", "response_format": fmt}
    mode = rnd.choice([None, "audio", "sse"])
    if mode:
        body["stream_format"] = mode
    if rnd.random() < 0.3:
        body["speed"] = rnd.choice([0.5, 1.5, 2.0])
    r = request(port, "POST", "/v1/audio/speech", json.dumps(body))
    return "valid_openai", r, {200} | BUSY


INVALID = [
    ("bad_json", lambda: ("POST", "/v1/tts", '{"text": "x",', None), {400}),
    ("unknown_field", lambda: ("POST", "/v1/tts", tts("x", "ryan", colour="blue"), None), {400}),
    ("bad_voice", lambda: ("POST", "/v1/audio/speech", json.dumps({"model": "tts-1", "input": "x", "voice": "../../x"}), None), {400}),
    ("wrong_type", lambda: ("POST", "/v1/tts", tts("x", "ryan", seed="1"), None), {400}),
    ("empty_text", lambda: ("POST", "/v1/tts", tts("  ", "ryan"), None), {400}),
    ("speed", lambda: ("POST", "/v1/audio/speech", json.dumps({"model": "tts-1", "input": "x", "voice": "ryan", "speed": 4.5}), None), {400}),
    ("clone", lambda: ("POST", "/v1/tts", json.dumps({"text": "x", "ref_audio": "AAAA"}), None), {400}),
    ("deep", lambda: ("POST", "/v1/tts", "[" * 40 + "]" * 40, None), {400}),
    ("bad_utf8", lambda: ("POST", "/v1/tts", b'{"text":"\xff","speaker":"ryan"}', None), {400}),
    ("not_found", lambda: ("GET", "/admin", None, None), {404}),
    ("method", lambda: ("DELETE", "/v1/tts", None, None), {405}),
    ("media_type", lambda: ("POST", "/v1/tts", "hello", "text/plain"), {415}),
    ("cl_te", lambda: ("RAW", b"POST /v1/tts HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}", None, None), {400}),
    ("te", lambda: ("RAW", b"POST /v1/tts HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", None, None), {501}),
    ("dup_cl", lambda: ("RAW", b"POST /v1/tts HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}", None, None), {400}),
    ("bare_lf", lambda: ("RAW", b"GET /health HTTP/1.1\nHost: a\n\n", None, None), {400}),
    ("too_big", lambda: ("RAW", b"POST /v1/tts HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 99999999\r\n\r\n", None, None), {413}),
    ("no_length", lambda: ("RAW", b"POST /v1/tts HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n\r\n", None, None), {411}),
    ("big_head", lambda: ("RAW", b"GET /health HTTP/1.1\r\nHost: a\r\nX: " + b"a" * 17000 + b"\r\n\r\n", None, None), {431}),
]


def case_invalid(port, rnd):
    name, make, allowed = rnd.choice(INVALID)
    method, path, body, ctype = make()
    if method == "RAW":
        r = request(port, None, None, raw=path)
    else:
        r = request(port, method, path, body, ctype or "application/json")
    # a refusal decided before the body is read may race the client's
    # sending it; the status is what matters
    return "invalid_" + name, r, allowed


def case_probe(port, rnd):
    path = rnd.choice(["/health", "/metrics", "/v1/models", "/v1/audio/voices"])
    return "probe", request(port, "GET", path), {200}


def case_disconnect(port, rnd):
    kind = rnd.choice(["rst_running", "rst_streaming", "half_head", "half_close"])
    s = connect(port)
    if kind == "half_head":
        s.sendall(b"POST /v1/tts HTTP/1.1\r\nHost: a\r\nContent-Le")
        time.sleep(rnd.uniform(0, 0.2))
        rst(s)
        return "disconnect_" + kind, None, None
    body = tts("A", "serena", max_frames=1000, stream=(kind == "rst_streaming"), response_format="pcm")
    if kind == "half_close":
        body = tts(*rnd.choice(SHORT))
    s.sendall(("POST /v1/tts HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
               % len(body)).encode() + body.encode())
    if kind == "half_close":
        s.shutdown(socket.SHUT_WR)
        r = read_response(s)
        s.close()
        return "disconnect_half_close", r, {200} | BUSY
    time.sleep(rnd.uniform(0.05, 0.5))
    rst(s)
    return "disconnect_" + kind, None, None


MIX = [(case_valid_tts, 4), (case_valid_openai, 2), (case_invalid, 5), (case_probe, 2), (case_disconnect, 2)]


def client(port, seed, stop_at, counts, unexpected, lock):
    rnd = random.Random(seed)
    cases = [c for c, w in MIX for _ in range(w)]
    while time.monotonic() < stop_at:
        fn = rnd.choice(cases)
        try:
            name, r, allowed = fn(port, rnd)
        except (ConnectionError, socket.timeout, OSError) as e:
            name, r, allowed = fn.__name__, None, {"exception"}
            with lock:
                unexpected.append((name, "exception %r" % (e,)))
            continue
        with lock:
            counts[name] += 1
            if allowed is None:
                continue
            if r is None:
                unexpected.append((name, "no response"))
            elif r.status not in allowed:
                unexpected.append((name, "status %d: %r" % (r.status, r.body[:200])))
            elif r.status == 503 and "retry-after" not in r.headers:
                unexpected.append((name, "503 without Retry-After"))
            elif r.status == 200 and not r.complete:
                unexpected.append((name, "truncated 200 body"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "qwen3-tts"))
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--duration", type=float, default=20)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--queue", type=int, default=8)
    ap.add_argument("--rss-margin-mib", type=float, default=48)
    a = ap.parse_args()

    checks = []

    def check(name, ok, detail=""):
        checks.append(ok)
        print("%s %s %s" % ("ok" if ok else "not ok", name, detail), file=sys.stderr)

    with ServerProcess(a.bin, MODEL, ["-b", str(a.batch), "--queue", str(a.queue), "--queue-timeout", "10",
                                      "--header-timeout", "2"]) as srv:
        port = srv.port
        canary = request(port, "POST", "/v1/tts", tts("Hello world.", "vivian"))
        check("canary_before", canary.status == 200)

        counts = collections.Counter()
        unexpected = []
        lock = threading.Lock()
        t0 = time.monotonic()
        stop_at = t0 + a.duration
        threads = [threading.Thread(target=client, args=(port, 1000 + i, stop_at, counts, unexpected, lock))
                   for i in range(a.clients)]
        for t in threads:
            t.start()
        time.sleep(min(3.0, a.duration / 4))
        rss_warm = srv.rss_kib()
        rss_peak = rss_warm
        while any(t.is_alive() for t in threads):
            time.sleep(0.5)
            if srv.alive():
                rss_peak = max(rss_peak, srv.rss_kib())
        for t in threads:
            t.join()
        elapsed = time.monotonic() - t0
        rss_end = srv.rss_kib() if srv.alive() else -1

        total = sum(counts.values())
        print("load: %d requests in %.1f s from %d clients: %s" % (total, elapsed, a.clients, dict(sorted(counts.items()))),
              file=sys.stderr)
        for name, what in unexpected[:20]:
            print("  unexpected: %s: %s" % (name, what), file=sys.stderr)
        check("no_unexpected_statuses", not unexpected, "(%d unexpected)" % len(unexpected))
        check("server_alive", srv.alive())
        check("traffic", counts["valid_tts"] > 0 and total > a.clients, "(%d requests)" % total)

        # settle: disconnected jobs are cancelled, nothing left in the batch
        end = time.monotonic() + 15
        m = {}
        while time.monotonic() < end:
            m = metrics(port)
            if m.get("qtts_batch_active") == 0 and m.get("qtts_queue_waiting") == 0:
                break
            time.sleep(0.2)
        check("batch_and_queue_empty", m.get("qtts_batch_active") == 0 and m.get("qtts_queue_waiting") == 0)
        print("metrics: completed %d, cancelled %d, frames %d, steps %d, rows/step %.2f, queue-full 503 %d" % (
            m.get("qtts_jobs_completed_total", 0), m.get("qtts_cancelled_total", 0), m.get("qtts_frames_total", 0),
            m.get("qtts_batch_steps_total", 0),
            m.get("qtts_batch_step_rows_total", 0) / max(1, m.get("qtts_batch_steps_total", 1)),
            m.get("qtts_rejected_queue_full_total", 0)), file=sys.stderr)
        check("cancellations_seen", m.get("qtts_cancelled_total", 0) > 0)
        wasted = m.get("qtts_frames_after_cancel_total", 0) / max(1, m.get("qtts_cancelled_total", 1))
        check("wasted_frames_per_cancel", wasted <= 3, "(%.2f)" % wasted)

        after = request(port, "POST", "/v1/tts", tts("Hello world.", "vivian"))
        check("canary_identical_after_load", after.status == 200 and after.body == canary.body)
        check("health_after", request(port, "GET", "/health").status == 200)
        growth = (rss_end - rss_warm) / 1024.0
        print("rss: warm %.1f MiB, peak %.1f MiB, end %.1f MiB" % (rss_warm / 1024, rss_peak / 1024, rss_end / 1024),
              file=sys.stderr)
        check("no_memory_growth", rss_end > 0 and growth < a.rss_margin_mib, "(%+.1f MiB)" % growth)
        code = srv.stop()
        check("drained_exit_0", code == 0, "(exit %s)" % code)

    n_ok = sum(1 for c in checks if c)
    print("load_test: %d passed, %d failed" % (n_ok, len(checks) - n_ok))
    return 0 if n_ok == len(checks) else 1


if __name__ == "__main__":
    sys.exit(main())
