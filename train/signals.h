// SIGINT (Ctrl-C) and SIGTERM (a scheduler's stop) during `wte train`: the step in progress
// finishes, a checkpoint is written atomically, the run says so and exits with 128 + the signal
// number (130, 143), as a shell reports a process ended by that signal. Before step 1 (data
// preparation, BPE training) the start-up stops at its next stage (throw_if_stop_requested) and
// ends as a failed start-up does: what it wrote in a run directory it created is removed, and
// nothing else (train/run_directory.h).
#pragma once

#include <string>

#include "wte/error.h"
#include "wte/train.h"  // Interrupted

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

/// Throws Interrupted "SIGINT received during STAGE, before step 1: nothing was trained" if a
/// stop signal has been recorded. Called between the stages of the start-up.
/// Tests can stop the process here at a given stage (src/hooks/test_hooks.h,
/// pause_before_stop_check).
void throw_if_stop_requested(const std::string& stage);

/// A point of the training loop where tests can stop the process (src/hooks/test_hooks.h,
/// pause_at_point); nothing happens otherwise.
void pause_for_test(const std::string& point);

}  // namespace wte
