#!/usr/bin/env python3
"""Golden outputs of the official Qwen3-TTS reference (qwen-tts 0.1.1, transformers 4.57.3) on the
tiny fixture models written by make_tiny.py.

Writes, under <root> (default tests/fixtures):
    audio/*.wav                               synthetic reference audio for voice clone
    golden/<model>/<case>.json + .safetensors one end-to-end greedy run through the public wrapper
    golden/codec_chunked.safetensors          direct chunked decode of 340 random frames
    golden/sampler.safetensors + .json        HF logits-processor chain on random logits
    golden/tokenizer_corpus.jsonl             Qwen2 BPE ids of a multilingual corpus

Everything runs on CPU, fp32, eager attention, one thread, greedy (do_sample=False,
subtalker_dosample=False) and is byte-for-byte reproducible. See tests/fixtures/README.md.

    tools/reference/.venv/bin/python tools/reference/make_goldens.py [--root DIR] [--parts ...]
"""
import argparse
import io
import json
import os
import shutil
import sys
import wave

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qwen3_tts_layout as L  # noqa: E402

torch.set_num_threads(1)
torch.set_num_interop_threads(1)

GREEDY = dict(do_sample=False, subtalker_dosample=False)

QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
MISTRAL_FIXED_REGEX = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
                       r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|"
                       r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# ------------------------------------------------------------------------------------------------
# Reference audio (synthesized, deterministic): tones + noise + amplitude envelope.
# ------------------------------------------------------------------------------------------------
AUDIO = {
    # name: (sample_rate, channels, seconds, seed)
    "ref_24k_mono.wav": (24000, 1, 2.0, 1),
    "ref_16k_mono.wav": (16000, 1, 1.6, 2),
    "ref_44k1_stereo.wav": (44100, 2, 1.2, 3),
}


def synth_audio(sr, channels, seconds, seed):
    n = int(round(sr * seconds))
    t = np.arange(n, dtype=np.float64) / sr
    rng = np.random.default_rng([7, seed])
    chans = []
    for c in range(channels):
        f0 = 140.0 + 40.0 * seed + 15.0 * c
        vib = 1.0 + 0.02 * np.sin(2 * np.pi * 5.0 * t)
        phase = 2 * np.pi * np.cumsum(f0 * vib) / sr
        x = np.zeros(n)
        for h, a in ((1, 0.5), (2, 0.25), (3, 0.15), (5, 0.08)):
            x += a * np.sin(h * phase + 0.3 * h * (c + 1))
        x += 0.15 * np.sin(2 * np.pi * (900.0 + 100 * seed) * t)          # a formant-ish tone
        x += 0.08 * rng.standard_normal(n)                                  # noise
        env = 0.55 + 0.45 * np.sin(2 * np.pi * 3.7 * t + seed) ** 2        # syllable-rate envelope
        fade = np.minimum(1.0, np.minimum(t, t[-1] - t) / 0.05)             # 50 ms fades
        chans.append(0.6 * x * env * fade)
    y = np.stack(chans, axis=1)
    return np.clip(np.round(y * 32767.0), -32768, 32767).astype("<i2")


def write_wav(path, pcm16, sr):
    with wave.open(path, "wb") as w:
        w.setnchannels(pcm16.shape[1])
        w.setsampwidth(2)
        w.setframerate(sr)
        w.writeframes(pcm16.tobytes())


def make_audio(root):
    d = os.path.join(root, "audio")
    os.makedirs(d, exist_ok=True)
    for name, (sr, ch, sec, seed) in AUDIO.items():
        write_wav(os.path.join(d, name), synth_audio(sr, ch, sec, seed), sr)


# ------------------------------------------------------------------------------------------------
# Cases
# ------------------------------------------------------------------------------------------------
LONG_TEXT = (
    "Once upon a time, in a small village between the mountains and the sea, there lived an old "
    "clockmaker who repaired every clock that people brought to him. He worked from sunrise to "
    "sunset, humming quiet songs, and he never asked for more than a loaf of bread or a basket of "
    "apples. One winter evening a young traveller knocked on his door, carrying a broken pocket "
    "watch that had belonged to her grandmother. The clockmaker opened the case, looked at the tiny "
    "gears for a long while, and smiled: this watch, he said, was made by his own teacher, fifty "
    "years ago. He promised to fix it by the next full moon, and the traveller decided to stay in "
    "the village until then, helping at the bakery."
)

CASES = [
    # ---- cv06: 0.6B-CustomVoice-like --------------------------------------------------------------
    dict(model="cv06", case="en_vivian_ns", mode="custom_voice", primary=True, codec_dump=True,
         text="Hello! This is a short test of the speech engine.", speaker="vivian",
         language="english", non_streaming_mode=True, max_new_tokens=16),
    dict(model="cv06", case="en_vivian_stream", mode="custom_voice",
         text="Hello! This is a short test of the speech engine.", speaker="vivian",
         language="english", non_streaming_mode=False, max_new_tokens=16),
    dict(model="cv06", case="zh_eric_dialect", mode="custom_voice",
         text="今天天气很好，我们去公园散步吧。", speaker="eric", language="chinese",
         non_streaming_mode=True, max_new_tokens=12),
    dict(model="cv06", case="zh_dylan_auto", mode="custom_voice",
         text="你好，北京欢迎你！", speaker="Dylan", language="auto",
         non_streaming_mode=False, max_new_tokens=12),
    dict(model="cv06", case="ja_ono_anna_auto", mode="custom_voice",
         text="こんにちは、私の名前はアンナです。", speaker="ono_anna", language="Auto",
         non_streaming_mode=True, max_new_tokens=12),
    dict(model="cv06", case="instruct_dropped", mode="custom_voice",
         text="Please read this sentence calmly.", speaker="serena", language="english",
         instruct="Speak very slowly, in a low whisper.", non_streaming_mode=True, max_new_tokens=12),
    dict(model="cv06", case="eos_stop", mode="custom_voice",
         text="Привет! Как дела?", speaker="uncle_fu", language="russian",
         non_streaming_mode=True, max_new_tokens=30, expect_eos=True),
    dict(model="cv06", case="long_stream", mode="custom_voice",
         text=LONG_TEXT, speaker="aiden", language="english",
         non_streaming_mode=False, max_new_tokens=40),
    dict(model="cv06", case="ko_sohee_stream", mode="custom_voice",
         text="안녕하세요, 만나서 반갑습니다.", speaker="sohee", language="korean",
         non_streaming_mode=False, max_new_tokens=12),
    dict(model="cv06", case="de_ryan_ns", mode="custom_voice",
         text="Guten Morgen! Wie spät ist es? Über 3 Brücken musst du gehen.", speaker="ryan",
         language="german", non_streaming_mode=True, max_new_tokens=12),
    dict(model="cv06", case="fr_serena_stream", mode="custom_voice",
         text="Bonjour à tous, c'est une journée magnifique.", speaker="serena", language="french",
         non_streaming_mode=False, max_new_tokens=12),
    # ---- cv17: 1.7B-CustomVoice-like (instruct honoured) -------------------------------------------
    dict(model="cv17", case="instruct_ns", mode="custom_voice", primary=True,
         text="The weather is lovely today, let's go for a walk.", speaker="ryan", language="english",
         instruct="Speak happily and a little faster than usual.", non_streaming_mode=True,
         max_new_tokens=12),
    dict(model="cv17", case="instruct_stream", mode="custom_voice",
         text="¿Dónde está la estación de tren más cercana?", speaker="aiden", language="spanish",
         instruct="用愤怒的语气说", non_streaming_mode=False, max_new_tokens=12),
    dict(model="cv17", case="plain_ns", mode="custom_voice",
         text="Questa è una prova senza istruzioni.", speaker="uncle_fu", language="italian",
         non_streaming_mode=True, max_new_tokens=12),
    dict(model="cv17", case="plain_stream_dialect", mode="custom_voice",
         text="我们今天晚上吃火锅吧。", speaker="eric", language="auto",
         non_streaming_mode=False, max_new_tokens=12),
    # ---- vd17: 1.7B-VoiceDesign-like --------------------------------------------------------------
    dict(model="vd17", case="design_ns", mode="voice_design", primary=True,
         text="Welcome to the museum of natural history.", language="english",
         instruct="A deep, calm male voice, middle-aged, speaking slowly with warmth.",
         non_streaming_mode=True, max_new_tokens=12),
    dict(model="vd17", case="design_stream", mode="voice_design",
         text="Olá! Tudo bem com você?", language="portuguese",
         instruct="体现撒娇稚嫩的萝莉女声，音调偏高且起伏明显。", non_streaming_mode=False,
         max_new_tokens=12),
    dict(model="vd17", case="empty_instruct", mode="voice_design",
         text="No description is given for this voice.", language="auto", instruct="",
         non_streaming_mode=True, max_new_tokens=12),
    # ---- base06 / base17: voice clone ---------------------------------------------------------------
    dict(model="base06", case="xvec_ns_24k", mode="voice_clone", primary=True,
         text="This sentence is spoken with a cloned voice.", language="english",
         ref_audio="audio/ref_24k_mono.wav", x_vector_only_mode=True, non_streaming_mode=True,
         max_new_tokens=12),
    dict(model="base06", case="xvec_stream_16k", mode="voice_clone",
         text="Ein kurzer Satz auf Deutsch.", language="german",
         ref_audio="audio/ref_16k_mono.wav", x_vector_only_mode=True, non_streaming_mode=False,
         max_new_tokens=12),
    dict(model="base06", case="icl_stream_44k_pad", mode="voice_clone",
         text="Short.", language="english", ref_audio="audio/ref_44k1_stereo.wav",
         ref_text="Hi there.", x_vector_only_mode=False, non_streaming_mode=False,
         max_new_tokens=12),
    dict(model="base06", case="icl_ns_24k", mode="voice_clone",
         text="And now the cloned voice reads a new line.", language="english",
         ref_audio="audio/ref_24k_mono.wav", ref_text="This is the reference recording.",
         x_vector_only_mode=False, non_streaming_mode=True, max_new_tokens=12),
    dict(model="base17", case="xvec_stream_44k", mode="voice_clone", primary=True,
         text="La voix est clonée à partir d'un enregistrement.", language="french",
         ref_audio="audio/ref_44k1_stereo.wav", x_vector_only_mode=True, non_streaming_mode=False,
         max_new_tokens=12),
    dict(model="base17", case="icl_stream_24k_trailing", mode="voice_clone",
         text=("This target sentence is deliberately long so that the text side of the in-context "
               "prompt is longer than the reference codes and the remaining text tokens trail into "
               "the decode steps one by one."),
         language="english", ref_audio="audio/ref_24k_mono.wav",
         ref_text="The reference speaker says a few words here.",
         x_vector_only_mode=False, non_streaming_mode=False, max_new_tokens=12),
    dict(model="base17", case="icl_ns_16k", mode="voice_clone",
         text="你好，这是一个声音克隆的例子。", language="chinese",
         ref_audio="audio/ref_16k_mono.wav", ref_text="参考音频的文本。",
         x_vector_only_mode=False, non_streaming_mode=True, max_new_tokens=12),
    dict(model="base17", case="xvec_ns_24k_auto", mode="voice_clone",
         text="Language detection is left on auto here.", language="auto",
         ref_audio="audio/ref_24k_mono.wav", x_vector_only_mode=True, non_streaming_mode=True,
         max_new_tokens=12),
]

# Greedy decisions closer than this (top1 - top2 of the processed scores) would be fragile for an
# independent fp32 implementation (fp32 noise on these logits is ~2e-6, see float64_crosscheck);
# the case list is chosen so that no decision is that close.
MIN_MARGIN = 5e-5

CP_FRAMES_PRIMARY = 4   # cp_logits frames stored for the primary case of each model
CP_FRAMES_OTHER = 1     # ... and for every other case (size budget)


# ------------------------------------------------------------------------------------------------
# Loading and recording
# ------------------------------------------------------------------------------------------------
def load_model(model_dir, dtype=torch.float32):
    from qwen_tts import Qwen3TTSModel

    return Qwen3TTSModel.from_pretrained(model_dir, dtype=dtype, attn_implementation="eager",
                                         device_map="cpu")


def pre_tokenizer_info(tokenizer):
    pt = json.loads(tokenizer.backend_tokenizer.to_str())["pre_tokenizer"]
    regex = None
    if pt and pt.get("type") == "Sequence":
        first = pt["pretokenizers"][0]
        if first.get("type") == "Split":
            regex = first["pattern"].get("Regex")
    if regex == QWEN2_REGEX:
        kind = "qwen2"
    elif regex == MISTRAL_FIXED_REGEX:
        kind = "mistral_fixed"
    else:
        kind = "other"
    return {"regex": regex, "kind": kind,
            "fix_mistral_regex_attr": getattr(tokenizer, "fix_mistral_regex", None)}


class Recorder:
    """Wraps the reference objects of one loaded model to capture intermediate tensors."""

    def __init__(self, tts):
        self.tts = tts
        self.rec = None
        m = tts.model
        self._wrap(m, "generate", self._model_generate)
        self._wrap(m.talker, "generate", self._talker_generate)
        self._wrap(m.talker.code_predictor, "generate", self._cp_generate)
        self._wrap(m, "extract_speaker_embedding", self._extract_spk)
        st = m.speech_tokenizer
        self._wrap(st, "decode", self._st_decode)
        self._wrap(st, "encode", self._st_encode)
        self._wrap(st, "_normalize_audio_inputs", self._st_norm_audio)
        m.talker.codec_head.register_forward_hook(self._codec_head_hook)
        if m.speaker_encoder is not None:
            m.speaker_encoder.register_forward_pre_hook(self._spk_pre_hook)
        dec = st.model.decoder
        self._wrap(dec.quantizer, "decode", self._quantizer_decode)
        dec.pre_conv.register_forward_hook(self._mk_hook("codec.pre_conv"))
        dec.pre_transformer.register_forward_hook(self._mk_hook("codec.pre_transformer", transformer=True))
        for i, up in enumerate(dec.upsample):
            up[0].register_forward_hook(self._mk_hook(f"codec.upsample.{i}.0"))
            up[1].register_forward_hook(self._mk_hook(f"codec.upsample.{i}"))
        for i, d in enumerate(dec.decoder):
            d.register_forward_hook(self._mk_hook(f"codec.decoder.{i}"))

    @staticmethod
    def _wrap(obj, name, fn):
        orig = getattr(obj, name)

        def wrapped(*a, **k):
            return fn(orig, *a, **k)

        setattr(obj, name, wrapped)

    def start(self):
        self.rec = dict(codec_head_in=[], codec_head_out=[], cp_logits=[], cp_seqs=[], decode_calls=0,
                        codec={}, quantizer_calls=0, spk_audio=[], spk_out=[], mels=[], enc_codes=[],
                        enc_wavs=[])
        return self.rec

    def stop(self):
        r, self.rec = self.rec, None
        return r

    # -- wrappers ------------------------------------------------------------------------------------
    def _model_generate(self, orig, *a, **k):
        r = self.rec
        if r is not None:
            r["input_ids"] = [t.clone() for t in k["input_ids"]]
            r["instruct_ids"] = k.get("instruct_ids")
            r["ref_ids"] = k.get("ref_ids")
            r["voice_clone_prompt"] = k.get("voice_clone_prompt")
            r["languages"] = k.get("languages")
            r["speakers"] = k.get("speakers")
            r["gen_kwargs"] = {kk: vv for kk, vv in k.items()
                               if kk not in ("input_ids", "instruct_ids", "ref_ids", "voice_clone_prompt")}
        out = orig(*a, **k)
        if r is not None:
            r["codes_list"] = [c.clone() for c in out[0]]
        return out

    def _talker_generate(self, orig, *a, **k):
        r = self.rec
        if r is not None:
            r["prefill_embeds"] = k["inputs_embeds"].detach().clone()
            r["trailing_text"] = k["trailing_text_hidden"].detach().clone()
            r["talker_attention_mask"] = k["attention_mask"].clone()
            r["talker_gen_kwargs"] = {kk: vv for kk, vv in k.items()
                                      if kk not in ("inputs_embeds", "trailing_text_hidden", "tts_pad_embed",
                                                    "attention_mask")}
            k = dict(k, output_scores=True, output_logits=True)
        out = orig(*a, **k)
        if r is not None:
            r["talker_sequences"] = out.sequences.clone()
            r["talker_scores"] = [s.clone() for s in out.scores]
            r["talker_raw_logits"] = [s.clone() for s in out.logits]
        return out

    def _cp_generate(self, orig, *a, **k):
        r = self.rec
        if r is not None:
            k = dict(k, output_logits=True)
        out = orig(*a, **k)
        if r is not None:
            r["cp_logits"].append(torch.stack([x[0] for x in out.logits], 0).clone())
            r["cp_seqs"].append(out.sequences[0].clone())
        return out

    def _codec_head_hook(self, mod, inp, out):
        r = self.rec
        if r is not None:
            r["codec_head_in"].append(inp[0][0, -1].detach().clone())
            r["codec_head_out"].append(out[0, -1].detach().clone())

    def _extract_spk(self, orig, audio, sr):
        out = orig(audio, sr)
        r = self.rec
        if r is not None:
            r["spk_audio"].append(np.array(audio, dtype=np.float32, copy=True))
            r["spk_out"].append(out.detach().clone())
        return out

    def _spk_pre_hook(self, mod, inp):
        r = self.rec
        if r is not None:
            r["mels"].append(inp[0][0].detach().clone())

    def _st_encode(self, orig, *a, **k):
        out = orig(*a, **k)
        r = self.rec
        if r is not None:
            r["enc_codes"].append([c.clone() for c in out.audio_codes])
        return out

    def _st_norm_audio(self, orig, *a, **k):
        out = orig(*a, **k)
        r = self.rec
        if r is not None:
            r["enc_wavs"].append([np.array(w, dtype=np.float32, copy=True) for w in out])
        return out

    def _st_decode(self, orig, encoded):
        r = self.rec
        if r is not None:
            r["decode_calls"] += 1
            r["decode_codes"] = [torch.as_tensor(e["audio_codes"]).clone() for e in encoded]
        wavs, sr = orig(encoded)
        if r is not None:
            r["decode_wavs"] = [np.array(w, copy=True) for w in wavs]
        return wavs, sr

    def _quantizer_decode(self, orig, codes):
        out = orig(codes)
        r = self.rec
        if r is not None:
            r["quantizer_calls"] += 1
            r["codec"]["codec.quantizer"] = out[0].detach().clone()
        return out

    def _mk_hook(self, name, transformer=False):
        def hook(mod, inp, out):
            r = self.rec
            if r is None:
                return
            o = out.last_hidden_state if transformer else out
            o = o[0]
            if transformer:
                o = o.transpose(0, 1)  # [T, C] -> [C, T] (what the decoder does next)
            r["codec"][name] = o.detach().clone().contiguous()
        return hook


def run_case(tts, rec, c):
    gen = dict(GREEDY, max_new_tokens=c["max_new_tokens"])
    rec.start()
    if c["mode"] == "custom_voice":
        kw = dict(text=c["text"], speaker=c["speaker"], language=c["language"],
                  non_streaming_mode=c["non_streaming_mode"])
        if c.get("instruct") is not None:
            kw["instruct"] = c["instruct"]
        wavs, sr = tts.generate_custom_voice(**kw, **gen)
    elif c["mode"] == "voice_design":
        wavs, sr = tts.generate_voice_design(text=c["text"], instruct=c["instruct"], language=c["language"],
                                             non_streaming_mode=c["non_streaming_mode"], **gen)
    elif c["mode"] == "voice_clone":
        wavs, sr = tts.generate_voice_clone(text=c["text"], language=c["language"],
                                            ref_audio=os.path.join(ROOT, c["ref_audio"]),
                                            ref_text=c.get("ref_text"),
                                            x_vector_only_mode=c["x_vector_only_mode"],
                                            non_streaming_mode=c["non_streaming_mode"], **gen)
    else:
        raise ValueError(c["mode"])
    r = rec.stop()
    assert sr == 24000
    r["wav"] = np.array(wavs[0], dtype=np.float32, copy=True)
    return r


def f32(x):
    if isinstance(x, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
    return x.detach().to(torch.float32).contiguous().clone()


def i64(x):
    return torch.as_tensor(x).to(torch.int64).contiguous().clone()


def margin_top2(scores):
    v = torch.topk(scores.float(), 2).values
    return float(v[0] - v[1])


def crosscheck(r, r64):
    c32, c64 = r["codes_list"][0], r64["codes_list"][0]
    out = {"codes_equal": bool(c32.shape == c64.shape and torch.equal(c32, c64))}
    if out["codes_equal"]:
        l32 = torch.stack(r["codec_head_out"]).double()
        l64 = torch.stack(r64["codec_head_out"]).double()
        out["talker_logits_max_abs_diff"] = float((l32 - l64).abs().max())
        if r["cp_logits"]:
            p32 = torch.stack(r["cp_logits"]).double()
            p64 = torch.stack(r64["cp_logits"]).double()
            out["cp_logits_max_abs_diff"] = float((p32 - p64).abs().max())
        out["wav_max_abs_diff"] = float(np.abs(r["wav"].astype(np.float64) - r64["wav"].astype(np.float64)).max())
    return out


def build_golden(c, r, tts_info, tok_info, qwen2_tok):
    eos = 2150
    tensors = {}
    ids = r["input_ids"][0][0]
    tensors["input_ids"] = i64(ids)
    instruct_ids = None
    if r.get("instruct_ids") is not None and r["instruct_ids"][0] is not None:
        instruct_ids = r["instruct_ids"][0][0]
        tensors["instruct_ids"] = i64(instruct_ids)
    ref_ids = None
    if r.get("ref_ids") is not None and r["ref_ids"][0] is not None:
        ref_ids = r["ref_ids"][0][0]
        tensors["ref_ids"] = i64(ref_ids)
    tensors["prefill_embeds"] = f32(r["prefill_embeds"][0])
    tensors["trailing_text"] = f32(r["trailing_text"][0])

    S = len(r["codec_head_out"])
    logits = torch.stack(r["codec_head_out"], 0)
    hidden = torch.stack(r["codec_head_in"], 0)
    seq = r["talker_sequences"][0]
    assert seq.shape[0] == S == len(r["talker_scores"]), (seq.shape, S, len(r["talker_scores"]))
    raw = torch.stack([x[0] for x in r["talker_raw_logits"]], 0)
    assert torch.equal(raw, logits.float()), "codec_head hook != generate output_logits"
    tensors["talker_logits"] = f32(logits)
    tensors["talker_tokens"] = i64(seq)
    tensors["talker_margin"] = f32(torch.tensor([margin_top2(s[0]) for s in r["talker_scores"]]))
    tensors["talker_hidden"] = f32(hidden)
    # greedy: the chosen token is the argmax of the processed scores
    for s, tkn in zip(r["talker_scores"], seq.tolist()):
        assert int(torch.argmax(s[0])) == tkn

    codes = r["codes_list"][0]
    F = codes.shape[0]
    stopped_by_eos = bool(seq[-1].item() == eos)
    assert F == (S - 1), (F, S)
    assert len(r["cp_logits"]) == F, (len(r["cp_logits"]), F)
    for f in range(F):  # CP greedy tokens are the argmax of its logits
        assert torch.equal(torch.argmax(r["cp_logits"][f], -1), codes[f, 1:])
        assert torch.equal(r["cp_seqs"][f], codes[f, 1:])
    assert torch.equal(codes[:, 0], seq[:F])
    ncp = min(F, CP_FRAMES_PRIMARY if c.get("primary") else CP_FRAMES_OTHER)
    tensors["cp_logits"] = f32(torch.stack(r["cp_logits"][:ncp], 0))
    tensors["codes"] = i64(codes)
    # top1 - top2 of every code-predictor draw (greedy = argmax of the raw logits; no processors)
    cpm = torch.zeros((F, 15), dtype=torch.float32)
    for f in range(F):
        v = torch.topk(r["cp_logits"][f].float(), 2, dim=-1).values
        cpm[f] = v[:, 0] - v[:, 1]
    tensors["cp_margin"] = f32(cpm)

    # codec decode
    assert r["decode_calls"] == 1 and r["quantizer_calls"] == 1, "expected one un-chunked decode"
    dec_codes = r["decode_codes"][0]
    icl = c["mode"] == "voice_clone" and not c["x_vector_only_mode"]
    if c.get("codec_dump"):
        for k in sorted(r["codec"]):
            tensors[k] = f32(r["codec"][k])
    wav = r["wav"]
    tensors["wav"] = f32(wav)
    if icl:
        tensors["wav_untrimmed"] = f32(r["decode_wavs"][0])

    info = {}
    if c["mode"] == "voice_clone":
        assert len(r["spk_audio"]) == 1 and len(r["mels"]) == 1 and len(r["enc_codes"]) == 1
        audio24 = r["spk_audio"][0]
        # the codec encoder saw the very same resampled waveform
        assert np.array_equal(r["enc_wavs"][0][0], audio24)
        tensors["ref_audio_24k"] = f32(audio24)
        tensors["mel"] = f32(r["mels"][0])
        tensors["xvector"] = f32(r["spk_out"][0])
        ref_codes = r["enc_codes"][0][0]
        tensors["ref_codes"] = i64(ref_codes)
        vcp = r["voice_clone_prompt"]
        assert torch.equal(vcp["ref_spk_embedding"][0], r["spk_out"][0])
        if icl:
            assert torch.equal(vcp["ref_code"][0], ref_codes)
            assert torch.equal(dec_codes, torch.cat([ref_codes, codes], 0))
            total = dec_codes.shape[0]
            n = r["decode_wavs"][0].shape[0]
            cut = int(ref_codes.shape[0] / max(total, 1) * n)
            assert np.array_equal(wav, r["decode_wavs"][0][cut:])
            info["icl_cut_samples"] = cut
        else:
            assert vcp["ref_code"][0] is None
            assert torch.equal(dec_codes, codes)
    else:
        assert torch.equal(dec_codes, codes)

    # tokenizer: would the plain Qwen2 regex have produced the same ids?
    def q2(s):
        return qwen2_tok(s, add_special_tokens=False)["input_ids"]

    tmpl = f"<|im_start|>assistant\n{c['text']}<|im_end|>\n<|im_start|>assistant\n"
    same = q2(tmpl) == ids.tolist()
    if instruct_ids is not None:
        same = same and q2(f"<|im_start|>user\n{c['instruct']}<|im_end|>\n") == instruct_ids.tolist()
    if ref_ids is not None:
        same = same and q2(f"<|im_start|>assistant\n{c['ref_text']}<|im_end|>\n") == ref_ids.tolist()

    inputs = {
        "model_dir": f"models/{c['model']}",
        "mode": c["mode"],
        "text": c["text"],
        "speaker": c.get("speaker"),
        "language": c.get("language"),
        "instruct": c.get("instruct"),
        "ref_audio": c.get("ref_audio"),
        "ref_text": c.get("ref_text"),
        "x_vector_only_mode": c.get("x_vector_only_mode"),
        "non_streaming_mode": c["non_streaming_mode"],
        "max_new_tokens": c["max_new_tokens"],
        "do_sample": False,
        "subtalker_dosample": False,
    }
    gk = r["gen_kwargs"]
    meta = {
        "model": c["model"],
        "case": c["case"],
        "inputs": inputs,
        "reference_call": reference_call(c),
        "effective": {
            "tts_model_type": tts_info["tts_model_type"],
            "tts_model_size": tts_info["tts_model_size"],
            "instruct_applied": instruct_ids is not None,
            "languages": r["languages"],
            "speakers": r.get("speakers"),
            "generate_kwargs": {k: gk[k] for k in sorted(gk) if isinstance(gk[k], (bool, int, float, str, type(None)))},
        },
        "tokenizer": dict(tok_info, input_ids_same_with_qwen2_regex=same),
        "prefill_len": int(tensors["prefill_embeds"].shape[0]),
        "trailing_len": int(tensors["trailing_text"].shape[0]),
        "talker_steps": S,
        "frames": F,
        "stopped_by_eos": stopped_by_eos,
        "hit_max_new_tokens": (not stopped_by_eos) and S == c["max_new_tokens"],
        "min_talker_margin": float(tensors["talker_margin"].min()),
        "min_cp_margin": float(tensors["cp_margin"].min()) if F else None,
        "samples": int(wav.shape[0]),
        "cp_logits_frames": ncp,
        "codec_intermediates": bool(c.get("codec_dump")),
    }
    if icl:
        meta["samples_untrimmed"] = int(r["decode_wavs"][0].shape[0])
        meta["ref_frames"] = int(ref_codes.shape[0])
        meta["icl_cut_samples"] = info["icl_cut_samples"]
    if c["mode"] == "voice_clone":
        meta["ref_frames"] = int(tensors["ref_codes"].shape[0])
        meta["ref_audio_24k_samples"] = int(tensors["ref_audio_24k"].shape[0])
        meta["mel_frames"] = int(tensors["mel"].shape[0])
    if c.get("expect_eos") is not None:
        meta["expect_eos"] = c["expect_eos"]
    meta["tensors"] = {k: {"dtype": {torch.float32: "F32", torch.int64: "I64"}[v.dtype], "shape": list(v.shape)}
                       for k, v in sorted(tensors.items())}
    return meta, tensors


def reference_call(c):
    g = f"do_sample=False, subtalker_dosample=False, max_new_tokens={c['max_new_tokens']}"
    if c["mode"] == "custom_voice":
        ins = f", instruct={c['instruct']!r}" if c.get("instruct") is not None else ""
        return (f"generate_custom_voice(text={c['text']!r}, speaker={c['speaker']!r}, language={c['language']!r}"
                f"{ins}, non_streaming_mode={c['non_streaming_mode']}, {g})")
    if c["mode"] == "voice_design":
        return (f"generate_voice_design(text={c['text']!r}, instruct={c['instruct']!r}, language={c['language']!r}, "
                f"non_streaming_mode={c['non_streaming_mode']}, {g})")
    return (f"generate_voice_clone(text={c['text']!r}, language={c['language']!r}, ref_audio=<fixtures>/{c['ref_audio']}, "
            f"ref_text={c.get('ref_text')!r}, x_vector_only_mode={c['x_vector_only_mode']}, "
            f"non_streaming_mode={c['non_streaming_mode']}, {g})")


def save_st(tensors, path):
    from safetensors.torch import save_file

    save_file({k: tensors[k] for k in sorted(tensors)}, path, metadata={"format": "pt"})
    os.chmod(path, 0o644)


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, ensure_ascii=False)
        f.write("\n")


def qwen2_tokenizer(root):
    """The HF Qwen2 tokenizer with the plain Qwen2 regex (tokenizer dir without config.json)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(os.path.join(root, "tokenizer"))
    info = pre_tokenizer_info(tok)
    assert info["kind"] == "qwen2", info
    return tok


def make_cases(root, models, only_cases=None, dry=False):
    qtok = qwen2_tokenizer(root)
    summary = []
    for model in models:
        cases = [c for c in CASES if c["model"] == model and (not only_cases or c["case"] in only_cases)]
        if not cases:
            continue
        tts = load_model(os.path.join(root, "models", model))
        tok_info = pre_tokenizer_info(tts.processor.tokenizer)
        tts_info = {"tts_model_type": tts.model.tts_model_type, "tts_model_size": tts.model.tts_model_size}
        rec = Recorder(tts)
        gdir = os.path.join(root, "golden", model)
        if not dry:
            os.makedirs(gdir, exist_ok=True)
        results = [(c, run_case(tts, rec, c)) for c in cases]
        del rec, tts
        # the same cases once more with the whole pipeline in float64: how far is fp32 from exact,
        # and are the greedy decisions stable under a change of precision?
        tts64 = load_model(os.path.join(root, "models", model), dtype=torch.float64)
        rec64 = Recorder(tts64)
        r64s = [run_case(tts64, rec64, c) for c in cases]
        del rec64, tts64
        for (c, r), r64 in zip(results, r64s):
            meta, tensors = build_golden(c, r, tts_info, tok_info, qtok)
            meta["float64_crosscheck"] = crosscheck(r, r64)
            meta.pop("tensors")
            meta["tensors"] = {k: {"dtype": {torch.float32: "F32", torch.int64: "I64"}[v.dtype], "shape": list(v.shape)}
                               for k, v in sorted(tensors.items())}
            line = (f"{model}/{c['case']}: prefill {meta['prefill_len']} steps {meta['talker_steps']} frames "
                    f"{meta['frames']} eos {meta['stopped_by_eos']} min_margin {meta['min_talker_margin']:.2e}/{meta['min_cp_margin'] or 0:.2e} "
                    f"tokens {tensors['talker_tokens'].tolist()}")
            print(line, flush=True)
            summary.append(meta)
            if c.get("expect_eos") is not None and c["expect_eos"] != meta["stopped_by_eos"]:
                print(f"  WARNING: expect_eos={c['expect_eos']} but stopped_by_eos={meta['stopped_by_eos']}")
            if c.get("expect_eos") is None and meta["stopped_by_eos"]:
                print("  WARNING: unexpected EOS stop")
            if meta["min_talker_margin"] < MIN_MARGIN or (meta["min_cp_margin"] or 1) < MIN_MARGIN:
                print(f"  WARNING: near tie (margin < {MIN_MARGIN})")
            if not meta["float64_crosscheck"]["codes_equal"]:
                print("  WARNING: float64 run gives different codes")
            if dry:
                continue
            write_json(os.path.join(gdir, c["case"] + ".json"), meta)
            save_st(tensors, os.path.join(gdir, c["case"] + ".safetensors"))
    return summary


# ------------------------------------------------------------------------------------------------
# Codec chunked decode (chunk 300, left context 25)
# ------------------------------------------------------------------------------------------------
def make_codec_chunked(root):
    from qwen_tts.inference.qwen3_tts_tokenizer import Qwen3TTSTokenizer

    tk = Qwen3TTSTokenizer.from_pretrained(os.path.join(root, "codec"), dtype=torch.float32, device_map="cpu")
    rng = np.random.default_rng([11, 340])
    codes = torch.from_numpy(rng.integers(0, 2048, size=(340, 16), dtype=np.int64))
    calls = []
    dec = tk.model.decoder
    h = dec.register_forward_pre_hook(lambda m, i: calls.append(int(i[0].shape[-1])))
    wavs, sr = tk.decode({"audio_codes": codes})
    h.remove()
    assert calls == [300, 65], calls  # chunk 0: frames 0..299; chunk 1: 25 context + 40 new
    wav = wavs[0]
    assert wav.shape[0] == 340 * 1920
    gdir = os.path.join(root, "golden")
    os.makedirs(gdir, exist_ok=True)
    save_st({"codes": i64(codes), "wav": f32(wav)}, os.path.join(gdir, "codec_chunked.safetensors"))
    print(f"codec_chunked: decoder calls {calls}, samples {wav.shape[0]}")


# ------------------------------------------------------------------------------------------------
# Sampler goldens: the exact LogitsProcessorList HF generate builds for the talker / code predictor
# ------------------------------------------------------------------------------------------------
SAMPLER_SETS = [
    # name, which, params passed to the wrapper
    ("talker_default", "talker", dict(do_sample=True, temperature=0.9, top_k=50, top_p=1.0, repetition_penalty=1.05)),
    ("talker_topp", "talker", dict(do_sample=True, temperature=0.7, top_k=0, top_p=0.8, repetition_penalty=1.3)),
    ("talker_t1_k10_p09", "talker", dict(do_sample=True, temperature=1.0, top_k=10, top_p=0.9, repetition_penalty=1.0)),
    ("cp_default", "cp", dict(subtalker_dosample=True, subtalker_temperature=0.9, subtalker_top_k=50, subtalker_top_p=1.0)),
    ("cp_k20_p07", "cp", dict(subtalker_dosample=True, subtalker_temperature=0.5, subtalker_top_k=20, subtalker_top_p=0.7)),
]


def describe_processor(p):
    d = {"class": type(p).__name__}
    for k, v in sorted(vars(p).items()):
        if isinstance(v, torch.Tensor):
            v = v.tolist()
            if isinstance(v, list) and len(v) > 16:
                v = {"count": len(v), "first": v[:4], "last": v[-4:]}
        if isinstance(v, (bool, int, float, str, list, dict, type(None))):
            d[k] = v
    return d


def capture_processors(tts, which, params):
    """Run a tiny sampled generation and capture the processor lists generate() built."""
    m = tts.model
    target = m.talker if which == "talker" else m.talker.code_predictor
    got = []
    orig = target._get_logits_processor

    def wrapped(*a, **k):
        out = orig(*a, **k)
        got.append(out)
        return out

    target._get_logits_processor = wrapped
    gen = dict(do_sample=False, subtalker_dosample=False, max_new_tokens=3)
    gen.update(params)
    torch.manual_seed(0)
    try:
        tts.generate_custom_voice(text="Hi.", speaker="vivian", language="english", **gen)
    finally:
        del target._get_logits_processor
    assert got, "no processors captured"
    return got[0]


def sampler_vectors(which, V, seed, nrows):
    """nrows (4 or 6) rows of random logits + histories covering the processor edge cases."""
    rng = np.random.default_rng([21, seed])
    rows, hists = [], []
    hlens = [0, 1, 2, 5, 8, 12][:nrows] if nrows == 6 else [0, 2, 5, 8]
    for i, hlen in enumerate(hlens):
        if nrows == 4:
            i = [0, 2, 3, 4][i]
        x = rng.standard_normal(V).astype(np.float32) * 3.0
        if i in (1, 2, 5):
            x = np.round(x * 4.0) / 4.0          # many exact ties
        if i == 3:
            x = -np.abs(x) - 0.5                  # all negative
        if which == "talker":
            if i in (0, 2):
                x[2150] = x.max() + 2.0           # EOS on top: blocked while len(history) < 2
            if i == 1:
                x[2048 + 37] = x.max() + 1.0      # a suppressed id on top
        if i == 4:
            x[7] = x[900] = x.max() + 0.5         # exact tie for the top value
        rows.append(x)
        h = rng.integers(0, min(V, 2048), size=hlen)
        if hlen >= 5:
            h[1] = h[0]                           # duplicate id in the history
            h[2] = int(np.argmin(x[:2048]))       # negative logit in the history (multiply path)
            h[3] = int(np.argmax(x[:2048]))       # current top candidate is penalised
        hists.append(h.astype(np.int64))
    return np.stack(rows), hists


def make_sampler(root):
    tts = load_model(os.path.join(root, "models", "cv06"))
    tensors, meta = {}, {"sets": []}
    for si, (name, which, params) in enumerate(SAMPLER_SETS):
        procs = capture_processors(tts, which, params)
        V = 3072 if which == "talker" else 2048
        logits, hists = sampler_vectors(which, V, si, 6 if name == "talker_default" else 4)
        N = logits.shape[0]
        stages = [[] for _ in procs]
        for n in range(N):
            ids = torch.from_numpy(hists[n]).view(1, -1)
            s = torch.from_numpy(logits[n]).view(1, -1).clone()
            for k, p in enumerate(procs):
                s = p(ids, s)
                stages[k].append(s[0].clone())
        maxlen = max(1, max(len(h) for h in hists))
        hist = np.full((N, maxlen), -1, dtype=np.int64)
        for n, h in enumerate(hists):
            hist[n, :len(h)] = h
        tensors[f"{name}.logits"] = f32(logits)
        tensors[f"{name}.history"] = i64(hist)
        tensors[f"{name}.history_len"] = i64([len(h) for h in hists])
        stage_names = []
        for k, p in enumerate(procs):
            sn = f"{name}.stage{k}_{type(p).__name__}"
            tensors[sn] = f32(torch.stack(stages[k], 0))
            stage_names.append(sn)
        final = torch.stack(stages[-1], 0) if procs else torch.from_numpy(logits)
        tensors[f"{name}.argmax"] = i64(torch.argmax(final, dim=-1))
        meta["sets"].append({
            "name": name, "which": which, "vocab": V, "rows": N, "wrapper_params": params,
            "processors": [describe_processor(p) for p in procs], "stages": stage_names,
            "notes": "history = previously generated tokens of this sequence (HF input_ids), padded with -1; "
                     "each row processed alone (batch 1); argmax = first index of the max of the last stage",
        })
        print(f"sampler {name}: {[type(p).__name__ for p in procs]}")
    gdir = os.path.join(root, "golden")
    os.makedirs(gdir, exist_ok=True)
    save_st(tensors, os.path.join(gdir, "sampler.safetensors"))
    write_json(os.path.join(gdir, "sampler.json"), meta)


# ------------------------------------------------------------------------------------------------
# Tokenizer corpus
# ------------------------------------------------------------------------------------------------
def corpus_lines():
    base = [
        "Hello, how are you today?", "The quick brown fox jumps over the lazy dog.",
        "I'm sure you'll love it; they've said we'd be fine. It's John's car.",
        "DON'T SHOUT! I'LL be there, WE'VE got it.", "'sup? 'twas the night before Christmas.",
        "camelCase and PascalCase and iPhone and eBay and McDonald and XMLHttpRequest",
        "snake_case_names and kebab-case-names and CONSTANT_VALUE",
        "getElementById(\"main\").innerHTML = '<b>hi</b>';",
        "def f(x):\n    return x**2  # square\n", "if (a<=b && c!=d) { return a/b; }",
        "https://example.com/path/to/page?query=1&x=y#frag", "email: someone@example.org",
        "Numbers: 1234567890, 3.14159, 1e-10, -42, +7, 1,000,000 and 0x1F.",
        "Phone: +1 (555) 123-4567; date 2026-01-15; time 12:34:56.",
        "1 22 333 4444 55555 666666 7777777", "a1b2c3 x86_64 mp3 h264 4K 2nd 3rd 21st",
        "   leading spaces", "trailing spaces   ", "multiple     inner      spaces",
        "tabs\tbetween\twords\t\tdouble", "line one\nline two\n\nline four", "windows\r\nline\r\nendings",
        "\n\nstarts with newlines", "ends with newlines\n\n\n", " \n \n mixed \t whitespace \n",
        "你好，世界！今天天气很好，我们去公园散步吧。", "我叫通义千问，是阿里云的开源大模型。",
        "北京欢迎你。上海、广州和深圳都是大城市。", "数字１２３和全角ＡＢＣ以及半角123ABC",
        "こんにちは、私の名前はアンナです。東京の桜がとても綺麗でした。", "カタカナとひらがなと漢字が混ざった文章です。",
        "안녕하세요, 만나서 반갑습니다. 오늘 날씨가 좋네요.", "한국어 문장과 English 단어가 섞여 있습니다.",
        "Guten Morgen! Wie spät ist es? Über 3 Brücken musst du gehen. Straße, Fuß, Größe.",
        "Bonjour à tous, c'est une journée magnifique. Où est l'hôtel? Ça va très bien.",
        "¿Dónde está la estación de tren más cercana? ¡Qué día tan bonito! Niño, año, señor.",
        "Привет! Как дела? Съешь же ещё этих мягких французских булок.", "ЗАГЛАВНЫЕ буквы и строчные",
        "Questa è una prova: perché, però, città, più.", "Olá! Tudo bem com você? Ação, coração, não.",
        "مرحبا بالعالم، كيف حالك اليوم؟", "العربية: ١٢٣٤٥ أرقام هندية",
        "नमस्ते दुनिया, आप कैसे हैं?", "हिन्दी में संख्या १२३ और अंग्रेज़ी 123",
        "Γειά σου Κόσμε! Καλημέρα.", "שלום עולם", "สวัสดีชาวโลก", "Xin chào thế giới! Tiếng Việt có dấu.",
        "Emoji: 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🇩🇪🇯🇵 ❤️ ✨", "Mixed emoji😀text👍here", "🙂",
        "Combining marks: e\u0301 a\u0300 o\u0308 n\u0303 (decomposed) vs é à ö ñ",
        "Zalgo: Z\u0351\u036b\u0343a\u0310l\u0357g\u0344o\u0352", "Ångström and A\u030angstro\u0308m",
        "Ligatures ﬁ ﬂ and full-width ｈｅｌｌｏ and ½ ² ℃ ™ ©",
        "Special tokens inside text: <|im_start|>user\nhi<|im_end|>\n",
        "Before<tts_pad>after<tts_text_bos>and<tts_text_eod>end", "<|endoftext|><|audio_start|><|audio_end|>",
        "Not special: <tts_pad >, < |im_end|>, <|im_end>", "<think>\n\n</think>\n\nanswer",
        "Punctuation!!! ??? ... --- ___ *** /// \\\\ ||| ~~~", "Quotes: \"double\" 'single' “curly” ‘curly’ «guillemets»",
        "Brackets ([{<>}]) and math: ∑ ∫ √ ≤ ≥ ≠ ± × ÷ ∞ π", "x = [-b ± √(b²-4ac)] / 2a",
        "Currency: $100, €50, £30, ¥1000, ₹500, ₩10000", "a/b/c and 1/2/3 and ./path/../file.txt",
        "end.", "A", "", " ", "\n", "\t", "..", "''", "'s", "'S",
    ]
    out = list(base)
    # combinations: spaces/newlines/tabs around and between fragments, case variants, digit runs
    frags = ["Hello", "world", "iPhone", "你好", "こんにちは", "안녕", "Straße", "naïve", "e\u0301t\u00e9",
             "😀", "123", "4567", "it's", "WE'RE", "foo_bar", "fooBar", "<|im_end|>", "<tts_pad>"]
    seps = [" ", "  ", "\n", "\t", "", " \n", "\r\n", "/", "-", ". "]
    k = 0
    for i, a in enumerate(frags):
        for j, b in enumerate(frags):
            if (i * 7 + j * 3) % 5 != 0:
                continue
            s = seps[k % len(seps)]
            out.append(a + s + b)
            k += 1
    for n in range(1, 13):
        out.append("9" * n + " " + "".join(str((n * m) % 10) for m in range(n)))
    for w in ["hello", "world", "speech", "tokenizer"]:
        out.extend([w, w.upper(), w.capitalize(), " " + w, w + "\n", "  " + w.upper() + "  "])
    for ws in [" ", "  ", "   ", "\n", "\n\n", " \n", "\n ", "\t", "\t\t", " \t ", "\r\n", "\r\n\r\n", "\u3000", "\u00a0"]:
        out.append("a" + ws + "b")
        out.append(ws + "x" + ws)
    # sentence fragments: every base line cut in halves at a space (different merge contexts)
    for b in base:
        if " " in b.strip():
            cut = b.index(" ", len(b) // 2) if " " in b[len(b) // 2:] else b.index(" ")
            out.extend([b[:cut], b[cut:]])
    # digit runs with separators and letters
    for sep in ["", " ", ",", ".", "-", "\n"]:
        out.append(sep.join(["12", "345", "6789", "0"]))
    out.extend(["x" * n for n in (1, 2, 3, 5, 8, 13, 40)])
    out.extend(["ab" * n + " " + "AB" * n for n in (1, 3, 7)])
    # the case texts (so the C tokenizer is checked on exactly what the goldens used)
    for c in CASES:
        out.append(c["text"])
        if c.get("instruct"):
            out.append(c["instruct"])
        if c.get("ref_text"):
            out.append(c["ref_text"])
    seen, uniq = set(), []
    for s in out:
        if s not in seen:
            seen.add(s)
            uniq.append(s)
    return uniq


def make_tokenizer_corpus(root):
    from transformers import AutoProcessor

    qtok = qwen2_tokenizer(root)
    # processor loaded from a local model dir exactly as the wrapper does (fix_mistral_regex=True)
    from qwen_tts.core.models import Qwen3TTSConfig, Qwen3TTSProcessor
    from transformers import AutoConfig

    AutoConfig.register("qwen3_tts", Qwen3TTSConfig, exist_ok=True)
    AutoProcessor.register(Qwen3TTSConfig, Qwen3TTSProcessor, exist_ok=True)
    proc = AutoProcessor.from_pretrained(os.path.join(root, "models", "cv06"), fix_mistral_regex=True)
    ltok = proc.tokenizer
    linfo = pre_tokenizer_info(ltok)
    lines = corpus_lines()
    assert len(lines) >= 300, len(lines)
    ndiff = 0
    path = os.path.join(root, "golden", "tokenizer_corpus.jsonl")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for s in lines:
            ids = qtok(s, add_special_tokens=False)["input_ids"]
            d = {"text": s, "ids": ids}
            lids = ltok(s, add_special_tokens=False)["input_ids"]
            if lids != ids:
                d["ids_local"] = lids
                ndiff += 1
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
    print(f"tokenizer corpus: {len(lines)} lines, {ndiff} differ under the local-dir processor "
          f"(regex kind {linfo['kind']})")


# ------------------------------------------------------------------------------------------------
ROOT = None


def main():
    global ROOT
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.path.join(L.REPO, "tests", "fixtures"))
    ap.add_argument("--parts", default="audio,cases,codec,sampler,tokenizer")
    ap.add_argument("--models", default=",".join(L.VARIANTS))
    ap.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    ap.add_argument("--dry", action="store_true", help="run cases, print summary, write nothing")
    args = ap.parse_args()
    ROOT = os.path.abspath(args.root)
    parts = args.parts.split(",")
    if "audio" in parts and not args.dry:
        make_audio(ROOT)
    if "cases" in parts:
        if not args.dry and not args.cases:
            for m in args.models.split(","):
                shutil.rmtree(os.path.join(ROOT, "golden", m), ignore_errors=True)
        make_cases(ROOT, args.models.split(","), [x for x in args.cases.split(",") if x], dry=args.dry)
    if args.dry:
        return
    if "codec" in parts:
        make_codec_chunked(ROOT)
    if "sampler" in parts:
        make_sampler(ROOT)
    if "tokenizer" in parts:
        make_tokenizer_corpus(ROOT)


if __name__ == "__main__":
    main()
