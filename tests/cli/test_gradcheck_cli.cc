// `wte gradcheck` and `wte grad` as a user runs them (ctest -L gradcheck): the default config
// passes; the test build wte_faulty (lookup path of dwte dropped, see CMakeLists.txt) fails naming
// wte; the tied-sum case (both paths of dwte add into one row) and the duplicate-ids case pass
// through both commands from hand-made checkpoints (vocab_size 2 and 5: the shapes come from the
// tensors); bad token files are rejected with the id, line, position and vocab_size, and nothing
// is written. With blocks: a line per block tensor, and the test build wte_faulty_block (the
// blocks' GELU backward broken) fails on exactly the tensors behind the GELU.
#include <H5Cpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "wte/checkpoint.h"
#include "wte/config.h"
#include "src/analysis/gradcheck.h"
#include "wte/model.h"
#include "src/reference/model.h"
#include "wte/tokenizer.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;

namespace wte {
namespace {

using test::run;
using test::temp_dir;
using test::write;

const std::string kCli = WTE_CLI;
const std::string kFaulty = std::string(WTE_BINARY_DIR) + "/wte_faulty";

// A hand-made checkpoint: ModelConfig with the given shapes, parameters set by hand.
std::string write_checkpoint(const fs::path& dir, size_t V, size_t C, size_t n_ctx, bool ln_f,
                             const std::vector<float>& wte, const std::vector<float>& wpe) {
  Config cfg;
  cfg.model = wte::ModelConfig{};  // the embedding-only model (no blocks)
  cfg.model.vocab_size = V;
  cfg.model.d_model = C;
  cfg.model.n_ctx = n_ctx;
  cfg.model.ln_f = ln_f;
  cfg.data.seq_len = n_ctx;
  Model model(cfg.model);
  std::copy(wte.begin(), wte.end(), model.params().wte);
  std::copy(wpe.begin(), wpe.end(), model.params().wpe);
  const std::string path = (dir / "model.h5").string();
  save_checkpoint(path, model, nullptr, Tokenizer(), cfg, 0);
  return path;
}

std::vector<double> read_dataset(const std::string& path, const std::string& name) {
  H5::H5File file(path, H5F_ACC_RDONLY);
  H5::DataSet ds = file.openDataSet(name);
  const hssize_t n = ds.getSpace().getSimpleExtentNpoints();
  std::vector<double> v(static_cast<size_t>(n));
  ds.read(v.data(), H5::PredType::NATIVE_DOUBLE);
  return v;
}

TEST(GradcheckCli, DefaultConfigPasses) {
  const fs::path dir = temp_dir("gradcheck_default");
  std::string out;
  const int rc =
      run(kCli + " gradcheck --config " + WTE_SOURCE_DIR + "/configs/embedding_only.ini", &out);
  EXPECT_EQ(rc, 0) << out;
  for (const char* line : {"fd   wte ", "fd   wte:lookup", "fd   wte:unembedding", "fd   wpe ",
                           "fd   ln_f/g", "fd   ln_f/b", "f32  loss", "f32  logits", "f32  wte ",
                           "f32  wpe ", "f32  ln_f/g", "f32  ln_f/b", "gradcheck passed"})
    EXPECT_NE(out.find(line), std::string::npos) << "missing '" << line << "' in\n" << out;
  EXPECT_EQ(out.find("FAIL"), std::string::npos) << out;
  EXPECT_NE(out.find("vocab_size 64, d_model 16, n_ctx 8"), std::string::npos) << out;
}

// With blocks: one fd line and one f32 line for every block tensor, the residual stream after each
// block, untied (lm_head) and ln_f on; the whole run passes.
TEST(GradcheckCli, BlocksEveryTensorHasAnFdAndAnF32Line) {
  std::string out;
  const int rc = run(kCli + " gradcheck --model.n_layer=2 --model.n_head=2 "
                            "--model.tie_embeddings=false --model.ln_f=true",
                     &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("ln_f on, untied lm_head, n_layer 2, n_head 2;"), std::string::npos) << out;
  const char* block_tensors[] = {"ln_1/g", "ln_1/b", "attn/c_attn/w", "attn/c_attn/b",
                                 "attn/c_proj/w", "attn/c_proj/b", "ln_2/g", "ln_2/b",
                                 "mlp/c_fc/w", "mlp/c_fc/b", "mlp/c_proj/w", "mlp/c_proj/b"};
  for (int l = 0; l < 2; ++l)
    for (const char* t : block_tensors)
      for (const char* check : {"fd   h", "f32  h"}) {
        const std::string line = std::string(check) + std::to_string(l) + "/" + t + " ";
        EXPECT_NE(out.find(line), std::string::npos) << "missing '" << line << "' in\n" << out;
      }
  for (const char* line : {"f32  residual(1) ", "f32  residual(2) ", "fd   lm_head ",
                           "f32  lm_head ", "gradcheck passed"})
    EXPECT_NE(out.find(line), std::string::npos) << "missing '" << line << "' in\n" << out;
  EXPECT_EQ(out.find("FAIL"), std::string::npos) << out;
  // Every entry of a block weight is checked: c_fc/w is (16, 64).
  EXPECT_NE(out.find("fd   h1/mlp/c_fc/w    entries   1024"), std::string::npos) << out;
}

// The tiled attention (model.attention = tiled): the float model, whose blocks then run it, against
// the double reference: every f32 line passes.
TEST(GradcheckCli, TiledAttentionPasses) {
  std::string out;
  const int rc = run(kCli + " gradcheck --model.n_layer=2 --model.n_head=2 --model.attention=tiled",
                     &out);
  EXPECT_EQ(rc, 0) << out;
  for (const char* line : {"f32  residual(1) ", "f32  residual(2) ", "f32  h0/attn/c_attn/w ",
                           "f32  h1/attn/c_attn/b ", "gradcheck passed"})
    EXPECT_NE(out.find(line), std::string::npos) << "missing '" << line << "' in\n" << out;
  EXPECT_EQ(out.find("FAIL"), std::string::npos) << out;
}

// wte_faulty_block: the blocks' GELU backward forgets its chain term (tests/fault_injection_block.cc).
// The forward is right, so loss, logits and residual(l) pass; backward runs from the top, so ln_f
// and the last block's mlp/c_proj (computed before the first GELU) pass; every gradient after the
// faulty GELU fails, every fd line (the double reference) passes.
TEST(GradcheckCli, BrokenBlockGeluBackwardFailsExactlyTheTensorsBehindIt) {
  const std::string faulty = std::string(WTE_BINARY_DIR) + "/wte_faulty_block";
  if (!fs::exists(faulty)) GTEST_SKIP() << faulty << " not built (WTE_FAULT_INJECTION=OFF)";
  std::string out;
  const int rc = run(faulty + " gradcheck --model.n_layer=2 --model.n_head=2", &out);
  EXPECT_EQ(rc, 1) << out;
  const std::vector<std::string> passing = {"loss", "logits", "residual(1)", "residual(2)",
                                            "ln_f/g", "ln_f/b", "h1/mlp/c_proj/w",
                                            "h1/mlp/c_proj/b"};
  std::istringstream lines(out);
  std::string line;
  size_t f32_lines = 0, f32_fails = 0, fd_lines = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("  fd ", 0) == 0) {
      ++fd_lines;
      EXPECT_EQ(line.find("FAIL"), std::string::npos) << line;
    }
    if (line.rfind("  f32 ", 0) != 0) continue;
    ++f32_lines;
    std::istringstream words(line);
    std::string check, name;
    words >> check >> name;
    const bool should_pass = std::find(passing.begin(), passing.end(), name) != passing.end();
    const bool failed = line.find("FAIL") != std::string::npos;
    EXPECT_EQ(failed, !should_pass) << line;
    f32_fails += failed;
  }
  EXPECT_EQ(f32_lines, 4u + 4u + 24u) << out;  // loss, logits, residual x2; wte wpe ln_f x2; blocks
  EXPECT_EQ(f32_fails, 2u + 22u) << out;       // wte, wpe and 22 block tensors
  EXPECT_GT(fd_lines, 24u) << out;
  EXPECT_NE(out.find("gradcheck FAILED: wte (f32), wpe (f32), h0/ln_1/g (f32)"), std::string::npos)
      << out;
}

TEST(GradcheckCli, NHeadThatDoesNotDivideTheCheckedDModelIsAnError) {
  std::string out;
  const int rc = run(kCli + " gradcheck --model.n_layer=1 --n-head=3", &out);
  EXPECT_EQ(rc, 2) << "options that cannot be combined are bad usage\n" << out;
  EXPECT_NE(out.find("--n-head = 3 does not divide the checked d_model = 16"), std::string::npos)
      << out;
  EXPECT_EQ(out.find("finite differences"), std::string::npos) << "no work before the error\n" << out;
  // Without --n-head, the config's n_head is narrowed to divide the shrunk d_model, and said so.
  ASSERT_EQ(run(kCli + " gradcheck --model.n_layer=1 --model.d_model=128 --model.n_head=8 "
                       "--d-model 12", &out), 0) << out;
  EXPECT_NE(out.find("n_layer 1, n_head 4 (config's n_head 8 does not divide the checked d_model; "
                     "4 does)"), std::string::npos) << out;
}

TEST(GradcheckCli, BrokenLookupBackwardFailsNamingWte) {
  if (!fs::exists(kFaulty)) GTEST_SKIP() << kFaulty << " not built (WTE_FAULT_INJECTION=OFF)";
  const fs::path dir = temp_dir("gradcheck_faulty");
  std::string out;
  const int rc =
      run(kFaulty + " gradcheck --config " + WTE_SOURCE_DIR + "/configs/embedding_only.ini", &out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("gradcheck FAILED: wte (f32)"), std::string::npos) << out;
  // Only wte is wrong: the double reference's fd lines and the other float tensors still pass.
  EXPECT_NE(out.find("f32  wpe              entries    128"), std::string::npos) << out;
  std::istringstream lines(out);
  std::string line;
  size_t fails = 0;
  while (std::getline(lines, line))
    if (line.find("FAIL") != std::string::npos &&
        (line.rfind("  fd ", 0) == 0 || line.rfind("  f32 ", 0) == 0)) {
      ++fails;
      EXPECT_NE(line.find("f32  wte "), std::string::npos) << line;
    }
  EXPECT_GE(fails, 1u) << out;
}

// The tied-sum case, where the tied wte's lookup and unembedding paths add into one row: vocab 2,
// d 1, ln_f off, wte = [[1], [0]], wpe = [[0]], input 0, target 0 → loss 0.3132617,
// dwte = [-0.5378828, +0.2689414], dwpe = [-0.2689414]; each path of dwte[0] is -0.2689414
// (lookup: dh = Σ_v dlogits[v]·wte[v]; unembedding: dlogits[0]·h).
TEST(GradcheckCli, TiedSumThroughGradcheckAndGrad) {
  const fs::path dir = temp_dir("gradcheck_tied_sum");
  const std::string ckpt = write_checkpoint(dir, 2, 1, 1, false, {1.0f, 0.0f}, {0.0f});
  write(dir / "tokens.txt", "0 0\n");
  std::string out;
  EXPECT_EQ(run(kCli + " gradcheck --checkpoint " + ckpt + " --batch " +
                    (dir / "tokens.txt").string(), &out), 0) << out;
  EXPECT_NE(out.find("vocab_size 2, d_model 1, n_ctx 1, ln_f off"), std::string::npos) << out;
  EXPECT_NE(out.find("gradcheck passed"), std::string::npos) << out;

  for (const char* precision : {"float32", "float64"}) {
    SCOPED_TRACE(precision);
    const std::string grads = (dir / (std::string(precision) + ".h5")).string();
    ASSERT_EQ(run(kCli + " grad --checkpoint " + ckpt + " --batch " +
                      (dir / "tokens.txt").string() + " --out " + grads + " --precision " +
                      precision, &out), 0) << out;
    const double tol = std::string(precision) == "float32" ? 1e-6 : 1e-7;
    EXPECT_NEAR(read_dataset(grads, "loss")[0], 0.3132617, tol);
    const std::vector<double> dwte = read_dataset(grads, "wte");
    ASSERT_EQ(dwte.size(), 2u);
    EXPECT_NEAR(dwte[0], -0.5378828, tol);
    EXPECT_NEAR(dwte[1], 0.2689414, tol);
    EXPECT_NEAR(read_dataset(grads, "wpe")[0], -0.2689414, tol);
    const std::vector<double> logits = read_dataset(grads, "logits");
    ASSERT_EQ(logits.size(), 2u);
    EXPECT_EQ(logits[0], 1.0);
    EXPECT_EQ(logits[1], 0.0);
  }
  // The paths, as gradcheck checks them: the untied model at lm_head = wte.
  ref::ModelParams<double> u(2, 1, 1, false, 1e-5);
  u.wte = {1.0, 0.0};
  u.lm_head = u.wte;
  u.wpe = {0.0};
  ref::ModelGrads<double> g;
  const int32_t zero = 0;
  ref::model_forward_backward(u, &zero, &zero, 1, 1, &g);
  EXPECT_NEAR(g.wte[0], -0.2689414, 1e-7);       // lookup path
  EXPECT_NEAR(g.lm_head[0], -0.2689414, 1e-7);   // unembedding path
  EXPECT_EQ(g.wte[1], 0.0);                      // row 1 is not looked up: exactly 0
}

// grads.h5's attribute 'model' names the precision the float32 run's GEMMs had: bf16 inputs on a
// checkpoint with model.matmul_precision = bf16 (where the CPU runs bf16 GEMMs), float32 otherwise.
TEST(GradcheckCli, GradNamesTheGemmPrecisionOfTheCheckpoint) {
  const fs::path dir = temp_dir("grad_bf16_attr");
  write(dir / "tokens.txt", "1 2 3 4\n");
  for (const char* precision : {"f32", "bf16"}) {
    SCOPED_TRACE(precision);
    Config cfg;  // a hand-made model (vocab_size 8 is below the config parser's range)
    cfg.model.vocab_size = 8, cfg.model.d_model = 8, cfg.model.n_ctx = 4;
    cfg.model.n_layer = 1, cfg.model.n_head = 2;
    cfg.model.matmul_precision =
        std::string(precision) == "bf16" ? MatmulPrecision::bf16 : MatmulPrecision::f32;
    cfg.data.seq_len = 4;
    Model model(cfg.model);
    model.init_weights(1);
    const bool bf16 = model.gemm_precision() == MatmulPrecision::bf16;
    const std::string ckpt = (dir / (std::string(precision) + ".h5")).string();
    save_checkpoint(ckpt, model, nullptr, Tokenizer(), cfg, 0);
    const std::string grads = (dir / (std::string(precision) + "_grads.h5")).string();
    std::string out;
    ASSERT_EQ(run(kCli + " grad --checkpoint " + ckpt + " --batch " + (dir / "tokens.txt").string() +
                      " --out " + grads, &out), 0) << out;
    H5::H5File file(grads, H5F_ACC_RDONLY);
    H5::Attribute a = file.openGroup("/").openAttribute("model");
    std::string text;
    a.read(a.getStrType(), text);
    EXPECT_EQ(text, bf16 ? "wte::Model (oneDNN + Highway, bf16 GEMM inputs, float32 accumulation)"
                         : "wte::Model (oneDNN + Highway, float32)");
    if (std::string(precision) == "bf16" && !bf16)
      std::printf("no native bf16 GEMMs on this CPU: the bf16 checkpoint runs float32 GEMMs\n");
  }
}

// Duplicate ids through the whole model: vocab 5, d 2, inputs [3, 1, 3] (one sequence
// "3 1 3 0"): gradcheck passes with rows 0, 2, 4 exactly zero on the lookup path, and grads.h5's
// dwte is the unembedding path plus, for rows 1 and 3, the summed upstream rows of their positions.
TEST(GradcheckCli, DuplicatesThroughGradcheckAndGrad) {
  for (bool ln_f : {false, true}) {
    SCOPED_TRACE(ln_f ? "ln_f on" : "ln_f off");
    const fs::path dir = temp_dir(ln_f ? "gradcheck_duplicates_lnf" : "gradcheck_duplicates");
    const std::vector<float> wte = {0.5f, -0.25f, 1.0f, 0.75f, -0.5f, 0.125f, 0.25f, 1.5f, -1.0f, 0.5f};
    const std::vector<float> wpe = {0.125f, 0.0f, -0.25f, 0.5f, 0.0f, -0.125f};
    const std::string ckpt = write_checkpoint(dir, 5, 2, 3, ln_f, wte, wpe);
    write(dir / "tokens.txt", "3 1 3 0\n");
    std::string out;
    EXPECT_EQ(run(kCli + " gradcheck --checkpoint " + ckpt + " --batch " +
                      (dir / "tokens.txt").string(), &out), 0) << out;
    EXPECT_NE(out.find("2 rows in the batch, 3 of 3 rows outside it; rows outside: exactly 0"),
              std::string::npos) << out;
    const std::string grads = (dir / "grads.h5").string();
    ASSERT_EQ(run(kCli + " grad --checkpoint " + ckpt + " --batch " +
                      (dir / "tokens.txt").string() + " --out " + grads + " --precision float64",
                  &out), 0) << out;
    const std::vector<double> dwte = read_dataset(grads, "wte");
    ref::ModelParams<double> u(5, 2, 3, ln_f, 1e-5);  // model.ln_eps as configured (wte grad's reference uses it exactly)
    u.wte.assign(wte.begin(), wte.end());
    u.wpe.assign(wpe.begin(), wpe.end());
    u.lm_head = u.wte;
    ref::ModelGrads<double> g;
    ref::ModelActivations<double> act;
    const int32_t inputs[3] = {3, 1, 3}, targets[3] = {1, 3, 0};
    ref::model_forward_backward(u, inputs, targets, 1, 3, &g, &act);
    for (size_t v = 0; v < 5; ++v)
      for (size_t c = 0; c < 2; ++c) {
        const size_t i = v * 2 + c;
        EXPECT_NEAR(dwte[i], g.lm_head[i] + g.wte[i], 1e-15) << "dwte[" << v << "," << c << "]";
        if (v == 0 || v == 2 || v == 4) {
          EXPECT_EQ(g.wte[i], 0.0);
          EXPECT_EQ(dwte[i], g.lm_head[i]);  // only the unembedding path
        }
      }
    // float32 production model: same numbers to float precision.
    const std::string grads32 = (dir / "grads32.h5").string();
    ASSERT_EQ(run(kCli + " grad --checkpoint " + ckpt + " --batch " +
                      (dir / "tokens.txt").string() + " --out " + grads32, &out), 0) << out;
    const std::vector<double> dwte32 = read_dataset(grads32, "wte");
    for (size_t i = 0; i < 10; ++i) EXPECT_NEAR(dwte32[i], dwte[i], 1e-6) << i;
  }
}

TEST(GradcheckCli, BadTokenFilesWriteNothing) {
  const fs::path dir = temp_dir("gradcheck_bad_tokens");
  const std::string ckpt = write_checkpoint(dir, 5, 2, 3, false, std::vector<float>(10, 0.5f),
                                            std::vector<float>(6, 0.0f));
  const std::string grads = (dir / "grads.h5").string();
  struct Case {
    const char* text;
    const char* expected;
  } cases[] = {
      {"0 1 2\n3 5 1\n", "line 2, position 2: token id 5 is outside [0, vocab_size=5)"},
      {"0 1 -1\n", "line 1, position 3: token id -1 is outside [0, vocab_size=5)"},
      {"0 1 2\n0 1\n", "line 2 has 2 ids but line 1 has 3"},
      {"0 x 2\n", "'x' is not an integer token id"},
      {"0 1 2 3 4\n", "T=4, which exceeds n_ctx=3"},
      {"\n\n", "has no token ids"},
  };
  for (const Case& c : cases) {
    write(dir / "tokens.txt", c.text);
    std::string out;
    EXPECT_EQ(run(kCli + " grad --checkpoint " + ckpt + " --batch " +
                      (dir / "tokens.txt").string() + " --out " + grads, &out), 1) << out;
    EXPECT_NE(out.find(c.expected), std::string::npos) << c.text << " -> " << out;
    EXPECT_FALSE(fs::exists(grads));
    EXPECT_FALSE(fs::exists(grads + ".tmp"));
    EXPECT_EQ(run(kCli + " gradcheck --checkpoint " + ckpt + " --batch " +
                      (dir / "tokens.txt").string(), &out), 1) << out;
    EXPECT_NE(out.find(c.expected), std::string::npos) << c.text << " -> " << out;
  }
  std::string out;
  EXPECT_EQ(run(kCli + " grad --checkpoint " + (dir / "missing.h5").string() + " --batch " +
                    (dir / "tokens.txt").string() + " --out " + grads, &out), 1);
  EXPECT_NE(out.find("missing.h5' does not exist"), std::string::npos) << out;
}

TEST(GradcheckCli, TightToleranceFailsAndIsSettable) {
  // The check can fail: a tolerance below float32's rounding fails the f32 lines and exits 1.
  const fs::path dir = temp_dir("gradcheck_tolerance");
  std::string out;
  EXPECT_EQ(run(kCli + " gradcheck --f32-atol 1e-30 --f32-rtol 1e-12", &out), 1) << out;
  EXPECT_NE(out.find("gradcheck FAILED"), std::string::npos) << out;
  EXPECT_EQ(run(kCli + " gradcheck --atol 0", &out), 2) << out;  // bad usage, not a failed check
  EXPECT_NE(out.find("--atol"), std::string::npos) << out;
}

}  // namespace
}  // namespace wte
