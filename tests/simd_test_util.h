// Helpers for testing the Highway kernels (tests/simd/test_simd_kernels.cc, test_scatter_strategies.cc,
// test_block_kernels.cc, test_layernorm.cc): a fixture that forces one Highway target per test instance (and the macro
// that instantiates it on every target), guarded, misaligned buffers with NaN padding, inputs that
// are exact in binary, a run at 1 and at 2 OpenMP threads, and bit-for-bit comparisons whose
// failure names the first difference; awkward sizes and the comparison with a double reference
// within a per-entry bound.
#pragma once

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "hwy/targets.h"
#include "src/reference/kernels.h"

namespace wte::test {

// Fixture parameterized by a Highway target (a HWY_* bit): forces that target for the duration of
// each test and afterwards resets the mock and the OpenMP thread count (tests may change it).
// Instantiate with ::testing::ValuesIn(hwy::SupportedAndGeneratedTargets()) and TargetParamName.
class TargetTest : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override { hwy::SetSupportedTargetsForTest(GetParam()); }
  void TearDown() override {
    hwy::SetSupportedTargetsForTest(0);
    omp_set_num_threads(default_threads_);
  }
  // The forced target's name ("AVX2", "SCALAR", ...), for failure messages.
  std::string target() const { return hwy::TargetName(GetParam()); }

 private:
  int default_threads_ = omp_get_max_threads();
};

// Test-name suffix for an instance of a TargetTest: the target's name.
inline std::string TargetParamName(const ::testing::TestParamInfo<int64_t>& info) {
  return hwy::TargetName(info.param);
}

// Instantiates the TargetTest subclass SUITE once per Highway target compiled into this binary and
// supported by this CPU, each instance named by its target (SUITE/AllTargets.Case/AVX3, ...).
#define WTE_INSTANTIATE_ON_EVERY_TARGET(SUITE)                                            \
  INSTANTIATE_TEST_SUITE_P(AllTargets, SUITE,                                           \
                           ::testing::ValuesIn(hwy::SupportedAndGeneratedTargets()),  \
                           ::wte::test::TargetParamName)

// A float array of `size` elements that starts 1 float past a 64-byte boundary (so no kernel can
// assume alignment) and is surrounded by `kPad` guard floats on each side holding a quiet NaN with
// a recognizable payload. A kernel that reads the guard turns its output into NaN; one that writes
// it changes the payload. `guards_intact()` checks the bits.
class GuardedBuffer {
 public:
  static constexpr size_t kPad = 67;  // more than one AVX-512 vector plus a bit, odd on purpose
  static constexpr uint32_t kGuardBits = 0x7FC0BEEFu;  // quiet NaN, payload 0xBEEF

  explicit GuardedBuffer(size_t size) : size_(size), storage_(size + 2 * kPad + 16 + 1) {
    // Offset so data() is 4 bytes past a 64-byte boundary (storage is at least 16-byte aligned).
    const uintptr_t base = reinterpret_cast<uintptr_t>(storage_.data()) + kPad * sizeof(float);
    const size_t to_boundary = ((64 - base % 64) % 64) / sizeof(float);
    begin_ = kPad + to_boundary + 1;
    for (float& x : storage_) x = guard_value();
  }

  float* data() { return storage_.data() + begin_; }
  const float* data() const { return storage_.data() + begin_; }
  size_t size() const { return size_; }
  float& operator[](size_t i) { return data()[i]; }
  float operator[](size_t i) const { return data()[i]; }

  static float guard_value() { return std::bit_cast<float>(kGuardBits); }

  // True if every float outside [data(), data() + size) still has the guard bits.
  bool guards_intact() const {
    for (size_t i = 0; i < storage_.size(); ++i) {
      if (i >= begin_ && i < begin_ + size_) continue;
      if (std::bit_cast<uint32_t>(storage_[i]) != kGuardBits) return false;
    }
    return true;
  }

  std::vector<float> to_vector() const { return std::vector<float>(data(), data() + size_); }

  // A guarded buffer of values.size() floats holding a copy of `values`.
  static GuardedBuffer copy_of(const std::vector<float>& values) {
    GuardedBuffer buffer(values.size());
    std::copy(values.begin(), values.end(), buffer.data());
    return buffer;
  }

 private:
  size_t size_;
  size_t begin_ = 0;
  std::vector<float> storage_;
};

// Multiples of 1/64 in [lo, hi]: exact in binary, and sums of up to ~2^17 of them with |x| <= 64
// stay exact in float (24-bit significand: 6 fraction bits + 7 integer bits + 11 bits of growth),
// so any summation order gives the same bits.
inline void fill_exact(float* x, size_t n, std::mt19937& rng, int lo = -4, int hi = 4) {
  std::uniform_int_distribution<int> dist(lo * 64, hi * 64);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(dist(rng)) / 64.0f;
}

// General floats (not exact in binary, mixed magnitudes): sums depend on order, so a bit-identical
// result proves the kernel adds in the reference's order.
inline void fill_general(float* x, size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  for (size_t i = 0; i < n; ++i) x[i] = dist(rng);
}

// The inputs of one embedding_backward_wte case (include/wte/kernels.h): dhidden (N, C), N =
// ids.size(), in a GuardedBuffer; the gradient table's starting values dwte_init (V, C); and want,
// dwte_init plus the float reference's scatter of dhidden's rows by ids (ref::embedding_backward_wte).
// exact: both filled with fill_exact (multiples of 1/64 in [-4, 4]); else dhidden with
// fill_general (N(0, 1)) and dwte_init with fill_general at init_scale. dhidden is filled first.
struct BackwardWteCase {
  GuardedBuffer dhidden;
  std::vector<float> dwte_init, want;
};
inline BackwardWteCase MakeBackwardWteCase(const std::vector<int32_t>& ids, size_t C, size_t V,
                                           std::mt19937& rng, bool exact = false,
                                           float init_scale = 1.0f) {
  const size_t N = ids.size();
  BackwardWteCase k{GuardedBuffer(N * C), std::vector<float>(V * C), {}};
  if (exact) {
    fill_exact(k.dhidden.data(), N * C, rng);
    fill_exact(k.dwte_init.data(), V * C, rng);
  } else {
    fill_general(k.dhidden.data(), N * C, rng);
    fill_general(k.dwte_init.data(), V * C, rng, init_scale);
  }
  k.want = k.dwte_init;
  ref::embedding_backward_wte(k.want.data(), k.dhidden.data(), ids.data(), N, C, V);
  return k;
}

// Index of the first element whose bits differ, or n if all n are bit-identical (NaN == NaN when
// the bits agree, +0 != -0).
inline size_t first_bit_difference(const float* a, const float* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) return i;
  }
  return n;
}

// "index 12: got 1.5 (0x3fc00000), want 1.25 (0x3fa00000)" for failure messages.
inline std::string describe_difference(const float* got, const float* want, size_t i) {
  std::ostringstream os;
  os.precision(9);
  os << "index " << i << ": got " << got[i] << " (0x" << std::hex << std::bit_cast<uint32_t>(got[i])
     << std::dec << "), want " << want[i] << " (0x" << std::hex << std::bit_cast<uint32_t>(want[i])
     << std::dec << ")";
  return os.str();
}

// Passes when the n floats at `got` and `want` have the same bits (first_bit_difference(got, want,
// n) == n); else fails naming the first differing index and both values (describe_difference).
// Use as EXPECT_TRUE(BitIdentical(got, want, n)) << where;
inline ::testing::AssertionResult BitIdentical(const float* got, const float* want, size_t n) {
  const size_t i = first_bit_difference(got, want, n);
  if (i == n) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << describe_difference(got, want, i);
}

// Runs `run(threads)` with OpenMP set to 1 thread, then with it set to 2 (TargetTest restores the
// default count after the test) and returns both results: [0] from 1 thread, [1] from 2. `run`
// may hold EXPECT_* checks; it must return a value (a result vector, or a struct of them).
template <typename F>
auto AtOneAndTwoThreads(F&& run) -> std::array<std::decay_t<std::invoke_result_t<F&, int>>, 2> {
  std::array<std::decay_t<std::invoke_result_t<F&, int>>, 2> results;
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    results[threads - 1] = run(threads);
  }
  return results;
}

// ---- Comparison with the double reference within a derived bound ------------------------------
// The bounds are first order in the unit roundoff kU (a rounding is x(1 + δ), |δ| <= u; a sum of n
// terms in any order errs by at most n·u·Σ|terms|); kSecondOrder covers the dropped O(n²u²) terms
// (< 1e-4 relative at the tests' sizes).

inline constexpr double kU = 0x1p-24;          // float unit roundoff
inline constexpr double kSecondOrder = 1.01;   // the dropped second-order terms
inline constexpr double kTiny = 0x1p-120;      // absolute slack for results that underflow (exp(-100))

// {1, 3, L-1, L, L+1, 3L, 8L+2} for L = 1, 4, 8, 16, and 257; and `large` (for several OpenMP
// blocks) when it is not 0.
inline std::vector<size_t> AwkwardSizes(size_t large = 0) {
  std::set<size_t> sizes = {257};
  if (large != 0) sizes.insert(large);
  for (size_t L : {1, 4, 8, 16})
    for (size_t s : {size_t{1}, size_t{3}, L - 1, L, L + 1, 3 * L, 8 * L + 2})
      if (s > 0) sizes.insert(s);
  return {sizes.begin(), sizes.end()};
}

inline std::vector<double> ToDouble(const float* x, size_t n) { return std::vector<double>(x, x + n); }

// Expects |got[i] - want[i]| <= bound[i] (and got finite) for i < n; reports the first failures.
inline void ExpectWithin(const float* got, const std::vector<double>& want,
                  const std::vector<double>& bound, size_t n, const std::string& what) {
  size_t failures = 0;
  for (size_t i = 0; i < n; ++i) {
    const double err = std::abs(static_cast<double>(got[i]) - want[i]);
    if (!std::isfinite(got[i]) || !(err <= bound[i])) {
      if (++failures <= 5)
        ADD_FAILURE() << what << " [" << i << "]: got " << got[i] << ", want " << want[i]
                      << " +- " << bound[i] << " (error " << err << ")";
    }
  }
  EXPECT_EQ(failures, 0u) << what;
}


}  // namespace wte::test
