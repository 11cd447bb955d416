"""ctest: the tokenizer.json of `wte export` encodes like wte (docs/interop.md).

An independent reader of Hugging Face's tokenizers format, written here from the format's
documentation (not the tokenizers library): the BPE model's vocab and merges, the ByteLevel
pre-tokenizer (GPT-2's regex, written out below as a scanner over Unicode categories, then GPT-2's
bytes_to_unicode), BPE by merge rank, and added_tokens split out of the text first. It encodes the
100 texts of interop_texts.py with the tokenizer.json of two exports: a vocabulary wte trained and
GPT-2's own (when datasets/gpt2 is there); the ids must equal `wte tokenize`'s. A text holding
"<|endoftext|>" is the one place the two differ by design: Hugging Face's tokenizers reads an added
token in text as that token, wte as text, so there the reader's ids must equal wte's ids of the
pieces between, joined by <|endoftext|>'s id.
"""
import json
import os
import shutil
import subprocess
import sys
import unicodedata

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interop_texts import byte_decoder, texts  # noqa: E402

WTE = os.environ.get("WTE_CLI", "build/wte")
SRC = os.environ.get("WTE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("WTE_BINARY_DIR", "build")
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL: " + what)


def run(args):
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        print("command failed: " + " ".join(args) + "\n" + r.stderr.decode(errors="replace"))
        sys.exit(1)
    return r.stdout


# ---- the reader ---------------------------------------------------------------------------------
def is_letter(c):
    return unicodedata.category(c).startswith("L")


def is_number(c):
    return unicodedata.category(c).startswith("N")


def is_space(c):
    return c.isspace()


def pretokenize(text):
    """GPT-2's pattern, alternatives tried in order at each position as a regex engine does:
    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        j = None
        if c == "'":
            for s in ("s", "t", "re", "ve", "m", "ll", "d"):
                if text.startswith(s, i + 1):
                    j = i + 1 + len(s)
                    break
        if j is None:
            start = i + 1 if c == " " and i + 1 < n else i
            for cls in (is_letter, is_number,
                        lambda ch: not (is_space(ch) or is_letter(ch) or is_number(ch))):
                if cls(text[start]) and (start == i or c == " "):
                    j = start
                    while j < n and cls(text[j]):
                        j += 1
                    break
        if j is None:  # whitespace
            k = i
            while k < n and is_space(text[k]):
                k += 1
            if k == n or k - i == 1:
                j = k  # \s+(?!\S) takes a run that ends the text; else \s+ takes a single one
            else:
                j = k - 1  # \s+(?!\S): the run but its last character, which the next word takes
        out.append(text[i:j])
        i = j
    return out


class Reader:
    def __init__(self, path):
        doc = json.load(open(path, encoding="utf-8"))
        check(doc["model"]["type"] == "BPE", f"{path}: model.type {doc['model']['type']}")
        for part in ("pre_tokenizer", "decoder", "post_processor"):
            check(doc[part]["type"] == "ByteLevel", f"{path}: {part} {doc[part]}")
        check(doc["pre_tokenizer"]["add_prefix_space"] is False and doc["pre_tokenizer"]["use_regex"],
              f"{path}: pre_tokenizer {doc['pre_tokenizer']}")
        self.vocab = doc["model"]["vocab"]
        merges = doc["model"]["merges"]
        self.ranks = {}
        for r, m in enumerate(merges):
            a, b = m.split(" ") if isinstance(m, str) else m
            self.ranks.setdefault((a, b), r)
        self.added = {t["content"]: t["id"] for t in doc["added_tokens"]}
        bd = byte_decoder()
        self.b2u = {b: c for c, b in bd.items()}

    def bpe(self, word):
        parts = list(word)
        while len(parts) > 1:
            pairs = [(self.ranks.get((parts[k], parts[k + 1])), k) for k in range(len(parts) - 1)]
            ranked = [p for p in pairs if p[0] is not None]
            if not ranked:
                break
            best = min(ranked)[0]
            merged, k = [], 0
            while k < len(parts):
                if k + 1 < len(parts) and self.ranks.get((parts[k], parts[k + 1])) == best:
                    merged.append(parts[k] + parts[k + 1])
                    k += 2
                else:
                    merged.append(parts[k])
                    k += 1
            parts = merged
        return [self.vocab[p] for p in parts]

    def encode(self, text):
        # Added tokens first (longest first), then each piece between them.
        segments = [text]
        for tok in sorted(self.added, key=len, reverse=True):
            nxt = []
            for s in segments:
                if isinstance(s, int):
                    nxt.append(s)
                    continue
                pieces = s.split(tok)
                for k, p in enumerate(pieces):
                    if k:
                        nxt.append(self.added[tok])
                    if p:
                        nxt.append(p)
            segments = nxt
        ids = []
        for s in segments:
            if isinstance(s, int):
                ids.append(s)
                continue
            for word in pretokenize(s):
                ids += self.bpe("".join(self.b2u[b] for b in word.encode("utf-8")))
        return ids


# ---- the test -----------------------------------------------------------------------------------
def wte_ids(tokenizer_dir, items):
    out = []
    for i in range(0, len(items), 25):
        lines = run([WTE, "tokenize", "--json", "--tokenizer", tokenizer_dir] +
                    items[i:i + 25]).decode().splitlines()
        out += [json.loads(l)["ids"] for l in lines]
    return out


def compare(label, tokenizer_json, tokenizer_dir):
    reader = Reader(tokenizer_json)
    items = texts()
    want = wte_ids(tokenizer_dir, items)
    eot = reader.added.get("<|endoftext|>")
    n_split = n_same = 0
    for i, (text, ids) in enumerate(zip(items, want)):
        if eot is not None and "<|endoftext|>" in text:
            n_split += 1
            pieces = text.split("<|endoftext|>")
            parts = wte_ids(tokenizer_dir, [p for p in pieces])
            ids = []
            for k, p in enumerate(parts):
                ids += ([eot] if k else []) + p
        got = reader.encode(text)
        n_same += got == ids
        check(got == ids, f"{label}: text {i} {text!r}: reader {got[:16]} != wte {ids[:16]}")
    print(f"{label}: {n_same} of {len(items)} texts encoded by the reader as wte encodes them "
          f"({n_split} with <|endoftext|> read as the added token)")


def main():
    work = os.path.join(BIN, "test_tmp", "tokenizer_json")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    corpus = os.path.join(work, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        for k in range(300):
            f.write(f"In the beginning {k} the river's bank held money; "
                    f"Café {k * 7} naïve 日本語 text, we'll see.\n\n")
    gpt2 = os.path.join(SRC, "datasets", "gpt2")
    cases = [("trained", "train", 600)]
    if os.path.isfile(os.path.join(gpt2, "encoder.json")):
        cases.append(("gpt2", gpt2, 50257))
    else:
        print("note: GPT-2's vocabulary is missing (datasets/fetch_gpt2_vocab.sh): trained only")
    for label, tok, vocab_size in cases:
        ini = os.path.join(work, label + ".ini")
        open(ini, "w").write(f"[model]\nvocab_size = {vocab_size}\nd_model = 16\nn_ctx = 16\n"
                             f"n_layer = 1\nn_head = 2\n[data]\ntext = {corpus}\ntokenizer = {tok}\n"
                             "seq_len = 16\n[train]\nbatch_size = 2\nsteps = 1\neval_interval = 0\n"
                             "threads = 1\n[checkpoint]\ninterval = 1\n")
        run_dir = os.path.join(work, label)
        run([WTE, "train", "--quiet", "--config", ini, "--out", run_dir])
        out = os.path.join(work, label + "_export")
        run([WTE, "export", "--checkpoint", run_dir, "--out", out])
        tok_dir = os.path.join(run_dir, "tokenizer") if tok == "train" else gpt2
        compare(label, os.path.join(out, "tokenizer.json"), tok_dir)
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main()
