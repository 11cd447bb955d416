"""wte: GPT-2 token-embedding kernels, checkpoints and tokenizer from C++ (README.md: From PyTorch).

Kernels work in place on numpy arrays, never copying them: tables and gradients are float32,
ids int32, all C-contiguous. An array a function writes must not share memory with any other
argument (ids included). Hyper-parameters are finite: lr >= 0, betas in [0, 1), eps > 0,
weight_decay >= 0, step an int >= 1. Everything is checked before any work: a wrong type or dtype
raises TypeError; a wrong shape, a non-contiguous or read-only array, overlapping arguments, a
non-finite or out-of-range value, a path with a NUL byte ValueError; an id outside [0, V)
IndexError. Each message starts with the function and the argument ("gather: out overlaps ids",
"adamw: lr = inf is not finite"). Kernels run on OpenMP threads (set_num_threads or
OMP_NUM_THREADS).

    gather(table, ids, out=None)              out = table[ids]                    (lookup)
    embedding_forward(ids, wte, wpe, out=None) out[b, t] = wte[ids[b, t]] + wpe[t]
    scatter(dtable, dout, ids, strategy="auto")  dtable[ids[n]] += dout[n]         (lookup backward)
    scatter_wpe(dwpe, dout)                   dwpe[t] += sum_b dout[b, t]
    embedding_backward_rows(dout, ids, V)     (grad_rows, rows): touched rows' summed gradients
    adamw_update_rows(params, m, v, grad_rows, rows, lr=, betas=, eps=, weight_decay=, step=)
    adamw_lazy(params, m, v, dout, ids, lr=, ...)  fused lookup backward + lazy AdamW (untied tables)
    adamw(params, grads, m, v, lr=, ...)       dense AdamW (torch.optim.AdamW's formula)
    softmax_cross_entropy(logits, targets, grad_scale=1.0) -> losses; logits become dlogits
    cross_entropy_loss(logits, targets) -> losses
    load_checkpoint(path) -> {"wte": ndarray, ..., "config": {...}, "step": int}
    Tokenizer(dir)  GPT-2's encoder.json + vocab.bpe: encode, decode, decode_bytes, piece, len()
    wte.torch.Embedding  a torch.nn.Embedding replacement (imported on first use of wte.torch)
"""
from ._wte import (  # noqa: F401
    Error,
    Tokenizer,
    adamw,
    adamw_lazy,
    adamw_update_rows,
    cross_entropy_loss,
    embedding_backward_rows,
    embedding_forward,
    gather,
    get_num_threads,
    scatter,
    scatter_strategies,
    scatter_wpe,
    set_num_threads,
    simd_target,
    softmax_cross_entropy,
)
from . import _wte

__version__ = "0.1.0"


def _typed(value):
    """An INI value as Python: int, float, bool (true/false) or the string itself."""
    for parse in (int, float):
        try:
            return parse(value)
        except ValueError:
            pass
    if value in ("true", "false"):
        return value == "true"
    return value


def load_checkpoint(path):
    """Reads a wte checkpoint (validated as `wte inspect` does; wte.Error if it is not one).

    Returns a dict: every parameter tensor under its checkpoint name ("wte" (V, C), "wpe"
    (n_ctx, C), "ln_f/g", "ln_f/b", "lm_head" when untied, ...) as a float32 numpy array,
    plus "config" (the resolved config: {"model": {"vocab_size": 50257, ...}, "data": ..., ...})
    and "step" (int). The tokenizer it holds: Tokenizer.from_checkpoint(path).
    """
    import configparser

    tensors, config_ini, step, _, _ = _wte._load_checkpoint(path, "load_checkpoint")
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(config_ini)
    result = dict(tensors)
    result["config"] = {s: {k: _typed(v) for k, v in parser[s].items()} for s in parser.sections()}
    result["step"] = step
    return result


def _tokenizer_from_checkpoint(path):
    """The tokenizer stored in a wte checkpoint."""
    _, _, _, encoder_json, vocab_bpe = _wte._load_checkpoint(path, "Tokenizer.from_checkpoint")
    return Tokenizer.from_strings(encoder_json, vocab_bpe)


Tokenizer.from_checkpoint = staticmethod(_tokenizer_from_checkpoint)


def __getattr__(name):
    # wte.torch is imported on first use, so `import wte` never pays for importing torch.
    if name == "torch":
        import importlib

        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module 'wte' has no attribute {name!r}")
