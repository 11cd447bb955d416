#!/usr/bin/env bash
# Options mean the same in every command (docs/cli.md), on a 2-step run of a tiny model:
#   1. `wte tokenize --checkpoint RUN` splits texts with the run's own vocabulary, as
#      `--tokenizer RUN/tokenizer` does; with --tokenizer too it is a usage error;
#   2. a mistyped config name (-c defualt) or enumerated value (--model.attention=tiledd,
#      export --format=safetensor) is a usage error (exit 2) that names the closest choice;
#   3. `wte import --out` creates the missing parent directories, as `export --out` does, and
#      removes them again when the import fails;
#   4. a hint that is a command to run names the binary as it was invoked (a path, a link).
set -uo pipefail
: "${WTE_CLI:?}" "${WTE_BINARY_DIR:?}" "${WTE_SOURCE_DIR:?}"
dir=$(mktemp -d "${WTE_BINARY_DIR}/one_surface_test.XXXXXX")
trap 'rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
. "$WTE_SOURCE_DIR/tests/tiny_corpus.sh"
write_tiny_corpus "$dir/corpus.txt"
tiny=(--data.text="$dir/corpus.txt" --model.vocab_size=300 --model.d_model=16 --model.n_ctx=16
      --model.n_layer=1 --model.n_head=2 --data.seq_len=16 --train.batch_size=4 --train.threads=1
      --train.snapshot_steps= --train.eval_interval=0)
"$WTE_CLI" train "${tiny[@]}" --train.steps=2 --out "$dir/run" > "$dir/train.out" 2>&1 \
  || { cat "$dir/train.out"; exit 1; }

# 1. tokenize --checkpoint: the run's vocabulary (a run directory: its newest checkpoint).
text="In the beginning God created the heaven and the earth."
"$WTE_CLI" tokenize --checkpoint "$dir/run" --json "$text" > "$dir/ck.json" 2> "$dir/ck.err"; rc=$?
"$WTE_CLI" tokenize --tokenizer "$dir/run/tokenizer" --json "$text" > "$dir/dir.json" 2> "$dir/dir.err"
if [ $rc = 0 ] && [ -s "$dir/ck.json" ] && cmp -s "$dir/ck.json" "$dir/dir.json"; then
  echo "ok   tokenize --checkpoint RUN splits as --tokenizer RUN/tokenizer"
else
  fail "tokenize --checkpoint: exit $rc, $(head -c 300 "$dir/ck.err") $(head -c 300 "$dir/ck.json")"
fi
"$WTE_CLI" tokenize --checkpoint "$dir/run" --tokenizer "$dir/run/tokenizer" hi > /dev/null 2> "$dir/err"
rc=$?
[ $rc = 2 ] && grep -q "exclude each other" "$dir/err" && echo "ok   --checkpoint with --tokenizer: exit 2" \
  || fail "--checkpoint with --tokenizer: exit $rc, $(head -c 300 "$dir/err")"

# 2. Did you mean, exit 2.
suggests() {  # suggests NEEDLE ARGS...: exit 2 and NEEDLE on stderr
  local needle="$1"; shift
  "$WTE_CLI" "$@" > /dev/null 2> "$dir/err"; local rc=$?
  [ $rc = 2 ] && grep -qF -- "$needle" "$dir/err" && echo "ok   wte $*: exit 2, $needle" \
    || fail "wte $*: exit $rc, expected 2 and \"$needle\": $(head -c 400 "$dir/err")"
}
suggests "did you mean 'default'?" train -c defualt
suggests "did you mean 'tiled'?" train "${tiny[@]}" --model.attention=tiledd --out "$dir/never"
suggests "did you mean 'safetensors'?" export --checkpoint "$dir/run" --out "$dir/x" --format=safetensor

# 3. import --out creates parent directories (and leaves none behind when it fails).
"$WTE_CLI" export --checkpoint "$dir/run" --out "$dir/exported/hf" > "$dir/export.out" 2>&1 \
  || fail "export: $(tail -c 400 "$dir/export.out")"
"$WTE_CLI" import --from "$dir/exported/hf" --out "$dir/new/a/b/model.h5" > "$dir/import.out" 2> "$dir/import.err"
rc=$?
[ $rc = 0 ] && [ -f "$dir/new/a/b/model.h5" ] && echo "ok   import --out new/a/b/model.h5 creates new/a/b" \
  || fail "import into new directories: exit $rc, $(tail -c 400 "$dir/import.err")"
grep -q "^wte import: reading and checking" "$dir/import.err" \
  && echo "ok   import says on stderr what it reads" || fail "no progress line: $(head -c 300 "$dir/import.err")"
printf 'not a safetensors file' > "$dir/bad.safetensors"
cp "$dir/exported/hf/config.json" "$dir/exported/hf/vocab.json" "$dir/exported/hf/merges.txt" "$dir/"
"$WTE_CLI" import --safetensors "$dir/bad.safetensors" --out "$dir/gone/c/model.h5" > /dev/null 2> "$dir/err"
rc=$?
[ $rc = 1 ] && [ ! -e "$dir/gone" ] && echo "ok   a failed import leaves no directory behind" \
  || fail "failed import: exit $rc, $dir/gone $( [ -e "$dir/gone" ] && echo exists); $(head -c 300 "$dir/err")"

# 4. Hints name the binary as invoked: through a link in another directory.
mkdir -p "$dir/bin"
ln -s "$WTE_CLI" "$dir/bin/wte-link"
"$dir/bin/wte-link" train "${tiny[@]}" --train.steps=3 --stop-at 1 --out "$dir/stopped" > "$dir/stop.out" 2>&1
rc=$?
[ $rc = 0 ] && grep -qF "continue with: $dir/bin/wte-link train --resume $dir/stopped/checkpoint_00000001.h5" \
  "$dir/stop.out" && echo "ok   the --stop-at hint names $dir/bin/wte-link" \
  || fail "--stop-at hint: exit $rc, $(grep -i 'continue' "$dir/stop.out" | head -c 400)"
"$dir/bin/wte-link" train > /dev/null 2> "$dir/err"
grep -qF "The default model: $dir/bin/wte-link train -c default" "$dir/err" \
  && echo "ok   wte train without arguments names the link" || fail "usage: $(head -c 300 "$dir/err")"

# 5. Prose is kept to 100 columns: eval's report, sample's settings line.
"$WTE_CLI" eval --checkpoint "$dir/run" > "$dir/eval.out" 2>&1 || fail "eval: $(cat "$dir/eval.out")"
"$WTE_CLI" sample --checkpoint "$dir/run" --prompt "the king" --max-new-tokens 3 > /dev/null 2> "$dir/sample.err" \
  || fail "sample: $(cat "$dir/sample.err")"
long=$(awk 'length > 100' "$dir/eval.out" "$dir/sample.err")
[ -z "$long" ] && echo "ok   eval's and sample's prose lines are at most 100 columns" \
  || fail "lines over 100 columns: $long"

[ "$failures" = 0 ] && echo "all passed" || { echo "$failures failure(s)"; exit 1; }
