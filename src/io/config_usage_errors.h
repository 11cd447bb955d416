// Which config errors are bad usage: shared by the command line and wte::train (train/train.cc).
#pragma once

#include <string>

#include "wte/config.h"
#include "wte/error.h"

namespace wte {

/// Runs `load`, a config loader given command-line overrides, and rethrows as UsageError, so they
/// exit 2 like any other bad option: the errors about the command line (an unknown --section.key,
/// a value typed there that does not parse or is out of range), and every ConfigValueError (a bad
/// value, or values that cannot be combined, in the user's config file too). Errors about the file
/// itself (missing, unreadable, not INI, an unknown key in it) stay run-time errors (1). Relies on
/// src/io/config.cc naming the command line in its messages about it.
template <typename Load>
auto usage_errors_of_overrides(Load&& load) {
  try {
    return load();
  } catch (const UsageError&) {
    throw;
  } catch (const ConfigValueError& e) {
    throw UsageError(e.what());
  } catch (const Error& e) {
    const std::string m = e.what();
    if (m.find("from the command line") != std::string::npos ||
        m.find("on the command line") != std::string::npos || m.rfind("command line: ", 0) == 0)
      throw UsageError(m);
    throw;
  }
}

}  // namespace wte
