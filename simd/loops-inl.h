// Loop helpers shared by the transformer block kernels (simd/layernorm.cc, gelu.cc, attention.cc,
// elementwise.cc) and the softmax cross-entropy (cross_entropy.cc, cross_entropy_tiles.cc): walk [0, n) in full vectors and then a one-lane tail, so no kernel reads or
// writes past n (Highway 1.0.3 has no LoadN/StoreN) and every element, tail included, goes through
// the same Highway operations.
//
// A Highway "-inl.h" header: included once per target by each file that uses it (after
// hwy/foreach_target.h and hwy/highway.h), hence the include guard toggled by HWY_TARGET_TOGGLE
// instead of #pragma once.

// Per-target include guard.
#if defined(WTE_SIMD_LOOPS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef WTE_SIMD_LOOPS_INL_H_
#undef WTE_SIMD_LOOPS_INL_H_
#else
#define WTE_SIMD_LOOPS_INL_H_
#endif

#include <cstddef>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace wte {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Elementwise work below this many floats runs on the calling thread: an OpenMP region costs a few
// microseconds, more than the work. Elements are independent, so this never changes a result.
inline constexpr size_t kParallelMinFloats = size_t{1} << 15;
// The parallel loops below hand the threads blocks of this many floats.
inline constexpr size_t kParallelBlockFloats = 4096;

// Calls op(d, i) for i = 0, L, 2L, ... while i + L <= n with the full tag d (L lanes), then
// op(d1, i) for each remaining i with a one-lane tag d1. op is a generic lambda.
template <class Op>
HWY_INLINE void ForEachVector(size_t n, const Op& op) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  size_t i = 0;
  for (; i + L <= n; i += L) op(d, i);
  const hn::CappedTag<float, 1> d1;
  for (; i < n; ++i) op(d1, i);
}

// ForEachVector over [0, n) split into blocks of kParallelBlockFloats, the blocks shared among
// OpenMP threads (when n >= kParallelMinFloats). For elementwise work only: any split gives the
// same bits.
template <class Op>
HWY_INLINE void ParallelForEachVector(size_t n, const Op& op) {
  constexpr size_t kBlock = kParallelBlockFloats;
  const size_t num_blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n >= kParallelMinFloats)
  for (size_t blk = 0; blk < num_blocks; ++blk) {
    const size_t begin = blk * kBlock, len = n - begin < kBlock ? n - begin : kBlock;
    ForEachVector(len, [&](auto d, size_t i) { op(d, begin + i); });
  }
}

// ParallelForEachVector's blocks and threads, each block walked as op2(d, i) on the pairs of full
// vectors [i, i + 2L), then op(d, i) on a last full vector and op(d1, i) on the one-lane tail: for
// elementwise kernels whose stores are cheaper two vectors at a time (StoreBf16x2,
// simd/bf16-inl.h). Any split gives the same bits.
template <class Op2, class Op>
HWY_INLINE void ParallelForEachVectorPair(size_t n, const Op2& op2, const Op& op) {
  constexpr size_t kBlock = kParallelBlockFloats;
  const size_t num_blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n >= kParallelMinFloats)
  for (size_t blk = 0; blk < num_blocks; ++blk) {
    const size_t begin = blk * kBlock, len = n - begin < kBlock ? n - begin : kBlock;
    const hn::ScalableTag<float> d;
    const size_t L = hn::Lanes(d);
    size_t i = 0;
    for (; i + 2 * L <= len; i += 2 * L) op2(d, begin + i);
    const size_t rest = begin + i;
    ForEachVector(len - i, [&](auto d1, size_t j) { op(d1, rest + j); });
  }
}

// Σ_{i < n} of the lanes of f(d, i) (f returns a vector of d): each lane sums its elements in
// increasing i, then the lanes are added (SumOfLanes), then the tail elements in increasing i.
// Not the reference's strictly left-to-right order: callers state their error bounds.
template <class F>
HWY_INLINE float SumOver(size_t n, const F& f) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  auto acc = hn::Zero(d);
  size_t i = 0;
  for (; i + L <= n; i += L) acc = hn::Add(acc, f(d, i));
  float sum = hn::GetLane(hn::SumOfLanes(d, acc));
  const hn::CappedTag<float, 1> d1;
  for (; i < n; ++i) sum += hn::GetLane(f(d1, i));
  return sum;
}

// max_{i < n} row[i] for n >= 1 (a softmax row's shift): full-vector maxima, then the one-lane
// tail. Exact in any order (max rounds nothing); with a NaN in the row the result is whatever the
// target's Max gives.
HWY_INLINE float RowMax(const float* HWY_RESTRICT row, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  float maxval = row[0];
  size_t i = 0;
  if (n >= L) {
    auto vmax = hn::LoadU(d, row);
    for (i = L; i + L <= n; i += L) vmax = hn::Max(vmax, hn::LoadU(d, row + i));
    maxval = hn::GetLane(hn::MaxOfLanes(d, vmax));
  }
  for (; i < n; ++i) maxval = row[i] > maxval ? row[i] : maxval;
  return maxval;
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace wte
HWY_AFTER_NAMESPACE();

#endif  // WTE_SIMD_LOOPS_INL_H_
