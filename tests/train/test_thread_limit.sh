#!/usr/bin/env bash
# `wte train` where the system refuses OpenMP's threads (RLIMIT_NPROC, `ulimit -u`, reached):
# libgomp prints "Thread creation failed" and ends the process itself; wte then says what failed
# and what to lower (train.threads, OMP_NUM_THREADS), exits 1, and the run directory it created
# (with its new parents) is gone. RLIMIT_NPROC is not enforced for root, so the run is made as
# the user nobody (setpriv) with a limit of 1 process: every thread creation fails. Skipped unless
# run as root with setpriv and prlimit.
set -uo pipefail
cli="${WTE_CLI:?}"
work="${WTE_BINARY_DIR:?}/test_tmp/thread_limit"
if [ "$(id -u)" != 0 ] || ! command -v setpriv > /dev/null || ! command -v prlimit > /dev/null ||
   ! id nobody > /dev/null 2>&1; then
  echo "skipped: needs root, setpriv, prlimit and the user nobody (RLIMIT_NPROC binds only others)"
  exit 77
fi
rm -rf "$work"; mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
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
steps = 2
eval_interval = 0
threads = 4
INI
chown -R nobody "$work"
as_nobody() { setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups prlimit --nproc=1 "$@"; }
# wte itself must be reachable by nobody.
as_nobody test -x "$cli" || { echo "skipped: nobody cannot run $cli"; exit 77; }
out=$(cd "$work" && as_nobody "$cli" train --config tiny.ini -o new/run 2>&1); code=$?
echo "$out" | tail -2
[ $code = 1 ] || fail "exit status $code (expected 1): $out"
echo "$out" | grep -q "wte train: error: OpenMP could not start 4 threads (train.threads = 4)" ||
  fail "no wte message naming the thread count: $out"
echo "$out" | grep -q "Use fewer threads: set train.threads" || fail "no advice: $out"
echo "$out" | grep -q "removed the run directory 'new/run' it had created (empty), and 'new'" ||
  fail "the message does not say what was removed: $out"
[ -e "$work/new" ] && fail "the run directory or its parent was left: $(find "$work/new")"
# OMP_NUM_THREADS with train.threads = 0: named as such.
out=$(cd "$work" && OMP_NUM_THREADS=3 as_nobody "$cli" train --config tiny.ini \
        --train.threads=0 -o new/run 2>&1); code=$?
[ $code = 1 ] || fail "exit status $code (expected 1): $out"
echo "$out" | grep -q "OpenMP could not start 3 threads (train.threads = 0: OMP_NUM_THREADS" ||
  fail "OMP_NUM_THREADS is not named: $out"
[ -e "$work/new" ] && fail "the run directory was left: $(find "$work/new")"
echo "PASS"
