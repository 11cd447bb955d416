// The GEMM layer's libraries (src/model/matmul.h, gemm_blas.h, gemm_plan.h): every float32 GEMM
// library, forced with Gemm::set_choice, against a double reference at awkward shapes (M, N, K of
// 1, 3, 17, 64, 129), every layout the model uses (each operand row-major or a transpose by
// strides, padded leading dimensions), with bias and with accumulate (dst +=); the same bits twice
// for a fixed choice; the planner's cache file; WTE_GEMM's parsing.
//
// The bound, per entry (u = 2^-24; γ_K = K·u / (1 - K·u), the worst-case relative error of a float
// sum of K products in any order, with or without FMA: Higham, Accuracy and Stability of Numerical
// Algorithms, §3.1; so it holds for any blocking a library picks): dst = Σ_k a·b (+ bias) (+ old)
// is within γ_{K+2} · (Σ_k |a·b| + |bias| + |old|) of the double result. A wrong operand, a
// transposed view read the wrong way or an accumulate that overwrites moves an entry by about its
// own size.
#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "src/model/gemm_plan.h"
#include "src/model/matmul.h"
#include "wte/error.h"

namespace wte {
namespace {

constexpr double kU = 0x1p-24;
double gamma_k(size_t K) { return K * kU / (1 - K * kU); }

GemmLibrary library_of(GemmChoice c) {
  return c == GemmChoice::openblas ? GemmLibrary::openblas
         : c == GemmChoice::blis   ? GemmLibrary::blis
                                   : GemmLibrary::onednn;
}

// A (rows, cols) operand stored row-major with leading dimension ld >= cols (trans false), or as
// the transpose of a row-major (cols, rows) matrix with ld >= rows (trans true).
struct Stored {
  std::vector<float> data;
  MatView view;
  size_t rows, cols;
  bool trans;
  size_t ld;
  float at(size_t i, size_t j) const { return trans ? data[j * ld + i] : data[i * ld + j]; }
};

Stored make_operand(size_t rows, size_t cols, bool trans, size_t pad, uint32_t seed) {
  Stored s{{}, {}, rows, cols, trans, (trans ? rows : cols) + pad};
  const size_t outer = trans ? cols : rows;
  s.data.resize(outer * s.ld);
  for (float& x : s.data) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int32_t>(seed >> 9) - (1 << 22)) / static_cast<float>(1 << 22);
  }
  const auto r = static_cast<int64_t>(rows), c = static_cast<int64_t>(cols),
             ld = static_cast<int64_t>(s.ld);
  s.view = trans ? MatView{{r, c}, {1, ld}} : MatView{{r, c}, {ld, 1}};
  return s;
}

struct Case {
  size_t M, N, K;
  bool trans_a, trans_b, bias, accumulate;
  size_t pad;
};

std::string describe(const Case& c, GemmChoice g) {
  std::ostringstream o;
  o << to_string(g) << " M" << c.M << " N" << c.N << " K" << c.K << (c.trans_a ? " At" : " An")
    << (c.trans_b ? " Bt" : " Bn") << (c.bias ? " bias" : "") << (c.accumulate ? " +=" : "")
    << " pad" << c.pad;
  return o.str();
}

// Runs the case on `g` and checks every entry against the double reference; returns dst.
std::vector<float> check_case(const Case& c, GemmChoice g) {
  const Stored a = make_operand(c.M, c.K, c.trans_a, c.pad, 11), b = make_operand(c.K, c.N, c.trans_b, c.pad, 23);
  const Stored bias = make_operand(1, c.N, false, 0, 37);
  const size_t ldc = c.N + c.pad;
  std::vector<float> dst((c.M - 1) * ldc + c.N);
  for (size_t i = 0; i < dst.size(); ++i) dst[i] = c.accumulate ? 0.25f * static_cast<float>(i % 7) : NAN;
  const std::vector<float> old = dst;
  Gemm gemm;
  gemm.set_choice(g);
  const auto M = static_cast<int64_t>(c.M), N = static_cast<int64_t>(c.N);
  gemm.run(dst.data(), MatView{{M, N}, {static_cast<int64_t>(ldc), 1}}, a.data.data(), a.view,
           b.data.data(), b.view, c.bias ? bias.data.data() : nullptr, c.accumulate);
  gemm.wait();
  const std::vector<GemmKernel> kernels = gemm.kernels();
  EXPECT_EQ(kernels.size(), 1u);
  if (!kernels.empty())
    EXPECT_EQ(kernels[0].library, library_of(g)) << describe(c, g) << ": ran " << kernels[0].impl;
  size_t outside = 0;
  for (size_t i = 0; i < c.M; ++i)
    for (size_t j = 0; j < c.N; ++j) {
      double want = 0, mag = 0;
      for (size_t k = 0; k < c.K; ++k) {
        const double p = static_cast<double>(a.at(i, k)) * b.at(k, j);
        want += p;
        mag += std::fabs(p);
      }
      if (c.bias) want += bias.data[j], mag += std::fabs(bias.data[j]);
      if (c.accumulate) want += old[i * ldc + j], mag += std::fabs(old[i * ldc + j]);
      const float got = dst[i * ldc + j];
      const double err = std::fabs(got - want);
      if (!std::isfinite(got) || !(err <= gamma_k(c.K + 2) * mag + 1e-40)) {
        if (++outside <= 3)
          ADD_FAILURE() << describe(c, g) << " dst[" << i << "," << j << "]: " << got
                        << ", double " << want << ", |diff| " << err;
      }
    }
  EXPECT_EQ(outside, 0u) << describe(c, g);
  // the padding between rows of dst is never written
  for (size_t i = 0; i + 1 < c.M; ++i)
    for (size_t j = c.N; j < ldc; ++j)
      if (!c.accumulate) EXPECT_TRUE(std::isnan(dst[i * ldc + j])) << describe(c, g) << " padding";
  return dst;
}

class GemmLibraries : public ::testing::TestWithParam<GemmChoice> {
 protected:
  void SetUp() override {
    if (!gemm_library_available(library_of(GetParam())))
      GTEST_SKIP() << to_string(GetParam()) << " cannot run here: "
                   << gemm_library_version(library_of(GetParam()));
  }
};

TEST_P(GemmLibraries, MatchTheDoubleReferenceAtAwkwardShapesEveryLayoutBiasAndAccumulate) {
  const size_t sizes[] = {1, 3, 17, 64, 129};
  for (size_t M : sizes)
    for (size_t N : sizes)
      for (size_t K : sizes)
        for (int layout = 0; layout < 4; ++layout) {
          const bool ta = layout & 1, tb = layout & 2;
          const size_t pad = (M + N + K) % 3;  // padded leading dimensions on some cases
          check_case({M, N, K, ta, tb, false, false, pad}, GetParam());
          check_case({M, N, K, ta, tb, false, true, pad}, GetParam());
          if (M * N * K > 1000) continue;  // bias: the small cases suffice
          check_case({M, N, K, ta, tb, true, false, pad}, GetParam());
          check_case({M, N, K, ta, tb, true, true, pad}, GetParam());
        }
}

TEST_P(GemmLibraries, TheModelsLayoutsAtTwoThreadsMatchTheReference) {
  // The step's GEMMs in miniature: forward with bias, dinp = dout·wᵀ, dw += xᵀ·dout.
  const int before = omp_get_max_threads();
  omp_set_num_threads(2);
  check_case({300, 96, 40, false, false, true, false, 0}, GetParam());
  check_case({300, 40, 96, false, true, false, false, 0}, GetParam());
  check_case({40, 96, 300, true, false, false, true, 0}, GetParam());
  omp_set_num_threads(before);
}

TEST_P(GemmLibraries, SameBitsTwiceForAFixedChoice) {
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    const Case c{257, 130, 200, true, false, false, true, 0};
    const std::vector<float> first = check_case(c, GetParam()), second = check_case(c, GetParam());
    EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)), 0)
        << to_string(GetParam()) << " at " << threads << " threads";
  }
}

INSTANTIATE_TEST_SUITE_P(Each, GemmLibraries,
                         ::testing::Values(GemmChoice::onednn, GemmChoice::openblas,
                                           GemmChoice::blis),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// The environment of one test: sets a variable, restores it after.
struct ScopedEnv {
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* v = std::getenv(name)) old_ = v, had_ = true;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { had_ ? setenv(name_, old_.c_str(), 1) : unsetenv(name_); }
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(GemmChoiceEnv, WteGemmSetsTheChoiceWhereTheConfigSaysAutoAndBadValuesAreNamed) {
  {
    ScopedEnv env("WTE_GEMM", "onednn");
    EXPECT_EQ(resolve_gemm_choice(GemmChoice::automatic), GemmChoice::onednn);
    if (gemm_library_available(GemmLibrary::openblas))
      EXPECT_EQ(resolve_gemm_choice(GemmChoice::openblas), GemmChoice::openblas);
  }
  ScopedEnv env("WTE_GEMM", "mkl");
  try {
    resolve_gemm_choice(GemmChoice::automatic);
    FAIL() << "WTE_GEMM=mkl accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("WTE_GEMM = 'mkl'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Gemm{}, UsageError);
}

// The planner in a folder of its own (a fresh process per test: ctest runs each test alone).
TEST(GemmPlanner, ChoosesOnceWritesTheCacheAndLaterGemmsOfTheShapeTakeItsChoice) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("wte_gemm_plan_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  ScopedEnv cache("WTE_GEMM_CACHE", dir.string());
  ScopedEnv choice("WTE_GEMM", "auto");
  const std::string path = gemm_plan_cache_path();
  ASSERT_EQ(path.rfind(dir.string(), 0), 0u) << path;
  // A hostile file: garbage lines, an unknown library, a key with no library; none may crash or
  // count, and a valid line for another key is kept.
  std::filesystem::create_directories(dir);
  {
    std::ofstream f(path);
    f << "garbage\n\t\tonednn\nf32 M1 N1 K1\tmkl\nno tab at all\n" << std::string(5000, 'x') << "\n";
  }
  const Case c{200, 64, 96, false, true, false, false, 0};
  const std::vector<float> first = check_case(c, GemmChoice::automatic);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  const size_t line = s.find("f32 M200 N64 K96 An96 Bt96 C64 threads");
  ASSERT_NE(line, std::string::npos) << s;
  const std::string rest = s.substr(line, s.find('\n', line) - line);
  EXPECT_TRUE(rest.find("\tonednn\t") != std::string::npos ||
              rest.find("\topenblas\t") != std::string::npos ||
              rest.find("\tblis\t") != std::string::npos)
      << rest;
  // A second Gemm takes the plan (no second line) and computes the same bits.
  const std::vector<float> second = check_case(c, GemmChoice::automatic);
  EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)), 0);
  std::ifstream in2(path);
  std::stringstream text2;
  text2 << in2.rdbuf();
  EXPECT_EQ(text2.str(), s);
  std::filesystem::remove_all(dir);
}

TEST(GemmPlanner, AChoiceAlreadyInTheFileIsTakenWithoutTiming) {
  if (!gemm_library_available(GemmLibrary::blis)) GTEST_SKIP() << "BLIS cannot run here";
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("wte_gemm_plan_b_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ScopedEnv cache("WTE_GEMM_CACHE", dir.string());
  ScopedEnv choice("WTE_GEMM", "auto");
  omp_set_num_threads(1);
  {
    std::ofstream f(gemm_plan_cache_path());
    f << "# written by the test\nf32 M33 N20 K7 An7 Bn20 C20 threads1\tblis\n";
  }
  Gemm gemm;
  std::vector<float> a(33 * 7, 1.0f), b(7 * 20, 0.5f), dst(33 * 20);
  gemm.run(dst.data(), plain(33, 20), a.data(), plain(33, 7), b.data(), plain(7, 20));
  ASSERT_EQ(gemm.kernels().size(), 1u);
  EXPECT_EQ(gemm.kernels()[0].library, GemmLibrary::blis) << gemm.kernels()[0].impl;
  EXPECT_EQ(dst[0], 3.5f);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace wte
