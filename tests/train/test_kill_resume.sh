#!/usr/bin/env bash
# Crash safety: `wte train` is killed with SIGKILL at a random moment (data preparation, a step, a
# checkpoint or snapshot write, the final evaluation), then the `wte train --resume auto` that
# continues it is killed too, at a random moment of its own (odd trials: anywhere in its run; even
# trials: while its validation child validates the checkpoints, held there by a test hook as a
# slow file would hold it). No process of the run may be left (the validation child dies with its
# parent), and a last `wte train --resume auto` finishes the run; its final checkpoint must be
# bit-identical (h5diff: every dataset and attribute) to an uninterrupted run's. KILL_TRIALS trials
# (default 10); scripts/kill_test.sh N runs N. KILL_SEED makes the moments reproducible.
set -uo pipefail
cli="${WTE_CLI:?}"
trials="${KILL_TRIALS:-10}"
work="${WTE_BINARY_DIR:?}/test_tmp/kill_resume"
command -v h5diff > /dev/null || { echo "skipped: h5diff (hdf5-tools) is not installed"; exit 77; }
rm -rf "$work"; mkdir -p "$work"
RANDOM=${KILL_SEED:-$$}
source "${WTE_SOURCE_DIR:?}/tests/tiny_corpus.sh"
write_tiny_corpus "$work/corpus.txt"
steps=60
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
steps = $steps
eval_interval = 20
eval_tokens = 256
threads = 2
snapshot_steps = 0,7,30
[checkpoint]
interval = 5
keep_last = 2
INI
t0=$(date +%s%N)
"$cli" train --quiet --config "$work/tiny.ini" --out "$work/ref" > /dev/null || { echo "FAIL: reference run"; exit 1; }
ref_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
final=checkpoint_$(printf %08d $steps).h5
echo "reference run: ${ref_ms} ms; killing $trials runs at random moments (odd trials: in [0, ${ref_ms}] ms; even: after a random step)"
pass=0; where=""
for i in $(seq 1 "$trials"); do
  rm -rf "$work/run"
  "$cli" train --quiet --config "$work/tiny.ini" --out "$work/run" > "$work/first.log" 2>&1 &
  pid=$!
  if [ $((i % 2)) -eq 1 ]; then
    # Odd trials: a random moment of the reference run's duration (start-up and data
    # preparation weigh heavily on a busy machine).
    delay_ms=$(( (RANDOM * 32768 + RANDOM) % (ref_ms + 1) ))
    sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
    delay_ms="${delay_ms}ms"
  else
    # Even trials: a random step (metrics.csv has that many rows), then 0-20 ms more, so the
    # kill lands in steps, checkpoint and snapshot writes, evaluations.
    want=$(( RANDOM % steps + 1 ))
    while kill -0 "$pid" 2>/dev/null; do
      rows=$(( $( { wc -l < "$work/run/metrics.csv"; } 2>/dev/null || echo 1) - 1 ))
      [ "$rows" -ge "$want" ] && break
      sleep 0.002
    done
    delay_ms=$(( RANDOM % 21 ))
    sleep "0.0$(printf '%02d' "$delay_ms")"
    delay_ms="step$want+${delay_ms}ms"
  fi
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  ckpts=$(ls "$work/run" 2>/dev/null | grep -c '^checkpoint_.*\.h5$')
  tmps=$(ls "$work/run" 2>/dev/null | grep -c '\.tmp$')
  # The --resume auto that continues it is killed too: odd trials at a random moment of the
  # reference run's duration, even trials as soon as its validation child exists.
  if [ -d "$work/run" ]; then
    # Even trials hold the validation child before it reads (a test hook), as a slow or hung
    # file would: the kill surely lands while it validates, and a child that outlived its parent
    # would stay, holding the run directory.
    stall=()
    [ $((i % 2)) -eq 0 ] && stall=(WTE_TEST_STALL_VALIDATION=1)
    env "${stall[@]}" "$cli" train --quiet --resume auto --config "$work/tiny.ini" \
      --out "$work/run" > "$work/second.log" 2>&1 &
    pid=$!
    if [ $((i % 2)) -eq 1 ]; then
      second_ms=$(( (RANDOM * 32768 + RANDOM) % (ref_ms + 1) ))
      sleep "$(printf '%d.%03d' $((second_ms / 1000)) $((second_ms % 1000)))"
      second_ms="${second_ms}ms"
    else
      # (No checkpoint on disk: no validation, the run goes on and is killed after 4 s or ends.)
      second_ms="4s-without-validation"
      for _ in $(seq 1 2000); do
        pgrep -P "$pid" > /dev/null && { second_ms="in-validation"; break; }
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.002
      done
    fi
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    delay_ms="$delay_ms,then-resume-at-$second_ms"
    # Every process of the run ends with it (the validation child within a second).
    left=""
    for _ in $(seq 1 100); do
      left=$(pgrep -f -- "--out $work/run\$" | tr '\n' ' ')
      [ -z "$left" ] && break
      sleep 0.02
    done
    if [ -n "$left" ]; then
      echo "trial $i (kills at ${delay_ms}): process(es) $left still running 2 s after the kill"
      kill -KILL $left 2>/dev/null  # the processes this test started, by pid
      continue
    fi
  fi
  if ! "$cli" train --quiet --resume auto --config "$work/tiny.ini" --out "$work/run" > "$work/resume.log" 2>&1; then
    echo "trial $i (kill at ${delay_ms}, $ckpts checkpoint(s), $tmps .tmp): resume FAILED:"; cat "$work/resume.log"
    continue
  fi
  if h5diff "$work/ref/$final" "$work/run/$final" > "$work/diff.log" 2>&1; then
    pass=$((pass + 1))
    where="$where ${delay_ms}/${ckpts}c"
  else
    echo "trial $i (kill at ${delay_ms}, $ckpts checkpoint(s)): final checkpoint DIFFERS:"; head -20 "$work/diff.log"
  fi
done
echo "kill moments (ms into the run, or step+ms; then the resume's kill; / checkpoints on disk at the first kill):$where"
echo "$pass of $trials resumes bit-identical to the uninterrupted run"
[ "$pass" -eq "$trials" ]
