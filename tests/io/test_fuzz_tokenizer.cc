// Replays fuzz/corpus/tokenizer and fuzz/regressions/tokenizer through fuzz/fuzz_tokenizer.cc (tests/fuzz_replay.h).
#include "fuzz/fuzz_tokenizer.cc"
#include "tests/fuzz_replay.h"

WTE_FUZZ_REPLAY(tokenizer)
