#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_safetensors into fuzz/corpus/safetensors/ (standard library only).

Valid files of the fuzz target's tiny GPT-2 (vocab_size 256, d_model 4, n_ctx 4, n_layer 1,
n_head 2) in Hugging Face's layout (F32, F16 with the "transformer." prefix and the attn.bias
buffer, BF16 with lm_head.weight, metadata), and broken ones (truncated, header length past the
end, bad JSON, overlapping and uncovered offsets, unknown dtype, a tensor wte does not have).
Deterministic: running it again gives the same bytes.
"""
import json
import os
import random
import struct

V, C, P, L = 256, 4, 4, 1

SHAPES = [("wte.weight", (V, C)), ("wpe.weight", (P, C)), ("ln_f.weight", (C,)), ("ln_f.bias", (C,))]
for l in range(L):
    h = f"h.{l}."
    SHAPES += [(h + "ln_1.weight", (C,)), (h + "ln_1.bias", (C,)),
               (h + "attn.c_attn.weight", (C, 3 * C)), (h + "attn.c_attn.bias", (3 * C,)),
               (h + "attn.c_proj.weight", (C, C)), (h + "attn.c_proj.bias", (C,)),
               (h + "ln_2.weight", (C,)), (h + "ln_2.bias", (C,)),
               (h + "mlp.c_fc.weight", (C, 4 * C)), (h + "mlp.c_fc.bias", (4 * C,)),
               (h + "mlp.c_proj.weight", (4 * C, C)), (h + "mlp.c_proj.bias", (C,))]


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def encode(values, dtype):
    if dtype == "F32":
        return struct.pack(f"<{len(values)}f", *values)
    if dtype == "F16":
        return struct.pack(f"<{len(values)}e", *values)
    if dtype == "BF16":
        return b"".join(struct.pack("<I", struct.unpack("<I", struct.pack("<f", v))[0])[2:]
                        for v in values)
    raise ValueError(dtype)


def build(tensors, metadata=None, pad=True):
    """tensors: [(name, dtype, shape, bytes)] -> file bytes (offsets back to back)."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def model(rng, dtype="F32", prefix="", buffers=False, lm_head=False):
    out = []
    for name, shape in SHAPES:
        values = [rng.gauss(0, 0.02) if "weight" in name and "ln" not in name else
                  (1.0 if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or
                   name == "ln_f.weight" else 0.0) for _ in range(numel(shape))]
        out.append((prefix + name, dtype, shape, encode(values, dtype)))
        if buffers and name.endswith("ln_1.bias"):
            mask = [1.0 if j <= i else 0.0 for i in range(P) for j in range(P)]
            out.append((prefix + name.replace("ln_1.bias", "attn.bias"), "F32", (1, 1, P, P),
                        encode(mask, "F32")))
    if lm_head:
        out.append(("lm_head.weight", dtype, (V, C), out[0][3]))
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out_dir = os.path.join(here, "corpus", "safetensors")
    os.makedirs(out_dir, exist_ok=True)
    rng = random.Random(13)
    seeds = {
        "gpt2_f32": build(model(rng), {"format": "pt"}),
        "gpt2_f16_prefixed_buffers": build(model(rng, "F16", "transformer.", buffers=True)),
        "gpt2_bf16_lm_head": build(model(rng, "BF16", lm_head=True)),
        "small_mixed": build([("a", "F32", (2, 3), encode([1, 2, 3, 4, 5, 6], "F32")),
                              ("b", "F16", (3,), encode([0.5, -2, 65504], "F16")),
                              ("c", "I64", (2,), struct.pack("<2q", 1, -1)),
                              ("d", "BF16", (), encode([3.0], "BF16")),
                              ("e", "U8", (0, 5), b"")], {"k": "v"}),
        "empty_header": build([]),
    }
    good = seeds["gpt2_f32"]
    seeds["truncated"] = good[: len(good) - 100]
    seeds["header_past_end"] = struct.pack("<Q", len(good)) + good[8:]
    seeds["bad_json"] = struct.pack("<Q", 9) + b'{"a": [1,' + b"\0" * 8
    overlap = build([("a", "F32", (2,), encode([1, 2], "F32"))])
    hdr = json.dumps({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                      "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}).encode()
    seeds["overlap"] = struct.pack("<Q", len(hdr)) + hdr + encode([1, 2], "F32")
    hdr = json.dumps({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}).encode()
    seeds["hole"] = struct.pack("<Q", len(hdr)) + hdr + encode([1, 2], "F32")
    hdr = json.dumps({"a": {"dtype": "F128", "shape": [1], "data_offsets": [0, 16]}}).encode()
    seeds["unknown_dtype"] = struct.pack("<Q", len(hdr)) + hdr + b"\0" * 16
    extra = model(rng) + [("h.0.crossattention.c_attn.weight", "F32", (C, 3 * C),
                           encode([0.0] * (3 * C * C), "F32"))]
    seeds["extra_tensor"] = build(extra)
    del overlap
    for name, data in seeds.items():
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)
    print(f"wrote {len(seeds)} seeds to {out_dir}")


if __name__ == "__main__":
    main()
