#!/usr/bin/python3
"""wte.Model.loss equals `wte eval --json`'s loss exactly (the same double), on runs of the default
model's shape (4 blocks, 4 heads; a 300-token vocabulary and d_model 32 for the tiny corpus):

  * on the run's validation split, the windows `wte eval` scores (data.seq_len tokens each, the
    last partial window dropped), whole and cut by --max-tokens
  * on a text file (--text), encoded with the checkpoint's tokenizer (m.tokenizer.encode)
  * with one micro-batch per step and with train.grad_accum_steps = 2 (both evaluate
    batch_size / grad_accum_steps windows per forward pass), at 1 and at 2 threads (the run's
    train.threads, which `wte eval` uses; the module runs at wte.set_num_threads)
Run by ctest with /usr/bin/python3 (WTE_BINARY_DIR, WTE_SOURCE_DIR, WTE_CLI set), with the module
built in WTE_BINARY_DIR/python; exit 77 = skipped.
"""
import json
import os
import shutil
import subprocess
import sys
import unittest

BIN = os.path.abspath(os.environ.get("WTE_BINARY_DIR", "build"))
SRC = os.path.abspath(os.environ.get("WTE_SOURCE_DIR", "."))
CLI = os.path.abspath(os.environ.get("WTE_CLI", os.path.join(BIN, "wte")))
sys.path.insert(0, os.path.join(BIN, "python"))

try:
    import numpy as np
    import wte
except ImportError as e:
    print(f"skip: the Python module or numpy is not available ({e})")
    sys.exit(77)

WORK = os.path.join(BIN, "test_tmp", "python_loss_equals_wte_eval")
T = 32  # data.seq_len = n_ctx

# (name, train.threads, train.grad_accum_steps)
RUNS = [("threads1", 1, 1), ("threads2_accum2", 2, 2)]


def setUpModule():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    corpus = os.path.join(WORK, "corpus.txt")
    subprocess.run(["bash", "-c", f'. "{SRC}/tests/tiny_corpus.sh" && write_tiny_corpus "$1"',
                    "-", corpus], check=True)
    for name, threads, accum in RUNS:
        # The default config's model (n_layer 4, n_head 4, tied, ln_f) at a size the tiny corpus
        # trains in seconds; the whole split evaluated at the end (eval_tokens = 0).
        subprocess.run([CLI, "train", "--quiet", "--out", os.path.join(WORK, name),
                        f"--data.text={corpus}", "--model.vocab_size=300", "--model.d_model=32",
                        f"--model.n_ctx={T}", f"--data.seq_len={T}", "--train.batch_size=4",
                        f"--train.grad_accum_steps={accum}", f"--train.threads={threads}",
                        "--train.steps=3", "--train.eval_tokens=0", "--train.snapshot_steps="],
                       check=True, capture_output=True)


def tearDownModule():
    shutil.rmtree(WORK, ignore_errors=True)


def wte_eval(run, *args):
    """`wte eval --checkpoint run --json ARGS`'s object."""
    out = subprocess.run([CLI, "eval", "--checkpoint", run, "--json", *args], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def windows(ids, count=None):
    """The (W, T + 1) windows `wte eval` scores: non-overlapping runs of T targets."""
    n = (len(ids) - 1) // T if count is None else count
    return np.stack([ids[w * T:w * T + T + 1] for w in range(n)]).astype(np.int32)


class LossEqualsWteEval(unittest.TestCase):
    def check_run(self, name, threads):
        run = os.path.join(WORK, name)
        wte.set_num_threads(threads)  # the run's train.threads, as `wte eval` runs
        m = wte.Model.load(run)
        self.assertEqual((m.n_layer, m.n_head), (4, 4))
        val = np.fromfile(os.path.join(run, "val.bin"), dtype=np.int32)
        rows = windows(val)
        self.assertGreaterEqual(len(rows), 2)

        whole = wte_eval(run)
        self.assertEqual(whole["scored_tokens"], rows.shape[0] * T)
        loss = m.loss(rows)
        print(f"{name}: m.loss {loss!r}, wte eval {whole['loss']!r} ({rows.shape[0]} windows)")
        self.assertEqual(loss, whole["loss"], "whole validation split")

        cut = wte_eval(run, "--max-tokens", str(T))  # one window
        self.assertEqual(cut["scored_tokens"], T)
        self.assertEqual(m.loss(rows[:1]), cut["loss"], "--max-tokens: the first window")

        text_path = os.path.join(WORK, "corpus.txt")
        with open(text_path, "rb") as f:
            text_ids = np.array(m.tokenizer.encode(f.read()), dtype=np.int32)
        text = wte_eval(run, "--text", text_path)
        self.assertEqual(text["tokens"], len(text_ids))
        self.assertEqual(m.loss(windows(text_ids)), text["loss"], "--text")

    def test_one_thread_one_micro_batch(self):
        self.check_run("threads1", 1)

    def test_two_threads_two_micro_batches(self):
        self.check_run("threads2_accum2", 2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
