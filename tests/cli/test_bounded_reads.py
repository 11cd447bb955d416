#!/usr/bin/python3
"""Reads bounded by what they need, sizes checked before allocation, on a tiny run of `wte train`.

  * metrics.csv a symbolic link to /dev/zero: `wte train --resume auto` exits 1 at once, saying
    it is not a regular file (under a 2 GiB address-space limit: nothing reads it without end)
  * `wte eval --max-tokens N` reads only the start of --tokens and --text that its windows need:
    files of a few KB followed by an 8 GiB hole evaluate under a 2 GiB address-space limit, to the
    loss of the few KB alone
  * a checkpoint whose stored config claims d_model 4096 (wte and wpe reshaped to match, the blocks
    left small) in a file of a few tens of KB: `wte sample` and `wte inspect` refuse it, naming
    the parameter count and the file size, under a 1 GiB address-space limit (the model's
    parameters alone would take 0.8 GB)
Run by ctest with /usr/bin/python3 (WTE_CLI, WTE_BINARY_DIR set; WTE_SANITIZED: no address-space
limits); exit 77 = skipped (no wte binary).
"""
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import unittest

BIN = os.environ.get("WTE_BINARY_DIR", "build")
CLI = os.path.abspath(os.environ.get("WTE_CLI", os.path.join(BIN, "wte")))
if not os.path.exists(CLI):
    print(f"skip: no wte binary at {CLI}")
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
steps = 4
eval_interval = 0
eval_tokens = 0
snapshot_steps =
threads = 1
[checkpoint]
interval = 2
keep_last = 0
"""
GiB = 2**30
WORDS = "the king said unto them and people went into city bank river money water land house".split()


def corpus_text(seed, docs=80):
    import random

    r = random.Random(seed)
    parts = ["\n".join(" ".join(r.choice(WORDS) for _ in range(12)) + "." for _ in range(4)) for _ in range(docs)]
    return "\n\n".join(parts) + "\n"


def limited(address_space):
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    return apply


# An ASan build reserves terabytes of address space for its shadow memory: no limit there (the
# checks of the messages still run).
SANITIZED = bool(os.environ.get("WTE_SANITIZED"))


def wte(*args, limit=None, timeout=120):
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=timeout,
                          preexec_fn=limited(limit) if limit and not SANITIZED else None)


def fnv1a64(data):
    h = 14695981039346656037
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


class BoundedReads(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        t = cls.tmp.name
        corpus = os.path.join(t, "corpus.txt")
        with open(corpus, "w") as f:
            f.write(corpus_text(7))
        cls.ini = os.path.join(t, "tiny.ini")
        with open(cls.ini, "w") as f:
            f.write(TINY_INI.format(corpus=corpus))
        cls.run_dir = os.path.join(t, "run")
        p = wte("train", "-c", cls.ini, "--out", cls.run_dir, "--train.steps=2")
        assert p.returncode == 0, p.stdout + p.stderr
        cls.ckpt = os.path.join(cls.run_dir, "checkpoint_00000002.h5")
        assert os.path.exists(cls.ckpt), os.listdir(cls.run_dir)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_metrics_link_to_dev_zero_is_refused(self):
        run = os.path.join(self.tmp.name, "zero_metrics")
        shutil.copytree(self.run_dir, run)
        os.remove(os.path.join(run, "metrics.csv"))
        os.symlink("/dev/zero", os.path.join(run, "metrics.csv"))
        p = wte("train", "--resume", "auto", "--out", run, "--train.steps=4", limit=2 * GiB, timeout=60)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("metrics.csv' is not a regular file", p.stderr)

    def eval_loss(self, *args, limit=None):
        p = wte("eval", "--checkpoint", self.ckpt, "--json", *args, limit=limit)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        import json

        return json.loads(p.stdout)

    def test_eval_reads_what_max_tokens_needs(self):
        t = self.tmp.name
        ids = list(range(250)) * 8  # 2000 ids in [0, 300)
        small, holed = os.path.join(t, "small.bin"), os.path.join(t, "holed.bin")
        for path in (small, holed):
            with open(path, "wb") as f:
                f.write(b"".join(i.to_bytes(4, "little") for i in ids))
        os.truncate(holed, 8 * GiB)  # an 8 GiB file: 2000 ids, then zeros never written to disk
        want = self.eval_loss("--tokens", small, "--max-tokens", "64")
        got = self.eval_loss("--tokens", holed, "--max-tokens", "64", limit=2 * GiB)
        self.assertEqual(got["loss"], want["loss"])
        self.assertEqual(got["scored_tokens"], 64)
        small_text, holed_text = os.path.join(t, "small.txt"), os.path.join(t, "holed.txt")
        for path in (small_text, holed_text):
            with open(path, "w") as f:
                f.write(corpus_text(3, docs=40))
        os.truncate(holed_text, 8 * GiB)
        want = self.eval_loss("--text", small_text, "--max-tokens", "64")
        got = self.eval_loss("--text", holed_text, "--max-tokens", "64", limit=2 * GiB)
        self.assertEqual(got["loss"], want["loss"])
        self.assertEqual(got["scored_tokens"], 64)

    def test_forged_d_model_is_refused_before_allocation(self):
        try:
            import h5py
            import numpy as np
        except ImportError:
            self.skipTest("h5py is not available")
        forged = os.path.join(self.tmp.name, "forged.h5")
        shutil.copy(self.ckpt, forged)
        with h5py.File(forged, "r+") as f:
            ini = f["config/ini"][()]
            ini = ini.decode() if isinstance(ini, bytes) else str(ini)
            ini = ini.replace("d_model = 16", "d_model = 4096")
            self.assertIn("d_model = 4096", ini)
            del f["config/ini"]
            f["config/ini"] = ini.encode()
            f.attrs["config_fnv1a64"] = np.uint64(fnv1a64(ini.encode()))
            for name, rows in (("wte", 300), ("wpe", 16)):
                del f[name]
                # Chunked, never written: the file stays small, reads give the fill value.
                f.create_dataset(name, shape=(rows, 4096), dtype=np.float32, chunks=(1, 4096))
        self.assertLess(os.path.getsize(forged), 200_000)
        for args in (["sample", "--checkpoint", forged, "-n", "2"], ["inspect", forged]):
            p = wte(*args, limit=GiB)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertIn("(d_model 4096, n_layer 1, vocab_size 300, n_ctx 16) claims", p.stderr)
            self.assertIn("float32 parameters in", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
