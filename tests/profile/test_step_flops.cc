// The step profile's model FLOP counts, exact for a small shape: PaLM's convention (attention over
// the full T x T) and the causal count (only the T(T+1)/2 entries the mask keeps).
#include <gtest/gtest.h>

#include "src/profile/step_profile.h"

namespace wte::profile {
namespace {

ModelConfig small_model() {
  ModelConfig m;
  m.vocab_size = 300;
  m.d_model = 32;
  m.n_ctx = 16;
  m.n_layer = 2;
  m.n_head = 2;
  return m;
}

// B 2, T 16, C 32, 2 layers, 1000 parameters: 6 · 1000 · 32 tokens = 192000 for the weights;
// attention, per sequence and layer, QKᵀ and ·V over 16 x 16 entries of head size 16 in 2 heads:
// 2 GEMMs x 2 FLOPs x 256 x 32 = 32768 forward, 98304 with the backward, x 2 sequences x 2 layers.
TEST(StepFlops, PalmCountsAttentionOverTheFullTxT) {
  EXPECT_EQ(model_flops_per_step(small_model(), 1000, 2, 16), 192000.0 + 393216.0);
}

// The causal count: 16 · 17 / 2 = 136 entries per (sequence, head) instead of 256:
// 2 x 2 x 136 x 32 = 17408 forward, 52224 with the backward, x 2 sequences x 2 layers = 208896.
TEST(StepFlops, CausalCountsOnlyTheEntriesOnAndBelowTheDiagonal) {
  EXPECT_EQ(causal_model_flops_per_step(small_model(), 1000, 2, 16), 192000.0 + 208896.0);
}

// T 1: one entry, nothing masked: both counts agree. No blocks: no attention in either.
TEST(StepFlops, BothCountsAgreeWithoutMaskedEntries) {
  EXPECT_EQ(causal_model_flops_per_step(small_model(), 1000, 3, 1),
            model_flops_per_step(small_model(), 1000, 3, 1));
  ModelConfig none = small_model();
  none.n_layer = 0;
  EXPECT_EQ(causal_model_flops_per_step(none, 1000, 2, 16), 192000.0);
  EXPECT_EQ(model_flops_per_step(none, 1000, 2, 16), 192000.0);
}

}  // namespace
}  // namespace wte::profile
