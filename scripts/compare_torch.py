#!/usr/bin/python3
"""Compare wte's loss, logits and gradients with PyTorch's on the same model and batch.

Usage:
  /usr/bin/python3 scripts/compare_torch.py --wte build/wte --checkpoint C.h5 --batch batch.txt
                                            [--workdir DIR] [--rtol 1e-5] [--precision float32]

1. Runs `wte grad --checkpoint C --batch FILE --out DIR/grads.h5` (wte's float32 production
   model: oneDNN + Highway).
2. Rebuilds the same model in PyTorch from the checkpoint (h5py) as an nn.Module written here
   (GPT2 below, GPT-2's model.py with n_layer blocks read from the checkpoint's h{l}/ tensors),
   in float32:
     x = wte[inputs] + wpe[:T]
     for each block l (GPT-2's block(); weights stored (in, out), so y = x @ w + b):
       qkv = F.layer_norm(x, ln_1) @ attn/c_attn/w + b        columns [q | k | v], heads split
       x = x + (causal softmax(q k^T / sqrt(hs)) v, heads joined) @ attn/c_proj/w + b
       x = x + F.gelu(F.layer_norm(x, ln_2) @ mlp/c_fc/w + b, approximate='tanh') @ mlp/c_proj/w + b
     h' = F.layer_norm(x, (C,), ln_f/g, ln_f/b, ln_eps)   (if model.ln_f)
     logits = h' @ wte.T   (tied; h' @ lm_head.T when the checkpoint has /lm_head)
     loss = F.cross_entropy(logits, targets)   (mean over the B*T tokens)
   and runs backward. n_head and ln_eps come from the checkpoint's stored config.
3. Prints one line per quantity (loss, logits, then every gradient under its checkpoint name) with
   rel = max|wte - torch| / max|torch| (the whole tensor's scale: entries that are small by
   cancellation carry the rounding of the large terms that cancelled) and passes each at
   rel <= --rtol (default 1e-5, float32 against float32). A float64 PyTorch run is shown beside
   it for context (wte float32 against PyTorch float64).
   With --precision float64, `wte grad` runs wte's double reference (src/reference/model.h)
   and the pass is against PyTorch float64 (use a tight --rtol such as 1e-10).

Exit status: 0 all pass, 1 a mismatch (named on the last line), 2 bad usage or a failed `wte grad`,
77 when torch, h5py or numpy cannot be imported (Debian's python3-torch, python3-h5py and
python3-numpy import only under /usr/bin/python3).
"""
import argparse
import configparser
import math
import os
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"compare_torch: SKIPPED: cannot import {e.name} under {sys.executable} "
          "(install Debian's python3-torch python3-h5py python3-numpy and run /usr/bin/python3)",
          file=sys.stderr)
    sys.exit(77)


def truthy(value):
    return str(value).strip().lower() in ("true", "1", "yes", "on")


def read_model(path):
    """Parameters (numpy float32, by checkpoint name, in the checkpoint's tensor order) and the
    model settings {ln_f, ln_eps, n_layer, n_head} of a checkpoint."""
    with h5py.File(path, "r") as f:
        fmt = f.attrs.get("format", b"")
        fmt = fmt.decode() if isinstance(fmt, bytes) else str(fmt)
        if fmt != "wte-checkpoint":
            raise SystemExit(f"compare_torch: '{path}' is not a wte checkpoint (format '{fmt}')")
        names = [name for name in ("wte", "wpe", "ln_f/g", "ln_f/b", "lm_head") if name in f]
        n_layer = 0
        while f"h{n_layer}/ln_1/g" in f:
            names += [f"h{n_layer}/{suffix}" for suffix in BLOCK_TENSORS]
            n_layer += 1
        params = {name: f[name][...] for name in names}
        ini = f["config/ini"][()]
        ini = ini.decode() if isinstance(ini, bytes) else str(ini)
    cfg = configparser.ConfigParser()
    cfg.read_string(ini)
    model = cfg["model"] if cfg.has_section("model") else {}
    settings = {
        "ln_f": truthy(model.get("ln_f", "true")),
        # The configured value exactly: wte's double reference adds it as configured (its
        # float32 kernels add the nearest float32, as PyTorch float32 does with it).
        "ln_eps": float(model.get("ln_eps", "1e-5")),
        "n_layer": n_layer,
        "n_head": int(model.get("n_head", "1")),
    }
    stored = int(model.get("n_layer", "0"))
    if stored != n_layer:
        raise SystemExit(f"compare_torch: '{path}' has {n_layer} blocks (h0/..) but its config says "
                         f"model.n_layer = {stored}")
    C = params["wte"].shape[1]
    if n_layer > 0 and C % settings["n_head"] != 0:
        raise SystemExit(f"compare_torch: '{path}': model.n_head = {settings['n_head']} does not "
                         f"divide d_model = {C}")
    return params, settings


# A block's tensors under h{l}/, in the checkpoint's order; shapes (in, out) for linear weights.
BLOCK_TENSORS = ("ln_1/g", "ln_1/b", "attn/c_attn/w", "attn/c_attn/b", "attn/c_proj/w",
                 "attn/c_proj/b", "ln_2/g", "ln_2/b", "mlp/c_fc/w", "mlp/c_fc/b", "mlp/c_proj/w",
                 "mlp/c_proj/b")


class Block(torch.nn.Module):
    """GPT-2's block() (model.py): x + attn(ln_1(x)), then + mlp(ln_2(x))."""

    def __init__(self, tensors, prefix, n_head, ln_eps):
        super().__init__()
        self.n_head, self.ln_eps = n_head, ln_eps
        # Parameter attribute names: the checkpoint's with '/' -> '_' (attn_c_proj_w, ...).
        for suffix in BLOCK_TENSORS:
            setattr(self, suffix.replace("/", "_"), tensors[prefix + suffix])

    def forward(self, x):
        B, T, C = x.shape
        nh, hs = self.n_head, C // self.n_head
        a = F.layer_norm(x, (C,), self.ln_1_g, self.ln_1_b, self.ln_eps)
        qkv = a @ self.attn_c_attn_w + self.attn_c_attn_b                     # (B, T, 3C)
        q, k, v = (part.view(B, T, nh, hs).transpose(1, 2) for part in qkv.split(C, dim=2))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(hs)                      # (B, nh, T, T)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        att = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)                          # heads joined
        x = x + y @ self.attn_c_proj_w + self.attn_c_proj_b
        m = F.layer_norm(x, (C,), self.ln_2_g, self.ln_2_b, self.ln_eps)
        f = F.gelu(m @ self.mlp_c_fc_w + self.mlp_c_fc_b, approximate="tanh")
        return x + f @ self.mlp_c_proj_w + self.mlp_c_proj_b


class GPT2(torch.nn.Module):
    """GPT-2's model() with wte's tensors: wte, wpe, the blocks h0.., ln_f, tied or untied head."""

    def __init__(self, params, settings, dtype):
        super().__init__()
        tensors = {name: torch.nn.Parameter(torch.tensor(value, dtype=dtype))
                   for name, value in params.items()}
        self.names = list(params)  # checkpoint names, in its order
        self.wte, self.wpe = tensors["wte"], tensors["wpe"]
        self.ln_f_g, self.ln_f_b = tensors["ln_f/g"], tensors["ln_f/b"]
        self.lm_head = tensors.get("lm_head")
        self.ln_f, self.ln_eps = settings["ln_f"], settings["ln_eps"]
        self.h = torch.nn.ModuleList(Block(tensors, f"h{l}/", settings["n_head"], self.ln_eps)
                                     for l in range(settings["n_layer"]))
        self.by_name = tensors

    def forward(self, inputs):
        B, T = inputs.shape
        C = self.wte.shape[1]
        x = self.wte[inputs] + self.wpe[:T]
        for block in self.h:
            x = block(x)
        h = F.layer_norm(x, (C,), self.ln_f_g, self.ln_f_b, self.ln_eps) if self.ln_f else x
        return h @ (self.wte if self.lm_head is None else self.lm_head).T


def torch_forward_backward(params, inputs, targets, settings, dtype):
    """Loss, logits and {name: gradient} of the model in PyTorch at `dtype`."""
    model = GPT2(params, settings, dtype)
    x = torch.tensor(inputs, dtype=torch.long)
    y = torch.tensor(targets, dtype=torch.long)
    B, T = x.shape
    logits = model(x)
    loss = F.cross_entropy(logits.reshape(B * T, -1), y.reshape(B * T))
    loss.backward()
    grads = {name: (p.grad.numpy() if p.grad is not None else np.zeros_like(params[name]))
             for name, p in model.by_name.items()}
    return float(loss.item()), logits.detach().numpy(), grads


def rel_error(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    err = float(np.max(np.abs(a - b))) if a.size else 0.0
    scale = float(np.max(np.abs(b))) if b.size else 0.0
    if scale == 0.0:
        return 0.0 if err == 0.0 else float("inf")
    return err / scale


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--wte", required=True, help="the wte binary")
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--batch", "--tokens", dest="tokens", required=True,
                    help="token batch file (see wte grad --help; --tokens is the old name)")
    ap.add_argument("--workdir", help="where grads.h5 goes (default: a temporary directory)")
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--precision", choices=("float32", "float64"), default="float32",
                    help="wte grad's precision; float64 (wte's double reference) passes against "
                         "PyTorch float64")
    args = ap.parse_args()

    workdir = args.workdir or tempfile.mkdtemp(prefix="wte_compare_torch_")
    os.makedirs(workdir, exist_ok=True)
    grads_path = os.path.join(workdir, "grads.h5")
    run = subprocess.run([args.wte, "grad", "--checkpoint", args.checkpoint, "--batch",
                          args.tokens, "--out", grads_path, "--precision", args.precision],
                         capture_output=True, text=True)
    if run.returncode != 0:
        print(f"compare_torch: wte grad failed ({run.returncode}):\n{run.stdout}{run.stderr}",
              file=sys.stderr)
        return 2

    params, settings = read_model(args.checkpoint)
    with h5py.File(grads_path, "r") as f:
        inputs = f["inputs"][...]
        targets = f["targets"][...]
        wte_loss = float(f["loss"][()])
        wte_logits = f["logits"][...]
        missing = [name for name in params if name not in f]
        if missing:
            print(f"compare_torch FAILED: wte grad wrote no gradient for {', '.join(missing)}")
            return 1
        wte_grads = {name: f[name][...] for name in params}

    torch.set_num_threads(1)
    loss32, logits32, grads32 = torch_forward_backward(params, inputs, targets, settings,
                                                       torch.float32)
    loss64, logits64, grads64 = torch_forward_backward(params, inputs, targets, settings,
                                                       torch.float64)
    V, C = params["wte"].shape
    B, T = inputs.shape
    print(f"compare_torch: {args.checkpoint}: vocab_size {V}, d_model {C}, n_ctx "
          f"{params['wpe'].shape[0]}, n_layer {settings['n_layer']}, n_head {settings['n_head']}, "
          f"ln_f {'on' if settings['ln_f'] else 'off'}, "
          f"{'untied' if 'lm_head' in params else 'tied'}; batch B {B}, T {T}; "
          f"wte {args.precision}; torch {torch.__version__}")
    ref = "f32" if args.precision == "float32" else "f64"
    print(f"pass: max|wte - torch_{ref}| / max|torch_{ref}| <= {args.rtol:g}")
    rows = [("loss", wte_loss, loss32, loss64), ("logits", wte_logits, logits32, logits64)]
    rows += [(name, wte_grads[name], grads32[name], grads64[name]) for name in params]
    failed = []
    worst = (0.0, "")
    for name, ours, t32, t64 in rows:
        r32 = rel_error(ours, t32)
        r64 = rel_error(ours, t64)
        r = r32 if args.precision == "float32" else r64
        ok = r <= args.rtol
        worst = max(worst, (r, name))
        if not ok:
            failed.append(name)
        print(f"  {name:18s} entries {np.asarray(ours).size:7d}  rel vs torch f32 {r32:9.2e}  "
              f"(vs torch f64 {r64:9.2e})  max|torch| {float(np.max(np.abs(t32))):9.3g}  "
              f"{'ok' if ok else 'FAIL'}")
    print(f"  wte loss {wte_loss:.9g}, torch f32 {loss32:.9g}, torch f64 {loss64:.12g}")
    print(f"  max rel error over {len(rows)} quantities: {worst[0]:.2e} ({worst[1]})")
    if failed:
        print("compare_torch FAILED: " + ", ".join(failed))
        return 1
    print("compare_torch passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
