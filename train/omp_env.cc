#include "train/omp_env.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

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

}  // namespace wte
