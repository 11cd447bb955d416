// Scatter strategies (include/wte/kernels.h: embedding_backward_wte_strategy), the row-sparse backward of
// an untied wte and its lazy AdamW, on every compiled Highway target, against the scalar
// references in src/reference/kernels.h; and the untied Model end to end.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "wte/error.h"
#include "wte/kernels.h"
#include "src/reference/kernels.h"
#include "wte/model.h"
#include "wte/optimizer.h"
#include "tests/simd_test_util.h"

namespace wte {
namespace {

using test::AtOneAndTwoThreads;
using test::BitIdentical;
using test::fill_general;
using test::GuardedBuffer;
using test::MakeBackwardWteCase;

const ScatterStrategy kAll[] = {ScatterStrategy::kAuto, ScatterStrategy::kSerial,
                                ScatterStrategy::kSorted, ScatterStrategy::kRowRange,
                                ScatterStrategy::kPrivateHot};

// Ids with hot rows: id 2 takes every third position (>= kScatterHotCount of them when N >= 48),
// the rest uniform in [0, V-2) (rows V-2, V-1 untouched).
std::vector<int32_t> HotIds(size_t N, size_t V, std::mt19937& rng) {
  std::vector<int32_t> ids(N);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(V) - 3);
  for (size_t n = 0; n < N; ++n) ids[n] = n % 3 == 0 ? 2 : pick(rng);
  return ids;
}

// Forces one Highway target for the duration of each test; resets the mock afterwards.
class ScatterTest : public test::TargetTest {};

// Exact inputs (multiples of 1/64): every summation order gives the reference's bits, so every
// strategy must match it exactly, hot rows (split by column blocks / private chunks) included.
TEST_P(ScatterTest, EveryStrategyMatchesReferenceOnExactInputs) {
  std::mt19937 rng(11);
  const size_t V = 13;
  ScatterWorkspace ws;
  for (size_t C : {1, 3, 15, 16, 17, 63, 257, 300, 513}) {
    for (size_t N : {1, 5, 50, 200}) {
      const std::vector<int32_t> ids = HotIds(N, V, rng);
      const test::BackwardWteCase k = MakeBackwardWteCase(ids, C, V, rng, /*exact=*/true);
      for (ScatterStrategy s : kAll) {
        for (int threads : {1, 2}) {
          omp_set_num_threads(threads);
          GuardedBuffer dwte = GuardedBuffer::copy_of(k.dwte_init);
          embedding_backward_wte_strategy(s, dwte.data(), k.dhidden.data(), ids.data(), N, C, V, &ws);
          EXPECT_TRUE(BitIdentical(dwte.data(), k.want.data(), V * C))
              << target() << " " << scatter_strategy_name(s) << " C=" << C << " N=" << N
              << " threads=" << threads;
          EXPECT_TRUE(dwte.guards_intact() && k.dhidden.guards_intact())
              << target() << " " << scatter_strategy_name(s) << " C=" << C << " N=" << N;
        }
      }
    }
  }
}

// General floats (order matters): deterministic strategies give the same bits for 1 and 2 threads;
// sorted gives the reference's bits; serial and row-range agree with each other (same order);
// every strategy is within a sum-of-magnitudes bound of the double reference.
TEST_P(ScatterTest, DeterministicStrategiesSameBitsForAnyThreadCount) {
  std::mt19937 rng(12);
  const size_t V = 300, N = 2000, C = 70;
  std::vector<int32_t> ids = HotIds(N, V, rng);
  for (size_t n = 0; n < N; n += 7) ids[n] = 5;  // a second hot row
  const test::BackwardWteCase k = MakeBackwardWteCase(ids, C, V, rng);
  const GuardedBuffer& dhidden = k.dhidden;
  const std::vector<float>& init = k.dwte_init;
  const std::vector<float>& want = k.want;
  std::vector<double> exact(V * C), mag(V * C);
  for (size_t i = 0; i < V * C; ++i) exact[i] = init[i], mag[i] = std::fabs(init[i]);
  for (size_t n = 0; n < N; ++n)
    for (size_t c = 0; c < C; ++c) {
      exact[static_cast<size_t>(ids[n]) * C + c] += dhidden[n * C + c];
      mag[static_cast<size_t>(ids[n]) * C + c] += std::fabs(dhidden[n * C + c]);
    }
  ScatterWorkspace ws;
  std::vector<float> serial;
  for (ScatterStrategy s : kAll) {
    const auto got = AtOneAndTwoThreads([&](int threads) {
      std::vector<float> dwte = init;
      embedding_backward_wte_strategy(s, dwte.data(), dhidden.data(), ids.data(), N, C, V, &ws);
      // Recursive summation of k terms: error <= (k-1) u sum|x| (Higham, Accuracy and Stability, 4.2).
      size_t bad = V * C;
      for (size_t i = 0; i < V * C && bad == V * C; ++i)
        if (!(std::fabs(dwte[i] - exact[i]) <= N * 0x1p-24 * mag[i])) bad = i;
      EXPECT_EQ(bad, V * C) << target() << " " << scatter_strategy_name(s) << " threads=" << threads
                            << " index " << bad << ": |error| above (N u) sum|x|";
      return dwte;
    });
    if (scatter_strategy_deterministic(s)) {
      EXPECT_TRUE(BitIdentical(got[1].data(), got[0].data(), V * C))
          << target() << " " << scatter_strategy_name(s) << ": 1 vs 2 threads";
    }
    if (s == ScatterStrategy::kSorted) {
      EXPECT_TRUE(BitIdentical(got[1].data(), want.data(), V * C)) << target();
    }
    if (s == ScatterStrategy::kSerial) serial = got[0];
    if (s == ScatterStrategy::kRowRange) {
      EXPECT_TRUE(BitIdentical(got[1].data(), serial.data(), V * C)) << target();
    }
  }
  EXPECT_FALSE(scatter_strategy_deterministic(ScatterStrategy::kPrivateHot));
}

// The tied model's scatter with the gradient norm's block sums (embedding_backward_wte's
// dwte_sumsq): dwte bit for bit the plain scatter's, and the sums bit for bit
// ref::sum_of_squares of each whole 65536-float block of the result (the blocks the norm would
// read), for 1 and 2 threads. Shapes: chunks of one block (C 256, 64, 1), of three (C 768), no
// chunking (C 257: lcm(257, 65536) is too large), V·C not a multiple of the block and of the
// chunk, fewer floats than one block (no sums), no ids, and a hot row (split by columns).
TEST_P(ScatterTest, SumOfSquaresBlocksOfTheScatteredTable) {
  std::mt19937 rng(14);
  constexpr size_t K = kSumOfSquaresBlock;
  struct Shape {
    size_t V, C, N;
  };
  for (const Shape& sh : {Shape{1100, 256, 700}, Shape{700, 768, 300}, Shape{2100, 64, 500},
                          Shape{200000, 1, 4000}, Shape{600, 257, 400}, Shape{300, 200, 90},
                          Shape{1030, 256, 0}, Shape{257, 256, 60}}) {
    const size_t V = sh.V, C = sh.C, N = sh.N;
    std::vector<int32_t> ids = HotIds(N, V, rng);
    GuardedBuffer dhidden(N * C);
    fill_general(dhidden.data(), dhidden.size(), rng);
    std::vector<float> init(V * C);
    fill_general(init.data(), init.size(), rng);
    std::vector<float> want = init;
    ScatterWorkspace ws;
    embedding_backward_wte(want.data(), dhidden.data(), ids.data(), N, C, V, &ws);
    const size_t blocks = V * C / K;
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      std::vector<float> got = init;
      std::vector<double> sums(blocks + 1, -1.0);  // one more: must stay untouched
      const size_t count =
          embedding_backward_wte(got.data(), dhidden.data(), ids.data(), N, C, V, &ws, sums.data());
      const std::string where = target() + " V=" + std::to_string(V) + " C=" + std::to_string(C) +
                                " N=" + std::to_string(N) + " threads=" + std::to_string(threads);
      EXPECT_EQ(count, blocks) << where;
      EXPECT_TRUE(BitIdentical(got.data(), want.data(), V * C)) << where;
      for (size_t b = 0; b < blocks; ++b)
        ASSERT_EQ(sums[b], ref::sum_of_squares(want.data() + b * K, K)) << where << " block " << b;
      EXPECT_EQ(sums[blocks], -1.0) << where << ": a sum past the whole blocks was written";
    }
  }
}

TEST(ScatterStrategyNames, RoundTripAndAutoChoice) {
  for (ScatterStrategy s : kAll) {
    ScatterStrategy back;
    ASSERT_TRUE(parse_scatter_strategy(scatter_strategy_name(s), &back));
    EXPECT_EQ(back, s);
  }
  ScatterStrategy unused;
  EXPECT_FALSE(parse_scatter_strategy("fastest", &unused));
  const std::vector<int32_t> ids(8192, 0);
  EXPECT_EQ(choose_scatter_strategy(ids.data(), 8192, 768, 50257), ScatterStrategy::kSorted);
  EXPECT_EQ(choose_scatter_strategy(ids.data(), 4, 3, 50257), ScatterStrategy::kSerial);
}

// Row-sparse backward + lazy AdamW: rows == reference sums, the update == ref::adamw_update per
// touched row bit for bit, untouched rows (and their moments) not written, fused == two-pass.
TEST_P(ScatterTest, RowsAndLazyAdamWMatchReference) {
  std::mt19937 rng(13);
  const size_t V = 40;
  ScatterWorkspace ws;
  for (size_t C : {1, 7, 16, 33, 300}) {
    const size_t N = 120;
    std::vector<int32_t> ids = HotIds(N, V, rng);
    GuardedBuffer dhidden(N * C);
    fill_general(dhidden.data(), dhidden.size(), rng);
    std::vector<float> p0(V * C), m0(V * C), v0(V * C);
    fill_general(p0.data(), p0.size(), rng);
    fill_general(m0.data(), m0.size(), rng, 0.1f);
    for (float& x : v0) x = std::uniform_real_distribution<float>(0.0f, 0.01f)(rng);
    const AdamWParams hp{0.01f, 0.9f, 0.95f, 1e-8f, 0.1f, 7};

    // Reference: dense sums, then ref::adamw_update on each touched row.
    std::vector<float> dense(V * C, 0.0f);
    ref::embedding_backward_wte(dense.data(), dhidden.data(), ids.data(), N, C, V);
    std::vector<char> hit(V, 0);
    for (int32_t id : ids) hit[static_cast<size_t>(id)] = 1;
    std::vector<float> pw = p0, mw = m0, vw = v0;
    for (size_t r = 0; r < V; ++r)
      if (hit[r])
        ref::adamw_update<float>(pw.data() + r * C, dense.data() + r * C, mw.data() + r * C,
                                 vw.data() + r * C, C, hp.lr, hp.beta1, hp.beta2, hp.eps,
                                 hp.weight_decay, hp.step);
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      std::vector<float> rows(N * C);
      std::vector<int32_t> touched(N);
      size_t count = 0;
      embedding_backward_rows(rows.data(), touched.data(), &count, dhidden.data(), ids.data(), N, C,
                              V, &ws);
      size_t want_count = 0;
      for (size_t r = 0; r < V; ++r) {
        if (!hit[r]) continue;
        ASSERT_LT(want_count, count);
        EXPECT_EQ(touched[want_count], static_cast<int32_t>(r));
        EXPECT_TRUE(BitIdentical(rows.data() + want_count * C, dense.data() + r * C, C))
            << target() << " C=" << C << " row " << r;
        ++want_count;
      }
      EXPECT_EQ(count, want_count);
      std::vector<float> p = p0, m = m0, v = v0;
      adamw_update_rows(p.data(), m.data(), v.data(), rows.data(), touched.data(), count, C, hp);
      EXPECT_TRUE(BitIdentical(p.data(), pw.data(), V * C)) << target() << " C=" << C << " param";
      EXPECT_TRUE(BitIdentical(m.data(), mw.data(), V * C)) << target() << " C=" << C << " m";
      EXPECT_TRUE(BitIdentical(v.data(), vw.data(), V * C)) << target() << " C=" << C << " v";
      std::vector<float> pf = p0, mf = m0, vf = v0;
      embedding_backward_adamw_lazy(pf.data(), mf.data(), vf.data(), dhidden.data(), ids.data(), N,
                                    C, V, hp, &ws);
      EXPECT_TRUE(BitIdentical(pf.data(), pw.data(), V * C))
          << target() << " fused C=" << C << " threads=" << threads;
      EXPECT_TRUE(BitIdentical(vf.data(), vw.data(), V * C)) << target() << " fused";
    }
  }
}

// The case: one scalar row, lr 0.1, betas (0.9, 0.999), eps 1e-8, no decay, gradients 1, 0,
// 0. Dense AdamW keeps moving on zero gradients (m decays slower than sqrt(v)); lazy AdamW does not
// touch a row the step did not look up.
TEST_P(ScatterTest, LazyVersusDenseAdamWByHand) {
  const float want_dense[] = {-0.1f, -0.167006f, -0.218802f};
  float p = 0, m = 0, v = 0;
  for (int64_t step = 1; step <= 3; ++step) {
    const float g = step == 1 ? 1.0f : 0.0f;
    adamw_update(&p, &g, &m, &v, 1, AdamWParams{0.1f, 0.9f, 0.999f, 1e-8f, 0.0f, step});
    EXPECT_NEAR(p, want_dense[step - 1], 1e-6) << target() << " dense step " << step;
  }
  float lp = 0, lm = 0, lv = 0;
  ScatterWorkspace ws;
  const int32_t id = 0;
  const float dh = 1.0f;
  for (int64_t step = 1; step <= 3; ++step) {
    const AdamWParams hp{0.1f, 0.9f, 0.999f, 1e-8f, 0.0f, step};
    if (step == 1) embedding_backward_adamw_lazy(&lp, &lm, &lv, &dh, &id, 1, 1, 1, hp, &ws);
    // steps 2 and 3: the row is not in the batch, so nothing is called for it
    EXPECT_NEAR(lp, -0.1, 1e-6) << target() << " lazy step " << step;
  }
}

WTE_INSTANTIATE_ON_EVERY_TARGET(ScatterTest);

// Untied model: lm_head is its own tensor; one step changes only the wte rows in the batch (their
// m too), changes lm_head, and the result is bit-identical for 1 and 2 threads of the lookup path
// (same thread count for the GEMMs, as Model documents).
TEST(UntiedModel, OneStepUpdatesOnlyLookedUpRows) {
  Model model(ModelConfig{.vocab_size = 300, .d_model = 24, .n_ctx = 8, .tie_embeddings = false});
  model.init_weights(5);
  ASSERT_EQ(model.tensors().size(), 5u);
  EXPECT_EQ(model.tensors()[4].name, "lm_head");
  EXPECT_EQ(model.tensors()[4].shape, (std::vector<size_t>{300, 24}));
  ASSERT_NE(model.params().lm_head, nullptr);
  AdamW opt(model);
  const size_t B = 2, T = 8, V = 300, C = 24;
  std::vector<int32_t> inputs(B * T), targets(B * T);
  for (size_t i = 0; i < B * T; ++i) inputs[i] = static_cast<int32_t>((i * 37) % 50), targets[i] = static_cast<int32_t>(i % 300);
  const std::vector<float> wte0(model.params().wte, model.params().wte + V * C);
  const std::vector<float> lm0(model.params().lm_head, model.params().lm_head + V * C);
  model.forward(inputs.data(), targets.data(), B, T);
  model.backward();
  const SparseRowGrad g = model.wte_grad_rows();
  std::vector<char> hit(V, 0);
  for (int32_t id : inputs) hit[static_cast<size_t>(id)] = 1;
  EXPECT_EQ(g.count, static_cast<size_t>(std::count(hit.begin(), hit.end(), 1)));
  clip_grad_norm(model, 1.0);
  OptimConfig oc;
  oc.weight_decay = 0.1f;
  opt.update(model, 1e-2f, oc);
  size_t changed_rows = 0;
  for (size_t r = 0; r < V; ++r) {
    const bool changed = !std::equal(wte0.begin() + r * C, wte0.begin() + (r + 1) * C,
                                     model.params().wte + r * C);
    EXPECT_EQ(changed, hit[r] != 0) << "wte row " << r;
    changed_rows += changed;
    if (!hit[r]) {
      EXPECT_EQ(opt.m()[r * C], 0.0f) << "moment of untouched row " << r;
    }
  }
  EXPECT_EQ(changed_rows, g.count);
  EXPECT_FALSE(std::equal(lm0.begin(), lm0.end(), model.params().lm_head));
}

// The tied model's norm from the scatter's block sums (Model::grad_norm_head + grad_norm): bit for
// bit the norm that reads the whole gradient, for 1 and 2 threads; one sum per whole block of
// wte's gradient; none after forward() (the gradient is about to change) or for an untied model;
// more sums than the arena has blocks is an error.
TEST(TiedModelNorm, ScatterBlockSumsGiveTheSameNorm) {
  for (const bool tied : {true, false}) {
    // wte 1100 x 128 = 140800 floats: 2 whole blocks, the third shared with wpe and ln_f.
    Model model(ModelConfig{.vocab_size = 1100, .d_model = 128, .n_ctx = 16, .tie_embeddings = tied});
    model.init_weights(6);
    const size_t B = 3, T = 16;
    std::vector<int32_t> inputs(B * T), targets(B * T);
    for (size_t i = 0; i < B * T; ++i)
      inputs[i] = static_cast<int32_t>(i % 5 == 0 ? 7 : (i * 389) % 1100),
      targets[i] = static_cast<int32_t>((i * 97) % 1100);
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      model.zero_grad();
      model.forward(inputs.data(), targets.data(), B, T);
      EXPECT_EQ(model.grad_norm_head().count, 0u) << "after forward()";
      model.backward();
      const GradNormHead head = model.grad_norm_head();
      EXPECT_EQ(head.count, tied ? 1100u * 128u / kSumOfSquaresBlock : 0u) << "tied=" << tied;
      const SparseRowGrad rows = model.wte_grad_rows();
      const double full = grad_norm(model, rows);
      EXPECT_GT(full, 0.0);
      EXPECT_EQ(grad_norm(model, rows, head), full) << "tied=" << tied << " threads=" << threads;
      if (tied) {
        const GradNormHead too_many{head.sums, model.num_parameters() / kSumOfSquaresBlock + 1};
        EXPECT_THROW(grad_norm(model, rows, too_many), Error);
      }
      // Gradient accumulation: a second batch's backward adds; the last scatter's sums are still
      // those of the whole gradient (it is dwte's last writer).
      std::vector<int32_t> shifted(inputs.size());
      for (size_t i = 0; i < shifted.size(); ++i) shifted[i] = (inputs[i] + 13) % 1100;
      model.forward(shifted.data(), targets.data(), B, T);
      model.backward();
      const SparseRowGrad rows2 = model.wte_grad_rows();
      const double full2 = grad_norm(model, rows2);
      EXPECT_NE(full2, full);
      EXPECT_EQ(grad_norm(model, rows2, model.grad_norm_head()), full2)
          << "accumulated, tied=" << tied << " threads=" << threads;
    }
    omp_set_num_threads(omp_get_num_procs());
  }
}

}  // namespace
}  // namespace wte
