#include "train/omp_env.h"

#include <omp.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "train/run_directory.h"
#include "wte/error.h"

namespace wte {

namespace {
constexpr const char* kMarker = "WTE_DEFAULT_WAIT_POLICY";  // set by wte itself before re-exec
}

void apply_default_wait_policy(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  ::setenv("OMP_WAIT_POLICY", kDefaultWaitPolicy, 1);
  ::setenv(kMarker, "1", 1);
  ::execv("/proc/self/exe", argv);
  // exec failed (no /proc?): carry on with libgomp's own default.
  ::unsetenv("OMP_WAIT_POLICY");
  ::unsetenv(kMarker);
}

const char* wait_policy_description() {
  static const std::string text = [] {
    const char* policy = std::getenv("OMP_WAIT_POLICY");
    const char* spin = std::getenv("GOMP_SPINCOUNT");
    const bool ours = std::getenv(kMarker) != nullptr;
    std::string t;
    if (policy != nullptr)
      t = std::string("OMP_WAIT_POLICY=") + policy + (ours ? " (wte's default)" : " (from the environment)");
    else
      t = "OMP_WAIT_POLICY unset (libgomp spins)";
    if (spin != nullptr) t += std::string(", GOMP_SPINCOUNT=") + spin;
    return t;
  }();
  return text.c_str();
}

#ifdef _OPENMP
namespace {

// While start_thread_team waits for OpenMP's threads: the thread count and where it came from.
// libgomp ends the process with exit(1) when pthread_create fails ("Thread creation failed"), so
// wte's message and the start-up's clean-up run in an exit handler.
struct TeamStart {
  int threads = 0;  // 0: not starting a team
  std::string source;
};
TeamStart g_team_start;

void on_exit_while_starting_team() {
  if (g_team_start.threads == 0) return;
  std::string msg = "wte train: error: OpenMP could not start " +
                    std::to_string(g_team_start.threads) + " threads (" + g_team_start.source +
                    "): the system refused to create a thread (libgomp's message above; the usual "
                    "cause is a limit on the processes and threads of a user, ulimit -u, or of a "
                    "container, pids.max). Use fewer threads: set train.threads (in the config, "
                    "or --train.threads=N), or OMP_NUM_THREADS=N if train.threads is 0";
  const std::string removed = remove_start_up_files_in_progress();
  if (!removed.empty()) msg += "; " + removed;
  std::fprintf(stderr, "%s\n", msg.c_str());
}

}  // namespace
#endif

void start_thread_team(const Config& cfg) {
  const int want = cfg.train.threads > 0 ? static_cast<int>(cfg.train.threads) : omp_get_max_threads();
  int got = want;
#ifdef _OPENMP  // the fuzz build compiles without -fopenmp (cmake/sanitize.cmake)
  static const bool handler = std::atexit(on_exit_while_starting_team) == 0;
  (void)handler;
  g_team_start.threads = want;
  g_team_start.source = cfg.train.threads > 0
                            ? "train.threads = " + std::to_string(want)
                            : "train.threads = 0: OMP_NUM_THREADS or all cores";
#pragma omp parallel num_threads(want)
  {
#pragma omp single
    got = omp_get_num_threads();
  }
  g_team_start.threads = 0;
#endif
  if (got != want)
    throw Error("train.threads = " + std::to_string(want) + ": OpenMP started only " +
                std::to_string(got) + " threads; lower train.threads");
}

}  // namespace wte
