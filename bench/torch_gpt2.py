#!/usr/bin/python3
"""wte's training step of a GPT-2 block model against the same model in PyTorch, in one run.

Runs `wte profile step --config CONFIG --threads T --json ...` (the step's time, its model FLOPs
utilisation against the best f32 GEMM peak and the FMA limit that wte measures in that same run;
with --gemm, once per model.gemm value), then a fresh /usr/bin/python3 process timing PyTorch's
step of the same model, for each thread count, in --rounds interleaved rounds, with the
fair set-up of bench/README.md: OpenBLAS (LD_LIBRARY_PATH=.../openblas-pthread,
OPENBLAS_NUM_THREADS) and tcmalloc (LD_PRELOAD), torch.set_num_threads.

    /usr/bin/python3 bench/torch_gpt2.py --wte build/wte [--config configs/default.ini] [--out]

--out writes the table and the run's facts to bench/results/gpt2_step-*.json (bench/README.md).

The PyTorch model is GPT-2 (model.py) as an nn.Module, written like nanoGPT: token + position
embedding, n_layer blocks x = x + attn(ln_1(x)); x = x + mlp(ln_2(x)) with causal multi-head
attention (c_attn C->3C, c_proj C->C), MLP (c_fc C->4C, tanh GELU, c_proj 4C->C), ln_f, the
lm_head tied to wte (or untied, as the config says), mean cross-entropy. GPT-2's init: weights
N(0, 0.02²) (wte: model.wte_init_std, wpe: model.wpe_init_std), the two residual projections
N(0, (0.02/sqrt(2·n_layer))²), biases 0, LayerNorm g = 1, b = 0. One step =
zero_grad(set_to_none) + forward + backward + clip_grad_norm_ + AdamW.step() (weight decay on
the matrices and embeddings, never on biases and LayerNorms), the same work as wte's step.
Each side: the median of --steps steps after --warmup steps. Both run with OMP_WAIT_POLICY=passive
unless it is set (libgomp's spinning waits made 2-thread steps several times slower than 1-thread
steps on a shared machine; bench/README.md).

MFU = model FLOPs per second / GEMM peak, with model FLOPs per step
  6 · parameters · tokens + 12 · n_layer · T · d_model · tokens   (PaLM's convention: the
  attention's QKᵀ and ·V over the full T×T, forward and backward)
and the peak the best library's 2048³ f32 matmul timed by wte in the same run.
Exit 77 (skipped) with a message when Debian's python3-torch is not installed.
"""
import argparse
import configparser
import json
import os
import subprocess
import sys
import tempfile

import torch_bench


def read_config(path):
    """The model and training shapes of a wte INI config (missing keys: wte's built-in defaults)."""
    ini = configparser.ConfigParser(inline_comment_prefixes=("#", ";"))
    with open(path) as f:
        ini.read_file(f)

    def get(section, key, default, cast):
        return cast(ini.get(section, key, fallback=str(default)))

    def boolean(text):
        return text.strip().lower() in ("1", "true", "yes", "on")

    return {
        "vocab_size": get("model", "vocab_size", 8192, int),
        "d_model": get("model", "d_model", 256, int),
        "n_ctx": get("model", "n_ctx", 128, int),
        "n_layer": get("model", "n_layer", 0, int),
        "n_head": get("model", "n_head", 4, int),
        "ln_f": get("model", "ln_f", "true", boolean),
        "tie_embeddings": get("model", "tie_embeddings", "true", boolean),
        "wte_init_std": get("model", "wte_init_std", 0.02, float),
        "wpe_init_std": get("model", "wpe_init_std", 0.01, float),
        "ln_eps": get("model", "ln_eps", 1e-5, float),
        "seq_len": get("data", "seq_len", 128, int),
        "batch_size": get("train", "batch_size", 16, int),
        "lr": get("optim", "lr", 3e-3, float),
        "beta1": get("optim", "beta1", 0.9, float),
        "beta2": get("optim", "beta2", 0.95, float),
        "weight_decay": get("optim", "weight_decay", 0.0, float),
        "grad_clip": get("optim", "grad_clip", 1.0, float),
    }


def torch_worker(args):
    import math
    import time

    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = json.loads(args.cfg)
    V, C, L, NH = cfg["vocab_size"], cfg["d_model"], cfg["n_layer"], cfg["n_head"]
    B, T = cfg["batch_size"], cfg["seq_len"]
    hs = C // NH

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(C, eps=cfg["ln_eps"])
            self.c_attn = nn.Linear(C, 3 * C)
            self.attn_proj = nn.Linear(C, C)
            self.ln_2 = nn.LayerNorm(C, eps=cfg["ln_eps"])
            self.c_fc = nn.Linear(C, 4 * C)
            self.mlp_proj = nn.Linear(4 * C, C)
            self.register_buffer("causal", torch.tril(torch.ones(T, T, dtype=torch.bool)))

        def forward(self, x):
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q, k, v = (z.view(B, T, NH, hs).transpose(1, 2) for z in (q, k, v))  # (B,NH,T,hs)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            att = att.masked_fill(~self.causal, float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            x = x + self.attn_proj(y)
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, C)
            self.wpe = nn.Embedding(cfg["n_ctx"], C)
            self.h = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(C, eps=cfg["ln_eps"]) if cfg["ln_f"] else nn.Identity()
            self.lm_head = None if cfg["tie_embeddings"] else nn.Linear(C, V, bias=False)
            nn.init.normal_(self.wte.weight, std=cfg["wte_init_std"])
            nn.init.normal_(self.wpe.weight, std=cfg["wpe_init_std"])
            if self.lm_head is not None:
                nn.init.normal_(self.lm_head.weight, std=cfg["wte_init_std"])
            for block in self.h:
                for lin in (block.c_attn, block.attn_proj, block.c_fc, block.mlp_proj):
                    residual = lin in (block.attn_proj, block.mlp_proj)
                    nn.init.normal_(lin.weight, std=0.02 / math.sqrt(2 * L) if residual else 0.02)
                    nn.init.zeros_(lin.bias)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe.weight[:T]
            for block in self.h:
                x = block(x)
            x = self.ln_f(x)
            logits = x @ (self.wte.weight if self.lm_head is None else self.lm_head.weight).t()
            return F.cross_entropy(logits.view(-1, V), targets.view(-1))

    model = GPT()
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]), eps=1e-8)
    gen = torch.Generator().manual_seed(1234)
    ids = torch.randint(0, V, (B, T + 1), generator=gen)
    x, y = ids[:, :T].contiguous(), ids[:, 1:].contiguous()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["grad_clip"])
        opt.step()
        return loss

    times = []
    for k in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        step()
        if k >= args.warmup:
            times.append(time.perf_counter() - t0)
    params = sum(p.numel() for p in model.parameters())
    json.dump({"step_ms": float(np.median(times)) * 1e3, "parameters": params,
               "torch": torch.__version__}, sys.stdout)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = torch_bench.argument_parser(__doc__)
    p.add_argument("--config", default=os.path.join(here, "..", "configs", "default.ini"),
                   help="wte config whose model and batch both sides train (default: configs/default.ini)")
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--steps", type=int, default=10, help="timed steps per side (median)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    p.add_argument("--rounds", type=int, default=1,
                   help="interleaved rounds (each: wte and PyTorch at every thread count)")
    p.add_argument("--gemm", default="",
                   help="comma-separated model.gemm values wte runs with, each in every round "
                        "(default: the config's)")
    torch_bench.add_out_option(p)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--cfg", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        args.threads = int(args.threads)
        return torch_worker(args)
    if torch_bench.torch_missing():
        return torch_bench.SKIP

    recorder = torch_bench.Recorder("gpt2_step", wte=args.wte)
    cfg = read_config(args.config)
    if cfg["n_layer"] == 0:
        print("note: %s has n_layer = 0 (no blocks): comparing the embedding-only model" % args.config,
              file=sys.stderr)
    threads = [int(t) for t in args.threads.split(",")]
    gemms = [g for g in args.gemm.split(",") if g] or [""]
    wte_env = dict(os.environ)
    wte_env.setdefault("OMP_WAIT_POLICY", "passive")
    wte_runs = {(g, t): [] for g in gemms for t in threads}
    torch_runs = {t: [] for t in threads}
    wte_out = ""
    with tempfile.TemporaryDirectory() as tmp:
        # Interleaved rounds: each round runs wte (each model.gemm) and PyTorch at every thread count.
        for r in range(args.rounds):
            for t in threads:
                for g in gemms:
                    wte_json = os.path.join(tmp, "wte.json")
                    cmd = [args.wte, "profile", "step", "--config", args.config, "--threads", str(t),
                           "--repeat", str(args.steps), "--json", wte_json]
                    if g:
                        cmd.append("--model.gemm=" + g)
                    print("round %d: %s" % (r + 1, " ".join(cmd)), file=sys.stderr)
                    wte_out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                                             env=wte_env).stdout
                    wte_runs[(g, t)].append(json.load(open(wte_json))["step"][0])
                print("round %d: PyTorch step, %d thread(s)" % (r + 1, t), file=sys.stderr)
                out = torch_bench.run_worker([sys.executable, os.path.abspath(__file__), "--worker",
                                              "--threads", str(t), "--steps", str(args.steps), "--warmup",
                                              str(args.warmup), "--cfg", json.dumps(cfg)],
                                             torch_bench.torch_env(t))
                torch_runs[t].append(json.loads(out))

    def med(x):
        x = sorted(x)
        return x[len(x) // 2] if len(x) % 2 else 0.5 * (x[len(x) // 2 - 1] + x[len(x) // 2])

    tokens = cfg["batch_size"] * cfg["seq_len"]
    lines = [
        "%s: V %d, d_model %d, n_layer %d, n_head %d, B %d, T %d, %s; %d interleaved round(s), each "
        "side the median of %d steps after %d warm-up; PyTorch %s (OpenBLAS + tcmalloc); medians over "
        "the rounds, per-round ratios as median (min-max)" % (
            os.path.basename(args.config), cfg["vocab_size"], cfg["d_model"], cfg["n_layer"],
            cfg["n_head"], cfg["batch_size"], cfg["seq_len"],
            "tied" if cfg["tie_embeddings"] else "untied", args.rounds, args.steps, args.warmup,
            torch_runs[threads[0]][0]["torch"]),
        "",
        "| threads | model.gemm | wte ms/step | wte tokens/s | PyTorch ms/step | PyTorch tokens/s | wte / PyTorch "
        "| f32 GEMM peak GFLOP/s (library) | FMA limit GFLOP/s | wte MFU (peak / FMA) | PyTorch MFU (peak) |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    headline = []
    for t in threads:
        trs = torch_runs[t]
        for g in gemms:
            ss = wte_runs[(g, t)]
            for s, tr in zip(ss, trs):
                if tr["parameters"] != s["parameters"]:
                    sys.exit("parameter counts differ: wte %d, PyTorch %d" % (s["parameters"], tr["parameters"]))
            ratios = [tr["step_ms"] / s["step_ms"] for s, tr in zip(ss, trs)]
            wte_ms, torch_ms = med([s["step_ms"] for s in ss]), med([tr["step_ms"] for tr in trs])
            peak = med([s["gemm_peak_gflops"] for s in ss])
            fma = med([s.get("fma_limit_gflops", 0) for s in ss])
            flops = ss[0]["model_flops"]
            lines.append("| %d | %s | %.1f | %.0f | %.1f | %.0f | %.2fx (%.2f-%.2f) | %.0f (%s) | %.0f | %.0f%% / %.0f%% | %.0f%% |" % (
                t, g or "(config)", wte_ms, tokens / wte_ms * 1e3, torch_ms, tokens / torch_ms * 1e3,
                med(ratios), min(ratios), max(ratios), peak, ss[-1].get("gemm_peak_library", "onednn"),
                fma, 100 * flops / (wte_ms * 1e-3) / (peak * 1e9),
                100 * flops / (wte_ms * 1e-3) / (fma * 1e9) if fma else 0,
                100 * flops / (torch_ms * 1e-3) / (peak * 1e9)))
            what = "training step vs PyTorch, %s, %d threads" % (os.path.basename(args.config), t)
            if g and g != "auto":
                what += ", model.gemm = " + g
            headline.append((what, round(med(ratios), 2), "x"))
    text = "\n".join(lines)
    print(wte_out)
    print(text)
    recorder.write(args.out, text, headline,
                   "a training step of %s in wte and in PyTorch, tokens/s and MFU" % os.path.basename(args.config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
