"""ctest: llama.cpp (node-llama-cpp's prebuilt CPU build) runs wte's GGUF exports (docs/interop.md).

Three models, each exported with `wte export --format gguf` at F32, F16 and Q8_0:
  default  configs/default.ini's shape (vocab 8192 trained BPE, d_model 256, n_ctx 128, 4 blocks
           of 4 heads), trained a few steps on a generated corpus: the shape matters here, not the
           quality;
  planted  configs/planted.ini (datasets/make_planted.py's corpus and tokenizer; no blocks),
           trained a few steps;
  gpt2     a GPT-2-shaped model with GPT-2's own vocabulary (50257 tokens, <|endoftext|>), trained
           a few steps with datasets/gpt2, exported as safetensors and brought back with
           `wte import`, then exported as GGUF.
For each file llama.cpp must: read back every metadata key wte wrote (node-llama-cpp's
readGgufFileInfo: architecture, shapes, tokenizer tokens, types and merges, ids) and every tensor's
name, dimensions and type; tokenize 100 texts (ASCII, Unicode, whitespace runs, "<|endoftext|>")
to exactly `wte tokenize`'s ids; give, after each of 8 prompts, next-token probabilities over the
whole vocabulary within PROB_TOL of softmax(wte's logits) at F32 (`wte hidden-states --out`; the
largest difference is printed for every type); and continue the prompts greedily like `wte sample
--temperature 0` (32 new tokens, fewer where n_ctx ends first): every token equal at F32, the
first token equal at F16 and Q8_0 (their rounding moves logits; how many of the tokens agree is
printed). The models are trained only a few steps, so many continuations repeat a word; the
probabilities are the check that every weight arrived.

Needs node and node-llama-cpp@3.21.1 (scripts/quickstart.sh test installs it into
$WTE_NODE_LLAMA_CPP, default ~/.cache/wte/node-llama-cpp-3.21.1); exits 77 saying so when either
is missing, or when GPT-2's vocabulary (datasets/fetch_gpt2_vocab.sh) is missing.
"""
import json
import os
import random
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interop_texts import byte_decoder, texts  # noqa: E402

WTE = os.environ.get("WTE_CLI", "build/wte")
SRC = os.environ.get("WTE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("WTE_BINARY_DIR", "build")
NODE_DIR = os.environ.get("WTE_NODE_LLAMA_CPP",
                          os.path.expanduser("~/.cache/wte/node-llama-cpp-3.21.1"))
MODULES = os.path.join(NODE_DIR, "node_modules")
failures = []
# Bound on |p_llama.cpp - p_wte| (next-token probabilities) at F32: float32 arithmetic in a
# different order, and ggml's GELU read from a float16 table (relative error up to 2^-11 per
# activation); the F32 runs measured stay far below it (the test prints the value).
PROB_TOL = 5e-4


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL: " + what)


def run(args, **kw):
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    if r.returncode != 0:
        print("command failed: " + " ".join(args))
        print(r.stdout.decode(errors="replace")[-2000:])
        print(r.stderr.decode(errors="replace")[-4000:])
        sys.exit(1)
    return r.stdout


def prompts(corpus):
    """8 prompts from the model's own training text: the first 1 to 4 words of documents spread
    over it, so the models continue them with some confidence."""
    docs = [d for d in open(corpus, encoding="utf-8").read().split("\n\n") if d.strip()]
    out = []
    for k in range(8):
        words = docs[(k * 37 + 5) % len(docs)].split(" ")
        n = 1 + k % 4
        lead = " " if docs[0].startswith(" ") else ""
        out.append(lead + " ".join(w for w in words[:n + (1 if lead else 0)] if w))
    return out



def wte_tokenize(tokenizer_dir, items):
    args = [WTE, "tokenize", "--json"] + (["--tokenizer", tokenizer_dir] if tokenizer_dir else [])
    out = []
    # `wte tokenize TEXT...` skips nothing: one JSON line per text, empty texts included.
    for i in range(0, len(items), 25):
        chunk = items[i:i + 25]
        lines = run(args + chunk).decode().splitlines()
        check(len(lines) == len(chunk), f"wte tokenize printed {len(lines)} lines for {len(chunk)} texts")
        out += [json.loads(l)["ids"] for l in lines]
    return out


def wte_sample(ckpt, prompt, n_new):
    """The continuation `wte sample --temperature 0` prints, as bytes (the prompt stripped)."""
    out = run([WTE, "sample", "--checkpoint", ckpt, "--prompt", prompt, "--temperature", "0",
               "--max-new-tokens", str(n_new), "--ignore-eos"])
    p = prompt.encode()
    check(out.startswith(p) and out.endswith(b"\n"), f"wte sample's output frames the prompt {prompt!r}")
    return out[len(p):-1]


def wte_next_token_probabilities(work, label, ckpt, prompt_texts):
    """softmax of wte's logits after each prompt (`wte hidden-states --out`: the logits of every
    position), in float64."""
    import h5py  # noqa: E402 (Debian's, under /usr/bin/python3)
    import numpy as np  # noqa: E402
    out = os.path.join(work, f"{label}_logits.h5")
    args = [WTE, "hidden-states", "--checkpoint", ckpt, "--out", out]
    for p in prompt_texts:
        args += ["--text", p]
    run(args)
    probs = []
    with h5py.File(out, "r") as f:
        for i in range(len(prompt_texts)):
            logits = f[f"text{i}/logits"][-1].astype(np.float64)
            e = np.exp(logits - logits.max())
            probs.append(e / e.sum())
    return probs


def train(work, name, ini, steps, extra=()):
    out = os.path.join(work, name)
    run([WTE, "train", "--quiet", "--config", ini, "--out", out, f"--train.steps={steps}",
         "--train.eval_interval=0", "--train.snapshot_steps=", f"--checkpoint.interval={steps}",
         "--train.threads=2", "--optim.warmup_steps=5"] + list(extra))
    return out


def generated_corpus(path):
    """A corpus big enough for an 8192-token BPE: sentences of 20000 made-up words (one to five
    syllables) drawn with a Zipf-like choice, so the model learns something in a few steps."""
    rng = random.Random(7)
    syll = [a + b for a in "bcdfghklmnprstvwz" for b in ["a", "e", "i", "o", "u", "ai", "ou", "ee"]]
    lexicon = ["".join(rng.choice(syll) for _ in range(rng.randint(1, 5))) for _ in range(20000)]
    weights = [1.0 / (i + 1) for i in range(len(lexicon))]
    with open(path, "w") as f:
        for doc in range(3000):
            words = rng.choices(lexicon, weights, k=rng.randint(20, 60))
            f.write(" ".join(words).capitalize() + ".\n\n")


def make_models(work):
    models = []
    # default: configs/default.ini's model on a generated corpus.
    generated_corpus(os.path.join(work, "corpus.txt"))
    ini = os.path.join(work, "default.ini")
    text = open(os.path.join(SRC, "configs", "default.ini")).read()
    text = text.replace("../datasets/kjv/kjv.txt", os.path.join(work, "corpus.txt"))
    open(ini, "w").write(text)
    models.append(("default", train(work, "default", ini, 30, ["--train.batch_size=8"]), None,
                   os.path.join(work, "corpus.txt")))
    # planted: configs/planted.ini on datasets/make_planted.py's corpus.
    os.makedirs(os.path.join(work, "configs"))
    shutil.copy(os.path.join(SRC, "configs", "planted.ini"), os.path.join(work, "configs"))
    run([sys.executable, os.path.join(SRC, "datasets", "make_planted.py"), "--out",
         os.path.join(work, "datasets", "planted")])
    models.append(("planted", train(work, "planted", os.path.join(work, "configs", "planted.ini"), 60),
                   os.path.join(work, "datasets", "planted", "tokenizer"),
                   os.path.join(work, "datasets", "planted", "planted.txt")))
    # gpt2: GPT-2's vocabulary, through safetensors and wte import.
    gpt2_vocab = os.path.join(SRC, "datasets", "gpt2")
    ini = os.path.join(work, "gpt2.ini")
    open(ini, "w").write(
        "[model]\nvocab_size = 50257\nd_model = 64\nn_ctx = 64\nn_layer = 2\nn_head = 4\n"
        f"[data]\ntext = {os.path.join(work, 'corpus.txt')}\ntokenizer = {gpt2_vocab}\nseq_len = 64\n"
        "[train]\nbatch_size = 8\nlog_interval = 10\n[optim]\nlr = 0.003\nwarmup_steps = 5\n")
    run_dir = train(work, "gpt2_run", ini, 30)
    hf = os.path.join(work, "gpt2_hf")
    run([WTE, "export", "--checkpoint", run_dir, "--out", hf])
    imported = os.path.join(work, "gpt2_imported.h5")
    run([WTE, "import", "--from", hf, "--out", imported])
    models.append(("gpt2", imported, gpt2_vocab, os.path.join(work, "corpus.txt")))
    return models


def check_metadata(label, r, meta, exp):
    """Every key wte writes, read back by node-llama-cpp."""
    for key, value in exp.items():
        got = meta.get(key)
        if isinstance(value, float):
            ok = got is not None and abs(got - value) <= 1e-6 * abs(value)
        else:
            ok = got == value
        shown = got if not isinstance(got, list) else f"a list of {len(got)}"
        check(ok, f"{label}: metadata {key} reads back as {str(shown)[:80]}, expected "
                  f"{str(value)[:80] if not isinstance(value, list) else 'a list of %d' % len(value)}")
    check(r["version"] == 3, f"{label}: GGUF version {r['version']}")


def main():
    if os.environ.get("WTE_SANITIZED") == "1":
        skip("a sanitizer build: this test checks llama.cpp against wte, which the release build "
             "runs; the writer's own checks (test_gguf) run here")
    if shutil.which("node") is None:
        skip("node is not installed (apt-get install nodejs npm; scripts/quickstart.sh test does)")
    if not os.path.isfile(os.path.join(MODULES, "node-llama-cpp", "dist", "index.js")):
        skip(f"node-llama-cpp is not installed in {NODE_DIR} (scripts/quickstart.sh test installs "
             "it: npm i -E node-llama-cpp@3.21.1 there; or set WTE_NODE_LLAMA_CPP)")
    if not os.path.isfile(os.path.join(SRC, "datasets", "gpt2", "encoder.json")):
        skip("GPT-2's vocabulary is missing (datasets/fetch_gpt2_vocab.sh)")
    work = os.path.join(BIN, "test_tmp", "gguf_llama_cpp")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    items = texts()
    decoder = byte_decoder()
    summary = []
    for label, ckpt, tok_dir, corpus in make_models(work):
        prompt_texts = prompts(corpus)
        tok_dir_arg = tok_dir
        if tok_dir is None:  # a vocabulary trained by wte train: RUN/tokenizer
            tok_dir_arg = os.path.join(ckpt, "tokenizer")
        want_ids = wte_tokenize(tok_dir_arg, items)
        exports, jobs = {}, []
        for gtype in ["f32", "f16", "q8_0"]:
            d = os.path.join(work, f"{label}_{gtype}")
            run([WTE, "export", "--checkpoint", ckpt, "--format", "gguf", "--gguf-type", gtype,
                 "--out", d])
            exports[gtype] = d
        vocab = json.load(open(os.path.join(exports["f32"], "vocab.json")))
        spelled = sorted(vocab, key=vocab.get)
        cfg = json.load(open(os.path.join(exports["f32"], "config.json")))
        n_ctx = cfg["n_positions"]
        prompt_ids = wte_tokenize(tok_dir_arg, prompt_texts)
        n_new = [min(32, n_ctx - len(p)) for p in prompt_ids]
        want_text = [wte_sample(ckpt, p, n) for p, n in zip(prompt_texts, n_new)]
        want_probs = wte_next_token_probabilities(work, label, ckpt, prompt_texts)
        for gtype, d in exports.items():
            jobs.append({"label": f"{label} {gtype}", "path": os.path.join(d, "model.gguf"),
                         "texts": items if gtype == "f32" else [], "prompts": prompt_ids,
                         "n_new": n_new, "generate": True, "vocab_size": cfg["vocab_size"]})
        job_path = os.path.join(work, f"{label}_job.json")
        json.dump({"models": jobs}, open(job_path, "w"))
        res = json.loads(run(["node", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                   "gguf_llama_cpp.mjs"), MODULES, job_path]))
        eot = vocab.get("<|endoftext|>")
        for gtype, r in zip(exports, res["models"]):
            exp = {
                "general.architecture": "gpt2", "general.alignment": 32,
                "general.name": os.path.splitext(os.path.basename(ckpt))[0],
                "general.file_type": {"f32": 0, "f16": 1, "q8_0": 7}[gtype],
                "gpt2.context_length": n_ctx, "gpt2.embedding_length": cfg["n_embd"],
                "gpt2.feed_forward_length": 4 * cfg["n_embd"],
                "gpt2.block_count": max(1, cfg["n_layer"]),
                "gpt2.attention.head_count": cfg["n_head"],
                "gpt2.attention.layer_norm_epsilon": cfg["layer_norm_epsilon"],
                "gpt2.vocab_size": cfg["vocab_size"],
                "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "gpt-2",
                "tokenizer.ggml.tokens": spelled,
                "tokenizer.ggml.token_type": [3 if t == "<|endoftext|>" else 1 for t in spelled],
                "tokenizer.ggml.merges": open(os.path.join(exports["f32"], "merges.txt"))
                .read().splitlines()[1:],
                "tokenizer.ggml.add_bos_token": False, "tokenizer.ggml.add_eos_token": False,
            }
            if gtype == "q8_0":
                exp["general.quantization_version"] = 2
            if eot is not None:
                exp.update({"tokenizer.ggml.bos_token_id": eot, "tokenizer.ggml.eos_token_id": eot,
                            "tokenizer.ggml.padding_token_id": eot})
            check_metadata(f"{label} {gtype}", r, r["metadata"], exp)
            extra = set(r["metadata"]) - set(exp)
            check(not extra, f"{label} {gtype}: unexpected metadata keys {sorted(extra)}")
            n_tensors = 2 + 12 * max(1, cfg["n_layer"]) + 2 + (0 if cfg["tie_word_embeddings"] else 1)
            check(len(r["tensors"]) == n_tensors, f"{label} {gtype}: {len(r['tensors'])} tensors, "
                                                  f"expected {n_tensors}")
            for t in r["tensors"]:
                if t["name"] == "blk.0.attn_qkv.weight":
                    check(t["dimensions"] == [cfg["n_embd"], 3 * cfg["n_embd"]],
                          f"{label} {gtype}: attn_qkv dimensions {t['dimensions']}")
            if gtype == "f32":
                for i, (text, want, got) in enumerate(zip(items, want_ids, r["tokens"])):
                    check(want == got, f"{label}: text {i} {text!r}: llama.cpp {got[:12]} != wte "
                                       f"{want[:12]}")
            agree = []
            for i, (prompt, want, got) in enumerate(zip(prompt_texts, want_text, r["generated"])):
                got_bytes = [bytes(decoder[c] for c in spelled[t]) for t in got]
                # Tokens that agree: the longest prefix of llama.cpp's tokens whose bytes are a
                # prefix of wte's continuation.
                k, pos = 0, 0
                while k < len(got) and want.startswith(got_bytes[k], pos):
                    pos += len(got_bytes[k])
                    k += 1
                agree.append(k)
                whole = k == len(got) == n_new[i] and pos == len(want)
                if gtype == "f32":
                    check(whole, f"{label} f32: prompt {prompt!r}: {k} of {n_new[i]} tokens agree "
                                 f"(llama.cpp {b''.join(got_bytes)!r}, wte {want!r})")
                else:
                    check(k >= 1, f"{label} {gtype}: prompt {prompt!r}: the first token differs "
                                  f"(llama.cpp {b''.join(got_bytes[:4])!r}, wte {want[:20]!r})")
            worst = max(max(abs(a - b) for a, b in zip(want_p, got_p))
                        for want_p, got_p in zip(want_probs, r["probabilities"]))
            if gtype == "f32":
                # float32 on both sides; llama.cpp rounds GELU's output through a float16 table.
                check(worst <= PROB_TOL, f"{label} f32: max |p_llama.cpp - p_wte| of the token after a "
                                         f"prompt is {worst:.2e} > {PROB_TOL:g}")
            summary.append(f"{label} {gtype}: greedy tokens agreeing with wte sample per prompt: "
                           f"{agree} of {n_new} ({sum(agree)}/{sum(n_new)}); max |p_llama.cpp - "
                           f"p_wte| over the vocabulary after each prompt: {worst:.2e}")
        print(f"{label}: {len(items)} texts tokenized, prompts {prompt_texts} continued; wte "
              f"sample's greedy continuation of {prompt_texts[3]!r}: {want_text[3][:120]!r}", flush=True)
    print("\n".join(summary))
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main()
