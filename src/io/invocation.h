// How the user ran the `wte` tool, for hints that are commands to copy and run: "build/wte train
// --resume auto --out runs/x" for a user who typed build/wte, "wte ..." for one who found it on
// PATH. Header-only; not part of wte's public interface.
#pragma once

#include <cctype>
#include <string>

namespace wte::io {

namespace detail {
inline std::string& invoked_program_storage() {
  static std::string program = "wte";
  return program;
}
}  // namespace detail

/// The program a hint names: "wte" (the library's callers, e.g. the Python module), or what
/// set_invoked_program recorded (the `wte` tool's argv[0]).
inline const std::string& invoked_program() { return detail::invoked_program_storage(); }

/// Records `argv0` (the tool's argv[0], as typed: "wte", "build/wte", "/usr/local/bin/wte") for
/// invoked_program; in single quotes if it holds a character a shell would read specially. An
/// empty or null argv0 keeps "wte".
inline void set_invoked_program(const char* argv0) {
  if (argv0 == nullptr || *argv0 == '\0') return;
  const std::string a = argv0;
  bool plain = true;
  for (const char c : a)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '/' || c == '.' || c == '_' ||
          c == '-' || c == '+'))
      plain = false;
  if (plain) {
    detail::invoked_program_storage() = a;
    return;
  }
  std::string quoted = "'";
  for (const char c : a) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  detail::invoked_program_storage() = quoted + "'";
}

}  // namespace wte::io
