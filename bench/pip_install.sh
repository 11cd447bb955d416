#!/usr/bin/env bash
# bench/pip_install.sh: wall time of `pip install --no-build-isolation .` (the Python module, as
# README.md's "From Python" installs it) into a fresh virtual environment made with
# `/usr/bin/python3 -m venv --system-site-packages`, in two cases:
#   existing  reusing a build directory where `cmake --build DIR --target wte` ran (wte's libraries
#             are built; the module's own sources and its link are what is left)
#   fresh     a new, empty build directory (configure, then every library the module links; with
#             ccache, objects of an earlier build of the same sources come from the cache: the
#             table gives the cache's hit and miss counts over the install)
# Not a test: the times depend on the machine, its load and ccache's contents.
# Usage: bench/pip_install.sh [--build DIR] [--out [DIR]]
#   --build DIR  the existing build directory (default: build/; it must have built target wte)
#   CCACHE_DISABLE=1 in the environment measures the fresh case without ccache.
#   --out writes the table and the run's facts to DIR (default bench/results/) as pip_install-*.json.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/bench/results.sh"
results_parse_out "$@"
if [ -n "$results_out" ]; then
  results_run pip_install "wall time of pip install --no-build-isolation . with an existing build directory and with a fresh one" \
    's/^zzz-no-headline$//p' -- "$0" "${results_args[@]}"
  exit
fi
set -- "${results_args[@]}"
existing="$root/build"
while [ $# -gt 0 ]; do
  case "$1" in
    --build) existing="$(cd "$2" && pwd)"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument '$1'; usage: bench/pip_install.sh [--build DIR] [--out [DIR]]" >&2; exit 2 ;;
  esac
done
[ -f "$existing/CMakeCache.txt" ] && [ -f "$existing/libwte.a" ] \
  || { echo "$existing holds no build of target wte: cmake --build $existing --target wte" >&2; exit 1; }
work="$(mktemp -d)"
# The fresh build directory sits at the depth of build/ (ccache's base_dir rewrites paths below
# it, so its objects can come from the cache of an earlier build).
fresh="$root/build-pip-bench.$$"
trap 'rm -rf "$work" "$fresh"' EXIT

/usr/bin/python3 -m venv --system-site-packages "$work/venv"
export PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1
ccache_hits() { ccache --print-stats 2>/dev/null | awk -F'\t' '$1 == "direct_cache_hit" || $1 == "preprocessed_cache_hit" { h += $2 } $1 == "cache_miss" { m += $2 } END { printf "%d %d", h, m }'; }

# case NAME BUILD_DIR: one pip install; prints a table row.
measure() {
  local name="$1" dir="$2" before after t0 t1 hits misses
  before=$(ccache_hits)
  t0=$(date +%s.%N)
  WTE_BUILD_DIR="$dir" "$work/venv/bin/pip" install --no-build-isolation --no-index -v "$root" \
    > "$work/$name.log" 2>&1 || { tail -40 "$work/$name.log" >&2; exit 1; }
  t1=$(date +%s.%N)
  after=$(ccache_hits)
  hits=$(( ${after% *} - ${before% *} )); misses=$(( ${after#* } - ${before#* } ))
  "$work/venv/bin/python" -c 'import wte' || { echo "import wte failed after the $name install" >&2; exit 1; }
  "$work/venv/bin/pip" uninstall -y wte > /dev/null
  printf '| %s | %s | %.0f | %d | %d | %s |\n' "$name" "$dir" "$(awk "BEGIN {print $t1 - $t0}")" \
    "$hits" "$misses" "$(cut -d' ' -f1-3 /proc/loadavg)"
}
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1); $(nproc) cores; ccache: $(command -v ccache > /dev/null && echo yes || echo no)${CCACHE_DISABLE:+ (disabled)}"
if compgen -G "$existing/python/wte/_wte*.so" > /dev/null; then
  echo "existing: $existing had built the module already (the install only checks it is up to date)"
else
  echo "existing: $existing had built target wte, not the module (the README's tool-only build)"
fi
echo
echo "(ccache's counters are the cache's: compiles of other builds sharing it meanwhile count too)"
echo
echo "| case | build directory | wall time (s) | ccache hits | ccache misses | load after (1, 5, 15 min) |"
echo "|---|---|---:|---:|---:|---|"
measure existing "$existing"
measure fresh "$fresh"
