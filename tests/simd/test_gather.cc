// embedding_gather (include/wte/kernels.h, simd/gather.cc) against its scalar reference on every
// compiled Highway target, with ordinary and with non-temporal stores: exact bits (row copies),
// duplicates, -0.0 and NaN rows kept, awkward widths, misaligned outputs with NaN guard bands, and
// the same result for 1 and 2 threads. Also the memory probes of wte profile (stream_copy,
// stream_read, gather_read).
#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "src/reference/kernels.h"
#include "tests/simd_test_util.h"
#include "wte/kernels.h"

namespace wte {
namespace {

using test::describe_difference;
using test::fill_general;
using test::first_bit_difference;
using test::GuardedBuffer;

class GatherTest : public test::TargetTest {};

TEST_P(GatherTest, MatchesReferenceBitForBit) {
  std::mt19937 rng(5);
  const size_t V = 37;
  for (size_t C : {1, 3, 7, 15, 16, 17, 31, 33, 63, 64, 65, 257, 768}) {
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
      for (GatherStores stores :
           {GatherStores::kAuto, GatherStores::kCached, GatherStores::kStreaming}) {
        for (int threads : {1, 2}) {
          omp_set_num_threads(threads);
          // GuardedBuffer starts 4 bytes past a 64-byte boundary: every row's head is unaligned.
          GuardedBuffer out(N * C);
          embedding_gather(out.data(), ids.data(), table.data(), N, C, stores);
          const size_t i = first_bit_difference(out.data(), want.data(), N * C);
          EXPECT_EQ(i, N * C) << target() << " C " << C << " N " << N << " stores "
                              << static_cast<int>(stores) << " threads " << threads << ": "
                              << describe_difference(out.data(), want.data(), i);
          EXPECT_TRUE(out.guards_intact())
              << target() << " C " << C << " N " << N << " wrote outside out";
        }
      }
    }
  }
}

// An aligned output (the streaming stores' fast path covers whole rows) and a large N: every
// thread count gives the reference's bits.
TEST_P(GatherTest, AlignedOutputManyRows) {
  std::mt19937 rng(6);
  const size_t V = 500, C = 96, N = 4099;
  std::vector<float> table(V * C);
  fill_general(table.data(), table.size(), rng);
  std::vector<int32_t> ids(N);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(V) - 1);
  for (int32_t& id : ids) id = pick(rng);
  std::vector<float> want(N * C);
  ref::embedding_gather(want.data(), ids.data(), table.data(), N, C);
  for (GatherStores stores : {GatherStores::kCached, GatherStores::kStreaming}) {
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      std::vector<float> out(N * C + 16, 1.0f);
      float* aligned = out.data() + (16 - reinterpret_cast<uintptr_t>(out.data()) % 64 / 4) % 16;
      embedding_gather(aligned, ids.data(), table.data(), N, C, stores);
      const size_t i = first_bit_difference(aligned, want.data(), N * C);
      EXPECT_EQ(i, N * C) << target() << " stores " << static_cast<int>(stores) << " threads "
                          << threads << ": " << describe_difference(aligned, want.data(), i);
    }
  }
}

// stream_copy copies exactly (NaN, -0.0) at awkward sizes from misaligned starts, nothing outside.
TEST_P(GatherTest, StreamCopyIsExact) {
  std::mt19937 rng(7);
  for (size_t n : {size_t{0}, size_t{1}, size_t{3}, size_t{15}, size_t{16}, size_t{17}, size_t{63},
                   size_t{65}, size_t{1000}, (size_t{1} << 18) + 5, 3 * (size_t{1} << 18)}) {
    std::vector<float> src(n);
    fill_general(src.data(), n, rng);
    if (n > 2) {
      src[1] = -0.0f;
      src[2] = std::numeric_limits<float>::quiet_NaN();
    }
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      GuardedBuffer dst(n);
      stream_copy(dst.data(), src.data(), n);
      const size_t i = first_bit_difference(dst.data(), src.data(), n);
      EXPECT_EQ(i, n) << target() << " n " << n << ": " << describe_difference(dst.data(), src.data(), i);
      EXPECT_TRUE(dst.guards_intact()) << target() << " n " << n;
    }
  }
}

// stream_read and gather_read: sums of small integers are exact in any order, so the totals are
// known; guard NaNs around the input prove nothing past it is read.
TEST_P(GatherTest, ReadProbesSumExactly) {
  for (size_t n : {size_t{1}, size_t{7}, size_t{16}, size_t{17}, size_t{1001}, (size_t{1} << 18) + 3}) {
    GuardedBuffer x(n);
    double want = 0;
    for (size_t i = 0; i < n; ++i) want += x[i] = static_cast<float>(i % 5);
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      EXPECT_EQ(stream_read(x.data(), n), static_cast<float>(want)) << target() << " n " << n;
    }
  }
  const size_t V = 50, C = 33, N = 301;
  GuardedBuffer table(V * C);
  for (size_t i = 0; i < V * C; ++i) table[i] = static_cast<float>((i / C) % 3);  // row v: v mod 3
  std::vector<int32_t> ids(N);
  double want = 0;
  for (size_t n = 0; n < N; ++n) {
    ids[n] = static_cast<int32_t>((n * 7) % V);
    want += static_cast<double>(C) * static_cast<double>(ids[n] % 3);
  }
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    EXPECT_EQ(gather_read(ids.data(), table.data(), N, C), static_cast<float>(want)) << target();
  }
}

INSTANTIATE_TEST_SUITE_P(AllTargets, GatherTest,
                         ::testing::ValuesIn(hwy::SupportedAndGeneratedTargets()),
                         test::TargetParamName);

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
