// Cross-entropy over vocabulary tiles, for the fused unembedding (src/model/unembedding.h): online
// max / sum-of-exponentials per row across tiles, and the softmax gradient of one tile from a row's
// final statistics. Highway with dynamic dispatch. Contracts: include/wte/kernels.h; scalar
// references: src/reference/kernels.h (ref::cross_entropy_tile_stats, ref::cross_entropy_tile_grad).
//
// The operations are those of simd/cross_entropy.cc (the unfused kernel): the max is exact, each
// term is hn::Exp(x - m) (within 1 ulp of exp; computed by simd/exp-inl.h's ExpNonPositive, which
// gives hn::Exp's bits in fewer instructions), a tile's terms are summed lane-wise (each lane in
// increasing w, then across lanes, then a one-lane tail), and the gradient is
// grad_scale · (e / S) with the target entry grad_scale · (e_t / S - 1). What differs from the
// unfused kernel is only how S is accumulated: tile by tile, each tile's partial sum taken at the
// running max and the running sum rescaled by exp(m_old - m_new) (one more hn::Exp and one multiply)
// whenever a later tile raises the max. tests/simd/test_simd_kernels.cc states the error bound this gives
// against a double reference and holds every target to it.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "wte/kernels.h"

// foreach_target.h must come before every other Highway header.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/cross_entropy_tiles.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "simd/exp-inl.h"    // ExpNonPositive
#include "simd/loops-inl.h"  // RowMax
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace wte {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Below this many floats a tile runs on the calling thread (an OpenMP region costs microseconds).
// Rows are independent, so this never changes a result.
constexpr size_t kTileParallelMinFloats = size_t{1} << 14;

// exp(x), x <= 0, for one float on a one-lane vector (the same function as the terms).
HWY_INLINE float ExpOne(float x) {
  const hn::CappedTag<float, 1> d1;
  return hn::GetLane(ExpNonPositive(d1, hn::Set(d1, x)));
}

// Σ_w exp(row[w] - m): lanes in increasing w, then across lanes, then the one-lane tail in order.
HWY_INLINE float TileSumExp(const float* HWY_RESTRICT row, size_t W, float m) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const auto vm = hn::Set(d, m);
  auto vsum = hn::Zero(d);
  size_t w = 0;
  for (; w + L <= W; w += L)
    vsum = hn::Add(vsum, ExpNonPositive(d, hn::Sub(hn::LoadU(d, row + w), vm)));
  float sum = hn::GetLane(hn::SumOfLanes(d, vsum));
  const hn::CappedTag<float, 1> d1;
  for (; w < W; ++w)
    sum += hn::GetLane(ExpNonPositive(d1, hn::Sub(hn::LoadU(d1, row + w), hn::Set(d1, m))));
  return sum;
}

HWY_INLINE void StatsRow(const float* HWY_RESTRICT row, size_t W, size_t v0, int32_t target,
                         float* HWY_RESTRICT row_max, float* HWY_RESTRICT row_sum,
                         float* HWY_RESTRICT target_logit) {
  const float m_old = *row_max;
  const float tmax = RowMax(row, W);
  const float m_new = tmax > m_old ? tmax : m_old;
  float s = *row_sum;
  // A row's first tile has s = 0 (and m_old = -inf): nothing to rescale.
  if (m_new != m_old && s != 0.0f) s *= ExpOne(m_old - m_new);
  s += TileSumExp(row, W, m_new);
  *row_max = m_new;
  *row_sum = s;
  const size_t t = static_cast<size_t>(target);
  if (t >= v0 && t < v0 + W) *target_logit = row[t - v0];
}

void CrossEntropyTileStats(const float* HWY_RESTRICT tile, size_t R, size_t W, size_t ld,
                           size_t v0, const int32_t* HWY_RESTRICT targets,
                           float* HWY_RESTRICT row_max, float* HWY_RESTRICT row_sum,
                           float* HWY_RESTRICT target_logit) {
  if (W == 0) return;
#pragma omp parallel for schedule(static) if (R * W >= kTileParallelMinFloats)
  for (size_t r = 0; r < R; ++r)
    StatsRow(tile + r * ld, W, v0, targets[r], row_max + r, row_sum + r, target_logit + r);
}

// dst = grad_scale · (exp(x - m) / S) for one vector (or one lane).
template <class D>
HWY_INLINE void GradVector(D d, float* p, float m, float sum, float grad_scale) {
  const auto e = ExpNonPositive(d, hn::Sub(hn::LoadU(d, p), hn::Set(d, m)));
  hn::StoreU(hn::Mul(hn::Set(d, grad_scale), hn::Div(e, hn::Set(d, sum))), d, p);
}

void CrossEntropyTileGrad(float* HWY_RESTRICT tile, size_t R, size_t W, size_t ld, size_t v0,
                          const int32_t* HWY_RESTRICT targets, const float* HWY_RESTRICT row_max,
                          const float* HWY_RESTRICT row_sum, float grad_scale) {
  if (W == 0) return;
#pragma omp parallel for schedule(static) if (R * W >= kTileParallelMinFloats)
  for (size_t r = 0; r < R; ++r) {
    float* row = tile + r * ld;
    const float m = row_max[r], sum = row_sum[r];
    const size_t t = static_cast<size_t>(targets[r]);
    const bool has_target = t >= v0 && t < v0 + W;
    // The target's p, from the logit before the row is overwritten (same ops as the other terms).
    const float p_target = has_target ? ExpOne(row[t - v0] - m) / sum : 0.0f;
    const hn::ScalableTag<float> d;
    const size_t L = hn::Lanes(d);
    size_t w = 0;
    for (; w + L <= W; w += L) GradVector(d, row + w, m, sum, grad_scale);
    const hn::CappedTag<float, 1> d1;
    for (; w < W; ++w) GradVector(d1, row + w, m, sum, grad_scale);
    if (has_target) row[t - v0] = grad_scale * (p_target - 1.0f);
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace wte
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wte {

HWY_EXPORT(CrossEntropyTileStats);
HWY_EXPORT(CrossEntropyTileGrad);

void cross_entropy_tile_stats(const float* tile, size_t R, size_t W, size_t ld, size_t v0,
                              const int32_t* targets, float* row_max, float* row_sum,
                              float* target_logit) {
  HWY_DYNAMIC_DISPATCH(CrossEntropyTileStats)(tile, R, W, ld, v0, targets, row_max, row_sum,
                                              target_logit);
}

void cross_entropy_tile_grad(float* tile, size_t R, size_t W, size_t ld, size_t v0,
                             const int32_t* targets, const float* row_max, const float* row_sum,
                             float grad_scale) {
  HWY_DYNAMIC_DISPATCH(CrossEntropyTileGrad)(tile, R, W, ld, v0, targets, row_max, row_sum,
                                             grad_scale);
}

}  // namespace wte
#endif  // HWY_ONCE
