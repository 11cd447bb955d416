#!/usr/bin/python3
"""Checkpoints that reach outside their file are refused, and the outside is never opened.

HDF5 lets a dataset keep its bytes in another file (external storage: any path, a FIFO included),
map another file's dataset (a virtual dataset), name another file or object (external and soft
links), or pass its bytes through a filter. From a checkpoint of `wte train`, the table 'wte' is
replaced by each of these in turn (h5py), and each command that reads checkpoints must refuse the
file with a message naming the dataset and what it points to, within a few seconds:
`wte inspect`, `wte export`, `wte sample`, `wte train --resume FILE`, `wte train --resume auto`
(which skips the file, says why, and continues from the checkpoint before it), and, when the
Python module is built, `wte.load_checkpoint` and `wte.Model.load`.
Under strace (when installed) no process of theirs opens the outside file; its unique bytes never
appear in any output or export. Run by ctest with /usr/bin/python3 (WTE_CLI, WTE_BINARY_DIR,
WTE_SOURCE_DIR set); exit 77 = skipped.
"""
import os
import shutil
import signal
import subprocess
import sys
import time

try:
    import h5py
    import numpy as np
except ImportError as e:
    print(f"skip: h5py or numpy is not available under /usr/bin/python3 ({e})")
    sys.exit(77)

CLI = os.environ["WTE_CLI"]
BIN = os.environ["WTE_BINARY_DIR"]
WORK = os.path.join(BIN, "test_tmp", "hdf5_outside_refs")
STRACE = shutil.which("strace")
MARK = b"WTE-OUTSIDE-BYTES-7f3a:"  # the foreign bytes: must never show up anywhere
LIMIT_S = 8.0  # "within a few seconds", on a busy 2-core machine

failures = []


def fail(msg):
    print("FAIL: " + msg)
    failures.append(msg)


def tiny_run():
    """A run directory with checkpoints of steps 5 and 10 of a tiny tied model."""
    import random
    r = random.Random(7)
    w = "the king said unto them and people went into city bank river money water land house".split()
    docs = ["\n".join(" ".join(r.choice(w) for _ in range(12)) + "." for _ in range(4)) for _ in range(80)]
    with open(os.path.join(WORK, "corpus.txt"), "w") as f:
        f.write("\n\n".join(docs) + "\n")
    with open(os.path.join(WORK, "tiny.ini"), "w") as f:
        f.write(f"""[model]
vocab_size = 300
d_model = 16
n_ctx = 16
[data]
text = {WORK}/corpus.txt
seq_len = 16
[train]
batch_size = 4
steps = 10
eval_interval = 10
eval_tokens = 256
threads = 1
snapshot_steps = 0
[optim]
warmup_steps = 2
[checkpoint]
interval = 5
keep_last = 2
""")
    run = os.path.join(WORK, "run")
    subprocess.run([CLI, "train", "--quiet", "--config", os.path.join(WORK, "tiny.ini"), "--out", run],
                   check=True, stdout=subprocess.DEVNULL, timeout=300)
    return run


def replace_wte(path, make):
    """Rewrites checkpoint `path` with its dataset 'wte' made by make(file, shape)."""
    with h5py.File(path, "r+") as f:
        shape = f["wte"].shape
        del f["wte"]
        make(f, shape)


def foreign_bytes(nbytes):
    """MARK repeated: as float32 every 4 bytes of printable ASCII are a finite number, so a reader
    that followed the reference would accept them as a table."""
    return (MARK * (nbytes // len(MARK) + 1))[:nbytes]


def make_variants(ckpt):
    """(name, path of the hostile checkpoint, what the refusal must say, foreign file or None)."""
    with h5py.File(ckpt, "r") as f:
        shape = f["wte"].shape
    nbytes = int(np.prod(shape)) * 4
    secret = os.path.join(WORK, "secret.bin")
    with open(secret, "wb") as f:
        f.write(foreign_bytes(nbytes))
    fifo = os.path.join(WORK, "secret.fifo")
    os.mkfifo(fifo)
    foreign_h5 = os.path.join(WORK, "foreign.h5")
    with h5py.File(foreign_h5, "w") as f:
        f["wte"] = np.frombuffer(foreign_bytes(nbytes), dtype="<f4").reshape(shape)

    def external(target):
        return lambda f, shape: f.create_dataset("wte", shape=shape, dtype="<f4",
                                                 external=[(target, 0, nbytes)])

    def elink(f, shape):
        f["wte"] = h5py.ExternalLink(foreign_h5, "/wte")

    def soft(f, shape):
        f["wte"] = h5py.SoftLink("/wpe")

    def virtual(f, shape):
        layout = h5py.VirtualLayout(shape=shape, dtype="<f4")
        layout[:] = h5py.VirtualSource(foreign_h5, "wte", shape=shape)
        f.create_virtual_dataset("wte", layout)

    def deflate(f, shape):
        f.create_dataset("wte", data=np.zeros(shape, "<f4"), chunks=(shape[0], shape[1]),
                         compression="gzip", fletcher32=True)

    def unknown_filter(f, shape):
        # A filter id HDF5 does not know, marked optional: HDF5 stores the chunk unfiltered.
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk(shape)
        dcpl.set_filter(32123, h5py.h5z.FLAG_OPTIONAL, ())
        space = h5py.h5s.create_simple(shape)
        ds = h5py.h5d.create(f.id, b"wte", h5py.h5t.IEEE_F32LE, space, dcpl=dcpl)
        ds.write(h5py.h5s.ALL, h5py.h5s.ALL, np.zeros(shape, "<f4"))

    q = lambda p: "'" + p + "'"
    cases = [
        ("external_file", external(secret),
         "dataset 'wte' keeps its bytes in an external file " + q(secret), secret),
        ("external_fifo", external(fifo),
         "dataset 'wte' keeps its bytes in an external file " + q(fifo), fifo),
        ("external_link", elink, "'wte' is an external link to the file " + q(foreign_h5) +
         " object '/wte'", foreign_h5),
        ("virtual", virtual, "dataset 'wte' is a virtual dataset whose data comes from the file " +
         q(foreign_h5), foreign_h5),
        ("deflate", deflate, "dataset 'wte' is stored through the HDF5 filter 'deflate' (id 1)", None),
        ("unknown_filter", unknown_filter, "dataset 'wte' is stored through the HDF5 filter", None),
        ("soft_link", soft, "'wte' is a soft link to '/wpe'", None),
    ]
    out = []
    for name, make, message, foreign in cases:
        path = os.path.join(WORK, name + ".h5")
        shutil.copyfile(ckpt, path)
        replace_wte(path, make)
        out.append((name, path, message, foreign))
    return out


def run(argv, log_name, env=None):
    """Runs argv in its own session under strace (if installed), at most 30 s (then the whole
    session is killed). Returns (exit status, stdout+stderr bytes, seconds, strace log path)."""
    trace = os.path.join(WORK, log_name + ".strace")
    if STRACE:
        argv = [STRACE, "-f", "-qq", "-e", "trace=open,openat,openat2,creat", "-o", trace] + argv
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                         env=env)
    try:
        out, _ = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # the session this test started
        out, _ = p.communicate()
        out += b"\n(killed after 30 s)"
    return p.returncode, out, time.monotonic() - t0, trace if STRACE else None


def check(case, command, argv, want_status, foreign, message, extra_files=()):
    name = case + ": " + command
    status, out, seconds, trace = run(argv, case + "_" + command.replace(" ", "_"))
    text = out.decode("utf-8", "replace")
    if (want_status == 0) != (status == 0):
        fail(f"{name}: exit status {status}; output:\n{text}")
    if message not in text:
        fail(f"{name}: the output does not say \"{message}\":\n{text}")
    if seconds > LIMIT_S:
        fail(f"{name}: took {seconds:.1f} s (allowed {LIMIT_S} s)")
    if MARK in out:
        fail(f"{name}: the foreign bytes appear in the output")
    for path in extra_files:  # the files the command wrote (an export, a run directory)
        if not os.path.exists(path):
            continue
        for root, _, files in os.walk(path) if os.path.isdir(path) else [("", [], [path])]:
            for fn in files:
                with open(os.path.join(root, fn), "rb") as f:
                    if MARK in f.read():
                        fail(f"{name}: the foreign bytes appear in {os.path.join(root, fn)}")
    if trace and foreign:
        with open(trace) as f:
            opened = [line for line in f if os.path.basename(foreign) in line]
        if opened:
            fail(f"{name}: '{foreign}' was opened:\n" + "".join(opened[:3]))


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    if not STRACE:
        print("note: strace is not installed: the opens are not traced (the FIFO case still shows "
              "a read would block)")
    run_dir = tiny_run()
    good = os.path.join(run_dir, "checkpoint_00000005.h5")
    newest = os.path.join(run_dir, "checkpoint_00000010.h5")
    variants = make_variants(newest)
    pydir = os.path.join(BIN, "python")
    have_python = any(fn.startswith("_wte") for fn in os.listdir(os.path.join(pydir, "wte"))) \
        if os.path.isdir(os.path.join(pydir, "wte")) else False
    if not have_python:
        print("note: the Python module is not built (target wte_python; WTE_PYTHON=OFF): its loaders are not checked")
    for case, path, message, foreign in variants:
        check(case, "inspect", [CLI, "inspect", path], 1, foreign, message)
        export_dir = os.path.join(WORK, case + "_export")
        check(case, "export", [CLI, "export", "--checkpoint", path, "--out", export_dir], 1, foreign,
              message, [export_dir])
        check(case, "sample", [CLI, "sample", "--checkpoint", path, "--prompt", "the king", "-n", "4"],
              1, foreign, message)
        check(case, "train --resume FILE",
              [CLI, "train", "--quiet", "--resume", path, "--out", os.path.join(WORK, case + "_resumed")],
              1, foreign, message)
        # --resume auto: the newest checkpoint is hostile; it is skipped (said), the run continues
        # from step 5 and finishes.
        auto_dir = os.path.join(WORK, case + "_auto")
        os.makedirs(auto_dir)
        for fn in os.listdir(run_dir):
            src = os.path.join(run_dir, fn)
            if os.path.isdir(src):
                shutil.copytree(src, os.path.join(auto_dir, fn))
            elif fn != "checkpoint_00000010.h5":
                shutil.copy(src, auto_dir)
        shutil.copyfile(path, os.path.join(auto_dir, "checkpoint_00000010.h5"))
        check(case, "train --resume auto", [CLI, "train", "--resume", "auto", "--out", auto_dir], 0,
              foreign, message, [auto_dir])
        if have_python:
            env = dict(os.environ, PYTHONPATH=pydir)
            for call in ("wte.load_checkpoint(p)", "wte.Model.load(p)"):
                code = ("import sys, wte\np = sys.argv[1]\ntry:\n    " + call +
                        "\nexcept Exception as e:\n    print(type(e).__name__ + ': ' + str(e)); sys.exit(1)\n"
                        "print('loaded without an error'); sys.exit(0)")
                status, out, seconds, trace = run(["/usr/bin/python3", "-c", code, path],
                                                  case + "_" + call.split("(")[0], env)
                text = out.decode("utf-8", "replace")
                tag = f"{case}: {call}"
                if status != 1 or message not in text:
                    fail(f"{tag}: exit status {status}, expected an exception saying \"{message}\":\n{text}")
                if seconds > LIMIT_S:
                    fail(f"{tag}: took {seconds:.1f} s (allowed {LIMIT_S} s)")
                if MARK in out:
                    fail(f"{tag}: the foreign bytes appear in the output")
                if trace and foreign:
                    with open(trace) as f:
                        if any(os.path.basename(foreign) in line for line in f):
                            fail(f"{tag}: '{foreign}' was opened")
        print(f"{case}: checked")
    # The untouched checkpoint still loads (the checks refuse only what reaches outside).
    status, out, _, _ = run([CLI, "inspect", good], "good_inspect")
    if status != 0:
        fail("the valid checkpoint is refused:\n" + out.decode("utf-8", "replace"))
    if have_python:
        code = ("import sys, wte\nwte.load_checkpoint(sys.argv[1])\nm = wte.Model.load(sys.argv[2])\n"
                "print('loaded', m.d_model)")
        status, out, _, _ = run(["/usr/bin/python3", "-c", code, good, run_dir], "good_python",
                                dict(os.environ, PYTHONPATH=pydir))
        if status != 0:
            fail("Python does not load the valid checkpoint:\n" + out.decode("utf-8", "replace"))
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print(f"{len(variants)} hostile checkpoints refused by every command; no outside file opened")
    return 0


if __name__ == "__main__":
    sys.exit(main())
