// Causal attention softmax, forward and backward, Highway with dynamic dispatch. Contracts and
// shapes: include/wte/kernels.h; scalar references: ref::attention_softmax_forward/backward in
// simd/reference.h.
//
// Row t of each (T,T) matrix has t + 1 live entries (j <= t). The kernels read only those, in full
// vectors and then one-lane steps (never a vector that reaches past j = t, so the masked entries
// may hold anything, NaN included), and write the masked entries as zeros in the same visit of the
// row: the causal mask costs no extra pass and no -inf fill, and the scores' GEMM may leave the
// upper triangle unwritten.
//
// Forward, per row (its t + 1 scores stay in L1 across the passes):
//   mx   = max_{j<=t} scale·p[j]                            exact (any order)
//   a[j] = exp(scale·p[j] - mx), S = Σ_{j<=t} a[j]          hn::Exp (1 ulp), lane-wise sum
//   a[j] = a[j] / S;  a[j] = 0 for j > t
// Backward, per row:
//   dot   = Σ_{j<=t} a[j]·da[j]                              lane-wise sum
//   dp[j] = (scale·a[j])·(da[j] - dot);  dp[j] = 0 for j > t  the reference's order
// Not bit-identical to the references (Exp, lane-wise sums); tests/test_block_kernels.cc derives
// and checks the error bounds. Rows are independent: any thread count gives the same bits.

#include <cstddef>

#include "wte/kernels.h"

// foreach_target.h must come before every other Highway header.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "simd/loops-inl.h"  // ForEachVector, SumOver, kParallelMinFloats
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace wte {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Writes zeros to row[j] for j in [begin, end).
HWY_INLINE void FillZeros(float* row, size_t begin, size_t end) {
  ForEachVector(end - begin, [&](auto d, size_t i) { hn::StoreU(hn::Zero(d), d, row + begin + i); });
}

// max_{j < len} scale·p[j], len >= 1.
HWY_INLINE float ScaledRowMax(const float* p, size_t len, float scale) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  float mx = scale * p[0];
  size_t j = 0;
  if (len >= L) {
    const auto vscale = hn::Set(d, scale);
    auto vmax = hn::Mul(vscale, hn::LoadU(d, p));
    for (j = L; j + L <= len; j += L) vmax = hn::Max(vmax, hn::Mul(vscale, hn::LoadU(d, p + j)));
    mx = hn::GetLane(hn::MaxOfLanes(d, vmax));
  }
  for (; j < len; ++j) mx = scale * p[j] > mx ? scale * p[j] : mx;
  return mx;
}

void AttentionSoftmaxForward(float* att, const float* preatt, size_t Z, size_t T, float scale) {
  const size_t rows = Z * T;
  // att may alias preatt: every pass reads an element before (or as) it writes it.
#pragma omp parallel for schedule(static) if (rows * T >= 2 * kParallelMinFloats)
  for (size_t r = 0; r < rows; ++r) {
    const size_t len = r % T + 1;  // live entries j <= t
    const float* p = preatt + r * T;
    float* a = att + r * T;
    const float mx = ScaledRowMax(p, len, scale);
    const float sum = SumOver(len, [&](auto d, size_t j) {
      const auto e = hn::Exp(d, hn::Sub(hn::Mul(hn::Set(d, scale), hn::LoadU(d, p + j)),
                                        hn::Set(d, mx)));
      hn::StoreU(e, d, a + j);
      return e;
    });
    ForEachVector(len, [&](auto d, size_t j) {
      hn::StoreU(hn::Div(hn::LoadU(d, a + j), hn::Set(d, sum)), d, a + j);
    });
    FillZeros(a, len, T);
  }
}

void AttentionSoftmaxBackward(float* dpreatt, const float* datt, const float* att, size_t Z,
                              size_t T, float scale) {
  const size_t rows = Z * T;
  // dpreatt may alias datt: each element of datt is read before (or as) it is overwritten.
#pragma omp parallel for schedule(static) if (rows * T >= 2 * kParallelMinFloats)
  for (size_t r = 0; r < rows; ++r) {
    const size_t len = r % T + 1;
    const float* da = datt + r * T;
    const float* a = att + r * T;
    float* dp = dpreatt + r * T;
    const float dot = SumOver(
        len, [&](auto d, size_t j) { return hn::Mul(hn::LoadU(d, a + j), hn::LoadU(d, da + j)); });
    ForEachVector(len, [&](auto d, size_t j) {
      const auto scaled_a = hn::Mul(hn::Set(d, scale), hn::LoadU(d, a + j));
      hn::StoreU(hn::Mul(scaled_a, hn::Sub(hn::LoadU(d, da + j), hn::Set(d, dot))), d, dp + j);
    });
    FillZeros(dp, len, T);
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace wte
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wte {

HWY_EXPORT(AttentionSoftmaxForward);
HWY_EXPORT(AttentionSoftmaxBackward);

void attention_softmax_forward(float* att, const float* preatt, size_t Z, size_t T, float scale) {
  HWY_DYNAMIC_DISPATCH(AttentionSoftmaxForward)(att, preatt, Z, T, scale);
}

void attention_softmax_backward(float* dpreatt, const float* datt, const float* att, size_t Z,
                                size_t T, float scale) {
  HWY_DYNAMIC_DISPATCH(AttentionSoftmaxBackward)(dpreatt, datt, att, Z, T, scale);
}

}  // namespace wte
#endif  // HWY_ONCE
