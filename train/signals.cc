#include "train/signals.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

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

void pause_for_test(const std::string& point) {
  static bool paused = false;
  const char* want = std::getenv("WTE_TEST_PAUSE_AT_STAGE");
  if (want == nullptr || paused || point.find(want) == std::string::npos) return;
  paused = true;
  std::fprintf(stderr, "wte: test pause at %s; SIGSTOP\n", point.c_str());
  std::fflush(stderr);
  ::raise(SIGSTOP);
  for (int i = 0; i < 10000 && g_signal == 0; ++i) ::usleep(1000);  // as in throw_if_stop_requested
}

void throw_if_stop_requested(const std::string& stage) {
  // Test hook: WTE_TEST_PAUSE_AT_STAGE=TEXT stops the process (SIGSTOP) at the first check whose
  // stage contains TEXT, before the check: a test sends a signal, then SIGCONT, and the check sees
  // it at a known stage (the SIGINT and SIGTERM tests of tests/train/test_reliability.cc).
  static bool paused = false;
  const char* want = std::getenv("WTE_TEST_PAUSE_AT_STAGE");
  if (want != nullptr && !paused && stage.find(want) != std::string::npos) {
    paused = true;
    std::fprintf(stderr, "wte: test pause before the stop check of %s; SIGSTOP\n", stage.c_str());
    std::fflush(stderr);
    ::raise(SIGSTOP);
    // The test's signal was pending while the process was stopped; on SIGCONT the kernel may hand
    // it to any thread (OpenMP's workers exist by now), whose handler can run after this thread
    // resumes: wait for it (at most 10 s) so the check below sees it. Test runs only.
    for (int i = 0; i < 10000 && g_signal == 0; ++i) ::usleep(1000);
    // WTE_TEST_SECOND_SIGNAL_PAUSE: stop once more after the first signal was recorded, so the
    // test's second signal is a second request (the process then ends at once).
    if (g_signal != 0 && std::getenv("WTE_TEST_SECOND_SIGNAL_PAUSE") != nullptr) {
      std::fprintf(stderr, "wte: test pause after the first signal; SIGSTOP\n");
      std::fflush(stderr);
      ::raise(SIGSTOP);
      for (int i = 0; i < 10000; ++i) ::usleep(1000);  // the second signal's handler ends us
    }
  }
  const int sig = g_signal;
  if (sig != 0)
    throw Interrupted(sig, std::string(signal_name(sig)) + " received during " + stage +
                               ", before step 1: nothing was trained");
}

}  // namespace wte
