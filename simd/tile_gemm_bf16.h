// A tile product on bfloat16 pairs for the tiled attention (simd/attention_tiled.cc): VDPBF16PS
// (AVX512_BF16), which multiplies two pairs of bfloat16 and adds both products into a float32
// lane. Products of two bfloat16 are exact in float32, so each step rounds only its addition.
//
// Operands: a (M,K) row-major bfloat16 bits (consecutive k of a row form a pair: k = 2p, 2p+1);
// b (K,N) packed by pairs of rows, ((K+1)/2, N, 2): entry (k, n) at b[(k/2)·ldb + 2n + k%2], so
// that one 32-bit lane holds the pair (b_{2p,n}, b_{2p+1,n}). With K odd the last pair's second
// element of b must be a zero and a's entry K is not read.
//
// Each entry is summed as VDPBF16PS does it, pair by pair in increasing p:
//   c += a_{2p+1}·b_{2p+1};  c += a_{2p}·b_{2p}   (each addition rounded to nearest even)
// with denormal inputs read as zero and denormal sums flushed to zero (DAZ, FTZ). The order is the
// same whichever operand is a and which is b, so k·qᵀ and q·kᵀ give the same bits.
#pragma once

#include <cstddef>
#include <cstdint>

namespace wte {

/// Whether this CPU runs AVX512_BF16 (and AVX-512F): whether tile_gemm_bf16_pairs may be called.
bool cpu_has_avx512_bf16();

/// c (M,N) = (accumulate false) or += (true) a (M,K) · b (K,N), operands as above; lda and ldb in
/// bfloat16 entries (ldb >= 2N), ldc in floats. Any M, N, K. Only on a CPU with AVX512_BF16.
void tile_gemm_bf16_pairs(float* c, size_t ldc, const uint16_t* a, size_t lda, const uint16_t* b,
                          size_t ldb, size_t M, size_t N, size_t K, bool accumulate);

}  // namespace wte
