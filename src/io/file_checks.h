// What kind of thing a path names, for the messages of every command that reads an input file:
// "does not exist", "is a directory, not a file", "is not a regular file (a character device)".
// One helper, so /dev/null, a FIFO or a directory given where a file is expected is named as what
// it is everywhere, by the same words. Header-only; not part of wte's public interface.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

#include "wte/error.h"

namespace wte::io {

/// Why `path` cannot be read as an input file, or "" if it is a regular file (symbolic links are
/// followed): "does not exist", "is a directory, not a file", "is not a regular file (a character
/// device)" (/dev/null), "(a FIFO)", "(a socket)", "(a block device)", or "cannot be accessed:
/// REASON" (e.g. a parent directory without search permission).
inline std::string input_file_problem(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  switch (st.type()) {
    case fs::file_type::regular: return "";
    case fs::file_type::not_found: return "does not exist";
    case fs::file_type::directory: return "is a directory, not a file";
    case fs::file_type::character: return "is not a regular file (a character device)";
    case fs::file_type::block: return "is not a regular file (a block device)";
    case fs::file_type::fifo: return "is not a regular file (a FIFO)";
    case fs::file_type::socket: return "is not a regular file (a socket)";
    default: break;
  }
  if (ec) return "cannot be accessed: " + ec.message();
  return "is not a regular file";
}

/// Throws wte::Error "PREFIX'PATH' PROBLEM" + `hint` (PROBLEM from input_file_problem) unless `path`
/// is a regular file. `prefix` names what the path is for, e.g. "data.text: ", "--checkpoint ".
inline void require_input_file(const std::string& prefix, const std::string& path,
                               const std::string& hint = "") {
  const std::string problem = input_file_problem(path);
  if (!problem.empty()) throw Error(prefix + "'" + path + "' " + problem + hint);
}

/// True if the paths `a` and `b` name the same file: the same device and inode when both exist
/// (hard and symbolic links), else the same canonical path ("..", ".", symbolic links of the
/// directories on the way).
inline bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec);
  const fs::path ca = fs::weakly_canonical(a, ec), cb = fs::weakly_canonical(b, ec);
  return !ec && ca == cb;
}

}  // namespace wte::io
