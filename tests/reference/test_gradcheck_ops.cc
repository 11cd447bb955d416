// Per-op gradient checks (ctest -L gradcheck): each op of the model in the double reference
// (src/reference/kernels.h, src/reference/model.h) against central finite differences in double, exact
// hand-derived cases, and the float32 Highway kernels against the double reference on every
// compiled target at a stated tolerance.
//
// An op with output y = op(x) is checked through the scalar L = Σ U ⊙ y for a fixed random
// upstream gradient U: dL/dx is then exactly op_backward(U), and the finite difference
//   numeric = (L(x + eps·e_i) - L(x - eps·e_i)) / (2·eps),  eps = 1e-6
// must satisfy |analytic - numeric| <= 1e-5 + 1e-3·|numeric| at every entry. Every op here is
// smooth (softmax), so there are no kinks to skip; ln_f's check is in tests/simd/test_layernorm.cc.
#include <gtest/gtest.h>
#include <hwy/targets.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "wte/kernels.h"
#include "src/reference/kernels.h"
#include "src/analysis/gradcheck.h"
#include "src/reference/model.h"
#include "wte/model.h"
#include "tests/gradcheck_util.h"

namespace wte {
namespace {

constexpr double kU = 0x1p-24;  // float unit roundoff

using test::dot;
using test::expect_fd;
using test::uniform;

// ------------------------------------------------------------------------------------------------
// Lookup + position add: hidden_states[b,t] = wte[x[b,t]] + wpe[t]

// A hand case: n_ctx 4, T 4, B 2, upstream gradient all ones (L = Σ hidden_states)
// → dwpe[p] = B = 2 in every entry, dwte[id] = the number of times id occurs in the batch.
constexpr size_t kPosV = 6, kPosC = 3, kPosCtx = 4, kPosB = 2, kPosT = 4;
const std::vector<int32_t> kPosIds = {0, 3, 3, 1, 3, 2, 0, 3};  // counts: 0:2 1:1 2:1 3:4 4:0 5:0
const double kPosCount[kPosV] = {2, 1, 1, 4, 0, 0};

TEST(GradcheckOps, PositionsAllOnesUpstreamDouble) {
  std::mt19937 rng(1);
  std::vector<double> wte = uniform(kPosV * kPosC, rng), wpe = uniform(kPosCtx * kPosC, rng);
  const std::vector<double> ones(kPosB * kPosT * kPosC, 1.0);
  std::vector<double> dwte(kPosV * kPosC, 0.0), dwpe(kPosCtx * kPosC, 0.0);
  ref::embedding_backward_wte(dwte.data(), ones.data(), kPosIds.data(), kPosB * kPosT, kPosC,
                              kPosV);
  ref::embedding_backward_wpe(dwpe.data(), ones.data(), kPosB, kPosT, kPosC);
  for (size_t p = 0; p < kPosCtx; ++p)
    for (size_t c = 0; c < kPosC; ++c) EXPECT_EQ(dwpe[p * kPosC + c], 2.0) << "dwpe[" << p << "]";
  for (size_t v = 0; v < kPosV; ++v)
    for (size_t c = 0; c < kPosC; ++c) EXPECT_EQ(dwte[v * kPosC + c], kPosCount[v]) << "dwte[" << v << "]";
  // And the same numbers as finite differences of L = Σ hidden_states.
  auto loss = [&] {
    std::vector<double> h(kPosB * kPosT * kPosC);
    ref::embedding_forward(h.data(), kPosIds.data(), wte.data(), wpe.data(), kPosB, kPosT, kPosC);
    return dot(h, ones);
  };
  expect_fd(loss, &wte, dwte, "dwte");
  expect_fd(loss, &wpe, dwpe, "dwpe");
}

TEST(GradcheckOps, LookupAndPositionAddRandomUpstream) {
  // n_ctx 7 > T 5: rows >= T of wpe get exactly zero; ids leave rows 6..8 of V 9 untouched.
  const size_t V = 9, C = 5, P = 7, B = 3, T = 5, N = B * T;
  std::mt19937 rng(2);
  std::vector<double> wte = uniform(V * C, rng), wpe = uniform(P * C, rng);
  const std::vector<double> U = uniform(N * C, rng);
  std::vector<int32_t> ids(N);
  for (size_t n = 0; n < N; ++n) ids[n] = static_cast<int32_t>((n * 7 + n / 4) % 6);
  std::vector<double> dwte(V * C, 0.0), dwpe(P * C, 0.0);
  ref::embedding_backward_wte(dwte.data(), U.data(), ids.data(), N, C, V);
  ref::embedding_backward_wpe(dwpe.data(), U.data(), B, T, C);
  auto loss = [&] {
    std::vector<double> h(N * C);
    ref::embedding_forward(h.data(), ids.data(), wte.data(), wpe.data(), B, T, C);
    return dot(h, U);
  };
  expect_fd(loss, &wte, dwte, "dwte");
  expect_fd(loss, &wpe, dwpe, "dwpe");
  for (size_t i = 6 * C; i < V * C; ++i) EXPECT_EQ(dwte[i], 0.0) << i;
  for (size_t i = T * C; i < P * C; ++i) EXPECT_EQ(dwpe[i], 0.0) << i;
}

// The scatter with duplicate ids (two positions add into one row): vocab 5, d 2, ids [3, 1, 3], upstream rows
// [1, 2], [10, 20], [100, 200] → dwte[3] = [101, 202], dwte[1] = [10, 20], rows 0, 2, 4 exactly 0.
TEST(GradcheckOps, ScatterWithDuplicatesDouble) {
  const std::vector<int32_t> ids = {3, 1, 3};
  const std::vector<double> U = {1, 2, 10, 20, 100, 200};
  const std::vector<double> want = {0, 0, 10, 20, 0, 0, 101, 202, 0, 0};
  std::vector<double> dwte(10, 0.0);
  ref::embedding_backward_wte(dwte.data(), U.data(), ids.data(), 3, 2, 5);
  EXPECT_EQ(dwte, want);
  std::vector<double> wte = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0};
  const std::vector<double> wpe(3 * 2, 0.0);
  auto loss = [&] {
    std::vector<double> h(6);
    ref::embedding_forward(h.data(), ids.data(), wte.data(), wpe.data(), 1, 3, 2);
    return dot(h, U);
  };
  expect_fd(loss, &wte, dwte, "dwte");
}

// ------------------------------------------------------------------------------------------------
// Tied unembedding: logits = h · wᵀ, and the tied composition w → lookup → unembedding with w.

TEST(GradcheckOps, UnembeddingMatchesFiniteDifferences) {
  const size_t N = 5, C = 4, V = 7;
  std::mt19937 rng(3);
  std::vector<double> h = uniform(N * C, rng), w = uniform(V * C, rng);
  const std::vector<double> U = uniform(N * V, rng);
  std::vector<double> dw(V * C, 0.0), dh(N * C, 0.0);
  ref::unembedding_backward(dw.data(), dh.data(), U.data(), h.data(), w.data(), N, C, V);
  auto loss = [&] {
    std::vector<double> logits(N * V);
    ref::unembedding_forward(logits.data(), h.data(), w.data(), N, C, V);
    return dot(logits, U);
  };
  expect_fd(loss, &h, dh, "dh");
  expect_fd(loss, &w, dw, "dw");
}

TEST(GradcheckOps, TiedTableGetsBothPaths) {
  // L(w) = Σ U ⊙ (embedding(w, x) · wᵀ): dL/dw = dlogitsᵀ·h (unembedding) + scatter(dh) (lookup).
  const size_t V = 6, C = 3, B = 2, T = 3, N = B * T;
  std::mt19937 rng(4);
  std::vector<double> w = uniform(V * C, rng), wpe = uniform(T * C, rng);
  const std::vector<double> U = uniform(N * V, rng);
  const std::vector<int32_t> ids = {2, 2, 0, 5, 2, 1};  // rows 3, 4 only on the unembedding path
  auto loss = [&] {
    std::vector<double> h(N * C), logits(N * V);
    ref::embedding_forward(h.data(), ids.data(), w.data(), wpe.data(), B, T, C);
    ref::unembedding_forward(logits.data(), h.data(), w.data(), N, C, V);
    return dot(logits, U);
  };
  std::vector<double> h(N * C), dw(V * C, 0.0), dh(N * C, 0.0);
  ref::embedding_forward(h.data(), ids.data(), w.data(), wpe.data(), B, T, C);
  ref::unembedding_backward(dw.data(), dh.data(), U.data(), h.data(), w.data(), N, C, V);
  const std::vector<double> unembedding_only = dw;
  ref::embedding_backward_wte(dw.data(), dh.data(), ids.data(), N, C, V);
  expect_fd(loss, &w, dw, "dw (both paths)");
  for (size_t v : {3, 4})
    for (size_t c = 0; c < C; ++c) EXPECT_EQ(dw[v * C + c], unembedding_only[v * C + c]);
  for (size_t c = 0; c < C; ++c) EXPECT_NE(dw[2 * C + c], unembedding_only[2 * C + c]);
}

// ------------------------------------------------------------------------------------------------
// Cross-entropy: loss = mean_n (lse(logits[n]) - logits[n, t_n]); dlogits = (softmax - onehot)/N

TEST(GradcheckOps, CrossEntropyMatchesFiniteDifferences) {
  const size_t N = 4, V = 9;
  std::mt19937 rng(5);
  std::vector<double> logits = uniform(N * V, rng, 3.0);
  logits[V + 2] = 1000.0;  // a large logit: the stable form must stay finite and exact
  logits[V + 5] = 1000.0;
  const std::vector<int32_t> targets = {0, 5, 8, 3};
  auto loss = [&] {
    std::vector<double> losses(N);
    ref::cross_entropy_loss(losses.data(), logits.data(), targets.data(), N, V);
    double s = 0;
    for (double l : losses) s += l;
    return s / N;
  };
  std::vector<double> dlogits = logits, losses(N);
  ref::softmax_cross_entropy(dlogits.data(), losses.data(), targets.data(), N, V, 1.0 / N);
  expect_fd(loss, &logits, dlogits, "dlogits");
}

// ------------------------------------------------------------------------------------------------
// AdamW against its formula (Loshchilov & Hutter 2019; torch.optim.AdamW), by hand, two steps.

// wte gradcheck's cost line counts the entries finite_difference_check visits, by the check's own
// row selection (finite_difference_entries), so the two cannot drift: equal on small models, tied
// and untied (lm_head also checks every target row), with and without blocks, with fewer and with
// more untouched rows asked for than exist.
TEST(GradcheckOps, FiniteDifferenceEntriesCountsWhatTheCheckVisits) {
  struct Case {
    bool tied;
    size_t n_layer, untouched_rows;
  };
  for (const Case c : {Case{true, 0, 8}, Case{false, 0, 3}, Case{true, 1, 2}, Case{false, 1, 100}}) {
    ModelConfig mc;
    mc.vocab_size = 12;
    mc.d_model = 4;
    mc.n_ctx = 4;
    mc.n_layer = c.n_layer;
    mc.n_head = 2;
    mc.tie_embeddings = c.tied;
    Model model(mc);
    model.init_weights(5);
    const ref::ModelParams<double> p = reference_params(model);
    const TokenBatch batch = random_batch(2, 3, mc.vocab_size, 7);
    GradcheckOptions opt;
    opt.untouched_rows = c.untouched_rows;
    size_t visited = 0;
    for (const CheckLine& line : finite_difference_check(p, batch, opt)) visited += line.entries;
    EXPECT_EQ(finite_difference_entries(p, batch, opt), visited)
        << (c.tied ? "tied" : "untied") << ", n_layer " << c.n_layer << ", untouched_rows "
        << c.untouched_rows;
  }
}

TEST(GradcheckOps, AdamWMatchesItsFormulaByHand) {
  const double lr = 0.1, b1 = 0.9, b2 = 0.99, eps = 1e-8, wd = 0.5;
  double p = 2.0, m = 0, v = 0;
  const double g1 = 0.5, g2 = -1.0;
  ref::adamw_update(&p, &g1, &m, &v, 1, lr, b1, b2, eps, wd, 1);
  // step 1: m = 0.05, v = 0.0025, m_hat = 0.5, v_hat = 0.25 → p = 2 - 0.1·(0.5/(0.5+eps) + 0.5·2)
  // (1e-15 relative: 0.1 and 0.01 are not exact in binary, a few ulp of rounding)
  EXPECT_NEAR(m, 0.05, 1e-15 * 0.05);
  EXPECT_NEAR(v, 0.0025, 1e-15 * 0.0025);
  const double p1 = 2.0 - 0.1 * (0.5 / (0.5 + eps) + 1.0);
  EXPECT_NEAR(p, p1, 1e-15);
  ref::adamw_update(&p, &g2, &m, &v, 1, lr, b1, b2, eps, wd, 2);
  // step 2: m = 0.9·0.05 - 0.1 = -0.055, v = 0.99·0.0025 + 0.01 = 0.012475
  //         m_hat = -0.055/0.19, v_hat = 0.012475/0.0199
  const double m_hat = -0.055 / (1 - 0.81), v_hat = 0.012475 / (1 - 0.9801);
  EXPECT_NEAR(m, -0.055, 1e-16);
  EXPECT_NEAR(v, 0.012475, 1e-16);
  EXPECT_NEAR(p, p1 - 0.1 * (m_hat / (std::sqrt(v_hat) + eps) + 0.5 * p1), 1e-14);
}

// ------------------------------------------------------------------------------------------------
// The float32 Highway kernels against the double reference, on every compiled target.
// Inputs are floats; the reference runs on the same values widened to double (exact), so each
// difference is float32 rounding alone, bounded as stated at each check (u = 2^-24).

class KernelVsDouble : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override { hwy::SetSupportedTargetsForTest(GetParam()); }
  void TearDown() override { hwy::SetSupportedTargetsForTest(0); }
};

std::vector<float> floats(size_t n, std::mt19937& rng, float scale) {
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}
std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

TEST_P(KernelVsDouble, PositionsAllOnesExact) {
  // The hand case in float: sums of ones are exact, so the kernels give exactly 2 and the counts.
  const std::vector<float> ones(kPosB * kPosT * kPosC, 1.0f);
  std::vector<float> dwte(kPosV * kPosC, 0.0f), dwpe(kPosCtx * kPosC, 0.0f);
  ScatterWorkspace ws;
  embedding_backward_wte(dwte.data(), ones.data(), kPosIds.data(), kPosB * kPosT, kPosC, kPosV, &ws);
  embedding_backward_wpe(dwpe.data(), ones.data(), kPosB, kPosT, kPosC);
  for (float x : dwpe) EXPECT_EQ(x, 2.0f);
  for (size_t v = 0; v < kPosV; ++v)
    for (size_t c = 0; c < kPosC; ++c) EXPECT_EQ(dwte[v * kPosC + c], kPosCount[v]) << v;
}

TEST_P(KernelVsDouble, EmbeddingForwardAndBackward) {
  for (size_t C : {1, 3, 8, 17, 33}) {
    const size_t V = 11, P = 6, B = 3, T = 5, N = B * T;
    std::mt19937 rng(static_cast<unsigned>(C));
    const std::vector<float> wte = floats(V * C, rng, 1), wpe = floats(P * C, rng, 1),
                             U = floats(N * C, rng, 1), dwte0 = floats(V * C, rng, 1),
                             dwpe0 = floats(P * C, rng, 1);
    std::vector<int32_t> ids(N);
    for (size_t n = 0; n < N; ++n) ids[n] = static_cast<int32_t>((n * 5) % 7);  // duplicates
    // Forward: one rounding of an exact sum: |f - d| <= u·|d|.
    std::vector<float> h(N * C);
    embedding_forward(h.data(), ids.data(), wte.data(), wpe.data(), B, T, C);
    std::vector<double> hd(N * C);
    const std::vector<double> wte_d = widen(wte), wpe_d = widen(wpe), U_d = widen(U);
    ref::embedding_forward(hd.data(), ids.data(), wte_d.data(), wpe_d.data(), B, T, C);
    for (size_t i = 0; i < N * C; ++i) ASSERT_LE(std::fabs(h[i] - hd[i]), kU * std::fabs(hd[i]));
    // Backward into non-zero gradients (accumulation): a row with k duplicates is a float sum of
    // k + 1 terms, off by at most k·u·Σ|terms| (recursive summation bound, Higham 2002 §4.2).
    std::vector<float> dwte = dwte0, dwpe = dwpe0;
    ScatterWorkspace ws;
    embedding_backward_wte(dwte.data(), U.data(), ids.data(), N, C, V, &ws);
    embedding_backward_wpe(dwpe.data(), U.data(), B, T, C);
    std::vector<double> dwte_d = widen(dwte0), dwpe_d = widen(dwpe0), abs_w(V * C), abs_p(P * C);
    ref::embedding_backward_wte(dwte_d.data(), U_d.data(), ids.data(), N, C, V);
    ref::embedding_backward_wpe(dwpe_d.data(), U_d.data(), B, T, C);
    std::vector<double> absU(N * C);
    for (size_t i = 0; i < N * C; ++i) absU[i] = std::fabs(U_d[i]);
    for (size_t i = 0; i < V * C; ++i) abs_w[i] = std::fabs(dwte0[i]);
    for (size_t i = 0; i < P * C; ++i) abs_p[i] = std::fabs(dwpe0[i]);
    ref::embedding_backward_wte(abs_w.data(), absU.data(), ids.data(), N, C, V);
    ref::embedding_backward_wpe(abs_p.data(), absU.data(), B, T, C);
    const double k_max = static_cast<double>(N);  // crude: no row has more than N duplicates
    for (size_t i = 0; i < V * C; ++i)
      ASSERT_LE(std::fabs(dwte[i] - dwte_d[i]), k_max * kU * abs_w[i]) << "dwte C=" << C << " " << i;
    for (size_t i = 0; i < P * C; ++i)
      ASSERT_LE(std::fabs(dwpe[i] - dwpe_d[i]), B * kU * abs_p[i]) << "dwpe C=" << C << " " << i;
  }
}

TEST_P(KernelVsDouble, SoftmaxCrossEntropy) {
  // Bound, R = max|logit|: m - x_t rounds once (u·2R); each exp(x - m) has its argument rounded
  // (u·2R relative) and Highway's Exp adds <= 2 ulp; the V-term sum adds V·u relative; log turns
  // the relative error of the sum into an absolute one and rounds (u·|log S| <= u·log V).
  //   losses:  |f - d| <= u·(4R + V + 4 + log V) + u·(2R + 4) ... <= u·(8R + 2V + 16)
  //   dlogits: |f - d| <= grad_scale·u·(8R + 2V + 16)   (p's relative error times p <= 1)
  for (size_t V : {2, 7, 16, 33, 257}) {
    const size_t N = 5;
    std::mt19937 rng(static_cast<unsigned>(V));
    std::vector<float> logits = floats(N * V, rng, 8);
    std::vector<int32_t> targets(N);
    for (size_t n = 0; n < N; ++n) targets[n] = static_cast<int32_t>((n * 3 + 1) % V);
    double R = 0;
    for (float x : logits) R = std::max(R, static_cast<double>(std::fabs(x)));
    std::vector<double> dl_d = widen(logits), loss_d(N);
    const float scale = 1.0f / N;
    ref::softmax_cross_entropy(dl_d.data(), loss_d.data(), targets.data(), N, V,
                               static_cast<double>(scale));
    std::vector<float> dl = logits, loss(N);
    softmax_cross_entropy(dl.data(), loss.data(), targets.data(), N, V, scale);
    const double bound = kU * (8 * R + 2.0 * V + 16);
    for (size_t n = 0; n < N; ++n)
      ASSERT_LE(std::fabs(loss[n] - loss_d[n]), bound) << "V=" << V << " loss " << n;
    for (size_t i = 0; i < N * V; ++i)
      ASSERT_LE(std::fabs(dl[i] - dl_d[i]), scale * bound) << "V=" << V << " dlogits " << i;
  }
}

TEST_P(KernelVsDouble, AdamWUpdate) {
  // Bound (u = 2^-24), with M = |beta1·m| + |(1-beta1)·g| (m's new value can cancel, so its
  // rounding is relative to its terms) and c_k = beta_k^t / (1 - beta_k^t) (the bias correction
  // 1 - beta^t loses that much relative precision to cancellation: beta2 = 0.999 at t = 1 gives
  // ~1000u, halved by the sqrt):
  //   |Δm| <= 3u·M;  |Δv| <= 3u·|v|
  //   |Δparam| <= 2u·|param| + lr·u·( M/(1-beta1^t)/(sqrt(v_hat)+eps)·(4 + c1)
  //                                   + |m_hat/(sqrt(v_hat)+eps)|·(8 + c2/2) + 3·wd·|param| )
  const size_t n = 37;
  std::mt19937 rng(6);
  const std::vector<float> p0 = floats(n, rng, 1), g = floats(n, rng, 1);
  std::vector<float> m0 = floats(n, rng, 0.1f), v0(n);
  for (size_t i = 0; i < n; ++i) v0[i] = std::fabs(floats(1, rng, 0.01f)[0]);
  for (int64_t step : {1, 2, 10}) {
    const AdamWParams hp{1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, step};
    std::vector<float> p = p0, m = m0, v = v0;
    adamw_update(p.data(), g.data(), m.data(), v.data(), n, hp);
    std::vector<double> pd = widen(p0), md = widen(m0), vd = widen(v0), gd = widen(g);
    ref::adamw_update<double>(pd.data(), gd.data(), md.data(), vd.data(), n, hp.lr, hp.beta1,
                              hp.beta2, hp.eps, hp.weight_decay, step);
    const double b1 = hp.beta1, b2 = hp.beta2;
    const double b1t = std::pow(b1, double(step)), b2t = std::pow(b2, double(step));
    const double c1 = b1t / (1 - b1t), c2 = b2t / (1 - b2t);
    for (size_t i = 0; i < n; ++i) {
      const double M = std::fabs(b1 * m0[i]) + std::fabs((1 - b1) * g[i]);
      const double denom = std::sqrt(vd[i] / (1 - b2t)) + hp.eps;
      const double m_hat = md[i] / (1 - b1t);
      const double bound_p =
          kU * (2 * std::fabs(pd[i]) +
                hp.lr * (M / (1 - b1t) / denom * (4 + c1) + std::fabs(m_hat / denom) * (8 + c2 / 2) +
                         3 * hp.weight_decay * std::fabs(p0[i])));
      ASSERT_LE(std::fabs(m[i] - md[i]), 3 * kU * M) << "m, step " << step << " [" << i << "]";
      ASSERT_LE(std::fabs(v[i] - vd[i]), 3 * kU * std::fabs(vd[i])) << "v, step " << step;
      ASSERT_LE(std::fabs(p[i] - pd[i]), bound_p) << "param, step " << step << " [" << i << "]";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTargets, KernelVsDouble,
                         ::testing::ValuesIn(hwy::SupportedAndGeneratedTargets()),
                         [](const ::testing::TestParamInfo<int64_t>& info) {
                           return std::string(hwy::TargetName(info.param));
                         });

}  // namespace
}  // namespace wte
