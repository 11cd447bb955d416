// Embedding lookup forward and backward (token table wte, position table wpe), Highway with dynamic
// dispatch. Contracts and shapes: simd/kernels.h; scalar references: simd/reference.h.
//
// All three kernels are exact with respect to the references: each output element sees the same
// float additions in the same order (SIMD only runs across C, where elements are independent), so
// results are bit-identical on every target and for every OpenMP thread count.

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "simd/kernels.h"

// foreach_target.h must come before every other Highway header.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/embedding.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/cache_control.h"
#include "hwy/highway.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace wte {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The Highway target this code was compiled for; lets tests see which target dispatch picked.
int64_t DispatchTarget() { return HWY_TARGET; }

// dst[0, C) = a[0, C) + b[0, C). Full vectors, then a one-lane tail (1.0.3 has no LoadN/StoreN).
HWY_INLINE void AddRows(float* HWY_RESTRICT dst, const float* HWY_RESTRICT a,
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
// k, then adds the sum to dst with one read-modify-write:
//   acc = row(0)[c..];  acc += row(k)[c..] for k = 1..count-1;  dst[c..] += acc.
// This is the per-element order of ref::embedding_backward_{wte,wpe}.
template <class D, class RowPtr>
HWY_INLINE void AccumulateBlock(D d, float* HWY_RESTRICT dst, size_t count, const RowPtr& row,
                                size_t c) {
  auto acc = hn::LoadU(d, row(0) + c);
  for (size_t k = 1; k < count; ++k) acc = hn::Add(acc, hn::LoadU(d, row(k) + c));
  hn::StoreU(hn::Add(hn::LoadU(d, dst + c), acc), d, dst + c);
}

// Same for a 4-vector block: four independent accumulators per source row, so one pass over the
// segment's rows moves 4 vectors (256 bytes on AVX3) and the adds pipeline. Same order per element.
template <class D, class RowPtr>
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
  hn::StoreU(hn::Add(hn::LoadU(d, out), acc0), d, out);
  hn::StoreU(hn::Add(hn::LoadU(d, out + L), acc1), d, out + L);
  hn::StoreU(hn::Add(hn::LoadU(d, out + 2 * L), acc2), d, out + 2 * L);
  hn::StoreU(hn::Add(hn::LoadU(d, out + 3 * L), acc3), d, out + 3 * L);
}

// dst[0, C) += sum_{k < count} row(k)[0, C), summed in increasing k (see AccumulateBlock).
template <class RowPtr>
HWY_INLINE void AccumulateRows(float* HWY_RESTRICT dst, size_t count, const RowPtr& row, size_t C) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  size_t c = 0;
  for (; c + 4 * L <= C; c += 4 * L) AccumulateBlock4(d, dst, count, row, c);
  for (; c + L <= C; c += L) AccumulateBlock(d, dst, count, row, c);
  const hn::CappedTag<float, 1> d1;
  for (; c < C; ++c) AccumulateBlock(d1, dst, count, row, c);
}

void EmbeddingForward(float* HWY_RESTRICT hidden_states, const int32_t* HWY_RESTRICT ids,
                      const float* HWY_RESTRICT wte, const float* HWY_RESTRICT wpe, size_t B,
                      size_t T, size_t C) {
  const size_t N = B * T;
  // Static schedule: each thread walks a contiguous run of rows, so prefetching row n+1's table
  // row (a random gather) while adding row n hides part of the miss latency.
#pragma omp parallel for schedule(static)
  for (size_t n = 0; n < N; ++n) {
    if (n + 1 < N) {
      const float* next = wte + static_cast<size_t>(ids[n + 1]) * C;
      for (size_t c = 0; c < C; c += 64 / sizeof(float)) hwy::Prefetch(next + c);
    }
    const size_t t = n % T;
    AddRows(hidden_states + n * C, wte + static_cast<size_t>(ids[n]) * C, wpe + t * C, C);
  }
}

void EmbeddingBackwardWte(float* HWY_RESTRICT dwte, const float* HWY_RESTRICT dhidden,
                          const int32_t* HWY_RESTRICT ids, size_t N, size_t C, size_t V,
                          ScatterWorkspace* workspace) {
  if (N == 0 || C == 0) return;
  // Grow the buffers only when they are too small: a training loop reuses them every step.
  std::vector<int32_t>& row_start = workspace->row_start;
  std::vector<int32_t>& order = workspace->order;
  std::vector<int32_t>& touched = workspace->touched;
  if (row_start.size() < V + 1) row_start.resize(V + 1);
  if (order.size() < N) order.resize(N);
  if (touched.size() < std::min(N, V)) touched.resize(std::min(N, V));

  // Counting sort of positions by id (stable: positions stay in increasing order within a row).
  // O(N + V) serial work on ints; the float work below is O(N * C).
  std::fill(row_start.begin(), row_start.begin() + static_cast<ptrdiff_t>(V + 1), 0);
  for (size_t n = 0; n < N; ++n) ++row_start[static_cast<size_t>(ids[n]) + 1];
  size_t num_touched = 0;
  for (size_t v = 0; v < V; ++v) {
    if (row_start[v + 1] != 0) touched[num_touched++] = static_cast<int32_t>(v);
    row_start[v + 1] += row_start[v];  // now row_start[v] = first slot of row v
  }
  for (size_t n = 0; n < N; ++n)
    order[static_cast<size_t>(row_start[static_cast<size_t>(ids[n])]++)] = static_cast<int32_t>(n);
  // Placement advanced each row_start[v] to the start of row v+1; shift back by one row.
  std::copy_backward(row_start.begin(), row_start.begin() + static_cast<ptrdiff_t>(V),
                     row_start.begin() + static_cast<ptrdiff_t>(V + 1));
  row_start[0] = 0;

  // One task per touched row: rows are disjoint, each row's summation order is fixed by the
  // sort, so the schedule (dynamic, to balance Zipf-heavy rows) cannot change any bit.
  const int32_t* HWY_RESTRICT order_ptr = order.data();
  const int32_t* HWY_RESTRICT row_start_ptr = row_start.data();
  const int32_t* HWY_RESTRICT touched_ptr = touched.data();
#pragma omp parallel for schedule(dynamic, 8)
  for (size_t k = 0; k < num_touched; ++k) {
    const size_t v = static_cast<size_t>(touched_ptr[k]);
    const int32_t* segment = order_ptr + row_start_ptr[v];
    const size_t count = static_cast<size_t>(row_start_ptr[v + 1] - row_start_ptr[v]);
    const auto row = [=](size_t j) { return dhidden + static_cast<size_t>(segment[j]) * C; };
    AccumulateRows(dwte + v * C, count, row, C);
  }
}

void EmbeddingBackwardWpe(float* HWY_RESTRICT dwpe, const float* HWY_RESTRICT dhidden, size_t B,
                          size_t T, size_t C) {
  if (B == 0) return;
#pragma omp parallel for schedule(static)
  for (size_t t = 0; t < T; ++t) {
    const auto row = [=](size_t b) { return dhidden + (b * T + t) * C; };
    AccumulateRows(dwpe + t * C, B, row, C);
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace wte
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wte {

HWY_EXPORT(DispatchTarget);
HWY_EXPORT(EmbeddingForward);
HWY_EXPORT(EmbeddingBackwardWte);
HWY_EXPORT(EmbeddingBackwardWpe);

int64_t simd_dispatch_target() { return HWY_DYNAMIC_DISPATCH(DispatchTarget)(); }

void embedding_forward(float* hidden_states, const int32_t* ids, const float* wte, const float* wpe,
                       size_t B, size_t T, size_t C) {
  HWY_DYNAMIC_DISPATCH(EmbeddingForward)(hidden_states, ids, wte, wpe, B, T, C);
}

void embedding_backward_wte(float* dwte, const float* dhidden, const int32_t* ids, size_t N,
                            size_t C, size_t V, ScatterWorkspace* workspace) {
  HWY_DYNAMIC_DISPATCH(EmbeddingBackwardWte)(dwte, dhidden, ids, N, C, V, workspace);
}

void embedding_backward_wpe(float* dwpe, const float* dhidden, size_t B, size_t T, size_t C) {
  HWY_DYNAMIC_DISPATCH(EmbeddingBackwardWpe)(dwpe, dhidden, B, T, C);
}

}  // namespace wte
#endif  // HWY_ONCE
