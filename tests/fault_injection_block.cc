// Test-only fault for wte_faulty_block (CMakeLists.txt, option WTE_FAULT_INJECTION): that binary
// compiles its own src/model/block.cc with -Dgelu_backward=wte_fault_gelu_backward_no_chain, so the
// blocks' MLP backward uses this GELU derivative, which forgets the chain term of tanh's argument:
//   right:  gelu'(x) = 0.5·(1 + t) + 0.5·x·(1 - t²)·√(2/π)·(1 + 3·0.044715·x²),  t = tanh(√(2/π)(x + 0.044715x³))
//   here:   0.5·(1 + t)
// (a plausible slip). `wte gradcheck` must catch it in the f32 lines of every block tensor whose
// gradient flows through a GELU, and nowhere else (tests/cli/test_gradcheck_cli.cc). Never linked into
// the production `wte`.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "src/reference/kernels.h"
#include "wte/kernels.h"

namespace wte {

void wte_fault_gelu_backward_no_chain(float* dinp, const float* inp, const float* dout, size_t n,
                                      uint16_t* dinp16) {
  for (size_t i = 0; i < n; ++i) {  // dinp may alias dout: read both before writing
    const float x = inp[i];
    const float t = std::tanh(0.7978845608f * (x + 0.044715f * x * x * x));
    dinp[i] = dout[i] * 0.5f * (1.0f + t);
    if (dinp16 != nullptr) dinp16[i] = ref::f32_to_bf16(dinp[i]);  // bf16 GEMMs' copy
  }
}

}  // namespace wte
