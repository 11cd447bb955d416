// embedding_gather (include/wte/kernels.h, simd/gather.cc) against its scalar reference: exact bits
// (row copies), duplicates, -0.0 and NaN rows kept, awkward widths, misaligned outputs with NaN
// guard bands, and the same result for 1 and 2 threads. The kernel has no per-target code (a
// prefetching memcpy per row), so there is no Highway target loop here.
#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "simd/reference.h"
#include "tests/simd_test_util.h"
#include "wte/kernels.h"

namespace wte {
namespace {

using test::describe_difference;
using test::fill_general;
using test::first_bit_difference;
using test::GuardedBuffer;

TEST(Gather, MatchesReferenceBitForBit) {
  std::mt19937 rng(5);
  const size_t V = 37;
  for (size_t C : {1, 3, 15, 16, 17, 63, 257, 768}) {
    std::vector<float> table(V * C);
    fill_general(table.data(), table.size(), rng);
    table[0] = -0.0f;                                          // sign of zero kept
    table[C] = std::numeric_limits<float>::quiet_NaN();        // row 1 starts with NaN
    for (size_t N : {1, 2, 5, 64, 1000}) {
      std::vector<int32_t> ids(N);
      std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(V) - 1);
      for (size_t n = 0; n < N; ++n) ids[n] = n % 4 == 0 ? 1 : pick(rng);  // duplicates
      std::vector<float> want(N * C);
      ref::embedding_gather(want.data(), ids.data(), table.data(), N, C);
      for (int threads : {1, 2}) {
        omp_set_num_threads(threads);
        GuardedBuffer out(N * C);
        embedding_gather(out.data(), ids.data(), table.data(), N, C);
        const size_t i = first_bit_difference(out.data(), want.data(), N * C);
        EXPECT_EQ(i, N * C) << "C " << C << " N " << N << " threads " << threads << ": "
                            << describe_difference(out.data(), want.data(), i);
        EXPECT_TRUE(out.guards_intact()) << "C " << C << " N " << N << " wrote outside out";
      }
    }
  }
  omp_set_num_threads(omp_get_num_procs());
}

// ids [2, 0, 2] of a 3x2 table: rows copied in order, the duplicate twice.
TEST(Gather, ExactValues) {
  const float table[] = {1.5f, -2.0f, 0.25f, 8.0f, -0.0f, 3.0f};
  const int32_t ids[] = {2, 0, 2};
  float out[6];
  embedding_gather(out, ids, table, 3, 2);
  const float want[] = {-0.0f, 3.0f, 1.5f, -2.0f, -0.0f, 3.0f};
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(want[i])) << "element " << i;
}

}  // namespace
}  // namespace wte
