#!/usr/bin/python3
"""ctest: wte import / export against Hugging Face's GPT-2 layout and a PyTorch forward (docs/interop.md).

1. Writes, with numpy, a GPT-2-shaped model.safetensors with random weights in Hugging Face's
   exact layout (names as huggingface.co/gpt2's file has them, without "transformer."; Conv1D
   weights (in, out); the h.N.attn.bias causal-mask buffers and an h.N.attn.masked_bias; most
   tensors F32, some F16 and one BF16; metadata {"format": "pt"}), its config.json and a small
   byte-level BPE tokenizer as vocab.json + merges.txt.
2. `wte import --from DIR`, then `wte hidden-states --out hs.h5` on two texts, and compares every
   layer of hidden_states and the logits with a PyTorch re-implementation of transformers'
   GPT2Model forward (written below from its modeling_gpt2.py: Conv1D = addmm, the bias buffer as
   causal mask with finfo.min, division by sqrt(head size), gelu_new, hidden_states collected
   before each block and after ln_f, logits = ln_f output @ wte.T) on the same file, read by the
   independent numpy reader below: max|wte - torch| / max|torch| <= 1e-5 per layer, float32.
   Same for an untied model whose names carry "transformer." and whose lm_head.weight differs.
3. `wte export` (safetensors and npy) -> the numpy reader parses model.safetensors and every .npy
   equals the original tensor bit for bit (F16/BF16 widened); config.json reads back; export ->
   re-import gives a checkpoint whose every dataset and attribute is bit-identical (h5py).
4. Bad files through the CLI: missing tensor, mis-shaped tensor, truncated file, header length
   past the end, data offsets past the end, unsupported architecture, unsupported dtype: exit 1,
   each its own message naming the tensor or offset, and no output file.
5. `wte train --init-from` the imported model on KJV (datasets/kjv/kjv.txt, made by
   datasets/make_kjv.sh; this part is skipped with a note if it is absent): the loss goes down.
Skipped (exit 77) when /usr/bin/python3 cannot import torch, h5py and numpy.
Environment (set by ctest): WTE_CLI, WTE_SOURCE_DIR, WTE_BINARY_DIR.
"""
import json
import math
import os
import shutil
import struct
import subprocess
import sys

try:
    import h5py
    import numpy as np
    import torch
except ImportError as e:
    print(f"SKIPPED: cannot import {e.name} under {sys.executable}; install Debian's "
          "python3-torch python3-h5py python3-numpy (scripts/quickstart.sh test does)")
    sys.exit(77)

RTOL = 1e-5


# ---- files in Hugging Face's layout ------------------------------------------------------------

def bytes_to_unicode():
    """GPT-2's encoder.py mapping from bytes to printable characters."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def make_tokenizer(n_merges):
    """vocab.json and merges.txt texts of a byte-level BPE with `n_merges` merges: first " x"
    for common letters x, then pairs of byte tokens. Every merge's parts and result exist."""
    b2u = bytes_to_unicode()
    vocab = {ch: i for i, ch in enumerate(b2u.values())}  # ids 0..255 in GPT-2's order
    merges = []
    space = b2u[ord(" ")]
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    candidates = [(space, c) for c in letters] + [(a, b) for a in letters for b in letters]
    for a, b in candidates[:n_merges]:
        merges.append(f"{a} {b}")
        vocab[a + b] = len(vocab)
    return json.dumps(vocab), "#version: 0.2\n" + "\n".join(merges) + "\n", len(vocab)


def to_bf16_bits(a):
    """float32 array -> bfloat16 bits (truncation; the test keeps the bits' exact value)."""
    return (np.ascontiguousarray(a, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def write_safetensors(path, tensors, metadata=None):
    """tensors: [(name, dtype, ndarray)] in file order; dtype 'F32', 'F16', 'BF16' or 'I64'."""
    header, chunks, at = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, a in tensors:
        if dtype == "F32":
            raw = np.ascontiguousarray(a, dtype="<f4").tobytes()
        elif dtype == "F16":
            raw = np.ascontiguousarray(a, dtype="<f2").tobytes()
        elif dtype == "BF16":
            raw = to_bf16_bits(a).astype("<u2").tobytes()
        elif dtype == "I64":
            raw = np.ascontiguousarray(a, dtype="<i8").tobytes()
        else:
            raise ValueError(dtype)
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [at, at + len(raw)]}
        chunks.append(raw)
        at += len(raw)
    text = json.dumps(header).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for c in chunks:
            f.write(c)


def read_safetensors(path):
    """An independent reader (numpy only): {name: float32 or int array}, metadata. Checks that
    the offsets tile the data buffer."""
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    assert 8 + n <= len(raw), f"{path}: header length {n} past the end"
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    base = 8 + n
    out, spans = {}, []
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        spans.append((b, end))
        buf = raw[base + b: base + end]
        shape = tuple(e["shape"])
        if e["dtype"] == "F32":
            a = np.frombuffer(buf, dtype="<f4")
        elif e["dtype"] == "F16":
            a = np.frombuffer(buf, dtype="<f2").astype(np.float32)
        elif e["dtype"] == "BF16":
            a = (np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        elif e["dtype"] == "I64":
            a = np.frombuffer(buf, dtype="<i8")
        else:
            raise ValueError(e["dtype"])
        out[name] = a.reshape(shape)
    spans.sort()
    at = 0
    for b, end in spans:
        assert b == at, f"{path}: tensors do not tile the buffer at {at}"
        at = end
    assert base + at == len(raw), f"{path}: {len(raw) - base - at} trailing bytes"
    return out, header.get("__metadata__", {})


def gpt2_state(rng, V, C, P, L, dtypes=None, prefix="", untied=False, masked_bias_layer=0):
    """Random GPT-2 weights in Hugging Face's layout: [(name, dtype, array)] in
    GPT2Model.state_dict() order, with the attn.bias buffers. dtypes: {name: 'F16'|'BF16'}."""
    dtypes = dtypes or {}

    def w(*shape, std=0.08):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def gain(n):
        return (1.0 + rng.standard_normal(n) * 0.1).astype(np.float32)

    out = [("wte.weight", w(V, C, std=0.1)), ("wpe.weight", w(P, C, std=0.05))]
    for l in range(L):
        h = f"h.{l}."
        out += [(h + "ln_1.weight", gain(C)), (h + "ln_1.bias", w(C, std=0.05)),
                (h + "attn.bias", np.tril(np.ones((P, P), dtype=np.float32))[None, None]),
                (h + "attn.c_attn.weight", w(C, 3 * C)), (h + "attn.c_attn.bias", w(3 * C, std=0.05)),
                (h + "attn.c_proj.weight", w(C, C)), (h + "attn.c_proj.bias", w(C, std=0.05)),
                (h + "ln_2.weight", gain(C)), (h + "ln_2.bias", w(C, std=0.05)),
                (h + "mlp.c_fc.weight", w(C, 4 * C)), (h + "mlp.c_fc.bias", w(4 * C, std=0.05)),
                (h + "mlp.c_proj.weight", w(4 * C, C)), (h + "mlp.c_proj.bias", w(C, std=0.05))]
        if l == masked_bias_layer:
            out.append((h + "attn.masked_bias", np.array(-1e4, dtype=np.float32)))
    out += [("ln_f.weight", gain(C)), ("ln_f.bias", w(C, std=0.05))]
    tensors = [(prefix + name, dtypes.get(name, "F32"), a) for name, a in out]
    if untied:
        tensors.append(("lm_head.weight", dtypes.get("lm_head.weight", "F32"), w(V, C, std=0.1)))
    return tensors


def config_json(V, C, P, L, NH, tied=True, **extra):
    cfg = {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
           "attn_pdrop": 0.1, "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256,
           "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "gpt2",
           "n_ctx": P, "n_embd": C, "n_head": NH, "n_layer": L, "n_positions": P,
           "resid_pdrop": 0.1, "summary_activation": None, "summary_first_dropout": 0.1,
           "summary_proj_to_labels": True, "summary_type": "cls_index", "summary_use_proj": True,
           "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
           "vocab_size": V}
    if not tied:
        cfg["tie_word_embeddings"] = False
    cfg.update(extra)
    return json.dumps(cfg, indent=2)


def write_model_dir(d, tensors, cfg_text, vocab_json, merges_txt):
    os.makedirs(d, exist_ok=True)
    write_safetensors(os.path.join(d, "model.safetensors"), tensors, {"format": "pt"})
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write(cfg_text)
    with open(os.path.join(d, "vocab.json"), "w") as f:
        f.write(vocab_json)
    with open(os.path.join(d, "merges.txt"), "w") as f:
        f.write(merges_txt)


# ---- transformers' GPT2Model forward, re-implemented (modeling_gpt2.py) ------------------------

def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def conv1d(x, weight, bias):
    """transformers.pytorch_utils.Conv1D: weight (nx, nf) = (in, out); y = addmm(b, x, W)."""
    size_out = x.size()[:-1] + (weight.size(-1),)
    return torch.addmm(bias, x.view(-1, x.size(-1)), weight).view(size_out)


def hf_gpt2_forward(sd, ids, n_head, eps, untied):
    """sd: {name without 'transformer.': tensor}. Returns (hidden_states list, logits) as numpy."""
    x = torch.tensor(ids, dtype=torch.long)[None]                   # (1, T)
    T = x.shape[1]
    h = F_embedding(x, sd["wte.weight"]) + F_embedding(torch.arange(T)[None], sd["wpe.weight"])
    C = h.shape[-1]
    hs_all = []
    l = 0
    while f"h.{l}.ln_1.weight" in sd:
        p = f"h.{l}."
        hs_all.append(h)
        residual = h
        a = torch.nn.functional.layer_norm(h, (C,), sd[p + "ln_1.weight"], sd[p + "ln_1.bias"], eps)
        q, k, v = conv1d(a, sd[p + "attn.c_attn.weight"], sd[p + "attn.c_attn.bias"]).split(C, dim=2)
        hd = C // n_head

        def split_heads(t):
            return t.view(t.size()[:-1] + (n_head, hd)).permute(0, 2, 1, 3)

        q, k, v = split_heads(q), split_heads(k), split_heads(v)
        w = torch.matmul(q, k.transpose(-1, -2))
        w = w / torch.full([], v.size(-1) ** 0.5, dtype=w.dtype)
        causal = sd[p + "attn.bias"][:, :, :T, :T].to(torch.bool)
        w = torch.where(causal, w, torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype))
        w = torch.softmax(w, dim=-1)
        y = torch.matmul(w, v).permute(0, 2, 1, 3).contiguous()
        y = y.view(y.size()[:-2] + (C,))
        h = residual + conv1d(y, sd[p + "attn.c_proj.weight"], sd[p + "attn.c_proj.bias"])
        residual = h
        m = torch.nn.functional.layer_norm(h, (C,), sd[p + "ln_2.weight"], sd[p + "ln_2.bias"], eps)
        m = gelu_new(conv1d(m, sd[p + "mlp.c_fc.weight"], sd[p + "mlp.c_fc.bias"]))
        h = residual + conv1d(m, sd[p + "mlp.c_proj.weight"], sd[p + "mlp.c_proj.bias"])
        l += 1
    h = torch.nn.functional.layer_norm(h, (C,), sd["ln_f.weight"], sd["ln_f.bias"], eps)
    hs_all.append(h)
    head = sd["lm_head.weight"] if untied else sd["wte.weight"]
    logits = h @ head.T                                              # GPT2LMHeadModel.lm_head
    return [t[0].numpy() for t in hs_all], logits[0].numpy()


def F_embedding(ids, table):
    return torch.nn.functional.embedding(ids, table)


def rel_error(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


# ---- the test -----------------------------------------------------------------------------------

failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        failures.append(what)


def run(args, **kw):
    r = subprocess.run(args, capture_output=True, text=True, errors="replace", **kw)
    return r.returncode, r.stdout + r.stderr


def compare_forward(WTE, work, label, model_dir, ckpt, texts, n_head, untied):
    hs_path = os.path.join(work, label + "_hs.h5")
    args = [WTE, "hidden-states", "--checkpoint", ckpt, "--out", hs_path, "--dims", "2"]
    for t in texts:
        args += ["--text", t]
    rc, out = run(args)
    check(rc == 0, f"{label}: wte hidden-states --out exits 0 ({out[-300:] if rc else ''})")
    if rc:
        return
    tensors, _ = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    sd = {(k[len("transformer."):] if k.startswith("transformer.") else k): torch.from_numpy(v.copy())
          for k, v in tensors.items()}
    worst = 0.0
    with h5py.File(hs_path, "r") as f:
        for i in range(len(texts)):
            g = f[f"text{i}"]
            ids = g["ids"][...]
            ours_hs = g["hidden_states"][...]
            ours_logits = g["logits"][...]
            ref_hs, ref_logits = hf_gpt2_forward(sd, ids, n_head, 1e-5, untied)
            check(ours_hs.shape[0] == len(ref_hs), f"{label} text {i}: {len(ref_hs)} hidden_states")
            for l, ref in enumerate(ref_hs):
                r = rel_error(ours_hs[l], ref)
                worst = max(worst, r)
                check(r <= RTOL, f"{label} text {i} ({len(ids)} tokens): hidden_states[{l}] max rel "
                                 f"err {r:.2e} <= {RTOL:g} (max|torch| {np.max(np.abs(ref)):.3g})")
            r = rel_error(ours_logits, ref_logits)
            worst = max(worst, r)
            check(r <= RTOL, f"{label} text {i}: logits {ours_logits.shape} max rel err {r:.2e} "
                             f"<= {RTOL:g} (max|torch| {np.max(np.abs(ref_logits)):.3g})")
    print(f"{label}: largest relative error over every layer and the logits: {worst:.2e}")


def main():
    WTE = os.environ["WTE_CLI"]
    SRC = os.environ["WTE_SOURCE_DIR"]
    work = os.path.join(os.environ["WTE_BINARY_DIR"], "test_tmp", "hf_gpt2_interop")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    torch.set_num_threads(1)
    rng = np.random.default_rng(13)
    vocab_json, merges_txt, V = make_tokenizer(64)
    C, P, L, NH = 48, 32, 3, 4
    # F16: wpe and one Conv1D weight; BF16: one LayerNorm bias; the rest F32.
    dtypes = {"wpe.weight": "F16", "h.1.mlp.c_fc.weight": "F16", "h.2.ln_2.bias": "BF16"}
    tensors = gpt2_state(rng, V, C, P, L, dtypes)
    hf_dir = os.path.join(work, "gpt2_tiny")
    write_model_dir(hf_dir, tensors, config_json(V, C, P, L, NH), vocab_json, merges_txt)
    ckpt = os.path.join(work, "tiny.h5")
    rc, out = run([WTE, "import", "--from", hf_dir, "--out", ckpt])
    print(out, end="")
    check(rc == 0, "wte import of the tied model exits 0")
    check(f"{sum(1 for t in tensors if not t[0].endswith(('.attn.bias', '.attn.masked_bias')))} "
          "tensors (" in out and "2 F16, 1 BF16" in out and "names without \"transformer.\"" in out
          and f"ignored {L + 1} buffer(s)" in out, "import reports the tensors, dtypes, names, buffers")
    texts = ["the rain in spain stays mainly", "a bank of the river; then the bank"]
    compare_forward(WTE, work, "tied", hf_dir, ckpt, texts, NH, untied=False)
    # The inspection commands run on an imported model as on a trained one.
    rc, out = run([WTE, "sample", "--checkpoint", ckpt, "--prompt", "the bank", "-n", "8", "--seed", "1"])
    check(rc == 0 and "8 new tokens" in out, f"wte sample on the imported model ({out.strip().splitlines()[-1] if out.strip() else ''})")
    rc, out = run([WTE, "geometry", "--checkpoint", ckpt, "--query", " b,#300",
                   "--out", os.path.join(work, "geometry")])
    check(rc == 0 and os.path.exists(os.path.join(work, "geometry", "index.html")),
          f"wte geometry on the imported model (exit {rc}{': ' + out[-300:] if rc else ''})")
    rc, out = run([WTE, "inspect", ckpt])
    check(rc == 0 and "optimizer: none (weights only)" in out, "wte inspect: a weights-only checkpoint at step 0")

    # Untied, names with "transformer.", an F16 lm_head.weight.
    tensors_u = gpt2_state(rng, V, C, P, 2, {"lm_head.weight": "F16", "h.0.attn.c_attn.weight": "F16"},
                           prefix="transformer.", untied=True)
    hf_dir_u = os.path.join(work, "gpt2_untied")
    write_model_dir(hf_dir_u, tensors_u, config_json(V, C, P, 2, NH, tied=False), vocab_json, merges_txt)
    ckpt_u = os.path.join(work, "untied.h5")
    rc, out = run([WTE, "import", "--from", hf_dir_u, "--out", ckpt_u])
    print(out, end="")
    check(rc == 0 and "untied lm_head" in out and "names with \"transformer.\"" in out,
          "wte import of the untied, prefixed model")
    compare_forward(WTE, work, "untied", hf_dir_u, ckpt_u, texts[:1], NH, untied=True)

    # Export -> numpy reader, bit for bit; export -> import bit-identical.
    for label, src_dir, src_ckpt, src_tensors in (("tied", hf_dir, ckpt, tensors),
                                                  ("untied", hf_dir_u, ckpt_u, tensors_u)):
        exp = os.path.join(work, f"export_{label}")
        rc, out = run([WTE, "export", "--checkpoint", src_ckpt, "--format", "safetensors", "--out", exp])
        print(out, end="")
        check(rc == 0, f"{label}: wte export --format safetensors exits 0")
        got, meta = read_safetensors(os.path.join(exp, "model.safetensors"))
        check(meta == {"format": "pt"}, f"{label}: exported metadata {meta}")
        orig, _ = read_safetensors(os.path.join(src_dir, "model.safetensors"))
        want = {}
        for name, arr in orig.items():
            base = name[len("transformer."):] if name.startswith("transformer.") else name
            if base.endswith((".attn.bias", ".attn.masked_bias")):
                continue
            want[base if base == "lm_head.weight" else "transformer." + base] = arr
        check(sorted(got) == sorted(want), f"{label}: exported names are GPT2LMHeadModel's state dict "
                                           f"({len(got)} tensors, e.g. transformer.h.0.attn.c_attn.weight)")
        same = all(got[k].dtype == np.float32 and got[k].shape == want[k].shape and
                   np.array_equal(got[k].view(np.uint32), want[k].astype(np.float32).view(np.uint32))
                   for k in want if k in got)
        check(same, f"{label}: every exported tensor equals the original bit for bit (F16/BF16 widened; "
                    "Conv1D weights (in, out) as in the original)")
        cfg = json.load(open(os.path.join(exp, "config.json")))
        check(cfg["n_embd"] == C and cfg["n_positions"] == P and cfg["vocab_size"] == V and
              cfg["activation_function"] == "gelu_new" and cfg["tie_word_embeddings"] == (label == "tied")
              and cfg["layer_norm_epsilon"] == 1e-05 and cfg["architectures"] == ["GPT2LMHeadModel"],
              f"{label}: exported config.json {json.dumps({k: cfg[k] for k in ('n_embd', 'n_layer', 'n_head', 'tie_word_embeddings')})}")
        check(json.load(open(os.path.join(exp, "vocab.json"))) == json.loads(vocab_json) and
              open(os.path.join(exp, "merges.txt")).read() == merges_txt,
              f"{label}: exported vocab.json and merges.txt are the tokenizer's")
        back = os.path.join(work, f"reimport_{label}.h5")
        rc, out = run([WTE, "import", "--from", exp, "--out", back])
        check(rc == 0, f"{label}: re-import of the export exits 0")
        with h5py.File(src_ckpt, "r") as a, h5py.File(back, "r") as b:
            names = []
            a.visit(names.append)
            names_b = []
            b.visit(names_b.append)
            identical = sorted(names) == sorted(names_b)
            for n in names:
                if isinstance(a[n], h5py.Dataset):
                    x, y = a[n][()], b[n][()]
                    identical &= (x.tobytes() == y.tobytes()) if isinstance(x, np.ndarray) else x == y
                identical &= dict(a[n].attrs) == dict(b[n].attrs)
            identical &= dict(a.attrs) == dict(b.attrs)
        check(identical, f"{label}: import -> export -> import is bit-identical (every dataset and "
                         f"attribute of {len(names)} objects)")
        npy = os.path.join(work, f"npy_{label}")
        rc, out = run([WTE, "export", "--checkpoint", src_ckpt, "--format", "npy", "--out", npy])
        check(rc == 0 and all(np.array_equal(np.load(os.path.join(npy, k + ".npy")).view(np.uint32),
                                             want[k].astype(np.float32).view(np.uint32)) for k in want),
              f"{label}: --format npy: every NAME.npy loads with numpy and equals the original")

    bad_files(WTE, work, tensors, vocab_json, merges_txt, V, C, P, L, NH)
    init_from_kjv(WTE, SRC, work, ckpt)
    if failures:
        print(f"FAILED: {len(failures)} check(s):\n  " + "\n  ".join(failures))
        return 1
    print("all checks passed")
    return 0


def bad_files(WTE, work, tensors, vocab_json, merges_txt, V, C, P, L, NH):
    """Every bad file: exit 1, its own message naming the tensor or offset, no output."""
    cases = []
    cases.append(("missing tensor", [t for t in tensors if t[0] != "h.1.attn.c_proj.weight"],
                  config_json(V, C, P, L, NH), None, "tensor 'h.1.attn.c_proj.weight' is missing"))
    shaped = [(n, d, a.T.copy() if n == "h.0.mlp.c_fc.weight" else a) for n, d, a in tensors]
    cases.append(("mis-shaped tensor (nn.Linear's (out, in))", shaped, config_json(V, C, P, L, NH), None,
                  f"tensor 'h.0.mlp.c_fc.weight' has shape ({4 * C}, {C}), but config.json's GPT-2 "
                  f"needs ({C}, {4 * C})"))
    cases.append(("unsupported architecture", tensors,
                  config_json(V, C, P, L, NH, architectures=["GPT2DoubleHeadsModel"]), None,
                  "architecture \"GPT2DoubleHeadsModel\" is not one wte has"))
    cases.append(("unsupported activation", tensors,
                  config_json(V, C, P, L, NH, activation_function="relu"), None,
                  "activation_function is \"relu\""))
    ints = [(n, "I64" if n == "ln_f.bias" else d, a.astype(np.int64) if n == "ln_f.bias" else a)
            for n, d, a in tensors]
    cases.append(("unsupported dtype", ints, config_json(V, C, P, L, NH), None,
                  "tensor 'ln_f.bias' has dtype I64; wte imports F32, F16 and BF16 weights"))
    cases.append(("truncated file", tensors, config_json(V, C, P, L, NH), "truncate",
                  "tensor 'ln_f.bias': data_offsets"))
    cases.append(("header length past the end", tensors, config_json(V, C, P, L, NH), "header",
                  "the header length at offset 0 is"))
    cases.append(("data offsets past the end", tensors, config_json(V, C, P, L, NH), "offsets",
                  "tensor 'wte.weight': data_offsets [100000000, "))
    cases.append(("extra tensor of another architecture",
                  tensors + [("h.0.crossattention.c_attn.weight", "F32", np.zeros((C, 2 * C), np.float32))],
                  config_json(V, C, P, L, NH), None,
                  "tensor 'h.0.crossattention.c_attn.weight'"))
    messages = set()
    for i, (label, ts, cfg, damage, expect) in enumerate(cases):
        d = os.path.join(work, f"bad{i}")
        write_model_dir(d, ts, cfg, vocab_json, merges_txt)
        path = os.path.join(d, "model.safetensors")
        raw = open(path, "rb").read()
        if damage == "truncate":
            raw = raw[:-10]
        elif damage == "header":
            raw = struct.pack("<Q", len(raw)) + raw[8:]
        elif damage == "offsets":
            (n,) = struct.unpack("<Q", raw[:8])
            header = raw[8:8 + n].decode()
            start = header.index('"wte.weight"')
            off = header.index('"data_offsets": [', start)
            end = header.index("]", off)
            b, e = json.loads(header[off + len('"data_offsets": '):end + 1])
            new = header[:off] + f'"data_offsets": [{b + 10**8}, {e + 10**8}]' + header[end + 1:]
            new = new.encode()
            raw = struct.pack("<Q", len(new)) + new + raw[8 + n:]
        open(path, "wb").write(raw)
        out_path = os.path.join(d, "out.h5")
        rc, out = run([WTE, "import", "--from", d, "--out", out_path])
        msg = out.strip().splitlines()[-1] if out.strip() else ""
        check(rc == 1 and expect in out and not os.path.exists(out_path) and
              not os.path.exists(out_path + ".tmp"),
              f"bad file, {label}: exit {rc}, nothing written: {msg[:220]}")
        messages.add(msg)
    check(len(messages) == len(cases), f"each bad file has its own message ({len(messages)} distinct "
                                       f"of {len(cases)})")


def init_from_kjv(WTE, SRC, work, ckpt):
    kjv = os.path.join(SRC, "datasets", "kjv", "kjv.txt")
    if not os.path.exists(kjv):
        print(f"note: {kjv} is absent (datasets/make_kjv.sh makes it): the --init-from run on KJV "
              "is skipped")
        return
    run_dir = os.path.join(work, "init_from_kjv")
    rc, out = run([WTE, "train", "--init-from", ckpt, "--data.text=" + kjv, "--train.steps=40",
                   "--train.batch_size=8", "--data.seq_len=32", "--optim.lr=0.003",
                   "--optim.min_lr=0.0003", "--optim.warmup_steps=5", "--train.eval_interval=0",
                   "--train.eval_tokens=4096", "--train.log_interval=10", "--out", run_dir],
                  env=dict(os.environ, OMP_NUM_THREADS="2"))
    print(out, end="")
    check(rc == 0 and "init-from: " + ckpt in out, "wte train --init-from the imported model on KJV")
    losses = []
    metrics = os.path.join(run_dir, "metrics.csv")
    if os.path.exists(metrics):
        for line in open(metrics).read().splitlines()[1:]:
            losses.append(float(line.split(",")[1]))
    if len(losses) >= 10:
        first, last = np.mean(losses[:5]), np.mean(losses[-5:])
        check(last < first - 0.5, f"--init-from on KJV lowers the imported model's loss: mean of steps "
                                  f"1-5 {first:.3f} -> steps {len(losses) - 4}-{len(losses)} {last:.3f}")
    else:
        check(False, f"--init-from on KJV: metrics.csv has {len(losses)} rows")


if __name__ == "__main__":
    sys.exit(main())
