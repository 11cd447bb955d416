#!/usr/bin/python3
"""wte's embedding gather/scatter against PyTorch on the same shapes and ids, in one run.

Runs `wte profile gather,scatter` (through --dist file:... so both see the very same ids) and, for each
thread count, a fresh /usr/bin/python3 process timing PyTorch with the fair set-up of
../shared/PLATFORM.md: OpenBLAS (LD_LIBRARY_PATH=.../openblas-pthread, OPENBLAS_NUM_THREADS) and
tcmalloc (LD_PRELOAD), torch.set_num_threads. Prints every time and the ratio PyTorch / wte.

    /usr/bin/python3 bench/torch_embedding.py --wte build/wte [--corpus-ids runs/x/train.bin]

PyTorch parts, each the median of --repeat warm runs after a warm-up:
  forward        F.embedding(ids, weight)                                    vs wte gather
  dense-bwd      nn.Embedding backward, grad set to None each step (fresh V x C gradient)
                                                                             vs wte scatter (auto)
  dense-adamw    the same backward + torch.optim.AdamW.step()                vs wte untied fused
  sparse-adam    nn.Embedding(sparse=True) backward + SparseAdam.step()         scatter + lazy AdamW
Exit 77 (skipped) with a message when Debian's python3-torch is not installed.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

OPENBLAS_DIR = "/usr/lib/x86_64-linux-gnu/openblas-pthread"
TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"


def torch_worker(args):
    import time
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    V, C = args.vocab, args.d_model
    out = {}
    for name in args.dists:
        ids = torch.from_numpy(np.fromfile(args.ids_dir + "/" + name + ".bin", dtype=np.int32)
                               .astype(np.int64))
        grad = torch.randn(ids.numel(), C) * 0.02

        def median(fn, setup=None):
            times = []
            for r in range(args.repeat + 1):
                if setup:
                    setup()
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
            return float(np.median(times[1:])) * 1e3

        weight = torch.randn(V, C) * 0.02
        res = {"forward": median(lambda: F.embedding(ids, weight))}
        for sparse in (False, True):
            emb = torch.nn.Embedding(V, C, sparse=sparse)
            opt = (torch.optim.SparseAdam(emb.parameters(), lr=1e-3) if sparse
                   else torch.optim.AdamW(emb.parameters(), lr=1e-3, weight_decay=0.0))
            state = {}

            def setup():
                emb.weight.grad = None  # zero_grad(set_to_none=True), as training loops do
                state["out"] = emb(ids)

            def backward():
                state["out"].backward(grad)

            def backward_step():
                state["out"].backward(grad)
                opt.step()

            if not sparse:
                res["dense-bwd"] = median(backward, setup)
                res["dense-adamw"] = median(backward_step, setup)
            else:
                res["sparse-adam"] = median(backward_step, setup)
        out[name] = res
    json.dump(out, sys.stdout)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--wte", default="build/wte", help="the built wte binary")
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--d-model", type=int, default=768)
    p.add_argument("--tokens", type=int, default=8192)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--zipf", type=float, default=1.1)
    p.add_argument("--corpus-ids", help="int32 token ids of a corpus tokenized with a vocab of --vocab "
                   "(e.g. a run's train.bin); adds the distribution 'corpus'")
    p.add_argument("--out", help="also write the markdown table here")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--ids-dir", help=argparse.SUPPRESS)
    p.add_argument("--dists", nargs="*", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        args.threads = int(args.threads)
        return torch_worker(args)
    try:
        import torch  # noqa: F401
    except ImportError:
        print("SKIP: PyTorch is not importable by /usr/bin/python3; install Debian's python3-torch "
              "(apt-get install python3-torch libopenblas0-pthread libtcmalloc-minimal4)")
        return 77

    V, C, N = args.vocab, args.d_model, args.tokens
    rng = np.random.default_rng(1234)
    dists = {"uniform": rng.integers(0, V, N, dtype=np.int64)}
    # Zipf over ranks, mapped through a fixed permutation (as wte profile's zipf:S)
    w = 1.0 / np.arange(1, V + 1) ** args.zipf
    dists["zipf:%g" % args.zipf] = rng.permutation(V)[rng.choice(V, N, p=w / w.sum())]
    if args.corpus_ids:
        ids = np.fromfile(args.corpus_ids, dtype=np.int32)
        if ids.size == 0 or ids.min() < 0 or ids.max() >= V:
            sys.exit("--corpus-ids %s: empty or ids outside [0, %d)" % (args.corpus_ids, V))
        dists["corpus"] = np.resize(ids, N)
    threads = [int(t) for t in args.threads.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        names = {}
        for name, ids in dists.items():
            fname = name.replace(":", "_")
            names[name] = fname
            ids.astype(np.int32).tofile(os.path.join(tmp, fname + ".bin"))
        wte_json = os.path.join(tmp, "wte.json")
        cmd = [args.wte, "profile", "all" , "--vocab", str(V), "--d-model", str(C), "--tokens", str(N),
               "--threads", args.threads, "--repeat", str(args.repeat), "--strategy", "auto",
               "--json", wte_json,
               "--dist", ",".join("file:" + os.path.join(tmp, names[n] + ".bin") for n in dists)]
        # `all` would add a step profile of the default config: ask for scatter (which also times
        # the gather limits) and gather separately instead.
        cmd[2] = "scatter"
        print("running:", " ".join(cmd), file=sys.stderr)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        wte_rows = json.load(open(wte_json))["kernels"]
        cmd_g = list(cmd)
        cmd_g[2] = "gather"
        cmd_g[cmd_g.index("--json") + 1] = wte_json + ".g"
        subprocess.run(cmd_g, check=True, stdout=subprocess.DEVNULL)
        # The gather's bound is the row memcpy timed interleaved with it in the gather run.
        gather_rows = json.load(open(wte_json + ".g"))["kernels"]
        wte_rows = [r for r in wte_rows if r["kernel"] != "row-memcpy"] + gather_rows

        torch_res = {}
        for t in threads:
            env = dict(os.environ, OMP_NUM_THREADS=str(t), OPENBLAS_NUM_THREADS=str(t))
            if os.path.isdir(OPENBLAS_DIR):
                env["LD_LIBRARY_PATH"] = OPENBLAS_DIR + ":" + env.get("LD_LIBRARY_PATH", "")
            if os.path.exists(TCMALLOC):
                env["LD_PRELOAD"] = TCMALLOC
            else:
                print("warning: %s missing: torch's dense backward will pay page faults" % TCMALLOC,
                      file=sys.stderr)
            r = subprocess.run([sys.executable, __file__, "--worker", "--threads", str(t), "--vocab",
                                str(V), "--d-model", str(C), "--repeat", str(args.repeat),
                                "--ids-dir", tmp, "--dists"] + [names[n] for n in dists],
                               env=env, check=True, capture_output=True, text=True)
            torch_res[t] = json.loads(r.stdout)

    def wte_ms(t, name, kernel):
        label = "file:" + os.path.join(tmp, names[name] + ".bin")
        for r in wte_rows:
            if r["threads"] == t and r["dist"] == label and r["kernel"] == kernel and r["cache"] == "warm":
                return r["ms"], r.get("note", "")
        raise KeyError((t, name, kernel))

    lines = ["V %d, d_model %d, %d tokens; medians of %d warm runs; ratio = PyTorch time / wte time"
             % (V, C, N, args.repeat), "",
             "| threads | ids | wte gather ms (of row-memcpy bound) | torch F.embedding ms | ratio "
             "| wte scatter ms | torch dense bwd ms | ratio | wte untied bwd + lazy AdamW ms "
             "| torch dense bwd + AdamW ms | ratio | torch sparse + SparseAdam ms | ratio | "
             "wte scatter bits vs %dt |" % threads[0],
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for t in threads:
        for name in dists:
            tr = torch_res[t][names[name]]
            g, _ = wte_ms(t, name, "gather")
            bound, _ = wte_ms(t, name, "row-memcpy")
            s, note = wte_ms(t, name, "scatter")
            lz, _ = wte_ms(t, name, "lazy-adamw")
            lines.append("| %d | %s | %.3f (%.0f%%) | %.3f | %.2fx | %.3f | %.3f | %.2fx | %.3f | %.3f | "
                         "%.1fx | %.3f | %.1fx | %s |" % (
                             t, name, g, 100 * bound / g, tr["forward"], tr["forward"] / g, s,
                             tr["dense-bwd"], tr["dense-bwd"] / s, lz, tr["dense-adamw"],
                             tr["dense-adamw"] / lz, tr["sparse-adam"], tr["sparse-adam"] / lz,
                             note or "-"))
    text = "\n".join(lines)
    print(text)
    if args.out:
        open(args.out, "w").write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
