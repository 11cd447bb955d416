// The cap on Highway's dispatch target (apply_simd_target_cap, the WTE_MAX_SIMD environment
// variable; simd/simd_target.cc): dispatch runs no better target than the cap, the target lists
// tests iterate over leave the better ones out, a cap above the CPU changes nothing, a bad name is
// an error that names the variable, the value and the allowed names. test_simd_cap.sh checks the
// environment variable itself in fresh processes (wte --version, a test binary, the Python module).
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "hwy/targets.h"
#include "wte/kernels.h"
#include "wte/simd_target.h"

namespace wte {
namespace {

// The targets this binary can run here, best first (the cap leaves the others out).
std::vector<int64_t> runnable() { return hwy::SupportedAndGeneratedTargets(); }

// Restores the cap the process started with (WTE_MAX_SIMD, if the suite runs under one).
class SimdTargetCap : public ::testing::Test {
 protected:
  void TearDown() override { apply_simd_target_cap(std::getenv("WTE_MAX_SIMD")); }
};

TEST_F(SimdTargetCap, DispatchRunsNoBetterTargetThanTheCap) {
  const std::vector<int64_t> targets = runnable();
  for (const int64_t cap : targets) {
    const std::string name = hwy::TargetName(cap);
    apply_simd_target_cap(name.c_str());
    EXPECT_EQ(simd_dispatch_target(), cap) << "capped at " << name << " but dispatch ran "
                                           << simd_target_name();
    EXPECT_EQ(simd_target_name(), name);
    EXPECT_EQ(simd_target_cap(), name);
    for (const int64_t t : hwy::SupportedAndGeneratedTargets())
      EXPECT_GE(t, cap) << "capped at " << name << ", the target list still has "
                        << hwy::TargetName(t);
  }
}

TEST_F(SimdTargetCap, NamesAreCaseInsensitiveAndEmptyRemovesTheCap) {
  const std::vector<int64_t> targets = runnable();
  if (targets.size() < 2) GTEST_SKIP() << "one Highway target runs here; no cap can change it";
  const int64_t worst = targets.back();
  std::string lower = hwy::TargetName(worst);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  apply_simd_target_cap(lower.c_str());
  EXPECT_EQ(simd_dispatch_target(), worst);
  apply_simd_target_cap("");
  EXPECT_EQ(simd_target_cap(), "");
  const std::vector<int64_t> uncapped = runnable();
  EXPECT_EQ(simd_dispatch_target(), uncapped.front());
}

TEST_F(SimdTargetCap, ACapAboveTheCpuChangesNothing) {
  apply_simd_target_cap(nullptr);
  const int64_t best = simd_dispatch_target();
  // The best name of this architecture (AVX3_DL on x86-64) is at or above every CPU's best.
  const std::string top = simd_target_names().front();
  apply_simd_target_cap(top.c_str());
  EXPECT_EQ(simd_dispatch_target(), best);
  EXPECT_EQ(simd_target_cap(), top);
}

TEST_F(SimdTargetCap, ABadNameIsAnErrorNamingTheVariableTheValueAndTheAllowedNames) {
  apply_simd_target_cap(nullptr);
  const int64_t before = simd_dispatch_target();
  try {
    apply_simd_target_cap("avx9");
    FAIL() << "no error for 'avx9'";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("WTE_MAX_SIMD"), std::string::npos) << what;
    EXPECT_NE(what.find("'avx9'"), std::string::npos) << what;
    for (const std::string& name : simd_target_names())
      EXPECT_NE(what.find(name), std::string::npos) << what << "\n does not list " << name;
  }
  EXPECT_EQ(simd_target_cap(), "") << "a bad name changed the cap";
  EXPECT_EQ(simd_dispatch_target(), before);
}

TEST(SimdTargetNames, ListTheArchitecturesTargetsBestFirst) {
  const std::vector<std::string> names = simd_target_names();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.back(), "SCALAR");
#if HWY_ARCH_X86
  const std::vector<std::string> x86 = {"AVX3_DL", "AVX3", "AVX2", "SSE4", "SSSE3"};
  for (size_t i = 0; i + 1 < x86.size(); ++i) {
    const auto a = std::find(names.begin(), names.end(), x86[i]);
    const auto b = std::find(names.begin(), names.end(), x86[i + 1]);
    ASSERT_TRUE(a != names.end() && b != names.end()) << x86[i] << " or " << x86[i + 1];
    EXPECT_LT(a, b) << x86[i] << " is better than " << x86[i + 1];
  }
#endif
}

}  // namespace
}  // namespace wte
