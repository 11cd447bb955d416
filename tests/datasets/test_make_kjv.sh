#!/usr/bin/env bash
# datasets/make_kjv.sh writes the corpus with a plain file's mode, 0666 less the umask (0644
# usually), not mktemp's 0600: another user (a run resumed as another user) must be able to read
# it. Needs Debian's bible-kjv (skipped without it); about 2 s.
set -uo pipefail
: "${WTE_SOURCE_DIR:?}" "${WTE_BINARY_DIR:?}"
command -v bible > /dev/null 2>&1 || { echo "bible (apt-get install bible-kjv) is missing: skipped"; exit 77; }
dir=$(mktemp -d "${WTE_BINARY_DIR}/make_kjv_test.XXXXXX")
trap 'rm -rf "$dir"' EXIT
failures=0
for case in "022 644" "027 640"; do
  set -- $case
  out="$dir/$1/kjv.txt"
  if ! (umask "$1" && "$WTE_SOURCE_DIR/datasets/make_kjv.sh" "$out" > "$dir/log" 2>&1); then
    echo "FAIL: umask $1: make_kjv.sh failed: $(cat "$dir/log")"; failures=$((failures + 1)); continue
  fi
  mode=$(stat -c %a "$out")
  if [ "$mode" = "$2" ]; then
    echo "ok   umask $1: kjv.txt mode $mode"
  else
    echo "FAIL: umask $1: kjv.txt mode $mode, expected $2"; failures=$((failures + 1))
  fi
done
[ "$failures" = 0 ] || exit 1
echo "PASS: make_kjv.sh writes kjv.txt with the umask's mode"
