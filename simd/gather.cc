// Embedding gather (the lookup without positions): out[n,:] = wte[ids[n],:], and the memory probes
// `wte profile` compares it with (a streaming copy, a streaming read and a read of the same random
// rows, at the bandwidth the hardware allows). Contracts: include/wte/kernels.h; scalar references:
// simd/reference.h. Highway with dynamic dispatch.
//
// What limits the gather (measured on an AMD EPYC Zen 5, V 50257, C 768, N 8192: README,
// Performance): every table row is a DRAM miss (uniform ids) and, for a large output, every store
// first reads its line (write-allocate). So rows are copied with full-vector loads, prefetched
// kGatherPrefetchRows rows ahead (several 3 KiB rows in flight per core), and an output larger than
// the cache is written with non-temporal stores: no read of the destination lines, and the rows
// already read stay in the cache. The table itself is allocated on 2 MiB pages (allocate_floats):
// a random row then costs no page walk.
//
// Copies are exact (bit patterns kept, -0.0 and NaN included) on every target and for any thread
// count: no arithmetic touches the values.

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "wte/kernels.h"

// foreach_target.h must come before every other Highway header.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/gather.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/cache_control.h"
#include "hwy/highway.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace wte {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Table rows ahead of the row being copied whose lines are prefetched. A row of C = 768 floats is
// 48 cache lines; a DRAM miss takes ~100 ns and a row copy ~70 ns at 1 thread, so a few rows must
// be in flight. The prefetches of the row kGatherPrefetchRows ahead are spread over the copy of the
// current row (one per line copied) rather than issued as a burst of 48: a burst fills the core's
// miss queue, and the loads of the row being copied then wait behind it. Measured (Zen 5, V 50257,
// C 768, N 8192 uniform, caches flushed; README, Performance): burst 4 rows ahead 76% / 61% of a
// streaming copy at 1 / 2 threads, spread 4 rows ahead 83% / 72%; spread 2 and 8 within noise.
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

template <bool kStream>
void GatherRows(float* HWY_RESTRICT out, const int32_t* HWY_RESTRICT ids,
                const float* HWY_RESTRICT wte, size_t N, size_t C) {
  // Static schedule: each thread walks a contiguous run of rows, so it can prefetch its own next
  // rows; its output is one contiguous stream.
#pragma omp parallel
  {
#pragma omp for schedule(static) nowait
    for (size_t n = 0; n < N; ++n) {
      CopyRow<kStream>(out + n * C, wte + static_cast<size_t>(ids[n]) * C, C,
                       RowAhead(wte, ids, n, N, C));
    }
    // Non-temporal stores are weakly ordered: fence them before the region's closing barrier,
    // after which any thread may read the output.
    if (kStream) hwy::FlushStream();
  }
}

void EmbeddingGather(float* HWY_RESTRICT out, const int32_t* HWY_RESTRICT ids,
                     const float* HWY_RESTRICT wte, size_t N, size_t C, bool stream) {
  if (stream)
    GatherRows<true>(out, ids, wte, N, C);
  else
    GatherRows<false>(out, ids, wte, N, C);
}

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

HWY_EXPORT(EmbeddingGather);
HWY_EXPORT(StreamCopy);
HWY_EXPORT(StreamRead);
HWY_EXPORT(GatherRead);

size_t last_level_cache_bytes() {
  static const size_t bytes = [] {
    long l3 = -1;
#ifdef _SC_LEVEL3_CACHE_SIZE
    l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    // glibc reports the whole package's L3 on some machines (508 MiB on the AMD EPYC VM this was
    // tuned on, whose one core complex shares 32 MiB): cap it at 32 MiB, the most one core complex
    // of the CPUs wte meets shares.
    constexpr size_t kCap = size_t{32} << 20;
    return l3 > 0 ? std::min(static_cast<size_t>(l3), kCap) : kCap;
  }();
  return bytes;
}

bool gather_streams(size_t N, size_t C) {
  // Stream once the output alone exceeds a quarter of the cache: it is then evicted before its
  // reader gets to it anyway (and the rows being read need the room). A training step's lookup
  // (2048 x 256 floats, 2 MiB) stays cached; GPT-2's 8192 x 768 (25 MB) streams.
  return N * C * sizeof(float) > last_level_cache_bytes() / 4;
}

void embedding_gather(float* out, const int32_t* ids, const float* wte, size_t N, size_t C,
                      GatherStores stores) {
  bool stream = stores == GatherStores::kStreaming ||
                (stores == GatherStores::kAuto && gather_streams(N, C));
  if (reinterpret_cast<uintptr_t>(out) % sizeof(float) != 0) stream = false;  // Stream needs it
  HWY_DYNAMIC_DISPATCH(EmbeddingGather)(out, ids, wte, N, C, stream);
}

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
