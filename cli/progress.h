// Progress on stderr for the commands that can run for more than a few seconds (eval, import,
// export, geometry): a user sees that work goes on, and stdout keeps only the result (a --json
// document stays one document).
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace wte::cli {

/// Whether stderr is a terminal (then progress is one line rewritten in place).
inline bool stderr_is_terminal() {
  static const bool tty = isatty(fileno(stderr)) != 0;
  return tty;
}

/// `text` (one paragraph of prose, no newline) broken at spaces into lines of at most `width`
/// bytes (a longer word stays whole), every line after the first indented by `indent` spaces, each
/// line ending in '\n': output kept to one screen width.
inline std::string wrap_prose(const std::string& text, size_t width = 100, size_t indent = 2) {
  std::string out, line;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(' ', pos);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(pos, end - pos);
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line = std::string(indent, ' ') + word;
    } else {
      line += (line.empty() ? "" : " ") + word;
    }
    pos = end + 1;
  }
  return out + line + "\n";
}

/// "COMMAND: TEXT" on stderr (wrapped at 100 columns), e.g. progress_note("wte import", "reading
/// models/gpt2/model.safetensors (548 MB)"): what a long command is about to do.
inline void progress_note(const std::string& command, const std::string& text) {
  std::fputs(wrap_prose(command + ": " + text).c_str(), stderr);
  std::fflush(stderr);
}

/// A count of work items on stderr, "COMMAND: DONE/TOTAL UNIT, S s": on a terminal one line
/// rewritten in place (at most 5 times a second) and cleared at the end; otherwise (a log, a
/// pipe) a line every `log_interval_s` seconds, so a long job shows that it goes on without
/// filling the log.
class ProgressCounter {
 public:
  ProgressCounter(std::string command, std::string unit, double log_interval_s = 10.0)
      : command_(std::move(command)), unit_(std::move(unit)), log_interval_s_(log_interval_s) {}
  ~ProgressCounter() {
    if (shown_ && stderr_is_terminal()) {
      std::fprintf(stderr, "\r\033[K");
      std::fflush(stderr);
    }
  }
  ProgressCounter(const ProgressCounter&) = delete;
  ProgressCounter& operator=(const ProgressCounter&) = delete;

  /// Reports `done` of `total` items.
  void update(size_t done, size_t total) {
    const double now = seconds();
    const bool tty = stderr_is_terminal();
    if (now - last_ < (tty ? 0.2 : log_interval_s_) && done < total) return;
    if (!tty && done == total && !shown_) return;  // quick: the result says it all
    last_ = now;
    shown_ = true;
    std::fprintf(stderr, "%s%s: %zu/%zu %s, %.0f s%s", tty ? "\r\033[K" : "", command_.c_str(), done,
                 total, unit_.c_str(), now, tty ? "" : "\n");
    std::fflush(stderr);
  }

 private:
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  std::string command_, unit_;
  double log_interval_s_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  double last_ = 0.0;
  bool shown_ = false;
};

}  // namespace wte::cli
