// The CPU's float32 FMA limit, measured: a loop of fused multiply-adds on registers only, with
// kFmaChains independent accumulator vectors (enough to cover an FMA's latency on every port:
// Zen 3 and Zen 4 have 2 FMA pipes of 4 cycles, Intel's cores 2 of 4, so 8 chains fill them; 12
// leave room and still fit AVX2's 16 registers beside the two constants). No loads or stores in the
// loop, so the time is lanes x FMA ports x clock alone. Contract: include/wte/kernels.h
// (fma_chains); scalar reference: ref::fma_chains in src/reference/kernels.h.

#include <cstddef>
#include <cstdint>

#include "wte/kernels.h"

// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/fma_limit.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace wte {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Chain c, lane i starts at start + (c·lanes + i)/1024 and runs acc = acc·mul + add `iterations`
// times; returns the sum of every chain's every lane (chains in order, lanes in order, in float).
// lanes: written with this target's lane count.
float FmaChains(float start, float mul, float add, size_t iterations, size_t* lanes) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const size_t L = hn::Lanes(d);
  *lanes = L;
  const V m = hn::Set(d, mul), a = hn::Set(d, add);
  const V step = hn::Mul(hn::Iota(d, 0.0f), hn::Set(d, 1.0f / 1024));
  V acc[kFmaChains];
  for (size_t c = 0; c < kFmaChains; ++c)
    acc[c] = hn::Add(hn::Set(d, start + static_cast<float>(c * L) / 1024), step);
  for (size_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
    // kFmaChains independent FMAs per iteration: the loop is bound by the FMA ports alone
    for (size_t c = 0; c < kFmaChains; ++c) acc[c] = hn::MulAdd(acc[c], m, a);
  }
  float sum = 0.0f;
  HWY_ALIGN float buf[hn::MaxLanes(d)];
  for (size_t c = 0; c < kFmaChains; ++c) {
    hn::Store(acc[c], d, buf);
    for (size_t i = 0; i < L; ++i) sum += buf[i];
  }
  return sum;
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace wte
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wte {

HWY_EXPORT(FmaChains);

float fma_chains(float start, float mul, float add, size_t iterations, size_t* lanes) {
  return HWY_DYNAMIC_DISPATCH(FmaChains)(start, mul, add, iterations, lanes);
}

}  // namespace wte
#endif  // HWY_ONCE
