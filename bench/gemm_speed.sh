#!/usr/bin/env bash
# bench/gemm_speed.sh: every float32 GEMM of a training step on each GEMM library and as wte runs
# it (model.gemm = auto), in one run:
#  1. build/wte_gemm_bench at the default config's GEMMs (B 16, T 128, d_model 256, vocab_size
#     8192: the unfused loss) with the 2048^3 GEMM, and at GPT-2 small's (B 1, T 1024, d_model
#     768, vocab_size 50257: the fused loss's 256 x 512 tiles), 1 and 2 threads: per GEMM, each
#     library's GFLOP/s and wte's time against the fastest library's (interleaved rounds);
#  2. `wte profile step` of both configs at 1 and 2 threads (GPT-2 small: 2 threads), which names
#     the library of every GEMM part and gives the GEMM peak and the FMA limit of the same run.
# Not a test: the numbers depend on the machine and its load (compare the ratios of one run).
# Usage: bench/gemm_speed.sh [--out [DIR]]
#   env: ROUNDS (5), REPEAT (3), SKIP_STEP=1, SKIP_GPT2_STEP=1 (part 2 at the default config only),
#        BENCH (build/wte_gemm_bench), WTE_CLI (build/wte)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/bench/results.sh"
results_parse_out "$@"
if [ -n "$results_out" ]; then
  results_run gemm "each float32 GEMM of a step as wte runs it (model.gemm = auto) against the fastest of oneDNN, OpenBLAS and BLIS at that shape, same run" \
    's/^summary B=\([0-9]*\) T=\([0-9]*\) C=\([0-9]*\) V=\([0-9]*\) threads=\([12]\): wte\/best min \([0-9]*\)%, median \([0-9]*\)%.*/slowest GEMM of wte against the fastest library, B \1 T \2 d_model \3 vocab_size \4, \5 threads=\6=%/p' \
    -- "$0" "${results_args[@]}"
  exit
fi
bench="${BENCH:-$root/build/wte_gemm_bench}"
cli="${WTE_CLI:-$root/build/wte}"
rounds="${ROUNDS:-5}"
repeat="${REPEAT:-3}"
[ -x "$bench" ] || { echo "$0: '$bench' missing: cmake --build build --target wte_gemm_bench" >&2; exit 2; }
[ -x "$cli" ] || { echo "$0: '$cli' missing: cmake --build build --target wte" >&2; exit 2; }
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "CPU: $cpu ($(nproc) cores); $rounds rounds of $repeat; load average $(load); $("$cli" --version | head -1)"

echo
echo "== 1a. the default config's GEMMs"
"$bench" --B 16 --T 128 --C 256 --V 8192 --threads 1,2 --rounds "$rounds" --repeat "$repeat" --peak 2048
echo
echo "== 1b. GPT-2 small's GEMMs (fused loss tiles 256 x 512)"
"$bench" --B 1 --T 1024 --C 768 --V 50257 --fused-rows 256 --fused-tile 512 --threads 1,2 \
  --rounds "$rounds" --repeat "$repeat"

if [ "${SKIP_STEP:-0}" != 1 ]; then
  echo
  echo "== 2. wte profile step: each GEMM part's library and GFLOP/s; GEMM peak and FMA limit"
  for config in "$root/configs/default.ini" "$root/configs/gpt2_small.ini"; do
    name="$(basename "$config" .ini)"
    [ "$name" = gpt2_small ] && [ "${SKIP_GPT2_STEP:-0}" = 1 ] && continue
    threads=1,2
    [ "$name" = gpt2_small ] && threads=2
    echo "-- $name, threads $threads, load average $(load)"
    "$cli" profile step --config "$config" --threads "$threads" --repeat "$repeat" 2>&1 |
      grep -E "threads|GEMM|gemm|peak|FMA limit|MFU|step:|ms/step|tokens/s" || true
  done
fi
echo
echo "load average after: $(load)"
