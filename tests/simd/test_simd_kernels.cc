// Tests of the Highway kernels in simd/ that have no test file of their own (dispatch, softmax
// cross-entropy and its tiles, sum_of_squares; the embedding's are in test_embedding.cc, AdamW's in
// test_adamw.cc) against the scalar references in src/reference/kernels.h, on every Highway target
// compiled into this binary and supported by this CPU (one parameterized instance per target: AVX3,
// AVX2, SSE4, SSSE3, SCALAR here).
//
// Each case uses sizes around the vector widths (1, 3, L-1, L, L+1, 3L, 8L+2 for L = 4, 8, 16),
// buffers that start 4 bytes past a 64-byte boundary and are surrounded by NaN guards (a kernel
// that reads a guard turns its output into NaN; one that writes it changes the guard's bits), and
// both inputs exact in binary (sums exact, order-free) and general floats (sums depend on order, so
// a bit-identical result proves the kernel adds in the reference's order).

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

// Float unit roundoff, 2^-24.
constexpr double kU = 0x1p-24;

// Sizes around the float lane counts of SSE (4), AVX2 (8) and AVX3 (16).
const std::vector<size_t> kSizes = {1,  2,  3,  4,  5,  7,  8,  9,   15,  16,  17,  31,
                                    32, 33, 47, 48, 63, 64, 65, 127, 128, 129, 130, 257};

std::string Name(int64_t target) { return hwy::TargetName(target); }

// n target ids uniform in [0, V) from rng, then targets[0] = 0 and targets[last_at] = V - 1: the
// first and the last id (the logits next to the guards) are always some row's target.
std::vector<int32_t> RandomTargets(size_t n, size_t V, std::mt19937& rng, size_t last_at) {
  std::vector<int32_t> targets(n);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(V) - 1);
  for (int32_t& t : targets) t = pick(rng);
  targets[0] = 0;
  targets[last_at] = static_cast<int32_t>(V) - 1;
  return targets;
}

// Forces one Highway target for the duration of each test; resets the mock afterwards.
class SimdKernelTest : public test::TargetTest {};

TEST_P(SimdKernelTest, DispatchRunsTheForcedTarget) {
  EXPECT_EQ(simd_dispatch_target(), GetParam())
      << "forced " << target() << " but dispatch ran " << Name(simd_dispatch_target());
}

// ------------------------------------------------------------------------------------------------
// softmax_cross_entropy, cross_entropy_loss
//
// Error bound against the double reference (u = 2^-24; m the row max, d_v = m - x_v >= 0, S the sum
// of exp(x_v - m) >= 1, p_v = exp(-d_v) / S):
//  - the kernel's x_v - m is rounded once: relative error of its exp term <= d_v * u; summed over
//    the row this adds at most u * sum_v d_v exp(-d_v) <= u * V / e to S (d e^-d <= 1/e);
//  - hn::Exp has at most 1 ulp error (Highway's documented bound): <= 2u relative per term;
//  - summing V positive terms in any order (lanes, then across lanes): <= (V - 1) u relative.
//  So S has relative error delta_S <= (1.5 V + 2) u, which moves log(S) by at most delta_S.
//  loss = (m - x_t) + log(S): + u (m - x_t) for the subtraction, + 2u |log S| for std::log (< 1
//  ulp) and u |loss| for the final add. dlogit_v = g (p_v - [v = t]), p_v = e_v / S: relative error
//  of p_v <= (4 + d_v) u + delta_S (exp argument, exp, division, S), then the subtraction and the
//  multiply by g add 2u |result|, plus a few denormal ulps (2^-149) when exp(-d_v) is tiny.
// The test allows twice these worst-case bounds. Typical errors are far smaller (~sqrt(V) u).

struct CrossEntropyBounds {
  double loss_tol;
  std::vector<double> grad_tol;  // (V)
};

CrossEntropyBounds CrossEntropyErrorBounds(const float* logits, int32_t target, size_t V,
                                           double grad_scale) {
  double m = logits[0];
  for (size_t v = 1; v < V; ++v) m = std::max(m, static_cast<double>(logits[v]));
  double S = 0;
  for (size_t v = 0; v < V; ++v) S += std::exp(static_cast<double>(logits[v]) - m);
  const double delta_S = (1.5 * static_cast<double>(V) + 2) * kU;
  const double d_t = m - logits[target];
  const double loss = d_t + std::log(S);
  CrossEntropyBounds bounds;
  bounds.loss_tol = 2 * (kU * d_t + delta_S + 2 * kU * std::abs(std::log(S)) + kU * std::abs(loss));
  bounds.grad_tol.resize(V);
  for (size_t v = 0; v < V; ++v) {
    const double d_v = m - logits[v];
    const double p = std::exp(-d_v) / S;
    const double g = p - (v == static_cast<size_t>(target) ? 1.0 : 0.0);
    bounds.grad_tol[v] = 2 * std::abs(grad_scale) *
                         (p * ((4 + d_v) * kU + delta_S) + 2 * kU * std::abs(g) + 8 * 0x1p-149);
  }
  return bounds;
}

TEST_P(SimdKernelTest, SoftmaxCrossEntropyMatchesDoubleReference) {
  std::mt19937 rng(6);
  const size_t N = 4;
  const float grad_scale = 1.0f / N;
  std::vector<size_t> vocab_sizes = kSizes;
  vocab_sizes.push_back(1000);
  for (size_t V : vocab_sizes) {
    GuardedBuffer logits(N * V);
    fill_exact(logits.data(), logits.size(), rng, -8, 8);
    for (size_t v = 0; v < V; ++v) logits[2 * V + v] += 1000.0f;  // a row of large logits
    for (size_t v = 0; v < V; ++v) logits[3 * V + v] -= 1000.0f;  // and one of large negatives
    const std::vector<int32_t> targets = RandomTargets(N, V, rng, 1);

    const std::vector<float> input = logits.to_vector();
    std::vector<double> want_grad(input.begin(), input.end());
    std::vector<double> want_loss(N);
    ref::softmax_cross_entropy<double>(want_grad.data(), want_loss.data(), targets.data(), N, V,
                                       grad_scale);

    GuardedBuffer losses(N), eval_losses(N);
    cross_entropy_loss(eval_losses.data(), logits.data(), targets.data(), N, V);
    EXPECT_TRUE(BitIdentical(logits.data(), input.data(), N * V))
        << target() << " V=" << V << ": cross_entropy_loss modified the logits";
    softmax_cross_entropy(logits.data(), losses.data(), targets.data(), N, V, grad_scale);
    EXPECT_TRUE(logits.guards_intact() && losses.guards_intact() && eval_losses.guards_intact())
        << target() << " V=" << V;

    for (size_t n = 0; n < N; ++n) {
      const CrossEntropyBounds bounds =
          CrossEntropyErrorBounds(input.data() + n * V, targets[n], V, grad_scale);
      EXPECT_NEAR(losses[n], want_loss[n], bounds.loss_tol)
          << target() << " V=" << V << " row " << n;
      // The evaluation-only kernel computes the loss the same way: same bits.
      EXPECT_EQ(std::bit_cast<uint32_t>(eval_losses[n]), std::bit_cast<uint32_t>(losses[n]))
          << target() << " V=" << V << " row " << n << ": loss-only " << eval_losses[n]
          << " vs fused " << losses[n];
      size_t bad = V;
      for (size_t v = 0; v < V && bad == V; ++v) {
        const float got = logits[n * V + v];
        if (!std::isfinite(got) || std::abs(got - want_grad[n * V + v]) > bounds.grad_tol[v])
          bad = v;
      }
      EXPECT_EQ(bad, V) << target() << " V=" << V << " row " << n << " dlogit[" << bad << "]: got "
                        << (bad < V ? logits[n * V + bad] : 0.0f) << ", want "
                        << (bad < V ? want_grad[n * V + bad] : 0.0) << " +- "
                        << (bad < V ? bounds.grad_tol[bad] : 0.0);
    }
  }
}

// Rows are independent: 1 and 2 threads give the same bits.
TEST_P(SimdKernelTest, SoftmaxCrossEntropySameBitsForAnyThreadCount) {
  std::mt19937 rng(7);
  const size_t N = 33, V = 129;
  std::vector<float> input(N * V);
  fill_general(input.data(), input.size(), rng, 3.0f);
  std::vector<int32_t> targets(N);
  for (size_t n = 0; n < N; ++n) targets[n] = static_cast<int32_t>((n * 7) % V);
  struct Out {
    std::vector<float> grads, losses;
  };
  const auto out = AtOneAndTwoThreads([&](int) {
    Out o{input, std::vector<float>(N)};
    softmax_cross_entropy(o.grads.data(), o.losses.data(), targets.data(), N, V, 0.5f);
    return o;
  });
  EXPECT_TRUE(BitIdentical(out[0].grads.data(), out[1].grads.data(), N * V)) << target();
  EXPECT_TRUE(BitIdentical(out[0].losses.data(), out[1].losses.data(), N)) << target();
}

// Exact values where a naive softmax overflows (exp(1000) = inf) or loses the loss to rounding.
TEST_P(SimdKernelTest, SoftmaxCrossEntropyIsStableForHugeLogits) {
  {  // [1000, 1000], target 0: p = [0.5, 0.5], loss ln 2.
    float logits[2] = {1000.0f, 1000.0f}, loss = 0, eval_loss = 0;
    const int32_t target_id = 0;
    cross_entropy_loss(&eval_loss, logits, &target_id, 1, 2);
    softmax_cross_entropy(logits, &loss, &target_id, 1, 2, 1.0f);
    EXPECT_EQ(loss, std::log(2.0f)) << target() << ": want float(ln 2) = 0.693147182";
    EXPECT_EQ(eval_loss, std::log(2.0f)) << target();
    EXPECT_EQ(logits[0], -0.5f) << target();
    EXPECT_EQ(logits[1], 0.5f) << target();
  }
  {  // [1000, 0], target 1: p = [1, exp(-1000) = 0], loss exactly 1000.
    float logits[2] = {1000.0f, 0.0f}, loss = 0, eval_loss = 0;
    const int32_t target_id = 1;
    cross_entropy_loss(&eval_loss, logits, &target_id, 1, 2);
    softmax_cross_entropy(logits, &loss, &target_id, 1, 2, 1.0f);
    EXPECT_EQ(loss, 1000.0f) << target();
    EXPECT_EQ(eval_loss, 1000.0f) << target();
    EXPECT_EQ(logits[0], 1.0f) << target();
    EXPECT_EQ(logits[1], -1.0f) << target();
  }
  // Rows of width 37 (vector body + tail on every target) around -1e30 and +-1e30.
  const size_t V = 37;
  {  // All -1e30: uniform softmax, loss ln V.
    std::vector<float> logits(V, -1e30f);
    float loss = 0;
    const int32_t target_id = 36;
    softmax_cross_entropy(logits.data(), &loss, &target_id, 1, V, 1.0f);
    EXPECT_NEAR(loss, std::log(static_cast<double>(V)), 4 * kU * std::log(37.0)) << target();
    for (size_t v = 0; v < V; ++v) {
      const double want = 1.0 / V - (v == 36 ? 1.0 : 0.0);
      EXPECT_NEAR(logits[v], want, 8 * kU) << target() << " v=" << v;
    }
  }
  {  // One 1e30 among -1e30 (x - m = -2e30): p is one-hot, loss 0 at the max and 2e30 elsewhere.
    for (int32_t target_id : {5, 36}) {
      std::vector<float> logits(V, -1e30f);
      logits[5] = 1e30f;
      float loss = -1;
      softmax_cross_entropy(logits.data(), &loss, &target_id, 1, V, 1.0f);
      EXPECT_EQ(loss, target_id == 5 ? 0.0f : 2e30f) << target() << " target " << target_id;
      for (size_t v = 0; v < V; ++v) {
        const float want =
            (v == 5 ? 1.0f : 0.0f) - (static_cast<int32_t>(v) == target_id ? 1.0f : 0.0f);
        EXPECT_EQ(logits[v], want) << target() << " target " << target_id << " v=" << v;
      }
    }
  }
}

// ------------------------------------------------------------------------------------------------
// cross_entropy_tile_stats, cross_entropy_tile_grad (the fused loss's tile kernels)
//
// Error bound against the double reference, the softmax_cross_entropy bound above with S's relative
// error widened for the tiles: a row's S is summed tile by tile at the running max and rescaled by
// exp(m_old - m_new) when a later tile raises the max. Each rescale rounds the difference (relative
// error of its exp <= u |m_old - m_new|), calls hn::Exp (2u) and multiplies (u); the differences
// sum to m - (first tile's max). So
//   delta_S <= (1.5 V + 2 + 3 tiles + (m - m_first)) u,
// and the loss and gradient bounds follow as for the unfused kernel (twice the worst case allowed).

struct TiledRow {
  double m, S;          // max and sum of exp(x - m), in double
  double m_first;       // the first tile's max
};

TiledRow TiledRowExact(const float* row, size_t V, size_t tile) {
  TiledRow t{row[0], 0, row[0]};
  for (size_t v = 0; v < V; ++v) t.m = std::max(t.m, static_cast<double>(row[v]));
  for (size_t v = 0; v < std::min(V, tile); ++v) t.m_first = std::max(t.m_first, static_cast<double>(row[v]));
  for (size_t v = 0; v < V; ++v) t.S += std::exp(static_cast<double>(row[v]) - t.m);
  return t;
}

// Runs the tile kernels over rows of V logits (row-major, row stride V) in tiles of `tile` ids,
// every tile through the strided (ld = V) interface, as the fused layer's callers may; returns the
// statistics and leaves the gradient in `logits` (R, V).
void RunTiles(float* logits, const std::vector<int32_t>& targets, size_t R, size_t V,
              size_t tile, float grad_scale, std::vector<float>* max, std::vector<float>* sum,
              std::vector<float>* xt) {
  max->assign(R, -std::numeric_limits<float>::infinity());
  sum->assign(R, 0.0f);
  xt->assign(R, 0.0f);
  for (size_t v0 = 0; v0 < V; v0 += tile)
    cross_entropy_tile_stats(logits + v0, R, std::min(tile, V - v0), V, v0, targets.data(),
                             max->data(), sum->data(), xt->data());
  for (size_t v0 = 0; v0 < V; v0 += tile)
    cross_entropy_tile_grad(logits + v0, R, std::min(tile, V - v0), V, v0, targets.data(),
                            max->data(), sum->data(), grad_scale);
}

TEST_P(SimdKernelTest, CrossEntropyTilesMatchDoubleReference) {
  std::mt19937 rng(16);
  const size_t R = 5;
  const float grad_scale = 0.125f;
  // V not a multiple of the tile, tiles narrower and wider than a vector, one-id tiles, one tile.
  const std::vector<std::pair<size_t, size_t>> shapes = {
      {1, 1}, {2, 1}, {17, 1}, {17, 4}, {33, 16}, {33, 32}, {47, 15}, {65, 16}, {129, 17},
      {257, 64}, {257, 300}, {1000, 129}, {1000, 1000}};
  for (const auto& [V, tile] : shapes) {
    SCOPED_TRACE(target() + " V=" + std::to_string(V) + " tile=" + std::to_string(tile));
    GuardedBuffer g(R * V);
    fill_general(g.data(), g.size(), rng, 3.0f);
    // Row 1: an increasing ramp (the max grows in every tile: a rescale each time); row 2: large
    // logits; row 3: the max in the last tile, far above the rest.
    for (size_t v = 0; v < V; ++v) g[1 * V + v] = 0.05f * static_cast<float>(v);
    for (size_t v = 0; v < V; ++v) g[2 * V + v] += 1000.0f;
    g[3 * V + V - 1] = 40.0f;
    const std::vector<int32_t> targets = RandomTargets(R, V, rng, 4);
    const std::vector<float> input = g.to_vector();

    // The double reference of the same tiled math agrees with the plain one (a check of the test).
    std::vector<double> dref(input.begin(), input.end()), dmax(R), dsum(R), dxt(R);
    std::fill(dmax.begin(), dmax.end(), -std::numeric_limits<double>::infinity());
    for (size_t v0 = 0; v0 < V; v0 += tile)
      ref::cross_entropy_tile_stats<double>(dref.data() + v0, R, std::min(tile, V - v0), V, v0,
                                            targets.data(), dmax.data(), dsum.data(), dxt.data());
    std::vector<double> want_grad(input.begin(), input.end()), want_loss(R);
    ref::softmax_cross_entropy<double>(want_grad.data(), want_loss.data(), targets.data(), R, V,
                                       grad_scale);

    std::vector<float> got(input), max, sum, xt;
    RunTiles(got.data(), targets, R, V, tile, grad_scale, &max, &sum, &xt);
    // The strided run never touched a float outside its tiles: run once more in the guarded buffer.
    std::vector<float> gmax, gsum, gxt;
    RunTiles(g.data(), targets, R, V, tile, grad_scale, &gmax, &gsum, &gxt);
    EXPECT_TRUE(g.guards_intact());
    EXPECT_TRUE(BitIdentical(g.data(), got.data(), R * V));
    const size_t tiles = (V + tile - 1) / tile;
    for (size_t r = 0; r < R; ++r) {
      const TiledRow e = TiledRowExact(input.data() + r * V, V, tile);
      EXPECT_NEAR(dmax[r], e.m, 0.0) << "row " << r;
      EXPECT_NEAR(dsum[r], e.S, 1e-12 * e.S) << "row " << r;
      EXPECT_EQ(static_cast<double>(max[r]), e.m) << "row " << r << ": the max is exact";
      EXPECT_EQ(xt[r], input[r * V + static_cast<size_t>(targets[r])]) << "row " << r;
      const double delta_S =
          (1.5 * static_cast<double>(V) + 2 + 3.0 * static_cast<double>(tiles) + (e.m - e.m_first)) * kU;
      EXPECT_NEAR(sum[r], e.S, 2 * delta_S * e.S) << "row " << r;
      // The loss as the fused layer forms it, against the double reference.
      const double d_t = e.m - input[r * V + static_cast<size_t>(targets[r])];
      const float loss = (max[r] - xt[r]) + std::log(sum[r]);
      const double loss_tol =
          2 * (kU * d_t + delta_S + 2 * kU * std::abs(std::log(e.S)) + kU * std::abs(want_loss[r]));
      EXPECT_NEAR(loss, want_loss[r], loss_tol) << "row " << r;
      size_t bad = V;
      double bad_tol = 0;
      for (size_t v = 0; v < V && bad == V; ++v) {
        const double d_v = e.m - input[r * V + v];
        const double p = std::exp(-d_v) / e.S;
        const double gw = p - (v == static_cast<size_t>(targets[r]) ? 1.0 : 0.0);
        const double tol = 2 * grad_scale * (p * ((4 + d_v) * kU + delta_S) + 2 * kU * std::abs(gw) +
                                             8 * 0x1p-149);
        if (!std::isfinite(got[r * V + v]) || std::abs(got[r * V + v] - want_grad[r * V + v]) > tol) {
          bad = v;
          bad_tol = tol;
        }
      }
      EXPECT_EQ(bad, V) << "row " << r << " dlogit[" << bad << "]: got "
                        << (bad < V ? got[r * V + bad] : 0.0f) << ", want "
                        << (bad < V ? want_grad[r * V + bad] : 0.0) << " +- " << bad_tol;
    }
  }
}

// One tile holding the whole row is the unfused kernel, bit for bit (same operations).
TEST_P(SimdKernelTest, CrossEntropyOneTileIsTheUnfusedKernel) {
  std::mt19937 rng(17);
  for (size_t V : {1, 7, 16, 17, 129, 1000}) {
    const size_t R = 3;
    std::vector<float> x(R * V);
    fill_general(x.data(), x.size(), rng, 4.0f);
    std::vector<int32_t> targets = {0, static_cast<int32_t>(V / 2), static_cast<int32_t>(V - 1)};
    std::vector<float> unfused(x), losses(R), tiled(x), max, sum, xt;
    softmax_cross_entropy(unfused.data(), losses.data(), targets.data(), R, V, 0.25f);
    RunTiles(tiled.data(), targets, R, V, V, 0.25f, &max, &sum, &xt);
    EXPECT_TRUE(BitIdentical(tiled.data(), unfused.data(), R * V)) << target() << " V=" << V;
    for (size_t r = 0; r < R; ++r) {
      const float loss = (max[r] - xt[r]) + std::log(sum[r]);
      EXPECT_EQ(std::bit_cast<uint32_t>(loss), std::bit_cast<uint32_t>(losses[r]))
          << target() << " V=" << V << " row " << r;
    }
  }
}

// Rows are independent: 1 and 2 threads give the same bits (rows x tile large enough to run in
// parallel).
TEST_P(SimdKernelTest, CrossEntropyTilesSameBitsForAnyThreadCount) {
  std::mt19937 rng(18);
  const size_t R = 33, V = 2000, tile = 700;
  std::vector<float> input(R * V);
  fill_general(input.data(), input.size(), rng, 3.0f);
  std::vector<int32_t> targets(R);
  for (size_t r = 0; r < R; ++r) targets[r] = static_cast<int32_t>((r * 61) % V);
  struct Out {
    std::vector<float> grad, max, sum, xt;
  };
  const auto out = AtOneAndTwoThreads([&](int) {
    Out o{input, {}, {}, {}};
    RunTiles(o.grad.data(), targets, R, V, tile, 0.5f, &o.max, &o.sum, &o.xt);
    return o;
  });
  EXPECT_TRUE(BitIdentical(out[0].grad.data(), out[1].grad.data(), R * V)) << target();
  EXPECT_TRUE(BitIdentical(out[0].sum.data(), out[1].sum.data(), R)) << target();
}

// sum_of_squares: the reference's bits (same fixed order) on every target, for 1 and 2 threads, at
// sizes around 16 (the partial sums) and 65536 (the blocks), from a misaligned start; NaN guards
// prove nothing past n is read.
TEST_P(SimdKernelTest, SumOfSquaresMatchesReferenceBitForBit) {
  std::mt19937 rng(19);
  std::vector<size_t> sizes = kSizes;
  for (size_t n : {size_t{65535}, size_t{65536}, size_t{65537}, size_t{3 * 65536 + 17}})
    sizes.push_back(n);
  for (size_t n : sizes) {
    GuardedBuffer x(n);
    fill_general(x.data(), n, rng, 3.0f);
    const double want = ref::sum_of_squares(x.data(), n);
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      const double got = sum_of_squares(x.data(), n);
      EXPECT_EQ(std::bit_cast<uint64_t>(got), std::bit_cast<uint64_t>(want))
          << target() << " n=" << n << " threads " << threads << ": " << got << " vs " << want;
      // The block sums: each block's reference sum, and added in block order sum_of_squares.
      const size_t blocks = (n + kSumOfSquaresBlock - 1) / kSumOfSquaresBlock;
      std::vector<double> partials(blocks + 1, -1.0);  // the extra one must stay untouched
      sum_of_squares_partials(x.data(), n, partials.data());
      double total = 0.0;
      for (size_t b = 0; b < blocks; ++b) {
        const size_t begin = b * kSumOfSquaresBlock;
        const double block = ref::sum_of_squares(x.data() + begin,
                                                 std::min(kSumOfSquaresBlock, n - begin));
        EXPECT_EQ(std::bit_cast<uint64_t>(partials[b]), std::bit_cast<uint64_t>(block))
            << target() << " n=" << n << " block " << b << " threads " << threads;
        total += partials[b];
      }
      EXPECT_EQ(partials[blocks], -1.0) << target() << " n=" << n;
      EXPECT_EQ(std::bit_cast<uint64_t>(total), std::bit_cast<uint64_t>(want))
          << target() << " n=" << n << " threads " << threads;
    }
  }
  // By hand: 3² + 4² = 25, and 1000 ones (exact partial sums in any order) = 1000.
  const float two[] = {3.0f, -4.0f};
  EXPECT_EQ(sum_of_squares(two, 2), 25.0) << target();
  const std::vector<float> ones(1000, 1.0f);
  EXPECT_EQ(sum_of_squares(ones.data(), ones.size()), 1000.0) << target();
  EXPECT_EQ(sum_of_squares(nullptr, 0), 0.0) << target();
}

WTE_INSTANTIATE_ON_EVERY_TARGET(SimdKernelTest);

}  // namespace
}  // namespace wte
