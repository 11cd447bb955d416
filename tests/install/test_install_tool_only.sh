#!/usr/bin/env bash
# `cmake --build build --target wte && cmake --install build --prefix P` (the README's "only the
# tool" build) installs what was built and exits 0: a fresh build tree holding only what the
# target wte builds (the tool and the two libraries it links; no Python module) installs bin/wte,
# the libraries, headers and configs, says that it skipped the Python module, and the installed
# wte trains `-c default` from another directory. Asking for the module (`--component python`)
# when it was not built fails, naming the target to build, and installs nothing.
# The fresh tree is configured here (seconds); instead of compiling the whole project again, it
# receives the files the test build's target wte produced (the same sources, the same options).
# Environment: WTE_SOURCE_DIR, WTE_BINARY_DIR (set by ctest).
set -uo pipefail
src="${WTE_SOURCE_DIR:?}"; bin="${WTE_BINARY_DIR:?}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
for f in wte libwte.a libwte_kernels.a; do
  [ -f "$bin/$f" ] || { echo "skipped: $bin/$f is not built (cmake --build $bin --target wte)"; exit 77; }
done
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fresh="$tmp/build"
cmake -S "$src" -B "$fresh" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF -DWTE_PYTHON=ON \
  "${launcher[@]}" > "$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log"; exit 1; }
python_target=1
grep -q "Python module not built" "$tmp/configure.log" && python_target=0
# What `cmake --build "$fresh" --target wte` leaves: the tool and the libraries it links.
cp -p "$bin/wte" "$bin/libwte.a" "$bin/libwte_kernels.a" "$fresh/"
compgen -G "$fresh/python/wte/_wte*.so" > /dev/null && fail "the fresh tree holds a Python module"

prefix="$tmp/prefix"
cmake --install "$fresh" --prefix "$prefix" > "$tmp/install.log" 2>&1; rc=$?
[ $rc = 0 ] && echo "ok   cmake --install of a tool-only build exits 0" \
  || fail "cmake --install exited $rc: $(tail -c 800 "$tmp/install.log")"
for f in bin/wte lib/libwte.a lib/libwte_kernels.a include/wte/model.h lib/cmake/wte/wteConfig.cmake \
         share/wte/configs/default.ini; do
  [ -f "$prefix/$f" ] || fail "$f was not installed"
done
if [ $python_target = 1 ]; then
  grep -q "Skipping the Python module wte (target wte_python not built)" "$tmp/install.log" \
    && echo "ok   the install says it skipped the Python module" \
    || fail "no line saying the Python module was skipped: $(tail -c 800 "$tmp/install.log")"
  compgen -G "$prefix/lib/python3*/dist-packages/wte" > /dev/null \
    && fail "a wte package without its extension was installed"
  cmake --install "$fresh" --prefix "$tmp/prefix2" --component python > "$tmp/component.log" 2>&1; rc=$?
  # CMake wraps the message: compare it with its line breaks and indents as single spaces.
  [ $rc != 0 ] && tr -s ' \n' ' ' < "$tmp/component.log" | grep -qF "cmake --build $fresh --target wte_python" \
    && [ ! -e "$tmp/prefix2/lib" ] \
    && echo "ok   --component python fails when the module was not built, naming the target" \
    || fail "--component python: exit $rc, $(tail -c 800 "$tmp/component.log")"
else
  echo "note: pybind11 or the Python headers are missing: no Python module target to skip"
fi

# The installed tool runs the default config from another directory (2 steps on a small text).
mkdir -p "$tmp/elsewhere"
cd "$tmp/elsewhere" || exit 1
. "$src/tests/tiny_corpus.sh"
write_tiny_corpus "$tmp/corpus.txt"
for i in 1 2 3 4 5 6; do cat "$tmp/corpus.txt"; done > "$tmp/corpus6.txt"
"$prefix/bin/wte" train -c default --data.text="$tmp/corpus6.txt" --model.vocab_size=300 \
  --train.steps=2 --train.batch_size=2 > out 2> err; rc=$?
if [ $rc = 0 ] && grep -q "n_layer 4, n_head 4" out && [ -f runs/default/checkpoint_00000002.h5 ]; then
  echo "ok   the installed wte trains -c default from another directory"
else
  fail "installed wte train -c default: exit $rc, $(tail -c 600 out) $(head -c 600 err)"
fi
[ "$failures" = 0 ] && echo "all passed" || { echo "$failures failure(s)"; exit 1; }
