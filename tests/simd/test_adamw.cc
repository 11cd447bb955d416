// The AdamW kernel (simd/adamw.cc: adamw_update; contract in include/wte/kernels.h) against its
// scalar reference (src/reference/kernels.h: PyTorch's formula), bit for bit, on every Highway target
// compiled into this binary and supported by this CPU (one parameterized instance per target), at
// sizes around the vector widths and across OpenMP chunks, inside NaN guard bands; and by hand.
// The double-precision check of the formula is tests/reference/test_gradcheck_ops.cc's.

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "hwy/targets.h"
#include "wte/kernels.h"
#include "src/reference/kernels.h"
#include "tests/simd_test_util.h"

namespace wte {
namespace {

using test::AtOneAndTwoThreads;
using test::BitIdentical;
using test::fill_exact;
using test::fill_general;
using test::GuardedBuffer;

// Sizes around the float lane counts of SSE (4), AVX2 (8) and AVX3 (16).
const std::vector<size_t> kSizes = {1,  2,  3,  4,  5,  7,  8,  9,   15,  16,  17,  31,
                                    32, 33, 47, 48, 63, 64, 65, 127, 128, 129, 130, 257};

// Forces one Highway target for the duration of each test; resets the mock afterwards.
class AdamWKernelTest : public test::TargetTest {};

// ------------------------------------------------------------------------------------------------
// adamw_update

TEST_P(AdamWKernelTest, MatchesReferenceBitForBit) {
  std::mt19937 rng(8);
  const AdamWParams hp0{1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1};
  std::vector<size_t> sizes = kSizes;
  sizes.push_back(10007);  // several OpenMP chunks
  for (size_t n : sizes) {
    GuardedBuffer params(n), grads(n), m(n), v(n);
    fill_general(params.data(), n, rng);
    std::fill(m.data(), m.data() + n, 0.0f);
    std::fill(v.data(), v.data() + n, 0.0f);
    std::vector<float> want_params = params.to_vector(), want_m(n, 0.0f), want_v(n, 0.0f);
    for (int64_t step = 1; step <= 5; ++step) {
      fill_general(grads.data(), n, rng, 0.1f);
      AdamWParams hp = hp0;
      hp.step = step;
      omp_set_num_threads(step % 2 == 0 ? 2 : 1);
      adamw_update(params.data(), grads.data(), m.data(), v.data(), n, hp);
      ref::adamw_update<float>(want_params.data(), grads.data(), want_m.data(), want_v.data(), n,
                               hp.lr, hp.beta1, hp.beta2, hp.eps, hp.weight_decay, step);
      using Named = std::tuple<const char*, const float*, const float*>;
      for (auto [name, got, want] :
           {Named{"param", params.data(), want_params.data()}, Named{"m", m.data(), want_m.data()},
            Named{"v", v.data(), want_v.data()}}) {
        EXPECT_TRUE(BitIdentical(got, want, n)) << target() << " n=" << n << " step " << step << " "
                                                << name;
      }
    }
    EXPECT_TRUE(params.guards_intact() && grads.guards_intact() && m.guards_intact() &&
                v.guards_intact())
        << target() << " n=" << n;
  }
}

// By hand, step 1 from zero moments with g = 1: m = 1 - beta1, v = 1 - beta2 (exact float
// subtractions of the float betas: 0.999f is 0.99900001, so v = 0.00099998713, not 0.001);
// m_hat = m / (1 - beta1) = 1 and v_hat = 1 exactly, update = 1 / (1 + 1e-8), param = -0.1.
TEST_P(AdamWKernelTest, FirstStepByHand) {
  float param = 0.0f, grad = 1.0f, m = 0.0f, v = 0.0f;
  adamw_update(&param, &grad, &m, &v, 1, AdamWParams{0.1f, 0.9f, 0.999f, 1e-8f, 0.0f, 1});
  EXPECT_NEAR(param, -0.1, 1e-6) << target();
  EXPECT_EQ(m, 1.0f - 0.9f) << target();
  EXPECT_EQ(v, 1.0f - 0.999f) << target();
}

// The clipping factor inside AdamW: the same bits as the reference with that factor, and as
// scaling the gradients in place first (what clip_grad_norm did before every update).
TEST_P(AdamWKernelTest, GradScaleEqualsScalingTheGradientsFirst) {
  std::mt19937 rng(18);
  std::vector<size_t> sizes = kSizes;
  sizes.push_back(10007);
  const float scale = 0.37123f;
  for (size_t n : sizes) {
    GuardedBuffer params(n), grads(n), m(n), v(n);
    fill_general(params.data(), n, rng);
    fill_general(grads.data(), n, rng, 0.1f);
    fill_general(m.data(), n, rng, 0.01f);
    for (size_t i = 0; i < n; ++i) v[i] = 1e-4f * (1.0f + static_cast<float>(i % 7));
    std::vector<float> p2 = params.to_vector(), m2 = m.to_vector(), v2 = v.to_vector(),
                       scaled = grads.to_vector(), p3 = p2, m3 = m2, v3 = v2;
    for (float& g : scaled) g *= scale;
    const std::vector<float> grads_before = grads.to_vector();
    const AdamWParams hp{1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 3};
    omp_set_num_threads(n % 2 == 0 ? 2 : 1);
    adamw_update(params.data(), grads.data(), m.data(), v.data(), n, hp, scale);
    adamw_update(p2.data(), scaled.data(), m2.data(), v2.data(), n, hp);
    ref::adamw_update<float>(p3.data(), grads_before.data(), m3.data(), v3.data(), n, hp.lr,
                             hp.beta1, hp.beta2, hp.eps, hp.weight_decay, hp.step, scale);
    using Named = std::tuple<const char*, const float*, const float*, const float*>;
    for (auto [name, got, in_place, want] :
         {Named{"param", params.data(), p2.data(), p3.data()},
          Named{"m", m.data(), m2.data(), m3.data()}, Named{"v", v.data(), v2.data(), v3.data()}}) {
      EXPECT_TRUE(BitIdentical(got, in_place, n))
          << target() << " n=" << n << " " << name << " vs scaled in place";
      EXPECT_TRUE(BitIdentical(got, want, n)) << target() << " n=" << n << " " << name << " vs reference";
    }
    EXPECT_TRUE(BitIdentical(grads.data(), grads_before.data(), n))
        << target() << " n=" << n << ": the gradients were modified";
    EXPECT_TRUE(params.guards_intact() && grads.guards_intact() && m.guards_intact() &&
                v.guards_intact())
        << target() << " n=" << n;
  }
}

// The optional bf16 copy of the new params (the bf16 GEMMs' weights): exactly ref::f32_to_bf16
// of the reference's params, with params, m and v still bit-identical to the reference, at sizes
// around one and two vectors of every target (the copy is written two vectors at a time), across
// OpenMP chunks, with NaN, ±Inf, subnormal and bf16-tie params among them, and nothing written
// outside the copy; the copy 64-byte aligned (streamed) and at an odd address (stored).
TEST_P(AdamWKernelTest, Bf16CopyIsTheConversionOfTheNewParams) {
  std::mt19937 rng(28);
  std::vector<size_t> sizes = kSizes;
  sizes.push_back(10007);
  const std::vector<float> specials = {
      std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
      -std::numeric_limits<float>::infinity(), std::bit_cast<float>(0x00018000u),
      std::bit_cast<float>(0x3F808000u), std::bit_cast<float>(0x3F818000u), 0.0f, -0.0f};
  constexpr size_t kPad = 40;
  constexpr uint16_t kGuard = 0xBEEF;
  for (size_t c = 0; c < 2 * sizes.size(); ++c) {
    const size_t n = sizes[c / 2];
    const bool aligned = c % 2 == 0;
    GuardedBuffer params(n), grads(n), m(n), v(n);
    fill_general(params.data(), n, rng);
    for (size_t i = 0; i < n; i += 5) params[i] = specials[(i / 5) % specials.size()];
    params[n - 1] = specials[n % specials.size()];
    fill_general(m.data(), n, rng, 0.01f);
    for (size_t i = 0; i < n; ++i) v[i] = 1e-4f * (1.0f + static_cast<float>(i % 5));
    std::vector<float> want_params = params.to_vector(), want_m = m.to_vector(),
                       want_v = v.to_vector();
    // storage[begin, begin + n): 64-byte aligned, or one element past that (not 4-byte aligned)
    std::vector<uint16_t> storage(n + 2 * kPad + 34, kGuard);
    const uintptr_t base = reinterpret_cast<uintptr_t>(storage.data() + kPad);
    const size_t begin = kPad + ((64 - base % 64) % 64) / sizeof(uint16_t) + (aligned ? 0 : 1);
    uint16_t* params16 = storage.data() + begin;
    for (int64_t step = 1; step <= 3; ++step) {
      fill_general(grads.data(), n, rng, 0.1f);
      const AdamWParams hp{1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step};
      const float scale = step == 2 ? 0.5f : 1.0f;
      omp_set_num_threads(step % 2 == 0 ? 2 : 1);
      adamw_update(params.data(), grads.data(), m.data(), v.data(), n, hp, scale, params16);
      ref::adamw_update<float>(want_params.data(), grads.data(), want_m.data(), want_v.data(), n,
                               hp.lr, hp.beta1, hp.beta2, hp.eps, hp.weight_decay, step, scale);
      EXPECT_TRUE(BitIdentical(params.data(), want_params.data(), n))
          << target() << " n=" << n << " step " << step << " param";
      EXPECT_TRUE(BitIdentical(m.data(), want_m.data(), n)) << target() << " n=" << n << " m";
      EXPECT_TRUE(BitIdentical(v.data(), want_v.data(), n)) << target() << " n=" << n << " v";
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(params16[i], ref::f32_to_bf16(want_params[i]))
            << target() << " n=" << n << " aligned=" << aligned << " step " << step << " i=" << i
            << std::hex
            << " param bits 0x" << std::bit_cast<uint32_t>(want_params[i]);
    }
    for (size_t i = 0; i < storage.size(); ++i) {
      if (i >= begin && i < begin + n) continue;
      ASSERT_EQ(storage[i], kGuard) << target() << " n=" << n << " aligned=" << aligned
                                    << ": wrote outside the copy at "
                                    << static_cast<ptrdiff_t>(i) - static_cast<ptrdiff_t>(begin);
    }
    EXPECT_TRUE(params.guards_intact() && grads.guards_intact() && m.guards_intact() &&
                v.guards_intact())
        << target() << " n=" << n;
  }
}

WTE_INSTANTIATE_ON_EVERY_TARGET(AdamWKernelTest);

}  // namespace
}  // namespace wte
