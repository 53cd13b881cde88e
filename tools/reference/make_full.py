#!/usr/bin/env python3
"""Write a full-size random Qwen3-TTS model (real shapes, random values) in the exact Hugging Face
layout, for load / memory / speed tests of the C engine. Never committed.

    tools/reference/.venv/bin/python tools/reference/make_full.py --variant cv17 --out /work/fullmodels/cv17
        [--codec-from DIR]   reuse DIR/model.safetensors etc. of an existing speech_tokenizer (symlinks)
        [--check-load]       load the result with the official Qwen3TTSModel.from_pretrained (fp32)
        [--save-manifest F]  also write F: the configs and every tensor's name, shape and rule (JSON)
    python3 tools/reference/make_full.py --from-manifest F --out DIR
                             the same files from F alone: numpy and scipy, no torch, no qwen-tts
                             (for a machine without the reference stack, e.g. a GPU host)

Shapes: 0.6B = talker 1024/3072, 1.7B = talker 2048/6144 (28 layers, 16/8 heads, head_dim 128,
text 151936 x 2048), code predictor 1024/3072 x 5 layers, Base adds the ECAPA speaker encoder with
the class-default channels and enc_dim = talker hidden, codec = the shipped speech_tokenizer
config (encoder + decoder, F32). config.json is the shipped layout (spec section 2).

Values: tensor names/shapes come from the reference classes instantiated on the meta device; the
distributions follow make_tiny.py's rules (std 1/sqrt(fan_in), norms ~1, embeddings N(0,1), ...).
For speed each distribution class has one pool of 2^25 precomputed values (normal quantiles of
random uint16 codes, bf16 for the main model, f32 for the codec); every tensor is written as
1M-element windows of its pool at per-window random offsets (numpy SFC64 seeded by tensor name),
streamed straight to disk. Fully deterministic; values are plausible, not i.i.d. Gaussian.
"""
import argparse
import json
import os
import shutil
import sys
import time
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import qwen3_tts_layout as L  # noqa: E402

FULL_TALKER = {
    "0b6": dict(hidden=1024, inter=3072, layers=28, heads=16, kv_heads=8, head_dim=128,
                text_hidden=2048, mrope_section=[24, 20, 20]),
    "1b7": dict(hidden=2048, inter=6144, layers=28, heads=16, kv_heads=8, head_dim=128,
                text_hidden=2048, mrope_section=[24, 20, 20]),
}
FULL_CP = dict(hidden=1024, inter=3072, layers=5, heads=16, kv_heads=8, head_dim=128)
POOL = 1 << 25
WINDOW = 1 << 20


def full_config(variant):
    size = L.VARIANTS[variant][1]
    dims = dict(talker=FULL_TALKER[size], cp=FULL_CP, spk=dict(shipped_minimal=True))
    return L.main_config(variant, dims)


def bf16_bits(x):
    """float32 array -> bf16 bit patterns (uint16), round to nearest even."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


class Pools:
    def __init__(self, out_dtype):
        from scipy.special import ndtri

        self.dtype = out_dtype  # "BF16" or "F32"
        self.cache = {}
        # normal quantiles of 65536 equiprobable codes, and uniform (0,1) midpoints
        q = (np.arange(65536, dtype=np.float64) + 0.5) / 65536.0
        self.q_normal = ndtri(q)
        self.q_uniform = q
        self.codes = np.random.Generator(np.random.SFC64(12345)).bit_generator.random_raw(POOL // 4).view(np.uint16)

    def get(self, rule):
        key = tuple(rule)
        if key not in self.cache:
            self.cache.clear()  # callers visit tensors grouped by rule; keep one pool in memory
            kind = rule[0]
            if kind == "normal":
                lut = rule[1] + rule[2] * self.q_normal
            elif kind == "uniform":
                lut = rule[1] + (rule[2] - rule[1]) * self.q_uniform
            else:
                lut = np.full(65536, float(rule[1]))
            lut = lut.astype(np.float32)
            if self.dtype == "BF16":
                lut = bf16_bits(lut)
            self.cache[key] = lut[self.codes]
        return self.cache[key]


def write_tensors(path, entries, dtype, tag):
    pools = Pools(dtype)
    entries = sorted(entries, key=lambda e: (tuple(map(str, e[3])), e[0]))  # group by distribution
    specs = [(name, dtype, shape) for name, _, shape, _ in entries]
    w = L.StreamingSafetensorsWriter(path, specs)
    for name, _, shape, rule in entries:
        n = int(np.prod(shape)) if shape else 1
        pool = pools.get(rule)
        rng = np.random.Generator(np.random.SFC64(zlib.crc32(f"{tag}/{name}".encode())))

        def chunks():
            left = n
            while left > 0:
                k = min(WINDOW, left)
                o = int(rng.integers(0, POOL - k + 1))
                yield pool[o:o + k]
                left -= k

        w.write(name, chunks())
    w.close()
    return w.written


def meta_entries(variant):
    import torch

    import make_tiny as T
    from qwen_tts.core.models import Qwen3TTSConfig, Qwen3TTSForConditionalGeneration

    cfg = full_config(variant)
    conf = Qwen3TTSConfig(**{k: v for k, v in cfg.items() if k not in ("architectures", "transformers_version")})
    with torch.device("meta"):
        model = Qwen3TTSForConditionalGeneration(conf)
    return cfg, T.tensor_rules(model, "full-" + variant)


def codec_entries():
    import torch

    import make_tiny as T
    from qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Config
    from qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Model

    cfg = L.SHIPPED_CODEC_CONFIG
    conf = Qwen3TTSTokenizerV2Config(**{k: v for k, v in cfg.items()
                                        if k not in ("architectures", "transformers_version", "model_type")})
    with torch.device("meta"):
        codec = Qwen3TTSTokenizerV2Model(conf)
    return cfg, T.tensor_rules(codec, "full-codec")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variant", choices=sorted(L.VARIANTS))
    ap.add_argument("--save-manifest", default=None)
    ap.add_argument("--from-manifest", default=None)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokenizer-dir", default=os.path.join(L.REPO, "tests", "fixtures", "tokenizer"))
    ap.add_argument("--codec-from", default=None, help="existing speech_tokenizer dir to symlink")
    ap.add_argument("--check-load", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="with --check-load: also run a 3-token greedy generation")
    args = ap.parse_args()
    if (args.variant is None) == (args.from_manifest is None):
        ap.error("give exactly one of --variant and --from-manifest")
    if args.from_manifest and (args.codec_from or args.check_load or args.save_manifest):
        ap.error("--from-manifest takes only --out and --tokenizer-dir")
    if args.codec_from:   # checked before anything is written: the symlinks would dangle
        cf = os.path.join(args.codec_from, "config.json")
        try:
            with open(cf) as f:
                ok = "decoder_config" in json.load(f)
        except (OSError, ValueError):
            ok = False
        if not ok:
            ap.error(f"--codec-from {args.codec_from}: {cf} is not a speech tokenizer config "
                     "(give the speech_tokenizer directory itself, e.g. MODEL/speech_tokenizer)")
    out = os.path.abspath(args.out)
    t0 = time.time()
    if os.path.isdir(out):
        shutil.rmtree(out)
    if args.from_manifest:
        with open(args.from_manifest) as f:
            man = json.load(f)
        args.variant = man["variant"]
        cfg = man["config"]
        entries = [(n, None, tuple(sh), tuple(r)) for n, sh, r in man["tensors"]]
        codec_man = (man["codec_config"], [(n, None, tuple(sh), tuple(r)) for n, sh, r in man["codec_tensors"]])
    else:
        cfg, entries = meta_entries(args.variant)
        codec_man = None
    if args.save_manifest:
        ccfg, centries = codec_entries()
        man = dict(variant=args.variant, config=cfg, codec_config=ccfg,
                   tensors=[(n, list(sh), list(r)) for n, _, sh, r in entries],
                   codec_tensors=[(n, list(sh), list(r)) for n, _, sh, r in centries])
        with open(args.save_manifest, "w") as f:
            json.dump(man, f, separators=(",", ":"))
    L.write_side_files(out, cfg, os.path.abspath(args.tokenizer_dir), link_tokenizer=False)
    nbytes = write_tensors(os.path.join(out, "model.safetensors"), entries, "BF16", "full-" + args.variant)
    nparams = sum(int(np.prod(e[2])) for e in entries)
    print(f"{args.variant}: model.safetensors {len(entries)} tensors, {nparams:,} params, {nbytes:,} data bytes "
          f"({time.time() - t0:.1f}s)")
    st = os.path.join(out, "speech_tokenizer")
    if args.codec_from:
        src = os.path.abspath(args.codec_from)
        os.makedirs(st)
        for name in ("config.json", "model.safetensors", "preprocessor_config.json"):
            os.symlink(os.path.join(src, name), os.path.join(st, name))
    else:
        ccfg, centries = codec_man if codec_man else codec_entries()
        L.write_codec_side_files(st, ccfg)
        cbytes = write_tensors(os.path.join(st, "model.safetensors"), centries, "F32", "full-codec")
        cparams = sum(int(np.prod(e[2])) for e in centries)
        print(f"  speech_tokenizer/model.safetensors {len(centries)} tensors, {cparams:,} params, {cbytes:,} bytes")
    print(f"  done in {time.time() - t0:.1f}s -> {out}")
    if args.check_load:
        import torch
        from qwen_tts import Qwen3TTSModel

        t1 = time.time()
        tts = Qwen3TTSModel.from_pretrained(out, dtype=torch.float32, attn_implementation="eager", device_map="cpu")
        n = sum(p.numel() for p in tts.model.parameters())
        print(f"  loaded via Qwen3TTSModel.from_pretrained in {time.time() - t1:.1f}s: {n:,} params (main model), "
              f"type {tts.model.tts_model_type}, size {tts.model.tts_model_size}, "
              f"speakers {len(tts.get_supported_speakers() or [])}, languages {len(tts.get_supported_languages())}")
        if args.smoke:
            t1 = time.time()
            torch.set_num_threads(max(1, os.cpu_count() or 1))
            g = dict(do_sample=False, subtalker_dosample=False, max_new_tokens=3)
            kind = tts.model.tts_model_type
            if kind == "custom_voice":
                wavs, sr = tts.generate_custom_voice(text="Hello.", speaker="vivian", language="english", **g)
            elif kind == "voice_design":
                wavs, sr = tts.generate_voice_design(text="Hello.", instruct="A calm voice.", language="english", **g)
            else:
                sr0 = 24000
                ref = (0.1 * np.sin(2 * np.pi * 220 * np.arange(sr0) / sr0)).astype(np.float32)
                wavs, sr = tts.generate_voice_clone(text="Hello.", language="english", ref_audio=(ref, sr0),
                                                    ref_text="Hi.", **g)
            print(f"  smoke generation: {len(wavs[0])} samples at {sr} Hz in {time.time() - t1:.1f}s")


if __name__ == "__main__":
    main()
