// Numerically stable softmax cross-entropy (fused loss + gradient, in place) and the loss alone,
// Highway with dynamic dispatch. Contracts and shapes: include/wte/kernels.h; scalar references:
// src/reference/kernels.h (ref::softmax_cross_entropy, ref::cross_entropy_loss).
//
// Per row of V logits:
//   m        = max_v x_v                        (exact, any order)
//   S        = sum_v exp(x_v - m)               (every term in (0, 1]; hn::Exp, max error 1 ulp,
//                                                computed by simd/exp-inl.h's ExpNonPositive)
//   loss     = (m - x_target) + log(S)          (std::log on the scalar sum)
//   dlogit_v = grad_scale * (exp(x_v - m) / S - [v == target])
//
// Not bit-identical to the references: hn::Exp differs from std::exp by up to 1 ulp, and S is
// summed lane-wise (each lane in increasing v, then the lanes) instead of strictly left to right.
// tests/simd/test_simd_kernels.cc states the resulting error bound and checks it against a double
// reference.
//
// One deliberate difference in the formula: the reference computes (m + log S) - x_target, which
// rounds log S at the magnitude of m (for m = 1000, to 6e-5) before the cancellation. We compute
// (m - x_target) + log S: m - x_target is exact when the two are within a factor of 2 (Sterbenz),
// so logits [1000, 1000] give exactly float(ln 2). The loss overflows to inf only if
// m - x_target > FLT_MAX, i.e. for logits near +-FLT_MAX.
//
// Stability: x_v - m <= 0, so exp never overflows; hn::Exp returns exactly 0 below -104 (covering
// -1e30 and -inf from x - m with huge gaps); S >= 1 because the max term is exp(0) = 1 exactly.
// So no inf or NaN for any finite logits (apart from the overflow above).

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "wte/kernels.h"

// foreach_target.h must come before every other Highway header.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/cross_entropy.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/cache_control.h"
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "simd/bf16-inl.h"   // ConvertRowToBf16
#include "simd/exp-inl.h"    // ExpNonPositive
#include "simd/loops-inl.h"  // RowMax
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace wte {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// exp(x[0, L) - maxval) for one vector (or one lane) of the row; if kStore, also stores the terms
// to out (which may equal x: no restrict here).
template <class D, bool kStore>
HWY_INLINE hn::Vec<D> ExpShifted(D d, const float* x, float* out, float maxval) {
  const auto e = ExpNonPositive(d, hn::Sub(hn::LoadU(d, x), hn::Set(d, maxval)));
  if (kStore) hn::StoreU(e, d, out);
  return e;
}

// S = sum_v exp(row[v] - maxval). If kStore, also writes each term to out[v] (out may be row).
// If `ahead` is not null, prefetches ahead[0, V) along the way (the next row: its memory latency
// then overlaps this row's exponentials instead of stalling the next row's max pass).
template <bool kStore>
HWY_INLINE float SumExpShifted(const float* row, float* out, size_t V, float maxval,
                               const float* ahead = nullptr) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  auto vsum = hn::Zero(d);
  size_t v = 0;
  for (; v + L <= V; v += L) {
    if (ahead != nullptr && v % (64 / sizeof(float)) < L) hwy::Prefetch(ahead + v);
    vsum = hn::Add(vsum,
                   ExpShifted<decltype(d), kStore>(d, row + v, kStore ? out + v : nullptr, maxval));
  }
  float sum = hn::GetLane(hn::SumOfLanes(d, vsum));
  // The tail uses the same hn::Exp on a one-lane vector, so every term has the same accuracy.
  const hn::CappedTag<float, 1> d1;
  for (; v < V; ++v) {
    sum += hn::GetLane(
        ExpShifted<decltype(d1), kStore>(d1, row + v, kStore ? out + v : nullptr, maxval));
  }
  return sum;
}

// dst[v] = grad_scale * (e[v] / S) for v in [0, V), in place (e = dst). A division, not a multiply
// by grad_scale / S: a multiply moves dlogits by an ulp, and the losses the tests pin bit for bit
// for the model without transformer blocks would change with it.
template <class D>
HWY_INLINE void ScaleTerms(D d, float* HWY_RESTRICT e, float sum, float grad_scale) {
  hn::StoreU(hn::Mul(hn::Set(d, grad_scale), hn::Div(hn::LoadU(d, e), hn::Set(d, sum))), d, e);
}

void SoftmaxCrossEntropy(float* HWY_RESTRICT logits, float* HWY_RESTRICT losses,
                         const int32_t* HWY_RESTRICT targets, size_t N, size_t V,
                         float grad_scale, uint16_t* HWY_RESTRICT dlogits16) {
  if (V == 0) return;
#pragma omp parallel for schedule(static)
  for (size_t n = 0; n < N; ++n) {
    float* row = logits + n * V;
    const size_t target = static_cast<size_t>(targets[n]);
    const float maxval = RowMax(row, V);
    const float x_target = row[target];
    // Pass 2 overwrites the row with the terms exp(x - m) so pass 3 need not recompute them.
    const float sum =
        SumExpShifted</*kStore=*/true>(row, row, V, maxval, n + 1 < N ? row + V : nullptr);
    losses[n] = (maxval - x_target) + std::log(sum);
    const float p_target = row[target] / sum;

    const hn::ScalableTag<float> d;
    const size_t L = hn::Lanes(d);
    size_t v = 0;
    for (; v + L <= V; v += L) ScaleTerms(d, row + v, sum, grad_scale);
    const hn::CappedTag<float, 1> d1;
    for (; v < V; ++v) ScaleTerms(d1, row + v, sum, grad_scale);
    // The one-hot term, in the reference's form grad_scale * (p - 1).
    row[target] = grad_scale * (p_target - 1.0f);
    // bf16 GEMMs: the row's bf16 copy while it is still in cache (a separate pass over the
    // (N, V) dlogits would read them back from memory).
    if (dlogits16 != nullptr) ConvertRowToBf16(dlogits16 + n * V, row, V);
  }
}

void CrossEntropyLoss(float* HWY_RESTRICT losses, const float* HWY_RESTRICT logits,
                      const int32_t* HWY_RESTRICT targets, size_t N, size_t V) {
  if (V == 0) return;
#pragma omp parallel for schedule(static)
  for (size_t n = 0; n < N; ++n) {
    const float* row = logits + n * V;
    const float maxval = RowMax(row, V);
    const float sum =
        SumExpShifted</*kStore=*/false>(row, nullptr, V, maxval, n + 1 < N ? row + V : nullptr);
    losses[n] = (maxval - row[static_cast<size_t>(targets[n])]) + std::log(sum);
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace wte
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wte {

HWY_EXPORT(SoftmaxCrossEntropy);
HWY_EXPORT(CrossEntropyLoss);

void softmax_cross_entropy(float* logits, float* losses, const int32_t* targets, size_t N, size_t V,
                           float grad_scale, uint16_t* dlogits16) {
  HWY_DYNAMIC_DISPATCH(SoftmaxCrossEntropy)(logits, losses, targets, N, V, grad_scale, dlogits16);
}

void cross_entropy_loss(float* losses, const float* logits, const int32_t* targets, size_t N,
                        size_t V) {
  HWY_DYNAMIC_DISPATCH(CrossEntropyLoss)(losses, logits, targets, N, V);
}

}  // namespace wte
#endif  // HWY_ONCE
