#!/usr/bin/env bash
# bench/step_ab.sh: one training step of two wte builds side by side (A: a reference build, e.g. the
# commit before a change; B: this build), on the same configs, in interleaved rounds: each round
# runs `wte profile step` with A and then with B (median of REPEAT steps each), so both see the
# same machine state. Prints per config each round's step time of A and B and B/A, then the median
# B/A with the spread of the rounds. B/A below 1 means B is faster.
# Not a test: the numbers depend on the machine and its load (compare the ratios of one run).
# Usage: bench/step_ab.sh A_WTE [CONFIG...] [--out [DIR]]
#   CONFIG defaults to configs/default.ini and configs/gpt2_small.ini (GPT-2 small's shapes: V
#   50257, d_model 768, 12 layers, 12 heads, n_ctx = T = 1024, B 1).
#   --out writes the table and the run's facts to DIR (default bench/results/) as step_ab-*.json.
#   env: THREADS (2), ROUNDS (5), REPEAT (5; 3 for T >= 1024), WTE_CLI (B; default build/wte)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/bench/results.sh"
results_parse_out "$@"
if [ -n "$results_out" ]; then
  results_run step_ab "a training step of this build against a reference build, same run" \
    's/^median B \/ A step time, \([^:]*\): \([0-9.]*\)x.*/step time of this build over the reference build, \1=\2/p' -- "$0" "${results_args[@]}"
  exit
fi
set -- "${results_args[@]}"
[ $# -ge 1 ] || { echo "usage: $0 A_WTE [CONFIG...] [--out [DIR]]" >&2; exit 2; }
a_cli="$1"; shift
b_cli="${WTE_CLI:-$root/build/wte}"
[ -x "$a_cli" ] || { echo "$0: A_WTE '$a_cli' is not an executable" >&2; exit 2; }
[ -x "$b_cli" ] || { echo "$0: WTE_CLI '$b_cli' is not an executable" >&2; exit 2; }
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=("$root/configs/default.ini" "$root/configs/gpt2_small.ini")
threads="${THREADS:-2}"
rounds="${ROUNDS:-5}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
py=/usr/bin/python3
[ -x "$py" ] || py=python3

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "CPU: $cpu ($(nproc) cores); $threads threads; $rounds rounds; load average $(load)"
echo "A: $a_cli ($("$a_cli" --version | head -1))"
echo "B: $b_cli ($("$b_cli" --version | head -1))"
for config in "${configs[@]}"; do
  name="$(basename "$config" .ini)"
  seq_len=$(sed -n 's/^ *seq_len *= *\([0-9]*\).*/\1/p' "$config" | head -1)
  repeat="${REPEAT:-$([ "${seq_len:-0}" -ge 1024 ] && echo 3 || echo 5)}"
  echo
  echo "== $name: wte profile step --config $config --threads $threads --repeat $repeat"
  printf '%-6s %12s %12s %8s   %s\n' round "A ms" "B ms" "B/A" "load average after the round"
  for r in $(seq "$rounds"); do
    for side in a b; do
      cli="$a_cli"; [ "$side" = b ] && cli="$b_cli"
      "$cli" profile step --config "$config" --threads "$threads" --repeat "$repeat" \
        --json "$work/$name.$r.$side.json" > "$work/$name.$r.$side.txt" 2>&1 ||
        { cat "$work/$name.$r.$side.txt" >&2; exit 1; }
    done
    "$py" - "$work/$name.$r" "$r" "$(load)" <<'EOF'
import json, sys
a, b = (json.load(open(f"{sys.argv[1]}.{s}.json"))["step"][0]["step_ms"] for s in "ab")
print(f"{sys.argv[2]:<6} {a:12.2f} {b:12.2f} {b / a:7.3f}x   {sys.argv[3]}")
EOF
  done
  "$py" - "$work/$name" "$rounds" "$name" <<'EOF'
import json, statistics, sys
r = [json.load(open(f"{sys.argv[1]}.{i}.b.json"))["step"][0]["step_ms"] /
     json.load(open(f"{sys.argv[1]}.{i}.a.json"))["step"][0]["step_ms"] for i in range(1, int(sys.argv[2]) + 1)]
print(f"median B / A step time, {sys.argv[3]}: {statistics.median(r):.3f}x "
      f"(rounds: {', '.join(f'{x:.3f}' for x in r)}; spread {min(r):.3f}-{max(r):.3f})")
EOF
done
