#!/usr/bin/python3
"""Compare wte's loss, logits and gradients with PyTorch's on the same model and batch.

Usage:
  /usr/bin/python3 scripts/compare_torch.py --wte build/wte --checkpoint C.h5 --tokens batch.txt
                                            [--workdir DIR] [--rtol 1e-5]

1. Runs `wte grad --checkpoint C --tokens FILE --out DIR/grads.h5` (wte's float32 production
   model: oneDNN + Highway).
2. Rebuilds the same model in PyTorch from the checkpoint (h5py), in float32:
     hidden_states = wte[inputs] + wpe[:T]
     h' = F.layer_norm(hidden_states, (C,), ln_f/g, ln_f/b, ln_eps)   (if model.ln_f)
     logits = h' @ wte.T   (tied; h' @ lm_head.T when the checkpoint has /lm_head)
     loss = F.cross_entropy(logits, targets)   (mean over the B*T tokens)
   and runs backward.
3. Prints one line per quantity (loss, logits, then every gradient under its checkpoint name) with
   rel = max|wte - torch| / max|torch| (the whole tensor's scale: entries that are small by
   cancellation carry the rounding of the large terms that cancelled) and passes each at
   rel <= --rtol (default 1e-5, float32 against float32). A float64 PyTorch run is shown beside
   it for context (wte float32 against PyTorch float64).

Exit status: 0 all pass, 1 a mismatch (named on the last line), 2 bad usage or a failed `wte grad`,
77 when torch, h5py or numpy cannot be imported (Debian's python3-torch, python3-h5py and
python3-numpy import only under /usr/bin/python3).
"""
import argparse
import configparser
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


def read_model(path):
    """Parameters (numpy float32, by checkpoint name) and the [model] settings of a checkpoint."""
    with h5py.File(path, "r") as f:
        fmt = f.attrs.get("format", b"")
        fmt = fmt.decode() if isinstance(fmt, bytes) else str(fmt)
        if fmt != "wte-checkpoint":
            raise SystemExit(f"compare_torch: '{path}' is not a wte checkpoint (format '{fmt}')")
        params = {name: f[name][...] for name in ("wte", "wpe", "ln_f/g", "ln_f/b", "lm_head")
                  if name in f}
        ini = f["config/ini"][()]
        ini = ini.decode() if isinstance(ini, bytes) else str(ini)
    cfg = configparser.ConfigParser()
    cfg.read_string(ini)
    model = cfg["model"] if cfg.has_section("model") else {}
    ln_f = str(model.get("ln_f", "true")).strip().lower() in ("true", "1", "yes", "on")
    ln_eps = float(model.get("ln_eps", "1e-5"))
    return params, ln_f, ln_eps


def torch_forward_backward(params, inputs, targets, ln_f, ln_eps, dtype):
    """Loss, logits and {name: gradient} of the model in PyTorch at `dtype`."""
    t = {name: torch.tensor(value, dtype=dtype, requires_grad=True)
         for name, value in params.items()}
    x = torch.tensor(inputs, dtype=torch.long)
    y = torch.tensor(targets, dtype=torch.long)
    B, T = x.shape
    V, C = t["wte"].shape
    hidden_states = t["wte"][x] + t["wpe"][:T]
    h = F.layer_norm(hidden_states, (C,), t["ln_f/g"], t["ln_f/b"], ln_eps) if ln_f else hidden_states
    lm_head = t["lm_head"] if "lm_head" in t else t["wte"]
    logits = h @ lm_head.T
    loss = F.cross_entropy(logits.reshape(B * T, V), y.reshape(B * T))
    loss.backward()
    grads = {name: (p.grad.numpy() if p.grad is not None else np.zeros_like(params[name]))
             for name, p in t.items()}
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
    ap.add_argument("--tokens", required=True, help="token batch file (see wte grad --help)")
    ap.add_argument("--workdir", help="where grads.h5 goes (default: a temporary directory)")
    ap.add_argument("--rtol", type=float, default=1e-5)
    args = ap.parse_args()

    workdir = args.workdir or tempfile.mkdtemp(prefix="wte_compare_torch_")
    os.makedirs(workdir, exist_ok=True)
    grads_path = os.path.join(workdir, "grads.h5")
    run = subprocess.run([args.wte, "grad", "--checkpoint", args.checkpoint, "--tokens",
                          args.tokens, "--out", grads_path], capture_output=True, text=True)
    if run.returncode != 0:
        print(f"compare_torch: wte grad failed ({run.returncode}):\n{run.stdout}{run.stderr}",
              file=sys.stderr)
        return 2

    params, ln_f, ln_eps = read_model(args.checkpoint)
    with h5py.File(grads_path, "r") as f:
        inputs = f["inputs"][...]
        targets = f["targets"][...]
        wte_loss = float(f["loss"][()])
        wte_logits = f["logits"][...]
        wte_grads = {name: f[name][...] for name in params}

    torch.set_num_threads(1)
    loss32, logits32, grads32 = torch_forward_backward(params, inputs, targets, ln_f, ln_eps,
                                                       torch.float32)
    loss64, logits64, grads64 = torch_forward_backward(params, inputs, targets, ln_f, ln_eps,
                                                       torch.float64)
    V, C = params["wte"].shape
    B, T = inputs.shape
    print(f"compare_torch: {args.checkpoint}: vocab_size {V}, d_model {C}, n_ctx "
          f"{params['wpe'].shape[0]}, ln_f {'on' if ln_f else 'off'}, "
          f"{'untied' if 'lm_head' in params else 'tied'}; batch B {B}, T {T}; torch {torch.__version__}")
    print(f"pass: max|wte - torch_f32| / max|torch_f32| <= {args.rtol:g}")
    rows = [("loss", wte_loss, loss32, loss64), ("logits", wte_logits, logits32, logits64)]
    rows += [(name, wte_grads[name], grads32[name], grads64[name]) for name in params]
    failed = []
    for name, ours, t32, t64 in rows:
        r32 = rel_error(ours, t32)
        r64 = rel_error(ours, t64)
        ok = r32 <= args.rtol
        if not ok:
            failed.append(name)
        print(f"  {name:10s} entries {np.asarray(ours).size:7d}  rel vs torch f32 {r32:9.2e}  "
              f"(vs torch f64 {r64:9.2e})  max|torch| {float(np.max(np.abs(t32))):9.3g}  "
              f"{'ok' if ok else 'FAIL'}")
    print(f"  wte loss {wte_loss:.9g}, torch f32 {loss32:.9g}, torch f64 {loss64:.12g}")
    if failed:
        print("compare_torch FAILED: " + ", ".join(failed))
        return 1
    print("compare_torch passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
