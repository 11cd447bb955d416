// AdamW update, Highway with dynamic dispatch. Contract: include/wte/kernels.h (wte::adamw_update);
// scalar reference: ref::adamw_update<float> in src/reference/kernels.h.
//
// Bit-identical to ref::adamw_update<float> on every target: the bias corrections are computed once
// in scalar float exactly as the reference does (1 - std::pow(beta, step) in float), and each
// element goes through the same IEEE operations in the same order (AdamWStep, simd/adamw-inl.h): Mul,
// Add, Div and Sqrt are correctly rounded on every Highway target (SCALAR uses sqrtf), and we never
// fuse a multiply-add.
//
// That needs the compiler not to contract a*b+c into an FMA behind our back. g++ (12) defaults to
// -ffp-contract=fast for C++ even in ISO mode, and the AVX2/AVX3 targets have FMA, so it did fuse
// the m and v updates here (2 roundings become 1: results differed from the reference in the last
// bit). The pragma turns contraction off for this file only; the Highway math in other files
// (hn::Exp uses MulAdd on purpose) is unaffected. It must precede every include so all inlined
// functions carry the same option.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma clang fp contract(off)
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <vector>

#include "wte/kernels.h"

// foreach_target.h must come before every other Highway header.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/adamw.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "simd/adamw-inl.h"  // AdamWConstants, AdamWStep (one vector; shared with embedding.cc)
#include "simd/bf16-inl.h"   // StoreBf16, StoreBf16x2, StreamBf16x2 (the optional bf16 copy)
#include "simd/sum_of_squares-inl.h"  // BlockSumOfSquares (shared with embedding.cc)
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace wte {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void AdamWUpdate(float* HWY_RESTRICT params, const float* HWY_RESTRICT grads, float* HWY_RESTRICT m,
                 float* HWY_RESTRICT v, size_t n, const AdamWParams& hp, float grad_scale,
                 uint16_t* HWY_RESTRICT params16) {
  const AdamWConstants k(hp, grad_scale);

  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const hn::CappedTag<float, 1> d1;
  if (params16 == nullptr) {
    const size_t num_vectors = n / L;
    // Blocks of vectors per OpenMP chunk; elements are independent, so any split gives the same
    // bits.
#pragma omp parallel for schedule(static)
    for (size_t j = 0; j < num_vectors; ++j) AdamWStep(d, params, grads, m, v, j * L, k);
    for (size_t i = num_vectors * L; i < n; ++i) AdamWStep(d1, params, grads, m, v, i, k);
    return;
  }
  // With the bf16 copy of the new params (the bf16 GEMMs' weights), written while they are in
  // registers instead of by a later pass over the whole arena: pairs of vectors, whose copies are
  // rounded and stored together (StoreBf16x2), then a last vector and the one-lane tail.
  // The copy (2 bytes a parameter, the arena's size is far beyond the caches) is streamed when
  // aligned: the forward's GEMMs read it from memory either way, and a non-temporal store saves
  // reading each line for ownership.
  const size_t num_pairs = n / (2 * L);
  const bool aligned = reinterpret_cast<uintptr_t>(params16) % (2 * L * sizeof(uint16_t)) == 0;
#pragma omp parallel
  {
#pragma omp for schedule(static) nowait
    for (size_t j = 0; j < num_pairs; ++j) {
      const size_t i = j * 2 * L;
      const auto p0 = AdamWStep(d, params, grads, m, v, i, k);
      const auto p1 = AdamWStep(d, params, grads, m, v, i + L, k);
      if (aligned) {
        StreamBf16x2(d, p0, p1, params16 + i);
      } else {
        StoreBf16x2(d, p0, p1, params16 + i);
      }
    }
    hwy::FlushStream();  // this thread's streamed stores, before the region's closing barrier
  }
  size_t i = num_pairs * 2 * L;
  for (; i + L <= n; i += L) StoreBf16(d, AdamWStep(d, params, grads, m, v, i, k), params16 + i);
  for (; i < n; ++i) StoreBf16(d1, AdamWStep(d1, params, grads, m, v, i, k), params16 + i);
}

void SumOfSquaresPartials(const float* HWY_RESTRICT x, size_t n, double* HWY_RESTRICT partials) {
  constexpr size_t kBlock = kSumOfSquaresBlock;
  const size_t num_blocks = (n + kBlock - 1) / kBlock;
  if (num_blocks == 1) {  // no OpenMP region for small tensors
    partials[0] = BlockSumOfSquares(x, n);
    return;
  }
#pragma omp parallel for schedule(static)
  for (size_t b = 0; b < num_blocks; ++b)
    partials[b] = BlockSumOfSquares(x + b * kBlock, std::min(kBlock, n - b * kBlock));
}

double SumOfSquares(const float* HWY_RESTRICT x, size_t n) {
  constexpr size_t kBlock = kSumOfSquaresBlock;
  const size_t num_blocks = (n + kBlock - 1) / kBlock;
  if (num_blocks <= 1) return BlockSumOfSquares(x, n);
  std::vector<double> block_sum(num_blocks);
  SumOfSquaresPartials(x, n, block_sum.data());
  double total = 0.0;  // block order: the same bits for any thread count
  for (double s : block_sum) total += s;
  return total;
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace wte
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wte {

HWY_EXPORT(AdamWUpdate);
HWY_EXPORT(SumOfSquares);
HWY_EXPORT(SumOfSquaresPartials);

void adamw_update(float* params, const float* grads, float* m, float* v, size_t n,
                  const AdamWParams& hp, float grad_scale, uint16_t* params16) {
  HWY_DYNAMIC_DISPATCH(AdamWUpdate)(params, grads, m, v, n, hp, grad_scale, params16);
}

double sum_of_squares(const float* x, size_t n) { return HWY_DYNAMIC_DISPATCH(SumOfSquares)(x, n); }

void sum_of_squares_partials(const float* x, size_t n, double* partials) {
  HWY_DYNAMIC_DISPATCH(SumOfSquaresPartials)(x, n, partials);
}

}  // namespace wte
#endif  // HWY_ONCE
