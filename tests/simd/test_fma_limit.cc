// wte::fma_chains (simd/fma_limit.cc), the kernel behind wte profile's FMA limit, on every Highway
// target against its scalar reference ref::fma_chains<double>: the same chains, lanes and sum.
//
// The bound: each lane runs acc = acc·m + a with m = 1 - 2^-20 (a contraction: an error made in
// one step shrinks in the later ones), so after n steps a lane is within n·2u of the exact value
// (u = 2^-24; two roundings per step on targets without FMA, one with); its value stays within
// [1, 3], and the float sum of 12·L such lanes adds 12·L·u relative. n = 2000: 2000·2^-23 < 2.4e-4
// per lane. A skipped chain, a lost lane or a wrong update changes the sum by about one lane's
// value (>= 1), far above.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>

#include "hwy/highway.h"
#include "src/reference/kernels.h"
#include "tests/simd_test_util.h"
#include "wte/kernels.h"

namespace wte {
namespace {

class FmaChains : public test::TargetTest {};

TEST_P(FmaChains, EveryChainAndLaneMatchesTheScalarReference) {
  const float mul = 1.0f - 1.0f / 1048576, add = 1.0f / 1048576;
  for (size_t iterations : {0, 1, 7, 2000}) {
    size_t lanes = 0;
    const float got = fma_chains(1.5f, mul, add, iterations, &lanes);
    ASSERT_GE(lanes, 1u) << target();
    const double want = ref::fma_chains<double>(1.5, mul, add, iterations, lanes);
    const double bound = kFmaChains * lanes * (iterations * 0x1p-23 + 0x1p-24) * 3.0;
    EXPECT_NEAR(got, want, bound) << target() << ", " << iterations << " iterations, " << lanes
                                  << " lanes";
  }
}

TEST_P(FmaChains, LanesAreTheTargetsVectorWidth) {
  size_t lanes = 0;
  fma_chains(1.0f, 0.5f, 0.5f, 1, &lanes);
  // AVX2: 8 floats, AVX-512: 16, SSE4/SSSE3: 4, SCALAR: 1
  const int64_t t = GetParam();
  const size_t want = t == HWY_AVX2 ? 8 : t == HWY_AVX3 || t == HWY_AVX3_DL ? 16 : t == HWY_SCALAR ? 1 : 0;
  if (want == 0) GTEST_SKIP() << target() << ": width not listed here";
  EXPECT_EQ(lanes, want) << target();
}

WTE_INSTANTIATE_ON_EVERY_TARGET(FmaChains);

}  // namespace
}  // namespace wte
