// The fused, chunked unembedding + cross-entropy (src/model/unembedding.h) against the unfused path
// and a double reference, at awkward sizes: V not a multiple of the tile, N not a multiple of the
// block, one-row blocks, one-id tiles, a tile wider than V; and inside the Model (model.loss_chunk):
// loss, logits and every gradient against the double reference model with gradcheck's bound, tied and
// untied, ln_f on and off, with and without blocks.
//
// The layer's bound (stated here, held below by both paths, so |fused - unfused| is at most twice
// it). u = 2^-24; γ_K = K·u / (1 - K·u), the worst-case relative error of a float sum of K products
// in any order (Higham, Accuracy and Stability of Numerical Algorithms, §3.1), which covers any
// blocking oneDNN chooses and the fused path's sum over tiles. For row n:
//   logits:  |Δx_nv| <= ε_n := γ_C · max_v Σ_c |h_nc W_vc|
//   loss:    |Δloss_n| <= 2 ε_n (logsumexp and x_t are each 1-Lipschitz in the max-norm)
//            + the kernel's bound (tests/simd/test_simd_kernels.cc: S's error with the tiles' rescales,
//              log, the subtraction)
//   dlogits: |Δd_nv| <= g · p_nv (e^{2 ε_n} - 1) + the kernel's gradient bound
//   dh:      |Δdh_nc| <= Σ_v |Δd_nv| |W_vc| + γ_V Σ_v |d_nv W_vc|
//   dW:      |ΔdW_vc| <= Σ_n |Δd_nv| |h_nc| + γ_N Σ_n |d_nv h_nc|
// evaluated in double from the double reference's p and d. Typical errors are ~100x smaller.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "src/reference/kernels.h"
#include "src/analysis/gradcheck.h"
#include "src/model/matmul.h"
#include "src/model/unembedding.h"
#include "tests/model_test_util.h"
#include "wte/error.h"
#include "wte/kernels.h"
#include "wte/model.h"
#include "wte/rng.h"

namespace wte {
namespace {

constexpr double kU = 0x1p-24;
double gamma_k(double K) { return K * kU / (1 - K * kU); }

struct Problem {
  size_t N, V, C;
  std::vector<float> h, W;
  std::vector<int32_t> y;
};

Problem make_problem(size_t N, size_t V, size_t C, uint32_t seed) {
  Problem p{N, V, C, std::vector<float>(N * C), std::vector<float>(V * C), std::vector<int32_t>(N)};
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& x : p.h) x = normal(rng);
  for (float& x : p.W) x = 0.5f * normal(rng);  // logits of O(1..3): a spread softmax
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(V) - 1);
  for (int32_t& t : p.y) t = pick(rng);
  p.y[0] = 0;
  p.y[N - 1] = static_cast<int32_t>(V) - 1;
  return p;
}

struct Result {
  std::vector<float> losses, dh, dW;
};

// dW0 (optional): an earlier gradient in dW, which the run adds to (accumulate_dW); without it
// dW starts as NaN and must be written.
// threads: the threads the workspace has room for (UnembeddingTiles::threads); the split runs at
// min(threads, omp_get_max_threads(), tiles).
Result run_fused(const Problem& p, size_t rows, size_t tile, Gemm& gemm,
                 const std::vector<float>* dW0 = nullptr, size_t threads = 1) {
  const UnembeddingTiles t{std::min(rows, p.N), std::min(tile, p.V), threads};
  std::vector<float> ws(unembedding_workspace_floats(t, p.V, p.C));
  Result r{std::vector<float>(p.N), std::vector<float>(p.N * p.C, NAN),
           dW0 != nullptr ? *dW0 : std::vector<float>(p.V * p.C, NAN)};  // NaN: must be written
  unembedding_loss_forward_backward(r.losses.data(), r.dh.data(), r.dW.data(), p.h.data(),
                                    p.W.data(), p.y.data(), p.N, p.V, p.C,
                                    1.0f / static_cast<float>(p.N), t, ws.data(), nullptr,
                                    gemm, /*accumulate_dW=*/dW0 != nullptr);
  return r;
}

// The unfused path, as Model runs it.
Result run_unfused(const Problem& p, Gemm& gemm) {
  const auto n = static_cast<int64_t>(p.N), c = static_cast<int64_t>(p.C),
             v = static_cast<int64_t>(p.V);
  std::vector<float> logits(p.N * p.V);
  Result r{std::vector<float>(p.N), std::vector<float>(p.N * p.C), std::vector<float>(p.V * p.C)};
  gemm.run(logits.data(), plain(n, v), p.h.data(), plain(n, c), p.W.data(), transposed(v, c));
  gemm.wait();
  softmax_cross_entropy(logits.data(), r.losses.data(), p.y.data(), p.N, p.V,
                        1.0f / static_cast<float>(p.N));
  gemm.run(r.dW.data(), plain(v, c), logits.data(), transposed(n, v), p.h.data(), plain(n, c));
  gemm.run(r.dh.data(), plain(n, c), logits.data(), plain(n, v), p.W.data(), plain(v, c));
  gemm.wait();
  return r;
}

// The double reference and the bound of the header comment for tiles of `tile` ids.
struct Reference {
  std::vector<double> losses, dh, dW;
  std::vector<double> loss_tol, dh_tol, dW_tol;
  // Σ_v (|d_nv| + tol(d_nv)) |W_vc| and Σ_n (|d_nv| + tol(d_nv)) |h_nc|: what rounding dlogits to
  // bf16 (relative 2^-8) can move dh and dW by (the bf16 bound below).
  std::vector<double> dh_abs, dW_abs;
};

Reference reference(const Problem& p, size_t tile) {
  const size_t N = p.N, V = p.V, C = p.C;
  const double gf = static_cast<double>(1.0f / static_cast<float>(N));  // the float grad_scale
  Reference ref;
  ref.losses.resize(N);
  ref.loss_tol.resize(N);
  std::vector<double> d(N * V), dtol(N * V);
  const size_t tiles = (V + std::min(tile, V) - 1) / std::min(tile, V);
  for (size_t n = 0; n < N; ++n) {
    std::vector<double> x(V);
    double A = 0;
    for (size_t v = 0; v < V; ++v) {
      double s = 0, a = 0;
      for (size_t c = 0; c < C; ++c) {
        s += static_cast<double>(p.h[n * C + c]) * p.W[v * C + c];
        a += std::abs(static_cast<double>(p.h[n * C + c]) * p.W[v * C + c]);
      }
      x[v] = s;
      A = std::max(A, a);
    }
    const double eps = gamma_k(static_cast<double>(C)) * A;
    double m = x[0], m_first = x[0];
    for (size_t v = 0; v < V; ++v) m = std::max(m, x[v]);
    for (size_t v = 0; v < std::min(tile, V); ++v) m_first = std::max(m_first, x[v]);
    double S = 0;
    for (size_t v = 0; v < V; ++v) S += std::exp(x[v] - m);
    const size_t t = static_cast<size_t>(p.y[n]);
    ref.losses[n] = (m - x[t]) + std::log(S);
    // The kernel's own bound (tests/simd/test_simd_kernels.cc), with the logits' error added to the
    // exponent gaps it depends on.
    const double delta_S =
        (1.5 * static_cast<double>(V) + 2 + 3.0 * static_cast<double>(tiles) + (m - m_first) + 2 * eps) * kU;
    ref.loss_tol[n] = 2 * eps + 2 * (kU * (m - x[t] + 2 * eps) + delta_S + 2 * kU * std::abs(std::log(S)) +
                                     kU * std::abs(ref.losses[n]));
    for (size_t v = 0; v < V; ++v) {
      const double pv = std::exp(x[v] - m) / S;
      d[n * V + v] = gf * (pv - (v == t ? 1.0 : 0.0));
      const double dv = m - x[v] + 2 * eps;
      dtol[n * V + v] = gf * pv * std::expm1(2 * eps) * 1.0001 +
                        2 * gf * (pv * ((4 + dv) * kU + delta_S) + 2 * kU * std::abs(d[n * V + v] / gf) +
                                  8 * 0x1p-149);
    }
  }
  ref.dh.assign(N * C, 0);
  ref.dh_tol.assign(N * C, 0);
  ref.dW.assign(V * C, 0);
  ref.dW_tol.assign(V * C, 0);
  ref.dh_abs.assign(N * C, 0);
  ref.dW_abs.assign(V * C, 0);
  const double gV = gamma_k(static_cast<double>(V)), gN = gamma_k(static_cast<double>(N));
  for (size_t n = 0; n < N; ++n)
    for (size_t v = 0; v < V; ++v) {
      const double dn = d[n * V + v], tn = dtol[n * V + v];
      for (size_t c = 0; c < C; ++c) {
        const double w = p.W[v * C + c], hh = p.h[n * C + c];
        ref.dh[n * C + c] += dn * w;
        ref.dh_tol[n * C + c] += tn * std::abs(w) + gV * std::abs(dn * w);
        ref.dW[v * C + c] += dn * hh;
        ref.dW_tol[v * C + c] += tn * std::abs(hh) + gN * std::abs(dn * hh);
        ref.dh_abs[n * C + c] += (std::abs(dn) + tn) * std::abs(w);
        ref.dW_abs[v * C + c] += (std::abs(dn) + tn) * std::abs(hh);
      }
    }
  // A floor of a few denormals for entries whose terms all vanish.
  for (double& x : ref.dh_tol) x += 1e-40;
  for (double& x : ref.dW_tol) x += 1e-40;
  return ref;
}

// Index of the first entry outside its bound (n if none), for a message.
size_t first_outside(const std::vector<float>& got, const std::vector<double>& want,
                     const std::vector<double>& tol) {
  for (size_t i = 0; i < got.size(); ++i)
    if (!std::isfinite(got[i]) || std::abs(got[i] - want[i]) > tol[i]) return i;
  return got.size();
}

void expect_within(const Result& r, const Reference& ref, const std::string& what) {
  const size_t bl = first_outside(r.losses, ref.losses, ref.loss_tol);
  EXPECT_EQ(bl, r.losses.size()) << what << ": loss[" << bl << "] = "
                                 << (bl < r.losses.size() ? r.losses[bl] : 0) << ", want "
                                 << (bl < r.losses.size() ? ref.losses[bl] : 0) << " +- "
                                 << (bl < r.losses.size() ? ref.loss_tol[bl] : 0);
  const size_t bh = first_outside(r.dh, ref.dh, ref.dh_tol);
  EXPECT_EQ(bh, r.dh.size()) << what << ": dh[" << bh << "] = " << (bh < r.dh.size() ? r.dh[bh] : 0)
                             << ", want " << (bh < r.dh.size() ? ref.dh[bh] : 0) << " +- "
                             << (bh < r.dh.size() ? ref.dh_tol[bh] : 0);
  const size_t bw = first_outside(r.dW, ref.dW, ref.dW_tol);
  EXPECT_EQ(bw, r.dW.size()) << what << ": dW[" << bw << "] = " << (bw < r.dW.size() ? r.dW[bw] : 0)
                             << ", want " << (bw < r.dW.size() ? ref.dW[bw] : 0) << " +- "
                             << (bw < r.dW.size() ? ref.dW_tol[bw] : 0);
}

struct Shape {
  size_t N, V, C, rows, tile;
};

// "N=37 V=101 C=24 rows=8 tile=16", for SCOPED_TRACE and printed results.
std::string describe(const Shape& s) {
  return "N=" + std::to_string(s.N) + " V=" + std::to_string(s.V) + " C=" + std::to_string(s.C) +
         " rows=" + std::to_string(s.rows) + " tile=" + std::to_string(s.tile);
}

// The loss-only forward (evaluation) at the shape's tiles, on operands h (N, C) and W (V, C) (float
// or bf16, as the fused run had) and p's targets, gives `fused_losses` (N) bit for bit: the same
// tiles and kernels.
void expect_loss_only_forward_matches(const Shape& s, GemmInput h, GemmInput W, const Problem& p,
                                      const std::vector<float>& fused_losses, Gemm& gemm,
                                      size_t threads = 1) {
  const UnembeddingTiles t{std::min(s.rows, s.N), std::min(s.tile, s.V), threads};
  std::vector<float> ws(unembedding_workspace_floats(t, s.V, s.C)), losses(s.N);
  unembedding_loss_forward(losses.data(), h, W, p.y.data(), s.N, s.V, s.C, t, ws.data(), gemm);
  for (size_t n = 0; n < s.N; ++n)
    EXPECT_EQ(std::bit_cast<uint32_t>(losses[n]), std::bit_cast<uint32_t>(fused_losses[n]))
        << "row " << n;
}

// Fused (several block heights and tile widths) and unfused, each against the double reference
// within the bound; the loss-only forward gives the fused losses bit for bit.
TEST(FusedUnembedding, FusedAndUnfusedMatchTheDoubleReferenceAtAwkwardSizes) {
  const std::vector<Shape> shapes = {
      // N not a multiple of rows, V not a multiple of tile:
      {37, 101, 24, 8, 16},
      // one-row blocks, one-id tiles:
      {5, 19, 8, 1, 1},
      // one-row blocks, a tile wider than V (one tile):
      {7, 45, 16, 1, 64},
      // a block taller than N (one block), tiles of a vector and one more:
      {9, 300, 20, 64, 17},
      // the tile a multiple of 16 but V odd, blocks of 3:
      {50, 257, 32, 3, 32},
      // V smaller than a vector:
      {4, 3, 5, 2, 2},
      // the model's tiny shapes: N = B·T = 1, 2, 3 rows, C = 12 or 20 (no multiple of a vector):
      {1, 13, 12, 1, 5},
      {2, 20, 20, 4, 7},
      {3, 11, 12, 2, 4}};
  Gemm gemm;
  for (const Shape& s : shapes) {
    const std::string what = describe(s);
    SCOPED_TRACE(what);
    const Problem p = make_problem(s.N, s.V, s.C, static_cast<uint32_t>(s.N * 131 + s.V));
    const Result fused = run_fused(p, s.rows, s.tile, gemm);
    expect_within(fused, reference(p, s.tile), "fused");
    expect_within(run_unfused(p, gemm), reference(p, p.V), "unfused");
    // Loss only (evaluation): the same tiles and kernels, the same bits.
    expect_loss_only_forward_matches(s, p.h.data(), p.W.data(), p, fused.losses, gemm);
  }
}

// accumulate_dW (the model's tied wte or lm_head gradient since zero_grad): dW gets the layer's
// gradient added to what it held, at every block height and tile width; dh is still written. The
// bound is the layer's plus the roundings of the sums that now start from the earlier gradient:
// one add per row block (ceil(N / rows) of them), each within u of the running sum, which is at most
// |dW0| + Σ_n |d_nv h_nc| (ref.dW_abs).
TEST(FusedUnembedding, AddsIntoAnEarlierWeightGradientWhenAccumulating) {
  const std::vector<Shape> shapes = {
      {37, 101, 24, 8, 16}, {5, 19, 8, 1, 1}, {9, 300, 20, 64, 17}, {3, 11, 12, 2, 4}};
  Gemm gemm;
  for (const Shape& s : shapes) {
    const std::string what = describe(s);
    SCOPED_TRACE(what);
    const Problem p = make_problem(s.N, s.V, s.C, static_cast<uint32_t>(s.N * 137 + s.V));
    std::vector<float> dW0(p.V * p.C);
    std::mt19937 rng(static_cast<uint32_t>(s.V));
    std::uniform_real_distribution<float> earlier(-0.05f, 0.05f);  // a gradient's size
    for (float& x : dW0) x = earlier(rng);
    const Result r = run_fused(p, s.rows, s.tile, gemm, &dW0);
    Reference want = reference(p, s.tile);
    const double blocks = static_cast<double>((s.N + s.rows - 1) / s.rows);
    for (size_t i = 0; i < want.dW.size(); ++i) {
      want.dW_tol[i] += (blocks + 1) * kU * (std::abs(dW0[i]) + want.dW_abs[i]);
      want.dW[i] += dW0[i];
    }
    expect_within(r, want, "fused, accumulating dW");
  }
}

// Same inputs, same thread count: the same bits, twice and for 1 and 2 threads alike in one
// process (each run on a fresh Gemm, as a Model created at that thread count would).
TEST(FusedUnembedding, DeterministicForAFixedThreadCount) {
  const Problem p = make_problem(70, 333, 48, 5);
  const int threads = omp_get_max_threads();
  for (int t : {1, 2}) {
    omp_set_num_threads(t);
    Gemm g1, g2;
    const Result a = run_fused(p, 16, 48, g1), b = run_fused(p, 16, 48, g1), c = run_fused(p, 16, 48, g2);
    for (const Result* r : {&b, &c}) {
      EXPECT_EQ(0, std::memcmp(a.losses.data(), r->losses.data(), a.losses.size() * 4)) << t;
      EXPECT_EQ(0, std::memcmp(a.dh.data(), r->dh.data(), a.dh.size() * 4)) << t;
      EXPECT_EQ(0, std::memcmp(a.dW.data(), r->dW.data(), a.dW.size() * 4)) << t;
    }
  }
  omp_set_num_threads(threads);
}

// ------------------------------------------------------------------------------------------------
// bf16 GEMMs (model.matmul_precision = bf16): both paths read h16 = bf16(h), W16 = bf16(W) and a
// bf16 copy of dlogits; accumulation, dlogits, dh and dW stay float32.
//
// The bound (stated here, held by both paths, so |fused - unfused| is at most twice it). The
// products of two bf16 are exact in float32, so the logits and the float32 dlogits obey the float32
// bound above for the problem (h16, W16) — reference(p16, tile). Rounding a dlogit d to bf16 (round
// to nearest even, 8 significant bits) moves it by at most u16 |d|, u16 = 2^-8, so for each path
//   |dh - dh_ref| <= (1 + u16)(1 + γ_V) · tol_f32(dh) + u16 (1 + γ_V) Σ_v (|d| + tol(d)) |W16|
// (likewise dW with h16, γ_N), and the losses keep the float32 bound. The two paths round the same
// float32 dlogits except where fused and unfused differ in float32, so they usually agree to far
// better than this: the test prints the worst |fused - unfused| relative to the bound.
struct Bf16Problem {
  Problem p16;                       // h, W rounded to bf16 (as floats): the reference's inputs
  std::vector<uint16_t> h16, W16;    // their bits: the GEMMs' operands
};

Bf16Problem make_bf16_problem(const Problem& p) {
  Bf16Problem b{p, std::vector<uint16_t>(p.h.size()), std::vector<uint16_t>(p.W.size())};
  for (size_t i = 0; i < p.h.size(); ++i) {
    b.h16[i] = ref::f32_to_bf16(p.h[i]);
    b.p16.h[i] = ref::bf16_to_f32(b.h16[i]);
  }
  for (size_t i = 0; i < p.W.size(); ++i) {
    b.W16[i] = ref::f32_to_bf16(p.W[i]);
    b.p16.W[i] = ref::bf16_to_f32(b.W16[i]);
  }
  return b;
}

Result run_fused_bf16(const Problem& p, const Bf16Problem& b, size_t rows, size_t tile, Gemm& gemm,
                      size_t threads = 1) {
  const UnembeddingTiles t{std::min(rows, p.N), std::min(tile, p.V), threads};
  std::vector<float> ws(unembedding_workspace_floats(t, p.V, p.C));
  std::vector<uint16_t> ws16(unembedding_workspace16_elems(t));
  Result r{std::vector<float>(p.N), std::vector<float>(p.N * p.C, NAN),
           std::vector<float>(p.V * p.C, NAN)};
  unembedding_loss_forward_backward(r.losses.data(), r.dh.data(), r.dW.data(),
                                    GemmInput(p.h.data(), b.h16.data()),
                                    GemmInput(p.W.data(), b.W16.data()), p.y.data(), p.N, p.V, p.C,
                                    1.0f / static_cast<float>(p.N), t, ws.data(), ws16.data(), gemm);
  return r;
}

// The unfused bf16 path, as Model runs it: logits from h16, W16; softmax_cross_entropy's dlogits16;
// dW = dlogits16ᵀ · h16, dh = dlogits16 · W16.
Result run_unfused_bf16(const Problem& p, const Bf16Problem& b, Gemm& gemm) {
  const auto n = static_cast<int64_t>(p.N), c = static_cast<int64_t>(p.C),
             v = static_cast<int64_t>(p.V);
  std::vector<float> logits(p.N * p.V);
  std::vector<uint16_t> dlogits16(p.N * p.V);
  Result r{std::vector<float>(p.N), std::vector<float>(p.N * p.C), std::vector<float>(p.V * p.C)};
  gemm.run(logits.data(), plain(n, v), as_bf16(b.h16.data(), plain(n, c)),
           as_bf16(b.W16.data(), transposed(v, c)));
  gemm.wait();
  softmax_cross_entropy(logits.data(), r.losses.data(), p.y.data(), p.N, p.V,
                        1.0f / static_cast<float>(p.N), dlogits16.data());
  gemm.run(r.dW.data(), plain(v, c), as_bf16(dlogits16.data(), transposed(n, v)),
           as_bf16(b.h16.data(), plain(n, c)));
  gemm.run(r.dh.data(), plain(n, c), as_bf16(dlogits16.data(), plain(n, v)),
           as_bf16(b.W16.data(), plain(v, c)));
  gemm.wait();
  return r;
}

Reference bf16_bound(Reference ref, size_t N, size_t V) {
  const double u16 = 0x1p-8, gV = gamma_k(static_cast<double>(V)), gN = gamma_k(static_cast<double>(N));
  for (size_t i = 0; i < ref.dh.size(); ++i)
    ref.dh_tol[i] = (1 + u16) * (1 + gV) * ref.dh_tol[i] + u16 * (1 + gV) * ref.dh_abs[i];
  for (size_t i = 0; i < ref.dW.size(); ++i)
    ref.dW_tol[i] = (1 + u16) * (1 + gN) * ref.dW_tol[i] + u16 * (1 + gN) * ref.dW_abs[i];
  return ref;
}

// max_i |a_i - b_i| / (2 tol_i): <= 1 means fused and unfused agree within twice the bound.
double worst_ratio(const std::vector<float>& a, const std::vector<float>& b,
                   const std::vector<double>& tol) {
  double w = 0;
  for (size_t i = 0; i < a.size(); ++i)
    w = std::max(w, std::abs(static_cast<double>(a[i]) - b[i]) / (2 * tol[i]));
  return w;
}

TEST(FusedUnembeddingBf16, FusedMatchesTheUnfusedBf16PathWithinTheBound) {
  if (!bf16_gemm_support().native)
    GTEST_SKIP() << "oneDNN has no native bf16 matmul on this CPU (" << bf16_gemm_support().bf16_impl
                 << "): this test runs bf16 GEMMs directly";
  const std::vector<Shape> shapes = {{37, 101, 24, 8, 16}, {5, 19, 8, 1, 1},     {7, 45, 16, 1, 64},
                                     {50, 257, 32, 3, 32}, {64, 1000, 48, 16, 96}};
  Gemm gemm;
  for (const Shape& s : shapes) {
    const std::string what = describe(s);
    SCOPED_TRACE(what);
    const Problem p = make_problem(s.N, s.V, s.C, static_cast<uint32_t>(s.N * 17 + s.V));
    const Bf16Problem b = make_bf16_problem(p);
    const Result fused = run_fused_bf16(p, b, s.rows, s.tile, gemm);
    const Result unfused = run_unfused_bf16(p, b, gemm);
    const Reference bf = bf16_bound(reference(b.p16, s.tile), s.N, s.V);
    const Reference bu = bf16_bound(reference(b.p16, s.V), s.N, s.V);
    expect_within(fused, bf, "fused bf16");
    expect_within(unfused, bu, "unfused bf16");
    std::vector<double> dh_tol(s.N * s.C), dW_tol(s.V * s.C);
    for (size_t i = 0; i < dh_tol.size(); ++i) dh_tol[i] = std::max(bf.dh_tol[i], bu.dh_tol[i]);
    for (size_t i = 0; i < dW_tol.size(); ++i) dW_tol[i] = std::max(bf.dW_tol[i], bu.dW_tol[i]);
    const double rh = worst_ratio(fused.dh, unfused.dh, dh_tol);
    const double rw = worst_ratio(fused.dW, unfused.dW, dW_tol);
    EXPECT_LE(rh, 1.0);
    EXPECT_LE(rw, 1.0);
    std::printf("%s: worst |fused - unfused| / (2 bound): dh %.3g, dW %.3g\n", what.c_str(), rh, rw);
    // The bf16 GEMMs really ran: the float32 fused path on the unrounded inputs differs.
    const Result f32 = run_fused(p, s.rows, s.tile, gemm);
    EXPECT_NE(0, std::memcmp(f32.dW.data(), fused.dW.data(), f32.dW.size() * sizeof(float)));
    // The loss-only forward with bf16 operands gives the same losses bit for bit.
    expect_loss_only_forward_matches(s, GemmInput(p.h.data(), b.h16.data()),
                                     GemmInput(p.W.data(), b.W16.data()), p, fused.losses, gemm);
  }
}

// The vocabulary split among 2 and 3 threads (UnembeddingTiles::threads, Gemm::worker), f32 and
// bf16, forward and backward and forward only, against the double reference within the layer's
// bound (the merge of the groups' statistics is one more rescale per group, as a tile's is), at
// awkward sizes: V not a multiple of the tile, N not a multiple of the rows, fewer tiles than
// threads, one tile per thread, one-id tiles, an earlier dW to add to. The same bits twice, on the
// same and on a fresh Gemm (whichever thread runs a group); the loss-only forward gives the same
// losses bit for bit; the caller's thread count is unchanged afterwards.
TEST(FusedUnembedding, SplitAmongThreadsMatchesTheDoubleReference) {
  const std::vector<Shape> shapes = {
      {37, 101, 24, 8, 16},  // 7 tiles, the last 5 wide: fewer than 4 groups per thread
      {13, 40, 12, 5, 16},   // 3 tiles: one per thread at 3 threads
      {9, 20, 8, 4, 16},     // 2 tiles: fewer than 3 threads
      {5, 19, 8, 1, 1},      // one-id tiles, one-row blocks
      {70, 333, 48, 16, 48},
      // GEMMs large enough that oneDNN would split each one over the threads
      {100, 1500, 256, 64, 256}};
  const int before = omp_get_max_threads();
  for (const int threads : {2, 3}) {
    omp_set_num_threads(threads);
    const auto P = static_cast<size_t>(threads);
    for (const Shape& s : shapes) {
      const std::string what = describe(s) + " threads=" + std::to_string(threads);
      SCOPED_TRACE(what);
      const Problem p = make_problem(s.N, s.V, s.C, static_cast<uint32_t>(s.N * 131 + s.V));
      Gemm gemm, fresh;
      const Result a = run_fused(p, s.rows, s.tile, gemm, nullptr, P);
      EXPECT_EQ(omp_get_max_threads(), threads) << "the caller's thread count is kept";
      expect_within(a, reference(p, s.tile), "fused, split");
      for (const Result& b : {run_fused(p, s.rows, s.tile, gemm, nullptr, P),
                              run_fused(p, s.rows, s.tile, fresh, nullptr, P)}) {
        EXPECT_EQ(0, std::memcmp(a.losses.data(), b.losses.data(), a.losses.size() * 4));
        EXPECT_EQ(0, std::memcmp(a.dh.data(), b.dh.data(), a.dh.size() * 4));
        EXPECT_EQ(0, std::memcmp(a.dW.data(), b.dW.data(), a.dW.size() * 4));
      }
      expect_loss_only_forward_matches(s, p.h.data(), p.W.data(), p, a.losses, gemm, P);
      // Adding into an earlier dW (the bound of AddsIntoAnEarlierWeightGradientWhenAccumulating).
      std::vector<float> dW0(p.V * p.C, 0.03f);
      const Result acc = run_fused(p, s.rows, s.tile, gemm, &dW0, P);
      Reference want = reference(p, s.tile);
      const double blocks = static_cast<double>((s.N + s.rows - 1) / s.rows);
      for (size_t i = 0; i < want.dW.size(); ++i) {
        want.dW_tol[i] += (blocks + 1) * kU * (std::abs(dW0[i]) + want.dW_abs[i]);
        want.dW[i] += dW0[i];
      }
      expect_within(acc, want, "fused, split, accumulating dW");
      if (!bf16_gemm_support().native) continue;
      const Bf16Problem b = make_bf16_problem(p);
      const Result f16 = run_fused_bf16(p, b, s.rows, s.tile, gemm, P);
      expect_within(f16, bf16_bound(reference(b.p16, s.tile), s.N, s.V), "fused bf16, split");
      const Result again = run_fused_bf16(p, b, s.rows, s.tile, fresh, P);
      EXPECT_EQ(0, std::memcmp(f16.dh.data(), again.dh.data(), f16.dh.size() * 4));
      EXPECT_EQ(0, std::memcmp(f16.dW.data(), again.dW.data(), f16.dW.size() * 4));
      expect_loss_only_forward_matches(s, GemmInput(p.h.data(), b.h16.data()),
                                       GemmInput(p.W.data(), b.W16.data()), p, f16.losses, gemm, P);
    }
  }
  omp_set_num_threads(before);
}

TEST(FusedUnembeddingBf16, MixedOperandsAndAMissingWorkspaceAreRefused) {
  const Problem p = make_problem(4, 10, 8, 1);
  const Bf16Problem b = make_bf16_problem(p);
  const UnembeddingTiles t{2, 4};
  std::vector<float> ws(unembedding_workspace_floats(t, p.V, p.C)), losses(4), dh(32), dW(80);
  Gemm gemm;
  EXPECT_THROW(unembedding_loss_forward_backward(losses.data(), dh.data(), dW.data(),
                                                 GemmInput(p.h.data(), b.h16.data()), p.W.data(),
                                                 p.y.data(), 4, 10, 8, 0.25f, t, ws.data(),
                                                 nullptr, gemm),
               Error);
  EXPECT_THROW(unembedding_loss_forward_backward(losses.data(), dh.data(), dW.data(),
                                                 GemmInput(p.h.data(), b.h16.data()),
                                                 GemmInput(p.W.data(), b.W16.data()), p.y.data(),
                                                 4, 10, 8, 0.25f, t, ws.data(), nullptr, gemm),
               Error);
}

TEST(FusedUnembedding, TilesAreResolvedFromTheConfig) {
  ModelConfig c;
  c.vocab_size = 8192;
  EXPECT_FALSE(resolve_loss_tiles(c, 2048).fused()) << "automatic: small vocabularies stay unfused";
  c.vocab_size = 50257;
  const UnembeddingTiles a = resolve_loss_tiles(c, 8192);
  EXPECT_TRUE(a.fused());
  EXPECT_EQ(a.rows % 16, 0u);
  EXPECT_EQ(a.rows, 256u) << "the measured best block height (README)";
  EXPECT_LE(a.rows * c.vocab_size * 4, size_t{64} << 20) << "at most 64 MiB of logits per block";
  ModelConfig big = c;
  big.vocab_size = 200000;  // 64 MiB / (4 bytes × 200000) = 83.9: 80 rows
  EXPECT_EQ(resolve_loss_tiles(big, 8192).rows, 80u) << "a larger vocabulary gets fewer rows";
  big.vocab_size = 1000000;  // 16.8 rows: the floor of 32
  EXPECT_EQ(resolve_loss_tiles(big, 8192).rows, 32u);
  EXPECT_LE(a.rows * a.tile * 4, size_t{512} << 10) << "a tile fits in L2";
  c.loss_chunk = 7;
  c.loss_vocab_tile = 100;
  const UnembeddingTiles b = resolve_loss_tiles(c, 3);
  EXPECT_EQ(b.rows, 3u) << "rows are capped at the batch";
  EXPECT_EQ(b.tile, 100u);
  EXPECT_EQ(b.threads, static_cast<size_t>(omp_get_max_threads())) << "room for every thread";
  EXPECT_EQ(unembedding_workspace_floats({3, 100, 1}, c.vocab_size, 768), 3 * 50257 + 9);
  // two threads: 8 groups' statistics (3 x 3 each) and 7 partial dh (3 x 768 each)
  EXPECT_EQ(unembedding_workspace_floats({3, 100, 2}, c.vocab_size, 768),
            3 * 50257 + 8 * 9 + 7 * 3 * 768);
  EXPECT_EQ(unembedding_workspace16_elems({3, 100, 2}), 2 * 3 * 100u);
}

// ------------------------------------------------------------------------------------------------
// Inside the Model.

ModelConfig config(size_t V, size_t C, size_t n_layer, bool ln_f, bool tied, size_t chunk,
                   size_t tile) {
  return {.vocab_size = V, .d_model = C, .n_ctx = 12, .n_layer = n_layer, .n_head = 2,
          .ln_f = ln_f, .tie_embeddings = tied, .loss_chunk = chunk, .loss_vocab_tile = tile};
}

// Every tensor from its own generator, seeded by `seed` and the tensor's name: the values do not
// depend on where the tensor sits in the arena.
void set_random_params(Model* model, uint64_t seed) {
  const size_t C = model->config().d_model;
  for (const TensorSpec& t : model->tensors()) {
    uint64_t name_hash = 1469598103934665603ull;  // FNV-1a 64 of the name
    for (const char ch : t.name) name_hash = (name_hash ^ static_cast<uint8_t>(ch)) * 1099511628211ull;
    Rng rng(seed ^ name_hash);
    float* p = model->param_data() + t.offset;
    const bool gain = t.name.size() > 2 && t.name.compare(t.name.size() - 2, 2, "/g") == 0;
    for (size_t i = 0; i < t.size; ++i) {
      const double u = 2.0 * rng.uniform() - 1.0;
      p[i] = static_cast<float>(gain ? 1.0 + 0.3 * u : 1.5 * u / std::sqrt(static_cast<double>(C)));
    }
  }
}

struct ModelCase {
  const char* label;
  size_t V, C, n_layer;
  bool ln_f, tied;
  size_t chunk, tile, B, T;
};

class FusedModel : public ::testing::TestWithParam<ModelCase> {};

// gradcheck's float-vs-reference comparison (loss, logits, residuals, every gradient tensor; bound
// max|f32 - ref| <= 1e-5 + 1e-4·max|ref| per tensor) on a model whose training forward runs fused.
TEST_P(FusedModel, LossAndEveryGradientMatchTheDoubleReference) {
  const ModelCase& tc = GetParam();
  Model model(config(tc.V, tc.C, tc.n_layer, tc.ln_f, tc.tied, tc.chunk, tc.tile));
  set_random_params(&model, tc.V + tc.C);
  model.reserve(tc.B, tc.T);
  ASSERT_EQ(model.loss_rows(), std::min(tc.chunk, tc.B * tc.T)) << "the fused path is in use";
  const UnembeddingTiles tiles{model.loss_rows(), std::min(tc.tile, tc.V),
                               static_cast<size_t>(omp_get_max_threads())};
  ASSERT_EQ(model.loss_workspace_bytes(), unembedding_workspace_floats(tiles, tc.V, tc.C) * 4);
  Rng rng(tc.B * 7 + tc.T);
  TokenBatch batch;
  batch.B = tc.B;
  batch.T = tc.T;
  for (size_t i = 0; i < tc.B * tc.T; ++i) {
    batch.inputs.push_back(static_cast<int32_t>(rng.below(tc.V)));
    batch.targets.push_back(static_cast<int32_t>(rng.below(tc.V)));
  }
  for (const CheckLine& l : compare_float_model(model, batch, GradcheckOptions{}))
    EXPECT_TRUE(l.ok()) << format_check_line(l);

  // The same model unfused: loss and every gradient within twice that bound of the fused one.
  Model unfused(config(tc.V, tc.C, tc.n_layer, tc.ln_f, tc.tied, 0, 0));
  std::memcpy(unfused.param_data(), model.param_data(), model.num_parameters() * sizeof(float));
  unfused.reserve(tc.B, tc.T);
  ASSERT_EQ(unfused.loss_rows(), 0u);
  model.zero_grad();  // compare_float_model's backward added its gradient: start again
  const float lf = model.forward(batch.inputs.data(), batch.targets.data(), tc.B, tc.T);
  model.backward();
  const float lu = unfused.forward(batch.inputs.data(), batch.targets.data(), tc.B, tc.T);
  unfused.backward();
  EXPECT_NEAR(lf, lu, 2 * (1e-5 + 1e-4 * std::abs(lu)));
  for (const TensorSpec& t : model.tensors()) {
    if (t.sparse_grad) continue;  // untied wte: rows, compared below
    double max_diff = 0, max_ref = 0;
    for (size_t i = 0; i < t.size; ++i) {
      max_diff = std::max(max_diff, std::abs(double(model.grad_data()[t.offset + i]) -
                                             unfused.grad_data()[t.offset + i]));
      max_ref = std::max(max_ref, std::abs(double(unfused.grad_data()[t.offset + i])));
    }
    EXPECT_LE(max_diff, 2 * (1e-5 + 1e-4 * max_ref)) << t.name;
  }
  if (!tc.tied) {
    const SparseRowGrad a = model.wte_grad_rows(), b = unfused.wte_grad_rows();
    ASSERT_EQ(a.count, b.count);
    for (size_t i = 0; i < a.count * a.C; ++i)
      EXPECT_NEAR(a.rows[i], b.rows[i], 2 * (1e-5 + 1e-4 * std::abs(b.rows[i])));
  }
  // Evaluation losses: the fused loss-only forward equals the training forward's losses' mean.
  std::vector<float> losses(tc.B * tc.T);
  model.forward_losses(batch.inputs.data(), batch.targets.data(), tc.B, tc.T, losses.data());
  double mean = 0;
  for (float l : losses) mean += l;
  EXPECT_EQ(static_cast<float>(mean / static_cast<double>(losses.size())), lf);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, FusedModel,
    ::testing::Values(ModelCase{"L0_tied_lnf_rows1_tile1", 37, 16, 0, true, true, 1, 1, 2, 5},
                      ModelCase{"L0_untied_lnf_rows4_tile10", 61, 12, 0, true, false, 4, 10, 3, 7},
                      ModelCase{"L2_tied_lnf_rows5_tile16", 53, 16, 2, true, true, 5, 16, 2, 9},
                      ModelCase{"L2_untied_nolnf_rows3_tile7", 29, 8, 2, false, false, 3, 7, 3, 4},
                      ModelCase{"L1_tied_nolnf_rowsN_tileV", 41, 12, 1, false, true, 100, 100, 2,
                                6}),
    [](const ::testing::TestParamInfo<ModelCase>& info) { return info.param.label; });

// forward_logits still works under the fused loss (its own (N, V) buffer), and the losses it
// returns agree with the fused ones within the layer's bound.
TEST(FusedModelLogits, ForwardLogitsWorksUnderTheFusedLoss) {
  Model model(config(67, 16, 1, true, true, 4, 9));
  set_random_params(&model, 3);
  const size_t B = 2, T = 6;
  std::vector<int32_t> x(B * T), y(B * T);
  for (size_t i = 0; i < B * T; ++i) {
    x[i] = static_cast<int32_t>((i * 13) % 67);
    y[i] = static_cast<int32_t>((i * 29 + 5) % 67);
  }
  std::vector<float> from_logits(B * T), fused(B * T);
  const float* logits = model.forward_logits(x.data(), B, T, y.data(), from_logits.data());
  ASSERT_NE(logits, nullptr);
  EXPECT_TRUE(std::isfinite(logits[B * T * 67 - 1]));
  model.forward_losses(x.data(), y.data(), B, T, fused.data());
  for (size_t i = 0; i < B * T; ++i) EXPECT_NEAR(fused[i], from_logits[i], 1e-5) << i;
}

// The fused loss under model.matmul_precision = bf16, inside the Model: the same model unfused (also
// bf16) gives the loss within the float32 bound (the logits GEMMs read the same h16 and lm_head16, so
// only float32 summation order differs: 1e-5 relative) and every gradient within relative L2 0.02 per
// tensor. Why 0.02: the unembedding's dh' and dlm_head differ by at most 2 u16 = 2^-7 relative
// (the layer bound above: the two paths may round a dlogit to neighbouring bf16 values); each of the
// blocks' backward GEMMs then rounds its input to bf16 again (u16 = 2^-8 each), and two blocks' four
// GEMMs on the longest path add at most ~4 u16: 2^-7 + 4·2^-8 ≈ 0.023 in the worst case, 0.02 with
// errors that do not all align (the test prints the worst measured; typically ~10x below).
TEST(FusedModelBf16, FusedMatchesUnfusedUnderBf16Gemms) {
  if (!bf16_gemm_support().native)
    GTEST_SKIP() << "oneDNN has no native bf16 matmul on this CPU (" << bf16_gemm_support().bf16_impl
                 << "): the model runs float32 GEMMs";
  for (const bool tied : {true, false}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    ModelConfig fc = config(211, 32, 2, true, tied, 5, 48), uc = config(211, 32, 2, true, tied, 0, 0);
    fc.matmul_precision = uc.matmul_precision = MatmulPrecision::bf16;
    Model fused(fc), unfused(uc);
    ASSERT_EQ(fused.gemm_precision(), MatmulPrecision::bf16);
    set_random_params(&fused, 17);
    std::memcpy(unfused.param_data(), fused.param_data(), fused.num_parameters() * sizeof(float));
    const size_t B = 3, T = 11;
    Rng rng(5);
    const auto [x, y] = test::random_batch(B * T, 211, &rng);
    const float lf = fused.forward(x.data(), y.data(), B, T);
    fused.backward();
    ASSERT_EQ(fused.loss_rows(), 5u) << "the fused path is in use";
    const float lu = unfused.forward(x.data(), y.data(), B, T);
    unfused.backward();
    ASSERT_EQ(unfused.loss_rows(), 0u);
    EXPECT_NEAR(lf, lu, 1e-5 * std::abs(lu));
    // The bf16 workspace is one dlogits tile, not (N, V).
    const size_t threads = static_cast<size_t>(omp_get_max_threads());
    EXPECT_EQ(fused.loss_workspace_bytes(),
              unembedding_workspace_floats({5, 48, threads}, 211, 32) * 4 + threads * 5 * 48 * 2);
    double worst = 0;
    std::string worst_name;
    auto check = [&](const std::string& name, const float* a, const float* b, size_t n) {
      double d = 0, nb = 0;
      for (size_t i = 0; i < n; ++i) {
        d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
        nb += double(b[i]) * b[i];
      }
      const double e = nb == 0 ? std::sqrt(d) : std::sqrt(d / nb);
      EXPECT_LE(e, 0.02) << name;
      if (e > worst) {
        worst = e;
        worst_name = name;
      }
    };
    for (const TensorSpec& t : fused.tensors())
      if (!t.sparse_grad)
        check(t.name, fused.grad_data() + t.offset, unfused.grad_data() + t.offset, t.size);
    if (!tied) {
      const SparseRowGrad a = fused.wte_grad_rows(), b = unfused.wte_grad_rows();
      ASSERT_EQ(a.count, b.count);
      check("wte rows", a.rows, b.rows, a.count * a.C);
    }
    std::printf("%s: loss fused %.7f unfused %.7f; worst gradient %s: relative L2 %.4g\n",
                tied ? "tied" : "untied", lf, lu, worst_name.c_str(), worst);
    // The fused path really read bf16: the float32 fused model's dlm_head is far further away.
    ModelConfig f32c = fc;
    f32c.matmul_precision = MatmulPrecision::f32;
    Model f32(f32c);
    std::memcpy(f32.param_data(), fused.param_data(), fused.num_parameters() * sizeof(float));
    f32.forward(x.data(), y.data(), B, T);
    f32.backward();
    const TensorSpec& head = *std::find_if(
        fused.tensors().begin(), fused.tensors().end(),
        [&](const TensorSpec& t) { return t.name == (tied ? "wte" : "lm_head"); });
    ASSERT_EQ(head.name, tied ? "wte" : "lm_head");
    auto rel = [&](const float* a, const float* b) {
      double d = 0, nb = 0;
      for (size_t i = 0; i < head.size; ++i) {
        d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
        nb += double(b[i]) * b[i];
      }
      return std::sqrt(d / nb);
    };
    const double to_unfused = rel(fused.grad_data() + head.offset, unfused.grad_data() + head.offset);
    const double to_f32 = rel(fused.grad_data() + head.offset, f32.grad_data() + head.offset);
    EXPECT_GT(to_f32, 10 * to_unfused) << "bf16 fused vs f32 fused " << to_f32
                                       << ", vs bf16 unfused " << to_unfused;
  }
}

}  // namespace
}  // namespace wte
