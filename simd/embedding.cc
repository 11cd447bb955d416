// Embedding lookup forward and backward (token table wte, position table wpe), Highway with dynamic
// dispatch. Contracts and shapes: include/wte/kernels.h; scalar references: src/reference/kernels.h.
//
// All three kernels are exact with respect to the references: each output element sees the same
// float additions in the same order (SIMD only runs across C, where elements are independent), so
// results are bit-identical on every target and for every OpenMP thread count.

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "wte/kernels.h"

// foreach_target.h must come before every other Highway header.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/embedding.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "simd/adamw-inl.h"  // AdamWConstants, AdamWStep (one vector; shared with adamw.cc)
#include "simd/scatter-inl.h"  // the row accumulators and SortById (shared with simd/dev/)
#include "simd/sum_of_squares-inl.h"  // BlockSumOfSquares (shared with adamw.cc)
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace wte {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The Highway target this code was compiled for; lets tests see which target dispatch picked.
int64_t DispatchTarget() { return HWY_TARGET; }

// Rows of the gather prefetched ahead of the one being copied: enough to cover a DRAM miss
// (~100 ns) at a row copy of ~70 ns (C=768 at 18 GB/s), a small win over 1 (wte profile gather).
constexpr size_t kPrefetchRows = 4;

void EmbeddingForward(float* HWY_RESTRICT hidden_states, const int32_t* HWY_RESTRICT ids,
                      const float* HWY_RESTRICT wte, const float* HWY_RESTRICT wpe, size_t B,
                      size_t T, size_t C) {
  const size_t N = B * T;
  // Static schedule: each thread walks a contiguous run of rows, so prefetching the table row
  // kPrefetchRows ahead (a random gather) while adding row n hides the miss latency.
#pragma omp parallel for schedule(static)
  for (size_t n = 0; n < N; ++n) {
    if (n + kPrefetchRows < N) {
      const float* next = wte + static_cast<size_t>(ids[n + kPrefetchRows]) * C;
      for (size_t c = 0; c < C; c += 64 / sizeof(float)) hwy::Prefetch(next + c);
    }
    const size_t t = n % T;
    AddRows(hidden_states + n * C, wte + static_cast<size_t>(ids[n]) * C, wpe + t * C, C);
  }
}

// Hot rows are split into column blocks of this many floats (1 KiB: 4 AVX3 4-vector blocks), so a
// row holding most of the positions (Zipf's "the") is reduced by every thread at once.
constexpr size_t kColumnBlock = 256;

// Cold rows whose memory is prefetched ahead of the one being reduced: each is a random row of a
// table larger than the cache (a DRAM miss for uniform ids) plus its upstream rows.
constexpr size_t kScatterPrefetchRows = 2;

// Prefetches the cache lines of C floats at p (a row of the table or of dhidden).
HWY_INLINE void PrefetchFloats(const float* p, size_t C) {
  if (C == 0) return;
  for (size_t c = 0; c < C; c += 64 / sizeof(float)) hwy::Prefetch(p + c);
  hwy::Prefetch(p + C - 1);
}

// No touched row (ColdRowAhead's answer at the end of a range).
constexpr size_t kNoRow = ~size_t{0};

// Positions of touched row v, sorted by SortById: order[row_start[v], row_start[v + 1]).
HWY_INLINE const int32_t* Segment(const ScatterWorkspace& ws, size_t v) {
  return ws.order.data() + ws.row_start[v];
}
HWY_INLINE size_t SegmentCount(const ScatterWorkspace& ws, size_t v) {
  return static_cast<size_t>(ws.row_start[v + 1] - ws.row_start[v]);
}
HWY_INLINE bool IsHot(const ScatterWorkspace& ws, size_t v) {
  return SegmentCount(ws, v) >= kScatterHotCount;
}

// The cold row kScatterPrefetchRows after *t in the touched range [t, last), or kNoRow (none, or
// a hot row: those are done as column blocks by every thread, not prefetched).
HWY_INLINE size_t ColdRowAhead(const ScatterWorkspace& ws, const int32_t* t, const int32_t* last) {
  if (last - t <= static_cast<ptrdiff_t>(kScatterPrefetchRows)) return kNoRow;
  const size_t ahead = static_cast<size_t>(t[kScatterPrefetchRows]);
  return IsHot(ws, ahead) ? kNoRow : ahead;
}

// Hot-row task j of HotBlockCount(ws, C): body(v, segment, count, c0, c1) for one column block of
// hot row v (largest rows first), so a row holding most positions is reduced by every thread.
HWY_INLINE size_t HotBlockCount(const ScatterWorkspace& ws, size_t C) {
  return ws.hot.size() * ((C + kColumnBlock - 1) / kColumnBlock);
}
template <class Body>
HWY_INLINE void HotBlock(const ScatterWorkspace& ws, size_t C, size_t j, const Body& body) {
  const size_t blocks = (C + kColumnBlock - 1) / kColumnBlock;
  const size_t v = static_cast<size_t>(ws.hot[j / blocks]);
  const size_t c0 = (j % blocks) * kColumnBlock;
  body(v, Segment(ws, v), SegmentCount(ws, v), c0, std::min(C, c0 + kColumnBlock));
}

// Covers every touched row's columns [0, C) exactly once: hot rows as column blocks through
// body(v, segment, count, c0, c1) (dynamic, one task at a time), then each cold row v through
// cold(v, ahead) (dynamic, chunks of 8), where ahead is ColdRowAhead's row to prefetch (a hint: it
// may belong to another thread's chunk). Rows are disjoint and each element's work is independent
// of the schedule, so no bit depends on the thread count.
template <class Body, class Cold>
void ForEachRowTask(const ScatterWorkspace& ws, size_t num_touched, size_t C, const Body& body,
                    const Cold& cold) {
  const int32_t* touched = ws.touched.data();
  const int32_t* touched_end = touched + num_touched;
  const size_t num_hot_blocks = HotBlockCount(ws, C);
#pragma omp parallel
  {
#pragma omp for schedule(dynamic, 1) nowait
    for (size_t j = 0; j < num_hot_blocks; ++j) HotBlock(ws, C, j, body);
#pragma omp for schedule(dynamic, 8)
    for (size_t k = 0; k < num_touched; ++k) {
      const size_t v = static_cast<size_t>(touched[k]);
      if (!IsHot(ws, v)) cold(v, ColdRowAhead(ws, touched + k, touched_end));
    }
  }
}

// dst[0, C) += the sum of `count` rows (AccumulateRange's order), prefetching next_dst[0, C) and,
// unless null, next_src[0, C) as it goes: after each 4-vector block, the lines of the same columns,
// one cache line ahead per line read here. Spread out like this the next row's DRAM misses
// overlap this row's work; a burst of whole rows fills the core's miss queue and the loads of the
// row being added wait behind it, as in the gather (simd/gather-inl.h; `wte profile scatter` times
// it on uniform ids, where every row is a miss). The prefetches are hints: no bit depends on them.
template <class RowPtr>
HWY_INLINE void AccumulateRowPrefetching(float* HWY_RESTRICT dst, size_t count, const RowPtr& row,
                                         size_t C, const float* next_dst, const float* next_src) {
  constexpr size_t kLine = 64 / sizeof(float);
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const auto prefetch_line = [=](size_t col) {
    hwy::Prefetch(next_dst + col);
    if (next_src != nullptr) hwy::Prefetch(next_src + col);
  };
  size_t c = 0, line = 0;  // line: the next column whose cache line is prefetched
  for (; c + 4 * L <= C; c += 4 * L) {
    for (; line < c + 4 * L; line += kLine) prefetch_line(line);
    AccumulateBlock4<true>(d, dst, count, row, c);
  }
  for (; line < C; line += kLine) prefetch_line(line);
  prefetch_line(C - 1);  // a row need not start on a cache line
  AccumulateRange<true>(dst, count, row, c, C);
}

// The scatter of one cold row v: dwte[v] += the sum of its upstream rows, prefetching what cold
// row `ahead` will read (its dwte row and its first upstream row; nothing for kNoRow).
HWY_INLINE void ScatterRow(float* HWY_RESTRICT dwte, const float* HWY_RESTRICT dhidden,
                           const ScatterWorkspace& ws, size_t v, size_t C, size_t ahead) {
  const int32_t* segment = Segment(ws, v);
  const auto row = [=](size_t j) { return dhidden + static_cast<size_t>(segment[j]) * C; };
  if (ahead == kNoRow) {
    AccumulateRange<true>(dwte + v * C, SegmentCount(ws, v), row, 0, C);
    return;
  }
  AccumulateRowPrefetching(dwte + v * C, SegmentCount(ws, v), row, C, dwte + ahead * C,
                           dhidden + static_cast<size_t>(Segment(ws, ahead)[0]) * C);
}

// dwte[v][c0, c1) += the sum of row v's upstream rows (HotBlock's body: a hot row's column block).
struct ScatterBlock {
  float* dwte;
  const float* dhidden;
  size_t C;
  void operator()(size_t v, const int32_t* segment, size_t count, size_t c0, size_t c1) const {
    const auto row = [this, segment](size_t j) {
      return dhidden + static_cast<size_t>(segment[j]) * C;
    };
    AccumulateRange<true>(dwte + v * C, count, row, c0, c1);
  }
};

// The scatter without norm sums: hot rows as column blocks (every thread), then the rows with one
// position in position order (dwte[ids[n]] += dhidden[n]: dhidden is read front to back and only
// dwte's rows are random, prefetched kScatterPrefetchRows positions ahead), then the other cold
// rows (multi) by their sorted segments. The three sets of rows are disjoint and a one-position
// row is one add in any order, so the bits are those of every row by its segment (ForEachRowTask),
// for any thread count. Position order is used because only dwte's rows are then random: against
// every row by its segment (`wte profile scatter --strategy auto` times both) it is faster on
// uniform ids and level within noise on Zipf-distributed and corpus ids (docs/kernels.md, Design
// choices in the lookup backward and the step).
void ScatterNoSums(float* HWY_RESTRICT dwte, const float* HWY_RESTRICT dhidden,
                   const int32_t* HWY_RESTRICT ids, size_t N, size_t C,
                   const ScatterWorkspace& ws) {
  const int32_t* multi = ws.multi.data();
  const size_t num_multi = ws.multi.size();
  const size_t num_hot_blocks = HotBlockCount(ws, C);
  const ScatterBlock block{dwte, dhidden, C};
  constexpr size_t kPositionsPerTask = 256;
  const size_t num_tasks = (N + kPositionsPerTask - 1) / kPositionsPerTask;
#pragma omp parallel
  {
#pragma omp for schedule(dynamic, 1) nowait
    for (size_t j = 0; j < num_hot_blocks; ++j) HotBlock(ws, C, j, block);
#pragma omp for schedule(dynamic, 1) nowait
    for (size_t task = 0; task < num_tasks; ++task) {
      const size_t n1 = std::min(N, (task + 1) * kPositionsPerTask);
      for (size_t n = task * kPositionsPerTask; n < n1; ++n) {
        const size_t v = static_cast<size_t>(ids[n]);
        if (SegmentCount(ws, v) != 1) continue;
        const float* src = dhidden + n * C;
        const auto row = [=](size_t) { return src; };
        if (n + kScatterPrefetchRows < n1) {
          const float* next = dwte + static_cast<size_t>(ids[n + kScatterPrefetchRows]) * C;
          AccumulateRowPrefetching(dwte + v * C, 1, row, C, next, nullptr);
        } else {
          AccumulateRange<true>(dwte + v * C, 1, row, 0, C);
        }
      }
    }
#pragma omp for schedule(dynamic, 8)
    for (size_t k = 0; k < num_multi; ++k) {
      const size_t ahead = k + kScatterPrefetchRows < num_multi
                               ? static_cast<size_t>(multi[k + kScatterPrefetchRows])
                               : kNoRow;
      ScatterRow(dwte, dhidden, ws, static_cast<size_t>(multi[k]), C, ahead);
    }
  }
}

// Rows per chunk of the fused scatter + sum of squares: the fewest whole rows that are also whole
// norm blocks (lcm(C, kSumOfSquaresBlock) / C), or 0 when such a chunk would hold more than
// kMaxChunkBlocks blocks (C with a large odd factor: the chunks would be too few to share out, and
// too large to stay in cache), and the two passes run one after the other instead.
constexpr size_t kMaxChunkBlocks = 8;
size_t SumOfSquaresChunkRows(size_t C) {
  constexpr size_t K = kSumOfSquaresBlock;
  size_t g = K, c = C;  // gcd(C, K)
  while (c != 0) {
    const size_t r = g % c;
    g = c;
    c = r;
  }
  const size_t rows = K / g;
  return rows * C / K <= kMaxChunkBlocks ? rows : 0;
}

size_t EmbeddingBackwardWte(float* HWY_RESTRICT dwte, const float* HWY_RESTRICT dhidden,
                            const int32_t* HWY_RESTRICT ids, size_t N, size_t C, size_t V,
                            ScatterWorkspace* workspace, double* HWY_RESTRICT sumsq) {
  if (C == 0) return 0;
  const size_t num_touched = N == 0 ? 0 : SortById(ids, N, V, workspace);
  const ScatterWorkspace& ws = *workspace;
  constexpr size_t K = kSumOfSquaresBlock;
  const size_t num_blocks = sumsq == nullptr ? 0 : V * C / K;  // blocks wholly inside dwte
  const size_t chunk_rows = SumOfSquaresChunkRows(C);
  if (num_blocks == 0 || chunk_rows == 0 || num_touched == 0) {
    // The scatter alone, then (if asked) the blocks' sums in a pass of their own.
    if (num_touched > 0) ScatterNoSums(dwte, dhidden, ids, N, C, ws);
    if (num_blocks > 0) {
#pragma omp parallel for schedule(static)
      for (size_t b = 0; b < num_blocks; ++b) sumsq[b] = BlockSumOfSquares(dwte + b * K, K);
    }
    return num_blocks;
  }
  // Fused: hot rows first (column blocks, every thread), then chunks of chunk_rows rows, each
  // chunk's cold rows scattered and then its whole blocks summed while they are in cache. Every row
  // gets the same arithmetic as in ScatterNoSums and every block the same as in
  // sum_of_squares_partials, so dwte and the sums are bit-identical to the two passes, for any
  // thread count.
  const ScatterBlock block{dwte, dhidden, C};
  const auto cold = [=, &ws](size_t v, size_t ahead) { ScatterRow(dwte, dhidden, ws, v, C, ahead); };
  const int32_t* touched = ws.touched.data();
  const int32_t* touched_end = touched + num_touched;
  const size_t num_hot_blocks = HotBlockCount(ws, C);
  const size_t blocks_per_chunk = chunk_rows * C / K;
  const size_t num_chunks = (num_blocks + blocks_per_chunk - 1) / blocks_per_chunk;
#pragma omp parallel
  {
#pragma omp for schedule(dynamic, 1)
    for (size_t j = 0; j < num_hot_blocks; ++j) HotBlock(ws, C, j, block);
    // (barrier: every hot row is final before any block is summed)
#pragma omp for schedule(dynamic, 1) nowait
    for (size_t k = 0; k < num_chunks; ++k) {
      const size_t r0 = k * chunk_rows, r1 = std::min(V, r0 + chunk_rows);
      const int32_t* first = std::lower_bound(touched, touched_end, static_cast<int32_t>(r0));
      const int32_t* last = std::lower_bound(first, touched_end, static_cast<int32_t>(r1));
      for (const int32_t* t = first; t < last; ++t)
        if (!IsHot(ws, static_cast<size_t>(*t))) cold(static_cast<size_t>(*t), ColdRowAhead(ws, t, last));
      const size_t b1 = std::min(num_blocks, (k + 1) * blocks_per_chunk);
      for (size_t b = k * blocks_per_chunk; b < b1; ++b) sumsq[b] = BlockSumOfSquares(dwte + b * K, K);
    }
  }
  // The rows after the last whole block (in no chunk above): scattered on their own.
  const int32_t* rest = std::lower_bound(touched, touched_end,
                                         static_cast<int32_t>(num_chunks * chunk_rows));
  for (const int32_t* t = rest; t < touched_end; ++t)
    if (!IsHot(ws, static_cast<size_t>(*t))) cold(static_cast<size_t>(*t), ColdRowAhead(ws, t, touched_end));
  return num_blocks;
}

// AdamW on columns [c0, c1) of one row; grads indexed by the same columns.
HWY_INLINE void LazyAdamWRange(float* HWY_RESTRICT params, const float* HWY_RESTRICT grads,
                               float* HWY_RESTRICT m, float* HWY_RESTRICT v, size_t c0, size_t c1,
                               const AdamWConstants& k) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  size_t c = c0;
  for (; c + L <= c1; c += L) AdamWStep(d, params, grads, m, v, c, k);
  const hn::CappedTag<float, 1> d1;
  for (; c < c1; ++c) AdamWStep(d1, params, grads, m, v, c, k);
}

void EmbeddingBackwardRows(float* HWY_RESTRICT grad_rows, int32_t* HWY_RESTRICT touched_out,
                           size_t* num_touched_out, const float* HWY_RESTRICT dhidden,
                           const int32_t* HWY_RESTRICT ids, size_t N, size_t C, size_t V,
                           ScatterWorkspace* ws) {
  *num_touched_out = 0;
  if (N == 0) return;
  const size_t num_touched = SortById(ids, N, V, ws);
  // slot[v] = k for touched row v: row_start is still needed, so index through touched instead.
  std::copy(ws->touched.begin(), ws->touched.begin() + static_cast<ptrdiff_t>(num_touched),
            touched_out);
  *num_touched_out = num_touched;
  if (C == 0) return;
  const int32_t* HWY_RESTRICT touched = ws->touched.data();
  const int32_t* HWY_RESTRICT order = ws->order.data();
  const int32_t* HWY_RESTRICT row_start = ws->row_start.data();
#pragma omp parallel for schedule(dynamic, 8)
  for (size_t k = 0; k < num_touched; ++k) {
    // The upstream rows of the row kScatterPrefetchRows ahead: random rows of dhidden (positions
    // sorted by id), a cache miss each for spread ids. A hint only; no result depends on it.
    if (k + kScatterPrefetchRows < num_touched) {
      const size_t ahead = static_cast<size_t>(touched[k + kScatterPrefetchRows]);
      const size_t end = std::min(static_cast<size_t>(row_start[ahead + 1]),
                                  static_cast<size_t>(row_start[ahead]) + 2);
      for (size_t j = static_cast<size_t>(row_start[ahead]); j < end; ++j)
        PrefetchFloats(dhidden + static_cast<size_t>(order[j]) * C, C);
    }
    const size_t v = static_cast<size_t>(touched[k]);
    const int32_t* segment = order + row_start[v];
    const size_t count = static_cast<size_t>(row_start[v + 1] - row_start[v]);
    const auto row = [=](size_t j) { return dhidden + static_cast<size_t>(segment[j]) * C; };
    AccumulateRange<false>(grad_rows + k * C, count, row, 0, C);
  }
}

void AdamWUpdateRows(float* HWY_RESTRICT params, float* HWY_RESTRICT m, float* HWY_RESTRICT v,
                     const float* HWY_RESTRICT grad_rows, const int32_t* HWY_RESTRICT touched,
                     size_t num_touched, size_t C, const AdamWParams& hp, float grad_scale) {
  const AdamWConstants k(hp, grad_scale);
#pragma omp parallel for schedule(static)
  for (size_t j = 0; j < num_touched; ++j) {
    const size_t r = static_cast<size_t>(touched[j]) * C;
    LazyAdamWRange(params + r, grad_rows + j * C, m + r, v + r, 0, C, k);
  }
}

void EmbeddingBackwardAdamWLazy(float* HWY_RESTRICT params, float* HWY_RESTRICT m,
                                float* HWY_RESTRICT v, const float* HWY_RESTRICT dhidden,
                                const int32_t* HWY_RESTRICT ids, size_t N, size_t C, size_t V,
                                const AdamWParams& hp, ScatterWorkspace* ws) {
  if (N == 0 || C == 0) return;
  const size_t num_touched = SortById(ids, N, V, ws);
  const AdamWConstants k(hp);
  const size_t P = static_cast<size_t>(omp_get_max_threads());
  if (ws->scratch.size() < P * C) ws->scratch.resize(P * C);
  float* scratch = ws->scratch.data();
  const ScatterWorkspace& w = *ws;
  const auto body = [=, &k](size_t r, const int32_t* segment, size_t count, size_t c0, size_t c1) {
    // The gradient of columns [c0, c1) lives at scratch[c0, c1) of this thread.
    float* g = scratch + static_cast<size_t>(omp_get_thread_num()) * C;
    const auto row = [=](size_t j) { return dhidden + static_cast<size_t>(segment[j]) * C; };
    AccumulateRange<false>(g, count, row, c0, c1);
    LazyAdamWRange(params + r * C, g, m + r * C, v + r * C, c0, c1, k);
  };
  const auto cold = [=, &w](size_t r, size_t ahead) {
    if (ahead != kNoRow) {  // its table, moment and first two upstream rows
      PrefetchFloats(params + ahead * C, C);
      PrefetchFloats(m + ahead * C, C);
      PrefetchFloats(v + ahead * C, C);
      for (size_t j = 0; j < SegmentCount(w, ahead) && j < 2; ++j)
        PrefetchFloats(dhidden + static_cast<size_t>(Segment(w, ahead)[j]) * C, C);
    }
    body(r, Segment(w, r), SegmentCount(w, r), 0, C);
  };
  ForEachRowTask(w, num_touched, C, body, cold);
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

size_t embedding_backward_wte(float* dwte, const float* dhidden, const int32_t* ids, size_t N,
                              size_t C, size_t V, ScatterWorkspace* workspace,
                              double* dwte_sumsq) {
  return HWY_DYNAMIC_DISPATCH(EmbeddingBackwardWte)(dwte, dhidden, ids, N, C, V, workspace,
                                                    dwte_sumsq);
}

void embedding_backward_wpe(float* dwpe, const float* dhidden, size_t B, size_t T, size_t C) {
  HWY_DYNAMIC_DISPATCH(EmbeddingBackwardWpe)(dwpe, dhidden, B, T, C);
}

HWY_EXPORT(EmbeddingBackwardRows);
HWY_EXPORT(AdamWUpdateRows);
HWY_EXPORT(EmbeddingBackwardAdamWLazy);

void embedding_backward_rows(float* grad_rows, int32_t* touched, size_t* num_touched,
                             const float* dhidden, const int32_t* ids, size_t N, size_t C, size_t V,
                             ScatterWorkspace* workspace) {
  HWY_DYNAMIC_DISPATCH(EmbeddingBackwardRows)(grad_rows, touched, num_touched, dhidden, ids, N, C,
                                              V, workspace);
}

void adamw_update_rows(float* params, float* m, float* v, const float* grad_rows,
                       const int32_t* touched, size_t num_touched, size_t C, const AdamWParams& hp,
                       float grad_scale) {
  HWY_DYNAMIC_DISPATCH(AdamWUpdateRows)(params, m, v, grad_rows, touched, num_touched, C, hp,
                                        grad_scale);
}

void embedding_backward_adamw_lazy(float* params, float* m, float* v, const float* dhidden,
                                   const int32_t* ids, size_t N, size_t C, size_t V,
                                   const AdamWParams& hp, ScatterWorkspace* workspace) {
  HWY_DYNAMIC_DISPATCH(EmbeddingBackwardAdamWLazy)(params, m, v, dhidden, ids, N, C, V, hp,
                                                   workspace);
}

}  // namespace wte
#endif  // HWY_ONCE
