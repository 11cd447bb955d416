#!/usr/bin/python3
"""The Python module `wte` (python/): kernels, checkpoints, tokenizer and wte.torch.Embedding.

  * every kernel called from Python equals the same kernel called from C++ (wte_kernel_driver),
    bit for bit, at 1 and 2 threads, with duplicate ids
  * the scatter (every strategy) and wte.torch.Embedding's backward equal PyTorch's nn.Embedding
    gradients: exactly when the sums are exact (multiples of 1/64), within float rounding otherwise
  * wte.torch.Embedding trains a small PyTorch model (untied and tied lm_head) to nn.Embedding's
    losses within float rounding; its fused lazy AdamW matches lazy AdamW written in torch ops
  * bad arguments (wrong dtype, non-contiguous, ids out of range, wrong shape, read-only) raise
    a Python exception naming the argument
  * load_checkpoint equals h5py's reading of a checkpoint from `wte train`; the Tokenizer gives
    GPT-2's ids
Run by ctest with /usr/bin/python3 (WTE_BINARY_DIR, WTE_SOURCE_DIR, WTE_CLI set); exit 77 = skipped.
"""
import os
import subprocess
import sys
import tempfile
import unittest

BIN = os.environ.get("WTE_BINARY_DIR", "build")
SRC = os.environ.get("WTE_SOURCE_DIR", ".")
CLI = os.environ.get("WTE_CLI", os.path.join(BIN, "wte"))
DRIVER = os.path.join(BIN, "wte_kernel_driver")
sys.path.insert(0, os.path.join(BIN, "python"))

try:
    import numpy as np
    import wte
except ImportError as e:
    print(f"skip: the Python module or numpy is not available ({e})")
    sys.exit(77)
try:
    import torch
    import wte.torch as wtorch
except ImportError:
    torch = None


def exact(rng, *shape):
    """float32 multiples of 1/64 in [-4, 4]: every sum of a few of them is exact."""
    return (rng.integers(-256, 257, size=shape) / 64.0).astype(np.float32)


def general(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def run_driver(kernel, arrays, **args):
    """Runs `kernel` in C++ on `arrays` (name -> ndarray) with this process's wte thread count;
    returns {name: output ndarray}."""
    with tempfile.TemporaryDirectory() as d:
        for name, a in arrays.items():
            np.ascontiguousarray(a).tofile(os.path.join(d, name + ".bin"))
        with open(os.path.join(d, "args.txt"), "w") as f:
            for k, v in args.items():
                f.write(f"{k} {v}\n")
        env = dict(os.environ, OMP_NUM_THREADS=str(wte.get_num_threads()))
        subprocess.run([DRIVER, kernel, d], check=True, env=env)
        out = {}
        for fn in os.listdir(d):
            if fn.endswith(".out.bin"):
                name = fn[: -len(".out.bin")]
                dtype = np.int32 if name == "rows" else np.float32
                out[name] = np.fromfile(os.path.join(d, fn), dtype=dtype)
        return out


def assert_bits(test, got, want, what):
    got = np.ascontiguousarray(got, dtype=want.dtype).ravel()
    want = want.ravel()
    test.assertEqual(got.shape, want.shape, what)
    diff = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
    if diff.size:
        i = diff[0]
        test.fail(f"{what}: {diff.size} values differ; first at {i}: got {got[i]!r}, want {want[i]!r}")


class KernelsEqualCpp(unittest.TestCase):
    """Each kernel through Python == the same kernel through C++ (bit for bit)."""

    def setUp(self):
        if not os.path.exists(DRIVER):
            self.skipTest(f"{DRIVER} not built")
        self.rng = np.random.default_rng(3)

    def ids(self, n, v):
        ids = self.rng.integers(0, v, size=n).astype(np.int32)
        ids[::3] = 1  # duplicates: id 1 at every third position
        return ids

    def test_gather_and_forward(self):
        V, C, B, T = 50, 67, 3, 11
        table, wpe = general(self.rng, V, C), general(self.rng, 16, C)
        ids = self.ids(B * T, V).reshape(B, T)
        for threads in (1, 2):
            wte.set_num_threads(threads)
            want = run_driver("gather", {"table": table, "ids": ids}, C=C)["out"]
            got = wte.gather(table, ids)
            self.assertEqual(got.shape, (B, T, C))
            assert_bits(self, got, want, f"gather, {threads} threads")
            want = run_driver("embedding_forward", {"wte": table, "wpe": wpe, "ids": ids},
                              B=B, T=T, C=C)["out"]
            assert_bits(self, wte.embedding_forward(ids, table, wpe), want, "embedding_forward")

    def test_scatter_every_strategy(self):
        V, C, N = 40, 131, 300
        ids = self.ids(N, V)
        dout = general(self.rng, N, C)
        init = general(self.rng, V, C)
        for strategy in wte.scatter_strategies():
            for threads in (1, 2):
                wte.set_num_threads(threads)
                want = run_driver("scatter", {"dtable": init, "dout": dout, "ids": ids},
                                  C=C, strategy=strategy)["dtable"]
                got = init.copy()
                wte.scatter(got, dout, ids, strategy)
                assert_bits(self, got, want, f"scatter {strategy}, {threads} threads")

    def test_scatter_wpe(self):
        B, T, C = 4, 9, 33
        dout, init = general(self.rng, B, T, C), general(self.rng, 12, C)
        want = run_driver("scatter_wpe", {"dwpe": init, "dout": dout}, B=B, T=T, C=C)["dwpe"]
        got = init.copy()
        wte.scatter_wpe(got, dout)
        assert_bits(self, got, want, "scatter_wpe")

    def test_rows_and_lazy_adamw(self):
        V, C, N = 30, 37, 100
        ids, dout = self.ids(N, V), general(self.rng, N, C)
        hp = dict(lr=0.01, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, step=3)
        kw = dict(lr=0.01, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, step=3)
        want = run_driver("embedding_backward_rows", {"dout": dout, "ids": ids}, C=C, V=V)
        grad_rows, rows = wte.embedding_backward_rows(dout, ids, V)
        assert_bits(self, grad_rows, want["grad_rows"], "embedding_backward_rows: grad_rows")
        np.testing.assert_array_equal(rows, want["rows"])
        np.testing.assert_array_equal(rows, np.unique(ids))
        params, m = general(self.rng, V, C), general(self.rng, V, C) * 0.01
        v = np.abs(general(self.rng, V, C)) * 0.01
        start = {"params": params, "m": m, "v": v}
        want = run_driver("adamw_update_rows", dict(start, grad_rows=grad_rows, rows=rows), C=C, **hp)
        got = {k: a.copy() for k, a in start.items()}
        wte.adamw_update_rows(got["params"], got["m"], got["v"], grad_rows, rows, **kw)
        for k in got:
            assert_bits(self, got[k], want[k], f"adamw_update_rows: {k}")
        want_fused = run_driver("adamw_lazy", dict(start, dout=dout, ids=ids), C=C, **hp)
        fused = {k: a.copy() for k, a in start.items()}
        wte.adamw_lazy(fused["params"], fused["m"], fused["v"], dout, ids, **kw)
        for k in fused:
            assert_bits(self, fused[k], want_fused[k], f"adamw_lazy: {k}")
            assert_bits(self, fused[k], got[k], f"adamw_lazy vs rows + update: {k}")
        untouched = np.setdiff1d(np.arange(V), ids)
        assert_bits(self, fused["params"][untouched], params[untouched], "untouched rows")

    def test_dense_adamw(self):
        n = 1000
        params, grads = general(self.rng, n), general(self.rng, n)
        m, v = general(self.rng, n) * 0.1, np.abs(general(self.rng, n)) * 0.1
        want = run_driver("adamw", {"params": params, "grads": grads, "m": m, "v": v},
                          lr=0.001, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, step=7)
        p2, m2, v2 = params.copy(), m.copy(), v.copy()
        wte.adamw(p2, grads, m2, v2, lr=0.001, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, step=7)
        for name, a in (("params", p2), ("m", m2), ("v", v2)):
            assert_bits(self, a, want[name], f"adamw: {name}")

    def test_cross_entropy(self):
        N, V = 17, 203
        logits = general(self.rng, N, V) * 3
        targets = self.rng.integers(0, V, size=N).astype(np.int32)
        want = run_driver("cross_entropy_loss", {"logits": logits, "targets": targets})
        assert_bits(self, wte.cross_entropy_loss(logits, targets), want["losses"], "cross_entropy_loss")
        want = run_driver("softmax_cross_entropy", {"logits": logits, "targets": targets},
                          grad_scale=1.0 / N)
        dlogits = logits.copy()
        losses = wte.softmax_cross_entropy(dlogits, targets, 1.0 / N)
        assert_bits(self, losses, want["losses"], "softmax_cross_entropy: losses")
        assert_bits(self, dlogits, want["logits"], "softmax_cross_entropy: dlogits")
        if torch is not None:  # and PyTorch's cross-entropy, within float rounding
            t = torch.from_numpy(logits.copy()).requires_grad_()
            torch.nn.functional.cross_entropy(t, torch.from_numpy(targets).long()).backward()
            np.testing.assert_allclose(losses.mean(), torch.nn.functional.cross_entropy(
                torch.from_numpy(logits), torch.from_numpy(targets).long()).item(), rtol=1e-5)
            np.testing.assert_allclose(dlogits, t.grad.numpy(), rtol=1e-4, atol=1e-7)


class BadArguments(unittest.TestCase):
    """Wrong dtype, non-contiguous, out-of-range ids, wrong shapes: an exception naming the argument."""

    def setUp(self):
        rng = np.random.default_rng(1)
        self.table = general(rng, 10, 4)
        self.ids = np.array([1, 2, 3], dtype=np.int32)
        self.dout = general(rng, 3, 4)

    def raises(self, exc, name, fn):
        with self.assertRaises(exc) as cm:
            fn()
        self.assertTrue(str(cm.exception).startswith(name), f"message {str(cm.exception)!r} "
                        f"does not start with the argument {name!r}")

    def test_dtype(self):
        self.raises(TypeError, "table", lambda: wte.gather(self.table.astype(np.float64), self.ids))
        self.raises(TypeError, "ids", lambda: wte.gather(self.table, self.ids.astype(np.int64)))
        self.raises(TypeError, "ids", lambda: wte.gather(self.table, [1, 2]))
        self.raises(TypeError, "dout", lambda: wte.scatter(self.table, self.dout.astype(np.float16), self.ids))
        self.raises(TypeError, "logits", lambda: wte.cross_entropy_loss(self.table.astype(np.float64), self.ids))

    def test_non_contiguous(self):
        self.raises(ValueError, "table", lambda: wte.gather(np.asfortranarray(self.table), self.ids))
        self.raises(ValueError, "dtable", lambda: wte.scatter(self.table[:, ::2], self.dout[:, ::2], self.ids))
        self.raises(ValueError, "ids", lambda: wte.gather(self.table, np.arange(6, dtype=np.int32)[::2]))

    def test_ids_out_of_range(self):
        for bad in (10, -1, 2**31 - 1):
            ids = np.array([1, bad, 3], dtype=np.int32)
            self.raises(IndexError, "ids[1]", lambda: wte.gather(self.table, ids))
            before = self.table.copy()
            self.raises(IndexError, "ids[1]", lambda: wte.scatter(self.table, self.dout, ids))
            np.testing.assert_array_equal(self.table, before)  # nothing written
            self.raises(IndexError, "ids[1]", lambda: wte.adamw_lazy(
                self.table, np.zeros_like(self.table), np.zeros_like(self.table), self.dout, ids,
                lr=0.1, step=1))
        self.raises(IndexError, "targets[0]", lambda: wte.cross_entropy_loss(
            self.table[:1].copy(), np.array([4], dtype=np.int32)))

    def test_shapes_and_values(self):
        self.raises(ValueError, "table", lambda: wte.gather(self.table.ravel(), self.ids))
        self.raises(ValueError, "dout", lambda: wte.scatter(self.table, self.dout[:2], self.ids))
        self.raises(ValueError, "out", lambda: wte.gather(self.table, self.ids, np.zeros((3, 5), np.float32)))
        ro = np.zeros((3, 4), np.float32)
        ro.flags.writeable = False
        self.raises(ValueError, "out", lambda: wte.gather(self.table, self.ids, ro))
        self.raises(ValueError, "strategy", lambda: wte.scatter(self.table, self.dout, self.ids, "fastest"))
        self.raises(ValueError, "step", lambda: wte.adamw(self.table, self.table.copy(),
                    np.zeros_like(self.table), np.zeros_like(self.table), lr=0.1, step=0))
        self.raises(ValueError, "out and table", lambda: wte.gather(self.table, self.ids[:2], self.table[:2, :]))
        self.raises(ValueError, "rows[1]", lambda: wte.adamw_update_rows(
            self.table, np.zeros_like(self.table), np.zeros_like(self.table), self.dout[:2].copy(),
            np.array([2, 2], np.int32), lr=0.1, step=1))

    def test_torch_module(self):
        if torch is None:
            self.skipTest("torch is not importable")
        emb = wtorch.Embedding(10, 4)
        with self.assertRaises(IndexError) as cm:
            emb(torch.tensor([1, 10]))
        self.assertIn("10", str(cm.exception))
        with self.assertRaises(IndexError):
            emb(torch.tensor([-1]))
        with self.assertRaises(IndexError):
            emb(torch.tensor([2**40]))
        with self.assertRaises(TypeError) as cm:
            emb(torch.tensor([1.0]))
        self.assertTrue(str(cm.exception).startswith("input"))
        with self.assertRaises(NotImplementedError) as cm:
            wtorch.Embedding(10, 4, padding_idx=0)
        self.assertIn("padding_idx", str(cm.exception))
        with self.assertRaises(ValueError):
            wtorch.Embedding(10, 4, strategy="fastest")


@unittest.skipIf(torch is None, "torch is not importable")
class AgainstPyTorch(unittest.TestCase):
    """Gradients and training against torch.nn.Embedding."""

    def test_scatter_equals_nn_embedding_gradient(self):
        rng = np.random.default_rng(7)
        V, C, N = 50, 24, 400
        ids = rng.integers(0, V, size=N).astype(np.int32)
        ids[::2] = 7  # a hot row
        for make, exact_sums in ((exact, True), (general, False)):
            dout = make(rng, N, C)
            ref = torch.nn.Embedding(V, C)
            ref(torch.from_numpy(ids).long()).backward(torch.from_numpy(dout))
            want = ref.weight.grad.numpy()
            for strategy in wte.scatter_strategies():
                for threads in (1, 2):
                    wte.set_num_threads(threads)
                    got = np.zeros((V, C), np.float32)
                    wte.scatter(got, dout, ids, strategy)
                    what = f"scatter {strategy} {threads} threads ({make.__name__} inputs)"
                    if exact_sums:
                        assert_bits(self, got, want, what)
                    else:
                        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=what)

    def test_module_gradients(self):
        rng = np.random.default_rng(8)
        V, C = 30, 16
        idx = torch.from_numpy(rng.integers(0, V, size=(4, 25)))
        idx[:, ::3] = 5
        up = torch.from_numpy(exact(rng, 4, 25, C))
        for direct_grad in (True, False):
            ref = torch.nn.Embedding(V, C)
            emb = wtorch.Embedding(V, C, direct_grad=direct_grad)
            emb.load_state_dict(ref.state_dict())  # same keys as nn.Embedding
            out, want_out = emb(idx), ref(idx)
            assert_bits(self, out.detach().numpy(), want_out.detach().numpy(), "forward")
            (out * up).sum().backward()
            (want_out * up).sum().backward()
            assert_bits(self, emb.weight.grad.numpy(), ref.weight.grad.numpy(),
                        f"backward (direct_grad={direct_grad})")
            # a second backward accumulates, as autograd does
            (emb(idx) * up).sum().backward()
            (ref(idx) * up).sum().backward()
            assert_bits(self, emb.weight.grad.numpy(), ref.weight.grad.numpy(), "accumulated")
        # torch.autograd.grad needs the gradient to pass through autograd: direct_grad=False
        emb = wtorch.Embedding(V, C, direct_grad=False)
        (g,) = torch.autograd.grad((emb(idx) * up).sum(), emb.weight)
        ref = torch.nn.Embedding(V, C, _weight=emb.weight.detach().clone())
        (want,) = torch.autograd.grad((ref(idx) * up).sum(), ref.weight)
        assert_bits(self, g.numpy(), want.numpy(), "autograd.grad")

    def train(self, make_emb, tied, steps=25, fused=False, seed=0):
        """Losses of a small LM: emb -> tanh -> linear head (or tied wte^T), AdamW."""
        torch.manual_seed(seed)
        V, C, B, T = 64, 32, 8, 12
        emb = make_emb(V, C)
        init = torch.Generator().manual_seed(1)
        with torch.no_grad():
            emb.weight.copy_(torch.randn(V, C, generator=init) * 0.1)
        head = torch.nn.Linear(C, V, bias=True)
        with torch.no_grad():
            head.weight.copy_(torch.randn(V, C, generator=init) * 0.1)
            head.bias.zero_()
        params = list(head.parameters()) if fused else list(head.parameters()) + [emb.weight]
        opt = torch.optim.AdamW(params, lr=0.01, weight_decay=0.0)
        data = torch.Generator().manual_seed(2)
        losses = []
        for _ in range(steps):
            x = torch.randint(0, V, (B, T), generator=data)
            y = (x * 7 + 3) % V  # a learnable next-token map
            h = torch.tanh(emb(x))
            logits = h @ emb.weight.t() if tied else head(h)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            if fused == "torch-lazy":
                lazy_adamw_rows(emb, x, len(losses) + 1)
            opt.step()
            losses.append(loss.item())
        return np.array(losses)

    def test_trains_like_nn_embedding(self):
        for tied in (False, True):
            want = self.train(lambda V, C: torch.nn.Embedding(V, C), tied)
            got = self.train(lambda V, C: wtorch.Embedding(V, C), tied)
            self.assertLess(want[-1], want[0] - 0.3, "the model did not learn")
            np.testing.assert_allclose(got, want, rtol=1e-5,
                                       err_msg=f"losses, {'tied' if tied else 'untied'}")

    def test_fused_lazy_adamw_trains_like_torch_lazy_adamw(self):
        want = self.train(lambda V, C: torch.nn.Embedding(V, C), tied=False, fused="torch-lazy")
        got = self.train(lambda V, C: wtorch.Embedding(
            V, C, fused_adamw=wtorch.LazyAdamW(lr=0.01, betas=(0.9, 0.999), eps=1e-8)),
            tied=False, fused=True)
        self.assertLess(got[-1], got[0] - 0.3, "the model did not learn")
        np.testing.assert_allclose(got, want, rtol=1e-5, err_msg="losses, fused lazy AdamW")

    def test_fused_refuses_a_tied_table(self):
        emb = wtorch.Embedding(10, 4, fused_adamw=wtorch.LazyAdamW())
        x = torch.tensor([[1, 2, 3]])
        for _ in range(2):  # the tied gradient arrives in .grad; the next backward must refuse
            try:
                (emb(x) @ emb.weight.t()).sum().backward()
            except RuntimeError as e:
                self.assertIn("untied", str(e))
                return
        self.fail("a tied table with fused_adamw did not raise")


def lazy_adamw_rows(emb, x, step, lr=0.01, b1=0.9, b2=0.999, eps=1e-8):
    """Lazy AdamW in torch ops (include/wte/kernels.h: adamw_update_rows): only looked-up rows."""
    st = emb.__dict__.setdefault("_lazy", {"m": torch.zeros_like(emb.weight),
                                           "v": torch.zeros_like(emb.weight)})
    rows = torch.unique(x)
    with torch.no_grad():
        g = emb.weight.grad[rows]
        m = st["m"][rows] * b1 + (1 - b1) * g
        v = st["v"][rows] * b2 + (1 - b2) * g * g
        st["m"][rows], st["v"][rows] = m, v
        mhat, vhat = m / (1 - b1**step), v / (1 - b2**step)
        emb.weight[rows] -= lr * (mhat / (vhat.sqrt() + eps))
    emb.weight.grad = None


class CheckpointAndTokenizer(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        corpus = os.path.join(cls.tmp.name, "corpus.txt")
        with open(corpus, "w") as f:
            f.write("In the beginning the king said unto the people, and they went into the city.\n\n" * 40)
        cls.run_dir = os.path.join(cls.tmp.name, "run")
        subprocess.run([CLI, "train", "--config", os.path.join(SRC, "configs/embedding_only.ini"),
                        f"--data.text={corpus}", "--model.vocab_size=290", "--model.d_model=8",
                        "--model.n_ctx=8", "--data.seq_len=8", "--train.batch_size=2",
                        "--train.steps=2", "--train.snapshot_steps=", "--model.tie_embeddings=false",
                        f"--out={cls.run_dir}"], check=True, stdout=subprocess.DEVNULL)
        cls.ckpt = os.path.join(cls.run_dir, "checkpoint_00000002.h5")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_load_checkpoint(self):
        ck = wte.load_checkpoint(self.ckpt)
        self.assertEqual(ck["step"], 2)
        self.assertEqual(ck["config"]["model"]["vocab_size"], 290)
        self.assertIs(ck["config"]["model"]["tie_embeddings"], False)
        self.assertEqual(ck["wte"].shape, (290, 8))
        self.assertEqual(ck["lm_head"].shape, (290, 8))
        try:
            import h5py
        except ImportError:
            return
        with h5py.File(self.ckpt, "r") as f:
            for name in ("wte", "wpe", "ln_f/g", "ln_f/b", "lm_head"):
                assert_bits(self, ck[name], f[name][...], f"load_checkpoint {name} vs h5py")
        with self.assertRaises(wte.Error) as cm:
            wte.load_checkpoint(os.path.join(self.run_dir, "config.ini"))
        self.assertIn("config.ini", str(cm.exception))

    def test_tokenizer_from_checkpoint(self):
        tok = wte.Tokenizer.from_checkpoint(self.ckpt)
        self.assertEqual(len(tok), 290)
        text = "the king said unto the city ✓"
        self.assertEqual(tok.decode(tok.encode(text)), text)
        self.assertEqual(tok.decode_bytes(tok.encode(b"\xff\xfe")), b"\xff\xfe")
        with self.assertRaises(ValueError):
            tok.decode([290])

    def test_tokenizer_from_strings_refuses_deep_json(self):
        # 100,000 nested lists: refused with the limit named, not a crash of the interpreter.
        deep = b'{"a":' + b"[" * 100000 + b"]" * 100000 + b"}"
        with self.assertRaises(wte.Error) as cm:
            wte.Tokenizer.from_strings(deep, b"#version: 0.2\n")
        self.assertIn("nested deeper than 64", str(cm.exception))

    def test_gpt2_tokenizer(self):
        gpt2 = os.path.join(SRC, "datasets/gpt2")
        if not os.path.exists(os.path.join(gpt2, "encoder.json")):
            self.skipTest("datasets/gpt2 not fetched (datasets/fetch_gpt2_vocab.sh)")
        tok = wte.Tokenizer(gpt2)
        self.assertEqual(len(tok), 50257)
        self.assertEqual(tok.encode("The bank was muddy"), [464, 3331, 373, 39085])
        self.assertEqual(tok.encode(" cat"), [3797])
        self.assertEqual(tok.piece(3331), b" bank")
        self.assertEqual(tok.decode([464, 3331]), "The bank")
        with self.assertRaises(wte.Error):
            wte.Tokenizer(os.path.join(SRC, "no-such-dir"))


class ReadmeExample(unittest.TestCase):
    def test_python_example_is_in_readme_and_runs(self):
        path = os.path.join(SRC, "examples/python/example.py")
        with open(path) as f:
            example = f.read()
        with open(os.path.join(SRC, "README.md")) as f:
            self.assertIn("```python\n" + example + "```", f.read(),
                          "README.md's Python example differs from examples/python/example.py")
        if torch is None:
            self.skipTest("torch is not importable")
        env = dict(os.environ, PYTHONPATH=os.path.join(BIN, "python"))
        out = subprocess.run([sys.executable, path], env=env, check=True, capture_output=True,
                             text=True).stdout
        self.assertRegex(out, r"^loss \d+\.\d{3}; kernels on \w+")


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
