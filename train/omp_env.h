// wte's OpenMP default for busy machines. libgomp's threads spin while they wait (at a barrier,
// between parallel regions); with another process on the cores, a spinning thread takes the core
// its partner needs, and a 2-thread run can become many times slower than a 1-thread run. libgomp
// reads OMP_WAIT_POLICY once, when it loads, before main(), so wte cannot change it afterwards:
// when the user has set neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT, wte sets its default and
// executes itself again (same arguments), once. bench/busy_machine.sh measures both policies on a
// busy machine; docs/kernels.md (OpenMP's wait policy) and docs/training.md (Busy machines).
#pragma once

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

}  // namespace wte
