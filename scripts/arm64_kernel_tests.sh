#!/usr/bin/env bash
# scripts/arm64_kernel_tests.sh: builds wte's kernels library (simd/, the Highway kernels) and its
# tests (tests/simd/) for arm64 with Debian's cross toolchain and arm64 packages, and runs the tests
# under qemu-aarch64 (user-mode emulation) on Highway's NEON target. The SVE targets are left out
# of the build unless ARM64_SVE=1 (each target compiles every kernel once more); with them,
# WTE_MAX_SIMD picks the target to run (NEON by default; qemu's default CPU has SVE and SVE2). Not
# part of CI (emulation makes it slow): run it by hand after changing a kernel. docs/testing.md
# says what it covers.
#
# Only the kernels library and the tests that need nothing else run: the model (oneDNN), the
# checkpoints (HDF5) and the tool are not built for arm64 here, so test_scatter_strategies.cc (it
# trains through the model) is left out.
#
# Needs (Debian bookworm, as root): dpkg --add-architecture arm64 && apt-get update &&
#   apt-get install g++-aarch64-linux-gnu qemu-user libhwy-dev:arm64 libgtest-dev:arm64
# Usage: scripts/arm64_kernel_tests.sh [BUILD_DIR]       (default build-arm64)
# OpenMP threads wait passively: spinning threads under emulation take the emulated partner's time.
#   env: JOBS (2), ARM64_SVE (0; 1 compiles the SVE targets too), WTE_MAX_SIMD (NEON; e.g. SVE2
#        with ARM64_SVE=1), QEMU_CPU (qemu's default CPU, max)
# Exit status: 0 every test passed, 1 a build or a test failed, 77 a tool or package is missing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$root/build-arm64}"
jobs="${JOBS:-2}"
cxx=aarch64-linux-gnu-g++
sysroot=/usr/aarch64-linux-gnu   # the cross toolchain's libc, libstdc++ and libgomp
missing=()
command -v "$cxx" > /dev/null || missing+=("g++-aarch64-linux-gnu")
command -v qemu-aarch64 > /dev/null || missing+=("qemu-user")
[ -e /usr/lib/aarch64-linux-gnu/libhwy.so ] || missing+=("libhwy-dev:arm64")
[ -e /usr/lib/aarch64-linux-gnu/libgtest.a ] || missing+=("libgtest-dev:arm64")
if [ ${#missing[@]} -gt 0 ]; then
  echo "skipped: missing ${missing[*]} (dpkg --add-architecture arm64 && apt-get update &&" \
       "apt-get install g++-aarch64-linux-gnu qemu-user libhwy-dev:arm64 libgtest-dev:arm64)"
  exit 77
fi
case "$root$out" in *[[:space:]]*) echo "$0: the paths may not hold spaces: $root, $out" >&2; exit 2 ;; esac
# NEON only (the SVE targets disabled at compile time) unless ARM64_SVE=1; each in its own folder.
sve_off=""
if [ "${ARM64_SVE:-0}" = 1 ]; then
  out="$out/sve"
else
  out="$out/neon"
  sve_off="-DHWY_DISABLED_TARGETS=(HWY_SVE|HWY_SVE_256|HWY_SVE2|HWY_SVE2_128)"
fi
mkdir -p "$out/obj"

# As CMakeLists.txt builds wte_simd: no -march (Highway compiles every arm64 target itself and
# dispatches at run time), -ffp-contract=off (kernels fuse only where they say so).
export WTE_ARM64_FLAGS="-std=c++20 -O2 -fopenmp -ffp-contract=off -Wall -Wextra -Wno-unused-parameter
  -I$root -I$root/include -DWTE_SOURCE_DIR=\"$root\" -DWTE_BINARY_DIR=\"$out\" -DWTE_CLI=\"$out/wte\" $sve_off"
export WTE_ARM64_CXX="$cxx"

# build_one SRC OUT [LINK ARGS...]: compiles SRC to the object OUT, or with LINK ARGS links the
# program OUT, when SRC (or the kernels library $WTE_ARM64_LIB, for a program) is newer than OUT.
build_one() {
  local src="$1" dst="$2"; shift 2
  if [ -e "$dst" ] && [ "$dst" -nt "$src" ] && { [ $# -eq 0 ] || [ "$dst" -nt "$WTE_ARM64_LIB" ]; }; then
    return 0
  fi
  echo "  c++ $src"
  # shellcheck disable=SC2086  # the flags are words
  if [ $# -eq 0 ]; then
    $WTE_ARM64_CXX $WTE_ARM64_FLAGS -c "$src" -o "$dst"
  else
    $WTE_ARM64_CXX $WTE_ARM64_FLAGS "$src" -o "$dst" "$@"
  fi
}
export -f build_one

echo "== building the kernels library for arm64 ($("$cxx" --version | head -1))"
for src in "$root"/simd/*.cc "$root"/simd/dev/*.cc; do
  rel="${src#"$root"/}"
  printf '%s\0%s\0' "$src" "$out/obj/${rel//\//_}.o"
done | xargs -0 -n 2 -P "$jobs" bash -c 'build_one "$0" "$1"'
lib="$out/libwte_kernels.a"
export WTE_ARM64_LIB="$lib"
if [ ! -e "$lib" ] || [ -n "$(find "$out/obj" -name '*.o' -newer "$lib")" ]; then
  rm -f "$lib"
  ar rcs "$lib" "$out"/obj/*.o
fi

echo "== building the kernel tests"
tests=()
for src in "$root"/tests/simd/test_*.cc; do
  name=$(basename "$src" .cc)
  [ "$name" = test_scatter_strategies ] && continue  # trains through the oneDNN model
  tests+=("$name")
done
# The anchor keeps the object that applies WTE_MAX_SIMD (as wte::kernels' link option does).
for name in "${tests[@]}"; do
  printf '%s\0%s\0' "$root/tests/simd/$name.cc" "$out/$name"
done | xargs -0 -n 2 -P "$jobs" bash -c 'build_one "$0" "$1" -Wl,-u,wte_simd_target_cap_anchor \
  "$WTE_ARM64_LIB" -lgtest_main -lgtest -lhwy_contrib -lhwy -lpthread'

echo "== running them under qemu-aarch64 (WTE_MAX_SIMD=${WTE_MAX_SIMD:-NEON})"
failed=()
for name in "${tests[@]}"; do
  start=$(date +%s)
  if qemu-aarch64 ${QEMU_CPU:+-cpu "$QEMU_CPU"} -L "$sysroot" \
       -E WTE_MAX_SIMD="${WTE_MAX_SIMD:-NEON}" -E OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}" \
       -E OMP_WAIT_POLICY=passive \
       "$out/$name" --gtest_brief=1 > "$out/$name.log" 2>&1; then
    echo "  $name: $(grep -E '^\[  PASSED  \]' "$out/$name.log" | head -1) ($(( $(date +%s) - start )) s)"
  else
    echo "  $name: FAILED ($(( $(date +%s) - start )) s)"
    tail -n 30 "$out/$name.log"
    failed+=("$name")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED: ${failed[*]} (logs in $out)"
  exit 1
fi
echo "all ${#tests[@]} kernel test programs passed on arm64 (qemu-aarch64, Highway target capped at ${WTE_MAX_SIMD:-NEON})"
