#!/usr/bin/env bash
# The README's commands run as printed. Every ```sh block of README.md (the tour and the tutorials;
# ```bash blocks are install and build steps, not run here) is cut into commands (a line ending in
# '\' continues), and each command runs with bash, unchanged, in a temporary directory laid out like
# the repository but small:
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
# Each command must exit 0; a few outputs are checked (snapshots written, the page, the
# hidden-states comparison). Prints what it ran and what it skipped; about a minute.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="${WTE_SOURCE_DIR:-$here/../..}"
[ -f "$src/README.md" ] || src="$here/../.."
cli="${WTE_CLI:-$src/build/wte}"
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
"$py" - "$src/README.md" > "$work/commands" <<'PY'
import sys
lines = open(sys.argv[1]).read().split("\n")
section, in_sh, cmd = "", False, ""
for line in lines:
    if line.startswith("## "):
        section = line[3:]
    if not in_sh and line.strip() == "```sh":
        in_sh = True
        continue
    if in_sh and line.strip() == "```":
        in_sh = False
        continue
    if in_sh:
        cmd += line[:-1] + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            if cmd.strip():
                sys.stdout.write(section + "\t" + cmd.strip() + "\0")
            cmd = ""
PY
ran=0; skipped=0
run_cmd() {  # run_cmd SECTION COMMAND: run it in $work, fail with its output unless it exits 0
  echo "[$1] \$ $2"
  if ! (cd "$work" && bash -c "$2") < /dev/null > "$work/out" 2>&1; then
    cat "$work/out"; fail "README command failed ($1): $2"
  fi
  ran=$((ran + 1))
}
while IFS=$'\t' read -r -d '' section cmd; do
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
    *"import transformers"*)
      if "$py" -c 'import transformers' 2> /dev/null; then run_cmd "$section" "$cmd"
      else echo "[$section] SKIPPED (Hugging Face transformers is not installed): $cmd"; skipped=$((skipped + 1)); fi ;;
    *models/gpt2*)
      if [ -z "$gpt2_note" ]; then run_cmd "$section" "$cmd"
      else echo "[$section] SKIPPED (no stand-in for GPT-2's download: $gpt2_note): $cmd"; skipped=$((skipped + 1)); fi ;;
    *) run_cmd "$section" "$cmd" ;;
  esac
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
echo "not run: the \`\`\`bash blocks (install, Quick start, the C++ example's build: tests/test_install_consumers.sh builds and runs it)"
echo "$ran passed, 0 failed, $skipped skipped"
