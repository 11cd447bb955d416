// The row copy and row prefetches of the embedding gather (simd/gather.cc), shared with the memory
// probes it is measured against (simd/dev/memory_probes.cc), so both move memory the same way.
//
// A Highway "-inl.h" header: included once per target (after hwy/foreach_target.h and
// hwy/highway.h), hence the include guard toggled by HWY_TARGET_TOGGLE instead of #pragma once.

// Per-target include guard.
#if defined(WTE_SIMD_GATHER_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef WTE_SIMD_GATHER_INL_H_
#undef WTE_SIMD_GATHER_INL_H_
#else
#define WTE_SIMD_GATHER_INL_H_
#endif

#include <cstddef>
#include <cstdint>

#include "hwy/cache_control.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace wte {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Table rows ahead of the row being copied whose lines are prefetched. A row of C = 768 floats is
// 48 cache lines; a DRAM miss takes ~100 ns and a row copy ~70 ns at 1 thread, so a few rows must
// be in flight. The prefetches of the row kGatherPrefetchRows ahead are spread over the copy of the
// current row (one per line copied) rather than issued as a burst of 48: a burst fills the core's
// miss queue, and the loads of the row being copied then wait behind it. With uniform ids and caches
// flushed, spread prefetches 4 rows ahead bring the gather closer to a streaming copy's rate than a
// burst does, at 1 and 2 threads; 2 or 8 rows ahead make no difference beyond noise
// (`wte profile gather` compares the gather with a streaming copy; docs/kernels.md, The gather).
constexpr size_t kGatherPrefetchRows = 4;

// Prefetches the lines of ahead[c0, c1) into every cache level (ahead may be null: nothing to
// prefetch).
HWY_INLINE void PrefetchSpan(const float* ahead, size_t c0, size_t c1) {
  if (ahead == nullptr) return;
  for (size_t c = c0; c < c1; c += 64 / sizeof(float)) hwy::Prefetch(ahead + c);
}

// After a row loop's whole 4-vector steps have prefetched ahead[0, c): the rest of ahead[0, C),
// and its last line, which a row that does not start on a line leaves out.
HWY_INLINE void PrefetchRest(const float* ahead, size_t c, size_t C) {
  if (ahead == nullptr || C == 0) return;
  PrefetchSpan(ahead, c, C);
  hwy::Prefetch(ahead + C - 1);
}

// The table row kGatherPrefetchRows after row n of the gather, or null past the last one.
HWY_INLINE const float* RowAhead(const float* wte, const int32_t* ids, size_t n, size_t N,
                                 size_t C) {
  return n + kGatherPrefetchRows < N ? wte + static_cast<size_t>(ids[n + kGatherPrefetchRows]) * C
                                     : nullptr;
}

// dst[0, C) = src[0, C), prefetching the lines of ahead[0, C) as it goes (ahead may be null).
// kStream: the part of dst aligned to whole vectors is written with non-temporal stores
// (hn::Stream, which needs that alignment); the unaligned head and the tail shorter than a vector
// with ordinary one-lane stores. dst must be 4-byte aligned if kStream.
template <bool kStream>
HWY_INLINE void CopyRow(float* HWY_RESTRICT dst, const float* HWY_RESTRICT src, size_t C,
                        const float* ahead = nullptr) {
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 1> d1;
  const size_t L = hn::Lanes(d);
  size_t c = 0;
  if (kStream) {
    const size_t misaligned = (reinterpret_cast<uintptr_t>(dst) / sizeof(float)) % L;
    const size_t head = std::min(C, misaligned == 0 ? 0 : L - misaligned);
    for (; c < head; ++c) hn::StoreU(hn::LoadU(d1, src + c), d1, dst + c);
  }
  for (; c + 4 * L <= C; c += 4 * L) {
    PrefetchSpan(ahead, c, c + 4 * L);
    const auto v0 = hn::LoadU(d, src + c), v1 = hn::LoadU(d, src + c + L),
               v2 = hn::LoadU(d, src + c + 2 * L), v3 = hn::LoadU(d, src + c + 3 * L);
    if (kStream) {
      hn::Stream(v0, d, dst + c);
      hn::Stream(v1, d, dst + c + L);
      hn::Stream(v2, d, dst + c + 2 * L);
      hn::Stream(v3, d, dst + c + 3 * L);
    } else {
      hn::StoreU(v0, d, dst + c);
      hn::StoreU(v1, d, dst + c + L);
      hn::StoreU(v2, d, dst + c + 2 * L);
      hn::StoreU(v3, d, dst + c + 3 * L);
    }
  }
  // The rest of ahead's lines (the whole row when C < 4 vectors), then the rest of the copy.
  PrefetchRest(ahead, c, C);
  for (; c + L <= C; c += L) {
    if (kStream)
      hn::Stream(hn::LoadU(d, src + c), d, dst + c);
    else
      hn::StoreU(hn::LoadU(d, src + c), d, dst + c);
  }
  for (; c < C; ++c) hn::StoreU(hn::LoadU(d1, src + c), d1, dst + c);
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace wte
HWY_AFTER_NAMESPACE();

#endif  // WTE_SIMD_GATHER_INL_H_
