#!/bin/bash
# Data-parallel scaling on this machine (issue 14): tokens/s of `wte train` on a config as
#   1 rank x 1 thread, 1 rank x 2 threads, 2 ranks x 1 thread (mpirun, loopback only),
# interleaved in each of ROUNDS rounds so every configuration sees the same machine state; prints
# each round's ratios, their medians, and the 2-rank run's communication share of the step.
# Targets: 2 ranks x 1 thread >= 1.8x of 1 rank x 1 thread and >= 0.9x of 1 rank x 2 threads.
# Not a test (timings); run on a quiet machine:
#   bench/mpi_scaling.sh [--config configs/default.ini] [--steps 200] [--rounds 3] [--wte build/wte]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
config="$root/configs/default.ini"; steps=200; rounds=3; wte="$root/build/wte"
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --wte) wte="$2"; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
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
printf "%5s %12s %12s %12s %10s %10s %8s %6s\n" round "1r x 1t" "1r x 2t" "2r x 1t" "2r/1r1t" \
  "2r/1r2t" "comm %" load
r11s=(); r12s=()
for i in $(seq "$rounds"); do
  "$wte" "${common[@]}" --out "$out/a" --train.threads=1 > "$out/a.txt"
  "$wte" "${common[@]}" --out "$out/b" --train.threads=2 > "$out/b.txt"
  "${MPI[@]}" -np 2 "$wte" "${common[@]}" --out "$out/c" --train.threads=1 > "$out/c.txt"
  a=$(tok_s "$out/a.txt"); b=$(tok_s "$out/b.txt"); c=$(tok_s "$out/c.txt")
  share=$(sed -n 's/^communication: .*step time (\([0-9.]*\)%).*/\1/p' "$out/c.txt")
  x=$(awk -v c="$c" -v a="$a" 'BEGIN{printf "%.3f", c/a}'); y=$(awk -v c="$c" -v b="$b" 'BEGIN{printf "%.3f", c/b}')
  r11s+=("$x"); r12s+=("$y")
  printf "%5s %12s %12s %12s %9sx %9sx %8s %6s\n" "$i" "$a" "$b" "$c" "$x" "$y" "$share" \
    "$(cut -d' ' -f1 /proc/loadavg)"
  grep "^communication:" "$out/c.txt" | sed 's/^/      /'
done
med() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END{print v[int((NR+1)/2)]}'; }
m1=$(med "${r11s[@]}"); m2=$(med "${r12s[@]}")
echo "median over $rounds rounds: 2 ranks x 1 thread = ${m1}x of 1 rank x 1 thread (target >= 1.8), ${m2}x of 1 rank x 2 threads (target >= 0.9)"
