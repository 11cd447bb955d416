#!/usr/bin/env bash
# A failed start-up removes only what it wrote. Two `wte train` runs in sibling directories of a
# new parent: run A (`-o P/new/a`) creates P and P/new, run B (`-o P/new/b`) trains beside it, then
# A's start-up fails. B's run directory must stay whole: every file, byte for byte (sha256), and a
# B still training must finish. A removes its own files and the directories it created that are
# empty; P/new holds B's directory and is kept. Cases, SIBLING_TRIALS trials each (default 3;
# scripts/sibling_runs_check.sh N runs N):
#   corpus   A (a corpus too small to split) is paused (a test hook) after creating its directory,
#            B trains to the end, A continues and fails;
#   sigint   A is paused at a start-up stage (BPE training, or after writing its run files), B
#            trains to the end, A gets SIGINT (exit 130);
#   training as corpus, but A fails while B is in the middle of its run (paused by a test hook in
#            an evaluation, files open): B must finish (exit 0), its earlier files unchanged;
#   race     A (bad corpus, no pause) and B start together: whichever order the directories are
#            made and removed in, B finishes whole.
# Prints "N of T intact" per case (B's directory whole, B exit 0); exits 1 if any trial is not, or
# if A did not exit as expected, left its directory or did not say what it removed and kept.
set -uo pipefail
cli="${WTE_CLI:?}"
# 2 in a sanitizer build (WTE_SANITIZED): one odd and one even trial of each case, in its time.
trials="${SIBLING_TRIALS:-$([ -n "${WTE_SANITIZED:-}" ] && echo 2 || echo 3)}"
work="${WTE_BINARY_DIR:?}/test_tmp/sibling_runs"
rm -rf "$work"; mkdir -p "$work"
source "${WTE_SOURCE_DIR:?}/tests/tiny_corpus.sh"
write_tiny_corpus "$work/corpus.txt"
printf 'one document, too small to split\n' > "$work/bad.txt"
write_config() {  # write_config FILE STEPS INTERVAL
  cat > "$1" <<INI
[model]
vocab_size = 300
d_model = 16
n_ctx = 16
[data]
text = $work/corpus.txt
seq_len = 16
[train]
batch_size = 4
steps = $2
eval_interval = 0
threads = 2
[checkpoint]
interval = $3
keep_last = 0
INI
}
write_config "$work/short.ini" 4 2
write_config "$work/long.ini" 60 10
# B of the `training` case: an evaluation every 2 steps, where it pauses (a test hook) at step 4.
write_config "$work/eval.ini" 6 2
sed -i 's/^eval_interval = 0$/eval_interval = 2\neval_tokens = 256/' "$work/eval.ini"

# Waits (up to 60 s) until process $1 has stopped itself (a test hook: SIGSTOP).
wait_stopped() {
  local i
  for i in $(seq 6000); do
    [ "$(awk '/^State:/ {print $2}' "/proc/$1/status" 2>/dev/null)" = T ] && return 0
    kill -0 "$1" 2> /dev/null || return 1
    sleep 0.01
  done
  return 1
}
# Every file under $1 (relative names, sorted) with its sha256.
digest() { (cd "$1" 2> /dev/null && find . -type f -print0 | sort -z | xargs -0r sha256sum); }

problems=""
note() { problems+="  $case trial $t: $*"$'\n'; }
short_files="checkpoint_00000002.h5 checkpoint_00000004.h5 config.ini loss.svg metrics.csv tokenizer/encoder.json tokenizer/vocab.bpe train.bin val.bin"
eval_files="checkpoint_00000002.h5 checkpoint_00000004.h5 checkpoint_00000006.h5 config.ini loss.svg metrics.csv tokenizer/encoder.json tokenizer/vocab.bpe train.bin val.bin"
# The files B of the `training` case has written, and keeps as they are, by its pause at step 4.
b_written="checkpoint_00000002.h5 config.ini tokenizer/encoder.json tokenizer/vocab.bpe train.bin val.bin"
digest_of() { (cd "$1" 2> /dev/null && shift && sha256sum "$@" 2>&1); }
# B's run directory $1 is whole: each of the files $2, and (if $3 is set) the same files, byte for
# byte, as the digest $3 taken when B had finished. Notes what is not.
b_intact() {
  local f ok=0
  for f in $2; do
    [ -f "$1/$f" ] || { note "B's $f is missing"; ok=1; }
  done
  if [ -n "$3" ] && [ "$(digest "$1")" != "$3" ]; then note "B's files changed"; ok=1; fi
  return $ok
}
# A exited $3 (expected $2), removed its own directory, said so, and kept P/new and P (B's).
check_a() {
  local root="$1" want="$2" rc="$3" log="$4"
  [ "$rc" = "$want" ] || note "A exited $rc, expected $want: $(tail -2 "$log")"
  [ -e "$root/P/new/a" ] && note "A left its run directory P/new/a: $(ls -A "$root/P/new/a")"
  grep -q "removed the run directory '$root/P/new/a' it had created" "$log" ||
    note "A's message does not say what it removed: $(tail -1 "$log")"
  grep -q "kept '$root/P/new', '$root/P', created for it" "$log" ||
    note "A's message does not say it kept P/new and P: $(tail -1 "$log")"
}

run_case() {
  case="$1"
  local intact=0 root a_pid b_pid rc_a rc_b before before_b stage b_ok files delay
  for t in $(seq "$trials"); do
    root="$work/$case$t"; mkdir -p "$root"
    before=""; b_ok=1; files="$short_files"
    case "$case" in
      corpus|training|sigint)
        if [ "$case" = sigint ]; then
          # Odd trials: during BPE training (nothing written yet); even: after A wrote its files.
          if [ $((t % 2)) = 1 ]; then stage="data preparation (training the BPE tokenizer)"
          else stage="start-up (writing the run files)"; fi
          WTE_TEST_PAUSE_AT_STAGE="$stage" "$cli" train --config "$work/long.ini" \
            -o "$root/P/new/a" > "$root/a.log" 2>&1 &
        else
          WTE_TEST_PAUSE_AT_STAGE="start-up" "$cli" train --config "$work/short.ini" \
            --data.text="$work/bad.txt" -o "$root/P/new/a" > "$root/a.log" 2>&1 &
        fi
        a_pid=$!
        if ! wait_stopped "$a_pid" || [ ! -d "$root/P/new/a" ]; then
          note "A did not pause after creating its directory: $(cat "$root/a.log")"
          kill -9 "$a_pid" 2> /dev/null; wait "$a_pid" 2> /dev/null; continue
        fi
        if [ "$case" = training ]; then
          # B stops itself in its evaluation after step 4: mid-run, its files open, while A fails.
          files="$eval_files"
          WTE_TEST_PAUSE_AT_STAGE="evaluation after step 4" "$cli" train --quiet \
            --config "$work/eval.ini" -o "$root/P/new/b" > "$root/b.log" 2>&1 &
          b_pid=$!
          wait_stopped "$b_pid" || note "B did not pause in its evaluation: $(cat "$root/b.log")"
          before_b=$(digest_of "$root/P/new/b" $b_written)
        else
          "$cli" train --quiet --config "$work/short.ini" -o "$root/P/new/b" > "$root/b.log" 2>&1
          rc_b=$?
          [ $rc_b = 0 ] || { note "B failed ($rc_b) before A did anything: $(cat "$root/b.log")"; b_ok=0; }
          before=$(digest "$root/P/new/b")
        fi
        [ "$case" = sigint ] && kill -INT "$a_pid"
        kill -CONT "$a_pid"
        wait "$a_pid"; rc_a=$?
        if [ "$case" = training ]; then
          kill -CONT "$b_pid"
          wait "$b_pid"; rc_b=$?
          [ $rc_b = 0 ] || { note "B, training while A failed, exited $rc_b: $(tail -2 "$root/b.log")"; b_ok=0; }
          [ "$(digest_of "$root/P/new/b" $b_written)" = "$before_b" ] ||
            { note "the files B had written before A failed changed"; b_ok=0; }
        fi
        check_a "$root" "$([ "$case" = sigint ] && echo 130 || echo 1)" "$rc_a" "$root/a.log"
        ;;
      race)
        # Bad-corpus A and B at once, in a random order, 0-50 ms apart.
        delay="0.0$((RANDOM % 6))"
        if [ $((RANDOM % 2)) = 0 ]; then
          "$cli" train --config "$work/short.ini" --data.text="$work/bad.txt" \
            -o "$root/P/new/a" > "$root/a.log" 2>&1 &
          a_pid=$!; sleep "$delay"
          "$cli" train --quiet --config "$work/short.ini" -o "$root/P/new/b" > "$root/b.log" 2>&1 &
          b_pid=$!
        else
          "$cli" train --quiet --config "$work/short.ini" -o "$root/P/new/b" > "$root/b.log" 2>&1 &
          b_pid=$!; sleep "$delay"
          "$cli" train --config "$work/short.ini" --data.text="$work/bad.txt" \
            -o "$root/P/new/a" > "$root/a.log" 2>&1 &
          a_pid=$!
        fi
        wait "$b_pid"; rc_b=$?
        [ $rc_b = 0 ] || { note "B exited $rc_b: $(tail -2 "$root/b.log")"; b_ok=0; }
        before=$(digest "$root/P/new/b")
        wait "$a_pid"; rc_a=$?
        [ "$rc_a" = 1 ] || note "A exited $rc_a, expected 1: $(tail -1 "$root/a.log")"
        [ -e "$root/P/new/a" ] && note "A left its run directory P/new/a"
        ;;
    esac
    b_intact "$root/P/new/b" "$files" "$before" || b_ok=0
    [ $b_ok = 1 ] && intact=$((intact + 1))
  done
  echo "$case: $intact of $trials intact"
}

for c in corpus sigint training race; do run_case "$c"; done
if [ -n "$problems" ]; then
  printf 'FAIL:\n%s' "$problems"
  exit 1
fi
rm -rf "$work"
echo "PASS"
