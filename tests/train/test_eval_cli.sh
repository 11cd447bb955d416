#!/usr/bin/env bash
# Evaluation as a user meets it (docs/training.md, Evaluation; docs/cli.md, wte eval):
#   1. a 3-step run with the default evaluation settings (train.eval_tokens = auto) evaluates on
#      at most the tokens it trained on, and spends less time evaluating than training (the run
#      prints both times);
#   2. `wte eval` on the run directory (its newest checkpoint, its validation split) prints
#      exactly the run's final validation loss (metrics.csv stores it in round-trip form), over
#      the whole split (train.eval_tokens = 0) and over the run's capped evaluation (--max-tokens);
#   3. --text and --tokens evaluate a file; bad input is an error naming it, before any work;
#   4. what it scores is said on stderr, stdout keeps the result alone.
set -uo pipefail
: "${WTE_CLI:?}" "${WTE_BINARY_DIR:?}" "${WTE_SOURCE_DIR:?}"
dir=$(mktemp -d "${WTE_BINARY_DIR}/eval_cli_test.XXXXXX")
trap 'rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
. "$WTE_SOURCE_DIR/tests/tiny_corpus.sh"
write_tiny_corpus "$dir/corpus.txt"
# The default model's shapes but a 300-token vocabulary (the tiny corpus has few words).
train() {
  "$WTE_CLI" train --data.text="$dir/corpus.txt" --model.vocab_size=300 --model.d_model=32 \
    --model.n_ctx=32 --data.seq_len=32 --train.batch_size=4 --train.threads=1 \
    --train.snapshot_steps= "$@"
}
# The last val_loss of a metrics.csv, as stored.
last_val() { awk -F, 'NR > 1 && $3 != "" { v = $3 } END { print v }' "$1"; }
json_loss() { sed -n 's/.*"loss": \([^,}]*\).*/\1/p' "$1"; }

# 1. Default evaluation settings: capped at the tokens trained (3 x 4 x 32 = 384), timed.
train --train.steps=3 --out "$dir/short" > "$dir/short.out" 2>&1 || fail "3-step run: $(tail -5 "$dir/short.out")"
grep -q 'evaluating on 384 validation tokens' "$dir/short.out" \
  || fail "the 3-step run did not evaluate on 384 tokens: $(grep evaluating "$dir/short.out")"
line=$(grep '^evaluations: ' "$dir/short.out")
eval_s=$(sed -n 's/^evaluations: [0-9]* in [^(]*(\([0-9.]*\) s), besides \([0-9.]*\) s.*/\1/p' <<< "$line")
train_s=$(sed -n 's/^evaluations: [0-9]* in [^(]*(\([0-9.]*\) s), besides \([0-9.]*\) s.*/\2/p' <<< "$line")
if [ -n "$eval_s" ] && [ -n "$train_s" ] && awk -v e="$eval_s" -v t="$train_s" 'BEGIN { exit !(e < t) }'; then
  echo "ok   3 steps: ${eval_s} s evaluating < ${train_s} s training"
else
  fail "evaluation time not below training time: '$line'"
fi
grep -q 'final validation loss .* (first 384 of the validation split' "$dir/short.out" \
  || fail "the final line does not say the evaluation was capped: $(grep 'final validation' "$dir/short.out")"

# 2. wte eval reproduces the final evaluation exactly.
"$WTE_CLI" eval --checkpoint "$dir/short" --max-tokens 384 --json > "$dir/e1.json" 2> "$dir/e1.err" \
  || fail "wte eval: $(cat "$dir/e1.err")"
want=$(last_val "$dir/short/metrics.csv"); got=$(json_loss "$dir/e1.json")
[ -n "$want" ] && [ "$got" = "$want" ] && echo "ok   wte eval --max-tokens 384: $got" \
  || fail "wte eval printed '$got', the run's final evaluation '$want'"
# What it does goes to stderr (a long evaluation shows itself); stdout stays one JSON document.
grep -q '^wte eval: scoring 12 windows of 32 tokens (4 per forward pass) of the validation split' \
  "$dir/e1.err" && [ "$(wc -l < "$dir/e1.json")" = 1 ] \
  && echo "ok   wte eval says on stderr what it scores; stdout is the JSON alone" \
  || fail "no progress line on stderr ($(cat "$dir/e1.err")) or stdout is not one line"
train --train.steps=3 --train.eval_tokens=0 --out "$dir/whole" > "$dir/whole.out" 2>&1 \
  || fail "whole-split run: $(tail -5 "$dir/whole.out")"
grep -q 'whole validation split' "$dir/whole.out" || fail "eval_tokens = 0 is not the whole split"
"$WTE_CLI" eval --checkpoint "$dir/whole" --json > "$dir/e2.json" 2> "$dir/e2.err" \
  || fail "wte eval: $(cat "$dir/e2.err")"
want=$(last_val "$dir/whole/metrics.csv"); got=$(json_loss "$dir/e2.json")
[ -n "$want" ] && [ "$got" = "$want" ] && echo "ok   wte eval on the whole split: $got" \
  || fail "wte eval printed '$got', the run's final evaluation '$want'"
"$WTE_CLI" eval --checkpoint "$dir/whole" > "$dir/e3.out" 2>&1 || fail "wte eval (text)"
for needle in "loss " "perplexity " "unigram baseline "; do
  grep -q "$needle" "$dir/e3.out" || fail "wte eval does not print '$needle': $(cat "$dir/e3.out")"
done
grep -q '"unigram_baseline": [0-9]' "$dir/e2.json" || fail "no unigram baseline in --json: $(cat "$dir/e2.json")"

# 3. Files, and errors before any work.
"$WTE_CLI" eval --checkpoint "$dir/whole" --text "$dir/corpus.txt" --json > "$dir/t.json" 2>&1 \
  && grep -q '"loss": [0-9]' "$dir/t.json" && echo "ok   --text" || fail "--text: $(cat "$dir/t.json")"
"$WTE_CLI" eval --checkpoint "$dir/whole" --tokens "$dir/whole/val.bin" --json > "$dir/k.json" 2>&1 \
  && [ "$(json_loss "$dir/k.json")" = "$(json_loss "$dir/e2.json")" ] && echo "ok   --tokens val.bin" \
  || fail "--tokens val.bin: $(cat "$dir/k.json")"
expect() {  # expect CODE NEEDLE ARGS...
  local code="$1" needle="$2"; shift 2
  "$WTE_CLI" eval "$@" > "$dir/out" 2> "$dir/err"; local rc=$?
  if [ $rc = "$code" ] && grep -qF -- "$needle" "$dir/err"; then echo "ok   exit $rc  wte eval $*"
  else fail "wte eval $*: exit $rc, stderr $(head -c 300 "$dir/err")"; fi
}
expect 2 "--checkpoint is required"
expect 1 "does not exist" --checkpoint "$dir/missing"
expect 1 "holds no checkpoint_<step>.h5" --checkpoint "$dir"
expect 1 "'$dir/nope.txt' does not exist" --checkpoint "$dir/whole" --text "$dir/nope.txt"
expect 2 "--text and --tokens exclude each other" --checkpoint "$dir/whole" --text a --tokens b
expect 2 "--max-tokens = '0' is out of range" --checkpoint "$dir/whole" --max-tokens 0
printf 'x' > "$dir/one.txt"
expect 1 "evaluating needs at least 2" --checkpoint "$dir/whole" --text "$dir/one.txt"
mkdir -p "$dir/copy" && cp "$dir/whole/checkpoint_00000003.h5" "$dir/copy/"
expect 1 "no val.bin beside it" --checkpoint "$dir/copy"

[ "$failures" = 0 ] && echo "all passed" || { echo "$failures failure(s)"; exit 1; }
