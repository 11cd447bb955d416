// float32 -> bfloat16 conversion for the bf16 GEMMs (model.matmul_precision = bf16), Highway with
// dynamic dispatch. Contract: include/wte/kernels.h (convert_f32_to_bf16); scalar reference:
// ref::f32_to_bf16 in src/reference/kernels.h.
//
// bfloat16 is the top 16 bits of a float32 (sign, 8 exponent bits, 7 mantissa bits). The low 16
// bits are rounded away to nearest, ties to even, in integer arithmetic on the float's bits:
//   bits + 0x7FFF + (bit 16 of bits), then the top 16 bits
// which carries into the exponent when the mantissa overflows (the largest finite floats round to
// ±Inf, as IEEE rounding does), keeps ±Inf, ±0 and subnormals (bf16 has float32's exponent range,
// so a subnormal float rounds to a subnormal or zero bf16, never flushed). NaN would carry into the
// sign or turn into Inf, so a NaN keeps its sign and top payload bits and gets the quiet bit
// (0x0040) set: always a NaN. Integer operations (and, in pairs of vectors, an unordered compare
// to find the NaNs, which rounds nothing), so every target, SCALAR included, gives the reference's
// bits. (The AVX512_BF16 instruction VCVTNEPS2BF16 would flush subnormals to zero.)

#include <cstddef>
#include <cstdint>

#include "wte/kernels.h"

// foreach_target.h must come before every other Highway header.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/bf16.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "simd/bf16-inl.h"   // ConvertRowToBf16
#include "simd/loops-inl.h"  // kParallelMinFloats
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace wte {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void ConvertF32ToBf16(uint16_t* HWY_RESTRICT dst, const float* HWY_RESTRICT src, size_t n) {
  // Blocks of ParallelForEachVector's size shared among the threads, each converted in pairs of
  // vectors (ConvertRowToBf16): elementwise, so any split gives the same bits.
  constexpr size_t kBlock = 4096;
  const size_t num_blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n >= kParallelMinFloats)
  for (size_t blk = 0; blk < num_blocks; ++blk) {
    const size_t begin = blk * kBlock, len = n - begin < kBlock ? n - begin : kBlock;
    ConvertRowToBf16(dst + begin, src + begin, len);
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace wte
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wte {

HWY_EXPORT(ConvertF32ToBf16);

void convert_f32_to_bf16(uint16_t* dst, const float* src, size_t n) {
  HWY_DYNAMIC_DISPATCH(ConvertF32ToBf16)(dst, src, n);
}

}  // namespace wte
#endif  // HWY_ONCE
