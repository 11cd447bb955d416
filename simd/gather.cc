// Embedding gather (the lookup without positions): out[n,:] = wte[ids[n],:]. `wte profile`
// compares it with the memory probes of simd/dev/memory_probes.cc (a streaming copy, a streaming
// read and a read of the same random rows, at the bandwidth the hardware allows). Contracts: include/wte/kernels.h; scalar references:
// src/reference/kernels.h. Highway with dynamic dispatch.
//
// What limits the gather (docs/kernels.md, The gather; against a streaming copy at V 50257, C 768,
// N 8192: bench/results/embedding-20261204-1353-amd-epyc-9b0f17009464.json): every table row is a
// DRAM miss (uniform ids) and, for a large output, every store first reads its line
// (write-allocate). So rows are copied with full-vector loads, prefetched
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
#include "simd/gather-inl.h"  // CopyRow and the row prefetches (shared with simd/dev/)
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace wte {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

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

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace wte
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wte {

HWY_EXPORT(EmbeddingGather);

size_t last_level_cache_bytes() {
  static const size_t bytes = [] {
    long l3 = -1;
#ifdef _SC_LEVEL3_CACHE_SIZE
    l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    // glibc reports the whole package's L3 on some machines (508 MiB on an AMD EPYC VM whose core
    // complex shares 32 MiB), more than one core's threads can use: cap it at 32 MiB, the most one core complex
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

}  // namespace wte
#endif  // HWY_ONCE
