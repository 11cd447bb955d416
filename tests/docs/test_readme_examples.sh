#!/usr/bin/env bash
# The README's and docs/'s commands run as printed. Every ```sh block of README.md (the tour and the
# tutorials; ```bash blocks are install, build, download and test-suite steps, not run here: the install,
# consumer and venv tests and CI itself run those), then every ```sh block, every
# "$ " line of an output block and every ```python block of docs/*.md, is cut into commands (a line
# ending in '\' continues), and each command runs with bash (python blocks with python3 and the
# build tree's Python module on PYTHONPATH, skipped when it is not built),
# unchanged, in a temporary directory laid out like the repository but small, after the README's
# commands (so docs/ may use the README's runs), with build/ on PATH (so `wte` is build/wte):
#   build/wte            the wte under test (WTE_CLI)
#   configs/*.ini        the repository's configs; default.ini and embedding_only.ini shrunk to a
#                        tiny model (vocab 316, d_model 32, 2 blocks, batch 4 x 16; steps, snapshots
#                        and checkpoints as in the real file) so each run takes seconds
#   datasets/kjv/kjv.txt a tiny corpus (tests/tiny_corpus.sh) instead of the King James Bible
#   datasets/make_planted.py  the real script (the planted corpus is small already)
#   models/gpt2/         instead of GPT-2 small's download: a GPT-2 of the same layout, tiny (random
#                        weights, a BPE whose words " bank", " river", " money" are single tokens),
#                        written with the interop test's writer
# Commands that cannot run here say why and are checked otherwise:
#   mpirun --hostfile    needs other machines: the wte command after mpirun runs as one process
#   mpirun (loopback)    runs when mpirun exists, else skipped
#   import transformers  skipped when Hugging Face transformers is not importable
#   bench/*              benchmarks (minutes on a quiet machine): each script's --help must exit 0
#   fetch_gpt2_vocab.sh  a download: runs only as a copy of the source tree's datasets/gpt2 when
#                        that exists (it is then used by the commands after it), else those skip
# Each command must exit 0; a few outputs are checked (snapshots written, the page, the
# hidden-states comparison). Prints what it ran and what it skipped; about a minute.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="${WTE_SOURCE_DIR:-$here/../..}"
[ -f "$src/README.md" ] || src="$here/../.."
cli="${WTE_CLI:-$src/build/wte}"
pymodule="${WTE_BINARY_DIR:-$(dirname "$cli")}/python"   # the build tree's Python package (import wte)
py=/usr/bin/python3; [ -x "$py" ] || py=python3
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
[ -x "$cli" ] || fail "no wte binary at $cli (set WTE_CLI)"

# --- the small repository --------------------------------------------------------------------------
mkdir -p "$work/build" "$work/configs" "$work/datasets/kjv" "$work/models" "$work/runs"
ln -s "$cli" "$work/build/wte"
cp "$src"/configs/*.ini "$work/configs/"
cp "$src/datasets/make_planted.py" "$work/datasets/"
# Helpers of other tests, wherever tests/ keeps them.
tiny_corpus="$(find "$src/tests" -name tiny_corpus.sh | head -n 1)"
interop_dir="$(dirname "$(find "$src/tests" -name test_hf_gpt2_interop.py | head -n 1)")"
[ -n "$tiny_corpus" ] || fail "tests/**/tiny_corpus.sh not found"
# shellcheck disable=SC1090
source "$tiny_corpus"
write_tiny_corpus "$work/datasets/kjv/kjv.txt"
"$py" - "$work/configs/default.ini" "$work/configs/embedding_only.ini" <<'PY'
import re, sys
tiny = {"vocab_size": "316", "d_model": "32", "n_head": "2", "seq_len": "16", "batch_size": "4",
        "eval_tokens": "512"}
for path in sys.argv[1:]:
    text = open(path).read()
    for key, value in tiny.items():
        text, n = re.subn(r"(?m)^%s\s*=.*$" % key, "%s = %s" % (key, value), text)
    text = re.sub(r"(?m)^n_layer\s*=\s*[1-9][0-9]*", "n_layer = 2", text)
    open(path, "w").write(text)
PY
gpt2_note=""
if ! "$py" - "$interop_dir" "$work/models/gpt2" > "$work/gpt2.log" 2>&1 <<'PY'
import json, os, sys
sys.path.insert(0, sys.argv[1])
try:
    import numpy as np
    import test_hf_gpt2_interop as hf   # exits 77 without torch, h5py or numpy
except (ImportError, SystemExit) as e:
    sys.exit("cannot import the interop test's writer: %s" % e)
b2u = hf.bytes_to_unicode()
vocab = {ch: i for i, ch in enumerate(b2u.values())}
merges = []
for word in [" bank", " river", " money", " was", " muddy", " closed", "The"]:
    w = "".join(b2u[b] for b in word.encode())
    for k in range(2, len(w) + 1):
        if w[:k] not in vocab:
            merges.append("%s %s" % (w[:k - 1], w[k - 1]))
            vocab[w[:k]] = len(vocab)
V, C, P, L, NH = len(vocab), 32, 128, 2, 2
tensors = hf.gpt2_state(np.random.default_rng(1), V, C, P, L)
hf.write_model_dir(sys.argv[2], tensors, hf.config_json(V, C, P, L, NH), json.dumps(vocab),
                   "#version: 0.2\n" + "\n".join(merges) + "\n")
PY
then
  gpt2_note="$(tail -1 "$work/gpt2.log")"
fi

# --- the commands ---------------------------------------------------------------------------------
"$py" - "$src/README.md" "$src"/docs/*.md > "$work/commands" <<'PY'
import os, sys
def emit(section, cmd):
    sys.stdout.write(section + "\t" + cmd + "\0")
for path in sys.argv[1:]:
    readme = os.path.basename(path) == "README.md"
    page = "" if readme else "docs/" + os.path.basename(path) + ": "
    lines = open(path).read().split("\n")
    section, block, cmd, body = "", None, "", []
    for line in lines:
        if line.startswith("## ") and block is None:
            section = line[3:]
        fence = line.strip()
        if block is None and fence.startswith("```"):
            block = fence[3:] or "text"
            continue
        if block is not None and fence == "```":
            if block == "python" and not readme:
                emit(page + section, "python3 <<'PYTHON'\n" + "\n".join(body) + "\nPYTHON")
            block, body = None, []
            continue
        if block is None:
            continue
        body.append(line)
        if block == "sh" or (block == "text" and not readme and (cmd or line.startswith("$ "))):
            text = line[2:] if block == "text" and not cmd else line
            cmd += text[:-1] + " " if text.endswith("\\") else text
            if not text.endswith("\\"):
                if cmd.strip():
                    emit(page + section, cmd.strip())
                cmd = ""
PY
ran=0; skipped=0
run_cmd() {  # run_cmd SECTION COMMAND: run it in $work, fail with its output unless it exits 0
  echo "[$1] \$ $2"
  if ! (cd "$work" && PATH="$work/build:$PATH" bash -c "$2") < /dev/null > "$work/out" 2>&1; then
    cat "$work/out"; fail "documented command failed ($1): $2"
  fi
  ran=$((ran + 1))
}
while IFS=$'\t' read -r -d '' section cmd; do
  # A sanitizer build (several times slower) runs the README's commands only: docs/'s run the same
  # commands on larger models and run in full in the release build's suite.
  if [ -n "${WTE_SANITIZED:-}" ] && [ "${section#docs/}" != "$section" ]; then
    skipped=$((skipped + 1)); continue
  fi
  : > "$work/out"   # a skipped command leaves no output for the checks below to read
  ran_before=$ran
  case "$cmd" in
    mpirun*--hostfile*)
      one="build/wte${cmd#*build/wte}"
      echo "note: needs the machines of a hostfile; running the wte command as one process"
      run_cmd "$section" "$one" ;;
    mpirun*)
      if ! command -v mpirun > /dev/null; then
        echo "[$section] SKIPPED (no mpirun): $cmd"; skipped=$((skipped + 1))
      else
        echo "[$section] \$ $cmd"
        if (cd "$work" && bash -c "$cmd") < /dev/null > "$work/out" 2>&1; then
          ran=$((ran + 1))
        elif grep -q "built without MPI" "$work/out"; then
          echo "  SKIPPED: wte was built without MPI"; skipped=$((skipped + 1))
        else
          cat "$work/out"; fail "README command failed ($section): $cmd"
        fi
      fi ;;
    bench/*|*" bench/"*)
      script="$(printf '%s' "$cmd" | grep -o 'bench/[A-Za-z0-9_.]*' | head -n 1)"
      echo "[$section] NOT RUN (a benchmark; checking that $script --help works): $cmd"
      if [ "${script##*.}" = py ]; then run_cmd "$section" "$py $src/$script --help"
      else run_cmd "$section" "$src/$script --help"; fi
      skipped=$((skipped + 1)) ;;
    *fetch_gpt2_vocab.sh*)
      if [ -f "$src/datasets/gpt2/encoder.json" ]; then
        echo "[$section] a download: copying the source tree's datasets/gpt2 instead: $cmd"
        cp -r "$src/datasets/gpt2" "$work/datasets/gpt2"; ran=$((ran + 1))
      else
        echo "[$section] SKIPPED (a download; no datasets/gpt2 in the source tree): $cmd"
        skipped=$((skipped + 1))
      fi ;;
    *datasets/gpt2*|*runs/gpt2vocab*)
      if [ -d "$work/datasets/gpt2" ]; then run_cmd "$section" "$cmd"
      else echo "[$section] SKIPPED (needs GPT-2's vocabulary, datasets/fetch_gpt2_vocab.sh): $cmd"; skipped=$((skipped + 1)); fi ;;
    *"import transformers"*)
      if "$py" -c 'import transformers' 2> /dev/null; then run_cmd "$section" "$cmd"
      else echo "[$section] SKIPPED (Hugging Face transformers is not installed): $cmd"; skipped=$((skipped + 1)); fi ;;
    "python3 <<'PYTHON'"*)  # a ```python block of docs/, with the built module (import wte)
      if ! "$py" -c 'import h5py, numpy' 2> /dev/null; then
        echo "[$section] SKIPPED (h5py or numpy is not importable): a python block"; skipped=$((skipped + 1))
      elif [[ "$cmd" == *"import wte"* ]] && ! PYTHONPATH="$pymodule" "$py" -c 'import wte' 2> /dev/null; then
        echo "[$section] SKIPPED (the Python module is not built: target wte_python): a python block"
        skipped=$((skipped + 1))
      else
        run_cmd "$section" "PYTHONPATH=$pymodule ${cmd/#python3/$py}"
      fi ;;
    *models/gpt2*)
      if [ -z "$gpt2_note" ]; then run_cmd "$section" "$cmd"
      else echo "[$section] SKIPPED (no stand-in for GPT-2's download: $gpt2_note): $cmd"; skipped=$((skipped + 1)); fi ;;
    *"wte geometry"*--query*)
      # The tiny corpus has 15 words: a query of words it lacks is refused by name (one token
      # each); the command then runs with the tiny corpus's words, all else as printed.
      echo "[$section] \$ $cmd"
      if ! (cd "$work" && PATH="$work/build:$PATH" bash -c "$cmd") < /dev/null > "$work/out" 2>&1; then
        grep -q "not one; give one token's text" "$work/out" || { cat "$work/out"; fail "documented command failed ($section): $cmd"; }
        tiny="$(printf '%s' "$cmd" | sed -E 's/--query "[^"]*"/--query " king, said, water"/')"
        echo "  (a word of its --query is not one token of the tiny corpus: running it as: $tiny)"
        run_cmd "$section" "$tiny"
      else
        ran=$((ran + 1))
      fi ;;
    *) run_cmd "$section" "$cmd" ;;
  esac
  [ "$ran" -gt "$ran_before" ] || continue   # skipped: nothing to check
  case "$cmd" in
    *"hidden-states"*"The bank was muddy"*)
      grep -q "why equal" "$work/out" || { cat "$work/out"; fail "hidden-states printed no 'why equal' for the pair"; } ;;
    *"geometry"*"runs/default/geometry"*)
      [ -s "$work/runs/default/geometry/index.html" ] || fail "wte geometry wrote no runs/default/geometry/index.html" ;;
    *"train --config configs/default.ini --out runs/default"*)
      ls "$work"/runs/default/snapshot_*.h5 > /dev/null 2>&1 || fail "the tour's run wrote no snapshots" ;;
  esac
done < "$work/commands"
[ "$ran" -ge 15 ] || fail "only $ran README commands ran: are the \`\`\`sh blocks still there?"
echo "not run: the \`\`\`bash blocks of README.md and docs/ (install, the Quick start, building and running the tests: CI runs them through scripts/quickstart.sh; the C++ example's build: the install-consumers test builds and runs it)"
if [ -n "${WTE_SANITIZED:-}" ]; then echo "sanitizer build: docs/'s commands not run here (the release build's suite runs them)"; fi
echo "$ran passed, 0 failed, $skipped skipped"
