// The double reference model with GPT-2's transformer blocks (src/reference/model.h): whole-model
// central finite differences with n_layer = 2 (every entry of every tensor, tied and untied), exact
// identities of the block (zero projections are the identity, one position attends only to itself),
// causality in the reference, and the tensor names and order of docs/checkpoint.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "src/reference/model.h"
#include "wte/error.h"
#include "wte/rng.h"
#include "tests/model_test_util.h"

namespace wte {
namespace {

using test::fill_uniform;
using test::make_ids;

// Every tensor random: weights and biases uniform in ±scale, LayerNorm gains around 1, so every term
// of every op is exercised (zero biases or unit gains would hide a missing term).
ref::ModelParams<double> random_block_params(size_t V, size_t C, size_t n_ctx, size_t n_layer,
                                             size_t n_head, bool ln_f, bool tied, uint64_t seed) {
  ref::ModelParams<double> p(V, C, n_ctx, ln_f, 1e-5, n_layer, n_head);
  if (!tied) p.lm_head.assign(V * C, 0.0);
  Rng rng(seed);
  for (auto& t : ref::named_tensors(p)) {
    const std::string& name = t.name;
    const bool gain = name.size() >= 2 && name.compare(name.size() - 2, 2, "/g") == 0;
    if (gain) {
      for (double& g : *t.data) g = 1.0 + 0.3 * (2.0 * rng.uniform() - 1.0);
    } else {
      // Linear weights scaled like 1/sqrt(fan-in) so activations stay O(1) through two blocks.
      const bool weight = name.size() >= 2 && name.compare(name.size() - 2, 2, "/w") == 0;
      const double fan_in = name.find("mlp/c_proj/w") != std::string::npos ? 4.0 * C : double(C);
      fill_uniform(t.data, &rng, weight ? 1.5 / std::sqrt(fan_in) : 0.3);
    }
  }
  return p;
}

// ------------------------------------------------------------------------------------------------
// Whole-model central finite differences, n_layer = 2.
//   numeric = (L(θ + eps·e_i) - L(θ - eps·e_i)) / (2·eps), eps = 1e-6
//   pass iff |analytic - numeric| <= 1e-5 + 1e-3·|numeric| for EVERY entry of EVERY tensor.
// The loss is smooth (softmax, tanh GELU, LayerNorm with eps > 0): no kinks to skip.

struct BlockCase {
  const char* label;
  size_t V, C, n_ctx, n_layer, n_head, B, T;
  bool ln_f, tied;
  uint64_t seed;
};
void PrintTo(const BlockCase& tc, std::ostream* os) { *os << tc.label; }

class ReferenceBlocksGradcheck : public ::testing::TestWithParam<BlockCase> {};

TEST_P(ReferenceBlocksGradcheck, EveryEntryOfEveryTensorMatchesCentralDifference) {
  const BlockCase& tc = GetParam();
  ref::ModelParams<double> params =
      random_block_params(tc.V, tc.C, tc.n_ctx, tc.n_layer, tc.n_head, tc.ln_f, tc.tied, tc.seed);
  Rng rng(tc.seed + 1000);
  const std::vector<int32_t> inputs = make_ids(tc.B * tc.T, tc.V * 2 / 3, &rng);
  const std::vector<int32_t> targets = make_ids(tc.B * tc.T, tc.V, &rng);

  ref::ModelGrads<double> grads;
  ref::ModelActivations<double> act;
  const double loss = ref::model_forward_backward(params, inputs.data(), targets.data(), tc.B,
                                                  tc.T, &grads, &act);
  EXPECT_DOUBLE_EQ(loss, ref::model_loss(params, inputs.data(), targets.data(), tc.B, tc.T));
  // The attention is not degenerate: some row spreads its weight (max < 0.9 over >= 3 positions).
  double min_max_att = 1;
  for (size_t r = 0; r < tc.B * tc.n_head * tc.T; ++r) {
    const size_t t = r % tc.T;
    if (t < 2) continue;
    const double* a = act.blocks[0].att.data() + r * tc.T;
    min_max_att = std::min(min_max_att, *std::max_element(a, a + t + 1));
  }
  EXPECT_LT(min_max_att, 0.9);

  auto param_tensors = ref::named_tensors(params);
  auto grad_tensors = ref::named_tensors(grads);
  ASSERT_EQ(param_tensors.size(), grad_tensors.size());
  ASSERT_EQ(param_tensors.size(), 4 + (tc.tied ? 0 : 1) + 12 * tc.n_layer);
  const auto loss_now = [&] {
    return ref::model_loss(params, inputs.data(), targets.data(), tc.B, tc.T);
  };
  size_t checked = 0, failures = 0;
  for (size_t k = 0; k < param_tensors.size(); ++k) {
    const std::string& name = param_tensors[k].name;
    ASSERT_EQ(name, grad_tensors[k].name);
    ASSERT_EQ(param_tensors[k].data->size(), grad_tensors[k].data->size()) << name;
    const test::FdResult r = test::check_tensor_fd(loss_now, param_tensors[k].data,
                                                   *grad_tensors[k].data, tc.label, name, &checked,
                                                   &failures);
    // Every block tensor really carries gradient (a tensor the loss ignored would pass vacuously).
    if (name[0] == 'h') {
      EXPECT_GT(r.max_abs, 1e-4) << name << ": gradient is (nearly) all zero";
    }
    RecordProperty(name, std::to_string(r.max_err));
  }
  EXPECT_EQ(failures, 0u) << tc.label << ": " << failures << " of " << checked << " entries failed";
  // wpe rows at positions >= T are not read: exactly zero.
  for (size_t i = tc.T * tc.C; i < tc.n_ctx * tc.C; ++i) EXPECT_EQ(grads.wpe[i], 0.0) << i;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ReferenceBlocksGradcheck,
    ::testing::Values(
        // V 11, C 8, NH 2 (hs 4), T 5 < n_ctx 6, B 2; ids from [0, 7) so rows 7..10 are not looked up.
        BlockCase{"L2_tied_lnf", 11, 8, 6, 2, 2, 2, 5, true, true, 1},
        BlockCase{"L2_untied_lnf", 11, 8, 6, 2, 2, 2, 5, true, false, 2},
        BlockCase{"L2_tied_nolnf", 11, 8, 6, 2, 2, 2, 5, false, true, 3},
        // One head of width C, and four heads of width 2; T = n_ctx.
        BlockCase{"L1_NH1_untied_lnf", 7, 4, 4, 1, 1, 3, 4, true, false, 4},
        BlockCase{"L2_NH4_tied_lnf_T_eq_nctx", 9, 8, 4, 2, 4, 1, 4, true, true, 5}),
    [](const ::testing::TestParamInfo<BlockCase>& info) { return info.param.label; });

// ------------------------------------------------------------------------------------------------
// Exact identities.

// A block whose two residual projections are zero (weights and biases) adds exactly 0: the residual
// stream passes through bit for bit, and the loss equals the zero-block model's.
TEST(ReferenceBlocks, ZeroProjectionsAreTheIdentity) {
  const size_t V = 11, C = 8, n_ctx = 6, B = 2, T = 5;
  ref::ModelParams<double> p = random_block_params(V, C, n_ctx, 2, 2, true, true, 7);
  for (auto& blk : p.h) {
    std::fill(blk.attn_c_proj_w.begin(), blk.attn_c_proj_w.end(), 0.0);
    std::fill(blk.attn_c_proj_b.begin(), blk.attn_c_proj_b.end(), 0.0);
    std::fill(blk.mlp_c_proj_w.begin(), blk.mlp_c_proj_w.end(), 0.0);
    std::fill(blk.mlp_c_proj_b.begin(), blk.mlp_c_proj_b.end(), 0.0);
  }
  Rng rng(8);
  const std::vector<int32_t> inputs = make_ids(B * T, V, &rng), targets = make_ids(B * T, V, &rng);
  ref::ModelActivations<double> act;
  ref::model_forward(p, inputs.data(), targets.data(), B, T, &act);
  ASSERT_EQ(act.residual.size(), 3u);
  EXPECT_EQ(act.residual[0], act.hidden_states);
  EXPECT_EQ(act.residual[1], act.residual[0]);
  EXPECT_EQ(act.residual[2], act.residual[0]);
  ref::ModelParams<double> p0 = p;
  p0.h.clear();
  EXPECT_EQ(ref::model_loss(p0, inputs.data(), targets.data(), B, T), act.loss);
}

// T = 1: each position attends only to itself (att = 1), so the attention output is v exactly, and
// x_mid = x + v·attn/c_proj/w + b. Checked against the block's own intermediate values.
TEST(ReferenceBlocks, OnePositionAttendsToItself) {
  const size_t V = 5, C = 6, n_ctx = 3, B = 3, T = 1, N = B * T, NH = 3;
  ref::ModelParams<double> p = random_block_params(V, C, n_ctx, 1, NH, true, true, 9);
  const std::vector<int32_t> inputs = {0, 3, 4}, targets = {1, 2, 0};
  ref::ModelActivations<double> act;
  ref::model_forward(p, inputs.data(), targets.data(), B, T, &act);
  const auto& a = act.blocks[0];
  for (size_t r = 0; r < B * NH; ++r) EXPECT_EQ(a.att[r], 1.0);
  for (size_t n = 0; n < N; ++n)
    for (size_t c = 0; c < C; ++c) EXPECT_EQ(a.atty[n * C + c], a.qkv[n * 3 * C + 2 * C + c]);
  // qkv = ln_1(x) · c_attn/w + b, the (in, out) layout: column j of row i at w[i·3C + j].
  for (size_t n = 0; n < N; ++n)
    for (size_t j = 0; j < 3 * C; ++j) {
      double want = p.h[0].c_attn_b[j];
      for (size_t i = 0; i < C; ++i) want += a.ln_1[n * C + i] * p.h[0].c_attn_w[i * 3 * C + j];
      EXPECT_NEAR(a.qkv[n * 3 * C + j], want, 1e-14);
    }
}

// Attention by hand: T = 2, C = 2, NH = 2 (two heads of width hs = 1, so the scale 1/√hs is 1):
// position 1's weights are softmax([q·k0, q·k1]) per head, position 0's are [1, 0].
TEST(ReferenceBlocks, CausalSoftmaxByHand) {
  const size_t B = 1, T = 2, C = 2, NH = 2;
  // qkv rows (3C = 6 columns: q0 q1 | k0 k1 | v0 v1), head h uses column h of each part.
  const std::vector<double> qkv = {1.0, 2.0, 0.5, -1.0, 3.0, 4.0,
                                   -1.0, 0.5, 2.0, 1.0, 5.0, -6.0};
  std::vector<double> y(T * C), preatt(NH * T * T), att(NH * T * T);
  ref::attention_forward(y.data(), preatt.data(), att.data(), qkv.data(), B, T, C, NH);
  // Position 0 sees only itself.
  EXPECT_EQ(y[0], 3.0);
  EXPECT_EQ(y[1], 4.0);
  // Head 0 at position 1: scores q·k / sqrt(1) = [-1·0.5, -1·2] = [-0.5, -2].
  const double w0 = 1 / (1 + std::exp(-2.0 + 0.5));  // weight of position 0
  EXPECT_NEAR(y[2], w0 * 3.0 + (1 - w0) * 5.0, 1e-15);
  // Head 1 at position 1: scores [0.5·-1, 0.5·1] = [-0.5, 0.5].
  const double w1 = 1 / (1 + std::exp(0.5 + 0.5));
  EXPECT_NEAR(y[3], w1 * 4.0 + (1 - w1) * -6.0, 1e-15);
  // No weight on the future: att[h, 0, 1] = 0.
  EXPECT_EQ(att[(0 * T + 0) * T + 1], 0.0);  // head 0, t 0, j 1
  EXPECT_EQ(att[(1 * T + 0) * T + 1], 0.0);  // head 1, t 0, j 1
}

// Causality in the reference: changing the token at position t changes no row before t, at any
// layer (bit for bit: row t's arithmetic reads only positions <= t).
TEST(ReferenceBlocks, LaterTokensDoNotChangeEarlierRows) {
  const size_t V = 11, C = 8, n_ctx = 6, B = 1, T = 6;
  const ref::ModelParams<double> p = random_block_params(V, C, n_ctx, 2, 2, true, true, 11);
  std::vector<int32_t> x = {1, 4, 2, 7, 3, 9};
  ref::ModelActivations<double> a0, a1;
  ref::model_forward<double>(p, x.data(), nullptr, B, T, &a0);
  for (size_t t = 0; t < T; ++t) {
    std::vector<int32_t> y = x;
    y[t] = (y[t] + 5) % static_cast<int32_t>(V);
    ref::model_forward<double>(p, y.data(), nullptr, B, T, &a1);
    for (size_t l = 0; l < a0.residual.size(); ++l) {
      EXPECT_EQ(0, std::memcmp(a0.residual[l].data(), a1.residual[l].data(), t * C * sizeof(double)))
          << "layer " << l << ", changed position " << t;
      // ...and the changed row does change (after the lookup, at every layer).
      EXPECT_NE(0, std::memcmp(a0.residual[l].data() + t * C, a1.residual[l].data() + t * C,
                               C * sizeof(double)))
          << "layer " << l << ", position " << t;
    }
    EXPECT_EQ(0, std::memcmp(a0.h.data(), a1.h.data(), t * C * sizeof(double)));
  }
}

// Names, shapes and order as docs/checkpoint.md lists them (GPT-2's checkpoint names without "model/";
// GPT-2's order: wte, wpe, the blocks, ln_f, then an untied lm_head).
TEST(ReferenceBlocks, TensorNamesAndOrder) {
  const size_t V = 5, C = 4, P = 3;
  ref::ModelParams<double> p(V, C, P, true, 1e-5, 2, 2);
  p.lm_head.assign(V * C, 0.0);
  const std::vector<std::pair<std::string, size_t>> want = {
      {"wte", V * C}, {"wpe", P * C},
      {"h0/ln_1/g", C}, {"h0/ln_1/b", C}, {"h0/attn/c_attn/w", C * 3 * C},
      {"h0/attn/c_attn/b", 3 * C}, {"h0/attn/c_proj/w", C * C}, {"h0/attn/c_proj/b", C},
      {"h0/ln_2/g", C}, {"h0/ln_2/b", C}, {"h0/mlp/c_fc/w", C * 4 * C}, {"h0/mlp/c_fc/b", 4 * C},
      {"h0/mlp/c_proj/w", 4 * C * C}, {"h0/mlp/c_proj/b", C}, {"h1/ln_1/g", C}};
  const auto got = ref::named_tensors(p);
  ASSERT_EQ(got.size(), 5u + 24u);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].name, want[i].first) << i;
    EXPECT_EQ(got[i].data->size(), want[i].second) << want[i].first;
  }
  EXPECT_EQ(got[2 + 24 - 1].name, "h1/mlp/c_proj/b");
  EXPECT_EQ(got[2 + 24].name, "ln_f/g");
  EXPECT_EQ(got[2 + 24 + 1].name, "ln_f/b");
  EXPECT_EQ(got.back().name, "lm_head");
  EXPECT_EQ(got.back().data->size(), V * C);
  // Fresh parameters: LayerNorm gains 1, everything else 0.
  for (double g : p.h[1].ln_2_g) EXPECT_EQ(g, 1.0);
  for (double w : p.h[1].c_fc_w) EXPECT_EQ(w, 0.0);
}

TEST(ReferenceBlocks, RejectsAHeadCountThatDoesNotDivideDModel) {
  ref::ModelParams<double> p(5, 6, 3, true, 1e-5, 1, 4);
  const std::vector<int32_t> x = {0, 1};
  try {
    ref::model_loss(p, x.data(), x.data(), 1, 2);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("n_head=4"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("d_model=6"), std::string::npos) << e.what();
  }
  p.h[0].c_fc_w.pop_back();
  p.n_head = 2;
  try {
    ref::model_loss(p, x.data(), x.data(), 1, 2);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("h0/mlp/c_fc/w"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace wte
