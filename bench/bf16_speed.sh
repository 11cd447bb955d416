#!/usr/bin/env bash
# bench/bf16_speed.sh: model.matmul_precision = bf16 against f32 on configs/default.ini. Two parts, each printing the CPU and the load average beside its numbers:
#   speed  ROUNDS rounds of `wte profile step --matmul-precision f32,bf16` (each round profiles a
#          float32 step and a bf16 step back to back at THREADS threads, median of REPEAT steps
#          each): tokens/s of both, their ratio per round, the median ratio; then the last round's
#          per-part tables (ms, GFLOP/s and oneDNN's kernel, i.e. the ISA, of every GEMM family).
#   loss   STEPS steps of configs/default.ini trained with each precision (same seed, data order
#          and schedule), both runs at the same time with TRAIN_THREADS threads each, so that on a
#          shared machine both see the same load: the last step's train loss, the mean train loss
#          of the last 100 steps, the final validation loss (whole split), bf16's relative
#          difference to f32 for each, and each run's tokens/s (a second same-run speed ratio).
# Not a test: the numbers depend on the machine and its load (the machine is shared: compare the
# ratios of one run, never absolute numbers across runs).
# On a CPU where oneDNN has no bf16 GEMM (neither AVX512_BF16 nor AMX) the run says so and stops.
# Usage: bench/bf16_speed.sh [STEPS] [--isa native|avx2|avx512] [--out [DIR]]       (default 1000)
#   --out writes the tables and the run's facts to DIR (default bench/results/) as bf16-*.json.
#   env: THREADS (2), ROUNDS (3), REPEAT (10), TRAIN_THREADS (1), SKIP_TRAIN=1 (speed only),
#        SKIP_SPEED=1, WTE_CLI
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/bench/results.sh"
results_parse_out "$@"
if [ -n "$results_out" ]; then
  results_run bf16 "bf16 GEMMs against float32: tokens/s of a training step, and the loss of both precisions" \
    's/^median bf16 \/ f32 tokens\/s: \([0-9.]*\)x.*/bf16 GEMMs vs float32, training step tokens\/s, default config=\1/p' -- "$0" "${results_args[@]}"
  exit
fi
set -- "${results_args[@]}"
cli="${WTE_CLI:-$root/build/wte}"
steps="${1:-1000}"
threads="${THREADS:-2}"
rounds="${ROUNDS:-3}"
repeat="${REPEAT:-10}"
config="$root/configs/default.ini"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
py=/usr/bin/python3
[ -x "$py" ] || py=python3

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
flags=$( (grep -o -w -E 'avx512_bf16|amx_bf16|avx512f' /proc/cpuinfo || true) | sort -u | tr '\n' ' ')  # none: no match, not an error
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "CPU: $cpu ($(nproc) cores; flags: ${flags:-no avx512}); $threads threads; load average $(load)"
# Without a bf16 GEMM in oneDNN (no AVX512_BF16 or AMX here, or capped by --isa) wte's bf16 mode
# runs float32 GEMMs: there is no bf16 side to measure, and the results say so.
isa=$("$cli" --version | sed -n 's/^oneDNN .*CPU ISA \([a-z0-9_]*\).*/\1/p')
echo "ISA: oneDNN ${isa:-unknown}; $("$cli" --version | sed -n 's/^Highway .*(\(.*\))/Highway \1/p')"
case "$isa" in
  *bf16*|*amx*) ;;
  *)
    echo
    echo "bf16: not run: oneDNN's ISA here is ${isa:-unknown}, without AVX512_BF16 or AMX; wte's bf16 mode runs float32 GEMMs on this CPU"
    echo
    echo "load average at the end: $(load)"
    exit 0 ;;
esac

if [ -z "${SKIP_SPEED:-}" ]; then
  echo
  echo "== speed: wte profile step --config configs/default.ini --threads $threads --matmul-precision f32,bf16 --repeat $repeat, $rounds rounds"
  printf '%-6s %12s %12s %8s   %s\n' round "f32 tok/s" "bf16 tok/s" ratio "load average after the round"
  for r in $(seq "$rounds"); do
    "$cli" profile step --config "$config" --threads "$threads" --matmul-precision f32,bf16 \
      --repeat "$repeat" --json "$work/round$r.json" > "$work/round$r.txt" 2>&1
    "$py" - "$work/round$r.json" "$r" "$(load)" <<'EOF'
import json, sys
steps = json.load(open(sys.argv[1]))["step"]
tok = {s["matmul_precision"]: s["tokens_per_s"] for s in steps}
print(f"{sys.argv[2]:<6} {tok['f32']:12.0f} {tok['bf16']:12.0f} {tok['bf16'] / tok['f32']:7.2f}x   {sys.argv[3]}")
EOF
  done
  "$py" - "$work" "$rounds" <<'EOF'
import json, statistics, sys
ratios = []
for r in range(1, int(sys.argv[2]) + 1):
    tok = {s["matmul_precision"]: s["tokens_per_s"] for s in json.load(open(f"{sys.argv[1]}/round{r}.json"))["step"]}
    ratios.append(tok["bf16"] / tok["f32"])
print(f"median bf16 / f32 tokens/s: {statistics.median(ratios):.2f}x (rounds: {', '.join(f'{x:.2f}' for x in ratios)})")
EOF
  echo
  echo "-- the last round's profile (GEMM kernels name the ISA oneDNN ran):"
  sed -n '/^step:/,$p' "$work/round$rounds.txt"
fi

if [ -z "${SKIP_TRAIN:-}" ]; then
  [ -f "$root/datasets/kjv/kjv.txt" ] || { echo "make the corpus first: datasets/make_kjv.sh" >&2; exit 1; }
  echo
  train_threads="${TRAIN_THREADS:-1}"
  echo "== loss: wte train --config configs/default.ini --train.steps=$steps --train.threads=$train_threads --model.matmul_precision=f32|bf16 (both at once)"
  echo "   started, load average $(load)"
  pids=()
  for p in f32 bf16; do
    OMP_WAIT_POLICY=passive "$cli" train --config "$config" --out "$work/$p" --train.steps="$steps" \
      --train.threads="$train_threads" --model.matmul_precision="$p" --train.snapshot_steps= \
      --checkpoint.interval=0 --train.eval_interval=0 > "$work/$p.log" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  grep -h -E '^gemms:' "$work/f32.log" "$work/bf16.log" | sed 's/^/   /'
  echo "   done, load average $(load)"
  "$py" - "$work" <<'EOF'
import csv, re, sys
w = sys.argv[1]
res = {}
for p in ("f32", "bf16"):
    rows = list(csv.DictReader(open(f"{w}/{p}/metrics.csv")))
    train = [float(r["train_loss"]) for r in rows]
    log = open(f"{w}/{p}.log").read()
    val = float(re.search(r"final validation loss ([0-9.]+)", log).group(1))
    tok = float(re.search(r"trained .* ([0-9]+) tokens/s", log).group(1))
    res[p] = (train[-1], sum(train[-100:]) / len(train[-100:]), val, tok)
print(f"{'':6} {'last train loss':>16} {'mean last 100':>14} {'final val loss':>15} {'tokens/s':>9}")
for p in ("f32", "bf16"):
    a = res[p]
    print(f"{p:6} {a[0]:16.4f} {a[1]:14.4f} {a[2]:15.4f} {a[3]:9.0f}")
f, b = res["f32"], res["bf16"]
print(f"{'diff':6} {100 * (b[0] - f[0]) / f[0]:15.2f}% {100 * (b[1] - f[1]) / f[1]:13.2f}% "
      f"{100 * (b[2] - f[2]) / f[2]:14.2f}% {b[3] / f[3]:8.2f}x")
EOF
fi
echo
echo "load average at the end: $(load)"
