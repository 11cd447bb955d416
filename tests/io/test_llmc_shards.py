#!/usr/bin/python3
"""ctest: wte's token shards against llm.c's dev/data format, read and written here with numpy
(docs/data.md).

llm.c's format (karpathy/llm.c, dev/data/data_common.py write_datafile, llmc/dataloader.h): a
header of 256 int32 (magic 20240520, version 1, token count, the rest 0), then the tokens as
uint16; for larger vocabularies magic 20240801, version 7 and uint32 tokens.

1. `wte prepare` (2 threads, small shards, a .gz input) with a byte-level vocabulary (no merges,
   so each id is its byte's, in GPT-2's bytes_to_unicode order): the reader below, written from
   the format alone, reads every shard, and the ids are the bytes of each split's text as the
   documented rule deals the documents (blank lines; document i to validation when
   floor((i+1)f) > floor(i f); documents joined by a blank line).
2. Shards written here with numpy, uint16 and uint32, as a glob: `wte train` on them ends with a
   checkpoint bit-identical (h5diff of every group and dataset but /config, which names the data
   files) to training on the same ids as one int32 token file.
3. A run on the shards stopped at step 6 and resumed ends bit-identical to the uninterrupted run
   (windows cross shard boundaries).
Skipped (exit 77) without numpy or h5diff. Environment (set by ctest): WTE_CLI, WTE_BINARY_DIR.
"""
import glob
import gzip
import json
import math
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("skipped: numpy is not importable by /usr/bin/python3")
    sys.exit(77)
if shutil.which("h5diff") is None:
    print("skipped: h5diff (hdf5-tools) is not installed")
    sys.exit(77)

CLI = os.environ["WTE_CLI"]
WORK = os.path.join(os.environ["WTE_BINARY_DIR"], "test_tmp", "llmc_shards")
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)


def run(*args):
    r = subprocess.run([CLI, *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: wte {' '.join(args)} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r.stdout


def byte_order():
    """GPT-2's bytes_to_unicode order: id i is byte order[i]."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    return bs + [b for b in range(256) if b not in bs]


def write_byte_vocab(d):
    order = byte_order()
    chars, n = {}, 0
    for b in range(256):  # bytes_to_unicode's code points
        if b in order[:188]:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + n)
            n += 1
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "encoder.json"), "w", encoding="utf-8") as f:
        json.dump({chars[b]: i for i, b in enumerate(order)}, f)
    with open(os.path.join(d, "vocab.bpe"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
    return {b: i for i, b in enumerate(order)}


def read_llmc_shard(path):
    """llm.c's reader, from the format: header checks, then exactly `count` tokens."""
    raw = open(path, "rb").read()
    header = np.frombuffer(raw[:1024], dtype="<i4")
    if header[0] == 20240520:
        assert header[1] == 1, f"{path}: version {header[1]}"
        dtype = "<u2"
    else:
        assert header[0] == 20240801 and header[1] == 7, f"{path}: magic {header[0]} version {header[1]}"
        dtype = "<u4"
    assert not header[3:].any(), f"{path}: header words 3..255 are not zero"
    tokens = np.frombuffer(raw[1024:], dtype=dtype)
    assert len(tokens) == header[2], f"{path}: header says {header[2]} tokens, file has {len(tokens)}"
    return tokens


def write_llmc_shard(path, ids, dtype):
    header = np.zeros(256, dtype="<i4")
    header[:3] = (20240520, 1, len(ids)) if dtype == "<u2" else (20240801, 7, len(ids))
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(ids, dtype=dtype).tobytes())


def split(docs, f):
    train, val = [], []
    for i, d in enumerate(docs):
        (val if math.floor((i + 1) * f) > math.floor(i * f) else train).append(d)
    return "\n\n".join(train), "\n\n".join(val)


# --- 1. wte prepare's shards, read by llm.c's format ---------------------------------------------
vocab = os.path.join(WORK, "vocab")
byte_id = write_byte_vocab(vocab)
docs_a = [f"Document {i}: the quick brown fox, {i * i} times.\nIts second line." for i in range(400)]
docs_b = [f"Zweites Dokument {i} \u00fcber Stra\u00dfen" for i in range(300)]
os.makedirs(os.path.join(WORK, "corpus", "sub"))
with open(os.path.join(WORK, "corpus", "a.txt"), "w", encoding="utf-8") as f:
    f.write("\n\n\n".join(docs_a) + "\n")
with gzip.open(os.path.join(WORK, "corpus", "sub", "b.txt.gz"), "wt", encoding="utf-8") as f:
    f.write("\n\n".join(docs_b))
out = os.path.join(WORK, "prepared")
run("prepare", "--tokenizer", vocab, "--out", out, "--threads", "2", "--shard-tokens", "5000",
    "--val-fraction", "0.1", os.path.join(WORK, "corpus"))
want_train, want_val = split(docs_a + docs_b, 0.1)
for name, text in (("train", want_train), ("val", want_val)):
    shards = sorted(glob.glob(os.path.join(out, f"{name}_*.bin")))
    got = np.concatenate([read_llmc_shard(p) for p in shards])
    want = np.array([byte_id[b] for b in text.encode("utf-8")], dtype=np.int64)
    assert len(got) == len(want), f"{name}: {len(got)} tokens, expected {len(want)}"
    assert (got == want).all(), f"{name}: first difference at {int(np.argmax(got != want))}"
    print(f"prepare: {name} split, {len(got)} tokens in {len(shards)} shards, read by llm.c's format")

# --- 2. shards written with numpy, read by wte train -----------------------------------------------
ids = np.array([byte_id[b] for b in want_train.encode("utf-8")], dtype=np.int64)
val_ids = np.array([byte_id[b] for b in want_val.encode("utf-8")], dtype=np.int64)
shard_dir = os.path.join(WORK, "numpy_shards")
os.makedirs(shard_dir)
cuts = [0, 7000, 15000, 26000, len(ids)]
for k in range(4):
    write_llmc_shard(os.path.join(shard_dir, f"train_{k:03d}.bin"), ids[cuts[k]:cuts[k + 1]],
                     "<u2" if k != 2 else "<u4")
write_llmc_shard(os.path.join(shard_dir, "val_000.bin"), val_ids, "<u2")
ids.astype("<i4").tofile(os.path.join(WORK, "train_int32.bin"))
val_ids.astype("<i4").tofile(os.path.join(WORK, "val_int32.bin"))
ini = os.path.join(WORK, "tiny.ini")
with open(ini, "w") as f:
    f.write(f"""[model]
vocab_size = 256
d_model = 16
n_ctx = 16
[data]
tokenizer = {vocab}
seq_len = 16
[train]
batch_size = 4
steps = 12
eval_interval = 6
eval_tokens = 256
threads = 1
snapshot_steps =
[checkpoint]
interval = 6
keep_last = 4
""")
common = ["train", "--quiet", "-c", ini]
run(*common, f"--data.train_tokens={shard_dir}/train_*.bin", f"--data.val_tokens={shard_dir}/val_*.bin",
    "--out", os.path.join(WORK, "run_shards"))
run(*common, f"--data.train_tokens={WORK}/train_int32.bin", f"--data.val_tokens={WORK}/val_int32.bin",
    "--out", os.path.join(WORK, "run_int32"))
final = "checkpoint_00000012.h5"


def h5same(a, b, what, objects=None):
    """h5diff of the whole files, or of each of `objects` (top-level names)."""
    for obj in objects or [None]:
        r = subprocess.run(["h5diff", a, b] + ([f"/{obj}"] if obj else []), capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"FAIL: {what}: {a} and {b} differ{' in /' + obj if obj else ''}:\n"
                     f"{r.stdout[:2000]}{r.stderr[:2000]}")


# Everything but /config, which names the data files (and so differs).
a_ckpt = os.path.join(WORK, "run_shards", final)
names = [line.split()[0] for line in subprocess.run(["h5ls", a_ckpt], capture_output=True, text=True,
                                                     check=True).stdout.splitlines()]
assert "wte" in names and "optimizer" in names and "data" in names, names
h5same(a_ckpt, os.path.join(WORK, "run_int32", final),
       "training on numpy-written llm.c shards vs the same ids as an int32 file",
       [n for n in names if n != "config"])
print("train: llm.c shards written by numpy (uint16 and uint32, a glob) give the int32 file's checkpoint bit for bit")

# --- 3. resume across shards ---------------------------------------------------------------------
run("train", "--quiet", "--resume", os.path.join(WORK, "run_shards", "checkpoint_00000006.h5"),
    "--out", os.path.join(WORK, "run_resumed"))
h5same(os.path.join(WORK, "run_shards", final), os.path.join(WORK, "run_resumed", final),
       "a run on shards resumed from step 6")
print("resume: a run on shards resumed from step 6 ends bit-identical")
