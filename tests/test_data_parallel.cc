// The arithmetic of data-parallel training (src/model/data_parallel.h), without MPI: which samples
// a rank takes, the rank weights, the rank-ordered dense sum and the merge of row-sparse gradients.
// Exact values throughout (the order of the sums is the contract). The end-to-end runs under
// mpirun are tests/test_mpi_train.sh.
#include <gtest/gtest.h>
#include <omp.h>

#include <string>
#include <vector>

#include "src/model/data_parallel.h"
#include "wte/error.h"

namespace {

using wte::BatchSlice;

TEST(DataParallel, SlicesCoverTheBatchInOrder) {
  // B 16, R 2: samples [0, 8) and [8, 16).
  EXPECT_EQ(wte::batch_slice(16, 0, 2).first, 0u);
  EXPECT_EQ(wte::batch_slice(16, 0, 2).count, 8u);
  EXPECT_EQ(wte::batch_slice(16, 1, 2).first, 8u);
  EXPECT_EQ(wte::batch_slice(16, 1, 2).count, 8u);
  // B 7, R 3: 3 + 2 + 2 starting at 0, 3, 5.
  const size_t first[] = {0, 3, 5}, count[] = {3, 2, 2};
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(wte::batch_slice(7, r, 3).first, first[r]) << r;
    EXPECT_EQ(wte::batch_slice(7, r, 3).count, count[r]) << r;
  }
  // Every B and R <= B: the slices tile [0, B).
  for (size_t B = 1; B <= 20; ++B)
    for (int R = 1; R <= static_cast<int>(B); ++R) {
      size_t next = 0;
      for (int r = 0; r < R; ++r) {
        const BatchSlice s = wte::batch_slice(B, r, R);
        EXPECT_EQ(s.first, next);
        EXPECT_GE(s.count, 1u);
        next += s.count;
      }
      EXPECT_EQ(next, B);
    }
}

TEST(DataParallel, MoreRanksThanSamplesIsAnErrorNamingBoth) {
  try {
    wte::batch_slice(4, 0, 5);
    FAIL() << "no error";
  } catch (const wte::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("train.batch_size = 4"), std::string::npos) << m;
    EXPECT_NE(m.find("(5)"), std::string::npos) << m;
  }
  EXPECT_THROW(wte::batch_slice(4, 2, 2), wte::Error);
}

TEST(DataParallel, RankWeightsAreSliceShares) {
  EXPECT_EQ(wte::rank_weights(16, 2), (std::vector<float>{0.5f, 0.5f}));
  EXPECT_EQ(wte::rank_weights(7, 3), (std::vector<float>{3.0f / 7, 2.0f / 7, 2.0f / 7}));
  EXPECT_EQ(wte::rank_weights(5, 1), (std::vector<float>{1.0f}));
}

TEST(DataParallel, DenseSumRunsInRankOrder) {
  // Three ranks, weights 1: (1e8 + 1) - 1e8 = 0 in float (1e8 + 1 rounds to 1e8), whereas
  // 1e8 - 1e8 + 1 would be 1: the result pins the order r = 0, 1, 2.
  const size_t n = 5, stride = 8;
  std::vector<float> parts(3 * stride, 0.0f);
  for (size_t i = 0; i < n; ++i) {
    parts[0 * stride + i] = 1e8f;
    parts[1 * stride + i] = 1.0f;
    parts[2 * stride + i] = -1e8f;
  }
  parts[1 * stride + 4] = 2.5f;  // 1e8 + 2.5 rounds to 1e8 too (float spacing there is 8)
  std::vector<float> out(n, -7.0f);
  wte::ordered_weighted_sum(out.data(), parts.data(), stride, n, {1.0f, 1.0f, 1.0f});
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(out[i], 0.0f) << i;
  // Weights: 0.5·a + 0.5·b with a = 3, b = 5 → 4 exactly; 1 and 2 threads same bits.
  std::vector<float> ab = {3.0f, -1.0f, 5.0f, 7.0f};
  std::vector<float> o1(2), o2(2);
  omp_set_num_threads(1);
  wte::ordered_weighted_sum(o1.data(), ab.data(), 2, 2, {0.5f, 0.5f});
  omp_set_num_threads(2);
  wte::ordered_weighted_sum(o2.data(), ab.data(), 2, 2, {0.5f, 0.5f});
  EXPECT_EQ(o1, (std::vector<float>{4.0f, 3.0f}));
  EXPECT_EQ(o1, o2);
}

TEST(DataParallel, SparseRowsMergeToTheUnionInRankOrder) {
  // C 2. Rank 0 touched ids {1, 4}, rank 1 {0, 4, 9}, rank 2 {4}; weights 1/2, 1/4, 1/4.
  const std::vector<int32_t> ids = {1, 4, /**/ 0, 4, 9, /**/ 4};
  const std::vector<float> rows = {2, 4, 6, 8, /**/ 4, 8, 12, 16, 20, 24, /**/ 1e8f, 4};
  std::vector<int32_t> out_ids;
  std::vector<float> out_rows;
  wte::merge_sparse_rows(ids.data(), rows.data(), {2, 3, 1}, 2, {0.5f, 0.25f, 0.25f}, &out_ids,
                         &out_rows);
  EXPECT_EQ(out_ids, (std::vector<int32_t>{0, 1, 4, 9}));
  // id 0: 0.25·(4, 8); id 1: 0.5·(2, 4); id 4: 0.5·(6, 8) + 0.25·(12, 16) + 0.25·(1e8, 4), in that
  // order: (3 + 3) + 2.5e7 = 25000006, (4 + 4) + 1 = 9; id 9: 0.25·(20, 24).
  EXPECT_EQ(out_rows, (std::vector<float>{1, 2, 1, 2, 25000006.0f, 9, 5, 6}));
}

TEST(DataParallel, SparseIdsMustIncreasePerRank) {
  const std::vector<int32_t> ids = {3, 3};
  const std::vector<float> rows = {1, 1};
  std::vector<int32_t> out_ids;
  std::vector<float> out_rows;
  try {
    wte::merge_sparse_rows(ids.data(), rows.data(), {2}, 1, {1.0f}, &out_ids, &out_rows);
    FAIL() << "no error";
  } catch (const wte::Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0's sparse gradient ids are not increasing (3 then 3)"),
              std::string::npos) << e.what();
  }
}

}  // namespace
