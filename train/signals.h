// SIGINT (Ctrl-C) and SIGTERM (a scheduler's stop) during `wte train`: the step in progress
// finishes, a checkpoint is written atomically, the run says so and exits with 128 + the signal
// number (130, 143), as a shell reports a process ended by that signal.
#pragma once

namespace wte {

/// Installs handlers for SIGINT and SIGTERM that only record the signal (stop_signal()). A second
/// SIGINT or SIGTERM restores the default action and re-raises it: the process ends at once (the
/// last checkpoint stays whole, since every write is atomic). Safe to call more than once.
void install_stop_signals();

/// Restores the default actions of SIGINT and SIGTERM.
void remove_stop_signals();

/// 0, or the number of the first SIGINT/SIGTERM received since install_stop_signals().
int stop_signal();

/// "SIGINT", "SIGTERM" or "signal N".
const char* signal_name(int sig);

}  // namespace wte
