// The residual add and a linear layer's bias gradient, Highway with dynamic dispatch. Contracts and
// shapes: include/wte/kernels.h; scalar references: ref::residual_forward, ref::bias_backward in
// simd/reference.h.
//
// Both are bit-identical to their references on every target and for any thread count:
//   residual_forward  one Add per element.
//   bias_backward     every column is summed over n in increasing order from +0, as the reference,
//                     and then added to dbias. Threads split the columns, never the rows, so no
//                     partial sums are combined and the thread count cannot change a bit. Each task
//                     owns kColumnsPerTask adjacent columns and walks all N rows, keeping their
//                     running sums in an L1-resident buffer: dout is read once, in row order within
//                     each task (a few cache lines per row: a stream the prefetchers follow).

#include <cstddef>

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

// Columns per task: 64 floats = 4 AVX-512 vectors (256 bytes of each row), so OC = 256 already
// gives 4 tasks to share among threads, and a task's running sums stay in registers or L1.
constexpr size_t kColumnsPerTask = 64;

void BiasBackward(float* HWY_RESTRICT dbias, const float* HWY_RESTRICT dout, size_t N, size_t OC) {
  const size_t num_tasks = (OC + kColumnsPerTask - 1) / kColumnsPerTask;
#pragma omp parallel for schedule(static) if (N * OC >= kParallelMinFloats && num_tasks > 1)
  for (size_t task = 0; task < num_tasks; ++task) {
    const size_t c0 = task * kColumnsPerTask;
    const size_t width = OC - c0 < kColumnsPerTask ? OC - c0 : kColumnsPerTask;
    HWY_ALIGN float sums[kColumnsPerTask] = {};  // +0, as the reference's `sum = 0`
    for (size_t n = 0; n < N; ++n) {
      const float* row = dout + n * OC + c0;
      ForEachVector(width, [&](auto d, size_t i) {
        hn::StoreU(hn::Add(hn::LoadU(d, sums + i), hn::LoadU(d, row + i)), d, sums + i);
      });
    }
    ForEachVector(width, [&](auto d, size_t i) {
      hn::StoreU(hn::Add(hn::LoadU(d, dbias + c0 + i), hn::LoadU(d, sums + i)), d, dbias + c0 + i);
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
