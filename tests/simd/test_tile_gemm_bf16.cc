// tile_gemm_bf16_pairs (simd/tile_gemm_bf16.h, VDPBF16PS) against its scalar reference
// (src/reference/kernels.h: ref::tile_gemm_bf16_pairs), bit for bit, at awkward sizes: M, N and K
// odd and not multiples of the 16 columns of a vector or of the 4 rows and 4 vectors of the
// register block; leading dimensions larger than the rows, overwrite and accumulate. Inputs are
// random bfloat16 of magnitude 2^-8..4, so no sum is denormal (the kernel flushes those) and every
// entry sums terms of both signs. The kernel is not a Highway kernel (no Highway target of the
// version built against knows AVX512_BF16), so there is one instance, not one per target; on a CPU
// without AVX512_BF16 the test is skipped.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <vector>

#include "simd/tile_gemm_bf16.h"
#include "src/reference/kernels.h"

namespace wte {
namespace {

uint16_t random_bf16(std::mt19937& rng) {
  std::uniform_real_distribution<float> mag(-8.0f, 2.0f);
  const float x = std::exp2(mag(rng)) * (rng() % 2 ? -1.0f : 1.0f);
  return ref::f32_to_bf16(x);
}

TEST(TileGemmBf16Pairs, BitIdenticalToScalarReferenceAtAwkwardSizes) {
  if (!cpu_has_avx512_bf16()) GTEST_SKIP() << "this CPU has no AVX512_BF16 (VDPBF16PS)";
  std::mt19937 rng(20240607);
  for (size_t M : {1, 3, 4, 5, 9, 17})
    for (size_t N : {1, 7, 15, 16, 17, 31, 33, 47, 64, 65, 97})
      for (size_t K : {1, 2, 3, 17, 31, 32, 33, 64, 65})
        for (bool accumulate : {false, true}) {
          const size_t lda = K + 3, ldc = N + 5, pairs = (K + 1) / 2, ldb = 2 * N + 6;
          std::vector<uint16_t> a(M * lda), b(pairs * ldb, 0);
          for (auto& x : a) x = random_bf16(rng);
          for (size_t k = 0; k < K; ++k)
            for (size_t n = 0; n < N; ++n) b[(k / 2) * ldb + 2 * n + k % 2] = random_bf16(rng);
          if (K % 2 == 1)  // a's entry K is not read: NaN there must not reach c
            for (size_t m = 0; m < M; ++m) a[m * lda + K] = 0x7FC0;
          std::vector<float> c0(M * ldc);
          for (auto& x : c0) x = ref::bf16_to_f32(random_bf16(rng));
          std::vector<float> got = c0, want = c0;
          tile_gemm_bf16_pairs(got.data(), ldc, a.data(), lda, b.data(), ldb, M, N, K, accumulate);
          ref::tile_gemm_bf16_pairs(want.data(), ldc, a.data(), lda, b.data(), ldb, M, N, K,
                                    accumulate);
          for (size_t i = 0; i < got.size(); ++i) {
            uint32_t g, w;
            std::memcpy(&g, &got[i], 4);
            std::memcpy(&w, &want[i], 4);
            ASSERT_EQ(g, w) << "M=" << M << " N=" << N << " K=" << K << " accumulate=" << accumulate
                            << " entry (" << i / ldc << ", " << i % ldc << "): " << got[i]
                            << " vs reference " << want[i]
                            << (i % ldc >= N ? " (past N: must be untouched)" : "");
          }
        }
}

}  // namespace
}  // namespace wte
