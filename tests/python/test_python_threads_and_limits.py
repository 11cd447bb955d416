#!/usr/bin/python3
"""The Python module `wte` against callers that change their arguments, huge arguments and
arguments of the wrong kind.

  * a second thread setting the ids to 2**30 (and back) while the GIL is released during every
    kernel (gather, embedding_forward, scatter with each strategy, embedding_backward_rows,
    adamw_update_rows, adamw_lazy, softmax_cross_entropy, cross_entropy_loss) and every model call
    (m(ids), m.loss, m.generate): each call returns or raises IndexError naming the ids, the
    process never crashes (run in a child process, which must exit 0)
  * m.loss(ids, batch_size=2**20) with one row sizes its buffers by that row: it runs under an
    address-space limit 100 MB above the process's size and equals m.loss(ids)
  * a forward, logits or kernel output larger than the memory available raises MemoryError
    naming the call and the argument, before anything is allocated
  * bools are not counts (batch_size, max_new_tokens, top_k, slide, step, n: TypeError naming
    the argument); bytearray, memoryview, bytes and str are not ids (TypeError)
  * a model whose weights overflow float32: m.loss raises FloatingPointError naming the first
    non-finite token loss and the cause, and `wte eval` exits 1 saying the loss is not finite
Run by ctest with /usr/bin/python3 (WTE_BINARY_DIR, WTE_SOURCE_DIR, WTE_CLI set); exit 77 = skipped.
"""
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
import unittest

BIN = os.environ.get("WTE_BINARY_DIR", "build")
CLI = os.path.abspath(os.environ.get("WTE_CLI", os.path.join(BIN, "wte")))
sys.path.insert(0, os.path.join(BIN, "python"))

try:
    import numpy as np
    import wte
except ImportError as e:
    print(f"skip: the Python module or numpy is not available ({e})")
    sys.exit(77)

TINY_INI = """[model]
vocab_size = 300
d_model = 64
n_ctx = 16
n_layer = 1
n_head = 2
[data]
text = {corpus}
seq_len = 16
[train]
batch_size = 4
steps = 2
eval_interval = 0
eval_tokens = 0
snapshot_steps =
threads = 1
[checkpoint]
interval = 2
keep_last = 0
"""

BAD = 2**30  # far outside every table


def write_tiny_corpus(path):
    import random

    r = random.Random(7)
    w = "the king said unto them and people went into city bank river money water land house".split()
    docs = ["\n".join(" ".join(r.choice(w) for _ in range(12)) + "." for _ in range(4)) for _ in range(80)]
    with open(path, "w") as f:
        f.write("\n\n".join(docs) + "\n")


def tiny_run(tmp):
    corpus = os.path.join(tmp, "corpus.txt")
    write_tiny_corpus(corpus)
    ini = os.path.join(tmp, "tiny.ini")
    with open(ini, "w") as f:
        f.write(TINY_INI.format(corpus=corpus))
    run = os.path.join(tmp, "run")
    wte.train(ini, out=run, quiet=True)
    return run


class Mutator:
    """A thread that sets every id of `ids` to BAD and back to `good` until stopped: it runs
    whenever the calling thread releases the GIL (during every kernel and model call)."""

    def __init__(self, ids):
        self.ids, self.good, self.stop, self.flips = ids, ids.copy(), False, 0
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        flat, good = self.ids.reshape(-1), self.good.reshape(-1)
        while not self.stop:
            flat[:] = BAD
            flat[:] = good
            self.flips += 1

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop = True
        self.thread.join()


def child_mutating_calls(run, seconds):
    """Runs in a child process: every kernel and model call in a loop while a Mutator changes its
    ids; returns after `seconds` per call. A crash ends the child with a signal."""
    rng = np.random.default_rng(1)
    V, C, N = 512, 32, 20000
    table = rng.standard_normal((V, C)).astype(np.float32)
    dout = rng.standard_normal((N, C)).astype(np.float32)

    def ids_of(n, hi):
        return rng.integers(0, hi, size=n).astype(np.int32)

    def lr():
        return {"lr": 1e-3, "step": 1}

    calls = {
        "gather": (ids_of(N, V), lambda ids: wte.gather(table, ids)),
        "embedding_forward": (ids_of(N, V).reshape(N // 16, 16),
                              lambda ids: wte.embedding_forward(ids, table, table[:16].copy())),
        "embedding_backward_rows": (ids_of(N, V), lambda ids: wte.embedding_backward_rows(dout, ids, V)),
        "adamw_lazy": (ids_of(N, V), lambda ids: wte.adamw_lazy(
            table.copy(), np.zeros_like(table), np.zeros_like(table), dout, ids, **lr())),
        "adamw_update_rows": (np.arange(V, dtype=np.int32), lambda rows: wte.adamw_update_rows(
            table.copy(), np.zeros_like(table), np.zeros_like(table), dout[:V], rows, **lr())),
        "softmax_cross_entropy": (ids_of(N // 8, V), lambda t: wte.softmax_cross_entropy(
            rng.standard_normal((N // 8, V)).astype(np.float32), t)),
        "cross_entropy_loss": (ids_of(N // 8, V), lambda t: wte.cross_entropy_loss(
            rng.standard_normal((N // 8, V)).astype(np.float32), t)),
    }
    for s in wte.scatter_strategies():
        calls["scatter " + s] = (ids_of(N, V), lambda ids, s=s: wte.scatter(np.zeros_like(table), dout, ids, s))
    m = wte.Model.load(run)
    calls["Model.__call__"] = (ids_of(4 * 16, 300).reshape(4, 16), lambda ids: m(ids))
    calls["Model.__call__ hidden"] = (ids_of(4 * 16, 300).reshape(4, 16),
                                      lambda ids: m(ids, output_hidden_states=True))
    calls["Model.loss"] = (ids_of(8 * 17, 300).reshape(8, 17), lambda ids: m.loss(ids, batch_size=2))
    calls["Model.generate"] = (ids_of(12, 300), lambda ids: m.generate(ids, max_new_tokens=8, seed=1))
    for name, (ids, call) in calls.items():
        done = refused = 0
        with Mutator(ids) as mut:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                try:
                    call(ids)
                    done += 1
                except IndexError as e:
                    assert "outside" in str(e), (name, str(e))
                    refused += 1
        print(f"{name}: {done} calls done, {refused} refused (IndexError), {mut.flips} flips", flush=True)
        assert mut.flips > 0, name


def child_loss_under_limit(run):
    """Runs in a child process under an address-space limit 100 MB above its size."""
    m = wte.Model.load(run)
    ids = np.arange(17, dtype=np.int32).reshape(1, 17)
    want = m.loss(ids)
    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (vm + 100 * 2**20, resource.RLIM_INFINITY))
    got = m.loss(ids, batch_size=2**20)
    assert got == want, (got, want)
    print(f"loss with batch_size=2**20 under a {vm // 2**20 + 100} MB limit: {got}")


class ThreadsAndLimits(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.run_dir = tiny_run(cls.tmp.name)
        cls.m = wte.Model.load(cls.run_dir)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def child(self, code):
        env = dict(os.environ, PYTHONPATH=os.path.join(BIN, "python"))
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                           cwd=os.path.dirname(os.path.abspath(__file__)), timeout=600)
        print(p.stdout, end="")
        self.assertEqual(p.returncode, 0, f"child exited {p.returncode}:\n{p.stdout}\n{p.stderr}")

    def test_calls_survive_ids_changed_by_another_thread(self):
        seconds = float(os.environ.get("WTE_MUTATE_SECONDS", "1.5"))
        self.child("import test_python_threads_and_limits as t; "
                   f"t.child_mutating_calls({self.run_dir!r}, {seconds})")

    def test_loss_buffers_follow_the_rows_given(self):
        self.child(f"import test_python_threads_and_limits as t; t.child_loss_under_limit({self.run_dir!r})")

    def test_memory_error_names_the_argument(self):
        m = self.m
        rows = 2**20
        ids = np.zeros((rows, 17), dtype=np.int32)
        with self.assertRaises(MemoryError) as cm:
            m.loss(ids, batch_size=rows)
        self.assertIn("Model.loss: a forward of 1048576 rows of 16 tokens (batch_size = 1048576", str(cm.exception))
        self.assertIn("pass a smaller batch_size", str(cm.exception))
        ids = np.zeros((2_000_000, 16), dtype=np.int32)
        with self.assertRaises(MemoryError) as cm:
            m(ids)
        self.assertIn("Model.__call__: the logits of ids (shape (2000000, 16)", str(cm.exception))
        del ids
        big = np.zeros(2**22, dtype=np.int32)  # 2^22 ids x 4096 floats: 64 GiB of output
        with self.assertRaises(MemoryError) as cm:
            wte.gather(np.zeros((4, 4096), np.float32), big)
        self.assertIn("gather: out (ids.size x C float32", str(cm.exception))

    def test_bools_are_not_counts(self):
        m = self.m
        ids = np.arange(17, dtype=np.int32)
        cases = [
            ("Model.loss: batch_size is a bool", lambda: m.loss(ids, batch_size=True)),
            ("Model.generate: max_new_tokens is a bool", lambda: m.generate("the", max_new_tokens=True)),
            ("Model.generate: top_k is a bool", lambda: m.generate("the", top_k=True)),
            ("Model.generate: slide is a bool", lambda: m.generate("the", slide=False)),
            ("set_num_threads: n is a bool", lambda: wte.set_num_threads(True)),
            ("adamw: step is a bool", lambda: wte.adamw(*(np.zeros(4, np.float32) for _ in range(4)), lr=0.1, step=True)),
            ("embedding_backward_rows: num_embeddings is a bool",
             lambda: wte.embedding_backward_rows(np.zeros((1, 4), np.float32), np.zeros(1, np.int32), True)),
            ("Tokenizer.decode: ids[0] is a bool", lambda: m.tokenizer.decode([True])),
        ]
        for text, call in cases:
            with self.assertRaises(TypeError, msg=text) as cm:
                call()
            self.assertIn(text, str(cm.exception))

    def test_bytes_like_objects_are_not_ids(self):
        m = self.m
        for kind in (bytearray, memoryview, bytes):
            data = kind(b"the king said unto them")
            for what, call in [("Model.__call__: ids", lambda: m(data)),
                               ("Model.loss: ids", lambda: m.loss(data)),
                               ("Tokenizer.decode: ids", lambda: m.tokenizer.decode(data)),
                               ("Tokenizer.decode_bytes: ids", lambda: m.tokenizer.decode_bytes(data))]:
                with self.assertRaises(TypeError, msg=f"{what} {kind.__name__}") as cm:
                    call()
                self.assertIn(f"{what} is a {kind.__name__}", str(cm.exception))
        for kind in (bytearray, memoryview):  # bytes and str are a text prompt
            with self.assertRaises(TypeError) as cm:
                m.generate(kind(b"the king"), max_new_tokens=2)
            self.assertIn(f"Model.generate: prompt is a {kind.__name__}", str(cm.exception))

    def test_a_loss_that_is_not_finite_is_an_error(self):
        try:
            import h5py
        except ImportError:
            self.skipTest("h5py is not available")
        import shutil

        run = os.path.join(self.tmp.name, "overflow")
        shutil.copytree(self.run_dir, run)
        ckpt = sorted(f for f in os.listdir(run) if f.startswith("checkpoint_"))[-1]
        with h5py.File(os.path.join(run, ckpt), "r+") as f:
            w = f["wte"][...]
            f["wte"][...] = np.where(w >= 0, 3e38, -3e38).astype(np.float32)  # finite, huge
        m = wte.Model.load(run)
        ids = np.arange(34, dtype=np.int32).reshape(2, 17)
        with self.assertRaises(FloatingPointError) as cm:
            m.loss(ids)
        msg = str(cm.exception)
        self.assertIn("Model.loss: the loss is", msg)
        self.assertIn("not finite: the loss of target ids[0, ", msg)
        self.assertIn("every parameter is finite, so the forward overflowed float32", msg)
        if not os.path.exists(CLI):
            return
        text = os.path.join(self.tmp.name, "eval.txt")
        with open(text, "w") as f:
            f.write("the king said unto them and people went into city bank river money\n" * 4)
        p = subprocess.run([CLI, "eval", "--checkpoint", run, "--text", text], capture_output=True, text=True)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("not a number a model can be judged by", p.stderr)
        self.assertNotIn("perplexity", p.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
