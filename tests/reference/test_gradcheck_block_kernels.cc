// Gradient checks of the transformer block kernels' double references (src/reference/kernels.h: LayerNorm,
// GELU, causal attention softmax, bias) against central finite differences in double
// (ctest -L gradcheck). The float32 Highway kernels are checked against these references in
// tests/simd/test_block_kernels.cc.
//
// As in tests/reference/test_gradcheck_ops.cc: an op y = op(x) is checked through the scalar L = Σ U ⊙ y for
// a fixed random upstream gradient U, so dL/dx is exactly op_backward(U), and
//   numeric = (L(x + eps·e_i) - L(x - eps·e_i)) / (2·eps),  eps = 1e-6
// must satisfy |analytic - numeric| <= 1e-5 + 1e-3·|numeric| at every entry. Every op here is
// smooth (LayerNorm with eps > 0 inside the sqrt, tanh GELU, softmax), so there are no kinks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "src/reference/kernels.h"
#include "tests/gradcheck_util.h"

namespace wte {
namespace {

using test::dot;
using test::expect_fd;
using test::uniform;

// LayerNorm: dinp, dg, db of L = Σ U ⊙ layernorm(x; g, b). Rows with a mean far from 0 and one
// with a small variance (rstd large) included.
TEST(GradcheckBlockKernels, LayerNorm) {
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
TEST(GradcheckBlockKernels, LayerNormBackwardAccumulates) {
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

// GELU over [-6, 6] (both tails and the minimum near -0.75).
TEST(GradcheckBlockKernels, Gelu) {
  const size_t n = 41;
  std::mt19937 rng(23);
  std::vector<double> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = -6.0 + 12.0 * static_cast<double>(i) / (n - 1);
  const std::vector<double> U = uniform(n, rng);
  std::vector<double> dx(n);
  ref::gelu_backward<double>(dx.data(), x.data(), U.data(), n);
  const auto loss = [&] {
    std::vector<double> y(n);
    ref::gelu_forward<double>(y.data(), x.data(), n);
    return dot(y, U);
  };
  expect_fd(loss, &x, dx, "gelu dinp");
}

// Causal softmax of Z = 2 matrices (T = 5) of scores at scale 1/sqrt(4). The masked entries (j > t)
// do not reach the output: their finite differences are 0, and the backward writes 0 there.
TEST(GradcheckBlockKernels, CausalAttentionSoftmax) {
  const size_t Z = 2, T = 5;
  const double scale = 0.5;
  std::mt19937 rng(24);
  std::vector<double> preatt = uniform(Z * T * T, rng, 3.0);
  const std::vector<double> U = uniform(Z * T * T, rng);
  std::vector<double> att(Z * T * T), dpreatt(Z * T * T, 7.0);  // 7: the backward writes every entry
  ref::attention_softmax_forward<double>(att.data(), preatt.data(), Z, T, scale);
  ref::attention_softmax_backward<double>(dpreatt.data(), U.data(), att.data(), Z, T, scale);
  const auto loss = [&] {
    std::vector<double> a(Z * T * T);
    ref::attention_softmax_forward<double>(a.data(), preatt.data(), Z, T, scale);
    return dot(a, U);
  };
  expect_fd(loss, &preatt, dpreatt, "softmax dpreatt");
  for (size_t r = 0; r < Z * T; ++r)
    for (size_t j = r % T + 1; j < T; ++j) EXPECT_EQ(dpreatt[r * T + j], 0.0) << r << "," << j;
  // Each live row of att sums to 1.
  for (size_t r = 0; r < Z * T; ++r) {
    double sum = 0;
    for (size_t j = 0; j < T; ++j) sum += att[r * T + j];
    EXPECT_NEAR(sum, 1.0, 1e-15) << "row " << r;
  }
}

// Bias of a linear layer y = x·w + bias (x (N,IC), w (IC,OC)): dbias = Σ_n U[n,:], accumulated.
TEST(GradcheckBlockKernels, Bias) {
  const size_t N = 6, IC = 3, OC = 5;
  std::mt19937 rng(25);
  const std::vector<double> x = uniform(N * IC, rng), w = uniform(IC * OC, rng),
                            U = uniform(N * OC, rng);
  std::vector<double> bias = uniform(OC, rng);
  std::vector<double> dbias(OC, 0.0);
  ref::bias_backward<double>(dbias.data(), U.data(), N, OC);
  const auto loss = [&] {
    std::vector<double> y(N * OC);
    for (size_t n = 0; n < N; ++n)
      for (size_t o = 0; o < OC; ++o) {
        double s = bias[o];
        for (size_t i = 0; i < IC; ++i) s += x[n * IC + i] * w[i * OC + o];
        y[n * OC + o] = s;
      }
    return dot(y, U);
  };
  expect_fd(loss, &bias, dbias, "dbias");
}

}  // namespace
}  // namespace wte
