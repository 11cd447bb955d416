// The test hooks' environment variables (test_hooks.h), all of them, here alone:
//   WTE_TEST_PAUSE_AT_STAGE=TEXT          SIGSTOP at the first start-up stop check whose stage
//                                         contains TEXT, and at the first loop point containing it
//   WTE_TEST_SECOND_SIGNAL_PAUSE=1        with it: stop once more after the first signal
//   WTE_TEST_PAUSE_IN_CHECKPOINT_WRITE=N  SIGSTOP in the middle of writing step N's checkpoint
//   WTE_TEST_TRACE_SAMPLES=FILE           append each step's samples (epoch:sample) to FILE
// Compiled with WTE_WITH_TEST_HOOKS=0 (cmake -DWTE_TEST_HOOKS=OFF) the hooks do nothing.
#include "src/hooks/test_hooks.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#ifndef WTE_WITH_TEST_HOOKS
#define WTE_WITH_TEST_HOOKS 0
#endif

namespace wte::test_hooks {
namespace {

// The value of the hook variable `name`, or nullptr (always, without the hooks).
const char* hook_env(const char* name) {
  if (!WTE_WITH_TEST_HOOKS) return nullptr;
  return std::getenv(name);
}

// The test's signal was pending while the process was stopped; on SIGCONT the kernel may hand it
// to any thread (OpenMP's workers exist by now), whose handler can run after this thread resumes:
// wait for it (at most 10 s).
void wait_until_recorded(const volatile std::sig_atomic_t& recorded) {
  for (int i = 0; i < 10000 && recorded == 0; ++i) ::usleep(1000);
}

void stop_self(const std::string& note) {
  std::fprintf(stderr, "wte: test pause%s; SIGSTOP\n", note.c_str());
  std::fflush(stderr);
  ::raise(SIGSTOP);
}

}  // namespace

void pause_before_stop_check(const std::string& stage, const volatile std::sig_atomic_t& recorded) {
  static bool paused = false;
  const char* want = hook_env("WTE_TEST_PAUSE_AT_STAGE");
  if (want == nullptr || paused || stage.find(want) == std::string::npos) return;
  paused = true;
  stop_self(" before the stop check of " + stage);
  wait_until_recorded(recorded);
  if (recorded != 0 && hook_env("WTE_TEST_SECOND_SIGNAL_PAUSE") != nullptr) {
    stop_self(" after the first signal");
    for (int i = 0; i < 10000; ++i) ::usleep(1000);  // the second signal's handler ends us
  }
}

void pause_at_point(const std::string& point, const volatile std::sig_atomic_t& recorded) {
  static bool paused = false;
  const char* want = hook_env("WTE_TEST_PAUSE_AT_STAGE");
  if (want == nullptr || paused || point.find(want) == std::string::npos) return;
  paused = true;
  stop_self(" at " + point);
  wait_until_recorded(recorded);
}

void pause_in_checkpoint_write(const std::string& tmp, int64_t step,
                               const std::function<void()>& flush) {
  const char* want = hook_env("WTE_TEST_PAUSE_IN_CHECKPOINT_WRITE");
  if (want == nullptr || std::to_string(step) != want) return;
  flush();  // so the partial file is really on disk when the test kills us
  stop_self(": '" + tmp + "' partly written (step " + std::to_string(step) + ")");
  // A SIGINT/SIGTERM sent while the process was stopped is delivered on SIGCONT, maybe to another
  // thread after this one resumes: wait (at most 10 s) until none is pending, so the run's next
  // stop check sees it.
  for (int i = 0; i < 10000; ++i) {
    sigset_t pending;
    sigemptyset(&pending);
    if (sigpending(&pending) != 0 ||
        (!sigismember(&pending, SIGINT) && !sigismember(&pending, SIGTERM)))
      break;
    ::usleep(1000);
  }
  ::usleep(10000);  // the handler's one store, on whichever thread took the signal
}

SampleTrace::SampleTrace(bool enabled) {
  const char* path = hook_env("WTE_TEST_TRACE_SAMPLES");
  if (path != nullptr && enabled) out_.open(path, std::ios::app);
}

std::vector<std::array<uint64_t, 2>>* SampleTrace::served() {
  served_.clear();
  return out_.is_open() ? &served_ : nullptr;
}

void SampleTrace::write(size_t step) {
  if (!out_.is_open()) return;
  out_ << step;
  for (const auto& es : served_) out_ << ' ' << es[0] << ':' << es[1];
  out_ << '\n' << std::flush;
}

}  // namespace wte::test_hooks
