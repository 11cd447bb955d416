#!/usr/bin/python3
"""Benchmark: wte import and a 16-token forward at GPT-2 small's shapes.

Writes a GPT-2 small-shaped model.safetensors with random weights in Hugging Face's layout
(V 50257, n_positions 1024, 12 layers, n_embd 768, 12 heads; F32 like huggingface.co/gpt2's file,
with its h.N.attn.bias buffers: 548 MB), config.json, and GPT-2's vocab.json/merges.txt
(datasets/gpt2 from datasets/fetch_gpt2_vocab.sh when present, else a synthetic byte-level BPE of
the same size, 50000 merges of byte pairs), then in each round, interleaved:
  - the I/O bound: read the safetensors file and write + fsync the same number of bytes (what an
    import must at least do; the page cache is warm for both, as for the import);
  - `wte import --from DIR --out gpt2.h5` (wall time of the command, and its CPU time, user +
    system, which a busy machine inflates less than the wall time);
  - `wte hidden-states --checkpoint gpt2.h5 --text TEXT --out hs.h5` with a 16-token TEXT: its
    printed forward time (16 positions through the KV-cache decoder, every layer, with logits)
    and the command's wall time (loading and validating the 500 MB checkpoint included);
  - the same forward in PyTorch (the test's re-implementation of transformers' GPT2Model, the
    whole sequence at once, same threads; Debian's torch with its default BLAS unless
    LD_LIBRARY_PATH selects OpenBLAS, see bench/README.md), for scale.
Prints the CPU model, the load average before each round, and the medians; --out writes them and
the run's facts to bench/results/hf_import-*.json.

Usage: /usr/bin/python3 bench/hf_gpt2_import.py --wte build/wte [--threads 2] [--rounds 3]
                                                [--workdir DIR] [--keep] [--out [DIR]]
"""
import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import test_hf_gpt2_interop as hf  # noqa: E402  (writer, tokenizer, torch forward)
import torch_bench  # noqa: E402  (the results file)

TEXT = "The river bank was muddy after the rain, so the money bank in town was closed all day"


def loadavg():
    return open("/proc/loadavg").read().split()[0]


def synthetic_tokenizer():
    b2u = hf.bytes_to_unicode()
    chars = list(b2u.values())
    vocab = {c: i for i, c in enumerate(chars)}
    merges = []
    for a in chars:
        for b in chars:
            if len(merges) == 50000:
                break
            merges.append(f"{a} {b}")
            vocab[a + b] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    return json.dumps(vocab), "#version: 0.2\n" + "\n".join(merges) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--wte", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workdir", default=os.path.join("bench_tmp", "hf_gpt2"))
    ap.add_argument("--keep", action="store_true", help="keep the 1 GB of files in --workdir")
    torch_bench.add_out_option(ap)
    torch_bench.add_isa_option(ap)
    args = ap.parse_args()
    torch_bench.apply_isa(args.isa)
    recorder = torch_bench.Recorder("hf_import", wte=args.wte)
    report = []
    V, P, L, C, NH = 50257, 1024, 12, 768, 12
    work = os.path.abspath(args.workdir)
    model_dir = os.path.join(work, "gpt2")
    os.makedirs(model_dir, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    print(f"cpu: {torch_bench.cpu_model()}, {os.cpu_count()} cores; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
          f"threads {args.threads}; load average {loadavg()}")

    gpt2_vocab = os.path.join(HERE, "..", "datasets", "gpt2")
    if os.path.exists(os.path.join(gpt2_vocab, "encoder.json")):
        vocab_json = open(os.path.join(gpt2_vocab, "encoder.json"), encoding="utf-8").read()
        merges_txt = open(os.path.join(gpt2_vocab, "vocab.bpe"), encoding="utf-8").read()
        vocab_note = "GPT-2's vocab.json/merges.txt (datasets/gpt2)"
    else:
        vocab_json, merges_txt = synthetic_tokenizer()
        vocab_note = "a synthetic 50257-token BPE (datasets/gpt2 absent)"
    t0 = time.time()
    rng = np.random.default_rng(1)
    tensors = hf.gpt2_state(rng, V, C, P, L)
    hf.write_model_dir(model_dir, tensors, hf.config_json(V, C, P, L, NH), vocab_json, merges_txt)
    st_path = os.path.join(model_dir, "model.safetensors")
    size = os.path.getsize(st_path)
    print(f"wrote {st_path}: {size} bytes ({len(tensors)} tensors, F32, random weights; tokenizer: "
          f"{vocab_note}) in {time.time() - t0:.1f} s")
    tok_dir = os.path.join(work, "tok")
    os.makedirs(tok_dir, exist_ok=True)
    shutil.copy(os.path.join(model_dir, "vocab.json"), os.path.join(tok_dir, "encoder.json"))
    shutil.copy(os.path.join(model_dir, "merges.txt"), os.path.join(tok_dir, "vocab.bpe"))
    # A text of exactly 16 tokens: the longest prefix of TEXT's tokens of length 16, decoded.
    tok = subprocess.run([args.wte, "tokenize", "--tokenizer", tok_dir, "--json", TEXT],
                         capture_output=True, text=True, check=True)
    pieces = json.loads(tok.stdout.splitlines()[0])["pieces"]
    text = "".join(pieces[:16])
    print(f"text: {json.dumps(text)} ({min(16, len(pieces))} tokens)")

    ckpt = os.path.join(work, "gpt2.h5")
    hs_path = os.path.join(work, "hs.h5")
    bound_path = os.path.join(work, "bound.bin")
    sd = None
    rows = []
    for r in range(args.rounds):
        load = loadavg()
        # I/O bound: read the file, write and fsync as many bytes.
        t = time.time()
        data = open(st_path, "rb").read()
        with open(bound_path, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        bound = time.time() - t
        del data
        os.remove(bound_path)
        t = time.time()
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        imp = subprocess.run([args.wte, "import", "--from", model_dir, "--out", ckpt],
                             capture_output=True, text=True, env=env)
        t_import = time.time() - t
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu_import = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
        if imp.returncode != 0:
            sys.exit(f"wte import failed:\n{imp.stdout}{imp.stderr}")
        t = time.time()
        hs = subprocess.run([args.wte, "hidden-states", "--checkpoint", ckpt, "--text", text,
                             "--out", hs_path, "--dims", "2"], capture_output=True, text=True, env=env)
        t_hs = time.time() - t
        if hs.returncode != 0:
            sys.exit(f"wte hidden-states failed:\n{hs.stdout}{hs.stderr}")
        m = re.search(r"forward: (\d+) position\(s\) through (\d+) layer\(s\) with logits in ([0-9.]+) s "
                      r"\(CPU time ([0-9.]+) s", hs.stdout)
        positions, forward, forward_cpu = int(m.group(1)), float(m.group(3)), float(m.group(4))
        # PyTorch, same ids, whole sequence at once.
        import h5py
        import torch
        torch.set_num_threads(args.threads)
        if sd is None:
            sd = {name: torch.from_numpy(a) for name, _, a in tensors}
        ids = h5py.File(hs_path, "r")["text0/ids"][...]
        t = time.time()
        with torch.no_grad():
            ref_hs, ref_logits = hf.hf_gpt2_forward(sd, ids, NH, 1e-5, untied=False)
        t_torch = time.time() - t
        ours = h5py.File(hs_path, "r")["text0/logits"][...]
        rel = hf.rel_error(ours, ref_logits)
        rows.append((bound, t_import, forward, t_hs, t_torch, cpu_import, forward_cpu))
        report.append(f"round {r + 1}: load {load} | I/O bound {bound:.2f} s | wte import {t_import:.2f} s "
              f"({t_import / bound:.2f}x the bound; CPU time {cpu_import:.2f} s) | forward of {positions} tokens {forward:.3f} s "
              f"(CPU time {forward_cpu:.3f} s; hidden-states command {t_hs:.2f} s) | torch forward {t_torch:.3f} s | logits rel err "
              f"vs torch {rel:.1e}")
        print(report[-1])
        print("        " + [l for l in imp.stdout.splitlines() if "wrote" in l][0])
    med = [statistics.median(x) for x in zip(*rows)]
    report.append(f"median of {args.rounds}: import {med[1]:.2f} s (I/O bound {med[0]:.2f} s; "
          f"CPU time {med[5]:.2f} s), "
          f"forward of 16 tokens {med[2]:.3f} s (CPU time {med[6]:.3f} s; PyTorch {med[4]:.3f} s), "
          f"hidden-states command {med[3]:.2f} s; load average now {loadavg()}")
    print(report[-1])
    ratios = sorted(r[1] / r[0] for r in rows)
    recorder.write(args.out, "\n".join(report),
                   [("GPT-2 small import time / the I/O bound (read + write + fsync of the file)",
                     round(statistics.median(ratios), 2), "x")],
                   "wte import of a GPT-2 small-shaped model.safetensors, and a 16-token forward")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
