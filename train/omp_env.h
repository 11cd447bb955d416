// The OpenMP threads of a run: the thread team started before any file is written
// (start_thread_team), and wte's OpenMP default for busy machines. libgomp's threads spin while they wait (at a barrier,
// between parallel regions); with another process on the cores, a spinning thread takes the core
// its partner needs, and a 2-thread run can become many times slower than a 1-thread run. libgomp
// reads OMP_WAIT_POLICY once, when it loads, before main(), so wte cannot change it afterwards:
// when the user has set neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT, wte sets its default and
// executes itself again (same arguments), once. bench/busy_machine.sh measures both policies on a
// busy machine; docs/kernels.md (OpenMP's wait policy) and docs/training.md (Busy machines).
#pragma once

#include "wte/config.h"

namespace wte {

/// The OMP_WAIT_POLICY wte uses when the environment sets none.
constexpr const char* kDefaultWaitPolicy = "passive";

/// If OMP_WAIT_POLICY and GOMP_SPINCOUNT are both unset: sets OMP_WAIT_POLICY to
/// kDefaultWaitPolicy and re-executes /proc/self/exe with argv (does not return on success; on
/// failure wte carries on with libgomp's default). Otherwise does nothing.
void apply_default_wait_policy(char** argv);

/// "OMP_WAIT_POLICY=passive (wte's default)" or "OMP_WAIT_POLICY=active (from the environment)"
/// (or GOMP_SPINCOUNT=N), for progress lines.
const char* wait_policy_description();

/// Starts OpenMP's thread team of train.threads threads (as the first step would) before any file
/// is written, so a thread count the system cannot provide fails here. Throws wte::Error if
/// OpenMP starts fewer threads. libgomp ends the process itself (exit status 1, after its own
/// "Thread creation failed") when the system refuses a thread (a limit on processes per user,
/// ulimit -u, or a container's pids.max): then wte's own message follows, naming the thread count
/// and what to lower (train.threads, OMP_NUM_THREADS), and the start-up's RunDirectory removes
/// what it made (RunDirectory::remove_start_up_files), as for any failed start-up.
void start_thread_team(const Config& cfg);

}  // namespace wte
