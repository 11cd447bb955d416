// Replays fuzz/corpus/checkpoint and fuzz/regressions/checkpoint through fuzz/fuzz_checkpoint.cc (tests/fuzz_replay.h).
#include "fuzz/fuzz_checkpoint.cc"
#include "tests/fuzz_replay.h"

WTE_FUZZ_REPLAY(checkpoint)
