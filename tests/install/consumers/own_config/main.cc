// Includes the user's "src/config.h" and wte's public headers in one file and uses both.
#include "src/config.h"

#include <wte/config.h>
#include <wte/kernels.h>

#include <cstdio>

int main() {
  Config mine;  // the user's (global namespace)
  const wte::Config theirs = wte::parse_config("[model]\nvocab_size = 300\n", "main.cc");
  std::printf("own config %d, wte vocab_size %zu\n", mine.app_setting, theirs.model.vocab_size);
  return mine.app_setting == 42 && theirs.model.vocab_size == 300 ? 0 : 1;
}
