#!/usr/bin/python3
"""wte installed with pip, and wte.Model against the command line on a tiny trained run.

  * `pip install --no-build-isolation --no-index .` into a fresh virtual environment made with
    `/usr/bin/python3 -m venv --system-site-packages` builds and installs the module offline
    (Debian's setuptools, pybind11 and CMake); `import wte` there loads the installed package
  * `import wte` with the Python files but no compiled part raises ImportError saying how to
    build it
  * in that environment, on a 1-block model trained by `wte train`:
    - wte.Model.load(run directory) loads its newest checkpoint
    - m(ids) and m(ids, output_hidden_states=True) equal `wte hidden-states --out`'s logits and
      hidden states bit for bit (n_layer + 1 layers, the last after ln_f), batched or not
    - m.generate(prompt, ...) with a seed equals `wte sample`'s text with the same options (past
      n_ctx, top-p, temperature, a stop string), and returns prompt + new ids for ids
    - m.loss over the validation split's windows equals the run's final evaluation exactly (as
      wte.train returns it; metrics.csv's 9 digits too) and the cross-entropy of m(ids)'s logits
      within float rounding
    - bad arguments raise TypeError/ValueError/IndexError naming the argument
    - wte.train trains the same config to bit-identical weights, calls the progress callback
      every step, and stops after the step where it returns False
Run by ctest with /usr/bin/python3 (WTE_BINARY_DIR, WTE_SOURCE_DIR, WTE_CLI set); exit 77 = skipped.
pip builds in the build directory under test when it has built the module (WTE_BUILD_DIR=
WTE_BINARY_DIR: setup.py reuses it and only checks the module's target is up to date).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

BIN = os.environ.get("WTE_BINARY_DIR", "build")
SRC = os.path.abspath(os.environ.get("WTE_SOURCE_DIR", "."))
CLI = os.path.abspath(os.environ.get("WTE_CLI", os.path.join(BIN, "wte")))
INSIDE = os.environ.get("WTE_TEST_INSIDE_VENV")  # set when this file runs in the venv
# The module's results equal the CLI's bit for bit for one GEMM library: under model.gemm = auto
# a forward of another batch shape (Model.loss of a few rows against the trainer's evaluation
# batches) may be planned onto another library, with other last bits. The CLI runs and the venv
# child inherit this.
os.environ["WTE_GEMM"] = "onednn"

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


def write_tiny_corpus(path):
    """tests/tiny_corpus.sh's corpus: the same bytes."""
    import random

    r = random.Random(7)
    w = "the king said unto them and people went into city bank river money water land house".split()
    docs = ["\n".join(" ".join(r.choice(w) for _ in range(12)) + "." for _ in range(4)) for _ in range(80)]
    with open(path, "w") as f:
        f.write("\n\n".join(docs) + "\n")


def cli(*args, **kw):
    return subprocess.run([CLI, *args], check=True, capture_output=True, **kw)


def sample_text(run, prompt, **options):
    """`wte sample`'s stdout (bytes: a barely trained model draws byte tokens that are not UTF-8
    on their own) without its final newline."""
    args = ["sample", "--checkpoint", run, "--prompt", prompt]
    for k, v in options.items():
        args += [f"--{k.replace('_', '-')}", str(v)]
    out = cli(*args).stdout
    assert out.endswith(b"\n")
    return out[:-1]


# ---- outside: build the venv, install, train, then run the checks inside -----------------------

def outside():
    tmp = tempfile.mkdtemp(prefix="wte_pymodel_")
    try:
        venv = os.path.join(tmp, "venv")
        made = subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv],
                              capture_output=True, text=True)
        if made.returncode != 0:
            print(f"skip: /usr/bin/python3 -m venv does not work here (python3-venv missing?): "
                  f"{made.stderr.strip()}")
            return 77
        py = os.path.join(venv, "bin", "python")
        if subprocess.run([py, "-m", "pip", "--version"], capture_output=True).returncode != 0:
            print("skip: pip is not available in the virtual environment (python3-pip missing?)")
            return 77
        env = dict(os.environ, PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
        env.pop("PYTHONPATH", None)
        built = os.path.join(os.environ.get("WTE_BINARY_DIR", ""), "python", "wte")
        if os.path.isdir(built) and any(f.startswith("_wte.") for f in os.listdir(built)):
            env["WTE_BUILD_DIR"] = os.environ["WTE_BINARY_DIR"]
        pip = subprocess.run([py, "-m", "pip", "install", "--no-build-isolation", "--no-index", SRC],
                             cwd=tmp, env=env, capture_output=True, text=True)
        if pip.returncode != 0:
            print(pip.stdout[-4000:], pip.stderr[-4000:])
            print("FAIL: pip install --no-build-isolation --no-index . failed")
            return 1
        print("pip install: ok")
        write_tiny_corpus(os.path.join(tmp, "corpus.txt"))
        with open(os.path.join(tmp, "tiny.ini"), "w") as f:
            f.write(TINY_INI.format(corpus=os.path.join(tmp, "corpus.txt")))
        cli("train", "--quiet", "--config", os.path.join(tmp, "tiny.ini"), "--out",
            os.path.join(tmp, "run"))
        env["WTE_TEST_INSIDE_VENV"] = tmp
        env["WTE_CLI"] = CLI
        return subprocess.run([py, os.path.abspath(__file__), "-v"], cwd=tmp, env=env).returncode
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def missing_compiled_part():
    """`import wte` from a copy of the pure-Python files only."""
    with tempfile.TemporaryDirectory() as d:
        shutil.copytree(os.path.join(SRC, "python", "wte"), os.path.join(d, "wte"))
        r = subprocess.run(["/usr/bin/python3", "-c", "import wte"], cwd=d, capture_output=True,
                           text=True, env=dict(os.environ, PYTHONPATH=d))
        if r.returncode == 0 or "pip install --no-build-isolation ." not in r.stderr \
                or "wte_python" not in r.stderr:
            print(r.stderr[-2000:])
            print("FAIL: import wte without wte._wte does not say how to build it")
            return 1
        print("import wte without the compiled part: says how to build it")
        return 0


# ---- inside the venv: the checks ---------------------------------------------------------------

if INSIDE:
    import h5py
    import numpy as np
    import wte

    TMP = INSIDE
    RUN = os.path.join(TMP, "run")

    class Installed(unittest.TestCase):
        def test_imports_the_installed_package(self):
            self.assertTrue(wte.__file__.startswith(sys.prefix), wte.__file__)
            self.assertTrue(wte._wte.__file__.startswith(sys.prefix), wte._wte.__file__)

    class ModelAgainstCli(unittest.TestCase):
        @classmethod
        def setUpClass(cls):
            cls.m = wte.Model.load(RUN)
            cls.texts = ["the king said unto them", "the river bank and money water land"]
            out = os.path.join(TMP, "hs.h5")
            args = ["hidden-states", "--checkpoint", os.path.join(RUN, "checkpoint_00000004.h5"),
                    "--out", out]
            for t in cls.texts:
                args += ["--text", t]
            cli(*args)
            with h5py.File(out, "r") as f:
                cls.ref = [{k: f[f"text{i}/{k}"][...] for k in ("ids", "hidden_states", "logits")}
                           for i in range(len(cls.texts))]

        def test_load_run_directory_is_newest_checkpoint(self):
            self.assertTrue(self.m.path.endswith("checkpoint_00000004.h5"), self.m.path)
            self.assertEqual(self.m.step, 4)
            self.assertEqual((self.m.vocab_size, self.m.d_model, self.m.n_ctx, self.m.n_layer),
                             (300, 16, 16, 1))
            self.assertEqual(self.m.config["model"]["n_head"], 2)

        def test_logits_and_hidden_states_equal_cli_bit_for_bit(self):
            for text, ref in zip(self.texts, self.ref):
                ids = np.array(self.m.tokenizer.encode(text), dtype=np.int32)
                np.testing.assert_array_equal(ids, ref["ids"])
                logits, hs = self.m(ids[None, :], output_hidden_states=True)
                self.assertEqual(logits.dtype, np.float32)
                self.assertEqual(logits.shape, (1, len(ids), 300))
                self.assertEqual(len(hs), self.m.n_layer + 1)
                self.assertTrue(np.array_equal(logits[0], ref["logits"]), "logits differ")
                for layer, h in enumerate(hs):
                    self.assertEqual(h.shape, (1, len(ids), 16))
                    self.assertTrue(np.array_equal(h[0], ref["hidden_states"][layer]),
                                    f"hidden_states[{layer}] differs")
                # 1-D ids, int64 ids (converted), and without hidden states: the same logits
                self.assertTrue(np.array_equal(self.m(ids), ref["logits"]))
                self.assertTrue(np.array_equal(self.m(ids.astype(np.int64)), ref["logits"]))
                self.assertTrue(np.array_equal(self.m(list(map(int, ids))), ref["logits"]))

        def test_batch_rows_equal_single_rows(self):
            ids = np.array(self.m.tokenizer.encode(self.texts[1]), dtype=np.int32)[:5]
            batch = np.stack([ids, ids[::-1].copy()])
            logits, hs = self.m(batch, output_hidden_states=True)
            for b in range(2):
                one, one_hs = self.m(batch[b], output_hidden_states=True)
                self.assertTrue(np.array_equal(logits[b], one))
                for l in range(len(hs)):
                    self.assertTrue(np.array_equal(hs[l][b], one_hs[l]))

        def test_generate_equals_wte_sample(self):
            cases = [
                ("the king", {}),
                ("the king", {"max_new_tokens": 40, "temperature": 0.8, "top_k": 0, "top_p": 0.9,
                              "seed": 7}),
                ("the river", {"max_new_tokens": 30, "seed": 3, "stop": "."}),
                ("the", {"max_new_tokens": 25, "temperature": 0, "slide": 1}),
            ]
            for prompt, opts in cases:
                with self.subTest(prompt=prompt, **{k: str(v) for k, v in opts.items()}):
                    want = sample_text(RUN, prompt, **opts)
                    self.assertEqual(self.m.generate(prompt.encode(), **opts), want)
                    self.assertEqual(self.m.generate(prompt, **opts), want.decode("utf-8", "replace"))
            got = self.m.generate(np.array(self.m.tokenizer.encode("the king"), np.int32),
                                  max_new_tokens=10, seed=5)
            self.assertEqual(got.dtype, np.int32)
            self.assertEqual(self.m.tokenizer.decode_bytes(got),
                             sample_text(RUN, "the king", max_new_tokens=10, seed=5))

        def test_loss_equals_final_evaluation(self):
            val = np.fromfile(os.path.join(RUN, "val.bin"), dtype=np.int32)
            T = 16
            windows = (len(val) - 1) // T
            rows = np.stack([val[w * T:w * T + T + 1] for w in range(windows)])
            loss = self.m.loss(rows)
            with open(os.path.join(RUN, "metrics.csv")) as f:
                last = f.read().strip().splitlines()[-1].split(",")
            self.assertEqual(loss, float(last[2]), "m.loss vs metrics.csv's final val_loss (stored exactly)")
            # The same loss from the decoder's logits, in numpy (float rounding apart).
            logits = self.m(rows[:, :-1]).astype(np.float64)
            lse = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)) + logits.max(-1)
            picked = np.take_along_axis(logits, rows[:, 1:, None].astype(np.int64), -1)[..., 0]
            self.assertAlmostEqual(loss, float((lse - picked).mean()), delta=1e-4)

        def test_threads_share_a_model(self):
            import threading

            ids = np.array(self.m.tokenizer.encode(self.texts[1]), dtype=np.int32)
            want = self.m(ids)
            results = []
            threads = [threading.Thread(target=lambda: results.append(self.m(ids))) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertEqual(len(results), 4)
            for r in results:
                self.assertTrue(np.array_equal(r, want))

        def test_bad_arguments_name_the_argument(self):
            m = self.m
            ok = np.zeros((1, 4), np.int32)
            cases = [
                (TypeError, "Model.__call__: ids has dtype float32", lambda: m(ok.astype(np.float32))),
                (TypeError, "Model.__call__: ids is a str", lambda: m("the king")),
                (IndexError, "Model.__call__: ids[0, 2] = 300 is outside [0, 300)",
                 lambda: m(np.array([[1, 2, 300, 4]], np.int32))),
                (IndexError, "Model.__call__: ids[1] = -1", lambda: m([1, -1])),
                (ValueError, "Model.__call__: ids has shape (1, 17): 17 positions, more than the "
                             "model's n_ctx = 16", lambda: m(np.zeros((1, 17), np.int32))),
                (ValueError, "Model.__call__: ids has shape (1, 1, 4)", lambda: m(ok[None])),
                (ValueError, "Model.__call__: ids has shape (0,): no tokens", lambda: m([])),
                (TypeError, "Model.__call__: output_hidden_states is a str",
                 lambda: m(ok, output_hidden_states="yes")),
                (ValueError, "Model.loss: ids has shape (1, 1), need T + 1 tokens",
                 lambda: m.loss(ok[:, :1])),
                (ValueError, "Model.loss: batch_size = 0", lambda: m.loss(ok, batch_size=0)),
                (ValueError, "Model.generate: top_p = 0.0, need in (0, 1]",
                 lambda: m.generate("the", top_p=0)),
                (ValueError, "Model.generate: temperature = -1.0", lambda: m.generate("the", temperature=-1)),
                (TypeError, "Model.generate: temperature is a str", lambda: m.generate("the", temperature="hot")),
                (ValueError, "Model.generate: max_new_tokens = -1", lambda: m.generate("the", max_new_tokens=-1)),
                (TypeError, "Model.generate: top_k is a float", lambda: m.generate("the", top_k=4.5)),
                (ValueError, "Model.generate: seed = -1", lambda: m.generate("the", seed=-1)),
                (ValueError, "Model.generate: stop contains an empty string", lambda: m.generate("the", stop="")),
                (ValueError, "Model.generate: slide = 17", lambda: m.generate("the", slide=17)),
                (ValueError, "Model.generate: prompt is empty", lambda: m.generate("")),
                (ValueError, "/nonexistent/run' does not exist", lambda: wte.Model.load("/nonexistent/run")),
                (ValueError, "is a directory that holds no checkpoint_<step>.h5",
                 lambda: wte.Model.load(TMP + "/..")),
                (TypeError, "Model.load: path is a NoneType", lambda: wte.Model.load(None)),
            ]
            for exc, text, call in cases:
                with self.subTest(text=text):
                    with self.assertRaises(exc) as cm:
                        call()
                    self.assertIn(text, str(cm.exception))

    class Train(unittest.TestCase):
        def test_train_equals_cli_and_reports_progress(self):
            seen = []
            out = os.path.join(TMP, "py_run")
            summary = wte.train(os.path.join(TMP, "tiny.ini"), out=out, quiet=True,
                                progress=seen.append, **{"checkpoint.interval": 4})
            self.assertEqual([p["step"] for p in seen], [1, 2, 3, 4])
            self.assertIsNone(seen[0]["val_loss"])
            self.assertIsNotNone(seen[-1]["val_loss"])
            self.assertFalse(summary["stopped"])
            self.assertEqual(summary["final_val_loss"], seen[-1]["val_loss"])
            # m.loss on the validation windows is the trainer's final evaluation, exactly.
            val = np.fromfile(os.path.join(out, "val.bin"), dtype=np.int32)
            rows = np.stack([val[w * 16:w * 16 + 17] for w in range((len(val) - 1) // 16)])
            self.assertEqual(wte.Model.load(out).loss(rows), summary["final_val_loss"])
            a = wte.load_checkpoint(os.path.join(out, "checkpoint_00000004.h5"))
            b = wte.load_checkpoint(os.path.join(RUN, "checkpoint_00000004.h5"))
            for name in b:
                if name not in ("config", "step"):
                    self.assertTrue(np.array_equal(a[name], b[name]), name)

        def test_progress_false_stops_after_that_step(self):
            out = os.path.join(TMP, "py_stop")
            summary = wte.train(os.path.join(TMP, "tiny.ini"), out=out, quiet=True,
                                progress=lambda p: p["step"] < 2, train__steps=4)
            self.assertTrue(summary["stopped"])
            self.assertTrue(summary["last_checkpoint"].endswith("checkpoint_00000002.h5"))

        def test_bad_key_names_it(self):
            with self.assertRaises(ValueError) as cm:
                wte.train(os.path.join(TMP, "tiny.ini"), out=os.path.join(TMP, "bad"),
                          quiet=True, train__stepz=3)
            self.assertIn("unknown config key 'train.stepz' in the keyword arguments",
                          str(cm.exception))
            self.assertNotIn("command line", str(cm.exception))

        def test_bad_value_names_the_keyword_argument(self):
            with self.assertRaises(ValueError) as cm:
                wte.train(os.path.join(TMP, "tiny.ini"), out=os.path.join(TMP, "bad"),
                          quiet=True, train__steps="many")
            self.assertIn("train.steps = 'many' from the keyword arguments (train.steps)",
                          str(cm.exception))
            self.assertNotIn("command line", str(cm.exception))


if __name__ == "__main__":
    if INSIDE:
        unittest.main()
    status = missing_compiled_part()
    sys.exit(status or outside())
