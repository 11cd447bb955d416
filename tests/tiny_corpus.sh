# Sourced by the script tests that train a tiny model (tests/train/test_disk_full.sh,
# tests/train/test_kill_resume.sh): write_tiny_corpus PATH writes 80 documents of 4 sentences of 12 words
# drawn (Python's random.Random(7)) from 15 fixed words, separated by blank lines; the same bytes on
# every machine.
write_tiny_corpus() {
  /usr/bin/python3 - "$1" <<'PY'
import random, sys
r = random.Random(7)
w = "the king said unto them and people went into city bank river money water land house".split()
docs = ["\n".join(" ".join(r.choice(w) for _ in range(12)) + "." for _ in range(4)) for _ in range(80)]
open(sys.argv[1], "w").write("\n\n".join(docs) + "\n")
PY
}
