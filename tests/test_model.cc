// Tests of the model: the double reference (src/reference_model.h) against central finite
// differences, exact hand-computed cases, and the production float32 wte::Model (src/model.h)
// against the double reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "src/error.h"
#include "src/reference_model.h"
#include "src/rng.h"

namespace wte {
namespace {

// ------------------------------------------------------------------------------------------------
// Helpers

// Uniform in [-scale, scale) from a seeded wte::Rng.
template <typename F>
void fill_uniform(std::vector<F>* v, Rng* rng, double scale) {
  for (F& x : *v) x = static_cast<F>(scale * (2.0 * rng->uniform() - 1.0));
}

// A batch of ids in [0, V) that uses only ids < used_ids (so rows >= used_ids are not in the batch)
// and repeats ids on purpose (first two inputs are equal, and ids are drawn from a small range).
std::vector<int32_t> make_ids(size_t n, size_t used_ids, Rng* rng) {
  std::vector<int32_t> ids(n);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng->below(used_ids));
  if (n >= 2) ids[1] = ids[0];
  return ids;
}

template <typename F>
ref::ModelParams<F> random_params(size_t V, size_t C, size_t n_ctx, bool ln_f, uint64_t seed) {
  ref::ModelParams<F> p(V, C, n_ctx, ln_f, F(1e-5));
  Rng rng(seed);
  fill_uniform(&p.wte, &rng, 0.5);
  fill_uniform(&p.wpe, &rng, 0.5);
  // g around 1 and b around 0, but not exactly, so every ln_f term is exercised.
  for (F& g : p.ln_f_g) g = static_cast<F>(1.0 + 0.3 * (2.0 * rng.uniform() - 1.0));
  fill_uniform(&p.ln_f_b, &rng, 0.2);
  return p;
}

// ------------------------------------------------------------------------------------------------
// Whole-model central finite-difference check of the double reference.
//   numeric = (L(θ + eps·e_i) - L(θ - eps·e_i)) / (2·eps),  eps = 1e-6
//   pass iff |analytic - numeric| <= 1e-5 + 1e-3·|numeric|, for EVERY entry of every tensor.
// The loss is smooth everywhere (softmax, and ln_f with eps > 0 in the sqrt), so no kinks to skip.

struct GradcheckCase {
  const char* label;
  size_t V, C, n_ctx, B, T;
  size_t used_ids;  // ids drawn from [0, used_ids): rows >= used_ids get only the unembedding path
  bool ln_f;
  uint64_t seed;
};

class ReferenceGradcheck : public ::testing::TestWithParam<GradcheckCase> {};

TEST_P(ReferenceGradcheck, EveryEntryMatchesCentralDifference) {
  const GradcheckCase& tc = GetParam();
  ref::ModelParams<double> params = random_params<double>(tc.V, tc.C, tc.n_ctx, tc.ln_f, tc.seed);
  Rng rng(tc.seed + 1000);
  const std::vector<int32_t> inputs = make_ids(tc.B * tc.T, tc.used_ids, &rng);
  const std::vector<int32_t> targets = make_ids(tc.B * tc.T, tc.V, &rng);

  ref::ModelGrads<double> grads;
  const double loss =
      ref::model_forward_backward(params, inputs.data(), targets.data(), tc.B, tc.T, &grads);
  EXPECT_DOUBLE_EQ(loss, ref::model_loss(params, inputs.data(), targets.data(), tc.B, tc.T));

  const double eps = 1e-6;
  auto param_tensors = ref::named_tensors(params);
  auto grad_tensors = ref::named_tensors(grads);
  size_t checked = 0, failures = 0;
  double max_err = 0;
  for (size_t k = 0; k < param_tensors.size(); ++k) {
    std::vector<double>& theta = *param_tensors[k].data;
    const std::vector<double>& analytic = *grad_tensors[k].data;
    ASSERT_EQ(theta.size(), analytic.size()) << param_tensors[k].name;
    for (size_t i = 0; i < theta.size(); ++i) {
      const double saved = theta[i];
      theta[i] = saved + eps;
      const double up = ref::model_loss(params, inputs.data(), targets.data(), tc.B, tc.T);
      theta[i] = saved - eps;
      const double down = ref::model_loss(params, inputs.data(), targets.data(), tc.B, tc.T);
      theta[i] = saved;
      const double numeric = (up - down) / (2 * eps);
      const double err = std::fabs(analytic[i] - numeric);
      max_err = std::max(max_err, err);
      ++checked;
      if (!(err <= 1e-5 + 1e-3 * std::fabs(numeric))) {
        if (++failures <= 20)
          ADD_FAILURE() << tc.label << ": " << param_tensors[k].name << "[" << i
                        << "] analytic " << analytic[i] << " numeric " << numeric << " |diff| "
                        << err;
      }
    }
  }
  EXPECT_EQ(failures, 0u) << tc.label << ": " << failures << " of " << checked
                          << " entries failed; max |analytic - numeric| = " << max_err;
  // With ln_f off, its parameters are not used: the gradient must be exactly zero.
  if (!tc.ln_f) {
    for (size_t c = 0; c < tc.C; ++c) {
      EXPECT_EQ(grads.ln_f_g[c], 0.0);
      EXPECT_EQ(grads.ln_f_b[c], 0.0);
    }
  }
  // wpe rows at positions >= T are not used: zero gradient.
  for (size_t i = tc.T * tc.C; i < tc.n_ctx * tc.C; ++i) EXPECT_EQ(grads.wpe[i], 0.0) << i;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ReferenceGradcheck,
    ::testing::Values(
        // ids from [0, 7) of 11: rows 7..10 only get the unembedding path; n_ctx 6 > T 4.
        GradcheckCase{"V11_C5_lnf", 11, 5, 6, 2, 4, 7, true, 1},
        GradcheckCase{"V11_C5_nolnf", 11, 5, 6, 2, 4, 7, false, 2},
        GradcheckCase{"V7_C1_lnf", 7, 1, 3, 3, 3, 4, true, 3},  // C=1: ln_f output is just b
        GradcheckCase{"V5_C3_nolnf_B1T1", 5, 3, 1, 1, 1, 5, false, 4},
        GradcheckCase{"V13_C8_lnf_T_eq_nctx", 13, 8, 5, 3, 5, 6, true, 5}),
    [](const ::testing::TestParamInfo<GradcheckCase>& info) { return info.param.label; });

// The lookup path really is there: a row not in the batch gets exactly the unembedding gradient
// dlogitsᵀ·h', a row in the batch gets more. (Guards against a check that passes with one path.)
TEST(ReferenceModel, RowsOutsideBatchGetOnlyTheUnembeddingPath) {
  const size_t V = 11, C = 5, n_ctx = 6, B = 2, T = 4, N = B * T;
  for (bool ln_f : {true, false}) {
    ref::ModelParams<double> p = random_params<double>(V, C, n_ctx, ln_f, 7);
    Rng rng(77);
    const std::vector<int32_t> inputs = make_ids(N, 7, &rng);
    const std::vector<int32_t> targets = make_ids(N, V, &rng);
    ref::ModelGrads<double> g;
    ref::ModelActivations<double> act;
    ref::model_forward_backward(p, inputs.data(), targets.data(), B, T, &g, &act);
    std::vector<double> dlogits = act.logits, losses(N);
    ref::softmax_cross_entropy(dlogits.data(), losses.data(), targets.data(), N, V, 1.0 / N);
    for (size_t v = 0; v < V; ++v) {
      const bool in_batch = std::find(inputs.begin(), inputs.end(), int32_t(v)) != inputs.end();
      if (v >= 7) {
        ASSERT_FALSE(in_batch);
      }
      double max_diff = 0;
      for (size_t c = 0; c < C; ++c) {
        double unembed = 0;
        for (size_t n = 0; n < N; ++n) unembed += dlogits[n * V + v] * act.h[n * C + c];
        max_diff = std::max(max_diff, std::fabs(g.wte[v * C + c] - unembed));
      }
      if (in_batch) {
        EXPECT_GT(max_diff, 1e-6) << "ln_f " << ln_f << " row " << v << " lost its lookup path";
      } else {
        EXPECT_LE(max_diff, 1e-15) << "ln_f " << ln_f << " row " << v;
      }
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Tied sum, exact: V 2, C 1, ln_f off, wte = [[1], [0]], wpe = [[0]], input 0, target 0.
//   logits = [1, 0];  p = [e/(1+e), 1/(1+e)] = [0.7310586, 0.2689414]
//   loss = -log 0.7310586 = 0.3132617;  dlogits = [-0.2689414, +0.2689414]
//   dwte[0] = dlogits[0]·h (unembedding) + dh (lookup) = -0.2689414 + -0.2689414 = -0.5378828
//   dwte[1] = dlogits[1]·h = +0.2689414;  dh = Σ_v dlogits[v]·wte[v] = -0.2689414 = dwpe[0]
constexpr double kTiedLoss = 0.3132617;
constexpr double kTiedDwte0 = -0.5378828;
constexpr double kTiedDwte1 = 0.2689414;
constexpr double kTiedDwpe0 = -0.2689414;

TEST(ReferenceModel, TiedSumExact) {
  ref::ModelParams<double> p(2, 1, 1, /*ln_f=*/false, 1e-5);
  p.wte = {1.0, 0.0};
  p.wpe = {0.0};
  const int32_t input = 0, target = 0;
  ref::ModelGrads<double> g;
  const double loss = ref::model_forward_backward(p, &input, &target, 1, 1, &g);
  EXPECT_NEAR(loss, kTiedLoss, 1e-7);
  EXPECT_NEAR(g.wte[0], kTiedDwte0, 1e-7);
  EXPECT_NEAR(g.wte[1], kTiedDwte1, 1e-7);
  EXPECT_NEAR(g.wpe[0], kTiedDwpe0, 1e-7);
  // And the closed forms, to double precision.
  const double e = std::exp(1.0);
  EXPECT_NEAR(loss, std::log1p(1.0 / e), 1e-15);
  EXPECT_NEAR(g.wte[0], -2.0 / (1.0 + e), 1e-15);
  EXPECT_NEAR(g.wte[1], 1.0 / (1.0 + e), 1e-15);
  EXPECT_NEAR(g.wpe[0], -1.0 / (1.0 + e), 1e-15);
}

// ln_f on a hand case: C 2, x = [a, -a] + wpe 0 → u 0, s = a², xhat = ±a/sqrt(a²+eps).
TEST(ReferenceModel, LnFHandCase) {
  ref::ModelParams<double> p(2, 2, 1, /*ln_f=*/true, 1e-5);
  p.wte = {3.0, -3.0, 0.5, 0.25};
  p.wpe = {0.0, 0.0};
  p.ln_f_g = {2.0, 0.5};
  p.ln_f_b = {0.1, -0.2};
  const int32_t input = 0, target = 1;
  ref::ModelActivations<double> act;
  ref::model_forward(p, &input, &target, 1, 1, &act);
  const double xhat = 3.0 / std::sqrt(9.0 + 1e-5);
  EXPECT_NEAR(act.h[0], xhat * 2.0 + 0.1, 1e-15);
  EXPECT_NEAR(act.h[1], -xhat * 0.5 - 0.2, 1e-15);
  const double l0 = act.h[0] * 3.0 + act.h[1] * -3.0;
  const double l1 = act.h[0] * 0.5 + act.h[1] * 0.25;
  EXPECT_NEAR(act.logits[0], l0, 1e-14);
  EXPECT_NEAR(act.logits[1], l1, 1e-14);
  const double m = std::max(l0, l1);
  EXPECT_NEAR(act.loss, m + std::log(std::exp(l0 - m) + std::exp(l1 - m)) - l1, 1e-14);
}

TEST(ReferenceModel, RejectsBadInputs) {
  ref::ModelParams<double> p(5, 2, 4, true, 1e-5);
  const int32_t bad_inputs[4] = {0, 1, 5, 2};
  const int32_t good[5] = {0, 1, 2, 3, 4};
  try {
    ref::model_loss(p, bad_inputs, good, 1, 4);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 5 at position 2"), std::string::npos)
        << e.what();
  }
  try {
    ref::model_loss(p, good, good, 1, 5);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("T=5"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("n_ctx=4"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace wte
