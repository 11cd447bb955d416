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

/// Bad usage: an unknown option, a value that does not parse or is out of range, options that
/// cannot be combined, a run directory that does not match the command. The command line
/// (cli/main.cc) turns it into exit status 2 (wte::Error is 1: a run-time failure such as a
/// missing or broken file). The message names the option.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& what) : Error(what) {}
};

/// Work stopped on request (SIGINT or SIGTERM in wte train: wte/train.h's Interrupted), not
/// by bad input: code that skips or remembers bad files passes it on unchanged.
class Cancelled : public Error {
 public:
  explicit Cancelled(const std::string& what) : Error(what) {}
};

}  // namespace wte
