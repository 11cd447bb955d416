#!/usr/bin/env bash
# A command whose standard output cannot be written (> /dev/full: ENOSPC) has not done its work:
# every command that prints exits 1 with exactly one "wte CMD: error: cannot write standard output"
# line on stderr, never two (the training loop stops at the first progress line it cannot write and
# reports it; `wte`'s exit check must not report the same failure again). Each command is first run
# with its output to a file, to show that it prints and succeeds. `wte profile comm` needs mpirun
# (tests/train/distributed covers it); every other command and every --help is here.
set -uo pipefail
: "${WTE_CLI:?}" "${WTE_BINARY_DIR:?}" "${WTE_SOURCE_DIR:?}"
if [ ! -e /dev/full ]; then echo "skip: no /dev/full"; exit 77; fi
dir=$(mktemp -d "${WTE_BINARY_DIR}/full_stdout_test.XXXXXX")
trap 'rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
. "$WTE_SOURCE_DIR/tests/tiny_corpus.sh"
write_tiny_corpus "$dir/corpus.txt"
cd "$dir" || exit 1

# A 1-block run with snapshots (for geometry), its Hugging Face export (for import), a batch.
tiny=(--data.text=corpus.txt --model.vocab_size=300 --model.d_model=16 --model.n_ctx=16
      --data.seq_len=16 --train.batch_size=4 --train.threads=1 --model.n_layer=1
      --model.n_head=2 --optim.warmup_steps=1)
"$WTE_CLI" train --quiet --out run "${tiny[@]}" --train.steps=4 --train.snapshot_steps=0,4 \
  > train.log 2>&1 || { cat train.log; echo "FAIL: the fixture run"; exit 1; }
ck=run/checkpoint_00000004.h5
"$WTE_CLI" export --checkpoint $ck --out hf > /dev/null || { echo "FAIL: the fixture export"; exit 1; }
printf '0 1 2 3 4\n5 6 7 8 9\n' > batch.txt

# check ARGS...: wte ARGS prints and exits 0; wte ARGS > /dev/full exits 1 with one message.
# "OUT" in ARGS stands for a fresh output path (a file or directory the command creates).
n=0
check() {
  n=$((n + 1))
  local args=("${@//OUT/out$n.a}")
  "$WTE_CLI" "${args[@]}" > stdout.txt 2> stderr.txt; local rc=$?
  if [ $rc != 0 ] || [ ! -s stdout.txt ]; then
    fail "wte $*: exit $rc with $(wc -c < stdout.txt) bytes on stdout, expected 0 and some output: $(head -c 300 stderr.txt)"
    return
  fi
  args=("${@//OUT/out$n.b}")
  "$WTE_CLI" "${args[@]}" > /dev/full 2> stderr.txt; rc=$?
  local count; count=$(grep -c "cannot write standard output" stderr.txt)
  local name=$1
  case "$1" in
    help) name=$2 ;;
    --*) name="" ;;
  esac
  local want="wte${name:+ $name}: error: cannot write standard output"
  if [ $rc = 1 ] && [ "$count" = 1 ] && grep -q "^$want" stderr.txt; then
    echo "ok   exit 1, one message  wte $*"
  else
    fail "wte $* > /dev/full: exit $rc, $count message(s), expected exit 1 and one line '$want...': $(head -c 600 stderr.txt)"
  fi
}

check --version
check --help
check help train
check help profile comm
for c in train eval tokenize inspect profile gradcheck grad geometry hidden-states sample import export; do
  check "$c" --help
done
check profile loss --help
check profile comm --help
check train --out OUT "${tiny[@]}" --train.steps=2 --train.snapshot_steps=
check train --quiet --out OUT "${tiny[@]}" --train.steps=2 --train.snapshot_steps=
check eval --checkpoint run
check eval --checkpoint run --json
check tokenize --tokenizer run/tokenizer hello
check tokenize --tokenizer run/tokenizer --json hello
check inspect $ck
check profile gather --quick --vocab-size 64 --d-model 8 --n-tokens 64 --threads 1 --repeat 1 \
  --dist uniform
check profile step --quick --threads 1 "${tiny[@]}" --repeat 1
check profile loss --vocab-size 64 --d-model 8 --n-tokens 64 --repeat 1
check gradcheck --checkpoint $ck --batch batch.txt
check gradcheck --model.n_layer=1 --model.n_head=2
check grad --checkpoint $ck --batch batch.txt --out OUT
check geometry --checkpoint run
check hidden-states --checkpoint $ck --text the
check sample --checkpoint $ck --prompt the --max-new-tokens 2
check export --checkpoint $ck --out OUT
check import --from hf --out OUT

if [ "$failures" -gt 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "every command: one 'cannot write standard output' message and exit 1 on a full stdout"
