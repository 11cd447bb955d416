// Replays fuzz/corpus/token_file and fuzz/regressions/token_file through fuzz/fuzz_token_file.cc (tests/fuzz_replay.h).
#include "fuzz/fuzz_token_file.cc"
#include "tests/fuzz_replay.h"

WTE_FUZZ_REPLAY(token_file)
