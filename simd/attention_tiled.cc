// Tiled causal attention, forward and backward (FlashAttention-2's scheme on the CPU), Highway with
// dynamic dispatch. The algorithm, its contracts and shapes: src/model/attention_tiled.h.
//
// Layout per (batch row, head), in one thread's buffers (hp = hs rounded up to the vector width,
// Tpad = T rounded up to both tile sizes; padding is zero and stays zero):
//   q, k, v, dout   (Tpad, hp) row-major copies of the head's columns
//   qᵀ, kᵀ, doutᵀ   (hp, Tpad) their transposes
// so every tile product is C (M,N) (+)= A (M,K)·B (K,N) on row-major slices: the micro-kernel
// broadcasts A's entries and multiplies rows of B, a register block of 4 rows by up to 4 vectors
// of C. Each product's sum over K runs in increasing k for every entry (one FMA per term), so a
// forward score q_t·k_j has the same bits in the backward's kᵀ·q recomputation.
// With bf16 inputs on a CPU with AVX512_BF16 (AVX-512 targets), the products run on bfloat16 pairs
// instead (tile_gemm_bf16_pairs), on bfloat16 copies laid out as its operands need (Bf16Copies):
// pairs along k in A's rows, and B packed by pairs of its rows.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>

#include "simd/tile_gemm_bf16.h"
#include "src/model/attention_tiled.h"

// foreach_target.h must come before every other Highway header.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/attention_tiled.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/aligned_allocator.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "simd/exp-inl.h"    // ExpNonPositive
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace wte {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;

// Targets whose vectors are the 16 floats of tile_gemm_bf16_pairs' columns: with bf16 inputs on a
// CPU with AVX512_BF16 their tile products run on bfloat16 pairs (VDPBF16PS).
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
constexpr bool kBf16PairTarget = true;
#else
constexpr bool kBf16PairTarget = false;
#endif

// c (MR rows, NV vectors) = or += a (MR, K) · b (K, NV vectors); leading dimensions in floats.
template <size_t MR, size_t NV>
HWY_INLINE void MicroTile(float* HWY_RESTRICT c, size_t ldc, const float* HWY_RESTRICT a,
                          size_t lda, const float* HWY_RESTRICT b, size_t ldb, size_t K,
                          bool accumulate) {
  const DF d;
  const size_t L = hn::Lanes(d);
  hn::Vec<DF> s[MR][NV];
#pragma GCC unroll 4
  for (size_t m = 0; m < MR; ++m)
#pragma GCC unroll 4
    for (size_t v = 0; v < NV; ++v)
      s[m][v] = accumulate ? hn::LoadU(d, c + m * ldc + v * L) : hn::Zero(d);
  for (size_t k = 0; k < K; ++k) {
    hn::Vec<DF> bv[NV];
#pragma GCC unroll 4
    for (size_t v = 0; v < NV; ++v) bv[v] = hn::LoadU(d, b + k * ldb + v * L);
#pragma GCC unroll 4
    for (size_t m = 0; m < MR; ++m) {
      const auto av = hn::Set(d, a[m * lda + k]);
#pragma GCC unroll 4
      for (size_t v = 0; v < NV; ++v) s[m][v] = hn::MulAdd(av, bv[v], s[m][v]);
    }
  }
#pragma GCC unroll 4
  for (size_t m = 0; m < MR; ++m)
#pragma GCC unroll 4
    for (size_t v = 0; v < NV; ++v) hn::StoreU(s[m][v], d, c + m * ldc + v * L);
}

// Columns [n, n + NV·L) of c (M,N) (+)= a (M,K) · b (K,N): blocks of 4 rows, then single rows.
template <size_t NV>
HWY_INLINE void ColumnPanel(float* c, size_t ldc, const float* a, size_t lda, const float* b,
                            size_t ldb, size_t M, size_t K, bool accumulate) {
  size_t m = 0;
  for (; m + 4 <= M; m += 4) MicroTile<4, NV>(c + m * ldc, ldc, a + m * lda, lda, b, ldb, K, accumulate);
  for (; m < M; ++m) MicroTile<1, NV>(c + m * ldc, ldc, a + m * lda, lda, b, ldb, K, accumulate);
}

// c (M,N) = or += a (M,K) · b (K,N), row-major with leading dimensions; N a multiple of the
// vector width.
void TileGemm(float* c, size_t ldc, const float* a, size_t lda, const float* b, size_t ldb,
              size_t M, size_t N, size_t K, bool accumulate) {
  const size_t L = hn::Lanes(DF());
  size_t n = 0;
  for (; n + 4 * L <= N; n += 4 * L) ColumnPanel<4>(c + n, ldc, a, lda, b + n, ldb, M, K, accumulate);
  for (; n + 2 * L <= N; n += 2 * L) ColumnPanel<2>(c + n, ldc, a, lda, b + n, ldb, M, K, accumulate);
  for (; n < N; n += L) ColumnPanel<1>(c + n, ldc, a, lda, b + n, ldb, M, K, accumulate);
}

// The part of a tile product that is needed, on a tile of the diagonal (rows and keys the same
// tokens, Br = Bc): skipped are the 4-row blocks' columns that are all masked, and the terms whose
// factor of a or b is a masked (exactly zero) entry, which would add ±0 and so change no sum.
enum class Diag {
  kFull,         // not a diagonal tile: everything
  kColsUpToRow,  // c's entry (r, n) is needed for n <= r only (scores, queries by keys)
  kColsFromRow,  // c's entry (r, n) is needed for n >= r only (scores transposed, keys by queries)
  kKUpToRow,     // a's entry (r, k) is zero for k > r (probabilities, queries by keys)
  kKFromRow,     // a's entry (r, k) is zero for k < r (probabilities transposed, keys by queries)
  kKUpToCol,     // b's entry (k, n) is zero for k > n (dS transposed as b: keys by queries)
};

// Calls part(m0, m1, n0, n1, k0, k1) for the row, column and k ranges of c (M,N) (+)= a (M,K) ·
// b (K,N) that `mode` needs: blocks of 4 rows, columns in whole vectors of L (M, N multiples of L).
template <class Part>
HWY_INLINE void ForEachPart(Diag mode, size_t M, size_t N, size_t K, size_t L, const Part& part) {
  if (mode == Diag::kFull) return part(0, M, 0, N, 0, K);
  if (mode == Diag::kKUpToCol) {  // by panels of 2 vectors: column n needs k <= n
    for (size_t n0 = 0; n0 < N; n0 += 2 * L) {
      const size_t n1 = std::min(N, n0 + 2 * L);
      part(0, M, n0, n1, 0, std::min(K, n1));
    }
    return;
  }
  for (size_t m0 = 0; m0 < M; m0 += 4) {
    const size_t m1 = std::min(M, m0 + 4);
    switch (mode) {
      case Diag::kColsUpToRow: part(m0, m1, 0, std::min(N, (m1 + L - 1) / L * L), 0, K); break;
      case Diag::kColsFromRow: part(m0, m1, m0 / L * L, N, 0, K); break;
      case Diag::kKUpToRow: part(m0, m1, 0, N, 0, std::min(K, m1)); break;
      case Diag::kKFromRow: part(m0, m1, 0, N, std::min(K, m0), K); break;
      default: break;
    }
  }
}

// TileGemm on the part of the product `mode` needs (the rest of c is left as it was).
void Product(float* c, size_t ldc, const float* a, size_t lda, const float* b, size_t ldb,
             size_t M, size_t N, size_t K, bool accumulate, Diag mode) {
  ForEachPart(mode, M, N, K, hn::Lanes(DF()),
              [&](size_t m0, size_t m1, size_t n0, size_t n1, size_t k0, size_t k1) {
                TileGemm(c + m0 * ldc + n0, ldc, a + m0 * lda + k0, lda, b + k0 * ldb + n0, ldb,
                         m1 - m0, n1 - n0, k1 - k0, accumulate);
              });
}

// tile_gemm_bf16_pairs on the part of the product `mode` needs; b packed by pairs of rows (the k
// ranges start at even k: row blocks of 4, panels of whole vectors).
void ProductPairs(float* c, size_t ldc, const uint16_t* a, size_t lda, const uint16_t* b,
                  size_t ldb, size_t M, size_t N, size_t K, bool accumulate, Diag mode) {
  ForEachPart(mode, M, N, K, hn::Lanes(DF()),
              [&](size_t m0, size_t m1, size_t n0, size_t n1, size_t k0, size_t k1) {
                tile_gemm_bf16_pairs(c + m0 * ldc + n0, ldc, a + m0 * lda + k0, lda,
                                     b + (k0 / 2) * ldb + 2 * n0, ldb, m1 - m0, n1 - n0, k1 - k0,
                                     accumulate);
              });
}

// x rounded to the nearest bfloat16 (ties to even), as a float. Inputs are finite.
HWY_INLINE hn::Vec<DF> RoundToBf16(DF d, hn::Vec<DF> x) {
  const hn::RebindToUnsigned<DF> du;
  const auto u = hn::BitCast(du, x);
  const auto odd = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
  const auto r = hn::And(hn::Add(u, hn::Add(hn::Set(du, 0x7FFFu), odd)), hn::Set(du, 0xFFFF0000u));
  return hn::BitCast(d, r);
}
HWY_INLINE float RoundToBf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  std::memcpy(&x, &u, sizeof u);
  return x;
}

// The tiles' P and dS into bfloat16 on the pair targets: VCVTNEPS2BF16 / VCVTNE2PS2BF16 (AVX512_BF16,
// only run when g.pairs): round to nearest, ties to even, as RoundToBf16, except that denormal
// floats become zeros of their sign; the pair products read bfloat16 denormals as zeros anyway
// (DAZ). One instruction instead of the integer rounding and the narrowing shuffles. Written as
// inline assembly: the Highway target's code may not call an intrinsic of a feature its target
// lacks, and these run only after cpu_has_avx512_bf16().
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// 16 floats to their 16 bfloat16 at out.
HWY_INLINE void StoreBf16Cvt(hn::Vec<DF> x, uint16_t* out) {
  __m256i r;
  asm("vcvtneps2bf16 %1, %0" : "=v"(r) : "v"(x.raw));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), r);
}
// lo and hi to bfloat16: lanes 0..15 lo's, lanes 16..31 hi's (16-bit lanes).
HWY_INLINE __m512i Bf16Cvt2(hn::Vec<DF> lo, hn::Vec<DF> hi) {
  __m512i r;
  asm("vcvtne2ps2bf16 %2, %1, %0" : "=v"(r) : "v"(hi.raw), "v"(lo.raw));
  return r;
}
#endif

// x's bfloat16 bits, rounded to nearest (ties to even). Inputs are finite.
HWY_INLINE uint16_t Bf16Bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// This thread's workspace of n entries of T, zeroed: kept from call to call (the thread's largest
// so far), so that no call pays fresh pages. The copies write only live entries, so their padding
// stays zero through one call.
template <typename T>
T* ThreadWorkspace(size_t n) {
  static thread_local hwy::AlignedFreeUniquePtr<T[]> buffer;
  static thread_local size_t capacity = 0;
  if (capacity < n) {
    buffer = hwy::AllocateAligned<T>(n);
    capacity = n;
  }
  std::fill(buffer.get(), buffer.get() + n, T{0});
  return buffer.get();
}

struct Geometry {
  size_t B, T, C, NH, hs, hp, Br, Bc, Tpad;
  size_t ldt;  // leading dimension of the transposes (hp,Tpad): Tpad plus one cache line, so that
               // a column's entries do not all fall into one cache set when Tpad is a power of 2
  float scale;
  bool bf16;
  bool pairs;  // bf16 and the tile products run on bfloat16 pairs (tile_gemm_bf16_pairs)
};

// Whether bf16 inputs run on the pair products here (this target, this CPU).
bool UsesPairs(bool bf16) { return bf16 && kBf16PairTarget && cpu_has_avx512_bf16(); }

AttentionTiles ResolveTiles(AttentionTiles tiles, bool bf16) {
  const size_t def = UsesPairs(bf16) ? 128 : 64;
  return {tiles.q_rows != 0 ? tiles.q_rows : def, tiles.k_cols != 0 ? tiles.k_cols : def};
}

Geometry MakeGeometry(size_t B, size_t T, size_t C, size_t NH, bool bf16, AttentionTiles tiles) {
  tiles = ResolveTiles(tiles, bf16);
  const size_t L = hn::Lanes(DF());
  const auto up = [](size_t x, size_t m) { return (x + m - 1) / m * m; };
  Geometry g{};
  g.B = B, g.T = T, g.C = C, g.NH = NH, g.hs = C / NH, g.bf16 = bf16;
  g.hp = up(g.hs, L);
  g.Br = up(std::max<size_t>(tiles.q_rows, 1), L);
  g.Bc = up(std::max<size_t>(tiles.k_cols, 1), L);
  g.Tpad = up(T, std::lcm(g.Br, g.Bc));
  g.ldt = g.Tpad + 16;
  g.scale = 1.0f / std::sqrt(static_cast<float>(g.hs));
  g.pairs = UsesPairs(bf16);
  return g;
}

// Tokens t0..t0+n-1 (n <= 16) of one head's columns (row t at base + t·stride, hs floats) into
// blk (16,hp): vectors, zero past hs, rounded to bfloat16 when g.bf16.
void LoadTokenBlock(float* HWY_RESTRICT blk, const float* base, size_t stride, size_t t0, size_t n,
                    const Geometry& g) {
  const DF d;
  const size_t L = hn::Lanes(d);
  for (size_t t = 0; t < n; ++t) {
    const float* x = base + (t0 + t) * stride;
    // The head's rows are a few cache lines each, far apart (stride 3C): fetch the next block's
    // while this one is copied.
    if (t0 + t + 16 < g.T)
      for (size_t i = 0; i < g.hs; i += 64 / sizeof(float)) hwy::Prefetch(x + 16 * stride + i);
    for (size_t i = 0; i < g.hp; i += L) {
      hn::Vec<DF> v;
      if (i + L <= g.hs) {
        v = hn::LoadU(d, x + i);
      } else {  // the head's last partial vector: no read past its columns
        HWY_ALIGN float tail[hn::MaxLanes(d)] = {};
        for (size_t j = i; j < g.hs; ++j) tail[j - i] = x[j];
        v = hn::Load(d, tail);
      }
      hn::StoreU(g.bf16 ? RoundToBf16(d, v) : v, d, blk + t * g.hp + i);
    }
  }
}

// One head's columns of part `part` (0 q, 1 k, 2 v) of qkv, or of a (B,T,C) tensor (stride C,
// part 0), copied into rows (Tpad,hp) and/or its transpose (hp,Tpad); either may be nullptr.
// Only live tokens are written: the padding keeps the zeros it was allocated with.
void CopyHead(float* rows, float* cols, const float* src, size_t stride, const Geometry& g,
              size_t b, size_t h, size_t part) {
  const float* base = src + b * g.T * stride + part * g.C + h * g.hs;
  HWY_ALIGN float blk[16 * 64];
  // By blocks of 16 tokens (and at most 64 columns): each transposed store loop fills one cache
  // line of a column.
  for (size_t t0 = 0; t0 < g.T; t0 += 16) {
    const size_t n = std::min<size_t>(16, g.T - t0);
    for (size_t c0 = 0; c0 < g.hp; c0 += 64) {
      Geometry part_g = g;  // columns c0.. of the head, as a head of their own
      part_g.hs = std::min<size_t>(64, g.hs > c0 ? g.hs - c0 : 0);
      part_g.hp = std::min<size_t>(64, g.hp - c0);
      LoadTokenBlock(blk, base + c0, stride, t0, n, part_g);
      if (rows != nullptr)
        for (size_t t = 0; t < n; ++t)
          std::memcpy(rows + (t0 + t) * g.hp + c0, blk + t * part_g.hp, part_g.hp * sizeof(float));
      if (cols != nullptr)
        for (size_t d = 0; d < part_g.hs; ++d)
          for (size_t t = 0; t < n; ++t) cols[(c0 + d) * g.ldt + t0 + t] = blk[t * part_g.hp + d];
    }
  }
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// r (16 vectors of 16 floats, or of 16 32-bit words) transposed in place: lane j of r[i] goes to
// lane i of r[j].
HWY_INLINE void Transpose16x16(__m512 r[16]) {
  __m512 t[16];
  // within 128-bit chunks: pairs of rows interleaved, then 4x4 blocks transposed: r[4i+c]'s chunk k
  // holds column 4k+c of rows 4i..4i+3
  for (size_t i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (size_t i = 0; i < 4; ++i) {
    r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  // the chunks: column 4k+c is chunk k of r[c], r[4+c], r[8+c], r[12+c] (a 4x4 transpose of chunks)
  for (size_t c = 0; c < 4; ++c) {
    const __m512 u0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88);
    const __m512 u1 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xDD);
    const __m512 u2 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88);
    const __m512 u3 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xDD);
    t[c] = _mm512_shuffle_f32x4(u0, u2, 0x88);
    t[8 + c] = _mm512_shuffle_f32x4(u0, u2, 0xDD);
    t[4 + c] = _mm512_shuffle_f32x4(u1, u3, 0x88);
    t[12 + c] = _mm512_shuffle_f32x4(u1, u3, 0xDD);
  }
  for (size_t i = 0; i < 16; ++i) r[i] = t[i];
}
#endif

// The bfloat16 bits of floats that are bfloat16 values (their upper halves), as uint16_t lanes.
HWY_INLINE hn::Vec<hn::Rebind<uint16_t, DF>> Bf16Bits(DF d, hn::Vec<DF> x) {
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint16_t, DF> d16;
  (void)d;
  return hn::DemoteTo(d16, hn::BitCast(di, hn::ShiftRight<16>(hn::BitCast(du, x))));
}

// n floats that are bfloat16 values (rounded) stored as their bfloat16 bits; n a multiple of the
// vector width.
void StoreBf16Bits(const float* x, size_t n, uint16_t* out) {
  const DF d;
  const hn::Rebind<uint16_t, DF> d16;
  for (size_t i = 0; i < n; i += hn::Lanes(d)) hn::StoreU(Bf16Bits(d, hn::LoadU(d, x + i)), d16, out + i);
}

// Rows r, r+1 of x (each n floats that are bfloat16 values) packed as pairs: out (n, 2).
void StoreBf16RowPair(const float* x0, const float* x1, size_t n, uint16_t* out) {
  const DF d;
  const hn::RebindToUnsigned<DF> du;
  const size_t L = hn::Lanes(d);
  const auto hi_mask = hn::Set(du, 0xFFFF0000u);
  for (size_t i = 0; i < n; i += L) {
    const auto lo = hn::ShiftRight<16>(hn::BitCast(du, hn::LoadU(d, x0 + i)));
    const auto hi = hn::And(hn::BitCast(du, hn::LoadU(d, x1 + i)), hi_mask);
    hn::StoreU(hn::Or(hi, lo), du, reinterpret_cast<uint32_t*>(out + 2 * i));
  }
}

// The bfloat16 copies of one head's columns (as CopyHead reads them) that the pair products read;
// any may be nullptr. Only live entries are written: the padding keeps its zeros.
//   rows       (Tpad,hp)        row-major: an A operand whose pairs run along the head dimension
//   pair_cols  (hp/2, ldt, 2)   the transpose packed by pairs of dimensions: a B operand (hp, T·)
//   row_pairs  (Tpad/2, hp, 2)  rows packed by pairs of tokens: a B operand (T·, hp)
//   cols       (hp, ldt)        the transpose: an A operand whose pairs run along tokens
struct Bf16Copies {
  uint16_t* rows = nullptr;
  uint16_t* pair_cols = nullptr;
  uint16_t* row_pairs = nullptr;
  uint16_t* cols = nullptr;
};

void CopyHeadBf16(const Bf16Copies& dst, const float* src, size_t stride, const Geometry& g,
                  size_t b, size_t h, size_t part) {
  const float* base = src + b * g.T * stride + part * g.C + h * g.hs;
  const size_t hp = g.hp, ldt = g.ldt;
  HWY_ALIGN float blk[16 * 64];
  HWY_ALIGN uint16_t blk16[16 * 64];
  HWY_ALIGN static const float zeros[64] = {};
  // By blocks of 16 tokens (t0 even, so pairs of tokens stay in a block) and at most 64 columns
  // (even, so pairs of columns do too).
  for (size_t t0 = 0; t0 < g.T; t0 += 16) {
    const size_t n = std::min<size_t>(16, g.T - t0);
    for (size_t c0 = 0; c0 < hp; c0 += 64) {
      Geometry part_g = g;  // columns c0.. of the head, as a head of their own
      part_g.hs = std::min<size_t>(64, g.hs > c0 ? g.hs - c0 : 0);
      part_g.hp = std::min<size_t>(64, hp - c0);
      part_g.bf16 = true;
      const size_t w = part_g.hp;
      LoadTokenBlock(blk, base + c0, stride, t0, n, part_g);
      StoreBf16Bits(blk, n * w, blk16);
      if (dst.rows != nullptr)
        for (size_t t = 0; t < n; ++t)
          std::memcpy(dst.rows + (t0 + t) * hp + c0, blk16 + t * w, w * sizeof(uint16_t));
      if (dst.row_pairs != nullptr)
        for (size_t t = 0; t < n; t += 2)
          StoreBf16RowPair(blk + t * w, t + 1 < n ? blk + (t + 1) * w : zeros, w,
                           dst.row_pairs + ((t0 + t) / 2) * 2 * hp + 2 * c0);
      size_t d0 = 0;  // the transposes' columns d0.. go entry by entry
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
      // a whole block of 16 tokens: its pairs of columns as 32-bit words, 16 rows by 16 words
      // transposed in registers; each word vector is a row of pair_cols, and its low and high
      // halves are two rows of cols (padding columns past hs are zeros, as the copies' padding)
      if (n == 16 && (dst.pair_cols != nullptr || dst.cols != nullptr))
        for (; d0 + 32 <= w; d0 += 32) {
          __m512 r[16];
          for (size_t t = 0; t < 16; ++t) r[t] = _mm512_castsi512_ps(_mm512_loadu_si512(blk16 + t * w + d0));
          Transpose16x16(r);
          for (size_t i = 0; i < 16; ++i) {
            const __m512i pairs = _mm512_castps_si512(r[i]);
            const size_t d = c0 + d0 + 2 * i;  // the word's first column
            if (dst.pair_cols != nullptr)
              _mm512_storeu_si512(dst.pair_cols + (d / 2) * 2 * ldt + 2 * t0, pairs);
            if (dst.cols != nullptr) {
              _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst.cols + d * ldt + t0),
                                  _mm512_cvtepi32_epi16(pairs));
              _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst.cols + (d + 1) * ldt + t0),
                                  _mm512_cvtepi32_epi16(_mm512_srli_epi32(pairs, 16)));
            }
          }
        }
#endif
      if (dst.pair_cols != nullptr)
        for (size_t d = d0; d < part_g.hs; d += 2) {
          uint16_t* col = dst.pair_cols + ((c0 + d) / 2) * 2 * ldt + 2 * t0;
          for (size_t t = 0; t < n; ++t)
            std::memcpy(col + 2 * t, blk16 + t * w + d, 2 * sizeof(uint16_t));
        }
      if (dst.cols != nullptr)
        for (size_t d = d0; d < part_g.hs; ++d)
          for (size_t t = 0; t < n; ++t) dst.cols[(c0 + d) * ldt + t0 + t] = blk16[t * w + d];
    }
  }
}

// The online softmax of a forward tile, in three passes over its rows (so that the rescale
// factors of the running sums go as vectors of rows, not one exp per row):
//   RowMax: max(m, scale·s) over a row's `live` (>= 1) unmasked scores s (Bc);
//   the factors alpha = exp(m_old - m_new) of Br rows at once (ForwardHead);
//   RowExp: the row's unnormalised probabilities exp(scale·s - m_new) (0 past `live`) into s, or
//   as bfloat16 bits into p16 (the pair products), and their sum.
float RowMax(const float* s, size_t live, const Geometry& g, float m) {
  const DF d;
  const size_t L = hn::Lanes(d);
  const auto vscale = hn::Set(d, g.scale);
  auto vmax = hn::Set(d, -HUGE_VALF);
  size_t c = 0;
  for (; c + L <= live; c += L) vmax = hn::Max(vmax, hn::Mul(vscale, hn::LoadU(d, s + c)));
  if (c < live) {
    const auto x = hn::Mul(vscale, hn::LoadU(d, s + c));
    vmax = hn::Max(vmax, hn::IfThenElse(hn::FirstN(d, live - c), x, hn::Set(d, -HUGE_VALF)));
  }
  return std::max(m, hn::GetLane(hn::MaxOfLanes(d, vmax)));
}

float RowExp(float* s, size_t live, const Geometry& g, float mx, uint16_t* p16) {
  const DF d;
  const hn::Rebind<uint16_t, DF> d16;
  const size_t L = hn::Lanes(d);
  const auto vscale = hn::Set(d, g.scale);
  const auto vmx = hn::Set(d, mx);
  auto vsum = hn::Zero(d);
  for (size_t c = 0; c < g.Bc; c += L) {
    if (c >= live) {
      if (p16 != nullptr) {
        hn::StoreU(hn::Zero(d16), d16, p16 + c);
      } else {
        hn::StoreU(hn::Zero(d), d, s + c);
      }
      continue;
    }
    auto e = ExpNonPositive(d, hn::Sub(hn::Mul(vscale, hn::LoadU(d, s + c)), vmx));
    if (c + L > live) e = hn::IfThenElseZero(hn::FirstN(d, live - c), e);
    vsum = hn::Add(vsum, e);
    if (p16 != nullptr) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
      StoreBf16Cvt(e, p16 + c);
#else
      hn::StoreU(Bf16Bits(d, RoundToBf16(d, e)), d16, p16 + c);
#endif
    } else {
      hn::StoreU(g.bf16 ? RoundToBf16(d, e) : e, d, s + c);
    }
  }
  return hn::GetLane(hn::SumOfLanes(d, vsum));
}

// bfloat16 buffers of the forward on pairs, views into one thread's workspace.
struct ForwardPairs {
  uint16_t *q = nullptr, *kt = nullptr, *v = nullptr;  // q rows, k pair_cols, v row_pairs
  uint16_t* p = nullptr;                               // (Br,Bc) the tile's probabilities
  static size_t entries(const Geometry& g) { return 2 * g.Tpad * g.hp + g.hp * g.ldt + g.Br * g.Bc; }
  ForwardPairs(uint16_t* ws, const Geometry& g) {
    if (ws == nullptr) return;
    q = ws, ws += g.Tpad * g.hp;
    kt = ws, ws += g.hp * g.ldt;
    v = ws, ws += g.Tpad * g.hp;
    p = ws;
  }
};

// The forward's float copies q, kᵀ, v: none on the pair products, which read ForwardPairs'
// bfloat16 ones (no workspace to zero and keep in cache for them).
size_t ForwardCopies(const Geometry& g) { return g.pairs ? 0 : 2 * g.Tpad * g.hp + g.hp * g.ldt; }

// The forward of one (batch row b, head h). ws: q (Tpad,hp), kᵀ (hp,Tpad), v (Tpad,hp) (not on
// the pair products), then the tile's scores (Br,Bc), its output accumulator (Br,hp) and m, l, m_new, alpha (Br); ws16
// (g.pairs only): the bfloat16 operands of ForwardPairs.
void ForwardHead(float* out, float* lse, const float* qkv, const Geometry& g, size_t b, size_t h,
                 float* ws, uint16_t* ws16) {
  const size_t Tpad = g.Tpad, hp = g.hp, Br = g.Br, Bc = g.Bc, T = g.T;
  float* q = ws;
  float* kt = q + Tpad * hp;
  float* v = kt + hp * g.ldt;
  float* s = ws + ForwardCopies(g);
  float* o = s + Br * Bc;
  float* m = o + Br * hp;
  float* l = m + Br;
  float* m_new = l + Br;
  float* alpha = m_new + Br;
  const DF df;
  const size_t L = hn::Lanes(df);
  const ForwardPairs w16(ws16, g);
  if (g.pairs) {
    CopyHeadBf16({.rows = w16.q}, qkv, 3 * g.C, g, b, h, 0);
    CopyHeadBf16({.pair_cols = w16.kt}, qkv, 3 * g.C, g, b, h, 1);
    CopyHeadBf16({.row_pairs = w16.v}, qkv, 3 * g.C, g, b, h, 2);
  } else {
    CopyHead(q, nullptr, qkv, 3 * g.C, g, b, h, 0);
    CopyHead(nullptr, kt, qkv, 3 * g.C, g, b, h, 1);
    CopyHead(v, nullptr, qkv, 3 * g.C, g, b, h, 2);
  }
  float* lse_z = lse + (b * g.NH + h) * T;
  for (size_t i0 = 0; i0 < T; i0 += Br) {
    const size_t rows = std::min(Br, T - i0);  // live query rows of the block
    std::fill(o, o + Br * hp, 0.0f);
    std::fill(m, m + Br, -HUGE_VALF);
    std::fill(l, l + Br, 0.0f);
    // key blocks up to the diagonal: those with a key j0 <= the block's last live row
    for (size_t j0 = 0; j0 < i0 + rows; j0 += Bc) {
      const bool diag = i0 == j0 && Br == Bc;
      // S = q_i · k_jᵀ   (Br,hp) x (hp,Bc)
      const Diag s_part = diag ? Diag::kColsUpToRow : Diag::kFull;
      if (g.pairs) {
        ProductPairs(s, Bc, w16.q + i0 * hp, hp, w16.kt + 2 * j0, 2 * g.ldt, Br, Bc, hp, false,
                     s_part);
      } else {
        Product(s, Bc, q + i0 * hp, hp, kt + j0, g.ldt, Br, Bc, hp, false, s_part);
      }
      // the online softmax over the tile's rows (RowMax, RowExp); rows past T or with every key
      // masked (live 0) give zero probabilities and keep m, l and o.
      const auto live_keys = [&](size_t r) {
        const size_t t = i0 + r;
        return r < rows && t + 1 > j0 ? std::min(t + 1 - j0, Bc) : size_t{0};
      };
      for (size_t r = 0; r < Br; ++r) {
        const size_t live = live_keys(r);
        m_new[r] = live == 0 ? m[r] : RowMax(s + r * Bc, live, g, m[r]);
      }
      // alpha = exp(m - m_new): exp(-inf) = 0 on a row's first tile (NaN, from -inf - -inf, on
      // rows not yet live: unused)
      for (size_t r = 0; r < Br; r += L)
        hn::StoreU(ExpNonPositive(df, hn::Sub(hn::LoadU(df, m + r), hn::LoadU(df, m_new + r))), df,
                   alpha + r);
      for (size_t r = 0; r < Br; ++r) {
        const size_t live = live_keys(r);
        uint16_t* p16 = g.pairs ? w16.p + r * Bc : nullptr;
        if (live == 0) {
          if (p16 != nullptr) {
            std::fill(p16, p16 + Bc, uint16_t{0});
          } else {
            std::fill(s + r * Bc, s + (r + 1) * Bc, 0.0f);
          }
          continue;
        }
        const float sum = RowExp(s + r * Bc, live, g, m_new[r], p16);
        l[r] = l[r] * alpha[r] + sum;
        m[r] = m_new[r];
        if (alpha[r] != 1.0f) {
          const auto va = hn::Set(df, alpha[r]);
          float* o_r = o + r * hp;
          for (size_t i = 0; i < hp; i += L)
            hn::StoreU(hn::Mul(va, hn::LoadU(df, o_r + i)), df, o_r + i);
        }
      }
      // o += P · v_j   (Br,Bc) x (Bc,hp)
      const Diag pv_part = diag ? Diag::kKUpToRow : Diag::kFull;
      if (g.pairs) {
        ProductPairs(o, hp, w16.p, Bc, w16.v + j0 * hp, 2 * hp, Br, hp, Bc, true, pv_part);
      } else {
        Product(o, hp, s, Bc, v + j0 * hp, hp, Br, hp, Bc, true, pv_part);
      }
    }
    for (size_t r = 0; r < rows; ++r) {
      const size_t t = i0 + r;
      float* y = out + (b * T + t) * g.C + h * g.hs;
      const auto vl = hn::Set(df, l[r]);
      size_t d = 0;
      for (; d + L <= g.hs; d += L) hn::StoreU(hn::Div(hn::LoadU(df, o + r * hp + d), vl), df, y + d);
      for (; d < g.hs; ++d) y[d] = o[r * hp + d] / l[r];
      lse_z[t] = m[r] + std::log(l[r]);
    }
  }
}

// The forward's workspace: ForwardCopies, then the tile's buffers.
size_t ForwardWorkspace(const Geometry& g) {
  return ForwardCopies(g) + g.Br * g.Bc + g.Br * g.hp + 4 * g.Br;
}

void AttentionTiledForward(float* out, float* lse, const float* qkv, size_t B, size_t T, size_t C,
                           size_t NH, bool bf16, AttentionTiles tiles) {
  const Geometry g = MakeGeometry(B, T, C, NH, bf16, tiles);
  const size_t Z = B * NH, n = ForwardWorkspace(g);
#pragma omp parallel if (Z > 1)
  {
    float* ws = ThreadWorkspace<float>(n);
    uint16_t* ws16 = g.pairs ? ThreadWorkspace<uint16_t>(ForwardPairs::entries(g)) : nullptr;
#pragma omp for schedule(static)
    for (size_t z = 0; z < Z; ++z) ForwardHead(out, lse, qkv, g, z / NH, z % NH, ws, ws16);
  }
}

// Buffers of one (batch row, head) in the backward, views into one thread's workspace.
// The float copies of q, k, v and dout are nullptr on the pair products, which read BackwardPairs'
// bfloat16 ones: no workspace to zero and keep in cache for them.
struct BackwardBuffers {
  float *q = nullptr, *qt = nullptr, *k = nullptr, *kt = nullptr;  // (Tpad,hp) or (hp,Tpad)
  float *v = nullptr, *dout = nullptr, *doutt = nullptr, *dqt;
  float *lse, *D;                                   // (Tpad)
  float *p, *ds;                                    // (Bc,Br): Pᵀ and dPᵀ, then dSᵀ
  float *dk, *dv;                                   // (Bc,hp)
  static size_t floats(const Geometry& g) {
    return (g.pairs ? 1 : 8) * g.ldt * g.hp + 2 * g.Tpad + 2 * g.Bc * g.Br + 2 * g.Bc * g.hp;
  }
  BackwardBuffers(float* ws, const Geometry& g) {
    if (!g.pairs) {
      float** seq[] = {&q, &qt, &k, &kt, &v, &dout, &doutt};
      for (float** p_ : seq) *p_ = ws, ws += g.ldt * g.hp;
    }
    dqt = ws, ws += g.ldt * g.hp;
    lse = ws, ws += g.Tpad;
    D = ws, ws += g.Tpad;
    p = ws, ws += g.Bc * g.Br;
    ds = ws, ws += g.Bc * g.Br;
    dk = ws, ws += g.Bc * g.hp;
    dv = ws;
  }
};

// bfloat16 buffers of the backward on pairs, views into one thread's workspace.
struct BackwardPairs {
  uint16_t *q = nullptr, *qt = nullptr, *qp = nullptr;  // q rows, pair_cols, row_pairs
  uint16_t *k = nullptr, *kt = nullptr;                 // k rows, cols
  uint16_t* v = nullptr;                                // v rows
  uint16_t *doutt = nullptr, *doutp = nullptr;          // dout pair_cols, row_pairs
  // (Bc,Br): the tile's Pᵀ and dSᵀ, and dSᵀ packed by pairs of keys (Bc/2,Br,2)
  uint16_t *p = nullptr, *ds = nullptr, *dsp = nullptr;
  static size_t entries(const Geometry& g) { return 5 * g.Tpad * g.hp + 3 * g.hp * g.ldt + 3 * g.Bc * g.Br; }
  BackwardPairs(uint16_t* ws, const Geometry& g) {
    if (ws == nullptr) return;
    uint16_t** rows[] = {&q, &qp, &k, &v, &doutp};
    for (uint16_t** p_ : rows) *p_ = ws, ws += g.Tpad * g.hp;
    uint16_t** cols[] = {&qt, &kt, &doutt};
    for (uint16_t** p_ : cols) *p_ = ws, ws += g.hp * g.ldt;
    p = ws, ws += g.Bc * g.Br;
    ds = ws, ws += g.Bc * g.Br;
    dsp = ws;
  }
};

// One tile's Pᵀ and dSᵀ (Bc,Br) for keys j0.. and queries i0..: on entry p holds Sᵀ = k_j·q_iᵀ and
// ds holds dPᵀ = v_j·dout_iᵀ; on return p = exp(scale·Sᵀ - lse) and ds = scale·Pᵀ∘(dPᵀ - D), both
// exact zeros where the key is past the query (or either is past T).
void TileProbabilities(const BackwardBuffers& w, const Geometry& g, size_t j0, size_t i0) {
  const DF d;
  const hn::RebindToSigned<DF> di;
  const size_t L = hn::Lanes(d);
  const auto vscale = hn::Set(d, g.scale);
  const auto lane = hn::Iota(di, 0);
  // every entry live (key <= t < T): the tile's last key before its first query, its last query
  // before T
  const bool all_live = j0 + g.Bc <= i0 + 1 && i0 + g.Br <= g.T;
  for (size_t c = 0; c < g.Bc; ++c) {
    const size_t key = j0 + c;
    float* p = w.p + c * g.Br;
    float* ds = w.ds + c * g.Br;
    if (key >= g.T || key >= i0 + g.Br) {
      std::fill(p, p + g.Br, 0.0f);
      std::fill(ds, ds + g.Br, 0.0f);
      continue;
    }
    if (all_live) {
      for (size_t r = 0; r < g.Br; r += L) {
        const size_t t0 = i0 + r;
        auto e = ExpNonPositive(d, hn::Sub(hn::Mul(vscale, hn::LoadU(d, p + r)), hn::LoadU(d, w.lse + t0)));
        auto grad = hn::Mul(hn::Mul(vscale, e), hn::Sub(hn::LoadU(d, ds + r), hn::LoadU(d, w.D + t0)));
        if (g.bf16) e = RoundToBf16(d, e), grad = RoundToBf16(d, grad);
        hn::StoreU(e, d, p + r);
        hn::StoreU(grad, d, ds + r);
      }
      continue;
    }
    for (size_t r = 0; r < g.Br; r += L) {
      const size_t t0 = i0 + r;  // query row of lane 0
      // live: key <= t < T, i.e. lane >= key - t0 and lane < T - t0
      const auto t = hn::Add(lane, hn::Set(di, static_cast<int32_t>(t0)));
      const auto live = hn::RebindMask(
          d, hn::And(hn::Gt(t, hn::Set(di, static_cast<int32_t>(key) - 1)),
                     hn::Lt(t, hn::Set(di, static_cast<int32_t>(g.T)))));
      auto e = ExpNonPositive(d, hn::Sub(hn::Mul(vscale, hn::LoadU(d, p + r)), hn::LoadU(d, w.lse + t0)));
      e = hn::IfThenElseZero(live, e);
      auto grad = hn::Mul(hn::Mul(vscale, e), hn::Sub(hn::LoadU(d, ds + r), hn::LoadU(d, w.D + t0)));
      grad = hn::IfThenElseZero(live, grad);
      if (g.bf16) e = RoundToBf16(d, e), grad = RoundToBf16(d, grad);
      hn::StoreU(e, d, p + r);
      hn::StoreU(grad, d, ds + r);
    }
  }
}

// TileProbabilities for the pair products: the same values (rounded to bfloat16), written only as
// bfloat16 bits: Pᵀ and dSᵀ (Bc,Br) rows (w16.p, w16.ds) and dSᵀ packed by pairs of keys
// (Bc/2,Br,2) (w16.dsp). Reads Sᵀ and dPᵀ from w.p and w.ds.
void TileProbabilitiesPairs(const BackwardBuffers& w, const BackwardPairs& w16, const Geometry& g,
                            size_t j0, size_t i0) {
  const DF d;
  const hn::RebindToSigned<DF> di;
  const hn::RebindToUnsigned<DF> du;
  const hn::Rebind<uint16_t, DF> d16;
  const size_t L = hn::Lanes(d);
  const auto vscale = hn::Set(d, g.scale);
  const auto lane = hn::Iota(di, 0);
  const auto hi_mask = hn::Set(du, 0xFFFF0000u);
  const auto bits16 = [&](hn::Vec<DF> x) { return Bf16Bits(d, x); };
  (void)bits16, (void)d16;
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  // 16-bit lane 2i from lane i, lane 2i+1 from lane 16 + i
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                              23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
#endif
  // every entry live (key <= t < T): the tile's last key before its first query, its last query
  // before T
  const bool all_live = j0 + g.Bc <= i0 + 1 && i0 + g.Br <= g.T;
  for (size_t c = 0; c < g.Bc; c += 2) {
    for (size_t r = 0; r < g.Br; r += L) {
      const size_t t0 = i0 + r;  // query row of lane 0
      const auto t = hn::Add(lane, hn::Set(di, static_cast<int32_t>(t0)));
      const auto lse = hn::LoadU(d, w.lse + t0);
      const auto D = hn::LoadU(d, w.D + t0);
      hn::Vec<DF> e[2], grad[2];
      for (size_t k = 0; k < 2; ++k) {
        const size_t key = j0 + c + k;
        const float* p = w.p + (c + k) * g.Br + r;
        const float* ds = w.ds + (c + k) * g.Br + r;
        e[k] = ExpNonPositive(d, hn::Sub(hn::Mul(vscale, hn::LoadU(d, p)), lse));
        grad[k] = hn::Mul(hn::Mul(vscale, e[k]), hn::Sub(hn::LoadU(d, ds), D));
        if (!all_live) {  // live: key <= t < T; masked entries are exact +0
          const auto live = hn::RebindMask(
              d, hn::And(hn::Gt(t, hn::Set(di, static_cast<int32_t>(key) - 1)),
                         hn::Lt(t, hn::Set(di, static_cast<int32_t>(g.T)))));
          e[k] = hn::IfThenElseZero(live, e[k]);
          grad[k] = hn::IfThenElseZero(live, grad[k]);
        }
#if !(HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL)
        grad[k] = RoundToBf16(d, grad[k]);
        e[k] = RoundToBf16(d, e[k]);
        hn::StoreU(bits16(e[k]), d16, w16.p + (c + k) * g.Br + r);
        hn::StoreU(bits16(grad[k]), d16, w16.ds + (c + k) * g.Br + r);
#endif
      }
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
      // keys c and c+1 of 16 queries at once: rows of Pᵀ and dSᵀ from the halves, and dSᵀ's
      // pairs of keys by interleaving the two halves' 16-bit lanes
      const __m512i e16 = Bf16Cvt2(e[0], e[1]);
      const __m512i g16 = Bf16Cvt2(grad[0], grad[1]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(w16.p + c * g.Br + r), _mm512_castsi512_si256(e16));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(w16.p + (c + 1) * g.Br + r),
                          _mm512_extracti64x4_epi64(e16, 1));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(w16.ds + c * g.Br + r), _mm512_castsi512_si256(g16));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(w16.ds + (c + 1) * g.Br + r),
                          _mm512_extracti64x4_epi64(g16, 1));
      _mm512_storeu_si512(w16.dsp + c * g.Br + 2 * r, _mm512_permutexvar_epi16(interleave, g16));
      (void)hi_mask;
#else
      const auto pair = hn::Or(hn::And(hn::BitCast(du, grad[1]), hi_mask),
                               hn::ShiftRight<16>(hn::BitCast(du, grad[0])));
      hn::StoreU(pair, du, reinterpret_cast<uint32_t*>(w16.dsp + c * g.Br + 2 * r));
#endif
    }
  }
}


void BackwardHead(float* dqkv, const float* dout, const float* qkv, const float* out,
                  const float* lse, const Geometry& g, size_t b, size_t h, float* ws,
                  uint16_t* ws16) {
  const size_t hp = g.hp, Br = g.Br, Bc = g.Bc, T = g.T, C3 = 3 * g.C;
  const BackwardBuffers w(ws, g);
  const BackwardPairs w16(ws16, g);
  if (g.pairs) {
    CopyHeadBf16({.rows = w16.q, .pair_cols = w16.qt, .row_pairs = w16.qp}, qkv, C3, g, b, h, 0);
    CopyHeadBf16({.rows = w16.k, .cols = w16.kt}, qkv, C3, g, b, h, 1);
    CopyHeadBf16({.rows = w16.v}, qkv, C3, g, b, h, 2);
    CopyHeadBf16({.pair_cols = w16.doutt, .row_pairs = w16.doutp}, dout, g.C, g, b, h, 0);
  } else {
    CopyHead(w.q, w.qt, qkv, C3, g, b, h, 0);
    CopyHead(w.k, w.kt, qkv, C3, g, b, h, 1);
    CopyHead(w.v, nullptr, qkv, C3, g, b, h, 2);
    CopyHead(w.dout, w.doutt, dout, g.C, g, b, h, 0);
  }
  std::fill(w.dqt, w.dqt + hp * g.ldt, 0.0f);
  const float* lse_z = lse + (b * g.NH + h) * T;
  for (size_t t = 0; t < T; ++t) {
    // D_t = Σ_d dout_td·out_td (float32 values, in increasing d)
    const float* y = out + (b * T + t) * g.C + h * g.hs;
    const float* dy = dout + (b * T + t) * g.C + h * g.hs;
    if (t + 8 < T)  // out's rows are far apart (stride C) and not yet in cache
      for (size_t d = 0; d < g.hs; d += 64 / sizeof(float)) hwy::Prefetch(y + 8 * g.C + d);
    float D = 0.0f;
    for (size_t d = 0; d < g.hs; ++d) D += dy[d] * y[d];
    w.D[t] = D;
    w.lse[t] = lse_z[t];
  }
  for (size_t j0 = 0; j0 < T; j0 += Bc) {
    std::fill(w.dk, w.dk + Bc * hp, 0.0f);
    std::fill(w.dv, w.dv + Bc * hp, 0.0f);
    // query blocks with a row t >= j0: from the one holding row j0 on
    for (size_t i0 = j0 / Br * Br; i0 < T; i0 += Br) {
      const bool diag = i0 == j0 && Br == Bc;
      const Diag s_part = diag ? Diag::kColsFromRow : Diag::kFull;
      const Diag p_part = diag ? Diag::kKFromRow : Diag::kFull;
      const Diag ds_part = diag ? Diag::kKUpToCol : Diag::kFull;
      if (g.pairs) {
        const size_t ldp = 2 * g.ldt;  // pair_cols' rows, in bfloat16 entries
        ProductPairs(w.p, Br, w16.k + j0 * hp, hp, w16.qt + 2 * i0, ldp, Bc, Br, hp, false, s_part);
        ProductPairs(w.ds, Br, w16.v + j0 * hp, hp, w16.doutt + 2 * i0, ldp, Bc, Br, hp, false,
                     s_part);
        TileProbabilitiesPairs(w, w16, g, j0, i0);
        ProductPairs(w.dv, hp, w16.p, Br, w16.doutp + i0 * hp, 2 * hp, Bc, hp, Br, true, p_part);
        ProductPairs(w.dk, hp, w16.ds, Br, w16.qp + i0 * hp, 2 * hp, Bc, hp, Br, true, p_part);
        ProductPairs(w.dqt + i0, g.ldt, w16.kt + j0, g.ldt, w16.dsp, 2 * Br, hp, Br, Bc, true,
                     ds_part);
        continue;
      }
      // Sᵀ = k_j · q_iᵀ  and  dPᵀ = v_j · dout_iᵀ   (Bc,hp) x (hp,Br)
      Product(w.p, Br, w.k + j0 * hp, hp, w.qt + i0, g.ldt, Bc, Br, hp, false, s_part);
      Product(w.ds, Br, w.v + j0 * hp, hp, w.doutt + i0, g.ldt, Bc, Br, hp, false, s_part);
      TileProbabilities(w, g, j0, i0);
      // dv_j += Pᵀ · dout_i;  dk_j += dSᵀ · q_i   (Bc,Br) x (Br,hp)
      Product(w.dv, hp, w.p, Br, w.dout + i0 * hp, hp, Bc, hp, Br, true, p_part);
      Product(w.dk, hp, w.ds, Br, w.q + i0 * hp, hp, Bc, hp, Br, true, p_part);
      // dq_iᵀ += k_jᵀ · dSᵀ   (hp,Bc) x (Bc,Br)
      Product(w.dqt + i0, g.ldt, w.kt + j0, g.ldt, w.ds, Br, hp, Br, Bc, true, ds_part);
    }
    for (size_t c = 0; c < Bc && j0 + c < T; ++c) {
      float* row = dqkv + (b * T + j0 + c) * C3 + h * g.hs;
      for (size_t d = 0; d < g.hs; ++d) {
        row[g.C + d] = w.dk[c * hp + d];
        row[2 * g.C + d] = w.dv[c * hp + d];
      }
    }
  }
  // dq from its transpose, by blocks of 16 tokens (each read loop takes one cache line of a row)
  for (size_t t0 = 0; t0 < T; t0 += 16) {
    const size_t t1 = std::min(t0 + 16, T);
    size_t d0 = 0;  // dimensions d0.. go entry by entry
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
    // whole blocks of 16 tokens by 16 dimensions transposed in registers: one vector store per
    // row piece instead of 16 scalar ones
    if (t1 - t0 == 16)
      for (; d0 + 16 <= g.hs; d0 += 16) {
        __m512 r[16];
        for (size_t i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(w.dqt + (d0 + i) * g.ldt + t0);
        Transpose16x16(r);
        for (size_t i = 0; i < 16; ++i) {
          const size_t at = (b * T + t0 + i) * C3 + h * g.hs + d0;
          _mm512_storeu_ps(dqkv + at, r[i]);
        }
      }
#endif
    for (size_t d = d0; d < g.hs; ++d)
      for (size_t t = t0; t < t1; ++t) dqkv[(b * T + t) * C3 + h * g.hs + d] = w.dqt[d * g.ldt + t];
  }
}

void AttentionTiledBackward(float* dqkv, const float* dout, const float* qkv, const float* out,
                            const float* lse, size_t B, size_t T, size_t C, size_t NH, bool bf16,
                            AttentionTiles tiles) {
  const Geometry g = MakeGeometry(B, T, C, NH, bf16, tiles);
  const size_t Z = B * NH, n = BackwardBuffers::floats(g);
#pragma omp parallel if (Z > 1)
  {
    float* ws = ThreadWorkspace<float>(n);
    uint16_t* ws16 = g.pairs ? ThreadWorkspace<uint16_t>(BackwardPairs::entries(g)) : nullptr;
#pragma omp for schedule(static)
    for (size_t z = 0; z < Z; ++z)
      BackwardHead(dqkv, dout, qkv, out, lse, g, z / NH, z % NH, ws, ws16);
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace wte
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wte {

HWY_EXPORT(AttentionTiledForward);
HWY_EXPORT(ResolveTiles);
HWY_EXPORT(AttentionTiledBackward);

AttentionTiles attention_tiles(AttentionTiles tiles, bool bf16_inputs) {
  return HWY_DYNAMIC_DISPATCH(ResolveTiles)(tiles, bf16_inputs);
}

void attention_tiled_forward(float* out, float* lse, const float* qkv, size_t B, size_t T,
                             size_t C, size_t NH, bool bf16_inputs, AttentionTiles tiles) {
  if (B == 0 || T == 0) return;
  HWY_DYNAMIC_DISPATCH(AttentionTiledForward)(out, lse, qkv, B, T, C, NH, bf16_inputs, tiles);
}

void attention_tiled_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                              const float* lse, size_t B, size_t T, size_t C, size_t NH,
                              bool bf16_inputs, AttentionTiles tiles) {
  if (B == 0 || T == 0) return;
  HWY_DYNAMIC_DISPATCH(AttentionTiledBackward)(dqkv, dout, qkv, out, lse, B, T, C, NH,
                                               bf16_inputs, tiles);
}

}  // namespace wte
#endif  // HWY_ONCE
