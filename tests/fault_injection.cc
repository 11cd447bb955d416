// Test-only fault for wte_faulty (CMakeLists.txt, option WTE_FAULT_INJECTION): that binary compiles
// its own src/model/model.cc with -Dembedding_backward_wte=wte_fault_dropped_lookup_grad, so Model's
// lookup backward calls this no-op instead of the scatter kernel, and dwte keeps only the
// unembedding path. `wte gradcheck` must catch it (tests/test_gradcheck_cli.sh). Never linked into
// the production `wte`.
#include <cstddef>
#include <cstdint>

#include "wte/kernels.h"  // declares wte_fault_dropped_lookup_grad under the renaming macro

namespace wte {

// Returns 0: no gradient-norm block sums (the caller's norm then reads dwte itself).
size_t wte_fault_dropped_lookup_grad(float* /*dwte*/, const float* /*dhidden*/,
                                     const int32_t* /*ids*/, size_t /*N*/, size_t /*C*/,
                                     size_t /*V*/, ScatterWorkspace* /*workspace*/,
                                     double* /*dwte_sumsq*/) {
  return 0;
}

}  // namespace wte
