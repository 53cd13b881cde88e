#!/usr/bin/env python3
"""The official `openai` Python client against `qwen3-tts serve` (loopback).

    python3 -m venv build/venv-openai && build/venv-openai/bin/pip install openai
    build/venv-openai/bin/python tests/python/test_openai_client.py [--bin build/qwen3-tts]

Starts the server on the tiny CustomVoice model with an API key, then:
whole-body wav and pcm through client.audio.speech.create; the same audio
streamed through with_streaming_response (stream_format audio and sse);
flac; speed 1.5 (1/1.5 of the samples, streamed == whole); the client's own
error classes for a bad voice (400), a bad key (401) and a speed out of range. Prints "test_openai_client: N passed, N failed".
"""
import argparse
import base64
import json
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serverproc import ServerProcess  # noqa: E402

import openai  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "tests", "fixtures", "models", "cv06")
KEY = "test-key-123"
# seed 0, the model's sampling defaults: this text ends by EOS on cv06 in 69 frames
TEXT = "The quick brown fox jumps over the lazy dog."

passed = failed = 0


def check(name, fn):
    global passed, failed
    try:
        fn()
        passed += 1
        print("ok", name, file=sys.stderr)
    except Exception:  # noqa: BLE001 - report every failure and go on
        failed += 1
        print("not ok", name, file=sys.stderr)
        traceback.print_exc()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "qwen3-tts"))
    a = ap.parse_args()

    with ServerProcess(a.bin, MODEL, ["--api-key", KEY, "-b", "2"]) as srv:
        base = "http://127.0.0.1:%d/v1" % srv.port
        client = openai.OpenAI(base_url=base, api_key=KEY, max_retries=0, timeout=120)
        state = {}

        def whole_wav():
            r = client.audio.speech.create(model="qwen3-tts", voice="vivian", input=TEXT, response_format="wav")
            data = r.content
            assert data[:4] == b"RIFF" and data[8:16] == b"WAVEfmt ", data[:16]
            assert int.from_bytes(data[40:44], "little") == len(data) - 44
            state["pcm"] = data[44:]
            assert len(state["pcm"]) > 0

        def whole_pcm():
            r = client.audio.speech.create(model="tts-1", voice="vivian", input=TEXT, response_format="pcm")
            assert r.content == state["pcm"], (len(r.content), len(state["pcm"]))

        def streamed_pcm():
            with client.audio.speech.with_streaming_response.create(
                    model="qwen3-tts", voice="vivian", input=TEXT, response_format="pcm",
                    extra_body={"stream_format": "audio"}) as r:
                data = b"".join(r.iter_bytes())
            assert data == state["pcm"], (len(data), len(state["pcm"]))

        def streamed_wav_default_format():
            # no stream_format: the whole body, read through the streaming interface
            with client.audio.speech.with_streaming_response.create(
                    model="qwen3-tts", voice="vivian", input=TEXT) as r:
                data = b"".join(r.iter_bytes())
            assert data[:4] == b"RIFF" and data[44:] == state["pcm"]

        def streamed_sse():
            audio = b""
            done = False
            with client.audio.speech.with_streaming_response.create(
                    model="qwen3-tts", voice="vivian", input=TEXT, response_format="pcm",
                    extra_body={"stream_format": "sse"}) as r:
                assert r.headers["content-type"].startswith("text/event-stream")
                for line in r.iter_lines():
                    if not line.startswith("data: "):
                        continue
                    ev = json.loads(line[6:])
                    if ev["type"] == "speech.audio.delta":
                        audio += base64.b64decode(ev["audio"])
                    elif ev["type"] == "speech.audio.done":
                        done = True
                        assert ev["usage"]["output_tokens"] > 0
            assert done and audio == state["pcm"], (done, len(audio))

        def flac():
            r = client.audio.speech.create(model="qwen3-tts", voice="vivian", input=TEXT, response_format="flac")
            assert r.content[:4] == b"fLaC"

        def bad_voice():
            try:
                client.audio.speech.create(model="qwen3-tts", voice="alloy", input=TEXT)
            except openai.BadRequestError as e:
                assert e.status_code == 400
                assert e.body["code"] == "invalid_value" and e.body["param"] == "voice", e.body
                assert "vivian" in e.body["message"]
                return
            raise AssertionError("no error")

        def speed():
            # the same frames at 1.5x the tempo: 1/1.5 of the samples, streamed or not
            r = client.audio.speech.create(model="qwen3-tts", voice="vivian", input=TEXT,
                                           response_format="pcm", speed=1.5)
            want = len(state["pcm"]) / 1.5
            assert abs(len(r.content) - want) <= 0.02 * want, (len(r.content), want)
            with client.audio.speech.with_streaming_response.create(
                    model="qwen3-tts", voice="vivian", input=TEXT, response_format="pcm", speed=1.5,
                    extra_body={"stream_format": "audio"}) as s:
                data = b"".join(s.iter_bytes())
            assert data == r.content, (len(data), len(r.content))

        def speed_out_of_range():
            try:
                client.audio.speech.create(model="qwen3-tts", voice="vivian", input=TEXT, speed=4.5)
            except openai.BadRequestError as e:
                assert e.body["param"] == "speed" and e.body["code"] == "invalid_value", e.body
                return
            raise AssertionError("no error")

        def bad_key():
            bad = openai.OpenAI(base_url=base, api_key="wrong", max_retries=0, timeout=60)
            try:
                bad.audio.speech.create(model="qwen3-tts", voice="vivian", input=TEXT)
            except openai.AuthenticationError as e:
                assert e.status_code == 401
                return
            raise AssertionError("no error")

        def models_list():
            ids = [m.id for m in client.models.list()]
            assert "qwen3-tts" in ids and "tts-1" in ids, ids

        for name, fn in [("whole_wav", whole_wav), ("whole_pcm", whole_pcm), ("streamed_pcm", streamed_pcm),
                         ("streamed_wav_default_format", streamed_wav_default_format),
                         ("streamed_sse", streamed_sse), ("flac", flac), ("bad_voice", bad_voice),
                         ("speed", speed), ("speed_out_of_range", speed_out_of_range), ("bad_key", bad_key),
                         ("models_list", models_list)]:
            if name != "whole_wav" and "pcm" not in state:
                break
            check(name, fn)
        code = srv.stop()
        check("drained_exit_0", lambda: (_ for _ in ()).throw(AssertionError(code)) if code != 0 else None)

    print("test_openai_client: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
