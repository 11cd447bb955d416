#!/usr/bin/python3
"""wte.torch.Embedding against torch.nn.Embedding inside a PyTorch training step, in one run.

    /usr/bin/python3 bench/torch_module_backward.py [--build build] [--threads 1,2] [--repeat 15]

For each thread count a fresh /usr/bin/python3 process with the fair set-up of
bench/README.md (OpenBLAS through LD_LIBRARY_PATH and OPENBLAS_NUM_THREADS, tcmalloc through
LD_PRELOAD, torch.set_num_threads = wte.set_num_threads = OMP_NUM_THREADS, OMP_WAIT_POLICY=passive)
times a training step of an embedding table V x C = 50257 x 768 looked up by 8192 ids (B 8, T 1024):

    optimizer.zero_grad()                        torch 1.13's default: set_to_none=False
    h = emb(ids); h.backward(dh)                 <- timed: the embedding's backward
    optimizer.step()                             AdamW over the table

dh is a fixed upstream gradient (the rest of a model's backward would produce it), so the timed
part is exactly the embedding's backward with autograd's gradient accumulation. Modes, each the
median of --repeat steps after warm-up, the two modules interleaved step by step so both see the
same machine state:
  zero_grad()                  weight.grad kept and zeroed in place (torch 1.x default)
  zero_grad(set_to_none=True)  a fresh gradient every step (torch 2.x default)
  fused lazy AdamW (untied)    wte.torch.Embedding(fused_adamw=...) backward = scatter + update;
                               against nn.Embedding's backward + torch.optim.AdamW.step()
Ids: uniform over V, and Zipf(1.1) (ranks shuffled over ids), like `wte profile --dist zipf:1.1`.
Prints a Markdown table; --out writes it and the run's facts to bench/results/module_backward-*.json.
Exit 77 when torch or the wte module is missing.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

import torch_bench
from torch_bench import OPENBLAS_DIR, TCMALLOC


def make_ids(dist, n, V, rng):
    import numpy as np
    if dist == "uniform":
        return rng.integers(0, V, size=n)
    s = float(dist.split(":")[1])
    p = 1.0 / np.arange(1, V + 1) ** s
    ranks = rng.choice(V, size=n, p=p / p.sum())
    return rng.permutation(V)[ranks]


def worker(args):
    import numpy as np
    import torch
    import wte
    import wte.torch as wtorch
    torch.set_num_threads(args.threads)
    wte.set_num_threads(args.threads)
    V, C, N = args.vocab, args.d_model, args.tokens
    rng = np.random.default_rng(0)
    out = {"simd_target": wte.simd_target()}
    for dist in args.dists.split(","):
        ids = torch.from_numpy(make_ids(dist, N, V, rng)).long().reshape(8, N // 8)
        dh = torch.randn(8, N // 8, C) * 0.02
        w0 = torch.randn(V, C) * 0.02
        res = {}
        for mode in ("keep", "none", "fused"):
            mods = {"torch": torch.nn.Embedding(V, C, _weight=w0.clone())}
            if mode == "fused":
                mods["wte"] = wtorch.Embedding(V, C, _weight=w0.clone(),
                                               fused_adamw=wtorch.LazyAdamW(lr=1e-3))
            else:
                mods["wte"] = wtorch.Embedding(V, C, _weight=w0.clone())
            opts = {k: torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.0)
                    for k, m in mods.items() if not (k == "wte" and mode == "fused")}
            times = {k: [] for k in mods}
            for r in range(args.repeat + 2):
                for k, m in mods.items():
                    opt = opts.get(k)
                    if opt is not None:
                        opt.zero_grad(set_to_none=(mode == "none"))
                    h = m(ids)
                    t0 = time.perf_counter()
                    h.backward(dh)
                    if mode == "fused" and k == "torch":
                        opt.step()  # the fused module's backward includes its optimizer step
                    t1 = time.perf_counter()
                    if opt is not None and mode != "fused":
                        opt.step()
                    if r >= 2:
                        times[k].append(t1 - t0)
            res[mode] = {k: float(np.median(v)) * 1e3 for k, v in times.items()}
        out[dist] = res
    json.dump(out, sys.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="wte's build directory (its python/ is used)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--d-model", type=int, default=768)
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--dists", default="uniform,zipf:1.1")
    torch_bench.add_out_option(ap)
    torch_bench.add_isa_option(ap)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--threads-one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    torch_bench.apply_isa(args.isa)
    if args.worker:
        args.threads = args.threads_one
        return worker(args)
    if args.tokens % 8:
        sys.exit("--tokens: need a multiple of 8 (B = 8)")
    pypath = os.path.join(os.path.abspath(args.build), "python")
    try:
        subprocess.run([sys.executable, "-c", "import torch, wte"], check=True,
                       env=dict(os.environ, PYTHONPATH=pypath), capture_output=True)
    except subprocess.CalledProcessError as e:
        print(f"skip: torch or wte does not import ({e.stderr.decode().strip().splitlines()[-1]})")
        sys.exit(77)
    cli = os.path.join(os.path.abspath(args.build), "wte")
    recorder = torch_bench.Recorder("module_backward", wte=cli if os.access(cli, os.X_OK) else None)
    headline = []
    print(f"CPU: {torch_bench.cpu_model()}; {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}; "
          f"{platform.python_version()}")
    lines = [f"V {args.vocab}, C {args.d_model}, {args.tokens} ids; median of {args.repeat} steps; ms "
             f"of the embedding's backward (h.backward(dh)) inside a training step", "",
             "| threads | ids | zero_grad: torch | wte | ratio | set_to_none: torch | wte | ratio "
             "| fused lazy AdamW: torch bwd + AdamW.step | wte fused bwd | ratio |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    print("\n".join(lines))
    for t in [int(x) for x in args.threads.split(",")]:
        env = dict(os.environ, PYTHONPATH=pypath, OMP_NUM_THREADS=str(t),
                   OPENBLAS_NUM_THREADS=str(t), OMP_WAIT_POLICY="passive")
        if os.path.isdir(OPENBLAS_DIR):
            env["LD_LIBRARY_PATH"] = OPENBLAS_DIR + ":" + env.get("LD_LIBRARY_PATH", "")
        if os.path.exists(TCMALLOC):
            env["LD_PRELOAD"] = TCMALLOC
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--threads-one", str(t),
               "--repeat", str(args.repeat), "--vocab", str(args.vocab), "--d-model",
               str(args.d_model), "--tokens", str(args.tokens), "--dists", args.dists]
        res = json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True,
                                        text=True).stdout)
        for dist in args.dists.split(","):
            r = res[dist]
            cells = []
            for mode in ("keep", "none", "fused"):
                tt, ww = r[mode]["torch"], r[mode]["wte"]
                cells += [f"{tt:.2f}", f"{ww:.2f}", f"{tt / ww:.1f}x"]
            lines.append(f"| {t} | {dist} | " + " | ".join(cells) + " |")
            print(lines[-1])
            if dist == args.dists.split(",")[0]:
                keep = r["keep"]["torch"] / r["keep"]["wte"]
                headline_row = (f"wte.torch.Embedding backward vs nn.Embedding in a PyTorch step, {dist} ids, "
                                f"{t} threads", round(keep, 1), "x")
    headline.append(headline_row)
    print(f"\nwte kernels on {res['simd_target']}")
    lines += ["", f"wte kernels on {res['simd_target']}"]
    recorder.write(args.out, "\n".join(lines), headline,
                   "wte.torch.Embedding against torch.nn.Embedding inside a PyTorch training step")


if __name__ == "__main__":
    sys.exit(main())
