// Model::backward adds into the gradients (llm.c's convention), so gradient accumulation needs no
// second gradient arena: two backward passes of the same batch without Model::zero_grad leave
// twice one pass's gradient, every tensor (tied and untied wte, fused and unfused loss, with and
// without blocks, bf16 GEMMs where the CPU has them).
//
// Exact at one token (B = T = 1): every sum over the batch's rows then has one term, so the second
// pass adds the very value the first left (the GEMMs' inner products over other dimensions are
// recomputed bit for bit), and g + g = 2g exactly in float; except a tied wte's looked-up row,
// which gets two terms per pass (the unembedding's and the lookup's): within an ulp there. At larger batches the sums over rows
// may round differently once they start from g instead of 0: within 1e-6 of each tensor's largest
// entry (float32 rounding of the rows' sums, relative 2^-24 per add).
// zero_grad then leaves one pass's gradient again, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "src/model/matmul.h"
#include "tests/model_test_util.h"
#include "wte/config.h"
#include "wte/model.h"
#include "wte/rng.h"

namespace wte {
namespace {

struct Case {
  const char* label;
  bool tied;
  size_t n_layer, loss_chunk;
  bool bf16;
};

ModelConfig config_of(const Case& c) {
  ModelConfig m{.vocab_size = 61, .d_model = 16, .n_ctx = 8, .n_layer = c.n_layer, .n_head = 2,
                .tie_embeddings = c.tied, .loss_chunk = c.loss_chunk,
                .loss_vocab_tile = c.loss_chunk > 0 ? size_t{13} : size_t{0}};
  if (c.bf16) m.matmul_precision = MatmulPrecision::bf16;
  return m;
}

// The dense gradient (every tensor but an untied wte's unused slot) and the untied wte's rows.
struct Grads {
  std::vector<float> dense;
  std::vector<int32_t> ids;
  std::vector<float> rows;
};

Grads grads_of(Model& m) {
  Grads g{std::vector<float>(m.grad_data(), m.grad_data() + m.num_parameters()), {}, {}};
  const SparseRowGrad r = m.wte_grad_rows();
  g.ids.assign(r.ids, r.ids + r.count);
  g.rows.assign(r.rows, r.rows + r.count * r.C);
  return g;
}

class BackwardAccumulates : public ::testing::TestWithParam<Case> {};

TEST_P(BackwardAccumulates, TwoPassesWithoutZeroGiveTwiceTheGradient) {
  const Case& tc = GetParam();
  if (tc.bf16 && !bf16_gemm_support().native) GTEST_SKIP() << "no native bf16 matmul here";
  for (const auto& [B, T] : {std::pair<size_t, size_t>{1, 1}, {2, 5}}) {
    SCOPED_TRACE("B " + std::to_string(B) + ", T " + std::to_string(T));
    const bool exact = B * T == 1;
    Rng rng(7);
    const test::TokenBatch batch = test::random_batch(B * T, 61, &rng);
    Model once(config_of(tc)), twice(config_of(tc));
    once.init_weights(3);
    twice.init_weights(3);
    once.forward(batch.x.data(), batch.y.data(), B, T);
    once.backward();
    for (int pass = 0; pass < 2; ++pass) {
      twice.forward(batch.x.data(), batch.y.data(), B, T);
      twice.backward();
    }
    const Grads g1 = grads_of(once), g2 = grads_of(twice);
    for (const TensorSpec& t : once.tensors()) {
      if (t.sparse_grad) continue;
      double largest = 0, worst = 0, worst_two_sources = 0;
      size_t nonzero = 0;
      const size_t C = once.config().d_model;
      for (size_t i = t.offset; i < t.offset + t.size; ++i) {
        const double want = 2.0 * g1.dense[i];
        largest = std::max(largest, std::abs(want));
        // A tied wte's looked-up row gets two terms per pass (the unembedding GEMM's and the
        // lookup's): (g_a + g_b) + g_a + g_b rounds unlike 2 (g_a + g_b), within an ulp.
        const bool two_sources = tc.tied && t.name == "wte" &&
                                 (i - t.offset) / C == static_cast<size_t>(batch.x[0]);
        double& w = exact && two_sources ? worst_two_sources : worst;
        w = std::max(w, std::abs(g2.dense[i] - want));
        nonzero += g1.dense[i] != 0.0f;
      }
      if (exact) {
        EXPECT_EQ(worst, 0.0) << t.name << ": not exactly twice one pass's gradient";
        EXPECT_LE(worst_two_sources, 0x1p-23 * largest) << t.name << ": the looked-up row";
      } else {
        EXPECT_GT(nonzero, 0u) << t.name << ": an all-zero gradient proves nothing";
        EXPECT_LE(worst, 1e-6 * largest) << t.name << " (largest " << largest << ")";
      }
    }
    if (!tc.tied) {
      ASSERT_EQ(g2.ids, g1.ids) << "the untied wte's rows: the same ids";
      ASSERT_FALSE(g1.ids.empty());
      double largest = 0, worst = 0;
      for (size_t i = 0; i < g1.rows.size(); ++i) {
        const double want = 2.0 * g1.rows[i];
        largest = std::max(largest, std::abs(want));
        worst = std::max(worst, std::abs(g2.rows[i] - want));
      }
      if (exact) {
        EXPECT_EQ(worst, 0.0) << "untied wte rows";
      } else {
        EXPECT_LE(worst, 1e-6 * largest) << "untied wte rows";
      }
    }
  }
}

TEST_P(BackwardAccumulates, ZeroGradStartsAgainFromZero) {
  const Case& tc = GetParam();
  if (tc.bf16 && !bf16_gemm_support().native) GTEST_SKIP() << "no native bf16 matmul here";
  const size_t B = 2, T = 5;
  Rng rng(9);
  const test::TokenBatch a = test::random_batch(B * T, 61, &rng),
                         b = test::random_batch(B * T, 61, &rng);
  Model fresh(config_of(tc)), reused(config_of(tc));
  fresh.init_weights(4);
  reused.init_weights(4);
  fresh.forward(b.x.data(), b.y.data(), B, T);
  fresh.backward();
  reused.forward(a.x.data(), a.y.data(), B, T);  // another batch's gradient first
  reused.backward();
  reused.zero_grad();
  EXPECT_EQ(reused.wte_grad_rows().count, 0u);
  EXPECT_EQ(reused.grad_norm_head().count, 0u);
  reused.forward(b.x.data(), b.y.data(), B, T);
  reused.backward();
  const Grads g1 = grads_of(fresh), g2 = grads_of(reused);
  for (const TensorSpec& t : fresh.tensors()) {
    if (t.sparse_grad) continue;
    EXPECT_EQ(0, std::memcmp(g1.dense.data() + t.offset, g2.dense.data() + t.offset,
                             t.size * sizeof(float)))
        << t.name;
  }
  EXPECT_EQ(g1.ids, g2.ids);
  EXPECT_EQ(g1.rows, g2.rows);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BackwardAccumulates,
    ::testing::Values(Case{"tied_unfused", true, 0, 0, false},
                      Case{"untied_unfused", false, 0, 0, false},
                      Case{"tied_fused", true, 0, 3, false}, Case{"untied_fused", false, 0, 5, false},
                      Case{"blocks_tied_fused", true, 2, 4, false},
                      Case{"blocks_untied_unfused", false, 2, 0, false},
                      Case{"blocks_tied_unfused_bf16", true, 2, 0, true}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.label; });

}  // namespace
}  // namespace wte
