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
#include "simd/bf16-inl.h"   // StoreBf16, StoreBf16x2
#include "simd/loops-inl.h"  // ParallelForEachVectorPair
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace wte {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void ConvertF32ToBf16(uint16_t* HWY_RESTRICT dst, const float* HWY_RESTRICT src, size_t n) {
  // Pairs of vectors, whose copies are rounded and stored together (StoreBf16x2); elementwise, so
  // any split among the threads gives the same bits.
  ParallelForEachVectorPair(
      n,
      [&](auto d, size_t i) {
        StoreBf16x2(d, hn::LoadU(d, src + i), hn::LoadU(d, src + i + hn::Lanes(d)), dst + i);
      },
      [&](auto d, size_t i) { StoreBf16(d, hn::LoadU(d, src + i), dst + i); });
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
