#!/usr/bin/env bash
# wte as an installed library (README.md, From C++). Installs the build tree into a fresh
# temporary prefix once, then against that prefix:
#   1. tests/install/consumers/kernels: find_package(wte COMPONENTS kernels) + wte::kernels; runs the gather
#      and the scatter and checks their values
#   2. tests/install/consumers/model: wte::load_model loads a checkpoint made here by `wte train` on a tiny corpus
#      (and the same from its run directory: the newest checkpoint)
#      (wte[1][0] must equal h5dump's)
#   3. tests/install/consumers/own_config: a project with its own src/config.h builds (no header collision)
#   4. pkg-config --cflags --libs wte (and wte-kernels) compile and run consumer 1's program; wte.pc
#      lists libraries by name (-ldnnl), not by versioned file
#   5. tests/install/consumers/subproject: add_subdirectory(wte) configures without wte's tests, wte_faulty,
#      options or cache entries (a parent's cache keeps only what the dependency finders write)
#   6. the README's C++ example (tests/install/consumers/readme) is the README's text and runs
# Environment: WTE_SOURCE_DIR, WTE_BINARY_DIR, WTE_CLI (set by ctest).
set -euo pipefail
SECONDS=0
log() { echo "== [${SECONDS}s] $*"; }
src="${WTE_SOURCE_DIR:?}"; bin="${WTE_BINARY_DIR:?}"; cli="${WTE_CLI:?}"
command -v pkg-config >/dev/null || { echo "skip: pkg-config is not installed"; exit 77; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
fail() { echo "FAIL: $*" >&2; exit 1; }

log "cmake --install $bin --prefix $prefix"
cmake --install "$bin" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "install"; }
for f in bin/wte include/wte/kernels.h include/wte/model.h lib/libwte_kernels.a lib/libwte.a \
         lib/cmake/wte/wteConfig.cmake lib/cmake/wte/wteConfigVersion.cmake lib/pkgconfig/wte.pc; do
  [ -e "$prefix/$f" ] || fail "$f was not installed"
done
# Only public headers: nothing of src/, simd/ or train/ is installed.
if find "$prefix/include" -type f | grep -v '^'"$prefix"'/include/wte/[a-z_]*\.h$'; then
  fail "files other than include/wte/*.h were installed under include/"
fi

# Configure + build a consumer (own build dir, only the prefix on CMAKE_PREFIX_PATH).
build_consumer() {
  local name="$1"
  cmake -S "$src/tests/install/consumers/$name" -B "$tmp/$name" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/$name.log" 2>&1 \
    && cmake --build "$tmp/$name" >>"$tmp/$name.log" 2>&1 \
    || { cat "$tmp/$name.log"; fail "consumer $name did not build"; }
}

log "1. wte::kernels: gather and scatter"
build_consumer kernels
"$tmp/kernels/app" || fail "kernels consumer"

log "2. wte::wte: load a checkpoint made by wte train (wte::load_model), and its run directory"
printf 'In the beginning the king said unto the people, and they went into the city by the river.\n\n%.0s' $(seq 1 40) > "$tmp/corpus.txt"
"$cli" train --config "$src/configs/embedding_only.ini" --data.text="$tmp/corpus.txt" \
  --model.vocab_size=300 --model.d_model=16 --model.n_ctx=16 --data.seq_len=16 \
  --train.batch_size=2 --train.steps=2 --train.snapshot_steps= --out "$tmp/run" >"$tmp/train.log" 2>&1 \
  || { cat "$tmp/train.log"; fail "wte train"; }
ckpt="$tmp/run/checkpoint_00000002.h5"
build_consumer model
"$tmp/model/app" "$ckpt" | tee "$tmp/model.out"
grep -q '^step 2 vocab_size 300 d_model 16 ' "$tmp/model.out" || fail "model consumer: wrong step or shapes"
got="$(sed -n 's/^wte\[1\]\[0\] //p' "$tmp/model.out")"
if command -v h5dump >/dev/null; then
  want="$(h5dump -d /wte -s 1,0 -c 1,1 -m %.9g "$ckpt" | sed -n 's/^ *(1,0): *//p' | tr -d ' ')"
  [ -n "$want" ] && [ "$got" = "$want" ] || fail "wte[1][0]: consumer read '$got', h5dump says '$want'"
fi
"$tmp/model/app" "$tmp/run" | grep -q '^step 2 vocab_size 300 ' || fail "model consumer: the run directory is not its newest checkpoint"
"$tmp/model/app" "$tmp/corpus.txt" 2>"$tmp/bad.err" && fail "a text file loaded as a checkpoint"
grep -q "corpus.txt" "$tmp/bad.err" || fail "the error does not name the file: $(cat "$tmp/bad.err")"

log "3. a consumer with its own src/config.h"
build_consumer own_config
"$tmp/own_config/app" || fail "own_config consumer"

log "4. pkg-config"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
pkg-config --cflags --libs wte
# Libraries by name (-ldnnl), never a versioned file a package update would remove.
libs="$(pkg-config --libs wte)"
case " $libs " in *.so*|*.a\ *) fail "wte.pc names library files instead of -lNAME: $libs";; esac
case " $libs " in *" -ldnnl "*) ;; *) fail "wte.pc does not list -ldnnl: $libs";; esac
g++ -std=c++17 -O1 "$src/tests/install/consumers/kernels/main.cc" -o "$tmp/pc_kernels" \
  $(pkg-config --cflags --libs wte-kernels) || fail "pkg-config wte-kernels: compile/link"
"$tmp/pc_kernels" || fail "pkg-config wte-kernels: run"
g++ -std=c++17 -O1 "$src/tests/install/consumers/model/main.cc" -o "$tmp/pc_model" \
  $(pkg-config --cflags --libs wte) || fail "pkg-config wte: compile/link"
"$tmp/pc_model" "$ckpt" >/dev/null || fail "pkg-config wte: run"

log "5. wte as a subproject"
cmake -S "$src/tests/install/consumers/subproject" -B "$tmp/sub" -DDEP_SOURCE_DIR="$src" \
      >"$tmp/sub.log" 2>&1 || { cat "$tmp/sub.log"; fail "subproject configure"; }
targets="$(cmake --build "$tmp/sub" --target help)"
for t in test_model test_train wte_faulty; do
  grep -q "\.\.\. $t\$" <<<"$targets" && fail "$t is built when wte is a subproject"
done
grep -q '\.\.\. wte_simd$' <<<"$targets" || fail "the subproject has no wte_simd target"
# (project() itself records wte_SOURCE_DIR, wte_BINARY_DIR and wte_IS_TOP_LEVEL as STATIC entries.)
if grep -E '^(WTE|wte)' "$tmp/sub/CMakeCache.txt" | grep -v '^wte_[A-Z_]*:STATIC='; then fail "wte wrote the entries above into the parent's cache"; fi
grep -q '^CMAKE_BUILD_TYPE:STRING=Release' "$tmp/sub/CMakeCache.txt" && fail "wte forced the parent's CMAKE_BUILD_TYPE"
ctest --test-dir "$tmp/sub" -N | grep -q 'Total Tests: 0' || fail "wte's tests are registered in the parent"
log "6. the README's C++ example (examples/cpp) is verbatim in README.md and runs"
python3 - "$src" <<'PY' || fail "README.md's C++ example differs from examples/cpp (update one from the other)"
import sys
src = sys.argv[1]
readme = open(f"{src}/README.md").read()
for path, lang in (("examples/cpp/CMakeLists.txt", "cmake"), ("examples/cpp/main.cc", "cpp")):
    if f"```{lang}\n" + open(f"{src}/{path}").read() + "```" not in readme:
        sys.exit(f"{path} is not in README.md verbatim")
PY
cmake -S "$src/examples/cpp" -B "$tmp/example" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/example.log" 2>&1 \
  && cmake --build "$tmp/example" >>"$tmp/example.log" 2>&1 || { cat "$tmp/example.log"; fail "examples/cpp did not build"; }
"$tmp/example/embedding_example" | tee "$tmp/example.out"
grep -q '^hidden\[0\]\[1\] = 0.21, dwte\[5\]\[0\] = 2, dwte\[2\]\[0\] = 1$' "$tmp/example.out" \
  || fail "examples/cpp printed other values"
grep -q 'wte\[0\]\[0\] = 0 (untouched)' "$tmp/example.out" || fail "examples/cpp: lazy AdamW touched row 0"
log "7. the installed Python module imports from the prefix"
pydir="$(ls -d "$prefix"/lib/python3*/dist-packages 2>/dev/null | head -1)"
if [ -n "$pydir" ] && [ -d "$pydir/wte" ]; then
  (cd "$tmp" && PYTHONPATH="$pydir" /usr/bin/python3 -c '
import numpy as np, wte
assert wte.__file__.startswith("'"$pydir"'"), wte.__file__
table = np.arange(12, dtype=np.float32).reshape(4, 3)
assert wte.gather(table, np.array([3, 1], dtype=np.int32)).tolist() == [[9, 10, 11], [3, 4, 5]]
print("import wte from", wte.__file__)') || fail "the installed Python module"
else
  echo "(no Python module in the build: skipped)"
fi
log "all consumers passed"
