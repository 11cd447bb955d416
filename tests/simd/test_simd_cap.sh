#!/usr/bin/env bash
# WTE_MAX_SIMD caps Highway's dispatch target in every consumer of the kernels library, from the
# process's start: `wte --version` and `wte profile` report the target in force and the cap, a
# test binary's per-target instances stop at the cap, the Python module reports it, and a bad
# value ends the process with status 2 and a message naming the variable, the value and the
# allowed names. Skipped where the CPU has no SSE4 and AVX2 (nothing to cap to).
set -uo pipefail
cli="${WTE_CLI:?}"
bin="${WTE_BINARY_DIR:?}"
fail() { echo "FAIL: $*"; exit 1; }
dir=$(mktemp -d "$bin/simd_cap_test.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir" || fail "cd $dir"

best=$(env -u WTE_MAX_SIMD "$cli" --version | sed -n 's/^Highway .*SIMD target in force: \([A-Z0-9_]*\);.*/\1/p')
echo "uncapped: $best"
[ -n "$best" ] || fail "wte --version names no target"
case "$best" in
  AVX3_DL|AVX3|AVX2) ;;
  *) echo "skipped: the best target here is $best; the checks cap an AVX2 CPU at SSE4"; exit 77 ;;
esac

# The CLI: the cap takes effect before the first dispatch and both are reported.
WTE_MAX_SIMD=SSE4 "$cli" --version > v.txt || fail "wte --version under WTE_MAX_SIMD=SSE4 exit $?"
cat v.txt
grep -q 'SIMD target in force: SSE4; WTE_MAX_SIMD cap: SSE4)$' v.txt || fail "the cap SSE4 is not in force"
WTE_MAX_SIMD=avx2 "$cli" --version | grep -q 'in force: AVX2; WTE_MAX_SIMD cap: AVX2)$' \
  || fail "the lower-case cap avx2 is not in force"
WTE_MAX_SIMD= "$cli" --version | grep -q "in force: $best; WTE_MAX_SIMD cap: none)$" \
  || fail "an empty WTE_MAX_SIMD is not 'no cap'"
WTE_MAX_SIMD=SSE4 "$cli" profile gather --quick --vocab-size 1000 --d-model 40 --n-tokens 512 \
  --threads 1 > p.txt 2>&1 || fail "wte profile machine exit $?"
grep -q 'Highway SSE4, .*Highway capped by WTE_MAX_SIMD=SSE4' p.txt || { cat p.txt; fail "wte profile does not report the cap"; }

# A bad value: exit 2, one message naming the variable, the value and what is allowed.
WTE_MAX_SIMD=avx9 "$cli" --version > out.txt 2> err.txt
status=$?
cat err.txt
[ "$status" = 2 ] || fail "WTE_MAX_SIMD=avx9: exit $status, want 2"
[ -s out.txt ] && fail "WTE_MAX_SIMD=avx9 still printed: $(cat out.txt)"
grep -q "WTE_MAX_SIMD='avx9'" err.txt && grep -q 'AVX2' err.txt && grep -q 'SSE4' err.txt \
  || fail "the message does not name the variable, the value and the allowed names"

# A test binary: its per-target instances stop at the cap, and the dispatch test runs SSE4.
tests="$bin/test_simd_kernels"
if [ -x "$tests" ]; then
  WTE_MAX_SIMD=SSE4 "$tests" --gtest_list_tests > list.txt || fail "$tests --gtest_list_tests exit $?"
  grep -qE '/SSE4( |$)' list.txt || fail "no SSE4 instance under the cap"
  grep -qE '/(AVX2|AVX3|AVX3_DL)( |$)' list.txt && fail "instances above the cap SSE4: $(grep -E '/(AVX2|AVX3)( |$)' list.txt | head -3)"
  WTE_MAX_SIMD=SSE4 "$tests" --gtest_filter='*DispatchRunsTheForcedTarget*' > run.txt \
    || { cat run.txt; fail "the dispatch test under the cap"; }
fi

# The Python module (if built): the cap is in force at import.
if compgen -G "$bin/python/wte/_wte*.so" > /dev/null && /usr/bin/python3 -c 'import numpy' 2> /dev/null; then
  got=$(WTE_MAX_SIMD=sse4 PYTHONPATH="$bin/python" /usr/bin/python3 -c \
    'import wte; print(wte.simd_target(), wte.simd_target_cap())') || fail "import wte under the cap"
  echo "python: $got"
  [ "$got" = "SSE4 SSE4" ] || fail "Python reports '$got', want 'SSE4 SSE4'"
fi
echo "ok"
