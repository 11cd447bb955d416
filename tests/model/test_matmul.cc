// The float32 linear layer (src/model/matmul.h: matmul_forward, matmul_backward, GPT-2's conv1d
// y = x · w + b with w stored (in, out)) against the double reference (src/reference/model.h:
// ref::linear_forward, ref::linear_backward) on the same float inputs, at tiny, awkward shapes:
// N = 1, 2, 3, 5, 7 rows; C and OC not multiples of any vector width (5, 12, 20, 36, 80).
//
// The bound, per entry (u = 2^-24; γ_K = K·u / (1 - K·u), the worst-case relative error of a float
// sum of K products in any order, with or without FMA: Higham, Accuracy and Stability of Numerical
// Algorithms, §3.1; so it holds for any blocking oneDNN picks). The inputs are floats on both sides,
// so only the layer's own roundings count:
//   out[n,o]   = Σ_c x[n,c]·w[c,o] + b[o]        C + 1 terms:  γ_{C+1} · (Σ_c |x[n,c]·w[c,o]| + |b[o]|)
//   dinp[n,c]  = Σ_o dout[n,o]·w[c,o]            OC terms:     γ_OC · Σ_o |dout[n,o]·w[c,o]|
//   dw[c,o]    = Σ_n x[n,c]·dout[n,o]            N terms:      γ_N · Σ_n |x[n,c]·dout[n,o]|
//   db[o]      = Σ_n dout[n,o]                   N terms:      γ_N · Σ_n |dout[n,o]|
// plus 1e-40 for entries whose terms all vanish. The double reference's own error (2^-53 relative)
// is far below. A wrong term, a sign or a dropped row moves an entry by about its own size: the
// bound is ~K·6e-8 of it.
//
// The backward's contract on its outputs (src/model/matmul.h): dweight and dbias accumulate (+=,
// the model zeroes them once per step, so gradient accumulation and a tied wte's two terms add up),
// dinp is written (=). Checked exactly on inputs in multiples of 1/8 with small numerators: every
// product and every partial sum is then a float, so the results equal the double reference bit for
// bit whatever the GEMM's order, and a gradient that overwrites, subtracts or reads stale input
// values differs by a whole term.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "src/model/matmul.h"
#include "src/reference/model.h"
#include "tests/model_test_util.h"
#include "tests/simd_test_util.h"
#include "wte/rng.h"

namespace wte {
namespace {

constexpr double kU = 0x1p-24;
double gamma_k(size_t K) { return K * kU / (1 - K * kU); }

// Expects |got[i] - want[i]| <= tol[i] (got finite) for every i; names the first entries outside.
void expect_within(const std::vector<float>& got, const std::vector<double>& want,
                   const std::vector<double>& tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t outside = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!std::isfinite(got[i]) || !(err <= tol[i] + 1e-40)) {
      if (++outside <= 3)
        ADD_FAILURE() << what << "[" << i << "]: float " << got[i] << ", double " << want[i]
                      << ", |diff| " << err << " > bound " << tol[i];
    }
  }
  EXPECT_EQ(outside, 0u) << what << ": entries outside the bound";
}

struct LinearShape {
  size_t N, C, OC;
};

std::vector<LinearShape> awkward_shapes() {
  std::vector<LinearShape> shapes;
  for (size_t N : {1, 2, 3, 5, 7})
    for (auto [C, OC] : {std::pair<size_t, size_t>{12, 36}, {20, 20}, {20, 80}, {80, 20}, {5, 3}})
      shapes.push_back({N, C, OC});
  return shapes;
}

TEST(Matmul, ForwardWithinBoundOfDoubleReferenceAtAwkwardShapes) {
  Gemm gemm;
  Rng rng(17);
  for (const LinearShape& s : awkward_shapes()) {
    const size_t N = s.N, C = s.C, OC = s.OC;
    const std::string where =
        "N=" + std::to_string(N) + " C=" + std::to_string(C) + " OC=" + std::to_string(OC);
    std::vector<float> x(N * C), w(C * OC), b(OC);
    test::fill_uniform(&x, &rng, 2.0);
    test::fill_uniform(&w, &rng, 1.0 / std::sqrt(double(C)));
    test::fill_uniform(&b, &rng, 0.5);
    std::vector<float> out(N * OC, -7.0f);  // stale values: forward writes every entry
    matmul_forward(out.data(), x.data(), w.data(), b.data(), N, C, OC, gemm);

    const std::vector<double> xd(x.begin(), x.end()), wd(w.begin(), w.end()), bd(b.begin(), b.end());
    std::vector<double> want(N * OC), tol(N * OC);
    ref::linear_forward(want.data(), xd.data(), wd.data(), bd.data(), N, C, OC);
    for (size_t n = 0; n < N; ++n)
      for (size_t o = 0; o < OC; ++o) {
        double mag = std::fabs(bd[o]);
        for (size_t c = 0; c < C; ++c) mag += std::fabs(xd[n * C + c] * wd[c * OC + o]);
        tol[n * OC + o] = gamma_k(C + 1) * mag;
      }
    expect_within(out, want, tol, where + " out");

    // Without a bias: C terms.
    matmul_forward(out.data(), x.data(), w.data(), nullptr, N, C, OC, gemm);
    std::vector<double> zero(OC, 0.0);
    ref::linear_forward(want.data(), xd.data(), wd.data(), zero.data(), N, C, OC);
    expect_within(out, want, tol, where + " out (no bias)");
  }
}

TEST(Matmul, BackwardWithinBoundOfDoubleReferenceAtAwkwardShapes) {
  Gemm gemm;
  Rng rng(18);
  for (const LinearShape& s : awkward_shapes()) {
    const size_t N = s.N, C = s.C, OC = s.OC;
    const std::string where =
        "N=" + std::to_string(N) + " C=" + std::to_string(C) + " OC=" + std::to_string(OC);
    std::vector<float> x(N * C), w(C * OC), dout(N * OC);
    test::fill_uniform(&x, &rng, 2.0);
    test::fill_uniform(&w, &rng, 1.0 / std::sqrt(double(C)));
    test::fill_uniform(&dout, &rng, 1.0);
    // Zeroed outputs: the layer's result is its gradient whether it writes or adds.
    std::vector<float> dinp(N * C, 0.0f), dw(C * OC, 0.0f), db(OC, 0.0f);
    matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), N, C, OC,
                    gemm);

    const std::vector<double> xd(x.begin(), x.end()), wd(w.begin(), w.end()),
        dd(dout.begin(), dout.end());
    std::vector<double> want_dinp(N * C, 0.0), want_dw(C * OC, 0.0), want_db(OC, 0.0);
    ref::linear_backward(want_dinp.data(), want_dw.data(), want_db.data(), dd.data(), xd.data(),
                         wd.data(), N, C, OC);
    std::vector<double> tol_dinp(N * C, 0.0), tol_dw(C * OC, 0.0), tol_db(OC, 0.0);
    for (size_t n = 0; n < N; ++n)
      for (size_t c = 0; c < C; ++c)
        for (size_t o = 0; o < OC; ++o) {
          tol_dinp[n * C + c] += gamma_k(OC) * std::fabs(dd[n * OC + o] * wd[c * OC + o]);
          tol_dw[c * OC + o] += gamma_k(N) * std::fabs(xd[n * C + c] * dd[n * OC + o]);
        }
    for (size_t n = 0; n < N; ++n)
      for (size_t o = 0; o < OC; ++o) tol_db[o] += gamma_k(N) * std::fabs(dd[n * OC + o]);
    expect_within(dinp, want_dinp, tol_dinp, where + " dinp");
    expect_within(dw, want_dw, tol_dw, where + " dweight");
    expect_within(db, want_db, tol_db, where + " dbias");
  }
}

// Multiples of 1/8 in [-1, 1]: products are multiples of 1/64 below 1 in size, and sums of up to a
// few hundred of them are floats exactly (|sum| * 64 < 2^24).
void fill_eighths(std::vector<float>* v, Rng* rng) {
  for (float& x : *v) x = (static_cast<float>(rng->below(17)) - 8.0f) / 8.0f;
}

// Forces one Highway target (dbias's bias_backward kernel) per instance; resets it afterwards.
class MatmulTest : public test::TargetTest {};

TEST_P(MatmulTest, BackwardAddsIntoParameterGradientsAndWritesInputGradient) {
  Gemm gemm;
  Rng rng(19);
  for (const LinearShape& s : awkward_shapes()) {
    const size_t N = s.N, C = s.C, OC = s.OC;
    const std::string where = target() + " N=" + std::to_string(N) + " C=" + std::to_string(C) +
                              " OC=" + std::to_string(OC);
    std::vector<float> x(N * C), w(C * OC), dout(N * OC);
    fill_eighths(&x, &rng);
    fill_eighths(&w, &rng);
    fill_eighths(&dout, &rng);
    // Earlier gradients (another micro-batch's) in dweight and dbias, stale values in dinp.
    std::vector<float> dinp(N * C), dw(C * OC), db(OC);
    fill_eighths(&dinp, &rng);
    fill_eighths(&dw, &rng);
    fill_eighths(&db, &rng);
    const std::vector<double> dw0(dw.begin(), dw.end()), db0(db.begin(), db.end());
    matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), N, C, OC,
                    gemm);

    const std::vector<double> xd(x.begin(), x.end()), wd(w.begin(), w.end()),
        dd(dout.begin(), dout.end());
    std::vector<double> want_dinp(N * C, 0.0), want_dw = dw0, want_db = db0;
    ref::linear_backward(want_dinp.data(), want_dw.data(), want_db.data(), dd.data(), xd.data(),
                         wd.data(), N, C, OC);
    // Exact: tolerance zero.
    expect_within(dinp, want_dinp, std::vector<double>(N * C, 0.0), where + " dinp (written)");
    expect_within(dw, want_dw, std::vector<double>(C * OC, 0.0), where + " dweight (added)");
    expect_within(db, want_db, std::vector<double>(OC, 0.0), where + " dbias (added)");

    // A second pass of the same batch adds the same gradient again; dinp is the same again.
    const std::vector<float> dinp1 = dinp;
    matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), N, C, OC,
                    gemm);
    for (size_t i = 0; i < C * OC; ++i) want_dw[i] = 2 * want_dw[i] - dw0[i];
    for (size_t o = 0; o < OC; ++o) want_db[o] = 2 * want_db[o] - db0[o];
    EXPECT_EQ(dinp, dinp1) << where << " dinp after a second pass";
    expect_within(dw, want_dw, std::vector<double>(C * OC, 0.0), where + " dweight, two passes");
    expect_within(db, want_db, std::vector<double>(OC, 0.0), where + " dbias, two passes");
  }
}

WTE_INSTANTIATE_ON_EVERY_TARGET(MatmulTest);

}  // namespace
}  // namespace wte
