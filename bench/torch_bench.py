"""Helpers shared by the wte-against-PyTorch benchmarks (bench/torch_embedding.py, torch_gpt2.py,
torch_loss.py): their common options, the skip when PyTorch is missing, the environment of a fair PyTorch worker process
(../shared/PLATFORM.md: OpenBLAS, tcmalloc, thread counts), running a worker that answers in JSON,
the CPU's model name and the load average printed beside the numbers, and writing the --out table.

The benchmarks run as scripts (/usr/bin/python3 bench/torch_X.py), so this file's folder is on
sys.path and they `import torch_bench`.
"""
import argparse
import os
import subprocess
import sys

OPENBLAS_DIR = "/usr/lib/x86_64-linux-gnu/openblas-pthread"
TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"

# ctest's exit code for a skipped test; the benchmarks use it when PyTorch is missing.
SKIP = 77


def argument_parser(doc, shapes=False):
    """The benchmark's argparse parser: `doc` as its description (shown as written), --wte, and
    with `shapes` the loss/embedding shape options --vocab (GPT-2's 50257), --d-model (768) and
    --tokens (8192), in that order."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--wte", default="build/wte", help="the built wte binary")
    if shapes:
        p.add_argument("--vocab", type=int, default=50257)
        p.add_argument("--d-model", type=int, default=768)
        p.add_argument("--tokens", type=int, default=8192)
    return p


def torch_missing():
    """True (after printing the SKIP line with the Debian packages to install) when this
    interpreter cannot import torch; the caller then returns SKIP."""
    try:
        import torch  # noqa: F401
    except ImportError:
        print("SKIP: PyTorch is not importable by /usr/bin/python3; install Debian's python3-torch "
              "(apt-get install python3-torch libopenblas0-pthread libtcmalloc-minimal4)")
        return True
    return False


def torch_env(threads, base=None, passive_wait=True):
    """The environment of a PyTorch worker process at `threads` threads: a copy of `base` (default
    os.environ) with OMP_NUM_THREADS and OPENBLAS_NUM_THREADS set, OMP_WAIT_POLICY=passive unless
    it is set or passive_wait is False, OpenBLAS's pthread build first on LD_LIBRARY_PATH and
    tcmalloc in LD_PRELOAD. Either library missing is said on stderr (the comparison is then
    unfair to PyTorch)."""
    env = dict(os.environ if base is None else base,
               OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    if passive_wait:
        env.setdefault("OMP_WAIT_POLICY", "passive")
    if os.path.isdir(OPENBLAS_DIR):
        env["LD_LIBRARY_PATH"] = OPENBLAS_DIR + ":" + env.get("LD_LIBRARY_PATH", "")
    else:
        print("warning: %s missing: torch uses the slow reference BLAS" % OPENBLAS_DIR, file=sys.stderr)
    if os.path.exists(TCMALLOC):
        env["LD_PRELOAD"] = TCMALLOC
    else:
        print("warning: %s missing: torch pays page faults on fresh gradients (its dense backward "
              "among them)" % TCMALLOC, file=sys.stderr)
    return env


def run_worker(argv, env, what="PyTorch worker"):
    """Runs `argv` (a worker: a script's own --worker mode) with `env` and returns its stdout; exits
    naming `what` and showing the worker's stderr when it fails."""
    r = subprocess.run(argv, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("%s failed:\n%s" % (what, r.stderr))
    return r.stdout


def cpu_model():
    """lscpu's 'Model name' of this machine ('unknown' when lscpu is missing or does not say)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def load_average():
    """The 1-minute load average."""
    return os.getloadavg()[0]


def write_out(path, text):
    """Writes `text` and a final newline to `path` (the --out option) when a path is given."""
    if path:
        with open(path, "w") as f:
            f.write(text + "\n")
