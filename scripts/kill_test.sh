#!/usr/bin/env bash
# scripts/kill_test.sh N: N trials of tests/train/test_kill_resume.sh (ctest runs 10): SIGKILL
# `wte train` at a random moment, then the `wte train --resume auto` that continues it; no process
# of the run may be left, and a last `--resume auto` must end bit-identical to an uninterrupted
# run. Uses build/wte (BUILD_DIR to change); KILL_SEED for reproducible moments.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
KILL_TRIALS="${1:-100}" WTE_CLI="$build/wte" WTE_BINARY_DIR="$build" WTE_SOURCE_DIR="$root" \
  exec bash "$root/tests/train/test_kill_resume.sh"
