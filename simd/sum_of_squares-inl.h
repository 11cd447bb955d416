// Σ x² of one block of the gradient norm's fixed order, shared by the norm itself (simd/adamw.cc,
// wte::sum_of_squares, wte::sum_of_squares_partials) and the tied lookup backward, which sums the
// squares of each block of dwte it completes while the block is in cache (simd/embedding.cc,
// wte::embedding_backward_wte). Scalar reference: ref::sum_of_squares in src/reference/kernels.h; the bits
// do not depend on the target (see BlockSumOfSquares).
//
// A Highway "-inl.h" header: included once per target by each file that uses it (after
// hwy/foreach_target.h and hwy/highway.h), hence the include guard toggled by HWY_TARGET_TOGGLE
// instead of #pragma once.

// Per-target include guard.
#if defined(WTE_SIMD_SUM_OF_SQUARES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef WTE_SIMD_SUM_OF_SQUARES_INL_H_
#undef WTE_SIMD_SUM_OF_SQUARES_INL_H_
#else
#define WTE_SIMD_SUM_OF_SQUARES_INL_H_
#endif

#include <cstddef>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace wte {
namespace HWY_NAMESPACE {

// Σ x[i]² of one block (len floats, at most wte::kSumOfSquaresBlock) in the order of
// ref::sum_of_squares: 16 partial sums, partial j over the offsets ≡ j (mod 16). A vector of L
// doubles (L = 1, 2, 4 or 8 by target) holds partials [jL, jL + L), so 16 / L vectors cover them
// and every target adds the same numbers in the same order: the bits do not depend on the target.
// Squares of floats are exact in double; no multiply-add is fused (-ffp-contract=off, and Mul then
// Add are two roundings on every target).
HWY_INLINE double BlockSumOfSquares(const float* HWY_RESTRICT x, size_t len) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const size_t L = hn::Lanes(dd);
  const size_t num_acc = 16 / L;  // L divides 16 on every x86 target
  using VD = decltype(hn::Zero(dd));
  VD acc[16];
  for (size_t j = 0; j < num_acc; ++j) acc[j] = hn::Zero(dd);
  const size_t whole = len / 16 * 16;
  for (size_t i = 0; i < whole; i += 16) {
    for (size_t j = 0; j < num_acc; ++j) {
      const auto xd = hn::PromoteTo(dd, hn::LoadU(df, x + i + j * L));
      acc[j] = hn::Add(acc[j], hn::Mul(xd, xd));
    }
  }
  HWY_ALIGN double partial[16 + HWY_MAX_BYTES / sizeof(double)];
  for (size_t j = 0; j < num_acc; ++j) hn::Store(acc[j], dd, partial + j * L);
  double block = partial[0];
  for (size_t j = 1; j < 16; ++j) block += partial[j];
  for (size_t i = whole; i < len; ++i) {
    const double xi = x[i];
    block += xi * xi;
  }
  return block;
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace wte
HWY_AFTER_NAMESPACE();

#endif  // WTE_SIMD_SUM_OF_SQUARES_INL_H_
