#!/usr/bin/env bash
# bench/busy_machine.sh: training speed of the default config on a quiet machine and with one
# other CPU-bound process on the cores, for:
#   default   wte's default (OMP_WAIT_POLICY unset: wte re-executes itself with passive waiting)
#   spin      libgomp's own default, what wte did before (GOMP_SPINCOUNT=300000 is that default;
#             setting it stops wte from choosing), with the default thread count
#   threads=1 one thread (libgomp's default waiting; nothing to wait for)
# Each case REPEAT times (default 3); prints the median tokens/s and each case's ratio to
# threads=1 under the same load. Not a test: numbers depend on the machine and its load.
# Usage: bench/busy_machine.sh [STEPS] [--out [DIR]]   (default 100 steps of configs/default.ini)
#   --out writes the table and the run's facts to DIR (default bench/results/) as busy_machine-*.json.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/bench/results.sh"
results_parse_out "$@"
if [ -n "$results_out" ]; then
  results_run busy_machine "training speed with passive OpenMP waiting against spinning and one thread, quiet and beside one CPU-bound process" \
    's/^busy  *default *[0-9]* tok\/s (\([0-9.]*\)x threads=1).*/busy machine: default threads vs threads=1 beside one CPU-bound process=\1/p' -- "$0" "${results_args[@]}"
  exit
fi
set -- "${results_args[@]}"
cli="${WTE_CLI:-$root/build/wte}"
steps="${1:-100}"
repeat="${REPEAT:-3}"
work="$(mktemp -d)"
busy_pid=""
cleanup() { [ -n "$busy_pid" ] && kill "$busy_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
[ -f "$root/datasets/kjv/kjv.txt" ] || { echo "make the corpus first: datasets/make_kjv.sh" >&2; exit 1; }

# Tokens/s of one run: env prefix in $1, extra options in $2.
run_once() {
  env $1 "$cli" train --quiet --config "$root/configs/default.ini" --out "$work/run" --overwrite \
    --train.steps="$steps" --train.eval_interval=0 --train.snapshot_steps= \
    --checkpoint.interval=0 $2 2>&1 | sed -n 's/^trained .* in .*, \([0-9]*\) tokens\/s.*/\1/p'
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
measure() {
  for _ in $(seq "$repeat"); do run_once "$1" "$2"; done | median
}

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
echo "CPU: $cpu; $(nproc) cores; default config, $steps steps, median of $repeat runs"
for load in quiet busy; do
  if [ "$load" = busy ]; then
    (while :; do :; done) &  # one other CPU-bound process
    busy_pid=$!
  fi
  default=$(measure "-u OMP_WAIT_POLICY -u GOMP_SPINCOUNT" "")
  spin=$(measure "-u OMP_WAIT_POLICY GOMP_SPINCOUNT=300000" "")
  one=$(measure "-u OMP_WAIT_POLICY -u GOMP_SPINCOUNT" "--train.threads=1")
  printf '%-5s  default %7s tok/s (%.2fx threads=1)  spin (before) %7s tok/s (%.2fx)  threads=1 %7s tok/s   load %s\n' \
    "$load" "$default" "$(awk "BEGIN {print $default / $one}")" "$spin" "$(awk "BEGIN {print $spin / $one}")" "$one" \
    "$(cut -d' ' -f1 /proc/loadavg)"
  if [ -n "$busy_pid" ]; then kill "$busy_pid"; busy_pid=""; fi
done
