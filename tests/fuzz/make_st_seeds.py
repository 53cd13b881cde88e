#!/usr/bin/env python3
"""Seeds for fuzz_safetensors (tests/fuzz/corpus/safetensors): small valid
files of each dtype the reader takes, quantized model files (packed and plain
blocks), and a few hostile headers. Deterministic; rerun to regenerate.

    python3 tests/fuzz/make_st_seeds.py
"""
import json
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "safetensors")
SIZES = {"F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I8": 1, "U8": 1}


def st_file(tensors, metadata=None, pad=True):
    """tensors: list of (name, dtype, shape, bytes) in data order."""
    header, data, off = {}, b"", 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        data += raw
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def plain(dtype, shape, fill=1):
    n = 1
    for d in shape:
        n *= d
    return (dtype, shape, bytes((fill * (i + 1)) & 0xFF for i in range(n * SIZES[dtype])))


def main():
    os.makedirs(OUT, exist_ok=True)
    seeds = {}
    seeds["valid-f32"] = st_file([("a.weight",) + plain("F32", [4, 3]), ("b.bias",) + plain("F32", [3])])
    seeds["valid-mixed"] = st_file([("x",) + plain(d, [2, 2]) for d in ["F16"]] +
                                   [("y",) + plain("BF16", [5]), ("z",) + plain("I64", [1, 2]),
                                    ("w",) + plain("I32", [3]), ("v",) + plain("I8", [7]),
                                    ("u",) + plain("U8", [1, 1, 1, 2])],
                                   metadata={"format": "pt"})
    seeds["valid-empty-tensor"] = st_file([("e",) + plain("F32", [0, 4]), ("f",) + plain("F32", [2])])
    seeds["valid-no-tensors"] = st_file([], metadata={"k": "v"})
    seeds["valid-scalar"] = st_file([("s", "F32", [], b"\x00\x00\x80\x3f")], pad=False)
    # Quantized model files: version 2 packed rows (Q8_0 codes stored + 128,
    # one group of 16 blocks per 512 columns, then 16 half scales), version 1
    # plain 34/18-byte blocks.
    q8_row = bytes([0x80]) * 512 + struct.pack("<16e", *[0.5] * 16)
    q4_row = bytes([0x88]) * 256 + struct.pack("<16e", *[0.25] * 16)
    seeds["quant-v2"] = st_file([("m.q8", "Q8_0", [2, 512], q8_row * 2),
                                 ("m.q4", "Q4_0", [1, 512], q4_row),
                                 ("m.norm",) + plain("F32", [4])],
                                metadata={"qwen3_tts.quantized": "2", "qwen3_tts.quant_block": "32"})
    q8_blk = struct.pack("<e", 0.5) + bytes(range(32))
    q4_blk = struct.pack("<e", 0.5) + bytes(range(16))
    seeds["quant-v1"] = st_file([("p.q8", "Q8_0", [1, 64], q8_blk * 2),
                                 ("p.q4", "Q4_0", [2, 32], q4_blk * 2)],
                                metadata={"qwen3_tts.quantized": "1"})
    # Hostile: each breaks one rule of the reader.
    ok = st_file([("a",) + plain("F32", [2])])
    seeds["bad-huge-n"] = struct.pack("<Q", 1 << 62) + ok[8:]
    seeds["bad-short"] = ok[:-3]
    seeds["bad-trailing"] = ok + b"\x00"
    seeds["bad-overlap"] = (lambda h: struct.pack("<Q", len(h)) + h + bytes(8))(
        json.dumps({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                    "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}).encode())
    seeds["bad-dup-key"] = (lambda h: struct.pack("<Q", len(h)) + h + bytes(4))(
        b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
        b'"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}')
    seeds["bad-shape-overflow"] = (lambda h: struct.pack("<Q", len(h)) + h + bytes(4))(
        json.dumps({"a": {"dtype": "F32", "shape": [4294967296, 4294967296, 4],
                          "data_offsets": [0, 4]}}).encode())
    seeds["bad-quant-unmarked"] = st_file([("m.q8", "Q8_0", [1, 512], q8_row)])
    for name, blob in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(blob)


if __name__ == "__main__":
    main()
