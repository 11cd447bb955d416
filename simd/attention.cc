// Causal attention softmax, forward and backward, Highway with dynamic dispatch. Contracts and
// shapes: include/wte/kernels.h; scalar references: ref::attention_softmax_forward/backward in
// src/reference/kernels.h.
//
// Row t of each (T,T) matrix has t + 1 live entries (j <= t). The kernels use only those: the last
// partial vector of live entries is loaded whole when it fits in the row, and its lanes past t are
// discarded (IfThenElseZero), so the masked entries may hold anything, NaN included. The masked
// entries are written as zeros in the same visit of the row: the causal mask costs no extra pass
// and no -inf fill, and the scores' GEMM may leave the upper triangle unwritten.
//
// Forward, per row (its t + 1 scores stay in L1 across the passes):
//   mx   = max_{j<=t} scale·p[j]                            exact (any order)
//   a[j] = exp(scale·p[j] - mx), S = Σ_{j<=t} a[j]          hn::Exp (1 ulp; simd/exp-inl.h), lane-wise sum
//   a[j] = a[j] / S;  a[j] = 0 for j > t
// Backward, per row:
//   dot   = Σ_{j<=t} a[j]·da[j]                              lane-wise sum
//   dp[j] = (scale·a[j])·(da[j] - dot);  dp[j] = 0 for j > t  the reference's order
// Not bit-identical to the references (Exp, lane-wise sums); tests/simd/test_block_kernels.cc derives
// and checks the error bounds. Rows are independent: any thread count gives the same bits.

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "wte/kernels.h"

// foreach_target.h must come before every other Highway header.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "simd/bf16-inl.h"   // StoreBf16, ConvertRowToBf16 (optional bf16 copies)
#include "simd/exp-inl.h"    // ExpNonPositive (hn::Exp's bits, fewer instructions)
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

// How a row's live entries j < len split: `body` entries in full vectors, then `len - body` tail
// entries, either in one masked vector (when that vector ends inside the row: its lanes past t are
// entries the row zeroes anyway) or one lane at a time (the last rows of a matrix). Both give the
// same bits: every tail term is an elementwise result, and tail terms join a row sum one by one in
// increasing j after the body's lanes. So a row's bits depend on its own entries only, never on T:
// appending tokens changes no earlier row (the causality test).
struct RowSplit {
  size_t body, len;
  bool vector_tail;
  RowSplit(size_t live, size_t T, size_t L)
      : body(live / L * L), len(live), vector_tail(live % L != 0 && live / L * L + L <= T) {}
  size_t written() const { return vector_tail ? body + hn::Lanes(hn::ScalableTag<float>()) : len; }
};

void AttentionSoftmaxForward(float* att, const float* preatt, size_t Z, size_t T, float scale,
                             uint16_t* att16) {
  const size_t rows = Z * T;
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 1> d1;
  const size_t L = hn::Lanes(d);
  // att may alias preatt: every pass reads an element before (or as) it writes it.
#pragma omp parallel for schedule(static) if (rows * T >= 2 * kParallelMinFloats)
  for (size_t r = 0; r < rows; ++r) {
    const RowSplit row(r % T + 1, T, L);  // live entries j <= t
    const float* p = preatt + r * T;
    float* a = att + r * T;
    const auto vscale = hn::Set(d, scale);
    // mx = max_{j<=t} scale·p[j] (exact in any order)
    float mx = -HUGE_VALF;
    if (row.body > 0) {
      auto vmax = hn::Mul(vscale, hn::LoadU(d, p));
      for (size_t j = L; j < row.body; j += L) vmax = hn::Max(vmax, hn::Mul(vscale, hn::LoadU(d, p + j)));
      mx = hn::GetLane(hn::MaxOfLanes(d, vmax));
    }
    for (size_t j = row.body; j < row.len; ++j) mx = scale * p[j] > mx ? scale * p[j] : mx;
    // a[j] = exp(scale·p[j] - mx); sum = Σ a[j]
    const auto vmx = hn::Set(d, mx);
    auto vsum = hn::Zero(d);
    for (size_t j = 0; j < row.body; j += L) {
      const auto e = ExpNonPositive(d, hn::Sub(hn::Mul(vscale, hn::LoadU(d, p + j)), vmx));
      hn::StoreU(e, d, a + j);
      vsum = hn::Add(vsum, e);
    }
    float sum = hn::GetLane(hn::SumOfLanes(d, vsum));
    if (row.vector_tail) {
      const auto live = hn::FirstN(d, row.len - row.body);
      const auto e = ExpNonPositive(d, hn::Sub(hn::Mul(vscale, hn::LoadU(d, p + row.body)), vmx));
      hn::StoreU(hn::IfThenElseZero(live, e), d, a + row.body);
    } else {
      for (size_t j = row.body; j < row.len; ++j)
        a[j] = hn::GetLane(ExpNonPositive(d1, hn::Set(d1, scale * p[j] - mx)));
    }
    for (size_t j = row.body; j < row.len; ++j) sum += a[j];
    // a[j] /= sum (the vector tail's zeros stay zeros), then the rest of the row's zeros
    const auto vsum_all = hn::Set(d, sum);
    for (size_t j = 0; j < row.written(); j += L) {
      if (j + L <= row.written()) {
        hn::StoreU(hn::Div(hn::LoadU(d, a + j), vsum_all), d, a + j);
      } else {
        for (size_t i = j; i < row.len; ++i) a[i] /= sum;
      }
    }
    FillZeros(a, row.written(), T);
    if (att16 != nullptr) ConvertRowToBf16(att16 + r * T, a, T);  // while in cache
  }
}

void AttentionSoftmaxBackward(float* dpreatt, const float* datt, const float* att, size_t Z,
                              size_t T, float scale, uint16_t* dpreatt16) {
  const size_t rows = Z * T;
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  // dpreatt may alias datt: each element of datt is read before (or as) it is overwritten.
#pragma omp parallel for schedule(static) if (rows * T >= 2 * kParallelMinFloats)
  for (size_t r = 0; r < rows; ++r) {
    const RowSplit row(r % T + 1, T, L);
    const float* da = datt + r * T;
    const float* a = att + r * T;
    float* dp = dpreatt + r * T;
    // dot = Σ_{j<=t} a[j]·da[j]: the body's lanes, then the tail one by one
    auto vdot = hn::Zero(d);
    for (size_t j = 0; j < row.body; j += L)
      vdot = hn::Add(vdot, hn::Mul(hn::LoadU(d, a + j), hn::LoadU(d, da + j)));
    float dot = hn::GetLane(hn::SumOfLanes(d, vdot));
    for (size_t j = row.body; j < row.len; ++j) dot += a[j] * da[j];
    // dp[j] = (scale·a[j])·(da[j] - dot)
    const auto vscale = hn::Set(d, scale), vdot_all = hn::Set(d, dot);
    const auto grad = [&](size_t j) {
      return hn::Mul(hn::Mul(vscale, hn::LoadU(d, a + j)), hn::Sub(hn::LoadU(d, da + j), vdot_all));
    };
    for (size_t j = 0; j < row.body; j += L) hn::StoreU(grad(j), d, dp + j);
    if (row.vector_tail) {
      hn::StoreU(hn::IfThenElseZero(hn::FirstN(d, row.len - row.body), grad(row.body)), d,
                 dp + row.body);
    } else {
      for (size_t j = row.body; j < row.len; ++j) dp[j] = scale * a[j] * (da[j] - dot);
    }
    FillZeros(dp, row.written(), T);
    if (dpreatt16 != nullptr) ConvertRowToBf16(dpreatt16 + r * T, dp, T);  // while in cache
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

void attention_softmax_forward(float* att, const float* preatt, size_t Z, size_t T, float scale,
                               uint16_t* att16) {
  HWY_DYNAMIC_DISPATCH(AttentionSoftmaxForward)(att, preatt, Z, T, scale, att16);
}

void attention_softmax_backward(float* dpreatt, const float* datt, const float* att, size_t Z,
                                size_t T, float scale, uint16_t* dpreatt16) {
  HWY_DYNAMIC_DISPATCH(AttentionSoftmaxBackward)(dpreatt, datt, att, Z, T, scale, dpreatt16);
}

}  // namespace wte
#endif  // HWY_ONCE
