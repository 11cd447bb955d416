// Memory probes: what the hardware allows for the embedding gather's traffic, measured by
// `wte profile gather` beside the gather itself (include/wte/kernels.h: stream_copy, stream_read,
// gather_read). They move memory as the gather does (simd/gather-inl.h) and compute nothing of use.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "wte/kernels.h"

// Highway: compile this file once per target (see simd/gather.cc).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/dev/memory_probes.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "simd/gather-inl.h"

HWY_BEFORE_NAMESPACE();
namespace wte {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// dst[0, n) = src[0, n) with non-temporal stores, parallel over 1 MiB chunks.
void StreamCopy(float* HWY_RESTRICT dst, const float* HWY_RESTRICT src, size_t n) {
  constexpr size_t kChunk = size_t{1} << 18;  // floats
  const size_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel
  {
#pragma omp for schedule(static) nowait
    for (size_t k = 0; k < chunks; ++k)
      CopyRow<true>(dst + k * kChunk, src + k * kChunk, std::min(kChunk, n - k * kChunk));
    hwy::FlushStream();
  }
}

// Σ of src[i0, i1) into four vector accumulators (loads only: a read probe, not arithmetic),
// prefetching the lines of ahead[i0, i1) as it goes (ahead may be null), as CopyRow does.
HWY_INLINE float SumRange(const float* HWY_RESTRICT src, size_t i0, size_t i1,
                          const float* ahead = nullptr) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  size_t i = i0;
  for (; i + 4 * L <= i1; i += 4 * L) {
    PrefetchSpan(ahead, i, i + 4 * L);
    a0 = hn::Add(a0, hn::LoadU(d, src + i));
    a1 = hn::Add(a1, hn::LoadU(d, src + i + L));
    a2 = hn::Add(a2, hn::LoadU(d, src + i + 2 * L));
    a3 = hn::Add(a3, hn::LoadU(d, src + i + 3 * L));
  }
  if (i1 > i0) PrefetchRest(ahead, i, i1);
  for (; i + L <= i1; i += L) a0 = hn::Add(a0, hn::LoadU(d, src + i));
  float sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
  for (; i < i1; ++i) sum += src[i];
  return sum;
}

float StreamRead(const float* HWY_RESTRICT src, size_t n) {
  constexpr size_t kChunk = size_t{1} << 18;
  const size_t chunks = (n + kChunk - 1) / kChunk;
  float total = 0.0f;
#pragma omp parallel for schedule(static) reduction(+ : total)
  for (size_t k = 0; k < chunks; ++k)
    total += SumRange(src, k * kChunk, std::min(n, (k + 1) * kChunk));
  return total;
}

float GatherRead(const int32_t* HWY_RESTRICT ids, const float* HWY_RESTRICT wte, size_t N,
                 size_t C) {
  float total = 0.0f;
#pragma omp parallel for schedule(static) reduction(+ : total)
  for (size_t n = 0; n < N; ++n) {
    total += SumRange(wte + static_cast<size_t>(ids[n]) * C, 0, C, RowAhead(wte, ids, n, N, C));
  }
  return total;
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace wte
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wte {

HWY_EXPORT(StreamCopy);
HWY_EXPORT(StreamRead);
HWY_EXPORT(GatherRead);

void stream_copy(float* dst, const float* src, size_t n) {
  if (reinterpret_cast<uintptr_t>(dst) % sizeof(float) != 0) {  // Stream needs float alignment
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  HWY_DYNAMIC_DISPATCH(StreamCopy)(dst, src, n);
}

float stream_read(const float* src, size_t n) { return HWY_DYNAMIC_DISPATCH(StreamRead)(src, n); }

float gather_read(const int32_t* ids, const float* wte, size_t N, size_t C) {
  return HWY_DYNAMIC_DISPATCH(GatherRead)(ids, wte, N, C);
}

}  // namespace wte
#endif  // HWY_ONCE
