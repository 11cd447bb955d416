// Embedding gather (the lookup without positions): out[n,:] = wte[ids[n],:]. Contract:
// include/wte/kernels.h; scalar reference: simd/reference.h.
//
// A row copy has nothing to vectorize beyond what memcpy already does, so this kernel has no
// per-target code: one loop, parallel over rows, prefetching the table row kPrefetchRows ahead
// (the random rows miss every cache; embedding_forward does the same).

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hwy/cache_control.h"
#include "wte/kernels.h"

namespace wte {
namespace {
constexpr size_t kPrefetchRows = 4;  // as EmbeddingForward in simd/embedding.cc
}  // namespace

void embedding_gather(float* out, const int32_t* ids, const float* wte, size_t N, size_t C) {
#pragma omp parallel for schedule(static)
  for (size_t n = 0; n < N; ++n) {
    if (n + kPrefetchRows < N) {
      const float* next = wte + static_cast<size_t>(ids[n + kPrefetchRows]) * C;
      for (size_t c = 0; c < C; c += 64 / sizeof(float)) hwy::Prefetch(next + c);
    }
    std::memcpy(out + n * C, wte + static_cast<size_t>(ids[n]) * C, C * sizeof(float));
  }
}

}  // namespace wte
