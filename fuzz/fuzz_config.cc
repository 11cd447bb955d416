// libFuzzer target: the INI config parser (src/io/config.cc) with command-line overrides.
// Input: INI text; after a line "--", each following line is one command-line override
// ("--train.steps=3"). Property checked beyond "no crash, no sanitizer report": a config that
// parses survives to_ini() -> parse_config() unchanged, and its learning-rate schedule is finite
// at the first, a middle and the last step.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "wte/config.h"
#include "wte/error.h"
#include "wte/optimizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::string ini = input;
  std::vector<std::string> overrides;
  const size_t sep = input.find("\n--\n");
  if (sep != std::string::npos) {
    ini = input.substr(0, sep + 1);
    std::istringstream rest(input.substr(sep + 4));
    std::string line;
    while (std::getline(rest, line) && overrides.size() < 16) overrides.push_back(line);
  }
  wte::Config cfg;
  try {
    cfg = wte::parse_config(ini, "fuzz input", overrides);
  } catch (const wte::Error&) {
    return 0;  // a clear error is the right answer to bad input
  }
  const std::string text = cfg.to_ini();
  wte::Config again;
  try {
    again = wte::parse_config(text, "to_ini of a parsed config");
  } catch (const wte::Error& e) {
    std::fprintf(stderr, "a parsed config does not parse back: %s\n%s\n", e.what(), text.c_str());
    std::abort();
  }
  if (again.to_ini() != text) {
    std::fprintf(stderr, "to_ini round trip differs:\n%s\n---\n%s\n", text.c_str(),
                 again.to_ini().c_str());
    std::abort();
  }
  const size_t steps = cfg.train.steps;
  for (size_t step : {size_t{0}, steps / 2, steps - 1}) {
    const float lr = wte::learning_rate(step, steps, cfg.optim);
    if (!std::isfinite(lr)) {
      std::fprintf(stderr, "learning_rate(%zu, %zu) = %g\n", step, steps, static_cast<double>(lr));
      std::abort();
    }
  }
  return 0;
}
