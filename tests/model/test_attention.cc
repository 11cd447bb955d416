// The float32 causal multi-head attention layer (src/model/attention.h: attention_forward,
// attention_backward; oneDNN's batched GEMMs over strided head views and the causal softmax kernel
// of simd/attention.cc) against the double reference (src/reference/model.h: ref::attention_forward,
// ref::attention_backward) on the same float inputs, at tiny, awkward shapes: T = 1, 2, 3, 5, 7;
// B = 1 and 2; C = 12 and 20 (not multiples of any vector width) with 1 to 4 heads of hs = 3 to 20
// channels. And at T = 17, 33, 70: the softmax kernels (simd/attention.cc) handle a row's live
// entries as full vectors (4, 8 or 16 floats) and then a tail, so rows longer than a vector run
// the vector body too, with tails of every length; at T <= 7 only the tail runs. Each test runs
// on every Highway target compiled in (one instance per target), so the kernels split rows at
// every vector width.
//
// The bound, per entry, from the layer's operations (u = 2^-24; γ_K = K·u / (1 - K·u), the
// worst-case relative error of a float sum of K products in any order: Higham §3.1, so it holds for
// any blocking oneDNN picks). For one batch row b, head h and query row t (len = t + 1 live keys),
// scale = 1/√hs:
//   forward
//     p_j = q_t·k_j (GEMM, hs terms):          |Δp_j| <= γ_hs · Σ_d |q_td k_jd|
//     z_j = scale·p_j, scale rounded in float (2 roundings):  ε = max_j scale·|Δp_j| + 2u·|z_j|
//     att_j = softmax_j(z): a shift of every z_j by at most ε moves att_j by at most
//       att_j·(e^{2ε} - 1); the kernel's own roundings add ρ_j + max_k ρ_k + (len + 1)·u relative,
//       ρ_j = u·(|z_j| + |z_j - max z|) + 2u (tests/simd/test_block_kernels.cc derives it):
//       rel_j = (e^{2ε} - 1) + ρ_j + max_k ρ_k + (len + 1)·u,   |Δatt_j| <= rel_j·att_j
//     y_td = Σ_j att_j v_jd (GEMM, T terms, masked ones exact zeros):
//       |Δy_td| <= Σ_j rel_j·att_j·|v_jd| + γ_T · Σ_j att_j·|v_jd|
//   backward (att is an input: both sides read the float forward's att)
//     datt_tj = dy_t·v_j (GEMM, hs terms):     E_tj = γ_hs · Σ_d |dy_td v_jd|
//     dv_jd = Σ_t att_tj dy_td (GEMM, T terms): γ_T · Σ_t |att_tj dy_td|
//     dp_tj = scale·att_tj·(datt_tj - Σ_k att_tk datt_tk) (softmax backward kernel): its own bound
//       scale·att_tj·(e_dot + u·|datt_tj - dot_t|) + 2u·|dp_tj|, e_dot = (len + 1)·u·Σ_k |att_tk datt_tk|,
//       plus the propagated datt error scale·att_tj·(E_tj + Σ_k att_tk E_tk), plus 2u·|dp_tj| for
//       scale's rounding:  D_tj
//     dq_td = Σ_j dp_tj k_jd (GEMM, T terms):  Σ_j D_tj |k_jd| + γ_T · Σ_j |dp_tj k_jd|
//     dk_jd = Σ_t dp_tj q_td (GEMM, T terms):  Σ_t D_tj |q_td| + γ_T · Σ_t |dp_tj q_td|
// Each bound is first order in u; kSecondOrder (1.01) covers the rest, and 1e-30 entries whose
// terms all vanish. A dropped term or a flipped sign moves entries by about their own size.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "src/model/attention.h"
#include "src/model/matmul.h"
#include "src/reference/model.h"
#include "tests/model_test_util.h"
#include "tests/simd_test_util.h"
#include "wte/rng.h"

namespace wte {
namespace {

constexpr double kU = 0x1p-24;
constexpr double kSecondOrder = 1.01;
constexpr double kTiny = 1e-30;
double gamma_k(size_t K) { return K * kU / (1 - K * kU); }

// Expects |got[i] - want[i]| <= tol[i] (got finite) for every i; names the first entries outside.
void expect_within(const std::vector<float>& got, const std::vector<double>& want,
                   const std::vector<double>& tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t outside = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!std::isfinite(got[i]) || !(err <= kSecondOrder * tol[i] + kTiny)) {
      if (++outside <= 3)
        ADD_FAILURE() << what << "[" << i << "]: float " << got[i] << ", double " << want[i]
                      << ", |diff| " << err << " > bound " << kSecondOrder * tol[i] + kTiny;
    }
  }
  EXPECT_EQ(outside, 0u) << what << ": entries outside the bound";
}

struct AttentionShape {
  size_t B, T, C, NH;
};

std::vector<AttentionShape> awkward_shapes() {
  std::vector<AttentionShape> shapes;
  for (size_t T : {1, 2, 3, 5, 7})
    for (auto [C, NH] : {std::pair<size_t, size_t>{12, 3}, {20, 4}, {20, 2}, {12, 1}})
      shapes.push_back({T == 5 ? size_t{1} : size_t{2}, T, C, NH});
  // Rows longer than a vector: the softmax kernels' vector body and every tail length.
  for (size_t T : {17, 33, 70})
    for (auto [C, NH] : {std::pair<size_t, size_t>{20, 2}, {12, 3}})
      shapes.push_back({T == 70 ? size_t{1} : size_t{2}, T, C, NH});
  return shapes;
}

std::string describe(const AttentionShape& s) {
  return "B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) + " C=" + std::to_string(s.C) +
         " NH=" + std::to_string(s.NH);
}

// Index helpers for qkv (B,T,3C): q, k, v of head h at time t, channel d.
struct Qkv {
  const std::vector<double>& x;
  size_t T, C, hs;
  double q(size_t b, size_t t, size_t h, size_t d) const { return x[(b * T + t) * 3 * C + h * hs + d]; }
  double k(size_t b, size_t t, size_t h, size_t d) const { return x[(b * T + t) * 3 * C + C + h * hs + d]; }
  double v(size_t b, size_t t, size_t h, size_t d) const { return x[(b * T + t) * 3 * C + 2 * C + h * hs + d]; }
};

// Random qkv of unit scale: scores q·k/√hs of order 1, so attention spreads over the keys.
std::vector<float> random_qkv(size_t B, size_t T, size_t C, Rng* rng) {
  std::vector<float> qkv(B * T * 3 * C);
  test::fill_uniform(&qkv, rng, 1.5);
  return qkv;
}

// Forces one Highway target (the softmax kernels') per instance; resets it afterwards.
class AttentionTest : public test::TargetTest {};

TEST_P(AttentionTest, ForwardWithinBoundOfDoubleReferenceAtAwkwardShapes) {
  Gemm gemm;
  Rng rng(21);
  for (const AttentionShape& s : awkward_shapes()) {
    const size_t B = s.B, T = s.T, C = s.C, NH = s.NH, hs = C / NH;
    const std::string where = target() + " " + describe(s);
    const std::vector<float> qkv = random_qkv(B, T, C, &rng);
    std::vector<float> out(B * T * C, -7.0f), att(B * NH * T * T, -7.0f);
    attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH, gemm);

    const std::vector<double> x(qkv.begin(), qkv.end());
    std::vector<double> want(B * T * C), preatt(B * NH * T * T), want_att(B * NH * T * T);
    ref::attention_forward(want.data(), preatt.data(), want_att.data(), x.data(), B, T, C, NH);
    const Qkv in{x, T, C, hs};
    const double scale = 1 / std::sqrt(static_cast<double>(hs));
    std::vector<double> tol_att(B * NH * T * T, 0.0), tol_out(B * T * C, 0.0);
    for (size_t b = 0; b < B; ++b)
      for (size_t h = 0; h < NH; ++h)
        for (size_t t = 0; t < T; ++t) {
          const size_t row = ((b * NH + h) * T + t) * T, len = t + 1;
          double eps = 0, zmax = -INFINITY;
          for (size_t j = 0; j < len; ++j) {
            double P = 0;
            for (size_t d = 0; d < hs; ++d) P += std::fabs(in.q(b, t, h, d) * in.k(b, j, h, d));
            const double z = scale * preatt[row + j];
            eps = std::max(eps, scale * gamma_k(hs) * P + 2 * kU * std::fabs(z));
            zmax = std::max(zmax, z);
          }
          std::vector<double> rho(len);
          double rho_max = 0;
          for (size_t j = 0; j < len; ++j) {
            const double z = scale * preatt[row + j];
            rho[j] = kU * (std::fabs(z) + std::fabs(z - zmax)) + 2 * kU;
            rho_max = std::max(rho_max, rho[j]);
          }
          for (size_t j = 0; j < len; ++j) {
            const double rel = std::expm1(2 * eps) + rho[j] + rho_max + (len + 1) * kU;
            tol_att[row + j] = rel * want_att[row + j];
            for (size_t d = 0; d < hs; ++d)
              tol_out[(b * T + t) * C + h * hs + d] +=
                  (rel + gamma_k(T)) * want_att[row + j] * std::fabs(in.v(b, j, h, d));
          }
        }
    expect_within(att, want_att, tol_att, where + " att");
    expect_within(out, want, tol_out, where + " out");
  }
}

TEST_P(AttentionTest, BackwardWithinBoundOfDoubleReferenceAtAwkwardShapes) {
  Gemm gemm;
  Rng rng(22);
  for (const AttentionShape& s : awkward_shapes()) {
    const size_t B = s.B, T = s.T, C = s.C, NH = s.NH, hs = C / NH;
    const std::string where = target() + " " + describe(s);
    const std::vector<float> qkv = random_qkv(B, T, C, &rng);
    std::vector<float> out(B * T * C), att(B * NH * T * T), dout(B * T * C);
    attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH, gemm);
    test::fill_uniform(&dout, &rng, 1.0);
    // Stale values in dqkv: the layer writes (=) every entry of it; datt is scratch.
    std::vector<float> dqkv(B * T * 3 * C, -7.0f), datt(B * NH * T * T, -7.0f);
    attention_backward(dqkv.data(), datt.data(), dout.data(), qkv.data(), att.data(), B, T, C, NH,
                       gemm);

    const std::vector<double> x(qkv.begin(), qkv.end()), a(att.begin(), att.end()),
        dy(dout.begin(), dout.end());
    std::vector<double> want(B * T * 3 * C, 0.0);
    ref::attention_backward(want.data(), dy.data(), x.data(), a.data(), B, T, C, NH);
    const Qkv in{x, T, C, hs};
    const double scale = 1 / std::sqrt(static_cast<double>(hs));
    std::vector<double> tol(B * T * 3 * C, 0.0);
    auto tol_q = [&](size_t b, size_t t, size_t h, size_t d) -> double& {
      return tol[(b * T + t) * 3 * C + h * hs + d];
    };
    auto tol_k = [&](size_t b, size_t t, size_t h, size_t d) -> double& {
      return tol[(b * T + t) * 3 * C + C + h * hs + d];
    };
    auto tol_v = [&](size_t b, size_t t, size_t h, size_t d) -> double& {
      return tol[(b * T + t) * 3 * C + 2 * C + h * hs + d];
    };
    for (size_t b = 0; b < B; ++b)
      for (size_t h = 0; h < NH; ++h)
        for (size_t t = 0; t < T; ++t) {
          const size_t row = ((b * NH + h) * T + t) * T, len = t + 1;
          auto dyv = [&](size_t d) { return dy[(b * T + t) * C + h * hs + d]; };
          // datt_tj, its GEMM error E_tj, and the row's dot Σ_k att·datt.
          std::vector<double> da(len), E(len), dp(len), D(len);
          double dot = 0, sum_abs = 0, sum_aE = 0;
          for (size_t j = 0; j < len; ++j) {
            double e = 0;
            da[j] = 0;
            for (size_t d = 0; d < hs; ++d) {
              da[j] += dyv(d) * in.v(b, j, h, d);
              e += std::fabs(dyv(d) * in.v(b, j, h, d));
              tol_v(b, j, h, d) += gamma_k(T) * std::fabs(a[row + j] * dyv(d));
            }
            E[j] = gamma_k(hs) * e;
            dot += a[row + j] * da[j];
            sum_abs += std::fabs(a[row + j] * da[j]);
            sum_aE += a[row + j] * E[j];
          }
          const double e_dot = (len + 1) * kU * sum_abs;
          for (size_t j = 0; j < len; ++j) {
            dp[j] = scale * a[row + j] * (da[j] - dot);
            D[j] = scale * a[row + j] * (E[j] + sum_aE + e_dot + kU * std::fabs(da[j] - dot)) +
                   4 * kU * std::fabs(dp[j]);
            for (size_t d = 0; d < hs; ++d) {
              tol_q(b, t, h, d) += D[j] * std::fabs(in.k(b, j, h, d)) +
                                   gamma_k(T) * std::fabs(dp[j] * in.k(b, j, h, d));
              tol_k(b, j, h, d) += D[j] * std::fabs(in.q(b, t, h, d)) +
                                   gamma_k(T) * std::fabs(dp[j] * in.q(b, t, h, d));
            }
          }
        }
    expect_within(dqkv, want, tol, where + " dqkv");
  }
}

WTE_INSTANTIATE_ON_EVERY_TARGET(AttentionTest);

}  // namespace
}  // namespace wte
