#!/usr/bin/python3
"""The loss at GPT-2's vocabulary: wte's fused, chunked unembedding + cross-entropy against PyTorch's
F.cross_entropy(h @ wte.T, y) with backward, peak memory and time, in one run.

Each side runs in its own process (so neither sees the other's allocations), one after the other:
  PyTorch  (/usr/bin/python3, OpenBLAS + tcmalloc as in bench/README.md): h (N, C) and
           wte (V, C) leaf tensors with requires_grad, targets y (N); the first
           `F.cross_entropy(h @ wte.T, y).backward()` measures the growth of peak RSS (VmHWM, reset
           through /proc/self/clear_refs just before, minus VmRSS then): the logits, log-softmax,
           their gradients, wte.grad and h.grad. Then --repeat timed runs (grads set to None first,
           as a training loop's zero_grad does), median.
  wte      `wte profile loss` at the same N, V, C and threads: the fused path (--loss-chunk) and the
           unfused one, each's first run measured the same way (its dh, dW, losses and the logits or
           the workspace), then timed interleaved (median).
Prints every number, PyTorch's peak / wte fused peak and wte fused time / unfused time, with the
CPU model and load averages; --out writes them and the run's facts to bench/results/loss-*.json.

    /usr/bin/python3 bench/torch_loss.py --wte build/wte [--threads 2] [--loss-chunk 0] [--out]

Exit 77 (skipped) with a message when Debian's python3-torch is not installed.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch_bench


def status_bytes(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def torch_worker(args):
    import time

    import torch
    import torch.nn.functional as F
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    N, V, C = args.tokens, args.vocab, args.d_model
    h = torch.randn(N, C).requires_grad_()
    wte = (torch.randn(V, C) * 0.02).requires_grad_()
    y = torch.randint(0, V, (N,))

    def step():
        loss = F.cross_entropy(h @ wte.T, y)
        loss.backward()
        return loss

    ok = reset_peak()
    before = status_bytes("VmRSS")
    t0 = time.perf_counter()
    step()
    first = time.perf_counter() - t0
    peak = status_bytes("VmHWM") - before
    times = []
    for _ in range(args.repeat):
        h.grad = None
        wte.grad = None
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    times.sort()
    json.dump({"peak_rss_growth_bytes": peak, "first_run_ms": first * 1e3,
               "ms": times[len(times) // 2] * 1e3, "peak_reset": ok,
               "torch": torch.__version__}, sys.stdout)


def main():
    p = torch_bench.argument_parser(__doc__, shapes=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--loss-chunk", default="0", help="wte's rows per block (comma list; 0: automatic)")
    torch_bench.add_out_option(p)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return torch_worker(args)
    if torch_bench.torch_missing():
        return torch_bench.SKIP

    recorder = torch_bench.Recorder("loss", wte=args.wte)
    N, V, C, threads = args.tokens, args.vocab, args.d_model, args.threads
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "passive")
    env["OMP_NUM_THREADS"] = str(threads)

    model = torch_bench.cpu_model()
    load_before = torch_bench.load_average()
    print("CPU: %s; load average %.2f; N %d, V %d, C %d, float32, %d thread(s); OMP_WAIT_POLICY=%s" %
          (model, load_before, N, V, C, threads, env["OMP_WAIT_POLICY"]), flush=True)
    pt = json.loads(torch_bench.run_worker(
        [sys.executable, os.path.abspath(__file__), "--worker", "--vocab", str(V), "--d-model", str(C),
         "--tokens", str(N), "--threads", str(threads), "--repeat", str(args.repeat)],
        torch_bench.torch_env(threads, base=env)))
    with tempfile.TemporaryDirectory() as tmp:
        js = os.path.join(tmp, "loss.json")
        r = subprocess.run([args.wte, "profile", "loss", "--vocab-size", str(V), "--d-model", str(C),
                            "--n-tokens", str(N), "--threads", str(threads), "--repeat",
                            str(args.repeat), "--loss-chunk", args.loss_chunk, "--json", js],
                           env=env, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("wte profile loss failed:\n" + r.stdout + r.stderr)
        print(r.stdout, flush=True)
        w = json.load(open(js))
    load_after = torch_bench.load_average()
    unfused = [x for x in w["paths"] if not x["fused"]][0]
    mib = 1.0 / (1 << 20)
    lines = ["| path | peak RSS growth (MiB) | time fwd+bwd (ms) | PyTorch peak / this | time / wte unfused |",
             "|---|---:|---:|---:|---:|"]
    lines.append("| PyTorch %s `F.cross_entropy(h @ wte.T, y).backward()` | %.0f | %.0f | 1 | %.2f |" %
                 (pt["torch"], pt["peak_rss_growth_bytes"] * mib, pt["ms"], pt["ms"] / unfused["ms"]))
    for x in w["paths"]:
        lines.append("| wte %s | %.0f | %.0f | %.1f | %.3f |" %
                     (x["path"], x["peak_rss_growth_bytes"] * mib, x["ms"],
                      pt["peak_rss_growth_bytes"] / max(x["peak_rss_growth_bytes"], 1),
                      x["ms"] / unfused["ms"]))
    table = "\n".join(lines)
    print(table)
    print("\nCPU: %s; load average %.2f before, %.2f after; %d thread(s); OMP_WAIT_POLICY=%s; median of "
          "%d runs after the first" % (model, load_before, load_after, threads, env["OMP_WAIT_POLICY"],
                                       args.repeat))
    headline = []
    for x in w["paths"]:
        if x["fused"]:
            peak = pt["peak_rss_growth_bytes"] / max(x["peak_rss_growth_bytes"], 1)
            print("%s: PyTorch peak / fused peak = %.1f, fused time / unfused time = %.3f"
                  % (x["path"], peak, x["ms"] / unfused["ms"]))
            if not headline:
                headline.append(("loss memory: PyTorch's peak / wte's fused loss, V %d, %d tokens" % (V, N),
                                 round(peak, 1), "x"))
                headline.append(("loss forward + backward: PyTorch's time / wte's fused loss, V %d, %d tokens, "
                                 "%d threads" % (V, N, threads), round(pt["ms"] / x["ms"], 2), "x"))
    recorder.write(args.out, table, headline,
                   "the loss (unembedding + cross-entropy, forward and backward): peak memory and "
                   "time of PyTorch and of wte's fused and unfused paths, N %d, V %d, C %d" % (N, V, C))
    return 0


if __name__ == "__main__":
    sys.exit(main())
