#!/usr/bin/python3
"""GPT-2 small's shapes (configs/gpt2_small.ini: V 50257, d_model 768, 12 layers, 12 heads,
n_ctx = T = 1024, tied lm_head): wte's training step against PyTorch's, wte bf16 against wte
float32, and the peak resident memory of both at a batch of 4 sequences, in one run.

Time, B 1, in --rounds interleaved rounds; each round, at every thread count (--threads, default
1,2), runs both sides one after the other (the order alternating from round to round):
  wte      `wte profile step --config CONFIG --matmul-precision f32,bf16 --repeat STEPS`: the median
           step of float32 GEMMs, then of bf16 GEMMs, in one process (the first step of each
           untimed), with the oneDNN f32 GEMM peak measured between the steps;
  PyTorch  bench/torch_gpt2.py's model (an nn.Module of the same GPT-2, tied, AdamW, clip) in a
           fresh /usr/bin/python3 process with OpenBLAS + tcmalloc (bench/README.md), the median
           of STEPS steps after --warmup.
The table gives each side's median over the rounds and the median (min-max) of the per-round
ratios: PyTorch / wte float32, wte float32 / wte bf16, and the same for attention's parts (wte's
parts whose names hold "attention" or "causal softmax", or start with attn_tiled, forward and
backward), with both MFUs (PaLM's count and the causal one, against the f32 peak of the run).

Memory, B --mem-batch (4), T 1024, --threads[-1] threads: /usr/bin/time -v's maximum resident set
size of a process running a few training steps: `wte profile step --train.batch_size=4` (float32,
--mem-steps timed steps after the first; its GEMM peak probe, three 2048² float32 matrices,
48 MiB, is included) and PyTorch's worker (--mem-steps steps after one warm-up step).

    /usr/bin/python3 bench/gpt2_small.py --wte build/wte [--rounds 2] [--steps 2] [--out]

--out writes the table and the run's facts to bench/results/gpt2_small-*.json (bench/README.md).
Exit 77 (skipped) with a message when Debian's python3-torch is not installed.

A side that cannot run is a row or a cell that says why, and the run goes on: on a CPU where
oneDNN has no bf16 GEMM (no AVX512_BF16 or AMX, or --isa avx2) wte's bf16 step is not run (its
bf16 mode would run float32 GEMMs); a side that fails in a round is left out of the later rounds,
its error kept in the table, and the results file holds everything measured.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import torch_bench
import torch_gpt2

HERE = os.path.dirname(os.path.abspath(__file__))
TIME = "/usr/bin/time"


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else 0.5 * (xs[len(xs) // 2 - 1] + xs[len(xs) // 2])


def spread(xs):
    return "%.2fx (%.2f-%.2f)" % (median(xs), min(xs), max(xs))


def attention_ms(step):
    """wte's attention parts of one step profile, forward and backward: the dense path's QKᵀ,
    causal softmax and ·V, or the tiled path's attn_tiled_fwd and attn_tiled_bwd."""
    return sum(p["ms"] for p in step["parts"]
               if "attention" in p["part"] or "causal softmax" in p["part"]
               or p["part"].startswith("attn_tiled"))


def wte_env():
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "passive")
    return env


class SideFailed(Exception):
    """One side of a round failed; the message says what ran and its output's tail."""


def run_wte(args, threads, tmp, precisions):
    """{precision: step profile} of one `wte profile step` at `threads`, for each of `precisions`
    ("f32", "bf16"); raises SideFailed when wte fails."""
    js = os.path.join(tmp, "wte.json")
    cmd = [args.wte, "profile", "step", "--config", args.config, "--threads", str(threads),
           "--matmul-precision", ",".join(precisions), "--repeat", str(args.steps), "--json", js]
    r = subprocess.run(cmd, env=wte_env(), capture_output=True, text=True)
    if r.returncode != 0:
        raise SideFailed("%s failed (exit %d): %s" % (" ".join(cmd), r.returncode,
                                                     (r.stdout + r.stderr)[-1500:]))
    print(r.stdout, flush=True)
    # In the order asked for: the JSON's matmul_precision says what ran, which is f32 for a bf16
    # request that fell back.
    with open(js) as f:
        return dict(zip(precisions, json.load(f)["step"]))


def run_torch(args, cfg, threads):
    """PyTorch's result of one worker run; raises SideFailed when the worker fails."""
    try:
        return json.loads(torch_bench.run_worker(torch_cmd(args, cfg, threads, args.steps, args.warmup),
                                                 torch_bench.torch_env(threads)))
    except SystemExit as e:  # run_worker's report of a failed worker
        raise SideFailed(str(e)[-1500:]) from None


def torch_cmd(args, cfg, threads, steps, warmup):
    return [sys.executable, os.path.join(HERE, "torch_gpt2.py"), "--worker", "--threads", str(threads),
            "--steps", str(steps), "--warmup", str(warmup), "--cfg", json.dumps(cfg)]


def max_rss_bytes(cmd, env, what):
    """Runs cmd under /usr/bin/time -v; its maximum resident set size in bytes."""
    r = subprocess.run([TIME, "-v"] + cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("%s failed:\n%s" % (what, r.stderr[-4000:]))
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr)
    if not m:
        sys.exit("%s: no 'Maximum resident set size' in /usr/bin/time -v's output" % what)
    return int(m.group(1)) * 1024


def time_rounds(args, cfg, threads, tmp, precisions):
    """Per thread count, every round's wte profiles and PyTorch results (the rounds each side
    completed), and {(side, threads): error} of the sides that failed (not run again)."""
    wte = {t: [] for t in threads}
    pt = {t: [] for t in threads}
    failed = {}
    for k in range(args.rounds):
        for t in threads:
            print("round %d, %d thread(s)" % (k + 1, t), file=sys.stderr, flush=True)
            sides = ["torch", "wte"] if k % 2 == 0 else ["wte", "torch"]
            for side in sides:
                if (side, t) in failed:
                    continue
                try:
                    if side == "wte":
                        wte[t].append(run_wte(args, t, tmp, precisions))
                    else:
                        pt[t].append(run_torch(args, cfg, t))
                except SideFailed as e:
                    print("round %d: %s, %d thread(s) failed; not run again: %s" % (k + 1, side, t, e),
                          file=sys.stderr, flush=True)
                    failed[(side, t)] = str(e)
    return wte, pt, failed


def time_table(args, cfg, threads, wte, pt, failed, bf16_missing):
    """The timing table: a row per thread count; a side that did not run says so in its cells
    (bf16_missing: why the bf16 step was not run, or None) and, below the table, why."""
    lines = [
        "| threads | wte f32 ms/step | PyTorch ms/step | PyTorch / wte f32 | wte bf16 ms/step "
        "| wte f32 / bf16 | wte attention ms (f32) | attention share | f32 GEMM peak GFLOP/s "
        "| wte MFU PaLM / causal | PyTorch MFU PaLM / causal |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    headline = []
    notes = []
    for t in threads:
        for side in ("wte", "torch"):
            if (side, t) in failed:
                notes.append("%s at %d thread(s) failed (%d rounds measured before): %s" % (
                    "wte" if side == "wte" else "PyTorch", t,
                    len(wte[t]) if side == "wte" else len(pt[t]), failed[(side, t)]))
        if not wte[t]:
            lines.append("| %d | failed |%s" % (t, " |" * 10))
            continue
        f32 = [r["f32"]["step_ms"] for r in wte[t]]
        tms = [r["step_ms"] for r in pt[t]]
        for r in pt[t]:
            if r["parameters"] != wte[t][0]["f32"]["parameters"]:
                sys.exit("parameter counts differ: wte %d, PyTorch %d" %
                         (wte[t][0]["f32"]["parameters"], r["parameters"]))
        att = [attention_ms(r["f32"]) for r in wte[t]]
        peak = median([r["f32"]["gemm_peak_gflops"] for r in wte[t]])
        s = wte[t][0]["f32"]
        mfu = lambda flops, ms: 100 * flops / (ms * 1e-3) / (peak * 1e9)
        if bf16_missing:
            bf16_cells = ("not run", "not run")
        else:
            bf16 = [r["bf16"]["step_ms"] for r in wte[t]]
            bf16_cells = ("%.0f" % median(bf16), spread([a / b for a, b in zip(f32, bf16)]))
        if tms:
            n = min(len(tms), len(f32))  # the rounds both sides completed
            vs_torch = [a / b for a, b in zip(tms[:n], f32[:n])]
            torch_cells = ("%.0f" % median(tms), spread(vs_torch),
                           "%.0f%% / %.0f%%" % (mfu(s["model_flops"], median(tms)),
                                                mfu(s["model_flops_causal"], median(tms))))
        else:
            vs_torch = []
            torch_cells = ("failed", "-", "-")
        lines.append("| %d | %.0f | %s | %s | %s | %s | %.0f | %.0f%% | %.0f | %.0f%% / %.0f%% | %s |" % (
            t, median(f32), torch_cells[0], torch_cells[1], bf16_cells[0], bf16_cells[1],
            median(att), 100 * median(att) / median(f32), peak,
            mfu(s["model_flops"], median(f32)), mfu(s["model_flops_causal"], median(f32)),
            torch_cells[2]))
        # The README's table quotes the largest thread count (the other rows are in the file's table).
        if t == threads[-1] and vs_torch:
            headline.append(("GPT-2 small training step (T 1024, B 1, float32) vs PyTorch, %d thread%s"
                             % (t, "" if t == 1 else "s"), round(median(vs_torch), 2), "x"))
    if bf16_missing:
        notes.append("wte bf16: not run: %s" % bf16_missing)
    if notes:
        lines += [""] + ["- " + n.replace("\n", " ") for n in notes]
    return lines, headline


def memory_table(args, cfg, threads):
    """The peak-memory table; a side that fails is a row saying so (no ratio, no headline)."""
    t = threads[-1]
    mcfg = dict(cfg, batch_size=args.mem_batch)
    env = dict(wte_env(), OMP_NUM_THREADS=str(t))
    rss = {}
    for side in ("wte", "PyTorch"):
        print("memory: %s, B %d, %d thread(s)" % (side, args.mem_batch, t), file=sys.stderr, flush=True)
        try:
            if side == "wte":
                rss[side] = max_rss_bytes([args.wte, "profile", "step", "--config", args.config,
                                           "--threads", str(t), "--train.batch_size=%d" % args.mem_batch,
                                           "--repeat", str(args.mem_steps)], env, "wte profile step (memory)")
            else:
                rss[side] = max_rss_bytes(torch_cmd(args, mcfg, t, args.mem_steps, 1),
                                          torch_bench.torch_env(t), "PyTorch worker (memory)")
        except SystemExit as e:  # max_rss_bytes's report of a failed run
            rss[side] = str(e).replace("\n", " ")[-500:]
            print("memory: %s failed: %s" % (side, rss[side]), file=sys.stderr, flush=True)
    mib = 1.0 / (1 << 20)
    ok = all(isinstance(v, int) for v in rss.values())
    lines = ["", "Peak resident memory (/usr/bin/time -v), B %d, T %d, float32, %d thread(s), %d "
             "training steps after the first:" % (args.mem_batch, cfg["seq_len"], t, args.mem_steps), "",
             "| side | maximum resident set (MiB) | / PyTorch's |", "|---|---:|---:|"]
    for side in ("wte", "PyTorch"):
        v = rss[side]
        if not isinstance(v, int):
            lines.append("| %s | failed: %s | - |" % (side, v))
        else:
            lines.append("| %s | %.0f | %s |" % (side, v * mib,
                                                 "%.2f" % (v / rss["PyTorch"]) if ok else "-"))
    headline = []
    if ok:
        headline.append(("GPT-2 small training peak memory (T 1024, B %d), wte / PyTorch" % args.mem_batch,
                         round(rss["wte"] / rss["PyTorch"], 2), "x"))
    return lines, headline


def main():
    p = torch_bench.argument_parser(__doc__)
    p.add_argument("--config", default=os.path.join(HERE, "..", "configs", "gpt2_small.ini"),
                   help="the GPT-2 small config (default: configs/gpt2_small.ini)")
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--rounds", type=int, default=2, help="interleaved rounds")
    p.add_argument("--steps", type=int, default=2, help="timed steps per side and round (median)")
    p.add_argument("--warmup", type=int, default=1, help="PyTorch's untimed steps first")
    p.add_argument("--mem-batch", type=int, default=4, help="batch of the memory runs (0: skip them)")
    p.add_argument("--mem-steps", type=int, default=2, help="timed steps of the memory runs")
    torch_bench.add_out_option(p)
    args = p.parse_args()
    if torch_bench.torch_missing():
        return torch_bench.SKIP
    if args.mem_batch and not os.access(TIME, os.X_OK):
        sys.exit("%s missing (Debian package `time`); --mem-batch 0 skips the memory runs" % TIME)
    recorder = torch_bench.Recorder("gpt2_small", wte=args.wte)
    cfg = torch_gpt2.read_config(args.config)
    threads = [int(t) for t in args.threads.split(",")]
    print("CPU: %s; load average %.2f; %s: V %d, d_model %d, n_layer %d, n_head %d, B %d, T %d; "
          "%d rounds of %d steps per side" % (
              torch_bench.cpu_model(), torch_bench.load_average(), os.path.basename(args.config),
              cfg["vocab_size"], cfg["d_model"], cfg["n_layer"], cfg["n_head"], cfg["batch_size"],
              cfg["seq_len"], args.rounds, args.steps), flush=True)
    versions = torch_bench.wte_versions(args.wte)
    bf16_missing = None
    if not torch_bench.wte_has_bf16_gemms(args.wte):
        bf16_missing = ("oneDNN's ISA here is %s, without AVX512_BF16 or AMX: wte's bf16 mode would "
                        "run float32 GEMMs" % versions.get("onednn_isa", "unknown"))
        print("wte bf16: not run: %s" % bf16_missing, flush=True)
    precisions = ["f32"] if bf16_missing else ["f32", "bf16"]
    with tempfile.TemporaryDirectory() as tmp:
        wte, pt, failed = time_rounds(args, cfg, threads, tmp, precisions)
    lines, headline = time_table(args, cfg, threads, wte, pt, failed, bf16_missing)
    torch_runs = [r for t in threads for r in pt[t]]
    lines.insert(0, "%s, B %d, T %d: median of %d rounds (each side the median of %d steps after "
                    "its first); PyTorch %s (OpenBLAS + tcmalloc); ratios: median (min-max) of the "
                    "rounds" % (os.path.basename(args.config), cfg["batch_size"], cfg["seq_len"],
                                args.rounds, args.steps,
                                torch_runs[0]["torch"] if torch_runs else "(no run completed)"))
    lines.insert(1, "")
    if args.mem_batch:
        more, h = memory_table(args, cfg, threads)
        lines += more
        headline += h
    text = "\n".join(lines)
    print(text)
    print("\nload average now %.2f" % torch_bench.load_average())
    recorder.write(args.out, text, headline,
                   "GPT-2 small's shapes (T 1024): wte's float32 and bf16 training step against "
                   "PyTorch's, interleaved at %s thread(s), and the peak resident memory of training "
                   "at B %d" % (args.threads, args.mem_batch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
