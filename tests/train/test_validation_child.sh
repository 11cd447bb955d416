#!/usr/bin/env bash
# `wte train --resume auto` reads each checkpoint in a child process first (a damaged file cannot
# crash or hang it). That child must not outlive its run, nor hold the run directory:
#   kill     SIGKILL of `wte train --resume auto` while its validation child waits: the child is
#            gone within 2 s, and the next `--resume auto` is not refused as "in use" (the child
#            never held the run directory's lock);
#   sigint   SIGINT 1-3 s into the validation: the run exits within 2 s with status 130, saying the
#            signal stopped it before step 1, and leaves no child behind.
# The validation child is held by a test hook (WTE_TEST_STALL_VALIDATION: it waits for ever before
# reading, as one reading a file on a hung disk does).
set -uo pipefail
cli="${WTE_CLI:?}"
work="${WTE_BINARY_DIR:?}/test_tmp/validation_child"
rm -rf "$work"; mkdir -p "$work"
source "${WTE_SOURCE_DIR:?}/tests/tiny_corpus.sh"
write_tiny_corpus "$work/corpus.txt"
cat > "$work/tiny.ini" <<INI
[model]
vocab_size = 300
d_model = 16
n_ctx = 16
[data]
text = $work/corpus.txt
seq_len = 16
[train]
batch_size = 4
steps = 10
eval_interval = 0
threads = 1
snapshot_steps = 0
[optim]
warmup_steps = 2
[checkpoint]
interval = 5
INI
"$cli" train --quiet --config "$work/tiny.ini" --out "$work/run" --train.steps=5 > /dev/null ||
  { echo "FAIL: the first run"; exit 1; }
failed=0
leftovers=()

# The pid of the validation child of wte train `pid` (waits up to 10 s for it to appear).
child_of() {
  local c=""
  for _ in $(seq 1 1000); do
    c=$(pgrep -P "$1" | head -1)
    [ -n "$c" ] && break
    sleep 0.01
  done
  echo "$c"
}

# True once process `pid` is gone (or a zombie) within `ms` milliseconds.
gone_within() {
  local end=$(( $(date +%s%N) / 1000000 + $2 ))
  while [ $(( $(date +%s%N) / 1000000 )) -le "$end" ]; do
    local state
    state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 0
    [ "$state" = Z ] && return 0
    sleep 0.02
  done
  return 1
}

# kill: SIGKILL while the child validates.
WTE_TEST_STALL_VALIDATION=1 "$cli" train --quiet --resume auto --out "$work/run" > "$work/kill.log" 2>&1 &
pid=$!
child=$(child_of "$pid")
if [ -z "$child" ]; then
  echo "FAIL kill: no validation child appeared"; cat "$work/kill.log"; failed=1
else
  sleep 0.5
  kill -KILL "$pid"; wait "$pid" 2>/dev/null
  if gone_within "$child" 2000; then
    echo "kill: the validation child ($child) ended with its parent"
  else
    echo "FAIL kill: the validation child ($child) outlived its parent by 2 s"
    leftovers+=("$child"); failed=1
  fi
  if "$cli" train --quiet --resume auto --out "$work/run" > "$work/next.log" 2>&1; then
    echo "kill: the next --resume auto finished the run"
  else
    echo "FAIL kill: the next --resume auto failed:"; cat "$work/next.log"; failed=1
  fi
fi

# sigint: SIGINT 1-3 s into the validation (the run starts again from step 5's checkpoint).
"$cli" train --quiet --config "$work/tiny.ini" --out "$work/run2" --train.steps=5 > /dev/null ||
  { echo "FAIL: the second first run"; exit 1; }
delay=$(( 1000 + RANDOM % 2001 ))
WTE_TEST_STALL_VALIDATION=1 "$cli" train --resume auto --out "$work/run2" > "$work/sigint.log" 2>&1 &
pid=$!
child=$(child_of "$pid")
sleep "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
t0=$(date +%s%N)
kill -INT "$pid"
if gone_within "$pid" 2000; then
  wait "$pid"; status=$?
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  if [ "$status" -ne 130 ] || ! grep -q "SIGINT received while a checkpoint was being validated" "$work/sigint.log"; then
    echo "FAIL sigint: exit status $status (expected 130) or no message:"; cat "$work/sigint.log"; failed=1
  else
    echo "sigint: SIGINT ${delay} ms into the validation ended the run in ${ms} ms with status 130"
  fi
else
  echo "FAIL sigint: SIGINT ${delay} ms into the validation did not end the run within 2 s"
  kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  failed=1
fi
if [ -n "$child" ] && ! gone_within "$child" 1000; then
  echo "FAIL sigint: the validation child ($child) was left running"; leftovers+=("$child"); failed=1
fi
# What this test started and left (only on failure): ended by pid.
for c in "${leftovers[@]}"; do kill -KILL "$c" 2>/dev/null; done
exit "$failed"
