#!/usr/bin/env bash
# Builds the King James Bible corpus for wte from Debian's `bible-kjv` package.
#
# Usage: datasets/make_kjv.sh [OUT]      (default OUT: datasets/kjv/kjv.txt beside this script)
#
# Output format (UTF-8, in fact pure ASCII, LF line ends):
#   one verse per line, the verse number removed, trailing blanks removed;
#   chapter headings ("Genesis 1") removed; one blank line between chapters,
# so a "document" is a chapter and documents are separated by one blank line.
# 1189 chapters, 31102 verses. Deterministic; skips the work when OUT already has the expected
# size and sha256. Provenance and licence: datasets/README.md.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here/kjv/kjv.txt}"

# Measured from bible-kjv 4.38 (Debian bookworm); a different package version would show here.
expected_bytes=4139037
expected_sha256=6b40e3f13a6cf83937165995b4868d7eb1f429d0c96ddb8574bea5544101a914

if ! command -v bible >/dev/null 2>&1; then
  echo "make_kjv.sh: the 'bible' program is missing; install it with: apt-get install bible-kjv" >&2
  exit 1
fi

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

if [[ -f "$out" ]] && [[ "$(stat -c %s "$out")" == "$expected_bytes" ]] \
   && [[ "$(sha_of "$out")" == "$expected_sha256" ]]; then
  echo "make_kjv.sh: $out is present and correct ($expected_bytes bytes, $(wc -l < "$out") lines); nothing to do"
  exit 0
fi

mkdir -p "$(dirname "$out")"
tmp="$(mktemp "${out}.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
# mktemp makes the file 0600; the corpus gets a plain file's mode (0666 less the umask, 0644
# usually), so other users (a run resumed as another user) can read it.
chmod "$(printf '%o' $(( 0666 & ~0$(umask) )))" "$tmp"

# `bible -l0` prints every verse on one unwrapped line as "  N text", each chapter preceded by
# a blank line, a heading "Book N" and another blank line.
bible -l0 "Gen1:1-Rev22:21" | LC_ALL=C awk '
  /^  [0-9]+ / { sub(/^  [0-9]+ /, ""); sub(/[ \t]+$/, ""); print; verses++; next }
  /^$/         { next }
               { if (chapters++ > 0) print ""; next }   # a chapter heading
  END {
    if (chapters != 1189 || verses != 31102) {
      printf "make_kjv.sh: expected 1189 chapters and 31102 verses, got %d and %d\n", chapters, verses > "/dev/stderr"
      exit 1
    }
  }' > "$tmp"

bytes="$(stat -c %s "$tmp")"
sum="$(sha_of "$tmp")"
if [[ "$bytes" != "$expected_bytes" || "$sum" != "$expected_sha256" ]]; then
  echo "make_kjv.sh: warning: output differs from the recorded one (bible-kjv version?):" >&2
  echo "  got $bytes bytes, sha256 $sum; expected $expected_bytes bytes, sha256 $expected_sha256" >&2
fi
mv "$tmp" "$out"
trap - EXIT
echo "make_kjv.sh: wrote $out: $bytes bytes, $(wc -l < "$out") lines ($(grep -c '^$' "$out") blank lines between 1189 chapters), sha256 $sum"
