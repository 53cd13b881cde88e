#!/usr/bin/env python3
"""Write the five tiny random Qwen3-TTS models used as golden-test fixtures.

    tests/fixtures/models/{cv06,cv17,vd17,base06,base17}/   exact Hugging Face layout
    tests/fixtures/codec/                                   the tiny speech tokenizer (shared)

Every model dir holds config.json, generation_config.json, model.safetensors (BF16),
tokenizer_config.json, preprocessor_config.json, vocab.json + merges.txt (relative symlinks to
tests/fixtures/tokenizer/), and speech_tokenizer/{config.json, model.safetensors (F32),
preprocessor_config.json} whose three files are relative symlinks to tests/fixtures/codec/ (the
same codec for all five variants, like the real releases).

Recipe: spec section 13 (real ids, vocab sizes, language and speaker tables; shrunken widths and
depths; every parameter and persistent buffer re-randomized deterministically from its name;
main model rounded to bf16). Run with the reference venv:

    tools/reference/.venv/bin/python tools/reference/make_tiny.py [--root tests/fixtures] [--check-load]
"""
import argparse
import os
import shutil
import sys
import zlib

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qwen3_tts_layout as L  # noqa: E402

torch.set_num_threads(1)

SEED = 20260115

# ------------------------------------------------------------------------------------------------
# Shapes. Real ids/vocabs everywhere; widths chosen to keep tests/fixtures under its size budget:
# the text embedding [151936, text_hidden] and the 15 code-predictor tables [2048, H] + 15 heads
# [2048, C] dominate each model file.
# ------------------------------------------------------------------------------------------------
TEXT_HIDDEN = 4

# 0.6B-like: talker hidden == CP hidden (no small_to_mtp_projection); q_proj output (4*8=32) != hidden
TALKER_06 = dict(hidden=16, inter=48, layers=2, heads=4, kv_heads=2, head_dim=8,
                 text_hidden=TEXT_HIDDEN, mrope_section=[2, 1, 1])
CP_06 = dict(hidden=16, inter=48, layers=2, heads=4, kv_heads=2, head_dim=8)
# 1.7B-like: CP hidden (16) != talker hidden (24) -> small_to_mtp_projection Linear 24->16 + bias;
# q_proj output 4*16=64 != hidden
TALKER_17 = dict(hidden=24, inter=72, layers=2, heads=4, kv_heads=2, head_dim=16,
                 text_hidden=TEXT_HIDDEN, mrope_section=[4, 2, 2])
CP_17 = dict(hidden=16, inter=48, layers=2, heads=4, kv_heads=2, head_dim=8)
SPK = dict(enc_channels=[16, 16, 16, 16, 48], enc_attention_channels=8, enc_res2net_scale=8,
           enc_se_channels=8)

DIMS = {
    "cv06": dict(talker=TALKER_06, cp=CP_06),
    "cv17": dict(talker=TALKER_17, cp=CP_17),
    "vd17": dict(talker=TALKER_17, cp=CP_17),
    "base06": dict(talker=TALKER_06, cp=CP_06, spk=SPK),
    "base17": dict(talker=TALKER_17, cp=CP_17, spk=SPK),
}

CODEC_DIMS = dict(
    decoder=dict(codebook_dim=8, latent_dim=32, decoder_dim=32, hidden_size=32, head_dim=16,
                 num_attention_heads=4, num_key_value_heads=4, intermediate_size=64,
                 num_hidden_layers=2, sliding_window=8),
    encoder=dict(hidden_size=32, num_filters=4, num_attention_heads=4, num_key_value_heads=4,
                 head_dim=8, intermediate_size=64, num_hidden_layers=2, codebook_dim=4,
                 vector_quantization_hidden_dimension=4, upsample_groups=32),
)

# Extra gains on top of the N(0, 1/fan_in) rule (fnmatch patterns on the tensor name). Without them
# the residual units of the codec decoder grow the signal ~50x and the waveform sits on the +-1
# clamp; with them the tiny codec produces a waveform with std ~0.2 and only rare clamping.
GAINS = {
    "codec": {
        "decoder.decoder.*.block.*.conv2.conv.weight": 0.3,
        "decoder.decoder.6.conv.weight": 0.1,
    },
}

# EOS reachability: codec_head.weight[2150] of cv06 is multiplied by this factor (before bf16
# rounding) so that greedy decoding can pick EOS. Tuned together with the cv06 golden cases
# (see make_goldens.py: case "eos_stop" stops by EOS, the others hit max_new_tokens).
EOS_ROW_SCALE = {"cv06": 1.1}


# ------------------------------------------------------------------------------------------------
def _rng(tag, name):
    return np.random.default_rng([SEED, zlib.crc32(f"{tag}/{name}".encode("utf-8"))])


def _normal(rng, shape, std, mean=0.0):
    return torch.from_numpy((rng.standard_normal(size=shape) * std + mean).astype(np.float32))


def _uniform(rng, shape, lo, hi):
    return torch.from_numpy(rng.uniform(lo, hi, size=shape).astype(np.float32))


def rule_for(mod, pname, shape, full):
    """Distribution of one tensor: ("normal", mean, std) | ("uniform", lo, hi) | ("const", value)."""
    import torch.nn as nn

    cls = type(mod).__name__
    if isinstance(mod, nn.Linear):
        return ("normal", 0.0, 1.0 / np.sqrt(shape[1])) if pname == "weight" else ("normal", 0.0, 0.02)
    if isinstance(mod, nn.ConvTranspose1d):
        if pname == "weight":  # [in, out/groups, k]
            return ("normal", 0.0, 1.0 / np.sqrt(shape[0] * shape[2] / mod.stride[0]))
        return ("normal", 0.0, 0.02)
    if isinstance(mod, nn.Conv1d):
        if pname == "weight":  # [out, in/groups, k]
            return ("normal", 0.0, 1.0 / np.sqrt(shape[1] * shape[2]))
        return ("normal", 0.0, 0.02)
    if isinstance(mod, nn.Embedding):
        return ("normal", 0.0, 1.0)
    if isinstance(mod, nn.LayerNorm):
        return ("normal", 1.0, 0.1) if pname == "weight" else ("normal", 0.0, 0.02)
    if "RMSNorm" in cls:
        return ("normal", 1.0, 0.1)
    if cls == "SnakeBeta":
        return ("normal", 0.0, 0.1)
    if "LayerScale" in cls:
        return ("uniform", 0.05, 0.2)
    if "ConvNeXtBlock" in cls and pname == "gamma":
        return ("normal", 0.0, 0.1)
    if cls in ("EuclideanCodebook", "MimiEuclideanCodebook"):
        if pname in ("embedding_sum", "embed_sum"):
            return ("normal", 0.0, 1.0)
        if pname == "cluster_usage":
            return ("uniform", 0.5, 2.0)
        if pname == "initialized":
            return ("const", 1.0)
    raise RuntimeError(f"no randomization rule for {full} ({cls})")


def tensor_rules(module_root, tag):
    """[(name, module, shape, rule)] for every persistent tensor (parameters and buffers) of
    module_root, gains of GAINS[tag] folded into the rule."""
    import fnmatch

    gains = GAINS.get(tag, {})
    persistent = set(module_root.state_dict().keys())
    out = []
    for mname, mod in module_root.named_modules():
        items = list(mod.named_parameters(recurse=False)) + list(mod.named_buffers(recurse=False))
        for pname, p in items:
            full = f"{mname}.{pname}" if mname else pname
            if full not in persistent:
                continue  # non-persistent buffers (inv_freq, conv strides) are not in the files
            shape = tuple(p.shape)
            rule = rule_for(mod, pname, shape, full)
            for pat, g in gains.items():
                if fnmatch.fnmatchcase(full, pat):
                    assert rule[0] == "normal"
                    rule = ("normal", rule[1] * g, rule[2] * g)
            out.append((full, p, shape, rule))
    missing = persistent - {x[0] for x in out}
    if missing:
        raise RuntimeError(f"tensors without a rule: {sorted(missing)[:10]}")
    return out


def randomize(module_root, tag):
    """Overwrite every parameter and persistent buffer of module_root deterministically: numpy
    PCG64 seeded by (SEED, crc32(tag/name)), so values do not depend on iteration order."""
    for full, p, shape, rule in tensor_rules(module_root, tag):
        rng = _rng(tag, full)
        if rule[0] == "normal":
            v = _normal(rng, shape, rule[2], rule[1])
        elif rule[0] == "uniform":
            v = _uniform(rng, shape, rule[1], rule[2])
        else:
            v = torch.full(shape, float(rule[1]))
        with torch.no_grad():
            p.copy_(v.to(p.dtype))
    # Mimi caches the normalized codebook on first use; make sure no stale cache survives
    for mod in module_root.modules():
        if hasattr(mod, "_embed"):
            mod._embed = None


def build_main_model(variant):
    from qwen_tts.core.models import Qwen3TTSConfig, Qwen3TTSForConditionalGeneration

    cfg = L.main_config(variant, DIMS[variant])
    conf = Qwen3TTSConfig(**{k: v for k, v in cfg.items() if k not in ("architectures", "transformers_version")})
    conf._attn_implementation = "eager"
    conf.talker_config._attn_implementation = "eager"
    conf.talker_config.code_predictor_config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = Qwen3TTSForConditionalGeneration(conf).eval()
    randomize(model, variant)
    with torch.no_grad():
        if variant in EOS_ROW_SCALE:
            model.talker.codec_head.weight[2150] *= EOS_ROW_SCALE[variant]
        for p in model.parameters():  # round to bf16 so file values == fp32 reference values
            p.copy_(p.to(torch.bfloat16).to(torch.float32))
    return cfg, model


def build_codec():
    from qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Config
    from qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Model

    cfg = L.codec_config(CODEC_DIMS)
    conf = Qwen3TTSTokenizerV2Config(**{k: v for k, v in cfg.items() if k not in ("architectures", "transformers_version", "model_type")})
    torch.manual_seed(0)
    codec = Qwen3TTSTokenizerV2Model(conf).eval()
    randomize(codec, "codec")
    return cfg, codec


def save_safetensors(state, path, dtype):
    from safetensors.torch import save_file

    out = {k: v.detach().to(dtype).contiguous().clone() for k, v in state.items()}
    save_file(out, path, metadata={"format": "pt"})
    os.chmod(path, 0o644)


def write_codec(root):
    cfg, codec = build_codec()
    cdir = os.path.join(root, "codec")
    if os.path.isdir(cdir):
        shutil.rmtree(cdir)
    L.write_codec_side_files(cdir, cfg)
    save_safetensors(codec.state_dict(), os.path.join(cdir, "model.safetensors"), torch.float32)
    return cdir


def write_model(root, variant, codec_dir):
    cfg, model = build_main_model(variant)
    out = os.path.join(root, "models", variant)
    if os.path.isdir(out):
        shutil.rmtree(out)
    L.write_side_files(out, cfg, os.path.join(root, "tokenizer"), link_tokenizer=True)
    save_safetensors(model.state_dict(), os.path.join(out, "model.safetensors"), torch.bfloat16)
    st = os.path.join(out, "speech_tokenizer")
    os.makedirs(st)
    for name in ("config.json", "model.safetensors", "preprocessor_config.json"):
        os.symlink(os.path.relpath(os.path.join(codec_dir, name), st), os.path.join(st, name))
    return out


def check_load(model_dir):
    from qwen_tts import Qwen3TTSModel

    tts = Qwen3TTSModel.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager",
                                        device_map="cpu")
    m = tts.model
    assert m.dtype == torch.float32
    # the loaded weights must equal the file contents exactly
    from safetensors.torch import load_file

    sd = load_file(os.path.join(model_dir, "model.safetensors"))
    msd = m.state_dict()
    keys = [k for k in msd if not k.startswith("speech_tokenizer")]
    assert set(keys) == set(sd.keys()), (set(keys) ^ set(sd.keys()))
    for k in keys:
        assert torch.equal(msd[k], sd[k].float()), k
    csd = load_file(os.path.join(model_dir, "speech_tokenizer", "model.safetensors"))
    tsd = m.speech_tokenizer.model.state_dict()
    assert set(csd.keys()) == set(tsd.keys())
    for k in csd:
        assert torch.equal(tsd[k], csd[k]), k
    return tts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.path.join(L.REPO, "tests", "fixtures"))
    ap.add_argument("--variants", default=",".join(L.VARIANTS))
    ap.add_argument("--check-load", action="store_true",
                    help="reload each model through Qwen3TTSModel.from_pretrained and compare weights")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    tok = os.path.join(root, "tokenizer")
    if not os.path.isfile(os.path.join(tok, "vocab.json")):
        raise SystemExit(f"{tok}/vocab.json missing: copy the real tokenizer files there first")
    codec_dir = write_codec(root)
    print(f"codec -> {codec_dir}")
    for v in args.variants.split(","):
        out = write_model(root, v, codec_dir)
        size = os.path.getsize(os.path.join(out, "model.safetensors"))
        print(f"{v} -> {out} (model.safetensors {size} bytes)")
        if args.check_load:
            check_load(out)
            print(f"  {v}: loads via Qwen3TTSModel.from_pretrained, weights identical")


if __name__ == "__main__":
    main()
