#!/usr/bin/env bash
# A full disk during a checkpoint write (wte train), during `wte grad`'s write and during
# `wte hidden-states --out`'s write is an error that says the disk is full and names the path; wte
# exits 1 (HDF5 cannot recover from a failed write: without the space reserved first, "H5Fflush
# failed", then SIGSEGV at exit inside HDF5's H5close), leaves no .tmp file, and the previous
# checkpoint stays whole. Needs a small tmpfs: root and mount (skipped otherwise).
set -uo pipefail
cli="${WTE_CLI:?}"
work="${WTE_BINARY_DIR:?}/test_tmp/disk_full"
rm -rf "$work"; mkdir -p "$work/mnt"
if [ "$(id -u)" != 0 ] || ! mount -t tmpfs -o size=1m tmpfs "$work/mnt" 2>/dev/null; then
  echo "skipped: mounting a small tmpfs needs root (and mount permission)"; exit 77
fi
trap 'umount "$work/mnt" 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

source "${WTE_SOURCE_DIR:?}/tests/tiny_corpus.sh"
write_tiny_corpus "$work/corpus.txt"
cat > "$work/tiny.ini" <<INI
[model]
vocab_size = 300
d_model = 16
n_ctx = 16
n_layer = 0
[data]
text = $work/corpus.txt
seq_len = 16
[train]
batch_size = 4
steps = 4
eval_interval = 0
snapshot_steps =
threads = 2
[checkpoint]
interval = 2
keep_last = 0
INI
# A reference run on a normal disk: its files' sizes tell how much room to leave.
"$cli" train --quiet --config "$work/tiny.ini" --out "$work/ref" > /dev/null || fail "reference run"
ckpt=$(stat -c %s "$work/ref/checkpoint_00000004.h5")
prep=$(du -sk --exclude='checkpoint_*' "$work/ref" | cut -f1)
# Leave room for the prepared files and one checkpoint plus half of another.
free_kib=$(( prep + ckpt * 3 / 2 / 1024 + 8 ))
total_kib=$(df -k --output=avail "$work/mnt" | tail -1)
dd if=/dev/zero of="$work/mnt/filler" bs=1k count=$(( total_kib - free_kib )) status=none 2>/dev/null
out=$("$cli" train --quiet --config "$work/tiny.ini" --out "$work/mnt/run" 2>&1); code=$?
echo "$out" | tail -3
[ $code -eq 1 ] || fail "wte train exited $code (expected 1): $out"
echo "$out" | grep -q "No space left on device" || fail "the message does not say the disk is full: $out"
echo "$out" | grep -q "checkpoint '$work/mnt/run/checkpoint_00000004.h5'" || fail "the message does not name the file: $out"
ls "$work/mnt/run"/*.tmp 2>/dev/null && fail "a .tmp file was left behind"
"$cli" inspect "$work/mnt/run/checkpoint_00000002.h5" > /dev/null || fail "the previous checkpoint is not whole"
# wte grad onto the full disk (filled to the last few KiB).
avail=$(df -k --output=avail "$work/mnt" | tail -1)
[ "$avail" -gt 4 ] && dd if=/dev/zero of="$work/mnt/filler2" bs=1k count=$(( avail - 4 )) status=none 2>/dev/null
echo "1 2 3 4 5" > "$work/batch.txt"
out=$("$cli" grad --checkpoint "$work/ref/checkpoint_00000004.h5" --tokens "$work/batch.txt" --out "$work/mnt/grads.h5" 2>&1); code=$?
echo "$out" | tail -2
[ $code -eq 1 ] || fail "wte grad exited $code (expected 1): $out"
echo "$out" | grep -q "No space left on device" || fail "wte grad does not say the disk is full: $out"
[ -e "$work/mnt/grads.h5" ] || [ -e "$work/mnt/grads.h5.tmp" ] && fail "wte grad left a file"
# wte hidden-states --out onto the full disk: the same error (its space is reserved before HDF5
# writes; without that, HDF5's failed write ended in SIGSEGV at exit).
out=$("$cli" hidden-states --checkpoint "$work/ref/checkpoint_00000004.h5" --text "the king" --out "$work/mnt/hs.h5" 2>&1); code=$?
echo "$out" | tail -1
[ $code -eq 1 ] || fail "wte hidden-states exited $code (expected 1): $(echo "$out" | tail -3)"
echo "$out" | grep -q "No space left on device" || fail "wte hidden-states does not say the disk is full: $(echo "$out" | tail -3)"
echo "$out" | grep -q "hidden states '$work/mnt/hs.h5'" || fail "wte hidden-states does not name the file: $(echo "$out" | tail -3)"
[ -e "$work/mnt/hs.h5" ] || [ -e "$work/mnt/hs.h5.tmp" ] && fail "wte hidden-states left a file"
# A read-only file system is named as such.
mount -o remount,ro "$work/mnt"
out=$("$cli" grad --checkpoint "$work/ref/checkpoint_00000004.h5" --tokens "$work/batch.txt" --out "$work/mnt/grads.h5" 2>&1); code=$?
mount -o remount,rw "$work/mnt"
echo "$out" | tail -1
[ $code -eq 1 ] || fail "wte grad on a read-only file system exited $code: $out"
echo "$out" | grep -q "Read-only file system" || fail "EROFS is not named: $out"
echo "PASS"
