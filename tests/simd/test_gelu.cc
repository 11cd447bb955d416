// GPT-2's tanh GELU (simd/gelu.cc: gelu_forward, gelu_backward; contracts in include/wte/kernels.h)
// and its double reference (src/reference/kernels.h):
//  - the float32 kernel on every Highway target compiled into this binary and supported by this CPU
//    (one parameterized instance per target) against an accurate double rewriting of GELU
//    (GeluParts), within an error bound derived operation by operation (the bounds' comments), at
//    sizes around the vector widths inside NaN guard bands; exact values at special points.
//  - the double reference against central finite differences in double (tests/gradcheck_util.h:
//    eps 1e-6, pass iff |analytic - numeric| <= 1e-5 + 1e-3·|numeric|; tanh GELU is smooth).
// The derivations are first order in the unit roundoff u = 2^-24; kSecondOrder covers the rest.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
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
class GeluKernelTest : public test::TargetTest {};

// ================================================================================================
// gelu_forward / gelu_backward

// GELU in double, accurate for every x: with u = sqrt(2/pi)·(x + 0.044715·x³), e = exp(-2|u|),
// r = 1/(1 + e), σ = σ(2u) = r (u >= 0) or e·r (u < 0), σ(1 - σ) = e·r² (no cancellation), and
//   gelu(x) = x·σ,  gelu'(x) = σ + q,  q = 2x·σ(1 - σ)·sqrt(2/pi)·(1 + 3·0.044715·x²).
// This is GPT-2's tanh form rewritten (0.5·(1 + tanh u) = σ(2u)). The reference's form
// 0.5·x·(1 + tanh u) cancels for negative x even in double (at x = -6, 1 + tanh u ≈ 4e-15 carries
// an absolute error of 2^-53), so the float kernel, which is more accurate than that there, is
// measured against this form, and the double reference is checked against it by its own bound:
//   forward  |ref - exact| <= 4·2^-53·|x|
//   backward |ref - exact| <= 4·2^-53·|dout|·(1 + |x|)·(1 + |x|·sqrt(2/pi)·(1 + 3·0.044715·x²))
// (tanh rounds to 1 ulp <= 2^-53 near ±1, 1 + t and 1 - t² add a rounding each; the products add
// relative roundings, covered by the factor 4).
struct GeluExact {
  double z, sigma, q, slope;
};
GeluExact GeluParts(double x) {
  const double k = 0.79788456080286535588, u = k * (x + 0.044715 * x * x * x);
  const double e = std::exp(-2 * std::abs(u)), r = 1 / (1 + e);
  const double sigma = u >= 0 ? r : e * r;
  const double slope = k * (1 + 3 * 0.044715 * x * x);
  return {2 * std::abs(u), sigma, 2 * x * e * r * r * slope, slope};
}
double GeluForwardReferenceError(double x) { return 4 * 0x1p-53 * std::abs(x); }
double GeluBackwardReferenceError(double x, double dout) {
  return 4 * 0x1p-53 * std::abs(dout) * (1 + std::abs(x)) * (1 + std::abs(x) * GeluParts(x).slope);
}

// Error bounds of simd/gelu.cc against the exact values, with z = 2|u|:
//   u_f: the constants (u each), ((c·x)·x)·x (3u), x + cubic (u, same signs), k·(...) (u): 7u
//   e = Exp(-z_f): the argument's error 7u·z plus 1 ulp (2u):   ε_e = (7z + 2)·u (relative)
//   r = 1/(1 + e): ε_e + 2u;  σ = r or e·r: 2ε_e + 3u;  e·r² = σ(1 - σ): 3ε_e + 6u
//   forward  fl(x·σ):                                  (2ε_e + 4u)·|gelu(x)|
//   slope = fl(k·fl(1 + fl(fl(3c·x)·x))): 6u;  q = fl(fl(2x·e·r²)·slope): 3ε_e + 14u
//   backward fl(dout·fl(σ + q)):  |dout|·((3ε_e + 14u)·(σ + |q|) + u·|σ + q|) + u·|dinp|
double GeluForwardBound(double x, double want) {
  const double eps_e = (7 * GeluParts(x).z + 2) * kU;
  return kSecondOrder * (2 * eps_e + 4 * kU) * std::abs(want) + kTiny;
}
double GeluBackwardBound(double x, double dout, double want) {
  const GeluExact p = GeluParts(x);
  const double eps_e = (7 * p.z + 2) * kU;
  return kSecondOrder * (std::abs(dout) * ((3 * eps_e + 14 * kU) * (p.sigma + std::abs(p.q)) +
                                           kU * std::abs(p.sigma + p.q)) +
                         kU * std::abs(want)) +
         kTiny;
}

// x in [-12, 12] (below -10, gelu(x) underflows to about 0), plus hand-picked points: 0, ±0,
// ±1e-30 (x³ underflows), gelu's minimum near -0.75, ±1, and ±40 (exp(-2|u|) underflows to 0).
void FillGeluInputs(float* x, size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-12.0f, 12.0f);
  const float special[] = {0.0f, -0.0f, 1e-30f, -1e-30f, -0.7517916f, 1.0f, -1.0f, 40.0f, -40.0f};
  for (size_t i = 0; i < n; ++i) x[i] = i % 7 == 3 ? special[(i / 7) % 9] : dist(rng);
}

TEST_P(GeluKernelTest, ForwardWithinBoundOfDoubleReference) {
  std::mt19937 rng(5);
  for (size_t n : AwkwardSizes(100003)) {
    GuardedBuffer inp(n), out(n);
    FillGeluInputs(inp.data(), n, rng);
    gelu_forward(out.data(), inp.data(), n);
    EXPECT_TRUE(out.guards_intact() && inp.guards_intact()) << target() << " n=" << n;
    const std::vector<double> x = ToDouble(inp.data(), n);
    std::vector<double> want(n), bound(n), reference(n), reference_bound(n);
    ref::gelu_forward<double>(reference.data(), x.data(), n);
    for (size_t i = 0; i < n; ++i) {
      want[i] = x[i] * GeluParts(x[i]).sigma;
      bound[i] = GeluForwardBound(x[i], want[i]);
      reference_bound[i] = GeluForwardReferenceError(x[i]) + kTiny;
    }
    ExpectWithin(out.data(), want, bound, n, target() + " n=" + std::to_string(n));
    for (size_t i = 0; i < n; ++i)
      ASSERT_NEAR(reference[i], want[i], reference_bound[i]) << "ref::gelu_forward<double>, x = " << x[i];

    // In place (out aliases inp): the same bits.
    const std::vector<float> separate = out.to_vector();
    gelu_forward(inp.data(), inp.data(), n);
    EXPECT_TRUE(BitIdentical(inp.data(), separate.data(), n)) << target() << " n=" << n << " in place";
  }
}

TEST_P(GeluKernelTest, BackwardWithinBoundOfDoubleReference) {
  std::mt19937 rng(6);
  for (size_t n : AwkwardSizes(100003)) {
    GuardedBuffer inp(n), dout(n), dinp(n);
    FillGeluInputs(inp.data(), n, rng);
    fill_general(dout.data(), n, rng);
    gelu_backward(dinp.data(), inp.data(), dout.data(), n);
    EXPECT_TRUE(dinp.guards_intact() && inp.guards_intact() && dout.guards_intact())
        << target() << " n=" << n;
    const std::vector<double> x = ToDouble(inp.data(), n), dy = ToDouble(dout.data(), n);
    std::vector<double> want(n), bound(n), reference(n);
    ref::gelu_backward<double>(reference.data(), x.data(), dy.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const GeluExact p = GeluParts(x[i]);
      want[i] = dy[i] * (p.sigma + p.q);
      bound[i] = GeluBackwardBound(x[i], dy[i], want[i]);
    }
    ExpectWithin(dinp.data(), want, bound, n, target() + " n=" + std::to_string(n));
    for (size_t i = 0; i < n; ++i)
      ASSERT_NEAR(reference[i], want[i], GeluBackwardReferenceError(x[i], dy[i]) + kTiny)
          << "ref::gelu_backward<double>, x = " << x[i];

    // In place (dinp aliases dout): the same bits.
    const std::vector<float> separate = dinp.to_vector();
    gelu_backward(dout.data(), inp.data(), dout.data(), n);
    EXPECT_TRUE(BitIdentical(dout.data(), separate.data(), n)) << target() << " n=" << n << " in place";
  }
}

// gelu(0) = 0 and gelu'(0) = 1/2 exactly (exp(0) = 1, r = 1/2); gelu(x) = x exactly and
// gelu'(x) = 1 once exp(-2u) underflows to 0 (x = 20: 2u > 260), gelu(-20) = -0 and gelu'(-20) = -0.
TEST_P(GeluKernelTest, ExactValues) {
  // Length 37: a vector body and a tail on every target, the special values in both.
  const size_t n = 37;
  std::vector<float> x(n), y(n), dy(n), dx(n);
  std::mt19937 rng(7);
  fill_exact(dy.data(), n, rng);
  const float values[4] = {0.0f, 20.0f, -20.0f, 1000.0f};
  for (size_t i = 0; i < n; ++i) x[i] = values[i % 4];
  gelu_forward(y.data(), x.data(), n);
  gelu_backward(dx.data(), x.data(), dy.data(), n);
  for (size_t i = 0; i < n; ++i) {
    const float want_y = x[i] > 0 ? x[i] : 0.0f;
    const float want_dx = x[i] == 0 ? 0.5f * dy[i] : (x[i] > 0 ? dy[i] : 0.0f);
    EXPECT_EQ(y[i], want_y) << target() << " gelu(" << x[i] << ") at " << i;
    EXPECT_EQ(dx[i], want_dx) << target() << " gelu'(" << x[i] << ")·" << dy[i] << " at " << i;
  }
}

WTE_INSTANTIATE_ON_EVERY_TARGET(GeluKernelTest);

// ================================================================================================
// The double reference against finite differences

// GELU over [-6, 6] (both tails and the minimum near -0.75).
TEST(GeluReference, MatchesFiniteDifferences) {
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

}  // namespace
}  // namespace wte
