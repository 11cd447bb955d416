#!/usr/bin/env bash
# Tokenizing speed of `wte prepare` with GPT-2's vocabulary on English text (the KJV, repeated to
# COPIES x 4.1 MB so each run lasts seconds), at 1 and 2 threads, interleaved rounds; checks that
# every run's shards are byte-identical to the first 1-thread run's.
#
# Usage: bench/tokenize_speed.sh [--rounds N] [--copies N] [--out [DIR]]
# Needs build/wte (or $WTE_CLI), datasets/gpt2 (datasets/fetch_gpt2_vocab.sh) and datasets/kjv
# (datasets/make_kjv.sh); exits 77 (skipped) without them.
# MB/s is text bytes over the run's wall time (read, split, encode, write); cpu_s is user+sys and
# MB/cpu_s the text bytes per CPU second (what one thread does when it has a core to itself).
# On a shared machine the wall times need the CPUs: the load average is recorded with the results.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
source "$here/results.sh"
results_parse_out "$@"
set -- "${results_args[@]+"${results_args[@]}"}"
rounds=3 copies=8
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --copies) copies="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "tokenize_speed.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
wte="${WTE_CLI:-$root/build/wte}"
kjv="$root/datasets/kjv/kjv.txt" vocab="$root/datasets/gpt2"
for need in "$wte" "$kjv" "$vocab/encoder.json"; do
  [ -e "$need" ] || { echo "tokenize_speed.sh: $need is missing (build wte, datasets/make_kjv.sh, datasets/fetch_gpt2_vocab.sh); skipped" >&2; exit 77; }
done

measure() {
  local tmp; tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' RETURN
  for i in $(seq "$copies"); do cat "$kjv"; printf '\n\n'; done > "$tmp/corpus.txt"
  local bytes; bytes=$(stat -c %s "$tmp/corpus.txt")
  echo "corpus: KJV x $copies, $bytes bytes; vocabulary: GPT-2 (50257); CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
  printf '%-6s %-8s %9s %9s %8s %9s %s\n' round threads seconds MB/s cpu_s MB/cpu_s same_ids
  local -A all=()
  for r in $(seq "$rounds"); do
    for t in 1 2; do
      rm -rf "$tmp/out$t"
      local start end
      start=$(date +%s.%N)
      /usr/bin/time -f '%U %S' -o "$tmp/time" "$wte" prepare --tokenizer "$vocab" --out "$tmp/out$t" \
        --threads "$t" "$tmp/corpus.txt" > /dev/null 2> "$tmp/err" || { cat "$tmp/err" >&2; return 1; }
      end=$(date +%s.%N)
      local secs mbs cpu same=yes
      secs=$(echo "$end - $start" | bc -l)
      mbs=$(echo "$bytes / $secs / 1000000" | bc -l)
      cpu=$(awk '{print $1 + $2}' "$tmp/time")
      if [ -d "$tmp/ref" ]; then
        for f in "$tmp/ref"/*.bin; do cmp -s "$f" "$tmp/out$t/$(basename "$f")" || same=no; done
      else
        cp -r "$tmp/out$t" "$tmp/ref"
      fi
      printf '%-6s %-8s %9.3f %9.1f %8.2f %9.1f %s\n' "$r" "$t" "$secs" "$mbs" "$cpu" \
        "$(echo "$bytes / $cpu / 1000000" | bc -l)" "$same"
      all[$t]+="$mbs "
    done
  done
  local m1 m2
  m1=$(echo "${all[1]}" | tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  m2=$(echo "${all[2]}" | tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  printf 'median MB/s: 1 thread %.1f, 2 threads %.1f, ratio %.2f\n' "$m1" "$m2" "$(echo "$m2 / $m1" | bc -l)"
}

if [ -n "$results_out" ]; then
  results_run tokenize "wte prepare tokenizes English text with GPT-2's vocabulary at 20 MB/s or more per thread and 1.8x that at 2 threads, with the same ids" \
    's/^median MB\/s: 1 thread \([0-9.]*\), 2 threads \([0-9.]*\), ratio \([0-9.]*\)$/mb_per_s_1_thread=\1\nmb_per_s_2_threads=\2\nspeedup_2_threads=\3/p' -- measure
else
  measure
fi
