#!/usr/bin/env bash
# Exit codes and option names as a user meets them (docs/cli.md): every command
# exits 2 with an error naming the option for an unknown option and for a bad value (0 is success,
# 1 a run-time failure such as a missing file); `wte help CMD` is CMD's --help; old option
# spellings still work; `wte --version` names the version, commit, oneDNN, Highway and the SIMD
# target. Runs in about a second: every case fails before any work.
set -uo pipefail
: "${WTE_CLI:?}" "${WTE_BINARY_DIR:?}"
dir=$(mktemp -d "${WTE_BINARY_DIR}/cli_usage_test.XXXXXX")
trap 'rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect CODE NEEDLE -- ARGS...: runs wte ARGS, requires exit status CODE and NEEDLE in stderr.
expect() {
  local code="$1" needle="$2"; shift 3
  "$WTE_CLI" "$@" > "$dir/out" 2> "$dir/err"
  local rc=$?
  if [ "$rc" != "$code" ]; then
    fail "wte $*: exit $rc, expected $code; stderr: $(head -c 400 "$dir/err")"
  elif ! grep -qF -- "$needle" "$dir/err"; then
    fail "wte $*: stderr does not name '$needle': $(head -c 400 "$dir/err")"
  else
    echo "ok   exit $rc  wte $*"
  fi
}

ck="$dir/none.h5"   # never read: every case below fails on its options first
commands="train tokenize inspect profile gradcheck grad geometry hidden-states sample"
for c in $commands; do
  expect 2 "--no-such-option" -- "$c" --no-such-option
  expect 2 "--no-such-option" -- "$c" --no-such-option=3
done
# The commands with subcommands or config keys (train, profile and its parts) read their options
# with the one parser of the others (cli/options.h): the same message, the same exit status,
# and --help before any value is checked.
for c in "train" "profile" "profile step" "profile loss" "profile comm"; do
  name=${c% step}   # `profile step` is `wte profile`'s step part
  for opt in --no-such-option --no-such-option=3; do
    "$WTE_CLI" $c $opt > "$dir/out" 2> "$dir/err"; rc=$?
    want="wte $name: error: unknown option '$opt' (see wte $name --help)"
    if [ $rc = 2 ] && [ "$(cat "$dir/err")" = "$want" ] && [ ! -s "$dir/out" ]; then
      echo "ok   exit 2  wte $c $opt"
    else
      fail "wte $c $opt: exit $rc, stderr '$(head -c 400 "$dir/err")', expected '$want'"
    fi
  done
done
expect 2 "wte train: error: unexpected argument '5'; config keys are written --section.key=value, with '=' (see wte train --help)" \
  -- train --train.steps 5
expect 2 "wte profile comm: error: unexpected argument 'x'" -- profile comm x
expect 2 "wte profile comm: error: --net item '1:x'" -- profile comm --net 1:x
expect 2 "wte profile loss: error: --paths item 'sideways'" -- profile loss --paths sideways
expect 2 "wte train: error: --resume auto needs the run directory" -- train --resume auto
expect 1 "wte train: error: --resume auto: the run directory '$dir/none' does not exist" \
  -- train --resume auto -o "$dir/none"
# An empty --config (an unset shell variable) is an error, not the built-in defaults.
for c in train gradcheck "profile step"; do
  expect 2 "error: --config is empty: give a file, or leave --config out" -- $c --config ""
done
# --config belongs to `profile step`: with scatter or gather it is refused, not ignored.
expect 2 "wte profile: error: --config is the config of \`step\` only" \
  -- profile gather --config "$WTE_SOURCE_DIR/configs/default.ini"
# A directory where a file is expected is named as such (it was libstdc++'s "basic_filebuf::
# underflow" internal error).
expect 1 "wte profile: error: --dist file: '$dir' is a directory, not a file" -- profile gather --quick --dist "file:$dir"
# gradcheck says what the finite differences would cost and refuses a model whose check would take
# hours, before it starts (a trained checkpoint keeps its full size).
expect 1 "wte gradcheck: error: the finite differences of this model would take about" \
  -- gradcheck --vocab-size 4096 --d-model 512 --n-layer 4 --n-head 8 --batch-size 1 --seq-len 8
grep -q "^finite differences: [0-9]* entries, 2 double-precision forwards each" "$dir/out" \
  || fail "gradcheck printed no cost line: $(head -c 400 "$dir/out")"
for args in "train --stop-at x --help" "profile --repeat 0 --help" "profile loss --paths x --help" \
            "profile comm --repeat 1 --help"; do
  "$WTE_CLI" $args > "$dir/out" 2> "$dir/err"; rc=$?
  [ $rc = 0 ] && grep -q "^Usage: " "$dir/out" && [ ! -s "$dir/err" ] \
    || fail "wte $args: exit $rc, expected the help and 0 before the value is checked"
done

# An option's value that reads as an option is refused, naming the option: `-o --train.steps=2`
# must not create a directory named "--train.steps=2" and train.
expect 2 "wte train: error: option '-o' (--out) takes a value, but the argument after it, '--train.steps=2', is an option" \
  -- train -o --train.steps=2
[ -e "--train.steps=2" ] && fail "train created a run directory named after an option"
expect 2 "wte sample: error: option '--checkpoint' takes a value, but the argument after it, '--prompt', is an option" \
  -- sample --checkpoint --prompt x
expect 2 "a value that starts with '-' is written --prompt=VALUE" -- sample --checkpoint "$ck" --prompt -x
expect 1 "none.h5" -- sample --checkpoint "$ck" --prompt=-x   # the =VALUE form is a value

# A value config.ini cannot store (our INI reader has no quoting: '#' starts a comment) is refused
# at start-up, before the run directory exists: otherwise the run would train and every
# checkpoint would then fail to resume, its config.ini holding the path cut at the '#'.
expect 2 "wte train: error: data.text = '$dir/d#1/p.txt' from the command line (--data.text) contains '#'" \
  -- train "--data.text=$dir/d#1/p.txt" -o "$dir/hashrun"
[ -e "$dir/hashrun" ] && fail "train created its run directory for a data.text it refuses"

# An argument without an option name, in a command that takes none, is bad usage naming it:
# `sample --prompt the cat sat` must not sample from "the" and drop the rest.
expect 2 "wte sample: error: unexpected argument 'cat': this command takes no arguments without an option name; --prompt took 'the' as its value; if 'cat' belongs to it, quote the whole value: --prompt \"the cat sat\"" \
  -- sample --checkpoint "$ck" --prompt the cat sat -n 3
expect 2 "unexpected argument 'cat'" -- hidden-states --checkpoint "$ck" --text the cat
expect 2 "unexpected argument 'stray'" -- geometry --checkpoint "$ck" stray
expect 2 "unexpected argument 'stray'" -- export --checkpoint "$ck" --out "$dir/e" stray
expect 2 "unexpected argument 'stray'" -- import stray --safetensors "$dir/m.safetensors" --out "$dir/i.h5"
expect 2 "unexpected argument 'stray'" -- grad --checkpoint "$ck" --batch "$dir/b.txt" --out "$dir/g.h5" stray
[ -e "$dir/e" ] && fail "export created its --out before refusing a stray argument"
expect 2 "wte export: error: --gguf-type = 'q4_0' is not allowed; allowed: f32, f16, q8_0" \
  -- export --checkpoint "$ck" --format gguf --gguf-type q4_0 --out "$dir/e"
expect 2 "wte export: error: --gguf-type is given but --format is 'safetensors'; it applies to --format gguf" \
  -- export --checkpoint "$ck" --gguf-type f16 --out "$dir/e"
[ -e "$dir/e" ] && fail "export created its --out before refusing a bad --gguf-type"

# A bad value for each command (each names its option).
expect 2 "--stop-at"     -- train --stop-at x
expect 2 "train.steps"   -- train --train.steps=-5
expect 2 "model.d_model" -- train --model.d_model=abc
expect 2 "--tokenizer"   -- tokenize --tokenizer
expect 2 "--checkpoint"  -- inspect --checkpoint
expect 2 "--repeat"      -- profile --repeat 0
expect 2 "--dist"        -- profile --dist zipf:-1
expect 2 "--strategy"    -- profile --strategy fastest
expect 2 "--threads"     -- profile --threads 1,,2
expect 2 "--threads = '1,2,1' lists 1 more than once" -- profile gather --threads 1,2,1
expect 2 "--no-such-option" -- profile loss --no-such-option
expect 2 "--loss-chunk"  -- profile loss --loss-chunk x
expect 2 "--paths"       -- profile loss --paths sideways
expect 2 "train.grad_accum_steps" -- train --train.grad_accum_steps=0
expect 2 "model.loss_chunk" -- train --model.loss_chunk=-1
expect 2 "--eps"         -- gradcheck --eps 0
expect 2 "--d-model"     -- gradcheck --d-model -3
expect 2 "train.seed"    -- gradcheck --train.seed=x
expect 2 "--precision"   -- grad --checkpoint "$ck" --batch "$dir/b.txt" --out "$dir/g.h5" --precision float16
expect 2 "--k"           -- geometry --checkpoint "$ck" --k 0
expect 2 "--dims"        -- hidden-states --checkpoint "$ck" --text hi --dims -1
expect 2 "--temperature" -- sample --checkpoint "$ck" --prompt hi --temperature hot
expect 2 "--max-new-tokens" -- sample --checkpoint "$ck" --prompt hi --max-new-tokens -1
expect 2 "--max-new-tokens" -- sample --checkpoint "$ck" --prompt hi --tokens -1
# Missing required options are bad usage too; a missing file is a run-time failure (1).
expect 2 "--checkpoint"  -- grad --batch "$dir/b.txt" --out "$dir/g.h5"
expect 1 "none.h5"       -- inspect --checkpoint "$ck"
expect 1 "none.h5"       -- inspect "$ck"
expect 2 "option '--checkpoint' cannot be specified more than once (an argument without an option name is read as --checkpoint)" \
  -- inspect --checkpoint "$ck" extra
expect 2 "wte inspect: error: too many arguments without an option name: this command takes 1 (read as --checkpoint)" \
  -- inspect "$ck" extra
# Boost's own words for a missing or empty value, said as for any other option.
expect 2 "wte train: error: option '-c' (--config) takes a value, but the argument after it, '-o', is an option" \
  -- train -c -o "$dir/x"
expect 2 "wte sample: error: option '--prompt' is given an empty value ('--prompt='); give a value after '='" \
  -- sample --checkpoint "$ck" --prompt=
expect 2 "wte sample: error: option '--prompt' takes a value, but none was given" \
  -- sample --checkpoint "$ck" --prompt
expect 2 "nosuch"        -- help nosuch
expect 2 "--bogus"       -- --bogus
[ -e "$dir/g.h5" ] && fail "grad left an output file behind after a usage error"

# Old spellings are hidden aliases: they reach the same checks as the new names.
expect 2 "--repeat"      -- profile --vocab 10 --tokens 5 --repeat 0
expect 1 "b.txt"         -- gradcheck --tokens "$dir/b.txt" --vocab-size 4
expect 1 "no-such-dir"   -- tokenize --vocab "$dir/no-such-dir" hello

# An option that would be silently ignored is refused.
expect 2 "wte profile loss: error: --loss-chunk sets the fused path, but --paths = 'unfused' runs no fused path" \
  -- profile loss --paths unfused --loss-chunk 64
expect 2 "--loss-vocab-tile sets the fused path" -- profile loss --paths unfused --loss-vocab-tile 512
expect 2 "wte geometry: error: --query '' names no token" -- geometry --checkpoint "$ck" --query ""
expect 2 "--query ',' names no token" -- geometry --checkpoint "$ck" --query ,

# A directory where a file is read, and a file where a directory is, are named as such.
printf 'x' > "$dir/afile"
expect 1 "data.text: '$dir' is a directory, not a file" -- train -o "$dir/r" --data.text="$dir"
# data.train_tokens takes a file, a directory of shards or a glob: a directory without any is named.
expect 1 "data.train_tokens '$dir': the directory holds no *.bin file" \
  -- train -o "$dir/r" --data.train_tokens="$dir" --data.val_tokens="$dir" --data.tokenizer="$dir"
expect 1 "data.tokenizer: '$dir/afile' is a file, not a directory" \
  -- train -o "$dir/r" --data.text="$dir/afile" --data.tokenizer="$dir/afile"
expect 1 "--tokenizer $dir/afile: '$dir/afile' is a file, not a directory" \
  -- tokenize --tokenizer "$dir/afile" hello
expect 1 "token file '$dir' is a directory, not a file" -- gradcheck --batch "$dir"
# /dev/null and a FIFO where a file is read are named as what they are, not "does not exist"; a
# directory given for a checkpoint names its option and what to give instead. Each fails before any
# work (a FIFO is never opened: reading it would block).
mkfifo "$dir/fifo"
mkdir "$dir/rundir"
expect 1 "data.text: '/dev/null' is not a regular file (a character device)" -- train -o "$dir/r" --data.text=/dev/null
expect 1 "data.text: '$dir/fifo' is not a regular file (a FIFO)" -- train -o "$dir/r" --data.text="$dir/fifo"
expect 1 "token file '/dev/null' (data.train_tokens) is not a regular file" \
  -- train -o "$dir/r" --data.train_tokens=/dev/null --data.val_tokens=/dev/null --data.tokenizer="$dir"
expect 1 "wte sample: error: --checkpoint '/dev/null' is not a regular file (a character device)" \
  -- sample --checkpoint /dev/null --prompt x
expect 1 "wte geometry: error: --checkpoint '$dir/fifo' is not a regular file (a FIFO)" -- geometry --checkpoint "$dir/fifo"
expect 1 "wte import: error: --safetensors '/dev/null' is not a regular file (a character device)" \
  -- import --safetensors /dev/null -o "$dir/imported.h5"
expect 1 "wte inspect: error: --checkpoint '$dir/fifo' is not a regular file (a FIFO)" -- inspect "$dir/fifo"
expect 1 "token file '/dev/null' is not a regular file (a character device)" -- gradcheck --batch /dev/null
expect 1 "wte profile: error: --dist file: '$dir/fifo' is not a regular file (a FIFO)" \
  -- profile gather --quick --dist "file:$dir/fifo"
expect 1 "wte train: error: --resume '$dir/rundir' is a directory, not a file; to continue the run in that directory, give --resume auto --out $dir/rundir" \
  -- train --resume "$dir/rundir"
expect 1 "--init-from '$dir/rundir' is a directory that holds no checkpoint_<step>.h5" \
  -- train -o "$dir/r" --init-from "$dir/rundir"
# A run directory means its newest checkpoint in every command that reads one model; one without
# checkpoints is named as such.
for c in "hidden-states --text hi --checkpoint" "gradcheck --checkpoint" "inspect --checkpoint" \
         "grad --batch $dir/b.txt --out $dir/g.h5 --checkpoint" "eval --checkpoint" \
         "export --out $dir/exp --checkpoint" "sample --checkpoint"; do
  expect 1 "'$dir/rundir' " -- $c "$dir/rundir"
  grep -q "no checkpoint_<step>.h5" "$dir/err" || fail "wte $c DIR: the error does not say the directory holds no checkpoint"
done
[ -e "$dir/r" ] && fail "train left the run directory it created behind"

# Exit status 2 for a bad value wherever it was written, and for values that cannot be combined:
# a config file's value as the command line's, --stop-at past train.steps, an --n-head
# that does not divide the checked d_model.
printf '[model]\nd_model = -3\n' > "$dir/n.ini"
expect 2 "wte train: error: model.d_model = '-3' from config file '$dir/n.ini' is" \
  -- train -c "$dir/n.ini" -o "$dir/r"
printf '[model]\nn_ctx = 8\n[data]\nseq_len = 16\n' > "$dir/x.ini"
expect 2 "data.seq_len = 16 (from config file '$dir/x.ini') exceeds" -- train -c "$dir/x.ini" -o "$dir/r"
# -c is --config in every command that reads a config, profile comm too.
for c in gradcheck "profile step" "profile comm"; do
  expect 2 "model.d_model = '-3' from config file '$dir/n.ini' is" -- $c -c "$dir/n.ini"
done
expect 2 "wte train: error: --stop-at 999999 must be after the start step 0 and before train.steps = 10" \
  -- train -o "$dir/r" --stop-at 999999 --train.steps=10
expect 2 "wte gradcheck: error: --n-head = 5 does not divide the checked d_model = 16" \
  -- gradcheck --n-layer 2 --n-head 5
[ -e "$dir/r" ] && fail "train left the run directory it created behind"

# Profiles too large for this machine's memory are refused before any output or allocation,
# naming the largest part and the setting, as wte train's start-up check.
expect_refused() {
  local needle="$1"; shift
  expect 1 "$needle" -- "$@"
  grep -q "the largest part is" "$dir/err" || fail "wte $*: no largest part named: $(head -c 400 "$dir/err")"
  [ -s "$dir/out" ] && fail "wte $*: printed before refusing: $(head -c 200 "$dir/out")"
}
expect_refused "wte profile: error: wte profile step (" \
  profile step --config "$WTE_SOURCE_DIR/configs/embedding_only.ini" --train.batch_size=1048576 --quick
expect_refused "wte profile: error: wte profile gather needs about" \
  profile gather --quick --vocab-size 2147483647 --d-model 65536
expect_refused "wte profile loss: error: wte profile loss needs about" \
  profile loss --vocab-size 16777216 --d-model 65536 --n-tokens 16777216

# One range and one wording for a setting wherever it is typed: model.loss_chunk and
# profile loss's --loss-chunk; 'is not a whole number', 'is out of range', 'is not a number'; an
# unknown config key ends with the one hint form (see wte CMD --help).
expect 2 "wte profile loss: error: --loss-chunk = 'abc' is not a whole number; allowed: a whole number in [0, 1048576]" \
  -- profile loss --loss-chunk abc
expect 2 "wte profile loss: error: --loss-chunk = '1048577' is out of range; allowed: a whole number in [0, 1048576]" \
  -- profile loss --loss-chunk 64,1048577
expect 2 "wte train: error: model.loss_chunk = '1048577' from the command line (--model.loss_chunk) is out of range; allowed: a whole number in [0, 1048576]" \
  -- train -o "$dir/r" --model.loss_chunk=1048577
expect 2 "wte train: error: model.loss_chunk = 'abc' from the command line (--model.loss_chunk) is not a whole number;" \
  -- train -o "$dir/r" --model.loss_chunk=abc
expect 2 "wte train: error: optim.lr = '0.1abc' from the command line (--optim.lr) is not a number;" \
  -- train -o "$dir/r" --optim.lr=0.1abc
expect 2 "wte train: error: --stop-at = '0' is out of range; allowed: a whole number >= 1" -- train --stop-at 0
expect 2 "wte profile: error: unknown option '--foo.bar' on the command line (option names are exact; keys are --section.key=value) (see wte profile --help)" \
  -- profile step --foo.bar=1
# (found before the run directory is looked at: nothing is created, and an occupied default
# directory is not what the user hears about first)
expect 2 "wte train: error: unknown option '--foo.bar' on the command line (option names are exact; keys are --section.key=value) (see wte train --help)" \
  -- train -o "$dir/r" --foo.bar=
[ -e "$dir/r" ] && fail "train created the run directory for a config error"
mkdir -p "$dir/cwd/runs/default" && : > "$dir/cwd/runs/default/checkpoint_00000600.h5"
(cd "$dir/cwd" && "$WTE_CLI" train --train.step=3 > "$dir/out" 2> "$dir/err"); rc=$?
if [ $rc = 2 ] && grep -qF "unknown option '--train.step' on the command line" "$dir/err" \
   && grep -qF "did you mean '--train.steps'?" "$dir/err" && ! grep -q "runs/default" "$dir/err"; then
  echo "ok   exit 2  wte train --train.step=3 (the key first, with a suggestion)"
else
  fail "wte train --train.step=3 beside an occupied runs/default: exit $rc, $(head -c 400 "$dir/err")"
fi
# "Did you mean" for options and commands; `wte help CMD SUB` is SUB's help.
expect 2 "unknown option '--overwirte'; did you mean '--overwrite'?" -- train --overwirte
expect 2 "wte: unknown command 'trian'; did you mean 'train'?" -- trian
"$WTE_CLI" help profile comm > "$dir/out" 2>&1
grep -q "^Usage: mpirun -np 2 .*wte profile comm" "$dir/out" \
  && ! grep -q "wte profile step \[--config" "$dir/out" \
  && echo "ok   wte help profile comm" || fail "wte help profile comm: $(head -3 "$dir/out")"
# `wte train` without arguments: usage naming the default, exit 2.
"$WTE_CLI" train > "$dir/out" 2> "$dir/err"; rc=$?
[ $rc = 2 ] && grep -qF "wte train -c default" "$dir/err" && grep -q "4 blocks" "$dir/err" \
  && echo "ok   exit 2  wte train (usage naming the default)" || fail "wte train: exit $rc, $(head -c 400 "$dir/err")"

# A binary file given where a text file is read: named as such, its bytes never printed raw.
printf '[model]\nvocab_size = 4\000\004x\n' > "$dir/binary.ini"
expect 1 "holds a NUL byte at offset 22 (line 2): it is not a text file" -- train -c "$dir/binary.ini" -o "$dir/r_bin"
printf '1 2\n3 \004\000x 4\n' > "$dir/binary_batch.txt"
expect 1 "position 2: '\\x04\\x00x' is not an integer token id" -- gradcheck --batch "$dir/binary_batch.txt"

# wte help CMD prints exactly CMD --help, exit 0.
for c in $commands; do
  "$WTE_CLI" help "$c" > "$dir/h1" 2>&1; rc1=$?
  "$WTE_CLI" "$c" --help > "$dir/h2" 2>&1; rc2=$?
  if [ $rc1 != 0 ] || [ $rc2 != 0 ] || ! cmp -s "$dir/h1" "$dir/h2" || ! grep -q "Usage: wte $c" "$dir/h1"; then
    fail "wte help $c (exit $rc1) differs from wte $c --help (exit $rc2)"
  fi
done
"$WTE_CLI" --help > "$dir/top" || fail "wte --help exit $?"
grep -q -- "--version" "$dir/top" && grep -q "help <command>" "$dir/top" || fail "wte --help lists no --version / help"

# --version: project version, git commit, oneDNN and Highway versions, the SIMD target.
"$WTE_CLI" --version > "$dir/v" || fail "wte --version exit $?"
cat "$dir/v"
grep -qE '^wte [0-9]+\.[0-9]+\.[0-9]+ \(git [^)]+\)$' "$dir/v" || fail "no 'wte X.Y.Z (git ...)' line"
grep -qE '^oneDNN [0-9]+\.[0-9]+\.[0-9]+ ' "$dir/v" || fail "no oneDNN version"
grep -qE '^Highway [0-9]+\.[0-9]+(\.[0-9]+)? \(SIMD target in force: [A-Z0-9_]+; WTE_MAX_SIMD cap: ([A-Z0-9_]+|none)\)$' "$dir/v" \
  || fail "no Highway version, target and cap"

# Without GPT-2's vocabulary, tokenize lists the places it looked, each once (run from the source
# tree, ./datasets/gpt2, the one beside the build directory and the source tree's are one).
(cd "$WTE_SOURCE_DIR" && env -u WTE_VOCAB "$WTE_CLI" tokenize " bank" > "$dir/tok" 2> "$dir/tokerr"); rc=$?
if [ $rc = 1 ]; then
  looked=$(sed -n '/looked in:/,/^Run /p' "$dir/tokerr" | grep '^  ')
  [ -n "$looked" ] || fail "tokenize listed no search path: $(cat "$dir/tokerr")"
  dups=$(printf '%s\n' "$looked" | while read -r d; do (cd "$WTE_SOURCE_DIR" && realpath -m "$d"); done | sort | uniq -d)
  [ -z "$dups" ] && echo "ok   tokenize's search path names each directory once" \
    || fail "tokenize lists a directory twice ($dups): $(cat "$dir/tokerr")"
else
  echo "(GPT-2's vocabulary found (exit $rc): its search path listing not checked)"
fi

# wte tokenize finds GPT-2's vocabulary from any working directory (beside the binary, or the
# source tree it was built from), not only from the repository root.
if [ -f "${WTE_SOURCE_DIR:-/nonexistent}/datasets/gpt2/encoder.json" ]; then
  (cd "$dir" && env -u WTE_VOCAB "$WTE_CLI" tokenize " bank" > "$dir/tok" 2>&1) \
    || fail "wte tokenize from $dir: $(cat "$dir/tok")"
  grep -q '3331  " bank"' "$dir/tok" || fail "wte tokenize from another directory: $(cat "$dir/tok")"
else
  echo "(GPT-2's vocabulary not fetched: tokenize from another directory not checked)"
fi

[ "$failures" = 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "PASS: every command exits 2 naming the option for unknown options and bad values"
