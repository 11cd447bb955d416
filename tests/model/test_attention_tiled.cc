// The tiled causal attention (src/model/attention_tiled.h, simd/attention_tiled.cc) against the
// double reference (src/reference/model.h: ref::attention_forward/backward) and against the dense
// layer (src/model/attention.h), forward and backward, on every Highway target compiled in: T = 1,
// 2, 63, 65 and T not a multiple of the tile; head sizes 1 to 64 (awkward ones: 1, 3, 7, 17, 24);
// B = 1 and 2; tiles of several shapes. Also: bit-identical results at 1 and 2 threads, causality
// (appending tokens changes no bit of the earlier rows' output or log-sum-exp), and bf16 inputs.
//
// Bound, per entry, of the float32 layer against the double one. Every product in the tiled layer
// is a float sum in a fixed order, so its error is below γ_K times the sum of the absolute terms
// (Higham §3.1); the softmax's exp (1 ulp), its max shift and the division by l add a few u per
// probability. With K = hs + T + 32 covering every sum a value passes through, and a factor 8 for
// the chained products (scores -> probabilities -> output; probabilities -> dS -> dq, dk):
//   out_td:  8·γ_K·(1 + |z|max)·Σ_j att_tj·|v_jd|
//   dv_jd:   8·γ_K·(1 + |z|max)·Σ_t att_tj·|dy_td|
//   dq_td:   8·γ_K·(1 + |z|max)·Σ_j scale·att_tj·(|datt_tj| + |dot_t| + Σ|dy·v|)·|k_jd|  (likewise dk)
// where z are the scaled scores. A dropped tile, a wrong mask or a wrong sign moves entries by
// about their own size, far outside these bounds.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "src/model/attention.h"
#include "src/model/attention_tiled.h"
#include "src/model/matmul.h"
#include "src/reference/model.h"
#include "tests/model_test_util.h"
#include "tests/simd_test_util.h"
#include "wte/rng.h"

namespace wte {
namespace {

constexpr double kU = 0x1p-24;

struct Shape {
  size_t B, T, C, NH;
  std::string name() const {
    return "B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" + std::to_string(C) +
           " NH=" + std::to_string(NH);
  }
};

std::vector<Shape> awkward_shapes() {
  std::vector<Shape> shapes;
  // (C, NH): head sizes 1, 3, 7, 17, 24, 64
  const std::pair<size_t, size_t> heads[] = {{2, 2}, {6, 2}, {7, 1}, {34, 2}, {48, 2}, {64, 1}};
  for (size_t T : {1, 2, 63, 65, 130})
    for (auto [C, NH] : heads) shapes.push_back({T == 65 ? size_t{2} : size_t{1}, T, C, NH});
  return shapes;
}

// Expects |got - want| <= tol entry by entry (got finite); names the first entries outside.
void expect_within(const std::vector<float>& got, const std::vector<double>& want,
                   const std::vector<double>& tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t outside = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!std::isfinite(got[i]) || !(err <= tol[i] + 1e-30)) {
      if (++outside <= 3)
        ADD_FAILURE() << what << "[" << i << "]: float " << got[i] << ", double " << want[i]
                      << ", |diff| " << err << " > bound " << tol[i];
    }
  }
  EXPECT_EQ(outside, 0u) << what << ": entries outside the bound";
}

// The double reference's forward and backward at one shape, with the bounds above for a layer
// whose inputs are rounded to `unit` (2^-24 float32; 2^-8 bfloat16).
struct Expected {
  std::vector<double> out, out_tol, dqkv, dqkv_tol, lse;
};

Expected expected(const Shape& s, const std::vector<float>& qkv, const std::vector<float>& dout,
                  double unit) {
  const size_t B = s.B, T = s.T, C = s.C, NH = s.NH, hs = C / NH;
  const std::vector<double> x(qkv.begin(), qkv.end()), dy(dout.begin(), dout.end());
  Expected e;
  e.out.assign(B * T * C, 0.0);
  std::vector<double> preatt(B * NH * T * T), att(B * NH * T * T);
  ref::attention_forward(e.out.data(), preatt.data(), att.data(), x.data(), B, T, C, NH);
  e.dqkv.assign(B * T * 3 * C, 0.0);
  ref::attention_backward(e.dqkv.data(), dy.data(), x.data(), att.data(), B, T, C, NH);
  const double scale = 1 / std::sqrt(static_cast<double>(hs));
  const size_t K = hs + T + 32;
  double zmax = 0;
  for (double p : preatt) zmax = std::max(zmax, std::fabs(scale * p));
  const double kappa = 8 * K * unit / (1 - K * unit) * (1 + zmax);
  e.out_tol.assign(B * T * C, 0.0);
  e.dqkv_tol.assign(B * T * 3 * C, 0.0);
  e.lse.assign(B * NH * T, 0.0);
  auto at = [&](size_t b, size_t t, size_t part, size_t h, size_t d) {
    return (b * T + t) * 3 * C + part * C + h * hs + d;
  };
  for (size_t b = 0; b < B; ++b)
    for (size_t h = 0; h < NH; ++h)
      for (size_t t = 0; t < T; ++t) {
        const size_t row = ((b * NH + h) * T + t) * T;
        double mx = -INFINITY, sum = 0;
        for (size_t j = 0; j <= t; ++j) mx = std::max(mx, scale * preatt[row + j]);
        for (size_t j = 0; j <= t; ++j) sum += std::exp(scale * preatt[row + j] - mx);
        e.lse[(b * NH + h) * T + t] = mx + std::log(sum);
        std::vector<double> da(t + 1, 0.0), da_abs(t + 1, 0.0);
        double dot = 0;
        for (size_t j = 0; j <= t; ++j) {
          for (size_t d = 0; d < hs; ++d) {
            const double term = dy[(b * T + t) * C + h * hs + d] * x[at(b, j, 2, h, d)];
            da[j] += term;
            da_abs[j] += std::fabs(term);
          }
          dot += att[row + j] * da[j];
        }
        for (size_t j = 0; j <= t; ++j) {
          const double a = att[row + j];
          const double g = scale * a * (std::fabs(da[j]) + std::fabs(dot) + da_abs[j]);
          for (size_t d = 0; d < hs; ++d) {
            e.out_tol[(b * T + t) * C + h * hs + d] += kappa * a * std::fabs(x[at(b, j, 2, h, d)]);
            e.dqkv_tol[at(b, j, 2, h, d)] += kappa * a * std::fabs(dy[(b * T + t) * C + h * hs + d]);
            e.dqkv_tol[at(b, t, 0, h, d)] += kappa * g * std::fabs(x[at(b, j, 1, h, d)]);
            e.dqkv_tol[at(b, j, 1, h, d)] += kappa * g * std::fabs(x[at(b, t, 0, h, d)]);
          }
        }
      }
  return e;
}

struct Tiled {
  std::vector<float> out, lse, dqkv;
};

Tiled run_tiled(const Shape& s, const std::vector<float>& qkv, const std::vector<float>& dout,
                bool bf16, AttentionTiles tiles) {
  Tiled r;
  r.out.assign(s.B * s.T * s.C, -7.0f);
  r.lse.assign(s.B * s.NH * s.T, -7.0f);
  r.dqkv.assign(s.B * s.T * 3 * s.C, -7.0f);  // written, not added to
  attention_tiled_forward(r.out.data(), r.lse.data(), qkv.data(), s.B, s.T, s.C, s.NH, bf16, tiles);
  attention_tiled_backward(r.dqkv.data(), dout.data(), qkv.data(), r.out.data(), r.lse.data(), s.B,
                           s.T, s.C, s.NH, bf16, tiles);
  return r;
}

std::vector<float> random(size_t n, Rng* rng, double scale) {
  std::vector<float> v(n);
  test::fill_uniform(&v, rng, scale);
  return v;
}

size_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) return i;
  return a.size();
}

class AttentionTiledTest : public test::TargetTest {};

TEST_P(AttentionTiledTest, WithinBoundOfDoubleReferenceAtAwkwardShapes) {
  Rng rng(31);
  for (const Shape& s : awkward_shapes()) {
    const std::vector<float> qkv = random(s.B * s.T * 3 * s.C, &rng, 1.5);
    const std::vector<float> dout = random(s.B * s.T * s.C, &rng, 1.0);
    const Expected e = expected(s, qkv, dout, kU);
    for (AttentionTiles tiles : {AttentionTiles{}, AttentionTiles{16, 16}, AttentionTiles{32, 64},
                                 AttentionTiles{64, 16}}) {
      const std::string where = target() + " " + s.name() + " tiles " +
                                std::to_string(tiles.q_rows) + "x" + std::to_string(tiles.k_cols);
      const Tiled r = run_tiled(s, qkv, dout, false, tiles);
      expect_within(r.out, e.out, e.out_tol, where + " out");
      expect_within(r.dqkv, e.dqkv, e.dqkv_tol, where + " dqkv");
      std::vector<double> lse_tol(e.lse.size());
      for (size_t i = 0; i < lse_tol.size(); ++i) lse_tol[i] = 64 * kU * (1 + std::fabs(e.lse[i])) * (s.T + s.C);
      expect_within(r.lse, e.lse, lse_tol, where + " lse");
    }
  }
}

// bf16 inputs (q, k, v, dout, P and dS rounded to bfloat16, float32 sums): the same bounds with
// bfloat16's unit roundoff.
TEST_P(AttentionTiledTest, Bf16InputsWithinBf16BoundOfDoubleReference) {
  Rng rng(32);
  for (const Shape& s : {Shape{1, 65, 48, 2}, Shape{2, 130, 64, 1}, Shape{1, 3, 7, 1}}) {
    const std::vector<float> qkv = random(s.B * s.T * 3 * s.C, &rng, 1.5);
    const std::vector<float> dout = random(s.B * s.T * s.C, &rng, 1.0);
    const Expected e = expected(s, qkv, dout, 0x1p-8);
    for (AttentionTiles tiles : {AttentionTiles{}, AttentionTiles{64, 64}, AttentionTiles{16, 32}}) {
      const std::string where = target() + " " + s.name() + " tiles " +
                                std::to_string(tiles.q_rows) + "x" + std::to_string(tiles.k_cols);
      const Tiled r = run_tiled(s, qkv, dout, true, tiles);
      expect_within(r.out, e.out, e.out_tol, where + " bf16 out");
      expect_within(r.dqkv, e.dqkv, e.dqkv_tol, where + " bf16 dqkv");
    }
  }
}

// 1 and 2 threads: every bit the same (each (batch row, head) is one thread's, in a fixed order),
// float32 and bf16 inputs (on AVX-512 targets of a CPU with AVX512_BF16: the pair products).
TEST_P(AttentionTiledTest, BitIdenticalAtOneAndTwoThreads) {
  Rng rng(33);
  const Shape s{2, 130, 48, 3};
  const std::vector<float> qkv = random(s.B * s.T * 3 * s.C, &rng, 1.5);
  const std::vector<float> dout = random(s.B * s.T * s.C, &rng, 1.0);
  for (bool bf16 : {false, true}) {
    omp_set_num_threads(1);
    const Tiled one = run_tiled(s, qkv, dout, bf16, {});
    omp_set_num_threads(2);
    const Tiled two = run_tiled(s, qkv, dout, bf16, {});
    const std::string where = target() + (bf16 ? " bf16" : "");
    EXPECT_EQ(first_difference(one.out, two.out), one.out.size()) << where;
    EXPECT_EQ(first_difference(one.lse, two.lse), one.lse.size()) << where;
    EXPECT_EQ(first_difference(one.dqkv, two.dqkv), one.dqkv.size()) << where;
  }
}

// Causality: the first T0 rows of a sequence of T tokens give the same bits as the sequence cut
// to T0 tokens, for T0 inside a tile, at a tile's end and one past it.
TEST_P(AttentionTiledTest, AppendingTokensChangesNoEarlierRow) {
  Rng rng(34);
  const size_t C = 48, NH = 2, T = 150;
  const std::vector<float> qkv = random(T * 3 * C, &rng, 1.5);
  for (bool bf16 : {false, true}) {
    const std::string where = target() + (bf16 ? " bf16" : "");
    std::vector<float> out(T * C), lse(NH * T);
    attention_tiled_forward(out.data(), lse.data(), qkv.data(), 1, T, C, NH, bf16);
    for (size_t T0 : {1, 5, 63, 64, 65, 127, 128, 129}) {
      const std::vector<float> head(qkv.begin(), qkv.begin() + T0 * 3 * C);
      std::vector<float> out0(T0 * C), lse0(NH * T0);
      attention_tiled_forward(out0.data(), lse0.data(), head.data(), 1, T0, C, NH, bf16);
      const std::vector<float> prefix(out.begin(), out.begin() + T0 * C);
      EXPECT_EQ(first_difference(out0, prefix), out0.size()) << where << " T0 " << T0;
      for (size_t h = 0; h < NH; ++h)
        for (size_t t = 0; t < T0; ++t)
          EXPECT_EQ(std::bit_cast<uint32_t>(lse0[h * T0 + t]), std::bit_cast<uint32_t>(lse[h * T + t]))
              << where << " T0 " << T0 << " head " << h << " row " << t;
    }
  }
}

WTE_INSTANTIATE_ON_EVERY_TARGET(AttentionTiledTest);

// Tile sizes given are kept; zeros stand for the path's default: 64 by 64, square on every path.
TEST(AttentionTiled, ZeroTilesStandForThePathsDefault) {
  EXPECT_EQ(attention_tiles({}, false).q_rows, 64u);
  EXPECT_EQ(attention_tiles({}, false).k_cols, 64u);
  EXPECT_EQ(attention_tiles({32, 0}, false).q_rows, 32u);
  EXPECT_EQ(attention_tiles({32, 0}, false).k_cols, 64u);
  EXPECT_EQ(attention_tiles({48, 16}, true).q_rows, 48u);
  EXPECT_EQ(attention_tiles({48, 16}, true).k_cols, 16u);
  const AttentionTiles bf16 = attention_tiles({}, true);
  EXPECT_EQ(bf16.q_rows, bf16.k_cols);
  EXPECT_TRUE(bf16.q_rows == 64 || bf16.q_rows == 128) << bf16.q_rows;
}

// The tiled layer against the dense one (oneDNN GEMMs and the softmax kernels) on the same
// inputs: both within the double reference's bound, so within twice that bound of each other.
TEST(AttentionTiled, AgreesWithDenseLayer) {
  Gemm gemm;
  Rng rng(35);
  for (const Shape& s : {Shape{2, 65, 48, 2}, Shape{1, 130, 64, 1}, Shape{1, 2, 6, 2}}) {
    const std::vector<float> qkv = random(s.B * s.T * 3 * s.C, &rng, 1.5);
    const std::vector<float> dout = random(s.B * s.T * s.C, &rng, 1.0);
    const Expected e = expected(s, qkv, dout, kU);
    std::vector<float> out(s.B * s.T * s.C), att(s.B * s.NH * s.T * s.T), datt(att.size());
    std::vector<float> dqkv(s.B * s.T * 3 * s.C);
    attention_forward(out.data(), att.data(), qkv.data(), s.B, s.T, s.C, s.NH, gemm);
    attention_backward(dqkv.data(), datt.data(), dout.data(), qkv.data(), att.data(), s.B, s.T,
                       s.C, s.NH, gemm);
    const Tiled r = run_tiled(s, qkv, dout, false, {});
    std::vector<double> out_tol = e.out_tol, dqkv_tol = e.dqkv_tol;
    for (double& t : out_tol) t *= 2;
    for (double& t : dqkv_tol) t *= 2;
    expect_within(r.out, std::vector<double>(out.begin(), out.end()), out_tol, s.name() + " out");
    expect_within(r.dqkv, std::vector<double>(dqkv.begin(), dqkv.end()), dqkv_tol, s.name() + " dqkv");
  }
}

// model.attention: dense and tiled are what they say at every T; auto is dense below
// tiled_attention_min_t() tokens and tiled from there on.
TEST(AttentionTiled, AutoChoosesTiledFromTheThreshold) {
  ModelConfig c;
  const size_t min_t = tiled_attention_min_t();
  for (size_t T : {size_t{1}, min_t - 1, min_t, size_t{8192}}) {
    c.attention = AttentionImpl::dense;
    EXPECT_FALSE(use_tiled_attention(c, T)) << T;
    c.attention = AttentionImpl::tiled;
    EXPECT_TRUE(use_tiled_attention(c, T)) << T;
    c.attention = AttentionImpl::automatic;
    EXPECT_EQ(use_tiled_attention(c, T), T >= min_t) << T;
  }
  EXPECT_EQ(ModelConfig{}.attention, AttentionImpl::automatic) << "auto is the default";
}

// auto's threshold follows the vector width of the Highway target in force (the measured table in
// src/model/attention_tiled.cc): tiled from T 128 on 512-bit vectors, from T 384 on narrower ones,
// where the dense attention is faster up to T 256.
TEST(AttentionTiled, AutoThresholdFollowsTheVectorWidthOfTheTargetInForce) {
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    const bool wide = target == HWY_AVX3 || target == HWY_AVX3_DL;
    EXPECT_EQ(tiled_attention_min_t(), wide ? 128u : 384u) << hwy::TargetName(target);
    ModelConfig c;
    EXPECT_FALSE(use_tiled_attention(c, 256, tiled_attention_min_t()) && !wide)
        << hwy::TargetName(target) << ": T 256 runs dense below 512-bit vectors";
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace
}  // namespace wte
