#!/usr/bin/env bash
# Trains the default config from a generated corpus of GB bytes (default 5; not kept) prepared
# into shards, and from a 50 MB corpus made the same way: the peak resident memory of both `wte
# train` runs (/usr/bin/time -v), and a resume from the big run's middle checkpoint, which must end
# bit-identical (h5diff) to the uninterrupted run.
#
# Usage: scripts/big_corpus_check.sh [--gb N] [--steps N] [--dir DIR] [--keep]
#   DIR (default build/big_corpus) gets the corpora, shards and runs; removed at the end
#   unless --keep. Needs build/wte (or $WTE_CLI), datasets/kjv (datasets/make_kjv.sh), python3,
#   h5diff, and about 1.6 x GB of free disk.
# The corpus: the KJV's chapters repeated, each copy's chapters numbered "copy.chapter" on their
# first line so no two documents are equal, written as files of about 100 MB.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
gb=5 steps=20 dir="$root/build/big_corpus" keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --gb) gb="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "big_corpus_check.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
wte="${WTE_CLI:-$root/build/wte}"
kjv="$root/datasets/kjv/kjv.txt"
[ -x "$wte" ] || { echo "big_corpus_check.sh: $wte is missing: build wte first" >&2; exit 1; }
[ -f "$kjv" ] || "$root/datasets/make_kjv.sh"
command -v h5diff > /dev/null || { echo "big_corpus_check.sh: h5diff is missing (apt-get install hdf5-tools)" >&2; exit 1; }
rm -rf "$dir"; mkdir -p "$dir"
[ "$keep" = 1 ] || trap 'rm -rf "$dir"' EXIT

make_corpus() {  # make_corpus OUT_DIR BYTES
  python3 - "$kjv" "$1" "$2" <<'PY'
import os, sys
kjv, out, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
docs = open(kjv, encoding="utf-8").read().split("\n\n")
os.makedirs(out, exist_ok=True)
written, copy, part, f = 0, 0, 0, None
while written < want:
    if f is None or f.tell() > 100_000_000:
        if f: f.close()
        f = open(os.path.join(out, f"part_{part:04d}.txt"), "w", encoding="utf-8"); part += 1
    copy += 1
    text = "\n\n".join(f"{copy}.{i}\n{d}" for i, d in enumerate(docs)) + "\n\n"
    f.write(text); written += len(text)
f.close()
print(f"{out}: {written} bytes, {copy} copies of the KJV, {part} files")
PY
}

echo "== tokenizer: the default config's BPE (vocab_size 8192) trained on the KJV by a 1-step run"
"$wte" train -c "$root/configs/default.ini" --data.text="$kjv" --train.steps=1 --train.snapshot_steps= \
  --train.eval_interval=0 --quiet --out "$dir/tok_run" > /dev/null
tok="$dir/tok_run/tokenizer"

run_size() {  # run_size NAME BYTES
  local name="$1" bytes="$2"
  echo "== $name corpus ($bytes bytes)"
  make_corpus "$dir/$name/text" "$bytes"
  "$wte" prepare --tokenizer "$tok" --val-fraction 0.01 --out "$dir/$name/shards" "$dir/$name/text"
  rm -rf "$dir/$name/text"   # training reads only the shards
  /usr/bin/time -v "$wte" train -c "$root/configs/default.ini" \
    --data.train_tokens="$dir/$name/shards/train_*.bin" --data.val_tokens="$dir/$name/shards/val_*.bin" \
    --data.tokenizer="$dir/$name/shards/tokenizer" --train.steps="$steps" \
    --checkpoint.interval=$((steps / 2)) --checkpoint.keep_last=4 --train.snapshot_steps= \
    --train.eval_interval=0 --train.eval_tokens=16384 --out "$dir/$name/run" \
    > "$dir/$name/train.log" 2> "$dir/$name/time.log"
  tail -2 "$dir/$name/train.log"
  local rss; rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$dir/$name/time.log")
  echo "$name: peak resident memory of wte train: $rss KiB"
  eval "rss_$name=$rss"
}
run_size small 50000000
run_size big $((gb * 1000000000))
ratio=$(python3 -c "print(f'{$rss_big / $rss_small:.3f}')")
echo "peak RSS: big $rss_big KiB, small $rss_small KiB, ratio $ratio (must be within 1.10)"

echo "== resume the big run from step $((steps / 2))"
mid="$dir/big/run/checkpoint_$(printf %08d $((steps / 2))).h5"
final="checkpoint_$(printf %08d "$steps").h5"
"$wte" train --resume "$mid" --out "$dir/big/resumed" --quiet > /dev/null
if h5diff "$dir/big/run/$final" "$dir/big/resumed/$final" > "$dir/h5diff.log" 2>&1; then
  echo "resume: $final bit-identical to the uninterrupted run"
  resume_ok=1
else
  echo "resume: $final DIFFERS:"; head -20 "$dir/h5diff.log"; resume_ok=0
fi
python3 -c "import sys; sys.exit(0 if $rss_big <= 1.10 * $rss_small else 1)" && [ "$resume_ok" = 1 ]
