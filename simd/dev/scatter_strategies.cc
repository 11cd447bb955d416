// The lookup backward's alternative scatter strategies (include/wte/kernels.h:
// embedding_backward_wte_strategy): serial, row-range and private-hot, kept to compare against
// the sorted strategy that training uses (simd/embedding.cc; `wte profile scatter`,
// tests/simd/test_scatter_strategies.cc). Scalar reference: ref::embedding_backward_wte.
#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "wte/kernels.h"

// Highway: compile this file once per target (see simd/embedding.cc).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/dev/scatter_strategies.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "simd/scatter-inl.h"

HWY_BEFORE_NAMESPACE();
namespace wte {
namespace HWY_NAMESPACE {

// kSerial: one thread, dwte[ids[n]] += dhidden[n] in increasing n.
void ScatterSerial(float* HWY_RESTRICT dwte, const float* HWY_RESTRICT dhidden,
                   const int32_t* HWY_RESTRICT ids, size_t N, size_t C) {
  for (size_t n = 0; n < N; ++n)
    AddRowInPlace(dwte + static_cast<size_t>(ids[n]) * C, dhidden + n * C, C);
}

// kRowRange: thread t of P owns rows [t*V/P, (t+1)*V/P) and adds its own positions in increasing n.
void ScatterRowRange(float* HWY_RESTRICT dwte, const float* HWY_RESTRICT dhidden,
                     const int32_t* HWY_RESTRICT ids, size_t N, size_t C, size_t V) {
#pragma omp parallel
  {
    const size_t P = static_cast<size_t>(omp_get_num_threads());
    const size_t t = static_cast<size_t>(omp_get_thread_num());
    const size_t lo = t * V / P, hi = (t + 1) * V / P;
    for (size_t n = 0; n < N; ++n) {
      const size_t v = static_cast<size_t>(ids[n]);
      if (v >= lo && v < hi) AddRowInPlace(dwte + v * C, dhidden + n * C, C);
    }
  }
}

// kPrivateHot: cold rows as kSorted; each hot row's segment is cut into P contiguous chunks, thread
// t sums chunk t into its private buffer, then the buffers are added to the row in thread order.
void ScatterPrivateHot(float* HWY_RESTRICT dwte, const float* HWY_RESTRICT dhidden,
                       const int32_t* HWY_RESTRICT ids, size_t N, size_t C, size_t V,
                       ScatterWorkspace* ws) {
  if (N == 0 || C == 0) return;
  const size_t num_touched = SortById(ids, N, V, ws);
  const size_t num_hot = ws->hot.size();
  const size_t P = static_cast<size_t>(omp_get_max_threads());
  if (ws->scratch.size() < P * num_hot * C) ws->scratch.resize(P * num_hot * C);
  float* HWY_RESTRICT scratch = ws->scratch.data();
  const int32_t* HWY_RESTRICT order = ws->order.data();
  const int32_t* HWY_RESTRICT row_start = ws->row_start.data();
  const int32_t* HWY_RESTRICT touched = ws->touched.data();
  const int32_t* HWY_RESTRICT hot = ws->hot.data();
#pragma omp parallel
  {
    const size_t threads = static_cast<size_t>(omp_get_num_threads());
    const size_t t = static_cast<size_t>(omp_get_thread_num());
    // Private partial sums of every hot row (an empty chunk writes zeros).
    for (size_t h = 0; h < num_hot; ++h) {
      const size_t v = static_cast<size_t>(hot[h]);
      const size_t count = static_cast<size_t>(row_start[v + 1] - row_start[v]);
      const size_t k0 = t * count / threads, k1 = (t + 1) * count / threads;
      float* mine = scratch + (t * num_hot + h) * C;
      const int32_t* segment = order + row_start[v] + k0;
      const auto row = [=](size_t j) { return dhidden + static_cast<size_t>(segment[j]) * C; };
      if (k1 > k0)
        AccumulateRange<false>(mine, k1 - k0, row, 0, C);
      else
        std::fill(mine, mine + C, 0.0f);
    }
#pragma omp for schedule(dynamic, 8) nowait
    for (size_t k = 0; k < num_touched; ++k) {
      const size_t v = static_cast<size_t>(touched[k]);
      const size_t count = static_cast<size_t>(row_start[v + 1] - row_start[v]);
      if (count >= kScatterHotCount) continue;
      const int32_t* segment = order + row_start[v];
      const auto row = [=](size_t j) { return dhidden + static_cast<size_t>(segment[j]) * C; };
      AccumulateRange<true>(dwte + v * C, count, row, 0, C);
    }
#pragma omp barrier
    // Combine: row h gets its P partial sums, thread 0's first (the P-dependent grouping).
#pragma omp for schedule(static)
    for (size_t h = 0; h < num_hot; ++h) {
      const auto part = [=](size_t j) { return scratch + (j * num_hot + h) * C; };
      AccumulateRange<true>(dwte + static_cast<size_t>(hot[h]) * C, threads, part, 0, C);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace wte
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wte {

HWY_EXPORT(ScatterSerial);
HWY_EXPORT(ScatterRowRange);
HWY_EXPORT(ScatterPrivateHot);

namespace {
constexpr struct {
  ScatterStrategy strategy;
  const char* name;
  bool deterministic;
} kStrategies[] = {{ScatterStrategy::kAuto, "auto", true},
                   {ScatterStrategy::kSerial, "serial", true},
                   {ScatterStrategy::kSorted, "sorted", true},
                   {ScatterStrategy::kRowRange, "row-range", true},
                   {ScatterStrategy::kPrivateHot, "private-hot", false}};
}  // namespace

const char* scatter_strategy_name(ScatterStrategy s) {
  for (const auto& e : kStrategies)
    if (e.strategy == s) return e.name;
  return "?";
}

bool parse_scatter_strategy(const char* name, ScatterStrategy* out) {
  for (const auto& e : kStrategies) {
    if (std::string_view(name) == e.name) {
      *out = e.strategy;
      return true;
    }
  }
  return false;
}

bool scatter_strategy_deterministic(ScatterStrategy s) {
  for (const auto& e : kStrategies)
    if (e.strategy == s) return e.deterministic;
  return false;
}

ScatterStrategy choose_scatter_strategy(const int32_t* ids, size_t N, size_t C, size_t V) {
  (void)ids;  // kSorted balances any distribution (hot rows are split by columns)
  (void)V;
  if (N * C < 16384) return ScatterStrategy::kSerial;
  return ScatterStrategy::kSorted;
}

void embedding_backward_wte_strategy(ScatterStrategy strategy, float* dwte, const float* dhidden,
                                     const int32_t* ids, size_t N, size_t C, size_t V,
                                     ScatterWorkspace* workspace) {
  if (strategy == ScatterStrategy::kAuto)
    strategy = choose_scatter_strategy(ids, N, C, V);
  switch (strategy) {
    case ScatterStrategy::kSerial:
      HWY_DYNAMIC_DISPATCH(ScatterSerial)(dwte, dhidden, ids, N, C);
      return;
    case ScatterStrategy::kRowRange:
      HWY_DYNAMIC_DISPATCH(ScatterRowRange)(dwte, dhidden, ids, N, C, V);
      return;
    case ScatterStrategy::kPrivateHot:
      HWY_DYNAMIC_DISPATCH(ScatterPrivateHot)(dwte, dhidden, ids, N, C, V, workspace);
      return;
    case ScatterStrategy::kSorted:
    case ScatterStrategy::kAuto:
      embedding_backward_wte(dwte, dhidden, ids, N, C, V, workspace, nullptr);
      return;
  }
}

}  // namespace wte
#endif  // HWY_ONCE
