#include "train/signals.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "src/hooks/test_hooks.h"
#include "src/io/hdf5_util.h"

namespace wte {
namespace {

volatile std::sig_atomic_t g_signal = 0;
bool g_installed = false;  // touched only outside the handler
// SIGPIPE's action before install_stop_signals, restored by remove_stop_signals. If it was SIG_IGN
// (set by the parent, or by MPI for its sockets), SIGPIPE stays ignored: no handler is installed.
struct sigaction g_old_pipe = {};
bool g_pipe_installed = false;

// The second-signal note: two buffers, so set_second_signal_note fills the one the handler does
// not read and then switches g_note to it.
char g_notes[2][1024];
volatile std::sig_atomic_t g_note_len[2] = {0, 0};
volatile std::sig_atomic_t g_note = 0;

extern "C" void on_stop_signal(int sig) {
  if (sig == SIGPIPE) {
    // The reader went away: stop as for SIGTERM. Every later write to it raises SIGPIPE again,
    // which is no second request.
    if (g_signal == 0) g_signal = sig;
    return;
  }
  if (g_signal != 0) {
    // A second request: stop now, as the user expects from a second Ctrl-C; say where things are.
    const int i = g_note;
    if (g_note_len[i] > 0) {
      const ssize_t ignored = ::write(STDERR_FILENO, g_notes[i], static_cast<size_t>(g_note_len[i]));
      (void)ignored;
    }
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    return;
  }
  g_signal = sig;
}

}  // namespace

void install_stop_signals() {
  if (g_installed) return;  // keep a signal recorded since the first call
  g_signal = 0;
  struct sigaction sa = {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // file writes in progress are not cut short
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  struct sigaction pipe_now = {};
  sigaction(SIGPIPE, nullptr, &pipe_now);
  g_pipe_installed = pipe_now.sa_handler != SIG_IGN;
  if (g_pipe_installed) sigaction(SIGPIPE, &sa, &g_old_pipe);
  // A checkpoint read in a child process (hdf5::run_isolated) is waited for in slices of 100 ms:
  // a signal ends that wait too, not only the stage after it.
  hdf5::set_wait_check([] {
    if (const int sig = g_signal)
      throw Interrupted(sig, std::string(signal_name(sig)) +
                                 " received while a checkpoint was being validated, before step "
                                 "1: nothing was trained");
  });
  g_installed = true;
}

void remove_stop_signals() {
  hdf5::set_wait_check(nullptr);
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  if (g_pipe_installed) sigaction(SIGPIPE, &g_old_pipe, nullptr);
  g_pipe_installed = false;
  g_installed = false;
}

void set_second_signal_note(const std::string& line) {
  const int next = 1 - g_note;
  const size_t n = std::min(line.size(), sizeof g_notes[next] - 1);
  std::memcpy(g_notes[next], line.data(), n);
  g_note_len[next] = static_cast<std::sig_atomic_t>(n);
  g_note = next;
}

int stop_signal() { return g_signal; }

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGPIPE: return "SIGPIPE";
    default: return "a signal";
  }
}

void pause_for_test(const std::string& point) { test_hooks::pause_at_point(point, g_signal); }

void throw_if_stop_requested(const std::string& stage) {
  test_hooks::pause_before_stop_check(stage, g_signal);  // the SIGINT/SIGTERM tests' stop
  const int sig = g_signal;
  if (sig != 0)
    throw Interrupted(sig, std::string(signal_name(sig)) + " received during " + stage +
                               ", before step 1: nothing was trained");
}

}  // namespace wte
