// The row-sum building blocks of the lookup's backward (the scatter-add of dhidden's rows into
// dwte): vector row sums in ref::embedding_backward_wte's per-element order, and the counting sort
// of positions by token id. Shared by the training kernel (simd/embedding.cc) and the alternative
// strategies kept for comparison (simd/dev/scatter_strategies.cc).
//
// A Highway "-inl.h" header: included once per target (after hwy/foreach_target.h and
// hwy/highway.h), hence the include guard toggled by HWY_TARGET_TOGGLE instead of #pragma once.

// Per-target include guard.
#if defined(WTE_SIMD_SCATTER_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef WTE_SIMD_SCATTER_INL_H_
#undef WTE_SIMD_SCATTER_INL_H_
#else
#define WTE_SIMD_SCATTER_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "hwy/highway.h"
#include "wte/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace wte {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// dst[0, C) = a[0, C) + b[0, C). Full vectors, then a one-lane tail (1.0.3 has no LoadN/StoreN).
HWY_INLINE void AddRows(float* dst, const float* a,
                        const float* HWY_RESTRICT b, size_t C) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  size_t c = 0;
  for (; c + L <= C; c += L)
    hn::StoreU(hn::Add(hn::LoadU(d, a + c), hn::LoadU(d, b + c)), d, dst + c);
  const hn::CappedTag<float, 1> d1;
  for (; c < C; ++c) hn::StoreU(hn::Add(hn::LoadU(d1, a + c), hn::LoadU(d1, b + c)), d1, dst + c);
}

// Sums one column block [c, c + Lanes(d)) of `count` >= 1 source rows, row(0) first, in increasing
// k, then adds the sum to dst with one read-modify-write (kAdd) or stores it (!kAdd):
//   acc = row(0)[c..];  acc += row(k)[c..] for k = 1..count-1;  dst[c..] += acc  (or = acc).
// This is the per-element order of ref::embedding_backward_{wte,wpe}.
template <bool kAdd, class D, class RowPtr>
HWY_INLINE void AccumulateBlock(D d, float* HWY_RESTRICT dst, size_t count, const RowPtr& row,
                                size_t c) {
  auto acc = hn::LoadU(d, row(0) + c);
  for (size_t k = 1; k < count; ++k) acc = hn::Add(acc, hn::LoadU(d, row(k) + c));
  if (kAdd) acc = hn::Add(hn::LoadU(d, dst + c), acc);
  hn::StoreU(acc, d, dst + c);
}

// Same for a 4-vector block: four independent accumulators per source row, so one pass over the
// segment's rows moves 4 vectors (256 bytes on AVX3) and the adds pipeline. Same order per element.
template <bool kAdd, class D, class RowPtr>
HWY_INLINE void AccumulateBlock4(D d, float* HWY_RESTRICT dst, size_t count, const RowPtr& row,
                                 size_t c) {
  const size_t L = hn::Lanes(d);
  const float* src = row(0) + c;
  auto acc0 = hn::LoadU(d, src);
  auto acc1 = hn::LoadU(d, src + L);
  auto acc2 = hn::LoadU(d, src + 2 * L);
  auto acc3 = hn::LoadU(d, src + 3 * L);
  for (size_t k = 1; k < count; ++k) {
    src = row(k) + c;
    acc0 = hn::Add(acc0, hn::LoadU(d, src));
    acc1 = hn::Add(acc1, hn::LoadU(d, src + L));
    acc2 = hn::Add(acc2, hn::LoadU(d, src + 2 * L));
    acc3 = hn::Add(acc3, hn::LoadU(d, src + 3 * L));
  }
  float* out = dst + c;
  if (kAdd) {
    acc0 = hn::Add(hn::LoadU(d, out), acc0);
    acc1 = hn::Add(hn::LoadU(d, out + L), acc1);
    acc2 = hn::Add(hn::LoadU(d, out + 2 * L), acc2);
    acc3 = hn::Add(hn::LoadU(d, out + 3 * L), acc3);
  }
  hn::StoreU(acc0, d, out);
  hn::StoreU(acc1, d, out + L);
  hn::StoreU(acc2, d, out + 2 * L);
  hn::StoreU(acc3, d, out + 3 * L);
}

// dst[c0, c1) += (or =) sum_{k < count} row(k)[c0, c1), summed in increasing k (AccumulateBlock).
template <bool kAdd = true, class RowPtr>
HWY_INLINE void AccumulateRange(float* HWY_RESTRICT dst, size_t count, const RowPtr& row, size_t c0,
                                size_t c1) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  size_t c = c0;
  for (; c + 4 * L <= c1; c += 4 * L) AccumulateBlock4<kAdd>(d, dst, count, row, c);
  for (; c + L <= c1; c += L) AccumulateBlock<kAdd>(d, dst, count, row, c);
  const hn::CappedTag<float, 1> d1;
  for (; c < c1; ++c) AccumulateBlock<kAdd>(d1, dst, count, row, c);
}

template <class RowPtr>
HWY_INLINE void AccumulateRows(float* HWY_RESTRICT dst, size_t count, const RowPtr& row, size_t C) {
  AccumulateRange<true>(dst, count, row, 0, C);
}

// dst[0, C) += src[0, C): one row read-modify-write (the serial and row-range strategies).
HWY_INLINE void AddRowInPlace(float* HWY_RESTRICT dst, const float* HWY_RESTRICT src, size_t C) {
  AddRows(dst, dst, src, C);
}

// Counting sort of positions by id (stable: positions stay in increasing order within a row).
// Fills row_start (V+1 segment offsets), order (N), touched (distinct ids, increasing), hot
// (touched rows with >= kScatterHotCount positions, most positions first, ties by id) and multi
// (the other touched rows with more than one position, increasing).
// O(N + V) serial work on ints; the float work that follows is O(N * C). Returns #touched.
HWY_INLINE size_t SortById(const int32_t* HWY_RESTRICT ids, size_t N, size_t V, ScatterWorkspace* ws) {
  // Grow the buffers only when they are too small: a training loop reuses them every step.
  std::vector<int32_t>& row_start = ws->row_start;
  std::vector<int32_t>& order = ws->order;
  std::vector<int32_t>& touched = ws->touched;
  if (row_start.size() < V + 1) row_start.resize(V + 1);
  if (order.size() < N) order.resize(N);
  if (touched.size() < std::min(N, V)) touched.resize(std::min(N, V));
  ws->hot.clear();
  ws->multi.clear();

  std::fill(row_start.begin(), row_start.begin() + static_cast<ptrdiff_t>(V + 1), 0);
  for (size_t n = 0; n < N; ++n) ++row_start[static_cast<size_t>(ids[n]) + 1];
  size_t num_touched = 0;
  for (size_t v = 0; v < V; ++v) {
    const int32_t count = row_start[v + 1];
    if (count != 0) {
      touched[num_touched++] = static_cast<int32_t>(v);
      if (static_cast<size_t>(count) >= kScatterHotCount) ws->hot.push_back(static_cast<int32_t>(v));
      else if (count >= 2) ws->multi.push_back(static_cast<int32_t>(v));
    }
    row_start[v + 1] += row_start[v];  // now row_start[v] = first slot of row v
  }
  for (size_t n = 0; n < N; ++n)
    order[static_cast<size_t>(row_start[static_cast<size_t>(ids[n])]++)] = static_cast<int32_t>(n);
  // Placement advanced each row_start[v] to the start of row v+1; shift back by one row.
  std::copy_backward(row_start.begin(), row_start.begin() + static_cast<ptrdiff_t>(V),
                     row_start.begin() + static_cast<ptrdiff_t>(V + 1));
  row_start[0] = 0;
  const int32_t* rs = row_start.data();
  std::sort(ws->hot.begin(), ws->hot.end(), [rs](int32_t a, int32_t b) {
    const int32_t ca = rs[a + 1] - rs[a], cb = rs[b + 1] - rs[b];
    return ca != cb ? ca > cb : a < b;
  });
  return num_touched;
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace wte
HWY_AFTER_NAMESPACE();

#endif  // WTE_SIMD_SCATTER_INL_H_
