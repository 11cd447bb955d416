#!/usr/bin/python3
"""ctest: wte against PyTorch (scripts/compare_torch.py) on the same models and batches.

Cases: the tied sum, where both paths of the tied wte add into one row (vocab 2, d 1, ln_f off;
PyTorch must also give loss 0.3132617 and dwte = [-0.5378828, 0.2689414]); the duplicates case (vocab 5, d 2, inputs [3, 1, 3]) with ln_f off
and on; hand-made checkpoints written here with h5py (so wte also reads a file another tool wrote);
and checkpoints written by `wte train` after a few steps, tied and untied, with no blocks and with
n_layer 2 (n_head 2, ln_f on; every block gradient compared, and wte's double reference against
PyTorch float64 at 1e-12), and n_layer 2 with the tiled attention, on a batch of its own training
tokens. Skipped (exit 77) when /usr/bin/python3 cannot import torch, h5py and numpy.
Environment (set by ctest): WTE_CLI, WTE_SOURCE_DIR, WTE_BINARY_DIR; WTE_GEMM when ctest runs it
again with one GEMM library forced (gemm_<library>.test_gradcheck_torch.py).
"""
import glob
import os
import shutil
import subprocess
import sys

try:
    import h5py
    import numpy as np
    import torch  # noqa: F401  (compare_torch.py uses it; checked here to skip cleanly)
except ImportError as e:
    print(f"SKIPPED: cannot import {e.name} under {sys.executable}; install Debian's "
          "python3-torch python3-h5py python3-numpy (scripts/quickstart.sh test does)")
    sys.exit(77)

WTE = os.environ["WTE_CLI"]
SRC = os.environ["WTE_SOURCE_DIR"]
# WTE_GEMM (one GEMM library forced: the run ctest repeats per library) gets a folder of its own
WORK = os.path.join(os.environ["WTE_BINARY_DIR"], "test_tmp",
                    "gradcheck_torch" + ("_gemm-" + os.environ["WTE_GEMM"] if os.environ.get("WTE_GEMM") else ""))
COMPARE = os.path.join(SRC, "scripts", "compare_torch.py")
failures = []


def write_model(path, wte, wpe, ln_f):
    """A hand-made model file in the checkpoint's layout (docs/checkpoint.md)."""
    wte = np.asarray(wte, dtype=np.float32)
    wpe = np.asarray(wpe, dtype=np.float32)
    V, C = wte.shape
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "wte-checkpoint"
        f.attrs["format_version"] = np.int64(1)
        f.attrs["step"] = np.int64(0)
        f["wte"] = wte
        f["wpe"] = wpe
        f["ln_f/g"] = np.ones(C, dtype=np.float32)
        f["ln_f/b"] = np.zeros(C, dtype=np.float32)
        f["config/ini"] = (f"[model]\nvocab_size = {V}\nd_model = {C}\nn_ctx = {wpe.shape[0]}\n"
                           f"ln_f = {'true' if ln_f else 'false'}\n[data]\nseq_len = {wpe.shape[0]}\n")


def compare(label, checkpoint, tokens, extra=()):
    out = os.path.join(WORK, label)
    run = subprocess.run([sys.executable, COMPARE, "--wte", WTE, "--checkpoint", checkpoint,
                          "--tokens", tokens, "--workdir", out, *extra],
                         capture_output=True, text=True)
    print(f"== {label}\n{run.stdout}{run.stderr}", end="")
    if run.returncode != 0:
        failures.append(label)
    return os.path.join(out, "grads.h5")


def write_tokens(path, lines):
    with open(path, "w") as f:
        for ids in lines:
            f.write(" ".join(str(i) for i in ids) + "\n")


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)

    # Tied sum: exact values on both sides.
    ckpt = os.path.join(WORK, "tied_sum.h5")
    write_model(ckpt, [[1.0], [0.0]], [[0.0]], ln_f=False)
    tokens = os.path.join(WORK, "tied_sum.txt")
    write_tokens(tokens, [[0, 0]])
    grads = compare("tied_sum", ckpt, tokens)
    import torch.nn.functional as F
    wte = torch.tensor([[1.0], [0.0]], requires_grad=True)
    wpe = torch.tensor([[0.0]], requires_grad=True)
    loss = F.cross_entropy((wte[[0]] + wpe[0]) @ wte.T, torch.tensor([0]))
    loss.backward()
    for name, got, want in [("torch loss", loss.item(), 0.3132617),
                            ("torch dwte[0]", wte.grad[0, 0].item(), -0.5378828),
                            ("torch dwte[1]", wte.grad[1, 0].item(), 0.2689414),
                            ("torch dwpe[0]", wpe.grad[0, 0].item(), -0.2689414)]:
        if abs(got - want) > 1e-6:
            print(f"FAIL {name} = {got}, expected {want}")
            failures.append(name)
    with h5py.File(grads, "r") as f:
        print(f"tied sum: wte loss {float(f['loss'][()]):.7f}, dwte {f['wte'][:, 0]}, "
              f"dwpe {f['wpe'][:, 0]}")

    # Duplicates: inputs [3, 1, 3], targets [1, 3, 0]: vocab 5, d 2 with ln_f off; with
    # ln_f on, d 3, because a LayerNorm of width 2 maps every row to about ±g + b whatever its
    # input, so its input gradient (dwpe) is nearly zero (~1e-6, eps-dominated) and only rounding is
    # left to compare.
    rng = np.random.default_rng(5)
    for ln_f in (False, True):
        label = "duplicates_lnf_d3" if ln_f else "duplicates"
        C = 3 if ln_f else 2
        ckpt = os.path.join(WORK, label + ".h5")
        write_model(ckpt, rng.uniform(-1, 1, (5, C)), rng.uniform(-0.5, 0.5, (3, C)), ln_f)
        tokens = os.path.join(WORK, label + ".txt")
        write_tokens(tokens, [[3, 1, 3, 0]])
        compare(label, ckpt, tokens)
        gc = subprocess.run([WTE, "gradcheck", "--checkpoint", ckpt, "--tokens", tokens],
                            capture_output=True, text=True)
        if gc.returncode != 0:
            print(gc.stdout + gc.stderr)
            failures.append(label + " gradcheck")

    # Checkpoints written by `wte train` after a few steps, tied and untied.
    words = ("the king said unto them and people went into city of his house lord god "
             "land children day son men came hand").split()
    docs = []
    for d in range(60):
        sentence = [words[(d * 7 + k * 3 + k * k) % len(words)] for k in range(40)]
        docs.append(" ".join(sentence).capitalize() + ".")
    corpus = os.path.join(WORK, "corpus.txt")
    with open(corpus, "w") as f:
        f.write("\n\n".join(docs) + "\n")
    # With blocks (n_layer 2, n_head 2, ln_f on): the same, plus wte's double reference against
    # PyTorch float64 (`--precision float64`), which must agree to 1e-12 (measured ~1e-15): any layout or formula
    # difference between the two models shows there far above rounding.
    # And the blocks with the tiled attention (model.attention = tiled, stored in the checkpoint, so
    # `wte grad` runs it too).
    cases = [(n_layer, tie, "auto") for n_layer in (0, 2) for tie in ("true", "false")]
    cases.append((2, "true", "tiled"))
    for n_layer, tie, attention in cases:
        label = f"trained_L{n_layer}_tie_{tie}" if n_layer else f"trained_tie_{tie}"
        if attention != "auto":
            label += "_" + attention
        run_dir = os.path.join(WORK, label)
        run = subprocess.run(
            [WTE, "train", "--quiet", "--out", run_dir, f"--data.text={corpus}",
             "--data.tokenizer=train", "--model.vocab_size=300", "--model.d_model=16",
             "--model.n_ctx=16", "--data.seq_len=16", "--train.batch_size=4",
             "--train.steps=5", "--train.eval_interval=0", "--train.threads=1",
             "--optim.warmup_steps=1", "--optim.lr=0.01", "--optim.min_lr=0.001",
             f"--model.tie_embeddings={tie}", f"--model.n_layer={n_layer}",
             "--model.n_head=2", "--model.ln_f=true", f"--model.attention={attention}"],
            capture_output=True, text=True)
        ckpts = sorted(glob.glob(os.path.join(run_dir, "checkpoint_*.h5")))
        if run.returncode != 0 or not ckpts:
            print(f"FAIL wte train ({label}):\n{run.stdout}{run.stderr}")
            failures.append("train " + label)
            continue
        with h5py.File(ckpts[-1], "r") as f:
            blocks = sum(1 for l in range(8) if f"h{l}/attn/c_attn/w" in f)
        if blocks != n_layer:
            print(f"FAIL {label}: the checkpoint has {blocks} blocks, expected {n_layer}")
            failures.append(label + " blocks")
        ids = np.fromfile(os.path.join(run_dir, "train.bin"), dtype="<i4")
        tokens = os.path.join(WORK, f"{label}.txt")
        write_tokens(tokens, [ids[k * 17:(k + 1) * 17] for k in range(3)])  # B 3, T 16
        compare(label, ckpts[-1], tokens)
        if n_layer:
            compare(label + "_float64", ckpts[-1], tokens,
                    ("--precision", "float64", "--rtol", "1e-12"))

    if failures:
        print("FAILED: " + ", ".join(failures))
        return 1
    print("all PyTorch comparisons passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
