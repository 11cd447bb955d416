// Replays fuzz/corpus/config and fuzz/regressions/config through fuzz/fuzz_config.cc (tests/fuzz_replay.h).
#include "fuzz/fuzz_config.cc"
#include "tests/fuzz_replay.h"

WTE_FUZZ_REPLAY(config)
