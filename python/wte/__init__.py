"""wte from Python: trained models, training, kernels, checkpoints, tokenizer (docs/python.md).

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

A trained model, in the conventions of PyTorch and Hugging Face (docs/python.md has the details):

    m = wte.Model.load("runs/default")    # a checkpoint .h5, or a run directory (its newest)
    logits = m(ids)                       # ids (B, T) or (T,) integers: (B, T, V) or (T, V) float32
    logits, hidden_states = m(ids, output_hidden_states=True)
                                          # n_layer + 1 arrays (B, T, C), Hugging Face's order:
                                          # embeddings, each block's input, the last after ln_f
    m.generate("And God said", max_new_tokens=100, temperature=1.0, top_k=40, top_p=1.0,
               seed=1337, stop=None)       # the text `wte sample` prints with the same options
    m.loss(ids)                           # ids (B, T + 1): mean next-token cross-entropy (nats)
    m.tokenizer, m.config, m.step, m.path, m.vocab_size, m.d_model, m.n_ctx, m.n_layer, m.n_head
    wte.train("configs/default.ini", out="runs/mine", progress=print, **{"train.steps": 100})
    wte.train(out="runs/mine", resume="auto")   # continue it after Ctrl-C (KeyboardInterrupt)
    wte.train("configs/default.ini", out="runs/tuned", init_from="runs/mine/checkpoint_00000100.h5")
"""
import os as _os


def _apply_default_wait_policy():
    """OMP_WAIT_POLICY=passive, `wte`'s default (docs/python.md: Threads), when the environment sets
    neither it nor GOMP_SPINCOUNT and libgomp is not yet loaded in this process (libgomp reads it
    once, when it loads: with the compiled part below, unless e.g. torch was imported first; then
    libgomp keeps its own default, and a run's progress line says which policy it has)."""
    if "OMP_WAIT_POLICY" in _os.environ or "GOMP_SPINCOUNT" in _os.environ:
        return
    try:
        with open("/proc/self/maps") as maps:
            if "libgomp" in maps.read():
                return
    except OSError:
        return
    _os.environ["OMP_WAIT_POLICY"] = "passive"
    _os.environ["WTE_DEFAULT_WAIT_POLICY"] = "1"  # so the run says "(wte's default)"


_apply_default_wait_policy()
try:
    from . import _wte
except ImportError as e:  # the compiled part was never built, or not for this Python
    raise ImportError(
        "wte's compiled part (wte._wte) is missing or does not load: " + str(e) + ". Build it with "
        "`pip install --no-build-isolation .` in wte's source tree (a virtual environment made "
        "with --system-site-packages), or build the CMake target wte_python (cmake --build build "
        "--target wte_python) and put build/python on PYTHONPATH. README.md: Python."
    ) from e
from ._wte import (  # noqa: F401
    Error,
    Model,
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
    simd_target_cap,
    softmax_cross_entropy,
)

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


def _config_dict(config_ini):
    """An INI text as {"section": {"key": value}} with typed values."""
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(config_ini)
    return {s: {k: _typed(v) for k, v in parser[s].items()} for s in parser.sections()}


Model.config = property(
    lambda self: _config_dict(self.config_ini),
    doc="The model's stored config: {'model': {'vocab_size': ..., 'd_model': ...}, 'train': ...}.")


def train(config=None, *, out=None, resume=None, init_from=None, overwrite=False, quiet=False,
          progress=None, **overrides):
    """Trains a model as `wte train` does (the same library call), in this process; returns a
    summary dict.

    config: an INI file (configs/default.ini) or None (the built-in defaults; with resume or
    init_from, the checkpoint's own config). overrides: config keys as `section.key` or
    `section__key` (Python names cannot hold dots): wte.train("configs/default.ini",
    train__steps=100) or **{"train.steps": 100}; values are converted with str() (bools as
    true/false). out: the run directory (default runs/<config name>, as `wte train`); a directory
    holding an earlier run is refused unless overwrite=True. resume: a checkpoint path, or "auto"
    (the newest valid checkpoint in out; none: the run starts again from step 0): continues that
    run exactly, bit for bit with the same thread count. init_from: a checkpoint (wte train's, a
    snapshot, a `wte import`ed model): a fresh run from step 0 from its weights and tokenizer.
    quiet: no progress lines on stdout (the final summary still prints). progress: called after
    every step with a dict (step, steps, loss, val_loss (None unless evaluated), lr, grad_norm,
    tokens_per_second, elapsed_seconds); returning False stops the run after that step with a
    checkpoint, and an exception it raises (KeyboardInterrupt too) stops the run the same way and
    is raised again. Ctrl-C finishes the step, writes a checkpoint and raises KeyboardInterrupt;
    continue with resume="auto". The GIL is released while training. Threads: train.threads, or
    OMP_NUM_THREADS; OMP_WAIT_POLICY as `wte train` (passive unless set, when wte is imported
    before anything that loads libgomp). Returns {"out", "final_val_loss", "unigram_baseline",
    "tokens_per_second", "train_seconds", "last_checkpoint", "stopped", "start_step", "step",
    "already_complete"}. Bad keys or values raise wte.Error (a ValueError) naming them.
    """
    args = []
    for key, value in overrides.items():
        name = key.replace("__", ".") if "." not in key else key
        if isinstance(value, bool):
            value = "true" if value else "false"
        args.append(f"--{name}={value}")
    return _wte._train(config, args, out, overwrite, quiet, progress, resume, init_from)


def __getattr__(name):
    # wte.torch is imported on first use, so `import wte` never pays for importing torch.
    if name == "torch":
        import importlib

        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module 'wte' has no attribute {name!r}")
