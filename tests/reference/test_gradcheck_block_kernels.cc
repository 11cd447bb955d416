// Gradient checks of the transformer block kernels' double references (src/reference/kernels.h:
// causal attention softmax, bias) against central finite differences in double (ctest -L
// gradcheck); LayerNorm's are in tests/simd/test_layernorm.cc, GELU's in tests/simd/test_gelu.cc.
// The float32 Highway kernels are checked against these references in their test files.
//
// As in tests/reference/test_gradcheck_ops.cc: an op y = op(x) is checked through the scalar L = Σ U ⊙ y for
// a fixed random upstream gradient U, so dL/dx is exactly op_backward(U), and
//   numeric = (L(x + eps·e_i) - L(x - eps·e_i)) / (2·eps),  eps = 1e-6
// must satisfy |analytic - numeric| <= 1e-5 + 1e-3·|numeric| at every entry. Every op here is
// smooth (softmax), so there are no kinks.
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
