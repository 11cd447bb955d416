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

// a's pair p of a row as one 32-bit lane; with `half` only its first element (K odd, last pair).
WTE_TARGET_BF16 inline __m512i APair(const uint16_t* row, size_t p, bool half) {
  uint32_t x;
  if (half) {
    x = row[2 * p];
  } else {
    std::memcpy(&x, row + 2 * p, sizeof x);
  }
  return _mm512_set1_epi32(static_cast<int>(x));
}

// c (MR rows, NV vectors of 16 columns; the last one masked by `mask`) (+)= a · b over all pairs.
template <int MR, int NV>
WTE_TARGET_BF16 inline void MicroTile(float* c, size_t ldc, const uint16_t* a, size_t lda,
                                      const uint16_t* b, size_t ldb, size_t K, bool accumulate,
                                      __mmask16 mask) {
  __m512 s[MR][NV];
  for (int m = 0; m < MR; ++m)
    for (int v = 0; v < NV; ++v) {
      const __mmask16 mv = v == NV - 1 ? mask : __mmask16(0xFFFF);
      s[m][v] = accumulate ? _mm512_maskz_loadu_ps(mv, c + m * ldc + v * 16) : _mm512_setzero_ps();
    }
  const size_t pairs = (K + 1) / 2;
  for (size_t p = 0; p < pairs; ++p) {
    const bool half = 2 * p + 1 == K;
    __m512i bv[NV];
    for (int v = 0; v < NV; ++v) {
      const __mmask16 mv = v == NV - 1 ? mask : __mmask16(0xFFFF);
      bv[v] = _mm512_maskz_loadu_epi32(mv, b + p * ldb + 2 * 16 * v);
    }
    for (int m = 0; m < MR; ++m) {
      const __m512i av = APair(a + m * lda, p, half);
      for (int v = 0; v < NV; ++v)
        s[m][v] = _mm512_dpbf16_ps(s[m][v], (__m512bh)av, (__m512bh)bv[v]);
    }
  }
  for (int m = 0; m < MR; ++m)
    for (int v = 0; v < NV; ++v) {
      const __mmask16 mv = v == NV - 1 ? mask : __mmask16(0xFFFF);
      _mm512_mask_storeu_ps(c + m * ldc + v * 16, mv, s[m][v]);
    }
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
