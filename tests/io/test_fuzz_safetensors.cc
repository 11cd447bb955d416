// Replays fuzz/corpus/safetensors and fuzz/regressions/safetensors through fuzz/fuzz_safetensors.cc (tests/fuzz_replay.h).
#include "fuzz/fuzz_safetensors.cc"
#include "tests/fuzz_replay.h"

WTE_FUZZ_REPLAY(safetensors)
