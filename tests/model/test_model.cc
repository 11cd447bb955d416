// Tests of the model: the double reference (src/reference/model.h) against central finite
// differences, exact hand-computed cases, and the production float32 wte::Model (include/wte/model.h)
// against the double reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <ostream>
#include <utility>
#include <string>
#include <vector>

#include <omp.h>

#include "wte/kernels.h"
#include "wte/config.h"
#include "wte/data.h"
#include "wte/error.h"
#include "wte/model.h"
#include "src/reference/model.h"
#include "wte/rng.h"
#include "tests/model_test_util.h"

namespace wte {
namespace {

using test::fill_uniform;
using test::make_ids;

// ------------------------------------------------------------------------------------------------
// Helpers

template <typename F>
ref::ModelParams<F> random_params(size_t V, size_t C, size_t n_ctx, bool ln_f, uint64_t seed) {
  ref::ModelParams<F> p(V, C, n_ctx, ln_f, F(1e-5));
  Rng rng(seed);
  fill_uniform(&p.wte, &rng, 0.5);
  fill_uniform(&p.wpe, &rng, 0.5);
  // g around 1 and b around 0, but not exactly, so every ln_f term is exercised.
  for (F& g : p.ln_f_g) g = static_cast<F>(1.0 + 0.3 * (2.0 * rng.uniform() - 1.0));
  fill_uniform(&p.ln_f_b, &rng, 0.2);
  return p;
}

// ------------------------------------------------------------------------------------------------
// Whole-model central finite-difference check of the double reference.
//   numeric = (L(θ + eps·e_i) - L(θ - eps·e_i)) / (2·eps),  eps = 1e-6
//   pass iff |analytic - numeric| <= 1e-5 + 1e-3·|numeric|, for EVERY entry of every tensor.
// The loss is smooth everywhere (softmax, and ln_f with eps > 0 in the sqrt), so no kinks to skip.

struct GradcheckCase {
  const char* label;
  size_t V, C, n_ctx, B, T;
  size_t used_ids;  // ids drawn from [0, used_ids): rows >= used_ids get only the unembedding path
  bool ln_f;
  uint64_t seed;
};

void PrintTo(const GradcheckCase& tc, std::ostream* os) { *os << tc.label; }

class ReferenceGradcheck : public ::testing::TestWithParam<GradcheckCase> {};

TEST_P(ReferenceGradcheck, EveryEntryMatchesCentralDifference) {
  const GradcheckCase& tc = GetParam();
  ref::ModelParams<double> params = random_params<double>(tc.V, tc.C, tc.n_ctx, tc.ln_f, tc.seed);
  Rng rng(tc.seed + 1000);
  const std::vector<int32_t> inputs = make_ids(tc.B * tc.T, tc.used_ids, &rng);
  const std::vector<int32_t> targets = make_ids(tc.B * tc.T, tc.V, &rng);

  ref::ModelGrads<double> grads;
  const double loss =
      ref::model_forward_backward(params, inputs.data(), targets.data(), tc.B, tc.T, &grads);
  EXPECT_DOUBLE_EQ(loss, ref::model_loss(params, inputs.data(), targets.data(), tc.B, tc.T));

  auto param_tensors = ref::named_tensors(params);
  auto grad_tensors = ref::named_tensors(grads);
  const auto loss_now = [&] {
    return ref::model_loss(params, inputs.data(), targets.data(), tc.B, tc.T);
  };
  size_t checked = 0, failures = 0;
  double max_err = 0;
  for (size_t k = 0; k < param_tensors.size(); ++k) {
    ASSERT_EQ(param_tensors[k].data->size(), grad_tensors[k].data->size()) << param_tensors[k].name;
    const test::FdResult r = test::check_tensor_fd(loss_now, param_tensors[k].data, *grad_tensors[k].data,
                                                   tc.label, param_tensors[k].name, &checked, &failures);
    max_err = std::max(max_err, r.max_err);
  }
  EXPECT_EQ(failures, 0u) << tc.label << ": " << failures << " of " << checked
                          << " entries failed; max |analytic - numeric| = " << max_err;
  // With ln_f off, its parameters are not used: the gradient must be exactly zero.
  if (!tc.ln_f) {
    for (size_t c = 0; c < tc.C; ++c) {
      EXPECT_EQ(grads.ln_f_g[c], 0.0);
      EXPECT_EQ(grads.ln_f_b[c], 0.0);
    }
  }
  // wpe rows at positions >= T are not used: zero gradient.
  for (size_t i = tc.T * tc.C; i < tc.n_ctx * tc.C; ++i) EXPECT_EQ(grads.wpe[i], 0.0) << i;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ReferenceGradcheck,
    ::testing::Values(
        // ids from [0, 7) of 11: rows 7..10 only get the unembedding path; n_ctx 6 > T 4.
        GradcheckCase{"V11_C5_lnf", 11, 5, 6, 2, 4, 7, true, 1},
        GradcheckCase{"V11_C5_nolnf", 11, 5, 6, 2, 4, 7, false, 2},
        GradcheckCase{"V7_C1_lnf", 7, 1, 3, 3, 3, 4, true, 3},  // C=1: ln_f output is just b
        GradcheckCase{"V5_C3_nolnf_B1T1", 5, 3, 1, 1, 1, 5, false, 4},
        GradcheckCase{"V13_C8_lnf_T_eq_nctx", 13, 8, 5, 3, 5, 6, true, 5}),
    [](const ::testing::TestParamInfo<GradcheckCase>& info) { return info.param.label; });

// The lookup path really is there: a row not in the batch gets exactly the unembedding gradient
// dlogitsᵀ·h', a row in the batch gets more. (Guards against a check that passes with one path.)
TEST(ReferenceModel, RowsOutsideBatchGetOnlyTheUnembeddingPath) {
  const size_t V = 11, C = 5, n_ctx = 6, B = 2, T = 4, N = B * T;
  for (bool ln_f : {true, false}) {
    ref::ModelParams<double> p = random_params<double>(V, C, n_ctx, ln_f, 7);
    Rng rng(77);
    const std::vector<int32_t> inputs = make_ids(N, 7, &rng);
    const std::vector<int32_t> targets = make_ids(N, V, &rng);
    ref::ModelGrads<double> g;
    ref::ModelActivations<double> act;
    ref::model_forward_backward(p, inputs.data(), targets.data(), B, T, &g, &act);
    std::vector<double> dlogits = act.logits, losses(N);
    ref::softmax_cross_entropy(dlogits.data(), losses.data(), targets.data(), N, V, 1.0 / N);
    for (size_t v = 0; v < V; ++v) {
      const bool in_batch = std::find(inputs.begin(), inputs.end(), int32_t(v)) != inputs.end();
      if (v >= 7) {
        ASSERT_FALSE(in_batch);
      }
      double max_diff = 0;
      for (size_t c = 0; c < C; ++c) {
        double unembed = 0;
        for (size_t n = 0; n < N; ++n) unembed += dlogits[n * V + v] * act.h[n * C + c];
        max_diff = std::max(max_diff, std::fabs(g.wte[v * C + c] - unembed));
      }
      if (in_batch) {
        EXPECT_GT(max_diff, 1e-6) << "ln_f " << ln_f << " row " << v << " lost its lookup path";
      } else {
        EXPECT_LE(max_diff, 1e-15) << "ln_f " << ln_f << " row " << v;
      }
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Tied sum, exact: V 2, C 1, ln_f off, wte = [[1], [0]], wpe = [[0]], input 0, target 0.
//   logits = [1, 0];  p = [e/(1+e), 1/(1+e)] = [0.7310586, 0.2689414]
//   loss = -log 0.7310586 = 0.3132617;  dlogits = [-0.2689414, +0.2689414]
//   dwte[0] = dlogits[0]·h (unembedding) + dh (lookup) = -0.2689414 + -0.2689414 = -0.5378828
//   dwte[1] = dlogits[1]·h = +0.2689414;  dh = Σ_v dlogits[v]·wte[v] = -0.2689414 = dwpe[0]
constexpr double kTiedLoss = 0.3132617;
constexpr double kTiedDwte0 = -0.5378828;
constexpr double kTiedDwte1 = 0.2689414;
constexpr double kTiedDwpe0 = -0.2689414;

TEST(ReferenceModel, TiedSumExact) {
  ref::ModelParams<double> p(2, 1, 1, /*ln_f=*/false, 1e-5);
  p.wte = {1.0, 0.0};
  p.wpe = {0.0};
  const int32_t input = 0, target = 0;
  ref::ModelGrads<double> g;
  const double loss = ref::model_forward_backward(p, &input, &target, 1, 1, &g);
  EXPECT_NEAR(loss, kTiedLoss, 1e-7);
  EXPECT_NEAR(g.wte[0], kTiedDwte0, 1e-7);
  EXPECT_NEAR(g.wte[1], kTiedDwte1, 1e-7);
  EXPECT_NEAR(g.wpe[0], kTiedDwpe0, 1e-7);
  // And the closed forms, to double precision.
  const double e = std::exp(1.0);
  EXPECT_NEAR(loss, std::log1p(1.0 / e), 1e-15);
  EXPECT_NEAR(g.wte[0], -2.0 / (1.0 + e), 1e-15);
  EXPECT_NEAR(g.wte[1], 1.0 / (1.0 + e), 1e-15);
  EXPECT_NEAR(g.wpe[0], -1.0 / (1.0 + e), 1e-15);
}

// ln_f on a hand case: C 2, x = [a, -a] + wpe 0 → u 0, s = a², xhat = ±a/sqrt(a²+eps).
TEST(ReferenceModel, LnFHandCase) {
  ref::ModelParams<double> p(2, 2, 1, /*ln_f=*/true, 1e-5);
  p.wte = {3.0, -3.0, 0.5, 0.25};
  p.wpe = {0.0, 0.0};
  p.ln_f_g = {2.0, 0.5};
  p.ln_f_b = {0.1, -0.2};
  const int32_t input = 0, target = 1;
  ref::ModelActivations<double> act;
  ref::model_forward(p, &input, &target, 1, 1, &act);
  const double xhat = 3.0 / std::sqrt(9.0 + 1e-5);
  EXPECT_NEAR(act.h[0], xhat * 2.0 + 0.1, 1e-15);
  EXPECT_NEAR(act.h[1], -xhat * 0.5 - 0.2, 1e-15);
  const double l0 = act.h[0] * 3.0 + act.h[1] * -3.0;
  const double l1 = act.h[0] * 0.5 + act.h[1] * 0.25;
  EXPECT_NEAR(act.logits[0], l0, 1e-14);
  EXPECT_NEAR(act.logits[1], l1, 1e-14);
  const double m = std::max(l0, l1);
  EXPECT_NEAR(act.loss, m + std::log(std::exp(l0 - m) + std::exp(l1 - m)) - l1, 1e-14);
}

TEST(ReferenceModel, RejectsBadInputs) {
  ref::ModelParams<double> p(5, 2, 4, true, 1e-5);
  const int32_t bad_inputs[4] = {0, 1, 5, 2};
  const int32_t good[5] = {0, 1, 2, 3, 4};
  try {
    ref::model_loss(p, bad_inputs, good, 1, 4);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 5 at position 2"), std::string::npos)
        << e.what();
  }
  try {
    ref::model_loss(p, good, good, 1, 5);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("T=5"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("n_ctx=4"), std::string::npos) << e.what();
  }
}

// ------------------------------------------------------------------------------------------------
// The production float32 wte::Model.

ModelConfig small_config(size_t V, size_t C, size_t n_ctx, bool ln_f) {
  return {.vocab_size = V, .d_model = C, .n_ctx = n_ctx, .ln_f = ln_f};
}

// Random float parameters written through model.params(), and the same values (exactly, widened)
// as a double reference, so the comparison measures only the arithmetic, not a parameter rounding.
ref::ModelParams<double> set_random_params(Model* model, uint64_t seed) {
  const ModelConfig& cfg = model->config();
  const size_t V = cfg.vocab_size, C = cfg.d_model, P = cfg.n_ctx;
  ref::ModelParams<float> pf = random_params<float>(V, C, P, cfg.ln_f, seed);
  std::copy(pf.wte.begin(), pf.wte.end(), model->params().wte);
  std::copy(pf.wpe.begin(), pf.wpe.end(), model->params().wpe);
  std::copy(pf.ln_f_g.begin(), pf.ln_f_g.end(), model->params().ln_f_g);
  std::copy(pf.ln_f_b.begin(), pf.ln_f_b.end(), model->params().ln_f_b);
  ref::ModelParams<double> pd(V, C, P, cfg.ln_f, static_cast<double>(cfg.ln_eps));
  pd.wte.assign(pf.wte.begin(), pf.wte.end());
  pd.wpe.assign(pf.wpe.begin(), pf.wpe.end());
  pd.ln_f_g.assign(pf.ln_f_g.begin(), pf.ln_f_g.end());
  pd.ln_f_b.assign(pf.ln_f_b.begin(), pf.ln_f_b.end());
  return pd;
}

// Tolerance of the float32 model against the double reference, per tensor:
//   max_i |a_i - r_i| <= 1e-5 + 1e-4 · max_i |r_i|
// Why: every value is a short chain of float32 sums of at most K terms (logits: K = C; dh': K = V;
// the unembedding dwte: K = N; ln_f statistics: K = C; the scatter: K = duplicates of an id), and a
// K-term float sum is off by at most about K·2^-24 ≈ K·6e-8 of the sum of the magnitudes of its
// terms (typically sqrt(K)·2^-24). With K <= 300 here that is <= 1.8e-5 relative in the worst case,
// so 1e-4 of the tensor's largest entry leaves a ~5x margin. Scaling by the tensor's max, not each
// entry, is deliberate: entries that are small because of cancellation carry the absolute error of
// the large terms that cancelled. The 1e-5 floor covers tensors that are nearly zero everywhere.
// (Both sides use the same float parameters, so parameter rounding is not part of the error.)
// Observed when this was written: max error ~3e-7 of the tensor's max for logits and gradients.
struct Agreement {
  double max_err = 0;
  size_t at = 0;
  double max_ref = 0;
  double bound() const { return 1e-5 + 1e-4 * max_ref; }
};

Agreement agreement(const float* actual, const double* expected, size_t n) {
  Agreement a;
  for (size_t i = 0; i < n; ++i) {
    a.max_ref = std::max(a.max_ref, std::fabs(expected[i]));
    const double err = std::fabs(static_cast<double>(actual[i]) - expected[i]);
    if (!(err <= a.max_err)) {  // also catches NaN
      a.max_err = std::isnan(err) ? INFINITY : err;
      a.at = i;
    }
  }
  return a;
}

#define EXPECT_AGREES(label, actual, expected, n)                                                 \
  do {                                                                                            \
    const Agreement ag_ = agreement((actual), (expected), (n));                                   \
    EXPECT_LE(ag_.max_err, ag_.bound())                                                           \
        << (label) << ": max |float - double| " << ag_.max_err << " at [" << ag_.at               \
        << "] (float " << (actual)[ag_.at] << ", double " << (expected)[ag_.at]                   \
        << "), max |double| " << ag_.max_ref;                                                     \
  } while (0)

TEST(Model, TiedSumExact) {
  Model model(small_config(2, 1, 1, /*ln_f=*/false));
  model.params().wte[0] = 1.0f;
  model.params().wte[1] = 0.0f;
  model.params().wpe[0] = 0.0f;
  const int32_t input = 0, target = 0;
  const float loss = model.forward(&input, &target, 1, 1);
  model.backward();
  // float32: 0.3132617 is represented to ~3e-8; exp/log in float add a few ulp.
  EXPECT_NEAR(loss, kTiedLoss, 1e-6);
  EXPECT_NEAR(model.grads().wte[0], kTiedDwte0, 1e-6);
  EXPECT_NEAR(model.grads().wte[1], kTiedDwte1, 1e-6);
  EXPECT_NEAR(model.grads().wpe[0], kTiedDwpe0, 1e-6);
  EXPECT_EQ(model.grads().ln_f_g[0], 0.0f);  // ln_f off: its gradient is zero, not stale
  EXPECT_EQ(model.grads().ln_f_b[0], 0.0f);
}

struct CompareCase {
  const char* label;
  size_t V, C, n_ctx;
  bool ln_f;
  // Two batch shapes run one after the other on the same Model (primitives are cached per shape);
  // B·T is never a multiple of 16.
  size_t B1, T1, B2, T2;
  uint64_t seed;
};

void PrintTo(const CompareCase& tc, std::ostream* os) { *os << tc.label; }

class ModelVsReference : public ::testing::TestWithParam<CompareCase> {};

TEST_P(ModelVsReference, LossLogitsAndEveryGradientAgree) {
  const CompareCase& tc = GetParam();
  Model model(small_config(tc.V, tc.C, tc.n_ctx, tc.ln_f));
  const ref::ModelParams<double> params = set_random_params(&model, tc.seed);
  Rng rng(tc.seed * 31 + 7);
  const size_t shapes[3][2] = {{tc.B1, tc.T1}, {tc.B2, tc.T2}, {tc.B1, tc.T1}};
  for (const auto& shape : shapes) {
    const size_t B = shape[0], T = shape[1], N = B * T;
    ASSERT_NE(N % 16, 0u);
    // ids from the first 2/3 of the vocabulary: duplicates, and rows the lookup never touches.
    const std::vector<int32_t> inputs = make_ids(N, tc.V * 2 / 3, &rng);
    const std::vector<int32_t> targets = make_ids(N, tc.V, &rng);
    SCOPED_TRACE(std::string(tc.label) + " B=" + std::to_string(B) + " T=" + std::to_string(T));

    ref::ModelGrads<double> g;
    ref::ModelActivations<double> act;
    const double ref_loss = ref::model_forward_backward(params, inputs.data(), targets.data(), B,
                                                        T, &g, &act);
    model.zero_grad();  // backward adds: each shape's gradient on its own

    // Inference path first: logits and per-token losses.
    std::vector<float> losses(N);
    const float* logits = model.forward_logits(inputs.data(), B, T, targets.data(), losses.data());
    EXPECT_AGREES("logits", logits, act.logits.data(), N * tc.V);
    EXPECT_AGREES("losses", losses.data(), act.losses.data(), N);

    const float loss = model.forward(inputs.data(), targets.data(), B, T);
    EXPECT_NEAR(loss, ref_loss, 1e-5 + 1e-4 * std::fabs(ref_loss));
    std::vector<float> hidden(model.hidden_states(), model.hidden_states() + N * tc.C);
    // One float add per element on both sides, of the same float inputs: identical values.
    std::vector<float> hidden_ref(N * tc.C);
    {
      std::vector<float> wte_f(params.wte.begin(), params.wte.end());
      std::vector<float> wpe_f(params.wpe.begin(), params.wpe.end());
      ref::embedding_forward(hidden_ref.data(), inputs.data(), wte_f.data(), wpe_f.data(), B, T,
                             tc.C);
    }
    EXPECT_EQ(0, std::memcmp(hidden.data(), hidden_ref.data(), hidden.size() * sizeof(float)));

    model.backward();
    EXPECT_AGREES("dwte", model.grads().wte, g.wte.data(), tc.V * tc.C);
    EXPECT_AGREES("dwpe", model.grads().wpe, g.wpe.data(), tc.n_ctx * tc.C);
    EXPECT_AGREES("dln_f/g", model.grads().ln_f_g, g.ln_f_g.data(), tc.C);
    EXPECT_AGREES("dln_f/b", model.grads().ln_f_b, g.ln_f_b.data(), tc.C);
    // Rows of wpe beyond T must be exactly zero (not left from the previous, longer batch).
    for (size_t i = T * tc.C; i < tc.n_ctx * tc.C; ++i)
      ASSERT_EQ(model.grads().wpe[i], 0.0f) << "dwpe[" << i << "]";
    if (!tc.ln_f) {
      for (size_t c = 0; c < tc.C; ++c) {
        ASSERT_EQ(model.grads().ln_f_g[c], 0.0f);
        ASSERT_EQ(model.grads().ln_f_b[c], 0.0f);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ModelVsReference,
    ::testing::Values(CompareCase{"V37_C13_lnf", 37, 13, 9, true, 3, 5, 2, 9, 11},
                      CompareCase{"V37_C13_nolnf", 37, 13, 9, false, 3, 5, 2, 9, 12},
                      CompareCase{"V300_C40_lnf", 300, 40, 16, true, 3, 11, 5, 3, 13},
                      CompareCase{"V300_C40_nolnf", 300, 40, 16, false, 3, 11, 5, 3, 14},
                      CompareCase{"V2_C1_lnf_B1T1", 2, 1, 1, true, 1, 1, 1, 1, 15}),
    [](const ::testing::TestParamInfo<CompareCase>& info) { return info.param.label; });

// ------------------------------------------------------------------------------------------------
// Determinism.

struct RunResult {
  float loss;
  std::vector<float> grads;   // the whole gradient arena
  std::vector<float> hidden;  // hidden_states
};

RunResult run_once(Model* model, const std::vector<int32_t>& inputs,
                   const std::vector<int32_t>& targets, size_t B, size_t T) {
  RunResult r;
  model->zero_grad();
  r.loss = model->forward(inputs.data(), targets.data(), B, T);
  r.hidden.assign(model->hidden_states(), model->hidden_states() + B * T * model->config().d_model);
  model->backward();
  r.grads.assign(model->grad_data(), model->grad_data() + model->num_parameters());
  return r;
}

bool bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class ThreadCountGuard {
 public:
  ThreadCountGuard() : saved_(omp_get_max_threads()) {}
  ~ThreadCountGuard() { omp_set_num_threads(saved_); }

 private:
  int saved_;
};

TEST(Model, Determinism) {
  ThreadCountGuard guard;
  const size_t V = 300, C = 40, n_ctx = 16, B = 5, T = 13;
  for (bool ln_f : {true, false}) {
    SCOPED_TRACE(ln_f ? "ln_f on" : "ln_f off");
    Rng rng(22);
    const std::vector<int32_t> inputs = make_ids(B * T, V / 2, &rng);
    const std::vector<int32_t> targets = make_ids(B * T, V, &rng);

    RunResult by_threads[2];
    for (int threads : {1, 2}) {
      SCOPED_TRACE(std::to_string(threads) + " threads");
      // Fresh Models at each thread count: oneDNN picks its GEMM decomposition when a primitive is
      // created (the Model caches them per shape), so the thread count at creation is part of the
      // arithmetic. Same thread count, same history => the same bits.
      omp_set_num_threads(threads);
      Model model(small_config(V, C, n_ctx, ln_f));
      set_random_params(&model, 21);
      const RunResult a = run_once(&model, inputs, targets, B, T);
      const RunResult b = run_once(&model, inputs, targets, B, T);
      EXPECT_EQ(std::memcmp(&a.loss, &b.loss, sizeof(float)), 0);
      EXPECT_TRUE(bit_identical(a.grads, b.grads)) << "gradients differ between two runs";
      EXPECT_TRUE(bit_identical(a.hidden, b.hidden));
      Model twin(small_config(V, C, n_ctx, ln_f));
      set_random_params(&twin, 21);
      const RunResult t = run_once(&twin, inputs, targets, B, T);
      EXPECT_EQ(std::memcmp(&t.loss, &a.loss, sizeof(float)), 0);
      EXPECT_TRUE(bit_identical(t.grads, a.grads)) << "a second Model gives different gradients";
      by_threads[threads - 1] = a;
    }
    // 1 vs 2 threads: the lookup forward is exact, so hidden_states are bit-identical, and the
    // loss is summed in a fixed order; the gradients may differ in the last bits only through
    // oneDNN's GEMM/layer-norm blocking, so they must agree within the Agreement tolerance.
    EXPECT_TRUE(bit_identical(by_threads[0].hidden, by_threads[1].hidden));
    EXPECT_NEAR(by_threads[0].loss, by_threads[1].loss,
                1e-5 + 1e-4 * std::fabs(by_threads[0].loss));
    Model layout(small_config(V, C, n_ctx, ln_f));
    for (const TensorSpec& spec : layout.tensors()) {
      std::vector<double> one(by_threads[0].grads.begin() + spec.offset,
                              by_threads[0].grads.begin() + spec.offset + spec.size);
      EXPECT_AGREES(spec.name + " 2 threads vs 1", by_threads[1].grads.data() + spec.offset,
                    one.data(), spec.size);
    }
  }
}

// The lookup backward (the scatter into dwte) is bit-identical for 1 and 2 threads and to the
// scalar reference's summation order, so the only thread-count dependence of the model is oneDNN.
TEST(Model, LookupBackwardIsDeterministicAcrossThreadCounts) {
  ThreadCountGuard guard;
  const size_t V = 300, C = 40, N = 67;
  Rng rng(5);
  const std::vector<int32_t> ids = make_ids(N, 20, &rng);  // many duplicates
  std::vector<float> dhidden(N * C), base(V * C);
  fill_uniform(&dhidden, &rng, 1.0);
  fill_uniform(&base, &rng, 1.0);
  std::vector<float> expected = base;
  ref::embedding_backward_wte(expected.data(), dhidden.data(), ids.data(), N, C, V);
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    std::vector<float> dwte = base;
    ScatterWorkspace workspace;
    embedding_backward_wte(dwte.data(), dhidden.data(), ids.data(), N, C, V, &workspace);
    EXPECT_TRUE(bit_identical(dwte, expected)) << threads << " threads";
  }
}

// ------------------------------------------------------------------------------------------------
// Bad ids and shapes: wte::Error, a message the user can act on, and nothing written.

std::vector<float> snapshot(const float* p, size_t n) { return std::vector<float>(p, p + n); }

void expect_error_containing(const std::function<void()>& f,
                             const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no wte::Error thrown; expected a message with '" << parts[0] << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& part : parts)
      EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' not in: " << msg;
  }
}

TEST(Model, BadIdsThrowAndWriteNothing) {
  const size_t V = 5, C = 3, n_ctx = 4, B = 2, T = 4;
  Model model(small_config(V, C, n_ctx, /*ln_f=*/true));
  model.init_weights(3);
  const std::vector<int32_t> good_inputs = {0, 1, 2, 3, 4, 0, 1, 2};
  const std::vector<int32_t> good_targets = {1, 2, 3, 4, 0, 1, 2, 3};
  const float good_loss = model.forward(good_inputs.data(), good_targets.data(), B, T);
  model.backward();  // the gradient arena now holds real values that must survive
  const std::vector<float> params_before = snapshot(model.param_data(), model.num_parameters());
  const std::vector<float> grads_before = snapshot(model.grad_data(), model.num_parameters());

  struct Bad {
    int32_t id;
    size_t position;
  };
  for (const Bad bad : {Bad{5, 6}, Bad{-1, 3}, Bad{5, 0}, Bad{-1, 7}}) {
    const std::vector<std::string> parts = {"token id " + std::to_string(bad.id),
                                            "position " + std::to_string(bad.position),
                                            "vocab_size=5"};
    std::vector<int32_t> inputs = good_inputs, targets = good_targets;
    inputs[bad.position] = bad.id;
    SCOPED_TRACE("bad input id " + std::to_string(bad.id));
    expect_error_containing([&] { model.forward(inputs.data(), good_targets.data(), B, T); },
                            parts);
    expect_error_containing([&] { model.forward_logits(inputs.data(), B, T); }, parts);
    targets[bad.position] = bad.id;
    SCOPED_TRACE("bad target id " + std::to_string(bad.id));
    expect_error_containing([&] { model.forward(good_inputs.data(), targets.data(), B, T); },
                            parts);
    std::vector<float> losses(B * T);
    expect_error_containing(
        [&] { model.forward_logits(good_inputs.data(), B, T, targets.data(), losses.data()); },
        parts);
  }
  // T > n_ctx.
  const std::vector<int32_t> long_ids(2 * (n_ctx + 1), 0);
  expect_error_containing([&] { model.forward(long_ids.data(), long_ids.data(), 2, n_ctx + 1); },
                          {"T=5", "n_ctx=4"});
  expect_error_containing([&] { model.forward_logits(long_ids.data(), 2, n_ctx + 1); },
                          {"T=5", "n_ctx=4"});

  EXPECT_TRUE(bit_identical(snapshot(model.param_data(), model.num_parameters()), params_before))
      << "a rejected batch changed the parameters";
  EXPECT_TRUE(bit_identical(snapshot(model.grad_data(), model.num_parameters()), grads_before))
      << "a rejected batch changed the gradients";
  // The model still works, with the same result as before the rejected calls.
  model.zero_grad();
  const float again = model.forward(good_inputs.data(), good_targets.data(), B, T);
  EXPECT_EQ(std::memcmp(&again, &good_loss, sizeof(float)), 0);
  model.backward();
  EXPECT_TRUE(bit_identical(snapshot(model.grad_data(), model.num_parameters()), grads_before));
}

TEST(CheckTokenIds, NamesIdPositionSourceAndRange) {
  const int32_t ids[] = {0, 4, 5, -1};
  EXPECT_NO_THROW(check_token_ids(ids, 2, 5, "tokens.bin"));
  EXPECT_NO_THROW(check_token_ids(ids, 0, 5, "tokens.bin"));
  expect_error_containing([&] { check_token_ids(ids, 4, 5, "tokens.bin"); },
                          {"token id 5 at position 2 of tokens.bin", "vocab_size=5"});
  expect_error_containing([&] { check_token_ids(ids + 3, 1, 5, "val split"); },
                          {"token id -1 at position 0 of val split", "vocab_size=5"});
  // vocab_size 6 accepts 5 but still rejects -1.
  expect_error_containing([&] { check_token_ids(ids, 4, 6, "x"); },
                          {"token id -1 at position 3", "vocab_size=6"});
}

// ------------------------------------------------------------------------------------------------
// Layout and initialisation.

TEST(Model, TensorLayout) {
  const size_t V = 50, C = 8, P = 12;
  Model model(small_config(V, C, P, /*ln_f=*/true));
  const std::vector<TensorSpec>& t = model.tensors();
  ASSERT_EQ(t.size(), 4u);
  const char* names[] = {"wte", "wpe", "ln_f/g", "ln_f/b"};
  const std::vector<size_t> shapes[] = {{V, C}, {P, C}, {C}, {C}};
  const bool decay[] = {true, true, false, false};
  size_t offset = 0;
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(t[i].name, names[i]);
    EXPECT_EQ(t[i].shape, shapes[i]) << names[i];
    EXPECT_EQ(t[i].offset, offset) << names[i];
    size_t size = 1;
    for (size_t d : shapes[i]) size *= d;
    EXPECT_EQ(t[i].size, size) << names[i];
    EXPECT_EQ(t[i].weight_decay, decay[i]) << names[i];
    offset += size;
  }
  EXPECT_EQ(model.num_parameters(), offset);
  EXPECT_EQ(model.num_parameters(), V * C + P * C + 2 * C);
  const float* p = model.param_data();
  const float* g = model.grad_data();
  EXPECT_EQ(model.params().wte, p + t[0].offset);
  EXPECT_EQ(model.params().wpe, p + t[1].offset);
  EXPECT_EQ(model.params().ln_f_g, p + t[2].offset);
  EXPECT_EQ(model.params().ln_f_b, p + t[3].offset);
  EXPECT_EQ(model.grads().wte, g + t[0].offset);
  EXPECT_EQ(model.grads().wpe, g + t[1].offset);
  EXPECT_EQ(model.grads().ln_f_g, g + t[2].offset);
  EXPECT_EQ(model.grads().ln_f_b, g + t[3].offset);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(g) % 64, 0u);
  // The reference names its tensors the same way, in the same order.
  ref::ModelParams<double> rp(V, C, P, true, 1e-5);
  const auto rt = ref::named_tensors(rp);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(rt[i].name, t[i].name);
    EXPECT_EQ(rt[i].data->size(), t[i].size);
  }
}

TEST(Model, InitWeights) {
  const size_t V = 4096, C = 64, P = 128;
  const ModelConfig config = small_config(V, C, P, /*ln_f=*/true);
  Model a(config), b(config), c(config);
  // Non-default ln_f values first, so init_weights must reset them.
  for (size_t i = 0; i < C; ++i) {
    a.params().ln_f_g[i] = 3.0f;
    a.params().ln_f_b[i] = -2.0f;
  }
  a.init_weights(1234);
  b.init_weights(1234);
  c.init_weights(1235);
  const size_t n = a.num_parameters();
  EXPECT_TRUE(bit_identical(snapshot(a.param_data(), n), snapshot(b.param_data(), n)))
      << "same seed, different weights";
  EXPECT_FALSE(bit_identical(snapshot(a.param_data(), V * C), snapshot(c.param_data(), V * C)));
  EXPECT_FALSE(bit_identical(snapshot(a.params().wpe, P * C), snapshot(c.params().wpe, P * C)));

  auto moments = [](const float* x, size_t count) {
    double sum = 0, sq = 0;
    for (size_t i = 0; i < count; ++i) sum += x[i];
    const double mean = sum / count;
    for (size_t i = 0; i < count; ++i) sq += (x[i] - mean) * (x[i] - mean);
    return std::pair<double, double>(mean, std::sqrt(sq / count));
  };
  // 262144 samples: the sample std's relative standard error is 1/sqrt(2n) ≈ 0.14%, so 2% is > 10σ.
  const auto [wte_mean, wte_std] = moments(a.params().wte, V * C);
  EXPECT_NEAR(wte_std, 0.02, 0.02 * 0.02);
  EXPECT_NEAR(wte_mean, 0.0, 0.02 * 0.01);
  // 8192 samples: relative standard error ≈ 0.8%; 5% is > 6σ.
  const auto [wpe_mean, wpe_std] = moments(a.params().wpe, P * C);
  EXPECT_NEAR(wpe_std, 0.01, 0.01 * 0.05);
  EXPECT_NEAR(wpe_mean, 0.0, 0.01 * 0.05);
  for (size_t i = 0; i < C; ++i) {
    EXPECT_EQ(a.params().ln_f_g[i], 1.0f);
    EXPECT_EQ(a.params().ln_f_b[i], 0.0f);
  }
  // model.h's contract: wte then wpe drawn in that order from wte::Rng(seed), N(0, std²) each.
  Rng rng(1234);
  for (size_t i = 0; i < V * C; ++i) {
    const double expected = 0.02 * rng.normal();
    if (i < 16) {
      EXPECT_NEAR(a.params().wte[i], expected, 1e-6 * std::fabs(expected) + 1e-12) << i;
    }
  }
  for (size_t i = 0; i < 16; ++i) {
    const double expected = 0.01 * rng.normal();
    EXPECT_NEAR(a.params().wpe[i], expected, 1e-6 * std::fabs(expected) + 1e-12) << i;
  }
}

}  // namespace
}  // namespace wte
