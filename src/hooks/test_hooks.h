// Hooks that let tests stop a process at a known point (to signal or kill it there) and record
// what a run did, switched on by environment variables that test_hooks.cc names and reads. Every
// such variable is read in test_hooks.cc alone; built without the hooks (CMakeLists.txt's option for
// them, on by default), every hook here does nothing and the environment is never read for them.
#pragma once

#include <array>
#include <csignal>
#include <cstdint>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace wte::test_hooks {

/// In a start-up stop check (train/signals.h, throw_if_stop_requested) of `stage`: if the tests'
/// stage variable is a part of `stage`, the first such call stops the process with SIGSTOP, then,
/// once continued, waits (at most 10 s) until `recorded` (the stop handler's signal) is non-zero;
/// with the second-signal variable also set, it stops once more, so the test's next signal is a
/// second request.
void pause_before_stop_check(const std::string& stage, const volatile std::sig_atomic_t& recorded);

/// In the training loop at `point` ("evaluation after step 2"): as pause_before_stop_check, without
/// the second stop, so the loop's next stop check sees the signal the test sent.
void pause_at_point(const std::string& point, const volatile std::sig_atomic_t& recorded);

/// In save_checkpoint, after the parameters went into `tmp`: if the tests' checkpoint variable
/// equals `step`, calls `flush` (so the partial file is on disk), stops the process with SIGSTOP
/// and, once continued, waits until a SIGINT/SIGTERM the test sent meanwhile has been handled.
void pause_in_checkpoint_write(const std::string& tmp, int64_t step,
                               const std::function<void()>& flush);

/// The order of a run's training samples, for tests that compare runs: if the tests' trace
/// variable names a file (and `enabled` is true: the writing rank), each write appends
/// "step epoch:sample ..." for the samples served since the last served().
class SampleTrace {
 public:
  explicit SampleTrace(bool enabled);
  /// Where the loader should report the samples it serves (nullptr: tracing is off).
  std::vector<std::array<uint64_t, 2>>* served();
  void write(size_t step);

 private:
  std::ofstream out_;
  std::vector<std::array<uint64_t, 2>> served_;
};

}  // namespace wte::test_hooks
