// ExpNonPositive (simd/exp-inl.h), the exponential of every softmax kernel, against Highway's
// hn::Exp: the same bits for every x <= 0 on every compiled Highway target. This file is compiled
// once per target (hwy/foreach_target.h) so both functions run as each target's code.
//
// Inputs: every 97th float in [-110, 0] (11.6 million values, all exponents and mantissa patterns
// spread evenly), every float within 512 ulp of the points where the two implementations could
// part (q = trunc(x·log2(e) - 0.5) changes at x = -(k + 0.5)·ln 2; results become subnormal below
// -87.34 and underflow to 0 near -103.97; the cut-off at -104), and the special values -0, -inf,
// NaN and the smallest subnormal.

// As in the library (CMakeLists.txt: -ffp-contract=off for simd/), so no a*b+c is fused behind
// either function's back.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma clang fp contract(off)
#endif

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <vector>

// foreach_target.h must come before every other Highway header.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tests/simd/test_exp.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "simd/exp-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace wte {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// fast[i] = ExpNonPositive(x[i]), ref[i] = hn::Exp(x[i]): whole vectors, then one-lane vectors.
void ExpBoth(const float* HWY_RESTRICT x, size_t n, float* HWY_RESTRICT fast,
             float* HWY_RESTRICT ref) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  size_t i = 0;
  for (; i + L <= n; i += L) {
    const auto v = hn::LoadU(d, x + i);
    hn::StoreU(ExpNonPositive(d, v), d, fast + i);
    hn::StoreU(hn::Exp(d, v), d, ref + i);
  }
  const hn::CappedTag<float, 1> d1;
  for (; i < n; ++i) {
    const auto v = hn::LoadU(d1, x + i);
    hn::StoreU(ExpNonPositive(d1, v), d1, fast + i);
    hn::StoreU(hn::Exp(d1, v), d1, ref + i);
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace wte
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <gtest/gtest.h>

#include "tests/simd_test_util.h"

namespace wte {
HWY_EXPORT(ExpBoth);

namespace {

using test::TargetParamName;
using test::TargetTest;

// The inputs described at the top of the file.
std::vector<float> inputs() {
  std::vector<float> x;
  const uint32_t neg_zero = 0x80000000u, neg_110 = std::bit_cast<uint32_t>(-110.0f);
  for (uint32_t b = neg_zero; b <= neg_110; b += 97) x.push_back(std::bit_cast<float>(b));
  auto around = [&x](float c) {  // every float within 512 ulp of c (c < 0)
    const uint32_t b = std::bit_cast<uint32_t>(c);
    for (uint32_t k = b - 512; k <= b + 512; ++k)
      if (k >= neg_zero) x.push_back(std::bit_cast<float>(k));
  };
  for (int k = 0; k <= 160; ++k) around(static_cast<float>(-(k + 0.5) * std::log(2.0)));
  around(-87.336544f);  // exp(x) < FLT_MIN (2^-126): subnormal results from here down
  around(-103.972084f);  // exp(x) < half the smallest subnormal: 0
  around(-104.0f);       // hn::Exp's cut-off
  x.push_back(-0.0f);
  x.push_back(-std::numeric_limits<float>::infinity());
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  x.push_back(-std::numeric_limits<float>::denorm_min());
  return x;
}

class ExpNonPositiveTest : public TargetTest {};

TEST_P(ExpNonPositiveTest, SameBitsAsHighwayExpForEveryNonPositiveInput) {
  const std::vector<float> x = inputs();
  ASSERT_GT(x.size(), size_t{11000000});
  std::vector<float> fast(x.size()), ref(x.size());
  HWY_DYNAMIC_DISPATCH(ExpBoth)(x.data(), x.size(), fast.data(), ref.data());
  size_t mismatches = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const uint32_t f = std::bit_cast<uint32_t>(fast[i]), r = std::bit_cast<uint32_t>(ref[i]);
    if (f != r && ++mismatches <= 5) {
      ADD_FAILURE() << target() << ": x = " << x[i] << " (bits 0x" << std::hex
                    << std::bit_cast<uint32_t>(x[i]) << "): ExpNonPositive bits 0x" << f
                    << ", hn::Exp bits 0x" << r << std::dec;
    }
  }
  EXPECT_EQ(mismatches, size_t{0}) << target() << ": of " << x.size() << " inputs";
  // Not a vacuous comparison: the values are exponentials (exp(-0) = 1, exp(-1e-30) = 1,
  // underflow to 0 below -104, 0 for -inf and NaN as hn::Exp defines them).
  EXPECT_EQ(fast[0], 1.0f);
  EXPECT_EQ(fast[x.size() - 4], 1.0f);
  EXPECT_EQ(fast[x.size() - 3], 0.0f);
  EXPECT_EQ(fast[x.size() - 2], 0.0f);
  // And accurate: within 1 ulp of exp in double wherever the result is a normal float (hn::Exp's
  // documented bound), sampled.
  size_t checked = 0;
  for (size_t i = 0; i < x.size(); i += 101) {
    const double e = std::exp(static_cast<double>(x[i]));
    if (!(e >= std::numeric_limits<float>::min())) continue;
    const double ulp = std::ldexp(1.0, std::ilogb(e) - 23);
    ASSERT_LE(std::fabs(fast[i] - e), ulp) << target() << ": x = " << x[i];
    ++checked;
  }
  EXPECT_GT(checked, size_t{50000});
}

INSTANTIATE_TEST_SUITE_P(AllTargets, ExpNonPositiveTest,
                         ::testing::ValuesIn(hwy::SupportedAndGeneratedTargets()),
                         TargetParamName);

}  // namespace
}  // namespace wte
#endif  // HWY_ONCE
