#!/usr/bin/env bash
# scripts/sibling_runs_check.sh N: N trials of each case of tests/train/test_sibling_runs.sh (which ctest
# runs with 3): two `wte train` runs in sibling directories of a new parent, the first failing at
# start-up (a bad corpus, SIGINT, while the other trains, both started at once); prints "N of N
# intact" per case. Uses build/wte (BUILD_DIR to change). Default N: 20.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
SIBLING_TRIALS="${1:-20}" WTE_CLI="$build/wte" WTE_BINARY_DIR="$build" WTE_SOURCE_DIR="$root" \
  exec bash "$root/tests/train/test_sibling_runs.sh"
