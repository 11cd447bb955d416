// The residual add and a linear layer's bias gradient, Highway with dynamic dispatch. Contracts and
// shapes: include/wte/kernels.h; scalar references: ref::residual_forward, ref::bias_backward in
// src/reference/kernels.h.
//
// Both are bit-identical to their references on every target and for any thread count:
//   residual_forward  one Add per element.
//   bias_backward     every column is summed over n in increasing order from +0, as the reference,
//                     and then added to dbias. Threads split the columns, never the rows, so no
//                     partial sums are combined and the thread count cannot change a bit.

#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "wte/kernels.h"

// foreach_target.h must come before every other Highway header.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/elementwise.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "simd/loops-inl.h"  // ForEachVector, ParallelForEachVector, kParallelMinFloats
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace wte {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void ResidualForward(float* out, const float* a, const float* b, size_t n) {
  // out may alias a or b: each element is read before it is written.
  ParallelForEachVector(n, [&](auto d, size_t i) {
    hn::StoreU(hn::Add(hn::LoadU(d, a + i), hn::LoadU(d, b + i)), d, out + i);
  });
}

// Thread t of P sums the columns [t·OC/P, (t+1)·OC/P) (rounded to whole vectors) over all N rows,
// block of gradient_rows_per_block(N) rows by block: each block's rows in increasing n into a
// per-thread buffer of partial sums, added to the thread's running sums after the block, which are
// added to dbias at the end. Each thread
// so reads one contiguous piece of every row (the whole row with 1 thread): a stream the hardware
// prefetchers follow. (Narrow column tasks are many times slower: a few cache lines per row, each row in
// another 4 KiB page, where the prefetchers stop.) The split never changes a bit: every column is
// summed the same way by whichever thread owns it.
void BiasBackward(float* HWY_RESTRICT dbias, const float* HWY_RESTRICT dout, size_t N, size_t OC) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const size_t num_vectors = (OC + L - 1) / L;
#pragma omp parallel if (N * OC >= kParallelMinFloats)
  {
    const size_t P = static_cast<size_t>(omp_get_num_threads());
    const size_t t = static_cast<size_t>(omp_get_thread_num());
    const size_t c0 = std::min(OC, t * num_vectors / P * L);
    const size_t c1 = std::min(OC, (t + 1) * num_vectors / P * L);
    const size_t width = c1 - c0;
    static thread_local std::vector<float> sums_buffer;
    if (sums_buffer.size() < 2 * width) sums_buffer.resize(2 * width);
    float* sums = sums_buffer.data();
    float* part = sums + width;
    std::fill(sums, sums + width, 0.0f);  // +0, as the reference's `sum = 0`
    const size_t rows_per_block = gradient_rows_per_block(N);
    for (size_t n0 = 0; n0 < N; n0 += rows_per_block) {
      std::fill(part, part + width, 0.0f);  // +0, as the reference's `part = 0`
      const size_t n1 = std::min(N, n0 + rows_per_block);
      for (size_t n = n0; n < n1; ++n) {
        const float* row = dout + n * OC + c0;
        ForEachVector(width, [&](auto dv, size_t i) {
          hn::StoreU(hn::Add(hn::LoadU(dv, part + i), hn::LoadU(dv, row + i)), dv, part + i);
        });
      }
      ForEachVector(width, [&](auto dv, size_t i) {
        hn::StoreU(hn::Add(hn::LoadU(dv, sums + i), hn::LoadU(dv, part + i)), dv, sums + i);
      });
    }
    ForEachVector(width, [&](auto dv, size_t i) {
      hn::StoreU(hn::Add(hn::LoadU(dv, dbias + c0 + i), hn::LoadU(dv, sums + i)), dv, dbias + c0 + i);
    });
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace wte
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wte {

HWY_EXPORT(ResidualForward);
HWY_EXPORT(BiasBackward);

void residual_forward(float* out, const float* a, const float* b, size_t n) {
  HWY_DYNAMIC_DISPATCH(ResidualForward)(out, a, b, n);
}

void bias_backward(float* dbias, const float* dout, size_t N, size_t OC) {
  HWY_DYNAMIC_DISPATCH(BiasBackward)(dbias, dout, N, OC);
}

}  // namespace wte
#endif  // HWY_ONCE
