#!/usr/bin/python3
"""The loss at GPT-2's vocabulary: wte's fused, chunked unembedding + cross-entropy against PyTorch's
F.cross_entropy(h @ wte.T, y) with backward, peak memory and time, in one run.

Each side runs in its own process (so neither sees the other's allocations); the sides are
interleaved: every round runs, at each thread count, PyTorch then wte (the order alternating from
round to round), so both see the same machine.
  PyTorch  (/usr/bin/python3, OpenBLAS + tcmalloc as in bench/README.md): h (N, C) and
           wte (V, C) leaf tensors with requires_grad, targets y (N); the first
           `F.cross_entropy(h @ wte.T, y).backward()` measures the growth of peak RSS (VmHWM, reset
           through /proc/self/clear_refs just before, minus VmRSS then): the logits, log-softmax,
           their gradients, wte.grad and h.grad. Then --repeat timed runs (grads set to None first,
           as a training loop's zero_grad does), median.
  wte      `wte profile loss` at the same N, V, C and threads: the fused path (--loss-chunk,
           --loss-vocab-tile) and, with --paths fused,unfused, the unfused one, each's first run
           measured the same way (its dh, dW, losses and the logits or the workspace), then
           --repeat timed runs (median).
Prints, per thread count and path, the median over the rounds of each side's time, the median
(min-max) of the per-round ratios PyTorch time / wte time, and the peak memory of both and their
ratio, with the CPU model and load averages; --out writes them and the run's facts to
bench/results/loss-*.json.

    /usr/bin/python3 bench/torch_loss.py --wte build/wte [--threads 1,2] [--rounds 3] [--out]

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


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else 0.5 * (xs[len(xs) // 2 - 1] + xs[len(xs) // 2])


def run_torch(args, threads, env):
    N, V, C = args.tokens, args.vocab, args.d_model
    return json.loads(torch_bench.run_worker(
        [sys.executable, os.path.abspath(__file__), "--worker", "--vocab", str(V), "--d-model", str(C),
         "--tokens", str(N), "--threads", str(threads), "--repeat", str(args.repeat)],
        torch_bench.torch_env(threads, base=env)))


def run_wte(args, threads, env, tmp):
    js = os.path.join(tmp, "loss.json")
    r = subprocess.run([args.wte, "profile", "loss", "--vocab-size", str(args.vocab), "--d-model",
                        str(args.d_model), "--n-tokens", str(args.tokens), "--threads", str(threads),
                        "--repeat", str(args.repeat), "--loss-chunk", args.loss_chunk,
                        "--loss-vocab-tile", args.loss_vocab_tile, "--paths", args.paths, "--json", js],
                       env=dict(env, OMP_NUM_THREADS=str(threads)), capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("wte profile loss failed:\n" + r.stdout + r.stderr)
    print(r.stdout, flush=True)
    return json.load(open(js))


def main():
    p = torch_bench.argument_parser(__doc__, shapes=True)
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (both sides each)")
    p.add_argument("--repeat", type=int, default=2, help="timed runs per side and round (median)")
    p.add_argument("--loss-chunk", default="0", help="wte's rows per block (comma list; 0: automatic)")
    p.add_argument("--loss-vocab-tile", default="0", help="wte's ids per tile (0: automatic)")
    p.add_argument("--paths", default="fused", help="wte's paths: fused, unfused or fused,unfused")
    torch_bench.add_out_option(p)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        args.threads = int(args.threads)
        return torch_worker(args)
    if torch_bench.torch_missing():
        return torch_bench.SKIP

    recorder = torch_bench.Recorder("loss", wte=args.wte)
    N, V, C = args.tokens, args.vocab, args.d_model
    threads = [int(t) for t in args.threads.split(",")]
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "passive")

    model = torch_bench.cpu_model()
    load_before = torch_bench.load_average()
    print("CPU: %s; load average %.2f; N %d, V %d, C %d, float32, threads %s; OMP_WAIT_POLICY=%s; "
          "%d rounds" % (model, load_before, N, V, C, args.threads, env["OMP_WAIT_POLICY"], args.rounds),
          flush=True)
    pt = {t: [] for t in threads}   # per thread count: PyTorch's result of every round
    wt = {t: [] for t in threads}   # per thread count: wte's paths of every round
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.rounds):
            for t in threads:
                print("round %d, %d thread(s)" % (k + 1, t), file=sys.stderr, flush=True)
                if k % 2 == 0:
                    pt[t].append(run_torch(args, t, env))
                    wt[t].append(run_wte(args, t, env, tmp)["paths"])
                else:
                    wt[t].append(run_wte(args, t, env, tmp)["paths"])
                    pt[t].append(run_torch(args, t, env))
    load_after = torch_bench.load_average()
    mib = 1.0 / (1 << 20)
    lines = ["| threads | path | peak RSS growth (MiB) | PyTorch peak / this | time fwd+bwd (ms), "
             "median of rounds | PyTorch time / this, median (min-max) of rounds |",
             "|---:|---|---:|---:|---:|---:|"]
    headline = []
    for t in threads:
        pt_ms = [r["ms"] for r in pt[t]]
        pt_peak = median([r["peak_rss_growth_bytes"] for r in pt[t]])
        lines.append("| %d | PyTorch %s `F.cross_entropy(h @ wte.T, y).backward()` | %.0f | 1 | %.0f | 1 |" %
                     (t, pt[t][0]["torch"], pt_peak * mib, median(pt_ms)))
        for i, x in enumerate(wt[t][0]):
            ms = [r[i]["ms"] for r in wt[t]]
            peak = median([r[i]["peak_rss_growth_bytes"] for r in wt[t]])
            ratios = [a / b for a, b in zip(pt_ms, ms)]
            lines.append("| %d | wte %s | %.0f | %.1f | %.0f | %.3f (%.3f-%.3f) |" % (
                t, x["path"], peak * mib, pt_peak / max(peak, 1), median(ms), median(ratios),
                min(ratios), max(ratios)))
            if x["fused"] and not any("time" in h[0] and "%d thread" % t in h[0] for h in headline):
                # Both figures at every thread count measured: each row of the README names its own.
                threads_text = "%d thread%s" % (t, "" if t == 1 else "s")
                headline.append(("loss memory: PyTorch's peak / wte's fused loss, V %d, %d tokens, %s"
                                 % (V, N, threads_text), round(pt_peak / max(peak, 1), 1), "x"))
                headline.append(("loss forward + backward: PyTorch's time / wte's fused loss, V %d, "
                                 "%d tokens, %s" % (V, N, threads_text), round(median(ratios), 2), "x"))
    table = "\n".join(lines)
    print(table)
    print("\nCPU: %s; load average %.2f before, %.2f after; OMP_WAIT_POLICY=%s; %d interleaved rounds, "
          "each side the median of %d runs after its first" % (model, load_before, load_after,
                                                              env["OMP_WAIT_POLICY"], args.rounds,
                                                              args.repeat))
    for h in headline:
        print("%s: %.2f%s" % h)
    recorder.write(args.out, table, headline,
                   "the loss (unembedding + cross-entropy, forward and backward): peak memory and "
                   "time of PyTorch and of wte's fused path, interleaved rounds at %s thread(s), N %d, "
                   "V %d, C %d" % (args.threads, N, V, C))
    return 0


if __name__ == "__main__":
    sys.exit(main())
