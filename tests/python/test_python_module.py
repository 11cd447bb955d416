#!/usr/bin/python3
"""The Python module `wte` (python/): kernels, checkpoints, tokenizer and wte.torch.Embedding.

  * every kernel called from Python equals the same kernel called from C++ (wte_kernel_driver),
    bit for bit, at 1 and 2 threads, with duplicate ids
  * the scatter (every strategy) and wte.torch.Embedding's backward equal PyTorch's nn.Embedding
    gradients: exactly when the sums are exact (multiples of 1/64), within float rounding otherwise
  * wte.torch.Embedding trains a small PyTorch model (untied and tied lm_head) to nn.Embedding's
    losses within float rounding; its fused lazy AdamW matches lazy AdamW written in torch ops
  * bad arguments (wrong dtype, non-contiguous, ids out of range, wrong shape, read-only) raise
    a Python exception naming the function and the argument ("gather: table has dtype ...")
  * an output overlapping any other argument (ids included), a non-finite or out-of-range
    hyper-parameter, a wrong type or size, a path with a NUL byte: TypeError/ValueError naming the
    argument, nothing written; every public function survives random hostile arguments (a child
    process must not die)
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


def assert_raises_naming(test, exc, prefix, fn):
    """fn() raises exc (exactly that class or a subclass) whose message starts with prefix
    ("<function>: <argument>"), never a raw pybind11 or C++ library message."""
    with test.assertRaises(exc) as cm:
        fn()
    msg = str(cm.exception)
    test.assertTrue(msg.startswith(prefix), f"message {msg!r} does not start with {prefix!r}")
    for raw in ("Unable to cast", "incompatible function arguments", "vector::", "std::"):
        test.assertNotIn(raw, msg)
    return msg


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

    def raises(self, exc, prefix, fn):
        assert_raises_naming(self, exc, prefix, fn)

    def test_dtype(self):
        self.raises(TypeError, "gather: table", lambda: wte.gather(self.table.astype(np.float64), self.ids))
        self.raises(TypeError, "gather: ids", lambda: wte.gather(self.table, self.ids.astype(np.int64)))
        self.raises(TypeError, "gather: ids", lambda: wte.gather(self.table, [1, 2]))
        self.raises(TypeError, "scatter: dout", lambda: wte.scatter(self.table, self.dout.astype(np.float16), self.ids))
        self.raises(TypeError, "cross_entropy_loss: logits", lambda: wte.cross_entropy_loss(self.table.astype(np.float64), self.ids))

    def test_non_contiguous(self):
        self.raises(ValueError, "gather: table", lambda: wte.gather(np.asfortranarray(self.table), self.ids))
        self.raises(ValueError, "scatter: dtable", lambda: wte.scatter(self.table[:, ::2], self.dout[:, ::2], self.ids))
        self.raises(ValueError, "gather: ids", lambda: wte.gather(self.table, np.arange(6, dtype=np.int32)[::2]))

    def test_ids_out_of_range(self):
        for bad in (10, -1, 2**31 - 1):
            ids = np.array([1, bad, 3], dtype=np.int32)
            self.raises(IndexError, "gather: ids[1]", lambda: wte.gather(self.table, ids))
            before = self.table.copy()
            self.raises(IndexError, "scatter: ids[1]", lambda: wte.scatter(self.table, self.dout, ids))
            np.testing.assert_array_equal(self.table, before)  # nothing written
            self.raises(IndexError, "adamw_lazy: ids[1]", lambda: wte.adamw_lazy(
                self.table, np.zeros_like(self.table), np.zeros_like(self.table), self.dout, ids,
                lr=0.1, step=1))
        self.raises(IndexError, "cross_entropy_loss: targets[0]", lambda: wte.cross_entropy_loss(
            self.table[:1].copy(), np.array([4], dtype=np.int32)))

    def test_shapes_and_values(self):
        self.raises(ValueError, "gather: table", lambda: wte.gather(self.table.ravel(), self.ids))
        self.raises(ValueError, "scatter: dout", lambda: wte.scatter(self.table, self.dout[:2], self.ids))
        self.raises(ValueError, "gather: out", lambda: wte.gather(self.table, self.ids, np.zeros((3, 5), np.float32)))
        ro = np.zeros((3, 4), np.float32)
        ro.flags.writeable = False
        self.raises(ValueError, "gather: out", lambda: wte.gather(self.table, self.ids, ro))
        self.raises(ValueError, "scatter: strategy", lambda: wte.scatter(self.table, self.dout, self.ids, "fastest"))
        self.raises(ValueError, "adamw: step", lambda: wte.adamw(self.table, self.table.copy(),
                    np.zeros_like(self.table), np.zeros_like(self.table), lr=0.1, step=0))
        self.raises(ValueError, "gather: out overlaps table", lambda: wte.gather(self.table, self.ids[:2], self.table[:2, :]))
        self.raises(ValueError, "adamw_update_rows: rows[1]", lambda: wte.adamw_update_rows(
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
        self.raises(ValueError, "wte.torch.Embedding: num_embeddings = -1", lambda: wtorch.Embedding(-1, 4))
        self.raises(ValueError, f"wte.torch.Embedding: num_embeddings = {2**40}",
                    lambda: wtorch.Embedding(2**40, 4))
        self.raises(TypeError, "wte.torch.Embedding: embedding_dim is a float", lambda: wtorch.Embedding(10, 4.0))
        self.raises(TypeError, "embeddings: need a torch.Tensor",
                    lambda: wtorch.Embedding.from_pretrained(np.ones((10, 4), np.float32)))


class SharedBuffer:
    """Arrays that are views of one zero-filled buffer at chosen byte offsets: overlapping (or
    adjacent) arguments that are not the same array."""

    def __init__(self, nbytes=4096):
        self.buf = np.zeros(nbytes, np.uint8)

    def at(self, offset, dtype, shape):
        n = int(np.prod(shape)) * np.dtype(dtype).itemsize
        return self.buf[offset:offset + n].view(dtype).reshape(shape)


class OverlappingArguments(unittest.TestCase):
    """An array a kernel or optimizer writes that shares bytes with any other argument (ids
    included; a view, not only the same array) raises ValueError "<function>: <output> overlaps
    <argument>" before anything is written."""

    V, C = 8, 4

    def refused(self, sb, prefix, fn):
        before = sb.buf.copy()
        assert_raises_naming(self, ValueError, prefix, fn)
        np.testing.assert_array_equal(sb.buf, before, f"{prefix}: memory written before the refusal")

    def big(self, *shape):  # inputs whose values, written over ids, would make them huge
        return np.full(shape, 1e30, np.float32)

    def test_gather(self):
        V, C = self.V, self.C
        sb = SharedBuffer()
        ids = sb.at(0, np.int32, (8,))
        self.refused(sb, "gather: out overlaps ids",
                     lambda: wte.gather(self.big(V, C), ids, sb.at(16, np.float32, (8, C))))
        table = sb.at(256, np.float32, (V, C))
        self.refused(sb, "gather: out overlaps table",
                     lambda: wte.gather(table, ids, sb.at(256 + 4, np.float32, (8, C))))
        # adjacent views of one buffer share no byte: accepted
        out = sb.at(32, np.float32, (8, C))
        wte.gather(self.big(V, C), ids, out)
        np.testing.assert_array_equal(ids, 0)
        np.testing.assert_array_equal(out, 1e30)

    def test_embedding_forward(self):
        V, C = self.V, self.C
        sb = SharedBuffer()
        ids = sb.at(0, np.int32, (2, 4))
        wpe = sb.at(512, np.float32, (4, C))
        self.refused(sb, "embedding_forward: out overlaps ids", lambda: wte.embedding_forward(
            ids, self.big(V, C), self.big(4, C), sb.at(28, np.float32, (2, 4, C))))
        self.refused(sb, "embedding_forward: out overlaps wpe", lambda: wte.embedding_forward(
            ids, self.big(V, C), wpe, sb.at(512 - 16, np.float32, (2, 4, C))))
        wte_table = sb.at(1024, np.float32, (V, C))
        self.refused(sb, "embedding_forward: out overlaps wte", lambda: wte.embedding_forward(
            ids, wte_table, self.big(4, C), sb.at(1024, np.float32, (2, 4, C))))

    def test_scatter(self):
        V, C = self.V, self.C
        sb = SharedBuffer()
        ids = sb.at(64, np.int32, (8,))
        for strategy in wte.scatter_strategies():
            self.refused(sb, "scatter: dtable overlaps ids", lambda: wte.scatter(
                sb.at(0, np.float32, (V, C)), self.big(8, C), ids, strategy))
        dout = sb.at(1024, np.float32, (8, C))
        self.refused(sb, "scatter: dtable overlaps dout", lambda: wte.scatter(
            sb.at(1024 + 4 * C * 7, np.float32, (V, C)), dout, np.zeros(8, np.int32)))

    def test_scatter_wpe(self):
        sb = SharedBuffer()
        dout = sb.at(0, np.float32, (2, 4, self.C))
        self.refused(sb, "scatter_wpe: dwpe overlaps dout", lambda: wte.scatter_wpe(
            sb.at(4, np.float32, (4, self.C)), dout))

    def moments(self):
        return np.zeros((self.V, self.C), np.float32), np.zeros((self.V, self.C), np.float32)

    def test_adamw_update_rows(self):
        V, C = self.V, self.C
        sb = SharedBuffer()
        rows = sb.at(0, np.int32, (2,))
        rows[:] = [1, 2]
        m, v = self.moments()
        kw = dict(lr=0.1, step=1)
        self.refused(sb, "adamw_update_rows: params overlaps rows", lambda: wte.adamw_update_rows(
            sb.at(0, np.float32, (V, C)), m, v, self.big(2, C), rows, **kw))
        grad_rows = sb.at(256, np.float32, (2, C))
        self.refused(sb, "adamw_update_rows: m overlaps grad_rows", lambda: wte.adamw_update_rows(
            np.zeros((V, C), np.float32), sb.at(256 - 4, np.float32, (V, C)), v, grad_rows,
            np.array([1, 2], np.int32), **kw))
        params = sb.at(1024, np.float32, (V, C))
        self.refused(sb, "adamw_update_rows: v overlaps params", lambda: wte.adamw_update_rows(
            params, m, sb.at(1024 + 4 * C * (V - 1), np.float32, (V, C)), self.big(2, C),
            np.array([1, 2], np.int32), **kw))

    def test_adamw_lazy(self):
        V, C = self.V, self.C
        sb = SharedBuffer()
        ids = sb.at(0, np.int32, (3,))
        ids[:] = [1, 2, 3]
        m, v = self.moments()
        kw = dict(lr=0.1, weight_decay=0.1, step=1)
        self.refused(sb, "adamw_lazy: params overlaps ids", lambda: wte.adamw_lazy(
            sb.at(0, np.float32, (V, C)), m, v, self.big(3, C), ids, **kw))
        np.testing.assert_array_equal(ids, [1, 2, 3])
        dout = sb.at(512, np.float32, (3, C))
        self.refused(sb, "adamw_lazy: m overlaps dout", lambda: wte.adamw_lazy(
            np.zeros((V, C), np.float32), sb.at(512 + 8, np.float32, (V, C)), v, dout,
            np.array([1, 2, 3], np.int32), **kw))

    def test_adamw(self):
        sb = SharedBuffer()
        grads = sb.at(0, np.float32, (16,))
        kw = dict(lr=0.1, step=1)
        self.refused(sb, "adamw: params overlaps grads", lambda: wte.adamw(
            sb.at(60, np.float32, (16,)), grads, np.zeros(16, np.float32), np.zeros(16, np.float32), **kw))
        m = sb.at(256, np.float32, (16,))
        self.refused(sb, "adamw: v overlaps m", lambda: wte.adamw(
            np.zeros(16, np.float32), np.ones(16, np.float32), m, sb.at(256 + 32, np.float32, (16,)), **kw))
        p = np.zeros(16, np.float32)
        self.refused(sb, "adamw: params overlaps grads", lambda: wte.adamw(
            p, p, np.zeros(16, np.float32), np.zeros(16, np.float32), **kw))

    def test_softmax_cross_entropy(self):
        sb = SharedBuffer()
        targets = sb.at(0, np.int32, (4,))
        logits = sb.at(0, np.float32, (4, self.V))
        logits[1:] = 50.0  # rows 1..3 (past targets' bytes): a large softmax gradient
        self.refused(sb, "softmax_cross_entropy: logits overlaps targets",
                     lambda: wte.softmax_cross_entropy(logits, targets, 1e30))
        self.refused(sb, "softmax_cross_entropy: logits overlaps targets",
                     lambda: wte.softmax_cross_entropy(sb.at(12, np.float32, (4, self.V)), targets))


class NonFiniteHyperParameters(unittest.TestCase):
    """NaN, inf and values beyond float32 in a hyper-parameter raise ValueError
    "<function>: <name> = <value> is not finite" before anything is written; values outside their
    range (lr >= 0, betas in [0, 1), eps > 0, weight_decay >= 0, step >= 1) and non-numbers raise
    too, naming the argument."""

    V, C = 6, 3

    def optimizer_calls(self):
        """(params, {function name: fn(**hyper-parameters)}), the calls on fresh arrays."""
        V, C = self.V, self.C
        rng = np.random.default_rng(5)
        p, m, v = general(rng, V, C), np.zeros((V, C), np.float32), np.zeros((V, C), np.float32)
        dout, ids = general(rng, 4, C), np.array([0, 2, 2, 5], np.int32)
        return p, {
            "adamw_update_rows": lambda **hp: wte.adamw_update_rows(
                p, m, v, dout[:2].copy(), np.array([1, 4], np.int32), **hp),
            "adamw_lazy": lambda **hp: wte.adamw_lazy(p, m, v, dout, ids, **hp),
            "adamw": lambda **hp: wte.adamw(p, general(rng, V, C), m, v, **hp),
        }

    def check(self, exc, fn_name, prefix, **hp):
        params, calls = self.optimizer_calls()
        before = params.copy()
        args = dict(dict(lr=0.01, step=1), **hp)
        msg = assert_raises_naming(self, exc, f"{fn_name}: {prefix}", lambda: calls[fn_name](**args))
        assert_bits(self, params, before, f"params after {msg!r}")

    def test_optimizers_refuse_non_finite(self):
        for fn_name in ("adamw_update_rows", "adamw_lazy", "adamw"):
            for bad, shown in ((float("nan"), "nan"), (float("inf"), "inf"), (-float("inf"), "-inf"),
                               (np.float32("nan"), "nan"), (1e39, "1e+39")):
                for name in ("lr", "eps", "weight_decay"):
                    self.check(ValueError, fn_name, f"{name} = {shown} is not finite", **{name: bad})
                self.check(ValueError, fn_name, f"betas[0] = {shown} is not finite", betas=(bad, 0.999))
                self.check(ValueError, fn_name, f"betas[1] = {shown} is not finite", betas=(0.9, bad))

    def test_optimizers_refuse_out_of_range_and_non_numbers(self):
        for fn_name in ("adamw_update_rows", "adamw_lazy", "adamw"):
            for exc, prefix, hp in (
                    (ValueError, "lr = -0.5, need >= 0", dict(lr=-0.5)),
                    (ValueError, "weight_decay = -0.1, need >= 0", dict(weight_decay=-0.1)),
                    (ValueError, "eps = 0.0, need > 0", dict(eps=0.0)),
                    (ValueError, "betas[0] = 1.0, need in [0, 1)", dict(betas=(1.0, 0.9))),
                    (ValueError, "betas[1] = 0.99999999", dict(betas=(0.9, 0.99999999))),  # 1.0f
                    (ValueError, "betas has 1 items", dict(betas=(0.9,))),
                    (TypeError, "betas is a float", dict(betas=0.9)),
                    (TypeError, "lr is a str", dict(lr="0.01")),
                    (TypeError, "weight_decay is a NoneType", dict(weight_decay=None)),
                    (ValueError, "step = 0, need >= 1", dict(step=0)),
                    (ValueError, "step = 1180591620717411303424", dict(step=2**70)),
                    (TypeError, "step is a float", dict(step=1.0))):
                self.check(exc, fn_name, prefix, **hp)

    def test_softmax_cross_entropy_grad_scale(self):
        rng = np.random.default_rng(6)
        logits, targets = general(rng, 3, 5), np.array([0, 4, 2], np.int32)
        before = logits.copy()
        for bad, shown in ((float("nan"), "nan"), (float("inf"), "inf"), (-float("inf"), "-inf"),
                           (1e39, "1e+39")):
            assert_raises_naming(self, ValueError,
                                 f"softmax_cross_entropy: grad_scale = {shown} is not finite",
                                 lambda: wte.softmax_cross_entropy(logits, targets, bad))
        assert_raises_naming(self, TypeError, "softmax_cross_entropy: grad_scale is a str",
                             lambda: wte.softmax_cross_entropy(logits, targets, "1"))
        assert_bits(self, logits, before, "logits after the refusals")
        wte.softmax_cross_entropy(logits, targets, np.float32(0.5))  # numpy scalars are numbers

    def test_lazy_adamw_hyper_parameters(self):
        if torch is None:
            self.skipTest("torch is not importable")
        nan, inf = float("nan"), float("inf")
        for exc, prefix, hp in (
                (ValueError, "LazyAdamW: weight_decay = nan is not finite", dict(weight_decay=nan)),
                (ValueError, "LazyAdamW: lr = inf is not finite", dict(lr=inf)),
                (ValueError, "LazyAdamW: eps = nan is not finite", dict(eps=nan)),
                (ValueError, "LazyAdamW: betas[1] = nan is not finite", dict(betas=(0.9, nan))),
                (ValueError, "LazyAdamW: weight_decay = -1.0, need >= 0", dict(weight_decay=-1.0)),
                (TypeError, "LazyAdamW: lr is a str", dict(lr="1e-3"))):
            assert_raises_naming(self, exc, prefix, lambda: wtorch.LazyAdamW(**hp))
        hp = wtorch.LazyAdamW(lr=0.01)
        assert_raises_naming(self, ValueError, "LazyAdamW: lr = nan is not finite",
                             lambda: setattr(hp, "lr", nan))
        self.assertEqual(hp.lr, 0.01)
        # a fused Embedding with a checked LazyAdamW never fills its table with NaN
        emb = wtorch.Embedding(10, 4, fused_adamw=hp)
        emb(torch.tensor([[1, 2, 3]])).sum().backward()
        self.assertTrue(torch.isfinite(emb.weight).all())


class ArgumentTypesAndSizes(unittest.TestCase):
    """Wrong types, negative and huge sizes: a TypeError or ValueError naming the function and the
    argument, never pybind11's "Unable to cast" nor a C++ length_error."""

    def test_sizes_and_counts(self):
        dout, ids = np.ones((3, 4), np.float32), np.array([1, 0, 1], np.int32)
        for exc, prefix, V in ((ValueError, "embedding_backward_rows: num_embeddings = -1", -1),
                               (ValueError, f"embedding_backward_rows: num_embeddings = {2**70}", 2**70),
                               (TypeError, "embedding_backward_rows: num_embeddings is a float", 2.0),
                               (TypeError, "embedding_backward_rows: num_embeddings is a str", "2")):
            assert_raises_naming(self, exc, prefix, lambda: wte.embedding_backward_rows(dout, ids, V))
        want = wte.embedding_backward_rows(dout, ids, 2)
        for V in (2**62, np.int64(2**40)):  # far above every id: the same rows, nothing V-sized
            got = wte.embedding_backward_rows(dout, ids, V)
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])
        threads = wte.get_num_threads()
        try:
            for exc, prefix, n in ((TypeError, "set_num_threads: n is a str", "2"),
                                   (TypeError, "set_num_threads: n is a float", 2.0),
                                   (ValueError, "set_num_threads: n = 0", 0),
                                   (ValueError, "set_num_threads: n = 1000000", 10**6),
                                   (ValueError, f"set_num_threads: n = {2**64}", 2**64)):
                assert_raises_naming(self, exc, prefix, lambda: wte.set_num_threads(n))
            self.assertEqual(wte.get_num_threads(), threads)
        finally:
            wte.set_num_threads(threads)

    def test_types(self):
        table, ids = np.ones((10, 4), np.float32), np.array([1, 2], np.int32)
        for exc, prefix, fn in (
                (TypeError, "gather: table is a str", lambda: wte.gather("table", ids)),
                (TypeError, "gather: out is a list", lambda: wte.gather(table, ids, [0.0] * 8)),
                (TypeError, "scatter: strategy is a NoneType",
                 lambda: wte.scatter(table, np.ones((2, 4), np.float32), ids, None)),
                (ValueError, "scatter: strategy contains a NUL byte",
                 lambda: wte.scatter(table, np.ones((2, 4), np.float32), ids, "sorted\0x")),
                (TypeError, "cross_entropy_loss: targets is a int",
                 lambda: wte.cross_entropy_loss(table, 3)),
                (ValueError, "gather: ids has 32 dimensions",
                 lambda: wte.gather(table, np.zeros((1,) * 32, np.int32)))):
            assert_raises_naming(self, exc, prefix, fn)


class Fuzz(unittest.TestCase):
    """Every public function called with random hostile arguments (wrong types, shapes, dtypes,
    non-contiguous and read-only arrays, views of one buffer that overlap, negative and huge
    sizes, NaN) in a child process: each call returns or raises TypeError, ValueError or
    IndexError (wte.torch also RuntimeError, NotImplementedError) with no raw pybind11/C++
    message, and the process never dies."""

    SEEDS = (1, 2, 3)
    CALLS = 2000

    def test_hostile_arguments(self):
        env = dict(os.environ, WTE_BINARY_DIR=BIN, OMP_NUM_THREADS="2")
        for seed in self.SEEDS:
            with_torch = "torch" if seed == self.SEEDS[0] else "-"
            proc = subprocess.run([sys.executable, "-u", "-c", FUZZ_CHILD, str(seed), str(self.CALLS),
                                   with_torch],
                                  env=env, capture_output=True, text=True, timeout=120)
            tail = "\n".join(proc.stdout.splitlines()[-3:])
            self.assertGreaterEqual(proc.returncode, 0,
                                    f"seed {seed}: killed by signal {-proc.returncode}; last calls:\n{tail}")
            self.assertEqual(proc.returncode, 0, f"seed {seed}:\n{tail}\n{proc.stderr[-2000:]}")


FUZZ_CHILD = r'''
import os, random, sys
sys.path.insert(0, os.path.join(os.environ["WTE_BINARY_DIR"], "python"))
import numpy as np
import wte
seed, calls, with_torch = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "torch"
torch = None
if with_torch:  # importing torch takes seconds: one child only
    try:
        import torch
        import wte.torch as wtorch
    except ImportError:
        pass
rng = random.Random(seed)
nrng = np.random.default_rng(seed)
V, C = 6, 4
buf = np.zeros(256, np.uint8)  # small: views of it overlap often
nan, inf = float("nan"), float("inf")
HOSTILE = [None, "x", b"x", "a\0b", "\ud800", 1.5, nan, inf, -inf, 1e39, -1, 0, 1, 2, 2**31,
           2**63, 2**70, -2**70, True, [1, 2], (0.9,), (0.9, 0.999, 0.5), (nan, 0.9), (0.9, inf),
           object(), np.float32("nan"), np.int64(3), 1 + 1j, {}, [], [1.5], ["a"], [2**40],
           "auto", "sorted\0x", "serial", "/", "", "/nonexistent/x.h5", np.zeros(()),
           np.zeros((2, 2), np.int64)]


def view(dtype, shape):
    """A view of the shared buffer at a random 4-byte offset: overlapping arguments."""
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    if n > len(buf):
        return np.zeros(shape, dtype)
    off = rng.randrange(0, (len(buf) - n) // 4 + 1) * 4
    return buf[off:off + n].view(dtype).reshape(shape)


def floats(*shape):
    r = rng.random()
    if r < 0.5:
        return view(np.float32, shape)
    return np.full(shape, rng.choice([1.0, -2.5, 1e30, nan, inf]), np.float32)


def ints(*shape, hi=V):
    if rng.random() < 0.5:
        return view(np.int32, shape)  # zeros: valid ids
    return nrng.integers(0, hi, size=shape).astype(np.int32)


def wrong_array():
    shape = tuple(rng.choice([0, 1, 2, 3, 4, 7]) for _ in range(rng.choice([0, 1, 2, 3])))
    k = rng.randrange(7)
    if k == 0:
        return np.zeros(shape, rng.choice([np.float64, np.int64, np.float16, np.bool_, np.uint32]))
    if k == 1:
        return np.zeros(shape + (2,), np.float32)[..., 0]  # not contiguous
    if k == 2:
        a = np.zeros(shape, np.float32)
        a.flags.writeable = False
        return a
    if k == 3:
        return nrng.integers(-3, 2**31 - 1, size=shape).astype(np.int32)  # ids out of range
    if k == 4:
        return np.asfortranarray(np.zeros((3, 2), rng.choice([np.float32, np.int32])))
    if k == 5:
        return view(rng.choice([np.float32, np.int32]), shape)
    return np.full(shape, nan, np.float32)


def maybe(plausible):
    r = rng.random()
    if r < 0.8:
        return plausible
    if r < 0.9:
        return wrong_array()
    return rng.choice(HOSTILE)


def hyper():
    return dict(lr=maybe(0.1), betas=maybe((0.9, 0.999)), eps=maybe(1e-8),
                weight_decay=maybe(rng.choice([0.0, 0.1])), step=maybe(rng.randint(1, 5)))


def tokenizer():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    import json
    encoder = json.dumps({chr(c): i for i, c in enumerate(cs)})
    return wte.Tokenizer.from_strings(encoder.encode(), b"#version: 0.2\n")


TOK = tokenizer()
B, T = 2, 3
ALLOWED = (TypeError, ValueError, IndexError)
TORCH_ALLOWED = ALLOWED + (RuntimeError, NotImplementedError)


def torch_embedding():
    emb = wtorch.Embedding(maybe(V), maybe(C), strategy=maybe("sorted"),
                           direct_grad=rng.random() < 0.5,
                           fused_adamw=maybe(rng.choice([None, wtorch.LazyAdamW(lr=0.1)])))
    emb(maybe(torch.from_numpy(ints(B, T)).long())).sum().backward()


def calls_list():
    N, K = rng.choice([0, 1, 5]), rng.choice([0, 1])
    out = [
        ("gather", lambda: wte.gather(maybe(floats(V, C)), maybe(ints(N)), maybe(rng.choice([None, floats(N, C)])))),
        ("embedding_forward", lambda: wte.embedding_forward(maybe(ints(B, T)), maybe(floats(V, C)),
                                                            maybe(floats(T, C)), maybe(rng.choice([None, floats(B, T, C)])))),
        ("scatter", lambda: wte.scatter(maybe(floats(V, C)), maybe(floats(N, C)), maybe(ints(N)),
                                        maybe(rng.choice(wte.scatter_strategies())))),
        ("scatter_wpe", lambda: wte.scatter_wpe(maybe(floats(T, C)), maybe(floats(B, T, C)))),
        ("embedding_backward_rows", lambda: wte.embedding_backward_rows(maybe(floats(N, C)), maybe(ints(N)), maybe(V))),
        ("adamw_update_rows", lambda: wte.adamw_update_rows(maybe(floats(V, C)), maybe(floats(V, C)), maybe(floats(V, C)),
                                                            maybe(floats(K, C)), maybe(ints(K)), **hyper())),
        ("adamw_lazy", lambda: wte.adamw_lazy(maybe(floats(V, C)), maybe(floats(V, C)), maybe(floats(V, C)),
                                              maybe(floats(N, C)), maybe(ints(N)), **hyper())),
        ("adamw", lambda: wte.adamw(maybe(floats(9)), maybe(floats(9)), maybe(floats(9)), maybe(floats(9)), **hyper())),
        ("softmax_cross_entropy", lambda: wte.softmax_cross_entropy(maybe(floats(N, V)), maybe(ints(N)), maybe(0.5))),
        ("cross_entropy_loss", lambda: wte.cross_entropy_loss(maybe(floats(N, V)), maybe(ints(N)))),
        ("set_num_threads", lambda: wte.set_num_threads(maybe(rng.choice([1, 2])))),
        ("get_num_threads", lambda: wte.get_num_threads()),
        ("simd_target", lambda: wte.simd_target()),
        ("scatter_strategies", lambda: wte.scatter_strategies()),
        ("load_checkpoint", lambda: wte.load_checkpoint(maybe("/nonexistent/checkpoint.h5"))),
        ("Tokenizer", lambda: wte.Tokenizer(maybe("/nonexistent"))),
        ("Tokenizer.from_checkpoint", lambda: wte.Tokenizer.from_checkpoint(maybe("/nonexistent.h5"))),
        ("Tokenizer.from_strings", lambda: wte.Tokenizer.from_strings(maybe(b"{}"), maybe(b"#version: 0.2\n"))),
        ("Tokenizer.encode", lambda: TOK.encode(maybe("hello"))),
        ("Tokenizer.decode", lambda: TOK.decode(maybe([1, 2]))),
        ("Tokenizer.decode_bytes", lambda: TOK.decode_bytes(maybe(np.array([3, 4])))),
        ("Tokenizer.piece", lambda: TOK.piece(maybe(5))),
        ("Tokenizer.id_of", lambda: TOK.id_of(maybe(b"a"))),
    ]
    if torch is not None:
        out += [
            ("torch.LazyAdamW", lambda: wtorch.LazyAdamW(**{k: v for k, v in hyper().items() if k != "step"})),
            ("torch.LazyAdamW.set", lambda: setattr(wtorch.LazyAdamW(), rng.choice(
                ["lr", "betas", "eps", "weight_decay"]), rng.choice(HOSTILE))),
            ("torch.Embedding", torch_embedding),
            ("torch.Embedding.from_pretrained", lambda: wtorch.Embedding.from_pretrained(
                maybe(torch.ones(V, C)), strategy=maybe("sorted"))(torch.tensor([1, 2]))),
        ]
    return out


bad = []
for i in range(calls):
    buf[:] = 0
    name, fn = rng.choice(calls_list())
    print(i, name, flush=True)
    try:
        fn()
    except (TORCH_ALLOWED if name.startswith("torch.") else ALLOWED) as e:
        msg = str(e)
        if any(raw in msg for raw in ("Unable to cast", "vector::", "std::", "_M_")):
            bad.append(f"{name}: raw message {type(e).__name__}: {msg[:200]}")
    except Exception as e:
        bad.append(f"{name}: {type(e).__name__}: {str(e)[:200]}")
for line in bad[:20]:
    print("BAD", line)
sys.exit(1 if bad else 0)
'''


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

    def test_paths_with_a_nul_byte(self):
        # The C library would stop at the NUL byte and open the checkpoint named before it.
        for path in (self.ckpt + "\0.bak", (self.ckpt + "\0").encode()):
            assert_raises_naming(self, ValueError, "load_checkpoint: path contains a NUL byte",
                                 lambda: wte.load_checkpoint(path))
            assert_raises_naming(self, ValueError,
                                 "Tokenizer.from_checkpoint: path contains a NUL byte",
                                 lambda: wte.Tokenizer.from_checkpoint(path))
        assert_raises_naming(self, ValueError, "Tokenizer: dir contains a NUL byte",
                             lambda: wte.Tokenizer(self.run_dir + "\0x"))
        assert_raises_naming(self, TypeError, "load_checkpoint: path is a NoneType",
                             lambda: wte.load_checkpoint(None))
        import pathlib  # str, bytes and os.PathLike are paths

        self.assertEqual(wte.load_checkpoint(pathlib.Path(self.ckpt))["step"], 2)
        self.assertEqual(wte.load_checkpoint(self.ckpt.encode())["step"], 2)

    def test_tokenizer_argument_types(self):
        tok = wte.Tokenizer.from_checkpoint(self.ckpt)
        for exc, prefix, fn in (
                (TypeError, "Tokenizer.decode: ids[1] is a float", lambda: tok.decode([1, 1.5])),
                (TypeError, "Tokenizer.decode: ids is a int", lambda: tok.decode(5)),
                (TypeError, "Tokenizer.decode_bytes: ids has dtype float32",
                 lambda: tok.decode_bytes(np.zeros(2, np.float32))),
                (ValueError, f"Tokenizer.decode: ids[0] = {2**32}", lambda: tok.decode([2**32])),
                (ValueError, "Tokenizer.encode: text is not encodable as UTF-8",
                 lambda: tok.encode("\ud800")),
                (TypeError, "Tokenizer.encode: text is a int", lambda: tok.encode(5)),
                (TypeError, "Tokenizer.piece: id is a str", lambda: tok.piece("a")),
                (ValueError, f"Tokenizer.piece: id = {2**40}", lambda: tok.piece(2**40)),
                (TypeError, "Tokenizer.from_strings: encoder_json is a int",
                 lambda: wte.Tokenizer.from_strings(1, b"")),
                (TypeError, "Tokenizer: dir is a int", lambda: wte.Tokenizer(3))):
            assert_raises_naming(self, exc, prefix, fn)
        self.assertEqual(tok.decode(np.array(tok.encode("the king"), np.int64)), "the king")

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
