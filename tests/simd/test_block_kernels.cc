// Tests of the transformer block kernels (simd/attention.cc, elementwise.cc; LayerNorm's are in
// tests/simd/test_layernorm.cc, GELU's in tests/simd/test_gelu.cc)
// against their scalar references in src/reference/kernels.h, on every Highway target compiled into this
// binary and supported by this CPU (one parameterized instance per target: AVX3, AVX2, SSE4,
// SSSE3, SCALAR here).
//
// Sizes: {1, 3, L-1, L, L+1, 3L, 8L+2} for L = 4, 8, 16 (the float lanes of SSE, AVX2, AVX3), and
// 257. Buffers start 4 bytes past a 64-byte boundary inside NaN guard bands (tests/simd_test_util.h):
// a kernel that reads a guard turns an output into NaN, one that writes a guard changes its bits.
// The masked entries (j > t) of the attention inputs hold NaN too, so a kernel that reads one
// fails.
//
// residual_forward and bias_backward are bit-identical to the float reference. The other kernels
// sum lane-wise and use Highway's Exp, so they are compared with the double reference (run on the
// same float inputs) within an error bound
// derived, operation by operation, in each bound's comment. The derivations are first order in the unit roundoff u = 2^-24 (a rounding is
// x(1 + δ), |δ| <= u; a sum of n terms in any order errs by at most n·u·Σ|terms|); kSecondOrder
// covers the dropped O(n²u²) terms (< 1e-4 relative at these sizes).

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "src/reference/kernels.h"
#include "tests/simd_test_util.h"
#include "wte/kernels.h"

namespace wte {
namespace {

using test::AtOneAndTwoThreads;
using test::BitIdentical;
using test::fill_exact;
using test::fill_general;
using test::GuardedBuffer;

using test::AwkwardSizes;
using test::ExpectWithin;
using test::kSecondOrder;
using test::kTiny;
using test::kU;
using test::ToDouble;

// Forces one Highway target for the duration of each test; resets it and the thread count after.
class BlockKernelTest : public test::TargetTest {};

// ================================================================================================
// attention_softmax_forward / attention_softmax_backward

// Fills the live entries (j <= t) of Z (T,T) score matrices with N(0, sd²) and the masked entries
// (j > t) with `masked`. NaN catches a read through any arithmetic but exp: Highway's Exp returns 0
// for NaN (its range check fails), which is exactly what a masked score contributes. So the forward
// test also poisons them with +1e30: read, it would become the row's max and zero every live entry.
void FillCausal(float* x, size_t Z, size_t T, std::mt19937& rng, float sd,
                float masked = GuardedBuffer::guard_value()) {
  std::normal_distribution<float> dist(0.0f, sd);
  for (size_t r = 0; r < Z * T; ++r)
    for (size_t j = 0; j < T; ++j) x[r * T + j] = j <= r % T ? dist(rng) : masked;
}

// Error bound of a live entry of the causal softmax against exact arithmetic, from the kernel's
// operations on row t (len = t + 1 live entries, y_j = scale·p_j exact, mx = max_j y_j):
//   arg_j = fl(fl(scale·p_j) - mx_f): mx_f is one of the rounded products (its error shifts every
//     argument alike and cancels in the ratio); the rest errs by u·(|y_j| + |arg_j|)
//   e_j = Exp(arg_j): relative ρ_j = u·(|y_j| + |arg_j|) + 2u  (1 ulp)
//   S = Σ e_j lane-wise: relative max_k ρ_k + len·u;  a_j = fl(e_j / S): one more u
//   |a_f - a| <= (ρ_j + max_k ρ_k + (len + 1)·u)·a_j
std::vector<double> SoftmaxBounds(const double* p, const double* want, size_t len, double scale) {
  double mx = scale * p[0];
  for (size_t j = 1; j < len; ++j) mx = std::max(mx, scale * p[j]);
  std::vector<double> rho(len), bound(len);
  double rho_max = 0;
  for (size_t j = 0; j < len; ++j) {
    rho[j] = kU * (std::abs(scale * p[j]) + std::abs(scale * p[j] - mx)) + 2 * kU;
    rho_max = std::max(rho_max, rho[j]);
  }
  for (size_t j = 0; j < len; ++j)
    bound[j] = kSecondOrder * (rho[j] + rho_max + (len + 1) * kU) * want[j] + kTiny;
  return bound;
}

// Every masked entry (j > t) of Z (T,T) rows is +0.
void ExpectMaskedZeros(const float* x, size_t Z, size_t T, const std::string& what) {
  size_t bad = 0;
  for (size_t r = 0; r < Z * T; ++r)
    for (size_t j = r % T + 1; j < T; ++j)
      if (std::bit_cast<uint32_t>(x[r * T + j]) != 0 && ++bad <= 3)
        ADD_FAILURE() << what << ": row " << r << " j=" << j << " is " << x[r * T + j] << ", want +0";
  EXPECT_EQ(bad, 0u) << what;
}

TEST_P(BlockKernelTest, AttentionSoftmaxForwardWithinBoundOfDoubleReference) {
  std::mt19937 rng(8);
  const size_t Z = 2;
  const float scale = 0.125f;  // 1/sqrt(64)
  for (size_t T : AwkwardSizes()) for (float masked : {GuardedBuffer::guard_value(), 1e30f}) {
    GuardedBuffer preatt(Z * T * T), att(Z * T * T);
    FillCausal(preatt.data(), Z, T, rng, 16.0f, masked);  // scale·p ~ N(0, 2²): exp spans ~e^±8
    attention_softmax_forward(att.data(), preatt.data(), Z, T, scale);
    const std::string where =
        target() + " T=" + std::to_string(T) + " masked=" + std::to_string(masked);
    EXPECT_TRUE(att.guards_intact() && preatt.guards_intact()) << where;
    ExpectMaskedZeros(att.data(), Z, T, where);

    const std::vector<double> p = ToDouble(preatt.data(), Z * T * T);
    std::vector<double> want(Z * T * T);
    ref::attention_softmax_forward<double>(want.data(), p.data(), Z, T, scale);
    for (size_t r = 0; r < Z * T; ++r) {
      const size_t len = r % T + 1;
      const std::vector<double> bound = SoftmaxBounds(p.data() + r * T, want.data() + r * T, len, scale);
      ExpectWithin(att.data() + r * T, std::vector<double>(want.begin() + r * T, want.begin() + r * T + len),
                   bound, len, where + " row " + std::to_string(r));
    }

    // In place (att aliases preatt): the same bits, zeros included.
    const std::vector<float> separate = att.to_vector();
    attention_softmax_forward(preatt.data(), preatt.data(), Z, T, scale);
    EXPECT_TRUE(BitIdentical(preatt.data(), separate.data(), Z * T * T)) << where << " in place";
  }
}

// A row of equal scores: every argument is exactly 0, exp(0) = 1, S = t + 1 (an exact integer), so
// every live entry is exactly fl(1/(t + 1)) on every target.
TEST_P(BlockKernelTest, AttentionSoftmaxUniformRowIsExact) {
  const size_t Z = 3, T = 37;
  std::vector<float> preatt(Z * T * T), att(Z * T * T);
  for (size_t r = 0; r < Z * T; ++r)
    for (size_t j = 0; j < T; ++j)
      preatt[r * T + j] = j <= r % T ? 0.7f * static_cast<float>(r / T + 1) : GuardedBuffer::guard_value();
  attention_softmax_forward(att.data(), preatt.data(), Z, T, 0.125f);
  for (size_t r = 0; r < Z * T; ++r) {
    const size_t t = r % T;
    const float want = 1.0f / static_cast<float>(t + 1);
    for (size_t j = 0; j <= t; ++j)
      ASSERT_EQ(att[r * T + j], want) << target() << " row " << r << " j=" << j;
  }
  ExpectMaskedZeros(att.data(), Z, T, target());
}

// A row's bits depend only on its live entries, never on T: the same scores in matrices of T = 20
// and T = 40 (and 70) give bit-identical rows t < 20, forward and backward. (A kernel whose tail
// handling changed with T would break the model's causality test: appending tokens must leave
// every earlier row of every layer bit-identical.)
TEST_P(BlockKernelTest, AttentionSoftmaxRowsDoNotDependOnT) {
  std::mt19937 rng(14);
  const size_t T0 = 20;
  const float scale = 0.125f;
  std::vector<float> scores(T0 * T0), upstream(T0 * T0);
  FillCausal(scores.data(), 1, T0, rng, 16.0f);
  FillCausal(upstream.data(), 1, T0, rng, 1.0f);
  std::vector<float> att0(T0 * T0), datt0(T0 * T0);
  attention_softmax_forward(att0.data(), scores.data(), 1, T0, scale);
  attention_softmax_backward(datt0.data(), upstream.data(), att0.data(), 1, T0, scale);
  for (size_t T : {40, 70}) {
    std::vector<float> p(T * T, GuardedBuffer::guard_value()), u(T * T, GuardedBuffer::guard_value());
    for (size_t t = 0; t < T0; ++t)
      for (size_t j = 0; j <= t; ++j) {
        p[t * T + j] = scores[t * T0 + j];
        u[t * T + j] = upstream[t * T0 + j];
      }
    for (size_t t = T0; t < T; ++t)
      for (size_t j = 0; j <= t; ++j) p[t * T + j] = u[t * T + j] = 0.5f;
    std::vector<float> att(T * T), datt(T * T);
    attention_softmax_forward(att.data(), p.data(), 1, T, scale);
    attention_softmax_backward(datt.data(), u.data(), att.data(), 1, T, scale);
    for (size_t t = 0; t < T0; ++t) {
      EXPECT_TRUE(BitIdentical(att.data() + t * T, att0.data() + t * T0, t + 1))
          << target() << " T=" << T << " forward row " << t;
      EXPECT_TRUE(BitIdentical(datt.data() + t * T, datt0.data() + t * T0, t + 1))
          << target() << " T=" << T << " backward row " << t;
    }
  }
}

// Error bound of softmax backward against exact arithmetic (att, datt are the same float inputs):
//   dot_f = Σ fl(a·da) lane-wise:          e_dot = (len + 1)·u·Σ|a·da|
//   diff = fl(da - dot_f):                  e_dot + u·|da - dot|
//   dp = fl(fl(scale·a)·diff):              |scale·a|·(e_dot + u·|da - dot|) + 2u·|dp|
TEST_P(BlockKernelTest, AttentionSoftmaxBackwardWithinBoundOfDoubleReference) {
  std::mt19937 rng(9);
  const size_t Z = 2;
  const float scale = 0.125f;
  for (size_t T : AwkwardSizes()) {
    GuardedBuffer preatt(Z * T * T), att(Z * T * T), datt(Z * T * T), dpreatt(Z * T * T);
    FillCausal(preatt.data(), Z, T, rng, 16.0f);
    attention_softmax_forward(att.data(), preatt.data(), Z, T, scale);
    FillCausal(datt.data(), Z, T, rng, 1.0f);
    // The backward reads neither masked datt nor masked att entries: NaN in both.
    for (size_t r = 0; r < Z * T; ++r)
      for (size_t j = r % T + 1; j < T; ++j) att[r * T + j] = GuardedBuffer::guard_value();
    attention_softmax_backward(dpreatt.data(), datt.data(), att.data(), Z, T, scale);
    const std::string where = target() + " T=" + std::to_string(T);
    EXPECT_TRUE(dpreatt.guards_intact() && datt.guards_intact() && att.guards_intact()) << where;
    ExpectMaskedZeros(dpreatt.data(), Z, T, where);

    const std::vector<double> a = ToDouble(att.data(), Z * T * T), da = ToDouble(datt.data(), Z * T * T);
    std::vector<double> want(Z * T * T);
    ref::attention_softmax_backward<double>(want.data(), da.data(), a.data(), Z, T, scale);
    for (size_t r = 0; r < Z * T; ++r) {
      const size_t len = r % T + 1;
      double dot = 0, sum_abs = 0;
      for (size_t j = 0; j < len; ++j) {
        dot += a[r * T + j] * da[r * T + j];
        sum_abs += std::abs(a[r * T + j] * da[r * T + j]);
      }
      const double e_dot = (len + 1) * kU * sum_abs;
      std::vector<double> bound(len);
      for (size_t j = 0; j < len; ++j)
        bound[j] = kSecondOrder * (std::abs(scale * a[r * T + j]) *
                                       (e_dot + kU * std::abs(da[r * T + j] - dot)) +
                                   2 * kU * std::abs(want[r * T + j])) +
                   kTiny;
      ExpectWithin(dpreatt.data() + r * T,
                   std::vector<double>(want.begin() + r * T, want.begin() + r * T + len), bound, len,
                   where + " row " + std::to_string(r));
    }

    // In place (dpreatt aliases datt): the same bits.
    const std::vector<float> separate = dpreatt.to_vector();
    attention_softmax_backward(datt.data(), datt.data(), att.data(), Z, T, scale);
    EXPECT_TRUE(BitIdentical(datt.data(), separate.data(), Z * T * T)) << where << " in place";
  }
}

// Uniform attention over t + 1 entries with datt = [1, 0, ..., 0]: dot = 1/(t+1), and
// dp[0] = scale·a·(1 - a), dp[j>0] = -scale·a², a = 1/(t+1). With t + 1 a power of two (and scale
// 1/8) every quantity is exact in binary.
TEST_P(BlockKernelTest, AttentionSoftmaxBackwardExactForUniformRows) {
  const size_t T = 64;
  std::vector<float> att(T * T), datt(T * T, 0.0f), dpreatt(T * T);
  for (size_t t = 0; t < T; ++t)
    for (size_t j = 0; j < T; ++j) att[t * T + j] = j <= t ? 1.0f / static_cast<float>(t + 1) : 0.0f;
  for (size_t t = 0; t < T; ++t) datt[t * T] = 1.0f;
  attention_softmax_backward(dpreatt.data(), datt.data(), att.data(), 1, T, 0.125f);
  for (size_t len : {1, 2, 4, 8, 16, 32, 64}) {
    const size_t t = len - 1;
    const float a = 1.0f / static_cast<float>(len);
    EXPECT_EQ(dpreatt[t * T], 0.125f * a * (1.0f - a)) << target() << " t=" << t;
    for (size_t j = 1; j <= t; ++j) EXPECT_EQ(dpreatt[t * T + j], -0.125f * a * a) << target() << " t=" << t;
  }
}

// ================================================================================================
// residual_forward, bias_backward: bit-identical to the float reference

TEST_P(BlockKernelTest, ResidualForwardMatchesReferenceBitForBit) {
  std::mt19937 rng(10);
  for (size_t n : AwkwardSizes(100003)) {
    GuardedBuffer a(n), b(n), out(n);
    fill_general(a.data(), n, rng);
    fill_general(b.data(), n, rng, 3.0f);
    residual_forward(out.data(), a.data(), b.data(), n);
    std::vector<float> want(n);
    ref::residual_forward<float>(want.data(), a.data(), b.data(), n);
    EXPECT_TRUE(BitIdentical(out.data(), want.data(), n)) << target() << " n=" << n;
    EXPECT_TRUE(out.guards_intact() && a.guards_intact() && b.guards_intact()) << target() << " n=" << n;
    // out aliasing a, then b.
    const std::vector<float> a0 = a.to_vector(), b0 = b.to_vector();
    residual_forward(a.data(), a.data(), b.data(), n);
    EXPECT_TRUE(BitIdentical(a.data(), want.data(), n)) << target() << " n=" << n << " out = a";
    std::copy(a0.begin(), a0.end(), a.data());
    residual_forward(b.data(), a.data(), b.data(), n);
    EXPECT_TRUE(BitIdentical(b.data(), want.data(), n)) << target() << " n=" << n << " out = b";
  }
}

TEST_P(BlockKernelTest, BiasBackwardMatchesReferenceBitForBit) {
  std::mt19937 rng(11);
  std::vector<std::pair<size_t, size_t>> shapes;  // (N, OC)
  for (size_t OC : AwkwardSizes()) shapes.emplace_back(5, OC);
  for (size_t N : AwkwardSizes()) shapes.emplace_back(N, 3);
  shapes.emplace_back(300, 257);  // several column tasks, above the parallel threshold
  for (auto [N, OC] : shapes) {
    GuardedBuffer dout(N * OC), dbias(OC);
    fill_general(dout.data(), dout.size(), rng);
    fill_general(dbias.data(), OC, rng);  // accumulates
    std::vector<float> want = dbias.to_vector();
    bias_backward(dbias.data(), dout.data(), N, OC);
    ref::bias_backward<float>(want.data(), dout.data(), N, OC);
    EXPECT_TRUE(BitIdentical(dbias.data(), want.data(), OC)) << target() << " N=" << N << " OC=" << OC;
    EXPECT_TRUE(dbias.guards_intact() && dout.guards_intact()) << target() << " N=" << N << " OC=" << OC;
  }
}

// Multiples of 1/64: every sum is exact, so dbias is the exact column sum.
TEST_P(BlockKernelTest, BiasBackwardExactSums) {
  std::mt19937 rng(12);
  const size_t N = 129, OC = 67;
  std::vector<float> dout(N * OC), dbias(OC, 1.0f);
  fill_exact(dout.data(), N * OC, rng);
  bias_backward(dbias.data(), dout.data(), N, OC);
  for (size_t j = 0; j < OC; ++j) {
    double want = 1.0;
    for (size_t n = 0; n < N; ++n) want += dout[n * OC + j];
    EXPECT_EQ(dbias[j], want) << target() << " j=" << j;
  }
}

// The rows are summed in blocks of gradient_rows_per_block(N), then the blocks: a column whose
// first row is 2^24 and whose other rows are 1 loses every 1 added to 2^24 (2^24 + 1 rounds to
// 2^24, ties to even), so a sum in plain row order gives 2^24, 1023 below the exact 2^24 + 1023.
// In blocks of 16 rows (N 1024: 64 blocks) only the first block's 15 ones are lost: the other 63
// blocks sum to 16 exactly and 2^24 + 16·k is exact, so dbias is 2^24 + 1008. OC 37 covers whole
// vectors and a tail on every target; column j is scaled by 2^-(j % 3) (exact).
TEST_P(BlockKernelTest, BiasBackwardSumsRowBlocksThenTheBlocks) {
  const size_t N = 1024, OC = 37;
  ASSERT_EQ(gradient_rows_per_block(N), 16u);
  std::vector<float> dout(N * OC, 0.0f), dbias(OC, 0.0f);
  for (size_t j = 0; j < OC; ++j) {
    const float scale = std::ldexp(1.0f, -static_cast<int>(j % 3));
    dout[j] = 16777216.0f * scale;
    for (size_t n = 1; n < N; ++n) dout[n * OC + j] = scale;
  }
  bias_backward(dbias.data(), dout.data(), N, OC);
  for (size_t j = 0; j < OC; ++j) {
    const float scale = std::ldexp(1.0f, -static_cast<int>(j % 3));
    EXPECT_EQ(dbias[j], (16777216.0f + 1008.0f) * scale) << target() << " j=" << j;
  }
}

TEST_P(BlockKernelTest, BiasBackwardSameBitsForOneAndTwoThreads) {
  std::mt19937 rng(13);
  for (auto [N, OC] : {std::pair<size_t, size_t>{300, 257}, {2048, 768}, {97, 1030}}) {
    std::vector<float> dout(N * OC);
    fill_general(dout.data(), dout.size(), rng);
    const auto dbias = AtOneAndTwoThreads([&](int) {
      std::vector<float> d(OC, 0.5f);
      bias_backward(d.data(), dout.data(), N, OC);
      return d;
    });
    EXPECT_TRUE(BitIdentical(dbias[1].data(), dbias[0].data(), OC)) << target() << " N=" << N << " OC=" << OC;
  }
}

WTE_INSTANTIATE_ON_EVERY_TARGET(BlockKernelTest);

}  // namespace
}  // namespace wte
