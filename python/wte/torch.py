"""wte.torch: a drop-in torch.nn.Embedding whose backward is wte's deterministic scatter.

    emb = wte.torch.Embedding(50257, 768)        # like torch.nn.Embedding(50257, 768)
    h = emb(idx)                                  # forward: wte.gather (a prefetching row copy)
    loss.backward()                               # emb.weight.grad += wte.scatter(...)

Backward (direct_grad=True, the default) adds the lookup's gradient straight into
``emb.weight.grad`` with wte's sorted scatter: only the looked-up rows are read or written, and no
V x C temporary is made, zero-filled and then added (what nn.Embedding's dense backward does).
The bits do not depend on the thread count. ``weight.grad`` is created (zeros) on the first
backward and then kept, so ``optimizer.zero_grad()`` (set_to_none=False, torch 1.x's default) zeros
it in place; with set_to_none=True it is re-created each step. Everything that reads
``weight.grad`` after backward (optimizers, clip_grad_norm_, a tied lm_head's own gradient adding
into it) works. What direct accumulation cannot serve: ``torch.autograd.grad(..., emb.weight)``
and hooks on ``emb.weight`` (the gradient does not pass through autograd); use
``direct_grad=False`` there: backward then returns a fresh dense gradient, as nn.Embedding does.

Untied tables can carry the optimizer inside backward (wte's fused lazy AdamW, which touches only
the looked-up rows; bench/torch_embedding.py times it against a dense backward plus
torch.optim.AdamW):

    emb = wte.torch.Embedding(V, C, fused_adamw=wte.torch.LazyAdamW(lr=1e-3, weight_decay=0.0))
    optimizer = torch.optim.AdamW(p for n, p in model.named_parameters() if n != "emb.weight")

Each backward then updates the looked-up rows of emb.weight at once (AdamW on those rows only;
the other rows' moments do not decay: torch.optim.SparseAdam's semantics, plus decoupled weight
decay on the touched rows; bias correction uses the global step ``emb.adamw_step``), and
emb.weight.grad stays None. Change the learning rate with ``emb.fused_adamw.lr = ...``. The moments
are buffers (``adamw_m``, ``adamw_v``, ``adamw_step``) saved in the state_dict. clip_grad_norm_
does not see this table's gradient. The table must not be tied (used elsewhere): a gradient
arriving in emb.weight.grad from elsewhere raises RuntimeError.

Only float32 CPU tables; padding_idx, max_norm, scale_grad_by_freq and sparse=True are not
supported (NotImplementedError names them). Ids: any integer tensor on the CPU; an id outside
[0, num_embeddings) raises IndexError naming it (as nn.Embedding does).
"""
import torch as _torch

from . import _wte

__all__ = ["Embedding", "LazyAdamW"]


class LazyAdamW:
    """Hyper-parameters of the fused lazy AdamW an untied Embedding applies in its backward.
    Same meaning and defaults as torch.optim.AdamW except weight_decay (default 0.0 here, 0.01 there);
    mutable between steps (emb.fused_adamw.lr = new_lr).

    Every value is checked when set, as wte.adamw_lazy checks it: finite, lr >= 0, betas in [0, 1),
    eps > 0, weight_decay >= 0 (ValueError, TypeError for a non-number, naming the attribute)."""

    _HYPERPARAMETERS = ("lr", "betas", "eps", "weight_decay")

    def __init__(self, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay

    def __setattr__(self, name, value):
        if name in self._HYPERPARAMETERS:
            value = _wte._adamw_hyperparameter("LazyAdamW", name, value)
        object.__setattr__(self, name, value)

    def __repr__(self):
        return (f"LazyAdamW(lr={self.lr}, betas={self.betas}, eps={self.eps}, "
                f"weight_decay={self.weight_decay})")


def _ids_int32(input):
    if not isinstance(input, _torch.Tensor):
        raise TypeError(f"input: need a torch.Tensor of integer ids, got {type(input).__name__}")
    if input.is_floating_point() or input.is_complex() or input.dtype == _torch.bool:
        raise TypeError(f"input: dtype {input.dtype}, need integer ids (torch.long or torch.int32)")
    if input.device.type != "cpu":
        raise ValueError(f"input: on {input.device}, wte runs on the CPU")
    # The kernels take int32 ids (GPT-2's 50257 fit); ids beyond int32 are out of range anyway.
    if input.dtype != _torch.int32:
        lo_hi = (input.min().item(), input.max().item()) if input.numel() else (0, 0)
        if lo_hi[0] < -2**31 or lo_hi[1] >= 2**31:
            bad = lo_hi[0] if lo_hi[0] < -2**31 else lo_hi[1]
            raise IndexError(f"input: id {bad} is outside [0, num_embeddings)")
        input = input.to(_torch.int32)
    return input.contiguous()


class _EmbeddingFunction(_torch.autograd.Function):
    @staticmethod
    def forward(ctx, ids32, weight, module):
        out = _torch.empty(tuple(ids32.shape) + (weight.shape[1],), dtype=weight.dtype)
        _wte.gather(weight.detach().numpy(), ids32.numpy(), out.numpy())
        ctx.save_for_backward(ids32)
        ctx.module = module
        return out

    @staticmethod
    def backward(ctx, grad_output):
        (ids32,) = ctx.saved_tensors
        module = ctx.module
        weight = module.weight
        dout = grad_output.contiguous()
        if dout.dtype != _torch.float32:
            dout = dout.float()
        if module.fused_adamw is not None:
            module._fused_adamw_step(dout, ids32)
            return None, None, None
        if module.direct_grad:
            grad = weight.grad
            if grad is None:
                grad = _torch.zeros_like(weight, memory_format=_torch.contiguous_format)
                weight.grad = grad
            elif not grad.is_contiguous() or grad.dtype != _torch.float32 or grad.is_sparse:
                raise RuntimeError("emb.weight.grad: not a contiguous float32 dense tensor; "
                                   "use direct_grad=False")
            _wte.scatter(grad.numpy(), dout.numpy(), ids32.numpy(), module.strategy)
            return None, None, None
        grad = _torch.zeros_like(weight, memory_format=_torch.contiguous_format)
        _wte.scatter(grad.numpy(), dout.numpy(), ids32.numpy(), module.strategy)
        return None, grad, None


class Embedding(_torch.nn.Module):
    """torch.nn.Embedding with wte's gather forward and deterministic scatter backward (module
    docstring). Same parameter (``weight``, (num_embeddings, embedding_dim), init N(0, 1)), same
    state_dict keys as nn.Embedding when fused_adamw is None.

    strategy: the scatter strategy (wte.scatter_strategies(); "auto" = sorted, or serial for tiny
    work; all but "private-hot" give bits independent of the thread count).
    direct_grad: True adds into weight.grad directly (fast); False returns a dense gradient
    through autograd (works with torch.autograd.grad and hooks).
    fused_adamw: a LazyAdamW to update the (untied) table inside backward.
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 device=None, dtype=None, *, strategy="auto", direct_grad=True, fused_adamw=None):
        super().__init__()
        for name, value, default in (("padding_idx", padding_idx, None), ("max_norm", max_norm, None),
                                     ("scale_grad_by_freq", scale_grad_by_freq, False),
                                     ("sparse", sparse, False)):
            if value != default:
                raise NotImplementedError(f"wte.torch.Embedding: {name}={value!r} is not supported")
        if dtype not in (None, _torch.float32):
            raise NotImplementedError(f"dtype: {dtype}; wte's tables are float32")
        if device is not None and _torch.device(device).type != "cpu":
            raise NotImplementedError(f"device: {device}; wte runs on the CPU")
        if not isinstance(strategy, str):
            raise TypeError(f"wte.torch.Embedding: strategy is a {type(strategy).__name__}, need a str")
        if strategy not in _wte.scatter_strategies():
            raise ValueError(f"strategy: {strategy!r} is not one of {_wte.scatter_strategies()}")
        if fused_adamw is not None and not isinstance(fused_adamw, LazyAdamW):
            raise TypeError(f"fused_adamw: need a wte.torch.LazyAdamW, got {type(fused_adamw).__name__}")
        for name, value, most in (("num_embeddings", num_embeddings, 2**31),  # int32 ids
                                  ("embedding_dim", embedding_dim, None)):
            if isinstance(value, bool) or not hasattr(value, "__index__"):
                raise TypeError(f"wte.torch.Embedding: {name} is a {type(value).__name__}, need an int")
            if value < 0 or (most is not None and value > most):
                raise ValueError(f"wte.torch.Embedding: {name} = {value}, need >= 0"
                                 + (f" and <= {most}" if most is not None else ""))
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        self.norm_type, self.padding_idx, self.max_norm = norm_type, None, None
        self.scale_grad_by_freq, self.sparse = False, False
        self.strategy, self.direct_grad, self.fused_adamw = strategy, bool(direct_grad), fused_adamw
        if _weight is None:
            self.weight = _torch.nn.Parameter(
                _torch.empty(self.num_embeddings, self.embedding_dim, dtype=_torch.float32))
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (self.num_embeddings, self.embedding_dim):
                raise ValueError(f"_weight: shape {tuple(_weight.shape)}, need "
                                 f"({self.num_embeddings}, {self.embedding_dim})")
            self.weight = _torch.nn.Parameter(_weight.detach().to(_torch.float32).contiguous())
        if fused_adamw is not None:
            self.register_buffer("adamw_m", _torch.zeros_like(self.weight.detach()))
            self.register_buffer("adamw_v", _torch.zeros_like(self.weight.detach()))
            self.register_buffer("adamw_step", _torch.zeros((), dtype=_torch.int64))

    def reset_parameters(self):
        _torch.nn.init.normal_(self.weight)  # nn.Embedding's init

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, **kwargs):
        """As nn.Embedding.from_pretrained: a (V, C) tensor becomes the table."""
        if not isinstance(embeddings, _torch.Tensor):
            raise TypeError(f"embeddings: need a torch.Tensor, got {type(embeddings).__name__}")
        if embeddings.dim() != 2:
            raise ValueError(f"embeddings: {embeddings.dim()} dimensions, need 2")
        emb = cls(embeddings.shape[0], embeddings.shape[1], _weight=embeddings, **kwargs)
        emb.weight.requires_grad = not freeze
        return emb

    def forward(self, input):
        w = self.weight
        if w.dtype != _torch.float32 or w.device.type != "cpu" or not w.is_contiguous():
            raise RuntimeError("weight: wte needs a contiguous float32 CPU table "
                               f"(got {w.dtype} on {w.device})")
        ids32 = _ids_int32(input)
        if not (_torch.is_grad_enabled() and w.requires_grad):
            out = _torch.empty(tuple(ids32.shape) + (self.embedding_dim,), dtype=_torch.float32)
            return _torch.from_numpy(_wte.gather(w.detach().numpy(), ids32.numpy(), out.numpy()))
        return _EmbeddingFunction.apply(ids32, w, self)

    def _fused_adamw_step(self, dout, ids32):
        if self.weight.grad is not None:
            raise RuntimeError(
                "wte.torch.Embedding(fused_adamw=...): weight also received a gradient from "
                "elsewhere (a tied lm_head?); the fused update needs an untied table")
        hp = self.fused_adamw
        self.adamw_step += 1
        _wte.adamw_lazy(self.weight.detach().numpy(), self.adamw_m.numpy(), self.adamw_v.numpy(),
                        dout.numpy(), ids32.numpy(), lr=hp.lr, betas=hp.betas, eps=hp.eps,
                        weight_decay=hp.weight_decay, step=int(self.adamw_step))

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}, strategy={self.strategy!r}"
        if not self.direct_grad:
            s += ", direct_grad=False"
        if self.fused_adamw is not None:
            s += f", fused_adamw={self.fused_adamw!r}"
        return s
