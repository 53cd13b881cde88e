"""Shared helpers for the reference harness: Hugging Face directory layout of Qwen3-TTS models.

Used by make_tiny.py (tiny random models committed under tests/fixtures/models) and make_full.py
(full-size random models, never committed). Nothing here imports torch, so make_full.py stays light.

Layout written (spec section 3.1):
    config.json, generation_config.json, model.safetensors, vocab.json, merges.txt,
    tokenizer_config.json, preprocessor_config.json,
    speech_tokenizer/{config.json, model.safetensors, preprocessor_config.json}
"""
import copy
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
TEMPLATES = os.path.join(HERE, "templates")

# Shipped 0.6B-CustomVoice config.json and speech_tokenizer/config.json (copied verbatim from
# shared/models); every variant is derived from these so the key layout matches the shipped files.
with open(os.path.join(TEMPLATES, "config_0.6b_customvoice.json"), encoding="utf-8") as _f:
    SHIPPED_CONFIG = json.load(_f)
with open(os.path.join(TEMPLATES, "speech_tokenizer_config.json"), encoding="utf-8") as _f:
    SHIPPED_CODEC_CONFIG = json.load(_f)

# generation_config.json: exactly the 10-key file of the shipped repos (spec 3.1), key order and
# 2-space indentation as shipped (245 bytes, no trailing newline).
GENERATION_CONFIG = {
    "do_sample": True,
    "repetition_penalty": 1.05,
    "temperature": 0.9,
    "top_p": 1.0,
    "top_k": 50,
    "subtalker_dosample": True,
    "subtalker_temperature": 0.9,
    "subtalker_top_p": 1.0,
    "subtalker_top_k": 50,
    "max_new_tokens": 8192,
}

# Processor config at the model root (spec 3.1).
PROCESSOR_CONFIG = {
    "padding_side": "left",
    "padding_value": 0.0,
    "processor_class": "Qwen3TTSProcessor",
    "return_attention_mask": True,
}

# speech_tokenizer/preprocessor_config.json (spec 3.1), as EncodecFeatureExtractor.save_pretrained
# writes it (sorted keys, indent 2).
CODEC_PREPROCESSOR_CONFIG = {
    "chunk_length_s": None,
    "feature_extractor_type": "EncodecFeatureExtractor",
    "feature_size": 1,
    "overlap": None,
    "padding_side": "right",
    "padding_value": 0.0,
    "return_attention_mask": True,
    "sampling_rate": 24000,
}

DIALECT_KEYS = ("beijing_dialect", "sichuan_dialect")

VARIANTS = {
    # name: (tts_model_type, tts_model_size)
    "cv06": ("custom_voice", "0b6"),
    "cv17": ("custom_voice", "1b7"),
    "vd17": ("voice_design", "1b7"),
    "base06": ("base", "0b6"),
    "base17": ("base", "1b7"),
}


def write_json(path, obj, indent=2, trailing_newline=True, sort_keys=False):
    s = json.dumps(obj, indent=indent, ensure_ascii=False, sort_keys=sort_keys)
    with open(path, "w", encoding="utf-8") as f:
        f.write(s)
        if trailing_newline:
            f.write("\n")


def main_config(variant, dims):
    """config.json for a variant in the shipped layout.

    dims: talker {hidden, inter, layers, heads, kv_heads, head_dim, text_hidden, mrope_section},
          cp {hidden, inter, layers, heads, kv_heads, head_dim},
          spk (Base only) {enc_channels, enc_attention_channels, enc_res2net_scale, enc_se_channels}
    """
    tts_type, tts_size = VARIANTS[variant]
    cfg = copy.deepcopy(SHIPPED_CONFIG)
    cfg["tts_model_size"] = tts_size
    cfg["tts_model_type"] = tts_type
    t = dims["talker"]
    tc = cfg["talker_config"]
    tc["hidden_size"] = t["hidden"]
    tc["intermediate_size"] = t["inter"]
    tc["num_hidden_layers"] = t["layers"]
    tc["num_attention_heads"] = t["heads"]
    tc["num_key_value_heads"] = t["kv_heads"]
    tc["head_dim"] = t["head_dim"]
    tc["text_hidden_size"] = t["text_hidden"]
    tc["rope_scaling"]["mrope_section"] = list(t["mrope_section"])
    assert sum(t["mrope_section"]) == t["head_dim"] // 2
    c = dims["cp"]
    cp = tc["code_predictor_config"]
    cp["hidden_size"] = c["hidden"]
    cp["intermediate_size"] = c["inter"]
    cp["num_hidden_layers"] = c["layers"]
    cp["num_attention_heads"] = c["heads"]
    cp["num_key_value_heads"] = c["kv_heads"]
    cp["head_dim"] = c["head_dim"]
    cp["layer_types"] = ["full_attention"] * c["layers"]
    if tts_type != "custom_voice":
        # VoiceDesign / Base: no preset speakers, 10 languages (no dialect ids) [spec 2.1]
        tc["spk_id"] = {}
        tc["spk_is_dialect"] = {}
        tc["codec_language_id"] = {k: v for k, v in tc["codec_language_id"].items() if k not in DIALECT_KEYS}
    if tts_type == "base":
        s = dims["spk"]
        if s.get("shipped_minimal"):
            # the shipped Base configs carry only these two keys; the rest are class defaults
            spk = {"enc_dim": t["hidden"], "sample_rate": 24000}
        else:
            # all nine fields of Qwen3TTSSpeakerEncoderConfig (spec 13 step 6)
            spk = {
                "mel_dim": 128,
                "enc_dim": t["hidden"],
                "enc_channels": list(s["enc_channels"]),
                "enc_kernel_sizes": [5, 3, 3, 3, 1],
                "enc_dilations": [1, 2, 3, 4, 1],
                "enc_attention_channels": s["enc_attention_channels"],
                "enc_res2net_scale": s["enc_res2net_scale"],
                "enc_se_channels": s["enc_se_channels"],
                "sample_rate": 24000,
            }
        # keep the shipped key order, insert the section before talker_config
        out = {}
        for k, v in cfg.items():
            if k == "talker_config":
                out["speaker_encoder_config"] = spk
            out[k] = v
        cfg = out
    return cfg


def codec_config(dims):
    """speech_tokenizer/config.json in the shipped layout with the given decoder/encoder sizes."""
    cfg = copy.deepcopy(SHIPPED_CODEC_CONFIG)
    cfg["decoder_config"].update(dims["decoder"])
    cfg["encoder_config"].update(dims["encoder"])
    return cfg


def write_tokenizer_files(out_dir, tokenizer_dir, link=True):
    """vocab.json / merges.txt as relative symlinks (or copies), tokenizer_config.json copied."""
    for name in ("vocab.json", "merges.txt"):
        dst = os.path.join(out_dir, name)
        if os.path.lexists(dst):
            os.remove(dst)
        src = os.path.join(tokenizer_dir, name)
        if link:
            os.symlink(os.path.relpath(src, out_dir), dst)
        else:
            with open(src, "rb") as fi, open(dst, "wb") as fo:
                fo.write(fi.read())
    with open(os.path.join(tokenizer_dir, "tokenizer_config.json"), "rb") as fi:
        data = fi.read()
    with open(os.path.join(out_dir, "tokenizer_config.json"), "wb") as fo:
        fo.write(data)


def write_side_files(out_dir, cfg, tokenizer_dir, link_tokenizer=True):
    os.makedirs(out_dir, exist_ok=True)
    write_json(os.path.join(out_dir, "config.json"), cfg)
    write_json(os.path.join(out_dir, "generation_config.json"), GENERATION_CONFIG, trailing_newline=False)
    write_json(os.path.join(out_dir, "preprocessor_config.json"), PROCESSOR_CONFIG)
    write_tokenizer_files(out_dir, tokenizer_dir, link=link_tokenizer)


def write_codec_side_files(st_dir, codec_cfg):
    os.makedirs(st_dir, exist_ok=True)
    write_json(os.path.join(st_dir, "config.json"), codec_cfg)
    write_json(os.path.join(st_dir, "preprocessor_config.json"), CODEC_PREPROCESSOR_CONFIG)


# ---------------------------------------------------------------------------------------------
# Minimal streaming safetensors writer (used by make_full.py for multi-GB files; the tiny models
# use safetensors.torch.save_file). Header layout follows the safetensors spec: 8-byte LE header
# length, JSON header {name: {dtype, shape, data_offsets}} + "__metadata__", padded with spaces
# to a multiple of 8, then the raw little-endian tensor bytes in header order.
# ---------------------------------------------------------------------------------------------
DTYPE_SIZE = {"BF16": 2, "F16": 2, "F32": 4, "I64": 8}


class StreamingSafetensorsWriter:
    def __init__(self, path, specs, metadata=None):
        """specs: list of (name, dtype, shape) in the order the data will be written."""
        self.path = path
        self.specs = list(specs)
        header = {}
        off = 0
        for name, dt, shape in self.specs:
            n = DTYPE_SIZE[dt]
            for d in shape:
                n *= d
            header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + n]}
            off += n
        self.total = off
        meta = {"__metadata__": metadata or {"format": "pt"}}
        meta.update(header)
        hb = json.dumps(meta, separators=(",", ":")).encode("utf-8")
        hb += b" " * ((8 - len(hb) % 8) % 8)
        self.f = open(path, "wb")
        self.f.write(struct.pack("<Q", len(hb)))
        self.f.write(hb)
        self.index = 0
        self.written = 0
        self.expect = {name: header[name]["data_offsets"][1] - header[name]["data_offsets"][0]
                       for name, _, _ in self.specs}

    def write(self, name, data_bytes_iter):
        exp_name = self.specs[self.index][0]
        assert name == exp_name, (name, exp_name)
        n = 0
        for chunk in data_bytes_iter:
            mv = memoryview(chunk).cast("B")
            self.f.write(mv)
            n += len(mv)
        assert n == self.expect[name], (name, n, self.expect[name])
        self.index += 1
        self.written += n

    def close(self):
        assert self.index == len(self.specs), "not all tensors written"
        self.f.close()
