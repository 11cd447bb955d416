#!/usr/bin/env bash
# The installed wte runs the Quick start's model from any directory (README.md, docs/cli.md):
# `cmake --install` into a fresh prefix puts the configs under share/wte/configs and the corpus
# makers under share/wte/datasets (no empty directory for what was never fetched); from another
# directory, `wte train -c default` finds share/wte/configs/default.ini and trains its 4-block
# model; `wte train` without arguments names the default and the configs; a name that is no
# config is an error listing them.
# Environment: WTE_SOURCE_DIR, WTE_BINARY_DIR (set by ctest).
set -uo pipefail
src="${WTE_SOURCE_DIR:?}"; bin="${WTE_BINARY_DIR:?}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
prefix="$tmp/prefix"
cmake --install "$bin" --prefix "$prefix" > "$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; exit 1; }
for f in share/wte/configs/default.ini share/wte/configs/embedding_only.ini \
         share/wte/configs/gpt2_vocab.ini share/wte/datasets/make_kjv.sh \
         share/wte/datasets/make_planted.py share/wte/datasets/README.md; do
  [ -f "$prefix/$f" ] && echo "ok   installed $f" || fail "$f was not installed"
done
[ -x "$prefix/share/wte/datasets/make_kjv.sh" ] || fail "make_kjv.sh is not executable"
if [ ! -f "$src/datasets/gpt2/encoder.json" ] && [ -e "$prefix/share/wte/gpt2" ]; then
  fail "share/wte/gpt2 was created though GPT-2's vocabulary was never fetched"
fi
wte="$prefix/bin/wte"
mkdir -p "$tmp/elsewhere"
cd "$tmp/elsewhere" || exit 1
"$wte" train > out 2> err; rc=$?
[ $rc = 2 ] && grep -qF "wte train -c default" err && grep -qF "$prefix/share/wte/configs" err \
  && echo "ok   wte train (no arguments) names the default and the installed configs" \
  || fail "wte train without arguments: exit $rc, $(head -c 500 err)"
"$wte" train -c no_such_config > out 2> err; rc=$?
[ $rc = 2 ] && grep -qF "config 'no_such_config'" err && grep -q "default, embedding_only" err \
  && echo "ok   -c no_such_config lists the configs" || fail "-c no_such_config: exit $rc, $(head -c 500 err)"
# The default model itself (4 blocks, d_model 256), 2 steps; the corpus: the installed KJV if it
# was made before installing, else a small text (and a vocabulary it can fill).
corpus_args=()
if [ ! -f "$prefix/share/wte/datasets/kjv/kjv.txt" ]; then
  . "$src/tests/tiny_corpus.sh"
  write_tiny_corpus "$tmp/corpus.txt"
  for i in 1 2 3 4 5 6; do cat "$tmp/corpus.txt"; done > "$tmp/corpus6.txt"
  corpus_args=(--data.text="$tmp/corpus6.txt" --model.vocab_size=300)
fi
"$wte" train -c default "${corpus_args[@]}" --train.steps=2 --train.batch_size=2 > out 2> err; rc=$?
if [ $rc = 0 ] && grep -q "n_layer 4, n_head 4" out && [ -f runs/default/checkpoint_00000002.h5 ]; then
  echo "ok   installed wte trains -c default from another directory (runs/default)"
else
  fail "wte train -c default: exit $rc, $(tail -c 600 out) $(head -c 600 err)"
fi
[ "$failures" = 0 ] && echo "all passed" || { echo "$failures failure(s)"; exit 1; }
