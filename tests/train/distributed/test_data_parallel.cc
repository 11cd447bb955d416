// The arithmetic of data-parallel training (train/distributed/data_parallel.h), without MPI: which samples
// a rank takes, the rank weights, the rank-ordered dense sum and the merge of row-sparse gradients.
// Exact values throughout (the order of the sums is the contract). The end-to-end runs under
// mpirun are tests/train/distributed/test_mpi_train.sh.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <cstring>
#include <string>
#include <vector>

#include "train/distributed/data_parallel.h"
#include "tests/model_test_util.h"
#include "wte/error.h"
#include "wte/model.h"
#include "wte/optimizer.h"
#include "wte/rng.h"

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

TEST(DataParallel, DenseSumOfSeparatePartsMatchesTheStridedSumAndMayRunInPlace) {
  // R = 2 (its own loop) and R = 3: the pointer form gives the strided form's bits, also when out
  // is part r itself (a rank's own block, summed in place).
  for (size_t R : {2u, 3u}) {
    const size_t n = 1001;
    std::vector<float> parts(R * n), w(R);
    wte::Rng rng(R);
    for (float& x : parts) x = static_cast<float>(rng.below(1u << 20)) * 1e-3f - 500.0f;
    for (size_t r = 0; r < R; ++r) w[r] = 1.0f / static_cast<float>(R + r);
    std::vector<float> strided(n);
    wte::ordered_weighted_sum(strided.data(), parts.data(), n, n, w);
    for (size_t own = 0; own < R; ++own) {
      std::vector<float> copy = parts;
      std::vector<const float*> p(R);
      for (size_t r = 0; r < R; ++r) p[r] = copy.data() + r * n;
      wte::ordered_weighted_sum(copy.data() + own * n, p, n, w);
      EXPECT_EQ(0, std::memcmp(copy.data() + own * n, strided.data(), n * sizeof(float)))
          << "R " << R << ", in place on part " << own;
    }
  }
  EXPECT_THROW(wte::ordered_weighted_sum(nullptr, std::vector<const float*>(2), 0, {1.0f}),
               wte::Error);
}

TEST(DataParallel, BlocksAreAlignedContiguousAndCoverTheGradient) {
  std::vector<size_t> counts, displs;
  // 10 floats in units of 4 over 2 ranks: units {4, 4, 2} -> rank 0 gets 2 units, rank 1 one.
  wte::split_blocks(10, 2, 4, &counts, &displs);
  EXPECT_EQ(counts, (std::vector<size_t>{8, 2}));
  EXPECT_EQ(displs, (std::vector<size_t>{0, 8}));
  // Fewer units than ranks: the last ranks get nothing (at the end of the gradient).
  wte::split_blocks(5, 3, 4, &counts, &displs);
  EXPECT_EQ(counts, (std::vector<size_t>{4, 1, 0}));
  EXPECT_EQ(displs, (std::vector<size_t>{0, 4, 5}));
  for (size_t n : {0u, 1u, 7u, 65536u, 65537u, 5323008u})
    for (int R = 1; R <= 5; ++R)
      for (size_t align : {1u, 3u, 65536u}) {
        wte::split_blocks(n, R, align, &counts, &displs);
        size_t next = 0;
        for (int r = 0; r < R; ++r) {
          EXPECT_EQ(displs[r], next) << n << " " << R << " " << align;
          EXPECT_TRUE(displs[r] % align == 0 || displs[r] == n) << n << " " << R << " " << align;
          next += counts[r];
        }
        EXPECT_EQ(next, n);
        // As even as whole units allow: one unit more on some ranks, and the last unit may be
        // short, so block sizes differ by less than two units.
        const auto [lo, hi] = std::minmax_element(counts.begin(), counts.end());
        EXPECT_LT(*hi - *lo, 2 * align) << n << " " << R << " " << align;
      }
  EXPECT_THROW(wte::split_blocks(10, 0, 4, &counts, &displs), wte::Error);
  EXPECT_THROW(wte::split_blocks(10, 2, 0, &counts, &displs), wte::Error);
}

// ZeRO-1 (train/distributed/grad_sync.h) without MPI: R simulated ranks, each with its own AdamW, clip with
// the norm assembled from their blocks' squared-norm partials and update only their block, with
// the clip factor applied inside AdamW (as training does); the parameters, m and v must be bit for
// bit those of one process clipping in place (clip_grad_norm) and updating everything.
TEST(DataParallel, ZeroOneBlocksGiveTheReplicatedOptimizerBits) {
  for (bool tie : {true, false}) {
    const wte::ModelConfig mc{.vocab_size = 1000, .d_model = 64, .n_ctx = 16, .n_layer = 2,
                              .n_head = 2, .tie_embeddings = tie};
    wte::Model one(mc), zero(mc);
    one.init_weights(5);
    zero.init_weights(5);
    const size_t B = 4, T = 16, n = one.num_parameters();
    wte::Rng rng(9);
    const auto [x, y] = wte::test::random_batch(B * T, 1000, &rng);
    wte::OptimConfig hp;
    hp.weight_decay = 0.1f;
    const double max_norm = 0.05;  // below the norm: clipping scales
    const size_t R = 3;
    wte::AdamW opt_one(one);
    std::vector<std::unique_ptr<wte::AdamW>> opt(R);
    for (auto& o : opt) o = std::make_unique<wte::AdamW>(zero);
    const size_t dense_begin = tie ? 0 : mc.vocab_size * mc.d_model;
    std::vector<size_t> counts, displs;
    wte::split_blocks(n - dense_begin, static_cast<int>(R), wte::kSumOfSquaresBlock, &counts, &displs);
    ASSERT_GT(counts[1], 0u) << "the test model must span several ranks' blocks";
    for (int step = 0; step < 2; ++step) {
      one.zero_grad();
      one.forward(x.data(), y.data(), B, T);
      one.backward();
      zero.zero_grad();
      zero.forward(x.data(), y.data(), B, T);
      zero.backward();
      const double norm_one = wte::clip_grad_norm(one, max_norm);
      opt_one.update(one, 1e-3f, hp);
      // The ranks' partials, in rank order, then the sparse rows (replicated on every rank).
      std::vector<double> partials;
      for (size_t r = 0; r < R; ++r) {
        std::vector<double> p((counts[r] + wte::kSumOfSquaresBlock - 1) / wte::kSumOfSquaresBlock);
        wte::squared_norm_partials(zero.grad_data() + dense_begin + displs[r], counts[r], p.data());
        partials.insert(partials.end(), p.begin(), p.end());
      }
      double total = 0.0;
      for (double s : partials) total += s;
      const wte::SparseRowGrad rows = zero.wte_grad_rows();
      if (rows.count > 0) {
        std::vector<double> p((rows.count * rows.C + wte::kSumOfSquaresBlock - 1) / wte::kSumOfSquaresBlock);
        wte::squared_norm_partials(rows.rows, rows.count * rows.C, p.data());
        double sparse = 0.0;
        for (double s : p) sparse += s;
        total += sparse;
      }
      const double norm_zero = std::sqrt(total);
      EXPECT_EQ(norm_zero, norm_one) << "tie " << tie << ", step " << step;
      ASSERT_GT(norm_zero, max_norm);
      // As training does: no rank scales its gradients; AdamW reads them times the clip factor.
      const float scale = wte::clip_scale(norm_zero, max_norm);
      ASSERT_LT(scale, 1.0f);
      // One shared parameter arena stands for the ranks' all-gathered copies: each rank updates
      // its block; the sparse rows (the same on every rank) are applied once, by rank 0.
      for (size_t r = 0; r < R; ++r) {
        const size_t begin = dense_begin + displs[r];
        opt[r]->update_part(zero, 1e-3f, hp, begin, begin + counts[r],
                            r == 0 ? rows : wte::SparseRowGrad{}, scale);
      }
      EXPECT_EQ(0, std::memcmp(one.param_data(), zero.param_data(), n * sizeof(float)))
          << "tie " << tie << ", step " << step;
      for (size_t r = 0; r < R; ++r) {
        const size_t begin = dense_begin + displs[r];
        EXPECT_EQ(0, std::memcmp(opt_one.m() + begin, opt[r]->m() + begin, counts[r] * 4)) << r;
        EXPECT_EQ(0, std::memcmp(opt_one.v() + begin, opt[r]->v() + begin, counts[r] * 4)) << r;
      }
      EXPECT_EQ(0, std::memcmp(opt_one.m(), opt[0]->m(), dense_begin * 4));  // lazy wte rows
    }
  }
  wte::Model m(wte::ModelConfig{.vocab_size = 10, .d_model = 4});
  wte::AdamW o(m);
  EXPECT_THROW(o.update_part(m, 1e-3f, wte::OptimConfig{}, 2, 1, wte::SparseRowGrad{}), wte::Error);
  EXPECT_THROW(o.update_part(m, 1e-3f, wte::OptimConfig{}, 0, m.num_parameters() + 1,
                             wte::SparseRowGrad{}),
               wte::Error);
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
