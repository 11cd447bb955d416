#!/bin/bash
# `wte profile` as a user runs it (small shapes, --quick): the table, --json, --chart, the step
# split, and clear errors for a bad distribution or strategy. Timings are printed, never asserted.
set -euo pipefail
: "${WTE_CLI:?}" "${WTE_BINARY_DIR:?}"
dir=$(mktemp -d "${WTE_BINARY_DIR}/profile_test.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

printf '\x05\x00\x00\x00\x07\x00\x00\x00\x05\x00\x00\x00' > "$dir/ids.bin"   # ids 5 7 5
"$WTE_CLI" profile scatter --quick --vocab-size 1000 --d-model 40 --n-tokens 512 --threads 1,2 \
  --dist uniform,zipf:1.1,same,sequential,file:"$dir/ids.bin" --json "$dir/p.json" \
  --chart "$dir/p.svg" > "$dir/out.txt" 2> "$dir/err.txt" || fail "profile scatter exited $?"
grep -q "scatter     sorted" "$dir/out.txt" || fail "no sorted row in the table"
grep -q "lazy-adamw" "$dir/out.txt" || fail "no lazy-adamw row"
grep -q "row-memcpy" "$dir/out.txt" || fail "no row-memcpy limit"
# stderr is a file here, not a terminal: no "\r\e[K profile: ..." progress lines in it.
if grep -q $'\r' "$dir/err.txt"; then fail "progress lines written to a non-terminal stderr"; fi
# Deterministic strategies: same bits for 2 threads as for 1, on every distribution.
for s in serial sorted row-range auto=sorted; do
  n=$(grep -E "^  2 .* warm  scatter +$s " "$dir/out.txt" | grep -c "same bits as 1t" || true)
  [ "$n" = 5 ] || fail "strategy $s: $n of 5 distributions had the same bits for 2 threads"
done
/usr/bin/python3 - "$dir/p.json" <<'PY' || fail "json"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["vocab"] == 1000 and j["d_model"] == 40 and j["tokens"] == 512, j
ks = j["kernels"]
assert {k["kernel"] for k in ks} == {"copy", "row-memcpy", "scatter", "lazy-adamw"}, ks
assert all(k["ms"] > 0 and k["gbs"] > 0 for k in ks)
assert {k["cache"] for k in ks} == {"warm", "cold"}
PY
grep -q "<svg" "$dir/p.svg" && grep -q "stroke-dasharray" "$dir/p.svg" || fail "chart has no bars/limit line"

"$WTE_CLI" profile step --quick --threads 1 > "$dir/step.txt" 2>/dev/null || fail "profile step"
grep -q "all but the GEMMs" "$dir/step.txt" || fail "step table"
grep -q "logits GEMM" "$dir/step.txt" || fail "step parts"

set +e
"$WTE_CLI" profile scatter --dist zipf:-1 > /dev/null 2> "$dir/e1.txt"; rc=$?
[ $rc = 2 ] && grep -q "zipf:-1" "$dir/e1.txt" || fail "bad --dist: rc $rc, $(cat "$dir/e1.txt")"
"$WTE_CLI" profile scatter --strategy fastest > /dev/null 2> "$dir/e2.txt"; rc=$?
[ $rc = 2 ] && grep -q "fastest" "$dir/e2.txt" || fail "bad --strategy: rc $rc"
"$WTE_CLI" profile scatter --vocab-size 5 --dist file:"$dir/ids.bin" > /dev/null 2> "$dir/e3.txt"; rc=$?
# ids 5 7 5 with vocab 5: the first bad id is 5, at position 0.
[ $rc = 1 ] && grep -q "token id 5 at position 0" "$dir/e3.txt" && grep -q "vocab_size=5" "$dir/e3.txt" \
  || fail "out-of-range id in file: rc $rc, $(cat "$dir/e3.txt")"
echo "ok"
