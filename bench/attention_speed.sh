#!/usr/bin/env bash
# bench/attention_speed.sh: the dense causal attention against the tiled one, in one run.
#  1. attention's parts, forward + backward, at GPT-2 small's shapes (B 1, T 1024, d_model 768,
#     12 heads), 2 and 1 threads (build/wte_attention_bench: interleaved rounds, medians, the
#     per-round speed-ups' median and spread);
#  2. the same over T at the default config's attention shape (B 16, d_model 256, 4 heads) and at
#     GPT-2 small's, 1 and 2 threads: where tiled starts to win (model.attention = auto's
#     threshold, tiled_attention_min_t in src/model/attention_tiled.cc);
#  3. a sweep of the tiled path's tile shapes at GPT-2 small's shapes, 2 threads;
#  4. a whole training step of the default config (T 128) and of GPT-2 small's shapes,
#     `wte profile step` with model.attention = dense, tiled and auto in interleaved rounds,
#     1 and 2 threads;
#  5. where `auto` should switch on this CPU, at T = 64, 128, 256 and 1024 (AUTO_T), 1 and 2
#     threads (the per-ISA table of src/model/attention_tiled.cc cites these rows):
#     a. attention's parts, dense against tiled, at the default config's attention shape (d_model
#        256, 4 heads) with B·T = 2048 tokens and at GPT-2 small's (d_model 768, 12 heads, B 1),
#        AUTO_ROUNDS (9) interleaved rounds;
#     b. (unless SKIP_AUTO_STEP=1) the default config's whole step at the same T and B,
#        `wte profile step` with model.attention = dense, tiled and auto in interleaved rounds;
#        each row says which is faster and how far auto is from it.
# Not a test: the numbers depend on the machine and its load (compare the ratios of one run).
# Usage: bench/attention_speed.sh [--isa native|avx2|avx512] [--out [DIR]]
#   env: ROUNDS (5), REPEAT (3), SKIP_KERNELS=1 (parts 1 and 2), SKIP_SWEEP=1, SKIP_STEP=1,
#        SKIP_AUTO=1, SKIP_AUTO_STEP=1, AUTO_T ("64 128 256 1024"), AUTO_ROUNDS (9), BENCH
#        (build/wte_attention_bench), WTE_CLI (build/wte)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/bench/results.sh"
results_parse_out "$@"
if [ -n "$results_out" ]; then
  results_run attention "causal attention's forward + backward, dense against tiled, and the step with each, same run" \
    's/^attention B=1 T=1024 C=768 NH=12 threads=\([12]\) tiles=64x64: .*speed-up \([0-9.]*\).*/tiled over dense, attention at GPT-2 small, \1 threads=\2/p' \
    -- "$0" "${results_args[@]}"
  exit
fi
bench="${BENCH:-$root/build/wte_attention_bench}"
cli="${WTE_CLI:-$root/build/wte}"
rounds="${ROUNDS:-5}"
repeat="${REPEAT:-3}"
[ -x "$bench" ] || { echo "$0: '$bench' missing: cmake --build build --target wte_attention_bench" >&2; exit 2; }
[ -x "$cli" ] || { echo "$0: '$cli' missing: cmake --build build --target wte" >&2; exit 2; }
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "CPU: $cpu ($(nproc) cores); $rounds rounds of $repeat; load average $(load); $("$cli" --version | head -1)"
"$cli" --version | sed -n 's/^oneDNN .*(runtime library; \(.*\))/ISA: oneDNN \1/p; s/^Highway .*(\(.*\))/ISA: Highway \1/p'
py=/usr/bin/python3
[ -x "$py" ] || py=python3
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if [ "${SKIP_KERNELS:-0}" != 1 ]; then
  echo
  echo "== 1. attention's parts (forward + backward) at GPT-2 small's shapes"
  for threads in 2 1; do
    "$bench" --B 1 --T 1024 --C 768 --NH 12 --threads "$threads" --rounds "$rounds" --repeat "$repeat"
  done

  echo
  echo "== 2. over T: the default config's attention shape (B 16, C 256, NH 4) and GPT-2 small's"
  for threads in 1 2; do
    "$bench" --B 16 --T 64,128,256,384,512 --C 256 --NH 4 --threads "$threads" --rounds "$rounds" --repeat "$repeat"
    "$bench" --B 1 --T 128,256,384,512,768 --C 768 --NH 12 --threads "$threads" --rounds "$rounds" --repeat "$repeat"
  done
fi

if [ "${SKIP_SWEEP:-0}" != 1 ]; then
  echo
  echo "== 3. tile shapes (query rows x keys) at GPT-2 small's shapes, 2 threads"
  "$bench" --B 1 --T 1024 --C 768 --NH 12 --threads 2 --rounds 3 --repeat 1 --sweep
fi

if [ "${SKIP_STEP:-0}" != 1 ]; then
  echo
  echo "== 4. training step (wte profile step), model.attention = dense, tiled, auto; interleaved rounds"
  for config in "$root/configs/default.ini" "$root/configs/gpt2_small.ini"; do
    name="$(basename "$config" .ini)"
    for threads in 1 2; do
      [ "$name" = gpt2_small ] && [ "$threads" = 1 ] && continue  # 14 s a step: 2 threads only
      step_repeat=$([ "$name" = gpt2_small ] && echo 1 || echo "$repeat")
      for r in $(seq "$rounds"); do
        for a in dense tiled auto; do
          "$cli" profile step --config "$config" --threads "$threads" --repeat "$step_repeat" \
            --model.attention="$a" --json "$work/$name.$threads.$r.$a.json" > "$work/out.txt" 2>&1 ||
            { cat "$work/out.txt" >&2; exit 1; }
        done
      done
      "$py" - "$work/$name.$threads" "$rounds" "$name" "$threads" <<'EOF'
import json, statistics, sys
base, rounds, name, threads = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
ms = {a: [json.load(open(f"{base}.{r}.{a}.json"))["step"][0]["step_ms"] for r in range(1, rounds + 1)]
      for a in ("dense", "tiled", "auto")}
line = f"step {name} threads={threads}: " + ", ".join(
    f"{a} {statistics.median(v):.1f} ms" for a, v in ms.items())
for a in ("tiled", "auto"):
    r = [d / x for d, x in zip(ms["dense"], ms[a])]
    line += f"; dense/{a} {statistics.median(r):.3f} ({min(r):.3f}-{max(r):.3f})"
print(line)
EOF
    done
  done
fi
if [ "${SKIP_AUTO:-0}" != 1 ]; then
  echo
  echo "== 5a. auto over T: attention's parts, the default config's shape (B·T = 2048 tokens) and GPT-2 small's (B 1)"
  for threads in 1 2; do
    for T in ${AUTO_T:-64 128 256 1024}; do
      B=$(( T >= 2048 ? 1 : 2048 / T ))
      "$bench" --B "$B" --T "$T" --C 256 --NH 4 --threads "$threads" --rounds "${AUTO_ROUNDS:-9}" --repeat "$repeat"
    done
    "$bench" --B 1 --T "$(echo ${AUTO_T:-64 128 256 1024} | tr ' ' ',')" --C 768 --NH 12 --threads "$threads" \
      --rounds "${AUTO_ROUNDS:-9}" --repeat "$repeat"
  done
fi

if [ "${SKIP_AUTO:-0}" != 1 ] && [ "${SKIP_AUTO_STEP:-0}" != 1 ]; then
  echo
  echo "== 5b. auto over T: the default config's model, B·T = 2048 tokens, model.attention = dense, tiled, auto; interleaved rounds"
  for threads in 1 2; do
    for T in ${AUTO_T:-64 128 256 1024}; do
      B=$(( T >= 2048 ? 1 : 2048 / T ))
      ctx=$(( T > 128 ? T : 128 ))
      for r in $(seq "$rounds"); do
        for a in dense tiled auto; do
          "$cli" profile step --config "$root/configs/default.ini" --threads "$threads" --repeat "$repeat" \
            --model.n_ctx="$ctx" --data.seq_len="$T" --train.batch_size="$B" --model.attention="$a" \
            --json "$work/auto.$threads.$T.$r.$a.json" > "$work/out.txt" 2>&1 ||
            { cat "$work/out.txt" >&2; exit 1; }
        done
      done
      "$py" - "$work/auto.$threads.$T" "$rounds" "$T" "$B" "$threads" <<'EOF'
import json, statistics, sys
base, rounds, T, B, threads = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
ms = {a: [json.load(open(f"{base}.{r}.{a}.json"))["step"][0]["step_ms"] for r in range(1, rounds + 1)]
      for a in ("dense", "tiled", "auto")}
med = {a: statistics.median(v) for a, v in ms.items()}
faster = min(("dense", "tiled"), key=lambda a: med[a])
# auto against the faster side, per round (same machine state), then the median over the rounds.
r = [x / y for x, y in zip(ms["auto"], ms[faster])]
print(f"auto T={T} B={B} threads={threads}: " + ", ".join(f"{a} {med[a]:.1f} ms" for a in med) +
      f"; faster: {faster} (dense/tiled {med['dense'] / med['tiled']:.3f});"
      f" auto/{faster} {statistics.median(r):.3f} ({min(r):.3f}-{max(r):.3f})")
EOF
    done
  done
fi
echo
echo "load average after the run: $(load)"
