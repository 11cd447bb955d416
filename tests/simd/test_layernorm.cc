// LayerNorm (GPT-2's norm(): biased variance, eps inside the square root), the one kernel behind
// ln_1, ln_2 and ln_f (simd/layernorm.cc: layernorm_forward, layernorm_backward; contracts in
// include/wte/kernels.h), and its double reference (src/reference/kernels.h: the reference model's
// ln_1, ln_2 and ln_f too):
//  - the float32 kernel on every Highway target compiled into this binary and supported by this CPU
//    (one parameterized instance per target) against the double reference on the same float
//    inputs, within an error bound derived operation by operation in each bound's comment; at
//    awkward widths ({1, 3, L-1, L, L+1, 3L, 8L+2} for L = 1, 4, 8, 16, and 257) and at the
//    model's tiny shapes (N = B·T = 1, 2, 3, 5, 7 rows of C = 12 or 20); exact cases; the same bits
//    for 1 and 2 threads. Buffers sit inside NaN guard bands (tests/simd_test_util.h): a kernel that
//    reads a guard turns an output into NaN, one that writes a guard changes its bits.
//  - the double reference against central finite differences in double (tests/gradcheck_util.h:
//    eps 1e-6, pass iff |analytic - numeric| <= 1e-5 + 1e-3·|numeric| at every entry; LayerNorm
//    with eps > 0 inside the sqrt is smooth, so there are no kinks).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "hwy/targets.h"
#include "src/reference/kernels.h"
#include "tests/gradcheck_util.h"
#include "tests/simd_test_util.h"
#include "wte/kernels.h"

namespace wte {
namespace {

using test::AtOneAndTwoThreads;
using test::AwkwardSizes;
using test::BitIdentical;
using test::dot;
using test::expect_fd;
using test::ExpectWithin;
using test::fill_exact;
using test::fill_general;
using test::GuardedBuffer;
using test::kSecondOrder;
using test::kTiny;
using test::kU;
using test::ToDouble;
using test::uniform;

// Forces one Highway target for the duration of each test; resets it and the thread count after.
class LayerNormKernelTest : public test::TargetTest {};

// ================================================================================================
// layernorm_forward

// Error bound of one row of layernorm_forward against exact arithmetic (the double reference),
// from the kernel's operations (simd/layernorm.cc):
//   m_f = fl(Σ x / C):           e_m = (C + 1)·u·mean|x|             (sum of C terms, a division)
//   d_c = fl(x_c - m_f):         δ_c = e_m + u·(|x_c - m| + e_m)
//   v_f = fl(Σ fl(d_c²) / C):    e_v = (1/C)·Σ (2|x_c - m|·δ_c + δ_c²) + (C + 2)·u·var
//   s_f = fl(1/fl(sqrt(fl(v_f + eps)))):  relative ρ_s = (e_v + u·(var + eps)) / (2·(var + eps)) + 2u
//   out = fl(fl(fl(d_c·s_f)·g) + b):  e_out = |g|·(s·δ_c + |xhat|·(ρ_s + 2u)) + u·|out|
struct LayerNormBounds {
  double mean = 0, rstd = 0;
  std::vector<double> out;
};
LayerNormBounds LayerNormForwardBounds(const double* x, const double* g, size_t C, double eps,
                                       double m, double s, const double* want_out) {
  double mean_abs = 0, var = 0;
  for (size_t c = 0; c < C; ++c) {
    mean_abs += std::abs(x[c]) / C;
    var += (x[c] - m) * (x[c] - m) / C;
  }
  const double e_m = (C + 1) * kU * mean_abs;
  double e_v = (C + 2) * kU * var;
  for (size_t c = 0; c < C; ++c) {
    const double delta = e_m + kU * (std::abs(x[c] - m) + e_m);
    e_v += (2 * std::abs(x[c] - m) * delta + delta * delta) / C;
  }
  const double rho_s = (e_v + kU * (var + eps)) / (2 * (var + eps)) + 2 * kU;
  LayerNormBounds bounds;
  bounds.mean = kSecondOrder * e_m + kTiny;
  bounds.rstd = kSecondOrder * rho_s * s;
  bounds.out.resize(C);
  for (size_t c = 0; c < C; ++c) {
    const double delta = e_m + kU * (std::abs(x[c] - m) + e_m);
    const double xhat = (x[c] - m) * s;
    bounds.out[c] = kSecondOrder * (std::abs(g[c]) * (s * delta + std::abs(xhat) * (rho_s + 2 * kU)) +
                                    kU * std::abs(want_out[c])) +
                    kTiny;
  }
  return bounds;
}

TEST_P(LayerNormKernelTest, ForwardWithinBoundOfDoubleReference) {
  std::mt19937 rng(1);
  const float eps = 1e-5f;
  // Three rows at every awkward width, and the model's tiny shapes: N = B·T rows for T = 1, 2, 3, 5,
  // 7 at widths that are no multiple of a vector (12, 20).
  std::vector<std::pair<size_t, size_t>> shapes;  // (N, C)
  for (size_t C : AwkwardSizes()) shapes.emplace_back(3, C);
  for (size_t N : {1, 2, 5, 7})
    for (size_t C : {12, 20}) shapes.emplace_back(N, C);
  for (auto [N, C] : shapes) {
    GuardedBuffer inp(N * C), g(C), b(C), out(N * C), mean(N), rstd(N);
    fill_general(inp.data(), inp.size(), rng, 2.0f);
    if (N > 1)
      for (size_t c = 0; c < C; ++c) inp[C + c] += 3.0f;   // row 1: mean well away from 0
    if (N > 2)
      for (size_t c = 0; c < C; ++c) inp[2 * C + c] *= 1e-3f;  // row 2: variance near eps
    fill_general(g.data(), C, rng);
    fill_general(b.data(), C, rng);
    layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), g.data(), b.data(), N, C,
                      eps);
    EXPECT_TRUE(out.guards_intact() && mean.guards_intact() && rstd.guards_intact() &&
                inp.guards_intact() && g.guards_intact() && b.guards_intact())
        << target() << " N=" << N << " C=" << C;

    const std::vector<double> x = ToDouble(inp.data(), N * C), gd = ToDouble(g.data(), C),
                              bd = ToDouble(b.data(), C);
    std::vector<double> want(N * C), want_mean(N), want_rstd(N);
    ref::layernorm_forward<double>(want.data(), want_mean.data(), want_rstd.data(), x.data(),
                                   gd.data(), bd.data(), N, C, static_cast<double>(eps));
    for (size_t n = 0; n < N; ++n) {
      const LayerNormBounds bounds = LayerNormForwardBounds(
          x.data() + n * C, gd.data(), C, eps, want_mean[n], want_rstd[n], want.data() + n * C);
      const std::string where = target() + " N=" + std::to_string(N) + " C=" + std::to_string(C) +
                                " row " + std::to_string(n);
      EXPECT_NEAR(mean[n], want_mean[n], bounds.mean) << where;
      EXPECT_NEAR(rstd[n], want_rstd[n], bounds.rstd) << where;
      ExpectWithin(out.data() + n * C, std::vector<double>(want.begin() + n * C, want.begin() + (n + 1) * C),
                   bounds.out, C, where + " out");
    }
  }
}

// x = 1, 2, ..., C with g = 1, b = 0, eps = 0: mean (C+1)/2 and variance (C² - 1)/12 are exact in
// float for these C, and so is every x - mean (a half-integer), so the kernel's only roundings are
// sqrt, 1/sqrt and (x - mean)·rstd: out[c] = fl(fl(c + 1 - mean) · fl(1/fl(sqrt(var)))) exactly,
// on every target. For C = 4: [1,2,3,4] -> mean 2.5, var 1.25, out ±1.5/sqrt(1.25) = ±3/sqrt(5)
// and ±0.5/sqrt(1.25) = ±1/sqrt(5).
TEST_P(LayerNormKernelTest, ForwardExactForOneToC) {
  for (size_t C : {4, 8, 16, 64}) {
    std::vector<float> inp(C), g(C, 1.0f), b(C, 0.0f), out(C);
    for (size_t c = 0; c < C; ++c) inp[c] = static_cast<float>(c + 1);
    float mean = 0, rstd = 0;
    layernorm_forward(out.data(), &mean, &rstd, inp.data(), g.data(), b.data(), 1, C, 0.0f);
    const float want_mean = (C + 1) / 2.0f;
    const float want_var = static_cast<float>((C * C - 1) / 12.0);
    const float want_rstd = 1.0f / std::sqrt(want_var);
    EXPECT_EQ(mean, want_mean) << target() << " C=" << C;
    EXPECT_EQ(rstd, want_rstd) << target() << " C=" << C;
    for (size_t c = 0; c < C; ++c)
      EXPECT_EQ(out[c], (inp[c] - want_mean) * want_rstd) << target() << " C=" << C << " c=" << c;
  }
  // And the C = 4 values against the closed forms ±3/sqrt(5), ±1/sqrt(5): three roundings (sqrt,
  // division, product) of at most u each, relative.
  const float inp[4] = {1, 2, 3, 4}, g[4] = {1, 1, 1, 1}, b[4] = {0, 0, 0, 0};
  float out[4], mean, rstd;
  layernorm_forward(out, &mean, &rstd, inp, g, b, 1, 4, 0.0f);
  const double r5 = 1 / std::sqrt(5.0);
  const double closed[4] = {-3 * r5, -r5, r5, 3 * r5};
  for (size_t c = 0; c < 4; ++c)
    EXPECT_NEAR(out[c], closed[c], kSecondOrder * 3 * kU * std::abs(closed[c])) << target();
}

// ================================================================================================
// layernorm_backward

// Error bound of layernorm_backward against exact arithmetic for the same float inputs (mean and
// rstd are inputs, exact for both), from the kernel's operations:
//   xhat_f = fl(fl(x - m)·s): 2u·|xhat|;  dxhat_f = fl(dy·g): u·|dxhat|
//   A_f = fl(Σ dxhat_f / C):        e_A = (C + 2)·u·mean|dxhat|
//   B_f = fl(Σ fl(dxhat_f·xhat_f) / C):  e_B = (C + 5)·u·mean|dxhat·xhat|   (4u per product)
//   term = fl(fl(dxhat - A) - fl(xhat·B)):
//        e_term = u·(|dxhat| + |dxhat - A| + |term|) + e_A + |xhat|·(e_B + 3u·|B|)
//   dinp = fl(dinp0 + fl(s·term)):  s·e_term + u·s·|term| + u·|dinp|
//   dg = dg0 + Σ_n fl(dy·xhat_f) (blocks, any grouping): (N + 4)·u·(Σ_n |dy·xhat| + |dg0|)
//   db = db0 + Σ_n dy:                                    (N + 1)·u·(Σ_n |dy| + |db0|)
struct LayerNormBackwardBounds {
  std::vector<double> dinp, dg, db;
};
LayerNormBackwardBounds LayerNormBackwardErrorBounds(
    const std::vector<double>& dout, const std::vector<double>& x, const std::vector<double>& g,
    const std::vector<double>& mean, const std::vector<double>& rstd,
    const std::vector<double>& dg0, const std::vector<double>& db0,
    const std::vector<double>& want_dinp, size_t N, size_t C) {
  LayerNormBackwardBounds bounds;
  bounds.dinp.resize(N * C);
  std::vector<double> sum_abs_g(C, 0.0), sum_abs_b(C, 0.0);
  for (size_t n = 0; n < N; ++n) {
    const double m = mean[n], s = rstd[n];
    double A = 0, B = 0, mean_abs_A = 0, mean_abs_B = 0;
    for (size_t c = 0; c < C; ++c) {
      const double xhat = (x[n * C + c] - m) * s, dxhat = dout[n * C + c] * g[c];
      A += dxhat / C;
      B += dxhat * xhat / C;
      mean_abs_A += std::abs(dxhat) / C;
      mean_abs_B += std::abs(dxhat * xhat) / C;
      sum_abs_g[c] += std::abs(dout[n * C + c] * xhat);
      sum_abs_b[c] += std::abs(dout[n * C + c]);
    }
    const double e_A = (C + 2) * kU * mean_abs_A, e_B = (C + 5) * kU * mean_abs_B;
    for (size_t c = 0; c < C; ++c) {
      const double xhat = (x[n * C + c] - m) * s, dxhat = dout[n * C + c] * g[c];
      const double term = dxhat - A - xhat * B;
      const double e_term = kU * (std::abs(dxhat) + std::abs(dxhat - A) + std::abs(term)) + e_A +
                            std::abs(xhat) * (e_B + 3 * kU * std::abs(B));
      bounds.dinp[n * C + c] =
          kSecondOrder * (s * e_term + kU * s * std::abs(term) + kU * std::abs(want_dinp[n * C + c])) +
          kTiny;
    }
  }
  bounds.dg.resize(C);
  bounds.db.resize(C);
  for (size_t c = 0; c < C; ++c) {
    bounds.dg[c] = kSecondOrder * (N + 4) * kU * (sum_abs_g[c] + std::abs(dg0[c])) + kTiny;
    bounds.db[c] = kSecondOrder * (N + 1) * kU * (sum_abs_b[c] + std::abs(db0[c])) + kTiny;
  }
  return bounds;
}

// Inputs for a backward test: x, g and the forward's saved mean and rstd, plus the upstream
// gradient and nonzero starting gradients (every output accumulates).
struct LayerNormCase {
  std::vector<float> inp, g, mean, rstd, dout, dinp0, dg0, db0;
};
LayerNormCase MakeLayerNormCase(size_t N, size_t C, std::mt19937& rng) {
  LayerNormCase k;
  k.inp.resize(N * C);
  k.g.resize(C);
  k.dout.resize(N * C);
  k.dinp0.resize(N * C);
  k.dg0.resize(C);
  k.db0.resize(C);
  fill_general(k.inp.data(), N * C, rng, 2.0f);
  fill_general(k.g.data(), C, rng);
  fill_general(k.dout.data(), N * C, rng);
  fill_general(k.dinp0.data(), N * C, rng, 0.5f);
  fill_general(k.dg0.data(), C, rng, 0.5f);
  fill_general(k.db0.data(), C, rng, 0.5f);
  std::vector<float> out(N * C), b(C, 0.0f);
  k.mean.resize(N);
  k.rstd.resize(N);
  ref::layernorm_forward<float>(out.data(), k.mean.data(), k.rstd.data(), k.inp.data(), k.g.data(),
                                b.data(), N, C, 1e-5f);
  return k;
}

TEST_P(LayerNormKernelTest, BackwardWithinBoundOfDoubleReference) {
  std::mt19937 rng(2);
  std::vector<std::pair<size_t, size_t>> shapes;  // (N, C)
  for (size_t C : AwkwardSizes()) shapes.emplace_back(3, C);
  for (size_t N : {1, 2, 5, 7})  // the model's tiny shapes: N = B·T rows, T = 1, 2, 5, 7
    for (size_t C : {12, 20}) shapes.emplace_back(N, C);
  shapes.emplace_back(40, 33);   // 3 row blocks of 16 (the last partial)
  shapes.emplace_back(1000, 17);  // 63 blocks of 16
  for (auto [N, C] : shapes) {
    const LayerNormCase k = MakeLayerNormCase(N, C, rng);
    GuardedBuffer dinp = GuardedBuffer::copy_of(k.dinp0), dg = GuardedBuffer::copy_of(k.dg0),
                  db = GuardedBuffer::copy_of(k.db0);
    layernorm_backward(dinp.data(), dg.data(), db.data(), k.dout.data(), k.inp.data(), k.g.data(),
                       k.mean.data(), k.rstd.data(), N, C);
    EXPECT_TRUE(dinp.guards_intact() && dg.guards_intact() && db.guards_intact())
        << target() << " N=" << N << " C=" << C;

    const auto d = [](const std::vector<float>& v) { return ToDouble(v.data(), v.size()); };
    const std::vector<double> dout = d(k.dout), x = d(k.inp), g = d(k.g), mean = d(k.mean),
                              rstd = d(k.rstd), dg0 = d(k.dg0), db0 = d(k.db0);
    std::vector<double> want_dinp = d(k.dinp0), want_dg = dg0, want_db = db0;
    ref::layernorm_backward<double>(want_dinp.data(), want_dg.data(), want_db.data(), dout.data(),
                                    x.data(), g.data(), mean.data(), rstd.data(), N, C);
    const LayerNormBackwardBounds bounds =
        LayerNormBackwardErrorBounds(dout, x, g, mean, rstd, dg0, db0, want_dinp, N, C);
    const std::string where = target() + " N=" + std::to_string(N) + " C=" + std::to_string(C);
    ExpectWithin(dinp.data(), want_dinp, bounds.dinp, N * C, where + " dinp");
    ExpectWithin(dg.data(), want_dg, bounds.dg, C, where + " dg");
    ExpectWithin(db.data(), want_db, bounds.db, C, where + " db");
  }
}

// dg and db sum over rows in fixed row blocks: the same bits with 1 and 2 threads. The shapes are
// above the kernels' parallel threshold (2^15 floats), so 2 threads really split the blocks.
TEST_P(LayerNormKernelTest, BackwardSameBitsForOneAndTwoThreads) {
  std::mt19937 rng(3);
  for (auto [N, C] : {std::pair<size_t, size_t>{600, 65}, {3000, 33}, {257, 257}}) {
    const LayerNormCase k = MakeLayerNormCase(N, C, rng);
    struct Grads {
      std::vector<float> dinp, dg, db;
    };
    const auto out = AtOneAndTwoThreads([&](int) {
      Grads d{k.dinp0, k.dg0, k.db0};
      layernorm_backward(d.dinp.data(), d.dg.data(), d.db.data(), k.dout.data(), k.inp.data(),
                         k.g.data(), k.mean.data(), k.rstd.data(), N, C);
      return d;
    });
    const std::string where = target() + " N=" + std::to_string(N) + " C=" + std::to_string(C);
    EXPECT_TRUE(BitIdentical(out[1].dinp.data(), out[0].dinp.data(), N * C)) << where << " dinp";
    EXPECT_TRUE(BitIdentical(out[1].dg.data(), out[0].dg.data(), C)) << where << " dg";
    EXPECT_TRUE(BitIdentical(out[1].db.data(), out[0].db.data(), C)) << where << " db";
  }
}

// db is a plain sum of dout over rows: with dout in multiples of 1/64 every partial sum is exact,
// so db must equal the exact column sum whatever the row blocks (70 rows: 5 blocks of 16, the last
// partial).
TEST_P(LayerNormKernelTest, BackwardExactBiasGradient) {
  std::mt19937 rng(4);
  const size_t N = 70, C = 19;
  LayerNormCase k = MakeLayerNormCase(N, C, rng);
  fill_exact(k.dout.data(), N * C, rng);
  std::fill(k.db0.begin(), k.db0.end(), 0.25f);
  std::vector<float> dinp = k.dinp0, dg = k.dg0, db = k.db0;
  layernorm_backward(dinp.data(), dg.data(), db.data(), k.dout.data(), k.inp.data(), k.g.data(),
                     k.mean.data(), k.rstd.data(), N, C);
  for (size_t c = 0; c < C; ++c) {
    double want = 0.25;
    for (size_t n = 0; n < N; ++n) want += k.dout[n * C + c];
    EXPECT_EQ(db[c], want) << target() << " c=" << c;
  }
}


WTE_INSTANTIATE_ON_EVERY_TARGET(LayerNormKernelTest);

// ================================================================================================
// The double reference against finite differences

// LayerNorm: dinp, dg, db of L = Σ U ⊙ layernorm(x; g, b). Rows with a mean far from 0 and one
// with a small variance (rstd large) included.
TEST(LayerNormReference, MatchesFiniteDifferences) {
  const size_t N = 4, C = 7;
  const double eps = 1e-5;
  std::mt19937 rng(21);
  std::vector<double> x = uniform(N * C, rng, 2.0), g = uniform(C, rng), b = uniform(C, rng);
  for (size_t c = 0; c < C; ++c) x[C + c] += 5.0;
  for (size_t c = 0; c < C; ++c) x[2 * C + c] *= 0.05;
  const std::vector<double> U = uniform(N * C, rng);
  std::vector<double> out(N * C), mean(N), rstd(N);
  ref::layernorm_forward<double>(out.data(), mean.data(), rstd.data(), x.data(), g.data(), b.data(),
                                 N, C, eps);
  std::vector<double> dx(N * C, 0.0), dg(C, 0.0), db(C, 0.0);
  ref::layernorm_backward<double>(dx.data(), dg.data(), db.data(), U.data(), x.data(), g.data(),
                                  mean.data(), rstd.data(), N, C);
  const auto loss = [&] {
    std::vector<double> y(N * C), m(N), s(N);
    ref::layernorm_forward<double>(y.data(), m.data(), s.data(), x.data(), g.data(), b.data(), N, C,
                                   eps);
    return dot(y, U);
  };
  expect_fd(loss, &x, dx, "layernorm dinp");
  expect_fd(loss, &g, dg, "layernorm dg");
  expect_fd(loss, &b, db, "layernorm db");
}

// The backward accumulates: a second call adds the same gradient again.
TEST(LayerNormReference, BackwardAccumulates) {
  const size_t N = 2, C = 5;
  std::mt19937 rng(22);
  const std::vector<double> x = uniform(N * C, rng), g = uniform(C, rng), b = uniform(C, rng),
                            U = uniform(N * C, rng);
  std::vector<double> out(N * C), mean(N), rstd(N);
  ref::layernorm_forward<double>(out.data(), mean.data(), rstd.data(), x.data(), g.data(), b.data(),
                                 N, C, 1e-5);
  std::vector<double> dx1(N * C, 0.0), dg1(C, 0.0), db1(C, 0.0);
  ref::layernorm_backward<double>(dx1.data(), dg1.data(), db1.data(), U.data(), x.data(), g.data(),
                                  mean.data(), rstd.data(), N, C);
  std::vector<double> dx2 = dx1, dg2 = dg1, db2 = db1;
  ref::layernorm_backward<double>(dx2.data(), dg2.data(), db2.data(), U.data(), x.data(), g.data(),
                                  mean.data(), rstd.data(), N, C);
  // dinp gets one term per call (exactly doubled); dg, db add their rows one at a time (doubled up
  // to rounding).
  for (size_t i = 0; i < N * C; ++i) EXPECT_EQ(dx2[i], 2 * dx1[i]) << i;
  for (size_t c = 0; c < C; ++c) {
    EXPECT_NEAR(dg2[c], 2 * dg1[c], 1e-14) << c;
    EXPECT_NEAR(db2[c], 2 * db1[c], 1e-14) << c;
  }
}

// Widths from 1 to past two AVX-512 vectors, with gains around 1; C = 1: xhat is 0 and out = b
// for every x (dinp = dg = 0).
class LayerNormReferenceWidths : public ::testing::TestWithParam<size_t> {};

TEST_P(LayerNormReferenceWidths, MatchesFiniteDifferences) {
  const size_t N = 4, C = GetParam();
  std::mt19937 rng(static_cast<unsigned>(C));
  std::vector<double> x = uniform(N * C, rng, 2.0), g = uniform(C, rng), b = uniform(C, rng);
  for (double& gi : g) gi += 1.0;
  const std::vector<double> U = uniform(N * C, rng);
  const double eps = 1e-5;
  auto loss = [&] {
    std::vector<double> out(N * C), mean(N), rstd(N);
    ref::layernorm_forward<double>(out.data(), mean.data(), rstd.data(), x.data(), g.data(),
                                   b.data(), N, C, eps);
    return dot(out, U);
  };
  std::vector<double> out(N * C), mean(N), rstd(N);
  ref::layernorm_forward<double>(out.data(), mean.data(), rstd.data(), x.data(), g.data(), b.data(),
                                 N, C, eps);
  std::vector<double> dx(N * C, 0.0), dg(C, 0.0), db(C, 0.0);
  ref::layernorm_backward<double>(dx.data(), dg.data(), db.data(), U.data(), x.data(), g.data(),
                                  mean.data(), rstd.data(), N, C);
  expect_fd(loss, &x, dx, "dx C=" + std::to_string(C));
  expect_fd(loss, &g, dg, "dg C=" + std::to_string(C));
  expect_fd(loss, &b, db, "db C=" + std::to_string(C));
}

INSTANTIATE_TEST_SUITE_P(Widths, LayerNormReferenceWidths, ::testing::Values(1, 2, 5, 12, 16, 20, 33));

}  // namespace
}  // namespace wte
