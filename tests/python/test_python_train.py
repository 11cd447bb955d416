#!/usr/bin/python3
"""wte.train from Python, through the library call `wte train` makes (include/wte/train.h):

  * a run stopped by KeyboardInterrupt raised in the progress callback, and one stopped by a
    SIGINT, each continued with wte.train(out=..., resume="auto"), end with the same checkpoint
    (every tensor, AdamW's moments included) and the same metrics.csv losses, learning rates and
    gradient norms as a run that was never stopped
  * resume with a checkpoint path continues from that checkpoint
  * init_from starts a run at step 0 from a checkpoint's weights (its step-0 snapshot holds them)
  * `import wte` sets OMP_WAIT_POLICY=passive as `wte` does, and the run says it is wte's default
Run by ctest with /usr/bin/python3 (WTE_BINARY_DIR, WTE_SOURCE_DIR set); exit 77 = skipped.
"""
import csv
import os
import random
import signal
import subprocess
import sys
import tempfile
import unittest

BIN = os.environ.get("WTE_BINARY_DIR", "build")
sys.path.insert(0, os.path.join(BIN, "python"))
try:
    import numpy as np
    import wte
except ImportError as e:
    print(f"skip: the Python module or numpy is not available ({e})")
    sys.exit(77)

TINY_INI = """[model]
vocab_size = 300
d_model = 16
n_ctx = 16
n_layer = 1
n_head = 2
[data]
text = {corpus}
seq_len = 16
[train]
batch_size = 4
steps = 6
eval_interval = 3
eval_tokens = 0
snapshot_steps =
threads = 1
[checkpoint]
interval = 2
keep_last = 0
"""

TMP = tempfile.mkdtemp(prefix="wte_py_train_")
INI = os.path.join(TMP, "tiny.ini")


def setUpModule():
    r = random.Random(7)
    w = "the king said unto them and people went into city bank river money water land house".split()
    docs = ["\n".join(" ".join(r.choice(w) for _ in range(12)) + "." for _ in range(4)) for _ in range(80)]
    corpus = os.path.join(TMP, "corpus.txt")
    with open(corpus, "w") as f:
        f.write("\n\n".join(docs) + "\n")
    with open(INI, "w") as f:
        f.write(TINY_INI.format(corpus=corpus))


def tensors(path):
    t = wte.load_checkpoint(path)
    del t["config"], t["step"]
    return t


def metrics(run):
    """metrics.csv's rows without the timing columns (tokens_per_s_avg, elapsed_s)."""
    with open(os.path.join(run, "metrics.csv")) as f:
        return [(r["step"], r["train_loss"], r["val_loss"], r["lr"], r["grad_norm"])
                for r in csv.DictReader(f)]


class Train(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.full = os.path.join(TMP, "full")
        cls.summary = wte.train(INI, out=cls.full, quiet=True)

    def assert_same_run(self, run):
        last = "checkpoint_00000006.h5"
        a, b = tensors(os.path.join(self.full, last)), tensors(os.path.join(run, last))
        self.assertEqual(sorted(a), sorted(b))
        for name in a:
            self.assertTrue(np.array_equal(a[name], b[name]), name)
        self.assertEqual(metrics(run), metrics(self.full))

    def test_keyboard_interrupt_in_progress_then_resume_auto_is_bit_exact(self):
        out = os.path.join(TMP, "callback")

        def interrupt_at_3(p):
            if p["step"] == 3:
                raise KeyboardInterrupt

        with self.assertRaises(KeyboardInterrupt):
            wte.train(INI, out=out, quiet=True, progress=interrupt_at_3)
        self.assertTrue(os.path.exists(os.path.join(out, "checkpoint_00000003.h5")))
        self.assertFalse(os.path.exists(os.path.join(out, "checkpoint_00000004.h5")))
        summary = wte.train(out=out, resume="auto", quiet=True)
        self.assertEqual((summary["start_step"], summary["step"]), (3, 6))
        self.assertEqual(summary["final_val_loss"], self.summary["final_val_loss"])
        self.assert_same_run(out)

    def test_sigint_then_resume_auto_is_bit_exact(self):
        out = os.path.join(TMP, "sigint")

        def sigint_at_2(p):
            if p["step"] == 2:
                os.kill(os.getpid(), signal.SIGINT)  # as Ctrl-C: the run stops after this step

        with self.assertRaises(KeyboardInterrupt) as cm:
            wte.train(INI, out=out, quiet=True, progress=sigint_at_2)
        self.assertIn("resume=\"auto\"", str(cm.exception))
        # Python's own SIGINT handler is back once training returned.
        self.assertIs(signal.getsignal(signal.SIGINT), signal.default_int_handler)
        summary = wte.train(out=out, resume="auto", quiet=True)
        self.assertEqual((summary["start_step"], summary["step"]), (2, 6))
        self.assert_same_run(out)
        # Once complete, resume="auto" has nothing left to train.
        again = wte.train(out=out, resume="auto", quiet=True)
        self.assertTrue(again["already_complete"])

    def test_resume_from_a_checkpoint_path(self):
        out = os.path.join(TMP, "path")
        wte.train(INI, out=out, quiet=True, progress=lambda p: p["step"] < 4)
        summary = wte.train(resume=os.path.join(out, "checkpoint_00000004.h5"), quiet=True)
        self.assertEqual(summary["out"], out)
        self.assertEqual(summary["start_step"], 4)
        self.assert_same_run(out)

    def test_init_from_starts_at_step_0_from_the_checkpoint_weights(self):
        out = os.path.join(TMP, "init")
        source = os.path.join(self.full, "checkpoint_00000006.h5")
        seen = []
        summary = wte.train(INI, out=out, quiet=True, init_from=source, progress=seen.append,
                            train__steps=2, train__snapshot_steps="0")
        self.assertEqual(summary["start_step"], 0)
        self.assertEqual([p["step"] for p in seen], [1, 2])
        start = tensors(os.path.join(out, "snapshot_00000000.h5"))
        trained = tensors(source)
        for name in start:
            self.assertTrue(np.array_equal(start[name], trained[name]), name)
        # A fresh optimizer and schedule: the step-1 learning rate is a fresh run's.
        self.assertEqual(metrics(out)[0][3], metrics(self.full)[0][3])

    def test_resume_and_init_from_exclude_each_other(self):
        with self.assertRaises(wte.Error) as cm:
            wte.train(INI, out=os.path.join(TMP, "both"), resume="auto",
                      init_from=os.path.join(self.full, "checkpoint_00000006.h5"))
        self.assertIn("exclude each other", str(cm.exception))


class Threads(unittest.TestCase):
    def test_import_sets_the_cli_wait_policy(self):
        env = {k: v for k, v in os.environ.items()
               if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "WTE_DEFAULT_WAIT_POLICY")}
        env["PYTHONPATH"] = os.path.join(BIN, "python")
        code = ("import os, sys, wte; print(os.environ.get('OMP_WAIT_POLICY')); sys.stdout.flush(); "
                f"wte.train({INI!r}, out={os.path.join(TMP, 'omp')!r}, train__steps=1)")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertTrue(out.stdout.startswith("passive\n"), out.stdout)
        self.assertIn("OMP_WAIT_POLICY=passive (wte's default)", out.stdout)
        env["OMP_WAIT_POLICY"] = "active"
        code = "import os, wte; print(os.environ.get('OMP_WAIT_POLICY'))"
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        self.assertEqual(out.stdout, "active\n", out.stderr)


if __name__ == "__main__":
    unittest.main()
