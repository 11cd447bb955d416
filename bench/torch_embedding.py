#!/usr/bin/python3
"""wte's embedding gather/scatter against PyTorch on the same shapes and ids, interleaved in one run.

Each of --rounds rounds runs `wte profile scatter` and `wte profile gather` (through --dist file:... so
both see the very same ids) and then, for each thread count, a fresh /usr/bin/python3 process timing
PyTorch with the fair set-up of bench/README.md: OpenBLAS (LD_LIBRARY_PATH=.../openblas-pthread,
OPENBLAS_NUM_THREADS) and tcmalloc (LD_PRELOAD), torch.set_num_threads. On a shared machine the rounds
interleave both sides, so each round's ratio sees one machine state: the tables give the median time
of each side over the rounds and the median (min-max) of the per-round ratios, with the load average
and the CPU.

    /usr/bin/python3 bench/torch_embedding.py --wte build/wte [--corpus-ids runs/x/train.bin] [--rounds 3] [--out]

--out writes the tables and the run's facts to bench/results/embedding-*.json (bench/README.md).

PyTorch parts, each the median of --repeat runs after a warm-up:
  forward        F.embedding(ids, weight), warm and cold (64 MiB written before each run, as
                 wte profile's flush)                                      vs wte gather (auto)
  dense-bwd      nn.Embedding backward, grad set to None each step (fresh V x C gradient, almost all
                 zeros)                                     vs wte scatter (auto: dwte (V, C) += the
                 lookup's rows, the tied model's case, where lm_head's GEMM has written dwte) and
                 vs wte scatter-rows (the lookup's gradient as its U distinct ids and their U summed
                 rows, what untied training hands to the lazy AdamW)
  zeros          torch.zeros(V, C) alone: the zero-fill the dense backward pays
  sparse-coalesce  nn.Embedding(sparse=True) backward + grad.coalesce(): the same content as wte's
                 scatter-rows (distinct ids, summed rows)               vs wte scatter-rows
  dense-adamw    the same backward + torch.optim.AdamW.step()              vs wte untied fused
  sparse-adam    nn.Embedding(sparse=True) backward + SparseAdam.step()       scatter + lazy AdamW
The gather table also gives wte's GB/s (rows read + written) as a fraction of the streaming copy
(vector loads, non-temporal stores) wte profile measured in the same run and cache state.
Exit 77 (skipped) with a message when Debian's python3-torch is not installed.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

import torch_bench


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
        flush_buf = torch.empty(16 << 20)  # 64 MiB, as wte profile's flush_caches
        flush_val = [0.0]

        def flush():
            flush_val[0] += 1.0
            flush_buf.fill_(flush_val[0])

        res = {"forward": median(lambda: F.embedding(ids, weight)),
               "forward-cold": median(lambda: F.embedding(ids, weight), flush)}
        if args.gather_only:
            out[name] = res
            continue
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

            def backward_coalesce():
                state["out"].backward(grad)
                state["coalesced"] = emb.weight.grad.coalesce()

            if not sparse:
                res["dense-bwd"] = median(backward, setup)
                res["dense-adamw"] = median(backward_step, setup)
            else:
                res["sparse-coalesce"] = median(backward_coalesce, setup)
                res["sparse-adam"] = median(backward_step, setup)
        res["zeros"] = median(lambda: torch.zeros(V, C))
        out[name] = res
    json.dump(out, sys.stdout)


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


PARTS = ("gather", "scatter")


def parts_list(text):
    """--parts: gather, scatter or both, comma-separated; anything else is refused by argparse."""
    items = text.split(",")
    bad = [item for item in items if item not in PARTS]
    if bad:
        raise argparse.ArgumentTypeError(
            "%r is not a part; allowed: gather, scatter or gather,scatter" % (bad[0],))
    return set(items)


def main():
    p = torch_bench.argument_parser(__doc__, shapes=True)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--rounds", type=int, default=3, help="interleaved wte/PyTorch rounds")
    p.add_argument("--parts", type=parts_list, default="gather,scatter",
                   help="gather, scatter or both (gather,scatter)")
    p.add_argument("--zipf", type=float, default=1.1)
    p.add_argument("--corpus-ids", help="int32 token ids of a corpus tokenized with a vocab of --vocab "
                   "(e.g. a run's train.bin); adds the distribution 'corpus'")
    torch_bench.add_out_option(p)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--gather-only", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--ids-dir", help=argparse.SUPPRESS)
    p.add_argument("--dists", nargs="*", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        args.threads = int(args.threads)
        return torch_worker(args)
    if torch_bench.torch_missing():
        return torch_bench.SKIP

    recorder = torch_bench.Recorder("embedding", wte=args.wte)
    headline = []
    parts = args.parts
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
    loads = []
    wte_runs, torch_runs = [], []  # per round: rows of wte profile; {threads: torch results}
    machine = {}
    with tempfile.TemporaryDirectory() as tmp:
        names = {}
        for name, ids in dists.items():
            fname = name.replace(":", "_")
            names[name] = fname
            ids.astype(np.int32).tofile(os.path.join(tmp, fname + ".bin"))
        label_of = {"file:" + os.path.join(tmp, names[n] + ".bin"): n for n in dists}

        def run_wte(what):
            out = os.path.join(tmp, what + ".json")
            cmd = [args.wte, "profile", what, "--vocab-size", str(V), "--d-model", str(C),
                   "--n-tokens", str(N), "--threads", args.threads, "--repeat", str(args.repeat),
                   "--strategy", "auto", "--json", out,
                   "--dist", ",".join("file:" + os.path.join(tmp, names[n] + ".bin") for n in dists)]
            print("running:", " ".join(cmd), file=sys.stderr)
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            j = json.load(open(out))
            machine.update(j["machine"])
            loads.append(j["machine"]["load_average"][0])
            loads.append(j["machine_after"]["load_average"][0])
            return j["kernels"]

        def run_torch(t, gather_only):
            out = torch_bench.run_worker(
                [sys.executable, __file__, "--worker", "--threads", str(t), "--vocab", str(V),
                 "--d-model", str(C), "--repeat", str(args.repeat), "--ids-dir", tmp, "--dists"]
                + [names[n] for n in dists] + (["--gather-only"] if gather_only else []),
                torch_bench.torch_env(t, passive_wait=False))
            return json.loads(out)

        for rnd in range(args.rounds):
            rows = []
            if "scatter" in parts:
                rows += [r for r in run_wte("scatter") if r["kernel"] in ("scatter", "scatter-rows", "lazy-adamw")]
            if "gather" in parts:
                rows += run_wte("gather")
            for r in rows:
                r["dist"] = label_of[r["dist"]]
            wte_runs.append(rows)
            torch_runs.append({t: run_torch(t, "scatter" not in parts) for t in threads})
            print("round %d of %d done" % (rnd + 1, args.rounds), file=sys.stderr)

    def wte_ms(rows, t, name, kernel, cache="warm", strategy=None):
        for r in rows:
            if (r["threads"] == t and r["dist"] == name and r["kernel"] == kernel and r["cache"] == cache
                    and (strategy is None or r["strategy"].startswith(strategy))):
                return r
        raise KeyError((t, name, kernel, cache, strategy))

    def stat(pairs):
        """pairs: per round (wte ms, torch ms): medians of each and of the per-round ratios."""
        ratios = [b / a for a, b in pairs]
        return (median([a for a, _ in pairs]), median([b for _, b in pairs]), median(ratios),
                min(ratios), max(ratios))

    head = ("%s (%s), %d CPUs; %s, L3 %d MiB; Highway %s; load average (1 min) during the runs %.1f-%.1f; "
            "V %d, d_model %d, %d tokens; %d interleaved rounds, each a median of %d runs; "
            "ratio = PyTorch time / wte time, median (min-max) over the rounds"
            % (machine.get("cpu_model", "?"), machine.get("cpu_family", "?"), machine.get("cpus", 0),
               "transparent huge pages " + machine.get("transparent_hugepages", "?"),
               machine.get("l3_bytes", 0) >> 20, machine.get("highway_target", "?"),
               min(loads), max(loads), V, C, N, args.rounds, args.repeat))
    lines = [head, ""]
    if "gather" in parts:
        lines += ["| threads | ids | cache | wte gather ms | torch F.embedding ms | ratio | wte GB/s | "
                  "streaming copy GB/s | wte of copy | wte stores |",
                  "|---:|---|---|---:|---:|---|---:|---:|---:|---|"]
        for t in threads:
            for name in dists:
                for cache, tkey in (("warm", "forward"), ("cold", "forward-cold")):
                    pairs, gbs, copy = [], [], []
                    for rows, tr in zip(wte_runs, torch_runs):
                        g = wte_ms(rows, t, name, "gather", cache, "auto")
                        cp = wte_ms(rows, t, name, "copy", cache, "vector-nt")
                        pairs.append((g["ms"], tr[t][names[name]][tkey]))
                        gbs.append(g["gbs"])
                        copy.append(cp["gbs"])
                        stores = g["strategy"]
                    a, b, r, lo, hi = stat(pairs)
                    if t == threads[-1] and name == "uniform" and cache == "warm":
                        headline.append(("embedding gather vs F.embedding, uniform ids, %d threads" % t,
                                         round(r, 2), "x"))
                    lines.append("| %d | %s | %s | %.3f | %.3f | %.2fx (%.2f-%.2f) | %.1f | %.1f | %.0f%% | %s |"
                                 % (t, name, cache, a, b, r, lo, hi, median(gbs), median(copy),
                                    100 * median([x / y for x, y in zip(gbs, copy)]), stores))
        lines.append("")
    if "scatter" in parts:
        lines += ["Lookup backward. wte scatter: dwte (V, C) += the lookup's rows (the tied model: lm_head's GEMM "
                  "wrote dwte, the scatter adds to U rows). wte rows: the gradient as U distinct ids + U summed "
                  "rows (the untied model's, consumed by the lazy AdamW). torch dense: nn.Embedding backward into "
                  "a fresh (V, C) gradient (its zero-fill alone: torch zeros). torch coalesced: sparse=True backward "
                  "+ coalesce(), the same content as wte rows.",
                  "",
                  "| threads | ids | wte scatter ms | wte rows ms | torch dense bwd ms | torch zeros ms | "
                  "dense / scatter | dense / rows | torch coalesced ms | coalesced / rows | "
                  "wte scatter bits vs %dt |" % threads[0],
                  "|---:|---|---:|---:|---:|---:|---|---|---:|---|---|"]
        for t in threads:
            for name in dists:
                sc, rw, co, zeros = [], [], [], []
                note = "-"
                for rows, tr in zip(wte_runs, torch_runs):
                    s_row = wte_ms(rows, t, name, "scatter")
                    r_row = wte_ms(rows, t, name, "scatter-rows")
                    note = s_row.get("note") or note
                    res = tr[t][names[name]]
                    sc.append((s_row["ms"], res["dense-bwd"]))
                    rw.append((r_row["ms"], res["dense-bwd"]))
                    co.append((r_row["ms"], res["sparse-coalesce"]))
                    zeros.append(res["zeros"])
                a, b, r, lo, hi = stat(sc)
                if t == threads[-1] and name == "uniform":
                    headline.append(("embedding backward (scatter) vs nn.Embedding's dense backward, "
                                     "uniform ids, %d threads" % t, round(r, 2), "x"))
                a2, _, r2, lo2, hi2 = stat(rw)
                _, b3, r3, lo3, hi3 = stat(co)
                lines.append("| %d | %s | %.3f | %.3f | %.3f | %.3f | %.2fx (%.2f-%.2f) | %.2fx (%.2f-%.2f) | "
                             "%.3f | %.2fx (%.2f-%.2f) | %s |"
                             % (t, name, a, a2, b, median(zeros), r, lo, hi, r2, lo2, hi2, b3, r3, lo3, hi3,
                                note))
        lines += ["", "Lookup backward + optimizer step (untied). wte: the fused scatter + lazy AdamW.",
                  "",
                  "| threads | ids | wte fused ms | torch dense bwd + AdamW ms | ratio | "
                  "torch sparse + SparseAdam ms | ratio |",
                  "|---:|---|---:|---:|---|---:|---|"]
        for t in threads:
            for name in dists:
                dn, sp = [], []
                for rows, tr in zip(wte_runs, torch_runs):
                    lz = wte_ms(rows, t, name, "lazy-adamw")["ms"]
                    res = tr[t][names[name]]
                    dn.append((lz, res["dense-adamw"]))
                    sp.append((lz, res["sparse-adam"]))
                a2, b2, r2, lo2, hi2 = stat(dn)
                _, b3, r3, lo3, hi3 = stat(sp)
                if t == threads[-1] and name == "uniform":
                    headline.append(("untied backward + lazy AdamW vs dense backward + AdamW.step(), "
                                     "uniform ids, %d threads" % t, round(r2, 1), "x"))
                lines.append("| %d | %s | %.3f | %.3f | %.1fx (%.1f-%.1f) | %.3f | %.1fx (%.1f-%.1f) |"
                             % (t, name, a2, b2, r2, lo2, hi2, b3, r3, lo3, hi3))
    text = "\n".join(lines)
    print(text)
    recorder.write(args.out, text, headline,
                   "the embedding's gather and backward against PyTorch on the same ids, V %d, "
                   "d_model %d, %d ids" % (V, C, N))
    return 0


if __name__ == "__main__":
    sys.exit(main())
