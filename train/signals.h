// SIGINT (Ctrl-C) and SIGTERM (a scheduler's stop) during `wte train`: the step in progress
// finishes, a checkpoint is written atomically, the run says so and exits with 128 + the signal
// number (130, 143), as a shell reports a process ended by that signal. Before step 1 (data
// preparation, BPE training) the start-up stops at its next stage (throw_if_stop_requested) and
// ends as a failed start-up does: what it wrote in a run directory it created is removed, and
// nothing else (train/run_directory.h).
#pragma once

#include <string>

#include "wte/error.h"

namespace wte {

/// Installs handlers for SIGINT, SIGTERM and SIGPIPE that only record the signal (stop_signal());
/// the handler does nothing else (async-signal-safe). SIGPIPE (the reader of stdout went away, as
/// in `wte train | head`) stops the run as SIGTERM does; the writes that fail after it do not
/// count again. A second SIGINT or SIGTERM writes the note set by set_second_signal_note to stderr,
/// restores the default action and re-raises it: the process ends at once (the last checkpoint
/// stays whole, since every write is atomic). The first call after remove_stop_signals() (or ever)
/// clears the recorded signal; a call while they are installed changes nothing, so a signal
/// recorded by an outer caller (cmd_train, installed before it creates the run directory) is not
/// lost.
void install_stop_signals();

/// Restores the default actions of SIGINT and SIGTERM, and SIGPIPE's action from before
/// install_stop_signals (which leaves an ignored SIGPIPE ignored).
void remove_stop_signals();

/// The line (newline included) the handler writes to stderr before a second SIGINT/SIGTERM ends
/// the process at once: where it leaves things and what to do ("" for none; at most 1023 bytes
/// are kept). Safe to call while the handlers are installed: the handler never sees a half-written
/// line.
void set_second_signal_note(const std::string& line);

/// install_stop_signals() for the lifetime of this object; remove_stop_signals() when it ends
/// (also when an exception ends it).
class StopSignalScope {
 public:
  StopSignalScope() { install_stop_signals(); }
  ~StopSignalScope() { remove_stop_signals(); }
  StopSignalScope(const StopSignalScope&) = delete;
  StopSignalScope& operator=(const StopSignalScope&) = delete;
};

/// 0, or the number of the first SIGINT/SIGTERM received since install_stop_signals().
int stop_signal();

/// "SIGINT", "SIGTERM", "SIGPIPE" or "a signal".
const char* signal_name(int sig);

/// A start-up (before step 1) stopped by SIGINT/SIGTERM: nothing was trained. `signal()` is the
/// signal's number (exit status 128 + it).
class Interrupted : public Cancelled {
 public:
  Interrupted(int sig, const std::string& what) : Cancelled(what), sig_(sig) {}
  int signal() const { return sig_; }

 private:
  int sig_;
};

/// Throws Interrupted "SIGINT received during STAGE, before step 1: nothing was trained" if a
/// stop signal has been recorded. Called between the stages of the start-up.
/// Test hook: if the environment variable WTE_TEST_PAUSE_AT_STAGE is a part of `stage`, the first
/// such call stops the process with SIGSTOP before it checks, so a test can signal it at that stage;
/// with WTE_TEST_SECOND_SIGNAL_PAUSE also set, it stops once more after the signal was recorded, so
/// the test's next signal is a second request.
void throw_if_stop_requested(const std::string& stage);

/// Test hook of the training loop (no effect unless the environment asks): if
/// WTE_TEST_PAUSE_AT_STAGE is a part of `point` ("evaluation after step 2"), the first such call
/// stops the process with SIGSTOP and, once continued, waits (at most 10 s) until the signal the
/// test sent meanwhile has been recorded, so the loop's next stop check sees it.
void pause_for_test(const std::string& point);

}  // namespace wte
