#!/usr/bin/env bash
# scripts/kill_test.sh N: SIGKILL `wte train` at N random moments and check that each
# `--resume auto` ends bit-identical to an uninterrupted run (tests/train/test_kill_resume.sh, which
# ctest runs with 20). Uses build/wte (BUILD_DIR to change); KILL_SEED for reproducible moments.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
KILL_TRIALS="${1:-100}" WTE_CLI="$build/wte" WTE_BINARY_DIR="$build" WTE_SOURCE_DIR="$root" \
  exec bash "$root/tests/train/test_kill_resume.sh"
