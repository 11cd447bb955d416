#!/bin/bash
# Data-parallel scaling on this machine: tokens/s of `wte train` on a config as
#   1 rank x 1 thread, 1 rank x 2 threads, 2 ranks x 1 thread (mpirun, loopback only),
# and the machine's limit for 2 ranks: two independent 1-thread processes, each bound to its core
# (as mpirun binds the ranks) and training on half the batch at the same time, with no exchange
# (their tokens/s added: what 2 ranks would reach if communication were free);
# interleaved in each of ROUNDS rounds so every configuration sees the same machine state; prints
# each round's ratios, their medians, and the 2-rank run's communication share of the step.
# Not a test (timings); run on a quiet machine (bench/README.md):
#   bench/mpi_scaling.sh [--config configs/default.ini] [--steps 200] [--rounds 3] [--wte build/wte] [--out [DIR]]
# --out writes the table and the run's facts to DIR (default bench/results/) as mpi_scaling-*.json.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/bench/results.sh"
results_parse_out "$@"
if [ -n "$results_out" ]; then
  results_run mpi_scaling "tokens/s of wte train on 2 ranks x 1 thread against 1 rank x 1 thread and 1 rank x 2 threads, with the no-exchange limit" \
    's/^median over .*: 2 ranks x 1 thread = \([0-9.]*\)x of 1 rank x 1 thread.*, \([0-9.]*\)x of 1 rank x 2 threads.*/data-parallel: 2 ranks x 1 thread vs 1 rank x 1 thread, default config=\1\ndata-parallel: 2 ranks x 1 thread vs 1 rank x 2 threads, default config=\2/p' -- "$0" "${results_args[@]}"
  exit
fi
set -- "${results_args[@]}"
config="$root/configs/default.ini"; steps=200; rounds=3; wte="$root/build/wte"
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --wte) wte="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
command -v mpirun > /dev/null || { echo "mpirun not found (Debian: openmpi-bin)" >&2; exit 1; }
# Loopback only: no traffic to any other address.
MPI=(mpirun --allow-run-as-root --oversubscribe --mca oob_tcp_if_include lo --mca btl_tcp_if_include lo)
out=$(mktemp -d /tmp/wte_mpi_scaling.XXXXXX)
trap 'rm -rf "$out"' EXIT
common=(train --config "$config" --train.steps="$steps" --train.eval_interval=0
        --train.snapshot_steps= --checkpoint.interval=0 --overwrite -q)
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p') (family $(lscpu | sed -n 's/^CPU family: *//p'), model $(lscpu | sed -n 's/^Model: *//p')), $(nproc) cores; $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "config: $config, $steps steps per run; tokens/s of the step time (wte train's summary)"
tok_s() { sed -n 's/^trained .* in .*, \([0-9]*\) tokens\/s.*/\1/p' "$1"; }
# The limit: half the batch (the larger half if odd), the same steps, no exchange.
half=$(sed -n 's/^batch_size *= *\([0-9]*\).*/\1/p' "$config" | head -n 1)
[ -n "$half" ] || { echo "no batch_size in $config" >&2; exit 1; }
half=$(( (half + 1) / 2 ))
printf "%5s %10s %10s %10s %10s %9s %9s %9s %7s %6s\n" round "1r x 1t" "1r x 2t" "2r x 1t" \
  "limit" "2r/1r1t" "2r/1r2t" "2r/limit" "comm %" load
r11s=(); r12s=(); rls=()
for i in $(seq "$rounds"); do
  "$wte" "${common[@]}" --out "$out/a" --train.threads=1 > "$out/a.txt"
  "$wte" "${common[@]}" --out "$out/b" --train.threads=2 > "$out/b.txt"
  "${MPI[@]}" -np 2 "$wte" "${common[@]}" --out "$out/c" --train.threads=1 > "$out/c.txt"
  taskset -c 0 "$wte" "${common[@]}" --out "$out/d0" --train.threads=1 --train.batch_size="$half" > "$out/d0.txt" &
  p0=$!
  taskset -c 1 "$wte" "${common[@]}" --out "$out/d1" --train.threads=1 --train.batch_size="$half" > "$out/d1.txt"
  wait "$p0"
  a=$(tok_s "$out/a.txt"); b=$(tok_s "$out/b.txt"); c=$(tok_s "$out/c.txt")
  d=$(( $(tok_s "$out/d0.txt") + $(tok_s "$out/d1.txt") ))
  share=$(sed -n 's/^communication: .*step time (\([0-9.]*\)%).*/\1/p' "$out/c.txt")
  x=$(awk -v c="$c" -v a="$a" 'BEGIN{printf "%.3f", c/a}'); y=$(awk -v c="$c" -v b="$b" 'BEGIN{printf "%.3f", c/b}')
  z=$(awk -v c="$c" -v d="$d" 'BEGIN{printf "%.3f", c/d}')
  r11s+=("$x"); r12s+=("$y"); rls+=("$z")
  printf "%5s %10s %10s %10s %10s %8sx %8sx %8sx %7s %6s\n" "$i" "$a" "$b" "$c" "$d" "$x" "$y" "$z" \
    "$share" "$(cut -d' ' -f1 /proc/loadavg)"
  grep "^communication:" "$out/c.txt" | sed 's/^/      /'
done
med() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END{print v[int((NR+1)/2)]}'; }
m1=$(med "${r11s[@]}"); m2=$(med "${r12s[@]}"); m3=$(med "${rls[@]}")
echo "median over $rounds rounds: 2 ranks x 1 thread = ${m1}x of 1 rank x 1 thread, ${m2}x of 1 rank x 2 threads, ${m3}x of the limit (2 independent processes x 1 thread on half batches, no exchange)"
