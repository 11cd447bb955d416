// wte: the one exception type every layer throws for bad input, bad files and failed library calls.
#pragma once

#include <stdexcept>
#include <string>

namespace wte {

/// An error the user can act on. The message names the bad value, where it came from and what is
/// allowed, e.g. "token id 5 at position 0 of tokens.bin is outside [0, vocab_size=5)".
/// Thrown before any work is done wherever the input can be checked up front.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace wte
