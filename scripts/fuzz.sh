#!/usr/bin/env bash
# Runs one libFuzzer target for a given time: scripts/fuzz.sh TARGET SECONDS
#   TARGET: config | checkpoint | token_file | tokenizer | safetensors | python_threads
#   (fuzz/fuzz_<TARGET>.cc)
# Builds it with clang 14 + ASan + UBSan in build-fuzz (FUZZ_BUILD_DIR), starts from the committed
# seeds in fuzz/corpus/TARGET plus what earlier runs found (build-fuzz/corpus/TARGET), and writes
# any crashing input to build-fuzz/crashes/TARGET/. Exit status: 0 if the run ended with no crash,
# hang, leak or sanitizer report; libFuzzer's non-zero status otherwise. Prints libFuzzer's
# final stats (runs, cov, ft). Extra arguments after SECONDS go to libFuzzer (e.g. -jobs=2).
# A unit slower than FUZZ_TIMEOUT seconds (default 30, wall clock: generous for shared machines)
# counts as a hang.
# scripts/fuzz.sh --build-only: configure build-fuzz and build every target, run none (so that
# several targets can then run at once with FUZZ_NO_BUILD=1, as scripts/quickstart.sh test does).
# The build is -O1 (libFuzzer's recommended level: quick to compile, fast enough to fuzz) and
# compiles Highway's kernels for the static target only (HWY_COMPILE_ONLY_STATIC, see
# cmake/sanitize.cmake): the targets are parsers and loaders, and the kernels on every SIMD target
# run under ASan+UBSan in build-asan's test suite.
set -euo pipefail
build_only=0
[ "${1:-}" = --build-only ] && build_only=1
if [ "$build_only" = 0 ] && [ $# -lt 2 ]; then
  echo "usage: $0 config|checkpoint|token_file|tokenizer|safetensors|python_threads SECONDS [libFuzzer options]" >&2
  echo "       $0 --build-only" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if [ "$build_only" = 0 ]; then
  target="${1#fuzz_}"
  seconds="$2"
  shift 2
fi
if [ "$build_only" = 0 ] && [ ! -f "fuzz/fuzz_${target}.cc" ]; then
  echo "$0: no target '$target'; allowed: $(ls fuzz/fuzz_*.cc | sed 's#fuzz/fuzz_##; s#\.cc##' | tr '\n' ' ')" >&2
  exit 2
fi
build="${FUZZ_BUILD_DIR:-build-fuzz}"
if [ ! -f "$build/CMakeCache.txt" ]; then
  launcher=()
  if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  fi
  cmake -S . -B "$build" -DWTE_FUZZ=ON -DCMAKE_BUILD_TYPE=Release \
    "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELEASE=-O1 -DNDEBUG" \
    -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14 "${launcher[@]}" >/dev/null
fi
# fuzz_python_threads embeds a Python interpreter: built on request only (WTE_FUZZ_PYTHON), and run
# without leak detection (the interpreter keeps its allocations to the end of the process).
if [ "${target:-}" = python_threads ]; then
  cmake -S . -B "$build" -DWTE_FUZZ_PYTHON=ON >/dev/null
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1}"
fi
if [ "$build_only" = 1 ]; then
  # Only the fuzz targets (the build's `wte` and Python module are not needed).
  all_targets=()
  for src in fuzz/fuzz_*.cc; do
    [ "$src" = fuzz/fuzz_python_threads.cc ] && continue  # on request: scripts/fuzz.sh python_threads
    all_targets+=("$(basename "$src" .cc)")
  done
  cmake --build "$build" -j "${JOBS:-$(nproc)}" --target "${all_targets[@]}"
  exit 0
fi
# FUZZ_NO_BUILD=1: run the binary as it is (e.g. while another build uses the machine).
[ -n "${FUZZ_NO_BUILD:-}" ] || cmake --build "$build" --target "fuzz_${target}" -j "${JOBS:-$(nproc)}" >/dev/null
mkdir -p "$build/corpus/$target" "$build/crashes/$target"
dict=()
[ -f "fuzz/${target}.dict" ] && dict=(-dict="fuzz/${target}.dict")
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
echo "== fuzz_${target} for ${seconds} s (seeds fuzz/corpus/${target}, corpus $build/corpus/${target})"
"$build/fuzz_${target}" "$build/corpus/$target" "fuzz/corpus/$target" "${dict[@]}" \
  -max_total_time="$seconds" -timeout="${FUZZ_TIMEOUT:-30}" -rss_limit_mb=2560 -malloc_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$build/crashes/$target/" "$@"
