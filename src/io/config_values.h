// A config's values by key, from config.cc's key table: how configs are compared (a resume's
// config against its checkpoint's) without writing and re-reading INI text.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "wte/config.h"

namespace wte {

/// Every key of `config` ("model.vocab_size") with its value as Config::to_ini writes it ("8192"),
/// in the key table's order (the order of to_ini and config_help). Two configs are equal where
/// these values are.
std::vector<std::pair<std::string, std::string>> config_values(const Config& config);

}  // namespace wte
