// VDPBF16PS tile product (simd/tile_gemm_bf16.h). Not a Highway kernel: the Highway version this
// builds with has no target for AVX512_BF16, so the functions carry their own target attribute and
// are only called after cpu_has_avx512_bf16().
//
// Register block: 4 rows of c by up to 4 vectors of 16 columns (16 accumulators of the 32 zmm
// registers); per pair of k, 4 loads of b, 4 broadcasts of a's 32-bit pairs and 16 VDPBF16PS.
#include "simd/tile_gemm_bf16.h"

#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define WTE_BF16_PAIRS 1
#else
#define WTE_BF16_PAIRS 0
#endif

namespace wte {

#if WTE_BF16_PAIRS

bool cpu_has_avx512_bf16() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
  return has;
}

namespace {

#define WTE_TARGET_BF16 __attribute__((target("avx512f,avx512bw,avx512bf16")))

// c (MR rows, NV vectors of 16 columns; the last one masked by `mask`) (+)= a · b over all pairs.
// With K odd the last pair's second element of a is taken as zero (a's entry K is not read).
template <int MR, int NV>
WTE_TARGET_BF16 inline void MicroTile(float* c, size_t ldc, const uint16_t* a, size_t lda,
                                      const uint16_t* b, size_t ldb, size_t K, bool accumulate,
                                      __mmask16 mask) {
  __m512 s[MR][NV];
  __mmask16 mv[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) mv[v] = v == NV - 1 ? mask : __mmask16(0xFFFF);
#pragma GCC unroll 4
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      s[m][v] = accumulate ? _mm512_maskz_loadu_ps(mv[v], c + m * ldc + v * 16) : _mm512_setzero_ps();
  const size_t full = K / 2;
  for (size_t p = 0; p < full; ++p) {
    __m512i bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_maskz_loadu_epi32(mv[v], b + p * ldb + 32 * v);
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m) {
      int x;
      std::memcpy(&x, a + m * lda + 2 * p, sizeof x);
      const __m512i av = _mm512_set1_epi32(x);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) s[m][v] = _mm512_dpbf16_ps(s[m][v], (__m512bh)av, (__m512bh)bv[v]);
    }
  }
  if (K % 2 == 1) {
    __m512i bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_maskz_loadu_epi32(mv[v], b + full * ldb + 32 * v);
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m) {
      const __m512i av = _mm512_set1_epi32(a[m * lda + 2 * full]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) s[m][v] = _mm512_dpbf16_ps(s[m][v], (__m512bh)av, (__m512bh)bv[v]);
    }
  }
#pragma GCC unroll 4
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) _mm512_mask_storeu_ps(c + m * ldc + v * 16, mv[v], s[m][v]);
}

template <int NV>
WTE_TARGET_BF16 void ColumnPanel(float* c, size_t ldc, const uint16_t* a, size_t lda,
                                 const uint16_t* b, size_t ldb, size_t M, size_t K,
                                 bool accumulate, __mmask16 mask) {
  size_t m = 0;
  for (; m + 4 <= M; m += 4)
    MicroTile<4, NV>(c + m * ldc, ldc, a + m * lda, lda, b, ldb, K, accumulate, mask);
  for (; m < M; ++m) MicroTile<1, NV>(c + m * ldc, ldc, a + m * lda, lda, b, ldb, K, accumulate, mask);
}

}  // namespace

WTE_TARGET_BF16 void tile_gemm_bf16_pairs(float* c, size_t ldc, const uint16_t* a, size_t lda,
                                          const uint16_t* b, size_t ldb, size_t M, size_t N,
                                          size_t K, bool accumulate) {
  const __mmask16 full = 0xFFFF;
  size_t n = 0;
  for (; n + 64 <= N; n += 64)
    ColumnPanel<4>(c + n, ldc, a, lda, b + 2 * n, ldb, M, K, accumulate, full);
  for (; n + 32 <= N; n += 32)
    ColumnPanel<2>(c + n, ldc, a, lda, b + 2 * n, ldb, M, K, accumulate, full);
  for (; n < N; n += 16) {
    const size_t live = N - n < 16 ? N - n : 16;
    const __mmask16 mask = static_cast<__mmask16>((1u << live) - 1u);
    ColumnPanel<1>(c + n, ldc, a, lda, b + 2 * n, ldb, M, K, accumulate, mask);
  }
}

#else  // not x86

bool cpu_has_avx512_bf16() { return false; }

void tile_gemm_bf16_pairs(float*, size_t, const uint16_t*, size_t, const uint16_t*, size_t, size_t,
                          size_t, size_t, bool) {}

#endif

}  // namespace wte
