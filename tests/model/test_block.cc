// One float32 transformer block (src/model/block.h: block_forward, block_backward) against the
// double reference block (src/reference/model.h: ref::block_forward, ref::block_backward) on the
// same float parameters and input, at tiny, awkward shapes: T = 1, 2, 3, 5, 7; B = 1 and 2; C = 12
// and 20 (not multiples of any vector width) with 1 to 4 heads. Forward: the block's output.
// Backward: the gradient at the block's input and every one of its 12 parameter gradients.
//
// The block's parts each have a per-entry bound of their own (tests/model/test_matmul.cc,
// test_attention.cc, tests/simd/test_layernorm.cc, tests/simd/test_block_kernels.cc for GELU and
// the residual add); this test checks that they are wired as GPT-2's block() (which buffer feeds
// which, the residual paths, the gradients' sums), so its bound is per tensor, from the length of
// the chain of float32 operations behind every entry:
//   forward:  ln_1 (two sums of C terms, a sqrt and a division: 2C + 6 roundings), c_attn (C + 1),
//             attention (hs + 2T + 8: scores, softmax, ·V), c_proj (C + 1), the residual add (1),
//             ln_2 (2C + 6), c_fc (C + 1), GELU (8), mlp c_proj (4C + 1), the residual add (1):
//             K_fwd = 11C + hs + 2T + 34
//   backward: the saved activations carry the forward's error, and the backward chain is as long
//             again (each GEMM's transpose, GELU's and LayerNorm's backward, attention's three
//             GEMMs and its softmax backward), plus the weight gradients' sums over N = B·T rows:
//             K = 2·K_fwd + N
// A float32 operation errs by at most u = 2^-24 relative to the magnitude of its terms (a K-term
// sum: K·u·Σ|terms|, Higham §3.1). Here every activation is of order 1 (LayerNorm outputs, weights
// ~1/√fan_in), so Σ|terms| of each sum, and the gain of a later error through the rest of the
// chain (LayerNorm's rstd, the weights' row sums), are a small multiple of the output's largest
// entry: kChainGain = 16 covers both. So per tensor
//   max |f32 - double| <= kChainGain · K · u · max |double| + 1e-30
// (about 5e-4 relative at C = 20, T = 7; observed errors are 100x smaller, printed below). A
// miswired buffer, a dropped residual path or a flipped sign moves a tensor by about its own size.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "src/model/block.h"
#include "src/model/matmul.h"
#include "src/reference/model.h"
#include "tests/model_test_util.h"
#include "wte/model.h"
#include "wte/rng.h"

namespace wte {
namespace {

constexpr double kU = 0x1p-24;
constexpr double kChainGain = 16;

struct BlockShape {
  size_t B, T, C, NH;
};

std::vector<BlockShape> awkward_shapes() {
  std::vector<BlockShape> shapes;
  for (size_t T : {1, 2, 3, 5, 7})
    for (auto [C, NH] : {std::pair<size_t, size_t>{12, 3}, {20, 4}, {20, 1}})
      shapes.push_back({T == 3 ? size_t{1} : size_t{2}, T, C, NH});
  return shapes;
}

std::string describe(const BlockShape& s) {
  return "B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) + " C=" + std::to_string(s.C) +
         " NH=" + std::to_string(s.NH);
}

// The chain length K of the header comment.
double chain_terms(const BlockShape& s, bool backward) {
  const double k_fwd = 11.0 * s.C + double(s.C / s.NH) + 2.0 * s.T + 34;
  return backward ? 2 * k_fwd + double(s.B * s.T) : k_fwd;
}

// Expects max |got - want| <= kChainGain·K·u·max|want| + 1e-30; returns the observed ratio
// max|got - want| / max|want| (for the printed summary).
double expect_agrees(const float* got, const std::vector<double>& want, double K,
                     const std::string& what) {
  double max_err = 0, max_ref = 0;
  size_t at = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(want[i]));
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= max_err)) {  // NaN too
      max_err = std::isnan(err) ? INFINITY : err;
      at = i;
    }
  }
  const double bound = kChainGain * K * kU * max_ref + 1e-30;
  EXPECT_LE(max_err, bound) << what << ": max |float - double| " << max_err << " at [" << at
                            << "] (float " << got[at] << ", double " << want[at]
                            << "), max |double| " << max_ref << ", bound " << bound;
  return max_ref > 0 ? max_err / max_ref : max_err;
}

// A block's float tensors (owned) with their views, and the same values in double.
struct Params {
  ref::BlockParams<float> f;
  ref::BlockParams<double> d;
  BlockTensors views() {
    return {f.ln_1_g.data(),   f.ln_1_b.data(), f.c_attn_w.data(), f.c_attn_b.data(),
            f.attn_c_proj_w.data(), f.attn_c_proj_b.data(), f.ln_2_g.data(), f.ln_2_b.data(),
            f.c_fc_w.data(),   f.c_fc_b.data(), f.mlp_c_proj_w.data(), f.mlp_c_proj_b.data()};
  }
};

// Weights ~ U(±1.5/√fan_in), biases U(±0.5), gains 1 + U(±0.3): every term of every op matters.
Params random_params(size_t C, Rng* rng) {
  Params p{ref::BlockParams<float>(C, 1.0f), ref::BlockParams<double>(C, 1.0)};
  auto f = ref::BlockParams<float>::list(p.f);
  auto d = ref::BlockParams<double>::list(p.d);
  for (size_t k = 0; k < f.size(); ++k) {
    const std::string name = f[k].first;
    const bool gain = name.back() == 'g', weight = name.back() == 'w';
    const double fan_in = name == "mlp/c_proj/w" ? 4.0 * C : double(C);
    for (float& x : *f[k].second) {
      const double u = 2.0 * rng->uniform() - 1.0;
      x = static_cast<float>(gain ? 1.0 + 0.3 * u : weight ? 1.5 * u / std::sqrt(fan_in) : 0.5 * u);
    }
    d[k].second->assign(f[k].second->begin(), f[k].second->end());
  }
  return p;
}

// The float block's activations and scratch for one shape (float32 GEMMs: no bf16 buffers).
struct Arena {
  std::vector<std::vector<float>> store;
  float* take(size_t n) {
    store.emplace_back(n, 0.0f);
    return store.back().data();
  }
  BlockActivations act{};
  BlockScratch scratch{};
  Arena(size_t B, size_t T, size_t C, size_t NH) {
    const size_t N = B * T, BTT = B * T * T;
    store.reserve(32);
    act.ln1 = take(N * C);
    act.ln1_mean = take(N);
    act.ln1_rstd = take(N);
    act.qkv = take(N * 3 * C);
    act.att = take(BTT * NH);
    act.lse = take(N * NH);
    act.atty = take(N * C);
    act.xmid = take(N * C);
    act.ln2 = take(N * C);
    act.ln2_mean = take(N);
    act.ln2_rstd = take(N);
    act.fch = take(N * 4 * C);
    act.fch_gelu = take(N * 4 * C);
    scratch.proj = take(N * C);
    scratch.datty = take(N * C);
    scratch.d4c = take(N * 4 * C);
    scratch.datt = take(BTT * NH);
  }
};

// tiled: the block with the tiled attention (src/model/attention_tiled.h), else the dense one.
void check_block_against_reference(bool tiled) {
  Gemm gemm;
  Rng rng(31);
  const float eps = 1e-5f;
  double worst_fwd = 0, worst_bwd = 0;
  for (const BlockShape& s : awkward_shapes()) {
    const size_t B = s.B, T = s.T, C = s.C, NH = s.NH, N = B * T;
    const std::string where = describe(s) + (tiled ? " tiled attention" : "");
    SCOPED_TRACE(where);
    Params p = random_params(C, &rng);
    std::vector<float> x(N * C), dout(N * C);
    test::fill_uniform(&x, &rng, 2.0);
    test::fill_uniform(&dout, &rng, 1.0);
    const std::vector<double> xd(x.begin(), x.end()), doutd(dout.begin(), dout.end());

    // Forward.
    Arena arena(B, T, C, NH);
    std::vector<float> out(N * C, -7.0f);
    const BlockTensors w = p.views();
    block_forward(out.data(), arena.act, arena.scratch, x.data(), w, nullptr, B, T, C, NH, eps,
                  tiled, gemm);
    ref::BlockActivations<double> ra;
    std::vector<double> want_out(N * C);
    ref::block_forward(want_out.data(), &ra, xd.data(), p.d, B, T, C, NH, static_cast<double>(eps));
    worst_fwd = std::max(worst_fwd, expect_agrees(out.data(), want_out, chain_terms(s, false),
                                                  where + " out"));

    // Backward: dx starts as d out; gradients zeroed (the result is the gradient whether the
    // block writes or adds).
    ref::BlockParams<float> grads(C, 0.0f);
    const BlockTensors g{grads.ln_1_g.data(),   grads.ln_1_b.data(), grads.c_attn_w.data(),
                         grads.c_attn_b.data(), grads.attn_c_proj_w.data(),
                         grads.attn_c_proj_b.data(), grads.ln_2_g.data(), grads.ln_2_b.data(),
                         grads.c_fc_w.data(),   grads.c_fc_b.data(), grads.mlp_c_proj_w.data(),
                         grads.mlp_c_proj_b.data()};
    std::vector<float> dx = dout;
    block_backward(dx.data(), g, arena.scratch, arena.act, x.data(), w, nullptr, B, T, C, NH,
                   tiled, gemm);
    ref::BlockParams<double> want_g(C, 0.0);
    std::vector<double> want_dx(N * C);
    ref::block_backward(want_dx.data(), &want_g, doutd.data(), ra, xd.data(), p.d, B, T, C, NH);
    const double K = chain_terms(s, true);
    worst_bwd = std::max(worst_bwd, expect_agrees(dx.data(), want_dx, K, where + " dx"));
    const auto got_list = ref::BlockParams<float>::list(grads);
    const auto want_list = ref::BlockParams<double>::list(want_g);
    for (size_t k = 0; k < got_list.size(); ++k)
      worst_bwd = std::max(worst_bwd, expect_agrees(got_list[k].second->data(), *want_list[k].second,
                                                    K, where + " d" + got_list[k].first));
  }
  std::printf("largest max|f32 - double| / max|double| over the shapes: forward %.3g, backward "
              "%.3g (bounds from %.3g)\n",
              worst_fwd, worst_bwd, kChainGain * chain_terms({1, 1, 12, 3}, false) * kU);
}

TEST(Block, ForwardAndBackwardWithinBoundOfDoubleReferenceAtAwkwardShapes) {
  check_block_against_reference(false);
}

TEST(Block, TiledAttentionWithinBoundOfDoubleReferenceAtAwkwardShapes) {
  check_block_against_reference(true);
}

}  // namespace
}  // namespace wte
