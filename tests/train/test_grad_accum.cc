// Gradient accumulation (train.grad_accum_steps: Model::backward adds into the one gradient,
// zeroed once per step by Model::zero_grad), the start-up memory report and the refusal of a run
// that cannot fit:
//  - 4 micro-batches of B 2 give the loss and every gradient of one batch of B 8 within float
//    rounding (tied and untied, fused and unfused loss, with and without blocks);
//  - a `wte train` run with grad_accum_steps 4 has the losses of the same run without it, and
//    resumes bit for bit;
//  - the memory line names parameters, optimizer state, activations and the loss workspace; an
//    impossible configuration is refused before anything is written, naming the largest part and
//    the setting to change; under model.matmul_precision = bf16 the estimate adds the bf16 copies
//    of the parameters and of one step's GEMM inputs, by the bytes derived from the layout.
//
// Bound for the accumulated gradient: every entry is a sum of the same terms (per target token) as
// the one-batch entry, grouped per micro-batch (and, for the loss's scale 1/tokens, the same float
// factor); float32 summation of K terms errs by at most γ_K Σ|terms| in any grouping, which for
// these sizes (K <= N·V) stays under 1e-5 of the tensor's largest entry: the test allows
// max|accumulated - one batch| <= 1e-6 + 1e-5 · max|one batch| per tensor, and 1e-6 relative for
// the loss.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "src/model/matmul.h"
#include "tests/model_test_util.h"
#include "tests/test_util.h"
#include "wte/checkpoint.h"
#include "wte/config.h"
#include "wte/model.h"
#include "wte/optimizer.h"
#include "wte/rng.h"

namespace fs = std::filesystem;

namespace wte {
namespace {

using test::run;
using test::slurp;
using test::temp_dir;
using test::tiny_corpus;
using test::write;

const std::string kCli = WTE_CLI;

ModelConfig model_config(bool tied, size_t n_layer, size_t loss_chunk) {
  return {.vocab_size = 97, .d_model = 16, .n_ctx = 8, .n_layer = n_layer, .n_head = 2,
          .tie_embeddings = tied, .loss_chunk = loss_chunk,
          .loss_vocab_tile = loss_chunk > 0 ? size_t{13} : size_t{0}};
}

struct AccumCase {
  const char* label;
  bool tied;
  size_t n_layer, loss_chunk;
};

class GradAccumModel : public ::testing::TestWithParam<AccumCase> {};

TEST_P(GradAccumModel, FourMicroBatchesOfTwoAreOneBatchOfEight) {
  const AccumCase& tc = GetParam();
  const size_t B = 8, T = 7, K = 4, Bm = B / K;
  Model one(model_config(tc.tied, tc.n_layer, tc.loss_chunk));
  one.init_weights(11);
  Model micro(model_config(tc.tied, tc.n_layer, tc.loss_chunk));
  std::memcpy(micro.param_data(), one.param_data(), one.num_parameters() * sizeof(float));
  Rng rng(5);
  const auto [x, y] = test::random_batch(B * T, 97, &rng);
  const float loss_one = one.forward(x.data(), y.data(), B, T);
  one.backward();

  micro.zero_grad();
  double loss_sum = 0;
  for (size_t k = 0; k < K; ++k) {
    const float l = micro.forward(x.data() + k * Bm * T, y.data() + k * Bm * T, Bm, T, B * T);
    micro.backward();
    loss_sum += static_cast<double>(l) * static_cast<double>(Bm * T);
  }
  const double loss_micro = loss_sum / static_cast<double>(B * T);
  EXPECT_NEAR(loss_micro, loss_one, 1e-6 * std::abs(loss_one));

  for (const TensorSpec& t : one.tensors()) {
    if (t.sparse_grad) continue;
    double diff = 0, ref = 0;
    for (size_t i = 0; i < t.size; ++i) {
      diff = std::max(diff, std::abs(double(micro.grad_data()[t.offset + i]) - one.grad_data()[t.offset + i]));
      ref = std::max(ref, std::abs(double(one.grad_data()[t.offset + i])));
    }
    EXPECT_GT(ref, 0.0) << t.name << ": an all-zero gradient proves nothing";
    EXPECT_LE(diff, 1e-6 + 1e-5 * ref) << t.name << " (max |grad| " << ref << ")";
  }
  if (!tc.tied) {  // wte's row-sparse gradient: the micro-batches' rows merged
    const SparseRowGrad a = micro.wte_grad_rows(), b = one.wte_grad_rows();
    ASSERT_EQ(a.count, b.count);
    double diff = 0, ref = 0;
    for (size_t r = 0; r < a.count; ++r) {
      ASSERT_EQ(a.ids[r], b.ids[r]);
      for (size_t c = 0; c < a.C; ++c) {
        diff = std::max(diff, std::abs(double(a.rows[r * a.C + c]) - b.rows[r * b.C + c]));
        ref = std::max(ref, std::abs(double(b.rows[r * b.C + c])));
      }
    }
    EXPECT_LE(diff, 1e-6 + 1e-5 * ref) << "wte rows";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, GradAccumModel,
    ::testing::Values(AccumCase{"tied_unfused", true, 0, 0}, AccumCase{"untied_unfused", false, 0, 0},
                      AccumCase{"tied_fused", true, 0, 3}, AccumCase{"untied_fused", false, 0, 5},
                      AccumCase{"blocks_tied_fused", true, 2, 4},
                      AccumCase{"blocks_untied_unfused", false, 2, 0}),
    [](const ::testing::TestParamInfo<AccumCase>& info) { return info.param.label; });

TEST(GradAccumConfig, MustDivideTheBatch) {
  const std::string msg = test::error_of([] {
    parse_config("[train]\nbatch_size = 6\ngrad_accum_steps = 4\n", "test");
  });
  EXPECT_NE(msg.find("train.grad_accum_steps = 4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("does not divide train.batch_size = 6"), std::string::npos) << msg;
}

// ------------------------------------------------------------------------------------------------
// `wte train` as a user runs it.

std::string tiny_config(const fs::path& corpus) {
  return "[model]\nvocab_size = 300\nd_model = 16\nn_ctx = 16\nn_layer = 0\n"
         "[data]\ntext = " + corpus.string() + "\nseq_len = 16\nval_fraction = 0.1\n"
         "[train]\nbatch_size = 8\nsteps = 6\neval_interval = 3\neval_tokens = 256\nlog_interval = 1\n"
         "threads = 2\n[optim]\nlr = 0.01\nmin_lr = 0.001\nwarmup_steps = 2\n"
         "[checkpoint]\ninterval = 0\nkeep_last = 0\n";
}

// metrics.csv as step -> {train_loss, val_loss (or -1), grad_norm}.
std::map<int, std::vector<double>> metrics(const fs::path& path) {
  std::map<int, std::vector<double>> rows;
  std::istringstream in(slurp(path));
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::vector<std::string> cols;
    std::stringstream ss(line);
    std::string c;
    while (std::getline(ss, c, ',')) cols.push_back(c);
    if (cols.size() < 5) continue;
    rows[std::stoi(cols[0])] = {std::stod(cols[1]), cols[2].empty() ? -1.0 : std::stod(cols[2]),
                                std::stod(cols[4])};
  }
  return rows;
}

class GradAccumCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir(std::string("grad_accum_") +
                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
    write(dir_ / "corpus.txt", tiny_corpus());
    write(dir_ / "tiny.ini", tiny_config(dir_ / "corpus.txt"));
  }
  int train(const std::string& out, const std::string& extra, std::string* output) {
    return run(kCli + " train --config '" + (dir_ / "tiny.ini").string() + "' --out '" +
                   (dir_ / out).string() + "' " + extra,
               output);
  }
  fs::path dir_;
};

TEST_F(GradAccumCli, LossesMatchTheRunWithoutAccumulation) {
  std::string out_a, out_b;
  ASSERT_EQ(train("one", "", &out_a), 0) << out_a;
  ASSERT_EQ(train("four", "--train.grad_accum_steps=4", &out_b), 0) << out_b;
  // The memory line: micro-batches of 2 sequences, and no second gradient (backward adds).
  EXPECT_EQ(out_b.find("gradient accumulator"), std::string::npos) << out_b;
  EXPECT_NE(out_b.find("gradients "), std::string::npos) << out_b;
  EXPECT_NE(out_b.find("(B 2, T 16 per micro-batch)"), std::string::npos) << out_b;
  EXPECT_NE(out_a.find("(B 8, T 16 per micro-batch)"), std::string::npos) << out_a;
  const auto a = metrics(dir_ / "one" / "metrics.csv"), b = metrics(dir_ / "four" / "metrics.csv");
  ASSERT_EQ(a.size(), 6u);
  ASSERT_EQ(b.size(), 6u);
  for (const auto& [step, ra] : a) {
    const std::vector<double>& rb = b.at(step);
    // Same batches, same data order: the losses agree to float rounding (amplified a little by
    // AdamW over the steps: 1e-5 relative).
    EXPECT_NEAR(rb[0], ra[0], 1e-5 * std::abs(ra[0])) << "step " << step << " train loss";
    if (ra[1] >= 0) {
      EXPECT_NEAR(rb[1], ra[1], 1e-5 * std::abs(ra[1])) << "step " << step << " val";
    }
    EXPECT_NEAR(rb[2], ra[2], 1e-4 * std::abs(ra[2])) << "step " << step << " grad norm";
  }
}

TEST_F(GradAccumCli, ResumesBitForBit) {
  std::string out;
  const std::string k = "--train.grad_accum_steps=4 --model.loss_chunk=5 --model.loss_vocab_tile=64";
  ASSERT_EQ(train("straight", k, &out), 0) << out;
  EXPECT_NE(out.find("loss workspace"), std::string::npos) << out;
  EXPECT_NE(out.find("fused: 5 rows x 300 ids"), std::string::npos) << out;
  ASSERT_EQ(train("stopped", k + " --stop-at 4", &out), 0) << out;
  ASSERT_EQ(train("stopped", k + " --resume auto", &out), 0) << out;
  // Losses, lr and grad norm of every step: identical text (timing columns differ).
  const auto ma = metrics(dir_ / "straight" / "metrics.csv"),
             mb = metrics(dir_ / "stopped" / "metrics.csv");
  ASSERT_EQ(ma.size(), 6u);
  EXPECT_EQ(ma, mb);
  const Config cfg = load_config((dir_ / "straight" / "config.ini").string(), {});
  Model ma_model(cfg.model), mb_model(cfg.model);
  AdamW oa(ma_model), ob(mb_model);
  load_checkpoint((dir_ / "straight" / "checkpoint_00000006.h5").string(), ma_model, &oa);
  load_checkpoint((dir_ / "stopped" / "checkpoint_00000006.h5").string(), mb_model, &ob);
  EXPECT_EQ(0, std::memcmp(ma_model.param_data(), mb_model.param_data(),
                           ma_model.num_parameters() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(oa.m(), ob.m(), oa.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(oa.v(), ob.v(), oa.size() * sizeof(float)));
}

// The memory report names each part; an impossible request is refused before anything exists.
TEST_F(GradAccumCli, ImpossibleMemoryIsRefusedNamingThePartAndTheSetting) {
  std::string out;
  // Unfused logits of 2^20 x 1024 tokens x 300 ids (1.2 TB): refused, the hint names the fused loss
  // and gradient accumulation.
  const std::string huge = "--train.batch_size=1048576 --data.seq_len=1024 --model.n_ctx=1024";
  EXPECT_EQ(train("o", huge, &out), 1) << out;
  EXPECT_NE(out.find("the largest part is logits of one step"), std::string::npos) << out;
  EXPECT_NE(out.find("raise train.grad_accum_steps, or set model.loss_chunk"), std::string::npos) << out;
  EXPECT_EQ(out.find("bad_alloc"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir_ / "o")) << "a refused run left a directory";
  // Fused: the logits are gone from the estimate; the hidden states are now the largest part.
  EXPECT_EQ(train("o", huge + " --model.loss_chunk=64", &out), 1) << out;
  EXPECT_NE(out.find("the largest part is hidden states of one step"), std::string::npos) << out;
  EXPECT_NE(out.find("loss workspace (fused, 64 rows x vocab_size): 0.1 MiB"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir_ / "o"));
  // Accumulation over 2^16 micro-batches of 16 sequences makes the same batch fit in memory: the
  // run passes the memory check, reads the data (the "data:" line) and stops only there (the tiny
  // corpus has far fewer tokens than one sequence of 1024 needs).
  EXPECT_EQ(train("o", huge + " --model.loss_chunk=64 --train.grad_accum_steps=65536", &out), 1) << out;
  EXPECT_EQ(out.find("the largest part is"), std::string::npos) << out;
  EXPECT_NE(out.find("data: "), std::string::npos) << out;
  EXPECT_NE(out.find("fewer than data.seq_len + 1 = 1025"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir_ / "o"));
}

// The estimate counts the bf16 copies the GEMMs read under model.matmul_precision = bf16 (the
// loss's were counted before): the parameters' mirror and one step's GEMM inputs, 2 bytes an
// element, as src/model/model.cc lays them out (carve16). Both runs are refused (the (B, NH, T, T)
// attention probabilities of 2^20 sequences of 1024), and the refusal lists every part.
TEST_F(GradAccumCli, Bf16EstimateAddsTheBf16CopiesOfParametersAndGemmInputs) {
  const double V = 300, C = 64, P = 1024, L = 1, NH = 4, B = 1048576, T = 1024, N = B * T;
  const std::string huge =
      "--train.batch_size=1048576 --data.seq_len=1024 --model.n_ctx=1024 --model.d_model=64 "
      "--model.n_layer=1 --model.n_head=4 --model.loss_chunk=64 --model.attention=dense";
  // Parts by name, and the total, of a refusal: "this run needs about X of memory ... Estimate by
  // part:\n  NAME: X\n  ...".
  auto estimate = [&](const std::string& extra, std::string* total) {
    std::string out;
    EXPECT_EQ(train("o", huge + extra, &out), 1) << out;
    EXPECT_FALSE(fs::exists(dir_ / "o"));
    const size_t at = out.find("this run needs about "), of = out.find(" of memory", at);
    EXPECT_NE(at, std::string::npos) << out;
    *total = out.substr(at + 21, of - at - 21);
    std::map<std::string, std::string> parts;
    std::istringstream in(out.substr(out.find("Estimate by part:")));
    std::string line;
    while (std::getline(in, line)) {
      const size_t colon = line.rfind(": ");
      if (line.rfind("  ", 0) == 0 && colon != std::string::npos)
        parts[line.substr(2, colon - 2)] = line.substr(colon + 2);
    }
    return parts;
  };
  auto gib = [](double bytes) {  // as train/run_directory.cc prints them
    char buf[32];
    if (bytes >= 1024.0 * 1024 * 1024) std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / (1024.0 * 1024 * 1024));
    else std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1024.0 * 1024));
    return std::string(buf);
  };
  std::string total32, total16;
  const auto f32 = estimate("", &total32);
  const auto b16 = estimate(" --model.matmul_precision=bf16", &total16);
  if (!bf16_gemm_support().native) {
    // Without a native bf16 matmul the run falls back to float32 GEMMs, and its estimate is the
    // float32 one: no bf16 parts, the same total.
    EXPECT_EQ(b16, f32);
    EXPECT_EQ(total16, total32);
    GTEST_SKIP() << "oneDNN has no native bf16 matmul on this CPU (" << bf16_gemm_support().bf16_impl
                 << "): a bf16 run falls back to float32 (checked), so there are no bf16 parts to count";
  }
  // Derived: tied parameters V C + n_ctx C + 2 C + L (12 C^2 + 13 C); GEMM inputs h' (N C), per
  // block ln_1, attention output, ln_2 (N C each), GELU (4 N C), qkv (3 N C), probabilities
  // (B NH T^2), and the backward's scratch once (6 N C + B NH T^2: the linear layers' upstream
  // gradient (4 N C), the attention output's gradient and the residual stream's (N C each), d
  // preatt).
  const double params = V * C + P * C + 2 * C + L * (12 * C * C + 13 * C);
  const double params16 = 2 * params;
  const double inputs16 = 2 * (N * C + L * (10 * N * C + B * NH * T * T) + 6 * N * C + B * NH * T * T);
  auto part = [](const std::map<std::string, std::string>& parts, const std::string& name) {
    const auto it = parts.find(name);
    return it == parts.end() ? std::string("(no such part)") : it->second;
  };
  EXPECT_EQ(part(b16, "bf16 copy of the parameters"), gib(params16));
  EXPECT_EQ(part(b16, "bf16 copies of one step's GEMM inputs"), gib(inputs16));
  EXPECT_EQ(f32.count("bf16 copy of the parameters") + f32.count("bf16 copies of one step's GEMM inputs"), 0u);
  // Every float32 part is there unchanged (the loss workspace also holds its bf16 tile, and the
  // allocator's rounding covers the bf16 allocations too: not equal).
  EXPECT_EQ(b16.size(), f32.size() + 2);
  for (const auto& [name, value] : f32)
    if (name.rfind("loss workspace", 0) != 0 && name != "allocation rounding") {
      EXPECT_EQ(part(b16, name), value) << name;
    }
  // The derivation is the model's own layout: at a small shape a bf16 model's activation bytes
  // (its bf16 arena and parameter mirror included) exceed the float32 model's by it, plus the
  // loss's bf16 copy and under 64 bytes of alignment per bf16 view (6 per block, 6 more).
  {
    // The runs' config (V 300, n_ctx 16, n_head 4) with blocks, at a batch of 3 x 16.
    ModelConfig mc = parse_config(slurp(dir_ / "tiny.ini"), "tiny.ini",
                                  {"--model.d_model=64", "--model.n_layer=2"})
                         .model;
    Model m32(mc);
    mc.matmul_precision = MatmulPrecision::bf16;
    Model m16(mc);
    const double b = 3, t = 16, n = b * t, l = 2;
    m32.reserve(3, 16);
    m16.reserve(3, 16);
    const double derived = 2 * (m16.num_parameters() + n * mc.d_model +
                                l * (10 * n * mc.d_model + b * 4 * t * t) + 6 * n * mc.d_model +
                                b * 4 * t * t);
    const double loss16 = static_cast<double>(m16.loss_workspace_bytes()) -
                          static_cast<double>(m32.loss_workspace_bytes());
    const double extra = static_cast<double>(m16.activation_bytes()) -
                         static_cast<double>(m32.activation_bytes()) - loss16;
    EXPECT_GE(extra, derived);
    EXPECT_LE(extra, derived + 64 * (6 * l + 6)) << "bf16 bytes " << extra << ", derived " << derived;
  }
  // The totals differ by the derived bytes, to the printed 0.1 GiB (the loss's bf16 tile is
  // 64 rows x at most 300 ids: far below that).
  const double gib_ = 1024.0 * 1024 * 1024;
  ASSERT_NE(total32.find(" GiB"), std::string::npos);
  EXPECT_NEAR(std::stod(total16) - std::stod(total32), (params16 + inputs16) / gib_, 0.1)
      << total16 << " vs " << total32;
}

}  // namespace
}  // namespace wte
