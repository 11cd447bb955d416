// The token and position embedding kernels (simd/embedding.cc: embedding_forward,
// embedding_backward_wte, alone and fused with the gradient norm's block sums,
// embedding_backward_rows (the untied wte's row-sparse gradient), embedding_backward_wpe;
// contracts in include/wte/kernels.h) against their scalar references (src/reference/kernels.h),
// bit for bit, on every Highway target compiled into this binary and supported by this CPU (one
// parameterized instance per target).
//
// Each case uses sizes around the vector widths (1, 3, L-1, L, L+1, 3L, 8L+2 for L = 4, 8, 16),
// buffers that start 4 bytes past a 64-byte boundary and are surrounded by NaN guards (a kernel
// that reads a guard turns its output into NaN; one that writes it changes the guard's bits), and
// both inputs exact in binary (sums exact, order-free) and general floats (sums depend on order, so
// a bit-identical result proves the kernel adds in the reference's order). The scatter's strategies
// are compared in tests/simd/test_scatter_strategies.cc.

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "hwy/targets.h"
#include "wte/kernels.h"
#include "src/reference/kernels.h"
#include "tests/simd_test_util.h"

namespace wte {
namespace {

using test::AtOneAndTwoThreads;
using test::BitIdentical;
using test::fill_exact;
using test::fill_general;
using test::GuardedBuffer;
using test::MakeBackwardWteCase;

// Sizes around the float lane counts of SSE (4), AVX2 (8) and AVX3 (16).
const std::vector<size_t> kSizes = {1,  2,  3,  4,  5,  7,  8,  9,   15,  16,  17,  31,
                                    32, 33, 47, 48, 63, 64, 65, 127, 128, 129, 130, 257};

// Forces one Highway target for the duration of each test; resets the mock afterwards.
class EmbeddingKernelTest : public test::TargetTest {};

// ------------------------------------------------------------------------------------------------
// embedding_forward

TEST_P(EmbeddingKernelTest, ForwardMatchesReferenceBitForBit) {
  std::mt19937 rng(1);
  const size_t B = 2, T = 3, V = 7, N = B * T;
  for (size_t C : kSizes) {
    GuardedBuffer wte(V * C), wpe((T + 1) * C), hidden(N * C);
    fill_general(wte.data(), wte.size(), rng);
    fill_general(wpe.data(), wpe.size(), rng);
    // ids cover the first and last table rows (reads next to the guards).
    std::vector<int32_t> ids = {0, 6, 3, 6, 0, 2};
    embedding_forward(hidden.data(), ids.data(), wte.data(), wpe.data(), B, T, C);

    std::vector<float> want(N * C);
    ref::embedding_forward(want.data(), ids.data(), wte.data(), wpe.data(), B, T, C);
    EXPECT_TRUE(BitIdentical(hidden.data(), want.data(), N * C)) << target() << " C=" << C;
    EXPECT_TRUE(hidden.guards_intact() && wte.guards_intact() && wpe.guards_intact())
        << target() << " C=" << C << ": a guard around a buffer was written";
  }
}

// ------------------------------------------------------------------------------------------------
// embedding_backward_wte

// Runs the kernel on a copy of dwte_init and returns the result; untouched rows may hold NaN.
std::vector<float> RunBackwardWte(const std::vector<float>& dwte_init, const GuardedBuffer& dhidden,
                                  const std::vector<int32_t>& ids, size_t C, size_t V,
                                  ScatterWorkspace* workspace, bool* guards_ok) {
  GuardedBuffer dwte = GuardedBuffer::copy_of(dwte_init);
  embedding_backward_wte(dwte.data(), dhidden.data(), ids.data(), ids.size(), C, V, workspace);
  *guards_ok = dwte.guards_intact() && dhidden.guards_intact();
  return dwte.to_vector();
}

// A hand case: vocab 5, d 2, ids [3, 1, 3]; row 3 gets the sum of rows 0 and 2 of the upstream
// gradient, row 1 its row 1, the others nothing.
TEST_P(EmbeddingKernelTest, BackwardWteSumsRepeatedIdsByHand) {
  const size_t V = 5, C = 2;
  const std::vector<int32_t> ids = {3, 1, 3};
  GuardedBuffer dhidden(3 * C);
  const float upstream[] = {1, 2, 10, 20, 100, 200};
  std::copy(std::begin(upstream), std::end(upstream), dhidden.data());
  const std::vector<float> want = {0, 0, 10, 20, 0, 0, 101, 202, 0, 0};

  const auto results = AtOneAndTwoThreads([&](int threads) {
    ScatterWorkspace workspace;
    bool guards_ok = false;
    std::vector<float> got =
        RunBackwardWte(std::vector<float>(V * C, 0.0f), dhidden, ids, C, V, &workspace, &guards_ok);
    EXPECT_TRUE(BitIdentical(got.data(), want.data(), V * C)) << target() << " threads=" << threads;
    EXPECT_TRUE(guards_ok) << target() << " threads=" << threads;
    return got;
  });
  EXPECT_TRUE(BitIdentical(results[0].data(), results[1].data(), V * C))
      << target() << ": 1 and 2 threads differ";
}

// Random ids with many duplicates in a small vocabulary, for every C. Rows that no id touches hold
// NaN in dwte: reading one would poison nothing we check, so we check their bits are unchanged.
TEST_P(EmbeddingKernelTest, BackwardWteMatchesReferenceBitForBit) {
  std::mt19937 rng(2);
  const size_t V = 11, N = 37;
  ScatterWorkspace workspace;  // reused across all sizes, as in training
  for (size_t C : kSizes) {
    for (bool exact : {true, false}) {
      std::vector<int32_t> ids(N);
      std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(V) - 3);
      for (int32_t& id : ids) id = pick(rng);  // rows V-2 and V-1 stay untouched
      ids[5] = 0;
      test::BackwardWteCase k = MakeBackwardWteCase(ids, C, V, rng, exact, 10.0f);
      // The untouched rows V-2, V-1 hold NaN (the reference scatter leaves them as they start).
      for (std::vector<float>* table : {&k.dwte_init, &k.want})
        std::fill(table->end() - static_cast<ptrdiff_t>(2 * C), table->end(),
                  GuardedBuffer::guard_value());
      for (int threads : {1, 2}) {
        omp_set_num_threads(threads);
        bool guards_ok = false;
        const std::vector<float> got =
            RunBackwardWte(k.dwte_init, k.dhidden, ids, C, V, &workspace, &guards_ok);
        EXPECT_TRUE(BitIdentical(got.data(), k.want.data(), V * C))
            << target() << " C=" << C << " exact=" << exact << " threads=" << threads;
        EXPECT_TRUE(guards_ok) << target() << " C=" << C;
      }
    }
  }
  // The workspace grew to the largest sizes and was reused, never shrunk.
  EXPECT_GE(workspace.row_start.size(), V + 1);
  EXPECT_GE(workspace.order.size(), N);
}

// A workspace sized by a bigger call must still give correct results for a smaller one.
TEST_P(EmbeddingKernelTest, BackwardWteReusesWorkspaceAcrossShapes) {
  std::mt19937 rng(3);
  ScatterWorkspace workspace;
  const std::vector<std::tuple<size_t, size_t, size_t>> shapes = {
      {300, 200, 9}, {4, 3, 17}, {50, 1, 1}, {1, 5, 33}, {300, 200, 9}};  // (V, N, C)
  for (auto [V, N, C] : shapes) {
    std::vector<int32_t> ids(N);
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(V) - 1);
    for (int32_t& id : ids) id = pick(rng);
    const test::BackwardWteCase k = MakeBackwardWteCase(ids, C, V, rng);
    bool guards_ok = false;
    const std::vector<float> got =
        RunBackwardWte(k.dwte_init, k.dhidden, ids, C, V, &workspace, &guards_ok);
    EXPECT_TRUE(BitIdentical(got.data(), k.want.data(), V * C))
        << target() << " V=" << V << " N=" << N << " C=" << C;
    EXPECT_TRUE(guards_ok) << target() << " V=" << V << " N=" << N << " C=" << C;
  }
  EXPECT_GE(workspace.row_start.size(), 301u);
  EXPECT_GE(workspace.order.size(), 200u);
}

// Zipf-like ids (a few rows take most positions, as real text does), general floats: the same bits
// for 1 and 2 threads, and the same bits as the reference.
TEST_P(EmbeddingKernelTest, BackwardWteZipfDeterministic) {
  std::mt19937 rng(4);
  const size_t V = 1000, N = 4096, C = 67;
  std::vector<double> weights(V);
  for (size_t v = 0; v < V; ++v) weights[v] = 1.0 / std::pow(static_cast<double>(v + 1), 1.1);
  std::discrete_distribution<int32_t> zipf(weights.begin(), weights.end());
  std::vector<int32_t> ids(N);
  for (int32_t& id : ids) id = zipf(rng);
  const test::BackwardWteCase k = MakeBackwardWteCase(ids, C, V, rng);

  ScatterWorkspace workspace;
  const auto results = AtOneAndTwoThreads([&](int threads) {
    bool guards_ok = false;
    std::vector<float> got = RunBackwardWte(k.dwte_init, k.dhidden, ids, C, V, &workspace, &guards_ok);
    EXPECT_TRUE(BitIdentical(got.data(), k.want.data(), V * C)) << target() << " threads=" << threads;
    EXPECT_TRUE(guards_ok) << target() << " threads=" << threads;
    return got;
  });
  EXPECT_TRUE(BitIdentical(results[0].data(), results[1].data(), V * C))
      << target() << ": 1 and 2 threads differ";
  EXPECT_GT(std::count(ids.begin(), ids.end(), 0), 100)
      << "ids are not Zipf-like enough to test duplicates";
}

// With the gradient norm's block sums (dwte_sumsq: the tied model's scatter), the scatter runs
// fused with them, chunk by chunk of whole norm blocks, then scatters the rows past the last
// whole block on their own: dwte must still be the reference's bit for bit, and each sum that of
// its 65536-float block of the result. Shapes: one-block chunks with rows past the last block
// (C 64: chunks of 1024 rows, V 1100; C 256: chunks of 256 rows, V 300), a hot row (40 positions),
// repeated and single ids.
TEST_P(EmbeddingKernelTest, BackwardWteWithNormBlockSumsMatchesReferenceBitForBit) {
  std::mt19937 rng(6);
  constexpr size_t K = kSumOfSquaresBlock;
  const std::vector<std::tuple<size_t, size_t, size_t>> shapes = {{1100, 64, 500}, {300, 256, 200}};
  for (auto [V, C, N] : shapes) {
    std::vector<int32_t> ids(N);
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(V) - 1);
    for (int32_t& id : ids) id = pick(rng);
    for (size_t n = 0; n < 40; ++n) ids[n * (N / 40)] = 7;      // a hot row
    ids[N - 1] = static_cast<int32_t>(V) - 1;                  // the last row, past every block
    const test::BackwardWteCase k = MakeBackwardWteCase(ids, C, V, rng);
    const size_t blocks = V * C / K;
    ASSERT_GT(blocks, 0u);
    ASSERT_NE(V * C % K, 0u) << "rows past the last whole block";
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      const std::string where = target() + " V=" + std::to_string(V) + " C=" + std::to_string(C) +
                                " threads=" + std::to_string(threads);
      ScatterWorkspace workspace;
      GuardedBuffer dwte = GuardedBuffer::copy_of(k.dwte_init);
      std::vector<double> sums(blocks, -1.0);
      EXPECT_EQ(embedding_backward_wte(dwte.data(), k.dhidden.data(), ids.data(), N, C, V,
                                       &workspace, sums.data()),
                blocks)
          << where;
      EXPECT_TRUE(BitIdentical(dwte.data(), k.want.data(), V * C)) << where;
      EXPECT_TRUE(dwte.guards_intact()) << where;
      for (size_t b = 0; b < blocks; ++b)
        EXPECT_EQ(sums[b], ref::sum_of_squares(k.want.data() + b * K, K))
            << where << " block " << b;
    }
  }
}

// The untied wte's row-sparse backward (embedding_backward_rows): one written row per touched id,
// ids increasing, each the sum of its upstream rows in position order: the reference scatter's rows
// from a zero table, bit for bit. Rows start as NaN (every entry must be written); the buffer is
// exactly min(N, V) rows inside NaN guards. Ids repeat (V 11, N 37) and some rows stay untouched.
TEST_P(EmbeddingKernelTest, BackwardRowsMatchReferenceBitForBit) {
  std::mt19937 rng(7);
  const size_t V = 11, N = 37;
  ScatterWorkspace workspace;
  for (size_t C : kSizes) {
    std::vector<int32_t> ids(N);
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(V) - 3);
    for (int32_t& id : ids) id = pick(rng);  // rows V-2 and V-1 stay untouched
    ids[N - 1] = 0;
    test::BackwardWteCase k = MakeBackwardWteCase(ids, C, V, rng);
    std::vector<float> dense(V * C, 0.0f);
    ref::embedding_backward_wte(dense.data(), k.dhidden.data(), ids.data(), N, C, V);
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      const std::string where =
          target() + " C=" + std::to_string(C) + " threads=" + std::to_string(threads);
      GuardedBuffer rows(std::min(N, V) * C);  // NaN inside too
      std::vector<int32_t> touched(std::min(N, V), -1);
      size_t count = 0;
      embedding_backward_rows(rows.data(), touched.data(), &count, k.dhidden.data(), ids.data(), N,
                              C, V, &workspace);
      EXPECT_TRUE(rows.guards_intact() && k.dhidden.guards_intact()) << where;
      size_t want_count = 0;
      for (size_t v = 0; v < V; ++v) {
        if (std::find(ids.begin(), ids.end(), static_cast<int32_t>(v)) == ids.end()) continue;
        ASSERT_LT(want_count, count) << where;
        EXPECT_EQ(touched[want_count], static_cast<int32_t>(v)) << where;
        EXPECT_TRUE(BitIdentical(rows.data() + want_count * C, dense.data() + v * C, C))
            << where << " row " << v;
        ++want_count;
      }
      EXPECT_EQ(count, want_count) << where;
    }
  }
}

// ------------------------------------------------------------------------------------------------
// embedding_backward_wpe

TEST_P(EmbeddingKernelTest, BackwardWpeMatchesReferenceBitForBit) {
  std::mt19937 rng(5);
  for (size_t C : kSizes) {
    for (auto [B, T] : std::vector<std::pair<size_t, size_t>>{{1, 1}, {2, 3}, {5, 7}}) {
      // dwpe has n_ctx = T + 2 rows; the rows past T hold NaN and must keep their bits.
      const size_t n_ctx = T + 2;
      GuardedBuffer dhidden(B * T * C);
      fill_general(dhidden.data(), dhidden.size(), rng);
      std::vector<float> dwpe_init(n_ctx * C);
      fill_general(dwpe_init.data(), dwpe_init.size(), rng, 10.0f);
      std::fill(dwpe_init.begin() + static_cast<ptrdiff_t>(T * C), dwpe_init.end(),
                GuardedBuffer::guard_value());
      std::vector<float> want = dwpe_init;
      ref::embedding_backward_wpe(want.data(), dhidden.data(), B, T, C);

      for (int threads : {1, 2}) {
        omp_set_num_threads(threads);
        GuardedBuffer dwpe = GuardedBuffer::copy_of(dwpe_init);
        embedding_backward_wpe(dwpe.data(), dhidden.data(), B, T, C);
        EXPECT_TRUE(BitIdentical(dwpe.data(), want.data(), n_ctx * C))
            << target() << " B=" << B << " T=" << T << " C=" << C << " threads=" << threads;
        EXPECT_TRUE(dwpe.guards_intact() && dhidden.guards_intact()) << target() << " C=" << C;
      }
    }
  }
}

WTE_INSTANTIATE_ON_EVERY_TARGET(EmbeddingKernelTest);

}  // namespace
}  // namespace wte
